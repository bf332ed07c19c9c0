"""``compile``: run the real TLX compiler for an offline target and build a CompileReport.

The kernel is compiled through ``triton.compile(ASTSource(...))`` with the
target given explicitly, so compiling the same kernel for sm_90 and sm_100 in
one process is fine, and the kernel's own JIT caches (``device_caches``) are
left untouched. Arguments are bound with Triton's own binder (the code
``JITFunction.run`` uses), so example tensors, TensorDescriptors and scalars are
specialized exactly as a launch would specialize them.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib.util
import os
import sys
import threading
import time
from typing import Any

from ..errors import CompileError
from ..target import GPUModel, gpu_model, offline
from .report import CompileReport

_CACHE: dict[str, CompileReport] = {}
_CACHE_LOCK = threading.Lock()
_BINDERS: dict[tuple[int, int], tuple[Any, Any]] = {}


# ---- the kernel --------------------------------------------------------------------------
@dataclasses.dataclass
class _Kernel:
    jit: Any                                 # triton.runtime.jit.JITFunction
    config: Any = None                       # triton.Config, if the kernel is autotuned
    heuristics: list = dataclasses.field(default_factory=list)   # [(name, fn)], outermost first


def _resolve(kernel, config) -> _Kernel:
    from triton.runtime.jit import JITFunction
    from triton.runtime.autotuner import Autotuner, Heuristics, Config

    out = _Kernel(jit=None)
    obj = kernel
    autotuner = None
    for _ in range(8):
        if isinstance(obj, JITFunction):
            out.jit = obj
            break
        if isinstance(obj, Autotuner):
            autotuner = obj
        elif isinstance(obj, Heuristics):
            out.heuristics.extend(obj.values.items())
        elif not hasattr(obj, "fn"):
            break
        obj = obj.fn
    if out.jit is None:
        raise CompileError(
            f"{kernel!r} is not a Triton kernel",
            hint="pass a function decorated with @triton.jit (optionally wrapped by @triton.autotune / @triton.heuristics)")
    if isinstance(config, Config):
        out.config = config
    elif config is not None:
        if isinstance(config, int):
            configs = getattr(autotuner, "configs", None) or []
            if not 0 <= config < len(configs):
                raise _bad_arg(out.jit, f"config index {config} is out of range: the kernel has {len(configs)} configs",
                               "pass an index below the number of configs, or a triton.Config")
            out.config = configs[config]
        elif isinstance(config, dict):
            opts = {k: config[k] for k in ("num_warps", "num_stages", "num_ctas", "maxnreg", "pre_hook",
                                           "ctas_per_cga") if k in config}
            out.config = Config({k: v for k, v in config.items() if k not in opts}, **opts)
        else:
            raise _bad_arg(out.jit, f"config={config!r} is not a triton.Config, an index or a dict",
                           "pass one of the kernel's triton.Config objects, its index, or a dict of constexprs")
    elif autotuner is not None and autotuner.configs:
        out.config = autotuner.configs[0]
    return out


def _bad_arg(jit, message: str, hint: str) -> CompileError:
    return CompileError(message, file=jit.file_name, line=jit.def_file_line_number, hint=hint)


# ---- binding arguments -------------------------------------------------------------------
def _binder(jit, model: GPUModel):
    key = (id(jit), model.arch)
    hit = _BINDERS.get(key)
    if hit is not None and hit[0] is jit:
        return hit[1]
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    backend = make_backend(model.gpu_target())
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    _BINDERS[key] = (jit, (backend, binder))
    return backend, binder


def _copy_arg(a):
    from triton.tools.tensor_descriptor import TensorDescriptor
    if isinstance(a, TensorDescriptor):
        c = copy.copy(a)
        c.block_shape = list(a.block_shape)
        return c
    return a


def _options(jit, kernel: _Kernel, num_warps, num_stages, ctas_per_cga) -> dict:
    from triton import knobs
    cfg = kernel.config
    opts: dict[str, Any] = {}
    if cfg is not None:
        for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            v = getattr(cfg, k, None)
            if v is not None:
                opts[k] = v
        if ctas_per_cga is None:
            ctas_per_cga = getattr(cfg, "ctas_per_cga", None)
    if num_warps is not None:
        opts["num_warps"] = num_warps
    if num_stages is not None:
        opts["num_stages"] = num_stages
    if ctas_per_cga is not None:
        dims = tuple(int(d) for d in ctas_per_cga)
        if len(dims) != 3 or dims[1] != 1 or dims[2] != 1:
            raise _bad_arg(jit, f"ctas_per_cga={ctas_per_cga!r}: only (N, 1, 1) clusters can be compiled",
                           "use ctas_per_cga=(N, 1, 1)")
        # TLX's ctas_per_cga=(N,1,1) is upstream's num_ctas=N (utlx_plugin/_ctas_per_cga.py)
        if dims[0] != 1:
            opts["num_ctas"] = dims[0]
    opts["debug"] = bool(jit.debug) or bool(knobs.runtime.debug)
    opts["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    return opts


def _bind(kernel: _Kernel, model: GPUModel, args, constexprs: dict, opts: dict, signature):
    """(ASTSource, CUDAOptions, bound constexpr values) for the call."""
    from triton.compiler import ASTSource
    jit = kernel.jit
    names = [p.name for p in jit.params]
    unknown = [k for k in constexprs if k not in names]
    if unknown:
        raise _bad_arg(jit, f"{jit.__name__} has no parameter {unknown[0]!r}",
                       f"its parameters are: {', '.join(names)}")
    backend, binder = _binder(jit, model)
    if signature is not None:
        return _from_signature(kernel, backend, signature, constexprs, opts)
    args = [_copy_arg(a) for a in args]
    values = dict(constexprs)
    cfg = kernel.config
    if cfg is not None:
        for k, v in cfg.kwargs.items():
            values.setdefault(k, v)
    if kernel.heuristics:
        nargs = {**dict(zip(names, args)), **values}
        for k, fn in kernel.heuristics:
            if k not in constexprs:
                values[k] = nargs[k] = fn(nargs)
    if cfg is not None and cfg.pre_hook is not None:
        # the autotuner calls pre_hook(full_nargs) before a launch; TLX kernels use it to
        # give TensorDescriptors their block shapes (and sometimes to add constexprs)
        nargs = {**dict(zip(names, args)), **values, **cfg.all_kwargs()}
        try:
            cfg.pre_hook(nargs)
        except Exception as e:
            raise CompileError(f"the config's pre_hook failed: {type(e).__name__}: {e}",
                               file=getattr(getattr(cfg.pre_hook, "__code__", None), "co_filename", None),
                               line=getattr(getattr(cfg.pre_hook, "__code__", None), "co_firstlineno", None),
                               hint="pass the arguments the kernel's host code would pass (tensors, descriptors)") from e
        for i, n in enumerate(names):
            if i < len(args):
                args[i] = nargs.get(n, args[i])
            elif n in nargs and n not in values:
                values[n] = nargs[n]
    positional = len(args)
    kw = {k: v for k, v in values.items() if k not in names[:positional]}
    try:
        bound, specialization, options = binder(*args, **kw, **opts)
    except TypeError as e:
        import re
        missing = re.findall(r"'(\w+)'", str(e)) if "missing" in str(e) else []
        if missing:
            raise _bad_arg(jit, f"{jit.__name__} needs a value for {', '.join(missing)}",
                           f"pass {', '.join(m + '=...' for m in missing)} to compile() (or the arguments in order)") from None
        raise _bad_arg(jit, f"cannot bind the arguments: {str(e).replace('dynamic_func()', jit.__name__ + '()')}",
                       "pass every kernel parameter, positionally or by name (constexprs by name)") from None
    options, sig, consts, attrs = jit._pack_args(backend, {**kw, **opts}, bound, specialization, options)
    return ASTSource(jit, sig, consts, attrs), options, {n: bound[n] for n in names if sig[n] == "constexpr"}


def _from_signature(kernel: _Kernel, backend, signature: dict, constexprs: dict, opts: dict):
    from triton.compiler import ASTSource
    jit = kernel.jit
    values = dict(constexprs)
    if kernel.config is not None:
        for k, v in kernel.config.kwargs.items():
            values.setdefault(k, v)
    sig, consts, attrs = {}, {}, {}
    for p in jit.params:
        if p.is_constexpr:
            if p.name in signature and not isinstance(signature[p.name], str):
                values.setdefault(p.name, signature[p.name])
            if p.name in values:
                v = values[p.name]
            elif p.has_default:
                v = p.default
            else:
                raise _bad_arg(jit, f"constexpr {p.name!r} has no value",
                               f"pass {p.name}=... to compile()")
            sig[p.name] = "constexpr"
            consts[(p.num,)] = v
            continue
        ty = signature.get(p.name)
        if ty is None:
            raise _bad_arg(jit, f"signature has no type for parameter {p.name!r}",
                           'give every non-constexpr parameter a type, e.g. {"x_ptr": "*fp16:16", "n": "i32"}')
        ty = str(ty)
        # "*fp16:16" = a pointer Triton may assume 16-byte aligned (as triton.tools.compile spells it)
        if ":" in ty and not ty.startswith("tensordesc"):
            ty, hint = ty.rsplit(":", 1)
            if hint.strip() == "16":
                attrs[(p.num,)] = [["tt.divisibility", 16]]
        sig[p.name] = ty
    options = backend.parse_options(opts)
    return ASTSource(jit, sig, consts, attrs), options, {n: consts[(jit.arg_names.index(n),)] for n in sig if sig[n] == "constexpr"}


# ---- the cache ---------------------------------------------------------------------------
def _versions() -> str:
    import triton
    out = [f"triton={triton.__version__}"]
    try:
        from importlib.metadata import version
        out.append(f"utlx={version('triton-utlx')}")
    except Exception:
        pass
    from .._version import __version__ as wb
    out.append(f"wb={wb}")
    return ";".join(out)


_VERSIONS: str | None = None


def _cache_key(src, options, model: GPUModel) -> str:
    global _VERSIONS
    from triton import knobs
    if _VERSIONS is None:
        _VERSIONS = _versions()
    hook = knobs.runtime.add_stages_inspection_hook
    extra = hook()[1] if hook is not None else ""
    # Triton's source hash ignores where the kernel lives; the report's lines do not
    where = f"{src.fn.fn.__code__.co_filename}:{src.fn.fn.__code__.co_firstlineno}"
    key = f"{src.hash()}|{options.hash()}|{model.name}|{model.arch}|{_VERSIONS}|{extra}|{where}"
    return hashlib.sha256(key.encode()).hexdigest()


def clear_cache() -> None:
    """Forget every cached CompileReport (Triton's on-disk cache is not touched)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _locations_name(compiled, jit) -> bool:
    """Whether the IR's source locations point into this kernel's file.

    Triton's on-disk cache is keyed by the kernel's text, not its file: the same text in
    a second file (a copied or generated variant) hits the first file's entry, whose
    locations name the first file and its lines.
    """
    return jit.fn.__code__.co_filename in compiled.asm.get("ttgir", "")


def _compile_uncached(src, model: GPUModel, options):
    import triton
    from triton import knobs
    saved = knobs.compilation.always_compile
    knobs.compilation.always_compile = True
    try:
        return triton.compile(src, target=model.gpu_target(), options=options.__dict__)
    finally:
        knobs.compilation.always_compile = saved


# ---- the entry point ---------------------------------------------------------------------
def compile(kernel, *args, target: "str | GPUModel" = "sm_90", num_warps: int | None = None,
            num_stages: int | None = None, ctas_per_cga=None, config=None, signature: dict | None = None,
            sass: str = "background", **constexprs) -> CompileReport:
    """Compile a TLX kernel for `target` (no GPU needed) and report what the compiler made of it.

    `args` are example launch arguments (torch tensors, ``TensorDescriptor``s, scalars) as
    the host code would pass them; or give ``signature={"x_ptr": "*fp16:16", "n": "i32"}``
    instead. Constexprs (and any parameter) go by name. An autotuned kernel compiles with
    ``config`` (a ``triton.Config``, its index, or a dict), by default its first config;
    the config's ``pre_hook`` runs on copies of the arguments, as a launch would run it.

    ``sass``: when nvdisasm (~0.5 s of CPU, more than the rest of the report) runs.
    ``"background"`` (default) starts it before ``compile`` returns, so ``report.sass`` (and
    ``report.wgmma_overlap``, ``source_map``, the reprs, which read it) is ready soon after;
    ``"lazy"`` starts it only when SASS is first asked for: a sweep that reads only
    ``resources``, ``metadata``, ``ptxas_advisories`` and ``tasks`` never pays for it, nor has
    it compete with its next compile for the CPU. The report is the same either way (one
    cached object: a ``"background"`` call that hits a ``"lazy"`` report starts its nvdisasm).
    Whatever the mode, the SMEM/TMEM allocation map, the barrier table and
    ``stages["ttgir_alloc"]`` are worked out when one of them is first read.

    >>> import tlx_workbench as wb
    >>> r = wb.compile(add_kernel, x, y, out, 1024, target="sm_90", BLOCK=256)   # doctest: +SKIP
    >>> r.resources.smem_bytes, r.ir("ptx", line=12)                             # doctest: +SKIP
    >>> wb.compile(add_kernel, x, y, out, 1024, BLOCK=256, sass="lazy").resources   # doctest: +SKIP
    """
    if sass not in ("background", "lazy"):
        raise CompileError(f"sass={sass!r}: expected 'background' or 'lazy'",
                           hint="pass sass='lazy' to disassemble only when report.sass is first read")
    model = gpu_model(target)
    k = _resolve(kernel, config)
    jit = k.jit
    with offline(model):
        opts = _options(jit, k, num_warps, num_stages, ctas_per_cga)
        try:
            src, options, bound_constexprs = _bind(k, model, args, constexprs, opts, signature)
        except CompileError:
            raise
        except (ValueError, KeyError, AssertionError) as e:
            raise _bad_arg(jit, f"cannot specialize the kernel for these arguments: {e}",
                           "check the argument types and constexpr values") from e
        key = _cache_key(src, options, model)
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            if sass == "background" and hit._sass_job is not None and hasattr(hit._sass_job, "start"):
                hit._sass_job.start()
            return hit
        from .diagnose import captured_output, compile_error, replay
        from .triton_ptxas import capture as ptxas_capture
        import triton
        t0 = time.perf_counter()
        failure = None
        # native code prints diagnostics (and, on failure, the whole module) to fds 1/2:
        # keep that for err.detail instead of flooding the notebook; ptxas's -v log (which
        # Triton drops) is kept for the report's advisories
        with captured_output() as printed, ptxas_capture() as ptxas:
            try:
                compiled = triton.compile(src, target=model.gpu_target(), options=options.__dict__)
                if not _locations_name(compiled, jit):
                    compiled = _compile_uncached(src, model, options)
            except Exception as e:
                failure = e
        if failure is not None:
            raise compile_error(failure, jit, model, printed) from None
        replay(printed)
        seconds = time.perf_counter() - t0
        from .build import build_report
        report = build_report(compiled, jit, model, options, src, bound_constexprs, key, seconds, ptxas,
                              sass=sass)
    from .diagnose import check_limits
    check_limits(report)
    with _CACHE_LOCK:
        _CACHE[key] = report
    return report


def load_module(path: "str | os.PathLike", target: "str | GPUModel" = "sm_90", name: str | None = None):
    """Import a kernel module file under an offline target (its import-time driver queries
    answer for `target`), and return the module. File names with dashes are fine.

    >>> mod = load_module(".../tlx/tutorials/hopper_gemm_ws.py", "sm_90")      # doctest: +SKIP
    >>> wb.compile(mod.matmul_kernel_tlx_ws, ...)                                # doctest: +SKIP
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise CompileError(f"no such kernel module: {path}", hint="check the path")
    stem = os.path.splitext(os.path.basename(path))[0]
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]
    name = name or f"tlxwb_{''.join(c if c.isalnum() else '_' for c in stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # registered before exec so dataclasses/pickling inside the module can find it
    sys.modules[name] = module
    try:
        with offline(target):
            spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(name, None)
        raise CompileError(f"syntax error: {e.msg}", file=e.filename or path, line=e.lineno,
                           hint="fix the Python syntax of the kernel module") from None
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module
