"""One simulated launch: bind arguments, patch the builtins, run every CTA under its scheduler."""
from __future__ import annotations

import inspect
import itertools
import traceback
import warnings

import numpy as np
import triton.language as tl

from ..errors import DeadlockError, SimulationError, TLXWorkbenchError
from ..trace import Trace
from . import interp_adapter as ia
from . import rewrite
from .cost import cost_model
from .cta import CTA, kernel_frame_line
from .diagnose import deadlock_report
from .scheduler import StepLimit
from .tlx_ops import SimBuilder, _state, patch_tlx

# launch options a kernel call may carry besides its parameters
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "ctas_per_cga", "maxnreg", "enable_fp_fusion",
                  "launch_cooperative_grid", "launch_pdl", "debug", "stream", "warmup", "device",
                  "minRegAutoWS", "maxRegAutoWS", "pingpongAutoWS", "cluster_dims", "num_buffers_warp_spec",
                  "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer", "early_tma_store_lowering"}


class Finding:
    """Something wrong the simulator saw that did not stop the run (races, overflows, count mismatches)."""

    def __init__(self, kind, message, line=None, lane=None, other_line=None, file=None):
        self.kind, self.message, self.line, self.lane, self.other_line, self.file = (
            kind, message, line, lane, other_line, file)

    def __repr__(self):
        loc = f"line {self.line}" + (f" / line {self.other_line}" if self.other_line else "")
        return f"[{self.kind}] {loc}: {self.message}"


def _run_tasks(specs):
    _state.cta.run_tasks(specs)


def _jit_call(self, *args, **kwargs):
    # a @triton.jit helper called from simulated kernel code (tl.zeros too): run its rewritten Python,
    # with the tl builtins its own module sees patched (as the interpreter does on each call)
    mod = self.fn.__module__
    if mod not in _state.patched_modules:
        _state.patched_modules.add(mod)
        _state.scopes.append(ia.patch_lang(self.fn))
    return rewrite.rewrite(self.fn, _run_tasks)(*args, **kwargs)


class LaunchRun:
    """Everything one launch produced: trace, findings, deadlock, per-lane stats."""

    def __init__(self, jitfn, grid, gpu, seed, ctas, max_steps, num_warps):
        self.jitfn = jitfn
        self.fn = jitfn.fn
        self.name = jitfn.fn.__name__
        self.file = inspect.getsourcefile(jitfn.fn)
        self.cost = cost_model(gpu)
        self.gpu = self.cost.gpu
        self.seed = seed
        self.ctas_filter = ctas
        self.max_steps = max_steps
        self.num_warps = num_warps
        self.trace = Trace(time_unit="cycles", source="sim",
                           meta={"kernel": self.name, "gpu": self.gpu.name, "seed": seed})
        self.findings: list[Finding] = []
        self.deadlock = None
        self.error = None
        self.grid = grid
        self.ctas_run: list[int] = []
        self.stats: dict = {}
        self.partial = False

    def finding(self, kind, message, line=None, lane=None, other_line=None):
        self.findings.append(Finding(kind, message, line, lane, other_line, self.file))


def _bind(jitfn, args, kwargs):
    sig = inspect.signature(jitfn.fn)
    # anything that is not a parameter of the kernel is a launch option (num_warps, ctas_per_cga, ...)
    params = {k: v for k, v in kwargs.items() if k in sig.parameters}
    opts = {k: v for k, v in kwargs.items() if k not in sig.parameters}
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


def _access_checker(run: LaunchRun, ranges):
    lo = np.array([r[0] for r in ranges], dtype=np.uint64)
    hi = np.array([r[1] for r in ranges], dtype=np.uint64)

    def check(ptrs, mask, itemsize, is_store):
        p = np.asarray(ptrs, dtype=np.uint64).reshape(-1)
        if mask is not None:
            m = np.broadcast_to(np.asarray(mask, dtype=bool), np.shape(ptrs)).reshape(-1)
            p = p[m]
        cta = _state.cta
        if cta is not None:
            cta.global_access(int(p.size) * itemsize, is_store)
        if p.size == 0:
            return
        ok = np.zeros(p.shape, dtype=bool)
        for a, b in zip(lo, hi):
            ok |= (p >= a) & (p + np.uint64(itemsize) <= b)
        if not ok.all():
            bad = int(p[~ok][0])
            file, line = kernel_frame_line()
            raise SimulationError(
                f"out-of-bounds {'store' if is_store else 'load'}: {int((~ok).sum())} of {p.size} accessed "
                f"elements fall outside every tensor passed to the kernel (first bad address {bad:#x})",
                file=file, line=line, hint="mask the access (mask=offs < n) or fix the offsets")
    return check


