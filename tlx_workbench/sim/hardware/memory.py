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
        self.col0 = None                      # TMEM: first 32-bit column of buffer 0
        self.cpb = None                       # TMEM: columns per buffer
        self.root = self                      # TMEM: the allocation whose columns this one reuses;
        #                                       SMEM: the allocation whose bytes it reuses (reuse=)
        self.byte_keys = False                # SMEM with aliases: races tracked on byte ranges of root
        self.buf_cols = None                  # TMEM, alias-spec layouts: first column of each buffer
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

    def place_in_tmem(self, tmem: np.ndarray, col0: int) -> bool:
        """Lay the buffers out as TMEM does — rows on lanes, each buffer a range of 32-bit columns starting
        at ``col0`` — as a view of the CTA's TMEM array ``tmem`` [128 lanes, columns] (uint32). Aliases
        (``reuse=``) then share columns, as on the GPU. False when the shape has no such layout here."""
        if len(self.shape) != 2 or self.shape[0] > tmem.shape[0]:
            return False
        m, n = self.shape
        item = self.np_dtype.itemsize
        cpb = max(1, -(-n * item // 4))
        if col0 + self.num * cpb > tmem.shape[1] or (n * item) % 4:
            return False
        region = tmem[:m, col0:col0 + self.num * cpb].view(self.np_dtype)      # [m, num * n]
        self.data = region.reshape(m, self.num, n).transpose(1, 0, 2)           # [num, m, n], a view
        self.col0, self.cpb = col0, cpb
        return True

    def tmem_cols(self, index, col_lo=0, col_hi=None) -> tuple[int, int]:
        """The TMEM columns [lo, hi) of buffer ``index`` (None: all), element columns col_lo..col_hi in it."""
        if self.col0 is None:
            return (0, 1 << 30)
        item = self.np_dtype.itemsize
        if index is None:
            return (self.col0, self.col0 + self.num * self.cpb)
        base = self.buf_cols[index] if self.buf_cols is not None else self.col0 + index * self.cpb
        hi = self.cpb if col_hi is None else -(-col_hi * item // 4)
        return (base + (col_lo * item) // 4, base + hi)

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


class AliasSpec:
    """``storage_alias_spec``: allocations placed together later by ``set_buffer_overlap(reuse_group(...))``."""

    def __init__(self, storage: str, size_bytes, name, line):
        self.id = next(_ids)
        self.storage = storage
        self.size_bytes = size_bytes
        self.allocs: list[SmemAlloc] = []
        self.name, self.line = name, line
        self.placed = False


class BufferList:
    """An allocation's buffers when they are not evenly spaced (a storage_alias_spec layout): ``[i]`` is buffer i."""

    def __init__(self, views, shape, dtype):
        self.views = views
        self.shape = (len(views), *shape)
        self.dtype = dtype

    def __getitem__(self, i):
        return self.views[i]

    def __len__(self):
        return len(self.views)

    @property
    def nbytes(self) -> int:
        return sum(int(v.nbytes) for v in self.views)


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
                arr = _reinterpret(arr, op[1], op[2], self.alloc.storage == "tmem")
        return arr

    @property
    def slot(self) -> tuple:
        """What races are tracked on: (allocation id, buffer index); in TMEM, the columns it covers; in SMEM
        shared with ``reuse=`` aliases, the bytes of the root allocation it covers."""
        a = self.alloc
        if a.storage == "tmem" and a.col0 is not None:
            lo, hi = 0, None
            for op in self.slices or ():
                if op[0] == "slice" and len(op[1]) == 2:
                    lo, hi = lo + op[1][1], lo + op[1][1] + op[2][1]
            return ("tmem", a.root.id) + a.tmem_cols(self.index, lo, hi)
        if a.byte_keys:
            per = a.nbytes // max(a.num, 1)
            lo, hi = (0, a.nbytes) if self.index is None else (self.index * per, (self.index + 1) * per)
            return ("smem", a.root.id, lo, hi)
        return (a.id, self.index)

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


def _reinterpret(arr: np.ndarray, np_dtype, shape, tmem: bool) -> np.ndarray:
    """``arr`` as ``shape`` elements of ``np_dtype``. In TMEM a row's values sit in consecutive 32-bit columns of
    its lane, so a column slice [m, n] of 32-bit values read as 16-bit [m, n] is its first n / 2 columns, packed
    (how FA kernels write P over the S tile they computed it from)."""
    if arr.flags.c_contiguous:
        return arr.view(np_dtype).reshape(shape)
    if tmem and arr.ndim == 2 and len(shape) == 2 and shape[0] == arr.shape[0] and arr.strides[-1] == arr.itemsize:
        nbytes = shape[1] * np.dtype(np_dtype).itemsize
        if nbytes % arr.itemsize == 0 and nbytes <= arr.shape[1] * arr.itemsize:
            return arr[:, :nbytes // arr.itemsize].view(np_dtype)
    raise ValueError(f"local_reinterpret of a non-contiguous {list(arr.shape)} view as {list(shape)} {np.dtype(np_dtype)}")
