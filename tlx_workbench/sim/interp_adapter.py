"""Every touch of Triton's *private* interpreter lives here, and nowhere else.

The simulator reuses Triton's interpreter (``triton/runtime/interpreter.py``) for
all ``tl.*`` ops: its numpy builder, its semantic object, its patching of the
``tl`` builtins and its conversion of launch arguments. Those names are private
and change between Triton releases, so they are imported in this one module,
pinned to :data:`PINNED_TRITON`, and checked by ``tests/sim/test_interp_adapter.py``.
"""
from __future__ import annotations

import ast

import numpy as np
import triton
import triton.language as tl
from triton.runtime import interpreter as _interp

from .ops.mma_numerics import mma_accumulate

# the Triton release this adapter was written against (checked by the tests)
PINNED_TRITON = "3.8."

TensorHandle = _interp.TensorHandle
TensorDescHandle = _interp.TensorDescHandle
InterpreterBuilder = _interp.InterpreterBuilder
InterpreterOptions = _interp.InterpreterOptions
ReduceOps, ScanOps = _interp.ReduceOps, _interp.ScanOps
#: the interpreter's own semantic singleton; the patched ``tl`` builtins use it
interpreter_semantic = _interp.interpreter_semantic
interpreter_builder = _interp.interpreter_builder

# private names this module uses, with what they must be (the tests check each)
USED_NAMES = {
    "TensorHandle": "class", "TensorDescHandle": "class", "InterpreterBuilder": "class",
    "InterpreterOptions": "class", "interpreter_semantic": "object", "interpreter_builder": "object",
    "_patch_lang": "function", "_implicit_cvt": "function", "_get_np_dtype": "function",
    "ASTTransformer": "class", "ReduceOps": "class", "ScanOps": "class",
}


def triton_version_ok() -> bool:
    return triton.__version__.startswith(PINNED_TRITON)


def patch_lang(fn):
    """Patch the ``tl`` builtins visible from ``fn`` to run on numpy; returns a scope with ``.restore()``."""
    return _interp._patch_lang(fn)


def to_kernel_arg(arg):
    """A launch argument as the interpreter passes it: tensors become pointers, descriptors descriptors."""
    return _interp._implicit_cvt(arg)


def set_grid(dims, idx) -> None:
    """Tell ``tl.program_id`` / ``tl.num_programs`` which program runs."""
    interpreter_builder.set_grid_dim(*dims)
    interpreter_builder.set_grid_idx(*idx)


def np_dtype(tl_dtype) -> np.dtype:
    return np.dtype(_interp._get_np_dtype(tl_dtype))


def wrap_assignments(tree: ast.AST) -> ast.AST:
    """The interpreter's AST pass: ``x = v`` becomes ``x = interpreter_semantic.to_tensor(v, False)``,
    so Python numbers assigned in a kernel behave as Triton scalars."""
    return _interp.ASTTransformer().visit(tree)


def interpreter_globals() -> dict:
    """Names the rewritten kernel source refers to (``interpreter_semantic``)."""
    return {"interpreter_semantic": interpreter_semantic}


def new_semantic(builder):
    """A Triton semantic object over ``builder`` (the way the interpreter builds its own)."""
    from triton.language.semantic import TritonSemantic
    return TritonSemantic(builder)


class wave_shapes:
    """While open, Triton's block types accept any size (a wave's leading CTA axis need not be a power of two)
    where they check their shape (``triton.language.core.validate_block_shape``)."""

    def __enter__(self):
        self.saved = tl.core.validate_block_shape
        tl.core.validate_block_shape = lambda shape: int(np.prod([int(s) for s in shape]))
        return self

    def __exit__(self, *exc):
        tl.core.validate_block_shape = self.saved
        return False


def make_tensor(data: np.ndarray, dtype) -> "tl.tensor":
    """A ``tl.tensor`` holding numpy ``data`` of Triton ``dtype`` (block or scalar)."""
    handle = TensorHandle(data, dtype.scalar if hasattr(dtype, "scalar") else dtype)
    if data.ndim == 0 or (data.ndim == 1 and data.size == 1 and not isinstance(dtype, tl.block_type)):
        return tl.tensor(handle, dtype)
    return tl.tensor(handle, tl.block_type(dtype, list(data.shape)))


def masked_load(ptrs: TensorHandle, mask: np.ndarray, other: TensorHandle) -> TensorHandle:
    return interpreter_builder.create_masked_load(ptrs, TensorHandle(mask, tl.int1), other, None, None, False)


def masked_store(ptrs: TensorHandle, value: TensorHandle, mask: np.ndarray) -> None:
    interpreter_builder.create_masked_store(ptrs, value, TensorHandle(mask, tl.int1), None, None)


def descriptor_pointers(desc: TensorDescHandle, offsets):
    """(pointers, in-bounds mask) of the block of ``desc`` at ``offsets`` (TMA addressing)."""
    return desc.materialize_pointers(offsets)


