"""Cluster launch control (CLC): which clusters a launch starts and which its CTAs steal, the response buffers,
and the try_cancel / query operations of a CTA.

:class:`LaunchQueue` holds a launch's clusters; :class:`ClcOps` is mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA`.

How the simulator answers a try_cancel (``LaunchQueue.steal``): the first ``slots`` clusters start at once (as
many as fit on the GPU's SMs, or ``simulate(resident=...)``); the cluster in slot ``s`` takes, at its ``k``-th
try_cancel, the cluster at position ``slots + k * slots + s`` of the launch, or -1 past the end. That is the order a
GPU's scheduler gives CTAs that run in step (round robin), and it does not depend on the interleaving: each CTA's
answers are its own, whichever CTAs run beside it, which is what lets the CTAs of a CLC kernel run in waves
(``sim/schedule/batch.py``). A cluster no CTA took (a CTA stopped asking) starts after the slots, and its try_cancels take
the next cluster not yet started.
"""
from __future__ import annotations

from ..diagnosis.races import Access
from ..schedule.scheduler import AsyncOp
from ..diagnosis.source_lines import name_from_line

CLC_LATENCY = 400.0     # try_cancel round trip to the cluster scheduler, cycles (an L2-like round trip)


class ClcOps:
    """The CLC methods of a CTA."""

    # -- CLC: cluster launch control ---------------------------------------------------------------
    def clc_alloc(self, num: int):
        file, line = self.where()
        arr = ClcResponses(num, name_from_line(file, line, f"clc{len(self.clc_arrays)}"), line)
        arr.cta, arr.ordinal = self, len(self.clc_arrays)
        self.clc_arrays.append(arr)
        return arr

    def clc_try_cancel(self, bar, resp: "ClcSlot"):
        """clusterlaunchcontrol.try_cancel: steal a cluster not yet launched; its first CTA id (or -1 when
        none is left) lands, 16 bytes, in the response of every CTA of this cluster."""
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        t.clock += self.cost.issue
        if len(self.cluster) > 1 and self.rank != 0:
            # the request is multicast: the cluster's first CTA issues it for every CTA
            self.span(t, "other", start, t.clock, "clc try_cancel (issued by CTA rank 0)", line)
            return
        stolen, k = self.run.clc.steal(self.cluster[0].pid)
        value = -1 if stolen is None else int(stolen)
        when = t.clock + CLC_LATENCY
        for c in self.cluster:
            bslot = self.remote_slot(bar, c.rank, line)
            ordn = resp.array.ordinal
            self._await_remote(f"CTA {c.pid} to allocate its CLC responses", lambda c=c: len(c.clc_arrays) > ordn,
                               line)
            rslot = c.clc_arrays[ordn].slots[resp.index]
            agent = ("clc", bslot.array.id, bslot.index)
            epoch = self.tma_agents.get(agent, 0) + 1
            self.tma_agents[agent] = epoch
            vc = dict(t.vc)
            vc[agent] = epoch
            self.races.write(("clc", id(rslot)), rslot.name, vc,
                             Access(agent, epoch, line, t.lane, f"CLC response into {rslot.name}"), start)
            issued = self._issue_bytes(bslot, line, 16)

            def complete(bslot=bslot, rslot=rslot, vc=vc, owner=c, issued=issued):
                rslot.value, rslot.steal = value, k
                owner._land(bslot, 16, when, vc, line, issued)
            self.sched.add_async(AsyncOp(complete, f"CLC response (line {line})"))
        self.span(t, "other", start, t.clock, "clc try_cancel", line,
                  args={"stole": value, "cluster_ctas": [c.pid for c in self.cluster]})

    def clc_query(self, resp: "ClcSlot") -> int:
        file, line = self.where()
        t = self.step(line)
        self.races.read(("clc", id(resp)), resp.name, t.vc,
                        Access(t.key, t.vc.get(t.key, 0), line, t.lane, f"CLC query of {resp.name}"), t.clock)
        t.clock += self.cost.barrier_op
        return resp.value



