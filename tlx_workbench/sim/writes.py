"""Who wrote which global bytes in one launch, so that outputs that differ between schedules can be told apart:
a race (bytes plain-stored by more than one lane), or atomics' free ordering (bytes written only by atomics, or
stores of values the atomics returned in another order).

Kept only when schedules are compared (``Simulation(schedules>1)``): every pointer store marks its bytes with the
storing lane (a task of a CTA), every atomic marks its bytes and appends (addresses, lane) to the launch's atomic
order. Descriptor stores made on the fast path (numpy slices) are not recorded byte by byte: differences in what
they wrote stay races, as before.
"""
from __future__ import annotations

import numpy as np

NOBODY, SEVERAL = -1, -2


class WriteLog:
    def __init__(self, ranges):
        self.ranges = sorted({(int(a), int(b)) for a, b in ranges if b > a})
        self.owner = {lo: np.full(hi - lo, NOBODY, np.int32) for lo, hi in self.ranges}
        self.atomic = {lo: np.zeros(hi - lo, bool) for lo, hi in self.ranges}
        self.lanes: dict = {}
        self.atomic_order: list = []
        self.opaque_stores = False

    def _lane(self, lane) -> int:
        return self.lanes.setdefault(lane, len(self.lanes))

    def _bytes(self, ptrs, itemsize):
        p = np.asarray(ptrs, dtype=np.int64).reshape(-1)
        span = np.arange(itemsize, dtype=np.int64)
        for lo, hi in self.ranges:
            sel = p[(p >= lo) & (p + itemsize <= hi)]
            if sel.size:
                yield lo, ((sel - lo)[:, None] + span).reshape(-1)

    def store(self, ptrs, itemsize, lane) -> None:
        me = self._lane(lane)
        for lo, idx in self._bytes(ptrs, itemsize):
            own = self.owner[lo]
            cur = own[idx]
            own[idx] = np.where((cur == NOBODY) | (cur == me), me, SEVERAL)

    def atomic_op(self, ptrs, itemsize, lane) -> None:
        me = self._lane(lane)
        for lo, idx in self._bytes(ptrs, itemsize):
            self.atomic[lo][idx] = True
        self.atomic_order.append((np.asarray(ptrs).tobytes(), me))

    def at(self, addrs):
        """(owner, written by an atomic) of each byte address in ``addrs`` (None, None outside every storage)."""
        a = np.asarray(addrs, dtype=np.int64)
        owner = np.full(a.shape, NOBODY, np.int32)
        atomic = np.zeros(a.shape, bool)
        for lo, hi in self.ranges:
            m = (a >= lo) & (a < hi)
            owner[m] = self.owner[lo][a[m] - lo]
            atomic[m] = self.atomic[lo][a[m] - lo]
        return owner, atomic


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
    if any(log.opaque_stores for log in logs):
        return "race", "a descriptor store wrote this launch's outputs (its bytes are not recorded)"
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
    if len({tuple(sorted(o)) for o in orders}) == 1 and len({tuple(o) for o in orders}) > 1:
        return "atomic ordering", ("stored from values atomics returned, and the atomics ran in a different order: "
                                   "the values they return depend on it, as on a GPU")
    return "race", "plain stores and loads ordered differently"
