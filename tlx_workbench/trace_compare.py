"""Simulated vs measured: one kernel and config, task by task.

:func:`compare` lines up a simulated :class:`~tlx_workbench.trace.Trace` (cycles of the
simulated GPU) with a measured one (ns, from ``wb.profile``) per async task: each task's
waiting share (time in wait spans over the task's extent), its busy share (the rest: the
recorder times every wait, not every instruction, so "busy" is "not waiting" on both sides),
its extent in ns, and the error of each (shares in percentage points, extents relative).
Replicas of a task are averaged; the measured side averages its recorded CTAs unless
``measured_cta`` picks one. The view (``widgets/trace_compare.py``) draws both timelines on one
ns axis, task under task.

>>> cmp = compare(sim_result.trace, wb.profile(...))      # doctest: +SKIP
>>> cmp.task("task1").wait_error                          # doctest: +SKIP
-6.2
"""
from __future__ import annotations

import dataclasses
import statistics

from .trace import Trace


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
                 "wait_error_pts": t.wait_error, "sim_ns": t.sim_ns, "measured_ns": t.measured_ns,
                 "time_error": t.time_error} for t in self.tasks]

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
                       f"{'extent sim':>11} {'meas':>9} {'err':>7}"]
        for t in self.tasks:
            lines.append(f"{t.task:<14} {t.sim_busy:>9.0%} {t.measured_busy:>6.0%} {t.busy_error:>+6.1f}p  "
                         f"{t.sim_wait:>9.0%} {t.measured_wait:>6.0%} {t.wait_error:>+6.1f}p  "
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


def _task_stats(trace: Trace, ctas: list[int], to_ns: float) -> dict:
    """task -> (replicas, mean wait share, mean extent in ns, waiting share by barrier) over ``ctas``."""
    per: dict = {}
    for lane in trace.summary():
        if lane.cta not in ctas or lane.span <= 0:
            continue
        d = per.setdefault(lane.task, {"reps": set(), "wait": [], "ext": [], "on": {}})
        d["reps"].add(lane.replica)
        d["wait"].append(lane.wait_share)
        d["ext"].append(lane.span * to_ns)
        for bar, t in lane.waiting_by_barrier.items():
            d["on"].setdefault(bar, []).append(t / lane.span)
    out = {}
    for task, d in per.items():
        n = len(d["wait"])
        out[task] = (len(d["reps"]), statistics.fmean(d["wait"]), statistics.fmean(d["ext"]),
                     {b: sum(v) / n for b, v in d["on"].items()})
    return out


def _cta_extent(trace: Trace, cta: int) -> float:
    spans = list(trace.spans_of(cta=cta))
    return max(s.end for s in spans) - min(s.start for s in spans) if spans else 0.0


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
    sim_ctas = sorted({s.cta for s in sim.spans})
    meas_ctas = sorted({s.cta for s in measured.spans})
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
    st, mt = _task_stats(sim, [sc], s_ns), _task_stats(measured, mcs, m_ns)
    notes = []
    only_sim, only_meas = sorted(set(st) - set(mt)), sorted(set(mt) - set(st))
    if only_sim:
        notes.append(f"tasks only in the simulated trace: {', '.join(only_sim)}")
    if only_meas:
        notes.append(f"tasks only in the measured trace: {', '.join(only_meas)}")
    order = [t for t in dict.fromkeys(lane[1] for lane in sim.lanes()) if t in mt]
    rows = [TaskComparison(t, st[t][0], st[t][1], mt[t][1], st[t][2], mt[t][2], st[t][3], mt[t][3]) for t in order]
    return TraceComparison(rows, _cta_extent(sim, sc) * s_ns, statistics.fmean(_cta_extent(measured, c) for c in mcs) * m_ns,
                           s_ghz or 0.0, sc, mcs, str(measured.meta.get("kernel") or sim.meta.get("kernel") or ""),
                           sim, measured, notes)
