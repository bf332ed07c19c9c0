"""GPU timing, in one place: :func:`time_call` times a callable with ``triton.testing.do_bench`` (a warm-up, the L2
flushed before each run, the median of the runs), and on request its CUDA-graph replay (the GPU's time alone) and
its host time per call, and says whether the measurement is launch-bound. ``wb.bench``, the explorer's measured
stage, the library's autotuner, the calibration suite and the benchmark suites all time through it.

>>> t = time_call(lambda: torch.matmul(a, b), graph=True, host=True)    # doctest: +SKIP
>>> t                                                                   # doctest: +SKIP
Timing(matmul: do_bench median 612.3 us (p20-p80 608.1-615.0 us, 161 runs), graph 600.2 us, host 11.4 us/call: ...)

A measurement is *launch-bound* when do_bench's time is well above the CUDA-graph replay's (more than
:data:`LAUNCH_BOUND_RATIO` times: the launch, not the kernel, fills the window) or when the host takes at least as
long per call as the GPU does (a caller's thread is then the slower side); such a time says little about the kernel.
"""
from __future__ import annotations

import dataclasses
import html
import math
import statistics
import time
from typing import Callable

from .launch import require_gpu

#: do_bench's time over the graph replay's above which a measurement is launch-bound: a kernel's own time is the
#: same in both, while do_bench adds the launch (host and driver) to each run and a graph replays launches at once
LAUNCH_BOUND_RATIO = 1.25


def do_bench_runs(fn: Callable, warmup: float = 25, rep: float = 100) -> list[float]:
    """Milliseconds of each run of one ``triton.testing.do_bench`` of ``fn`` (``warmup`` ms of warm-up, then runs
    for ``rep`` ms, the L2 flushed before each). A do_bench that answers with one number (the CLI's, which answers
    with the simulator's prediction) gives one run.

    >>> statistics.median(do_bench_runs(lambda: torch.matmul(a, b)))    # doctest: +SKIP
    0.6123
    """
    import triton.testing
    times = triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="all")
    return [float(times)] if isinstance(times, (int, float)) else [float(t) for t in times]


def event_ms(fn: Callable):
    """``fn()`` once between two CUDA events: (what it returned, milliseconds), the GPU synchronized. For a launch
    long enough that one reading is the measurement (the calibration's loops), where do_bench's repeats would
    only cost time.

    >>> out, ms = event_ms(lambda: launch_mma("float16", 256, 2, iters=iters))    # doctest: +SKIP
    """
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    torch.cuda.synchronize()
    return out, start.elapsed_time(end)


def graph_ms(fn: Callable, per_graph: int = 20, replays: int = 10, flush: bool = False) -> float:
    """Milliseconds per call of a CUDA graph of ``per_graph`` calls of ``fn``, replayed (median of ``replays``):
    the GPU's time with no launch cost and no L2 flush between calls. With ``flush`` the L2 is flushed before each
    call as do_bench flushes it (each call starts as cold as in do_bench's window), and the flushes' own time, a
    graph of the flushes alone replayed beside it, is taken off. Raises what capture raises for a callable that
    cannot be captured (one that synchronizes, or allocates outside the graph's pool).

    >>> graph_ms(lambda: torch.matmul(a, b))       # doctest: +SKIP
    0.6002
    >>> graph_ms(lambda: torch.matmul(a, b), flush=True)       # doctest: +SKIP
    0.6108
    """
    import torch
    fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):        # warm on the capture stream (allocator pools), as torch's docs do
        fn()
    torch.cuda.current_stream().wait_stream(side)
    clear = _l2_flush() if flush else None

    def capture(call):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(per_graph):
                if clear is not None:
                    clear()
                if call is not None:
                    call()
        g.replay()
        torch.cuda.synchronize()
        return g

    def replayed(g):
        return statistics.median(event_ms(g.replay)[1] / per_graph for _ in range(replays))

    g = capture(fn)
    ms = replayed(g)
    del g
    if clear is not None:
        g = capture(None)
        ms -= replayed(g)
        del g
    return ms


