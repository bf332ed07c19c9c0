"""What a program launches, caught: every ``kernel[grid](...)`` made while a block runs.

The one place that puts another ``JITFunction.run`` (and ``Autotuner.run``) in place and puts Triton's back.
Everything that sees a program's launches instead of Triton goes through :class:`catch_launches`: the simulator
(``wb.simulate``), the offline interceptor of the pytest plugin and ``tlx-workbench run``
(:mod:`tlx_workbench.intercept`), the explorer (a launcher's launches captured to compile, a config imposed on an
autotuner), the notebook's ``%%tlx`` (what a host function would launch) and the checker (a host function's first
launch). It lives beside the compiler because a caught launch is what the compiler compiles; everything above it
(simulator, checker, explorer, front ends) may import it.

How it works:

- **Replaced and restored.** While at least one catcher is active, ``JITFunction.run`` (and, when a catcher asks
  for autotuned launches, ``Autotuner.run``) is this module's dispatcher; when the last one leaves, what was there
  before (Triton's own, or uTLX's wrapper of it) is put back. Nothing is replaced per kernel, so a library
  launcher's bound launch (``runtime/triton_launch.py``) sees a dispatcher that is not Triton's and goes through
  ``kernel[grid](...)``: it is caught too.
- **Nesting.** Catchers stack: a launch goes to the innermost catcher that takes it; its handler may hand it on
  (:meth:`CaughtLaunch.proceed`) to the next one out, and the outermost hands it to Triton.
  :meth:`CaughtLaunch.compile` always reaches Triton's own JIT path (its cache, the real ``asm``).
- **Which kernels.** Every kernel, or only those named in ``kernels=`` (others go on as if this catcher were not
  there); ``warmups=False`` lets ``kernel.warmup(...)`` calls go on too.
- **What is recorded.** Each :class:`CaughtLaunch` keeps the kernel, the grid, the arguments and keywords as the
  program passed them, the bound parameters and the launch options apart
  (:func:`tlx_workbench.compiler.launch_options.split_options`), and the program's own source line that made the
  launch (frames of Triton and of wrappers that set ``__tracebackhide__`` are skipped).

>>> with catch_launches() as caught:                     # doctest: +SKIP
...     c = gemm_ws.matmul(a, b)                        # nothing runs: each launch is only recorded
>>> la = caught.launches[0]                              # doctest: +SKIP
>>> la.kernel, la.grid, la.options, la.caller            # doctest: +SKIP
('matmul_kernel', (132, 1, 1), {'num_warps': 4}, ('/work/gemm_ws.py', 214))
"""
from __future__ import annotations

import functools
import os
import sys

from .launch_options import split_options

_STACK: list["catch_launches"] = []
_SAVED: dict = {}          # class -> the run that was in place before the first catcher (Triton's own)
_HERE = os.path.abspath(__file__)


