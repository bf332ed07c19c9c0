"""Shared memory of one simulated CTA: allocations (``local_alloc``) and views on them.

A view is what a TLX ``buffered_tensor`` holds as its ``handle`` while simulating:
an allocation, the buffer index it selects (the unit that barriers protect, and
the unit races are tracked on), and numpy slicing / transposition / reinterpretation.
"""
from __future__ import annotations

import itertools

import numpy as np

_ids = itertools.count()


class SmemAlloc:
    """The buffers of one ``tlx.local_alloc(shape, dtype, num)``: a numpy array [num, *shape]."""

    def __init__(self, shape, tl_dtype, np_dtype, num, name, line, storage="smem"):
        self.id = next(_ids)
        self.storage = storage                # "smem" or "tmem"
        self.cta = None                       # the CTA that allocated it (set by the CTA)
        self.ordinal = None                   # its place in that CTA's allocation order: the same buffer
        #                                       in another CTA of the cluster has the same ordinal
        self.shape = list(shape)
        self.num = int(num)
        self.tl_dtype = tl_dtype
        self.np_dtype = np.dtype(np_dtype)
        self.data = np.zeros([self.num, *self.shape], dtype=self.np_dtype)
        self.name = name
        self.line = line

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    @property
    def tmem_columns(self) -> int:
        """32-bit TMEM columns this allocation takes: 128 lanes hold the rows, a row's bytes fill columns."""
        if self.storage != "tmem":
            return 0
        rows = self.shape[0] if len(self.shape) >= 2 else 1
        row_bytes = int(np.prod(self.shape[1:] or [1])) * self.np_dtype.itemsize
        per_buffer = -(-rows // 128) * max(1, -(-row_bytes // 4))
        return per_buffer * self.num

    def __repr__(self):
        return f"SmemAlloc({self.name}, {self.num}x{self.shape} {self.tl_dtype}{', TMEM' if self.storage == 'tmem' else ''})"


class SmemView:
    """A window on an allocation: whole (index None), one buffer, a slice, a transpose, a reinterpretation."""

    __slots__ = ("alloc", "index", "slices", "perm", "dtype_view", "tl_dtype")

    def __init__(self, alloc: SmemAlloc, index=None, slices=None, perm=None, dtype_view=None, tl_dtype=None):
        self.alloc = alloc
        self.index = index
        self.slices = slices
        self.perm = perm
        self.dtype_view = dtype_view          # (np dtype, shape) after local_reinterpret
        self.tl_dtype = tl_dtype or alloc.tl_dtype

    # -- derived views -----------------------------------------------------------
    def subview(self, idx: int) -> "SmemView":
        if self.index is None:
            if not 0 <= idx < self.alloc.num:
                raise IndexError(f"buffer index {idx} out of range: {self.alloc.name} has {self.alloc.num} buffers")
            return SmemView(self.alloc, idx, tl_dtype=self.tl_dtype)
        # a view of one buffer indexed again: index its first dimension
        arr_slices = list(self.slices or ())
        arr_slices.append(("index", idx))
        return SmemView(self.alloc, self.index, arr_slices, self.perm, self.dtype_view, self.tl_dtype)

    def subslice(self, offsets, shape) -> "SmemView":
        sl = list(self.slices or ())
        sl.append(("slice", tuple(int(o) for o in offsets), tuple(int(s) for s in shape)))
        return SmemView(self.alloc, self.index, sl, self.perm, self.dtype_view, self.tl_dtype)

    def transposed(self, dims) -> "SmemView":
        sl = list(self.slices or ())
        sl.append(("perm", tuple(int(d) for d in dims)))
        return SmemView(self.alloc, self.index, sl, None, self.dtype_view, self.tl_dtype)

    def reinterpreted(self, np_dtype, shape, tl_dtype) -> "SmemView":
        sl = list(self.slices or ())
        sl.append(("reinterpret", np.dtype(np_dtype), tuple(int(s) for s in shape)))
        return SmemView(self.alloc, self.index, sl, None, None, tl_dtype)

    # -- data ------------------------------------------------------------------------
    @property
    def array(self) -> np.ndarray:
        """The numpy view (writable) of this window."""
        arr = self.alloc.data if self.index is None else self.alloc.data[self.index]
        for op in self.slices or ():
            if op[0] == "index":
                arr = arr[op[1]]
            elif op[0] == "slice":
                arr = arr[tuple(slice(o, o + s) for o, s in zip(op[1], op[2]))]
            elif op[0] == "perm":
                arr = arr.transpose(op[1])
            elif op[0] == "reinterpret":
                if not arr.flags.c_contiguous:
                    raise ValueError("local_reinterpret of a non-contiguous view")
                arr = arr.view(op[1]).reshape(op[2])
        return arr

    @property
    def slot(self) -> tuple:
        """What races are tracked on: (allocation id, buffer index)."""
        return (self.alloc.id, self.index)

    @property
    def slot_name(self) -> str:
        return f"{self.alloc.name}[{self.index}]" if self.index is not None else self.alloc.name

    @property
    def nbytes(self) -> int:
        return int(self.array.nbytes)

    @property
    def storage(self) -> str:
        return self.alloc.storage

    def on(self, alloc: SmemAlloc) -> "SmemView":
        """The same window on another allocation (the same buffer of another CTA of the cluster)."""
        return SmemView(alloc, self.index, self.slices, self.perm, self.dtype_view, self.tl_dtype)

    def __repr__(self):
        return f"SmemView({self.slot_name})"
