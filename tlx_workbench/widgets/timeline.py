"""TimelineWidget and timeline_svg: a Trace as lanes (CTA -> task/replica) of coloured spans."""
from __future__ import annotations

import html
import linecache
import re
from typing import Callable

import numpy as np
import traitlets

from .. import views
from ..trace import SPAN_KINDS, Span, Trace
from ._base import KIND_COLORS, View, esm_source


def _lane_label(lane) -> str:
    return f"{lane[1]}[{lane[2]}]"


def _kinds_of(trace: Trace) -> list[str]:
    extra = sorted({s.kind for s in trace.spans} - set(SPAN_KINDS))
    return list(SPAN_KINDS) + extra


def lane_rows(trace: Trace) -> list[dict]:
    """One dict per lane with its label and busy / wait / MMA shares (from Trace.summary)."""
    summ = {(s.cta, s.task, s.replica): s for s in trace.summary()}
    rows = []
    for lane in trace.lanes():
        s = summ.get(lane)
        rows.append({"cta": lane[0], "task": lane[1], "replica": lane[2], "label": _lane_label(lane),
                     "busy_share": s.busy_share if s else 0.0, "wait_share": s.wait_share if s else 0.0,
                     "mma_share": s.mma_share if s else 0.0,
                     "waits": sorted(s.waiting_by_barrier.items(), key=lambda kv: -kv[1]) if s else []})
    return rows


def stuck_waits(trace: Trace, deadlock=None) -> list[dict]:
    """Where each task stopped, for a run that ended in a deadlock: one entry per blocked lane
    with the barrier, slot and phase it waits on, the line, since when, and what is missing.

    Read off the trace (a ``wait_begin`` that no ``wait_end`` followed; what the barrier still
    lacks after its last event), or, when given, from the simulator's ``DeadlockReport``
    (``deadlock.blocked``), which also knows named barriers and joins. Empty for a run that ended.
    """
    out: dict = {}
    if deadlock is not None and getattr(deadlock, "blocked", None):
        for b in deadlock.blocked:
            name, slot = (b.barrier or b.kind), None
            m = re.fullmatch(r"(.*)\[(\d+)\]", name or "")
            if m:
                name, slot = m.group(1), int(m.group(2))
            missing = []
            if getattr(b, "missing_arrivals", None):
                missing.append(f"{b.missing_arrivals} arrival(s)")
            over = ""
            if getattr(b, "missing_bytes", None):
                n = b.missing_bytes
                if n > 0:
                    missing.append(f"{n} B")
                else:
                    over = f"{-n} B more landed than announced"     # a sentence, not a negative count
            # the line to change, when the report found it: every marker names it
            fix = deadlock.line if getattr(deadlock, "cause", None) is not None else None
            out[tuple(b.lane)] = {"lane": tuple(b.lane), "kind": b.kind, "barrier": name, "slot": slot,
                                  "phase": b.phase, "line": b.line, "since": float(b.since or 0.0),
                                  "missing": ", ".join(missing), "over": over, "fix": fix}
        return list(out.values())
    open_waits: dict = {}
    last: dict = {}
    for e in sorted(trace.barrier_events, key=lambda e: e.time):
        last[(e.cta, e.barrier, e.slot)] = e
        if e.task is None:
            continue
        key = (e.lane, e.cta, e.barrier, e.slot)
        if e.kind == "wait_begin":
            open_waits[key] = e
        elif e.kind == "wait_end":
            open_waits.pop(key, None)
    for (lane, cta, barrier, slot), e in open_waits.items():
        tail = last.get((cta, barrier, slot))
        missing = []
        if tail is not None and tail.pending_arrivals:
            missing.append(f"{tail.pending_arrivals} arrival(s)")
        if tail is not None and tail.pending_bytes:
            missing.append(f"{tail.pending_bytes} B")
        out[lane] = {"lane": lane, "kind": "mbarrier", "barrier": barrier, "slot": slot, "phase": e.phase,
                     "line": e.line, "since": float(e.time), "missing": ", ".join(missing)}
    return list(out.values())


def stuck_end(trace: Trace, stuck: list) -> float:
    """Where a view's time axis ends: the trace's end, with room after it for the stuck-here bars
    when the run deadlocked (a task that stopped last would otherwise get a bar of no width)."""
    end = trace.end
    if not stuck:
        return end
    end = max([end] + [s["since"] for s in stuck])
    return end + 0.08 * ((end - trace.start) or 1.0)


