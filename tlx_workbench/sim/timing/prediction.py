"""Whole-launch time from its simulated CTAs: waves, tails and the DRAM floor.

Every CTA of the launch is simulated, timing only, each with the TMA/L2 share of every CTA resident with it
(``sim/timing/cost.py``: contention): the CTAs run in waves (``sim/schedule/batch.py``), so a launch of thousands of CTAs costs
about one simulated CTA per distinct control flow (a persistent kernel's tile counts, a causal attention's query
tiles). ``samples=k`` simulates k CTAs along the grid's x axis instead and interpolates the others (the older,
cheaper estimate). The GPU's block scheduler is replayed on that: CTAs
start in launch order on the first free SM slot (``occupancy`` per SM), so more CTAs than slots make
waves and a tail. The simulator runs wgmmas at the bare wgmma loop's peak; a pipeline's copy load slows them
(``cost.copy_load_stretch``: the tensor-busy share of the critical path stretches, its waits and epilogue stay).
The result is at least the time the launch needs to move its tensors through DRAM once, and at least the time its
tensor work takes on every SM at the best rate a launch sustains (the roof: no launch is predicted faster than the
chip sustains). Cycles turn into microseconds at the clock
the board holds for this launch (``cost.PowerModel``): the boost clock while its power draw fits under the cap,
lower for a long tensor-core-bound launch; ``window`` says how the launch is timed ("do_bench": the L2 flush
between launches, as the project measures; "sustained": back to back; "single": once, after idle).

>>> p = wb.predict(gemm_ws.launch, a, b, c, cfg, gpu="H200")           # doctest: +SKIP
>>> p.us, p.bound                                                       # doctest: +SKIP
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
    spill_bytes: float = 0        # spill bytes per thread charged at the L1 rate: per iteration around its async_dots,
    #                               or (a cost.SpillsPerWgmma, read off the compiled loop) per wgmma instruction;
    #                               scaled by the L1 rate over the measured spill rate when the locals miss the L1
    compiled: str = ""            # what the real compiler said (registers, SMEM, spills), or why it was not asked
    launch_us: float = 0.0        # the fixed cost of a launch as do_bench sees it (calibrated), added to the time
    tensor_cycles: float = 0.0    # the tensor cores' busy cycles at the wgmma loop's peak, summed over CTAs
    roof_cycles: float = 0.0      # the launch's tensor work on every SM at the best rate a launch sustains
    copy_stretch: float = 1.0     # the critical path's stretch once its wgmmas run at their rate under copy load
    clock: object = None          # the LaunchClock: the clock this launch runs at, and why
    window: str = "do_bench"

    @property
    def us(self) -> float:
        """What the window's timer would report (do_bench by default): the launch's cycles at the clock it runs at,
        plus the launch's fixed cost."""
        return self.cycles / (self.clock_ghz * 1e3) + self.launch_us

    @property
    def bound(self) -> str:
        """What sets the time: "ctas" (the simulated critical path, its wgmmas at their rate under copy load),
        "tensor roof" or "dram"."""
        body = self.cta_cycles * self.copy_stretch
        worst = max(body, self.roof_cycles, self.hbm_floor_cycles)
        if worst == body:
            return "ctas"
        return "tensor roof" if worst == self.roof_cycles else "dram"

    def _clock_text(self) -> str:
        return str(self.clock) if self.clock is not None else f"{self.clock_ghz:.3f} GHz"

    def _lines(self):
        return [f"Prediction({self.kernel} on {self.gpu}, grid={self.grid}: {self.us:.1f} us = {self.cycles:.0f} cycles "
                f"at {self.clock_ghz:.3f} GHz + {self.launch_us:.1f} us launch)",
                f"  {len(self.sampled)} CTA(s) simulated ({', '.join(f'{k}: {v:.0f}' for k, v in list(self.sampled.items())[:8])}"
                f"{', ...' if len(self.sampled) > 8 else ''} cycles), {self.slots} resident at once, "
                f"{self.waves:.2f} wave(s)",
                f"  critical path over CTAs {self.cta_cycles:.0f} cycles (x {self.copy_stretch:.3f} for the wgmmas under "
                f"copy load); tensor roof {self.roof_cycles:.0f}; DRAM floor "
                f"{self.hbm_floor_cycles:.0f} cycles ({self.kernel_bytes / 2**20:.1f} MiB) -> {self.bound}-bound",
                f"  clock: {self._clock_text()}",
                f"  compiled: {self.compiled}",
                f"  cost model: {'calibration of ' + self.calibration if self.calibration else 'estimates (not calibrated)'}"
                f"; simulated in {self.sim_seconds:.1f} s"]

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        shown = list(self.sampled.items())[:8]
        rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in (
            ("time", f"{self.us:.1f} µs ({self.cycles:.0f} cycles at {self.clock_ghz:.3f} GHz + {self.launch_us:.1f} µs "
                     f"launch)"),
            ("clock", self._clock_text()),
            ("grid", f"{self.grid}: {self.slots} resident, {self.waves:.2f} wave(s)"),
            ("CTAs simulated", ", ".join(f"{k}: {v:.0f}" for k, v in shown) + (", …" if len(self.sampled) > 8 else "")),
            ("bound", f"{self.bound} (CTAs {self.cta_cycles:.0f} x {self.copy_stretch:.3f} under copy load, tensor "
                      f"roof {self.roof_cycles:.0f}, DRAM floor "
                      f"{self.hbm_floor_cycles:.0f} cycles)"),
            ("compiled", self.compiled),
            ("cost model", f"calibrated {self.calibration}" if self.calibration else "estimates"),
            ("simulated in", f"{self.sim_seconds:.1f} s")))
        return (f"<div><b>Prediction</b> {html.escape(self.kernel)} on {html.escape(self.gpu)}"
                f"<table>{rows}</table></div>")