def _patch_builder(attrs: dict):
    """Set ``attrs`` (name -> function) on the interpreter's builder instance; returns a function that
    puts back what the instance had before (an earlier patch, or nothing: the class's own method)."""
    return _patch_instance(interpreter_builder, attrs)


def _patch_instance(b, attrs: dict):
    """Set ``attrs`` on the instance ``b``; returns the undo (an earlier patch back, or the class's own)."""
    saved = {n: b.__dict__.get(n) for n in attrs}
    for n, f in attrs.items():
        setattr(b, n, f)

    def undo():
        for n, v in saved.items():
            if v is None:
                b.__dict__.pop(n, None)
            else:
                setattr(b, n, v)
    return undo


def install_access_check(check):
    """Call ``check(ptrs: np.ndarray[uint64], mask: np.ndarray[bool], itemsize, is_store)`` before every
    pointer load/store the interpreter makes (its C++ side would otherwise touch wild addresses).
    Returns a function that removes the hook."""
    b = interpreter_builder
    orig_load, orig_store = b.create_masked_load, b.create_masked_store

    def _itemsize(ptrs):
        ty = ptrs.dtype.element_ty if hasattr(ptrs.dtype, "element_ty") else ptrs.dtype
        return max(1, ty.primitive_bitwidth // 8)

    def load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        check(ptrs.data, None if mask is None else mask.data, _itemsize(ptrs), False)
        return orig_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)

    def store(ptrs, value, mask, cache_modifier, eviction_policy):
        check(ptrs.data, None if mask is None else mask.data, _itemsize(ptrs), True)
        return orig_store(ptrs, value, mask, cache_modifier, eviction_policy)

    return _patch_builder({"create_masked_load": load, "create_masked_store": store})


def install_polls(poll):
    """Route what a spin-wait polls with through ``poll(run, key, ptrs, mask, itemsize, is_atomic)``: global
    atomics (RMW, CAS) and volatile loads. ``run()`` does the op and returns (its result, whether it changed
    memory); ``key`` is a hashable of the op's addresses and operands; ``ptrs``/``mask`` numpy arrays
    (mask None: every lane). Returns a function undoing it."""
    b = interpreter_builder
    cls = type(b)
    load, rmw, cas = b.create_masked_load, b.create_atomic_rmw, b.create_atomic_cas

    def size(ptr):
        return max(1, ptr.get_element_ty().primitive_bitwidth // 8)

    def key_of(*hs):
        return tuple(None if h is None else np.asarray(h.data).tobytes() for h in hs)

    def changed(ptr, mask, old):
        # the op's result holds the old values: compare them with what is there now (unhooked load: no cost)
        m = np.ones(np.shape(ptr.data), dtype=bool) if mask is None else np.asarray(mask.data, dtype=bool)
        now = cls.create_masked_load(b, ptr, TensorHandle(m, tl.int1), None, None, None, False)
        o, n = np.broadcast_to(np.asarray(old.data), m.shape), np.asarray(now.data)
        return o[m].tobytes() != n[m].tobytes()

    def masked_load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile):
        if not is_volatile:
            return load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile)
        return poll(lambda: (load(ptrs, mask, other, cache_modifier, eviction_policy, is_volatile), False),
                    key_of(ptrs, mask), ptrs.data, None if mask is None else mask.data, size(ptrs), False)

    def atomic_rmw(op, ptr, val, mask, sem, scope):
        def run():
            out = rmw(op, ptr, val, mask, sem, scope)
            return out, changed(ptr, mask, out)
        return poll(run, (str(op),) + key_of(ptr, val, mask), ptr.data, None if mask is None else mask.data,
                    size(ptr), True)

    def atomic_cas(ptr, cmp, val, sem, scope):
        def run():
            out = cas(ptr, cmp, val, sem, scope)
            return out, changed(ptr, None, out)
        return poll(run, key_of(ptr, cmp, val), ptr.data, None, size(ptr), True)

    return _patch_builder({"create_masked_load": masked_load, "create_atomic_rmw": atomic_rmw,
                           "create_atomic_cas": atomic_cas})


class _AsmCall:
    def __init__(self, results):
        self.results = results

    def get_result(self, i):
        return self.results[i]


def install_inline_asm(run_asm):
    """Give ``tl.inline_asm_elementwise`` a meaning: ``run_asm(asm, [np arrays of values]) -> np array``
    (one output). bf16 operands arrive as their float32 values; the result is stored as the dtype the
    kernel asked for (bf16 rounded to nearest even, integers as integers). The interpreter itself
    refuses inline assembly. Returns a function undoing it."""

    def create_inline_asm(asm, constraints, values, types, is_pure, pack):
        out = np.asarray(run_asm(asm, [np.asarray(_wide(v)) for v in values]))
        ty = types[0] if types else tl.float32
        ty = getattr(ty, "scalar", ty)
        if ty == tl.bfloat16:
            return _AsmCall([TensorHandle(f32_to_bf16_bits(out), tl.bfloat16)])
        return _AsmCall([TensorHandle(out.astype(np_dtype(ty)), ty)])

    return _patch_builder({"create_inline_asm": create_inline_asm})