def stuck_label(s: dict) -> str:
    """'stuck: pong[0] parity 0, missing 1 arrival(s), line 13'."""
    where = s["barrier"] + (f"[{s['slot']}]" if s["slot"] is not None else "") if s["barrier"] else s["kind"]
    fix = s.get("fix")
    return ("stuck: " + where + (f" parity {s['phase']}" if s["phase"] is not None else "")
            + (f", missing {s['missing']}" if s["missing"] else "") + (f", {s['over']}" if s.get("over") else "")
            + (f", line {s['line']}" if s["line"] else "")
            + (f" (the line to change: {fix})" if fix and fix != s["line"] else ""))


def encode_spans(trace: Trace) -> dict:
    """The trace as compact columns for the canvas views (see static/timeline.js).

    Returns the order of spans (sorted by lane, start), Float64 bytes of starts+ends,
    Int32 bytes of [lane, kind, source, name, barrier, slot, phase] columns, the string
    and source tables, and Float64 flow rows [src lane, time, dst lane, dst time].
    """
    lanes = trace.lanes()
    lane_ix = {l: i for i, l in enumerate(lanes)}
    kinds = _kinds_of(trace)
    kind_ix = {k: i for i, k in enumerate(kinds)}
    order = sorted(range(len(trace.spans)), key=lambda i: (lane_ix[trace.spans[i].lane], trace.spans[i].start))
    spans = [trace.spans[i] for i in order]
    strings: dict[str, int] = {}
    sources: dict[tuple, int] = {}

    def sid(s):
        if s is None or s == "":
            return -1
        return strings.setdefault(str(s), len(strings))

    def src(sp: Span):
        if sp.line is None:
            return -1
        return sources.setdefault((sp.file or "", int(sp.line)), len(sources))

    n = len(spans)
    times = np.empty(2 * n, dtype=np.float64)
    ints = np.full((7, n), -1, dtype=np.int32)
    for i, sp in enumerate(spans):
        times[i] = sp.start
        times[n + i] = sp.end
        ints[0, i] = lane_ix[sp.lane]
        ints[1, i] = kind_ix[sp.kind]
        ints[2, i] = src(sp)
        ints[3, i] = sid(sp.name)
        ints[4, i] = sid(sp.barrier)
        if sp.slot is not None:
            ints[5, i] = sp.slot
        if sp.phase is not None:
            ints[6, i] = sp.phase
    flows = [(lane_ix.get(f.src, -1) if f.src is not None else -1, f.time, lane_ix[f.dst], f.dst_time)
             for f in trace.flows() if f.dst in lane_ix]
    return {
        "order": order, "n": n, "times": times.tobytes(), "ints": ints.tobytes(),
        "strings": list(strings), "kinds": kinds, "lanes": lane_rows(trace),
        "sources": [{"file": f, "line": l, "text": linecache.getline(f, l).rstrip("\n") if f else ""}
                    for (f, l) in sources],
        "flows": np.asarray(flows, dtype=np.float64).reshape(-1, 4).tobytes(),
        "files": source_windows(sources),
    }


def source_windows(sources, margin: int = 3) -> list[dict]:
    """Per source file the spans name: its lines from a little before the first to a little after the last
    (the source pane a click on a span scrolls to). ``{"file", "first", "lines"}``; files linecache cannot
    read are left out."""
    by_file: dict[str, list[int]] = {}
    for f, line in sources:
        if f:
            by_file.setdefault(f, []).append(line)
    out = []
    for f, lines in by_file.items():
        text = linecache.getlines(f)
        if not text:
            continue
        first = max(1, min(lines) - margin)
        last = min(len(text), max(lines) + margin)
        out.append({"file": f, "first": first, "lines": [t.rstrip("\n") for t in text[first - 1:last]]})
    return out