@dataclasses.dataclass
class CallPrediction:
    """The predicted time of a call that makes several kernels (a library backward pass, a split GEMM and its
    reduction, a wrapper that zeroes its output before the launch): each launch's :class:`Prediction`, in launch
    order, run one after another, each at its own clock and with its own launch cost, as a timer around the whole
    call sees them; and the kernels the call runs through torch (``torch_kernels``: a fill, a cast, a copy;
    ``sim/torch_kernels.py``), each its bytes through DRAM at ``dram_gbps`` plus a launch's cost. Any other field
    of a Prediction (``clock_ghz``, ``bound``, ``compiled``, ...) is its longest launch's (``main``)."""
    parts: list
    sim_seconds: float = 0.0
    torch_kernels: list = dataclasses.field(default_factory=list)

    @property
    def dram_gbps(self) -> float:
        """The DRAM bandwidth the torch kernels' bytes move at (GB/s): the calibration's, else the spec sheet's."""
        from .cost import cost_model
        return cost_model(self.gpu).dram_gbps

    def torch_kernel_us(self, k) -> float:
        """One torch kernel's time: its bytes (read and written) through DRAM, plus a launch's fixed cost."""
        from .cost import cost_model
        return cost_model(self.gpu).hbm_floor_us(k.nbytes) + self.parts[0].launch_us

    @property
    def torch_us(self) -> float:
        """The torch kernels' time, summed."""
        return sum(self.torch_kernel_us(k) for k in self.torch_kernels)

    @property
    def us(self) -> float:
        return sum(p.us for p in self.parts) + self.torch_us

    @property
    def kernel(self) -> str:
        return " + ".join(p.kernel for p in self.parts)

    @property
    def gpu(self) -> str:
        return self.parts[0].gpu

    @property
    def window(self) -> str:
        return self.parts[0].window

    @property
    def launch_us(self) -> float:
        return sum(p.launch_us for p in self.parts)

    @property
    def cycles(self) -> float:
        """The launches' cycles, each at its own clock, summed."""
        return sum(p.cycles for p in self.parts)

    @property
    def spill_bytes(self) -> int:
        return max(p.spill_bytes for p in self.parts)

    @property
    def main(self) -> Prediction:
        """The launch that takes longest: its clock and bound are the call's (``clock_ghz``, ``clock``, ``bound``)."""
        return max(self.parts, key=lambda p: p.us)

    def __getattr__(self, name):
        """Any other field of a Prediction is the longest launch's (``clock_ghz``, ``bound``, ``compiled``, ...): a
        call of one launch and a fill reads like that launch."""
        if name.startswith("_") or name in ("parts", "torch_kernels", "sim_seconds"):
            raise AttributeError(name)      # not set yet (a copy being made): never the launch's
        return getattr(self.main, name)

    def _lines(self):
        torch_text = f" + torch kernels {self.torch_us:.1f}" if self.torch_kernels else ""
        head = [f"CallPrediction({len(self.parts)} launch(es) on {self.gpu}: {self.us:.1f} us = "
                + " + ".join(f"{p.us:.1f}" for p in self.parts) + torch_text
                + f"; simulated in {self.sim_seconds:.1f} s)"]
        ops = [f"  torch: {k} {self.torch_kernel_us(k):.1f} us" for k in self.torch_kernels]
        return head + [f"  {i}: {line}" if j == 0 else f"     {line}"
                       for i, p in enumerate(self.parts) for j, line in enumerate(p._lines())] + ops

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        rows = "".join(f"<tr><td>{i}</td><td>{html.escape(p.kernel)}</td><td>{html.escape(str(p.grid))}</td>"
                       f"<td>{p.us:.1f} µs</td><td>{html.escape(p.bound)}</td><td>{html.escape(p._clock_text())}</td></tr>"
                       for i, p in enumerate(self.parts))
        rows += "".join(f"<tr><td>torch</td><td>{html.escape(k.op)}</td><td>{html.escape(k.where)}</td>"
                        f"<td>{self.torch_kernel_us(k):.1f} µs</td><td>dram</td>"
                        f"<td>{k.nbytes / 2**20:.2f} MiB</td></tr>" for k in self.torch_kernels)
        return (f"<div><b>Prediction</b> of {len(self.parts)} launch(es) on {html.escape(self.gpu)}: "
                f"{self.us:.1f} µs<table><tr><th>#</th><th>kernel</th><th>grid / line</th><th>time</th><th>bound</th>"
                f"<th>clock / bytes</th></tr>{rows}</table></div>")


