"""The plain-Python core of ``%%tlx``: compile, simulate, run, check, bench and profile one launch.

:func:`evaluate` does what the options ask and returns a :class:`CellResult`; the
magics and the knobs panel only parse options and show what it returns.
"""
from __future__ import annotations

import contextlib
import inspect

from ..errors import TLXWorkbenchError
from .errors import CellError, KnobError
from .launch import Launch, blame_host_line, capture_kernel_launch, outputs_of
from .result import CellResult


def has_gpu() -> bool:
    """Whether a real GPU is present (not an offline target)."""
    from ..target import has_gpu as _has
    return _has()


def resolve_mode(mode: str) -> str:
    """``"auto"`` -> ``"gpu"`` when a GPU is present, else ``"sim"``; ``"sim"``/``"gpu"`` stay.

    >>> resolve_mode("sim")
    'sim'
    """
    if mode in ("sim", "gpu"):
        return mode
    return "gpu" if has_gpu() else "sim"


def cell_gpu(target):
    """The one GPU model a cell names, for its compile, simulation, checker and header alike.

    A model typed as the target (``--target H100``) is that model. An architecture alone
    (``sm_90``) stands for this machine's GPU when it has that architecture, else for the
    workbench's default of that architecture (:func:`tlx_workbench.target.gpu_model`): H200 for
    Hopper (the GPU the cost model is calibrated on), B200 for Blackwell, as every verb takes it.

    >>> cell_gpu("H100").name, cell_gpu("sm_100").name
    ('H100', 'B200')
    """
    from ..target import GPU_MODELS, GPUModel, gpu_model
    chosen = gpu_model(target)
    if isinstance(target, GPUModel) or str(target).upper() in GPU_MODELS:
        return chosen
    if has_gpu():
        try:
            import torch
            name = torch.cuda.get_device_name()
            for m in GPU_MODELS.values():
                if m.name in name and m.arch == chosen.arch:
                    return m
        except Exception:  # a driver that cannot name its GPU: the architecture's default
            pass
    return chosen


def target_label(target) -> str:
    """How a cell names its target: the architecture and the GPU model, "sm_90 (H200)"."""
    m = cell_gpu(target)
    return f"{m.target_name} ({m.name})"


def offline_context(mode: str, target: str):
    """Without a GPU, simulator work runs under an offline target so TLX modules import and tensors live on CPU.

    The offline GPU is the cell's model (:func:`cell_gpu`). Inside an offline target already (or on
    the GPU path) it changes nothing.
    """
    if resolve_mode(mode) == "sim" and not has_gpu():
        from ..target import current_model, offline
        if current_model() is None:
            return offline(cell_gpu(target))
    return contextlib.nullcontext()


def evaluate(launch: Launch | None, **options) -> CellResult:
    """Do what ``%%tlx`` options ask for one launch (the magic's engine; plain Python).

    Options: mode, target, check, reference, outputs, bench, flops, nbytes, baselines, profile, show,
    constexprs, timeout, seed, schedules, isolate (as :func:`_evaluate` declares them). An error whose
    fix is in the cell's host code (a descriptor's block_shape) names that line.

    >>> res = evaluate(parse_launch("add_kernel[(4,)](x, y, out, n, BLOCK=256)", ns), mode="sim",
    ...                check=True, reference=lambda x, y, out, n: x + y)          # doctest: +SKIP
    """
    res = _evaluate(launch, **options)
    res.errors = [blame_host_line(e, launch) for e in res.errors]
    return res


