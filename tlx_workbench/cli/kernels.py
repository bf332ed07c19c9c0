"""``check``, ``compile`` and ``predict``: the verbs that take ``FILE[::kernel]``.

``FILE`` is a Python script that launches the kernel (its ``__main__`` block, or code at the top level), run as
``python FILE args...`` with every launch *captured*, not run (:class:`tlx_workbench.intercept.Interceptor`,
``capture_only``): each distinct launch (kernel, grid, the arguments' shapes and types, the constexprs) is then
handed to the Python API with the program's own arguments. ``::kernel`` keeps the launches of that kernel.
``compile FILE::kernel --signature ...`` compiles a kernel no script launches (``wb.compile(signature=...)``).

    tlx-workbench check my_gemm.py                       # wb.check of every launch: findings, exit 1 if any
    tlx-workbench compile my_gemm.py::gemm --target sm_100 --config BM=128,BN=128
    tlx-workbench predict my_gemm.py::gemm --sim H200    # wb.predict: the launch's time on that GPU
    tlx-workbench predict my_gemm.py::gemm --order time  # the same time whatever the seed: compare two versions
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys

from .common import CLEAN, FINDING, UsageError, default_gpu, parse_assignments, progress, say, short_path, \
    write_json


def add_parsers(sub) -> None:
    for verb, helptext in (("check", "the barrier-protocol findings of the kernel launches a script makes"),
                           ("compile", "compile a kernel offline for a target and print its CompileReport"),
                           ("predict", "the predicted time of the kernel launches a script makes")):
        p = sub.add_parser(verb, help=helptext, description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("file", metavar="FILE[::kernel]" if verb != "compile" else "FILE::kernel",
                       help="a script that launches the kernel; ::kernel picks one kernel")
        p.add_argument("--sim", metavar="GPU", default=None, help="the GPU: H200 (default, or $TLXWB_SIM), H100, "
                                                                  "B200")
        if verb == "compile":
            p.add_argument("--target", default=None, help="sm_90 or sm_100 (or a GPU name; default: --sim's)")
            p.add_argument("--signature", action="append", default=[], metavar="NAME=TYPE,...",
                           help="compile without a launch: each parameter's Triton type, e.g. x_ptr=*fp16:16,n=i32")
        p.add_argument("--config", action="append", default=[], metavar="K=V,...",
                       help="constexprs and options to set on every launch, e.g. BM=128,num_warps=8")
        p.add_argument("--launch", type=int, default=None, metavar="N",
                       help="only the N-th distinct launch (0-based)")
        if verb == "predict":
            p.add_argument("--order", default="seeded", metavar="ORDER",
                           help="the simulator's task order: seeded (the default, what the cost model is calibrated "
                                "on) or time (the tasks in simulated-time order: the same time whatever the seed, "
                                "to compare two versions of a kernel)")
        p.add_argument("--json", metavar="FILE", default=None, help="write the results as JSON to FILE (- : stdout)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
        p.add_argument("args", nargs="*", help="arguments for the script, after --")
        p.set_defaults(func={"check": check_main, "compile": compile_main, "predict": predict_main}[verb])


def split_target(spec: str) -> tuple[str, str | None]:
    """``"k.py::gemm"`` -> ("k.py", "gemm"); ``"k.py"`` -> ("k.py", None)."""
    path, sep, kernel = spec.partition("::")
    return path, (kernel or None) if sep else None


def _script_args(args) -> list[str]:
    rest = list(args.args)
    return rest[1:] if rest and rest[0] == "--" else rest


def capture(path: str, argv, gpu: str, kernel: str | None = None, quiet: bool = False):
    """The distinct launches (``LaunchRecord``s, nothing run) the script at ``path`` makes, of ``kernel`` if
    given, and notes on how the script ended. Launches are told apart by kernel, grid, the arguments' shapes,
    dtypes and values (scalars) and the constexprs: a benchmark loop's thousand launches are one."""
    from ..intercept import GPUOnCPU, Interceptor
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise UsageError(f"{path}: no such file", hint="give the path of a Python script that launches the kernel")
    notes = []
    records: list = []
    session = GPUOnCPU(gpu).enable()
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        with Interceptor(session.gpu, capture_only=True, launches=records):
            sys.argv = [path, *argv]
            sys.path.insert(0, os.path.dirname(full))
            try:
                runpy.run_path(full, run_name="__main__")
            except SystemExit:
                pass
            except Exception as e:  # noqa: BLE001 - captured launches are kept; the program could not go on
                where = _program_line(e, full)
                notes.append(f"the script stopped{where} with {type(e).__name__}: {str(e).splitlines()[0][:160]} "
                             f"(launches are captured, not run, so outputs it checks are not computed)")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        session.disable()
    found = [la for la in records if kernel is None or la.kernel == kernel]
    if not found:
        names = sorted({la.kernel for la in records})
        if kernel is not None and names:
            raise UsageError(f"{path} launches no kernel named {kernel} (it launches {', '.join(names)})",
                             hint=f"use {path}::{names[0]}")
        raise UsageError(f"{path} launches no kernel when run as a script" + (f" ({notes[0]})" if notes else ""),
                         hint="give a script that launches the kernel (e.g. in its __main__ block), or for "
                              "compile, --signature with the kernel's parameter types")
    distinct, keys = [], set()
    for la in found:
        k = _launch_key(la)
        if k not in keys:
            keys.add(k)
            distinct.append(la)
    if not quiet:
        progress(f"[tlx-workbench] {path}: {len(found)} launch(es) captured, {len(distinct)} distinct")
    return distinct, notes