class LaunchQueue:
    """A launch's clusters, in launch order: which have started, which a try_cancel took, and the steal log."""

    def __init__(self, clusters, slots: int):
        self.clusters = list(clusters)          # [[(grid index, pid, rank), ...], ...]
        self.slots = max(1, min(int(slots), len(self.clusters) or 1))
        self.taken = [False] * len(self.clusters)
        self.slot_of: dict = {}                 # first CTA id of a started cluster -> its slot (None: started late)
        self.asked: dict = {}                   # slot -> try_cancels so far
        self._first = 0                         # no cluster before this position is left
        self._log: list = []                    # (order key, stealing CTA, first CTA of the stolen cluster or None)

    def start(self, n: int) -> list:
        """The next ``n`` clusters not yet started nor taken, now started."""
        out = []
        while len(out) < n:
            pos = self._next_left()
            if pos is None:
                break
            cl = self.clusters[pos]
            self.taken[pos] = True
            self.slot_of[cl[0][1]] = pos if pos < self.slots else None
            out.append(cl)
        return out

    def _next_left(self):
        """The first position not yet started nor taken (None: none is left)."""
        while self._first < len(self.taken) and self.taken[self._first]:
            self._first += 1
        return self._first if self._first < len(self.taken) else None

    def left(self) -> bool:
        return self._next_left() is not None

    def answer(self, slot: int, k: int):
        """The cluster slot ``slot`` takes at its ``k``-th try_cancel (without taking it): (position, cluster) or
        None when none is left for it."""
        pos = self.slots + k * self.slots + slot
        return (pos, self.clusters[pos]) if pos < len(self.clusters) else None

    def value(self, slot: int, k: int) -> int:
        """What the ``k``-th try_cancel of ``slot`` reads back: the stolen cluster's first CTA's x id, or -1."""
        a = self.answer(slot, k)
        return -1 if a is None else int(a[1][0][0][0])

    def steal(self, stealer: int):
        """A try_cancel of the cluster whose first CTA is ``stealer``: (the stolen cluster's first CTA's x id or
        None, which try_cancel of its slot this is or None when it started late)."""
        slot = self.slot_of.get(stealer)
        if slot is not None:
            k = self.asked.get(slot, 0)
            self.asked[slot] = k + 1
            a = self.answer(slot, k)
            if a is None:
                self._log.append(((0, k, slot), stealer, None))
                return None, k
            pos, cl = a
            if not self.taken[pos]:
                self.taken[pos] = True
                self._log.append(((0, k, slot), stealer, cl[0][1]))
                return cl[0][0][0], k
        # started late (or its turn's cluster was started already): the next cluster not yet started
        pos = self._next_left()
        if pos is None:
            self._log.append(((1, len(self._log)), stealer, None))
            return None, None
        cl = self.clusters[pos]
        self.taken[pos] = True
        self._log.append(((1, len(self._log)), stealer, cl[0][1]))
        return cl[0][0][0], None

    @property
    def log(self) -> list:
        """(stealing CTA, first CTA of the stolen cluster or None), by round: every slot's first try_cancel, then
        every slot's second, ...; then those of clusters that started late, in the order they asked."""
        return [(a, b) for _, a, b in sorted(self._log, key=lambda e: e[0])]


class ClcResponses:
    """The response buffers of ``clc_create_context``: one 16-byte slot per stage."""

    def __init__(self, num: int, name: str, line):
        self.name, self.line = name, line
        self.slots = [ClcSlot(self, i) for i in range(int(num))]
        self.cta = None
        self.ordinal = None

    def subview(self, idx: int) -> "ClcSlot":
        return self.slots[idx]


class ClcSlot:
    def __init__(self, array: ClcResponses, index: int):
        self.array, self.index = array, index
        self.value = -1
        self.steal = None       # which try_cancel of its cluster's slot the value answers (None: started late)

    @property
    def name(self) -> str:
        return f"{self.array.name}[{self.index}]"

    def subview(self, idx: int) -> "ClcSlot":
        return self
