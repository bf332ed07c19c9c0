"""BarrierPhaseWidget and barrier_svg: each mbarrier slot's phases, arrivals and waiters."""
from __future__ import annotations

import html
import linecache

import numpy as np
import traitlets

from .. import views
from ..trace import Trace
from ._base import View, esm_source
from .timeline import _fmt, _nice_step, stuck_end, stuck_label, stuck_waits

EV_KINDS = ("init", "expect", "arrive", "tx", "flip")     # wait_begin/wait_end show as wait bars
PALETTE = ["#34495e", "#8e44ad", "#2980b9", "#c0392b", "#27ae60", "#d35400", "#7f8c8d", "#16a085"]


ARRIVE_COLOR = PALETTE[0]


def legend_items(enc: dict) -> list[tuple[str, str]]:
    """The legend, in the markers' own colours: an arrival is drawn in its arriver's colour."""
    items = [(f"arrive: {enc['who'][w]}", PALETTE[w % len(PALETTE)]) for w in enc["arrivers"]] or [
        ("arrive", ARRIVE_COLOR)]
    items += [("expect bytes", "#f39c12"), ("TMA bytes landed", "#16a085"), ("phase flip", "#111"),
              ("waiting", "#e74c3c"), ("releases", "#777")]
    if enc["stuck"]:
        items.append(("stuck here (deadlock)", "#fdecea"))
    return items


def _who(cta, task, replica) -> str:
    return f"{task}[{replica or 0}]"


def encode_barriers(trace: Trace, deadlock=None) -> dict:
    """Rows (one per CTA, barrier, slot), their events, waits and release arrows, as columns;
    ``stuck``: the waits a deadlock left open, [row, waiter sub-row, since, label] each."""
    waits = [s for s in trace.spans if s.kind == "wait" and s.barrier is not None and s.slot is not None]
    stuck = [s for s in stuck_waits(trace, deadlock) if s["barrier"] is not None and s["slot"] is not None]
    keys = (set(trace.barrier_slots()) | {(s.cta, s.barrier, s.slot) for s in waits}
            | {(s["lane"][0], s["barrier"], s["slot"]) for s in stuck})
    rows = sorted(keys, key=lambda k: (k[0], k[1], k[2]))
    row_ix = {k: i for i, k in enumerate(rows)}
    waiters = {k: sorted({s.lane for s in waits if (s.cta, s.barrier, s.slot) == k}
                         | {s["lane"] for s in stuck if (s["lane"][0], s["barrier"], s["slot"]) == k},
                         key=lambda l: (l[1] not in ("default", "producer"), l[1], l[2])) for k in rows}
    who: dict[str, int] = {}
    sources: dict[tuple, int] = {}

    def wid(name):
        return who.setdefault(name, len(who))

    def src(file, line):
        if line is None:
            return -1
        return sources.setdefault((file or "", int(line)), len(sources))

    files = {}
    for s in trace.spans:
        if s.line is not None and s.file:
            files.setdefault(s.line, s.file)
    evs = sorted((e for e in trace.barrier_events if e.kind in EV_KINDS),
                 key=lambda e: (row_ix[(e.cta, e.barrier, e.slot)], e.time))
    E = len(evs)
    ev_t = np.array([e.time for e in evs], dtype=np.float64)
    ev_i = np.full((9, E), -1, dtype=np.int32)
    for i, e in enumerate(evs):
        ev_i[:, i] = (row_ix[(e.cta, e.barrier, e.slot)], EV_KINDS.index(e.kind),
                      wid(_who(*e.lane)) if e.task is not None else -1, e.count, e.bytes,
                      -1 if e.phase is None else e.phase, src(files.get(e.line), e.line),
                      -1 if e.pending_arrivals is None else e.pending_arrivals,
                      -1 if e.pending_bytes is None else e.pending_bytes)
    waits.sort(key=lambda s: (row_ix[(s.cta, s.barrier, s.slot)], s.start))
    W = len(waits)
    w_t = np.array([s.start for s in waits] + [s.end for s in waits], dtype=np.float64)
    w_i = np.full((5, W), -1, dtype=np.int32)
    for i, s in enumerate(waits):
        k = (s.cta, s.barrier, s.slot)
        w_i[:, i] = (row_ix[k], waiters[k].index(s.lane), -1 if s.phase is None else s.phase,
                     src(s.file, s.line), wid(_who(*s.lane)))
    fl = []
    for f in trace.flows():
        k = (f.cta, f.barrier, f.slot)
        if k in row_ix and f.dst in waiters[k]:
            fl.append((row_ix[k], waiters[k].index(f.dst), f.time, f.dst_time,
                       wid(_who(*f.src)) if f.src is not None else -1))
    stuck_rows = []
    for st in stuck:
        k = (st["lane"][0], st["barrier"], st["slot"])
        stuck_rows.append([row_ix[k], waiters[k].index(st["lane"]), st["since"],
                           f"{_who(*st['lane'])} {stuck_label(st)}"])
    arrivers = sorted({wid(_who(*e.lane)) for e in evs if e.kind == "arrive" and e.task is not None})
    row_info = []
    for k in rows:
        init = [e for e in trace.barrier_events if (e.cta, e.barrier, e.slot) == k and e.kind == "init"]
        flips = sum(1 for e in trace.barrier_events if (e.cta, e.barrier, e.slot) == k and e.kind == "flip")
        info = (f"count {init[0].count} · " if init else "") + f"{flips} phase flips"
        row_info.append({"cta": k[0], "barrier": k[1], "slot": k[2], "info": info,
                         "waiters": [_who(*l) for l in waiters[k]]})
    return {"rows": row_info, "who": list(who), "ev_t": ev_t.tobytes(), "ev_i": ev_i.tobytes(),
            "w_t": w_t.tobytes(), "w_i": w_i.tobytes(), "fl": np.asarray(fl, dtype=np.float64).reshape(-1, 5).tobytes(),
            "sources": [{"file": f, "line": l, "text": linecache.getline(f, l).rstrip("\n") if f else ""}
                        for (f, l) in sources],
            "events": evs, "waits": waits, "stuck": stuck_rows, "arrivers": arrivers}