def tensor_cycles(result, scale: float = 1.0) -> float:
    """The tensor cores' busy cycles of a simulated launch, summed over its CTAs and warp groups (``scale``: the
    launch's CTAs over those simulated, when only some were)."""
    return scale * sum(st.get("mma", 0.0) for st in (getattr(result, "stats", None) or {}).values())


def launch_cost_us(cal) -> float:
    """What do_bench adds to a launch's own cycles: the empty kernel's do_bench time (calibration ``launch``), else
    the power family's do_bench of the wgmma loop less its cycles. The empty kernel first: the loop's figure holds
    what its cycle window leaves out (its operands' setup, the records' stores, CTAs starting apart): 11.3 us on an
    H100 where the empty kernel takes 3.7 and a 1024^3 GEMM's do_bench exceeds its graph replay by 3.0."""
    if cal is None:
        return 0.0
    return float(cal.launch_us or cal.power.get("do_bench_overhead_us") or 0.0)


def finish(*, kernel, gpu, grid, sampled, slots, cta_cycles, tensor, nbytes, window="do_bench", **facts) -> Prediction:
    """The Prediction of a launch whose CTAs' critical path is ``cta_cycles`` and whose tensor cores are busy
    ``tensor`` cycles (summed over CTAs): its wgmmas at their rate under copy load, the roof and the DRAM floor
    below it, the clock the board holds for it (``window``), the calibrated launch cost on top.

    Copy load: the CTAs' tensor cores are busy ``tensor`` of the CTAs' own cycles (summed; ``sampled`` stands for
    every CTA), at the wgmma loop's peak as simulated; that share of the critical path stretches by what TMA
    streaming into the SM costs the tensor core, the rest (waits, epilogue, issue) stays
    (``cost.copy_load_stretch``), so configs keep the order their pipelines give them. The roof: the launch's
    tensor work spread over every SM at the best rate a launch sustains (``cost.tensor_roof_cycles``)."""
    from ...target import gpu_model
    from .cost import cost_model
    model = gpu_model(gpu)
    cm = cost_model(model.name)
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    own = sum(sampled.values()) * total / max(1, len(sampled))
    stretch = cm.copy_load_stretch(tensor, own)
    roof = cm.tensor_roof_cycles(tensor)
    cycles = max(cta_cycles * stretch, roof)
    util = tensor / (model.sm_count * cycles) if cycles else 0.0
    clock = cm.launch_clock(cycles, util, window)
    floor_us = cm.hbm_floor_us(nbytes) if nbytes else 0.0
    floor = floor_us * clock.ghz * 1e3              # the DRAM's bytes per second, in this launch's cycles
    cal = cm.calibration
    return Prediction(kernel=kernel, gpu=model.name, grid=tuple(grid), cycles=max(cycles, floor), clock_ghz=clock.ghz,
                      sampled=sampled, slots=slots, waves=total / slots, cta_cycles=cta_cycles, hbm_floor_cycles=floor,
                      kernel_bytes=nbytes, calibration=getattr(cal, "date", None),
                      launch_us=launch_cost_us(cal), tensor_cycles=tensor, roof_cycles=roof, copy_stretch=stretch,
                      clock=clock, window=window, **facts)


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