def _descriptor_box(desc: TensorDescHandle, offsets, memory):
    """(whole tensor as a strided numpy view, [(src slice, dst slice)] per dim, np dtype) of the block of
    ``desc`` at ``offsets``; None when the fast path does not apply (the interpreter's path then runs,
    with its own checks and errors)."""
    view = _cached_view(desc, memory)
    if view is None or len(offsets) != len(view[2]):
        return None
    whole, np_dt, shape, block = view
    offs = [int(o.data.item()) if type(o) is TensorHandle and o.data.size == 1 else int(np.asarray(o.data).reshape(-1)[0])
            for o in offsets]
    if (offs[-1] * np_dt.itemsize) % 16:
        return None
    box = []
    for off, blk, n in zip(offs, block, shape):
        lo, hi = max(off, 0), min(off + blk, n)
        box.append((slice(lo, hi), slice(lo - off, hi - off)) if hi > lo else None)
    return whole, box, np_dt


def _cached_view(desc: TensorDescHandle, memory):
    """:func:`_descriptor_view` of ``desc``, once per descriptor and launch (kept in ``memory.descs``)."""
    got = memory.descs.get(id(desc))
    if got is None or got[0] is not desc:
        got = (desc, _descriptor_view(desc, memory))
        memory.descs[id(desc)] = got
    return got[1]


def _descriptor_view(desc: TensorDescHandle, memory):
    """(the whole tensor of ``desc`` as a strided numpy view over ``memory``, np dtype, shape, block shape),
    or None when its elements are not all inside one of the launch's storages (or the layout is unusual)."""
    elem = desc.base.dtype.element_ty
    itemsize = elem.primitive_bitwidth // 8
    np_dt = np.dtype(_interp._get_np_dtype(elem))
    if itemsize == 0 or np_dt.itemsize != itemsize:
        return None
    shape = [int(np.asarray(s.data).reshape(-1)[0]) for s in desc.shape]
    strides = [int(np.asarray(s.data).reshape(-1)[0]) for s in desc.strides]
    if any(n <= 0 for n in shape) or any(s < 0 for s in strides) or len(shape) != len(desc.block_shape):
        return None
    extent = (sum((n - 1) * s for n, s in zip(shape, strides)) + 1) * itemsize
    raw = memory.bytes_at(int(np.asarray(desc.base.data).reshape(-1)[0]), extent)
    if raw is None:
        return None
    whole = np.lib.stride_tricks.as_strided(raw.view(np_dt), shape, [s * itemsize for s in strides])
    return whole, np_dt, shape, [int(b) for b in desc.block_shape]


def descriptor_region(desc: TensorDescHandle, offsets, memory):
    """The numpy view of global memory that the block of ``desc`` at ``offsets`` covers inside the tensor (where a
    store writes), or None when the fast path does not apply."""
    fast = _descriptor_box(desc, offsets, memory)
    if fast is None:
        return None
    whole, box, _ = fast
    if any(x is None for x in box):
        return whole[tuple(slice(0, 0) for _ in box)]
    return whole[tuple(x[0] for x in box)]


def descriptor_boxes(desc: TensorDescHandle, offsets, memory):
    """The blocks of ``desc`` at per-CTA ``offsets`` (one int array per dimension, a value per CTA) stacked on a
    leading CTA axis, and the bytes of one block; None unless every block lies wholly inside the tensor (and the
    fast path applies), where it equals the descriptor load of each CTA."""
    view = _cached_view(desc, memory)
    if view is None or len(offsets) != len(view[2]) or desc.padding != _interp._ir.PADDING_OPTION.PAD_ZERO:
        return None
    whole, np_dt, shape, block = view
    if np.any((offsets[-1] * np_dt.itemsize) % 16):
        return None
    for off, blk, n in zip(offsets, block, shape):
        if off.min() < 0 or (off + blk).max() > n:
            return None
    # every block at once: the tensor seen as its blocks at every offset, indexed by the CTAs' offsets
    windows = np.lib.stride_tricks.as_strided(whole, [n - b + 1 for n, b in zip(shape, block)] + list(block),
                                              whole.strides * 2, writeable=False)
    out = windows[tuple(np.asarray(o, dtype=np.intp) for o in offsets)]
    return out, int(np.prod(block)) * np_dt.itemsize