def _program_line(e, script) -> str:
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == script]
    return f" at line {frames[-1].lineno}" if frames else ""


def _launch_key(la) -> tuple:
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    jit, args, kwargs = la.launch

    def sig(v):
        if isinstance(v, torch.Tensor):
            return ("tensor", tuple(v.shape), str(v.dtype), tuple(v.stride()))
        if isinstance(v, TensorDescriptor):
            return ("desc", sig(v.base), tuple(v.block_shape))
        if isinstance(v, (int, float, bool, str, type(None))):
            return v
        return repr(v)
    grid = la.grid if isinstance(la.grid, (list, tuple)) else getattr(la.grid, "__code__", repr(la.grid))
    return (la.kernel, id(jit), repr(grid), tuple(sig(a) for a in args),
            tuple(sorted((k, sig(v)) for k, v in kwargs.items())))


def _pick(records, n):
    if n is None:
        return records
    if not 0 <= n < len(records):
        raise UsageError(f"--launch {n}: there are {len(records)} distinct launch(es)", hint="count from 0")
    return [records[n]]


def _relaunch(la, config: dict):
    """A host function making the captured launch again (with ``config`` set): what the API's verbs take."""
    jit, args, kwargs = la.launch
    grid = la.grid
    kw = {**kwargs, **config}

    def launch():
        jit[grid](*args, **kw)
    launch.__name__ = launch.__qualname__ = f"{la.kernel}_launch"
    return launch


# -- check ---------------------------------------------------------------------------------------------
def check_main(args) -> int:
    from .. import json_schema as js
    from ..checker import check
    from ..target import gpu_model
    path, kernel = split_target(args.file)
    gpu = gpu_model(args.sim or default_gpu()).name
    config = parse_assignments(args.config)
    records, notes = capture(path, _script_args(args), gpu, kernel, args.quiet)
    results = []
    for la in _pick(records, args.launch):
        if not args.quiet:
            progress(f"[tlx-workbench] checking {la.kernel}{_grid(la)} ...")
        res = check(_relaunch(la, config), target=f"sm_{gpu_model(gpu).arch}", gpu=gpu)
        results.append((la, res))
        say(args, f"{la.kernel}{_grid(la)}: " + repr(res))
    for n in notes:
        say(args, f"note: {n}")
    code = FINDING if any(not r.ok for _, r in results) else CLEAN
    say(args, f"result: {'findings' if code else 'clean'} ({sum(not r.ok for _, r in results)} of "
              f"{len(results)} launch(es) with findings)")
    write_json(args.json, js.document("check", gpu=gpu, exit_code=code, checks=[js.check_result(r) for _, r in results],
                                      notes=notes))
    return code


