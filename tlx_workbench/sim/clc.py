"""Cluster launch control (CLC): response buffers and the try_cancel / query operations of a CTA.

:class:`ClcOps` is mixed into :class:`~tlx_workbench.sim.cta.CTA`; the run (``engine.py``) decides which
cluster a try_cancel steals (``run.clc_steal``).
"""
from __future__ import annotations

from .races import Access
from .scheduler import AsyncOp
from .source_lines import name_from_line

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
        stolen = self.run.clc_steal(self)
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
                rslot.value = value
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

    @property
    def name(self) -> str:
        return f"{self.array.name}[{self.index}]"

    def subview(self, idx: int) -> "ClcSlot":
        return self
