"""``run``: launch a kernel on the GPU (in the watchdog worker), verify its outputs.

>>> r = run(add_kernel, x, y, out, n, grid=(n // 1024,), BLOCK_SIZE=1024,
...         reference=lambda x, y, out, n: x + y)          # doctest: +SKIP
>>> r.ok, r.comparisons[0].rel_error                      # doctest: +SKIP
(True, 0.0)
"""
from __future__ import annotations

import contextlib
import dataclasses
import html
import time
from typing import Sequence

from ..errors import GPUError, NoGPUError
from .verify import Comparison, compare, poison_
from .watchdog import DEFAULT_COMPILE_TIMEOUT, DEFAULT_TIMEOUT, default_worker, report_phase


class WrongResultError(GPUError):
    """The kernel ran but an output differs from the reference."""


def require_gpu(what: str = "this") -> None:
    """Raise :class:`NoGPUError` (pointing to the simulator) when no CUDA GPU is usable here."""
    from ..target import has_gpu
    if not has_gpu():
        raise NoGPUError(
            f"{what} needs a CUDA GPU and none is usable here "
            "(torch.cuda.is_available() is False, or an offline target is active)",
            hint="run the kernel on the CPU simulator instead: `%%tlx --sim`, or "
                 "`with tlx_workbench.simulate(): ...`; compile it offline with tlx_workbench.compile")


# -- what a launch is --------------------------------------------------------------------
def is_kernel(obj) -> bool:
    """True for a Triton JITFunction / Autotuner / Heuristics (launched as ``kernel[grid](...)``)."""
    return hasattr(obj, "__getitem__") and hasattr(obj, "fn") and hasattr(obj, "run")


def kernel_arg_names(kernel) -> list[str]:
    k = kernel
    for _ in range(5):
        if hasattr(k, "arg_names"):
            return list(k.arg_names)
        k = getattr(k, "fn", None)
        if k is None:
            break
    import inspect
    from .transport import _underlying_function
    f = _underlying_function(kernel)
    return list(inspect.signature(f).parameters) if f else []


def _tensor_of(a):
    import torch
    if isinstance(a, torch.Tensor):
        return a
    base = getattr(a, "base", None)          # a TensorDescriptor
    return base if isinstance(base, torch.Tensor) else None


def output_positions(kernel, args: Sequence, outputs) -> list[int]:
    """Which positional ``args`` are outputs: ``outputs`` as names or positions; default the last tensor."""
    names = kernel_arg_names(kernel) if kernel is not None else []
    if outputs is None:
        tensors = [i for i, a in enumerate(args) if _tensor_of(a) is not None]
        if not tensors:
            raise GPUError("the launch has no tensor argument to check",
                           hint="pass outputs=('c',) naming the kernel arguments it writes")
        return [tensors[-1]]
    if isinstance(outputs, (str, int)):
        outputs = [outputs]
    pos = []
    for o in outputs:
        if isinstance(o, int):
            pos.append(o)
        elif o in names and names.index(o) < len(args):
            pos.append(names.index(o))
        else:
            raise GPUError(f"outputs names {o!r}, which is not a positional argument of the launch",
                           hint=f"use one of {names[:len(args)]} or a position")
    return pos


_TILE_NAMES = (("BLOCK_M", "BM", "BLOCK_SIZE_M", "BLOCK_M_SIZE"), ("BLOCK_N", "BN", "BLOCK_SIZE_N", "BLOCK_D", "HEAD_DIM"))
_TILE_1D = ("BLOCK_SIZE", "BLOCK", "BS", "XBLOCK")


def infer_tile(constexprs: dict, ndim: int) -> tuple[int, ...] | None:
    """A tile shape for the tile map from the launch's BLOCK constexprs, if it names them."""
    def first(keys):
        for k in keys:
            v = constexprs.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None
    if ndim >= 2:
        m, n = first(_TILE_NAMES[0]), first(_TILE_NAMES[1])
        if m and n:
            return (m, n)
        if m:
            return (m, 64)
    one = first(_TILE_1D)
    if one:
        return (one,) if ndim == 1 else (1, one)
    return None


# -- the job (in the worker, or here with isolate=False) ------------------------------------
_hook_installed = [False]


def _launch_hook(metadata=None):
    report_phase("run", throttle=0.05)


def install_launch_hook() -> None:
    """Report every Triton launch to the watchdog (it times a hang from the last launch)."""
    if _hook_installed[0]:
        return
    try:
        import triton
        triton.knobs.runtime.launch_enter_hook.add(_launch_hook)
        _hook_installed[0] = True
    except Exception:
        pass