def install_fast_descriptors(memory, account):
    """Make the interpreter's descriptor loads/stores (TMA and ``tl`` tensor descriptors) numpy slices of
    ``memory`` (a HostMemory) where they can be, with the same results, out-of-bounds fill and costs:
    ``account(nbytes, is_store, region=None)`` is told the in-bounds bytes, as the access check is on the slow
    path, and the numpy view of global memory it read or wrote (``region``).
    Returns a function that removes the hook."""
    b = interpreter_builder
    cls = type(b)

    def load(desc, indices, cache_modifier, eviction_policy):
        fast = _descriptor_box(desc, indices, memory) if desc.padding == _interp._ir.PADDING_OPTION.PAD_ZERO \
            else None
        if fast is None:
            return cls.create_descriptor_load(b, desc, indices, cache_modifier, eviction_policy)
        whole, box, np_dt = fast
        block = [int(n) for n in desc.block_shape]
        if all(x is not None for x in box):
            src = whole[tuple(x[0] for x in box)]
            if src.shape == tuple(block):
                out = np.array(src)
            else:
                out = np.zeros(block, dtype=np_dt)
                out[tuple(x[1] for x in box)] = src
            account(src.size * np_dt.itemsize, False, src)
        else:
            out = np.zeros(block, dtype=np_dt)
            account(0, False)
        return TensorHandle(out, desc.base.dtype.element_ty)

    def store(desc, value, indices):
        fast = _descriptor_box(desc, indices, memory)
        if fast is None or np.asarray(value.data).dtype != fast[2] \
                or tuple(np.shape(value.data)) != tuple(int(n) for n in desc.block_shape):
            return cls.create_descriptor_store(b, desc, value, indices)
        whole, box, np_dt = fast
        if all(x is not None for x in box):
            src = np.asarray(value.data)[tuple(x[1] for x in box)]
            dst = tuple(x[0] for x in box)
            whole[dst] = src
            account(src.size * np_dt.itemsize, True, whole[dst])
        else:
            account(0, True)
        return None

    return _patch_builder({"create_descriptor_load": load, "create_descriptor_store": store})


def skip_dead_overflow_checks():
    """Stop the interpreter computing integer-overflow checks whose assert is off: ``a + b`` on ints then
    also recomputes the sum in int64 and compares it to the bounds, only to hand the result to
    ``device_assert``, which does nothing unless ``debug`` is set. Results are unchanged (about a third
    of a GEMM's simulated time went there). Returns a function that restores the options."""
    import dataclasses
    b = interpreter_builder
    saved = b.options
    if not saved.debug:
        b.options = dataclasses.replace(saved, sanitize_overflow=False)

    def undo():
        b.options = saved
    return undo


# semantic ops whose result is a function of their operands' types and values alone
_PURE_SCALAR_OPS = ("add", "sub", "mul", "floordiv", "mod", "and_", "or_", "xor_", "lshr", "ashr", "shl", "minus",
                    "plus", "invert", "not_", "logical_and", "logical_or", "equal", "not_equal", "less_than",
                    "less_equal", "greater_than", "greater_equal", "minimum", "maximum", "cast", "to_tensor",
                    "scalar_constant")
_INT_NAMES = frozenset(tl.dtype.SINT_TYPES + tl.dtype.UINT_TYPES)
_TENSOR, _DTYPE = tl.tensor, tl.dtype
_NO = object()
_new_handle = object.__new__
NOT_SCALAR = _NO


def _scalar_key(a):
    """A hashable key for an integer scalar operand (Triton scalar, Python int/bool, dtype, flag); _NO otherwise.
    Types are keyed by name (hashing a tl.dtype runs Python code); the value's numpy dtype and rank too."""
    t = type(a)
    if t is _TENSOR:
        ty = a.type
        if type(ty) is not _DTYPE or ty.name not in _INT_NAMES:
            return _NO
        h = a.handle
        if type(h) is not TensorHandle or h.attr or type(h.dtype) is not _DTYPE or "_bn" in h.__dict__:
            return _NO      # (a value that differs between the CTAs of a wave, sim/schedule/batch.py: computed, not cached)
        d = h.data
        if d.size != 1:
            return _NO
        return (ty.name, h.dtype.name, d.dtype.char, d.ndim, d.item())
    if t is int or t is bool or a is None or t is str:
        return (t, a)
    if t is _DTYPE:
        return ("dtype", a.name)
    if isinstance(a, tl.constexpr):
        k = _scalar_key(a.value)
        return _NO if k is _NO else ("constexpr", k)
    return _NO


def scalar_key(a):
    """A hashable key for an integer scalar (Triton scalar, Python int/bool, constexpr of one), or NOT_SCALAR."""
    return _scalar_key(a)