class BarrierPhaseWidget(View):
    """Barrier phases of a Trace: a row per mbarrier slot with its arrivals, expected bytes,
    TMA bytes landing and phase flips, a sub-row per waiter with its waiting intervals, and
    arrows from the arrival that completed a phase to the waits it released.

    Wheel zoom, drag pan, hover for details, click to select the source line.

    >>> BarrierPhaseWidget(trace)            # doctest: +SKIP
    """

    _esm = esm_source("barriers")
    time_unit = traitlets.Unicode("cycles").tag(sync=True)
    _rows = traitlets.List().tag(sync=True)
    _who = traitlets.List().tag(sync=True)
    _palette = traitlets.List(PALETTE).tag(sync=True)
    _sources = traitlets.List().tag(sync=True)
    _ev_t = traitlets.Bytes(b"").tag(sync=True)
    _ev_i = traitlets.Bytes(b"").tag(sync=True)
    _w_t = traitlets.Bytes(b"").tag(sync=True)
    _w_i = traitlets.Bytes(b"").tag(sync=True)
    _fl = traitlets.Bytes(b"").tag(sync=True)
    _stuck = traitlets.List().tag(sync=True)
    _legend = traitlets.List().tag(sync=True)
    view_range = traitlets.List(traitlets.Float(), default_value=[]).tag(sync=True)
    selected_line = traitlets.Int(None, allow_none=True).tag(sync=True)
    selected_file = traitlets.Unicode("").tag(sync=True)

    def __init__(self, trace: Trace, *, title: str | None = None, deadlock=None, **kwargs):
        enc = encode_barriers(trace, deadlock)
        self.trace, self.deadlock = trace, deadlock
        self.events, self.waits = enc["events"], enc["waits"]   # index i in the view = these lists
        super().__init__(title=title or f"{trace.meta.get('kernel', trace.source)} barrier phases",
                         time_unit=trace.time_unit, _rows=enc["rows"], _who=enc["who"], _sources=enc["sources"],
                         _ev_t=enc["ev_t"], _ev_i=enc["ev_i"], _w_t=enc["w_t"], _w_i=enc["w_i"], _fl=enc["fl"],
                         _stuck=enc["stuck"], _legend=[list(i) for i in legend_items(enc)], **kwargs)

    def static_svg(self) -> str:
        return barrier_svg(self.trace, deadlock=self.deadlock)

    def static_html(self, svg: str | None = None) -> str:
        return _barrier_frame(self.title, self.static_svg() if svg is None else svg)

    @classmethod
    def static(cls, trace: Trace, *, title: str | None = None, deadlock=None) -> str:
        """What ``BarrierPhaseWidget(trace, ...)`` draws as its static fallback, with no widget made."""
        return _barrier_frame(title or f"{trace.meta.get('kernel', trace.source)} barrier phases",
                              barrier_svg(trace, deadlock=deadlock))

    def __repr__(self) -> str:
        return f"BarrierPhaseWidget({self.trace!r})"


