"""One simulated launch: bind arguments, patch the builtins, run every CTA under its scheduler."""
from __future__ import annotations

import dataclasses
import gc
import inspect
import traceback
import warnings

import numpy as np
import triton.language as tl

from ...errors import DeadlockError, SimulationError, TLXWorkbenchError
from ...trace import Trace
from .. import interp_adapter as ia
from ..timing import recorder as recording
from . import batch, rewrite
from ..diagnosis import bounds
from ..ops import threads, tl_extras
from .blas_threads import one_blas_thread
from ..timing.cost import cost_model, record_cycles
from ..hardware.clc import LaunchQueue
from ..hardware.cta import CTA, SimGroup
from ..hardware.hostmem import HostMemory
from ..diagnosis.diagnose import deadlock_report
from .scheduler import StepLimit
from ..diagnosis.source_lines import kernel_files, kernel_frame_line
from ..ops.tlx_ops import SimBuilder, _state, patch_tlx
from ...compiler.launch_options import launch_options, split_options


class Finding:
    """Something wrong the simulator saw that did not stop the run (races, overflows, count mismatches)."""

    def __init__(self, kind, message, line=None, lane=None, other_line=None, file=None, hint="", severity="error"):
        self.kind, self.message, self.line, self.lane, self.other_line, self.file = (
            kind, message, line, lane, other_line, file)
        self.hint = hint            # what to do, when the simulator knows it
        #: "error" (the protocol is broken: raise_for_errors raises, a pytest test fails) or "warning" (an output
        #: left partly unwritten or holding NaN/Inf, sim/diagnosis/outputs.py: shown, the run is no clean bill, nothing raises)
        self.severity = severity

    def __repr__(self):
        # a finding of the whole run (e.g. outputs that differ between schedules) has no line
        kind = self.kind if self.severity == "error" else f"{self.severity}: {self.kind}"
        lines = [f"line {n}" for n in (self.line, self.other_line) if n]
        return f"[{kind}] {' / '.join(lines)}: {self.message}" if lines else f"[{kind}] {self.message}"


def _run_tasks(specs):
    _state.cta.run_tasks(specs)


def _jit_call(self, *args, **kwargs):
    # a @triton.jit helper called from simulated kernel code (tl.zeros too): run its rewritten Python,
    # with the tl builtins its own module sees patched (as the interpreter does on each call)
    mod = self.fn.__module__
    if mod not in _state.patched_modules:
        _state.patched_modules.add(mod)
        _state.scopes.append(ia.patch_lang(self.fn))
        if _state.batching:
            batch.patch_conversions()
    if _state.rec is not None:
        # a loop variable of a wave (sim/schedule/batch.py) passed where a constexpr goes: its value, guarded
        names = [p.name for p in self.params]
        args = tuple(int(a) if batch.is_py(a) and i < len(names) and self.params[i].is_constexpr else a
                     for i, a in enumerate(args))
        kwargs = {k: int(v) if batch.is_py(v) and any(p.name == k and p.is_constexpr for p in self.params) else v
                  for k, v in kwargs.items()}
    return rewrite.rewrite(self.fn, _run_tasks)(*args, **kwargs)


class LaunchRun:
    """Everything one launch produced: trace, findings, deadlock, per-lane stats."""

    def __init__(self, jitfn, grid, gpu, seed, ctas, max_steps, num_warps, order="seeded"):
        self.jitfn = jitfn
        self.fn = jitfn.fn
        self.name = jitfn.fn.__name__
        self.file = inspect.getsourcefile(jitfn.fn)
        self.cost = cost_model(gpu)
        self.gpu = self.cost.gpu
        self.seed = seed
        self.order = order            # the scheduler's: "seeded" or "time" (sim/schedule/scheduler.py)
        self.ctas_filter = ctas
        self.max_steps = max_steps
        self.num_warps = num_warps
        self.trace = Trace(time_unit="cycles", source="sim",
                           meta={"kernel": self.name, "gpu": self.gpu.name, "seed": seed, "order": order})
        self.findings: list[Finding] = []
        self.deadlock = None
        self.error = None
        self.grid = grid
        self.ctas_run: list[int] = []
        self.stats: dict = {}
        self.partial = False
        self.cluster_dims = (1, 1, 1)
        self.clc = LaunchQueue([], 1)   # the launch's clusters: started, taken by CLC (sim/hardware/clc.py)
        self.numerics = True          # False: timing only (no data moved or computed by TMA and wgmma)
        self.writes = None            # a writes.WriteLog when schedules are compared
        self.cta_end: dict = {}       # CTA id -> the cycle its last span ends
        self.groups: list = []        # the SimGroups run, until the launch ends (_release_groups)

    @property
    def clc_log(self) -> list:
        """(stealing CTA, first CTA of the stolen cluster or None) of every CLC try_cancel."""
        return self.clc.log

    def finding(self, kind, message, line=None, lane=None, other_line=None, severity="error", hint=""):
        self.findings.append(Finding(kind, message, line, lane, other_line, self.file, hint, severity))