def memoize_scalar_ops():
    """Cache the interpreter's integer scalar arithmetic (index and phase computations: ``buf + 1``,
    ``cnt // NUM_STAGES & 1``), which goes through Triton's whole type-checking path each time.
    Keys are the operands' types and values, so a hit returns what Triton computed for the same
    inputs (a fresh tensor each time). Block tensors, floats and anything unusual take Triton's path.
    Returns a function that removes the cache."""
    sem = interpreter_semantic
    cache: dict = {}

    def make(name, orig):
        def op(*args, **kwargs):
            if kwargs:
                return orig(*args, **kwargs)
            key = (name, *map(_scalar_key, args))
            if _NO in key:
                return orig(*args)
            hit = cache.get(key)
            if hit is None:
                res = orig(*args)
                for i, a in enumerate(args):
                    if res is a:        # e.g. to_tensor of a tensor, cast to its own type: the operand itself
                        cache[key] = ("arg", i)
                        return res
                if (isinstance(res, tl.tensor) and type(res.type) is tl.dtype and type(res.handle) is TensorHandle
                        and not res.handle.attr and res.handle.data.size == 1 and len(cache) < 200_000):
                    fields = {k: v for k, v in res.__dict__.items() if k != "handle"}
                    cache[key] = ("new", type(res), fields, res.handle.dtype, res.handle.data.copy())
                return res
            if hit[0] == "arg":
                return args[hit[1]]
            _, cls, fields, hdtype, data = hit
            out = cls.__new__(cls)
            out.__dict__.update(fields)
            # a fresh handle, built without re-running the dataclass checks the first result passed
            h = _new_handle(TensorHandle)
            h.data, h.dtype, h.attr = data.copy(), hdtype, {}
            out.handle = h
            return out
        if name == "to_tensor":
            # every assignment in kernel code goes through to_tensor; only Python numbers need the cache
            def to_tensor(*args, **kwargs):
                t = type(args[0]) if args else None
                return op(*args, **kwargs) if t is int or t is bool else orig(*args, **kwargs)
            return to_tensor
        return op

    for name in _PURE_SCALAR_OPS:
        setattr(sem, name, make(name, getattr(type(sem), name).__get__(sem)))

    def undo():
        for name in _PURE_SCALAR_OPS:
            sem.__dict__.pop(name, None)
        cache.clear()
    return undo


# the integer scalar arithmetic a kernel's own code runs (index, slot and phase computations); casts and constants
# are not instructions of their own
SCALAR_ARITH_OPS = tuple(n for n in _PURE_SCALAR_OPS if n not in ("cast", "to_tensor", "scalar_constant"))


def install_scalar_costs(charge):
    """Call ``charge()`` after every integer scalar op of :data:`SCALAR_ARITH_OPS` the interpreter's semantic
    runs (``s = use % STAGES``, ``2 * s + 1``, ``parity ^ 1``): the index arithmetic that
    :func:`install_alu_costs` leaves free, because it runs through the semantic, not the builder, and
    :func:`memoize_scalar_ops` answers most of it from its cache without reaching the builder at all. Install it
    after ``memoize_scalar_ops`` (it wraps the memoized ops, so cache hits count) and undo it before. Python
    ``int`` arithmetic (a ``range`` loop's counter times a constexpr) never reaches the semantic and stays free.
    Returns a function undoing it."""
    sem = interpreter_semantic

    def wrap(orig):
        def op(*args, **kwargs):
            out = orig(*args, **kwargs)
            if type(out) is _TENSOR and type(out.type) is _DTYPE and out.type.name in _INT_NAMES:
                charge()
            return out
        return op

    return _patch_instance(sem, {n: wrap(getattr(sem, n)) for n in SCALAR_ARITH_OPS})


# -- bf16 numerics ------------------------------------------------------------------------------------------
# Triton's interpreter stores bf16 as its raw 16 bits in uint16 arrays (numpy has no bf16) but then computes
# on those bits as if they were integers: tl.dot multiplies the bit patterns (an O(1) attention comes out
# ~1e9), x + y adds them, x < y compares them as unsigned, sums add them, and float32 -> bf16 truncates where
# the GPU's cvt.rn.bf16.f32 rounds to nearest even. install_bf16_numerics computes every such op on the
# float32 values of the bits and rounds bf16 results to nearest even, as the GPU does.

