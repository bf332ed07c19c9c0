"""Simulated vs measured: one kernel and config, task by task.

:func:`compare` lines up a simulated :class:`~tlx_workbench.trace.Trace` (cycles of the
simulated GPU) with a measured one (ns, from ``wb.profile``) per async task: its shares of the
task's extent, its extent in ns, and the error of each (shares in percentage points, extents
relative). Replicas of a task are averaged; the measured side averages its recorded CTAs unless
``measured_cta`` picks one. The view (``widgets/trace_compare.py``) draws both timelines on one
ns axis, task under task.

The shares, the same on both sides (:func:`shares`; ``tests/test_trace_compare.py`` pins them):

* a lane's **extent**: its first span's start to its last span's end (a ``totals=True`` profile:
  its task's first statement to its last, which is the same up to the few cycles before the first
  timed op);
* **barrier wait**: time inside the waits that stop a task until *another* task (or TMA) acts:
  ``barrier_wait`` (every one, satisfied ones too: their cost is what they take), ``named_barrier_wait``;
* **async wait**: time inside the waits for the task's *own* work in flight: ``async_dot_wait`` (its
  wgmma on the tensor core), ``async_descriptor_store_wait``, ``async_load_wait_group``; on a
  consumer of a wgmma pipeline this is the tensor core's time, not starvation;
* **wait** = barrier wait + async wait; **busy** = the rest of the extent ("not waiting": the
  recorder times ops, not instructions; a simulated ``async_dot`` span is the wgmma running on the
  tensor core, overlapping the wait for it, and is not counted twice);
* only the wait ops *both* sides time count (a measured trace says which in ``meta["timed_ops"]``,
  else by the ops it holds): a wait timed on one side only would be "busy" on the other. Those left
  out are named in ``notes``.

>>> cmp = compare(sim_result.trace, wb.profile(...))      # doctest: +SKIP
>>> cmp.task("task1").wait_error                          # doctest: +SKIP
-6.2
"""
from __future__ import annotations

import dataclasses
import statistics

from .trace import Trace

#: waits until another task (or TMA) acts
BARRIER_WAITS = ("barrier_wait", "named_barrier_wait")
#: waits for the task's own work in flight (its wgmma, its TMA stores, its cp.async groups)
ASYNC_WAITS = ("async_dot_wait", "async_descriptor_store_wait", "async_load_wait_group")
WAITS = BARRIER_WAITS + ASYNC_WAITS


@dataclasses.dataclass
class LaneShares:
    """One lane's time (the trace's unit): extent, and per wait site (``op@line``) its count, total, longest."""
    cta: int
    task: str
    replica: int
    extent: float
    waits: dict                      # "barrier_wait@103" -> {"op", "line", "barrier", "count", "time", "max"}

    def time_in(self, ops) -> float:
        return sum(w["time"] for w in self.waits.values() if w["op"] in ops)

    @property
    def barrier_wait(self) -> float:
        return self.time_in(BARRIER_WAITS) / self.extent if self.extent else 0.0

    @property
    def async_wait(self) -> float:
        return self.time_in(ASYNC_WAITS) / self.extent if self.extent else 0.0

    @property
    def wait(self) -> float:
        return self.barrier_wait + self.async_wait