def _bind(jitfn, args, kwargs):
    sig = inspect.signature(jitfn.fn)
    # anything that is not a parameter of the kernel is a launch option (num_warps, ctas_per_cga, ...)
    params, opts = split_options(kwargs, sig.parameters)
    try:
        bound = sig.bind(*args, **params)
    except TypeError as e:
        raise SimulationError(f"launch of {jitfn.fn.__name__}: {e}", file=inspect.getsourcefile(jitfn.fn),
                              line=jitfn.fn.__code__.co_firstlineno,
                              hint="pass every kernel parameter (constexprs too, or via an autotune config)") from None
    bound.apply_defaults()
    return dict(bound.arguments), opts


def _memory_ranges(values):
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    ranges = []

    def add(v):
        if isinstance(v, torch.Tensor):
            if v.device.type != "cpu":
                raise SimulationError(f"tensor on {v.device}: the simulator runs on CPU tensors",
                                      hint="create the inputs on the CPU (inside tlx_workbench.offline, "
                                           "DEVICE is the CPU)")
            st = v.untyped_storage()
            ranges.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
        elif isinstance(v, TensorDescriptor):
            add(v.base)
        elif isinstance(v, (tuple, list)):
            for x in v:
                add(x)
    for v in values:
        add(v)
    return ranges


def _access_checker(run: LaunchRun, ranges, named=()):
    """The check of every global access: bytes charged, the write log, and out-of-bounds addresses (an error naming
    the argument ``named`` (sim/diagnosis/bounds.py) the pointer ran past)."""
    lo = np.array([r[0] for r in ranges], dtype=np.uint64)
    hi = np.array([r[1] for r in ranges], dtype=np.uint64)
    _state.ranges = (lo, hi)             # for a wave's batched loads (sim/schedule/batch.py)

    def check(ptrs, mask, itemsize, is_store):
        p = np.asarray(ptrs, dtype=np.uint64).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs)).reshape(-1)
            if is_store and run.writes is not None and not m.all():
                run.writes.masked_off(p[~m], itemsize)
            p = p[m]
        cta = _state.cta
        if cta is not None:
            cta.global_access(int(p.size) * itemsize, is_store)
        batch.note_bytes(int(p.size) * itemsize)
        if p.size == 0:
            return
        if run.writes is not None:
            if is_store:
                run.writes.store(p, itemsize, _lane(), kernel_frame_line())
            else:
                if _state.batching:
                    batch.reads_stored(run.writes.written(p, itemsize))
                run.writes.load(p, itemsize)
        ok = np.zeros(p.shape, dtype=bool)
        for a, b in zip(lo, hi):
            ok |= (p >= a) & (p + np.uint64(itemsize) <= b)
        if not ok.all():
            file, line = kernel_frame_line()
            raise bounds.out_of_bounds(is_store=is_store, bad=int(p[~ok][0]), n_bad=int((~ok).sum()), n=int(p.size),
                                       itemsize=itemsize, named=named, file=file, line=line)
    return check


