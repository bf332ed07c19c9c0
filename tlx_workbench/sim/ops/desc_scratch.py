"""TMA descriptors the kernel writes into global scratch: ``tlx.allocate_tensor_descriptor``,
``tlx.make_tensor_descriptor(desc_ptr=...)`` and ``tlx.reinterpret_tensor_descriptor``.

On a GPU the scratch holds 128-byte ``CUtensorMap`` records: ``make_tensor_descriptor`` encodes one
into slot ``i``, ``reinterpret_tensor_descriptor`` hands TMA the address of a slot. Here a slot
holds the interpreter's descriptor object (base, shape, strides, block shape); reading a slot
that was never written, or with another block shape or dtype than the one written there, is an
error naming the kernel line (the GPU would copy garbage or the wrong box).

:class:`DescScratchOps` is mixed into the simulator's builder (``tlx_ops.SimBuilder``).
"""
from __future__ import annotations

import triton.language as tl

from .. import interp_adapter as ia

DESCRIPTOR_BYTES = 128


class DescScratch:
    """One ``allocate_tensor_descriptor(num)`` allocation of a CTA: ``num`` descriptor slots."""

    def __init__(self, nbytes: int):
        self.num = max(1, nbytes // DESCRIPTOR_BYTES)
        self.slots: dict[int, object] = {}


class DescPtr:
    """An address inside a :class:`DescScratch` (what ``desc_ptrs[i]`` evaluates to)."""

    def __init__(self, scratch: DescScratch, offset: int = 0):
        self.scratch = scratch
        self.offset = offset

    def id(self):           # uTLX's checked_handle asks every op result for a non-null id
        return 1

    @property
    def slot(self) -> int:
        if self.offset % DESCRIPTOR_BYTES:
            raise ValueError(f"descriptor address {self.offset} bytes into the scratch is not a multiple of "
                             f"{DESCRIPTOR_BYTES} (one CUtensorMap each)")
        i = self.offset // DESCRIPTOR_BYTES
        if not 0 <= i < self.scratch.num:
            raise IndexError(f"descriptor slot {i} of an allocate_tensor_descriptor(num={self.scratch.num})")
        return i


class DescScratchOps:
    """Builder methods for descriptors in global scratch (both TLX frontends)."""

    def create_global_scratch_alloc(self, nbytes, alignment=None, *rest):        # Meta's tlx frontend
        return DescPtr(DescScratch(_int(nbytes)))

    def utlx_global_scratch_alloc(self, args):                                    # uTLX frontend
        return DescPtr(DescScratch(_int(args[0])))

    def create_addptr(self, ptr, offset):
        if isinstance(ptr, DescPtr):
            return DescPtr(ptr.scratch, ptr.offset + _int(offset))
        return super().create_addptr(ptr, offset)

    def create_make_tensor_descriptor(self, base, shape, strides, *rest):
        if len(rest) == 4 and isinstance(rest[0], DescPtr):
            # the desc_ptr form: build the descriptor and encode it into the slot
            where, block_shape, is_signed, padding = rest
            desc = super().create_make_tensor_descriptor(base, shape, strides, block_shape, is_signed, padding)
            where.scratch.slots[where.slot] = desc
            return desc
        return super().create_make_tensor_descriptor(base, shape, strides, *rest)


def reinterpret_tensor_descriptor(desc_ptr, block_shape, dtype, _semantic=None):
    """``tlx.reinterpret_tensor_descriptor``: the descriptor a slot holds, as a ``tl.tensor_descriptor``."""
    where = desc_ptr.handle
    if not isinstance(where, DescPtr):
        raise TypeError(f"desc_ptr must come from tlx.allocate_tensor_descriptor, got {type(where).__name__}")
    desc = where.scratch.slots.get(where.slot)
    if desc is None:
        raise ValueError(f"descriptor slot {where.slot} was never written: call tlx.make_tensor_descriptor("
                         f"desc_ptr=...[{where.slot}], ...) before reinterpreting it")
    block = [int(tl._unwrap_if_constexpr(b)) for b in block_shape]
    dtype = tl._unwrap_if_constexpr(dtype)
    elem = desc.base.dtype.element_ty
    if list(desc.block_shape) != block or elem != dtype:
        raise ValueError(f"descriptor slot {where.slot} holds a {list(desc.block_shape)} {elem} block; "
                         f"reinterpreted as {block} {dtype}")
    shape = [tl.tensor(s, tl.int32) for s in desc.shape]
    strides = [tl.tensor(s, tl.int64) for s in desc.strides]
    return tl.tensor_descriptor(desc, shape, strides, tl.block_type(dtype, block))


def _int(h) -> int:
    if isinstance(h, ia.TensorHandle):
        return int(h.data.reshape(-1)[0])
    return int(tl._unwrap_if_constexpr(h))
