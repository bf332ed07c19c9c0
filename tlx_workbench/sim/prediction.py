"""Whole-launch time from its simulated CTAs: waves, tails and the DRAM floor.

Every CTA of the launch is simulated, timing only, each with the TMA/L2 share of every CTA resident with it
(``sim/cost.py``: contention): the CTAs run in waves (``sim/batch.py``), so a launch of thousands of CTAs costs
about one simulated CTA per distinct control flow (a persistent kernel's tile counts, a causal attention's query
tiles). ``samples=k`` simulates k CTAs along the grid's x axis instead and interpolates the others (the older,
cheaper estimate). The GPU's block scheduler is replayed on that: CTAs
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
    occupancy: int = 1            # CTAs per SM (from the compiled kernel's resources, unless given)
    spill_bytes: int = 0          # ptxas spill loads per thread, charged around each async_dot
    compiled: str = ""            # what the real compiler said (registers, SMEM, spills), or why it was not asked
    launch_us: float = 0.0        # the fixed cost of a launch as do_bench sees it (calibrated), added to the time

    @property
    def us(self) -> float:
        """What do_bench would report: the launch's cycles at the clock under load, plus the launch's fixed cost."""
        return self.cycles / (self.clock_ghz * 1e3) + self.launch_us

    @property
    def bound(self) -> str:
        return "dram" if self.hbm_floor_cycles > self.cta_cycles else "ctas"

    def _lines(self):
        return [f"Prediction({self.kernel} on {self.gpu}, grid={self.grid}: {self.us:.1f} us = {self.cycles:.0f} cycles "
                f"at {self.clock_ghz:.3f} GHz + {self.launch_us:.1f} us launch)",
                f"  {len(self.sampled)} CTA(s) simulated ({', '.join(f'{k}: {v:.0f}' for k, v in self.sampled.items())} "
                f"cycles), {self.slots} resident at once, {self.waves:.2f} wave(s)",
                f"  critical path over CTAs {self.cta_cycles:.0f} cycles; DRAM floor {self.hbm_floor_cycles:.0f} cycles "
                f"({self.kernel_bytes / 2**20:.1f} MiB) -> {self.bound}-bound",
                f"  compiled: {self.compiled}",
                f"  cost model: {'calibration of ' + self.calibration if self.calibration else 'estimates (not calibrated)'}"
                f"; simulated in {self.sim_seconds:.1f} s"]

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in (
            ("time", f"{self.us:.1f} µs ({self.cycles:.0f} cycles at {self.clock_ghz:.3f} GHz + {self.launch_us:.1f} µs "
                     f"launch)"),
            ("grid", f"{self.grid}: {self.slots} resident, {self.waves:.2f} wave(s)"),
            ("CTAs simulated", ", ".join(f"{k}: {v:.0f}" for k, v in self.sampled.items())),
            ("bound", f"{self.bound} (CTAs {self.cta_cycles:.0f}, DRAM floor {self.hbm_floor_cycles:.0f} cycles)"),
            ("compiled", self.compiled),
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


def schedule(grid, per_x: dict, slots: int) -> float:
    """Cycles until the last CTA ends when CTAs start in launch order (x fastest) on ``slots``
    slots, CTA (x, y, z) taking ``per_x`` interpolated at x."""
    gx, gy, gz = (int(v) for v in tuple(grid) + (1,) * (3 - len(grid)))
    import numpy as np
    xs = sorted(per_x)
    t_x = np.interp(np.arange(gx), xs, [per_x[x] for x in xs]).tolist()   # clamped at the sampled ends
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


def schedule_ctas(times: list, slots: int) -> float:
    """Cycles until the last CTA ends when CTAs, taking ``times`` (in launch order), start in that order on
    ``slots`` slots."""
    if len(times) <= slots:
        return max(times, default=0.0)
    free = [0.0] * slots
    end = 0.0
    for t in times:
        start = heapq.heappop(free)
        done = start + t
        end = max(end, done)
        heapq.heappush(free, done)
    return end


def compiled_facts(result, gpu) -> tuple:
    """(occupancy, spill loads per thread, wgmma serialized, summary) of the launch ``result`` simulated,
    compiled offline for ``gpu`` by the real compiler (its caches make a second call cheap); (None, 0, False,
    why) if it cannot."""
    if result.launch is None:
        return None, 0, False, "not compiled (no launch recorded)"
    return launch_facts(*result.launch, gpu)


def launch_facts(jit, args, kwargs, gpu) -> tuple:
    """:func:`compiled_facts` of the launch ``jit[grid](*args, **kwargs)`` before it is simulated."""
    from ..compiler import compile as wb_compile
    from ..compiler.launch_options import compile_kwargs
    from ..compiler.occupancy import occupancy, serializes_wgmma, spill_loads
    from ..target import gpu_model
    try:
        report = wb_compile(jit, *args, target=gpu, sass="lazy", **compile_kwargs(kwargs))
        res = report.resources
        occ = max(1, occupancy(res, gpu_model(gpu)))
        spills = spill_loads(report.ptxas_advisories)
        serial = serializes_wgmma(report.ptxas_advisories)
        return occ, spills, serial, (f"{res.registers} registers, {res.smem_bytes} B SMEM, {occ} CTA(s)/SM, "
                                     f"{spills} B/thread spill loads" + (", wgmma serialized" if serial else ""))
    except Exception as e:  # noqa: BLE001 - a prediction without the compiler's facts is still one
        return None, 0, False, f"not compiled ({type(e).__name__}: {str(e).splitlines()[0][:120]})"


def prediction_from(result, gpu, *, occupancy: int = 1, spills: int = 0, compiled: str = "",
                    sim_seconds: float = 0.0) -> Prediction:
    """The Prediction of a launch already simulated whole (every CTA; ``result`` a SimResult, simulated with
    this ``occupancy`` and ``spills``): what :func:`predict` says of it, without simulating it again (numerics
    do not change the cycles)."""
    from ..target import gpu_model
    from .cost import cost_model
    model = gpu_model(gpu)
    grid = tuple(result.grid)
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    slots = model.sm_count * max(1, int(occupancy))
    sampled = {c: result.cta_cycles.get(c, 0.0) for c in range(total)}
    cta_cycles = schedule_ctas([sampled[c] for c in range(total)], slots)
    cm = cost_model(model.name)
    nbytes = int(getattr(result, "kernel_bytes", 0) or 0)
    floor = cm.hbm_floor_cycles(nbytes) if nbytes else 0.0
    cal = cm.calibration
    return Prediction(kernel=result.kernel, gpu=model.name, grid=grid, cycles=max(cta_cycles, floor),
                      clock_ghz=cm.time_clock_ghz, sampled=sampled, slots=slots, waves=total / slots,
                      cta_cycles=cta_cycles, hbm_floor_cycles=floor, kernel_bytes=nbytes, sim_seconds=sim_seconds,
                      calibration=getattr(cal, "date", None), result=result, occupancy=max(1, int(occupancy)),
                      spill_bytes=int(spills), compiled=compiled,
                      launch_us=float(getattr(cal, "launch_us", None) or 0.0))


def predict(fn, *args, gpu="H200", occupancy=None, samples=None, config=None, seed=0, numerics=False, compile=True,
            spills=None, **kwargs) -> Prediction:
    """Predict the time of the launch ``fn(*args, **kwargs)`` makes (a host function or a
    ``kernel[grid]``), from every CTA simulated at the real shape (``samples=k``: from k CTAs along x, the
    others interpolated; see the module doc).
    ``compile``: ask the real compiler (offline) for the kernel's occupancy and register spills, which
    the cost model then charges; ``occupancy`` / ``spills`` given outright skip that.
    ``numerics``: by default timing only (``simulate(numerics=False)``); True also computes the data."""
    from ..target import gpu_model
    from .api import simulate
    t0 = time.perf_counter()
    model = gpu_model(gpu)

    def sim(ctas, occ, sp, serial):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # "only k of n CTAs simulated": meant
            r = simulate(fn, *args, gpu=gpu, ctas=ctas, on_deadlock="return", config=config, seed=seed,
                         occupancy=occ, numerics=numerics, spills=sp, serialized_wgmma=serial, **kwargs)
        if r.deadlock is not None:
            r.raise_for_errors()
        return r

    occ, sp, serial, note = occupancy or 1, spills or 0, False, "not compiled (compile=False)"
    first = sim([0], occ, sp, serial)
    if compile and (occupancy is None or spills is None):
        c_occ, c_sp, c_serial, note = compiled_facts(first, model.name)
        new = (occupancy or c_occ or 1, spills if spills is not None else c_sp, c_serial)
        if new != (occ, sp, serial):
            occ, sp, serial = new
            first = sim([0], occ, sp, serial)
    grid = first.grid
    slots = model.sm_count * max(1, int(occ))
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    if samples is None:
        res = sim(None, occ, sp, serial) if total > 1 else first
        return prediction_from(res, gpu, occupancy=occ, spills=sp, compiled=note,
                               sim_seconds=time.perf_counter() - t0)
    sampled = {0: first.cycles}
    res = first
    rest = [c for c in sample_ctas(grid, samples) if c != 0]
    if rest:
        res = sim(rest, occ, sp, serial)
        for c in rest:
            sampled[c] = res.cta_cycles.get(c, 0.0)
    cta_cycles = schedule(grid, sampled, slots)
    from .cost import cost_model
    cm = cost_model(gpu)
    nbytes = int(getattr(first, "kernel_bytes", 0) or 0)
    floor = cm.hbm_floor_cycles(nbytes) if nbytes else 0.0
    cal = cm.calibration
    return Prediction(kernel=first.kernel, gpu=model.name, grid=tuple(grid), cycles=max(cta_cycles, floor),
                      clock_ghz=cm.time_clock_ghz, sampled=sampled, slots=slots, waves=total / slots,
                      cta_cycles=cta_cycles, hbm_floor_cycles=floor, kernel_bytes=nbytes,
                      sim_seconds=time.perf_counter() - t0, calibration=getattr(cal, "date", None), result=res,
                      occupancy=int(occ), spill_bytes=int(sp), compiled=note,
                      launch_us=float(getattr(cal, "launch_us", None) or 0.0))
