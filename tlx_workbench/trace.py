"""One Trace model for simulated and measured runs.

Producers (the simulator, the GPU profiler, Chrome-trace import) build a
:class:`Trace`; views (timeline, barrier phases, Chrome-trace export, summaries)
read one. Nothing else passes between them.

Time is a float in ``Trace.time_unit`` ("cycles" for the simulator, "ns" for
measured runs). A *lane* is one CTA's task replica: ``(cta, task, replica)``.

>>> t = Trace(time_unit="cycles")
>>> t.add_span(Span(cta=0, task="producer", replica=0, kind="tma", start=0, end=40, name="async_descriptor_load"))
>>> t.to_chrome()["traceEvents"][0]["ph"]
'M'
"""
from __future__ import annotations

import bisect
import dataclasses
import json
from collections import defaultdict
from typing import Any, Iterable, Iterator

# span kinds, in legend order; views colour by these
SPAN_KINDS = ("compute", "mma", "tma", "load", "store", "wait", "arrive", "sync", "other")
# barrier event kinds
BARRIER_EVENT_KINDS = ("init", "expect", "arrive", "tx", "flip", "wait_begin", "wait_end")


@dataclasses.dataclass
class Span:
    """An interval of one lane's time, spent on one op or one wait."""
    cta: int
    task: str
    replica: int
    kind: str
    start: float
    end: float
    name: str = ""
    line: int | None = None          # kernel source line
    file: str | None = None
    barrier: str | None = None       # barrier array name (waits, arrives, expects)
    slot: int | None = None          # barrier slot or buffer index
    phase: int | None = None         # an arrive: the phase it counts toward (from 0); a wait: the parity it waits for
    args: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def lane(self) -> tuple[int, str, int]:
        return (self.cta, self.task, self.replica)


@dataclasses.dataclass
class BarrierEvent:
    """Something that happened to one mbarrier slot (or named barrier) at one time.

    kind: init (count=arrive count), expect (bytes), arrive (count), tx (bytes landed
    by TMA), flip (phase ``phase`` completed), wait_begin / wait_end (a waiter).
    """
    cta: int
    time: float
    barrier: str
    slot: int
    kind: str
    task: str | None = None
    replica: int | None = None
    count: int = 0
    bytes: int = 0
    phase: int | None = None
    line: int | None = None
    pending_arrivals: int | None = None   # after this event
    pending_bytes: int | None = None      # after this event
    # CTA of the arriving lane when it is not the barrier's (a remote arrive, a 2-CTA MMA commit)
    src_cta: int | None = None

    @property
    def lane(self) -> tuple[int, str | None, int]:
        """The (cta, task, replica) that caused this event: for a remote arrive, the sender's CTA."""
        return (self.src_cta if self.src_cta is not None else self.cta, self.task, self.replica or 0)


@dataclasses.dataclass
class Counter:
    """A sampled value over time, e.g. SMEM slots full, or bytes in flight."""
    name: str
    time: float
    value: float
    cta: int = 0


@dataclasses.dataclass
class Flow:
    """An arrow from the arrival that completed a phase to a wait it released."""
    cta: int
    barrier: str
    slot: int
    phase: int
    time: float                     # when the phase completed
    src: tuple[int, str, int] | None  # lane of the completing arrival (None: TMA bytes)
    dst: tuple[int, str, int]       # lane of the released waiter
    dst_time: float                 # when that waiter resumed


@dataclasses.dataclass
class LaneSummary:
    cta: int
    task: str
    replica: int
    busy: float
    waiting: float
    span: float
    waiting_by_barrier: dict[str, float]
    mma: float

    @property
    def busy_share(self) -> float:
        return self.busy / self.span if self.span else 0.0

    @property
    def mma_share(self) -> float:
        return self.mma / self.span if self.span else 0.0

    @property
    def wait_share(self) -> float:
        return self.waiting / self.span if self.span else 0.0

    @property
    def name(self) -> str:
        return f"CTA {self.cta} {_lane_name((self.cta, self.task, self.replica))}"