class TimelineWidget(View):
    """Warp-task timeline of a Trace: lanes by CTA -> task/replica, spans coloured by kind.

    Wheel to zoom, drag to pan, double-click to reset, hover for details; a click on a
    span selects it, shows its source line highlighted in the view's source pane and sends it to
    Python (``selected_line``, ``on_select``). Filters (checkboxes in the view, traits here): ``hide_waits``,
    ``fold_ctas`` (every CTA's lanes of a task replica on one lane), ``lane_per_task``. A run that
    deadlocked shows a "stuck here" bar per blocked lane (``deadlock``: the simulator's report,
    for named barriers and joins; without it the trace's unfinished waits). Without a live kernel
    the output shows :func:`timeline_svg`, with the same filters.

    >>> w = TimelineWidget(trace, hide_waits=True)
    >>> w.on_select(lambda span: print(span.line))      # doctest: +SKIP
    """

    _esm = esm_source("timeline")
    time_unit = traitlets.Unicode("cycles").tag(sync=True)
    _n = traitlets.Int(0).tag(sync=True)
    _times = traitlets.Bytes(b"").tag(sync=True)
    _ints = traitlets.Bytes(b"").tag(sync=True)
    _flows = traitlets.Bytes(b"").tag(sync=True)
    _lanes = traitlets.List().tag(sync=True)
    _kinds = traitlets.List().tag(sync=True)
    _colors = traitlets.Dict().tag(sync=True)
    _strings = traitlets.List().tag(sync=True)
    _sources = traitlets.List().tag(sync=True)
    _files = traitlets.List().tag(sync=True)          # the source pane's lines (source_windows)
    _stuck = traitlets.List().tag(sync=True)
    hide_waits = traitlets.Bool(False).tag(sync=True)
    fold_ctas = traitlets.Bool(False).tag(sync=True)
    lane_per_task = traitlets.Bool(False).tag(sync=True)
    view_range = traitlets.List(traitlets.Float(), default_value=[]).tag(sync=True)
    selected_index = traitlets.Int(None, allow_none=True).tag(sync=True)
    selected_line = traitlets.Int(None, allow_none=True).tag(sync=True)
    selected_file = traitlets.Unicode("").tag(sync=True)

    def __init__(self, trace: Trace, *, title: str | None = None, deadlock=None, **kwargs):
        enc = encode_spans(trace)
        self.trace, self.deadlock = trace, deadlock
        lane_ix = {l: i for i, l in enumerate(trace.lanes())}
        stuck = [{"lane": lane_ix[s["lane"]], "since": s["since"], "label": stuck_label(s)}
                 for s in stuck_waits(trace, deadlock) if s["lane"] in lane_ix]
        self._order = enc["order"]
        self._callbacks: list[Callable] = []
        super().__init__(
            title=title or f"{trace.meta.get('kernel', trace.source)} timeline",
            time_unit=trace.time_unit, _n=enc["n"], _times=enc["times"], _ints=enc["ints"],
            _flows=enc["flows"], _lanes=enc["lanes"], _kinds=enc["kinds"],
            _colors={k: KIND_COLORS.get(k, "#95a5a6") for k in enc["kinds"]},
            _strings=enc["strings"], _sources=enc["sources"], _files=enc["files"],
            _stuck=stuck, **kwargs)
        self.observe(self._fire, names="selected_index")

    @property
    def selected(self) -> Span | None:
        """The span last clicked in the view (None before any click)."""
        i = self.selected_index
        return self.trace.spans[self._order[i]] if i is not None and 0 <= i < len(self._order) else None

    def on_select(self, callback: Callable[[Span], None]) -> None:
        """Call ``callback(span)`` whenever a span is clicked in the view.

        >>> w.on_select(lambda s: print(s.name, s.line))     # doctest: +SKIP
        """
        self._callbacks.append(callback)

    def _fire(self, change):
        span = self.selected
        if span is not None:
            for cb in list(self._callbacks):
                cb(span)

    def _static_options(self) -> dict:
        return dict(deadlock=self.deadlock, hide_waits=self.hide_waits, fold_ctas=self.fold_ctas,
                    lane_per_task=self.lane_per_task)

    def static_svg(self) -> str:
        return timeline_svg(self.trace, **self._static_options())

    def static_html(self, svg: str | None = None) -> str:
        if svg is None:
            return self.static(self.trace, title=self.title, **self._static_options())
        return _timeline_frame(self.trace, self.title, svg)

    @classmethod
    def static(cls, trace: Trace, *, title: str | None = None, deadlock=None, **filters) -> str:
        """What ``TimelineWidget(trace, ...)`` draws as its static fallback, with no widget made (:meth:`View.static`)."""
        return timeline_html(trace, title=title, deadlock=deadlock, **filters)

    def __repr__(self) -> str:
        return f"TimelineWidget({self.trace!r})"