@contextlib.contextmanager
def poisoned_allocations():
    """Inside: ``torch.empty``/``empty_like``/``empty_strided`` return poisoned tensors.

    A host function that allocates its own output (``out = torch.empty_like(x)``)
    thus hands the kernel a poisoned buffer, and an element it never writes shows.
    """
    import torch
    saved = {n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided")}

    def wrap(f):
        def poisoned(*a, **k):
            t = f(*a, **k)
            return poison_(t) if isinstance(t, torch.Tensor) and t.numel() else t
        return poisoned
    for n, f in saved.items():
        setattr(torch, n, wrap(f))
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(torch, n, f)


def make_call(fn, args, kwargs, grid):
    """A no-argument callable that launches ``fn`` once (``fn[grid](*args)`` for kernels)."""
    if is_kernel(fn):
        if grid is None:
            raise GPUError("a kernel launch needs grid=", hint="pass grid=(n_blocks,) or a lambda meta: (...)")
        launcher = fn[grid]
        return lambda: launcher(*args, **kwargs)
    return lambda: fn(*args, **kwargs)


def launch_job(spec, args, kwargs, grid, poison_positions, poison_alloc, sync=True):
    """Worker job: poison, launch once, wait; returns (returned value, wall seconds)."""
    import torch
    from .transport import resolve
    install_launch_hook()
    report_phase("compile")
    fn = resolve(spec)
    for i in poison_positions:
        poison_(_tensor_of(args[i]))
    call = make_call(fn, args, kwargs, grid)
    t0 = time.perf_counter()
    with poisoned_allocations() if poison_alloc else contextlib.nullcontext():
        value = call()
    report_phase("run")
    if sync and torch.cuda.is_available():
        torch.cuda.synchronize()
    if poison_positions:
        # the outputs are the caller's own tensors, already written in place; sending them back
        # would re-share tensors this process received over CUDA IPC
        value = None
    return value, time.perf_counter() - t0


def dispatch(job, payload: dict, *, isolate: bool, timeout: float, compile_timeout: float, what: str):
    """Run ``job`` in the watchdog worker (isolate=True) or here."""
    if isolate:
        return default_worker().call(f"{job.__module__}:{job.__name__}", payload, timeout=timeout,
                                     compile_timeout=compile_timeout, what=what)
    return job(**payload)


def launch_name(fn) -> str:
    from .transport import _underlying_function
    f = _underlying_function(fn)
    return getattr(f, "__name__", None) or getattr(fn, "__name__", type(fn).__name__)


# -- the result --------------------------------------------------------------------------
@dataclasses.dataclass
class RunResult:
    """One verified launch: the outputs, each output's comparison, the wall time."""
    name: str
    outputs: list
    comparisons: list[Comparison]
    wall_ms: float
    device: str = ""
    isolated: bool = True
    reference_dtype: str = "float64"

    @property
    def ok(self) -> bool:
        """True when every output matched its reference (True when there was no reference)."""
        return all(c.ok for c in self.comparisons)

    @property
    def output(self):
        return self.outputs[0] if len(self.outputs) == 1 else tuple(self.outputs)

    def raise_for_status(self) -> "RunResult":
        """Raise :class:`WrongResultError` if an output is wrong; else return self."""
        if not self.ok:
            bad = "\n".join(c.summary() for c in self.comparisons if not c.ok)
            raise WrongResultError(f"{self.name} gave a wrong result:\n{bad}",
                                   hint="the wrong tiles point at the offsets/masks (or the pipeline stage) "
                                        "that computes them; run the same launch with `%%tlx --sim` to step it")
        return self

    def __repr__(self) -> str:
        head = f"RunResult({self.name}: {'OK' if self.ok else 'WRONG'}, {self.wall_ms:.3f} ms wall"
        head += f", {self.device})" if self.device else ")"
        lines = [head] + ["  " + c.summary().replace("\n", "\n  ") for c in self.comparisons]
        if not self.comparisons:
            lines.append("  (no reference given: outputs not checked)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = "#27ae60" if self.ok else "#c0392b"
        verdict = "correct" if self.ok else "WRONG"
        if not self.comparisons:
            verdict = "ran (not checked: no reference)"
        out = [f"<div class='tlxwb-run' style='border-left:4px solid {colour};padding:4px 8px'>",
               f"<b>{html.escape(self.name)}</b>: {verdict} &middot; {self.wall_ms:.3f} ms wall "
               f"(first launch, compile excluded) &middot; {html.escape(self.device)}"]
        if self.comparisons:
            out.append("<table><tr><th>output</th><th>rel. error</th><th>tolerance</th><th>NaN</th>"
                       "<th>never written</th><th>wrong tiles</th></tr>")
            for c in self.comparisons:
                out.append(f"<tr><td>{html.escape(c.name)}</td><td>{c.rel_error:.3g}</td><td>{c.tolerance:.3g}</td>"
                           f"<td>{c.nan_count}</td><td>{c.unwritten}</td><td>{len(c.bad_tiles) if not c.ok else 0}"
                           f"</td></tr>")
            out.append("</table>")
            for c in self.comparisons:
                if not c.ok:
                    out.append(f"<pre>{html.escape(c.summary())}</pre>{c.tile_map_html()}")
        out.append("</div>")
        return "".join(out)


# -- the public function -------------------------------------------------------------------
def _upcast(a):
    import torch
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.detach().to(torch.float64)
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    return a


def compute_reference(reference, args, kwargs_for_ref=None):
    """The reference outputs: ``reference`` itself (tensors), or called on float64 copies of ``args``.

    Returns (list of tensors, dtype used). Falls back to the original dtypes when the
    reference cannot run in float64 (an op without a float64 kernel).
    """
    import torch
    if reference is None:
        return None, ""
    if not callable(reference):
        refs = list(reference) if isinstance(reference, (list, tuple)) else [reference]
        return refs, "given"
    try:
        value = reference(*[_upcast(a) for a in args])
        used = "float64"
    except (RuntimeError, TypeError, NotImplementedError):
        value = reference(*[a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args])
        used = "input dtypes"
    refs = list(value) if isinstance(value, (list, tuple)) else [value]
    return refs, used


def run(fn, *args, reference=None, grid=None, outputs=None, tile=None, tol=None,
        timeout: float = DEFAULT_TIMEOUT, compile_timeout: float = DEFAULT_COMPILE_TIMEOUT,
        isolate: bool = True, source: str | None = None, _allow_cpu: bool = False, **kwargs) -> RunResult:
    """Launch ``fn`` once on the GPU, with poisoned outputs, and check it against ``reference``.

    ``fn`` is a Triton/TLX kernel (then ``grid=`` is needed and ``outputs=`` names the
    arguments it writes, default the last tensor) or a host function that launches
    kernels and returns its output(s). ``reference`` is a function of the same
    arguments (called on float64 copies) or the expected tensor(s). The launch runs
    in the watchdog worker: if it does not finish within ``timeout`` seconds the
    worker is killed and :class:`~.watchdog.KernelTimeoutError` is raised; this
    process, and the notebook, live on. ``isolate=False`` launches in this process.

    >>> r = run(add2, x, y, a, b, reference=lambda x, y, a, b: (x + y, a + b))   # doctest: +SKIP
    >>> r.ok                                                                     # doctest: +SKIP
    True
    """
    import torch
    name = launch_name(fn)
    if not _allow_cpu:
        require_gpu(f"tlx_workbench.run({name})")
    kernel = fn if is_kernel(fn) else None
    refs, ref_dtype = compute_reference(reference, args)
    # a host function's outputs are what it returns, or the arguments ``outputs`` names
    poison_pos = output_positions(fn, args, outputs) if (kernel is not None or outputs is not None) else []
    from .transport import callable_spec
    # in this process the object itself serves ("pickle" specs resolve to the object unchanged)
    spec = callable_spec(fn, source=source, name=name if source else None) if isolate else ("pickle", fn)
    payload = dict(spec=spec, args=tuple(args), kwargs=kwargs, grid=grid, poison_positions=poison_pos,
                   poison_alloc=kernel is None)
    value, wall = dispatch(launch_job, payload, isolate=isolate, timeout=timeout,
                           compile_timeout=compile_timeout, what=f"{name} (one launch)")
    if kernel is not None or poison_pos:
        outs = [_tensor_of(args[i]) for i in poison_pos]
        names = kernel_arg_names(fn)
        out_names = [names[i] if i < len(names) else f"arg{i}" for i in poison_pos]
    else:
        vals = list(value) if isinstance(value, (list, tuple)) else ([] if value is None else [value])
        # tensors that came back from the worker are views of its memory: copy them here
        outs = [v.clone() if isinstance(v, torch.Tensor) else v for v in vals]
        out_names = [f"out{i}" if len(outs) > 1 else "out" for i in range(len(outs))]
    comparisons = []
    if refs is not None:
        if len(refs) != len(outs):
            raise GPUError(f"{name}: the reference gives {len(refs)} output(s), the launch {len(outs)}",
                           hint="make the reference return one tensor per output (outputs= names them)")
        for o, r, nm in zip(outs, refs, out_names):
            t = tile if tile is not None else infer_tile(kwargs, o.dim())
            comparisons.append(compare(o, r, tol=tol, tile=t, name=nm))
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    return RunResult(name, outs, comparisons, wall * 1e3, device, isolate, ref_dtype)
