"""Who wrote which global bytes in one launch, so that outputs that differ between schedules can be told apart:
a race (bytes plain-stored by more than one lane), or atomics' free ordering (bytes written only by atomics, or
stores of values the atomics returned in another order).

Every launch that computes its outputs keeps one: every pointer store, atomic and descriptor store (the fast
path's numpy boxes too) marks its bytes with the line that wrote them, which is what ``sim/diagnosis/outputs.py`` reads to
report an output left partly unwritten or written with NaN/Inf. When schedules are compared
(``Simulation(schedules>1)``) the log also marks each byte with the storing lane (a task of a CTA) and which bytes
atomics wrote, and keeps the atomics' order (addresses, lane).
"""
from __future__ import annotations

import numpy as np

NOBODY, SEVERAL = -1, -2


class WriteLog:
    """The bytes a launch wrote, per storage: ``code`` (uint16 per byte: 0 never written, else 1 + the index in
    ``sites`` of the (file, line) that wrote it last), and, with ``lanes`` (schedules compared), ``owner`` (the
    lane that plain-stored each byte, or NOBODY / SEVERAL) and ``atomic`` (written by an atomic), with the
    atomics' order. Pointer stores, atomics and descriptor stores (the fast path's numpy boxes too) all mark."""

    def __init__(self, ranges, lanes=False):
        self.ranges = sorted({(int(a), int(b)) for a, b in ranges if b > a})
        self.code = {lo: np.zeros(hi - lo, np.uint16) for lo, hi in self.ranges}
        self.sites: list = []          # (file, line) of code k at index k - 1
        self._site_code: dict = {}
        # the address spans loads read (plain, descriptor, atomic): only "did the kernel read this tensor?" is
        # asked of them, so a span per load (a set: a ring reloads the same tiles) is enough, and cheaper
        self.reads: set = set()
        self.masked: dict = {}         # storage start -> bool per byte: addressed by a store with its mask off
        self.lanes_kept = bool(lanes)
        self.owner = {lo: np.full(hi - lo, NOBODY, np.int32) for lo, hi in self.ranges} if lanes else {}
        self.atomic = {lo: np.zeros(hi - lo, bool) for lo, hi in self.ranges} if lanes else {}
        self.lanes: dict = {}
        self.atomic_order: list = []

    def _lane(self, lane) -> int:
        return self.lanes.setdefault(lane, len(self.lanes))

    def site(self, where) -> int:
        c = self._site_code.get(where)
        if c is None:
            if len(self.sites) >= 65534:
                return 65535                    # more distinct store lines than a uint16 names: "somewhere"
            self.sites.append(where)
            c = self._site_code[where] = len(self.sites)
        return c

    def _bytes(self, ptrs, itemsize):
        p = np.asarray(ptrs, dtype=np.int64).reshape(-1)
        span = np.arange(itemsize, dtype=np.int64)
        for lo, hi in self.ranges:
            sel = p[(p >= lo) & (p + itemsize <= hi)]
            if sel.size:
                yield lo, ((sel - lo)[:, None] + span).reshape(-1)

    def store(self, ptrs, itemsize, lane, where=None) -> None:
        code = self.site(where)
        me = self._lane(lane) if self.lanes_kept else None
        for lo, idx in self._bytes(ptrs, itemsize):
            self.code[lo][idx] = code
            if me is not None:
                own = self.owner[lo]
                cur = own[idx]
                own[idx] = np.where((cur == NOBODY) | (cur == me), me, SEVERAL)

    def load(self, ptrs, itemsize) -> None:
        p = np.asarray(ptrs, dtype=np.int64).reshape(-1)
        if p.size:
            self.reads.add((int(p.min()), int(p.max()) + itemsize))

    def masked_off(self, ptrs, itemsize) -> None:
        """Addresses a store computed but masked off: elements the kernel meant not to write (padding)."""
        for lo, idx in self._bytes(ptrs, itemsize):
            self._flags(self.masked, lo)[idx] = True

    def _flags(self, table, lo) -> np.ndarray:
        r = table.get(lo)
        if r is None:
            r = table[lo] = np.zeros(self.code[lo].size, bool)
        return r


    def _box(self, region: np.ndarray):
        """(storage start, a function giving ``region``'s bytes as a strided view of a per-byte array), or None."""
        if region.size == 0:
            return None
        addr = region.__array_interface__["data"][0]
        for lo, hi in self.ranges:
            if lo <= addr < hi:
                break
        else:
            return None
        shape, strides = region.shape + (region.itemsize,), region.strides + (1,)

        def view(arr):
            s = arr.itemsize
            return np.lib.stride_tricks.as_strided(arr[addr - lo:], shape, tuple(x * s for x in strides))
        return lo, view

    def written(self, ptrs, itemsize) -> bool:
        """Whether an element at ``ptrs`` was stored during the launch so far (its first or last byte: a store marks
        every byte of what it writes)."""
        if not self.sites:
            return False                     # nothing stored yet
        p = np.asarray(ptrs, dtype=np.int64).reshape(-1)
        if p.size == 0:
            return False
        p_lo, p_hi = int(p.min()), int(p.max()) + itemsize
        for lo, hi in self.ranges:
            if p_hi <= lo or p_lo >= hi:
                continue
            if not self.code[lo][max(p_lo, lo) - lo:min(p_hi, hi) - lo].any():
                continue                    # nothing stored anywhere in the span these addresses lie in
            sel = p[(p >= lo) & (p + itemsize <= hi)] - lo
            if sel.size and (self.code[lo][sel].any() or self.code[lo][sel + (itemsize - 1)].any()):
                return True
        return False

    def written_box(self, region: np.ndarray) -> bool:
        """Whether any byte of a descriptor box (a strided numpy view of global memory) was stored so far."""
        if not self.sites:
            return False
        box = self._box(region)
        return box is not None and bool(box[1](self.code[box[0]]).any())

    def load_box(self, region: np.ndarray) -> None:
        """A descriptor load's box (``region``: the strided numpy view it read)."""
        if region.size:
            addr = region.__array_interface__["data"][0]
            self.reads.add((addr, addr + sum((n - 1) * s for n, s in zip(region.shape, region.strides))
                            + region.itemsize))

    def store_box(self, region: np.ndarray, lane, where=None) -> None:
        """A descriptor store's box, ``region`` a strided numpy view of the bytes it wrote (no index arrays)."""
        box = self._box(region)
        if box is None:
            return
        lo, view = box
        view(self.code[lo])[...] = self.site(where)
        if self.lanes_kept:
            me = self._lane(lane)
            own = view(self.owner[lo])
            own[...] = np.where((own == NOBODY) | (own == me), me, SEVERAL)

    def atomic_op(self, ptrs, itemsize, lane, where=None) -> None:
        code = self.site(where)
        for lo, idx in self._bytes(ptrs, itemsize):
            self.code[lo][idx] = code
            if self.lanes_kept:
                self.atomic[lo][idx] = True
        if self.lanes_kept:
            # the lane itself (CTA, task, replica), not its index in this log: indices follow who came first, so
            # two orders of the same atomics would number their lanes alike and look the same
            self.atomic_order.append((np.asarray(ptrs).tobytes(), lane))

    def at(self, addrs):
        """(owner, written by an atomic) of each byte address in ``addrs`` (NOBODY, False outside every storage)."""
        a = np.asarray(addrs, dtype=np.int64)
        owner = np.full(a.shape, NOBODY, np.int32)
        atomic = np.zeros(a.shape, bool)
        for lo, hi in self.ranges:
            m = (a >= lo) & (a < hi)
            owner[m] = self.owner[lo][a[m] - lo]
            atomic[m] = self.atomic[lo][a[m] - lo]
        return owner, atomic

    def _per_element(self, table, t, combine):
        """``table[storage]`` (an array per byte) per element of the CPU tensor ``t`` (its own view: shape,
        strides, offset), its bytes folded by ``combine`` (np.maximum, np.logical_or), shaped like ``t``; None when
        ``t`` is not inside one logged storage. Strided views, one pass per byte of the element: no index arrays."""
        found = self._storage_span(t)
        if found is None:
            return None
        lo, off, _ = found
        arr = table.get(lo)
        if arr is None:
            return np.zeros(tuple(t.shape), bool)
        k, s = t.element_size(), arr.itemsize
        strides = tuple(x * k * s for x in t.stride())
        out = np.array(np.lib.stride_tricks.as_strided(arr[off:], tuple(t.shape), strides))
        for b in range(1, k):
            combine(out, np.lib.stride_tricks.as_strided(arr[off + b:], tuple(t.shape), strides), out=out)
        return out

    def _storage_span(self, t):
        """(the logged storage's first address, ``t``'s byte offset in it, the extent of ``t``'s bytes: its first
        to its last element) of the CPU tensor ``t``; None when ``t`` is empty or not inside one logged storage."""
        if t.numel() == 0:
            return None
        addr = t.data_ptr()
        extent = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()
        for lo, hi in self.ranges:
            if lo <= addr and addr + extent <= hi:
                return lo, addr - lo, extent
        return None

    def span_written(self, t):
        """Whether a byte within the span of ``t``'s bytes (its first to its last element) was stored; None when
        ``t`` is empty or not inside one logged storage (as :meth:`codes_of`). A cheap first test: an input's span
        holds no store, and its per-element codes need not be made."""
        found = self._storage_span(t)
        if found is None:
            return None
        lo, off, extent = found
        arr = self.code.get(lo)
        return arr is not None and bool(arr[off:off + extent].any())

    def codes_of(self, t):
        """Per element of ``t``: the largest write code of its bytes (0: none written); None outside the log."""
        return self._per_element(self.code, t, np.maximum)

    def was_read(self, t) -> bool:
        """Whether a load (plain, descriptor, atomic) read within the span of ``t``'s bytes (its first to its last
        element: a strided view counts the gaps in between)."""
        if not self.reads or t.numel() == 0:
            return False
        lo = t.data_ptr()
        hi = lo + (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()
        spans = np.array(list(self.reads), dtype=np.int64)
        return bool(((spans[:, 0] < hi) & (spans[:, 1] > lo)).any())

    def masked_of(self, t):
        """Per element of ``t``: whether a store addressed any of its bytes with its mask off."""
        return self._per_element(self.masked, t, np.logical_or)


def explain_divergence(tensor, before, logs) -> tuple[str, str]:
    """Why ``tensor`` differs from ``before`` (its value under the first schedule), given each schedule's
    WriteLog: ("race", why) or ("atomic ordering", why)."""
    import torch
    a, b = tensor, before
    if a.dtype.is_floating_point and a.element_size() > 1:
        diff = ~((a == b) | (torch.isnan(a) & torch.isnan(b)))
    else:
        diff = a.view(torch.uint8) != b.view(torch.uint8) if a.element_size() == 1 else a != b
    idx = diff.nonzero()
    if idx.numel() == 0:
        return "race", "no element differs"
    strides = torch.tensor(a.stride(), dtype=torch.int64)
    addrs = (a.data_ptr() + (idx * strides).sum(-1) * a.element_size()).numpy()
    owners, atomics = zip(*(log.at(addrs) for log in logs))
    if any((o == SEVERAL).any() for o in owners):
        return "race", "more than one lane stored to the same bytes"
    if all(at.all() and (o == NOBODY).all() for o, at in zip(owners, atomics)):
        if a.dtype.is_floating_point:
            close = torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-6 * float(b.double().abs().max()))
            return "atomic ordering", ("written only by floating-point atomics, which add in the order they arrive: "
                                       + ("the results agree within rounding" if close else
                                          "the results differ by more than rounding (cancellation?)"))
        return "atomic ordering", "written only by atomics"
    orders = [log.atomic_order for log in logs]
    if len({tuple(sorted(o, key=repr)) for o in orders}) == 1 and len({tuple(o) for o in orders}) > 1:
        return "atomic ordering", ("stored from values atomics returned, and the atomics ran in a different order: "
                                   "the values they return depend on it, as on a GPU")
    return "race", "plain stores and loads ordered differently"
