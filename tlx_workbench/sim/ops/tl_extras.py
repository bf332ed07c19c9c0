"""``tl`` ops Triton's interpreter cannot run: ``inline_asm_elementwise`` and ``map_elementwise``.

``map_elementwise(scalar_fn, *args)``: a branch-free scalar function is applied to the whole
broadcast tensors at once (numpy is elementwise already); one with control flow runs element by
element (slow, exact).

A kernel's PTX is matched against known single-instruction patterns (Blackwell's packed
``f32x2`` arithmetic that TLX tutorials use, and a few scalar ones); their elementwise meaning is
computed with numpy in float32. Other PTX is a clear error naming the line; give it a meaning
with :func:`register_inline_asm`.

>>> register_inline_asm(r"\\bmax\\.f32\\b", lambda a, b: np.maximum(a, b))   # doctest: +SKIP
"""
from __future__ import annotations

import re

import numpy as np

_KNOWN: list[tuple[re.Pattern, object]] = []


def register_inline_asm(pattern: str, fn) -> None:
    """Give PTX matching the regex ``pattern`` the elementwise meaning ``fn(*input_arrays) -> array``."""
    _KNOWN.insert(0, (re.compile(pattern), fn))


for _pat, _fn in [
    (r"\bfma\.(rn\.)?(ftz\.)?f32x2\b", lambda a, b, c: a * b + c),
    (r"\bmul\.(rn\.)?(ftz\.)?f32x2\b", lambda a, b: a * b),
    (r"\badd\.(rn\.)?(ftz\.)?f32x2\b", lambda a, b: a + b),
    (r"\bsub\.(rn\.)?(ftz\.)?f32x2\b", lambda a, b: a - b),
    (r"\bex2\.approx\.(ftz\.)?f32\b", lambda a: np.exp2(a)),
    (r"\bex2\.approx\.(ftz\.)?f16x2\b", lambda a: np.exp2(a)),
    (r"\brcp\.approx\.(ftz\.)?f32\b", lambda a: 1.0 / a),
    (r"\btanh\.approx\.f32\b", lambda a: np.tanh(a)),
]:
    register_inline_asm(_pat, _fn)


class InlineAsmUnknown(NotImplementedError):
    pass


def meaning(asm: str):
    """The numpy meaning of the PTX block ``asm``, or raise InlineAsmUnknown."""
    for pat, fn in _KNOWN:
        if pat.search(asm):
            return fn
    first = next((l.strip() for l in asm.splitlines() if l.strip() and not l.strip().startswith(("{", "}", ".reg",
                                                                                                   "mov"))), asm)
    raise InlineAsmUnknown(f"inline PTX the simulator has no meaning for ({first!r}); register one with "
                           f"tlx_workbench.sim.inline_asm.register_inline_asm(pattern, fn)")


def run(asm: str, arrays: list[np.ndarray]) -> np.ndarray:
    """The meaning of ``asm`` applied to ``arrays`` (float operands as float32); the caller stores the
    result as the dtype the kernel asked for."""
    fn = meaning(asm)
    with np.errstate(all="ignore"):
        out = fn(*[np.asarray(a, dtype=np.float32) if np.asarray(a).dtype.kind == "f" else np.asarray(a)
                   for a in arrays])
    return np.asarray(out)


def _has_control_flow(fn) -> bool:
    import ast
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    return any(isinstance(n, (ast.If, ast.IfExp, ast.While, ast.For)) for n in ast.walk(tree))


def map_elementwise(scalar_fn, *args, pack=1, _semantic=None, _generator=None):
    """The simulator's ``tl.map_elementwise``."""
    import triton.language as tl
    from .. import interp_adapter as ia
    tensors = [a if isinstance(a, tl.tensor) else ia.interpreter_semantic.to_tensor(a) for a in args]
    from ..schedule.batch import refuse_variant
    refuse_variant("tl.map_elementwise", *tensors)
    datas = np.broadcast_arrays(*[np.asarray(t.handle.data) for t in tensors])
    dts = [t.dtype for t in tensors]
    fn = getattr(scalar_fn, "fn", scalar_fn)
    if not _has_control_flow(fn):
        return scalar_fn(*[ia.make_tensor(np.ascontiguousarray(d), dt) for d, dt in zip(datas, dts)])
    outs = None
    flat = [d.reshape(-1) for d in datas]
    for i in range(flat[0].size):
        r = scalar_fn(*[ia.make_tensor(np.array([f[i]]), dt) for f, dt in zip(flat, dts)])
        rs = r if isinstance(r, tuple) else (r,)
        if outs is None:
            outs = [np.empty(flat[0].size, dtype=np.asarray(x.handle.data).dtype) for x in rs]
            out_dts = [x.dtype for x in rs]
        for o, x in zip(outs, rs):
            o[i] = np.asarray(x.handle.data).reshape(-1)[0]
    res = tuple(ia.make_tensor(o.reshape(datas[0].shape), dt) for o, dt in zip(outs, out_dts))
    return res if len(res) > 1 else res[0]


def patch_tl():
    """Install :func:`map_elementwise` as ``tl.map_elementwise``; returns a function undoing it."""
    import triton.language as tl
    saved = [(m, m.map_elementwise) for m in (tl, tl.core)]
    for m, _ in saved:
        m.map_elementwise = map_elementwise

    def undo():
        # only where ours is still in place: undone after the interpreter's own patch scope (which put the
        # real builtin back), restoring what was there when we patched (the interpreter's wrapper) would
        # leave that wrapper in place after the launch, and the next compile calls it (``new_block``)
        for m, f in saved:
            if m.map_elementwise is map_elementwise:
                m.map_elementwise = f
    return undo