class CaughtLaunch:
    """One ``kernel[grid](*args, **kwargs)`` (or ``kernel.warmup(...)``) as the program made it.

    ``jit`` the ``JITFunction``, ``kernel`` its name, ``grid`` as given (a tuple or a callable of the meta-
    parameters), ``args``/``kwargs`` as passed (an autotuner's config already merged into ``kwargs``),
    ``warmup``, ``caller`` the program's (file, line) that launched it. ``parameters`` and ``options`` split the
    keywords as Triton does (a keyword that is not a kernel parameter is a launch option); ``unbound()`` says why
    the arguments do not bind, if they do not."""

    __slots__ = ("jit", "grid", "args", "kwargs", "warmup", "caller", "_level")

    def __init__(self, jit, grid, args, kwargs, warmup=False, caller=(None, None)):
        self.jit = jit
        self.grid = grid
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.warmup = bool(warmup)
        self.caller = caller
        self._level = 0

    @property
    def kernel(self) -> str:
        return getattr(self.jit, "__name__", None) or self.jit.fn.__name__

    @property
    def file(self) -> str | None:
        """The kernel's source file."""
        code = getattr(getattr(self.jit, "fn", None), "__code__", None)
        return code.co_filename if code is not None else None

    @property
    def def_line(self) -> int | None:
        """The kernel's ``def`` line (the code object's first line is its decorator's)."""
        line = getattr(self.jit, "def_file_line_number", None)
        code = getattr(getattr(self.jit, "fn", None), "__code__", None)
        return line if line is not None else (code.co_firstlineno if code else None)

    def _signature(self):
        import inspect
        try:
            return inspect.signature(self.jit.fn)
        except (TypeError, ValueError):
            return None

    @property
    def options(self) -> dict:
        """The launch options among the keywords (``num_warps``, ``ctas_per_cga``, ``stream``, ...)."""
        sig = self._signature()
        return split_options(self.kwargs, sig.parameters if sig is not None else None)[1]

    @property
    def parameters(self) -> dict:
        """Every kernel parameter with its value, defaults applied (raises TypeError when they do not bind)."""
        sig = self._signature()
        params, _ = split_options(self.kwargs, sig.parameters)
        bound = sig.bind(*self.args, **params)
        bound.apply_defaults()
        return dict(bound.arguments)

    def unbound(self) -> str | None:
        """Why the arguments do not bind to the kernel's parameters (one missing, one given twice), or None."""
        sig = self._signature()
        if sig is None:
            return None
        try:
            sig.bind(*self.args, **split_options(self.kwargs, sig.parameters)[0])
        except TypeError as e:
            return str(e)
        return None

    def as_tuple(self):
        """(jit, grid, args, kwargs): the launch as ``jit.run`` receives it."""
        return self.jit, self.grid, self.args, self.kwargs

    def proceed(self):
        """Hand the launch on to the next catcher out, or to Triton when there is none: what would have
        happened without this catcher."""
        __tracebackhide__ = True
        return _deliver(self, self._level)

    def compile(self):
        """Compile through Triton's own JIT path (``run(..., warmup=True)``: the kernel's cache, the real
        ``asm`` and ``metadata``), whatever catchers are active; returns Triton's compiled kernel."""
        __tracebackhide__ = True
        return _tritons_run(self, warmup=True)

    def __repr__(self):
        where = f" at {self.caller[0]}:{self.caller[1]}" if self.caller[0] else ""
        return f"CaughtLaunch({self.kernel}[{self.grid}]{' warmup' if self.warmup else ''}{where})"


class _Stop(Exception):
    """Ends a ``stop=True`` block at its first launch."""


class catch_launches:
    """Within this block, every ``kernel[grid](...)`` goes to ``on_launch(launch)`` (a :class:`CaughtLaunch`)
    instead of Triton; what it returns is what the launch returns. Without ``on_launch`` a launch is only recorded
    and returns None (nothing runs). Every launch this catcher takes is in ``.launches``.

    ``kernels``: take only these kernels (an autotuned one is taken as its own call, before it picks a config; a
    ``triton.heuristics`` wrapper as the kernel it wraps); ``warmups=False``: let ``warmup`` calls go on;
    ``stop=True``: the block ends at the first launch taken (the rest of the block does not run; no error);
    ``on_autotuned(tuner, args, kwargs)``: an autotuned kernel's call goes there before its config is chosen
    (the handler picks the config and calls ``tuner.fn.run``, which this module catches as any launch).

    >>> with catch_launches(lambda la: print(la.kernel, la.grid)):    # doctest: +SKIP
    ...     add_kernel[(4,)](x, y, out, n, BLOCK=256)
    add_kernel (4,)
    """

    def __init__(self, on_launch=None, *, kernels=None, warmups: bool = True, stop: bool = False,
                 on_autotuned=None):
        self.on_launch = on_launch
        self.kernels = None if kernels is None else {id(_jit_level(k)) for k in kernels}
        self.warmups = warmups
        self.stop = stop
        self.on_autotuned = on_autotuned
        self.launches: list[CaughtLaunch] = []

    def takes_tuner(self, tuner) -> bool:
        """Whether this catcher takes an autotuned kernel's call itself (before a config is chosen): when it
        was named in ``kernels``."""
        return bool(self.kernels) and id(tuner) in self.kernels

    def takes(self, launch: CaughtLaunch) -> bool:
        if launch.warmup and not self.warmups:
            return False
        return self.kernels is None or id(launch.jit) in self.kernels

    @property
    def first(self) -> CaughtLaunch | None:
        """The first launch taken (not a warmup), or None."""
        return next((la for la in self.launches if not la.warmup), None)

    def __enter__(self) -> "catch_launches":
        _STACK.append(self)
        _install()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self in _STACK:
            _STACK.remove(self)
        _install()
        return isinstance(exc, _Stop) and exc.args[0] is self

    def _handle(self, launch: CaughtLaunch):
        __tracebackhide__ = True
        self.launches.append(launch)
        if self.stop:
            raise _Stop(self)
        return self.on_launch(launch) if self.on_launch is not None else None