class TraceSummary(list):
    """The per-lane summary of a trace (a list of :class:`LaneSummary`) with a table repr.

    >>> print(trace.summary())          # doctest: +SKIP
    lane                  busy   wait   mma  waiting on
    CTA 0 producer[0]      62%    31%    0%  empty_bars 120
    """
    time_unit = "cycles"

    def rows(self) -> list[dict]:
        out = []
        for s in self:
            waits = sorted(s.waiting_by_barrier.items(), key=lambda kv: -kv[1])
            out.append({"lane": s.name, "busy": s.busy_share, "wait": s.wait_share, "mma": s.mma_share,
                        "extent": s.span, "waiting_on": waits})
        return out

    def __str__(self) -> str:
        lines = [f"{'lane':<26} {'busy':>6} {'wait':>6} {'mma':>6}  waiting on ({self.time_unit})"]
        for r in self.rows():
            waits = ", ".join(f"{k} {v:.0f}" for k, v in r["waiting_on"]) or "-"
            lines.append(f"{r['lane']:<26} {r['busy']:>6.0%} {r['wait']:>6.0%} {r['mma']:>6.0%}  {waits}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        import html
        head = ("<tr><th style='text-align:left'>lane</th><th>busy</th><th>wait</th><th>MMA</th>"
                f"<th style='text-align:left'>waiting on ({html.escape(self.time_unit)})</th></tr>")
        body = []
        for r in self.rows():
            waits = ", ".join(f"{html.escape(str(k))} {v:.0f}" for k, v in r["waiting_on"]) or "-"
            bar = (f"<span style='display:inline-block;width:60px;height:8px;background:#eee'>"
                   f"<span style='display:inline-block;width:{60 * r['busy']:.0f}px;height:8px;"
                   f"background:#2e86de'></span><span style='display:inline-block;width:"
                   f"{60 * r['wait']:.0f}px;height:8px;background:#e74c3c'></span></span>")
            body.append(f"<tr><td style='text-align:left'>{html.escape(r['lane'])}</td>"
                        f"<td>{r['busy']:.0%} {bar}</td><td>{r['wait']:.0%}</td><td>{r['mma']:.0%}</td>"
                        f"<td style='text-align:left'>{waits}</td></tr>")
        return ("<table class='tlxwb-summary' style='font-family:monospace;font-size:12px'>"
                + head + "".join(body) + "</table>")


class Trace:
    """Spans, barrier events and counters of one run, simulated or measured."""

    def __init__(self, spans: Iterable[Span] = (), barrier_events: Iterable[BarrierEvent] = (),
                 counters: Iterable[Counter] = (), *, time_unit: str = "cycles",
                 source: str = "sim", meta: dict | None = None):
        self._spans: list[Span] = list(spans)
        self._barrier_events: list[BarrierEvent] = list(barrier_events)
        self._counters: list[Counter] = list(counters)
        self._fill = None
        self.time_unit = time_unit
        self.source = source
        self.meta: dict[str, Any] = dict(meta or {})

    # the records, built on first access when a producer deferred them (the simulator's replayed CTAs: copies of
    # their wave leader's records, sim/schedule/batch.py)
    def defer(self, fill) -> None:
        """Let ``fill(trace)`` put the final records in ``_spans``/``_barrier_events``/``_counters`` when the trace
        is first read (it sees what was added so far)."""
        self._fill = fill

    def _filled(self) -> "Trace":
        fill = self._fill
        if fill is not None:
            self._fill = None
            fill(self)
        return self

    spans = property(lambda self: self._filled()._spans, lambda self, v: setattr(self, "_spans", list(v)))
    barrier_events = property(lambda self: self._filled()._barrier_events,
                              lambda self, v: setattr(self, "_barrier_events", list(v)))
    counters = property(lambda self: self._filled()._counters, lambda self, v: setattr(self, "_counters", list(v)))

    # -- building -------------------------------------------------------------
    def add_span(self, span: Span) -> None:
        self.spans.append(span)

    def add_barrier_event(self, ev: BarrierEvent) -> None:
        self.barrier_events.append(ev)

    def add_counter(self, c: Counter) -> None:
        self.counters.append(c)

    # -- queries ---------------------------------------------------------------
    def lanes(self) -> list[tuple[int, str, int]]:
        """Every (cta, task, replica) with a span or barrier event, in a stable order."""
        seen = {s.lane for s in self.spans}
        seen |= {e.lane for e in self.barrier_events if e.task is not None}
        return sorted(seen, key=lambda l: (l[0], _task_order(l[1]), l[1], l[2]))

    def barrier_slots(self) -> list[tuple[int, str, int]]:
        """Every (cta, barrier, slot) that has an event."""
        return sorted({(e.cta, e.barrier, e.slot) for e in self.barrier_events})

    @property
    def start(self) -> float:
        times = [s.start for s in self.spans] + [e.time for e in self.barrier_events]
        return min(times) if times else 0.0

    @property
    def end(self) -> float:
        times = [s.end for s in self.spans] + [e.time for e in self.barrier_events]
        return max(times) if times else 0.0

    @property
    def duration(self) -> float:
        return self.end - self.start

    def spans_of(self, cta: int | None = None, task: str | None = None,
                 replica: int | None = None, kind: str | None = None) -> Iterator[Span]:
        for s in self.spans:
            if ((cta is None or s.cta == cta) and (task is None or s.task == task)
                    and (replica is None or s.replica == replica) and (kind is None or s.kind == kind)):
                yield s

    def flows(self) -> list[Flow]:
        """Arrows from each phase completion to the waits it released.

        A wait on (cta, barrier, slot) for parity p that ends at or after the flip of a
        phase of that parity is released by that flip (the first one at or after its start).
        """
        flips = defaultdict(list)
        for e in self.barrier_events:
            if e.kind == "flip":
                flips[(e.cta, e.barrier, e.slot)].append(e)
        times = {}
        for k, v in flips.items():
            v.sort(key=lambda e: e.time)
            times[k] = [e.time for e in v]
        out = []
        for s in self.spans:
            if s.kind != "wait" or s.barrier is None or s.slot is None:
                continue
            key = (s.cta, s.barrier, s.slot)
            if key not in flips:
                continue
            # a hair of slack: a span's end comes back from Chrome JSON as ts + dur
            eps = 1e-9 * max(1.0, abs(s.end))
            fl = flips[key]
            for i in range(bisect.bisect_left(times[key], s.start - eps), len(fl)):
                f = fl[i]
                if f.time > s.end + eps:
                    break
                # a wait names a parity, a flip the phase it completes (numbered from 0): docs/phases.md
                if s.phase is None or f.phase is None or f.phase % 2 == s.phase % 2:
                    src = f.lane if f.task is not None else None
                    out.append(Flow(s.cta, s.barrier, s.slot, f.phase if f.phase is not None else -1,
                                    f.time, src, s.lane, s.end))
                    break
        return out

    def summary(self) -> "TraceSummary":
        """Per lane: busy time, waiting time (by barrier), MMA time, over the lane's extent.

        A list of :class:`LaneSummary`; prints (and shows in a notebook) as a table.

        >>> trace.summary()[0].busy_share      # doctest: +SKIP
        0.62
        """
        out = TraceSummary()
        out.time_unit = self.time_unit
        by_lane: dict[tuple, list[Span]] = defaultdict(list)
        for s in self.spans:
            by_lane[s.lane].append(s)
        for lane in self.lanes():
            spans = by_lane.get(lane, [])
            if not spans:
                continue
            waiting_by = defaultdict(float)
            busy = waiting = mma = 0.0
            for s in spans:
                if s.kind == "wait":
                    waiting += s.duration
                    waiting_by[s.barrier or s.name or "?"] += s.duration
                else:
                    busy += s.duration
                    if s.kind == "mma":
                        mma += s.duration
            extent = max(s.end for s in spans) - min(s.start for s in spans)
            out.append(LaneSummary(lane[0], lane[1], lane[2], busy, waiting, extent, dict(waiting_by), mma))
        return out

    # -- Chrome trace ------------------------------------------------------------
    def to_chrome(self) -> dict:
        """Chrome trace JSON (Perfetto, chrome://tracing): a process per CTA, a thread per lane,
        flow arrows from completing arrivals to released waits, counters as "C" events.
        Times are written in µs as Chrome expects: cycles are written 1 cycle = 1 µs, ns as ns/1000.
        """
        scale = 1e-3 if self.time_unit == "ns" else 1.0
        lanes = self.lanes()
        tid_of = {lane: i + 1 for i, lane in enumerate(lanes)}
        ev: list[dict] = []
        for cta in sorted({l[0] for l in lanes}):
            ev.append({"ph": "M", "name": "process_name", "pid": cta, "args": {"name": f"CTA {cta}"}})
            ev.append({"ph": "M", "name": "process_sort_index", "pid": cta, "args": {"sort_index": cta}})
        for lane, tid in tid_of.items():
            ev.append({"ph": "M", "name": "thread_name", "pid": lane[0], "tid": tid,
                       "args": {"name": _lane_name(lane)}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": lane[0], "tid": tid,
                       "args": {"sort_index": tid}})
        for s in self.spans:
            # a wait names the parity it waits for, an arrive the phase it counts toward (docs/phases.md)
            args = {k: v for k, v in (("line", s.line), ("file", s.file), ("barrier", s.barrier), ("slot", s.slot),
                                      ("parity" if s.kind == "wait" else "phase", s.phase)) if v is not None}
            args.update(s.args)
            ev.append({"ph": "X", "name": s.name or s.kind, "cat": s.kind, "pid": s.cta,
                       "tid": tid_of[s.lane], "ts": s.start * scale, "dur": s.duration * scale,
                       "args": args})
        # Flow arrows as zero-length slices bound by id (flow_out -> flow_in), the form
        # Proton writes too: Perfetto and chrome://tracing draw the arrow between them
        # without needing an enclosing slice at exactly the arrow's ends.
        for i, f in enumerate(self.flows()):
            if f.src is None or f.src not in tid_of:
                continue
            name = f"{f.barrier}[{f.slot}] phase {f.phase}"
            fargs = {"barrier": f.barrier, "slot": f.slot, "phase": f.phase}
            ev.append({"ph": "X", "name": name, "cat": "flow", "pid": f.src[0], "tid": tid_of[f.src],
                       "ts": f.time * scale, "dur": 0, "bind_id": i + 1, "flow_out": True, "args": fargs})
            ev.append({"ph": "X", "name": name, "cat": "flow", "pid": f.dst[0], "tid": tid_of[f.dst],
                       "ts": f.dst_time * scale, "dur": 0, "bind_id": i + 1, "flow_in": True, "args": fargs})
        for e in self.barrier_events:
            if e.task is not None and (e.cta, e.task, e.replica or 0) in tid_of:
                ev.append({"ph": "i", "s": "t", "name": f"{e.kind} {e.barrier}[{e.slot}]", "cat": "barrier",
                           "pid": e.cta, "tid": tid_of[(e.cta, e.task, e.replica or 0)],
                           "ts": e.time * scale, "args": _barrier_args(e)})
            else:
                ev.append({"ph": "i", "s": "p", "name": f"{e.kind} {e.barrier}[{e.slot}]", "cat": "barrier",
                           "pid": e.cta, "ts": e.time * scale, "args": _barrier_args(e)})
        for c in self.counters:
            ev.append({"ph": "C", "name": c.name, "pid": c.cta, "ts": c.time * scale, "args": {c.name: c.value}})
        return {"traceEvents": ev, "displayTimeUnit": "ns",
                "otherData": {"tlx_workbench": {"time_unit": self.time_unit, "source": self.source,
                                                "meta": _jsonable(self.meta)}}}

    def save(self, path: str) -> str:
        """Write the Chrome trace JSON to ``path`` (open it in https://ui.perfetto.dev), gzipped when ``path``
        ends in ``.gz`` (Perfetto opens those too); :meth:`load` reads both."""
        import gzip
        with (gzip.open(path, "wt") if str(path).endswith(".gz") else open(path, "w")) as f:
            json.dump(self.to_chrome(), f)
        return path

    @classmethod
    def from_chrome(cls, data: "dict | list | str", *, clock_ghz: float | None = None,
                    tasks=None) -> "Trace":
        """Read a Chrome trace: one written by :meth:`to_chrome`, or Proton's instrumentation output.

        ``data`` is the parsed JSON, or a path to it. Proton names processes
        "<kernel> Core<sm> CTA<k>" and threads "warp <w> (line <l>)" (``l`` > 0: overlapping
        scopes of one warp), and writes each CTA's clock cycles as µs at a nominal 1 GHz,
        offset by the CTA's start ("Init Time (ns)", globaltimer). Its times come back in ns
        at the real SM clock: ``clock_ghz`` when given (e.g. ``sm_clock_ghz`` measured by our
        recorder), else each CTA's cycles over its globaltimer extent (init to the start of its
        finalization); ``meta["clock_source"]`` says which. Without either: cycles.
        ``tasks`` groups warps into async tasks: the compile report's task layout
        (``report.tasks``: a warp group's first warp is its lane ``(cta, label, replica)``, its
        other warps ``"<label> w<k>"``) or a dict ``{warp: (task, replica)}``; without it each
        warp is a lane ``(cta, "warp <w>", 0)``. The SM goes to ``span.args["sm"]``.

        >>> Trace.from_chrome("proton.json", tasks=wb.compile(kernel, ...).tasks).lanes()[:1]  # doctest: +SKIP
        [(0, 'default', 0)]
        """
        if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
            import gzip
            with (gzip.open(data, "rt") if str(data).endswith(".gz") else open(data)) as f:
                data = json.load(f)
        events = data["traceEvents"] if isinstance(data, dict) else data
        other = data.get("otherData", {}).get("tlx_workbench") if isinstance(data, dict) else None
        ours = other is not None
        proc_names, thread_names = {}, {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                proc_names[e.get("pid")] = e["args"]["name"]
            elif e.get("ph") == "M" and e.get("name") == "thread_name":
                thread_names[(e.get("pid"), e.get("tid"))] = e["args"]["name"]

        def lane_name(e):
            pid, tid = e.get("pid", 0), e.get("tid", 0)
            return thread_names.get((pid, tid), tid if isinstance(tid, str) else f"tid {tid}")

        if not ours and any(e.get("ph") == "X" and _parse_proton_thread(lane_name(e)) for e in events):
            return _from_proton(cls, events, proc_names, lane_name, clock_ghz, tasks)
        time_unit = other["time_unit"] if ours else "ns"
        # our files: cycles written 1:1, ns written as µs
        scale = 1.0 if time_unit == "cycles" else 1e3
        pid_to_cta: dict = {}

        def cta_of(pid) -> int:
            if pid not in pid_to_cta:
                pid_to_cta[pid] = _cta_number(proc_names.get(pid, pid), pid, len(pid_to_cta))
            return pid_to_cta[pid]

        meta = other.get("meta", {}) if ours else {"imported": "chrome"}
        tr = cls(time_unit=time_unit, source=other["source"] if ours else "gpu", meta=meta)
        for e in events:
            if e.get("ph") != "X" or e.get("cat") in ("flow", "call_path") or e.get("bind_id") is not None:
                continue                    # arrows (we rebuild them)
            args = dict(e.get("args") or {})
            task, replica = _parse_lane_name(str(lane_name(e)))
            kind = e.get("cat") if e.get("cat") in SPAN_KINDS else _guess_kind(e.get("name", ""))
            start = float(e["ts"]) * scale
            tr.add_span(Span(cta=cta_of(e.get("pid", 0)), task=task, replica=replica, kind=kind, start=start,
                             end=start + float(e.get("dur", 0)) * scale, name=e.get("name", ""),
                             line=args.pop("line", None), file=args.pop("file", None),
                             barrier=args.pop("barrier", None), slot=args.pop("slot", None),
                             phase=args.pop("phase", args.pop("parity", None)), args=args))
        for e in events:
            if e.get("ph") == "i" and e.get("cat") == "barrier" and ours:
                a = e.get("args", {})
                tr.add_barrier_event(BarrierEvent(
                    cta=cta_of(e.get("pid", 0)), time=float(e["ts"]) * scale, barrier=a.get("barrier", "?"),
                    slot=a.get("slot", 0), kind=a.get("kind", "arrive"), task=a.get("task"),
                    replica=a.get("replica"), count=a.get("count", 0), bytes=a.get("bytes", 0),
                    phase=a.get("phase"), line=a.get("line"), pending_arrivals=a.get("pending_arrivals"),
                    pending_bytes=a.get("pending_bytes"), src_cta=a.get("src_cta")))
            elif e.get("ph") == "C":
                for k, v in (e.get("args") or {}).items():
                    tr.add_counter(Counter(k, float(e["ts"]) * scale, float(v), cta_of(e.get("pid", 0))))
        return tr

    @classmethod
    def load(cls, path: str) -> "Trace":
        return cls.from_chrome(path)

    def _repr_html_(self) -> str:
        """Static timeline + per-lane summary, drawn by the view registered in ``tlx_workbench.views``
        (``widgets/timeline.py``; for live views: tlx_workbench.widgets.TimelineWidget)."""
        from . import views
        return views.html_or_text(self)

    def __repr__(self):
        return (f"Trace({self.source}, {len(self.lanes())} lanes, {len(self.spans)} spans, "
                f"{len(self.barrier_events)} barrier events, {self.duration:.0f} {self.time_unit}"
                f"{self._recording_note()})")

    def _recording_note(self) -> str:
        """What a measured trace says about itself: events dropped, the SM clock, the recorder's cost."""
        parts = []
        ev = self.meta.get("events")
        if isinstance(ev, dict):
            early, late = ev.get("dropped_early", 0), ev.get("dropped_late", 0)
            if early or late:
                parts.append(", ".join(x for x in (f"{early} early events dropped (circular buffer)" if early else "",
                                                   f"{late} late events dropped (buffer full)" if late else "") if x))
            else:
                parts.append(f"every event of {len(self.meta.get('ctas', []))} CTAs recorded")
        if self.meta.get("totals") and not self.spans:
            lanes = sum(len(c["lanes"]) for c in self.meta["totals"])
            parts.append(f"per-site totals of {', '.join(sorted(self.meta.get('timed_ops') or ['?']))} "
                         f"for {lanes} lanes of {len(self.meta['totals'])} CTAs, no events")
        if self.meta.get("sm_clock_ghz"):
            parts.append(f"SM clock {self.meta['sm_clock_ghz']:.3g} GHz")
        oh = self.meta.get("overhead")
        if isinstance(oh, dict) and oh.get("plain_ns") and oh.get("instrumented_ns"):
            parts.append(f"instrumented {oh['instrumented_ns'] / 1e3:.1f} us vs plain {oh['plain_ns'] / 1e3:.1f} us "
                         f"({oh['instrumented_ns'] / oh['plain_ns'] - 1:+.1%})")
        return "; " + "; ".join(parts) if parts else ""


def _task_order(task: str) -> int:
    return 0 if task in ("default", "producer") else 1


def _lane_name(lane: tuple[int, str, int]) -> str:
    return f"{lane[1]}[{lane[2]}]"


def _parse_lane_name(name: str) -> tuple[str, int]:
    if name.endswith("]") and "[" in name:
        task, rep = name[:-1].rsplit("[", 1)
        if rep.isdigit():
            return task, int(rep)
    return name, 0


def _parse_proton_thread(name) -> "tuple[str, int] | None":
    """Proton's "warp 3 (line 1)" -> ("warp 3", 1); not Proton's: None."""
    name = str(name)
    if not name.startswith("warp ") or _trailing_int(name[5:]) is None:
        return None
    base, _, rest = name.partition(" (line ")
    return base, (_trailing_int(rest) or 0) if rest else 0


def _cta_number(name, pid, fallback: int) -> int:
    name = str(name)
    num = _trailing_int(name.rsplit("CTA", 1)[-1]) if "CTA" in name else None
    if num is None:
        num = pid if isinstance(pid, int) else fallback
    return num


def _warp_lanes(tasks) -> dict:
    """{warp id: (task, replica)} from a compile report's task layout or such a dict itself."""
    if tasks is None:
        return {}
    tasks = getattr(tasks, "tasks", tasks)          # a CompileReport itself
    if isinstance(tasks, dict):
        return {int(w): (str(t), int(r)) for w, (t, r) in tasks.items()}
    out = {}
    for t in tasks:
        label = getattr(t, "name", None) or str(t)
        for k in range(int(t.num_warps)):
            name = label if k == 0 else f"{label} w{k}"
            out[int(t.warp_start) + k] = (name, int(t.replica))
    return out


def _from_proton(cls, events, proc_names, lane_name, clock_ghz, tasks) -> "Trace":
    """Proton's instrumentation trace (see :meth:`Trace.from_chrome`)."""
    warp_lane = _warp_lanes(tasks)
    scopes = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") in ("flow", "call_path") or e.get("bind_id") is not None:
            continue
        parsed = _parse_proton_thread(lane_name(e))
        if parsed is not None:
            scopes.append((e, parsed))
    # per CTA process: Proton's init / post-final / finalization globaltimer times (ns)
    blocks: dict = {}
    for e, _ in scopes:
        b = blocks.setdefault(e.get("pid"), {"init": None, "final": None, "ends": []})
        a = e.get("args") or {}
        if "Init Time (ns)" in a:
            b["init"] = float(a["Init Time (ns)"])
            if "Post Final Time (ns)" in a:
                b["final"] = float(a["Post Final Time (ns)"]) - float(a.get("Finalization Time (ns)", 0))
    inits = [b["init"] for b in blocks.values() if b["init"] is not None]
    min_init = min(inits) if inits else 0.0

    def offset(pid) -> float:        # the CTA's start, ns after the first CTA's (Proton adds it to its cycles)
        b = blocks.get(pid)
        return b["init"] - min_init if b and b["init"] is not None else 0.0

    for e, _ in scopes:              # each CTA's cycles from its first event
        blocks[e.get("pid")]["ends"].append(float(e["ts"]) * 1e3 + float(e.get("dur", 0)) * 1e3 - offset(e.get("pid")))
    ghz_of, estimated = {}, []
    for pid, b in blocks.items():
        if clock_ghz:
            ghz_of[pid] = float(clock_ghz)
        elif b["init"] is not None and b["final"] is not None and b["final"] > b["init"] and b["ends"]:
            ghz_of[pid] = max(b["ends"]) / (b["final"] - b["init"])
            estimated.append(ghz_of[pid])
    in_ns = bool(blocks) and all(pid in ghz_of for pid in blocks)
    meta = {"imported": "proton", "recorder": "proton"}
    if clock_ghz:
        meta.update(sm_clock_ghz=float(clock_ghz), clock_source="given")
    elif in_ns:
        est = sorted(estimated)
        meta.update(sm_clock_ghz=round(est[len(est) // 2], 4), clock_source=(
            "estimated per CTA: its cycles over its globaltimer extent (Proton's init to finalization); "
            "a lower bound when the first scope starts after init"))
    else:
        meta["clock_source"] = "none: Proton's times are cycles (written as µs at a nominal 1 GHz)"
    tr = cls(time_unit="ns" if in_ns else "cycles", source="gpu", meta=meta)
    cta_ids: dict = {}
    for e, (task, row) in scopes:
        pid = e.get("pid")
        if pid not in cta_ids:
            cta_ids[pid] = _cta_number(proc_names.get(pid, pid), pid, len(cta_ids))
        args = dict(e.get("args") or {})
        for k in ("call_stack", "Init Time (ns)", "Post Final Time (ns)", "Finalization Time (ns)",
                  "Frequency (MHz)"):
            args.pop(k, None)
        if "Core" in str(pid):
            sm = _trailing_int(str(pid).rsplit("Core", 1)[-1])
            if sm is not None:
                args["sm"] = sm
            tr.meta.setdefault("kernel", str(pid).rsplit(" Core", 1)[0])
        warp = _trailing_int(task[len("warp "):])
        replica = 0
        if warp in warp_lane:
            task, replica = warp_lane[warp]
            args["warp"] = warp
        if row:
            task = f"{task} (line {row})"
        cyc0 = float(e["ts"]) * 1e3 - offset(pid)
        dur = float(e.get("dur", 0)) * 1e3
        if in_ns:
            start, length = offset(pid) + cyc0 / ghz_of[pid], dur / ghz_of[pid]
        else:
            start, length = cyc0 + offset(pid), dur
        name = e.get("name", "")
        tr.add_span(Span(cta=cta_ids[pid], task=task, replica=replica, kind=_guess_kind(name), start=start,
                         end=start + length, name=name, args=args))
    return tr


def _trailing_int(s: str) -> int | None:
    digits = ""
    for ch in s.strip():
        if ch.isdigit():
            digits += ch
        else:
            break
    return int(digits) if digits else None


def _guess_kind(name: str) -> str:
    n = name.lower()
    for key, kind in (("wait", "wait"), ("dot", "mma"), ("mma", "mma"), ("wgmma", "mma"), ("tma", "tma"),
                      ("load", "load"), ("store", "store"), ("arrive", "arrive")):
        if key in n:
            return kind
    return "compute"


def _barrier_args(e: BarrierEvent) -> dict:
    d = dataclasses.asdict(e)
    d.pop("cta")
    d.pop("time")
    return {k: v for k, v in d.items() if v is not None}


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        return {k: str(v) for k, v in x.items()} if isinstance(x, dict) else str(x)