def _barrier_frame(title: str, svg: str) -> str:
    return f"<div class='tlxwb-static'><div style='font:600 12px sans-serif'>{html.escape(title)}</div>{svg}</div>"


def barrier_svg(trace: Trace, width: int = 960, gutter: int = 230, t0: float | None = None,
                t1: float | None = None, *, deadlock=None) -> str:
    """Barrier phases as one self-contained SVG (no script). Markers are thinned to one per
    pixel and kind, so long traces stay small; an arrival is drawn in its arriver's colour (the
    legend names them). A wait a deadlock left open is a "stuck here" bar to the end, with the
    phase waited for and what is missing.

    >>> svg = barrier_svg(sample_trace())          # doctest: +SKIP
    """
    esc = html.escape
    enc = encode_barriers(trace, deadlock)
    rows, evs, waits = enc["rows"], enc["events"], enc["waits"]
    who = {w: i for i, w in enumerate(enc["who"])}
    t0 = trace.start if t0 is None else t0
    t1 = stuck_end(trace, stuck_waits(trace, deadlock)) if t1 is None else t1
    if t1 <= t0:
        t1 = t0 + 1
    band, sub, ax = 30, 14, 20
    plot_w = width - gutter - 8
    X = lambda t: gutter + (t - t0) / (t1 - t0) * plot_w
    row_y, y = [], ax
    last = None
    for r in rows:
        if r["cta"] != last:
            y += 4
            last = r["cta"]
        row_y.append(y)
        y += band + len(r["waiters"]) * sub + 6
    legend_y = y + 4
    height = y + 22
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-barrier-svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='10'>",
           f"<rect width='{width}' height='{height}' fill='#fff'/>"]
    step = _nice_step((t1 - t0) / max(2, plot_w // 90))
    t = np.ceil(t0 / step) * step
    while t <= t1:
        out.append(f"<line x1='{X(t):.1f}' y1='14' x2='{X(t):.1f}' y2='{height}' stroke='#eee'/>"
                   f"<text x='{X(t) + 2:.1f}' y='11' fill='#555'>{_fmt(t)}</text>")
        t += step
    out.append(f"<text x='4' y='11' fill='#888'>{esc(trace.time_unit)}</text>")
    row_of = {(r["cta"], r["barrier"], r["slot"]): i for i, r in enumerate(rows)}
    for i, r in enumerate(rows):
        y0 = row_y[i]
        out.append(f"<text class='tlxwb-bar-row' x='6' y='{y0 + 12}' font-weight='bold' font-size='11'>"
                   f"CTA {r['cta']}  {esc(r['barrier'])}[{r['slot']}]</text>"
                   f"<text x='6' y='{y0 + 25}' fill='#666'>{esc(r['info'])}</text>")
        flips = [e.time for e in evs if (e.cta, e.barrier, e.slot) == (r["cta"], r["barrier"], r["slot"])
                 and e.kind == "flip"]
        prev = t0
        for k, ft in enumerate(flips + [t1]):
            out.append(f"<rect x='{X(prev):.1f}' y='{y0}' width='{max(X(ft) - X(prev), 0):.1f}' height='{band - 4}' "
                       f"fill='{'#fdf6e3' if k % 2 else '#eef4fb'}'/>")
            prev = ft
        out.append(f"<line x1='{gutter}' y1='{y0 + band / 2}' x2='{width}' y2='{y0 + band / 2}' stroke='#bbb'/>")
        for k, w in enumerate(r["waiters"]):
            out.append(f"<text x='18' y='{y0 + band + k * sub + 10}' fill='#444'>↳ waits: {esc(w)}</text>")
    # hover titles only while the picture is small enough to carry them
    titled = len(evs) + len(waits) < 5000
    seen = set()
    for s in waits:
        if s.end < t0 or s.start > t1:
            continue
        i = row_of[(s.cta, s.barrier, s.slot)]
        k = rows[i]["waiters"].index(_who(*s.lane))
        x0, x1 = X(max(s.start, t0)), X(min(s.end, t1))
        if x1 - x0 < 1.5:
            key = (i, k, round(x0))
            if key in seen:
                continue
            seen.add(key)
        title = (f"<title>{esc(_who(*s.lane))} waits for parity {s.phase}: {_fmt(s.duration)} {esc(trace.time_unit)}"
                 f"</title>") if titled else ""
        out.append(f"<rect class='tlxwb-wait' x='{x0:.1f}' y='{row_y[i] + band + k * sub + 3}' "
                   f"width='{max(x1 - x0, 1.5):.1f}' height='{sub - 6}' fill='#e74c3c' fill-opacity='0.75'>"
                   f"{title}</rect>")
    seen = set()
    for e in evs:
        if not t0 <= e.time <= t1:
            continue
        i = row_of[(e.cta, e.barrier, e.slot)]
        x, ly = X(e.time), row_y[i] + band / 2
        key = (i, e.kind, round(x))
        if key in seen:
            continue
        seen.add(key)
        tip = "" if not titled else f"<title>{e.kind} {esc(e.barrier)}[{e.slot}] at {_fmt(e.time)}" + (
            f" by {esc(_who(*e.lane))}" if e.task else "") + (
            f", {e.bytes} bytes" if e.bytes else "") + _phase_words(e) + "</title>"
        if e.kind == "flip":
            out.append(f"<g class='tlxwb-flip'><line x1='{x:.1f}' y1='{row_y[i]}' x2='{x:.1f}' y2='{row_y[i] + band - 4}' "
                       f"stroke='#111' stroke-width='2'>{tip}</line></g>")
        elif e.kind == "arrive":
            colour = PALETTE[who[_who(*e.lane)] % len(PALETTE)] if e.task else ARRIVE_COLOR
            out.append(f"<path class='tlxwb-arrive' d='M{x - 4:.1f},{ly - 9} L{x + 4:.1f},{ly - 9} L{x:.1f},{ly - 1} Z' "
                       f"fill='{colour}'>{tip}</path>")
        elif e.kind == "expect":
            out.append(f"<path d='M{x:.1f},{ly - 5} L{x + 4:.1f},{ly} L{x:.1f},{ly + 5} L{x - 4:.1f},{ly} Z' "
                       f"fill='#f39c12'>{tip}</path>")
        elif e.kind == "tx":
            out.append(f"<rect x='{x - 3:.1f}' y='{ly + 1}' width='6' height='6' fill='#16a085'>{tip}</rect>")
    fl = np.frombuffer(enc["fl"], dtype=np.float64).reshape(-1, 5)
    if len(fl) <= 1500:
        for r, k, t, td, _ in fl:
            r, k = int(r), int(k)
            if td < t0 or t > t1:
                continue
            out.append(f"<line class='tlxwb-release' x1='{X(t):.1f}' y1='{row_y[r] + band / 2}' x2='{X(td):.1f}' "
                       f"y2='{row_y[r] + band + k * sub + sub / 2}' stroke='#555' stroke-opacity='0.6'/>")
    for r, k, since, label in enc["stuck"]:
        x0 = X(min(max(since, t0), t1))
        sy = row_y[r] + band + k * sub
        out.append(f"<g class='tlxwb-stuck'><title>{esc(label)}</title><rect x='{x0:.1f}' y='{sy + 1}' "
                   f"width='{max(width - 8 - x0, 3):.1f}' height='{sub - 2}' fill='#fdecea' stroke='#c0392b'/>"
                   f"<text x='{x0 + 4:.1f}' y='{sy + sub - 3}' fill='#922b21' font-size='9'>{esc(label)}</text></g>")
    lx = 6
    for label, colour in legend_items(enc):
        out.append(f"<rect x='{lx}' y='{legend_y}' width='10' height='10' fill='{colour}'/>"
                   f"<text x='{lx + 13}' y='{legend_y + 9}'>{esc(label)}</text>")
        lx += 24 + 6 * len(label)
    out.append("</svg>")
    return "".join(out)


views.register("Trace", barrier_svg, view="barrier_svg")


def _phase_words(e) -> str:
    """An event's phase as every view says it (docs/phases.md): an arrive or expect counts toward phase k
    (numbered from 0), a flip completes phase k, a wait names the parity it waits for."""
    if e.phase is None:
        return ""
    if e.kind.startswith("wait"):
        return f", parity {e.phase}"
    return f", phase {e.phase}" + (" completed" if e.kind == "flip" else "")