# -- lanes as shown: filters --------------------------------------------------------------
def display_lanes(trace: Trace, *, fold_ctas: bool = False, lane_per_task: bool = False) -> tuple[list[dict], dict]:
    """The lanes a view draws and which trace lane goes where.

    ``fold_ctas`` lays every CTA's lane of a task replica on one lane (CTA headers go); ``lane_per_task``
    lays a task's replicas on one lane. Returns (rows, lane -> row index); each row has its CTA
    header (None when folded), label, busy/wait shares (the mean of its lanes) and how many lanes it holds.
    """
    rows: list[dict] = []
    where: dict = {}
    index: dict = {}
    ctas = sorted({l[0] for l in trace.lanes()})
    for r in lane_rows(trace):
        lane = (r["cta"], r["task"], r["replica"])
        key = (None if fold_ctas else r["cta"], r["task"], None if lane_per_task else r["replica"])
        if key not in index:
            index[key] = len(rows)
            label = r["task"] if lane_per_task else r["label"]
            rows.append({"cta": key[0], "label": label, "members": [], "busy_share": 0.0, "wait_share": 0.0})
        row = rows[index[key]]
        row["members"].append(lane)
        k = len(row["members"])
        row["busy_share"] += (r["busy_share"] - row["busy_share"]) / k
        row["wait_share"] += (r["wait_share"] - row["wait_share"]) / k
        where[lane] = index[key]
    for row in rows:
        reps = {m[2] for m in row["members"]}
        if lane_per_task and len(reps) > 1:
            row["label"] += f" ×{len(reps)}"
        if row["cta"] is None:
            row["head"] = f"CTAs {ctas[0]}-{ctas[-1]} folded" if len(ctas) > 1 else f"CTA {ctas[0]}"
        else:
            row["head"] = f"CTA {row['cta']}"
    return rows, where


# -- the static fallback ---------------------------------------------------------------
# the lane labels' busy/wait bars: where they start and how wide (the label before, the percentages after)
BAR_X, BAR_W = 110, 50


def share_note(row: dict) -> str:
    """What a lane's busy/wait percentages mean (the tooltip of its bars)."""
    return (f"busy {row['busy_share']:.0%}, waiting {row['wait_share']:.0%} of the lane's time. Busy counts every "
            "span that is not a wait, async copies and MMAs included, which run on while the lane goes on or "
            "waits: the two can add up past 100 %.")