def _install() -> None:
    """Put the dispatchers in place while an active catcher needs them, and what was there back when none does.
    A class is touched only when needed: a block that only imposes an autotuner's config leaves
    ``JITFunction.run`` Triton's own, so a library launcher's bound launch still launches (and is timed) as
    without it."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction
    wanted = {JITFunction: (_dispatch, any(c.kernels is None or c.kernels for c in _STACK)),
              Autotuner: (_dispatch_autotuned, any(c.on_autotuned is not None or c.kernels for c in _STACK))}
    for cls, (ours, needed) in wanted.items():
        if needed and cls not in _SAVED:
            _SAVED[cls] = cls.__dict__.get("run")
            cls.run = ours
        elif not needed and cls in _SAVED:
            cls.run = _SAVED.pop(cls)


def _dispatch(jit, *args, grid, warmup=False, **kwargs):
    __tracebackhide__ = True
    return _deliver(CaughtLaunch(jit, grid, args, kwargs, warmup, _caller()), len(_STACK))


def _deliver(launch: CaughtLaunch, below: int):
    __tracebackhide__ = True
    for level in range(min(below, len(_STACK)) - 1, -1, -1):
        catcher = _STACK[level]
        if catcher.takes(launch):
            launch._level = level
            return catcher._handle(launch)
    return _tritons_run(launch, launch.warmup)


def _tritons_run(launch: CaughtLaunch, warmup: bool):
    __tracebackhide__ = True
    from triton.runtime.jit import JITFunction
    run = _SAVED.get(JITFunction) or JITFunction.__dict__.get("run")
    return run(launch.jit, *launch.args, grid=launch.grid, warmup=warmup, **launch.kwargs)


def _dispatch_autotuned(tuner, *args, **kwargs):
    __tracebackhide__ = True
    from triton.runtime.autotuner import Autotuner
    for catcher in reversed(_STACK):
        if catcher.takes_tuner(tuner):
            kwargs = dict(kwargs)
            grid, warmup = kwargs.pop("grid", None), kwargs.pop("warmup", False)
            return catcher._handle(CaughtLaunch(tuner, grid, args, kwargs, warmup, _caller()))
        if catcher.on_autotuned is not None:
            return catcher.on_autotuned(tuner, args, kwargs)
    return (_SAVED.get(Autotuner) or Autotuner.__dict__.get("run"))(tuner, *args, **kwargs)


def _jit_level(kernel):
    """What a kernel named in ``kernels=`` is caught as: a ``JITFunction`` or an ``Autotuner`` itself (taken
    before its config is chosen); another wrapper (``triton.heuristics``) as the ``JITFunction`` it wraps."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction
    k = kernel
    for _ in range(8):
        if isinstance(k, (JITFunction, Autotuner)) or getattr(k, "fn", None) is None:
            return k
        k = k.fn
    return kernel


@functools.lru_cache(maxsize=1)
def _triton_dir() -> str:
    import triton
    return os.path.dirname(os.path.abspath(triton.__file__)) + os.sep


def _caller() -> tuple[str | None, int | None]:
    """The program's (file, line) that made the launch: the first frame out of Triton, this module and the
    wrappers that hide themselves (``__tracebackhide__``, pytest's convention)."""
    triton_dir = _triton_dir()
    f = sys._getframe(2)
    while f is not None:
        file = os.path.abspath(f.f_code.co_filename)
        if file != _HERE and not file.startswith(triton_dir) and not f.f_locals.get("__tracebackhide__"):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return None, None