def _l2_flush() -> Callable:
    """What do_bench runs before each timed call: Triton's own L2 flush (zeroing its 256 MB buffer)."""
    import triton
    driver = triton.runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    return lambda: driver.clear_cache(cache)


def host_ms(fn: Callable, calls: int = 100, runs: int = 5) -> float:
    """Median over ``runs`` of the host milliseconds per call of ``calls`` calls of ``fn`` without a sync between
    them (warm): what a caller's thread spends before its next line runs.

    >>> host_ms(lambda: torch.matmul(a, b), calls=300) * 1e3     # doctest: +SKIP
    11.4
    """
    import torch
    fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        per.append((t1 - t0) / calls * 1e3)
    return statistics.median(per)


def quantile(sorted_xs: list[float], p: float) -> float:
    """The ``p`` quantile of sorted values, linearly interpolated (``torch.quantile``'s, as do_bench's
    ``quantiles=`` takes).

    >>> quantile([1.0, 2.0, 3.0, 4.0], 0.5), quantile([1.0, 2.0, 3.0, 4.0], 0.2)
    (2.5, 1.6)
    """
    if not sorted_xs:
        return math.nan
    at = p * (len(sorted_xs) - 1)
    lo = int(math.floor(at))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (at - lo)


def _us(ms: float) -> str:
    return f"{ms * 1e3:.1f} us" if ms < 1.0 else f"{ms:.3f} ms"