def _evaluate(launch: Launch | None, *, mode: str = "auto", target: str = "sm_90", check: bool = False,
              reference=None, outputs=None, bench: bool = False, flops=None, nbytes=None, baselines=None,
              profile: bool = False, show: tuple = (), constexprs: dict | None = None, timeout: float = 20.0,
              seed: int = 0, schedules: int = 1, isolate: bool = True) -> CellResult:
    import tlx_workbench as wb
    mode = resolve_mode(mode)
    if launch is not None:
        outputs = launch.output_positions(outputs)
    res = CellResult(mode=mode, target=target_label(target), launch=launch.text if launch else "", show=tuple(show))
    gpu = cell_gpu(target)
    if launch is None:
        return res
    kwargs = dict(launch.kwargs)
    if constexprs:
        if not launch.is_kernel:
            params = inspect.signature(launch.fn).parameters
            missing = [k for k in constexprs if k not in params and not any(
                p.kind == p.VAR_KEYWORD for p in params.values())]
            if missing:
                raise KnobError(f"{launch.name} takes no keyword {missing[0]!r}, so the knob cannot set it",
                                hint="end the cell with the kernel launch itself (kernel[grid](...)), or give the "
                                     "host function that keyword")
        # the knob's value replaces the argument, whether the launch passes it by position or by name
        launch = launch.with_values(constexprs)
        kwargs = dict(launch.kwargs)
    missing = launch.unbound() if launch.is_kernel else []
    missing = [m for m in missing if m not in kwargs]
    if missing:
        # the launch forgot it: say so at the launch, not at the kernel's @triton.jit
        def_line = getattr(launch.fn, "def_file_line_number", None)
        what = ", ".join(missing)
        res.add_error(CellError(
            f"the launch gives no value for {what}, a parameter of {launch.name}"
            + (f" (defined at line {def_line})" if def_line else ""), file=launch.file, line=launch.line,
            hint=f"add {', '.join(m + '=...' for m in missing)} to the launch (constexprs are passed by name)"))
        return res
    # what the kernel is specialized on; launch options (num_warps, ctas_per_cga, ...) are not constexprs
    from ..compiler.launch_options import LAUNCH_OPTIONS
    res.constexprs = {k: v for k, v in kwargs.items()
                      if not hasattr(v, "shape") and k not in LAUNCH_OPTIONS and k != "grid"}
    res.constexprs.update(constexprs or {})         # a knob on a positional parameter too
    model = gpu.name
    if mode == "sim" and gpu.arch != 90:
        # the simulator models Hopper; a Blackwell target still compiles for sm_100 above
        res.notes.append(f"the simulator models Hopper: the run uses the H200 cost model, the compile "
                         f"{target_label(target)}")
        model = "H200"

    # compile (offline) when a static view is wanted, or for the static checker on the GPU path
    checker = _has_checker() if check else False
    if {"report", "memory", "ir"} & set(show) or (checker and mode == "gpu"):
        try:
            k, cargs, ckw = capture_kernel_launch(launch, kwargs) if not launch.is_kernel else \
                (launch.fn, launch.args, kwargs)
            res.report = wb.compile(k, *cargs, target=gpu.name, **ckw)
        except ImportError as e:
            res.notes.append(f"compiler not available ({e}); --report/--memory/--ir skipped")
        except TLXWorkbenchError as e:
            res.add_error(e)
            return res
    def run_checker():
        from ..checker import check as _check
        try:
            if mode == "sim":
                # the checker's per-phase rules read the cell's own simulation of this launch (one run, not
                # two); when the simulator stopped the launch, its error is said already: the static rules only
                res.findings = _check(launch.fn, *launch.args, target=gpu.name, grid=launch.grid, gpu=model,
                                      seed=seed, simulate=res.sim is not None, sim_result=res.sim, **kwargs)
            elif res.report is not None:
                # GPU tensors do not go through the simulator: the static rules only
                res.findings = _check(res.report)
        except TLXWorkbenchError as e:
            res.add_error(e)
        except Exception as e:  # a checker problem must not hide the run
            res.notes.append(f"barrier-protocol check could not run: {type(e).__name__}: {e}")
    if checker and mode != "sim":
        run_checker()
    elif check and not checker:
        res.notes.append("tlx_workbench.checker is not available: only the outputs are checked")

    if mode == "sim":
        _evaluate_sim(res, launch, kwargs, check=check, reference=reference, outputs=outputs, model=model,
                      seed=seed, schedules=schedules)
        if checker:
            run_checker()
        if bench:
            res.notes.append("--bench needs a GPU: in simulator mode the simulated cycles are shown instead "
                             f"({res.sim.cycles:.0f} cycles)" if res.sim is not None else "--bench needs a GPU")
        return res

    # GPU
    from ..runtime.launch import run as _run
    try:
        if check or not (bench or profile):
            res.run = _run(launch.fn, *launch.args, grid=launch.grid, reference=reference if check else None,
                           outputs=outputs, timeout=timeout, isolate=isolate, **kwargs)
            res.value = res.run.output if res.run.outputs else None
        if bench:
            res.bench = wb.bench(launch.fn, *launch.args, grid=launch.grid, flops=flops, bytes=nbytes,
                                 baselines=baselines, timeout=timeout, isolate=isolate, **kwargs)
        if profile:
            res.trace = wb.profile(launch.fn, *launch.args, grid=launch.grid, timeout=timeout, isolate=isolate,
                                   **kwargs)
    except TLXWorkbenchError as e:
        res.add_error(e)
        from ..runtime.watchdog import KernelTimeoutError
        if isinstance(e, KernelTimeoutError):
            res.notes.append("the simulator's diagnosis of the same launch follows (on CPU copies of the inputs)")
            try:
                _diagnose_hang(res, launch, kwargs, model=model, seed=seed)
            except Exception as d:  # the diagnosis is a bonus; the timeout error stands
                res.notes.append(f"simulator diagnosis unavailable: {d}")
    return res