def timeline_svg(trace: Trace, width: int = 960, lane_height: int = 18, gutter: int = 215,
                 t0: float | None = None, t1: float | None = None, *, hide_waits: bool = False,
                 fold_ctas: bool = False, lane_per_task: bool = False, deadlock=None) -> str:
    """The timeline as one self-contained SVG (no script): for reports, nbconvert, GitHub.

    Spans narrower than a pixel are merged per pixel and kind, so a 100k-span trace
    still makes a small SVG. The filters of the live view: ``hide_waits`` leaves the waits out
    (a waiting-bound kernel is otherwise all red), ``fold_ctas`` draws every CTA's lanes of a task
    on one lane, ``lane_per_task`` one lane per task (its replicas together). A run that deadlocked
    shows a "stuck here" marker on each blocked lane, at its barrier and phase
    (:func:`stuck_waits`; ``deadlock`` the simulator's report, when there is one).

    >>> svg = timeline_svg(sample_trace(), hide_waits=True)     # doctest: +SKIP
    """
    esc = html.escape
    rows, where = display_lanes(trace, fold_ctas=fold_ctas, lane_per_task=lane_per_task)
    stuck = stuck_waits(trace, deadlock)
    t0 = trace.start if t0 is None else t0
    t1 = stuck_end(trace, stuck) if t1 is None else t1
    if t1 <= t0:
        t1 = t0 + 1
    plot_w = width - gutter - 10
    sx = plot_w / (t1 - t0)
    axis_h, cta_h = 18, 14
    ys, y, last = [], axis_h, object()
    heads = []
    for r in rows:
        if r["head"] != last:
            heads.append((r["head"], y))
            y += cta_h
            last = r["head"]
        ys.append(y)
        y += lane_height
    shown = [s for s in trace.spans if not (hide_waits and s.kind == "wait")]
    kinds_present = [k for k in _kinds_of(trace) if any(s.kind == k for s in shown)]
    legend_h = 18
    height = y + legend_h + 6
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-timeline-svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11'>",
           f"<rect width='{width}' height='{height}' fill='#fff'/>"]
    if stuck:
        out.append("<defs><pattern id='tlxwb-stuck-hatch' width='6' height='6' patternUnits='userSpaceOnUse' "
                   "patternTransform='rotate(45)'><rect width='6' height='6' fill='#fdecea'/>"
                   "<line x1='0' y1='0' x2='0' y2='6' stroke='#e6a59d' stroke-width='2'/></pattern></defs>")
    # axis
    step = _nice_step((t1 - t0) / max(2, plot_w // 90))
    t = np.ceil(t0 / step) * step
    while t <= t1:
        x = gutter + (t - t0) * sx
        out.append(f"<line x1='{x:.1f}' y1='14' x2='{x:.1f}' y2='{y}' stroke='#e6e6e6'/>"
                   f"<text x='{x + 2:.1f}' y='11' fill='#555' font-size='10'>{_fmt(t)}</text>")
        t += step
    out.append(f"<text x='4' y='11' fill='#888' font-size='10'>{esc(trace.time_unit)}</text>")
    for head, hy in heads:
        out.append(f"<rect x='0' y='{hy}' width='{width}' height='{cta_h}' fill='#f2f4f7'/>"
                   f"<text x='4' y='{hy + cta_h - 3}' font-weight='bold'>{esc(head)}</text>")
    for r, ly in zip(rows, ys):
        busy, wait = min(r["busy_share"], 1.0), min(r["wait_share"], 1.0)
        tip = f"<title>{esc(share_note(r))}</title>"
        # busy over wait, each its own bar of the full width: the two can add up past 100 %
        label = r["label"] if len(r["label"]) <= 16 else r["label"][:15] + "\u2026"   # gives way to the bars
        full = f"<title>{esc(r['label'])}</title>" if label != r["label"] else ""
        out.append(f"<text class='tlxwb-lane' x='8' y='{ly + lane_height - 5}'>{esc(label)}{full}</text>"
                   f"<g class='tlxwb-shares'>{tip}<rect x='{BAR_X}' y='{ly + 4}' width='{BAR_W}' height='10' fill='#eee'/>"
                   f"<rect x='{BAR_X}' y='{ly + 4}' width='{BAR_W * busy:.1f}' height='5' fill='{KIND_COLORS['compute']}'/>"
                   f"<rect x='{BAR_X}' y='{ly + 9}' width='{BAR_W * wait:.1f}' height='5' fill='{KIND_COLORS['wait']}'/>"
                   f"<text x='{BAR_X + BAR_W + 4}' y='{ly + lane_height - 5}' fill='#666' font-size='10'>"
                   f"{r['busy_share']:.0%}/{r['wait_share']:.0%}</text></g>")
    # Spans wider than 3 px are drawn one by one (with a hover title); narrower ones are
    # summed per pixel column and each column drawn in its dominant kind, so the SVG stays
    # small for any number of spans.
    kind_list = _kinds_of(trace)
    kind_ix = {k: i for i, k in enumerate(kind_list)}
    ncol = int(np.ceil(plot_w)) + 1
    cover: dict = {}
    wide = []
    for s in shown:
        if s.end < t0 or s.start > t1:
            continue
        x0 = (max(s.start, t0) - t0) * sx
        x1 = (min(s.end, t1) - t0) * sx
        if x1 - x0 >= 3:
            wide.append((s, x0, x1))
            continue
        row = where[s.lane]
        c = cover.get(row)
        if c is None:
            c = cover[row] = np.zeros((len(kind_list), ncol))
        k = kind_ix[s.kind]
        a, b = int(x0), int(x1)
        if a == b:
            c[k, a] += max(x1 - x0, 0.05)       # zero-length spans still show
        else:
            c[k, a] += a + 1 - x0
            c[k, a + 1:b] += 1
            if b < ncol:
                c[k, b] += x1 - b
    for row, c in cover.items():
        ly = ys[row]
        tot = c.sum(axis=0)
        dom = np.where(tot > 0, c.argmax(axis=0), -1)
        col = 0
        while col < ncol:
            k = dom[col]
            end = col + 1
            while end < ncol and dom[end] == k:
                end += 1
            if k >= 0:
                out.append(_rect([kind_list[k], gutter + col, gutter + end, None], ly, lane_height))
            col = end
    for s, x0, x1 in wide:
        title = (f"{s.name or s.kind} ({s.kind}) {_fmt(s.start)}-{_fmt(s.end)} {trace.time_unit}"
                 + (f" {s.barrier}[{s.slot}]" if s.barrier else "")
                 + ((" parity " if s.kind == "wait" else " phase ") + str(s.phase) if s.phase is not None else "")
                 + (f" line {s.line}" if s.line else ""))
        out.append(_rect([s.kind, gutter + x0, gutter + x1, title], ys[where[s.lane]], lane_height))
    # stuck here: a hatched bar from where the task stopped to the end, its barrier, phase and line on it
    labelled = set()
    for st in stuck:
        row = where.get(st["lane"])
        if row is None:
            continue
        ly, x0 = ys[row], gutter + (min(max(st["since"], t0), t1) - t0) * sx
        label = stuck_label(st)
        who = f"CTA {st['lane'][0]} {_lane_label(st['lane'])}"
        out.append(f"<g class='tlxwb-stuck' data-lane='{esc(who)}'><title>{esc(who)} {esc(label)}</title>"
                   f"<rect x='{x0:.1f}' y='{ly + 1}' width='{max(gutter + plot_w - x0, 3):.1f}' height='{lane_height - 2}' "
                   f"fill='url(#tlxwb-stuck-hatch)' stroke='#c0392b'/>"
                   f"<path d='M{x0:.1f},{ly + 1} l5,{lane_height / 2 - 1:.1f} l-5,{lane_height / 2 - 1:.1f} z' fill='#c0392b'/>")
        if row not in labelled:
            labelled.add(row)
            out.append(f"<text x='{x0 + 8:.1f}' y='{ly + lane_height - 5}' fill='#922b21' font-size='10'>"
                       f"{esc(label)}</text>")
        out.append("</g>")
    lx = 8
    for k in kinds_present:
        out.append(f"<rect x='{lx}' y='{y + 6}' width='10' height='10' fill='{KIND_COLORS.get(k, '#95a5a6')}'/>"
                   f"<text x='{lx + 13}' y='{y + 15}'>{esc(k)}</text>")
        lx += 20 + 7 * len(k)
    if stuck:
        out.append(f"<rect x='{lx}' y='{y + 6}' width='10' height='10' fill='url(#tlxwb-stuck-hatch)' stroke='#c0392b'/>"
                   f"<text x='{lx + 13}' y='{y + 15}'>stuck here (deadlock)</text>")
        lx += 150
    notes = [n for n, on in (("waits hidden", hide_waits), ("CTAs folded", fold_ctas and len(heads) == 1),
                             ("a lane per task", lane_per_task)) if on]
    if notes:
        out.append(f"<text x='{lx + 10}' y='{y + 15}' fill='#888'>({esc(', '.join(notes))})</text>")
    out.append("</svg>")
    return "".join(out)


def _rect(cur, ly, h) -> str:
    kind, x0, x1, title = cur
    t = f"<title>{html.escape(title)}</title>" if title else ""
    return (f"<rect class='tlxwb-span tlxwb-{kind}' x='{x0:.1f}' y='{ly + 2}' width='{x1 - x0:.1f}' "
            f"height='{h - 4}' fill='{KIND_COLORS.get(kind, '#95a5a6')}'>{t}</rect>")


def timeline_html(trace: Trace, title: str | None = None, **options) -> str:
    """Static HTML: a title, the timeline SVG (``options``: those of :func:`timeline_svg`) and the
    per-lane summary table."""
    return _timeline_frame(trace, title, timeline_svg(trace, **options))


def _timeline_frame(trace: Trace, title: str | None, svg: str) -> str:
    head = html.escape(title or f"{trace.meta.get('kernel', trace.source)} timeline")
    return (f"<div class='tlxwb-static tlxwb-timeline-static'><div style='font:600 12px sans-serif'>{head}"
            f" <span style='font-weight:normal;color:#666'>{html.escape(repr(trace))}</span></div>"
            f"{svg}{trace.summary()._repr_html_()}</div>")


views.register("Trace", timeline_html)
views.register("Trace", timeline_svg, view="timeline_svg")


def _nice_step(raw: float) -> float:
    raw = max(raw, 1e-12)
    p = 10 ** np.floor(np.log10(raw))
    for m in (1, 2, 5, 10):
        if m * p >= raw:
            return float(m * p)
    return float(10 * p)


def _fmt(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.{1 if a >= 1e7 else 2}f}M"
    if a >= 1e4:
        return f"{v / 1e3:.{0 if a >= 1e5 else 1}f}k"
    if a >= 100 or float(v).is_integer():
        return f"{round(v)}"
    return f"{v:.3g}"