def _poller(check):
    """The ``poll`` of :func:`interp_adapter.install_polls`: atomics are access-checked (charged like a
    load: their latency is exposed) and every poll is a scheduling point of its task (CTA.global_poll)."""
    def poll(run_op, key, ptrs, mask, itemsize, is_atomic):
        if is_atomic:
            check(ptrs, mask, itemsize, False)
            log = _state.cta.run.writes if _state.cta is not None else None
            if log is not None:
                p = np.asarray(ptrs).reshape(-1)
                if mask is not None:
                    p = p[np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs)).reshape(-1)]
                lane, where, op = _lane(), kernel_frame_line(), run_op

                def run_op():
                    # logged when it runs, not when its task reaches it: the poll lets another task go first
                    log.atomic_op(p, itemsize, lane, where)
                    return op()
        cta = _state.cta
        if cta is None or cta.task is None:
            return run_op()[0]
        return cta.global_poll(run_op, key, is_atomic)
    return poll


def _account_global(nbytes, is_store, region=None):
    # the cost of a global access the fast descriptor path made (the access check charges the slow path's),
    # and the box a store wrote, into the write log
    cta = _state.cta
    if cta is not None:
        cta.global_access(nbytes, is_store)
    batch.note_bytes(nbytes)
    run = cta.run if cta is not None else _state.run       # (no CTA: a wave replaying, sim/schedule/batch.py)
    if region is not None and run is not None and run.writes is not None:
        if is_store:
            run.writes.store_box(region, _lane(), kernel_frame_line())
        else:
            if _state.batching:
                batch.reads_stored(run.writes.written_box(region))
            run.writes.load_box(region)


def _lane():
    if _state.replay_lane is not None:
        return _state.replay_lane
    cta = _state.cta
    task = cta.task if cta is not None else None
    return task.lane if task is not None else None


