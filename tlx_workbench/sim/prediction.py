"""Whole-launch time from a few simulated CTAs: waves, tails and the DRAM floor.

A launch of thousands of CTAs is predicted from a handful: the CTAs along the grid's x axis
(where the work of a CTA changes: a causal attention's query tiles, a GEMM's tiles) are simulated,
each with the TMA/L2 share of every CTA resident with it (``sim/cost.py``: contention), and the time
of every other CTA is interpolated from them. The GPU's block scheduler is replayed on that: CTAs
start in launch order on the first free SM slot (``occupancy`` per SM), so more CTAs than slots make
waves and a tail. The result is at least the time the launch needs to move its tensors through DRAM
once. Cycles turn into microseconds at the calibrated clock under load.

>>> p = wb.predict(gemm_ws.launch, a, b, c, cfg, gpu="H200")           # doctest: +SKIP
>>> p.us, p.bound
(199.0, 'ctas')
"""
from __future__ import annotations

import dataclasses
import heapq
import html
import time
import warnings


@dataclasses.dataclass
class Prediction:
    """The predicted time of one launch, and what it rests on."""
    kernel: str
    gpu: str
    grid: tuple
    cycles: float
    clock_ghz: float
    sampled: dict                 # CTA id -> simulated cycles
    slots: int                    # CTAs resident at once (SMs x occupancy)
    waves: float                  # CTAs / slots
    cta_cycles: float             # the critical path over CTAs (waves and tail)
    hbm_floor_cycles: float       # the launch's tensors through DRAM once
    kernel_bytes: int
    sim_seconds: float
    calibration: str | None
    result: object = None         # the SimResult of the sampled CTAs (its trace)

    @property
    def us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    @property
    def bound(self) -> str:
        return "dram" if self.hbm_floor_cycles > self.cta_cycles else "ctas"

    def _lines(self):
        return [f"Prediction({self.kernel} on {self.gpu}, grid={self.grid}: {self.us:.1f} us = {self.cycles:.0f} cycles "
                f"at {self.clock_ghz:.3f} GHz)",
                f"  {len(self.sampled)} CTA(s) simulated ({', '.join(f'{k}: {v:.0f}' for k, v in self.sampled.items())} "
                f"cycles), {self.slots} resident at once, {self.waves:.2f} wave(s)",
                f"  critical path over CTAs {self.cta_cycles:.0f} cycles; DRAM floor {self.hbm_floor_cycles:.0f} cycles "
                f"({self.kernel_bytes / 2**20:.1f} MiB) -> {self.bound}-bound",
                f"  cost model: {'calibration of ' + self.calibration if self.calibration else 'estimates (not calibrated)'}"
                f"; simulated in {self.sim_seconds:.1f} s"]

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in (
            ("time", f"{self.us:.1f} µs ({self.cycles:.0f} cycles at {self.clock_ghz:.3f} GHz)"),
            ("grid", f"{self.grid}: {self.slots} resident, {self.waves:.2f} wave(s)"),
            ("CTAs simulated", ", ".join(f"{k}: {v:.0f}" for k, v in self.sampled.items())),
            ("bound", f"{self.bound} (CTAs {self.cta_cycles:.0f}, DRAM floor {self.hbm_floor_cycles:.0f} cycles)"),
            ("cost model", f"calibrated {self.calibration}" if self.calibration else "estimates"),
            ("simulated in", f"{self.sim_seconds:.1f} s")))
        return (f"<div><b>Prediction</b> {html.escape(self.kernel)} on {html.escape(self.gpu)}"
                f"<table>{rows}</table></div>")


def sample_ctas(grid, samples: int) -> list[int]:
    """CTA ids along x (y = z = 0), evenly spaced, first and last included."""
    gx = int(grid[0])
    n = max(1, min(samples, gx))
    if n == 1:
        return [0]
    return sorted({round(i * (gx - 1) / (n - 1)) for i in range(n)})


def _interp(xs, ys, x):
    if x <= xs[0]:
        return ys[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return ys[-1]


def schedule(grid, per_x: dict, slots: int) -> float:
    """Cycles until the last CTA ends when CTAs start in launch order (x fastest) on ``slots``
    slots, CTA (x, y, z) taking ``per_x`` interpolated at x."""
    gx, gy, gz = (int(v) for v in tuple(grid) + (1,) * (3 - len(grid)))
    xs = sorted(per_x)
    ys = [per_x[x] for x in xs]
    t_x = [_interp(xs, ys, x) for x in range(gx)]
    total = gx * gy * gz
    if total <= slots:
        return max(t_x)
    free = [0.0] * slots
    end = 0.0
    for i in range(total):
        start = heapq.heappop(free)
        done = start + t_x[i % gx]
        end = max(end, done)
        heapq.heappush(free, done)
    return end


def predict(fn, *args, gpu="H200", occupancy=1, samples=3, config=None, seed=0, numerics=False,
            **kwargs) -> Prediction:
    """Predict the time of the launch ``fn(*args, **kwargs)`` makes (a host function or a
    ``kernel[grid]``), from ``samples`` CTAs simulated at the real shape (see the module doc).
    ``occupancy``: CTAs per SM (the compile report's ``occupancy``); 1 for the library's kernels.
    ``numerics``: by default timing only (``simulate(numerics=False)``); True also computes the data."""
    from ..target import gpu_model
    from .api import simulate
    t0 = time.perf_counter()
    model = gpu_model(gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # "only k of n CTAs simulated": meant
        first = simulate(fn, *args, gpu=gpu, ctas=[0], on_deadlock="return", config=config, seed=seed,
                         occupancy=occupancy, numerics=numerics, **kwargs)
        if first.deadlock is not None:
            first.raise_for_errors()
        grid = first.grid
        ctas = sample_ctas(grid, samples)
        sampled = {0: first.cycles}
        res = first
        rest = [c for c in ctas if c != 0]
        if rest:
            res = simulate(fn, *args, gpu=gpu, ctas=rest, on_deadlock="return", config=config, seed=seed,
                           occupancy=occupancy, numerics=numerics, **kwargs)
            if res.deadlock is not None:
                res.raise_for_errors()
            for c in rest:
                ends = [s.end for s in res.trace.spans if s.cta == c]
                sampled[c] = max(ends) if ends else 0.0
    slots = model.sm_count * max(1, int(occupancy))
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    cta_cycles = schedule(grid, sampled, slots)
    cost = res.cost if hasattr(res, "cost") else None
    from .cost import cost_model
    cm = cost or cost_model(gpu)
    nbytes = int(getattr(first, "kernel_bytes", 0) or 0)
    floor = cm.hbm_floor_cycles(nbytes) if nbytes else 0.0
    cal = cm.calibration
    return Prediction(kernel=first.kernel, gpu=model.name, grid=tuple(grid), cycles=max(cta_cycles, floor),
                      clock_ghz=cm.time_clock_ghz, sampled=sampled, slots=slots, waves=total / slots,
                      cta_cycles=cta_cycles, hbm_floor_cycles=floor, kernel_bytes=nbytes,
                      sim_seconds=time.perf_counter() - t0, calibration=getattr(cal, "date", None), result=res)