def bf16_bits_to_f32(bits) -> np.ndarray:
    """float32 values of bf16 bit patterns (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def f32_to_f16(x) -> np.ndarray:
    """float32 -> float16, rounded to nearest even (subnormals included), as numpy's ``astype`` rounds, bit for bit:
    through torch, whose conversion is a vector instruction where numpy's takes a slow path for every value below
    fp16's normal range (an attention's P tile: ~40x slower)."""
    import torch
    a = np.ascontiguousarray(x, dtype=np.float32)
    return torch.from_numpy(a).to(torch.float16).numpy().reshape(a.shape)


def f32_to_bf16_bits(x) -> np.ndarray:
    """bf16 bit patterns (uint16) of float values, rounded to nearest even (NaN stays NaN, overflow is inf)."""
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = ((u >> 16) & 0x8000).astype(np.uint16) | np.uint16(0x7FC0)
    return np.where(np.isnan(a), nan, r).astype(np.uint16)


def _is_bf16(h) -> bool:
    return getattr(h.dtype, "scalar", h.dtype) == tl.bfloat16 and np.asarray(h.data).dtype == np.uint16


def mma_operand_values(arr, ty) -> np.ndarray:
    """The values of an MMA operand of Triton type ``ty`` (a tensor's data or an SMEM buffer's array) as float32,
    exactly: bf16 bits and fp8 bytes decoded (the interpreter's own fp8 decoding), anything else widened."""
    arr = np.asarray(arr)
    if ty == tl.bfloat16 and arr.dtype == np.uint16:
        return bf16_bits_to_f32(arr)
    if ty.is_floating() and ty.primitive_bitwidth == 8:
        return _f16_to_f32(_interp._convert_float(arr, ty, tl.float16, None).view(np.float16))
    if arr.dtype == np.float16:
        return _f16_to_f32(arr)
    return arr.astype(np.float32, copy=False)


def _f16_to_f32(arr) -> np.ndarray:
    """fp16 -> fp32, exact, through torch's vector conversion (numpy's is ~4x slower); the one difference is that a
    signaling NaN comes out quiet, as the tensor cores read it. A strided view (a wave's buffer of every CTA's ring
    stage) is read as it is: no contiguous copy first (~40 % of the conversion's time)."""
    import torch
    a = np.asarray(arr)
    if a.ndim == 0 or min(a.strides) < 0 or any(s % a.itemsize for s in a.strides):
        a = np.ascontiguousarray(a)
    return torch.from_numpy(a).to(torch.float32).numpy()


def _mma_operand(h):
    """(its values, exactly, as a float array; its bits) for a 16- or 8-bit float dot operand, else None."""
    ty = getattr(h.dtype, "scalar", h.dtype)
    if _is_bf16(h) or np.asarray(h.data).dtype == np.float16:
        bits = 16
    elif ty.is_floating() and ty.primitive_bitwidth == 8:
        bits = 8
    else:
        return None
    return mma_operand_values(h.data, ty), bits


def tensor_core_operands(a, b, d):
    """(A's values, B's values, operand bits) where the launch's dot of handles ``a``, ``b`` into ``d`` (with
    :func:`install_bf16_numerics` on) is the tensor cores' sum, ``mma_accumulate(d.data, A, B, bits)``: 16- and
    8-bit float operands into an fp32 accumulator; else None (the interpreter's dot). A wave widens its operands
    once, then splits the sum over the cores."""
    wa, wb = _mma_operand(a), _mma_operand(b)
    if wa is not None and wb is not None and d is not None and np.asarray(d.data).dtype == np.float32:
        return wa[0], wb[0], max(wa[1], wb[1])
    return None


def _wide(h):
    """The values of a handle as a numpy array: bf16 decoded to float32, anything else unchanged."""
    return bf16_bits_to_f32(h.data) if _is_bf16(h) else h.data


def _bf16_out(out) -> TensorHandle:
    out = np.asarray(out)
    if out.dtype == np.bool_:
        return TensorHandle(out, tl.int1)
    return TensorHandle(f32_to_bf16_bits(out), tl.bfloat16)


# -- fp8 casts ----------------------------------------------------------------------------------------------
# The interpreter stores fp8 as bytes, but its conversions to fp8 round half up, mishandle values below the
# smallest normal and turn overflow into NaN/inf bit patterns, and e5m2 NaN widens to a finite number. The
# GPU's cvt.rn.satfinite.{e4m3,e5m2} rounds to nearest even (subnormals included) and saturates to the
# largest finite value (NaN stays NaN); widening is exact. install_bf16_numerics installs these with its own.

def _fp8_casts(orig):
    """``create_fp_to_fp`` that converts between e4m3 / e5m2 and fp32 / fp16 / bf16 as the GPU does, through
    torch's CPU conversions (round to nearest even; values clamped first: satfinite); other casts go to ``orig``."""
    fp8 = {tl.float8e4nv: "float8_e4m3fn", tl.float8e5: "float8_e5m2"}
    wide = {tl.float32: "float32", tl.float16: "float16", tl.bfloat16: "bfloat16"}
    rtne = (None, _interp._ir.ROUNDING_MODE.RTNE)

    def create_fp_to_fp(src, dst_type, rounding_mode):
        import torch
        d, s = dst_type.scalar, src.dtype.scalar
        data = np.ascontiguousarray(src.data)
        if d in fp8 and s in wide and rounding_mode in rtne:
            vals = bf16_bits_to_f32(data) if _is_bf16(src) else data.astype(np.float32)
            t_dt = getattr(torch, fp8[d])
            big = torch.finfo(t_dt).max
            t = torch.from_numpy(np.ascontiguousarray(vals, dtype=np.float32)).clamp(-big, big)  # NaN stays
            return TensorHandle(t.to(t_dt).view(torch.uint8).numpy().reshape(data.shape), d)
        if s in fp8 and d in wide:
            t = torch.from_numpy(data.view(np.uint8)).view(getattr(torch, fp8[s])).to(getattr(torch, wide[d]))
            out = f32_to_bf16_bits(t.float().numpy()) if d == tl.bfloat16 else t.numpy()
            return TensorHandle(out.reshape(data.shape), d)
        return orig(src, dst_type, rounding_mode)
    return create_fp_to_fp


def install_bf16_numerics():
    """Make the interpreter's ops on bf16 compute on values, not bits (see above): dots (bf16 operands widened
    exactly to float32, as the tensor cores multiply them), elementwise arithmetic, comparisons, min/max, fma,
    clamp, casts to and from bf16 (to bf16: round to nearest even), bf16 constants, and the sum / min / max
    reductions and cumulative sums; and casts to and from fp8 as the GPU does them (``_fp8_casts``). Ops on
    other types are unchanged. Returns a function undoing it."""
    b = interpreter_builder
    cls = type(b)
    bf16 = tl.bfloat16

    def create_dot(a, bb, d, input_precision, max_num_imprecise_acc):
        ops = tensor_core_operands(a, bb, d)
        if ops is not None:
            # 16- and 8-bit float operands into an fp32 accumulator: as the tensor cores add (sim/ops/mma_numerics.py)
            return TensorHandle(mma_accumulate(d.data, *ops), d.dtype.scalar)
        if _is_bf16(a):
            a = TensorHandle(bf16_bits_to_f32(a.data), tl.float32)
        if _is_bf16(bb):
            bb = TensorHandle(bf16_bits_to_f32(bb.data), tl.float32)
        return cls.create_dot(b, a, bb, d, input_precision, max_num_imprecise_acc)

    def binary_op(lhs, rhs, op):
        if not (_is_bf16(lhs) or _is_bf16(rhs)):
            return cls.binary_op(b, lhs, rhs, op)
        with np.errstate(all="ignore"):
            return _bf16_out(op(_wide(lhs), _wide(rhs)))

    def unary_op(arg, op):
        if not _is_bf16(arg):
            return cls.unary_op(b, arg, op)
        with np.errstate(all="ignore"):
            return _bf16_out(op(_wide(arg)))

    def ternary_op(lhs, rhs, other, op):
        # select (np.where) picks bits and is right as it is; clip compares values
        if op is np.where or not any(_is_bf16(h) for h in (lhs, rhs, other)):
            return cls.ternary_op(b, lhs, rhs, other, op)
        return _bf16_out(op(_wide(lhs), _wide(rhs), _wide(other)))

    def create_fma(x, y, z):
        if not any(_is_bf16(h) for h in (x, y, z)):
            return cls.create_fma(b, x, y, z)
        exact = _wide(x).astype(np.float64) * _wide(y) + _wide(z)
        return _bf16_out(exact.astype(np.float32))

    def cast_impl(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == tl.float32 and d == tl.float16 and np.asarray(src.data).dtype == np.float32:
            return TensorHandle(f32_to_f16(src.data), tl.float16)
        if s == d or (s != bf16 and d != bf16):
            return cls.cast_impl(b, src, dst_type)
        if d == bf16:           # any float or integer -> bf16
            return TensorHandle(f32_to_bf16_bits(np.asarray(src.data).astype(np.float32)), bf16)
        vals = bf16_bits_to_f32(src.data)      # bf16 -> float32 exactly, then as the interpreter converts
        return cls.cast_impl(b, TensorHandle(vals, tl.float32), dst_type) if d != tl.float32 \
            else TensorHandle(vals, tl.float32)

    def get_bf16(value):
        return TensorHandle(f32_to_bf16_bits(np.array([value], dtype=np.float32)), bf16)

    ops = {"create_dot": create_dot, "binary_op": binary_op, "unary_op": unary_op, "ternary_op": ternary_op,
           "create_fma": create_fma, "cast_impl": cast_impl, "get_bf16": get_bf16,
           "create_fp_to_fp": _fp8_casts(cls.create_fp_to_fp.__get__(b))}
    undo_ops = _patch_builder(ops)

    # reductions and scans with a fast numpy path (the generic ones run the combine fn through the ops above)
    R, S = _interp.ReduceOps, _interp.ScanOps
    r_sum, r_minmax, s_cumsum, s_cumprod = R.sum, R.min_max, S.cumsum, S.cumprod

    def _rebf16(t):
        """A float32 result of the interpreter's reduction as bf16 (rounded to nearest even), same shape."""
        ty = tl.block_type(bf16, list(t.type.shape)) if isinstance(t.type, tl.block_type) else bf16
        return tl.core.tensor(TensorHandle(f32_to_bf16_bits(t.handle.data), bf16), ty)

    def _widened(t):
        ty = tl.block_type(tl.float32, list(t.type.shape)) if isinstance(t.type, tl.block_type) else tl.float32
        return tl.core.tensor(TensorHandle(bf16_bits_to_f32(t.handle.data), tl.float32), ty)

    def red_sum(self, input):
        return r_sum(self, input) if input.dtype != bf16 else _rebf16(r_sum(self, _widened(input)))

    def red_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        x = input[0] if isinstance(input, tuple) else input
        if x.dtype != bf16:
            return r_minmax(self, input, val_reduce_op, idx_reduce_op)
        res = r_minmax(self, _widened(x), val_reduce_op, idx_reduce_op)
        if isinstance(res, tuple):
            return _rebf16(res[0]), res[1]
        return res if val_reduce_op is None else _rebf16(res)

    def _scan(orig):
        def scan(self, input):
            if input.dtype != bf16:
                return orig(self, input)
            return [_rebf16(t) for t in orig(self, _widened(input))]
        return scan

    R.sum, R.min_max = red_sum, red_min_max
    S.cumsum, S.cumprod = _scan(s_cumsum), _scan(s_cumprod)

    def undo():
        undo_ops()
        R.sum, R.min_max, S.cumsum, S.cumprod = r_sum, r_minmax, s_cumsum, s_cumprod
    return undo


# Issue cost of the interpreter's elementwise ops, in FP32-FMA equivalents per element: an SM
# retires 128 FP32 add/mul/fma per cycle but 16 MUFU results (exp2, log2, rsqrt, sin, cos: CUDA
# programming guide, throughput table, cc 9.0), 64 conversions and 64 32-bit integer multiplies.
ALU_WEIGHTS = {
    **{n: 1.0 for n in ("create_fadd", "create_fsub", "create_fmul", "create_fma", "create_fneg", "create_fabs",
                        "create_add", "create_sub", "create_and", "create_or", "create_xor", "create_shl",
                        "create_lshr", "create_ashr", "create_select", "create_maxnumf", "create_minnumf",
                        "create_maximumf", "create_minimumf", "create_maxsi", "create_minsi", "create_maxui",
                        "create_minui", "create_clampf", "create_floor", "create_ceil", "create_iabs",
                        "create_fcmpOEQ", "create_fcmpOGE", "create_fcmpOGT", "create_fcmpOLE", "create_fcmpOLT",
                        "create_fcmpONE", "create_fcmpUNE", "create_icmpEQ", "create_icmpNE", "create_icmpSGE",
                        "create_icmpSGT", "create_icmpSLE", "create_icmpSLT", "create_icmpUGE", "create_icmpUGT",
                        "create_icmpULE", "create_icmpULT")},
    **{n: 2.0 for n in ("create_mul", "create_fp_ext", "create_fp_trunc", "create_fp_to_fp", "create_si_to_fp",
                        "create_ui_to_fp", "create_fp_to_si", "create_fp_to_ui", "create_int_cast", "create_umulhi")},
    **{n: 8.0 for n in ("create_exp2", "create_log2", "create_rsqrt", "create_sin", "create_cos", "create_fdiv")},
    # exp / log / sqrt / divisions: a MUFU op plus a few FMAs; integer division: a dozen instructions
    **{n: 10.0 for n in ("create_exp", "create_log", "create_sqrt", "create_precise_sqrt", "create_precise_divf",
                         "create_erf")},
    **{n: 16.0 for n in ("create_sdiv", "create_udiv", "create_srem", "create_urem", "create_idiv", "create_frem")},
}


def install_alu_costs(charge):
    """Call ``charge(elements, weight)`` after every elementwise op on a block (more than one element)
    the interpreter runs, with the op's weight in :data:`ALU_WEIGHTS`; scalars (index arithmetic) are
    free. Wraps whatever each builder method is at the time (bf16 and other patches included).
    Returns a function undoing it."""
    b = interpreter_builder

    def wrap(orig, weight):
        def op(*args, **kwargs):
            out = orig(*args, **kwargs)
            data = getattr(out, "data", None)
            if data is not None and data.size > 1:
                charge(data.size, weight)
            return out
        return op

    return _patch_builder({name: wrap(getattr(b, name), w) for name, w in ALU_WEIGHTS.items() if hasattr(b, name)})


# -- per-thread values (sim/ops/threads.py) -----------------------------------------------------------------------
def install_per_thread(splat, semantic_ops: dict):
    """Hooks for values that differ between a task's threads: ``splat(ret_ty, arg, orig)`` replaces the
    builder's scalar-to-block broadcast (which takes element 0, or fails, on a multi-element scalar), and
    ``semantic_ops`` (name -> ``f(orig, *args)``) the interpreter semantic's methods of those names (``store``,
    ``atomic_add``, ...). Returns a function undoing both."""
    sem, b = interpreter_semantic, interpreter_builder
    orig_splat = b.create_splat
    undo_b = _patch_builder({"create_splat": lambda ret_ty, arg: splat(ret_ty, arg, orig_splat)})
    saved = {n: sem.__dict__.get(n) for n in semantic_ops}
    for n, f in semantic_ops.items():
        orig = getattr(sem, n)
        setattr(sem, n, lambda *a, _f=f, _o=orig, **k: _f(_o, *a, **k))

    def undo():
        undo_b()
        for n, v in saved.items():
            if v is None:
                sem.__dict__.pop(n, None)
            else:
                setattr(sem, n, v)
    return undo
