"""What an exploration explores: a kernel's launcher, its inputs, its reference and its work.

A :class:`Problem` names everything a stage needs, as plain callables:

* ``launch(*inputs, cfg)`` runs the kernel once with one config and returns its output
  (an autotuned kernel: ``launch(*inputs)``, the config is imposed on its ``Autotuner``);
* ``make_inputs(shape, dtype, device)`` fresh random inputs; ``reference(*inputs)`` the
  expected output (float64 is best; None where it cannot be computed, e.g. too large for the
  CPU: the output is then left unchecked and the row says so);
* ``flops(shape)`` / ``bytes(shape)`` the work of one call, so times become TFLOP/s, GB/s
  and a share of the roofline;
* ``sim_shape(cfg)`` the small shape at which the CPU simulator proves a config's
  protocol (``explore(..., sim_shape="real")`` proves it at the explored shape instead); the
  simulated time at the explored shape is ``wb.predict``'s, of the launch at that shape.

A problem travels to worker processes (a process pool, Ray) by reference when its
callables live in modules, and by source when they were defined in a notebook cell (the
same transport the GPU worker uses).

>>> from tlx_workbench.explore import library
>>> p = library.problem("gemm_ws")
>>> p.flops((4096, 4096, 4096)) / 1e12
0.137438953472
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
from typing import Any, Callable

from ..errors import TLXWorkbenchError

# the launch options a triton.Config (uTLX's) takes apart from its kwargs
_CONFIG_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "ctas_per_cga", "num_buffers_warp_spec",
                   "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer")


@dataclasses.dataclass
class Problem:
    name: str
    launch: Callable
    make_inputs: Callable
    reference: Callable | None = None
    flops: Callable | None = None
    bytes: Callable | None = None
    sim_shape: Any = None                    # a shape, or cfg -> shape
    #: the shape at which the measured stage checks the output before timing (a shape, or
    #: (shape, cfg) -> shape); default the timed shape itself
    verify_shape: Any = None
    dtype: str = "float16"
    autotuned: bool = False                  # launch(*inputs); the config is imposed on the Autotuner
    tolerance: float | None = None           # max |out - ref| / max |ref|; default by dtype
    #: a (factory "module:function", args, kwargs) that rebuilds this problem in a worker
    ref: tuple | None = None
    #: the configs the library calls its default, first (the best of a sweep is compared with it)
    default: dict | None = None

    def sim_shape_for(self, cfg: dict, shape=None):
        """The small shape the simulator proves ``cfg`` at: ``sim_shape`` itself, ``sim_shape(cfg)``,
        or ``sim_shape(cfg, shape)`` when it takes the real shape too (e.g. to keep its head dim)."""
        if self.sim_shape is None:
            raise TLXWorkbenchError(f"problem {self.name!r} has no sim_shape",
                                    hint="give Problem(sim_shape=...) a small shape (or cfg -> shape) "
                                         "for the simulated stage")
        if not callable(self.sim_shape):
            return tuple(self.sim_shape)
        try:
            takes_shape = len(inspect.signature(self.sim_shape).parameters) >= 2
        except (TypeError, ValueError):
            takes_shape = False
        return tuple(self.sim_shape(cfg, tuple(shape)) if takes_shape and shape is not None else self.sim_shape(cfg))

    @property
    def identity(self) -> str:
        """What besides the code decides a result: the name (which says causal or not) and the dtype."""
        return f"{self.name}; {self.dtype}"

    def verify_shape_for(self, shape, cfg: dict):
        v = self.verify_shape
        return tuple(shape) if v is None else tuple(v(tuple(shape), cfg) if callable(v) else v)

    def call(self, inputs: tuple, cfg: dict):
        """Launch once with ``cfg`` on ``inputs``; returns the output."""
        if self.autotuned:
            with imposed_config(cfg):
                return self.launch(*inputs)
        return self.launch(*inputs, cfg)

    @functools.cached_property
    def source_hash(self) -> str:
        """A hash of the code that decides a result: the launcher's source and every
        ``@triton.jit`` function it reaches (Triton's own cache key covers a kernel and the
        functions it calls)."""
        h = hashlib.sha256()
        for fn in (self.launch, self.make_inputs, self.reference):
            if fn is None:
                continue
            try:
                h.update(inspect.getsource(fn).encode())
            except (OSError, TypeError):
                h.update(getattr(fn, "__qualname__", repr(fn)).encode())
            for k in _jit_functions_reached(fn):
                h.update(k.encode())
        return h.hexdigest()[:16]

    # -- travelling to workers ------------------------------------------------------------
    def travel(self):
        """What a worker needs to rebuild this problem (see :func:`arrive`)."""
        if self.ref is not None:
            return ("ref", self.ref)
        from ..runtime.transport import callable_spec
        fields = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if callable(v):
                qual = getattr(v, "__qualname__", "")
                if "<" in qual:
                    raise TLXWorkbenchError(
                        f"problem {self.name!r}: its {f.name} ({qual}) is a lambda or a local function, which "
                        f"cannot travel to a worker process",
                        hint="define it with def at the top level of a module or cell, or give Problem(ref=("
                             "'module:factory', args, kwargs)) to rebuild the problem in each worker")
                fields[f.name] = ("fn", callable_spec(v))
            else:
                fields[f.name] = ("value", v)
        return ("fields", fields)


def arrive(travelled) -> Problem:
    """The problem :meth:`Problem.travel` sent, rebuilt here (cached per process)."""
    if travelled[0] == "local":        # the serial executor: the problem never left this process
        return travelled[1]
    key = repr(travelled) if travelled[0] == "ref" else None
    if key is not None and key in _ARRIVED:
        return _ARRIVED[key]
    kind, body = travelled
    if kind == "ref":
        import importlib
        factory, args, kwargs = body
        mod, _, attr = factory.partition(":")
        p = getattr(importlib.import_module(mod), attr)(*args, **kwargs)
        _ARRIVED[key] = p
        return p
    from ..runtime.transport import resolve
    vals = {name: (resolve(v) if how == "fn" else v) for name, (how, v) in body.items()}
    return Problem(**vals)


_ARRIVED: dict = {}


def _jit_functions_reached(fn) -> list[str]:
    """Cache keys of the ``@triton.jit`` functions that ``fn``'s globals name (one level:
    a launcher names its kernel; the kernel's key covers what it calls)."""
    from triton.runtime.jit import JITFunction
    from triton.runtime.autotuner import Autotuner
    code = getattr(fn, "__code__", None)
    g = getattr(fn, "__globals__", {})
    if code is None:
        return []
    keys = []
    names = set(code.co_names)
    for c in code.co_consts:
        if inspect.iscode(c):
            names.update(c.co_names)
    for n in sorted(names):
        v = g.get(n)
        if isinstance(v, Autotuner):
            v = v.fn
        if isinstance(v, JITFunction):
            try:
                keys.append(v.cache_key)
            except Exception:   # a kernel whose dependencies do not resolve yet: its text will do
                keys.append(hashlib.sha256(v.src.encode()).hexdigest())
    return keys