def shares(trace: Trace, ctas=None, ops=None) -> list[LaneShares]:
    """Each lane's extent and wait sites (see the module doc), from spans or from a ``totals=True`` profile.

    ``ctas``: the CTAs to read (default all); ``ops``: the wait ops to count (default :data:`WAITS`).

    >>> [round(l.wait, 2) for l in shares(sim_result.trace, ctas=[0])]      # doctest: +SKIP
    [0.88, 0.95, 0.95]
    """
    ops = set(WAITS if ops is None else ops)
    out = []
    if trace.meta.get("totals") and not trace.spans:
        for c in trace.meta["totals"]:
            if ctas is not None and c["cta"] not in ctas:
                continue
            for ln in c["lanes"]:
                waits = {f"{w['op']}@{w['line']}": {"op": w["op"], "line": w["line"], "barrier": w["barrier"],
                                                     "count": w["count"], "time": float(w["cycles"]),
                                                     "max": float(w["max"])}
                         for w in ln["sites"] if w["op"] in ops}
                out.append(LaneShares(c["cta"], ln["task"], ln["replica"], float(ln["cycles"]), waits))
        return out
    by_lane: dict = {}
    for sp in trace.spans:
        if ctas is None or sp.cta in ctas:
            by_lane.setdefault(sp.lane, []).append(sp)
    for lane in trace.lanes():
        spans = by_lane.get(lane)
        if not spans:
            continue
        waits: dict = {}
        for sp in spans:
            if sp.name in ops:
                w = waits.setdefault(f"{sp.name}@{sp.line}", {"op": sp.name, "line": sp.line, "barrier": sp.barrier,
                                                             "count": 0, "time": 0.0, "max": 0.0, "durations": []})
                w["count"] += 1
                w["time"] += sp.duration
                w["max"] = max(w["max"], sp.duration)
                w["durations"].append(sp.duration)
        for w in waits.values():
            d = sorted(w.pop("durations"))
            w["median"] = d[len(d) // 2]
        extent = max(sp.end for sp in spans) - min(sp.start for sp in spans)
        out.append(LaneShares(*lane, extent, waits))
    return out


def timed_ops(trace: Trace) -> set:
    """The wait ops a trace times: a measured one's ``meta["timed_ops"]``, else the ops its spans or totals hold."""
    if trace.meta.get("timed_ops"):
        return set(trace.meta["timed_ops"]) & set(WAITS)
    if trace.meta.get("totals") and not trace.spans:
        return {w["op"] for c in trace.meta["totals"] for ln in c["lanes"] for w in ln["sites"]} & set(WAITS)
    return {s.name for s in trace.spans} & set(WAITS)


@dataclasses.dataclass
class TaskComparison:
    """One async task, simulated and measured (shares 0..1, extents in ns)."""
    task: str
    replicas: int
    sim_wait: float
    measured_wait: float
    sim_ns: float
    measured_ns: float
    sim_waiting_on: dict = dataclasses.field(default_factory=dict)      # barrier -> share of the extent
    measured_waiting_on: dict = dataclasses.field(default_factory=dict)
    sim_barrier_wait: float = 0.0           # the wait split: barrier waits (another task), async waits (own work)
    measured_barrier_wait: float = 0.0
    sim_waits: dict = dataclasses.field(default_factory=dict)          # "op@line" -> count, ns, share (per replica)
    measured_waits: dict = dataclasses.field(default_factory=dict)

    @property
    def sim_async_wait(self) -> float:
        return self.sim_wait - self.sim_barrier_wait

    @property
    def measured_async_wait(self) -> float:
        return self.measured_wait - self.measured_barrier_wait

    @property
    def barrier_wait_error(self) -> float:
        """Simulated minus measured barrier-wait share, in percentage points."""
        return 100.0 * (self.sim_barrier_wait - self.measured_barrier_wait)

    @property
    def async_wait_error(self) -> float:
        """Simulated minus measured async-wait share, in percentage points."""
        return 100.0 * (self.sim_async_wait - self.measured_async_wait)

    @property
    def sim_busy(self) -> float:
        return 1.0 - self.sim_wait

    @property
    def measured_busy(self) -> float:
        return 1.0 - self.measured_wait

    @property
    def wait_error(self) -> float:
        """Simulated minus measured waiting share, in percentage points."""
        return 100.0 * (self.sim_wait - self.measured_wait)

    @property
    def busy_error(self) -> float:
        """Simulated minus measured busy share, in percentage points."""
        return 100.0 * (self.sim_busy - self.measured_busy)

    @property
    def time_error(self) -> float | None:
        """Simulated over measured extent, minus 1 (0.25: the simulator says 25 % longer)."""
        return self.sim_ns / self.measured_ns - 1.0 if self.measured_ns else None


@dataclasses.dataclass
class TraceComparison:
    """Per-task busy/wait shares and extents of a simulated and a measured run, and their errors."""
    tasks: list[TaskComparison]
    sim_ns: float                   # the compared simulated CTA's extent
    measured_ns: float              # the measured CTAs' mean extent
    sim_clock_ghz: float
    sim_cta: int
    measured_ctas: list[int]
    kernel: str = ""
    sim: Trace = dataclasses.field(repr=False, default=None)
    measured: Trace = dataclasses.field(repr=False, default=None)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def time_error(self) -> float | None:
        """Simulated over measured CTA extent, minus 1."""
        return self.sim_ns / self.measured_ns - 1.0 if self.measured_ns else None

    def task(self, name: str) -> TaskComparison:
        for t in self.tasks:
            if t.task == name:
                return t
        raise KeyError(f"no task {name!r}: the compared tasks are {[t.task for t in self.tasks]}")

    def rows(self) -> list[dict]:
        return [{"task": t.task, "replicas": t.replicas, "sim_busy": t.sim_busy, "measured_busy": t.measured_busy,
                 "busy_error_pts": t.busy_error, "sim_wait": t.sim_wait, "measured_wait": t.measured_wait,
                 "wait_error_pts": t.wait_error, "sim_barrier_wait": t.sim_barrier_wait,
                 "measured_barrier_wait": t.measured_barrier_wait, "barrier_wait_error_pts": t.barrier_wait_error,
                 "sim_async_wait": t.sim_async_wait, "measured_async_wait": t.measured_async_wait,
                 "async_wait_error_pts": t.async_wait_error, "sim_ns": t.sim_ns, "measured_ns": t.measured_ns,
                 "time_error": t.time_error, "sim_waits": t.sim_waits, "measured_waits": t.measured_waits}
                for t in self.tasks]

    def within(self, points: float = 10.0) -> bool:
        """Every task's busy, barrier-wait and async-wait shares within ``points`` percentage points."""
        return all(abs(t.busy_error) <= points and abs(t.barrier_wait_error) <= points
                   and abs(t.async_wait_error) <= points for t in self.tasks)

    def to_dict(self) -> dict:
        """Plain data (JSON-able): the table, the CTA extents and their error."""
        return {"kernel": self.kernel, "sim_cta": self.sim_cta, "measured_ctas": self.measured_ctas,
                "sim_clock_ghz": self.sim_clock_ghz, "sim_ns": self.sim_ns, "measured_ns": self.measured_ns,
                "time_error": self.time_error, "tasks": self.rows(), "notes": self.notes}

    def __str__(self) -> str:
        head = (f"{self.kernel or 'kernel'}: simulated CTA {self.sim_cta} ({self.sim_clock_ghz:.3g} GHz) vs measured "
                f"CTA{'s' if len(self.measured_ctas) > 1 else ''} {', '.join(map(str, self.measured_ctas))}: "
                f"{self.sim_ns / 1e3:.1f} us vs {self.measured_ns / 1e3:.1f} us ({_pct(self.time_error)})")
        lines = [head, f"{'task':<14} {'busy sim':>9} {'meas':>6} {'err':>7}  {'wait sim':>9} {'meas':>6} {'err':>7}  "
                       f"{'barrier':>7} {'meas':>5}  {'async':>5} {'meas':>5}  "
                       f"{'extent sim':>11} {'meas':>9} {'err':>7}"]
        for t in self.tasks:
            lines.append(f"{t.task:<14} {t.sim_busy:>9.0%} {t.measured_busy:>6.0%} {t.busy_error:>+6.1f}p  "
                         f"{t.sim_wait:>9.0%} {t.measured_wait:>6.0%} {t.wait_error:>+6.1f}p  "
                         f"{t.sim_barrier_wait:>7.0%} {t.measured_barrier_wait:>5.0%}  "
                         f"{t.sim_async_wait:>5.0%} {t.measured_async_wait:>5.0%}  "
                         f"{t.sim_ns / 1e3:>9.1f}us {t.measured_ns / 1e3:>7.1f}us {_pct(t.time_error):>7}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        from . import views
        return views.html_or_text(self)


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _task_stats(trace: Trace, ctas: list[int], to_ns: float, ops) -> dict:
    """task -> (replicas, mean wait share, mean extent in ns, waiting share by barrier, mean barrier-wait
    share, per wait site: count, ns and share per lane) over ``ctas``."""
    per: dict = {}
    for lane in shares(trace, ctas, ops):
        if lane.extent <= 0:
            continue
        d = per.setdefault(lane.task, {"reps": set(), "wait": [], "bar": [], "ext": [], "on": {}, "sites": {}})
        d["reps"].add(lane.replica)
        d["wait"].append(lane.wait)
        d["bar"].append(lane.barrier_wait)
        d["ext"].append(lane.extent * to_ns)
        for key, w in lane.waits.items():
            on = w["barrier"] or w["op"]
            d["on"].setdefault(on, []).append(w["time"] / lane.extent)
            site = d["sites"].setdefault(key, {"op": w["op"], "line": w["line"], "count": 0, "ns": 0.0, "share": 0.0,
                                               "max_ns": 0.0, "median_ns": []})
            site["count"] += w["count"]
            site["ns"] += w["time"] * to_ns
            site["share"] += w["time"] / lane.extent
            site["max_ns"] = max(site["max_ns"], w["max"] * to_ns)
            if "median" in w:
                site["median_ns"].append(w["median"] * to_ns)
    out = {}
    for task, d in per.items():
        n = len(d["wait"])
        sites = {}
        for key, site in d["sites"].items():
            med = site.pop("median_ns")
            sites[key] = dict(site, count=site["count"] / n, ns=site["ns"] / n, share=site["share"] / n,
                              median_ns=statistics.median(med) if med else None)
        out[task] = (len(d["reps"]), statistics.fmean(d["wait"]), statistics.fmean(d["ext"]),
                     {b: sum(v) / n for b, v in d["on"].items()}, statistics.fmean(d["bar"]), sites)
    return out


def _cta_extent(trace: Trace, cta: int) -> float:
    spans = list(trace.spans_of(cta=cta))
    if not spans and trace.meta.get("totals"):
        return max((ln["cycles"] for c in trace.meta["totals"] if c["cta"] == cta for ln in c["lanes"]), default=0.0)
    return max(s.end for s in spans) - min(s.start for s in spans) if spans else 0.0


def _ctas(trace: Trace) -> list[int]:
    if not trace.spans and trace.meta.get("totals"):
        return sorted(c["cta"] for c in trace.meta["totals"])
    return sorted({s.cta for s in trace.spans})


def _ns_per_unit(trace: Trace, clock_ghz: float | None, side: str) -> tuple[float, float | None]:
    """(ns per time unit, the clock used) of one trace."""
    if trace.time_unit == "ns":
        return 1.0, trace.meta.get("sm_clock_ghz")
    # the simulator's time clock (the cost model's, measured where calibrated), a measured SM clock
    ghz = clock_ghz or trace.meta.get("clock_ghz") or trace.meta.get("sm_clock_ghz")
    if ghz is None and trace.meta.get("gpu"):
        from .target import gpu_model
        ghz = gpu_model(trace.meta["gpu"]).clock_ghz
    if not ghz:
        raise ValueError(f"the {side} trace is in {trace.time_unit} and no clock says how long a cycle is: "
                         f"pass {'sim' if side == 'simulated' else 'measured'}_clock_ghz=")
    return 1.0 / float(ghz), float(ghz)


def compare(sim: Trace, measured: Trace, *, sim_cta: int | None = None, measured_cta: int | None = None,
            sim_clock_ghz: float | None = None, measured_clock_ghz: float | None = None) -> TraceComparison:
    """Line up a simulated and a measured trace of the same kernel and config, task by task.

    ``sim_cta``: the simulated CTA to compare (default: its first); ``measured_cta``: one measured
    CTA (default: every recorded CTA, averaged). Simulated cycles become ns at ``sim_clock_ghz``
    (default: the simulator's time clock, ``trace.meta["clock_ghz"]``, else the simulated GPU's
    ``target.gpu_model(trace.meta["gpu"]).clock_ghz``). Tasks
    are matched by name; a task on one side only is named in ``notes``.

    >>> cmp = compare(wb.simulate(...).trace, wb.profile(...))   # doctest: +SKIP
    >>> cmp.time_error                                           # doctest: +SKIP
    0.81
    """
    sim_ctas = _ctas(sim)
    meas_ctas = _ctas(measured)
    if not sim_ctas or not meas_ctas:
        raise ValueError("compare needs spans on both sides: "
                         f"{len(sim.spans)} simulated, {len(measured.spans)} measured")
    sc = sim_ctas[0] if sim_cta is None else sim_cta
    if sc not in sim_ctas:
        raise ValueError(f"the simulated trace has no CTA {sc} (it has {sim_ctas})")
    mcs = meas_ctas if measured_cta is None else [measured_cta]
    if measured_cta is not None and measured_cta not in meas_ctas:
        raise ValueError(f"the measured trace has no CTA {measured_cta} (it recorded {meas_ctas})")
    s_ns, s_ghz = _ns_per_unit(sim, sim_clock_ghz, "simulated")
    m_ns, _ = _ns_per_unit(measured, measured_clock_ghz, "measured")
    sim_ops, meas_ops = timed_ops(sim), timed_ops(measured)
    common = sim_ops & meas_ops
    notes = []
    for side, ops in (("simulated", sim_ops - meas_ops), ("measured", meas_ops - sim_ops)):
        if ops:
            notes.append(f"waits only the {side} trace times, left out of both sides' shares: {', '.join(sorted(ops))}")
    st, mt = _task_stats(sim, [sc], s_ns, common), _task_stats(measured, mcs, m_ns, common)
    only_sim, only_meas = sorted(set(st) - set(mt)), sorted(set(mt) - set(st))
    if only_sim:
        notes.append(f"tasks only in the simulated trace: {', '.join(only_sim)}")
    if only_meas:
        notes.append(f"tasks only in the measured trace: {', '.join(only_meas)}")
    order = [t for t in dict.fromkeys(lane[1] for lane in sim.lanes()) if t in mt]
    rows = [TaskComparison(t, st[t][0], st[t][1], mt[t][1], st[t][2], mt[t][2], st[t][3], mt[t][3], st[t][4], mt[t][4],
                           st[t][5], mt[t][5]) for t in order]
    return TraceComparison(rows, _cta_extent(sim, sc) * s_ns, statistics.fmean(_cta_extent(measured, c) for c in mcs) * m_ns,
                           s_ghz or 0.0, sc, mcs, str(measured.meta.get("kernel") or sim.meta.get("kernel") or ""),
                           sim, measured, notes)