# -- compile ----------------------------------------------------------------------------------------------
def compile_main(args) -> int:
    from .. import json_schema as js
    from ..compiler import compile as wb_compile
    from ..compiler.launch_options import compile_kwargs
    from ..errors import CompileError
    from ..target import gpu_model
    path, kernel = split_target(args.file)
    if kernel is None:
        raise UsageError(f"compile {args.file}: name the kernel, FILE::kernel",
                         hint=f"e.g. tlx-workbench compile {path}::my_kernel --target sm_90")
    gpu = gpu_model(args.target or args.sim or default_gpu())
    target = f"sm_{gpu.arch}"
    config = parse_assignments(args.config)
    notes: list[str] = []
    jobs = []
    if args.signature:
        fn = _load_kernel(path, kernel, gpu.name)
        signature = {k: str(v) for k, v in parse_assignments(args.signature, "--signature").items()}
        jobs.append((kernel, lambda: wb_compile(fn, target=gpu.name, signature=signature, **config)))
    else:
        records, notes = capture(path, _script_args(args), gpu.name, kernel, args.quiet)
        for la in _pick(records, args.launch):
            jit, largs, lkwargs = la.launch
            kw = {**compile_kwargs(lkwargs), **config}
            jobs.append((f"{la.kernel}{_grid(la)}", lambda jit=jit, largs=largs, kw=kw:
                         wb_compile(jit, *largs, target=gpu.name, **kw)))
    reports, code = [], CLEAN
    for what, job in jobs:
        if not args.quiet:
            progress(f"[tlx-workbench] compiling {what} for {target} ({gpu.name}) ...")
        try:
            r = job()
        except CompileError as e:
            sys.stderr.write(f"{e}\n")
            notes.append(f"{what}: the compiler refused it: {e.message.splitlines()[0][:200]}")
            code = FINDING
            continue
        reports.append(r)
        say(args, r.summary())
    for n in notes:
        say(args, f"note: {n}")
    write_json(args.json, js.document("compile", gpu=gpu.name, exit_code=code, target=target,
                                      reports=[js.compile_report(r) for r in reports], notes=notes))
    return code


def _load_kernel(path: str, name: str, gpu: str):
    """The kernel ``name`` defined in the module at ``path`` (imported, not run as a script)."""
    import importlib.util
    from triton.runtime.jit import KernelInterface
    from ..intercept import GPUOnCPU
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise UsageError(f"{path}: no such file")
    mod_name = "_tlxwb_cli_" + os.path.splitext(os.path.basename(full))[0].replace("-", "_")
    with GPUOnCPU(gpu):
        spec = importlib.util.spec_from_file_location(mod_name, full)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        sys.path.insert(0, os.path.dirname(full))
        try:
            spec.loader.exec_module(mod)
        finally:
            sys.path.remove(os.path.dirname(full))
    fn = getattr(mod, name, None)
    if not isinstance(fn, KernelInterface):
        kernels = sorted(k for k, v in vars(mod).items() if isinstance(v, KernelInterface))
        raise UsageError(f"{path} defines no kernel named {name}" + (f" (it defines {', '.join(kernels)})"
                                                                     if kernels else ""))
    return fn


# -- predict ----------------------------------------------------------------------------------------------
def predict_main(args) -> int:
    from .. import json_schema as js
    from ..errors import SimulationError
    from ..sim.timing.prediction import predict
    from ..target import gpu_model
    from ..sim.schedule.scheduler import ORDERS
    if args.order not in ORDERS:
        raise UsageError(f"--order {args.order!r} is not an order of the simulator's tasks",
                         hint=f"use one of {', '.join(ORDERS)}")
    path, kernel = split_target(args.file)
    gpu = gpu_model(args.sim or default_gpu()).name
    config = parse_assignments(args.config)
    records, notes = capture(path, _script_args(args), gpu, kernel, args.quiet)
    preds, code = [], CLEAN
    for la in _pick(records, args.launch):
        if not args.quiet:
            progress(f"[tlx-workbench] predicting {la.kernel}{_grid(la)} on {gpu} ...")
        try:
            p = predict(_relaunch(la, config), gpu=gpu, order=args.order)
        except SimulationError as e:        # a deadlock: no time to predict
            sys.stderr.write(f"{e}\n")
            notes.append(f"{la.kernel}{_grid(la)}: {type(e).__name__} at {short_path(e.file)}:{e.line}: "
                         f"{e.message.splitlines()[0][:200]}")
            code = FINDING
            continue
        preds.append(p)
        say(args, repr(p))
    for n in notes:
        say(args, f"note: {n}")
    write_json(args.json, js.document("predict", gpu=gpu, exit_code=code, predictions=[js.prediction(p) for p in preds],
                                      notes=notes))
    return code


def _grid(la) -> str:
    g = la.grid
    if isinstance(g, (list, tuple)):
        return str(tuple(g))
    return "[grid(meta)]"