@dataclasses.dataclass(repr=False)
class Timing:
    """One callable timed: every do_bench run's milliseconds (``runs_ms``, pooled over ``repeat_medians_ms``'s
    repeats), the do_bench window (``warmup_ms``, ``rep_ms``), and where asked the CUDA-graph replay's and the
    host's milliseconds per call (``graph_ms``, ``host_ms``; ``graph_error`` when the callable could not be
    captured). ``median_ms`` is the figure to quote; ``launch_bound`` says whether it measures the kernel."""
    name: str
    runs_ms: list[float]
    repeat_medians_ms: list[float]
    warmup_ms: float = 25
    rep_ms: float = 100
    graph_ms: float | None = None
    host_ms: float | None = None
    graph_error: str | None = None

    def __post_init__(self):
        self.runs_ms = sorted(self.runs_ms)

    @property
    def median_ms(self) -> float:
        return quantile(self.runs_ms, 0.5)

    @property
    def mean_ms(self) -> float:
        """The mean of every run (``triton.testing.do_bench``'s default figure; ``median_ms`` is the one to quote)."""
        return statistics.fmean(self.runs_ms) if self.runs_ms else math.nan

    @property
    def p20_ms(self) -> float:
        return quantile(self.runs_ms, 0.2)

    @property
    def p80_ms(self) -> float:
        return quantile(self.runs_ms, 0.8)

    @property
    def min_ms(self) -> float:
        return self.runs_ms[0] if self.runs_ms else math.nan

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats' medians: how far the repeats disagree."""
        reps, med = self.repeat_medians_ms, self.median_ms
        return (max(reps) - min(reps)) / med if reps and med else 0.0

    @property
    def gpu_ms(self) -> float:
        """The GPU's time per call: the graph replay's where measured, else do_bench's median."""
        return self.graph_ms if self.graph_ms is not None else self.median_ms

    @property
    def launch_bound(self) -> bool | None:
        """Whether the time is the launch's rather than the kernel's; None when neither the graph replay nor the
        host time was measured (``time_call(..., graph=True, host=True)`` tells)."""
        if self.graph_ms is None and self.host_ms is None:
            return None
        return bool(self.reasons())

    def reasons(self) -> list[str]:
        """Why the measurement is launch-bound (empty: it is not, as far as what was measured tells)."""
        out = []
        if self.graph_ms is not None and self.median_ms > LAUNCH_BOUND_RATIO * self.graph_ms:
            out.append(f"do_bench's {_us(self.median_ms)} is {self.median_ms / self.graph_ms:.1f}x the graph "
                       f"replay's {_us(self.graph_ms)}: the launch, not the kernel, fills the window")
        if self.host_ms is not None and self.host_ms >= self.gpu_ms:
            out.append(f"the host takes {_us(self.host_ms)} a call, the GPU {_us(self.gpu_ms)}: the caller's "
                       "thread is the slower side")
        return out

    @property
    def verdict(self) -> str:
        lb = self.launch_bound
        if lb is None:
            return "launch-bound or not: not measured (graph=True, host=True)"
        return "launch-bound" if lb else "GPU-bound"

    def summary(self) -> dict:
        """The figures as plain values (what a worker sends back, a store row keeps)."""
        return dict(median_ms=self.median_ms, p20_ms=self.p20_ms, p80_ms=self.p80_ms, min_ms=self.min_ms,
                    repeat_medians_ms=list(self.repeat_medians_ms), samples=len(self.runs_ms),
                    graph_ms=self.graph_ms, host_ms=self.host_ms, graph_error=self.graph_error,
                    launch_bound=self.launch_bound)

    def _parts(self) -> list[str]:
        parts = [f"do_bench median {_us(self.median_ms)} (p20-p80 {_us(self.p20_ms)}-{_us(self.p80_ms)}, "
                 f"{len(self.runs_ms)} runs)"]
        if self.graph_ms is not None:
            parts.append(f"graph {_us(self.graph_ms)}")
        elif self.graph_error:
            parts.append(f"graph not captured ({self.graph_error})")
        if self.host_ms is not None:
            parts.append(f"host {_us(self.host_ms)}/call")
        return parts

    def __repr__(self) -> str:
        head = f"Timing({self.name}: {', '.join(self._parts())}: {self.verdict})"
        return "\n".join([head] + [f"  {r}" for r in self.reasons()])

    def _repr_html_(self) -> str:
        colour = {"launch-bound": "#c0392b", "GPU-bound": "#27ae60"}.get(self.verdict, "#7f8c8d")
        items = "".join(f"<li>{html.escape(p)}</li>" for p in self._parts() + self.reasons())
        return (f"<div class='tlxwb-timing'><b>{html.escape(self.name)}</b> "
                f"<span style='color:{colour}'>{html.escape(self.verdict)}</span>"
                f"<ul>{items}</ul><small>do_bench window: {self.warmup_ms:g} ms warm-up, {self.rep_ms:g} ms "
                f"measured, L2 flushed before each run</small></div>")


def time_call(fn: Callable, *, name: str | None = None, warmup: float = 25, rep: float = 100, repeats: int = 1,
              graph: bool = False, host: bool = False, host_calls: int = 100, per_graph: int = 20) -> Timing:
    """Time ``fn()`` (warm: compiled and run once before) with ``repeats`` do_bench windows of ``warmup`` ms
    warm-up and ``rep`` ms measured, the L2 flushed before each run; with ``graph`` also its CUDA-graph replay
    (``per_graph`` calls a graph), with ``host`` its host time per call (``host_calls`` calls without a sync).

    >>> time_call(lambda: torch.matmul(a, b), graph=True).launch_bound      # doctest: +SKIP
    False
    """
    name = name or getattr(fn, "__name__", "call").replace("<lambda>", "call")
    if graph or host:
        require_gpu(f"timing {name}'s " + ("CUDA-graph replay" if graph else "host time"))
    runs, medians = [], []
    for _ in range(repeats):
        times = do_bench_runs(fn, warmup, rep)
        medians.append(statistics.median(times))
        runs.extend(times)
    t = Timing(name, runs, medians, warmup, rep)
    if graph:
        try:
            t.graph_ms = graph_ms(fn, per_graph)
        except Exception as e:  # noqa: BLE001 - not capturable: do_bench's time stands, the reason is kept
            t.graph_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    if host:
        t.host_ms = host_ms(fn, host_calls)
    return t
