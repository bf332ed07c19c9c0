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


class AddressTaken:
    """The tensors whose address host code took (``tensor.data_ptr()``) while a simulation is active.

    Kernels such as grouped GEMMs receive a table of raw addresses (``torch.tensor([A.data_ptr(), ...])``)
    and turn them into pointers on the device. Those tensors are not launch arguments, yet the kernel
    may read and write them: their storages join the launch's accessible memory (and its schedule
    snapshots). The tensors are held until the simulation ends, so no address is reused meanwhile.
    """

    def __init__(self):
        self.tensors: dict[int, object] = {}
        self._saved = None

    def enable(self):
        import torch
        orig = torch.Tensor.__dict__.get("data_ptr")
        base = torch._C.TensorBase.data_ptr
        tensors = self.tensors

        def data_ptr(t):
            ptr = base(t)
            if t.device.type == "cpu":
                tensors.setdefault(id(t), t)
            return ptr
        self._saved = orig
        torch.Tensor.data_ptr = data_ptr
        return self

    def disable(self):
        import torch
        if self._saved is None:
            del torch.Tensor.data_ptr
        else:
            torch.Tensor.data_ptr = self._saved
        self._saved = None
        self.tensors.clear()

    def values(self):
        return list(self.tensors.values())