def compiled_facts(result, gpu, strict: bool = False) -> tuple:
    """(occupancy, spill bytes per thread a wgmma loop's iteration runs, wgmma serialized, summary) of the launch
    ``result`` simulated, compiled offline for ``gpu`` by the real compiler (its caches make a second call cheap);
    (None, 0, False, why) if it cannot. ``strict``: a kernel the compiler rejects for this launch (a
    ``CompileError``, naming the line) raises, as it would on the GPU; a compiler that cannot run here does not."""
    if result.launch is None:
        return None, 0, False, "not compiled (no launch recorded)"
    return launch_facts(*result.launch, gpu, strict=strict)


def launch_facts(jit, args, kwargs, gpu, strict: bool = False) -> tuple:
    """:func:`compiled_facts` of the launch ``jit[grid](*args, **kwargs)`` before it is simulated."""
    from ...compiler import compile as wb_compile
    from ...compiler.launch_options import compile_kwargs
    from ...compiler.occupancy import occupancy, serializes_wgmma, spill_loads, spill_stores
    from ...errors import CompileError
    from ...target import gpu_model
    try:
        report = wb_compile(jit, *args, target=gpu, sass="lazy", **compile_kwargs(kwargs))
        res = report.resources
        occ = max(1, occupancy(res, gpu_model(gpu)))
        loads, stores = spill_loads(report.ptxas_advisories), spill_stores(report.ptxas_advisories)
        serial = serializes_wgmma(report.ptxas_advisories)
        spills, where = loop_spills(report, loads + stores)
        return occ, spills, serial, (f"{res.registers} registers, {res.smem_bytes} B SMEM, {occ} CTA(s)/SM, "
                                     f"{loads} B/thread spill loads, {stores} B/thread spill stores{where}"
                                     + (", wgmma serialized" if serial else ""))
    except Exception as e:  # noqa: BLE001 - a prediction without the compiler's facts is still one
        if strict and isinstance(e, CompileError):
            raise
        return None, 0, False, f"not compiled ({type(e).__name__}: {str(e).splitlines()[0][:120]})"


def loop_spills(report, total: int) -> tuple[int, str]:
    """(spill bytes per thread a wgmma loop's iteration runs, what to say of it) of a compiled kernel whose ptxas
    spills are ``total``: its SASS's wgmma loop's local loads and stores (``compiler.sass_loops``), the spills in
    the prologue and epilogue left out; the whole ``total`` where no loop holds a wgmma or the SASS cannot be read."""
    if not total:
        return 0, ""
    placement = report.spill_placement
    if placement is None or not placement.loops or placement.loads + placement.stores != total:
        return total, ""
    from .cost import SpillsPerWgmma       # a loop that holds the wgmmas: its bytes per wgmma instruction
    return SpillsPerWgmma(placement.per_wgmma), f" ({placement})"


def charged_spills(launch, grid, gpu, ctas_per_sm, facts, duty: float = 0.0) -> tuple[float, str]:
    """(spill bytes per thread the simulator charges, compiled summary) of a launch ``(jit, args, kwargs)`` whose
    :func:`launch_facts` are ``facts``: ptxas's spill loads and stores, dearer where the spilled locals of the SM's
    CTAs do not fit the L1 their shared memory leaves (``cost.spill_rate_scale`` with the launch's resident CTAs
    each spilling ``duty`` of its time, 0: at the rate alone; ``grid`` a tuple, or a callable: then every slot
    counts)."""
    spills, note = facts[1], facts[3]
    if not spills or launch is None:
        return spills, note
    from ...compiler import compile as wb_compile
    from ...compiler.launch_options import compile_kwargs
    from ...target import gpu_model
    from .cost import cost_model
    jit, args, kwargs = launch
    try:
        res = wb_compile(jit, *args, target=gpu, sass="lazy", **compile_kwargs(kwargs)).resources
    except Exception:  # noqa: BLE001 - the compiled facts said why already
        return spills, note
    slots = _resident(grid, gpu_model(gpu), ctas_per_sm)
    cm = cost_model(gpu).for_launch(slots)
    scale = cm.spill_rate_scale(res.smem_bytes, (res.local_bytes or 0) * res.num_warps * 32, ctas_per_sm, duty)
    charged = type(spills)(spills * scale)         # per wgmma instruction or per iteration, as read
    if scale != 1:
        busy = f"{slots} CTAs spilling {100 * duty:.0f} % of their time: " if duty else ""
        note += (f" (through L2: the locals do not fit the L1 the SMEM leaves; {busy}at "
                 f"{cm.l1_bytes_per_cycle / scale:.1f} B/cycle, charged as {float(charged):.0f} B at L1 rate)")
    return charged, note