def _clusters(g, cga):
    """The launch's CTAs grouped by cluster: [[(grid index, linear pid, cluster rank), ...], ...], in launch order
    (cluster ids x-fastest, like CTA ids)."""
    out = {}
    for z in range(g[2]):
        for y in range(g[1]):
            for x in range(g[0]):
                cid = (x // cga[0], y // cga[1], z // cga[2])
                rank = (x % cga[0]) + cga[0] * ((y % cga[1]) + cga[1] * (z % cga[2]))
                out.setdefault(cid, []).append(((x, y, z), x + g[0] * (y + g[1] * z), rank))
    order = sorted(out, key=lambda c: (c[2], c[1], c[0]))
    return [sorted(out[c], key=lambda m: m[2]) for c in order]


def _cluster_id(idx, cga, g):
    nx, ny = g[0] // cga[0], g[1] // cga[1]
    return idx[0] // cga[0] + nx * (idx[1] // cga[1] + ny * (idx[2] // cga[2]))


def _add_stats(run, sched):
    for t in sched.tasks:
        st = run.stats.setdefault((t.name, t.replica), {"ctas": 0, "ops": 0, "busy": 0.0, "waiting": 0.0,
                                                         "mma": 0.0, "cycles": 0.0, "scalar_ops": 0,
                                                         "spill": 0.0})
        st["ctas"] += 1
        st["ops"] += t.stats["ops"]
        st["busy"] += t.stats["busy"]
        st["waiting"] += t.stats["waiting"]
        st["mma"] += t.stats["mma"]
        st["scalar_ops"] += t.stats["scalar_ops"]
        st["spill"] += t.stats["spill"]
        st["cycles"] = max(st["cycles"], t.clock)


def _finish_group(run, group, max_steps, stats=True):
    """Fold one group's tasks into the launch: stats (unless the caller adds them later), races, errors,
    deadlock."""
    sched = group.sched
    if stats:
        _add_stats(run, sched)
    for r in group.races.findings:
        run.findings.append(Finding("race", f"CTA {r.lane[0]}: {r.message}", r.line, r.lane, r.other_line,
                                    run.file, r.hint))
    if sched.error is not None:
        e = sched.error
        if isinstance(e, StepLimit):
            t = sched.error_task
            raise SimulationError(
                f"{run.name}: CTA {t.pid} did not finish within max_steps={max_steps} scheduling steps "
                f"(last at line {t.line} in {t})", file=run.file, line=t.line,
                hint="a loop that never ends, or a spin on a value no task changes; raise max_steps "
                     "for big shapes")
        if isinstance(e, TLXWorkbenchError):
            raise e
        raise _user_error(run, e, sched.error_tb)
    if sched.deadlock:
        run.deadlock = deadlock_report(run, group)
        return
    sched.drain_async()


def _charge_alu(elements: int, weight: float):
    """An interpreter op's elementwise work, charged to the running CTA (CTA.charge_alu)."""
    if _state.cta is not None:
        _state.cta.charge_alu(elements, weight)


def _charge_scalar():
    """An integer scalar op of the kernel's code, charged to the running CTA (CTA.charge_scalar)."""
    if _state.cta is not None:
        _state.cta.charge_scalar()


def batching_default() -> bool:
    """Whether launches run their CTAs in waves (sim/schedule/batch.py) unless told: yes, unless the environment variable
    ``TLXWB_SIM_WAVES`` is ``0``."""
    import os
    return os.environ.get("TLXWB_SIM_WAVES", "1") != "0"


class _OneAtATime(Exception):
    """The launch cannot run in waves (sim/schedule/batch.py): its memory is put back and it runs one CTA at a time."""

    def __init__(self, why, saved):
        super().__init__(why)
        self.saved = saved


def run_launch(jitfn, grid, args, kwargs, *, waves=None, **kw) -> LaunchRun:
    """Simulate ``jitfn[grid](*args, **kwargs)`` on CPU tensors; returns the LaunchRun (raises on errors).
    ``waves``: run the CTAs in waves (one simulated, the others replaying it together, sim/schedule/batch.py), falling back
    to one CTA at a time where a wave cannot; False: one CTA at a time; None: :func:`batching_default`.
    The other keywords: :func:`_run_launch`."""
    if waves is None:
        waves = batching_default()
    # a launch allocates hundreds of thousands of short-lived objects (scalars, views, spans), almost none
    # in cycles: with the default thresholds the cyclic collector ran ~35 times a launch and a full
    # collection every few launches (~10% of a 512^3 GEMM's time). Collect rarely while it runs, its setup
    # and teardown included (each collection there walked every young object the launch still held).
    gc_thresholds = gc.get_threshold()
    gc.set_threshold(max(gc_thresholds[0], 200_000), *gc_thresholds[1:])
    try:
        if not waves:
            return _run_launch(jitfn, grid, args, kwargs, waves=False, **kw)
        try:
            return _run_launch(jitfn, grid, args, kwargs, waves=True, **kw)
        except _OneAtATime as e:
            for dst, data in e.saved:
                dst[...] = data
            run = _run_launch(jitfn, grid, args, kwargs, waves=False, **kw)
            run.trace.meta["waves"] = f"one CTA at a time: {e}"
            return run
    finally:
        gc.set_threshold(*gc_thresholds)


def _run_launch(jitfn, grid, args, kwargs, *, gpu="H200", seed=0, ctas=None, max_steps=2_000_000,
                resident=None, memory=(), occupancy=1, in_flight=None, numerics=True,
                spills=0, serialized_wgmma=False, track_writes=False, recorder=None, waves=False,
                order="seeded") -> LaunchRun:
    """Simulate ``jitfn[grid](*args, **kwargs)`` on CPU tensors; returns the LaunchRun (raises on errors).
    ``occupancy``: CTAs of this kernel resident per SM (how many share an SM's bandwidth); ``in_flight``: the
    CTAs sharing the bandwidth, when not this grid's (a small shape timed as part of a large launch);
    ``numerics=False``: timing only (TMA moves no data, wgmma computes nothing; the protocol and clocks are kept);
    ``spills``: ptxas's spill loads and stores, bytes per thread (the compile report's), a warp group's loop's traffic
    once per iteration, charged around its async_dots (spread over their lines);
    ``serialized_wgmma``: ptxas serialized the wgmma pipeline (each instruction waits for the previous).
    ``recorder``: "waits", "totals" or "all": the kernel as ``wb.profile`` instruments it, each recorded op followed
    by the recorder's measured cost (sim/timing/recorder.py); None: the plain kernel.
    ``order``: "seeded" (the seed picks the interleaving) or "time" (the earliest task in simulated time runs next);
    ``memory``: more CPU tensors the kernel may access through raw addresses (see hostmem.AddressTaken);
    ``track_writes``: keep a ``writes.WriteLog`` (who stored, which bytes atomics wrote) in ``run.writes``."""
    from triton.runtime.jit import JITFunction
    bound, opts = _bind(jitfn, args, kwargs)
    options = launch_options(opts)
    num_warps = options.num_warps
    if options.num_ctas > 1 and options.cluster is None:
        raise SimulationError(f"{jitfn.fn.__name__}: launched with num_ctas={options.num_ctas} (one program split "
                              f"over a cluster by the compiler); the simulator runs TLX clusters (ctas_per_cga), "
                              f"where each CTA runs the kernel", file=inspect.getsourcefile(jitfn.fn),
                              line=jitfn.fn.__code__.co_firstlineno,
                              hint="launch with ctas_per_cga=(n, 1, 1) (the grid then counts CTAs), or num_ctas=1")
    cga = options.cluster_dims
    run = LaunchRun(jitfn, grid, gpu, seed, ctas, max_steps, num_warps, order)
    run.numerics = bool(numerics)
    run.launch = (jitfn, tuple(args), dict(kwargs))      # what was launched: wb.predict compiles it
    run.trace.meta["numerics"] = run.numerics
    run.cluster_dims = cga
    arg_ranges = _memory_ranges(bound.values())
    ranges = arg_ranges + _memory_ranges(memory)
    # the bytes of every tensor the kernel's arguments reach (each storage once): the DRAM floor of a prediction
    run.kernel_bytes = sum(e - b for b, e in dict(arg_ranges).items())
    constexpr_names = {p.name for p in jitfn.params if p.is_constexpr}
    kargs = {}
    for name, v in bound.items():
        if name in constexpr_names:
            # as Triton's interpreter does: constexprs are passed as plain Python values
            kargs[name] = v.value if isinstance(v, tl.constexpr) else v
        else:
            try:
                kargs[name] = ia.to_kernel_arg(v)
            except (AssertionError, ValueError, TypeError) as e:
                raise SimulationError(f"launch of {run.name}: argument {name!r} ({type(v).__name__}) is not "
                                      f"usable by the kernel: {e or 'failed a check'}", file=run.file,
                                      line=jitfn.fn.__code__.co_firstlineno,
                                      hint="tensors must be contiguous-ish CPU tensors; descriptor bases and "
                                           "strides 16-byte aligned") from None
    g = grid(bound) if callable(grid) else grid
    g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
    g = g + (1,) * (3 - len(g))
    run.grid = g
    total = g[0] * g[1] * g[2]
    if any(gi % ci for gi, ci in zip(g, cga)):
        raise SimulationError(f"{run.name}: grid {g} is not a whole number of clusters of {cga} CTAs (ctas_per_cga)",
                              file=run.file, line=jitfn.fn.__code__.co_firstlineno,
                              hint="with ctas_per_cga the grid counts CTAs: make each grid dimension a multiple "
                                   "of the cluster's")
    # contention: each CTA's share of the TMA/L2 bandwidth is that of all CTAs in flight at once
    run.resident_ctas = int(in_flight) if in_flight else min(total, run.gpu.sm_count * max(1, int(occupancy or 1)))
    run.cost = run.cost.for_launch(run.resident_ctas)
    if spills:
        from ..timing.cost import SpillsPerWgmma
        run.cost = dataclasses.replace(run.cost, spill_bytes=float(spills),
                                       spill_per_wgmma=isinstance(spills, SpillsPerWgmma))
    if serialized_wgmma:
        run.cost = dataclasses.replace(run.cost, wgmma_serialized=True)
    run.trace.meta.update(resident_ctas=run.resident_ctas, clock_ghz=run.cost.time_clock_ghz,
                          calibration=getattr(run.cost.calibration, "date", None))
    if recorder is not None:
        cycles, estimate = record_cycles(run.gpu.name, recording.check_name(recorder))
        run.recording = recording.Recording(recorder, cycles, recording.sites(jitfn.fn, recorder), estimate)
    clusters = _clusters(g, cga)
    if ctas is not None:
        wanted = set(ctas if isinstance(ctas, (list, tuple, set, range)) else [ctas])
        keep = [c for c in clusters if any(lin in wanted for _, lin, _ in c)]
        kept = sum(len(c) for c in keep)
        if kept < total:
            run.partial = True
            warnings.warn(f"tlx_workbench.simulate: only {kept} of {total} CTAs of {run.name} are simulated "
                          f"(ctas={sorted(wanted)}); outputs written by the other CTAs are NOT computed",
                          stacklevel=3)
        clusters = keep
    # who wrote which bytes: for schedule comparison (lanes), and for the outputs' check (sim/diagnosis/outputs.py), which
    # needs every CTA's stores: not for a partial run, nor a timing-only one (nothing is computed)
    check_outputs = run.numerics and not run.partial
    if track_writes or check_outputs:
        from ..diagnosis.writes import WriteLog
        run.writes = WriteLog(ranges, lanes=track_writes)
        if check_outputs:
            from ..diagnosis.outputs import OutputCheck
            out_check = OutputCheck(bound, memory, arg_ranges)
    # clusters run one after another (``resident``: that many at once, under one scheduler). A kernel that steals
    # work with CLC starts as many clusters as fit on the GPU (or ``resident``); try_cancel answers in sim/hardware/clc.py
    clc = "clc_" in (getattr(jitfn, "src", "") or "")
    fit = max(1, run.gpu.sm_count * max(1, int(occupancy or 1)) // (cga[0] * cga[1] * cga[2]))
    run.clc = LaunchQueue(clusters, int(resident) if resident else fit if clc else len(clusters))
    run.resident = max(1, int(resident or 1))
    run.num_clusters = len(clusters)
    # waves (sim/schedule/batch.py): CTAs of one, the launch's own CTAs only; the memory the launch may write is saved first
    if waves:
        why_not = ("one CTA at a time: several CTAs resident at once" if run.resident != 1 else
                   "one CTA at a time: the recorder's kernel" if recorder is not None else
                   ("one CTA: nothing to run together" if cga == (1, 1, 1) else "one cluster: nothing to run together")
                   if len(clusters) <= 1 else None)
        if why_not is not None:
            run.trace.meta["waves"] = why_not
            waves = False
    saved = _save_memory(ranges) if waves else None
    _state.batching = waves

    semantic = ia.new_semantic(SimBuilder(arch=f"sm{run.gpu.arch}", num_warps=num_warps))
    kernel = rewrite.rewrite(jitfn.fn, _run_tasks)
    scope = ia.patch_lang(jitfn.fn)
    _state.scopes = []
    _state.patched_modules = {jitfn.fn.__module__}
    undo_tlx = patch_tlx(semantic)
    if recorder is not None:
        recording.install(run.recording)        # undone by undo_tlx
    check = _access_checker(run, ranges, bounds.argument_ranges(bound))
    undo_check = ia.install_access_check(check)
    undo_polls = ia.install_polls(_poller(check))
    hostmem = HostMemory(ranges)
    undo_desc = ia.install_fast_descriptors(hostmem, _account_global)
    _state.hostmem = hostmem
    undo_overflow = ia.skip_dead_overflow_checks()
    undo_memo = ia.memoize_scalar_ops()
    undo_scalar = ia.install_scalar_costs(_charge_scalar)      # over the memoized ops: cache hits count
    undo_bf16 = ia.install_bf16_numerics()
    undo_threads = threads.install()
    undo_asm = ia.install_inline_asm(tl_extras.run)
    undo_map = tl_extras.patch_tl()
    undo_alu = ia.install_alu_costs(_charge_alu)
    undo_blas = one_blas_thread()
    saved_call = JITFunction.__call__
    JITFunction.__call__ = _jit_call
    undo_batch = _install_batch(semantic) if waves else (lambda: None)

    def on_resume(task):
        cta = task.cta
        if cta is not None and _state.cta is not cta:
            _state.cta = cta
            ia.set_grid(g, cta.grid_idx)

    try:
        if waves:
            try:
                _run_waves(run, clusters, kernel, kargs, num_warps, g, seed, max_steps, on_resume, cga)
            except batch.Unsupported as e:
                raise _OneAtATime(str(e) or type(e).__name__, saved) from None
        while run.deadlock is None and not waves:
            together = run.clc.start(run.resident)
            if not together:
                break
            first = together[0][0][1]
            group = SimGroup(run, first, group_seed(seed), on_resume)
            for cl in together:
                members = []
                cid = _cluster_id(cl[0][0], cga, g)
                for idx, pid, rank in cl:
                    members.append(CTA(run, pid, idx, group, rank, None, cid))
                for c in members:
                    c.cluster = members
                run.ctas_run.extend(c.pid for c in members)
            _state.cta = group.ctas[0]
            ia.set_grid(g, group.ctas[0].grid_idx)
            group.sched.run("default", lambda task: kernel(**kargs), num_warps, ctas=group.ctas)
            _finish_group(run, group, max_steps)
    finally:
        _state.rec = None
        _state.batching = False
        _state.hostmem = _state.run = _state.ranges = None
        undo_batch()
        undo_blas()
        undo_alu()
        JITFunction.__call__ = saved_call
        undo_threads()
        undo_bf16()
        undo_scalar()
        undo_memo()
        undo_overflow()
        undo_desc()
        undo_polls()
        undo_check()
        undo_asm()
        undo_tlx()
        for sc in reversed(_state.scopes):
            sc.restore()
        scope.restore()
        undo_map()
        _state.cta = None
    if not waves:
        for sp in run.trace.spans:
            if sp.end > run.cta_end.get(sp.cta, -1.0):
                run.cta_end[sp.cta] = sp.end
    if check_outputs and run.deadlock is None:
        out_check.report(run)
    if recorder is not None:
        run.trace.meta["recorder"] = run.recording.meta()
    _release_groups(run)
    return run


def _release_groups(run: LaunchRun):
    """Cut the finished launch's CTAs and groups from it. A CTA, its barriers, buffers, tasks and scheduler
    reference each other (cycles only the cyclic collector frees); through ``cta.run`` they kept the launch, and
    with it its trace (a big launch's hundreds of thousands of records), alive after the result was dropped, until
    a full collection, which then walked them all, often inside a later launch. Cut, the result's records go when
    it does. A deadlocked launch keeps them: its report reads the tasks."""
    if run.deadlock is not None:
        return
    for group in run.groups:
        for cta in group.ctas:
            cta.run = None
        group.run = None
    run.groups = []


def group_seed(seed: int) -> int:
    """The scheduler seed of every group of CTAs run together: one interleaving per seed, the same in every CTA (or
    cluster) of the launch, which is what lets a wave replay its leader (sim/schedule/batch.py)."""
    return seed * 1_000_003


def _save_memory(ranges):
    """Copies of the launch's memory (every storage its arguments reach), to put back if the waves give up."""
    import ctypes
    out = []
    for lo, hi in sorted(set(ranges)):
        if hi <= lo:
            continue
        buf = (ctypes.c_uint8 * (hi - lo)).from_address(lo)
        view = np.frombuffer(buf, dtype=np.uint8)
        out.append((view, view.copy()))
    return out


def _install_batch(semantic):
    """The recording hooks of a launch run in waves (sim/schedule/batch.py); returns the undo."""
    # the interpreter's own ops: the TLX builder's additions record themselves (batch.smem_read, batch.mma, ...)
    names = [n for n in dir(type(ia.interpreter_builder)) if n.startswith(("create_", "binary_op", "unary_op",
                                                                          "ternary_op", "cast_impl"))]
    undos = [batch.patch_semantic(ia.interpreter_semantic), batch.patch_semantic(semantic),
             batch.wrap_builder(ia.interpreter_builder, names),
             batch.wrap_builder(semantic.builder, names),
             batch.refuse_tlx(semantic.builder), batch.patch_reductions()]
    batch.patch_conversions()

    def undo():
        for u in reversed(undos):
            u()
    return undo


def _run_waves(run, clusters, kernel, kargs, num_warps, g, seed, max_steps, on_resume, cga):
    """Run the launch's clusters (of one CTA, outside clusters) in waves: the first not yet run leads (simulated, its
    data flow recorded), those that failed the same guard as it (all of them, at first) replay the record together
    (sim/schedule/batch.py)."""
    order = {cl[0][1]: i for i, cl in enumerate(clusters)}
    queue = run.clc
    pending = queue.start(queue.slots)              # clusters [(grid index, pid, rank), ...]: what starts at once
    why: dict = {}                                  # first pid -> how its cluster left its last wave
    plan = batch.TracePlan(run.trace)
    by_cluster: dict = {}                           # first pid -> the scheduler whose tasks' stats it has
    _state.run = run
    while pending:
        cl = pending.pop(0)
        pids = [pid for _, pid, _ in cl]
        sig = why.get(pids[0])
        members = [m for m in pending if why.get(m[0][1]) == sig][:batch.MAX_WAVE]
        tape = batch.Tape(run, pids) if members else None
        marks = plan.marks(run.trace)
        nfind = len(run.findings)
        group = SimGroup(run, pids[0], group_seed(seed), on_resume)
        cid = _cluster_id(cl[0][0], cga, g)
        ctas = [CTA(run, pid, idx, group, rank, None, cid) for idx, pid, rank in cl]
        for c in ctas:
            c.cluster = ctas
        run.ctas_run.extend(pids)
        _state.cta = ctas[0]
        ia.set_grid(g, ctas[0].grid_idx)
        _state.rec = tape
        try:
            group.sched.run("default", lambda task: kernel(**kargs), num_warps, ctas=group.ctas)
        finally:
            _state.rec = None
        if isinstance(group.sched.error, batch.Unsupported):
            raise group.sched.error
        _finish_group(run, group, max_steps, stats=False)
        by_cluster[pids[0]] = group.sched
        if run.deadlock is not None or len(run.findings) > nfind:
            raise batch.Unsupported("a CTA deadlocked or has findings: diagnosed one CTA at a time")
        led = plan.leader(pids, marks)
        ends: dict = {}
        for sp in run.trace._spans[marks[0]:]:
            if sp.end > ends.get(sp.cta, -1.0):
                ends[sp.cta] = sp.end
        run.cta_end.update(ends)
        if not members:
            continue
        wave = batch.replay(tape, members, ia.interpreter_builder)
        passed = set(wave.passed)
        done = [m for m in members if m[0][1] in passed]
        asks = queue.asked.get(queue.slot_of.get(pids[0]), 0)
        for m in done:                              # the clusters their try_cancels took (sim/hardware/clc.py)
            for _ in range(asks):
                queue.steal(m[0][1])
        pending = [m for m in pending if m[0][1] not in passed]
        why.update(wave.failed)
        plan.members(led, [[pid for _, pid, _ in m] for m in done])
        for m in done:
            for (_, pid, _), lead in zip(m, pids):
                if lead in ends:
                    run.cta_end[pid] = ends[lead]
                run.ctas_run.append(pid)
            by_cluster[m[0][1]] = group.sched
    if queue.left():
        raise batch.Unsupported("a cluster no try_cancel took starts late (its try_cancels take what is left)")
    rank_order = {pid: (order[cl[0][1]], rank) for cl in clusters for _, pid, rank in cl}
    run.ctas_run.sort(key=lambda p: rank_order.get(p, (1 << 40, 0)))
    for first in sorted(by_cluster, key=lambda p: order.get(p, 1 << 40)):
        _add_stats(run, by_cluster[first])          # summed in launch order, as one cluster at a time sums them
    plan.clc_value = lambda pid, k: queue.value(queue.slot_of[pid], k)
    plan.install(order)
    # how the waves went: leaders simulated, and why the others left the wave they were in (a guard's line)
    run.trace.meta["wave_leaders"] = len(plan.runs)
    run.wave_splits = why
    _state.cta = None


def _user_error(run: LaunchRun, e: BaseException, tb):
    """A kernel-code exception as one error naming the kernel line (the innermost kernel frame)."""
    line = None
    for fs in traceback.extract_tb(tb):
        if fs.filename in kernel_files:
            line = fs.lineno
    msg = f"{type(e).__name__}: {e}"
    return SimulationError(f"{run.name} failed while simulating: {msg}", file=run.file, line=line,
                           hint="fix the op on this line (shapes, dtypes, indices); "
                                "err.__cause__ has the full traceback",
                           detail="".join(traceback.format_exception(type(e), e, tb)))


def raise_deadlock(run: LaunchRun, result=None):
    d = run.deadlock
    err = DeadlockError(d.message, file=run.file, line=d.line, hint=d.hint, detail=d.text())
    err.report = d
    err.result = result
    raise err