def run_launch(jitfn, grid, args, kwargs, *, gpu="H100", seed=0, ctas=None, max_steps=2_000_000) -> LaunchRun:
    """Simulate ``jitfn[grid](*args, **kwargs)`` on CPU tensors; returns the LaunchRun (raises on errors)."""
    from triton.runtime.jit import JITFunction
    bound, opts = _bind(jitfn, args, kwargs)
    num_warps = int(opts.get("num_warps") or 4)
    cga = opts.get("ctas_per_cga") or opts.get("cluster_dims")
    if (cga and int(np.prod(cga)) > 1) or int(opts.get("num_ctas") or 1) > 1:
        raise SimulationError(f"{jitfn.fn.__name__}: launched with CTA clusters ({cga or opts.get('num_ctas')}); "
                              f"the CPU simulator models one CTA at a time",
                              file=inspect.getsourcefile(jitfn.fn), line=jitfn.fn.__code__.co_firstlineno,
                              hint="simulate a config with one CTA per cluster (e.g. NUM_CTAS=1)")
    run = LaunchRun(jitfn, grid, gpu, seed, ctas, max_steps, num_warps)
    ranges = _memory_ranges(bound.values())
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
    pids = list(itertools.product(range(g[0]), range(g[1]), range(g[2])))
    linear = [x + g[0] * (y + g[1] * z) for x, y, z in pids]
    if ctas is not None:
        wanted = set(ctas if isinstance(ctas, (list, tuple, set, range)) else [ctas])
        keep = [(p, lin) for p, lin in zip(pids, linear) if lin in wanted]
        if len(keep) < total:
            run.partial = True
            warnings.warn(f"tlx_workbench.simulate: only {len(keep)} of {total} CTAs of {run.name} are simulated "
                          f"(ctas={sorted(wanted)}); outputs written by the other CTAs are NOT computed",
                          stacklevel=3)
        pids, linear = [k[0] for k in keep], [k[1] for k in keep]

    semantic = ia.new_semantic(SimBuilder(arch=f"sm{run.gpu.arch}", num_warps=num_warps))
    kernel = rewrite.rewrite(jitfn.fn, _run_tasks)
    scope = ia.patch_lang(jitfn.fn)
    _state.scopes = []
    _state.patched_modules = {jitfn.fn.__module__}
    undo_tlx = patch_tlx(semantic)
    undo_check = ia.install_access_check(_access_checker(run, ranges))
    saved_call = JITFunction.__call__
    JITFunction.__call__ = _jit_call
    try:
        for (x, y, z), pid in zip(pids, linear):
            ia.set_grid(g, (x, y, z))
            cta = CTA(run, pid, (x, y, z), seed * 1_000_003 + pid)
            _state.cta = cta
            run.ctas_run.append(pid)
            cta.sched.run("default", lambda task: kernel(**kargs), num_warps)
            for t in cta.sched.tasks:
                st = run.stats.setdefault((t.name, t.replica), {"ctas": 0, "ops": 0, "busy": 0.0, "waiting": 0.0,
                                                                 "mma": 0.0, "cycles": 0.0})
                st["ctas"] += 1
                st["ops"] += t.stats["ops"]
                st["busy"] += t.stats["busy"]
                st["waiting"] += t.stats["waiting"]
                st["mma"] += t.stats["mma"]
                st["cycles"] = max(st["cycles"], t.clock)
            for r in cta.races.findings:
                run.findings.append(Finding("race", f"CTA {pid}: {r.message}", r.line, r.lane, r.other_line,
                                            run.file))
            if cta.sched.error is not None:
                e = cta.sched.error
                if isinstance(e, StepLimit):
                    t = cta.sched.error_task
                    raise SimulationError(
                        f"{run.name}: CTA {pid} did not finish within max_steps={max_steps} scheduling steps "
                        f"(last at line {t.line} in {t})", file=run.file, line=t.line,
                        hint="a loop that never ends, or a spin on a value no task changes; raise max_steps "
                             "for big shapes")
                if isinstance(e, TLXWorkbenchError):
                    raise e
                raise _user_error(run, e, cta.sched.error_tb)
            if cta.sched.deadlock:
                run.deadlock = deadlock_report(run, cta)
                break
            cta.sched.drain_async()
    finally:
        JITFunction.__call__ = saved_call
        undo_check()
        undo_tlx()
        for sc in reversed(_state.scopes):
            sc.restore()
        scope.restore()
        _state.cta = None
    return run


def _user_error(run: LaunchRun, e: BaseException, tb):
    """A kernel-code exception as one error naming the kernel line (the innermost kernel frame)."""
    line = None
    for fs in traceback.extract_tb(tb):
        if fs.filename in rewrite.kernel_files:
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
