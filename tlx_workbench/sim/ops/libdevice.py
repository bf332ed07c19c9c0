"""``libdevice`` functions on the CPU: ``libdevice.rsqrt(x)``, ``fast_dividef(a, b)``, ...

``triton.language.extra.libdevice`` is a module of stubs that Triton's code generator sends to
the backend's libdevice; Triton's interpreter has no meaning for them (a stub returns None).
While simulating, a kernel's (or helper's) global names that refer to that module, to a backend's
libdevice module, or to one of their functions are replaced by numpy versions from
:data:`FUNCTIONS` (computed in the argument's float type). Another name is a clear error naming
the kernel line; give it a meaning with :func:`register_libdevice`.
"""
from __future__ import annotations

import types

import numpy as np

FUNCTIONS: dict = {}


def register_libdevice(name: str, fn) -> None:
    """Give ``libdevice.<name>`` the elementwise meaning ``fn(*numpy arrays) -> array``."""
    FUNCTIONS[name] = fn


for _name, _fn in {
    "fast_dividef": np.divide, "div_rn": np.divide, "div_rz": np.divide, "fdiv_rn": np.divide,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rcp_rn": lambda x: 1.0 / x,
    "exp": np.exp, "exp2": np.exp2, "fast_expf": np.exp, "fast_exp2f": np.exp2, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log1p": np.log1p, "fast_logf": np.log, "fast_log2f": np.log2,
    "tanh": np.tanh, "fast_tanhf": np.tanh, "sin": np.sin, "cos": np.cos, "fast_sinf": np.sin,
    "fast_cosf": np.cos, "erf": None, "pow": np.power, "fast_powf": np.power, "abs": np.abs, "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.round, "rint": np.rint,
    "fmax": np.fmax, "fmin": np.fmin, "fma": lambda a, b, c: a * b + c, "isnan": np.isnan, "isinf": np.isinf,
}.items():
    if _fn is not None:
        register_libdevice(_name, _fn)


def _function(name: str):
    def call(*args, **kwargs):
        import triton.language as tl
        from .. import interp_adapter as ia
        kwargs.pop("_semantic", None)
        kwargs.pop("_builder", None)
        fn = FUNCTIONS.get(name)
        if fn is None:
            from ...errors import SimulationError
            from ..diagnosis.source_lines import kernel_frame_line
            file, line = kernel_frame_line()
            raise SimulationError(f"libdevice.{name}: the CPU simulator has no meaning for this libdevice function",
                                  file=file, line=line,
                                  hint=f"give it one: tlx_workbench.sim.ops.libdevice.register_libdevice({name!r}, "
                                       f"numpy_fn), or run on a GPU")
        tensors = [a for a in args if isinstance(a, tl.tensor)]
        from ..schedule.batch import refuse_variant
        refuse_variant(f"libdevice.{name}", *tensors)
        dtype = tensors[0].dtype if tensors else tl.float32
        np_dt = ia.np_dtype(dtype)
        datas = [np.asarray(a.handle.data) if isinstance(a, tl.tensor) else np.asarray(getattr(a, "value", a))
                 for a in args]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*datas))
        if out.dtype != np.bool_:
            out = out.astype(np_dt, copy=False)
        shape = np.broadcast_shapes(*[d.shape for d in datas])
        out = np.broadcast_to(out, shape).copy()
        res_dt = tl.int1 if out.dtype == np.bool_ else dtype
        if any(t.type.is_block() for t in tensors):
            return tl.tensor(ia.TensorHandle(out, res_dt), tl.block_type(res_dt, list(tensors[0].shape)))
        return tl.tensor(ia.TensorHandle(out.reshape(1), res_dt), res_dt)
    call.__name__ = name
    return call


class _SimLibdevice(types.ModuleType):
    """A libdevice module whose every function runs on numpy."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _function(name)


SIM_LIBDEVICE = _SimLibdevice("libdevice (tlx_workbench simulator)")


def _libdevice_modules() -> tuple:
    mods = []
    for path in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            mods.append(__import__(path, fromlist=["_"]))
        except ImportError:
            pass
    return tuple(mods)


def replacements(glb: dict) -> dict:
    """The numpy stand-ins for the libdevice names in a kernel's globals ``glb``."""
    mods = _libdevice_modules()
    out = {}
    for name, val in glb.items():
        if isinstance(val, types.ModuleType) and val in mods:
            out[name] = SIM_LIBDEVICE
        elif callable(val) and getattr(val, "__module__", None) in {m.__name__ for m in mods}:
            out[name] = _function(getattr(val, "__name__", name))
    return out