def _resident(grid, model, ctas_per_sm) -> int:
    """The CTAs of a launch in flight at once: its SMs' slots, or its grid where smaller (``grid`` a tuple; a
    callable grid: every slot counts)."""
    slots = model.sm_count * max(1, int(ctas_per_sm))
    if isinstance(grid, (tuple, list)):
        g = tuple(grid) + (1,) * (3 - len(grid))
        slots = min(int(g[0]) * int(g[1]) * int(g[2]), slots)
    return slots


def _spill_duty(result, model, ctas_per_sm) -> float:
    """The share of its time CTA 0 of ``result`` (simulated with its spills at the rate alone) spills once the
    launch's spill demand sets the rate (``cost.spill_duty``); 0 where the calibration never measured spills."""
    from .cost import cost_model
    cm = cost_model(model.name).for_launch(_resident(result.grid, model, ctas_per_sm))
    if cm.calibration is None or not cm.calibration.spill_bytes_per_cycle_per_sm:
        return 0.0
    busy = sum(st.get("spill", 0.0) for st in (getattr(result, "stats", None) or {}).values())
    return cm.spill_duty(busy, result.cycles)


def prediction_from(result, gpu, *, occupancy: int = 1, spills: int = 0, compiled: str = "",
                    sim_seconds: float = 0.0, window: str = "do_bench") -> Prediction:
    """The Prediction of a launch already simulated whole (every CTA; ``result`` a SimResult, simulated with
    this ``occupancy`` and ``spills``): what :func:`predict` says of it, without simulating it again (numerics
    do not change the cycles)."""
    from ...target import gpu_model
    model = gpu_model(gpu)
    grid = tuple(result.grid)
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    slots = model.sm_count * max(1, int(occupancy))
    sampled = {c: result.cta_cycles.get(c, 0.0) for c in range(total)}
    return finish(kernel=result.kernel, gpu=model.name, grid=grid, sampled=sampled, slots=slots,
                  cta_cycles=schedule_ctas([sampled[c] for c in range(total)], slots), tensor=tensor_cycles(result),
                  nbytes=int(getattr(result, "kernel_bytes", 0) or 0), window=window, sim_seconds=sim_seconds,
                  result=result, occupancy=max(1, int(occupancy)), spill_bytes=spills, compiled=compiled)


