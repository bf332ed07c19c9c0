"""Clusters: a CTA's peers, remote barriers and buffers, the cluster barrier, remote SMEM stores.

:class:`ClusterOps` is mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA` (which holds the state it uses:
``cluster``, ``rank``, ``barrier_arrays``, ``allocs``, the scheduler). A CTA's own barrier or buffer and its
counterpart in a peer CTA share the allocation ordinal, so a peer's is found by position. A peer is
another CTA, typed here by this mix-in (the class that mixes it in sits above this module, which does not
import it).
"""
from __future__ import annotations

import numpy as np

from ..hardware.barriers import MBarrierSlot, vc_join
from ..hardware.memory import SmemAlloc, SmemView
from ..diagnosis.races import Access
from ..schedule.scheduler import AsyncOp


class RemoteSlot:
    """The handle of ``remote_view(bar, rank)``: barrier ``slot`` as seen in CTA ``rank`` of the cluster."""

    def __init__(self, slot: MBarrierSlot, rank: int):
        self.slot = slot
        self.rank = rank

    def __repr__(self):
        return f"RemoteSlot({self.slot.name} in CTA rank {self.rank})"


class ClusterOps:
    """The cluster methods of a CTA: peers, remote barriers and buffers, cluster_barrier, remote stores."""

    def peer(self, rank: int, line=None) -> "ClusterOps":
        """The CTA of this cluster with ``cluster_cta_rank() == rank``."""
        rank = int(rank)
        if not 0 <= rank < len(self.cluster):
            raise self.error(f"CTA rank {rank} is outside this cluster of {len(self.cluster)} CTA(s)", line,
                             hint="launch with ctas_per_cga=(n, 1, 1) so the cluster has that CTA, or fix the rank")
        return self.cluster[rank]

    def _await_remote(self, what: str, pred, line):
        # CTAs of a cluster run concurrently: the peer may not have reached its allocations yet
        # (on the GPU a cluster barrier after init orders this); wait until it has.
        t = self.task
        if not pred():
            self.sched.block(t, pred, {"kind": "remote", "line": line, "since": t.clock, "what": what})

    def remote_slot(self, slot, rank: int, line=None) -> MBarrierSlot:
        """``slot``'s counterpart (same allocation, same index) in CTA ``rank`` of the cluster."""
        if isinstance(slot, RemoteSlot):
            slot = slot.slot
        target = self.peer(rank, line)
        if slot.array.cta is target or slot.array.cta is None:
            return slot
        ordn = slot.array.ordinal
        self._await_remote(f"CTA {target.pid} to allocate {slot.array.name}",
                           lambda: len(target.barrier_arrays) > ordn, line)
        return target.barrier_arrays[ordn].slots[slot.index]

    def resolve_slot(self, slot, line=None) -> MBarrierSlot:
        if isinstance(slot, RemoteSlot):
            return self.remote_slot(slot.slot, slot.rank, line)
        return slot

    def peer_alloc(self, target: "ClusterOps", alloc: SmemAlloc, line=None) -> SmemAlloc:
        """``alloc``'s counterpart in CTA ``target`` (the buffer at the same SMEM/TMEM address there)."""
        if alloc.cta is target or alloc.cta is None:
            return alloc
        ordn = alloc.ordinal
        self._await_remote(f"CTA {target.pid} to allocate {alloc.name}", lambda: len(target.allocs) > ordn, line)
        return target.allocs[ordn]

    def cluster_barrier(self):
        """barrier.cluster.arrive + wait: every running task of every CTA of the cluster meets here.

        On the GPU it waits for every thread of every CTA of the cluster. In a warp-specialized kernel only the
        default task's warps run the code outside ``tlx.async_tasks()``; the other tasks' warps stay parked in the
        compiler's dispatch loop (before the region and again after it), so a cluster barrier there never
        completes. Here only the root task exists outside async_tasks, so such a barrier releases; the hang is
        reported once the CTA shows it is warp-specialized: when it enters async_tasks after a top-level
        cluster barrier, or runs one at top level after async_tasks (see :meth:`hang_outside_tasks`).
        """
        file, line = self.where()
        t = self.step(line)
        if t.parent is None and not self.in_default_body:
            if self.async_tasks_line is not None:
                self.hang_outside_tasks(t, line, after=True)
            if self.top_cluster_barrier is None:
                self.top_cluster_barrier = line
        lead = self.cluster[0]
        cb = lead.__dict__.setdefault("_cluster_bar", {"gen": 0, "arrived": set(), "vc": {}, "time": 0.0,
                                                      "vc_done": {}, "release": 0.0})
        gen = cb["gen"]
        cb["arrived"].add(id(t))
        vc_join(cb["vc"], t.vc)
        cb["time"] = max(cb["time"], t.clock)
        t.tick()
        members = self.cluster

        def released():
            if cb["gen"] > gen:
                return True
            for x in self.sched.tasks:
                if (x.cta in members and x.state != "done" and id(x) not in cb["arrived"]
                        and (x.wait_info or {}).get("kind") != "join"):
                    return False
            cb.update(gen=gen + 1, vc_done=cb["vc"], vc={}, arrived=set(), release=cb["time"], time=0.0)
            return True

        start = t.clock
        self.sched.block(t, released, {"kind": "cluster", "line": line, "since": start})
        vc_join(t.vc, cb["vc_done"])
        t.clock = max(t.clock, cb["release"]) + self.cost.remote_extra
        self.span(t, "sync", start, t.clock, "cluster_barrier", line, barrier="cluster", slot=0)

    def hang_outside_tasks(self, t, line, after: bool):
        """Block ``t`` (the root task) for good: the GPU hangs in the cluster barrier at ``line``, which runs
        outside async_tasks in a CTA whose other tasks' warps never arrive there. The scheduler then reports
        the deadlock, with this wait (kind "cluster-ws") as its root cause."""
        self.sched.block(t, lambda: False, {"kind": "cluster-ws", "line": line, "since": t.clock, "after": after,
                                            "tasks_line": self.async_tasks_line})

    def remote_store(self, view: SmemView, data: np.ndarray, rank: int, bar=None):
        """remote_shmem_store (``bar`` None: a plain st.shared::cluster) / async_remote_shmem_store (the bytes
        complete on ``bar``'s counterpart in the target CTA)."""
        file, line = self.where()
        t = self.step(line)
        target = self.peer(rank, line)
        dview = view.on(self.peer_alloc(target, view.alloc, line))
        start = t.clock
        t.clock += self.cost.issue + self.cost.remote_extra
        nbytes = int(data.size * dview.array.itemsize)
        if bar is None:
            self.races.write(dview.slot, dview.slot_name, t.vc, Access(t.key, t.vc.get(t.key, 0), line, t.lane,
                             f"remote_shmem_store into {dview.slot_name} of CTA {target.pid}"), start)
            dview.array[...] = np.broadcast_to(data, dview.array.shape)
        else:
            bslot = self.remote_slot(bar, rank, line)
            agent = ("st.async", bslot.array.id, bslot.index)
            epoch = self.tma_agents.get(agent, 0) + 1
            self.tma_agents[agent] = epoch
            vc = dict(t.vc)
            vc[agent] = epoch
            self.races.write(dview.slot, dview.slot_name, vc, Access(agent, epoch, line, t.lane,
                             f"async_remote_shmem_store into {dview.slot_name} of CTA {target.pid}"), start)
            land = t.clock + self.cost.remote_extra
            issued = self._issue_bytes(bslot, line, nbytes)
            payload = np.array(data, copy=True)

            def complete(dst=dview.array):
                dst[...] = np.broadcast_to(payload, dst.shape)
                target._land(bslot, nbytes, land, vc, line, issued)
            self.sched.add_async(AsyncOp(complete, f"remote store into {dview.slot_name} (line {line})"))
        self.span(t, "store", start, t.clock, "remote_shmem_store" if bar is None else "async_remote_shmem_store",
                  line, args={"bytes": nbytes, "buffer": dview.slot_name, "cta": target.pid, "cta_rank": rank})