def _has_checker() -> bool:
    try:
        from ..checker import check  # noqa: F401
        return True
    except ImportError:
        return False


def _evaluate_sim(res, launch, kwargs, *, check, reference, outputs, model, seed, schedules):
    import tlx_workbench as wb
    from ..runtime.launch import compute_reference, poisoned_allocations, _tensor_of, output_positions
    from ..runtime.verify import compare, poison_
    from ..runtime.launch import infer_tile
    refs = None
    if check and reference is not None:
        refs, _ = compute_reference(reference, launch.args)
    if launch.is_kernel:
        for i in output_positions(launch.fn, launch.args, outputs):
            poison_(_tensor_of(launch.args[i]))
    try:
        with poisoned_allocations():
            sim = wb.simulate(launch.fn, *launch.args, grid=launch.grid, gpu=model, seed=seed, schedules=schedules,
                              on_deadlock="return", **kwargs)
    except TLXWorkbenchError as e:
        res.add_error(e)
        return
    res.sim, res.trace, res.value = sim, sim.trace, sim.value
    if sim.deadlock is not None:
        try:
            sim.raise_for_errors()
        except TLXWorkbenchError as e:
            res.add_error(e)
        return
    if refs is not None:
        outs = outputs_of(launch, outputs, sim.value)
        res.check = [compare(o, r, tile=infer_tile(kwargs, o.dim()), name=f"out{i}" if len(outs) > 1 else "out")
                     for i, (o, r) in enumerate(zip(outs, refs))]


def _diagnose_hang(res, launch, kwargs, *, model, seed):
    """After a GPU timeout: simulate the same launch on CPU copies and show the deadlock report."""
    import torch

    import tlx_workbench as wb
    from ..target import offline

    def cpu(a):
        if isinstance(a, torch.Tensor):
            return a.detach().cpu().clone()
        base = getattr(a, "base", None)
        if isinstance(base, torch.Tensor):
            import copy
            d = copy.copy(a)
            d.base = base.detach().cpu().clone()
            return d
        return a
    with offline(model):
        sim = wb.simulate(launch.fn, *[cpu(a) for a in launch.args], grid=launch.grid, gpu=model, seed=seed,
                          on_deadlock="return", **{k: cpu(v) for k, v in kwargs.items()})
    res.sim, res.trace = sim, sim.trace