def predict(fn, *args, gpu="H200", occupancy=None, samples=None, config=None, seed=0, numerics=False, compile=True,
            spills=None, window="do_bench", order="seeded", **kwargs) -> Prediction:
    """Predict the time of the launch ``fn(*args, **kwargs)`` makes (a host function or a
    ``kernel[grid]``), from every CTA simulated at the real shape (``samples=k``: from k CTAs along x, the
    others interpolated; see the module doc). A call that makes several launches, or runs torch kernels beside its
    launch (a ``torch.zeros`` of its output, a cast: ``sim/torch_kernels.py``), gives a :class:`CallPrediction`: each
    launch predicted as above, replayed as the call made it, each torch kernel its bytes through DRAM plus a launch,
    and their sum.
    ``compile``: ask the real compiler (offline) for the kernel's occupancy and register spills, which
    the cost model then charges (a launch it rejects raises its ``CompileError``, naming the line: the GPU would
    not run it); ``occupancy`` / ``spills`` given outright skip that.
    ``numerics``: by default timing only (``simulate(numerics=False)``); True also computes the data.
    ``window``: how the launch is timed, which sets the clock it runs at: "do_bench" (L2 flushed between
    launches, the default), "sustained" (back to back) or "single" (once, after idle).
    ``order``: the scheduler's (``simulate(order=...)``): "seeded", the interleaving ``seed`` picks (what the cost
    model is calibrated and validated on), or "time", the tasks in simulated-time order: the same cycles for every
    seed, for comparing two forms of a kernel without the interleaving's own spread (docs/decisions.md)."""
    from ...target import gpu_model
    from ..api import simulate
    from .cost import WINDOWS
    if window not in WINDOWS:
        from ...errors import TLXWorkbenchError
        raise TLXWorkbenchError(f"predict(window={window!r}) is not a timing window",
                                hint=f"use one of {', '.join(WINDOWS)}")
    t0 = time.perf_counter()
    model = gpu_model(gpu)

    def sim(ctas, occ, sp, serial, torch_kernels=False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")         # "only k of n CTAs simulated": meant
            r = simulate(fn, *args, gpu=gpu, ctas=ctas, on_deadlock="return", config=config, seed=seed, order=order,
                         occupancy=occ, numerics=numerics, spills=sp, serialized_wgmma=serial,
                         torch_kernels=torch_kernels, **kwargs)
        if r.deadlock is not None:
            r.raise_for_errors()
        return r

    occ, sp, serial, note = occupancy or 1, spills or 0, False, "not compiled (compile=False)"
    first = sim([0], occ, sp, serial, torch_kernels=True)
    host = list(getattr(first, "torch_kernels", None) or [])
    if len(first.launches) > 1:     # each launch on its own, as the call made it
        parts = []
        for r in first.launches:
            jit, largs, lkwargs = r.launch
            parts.append(predict(jit, *largs, grid=tuple(r.grid), gpu=gpu, occupancy=occupancy, samples=samples,
                                 seed=seed, numerics=numerics, compile=compile, spills=spills, window=window,
                                 order=order, **lkwargs))
        return CallPrediction(parts, sim_seconds=time.perf_counter() - t0, torch_kernels=host)

    def done(p):        # a call that ran torch kernels beside its launch: the launch, and those
        return CallPrediction([p], sim_seconds=p.sim_seconds, torch_kernels=host) if host else p
    if compile and (occupancy is None or spills is None):
        facts = compiled_facts(first, model.name, strict=True)      # a launch the GPU cannot compile has no time
        c_occ, _, c_serial, _ = facts
        c_sp, note = charged_spills(first.launch, first.grid, model.name, occupancy or c_occ or 1, facts)
        new = (occupancy or c_occ or 1, spills if spills is not None else c_sp, c_serial)
        if new != (occ, sp, serial):
            occ, sp, serial = new
            first = sim([0], occ, sp, serial)
        duty = _spill_duty(first, model, occ) if spills is None and sp else 0.0
        if duty:            # the rate the launch's spill demand leaves (cost.spill_duty), then simulated again
            c_sp, note = charged_spills(first.launch, first.grid, model.name, occ, facts, duty=duty)
            if c_sp != sp:
                sp = c_sp
                first = sim([0], occ, sp, serial)
    grid = first.grid
    slots = model.sm_count * max(1, int(occ))
    total = int(grid[0]) * int(grid[1]) * int(grid[2])
    if samples is None:
        res = sim(None, occ, sp, serial) if total > 1 else first
        return done(prediction_from(res, gpu, occupancy=occ, spills=sp, compiled=note,
                                    sim_seconds=time.perf_counter() - t0, window=window))
    sampled = {0: first.cycles}
    res = first
    tensor = tensor_cycles(first)
    rest = [c for c in sample_ctas(grid, samples) if c != 0]
    if rest:
        res = sim(rest, occ, sp, serial)
        for c in rest:
            sampled[c] = res.cta_cycles.get(c, 0.0)
        tensor += tensor_cycles(res)
    return done(finish(kernel=first.kernel, gpu=model.name, grid=tuple(grid), sampled=sampled, slots=slots,
                       cta_cycles=schedule(grid, sampled, slots), tensor=tensor * total / len(sampled),
                       nbytes=int(getattr(first, "kernel_bytes", 0) or 0), window=window,
                       sim_seconds=time.perf_counter() - t0, result=res, occupancy=int(occ), spill_bytes=sp,
                       compiled=note))