class imposed_config:
    """Within this block, every autotuned kernel launches with ``cfg`` instead of tuning."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self._catch = None

    def __enter__(self):
        from ..compiler.launches import catch_launches
        # only autotuned calls are taken here; the kernel's own launch goes on to whatever runs it
        self._catch = catch_launches(kernels=(), on_autotuned=self._run).__enter__()
        return self

    def _run(self, tuner, args, kwargs):
        __tracebackhide__ = True
        import triton
        cfg = self.cfg
        # the kernel's own Config when the space came from it: it keeps its pre_hook (TLX tutorials
        # set their TMA descriptors' block shapes there)
        config = next((c for c in tuner.configs if dict(c.all_kwargs()) == cfg), None)
        if config is None:
            kw = {k: v for k, v in cfg.items() if k not in _CONFIG_OPTIONS}
            opts = {k: v for k, v in cfg.items() if k in _CONFIG_OPTIONS}
            config = triton.Config(kw, **opts)
        nargs = dict(zip(tuner.arg_names, args))
        tuner.nargs = nargs
        tuner.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**nargs, **kwargs, **config.all_kwargs()})
        return tuner.fn.run(*args, **kwargs, **config.all_kwargs())

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        self._catch = None
        return False


class captured_launches:
    """Within this block, kernel launches are recorded, not run: ``.launches`` holds
    (JITFunction, grid, args, kwargs) for each (``.caught`` the :class:`CaughtLaunch` of each, with the
    caller's line). Used to compile what a launcher would launch.

    >>> with captured_launches() as cap:                      # doctest: +SKIP
    ...     gemm_ws.launch(a, b, c, cfg)
    >>> jit, grid, args, kwargs = cap.launches[0]              # doctest: +SKIP
    """

    def __enter__(self):
        from ..compiler.launches import catch_launches
        self._catch = catch_launches().__enter__()
        return self

    @property
    def caught(self) -> list:
        return self._catch.launches

    @property
    def launches(self) -> list[tuple]:
        return [la.as_tuple() for la in self._catch.launches]

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        return False
