"""numpy views of a launch's CPU tensors, so TMA block copies are array slices.

Triton's interpreter moves a TMA block one element at a time: it materializes a pointer per
element, a mask, checks each address and gathers through its C++ helper. A TMA block is a
box of a strided tensor, so when the whole tensor lies inside one of the launch's storages
the same copy is a numpy slice of a strided view over those bytes (out-of-box parts of the
block keep the zero fill). ``interp_adapter.descriptor_load/descriptor_store`` use this and
fall back to the interpreter's own path whenever the fast path does not apply.
"""
from __future__ import annotations

import ctypes

import numpy as np


class HostMemory:
    """Byte views of the storages passed to one launch (``ranges``: [(start, end) addresses])."""

    def __init__(self, ranges):
        self.ranges = [(int(a), int(b)) for a, b in ranges if b > a]
        self._bufs: dict[int, np.ndarray] = {}
        self.descs: dict = {}     # id(descriptor) -> (descriptor, its view or None): see interp_adapter

    def bytes_at(self, addr: int, nbytes: int) -> np.ndarray | None:
        """The ``nbytes`` bytes at ``addr`` as a writable uint8 array, or None if no storage holds them all."""
        for lo, hi in self.ranges:
            if lo <= addr and addr + nbytes <= hi:
                buf = self._bufs.get(lo)
                if buf is None:
                    buf = np.ctypeslib.as_array((ctypes.c_uint8 * (hi - lo)).from_address(lo))
                    self._bufs[lo] = buf
                return buf[addr - lo:addr - lo + nbytes]
        return None
