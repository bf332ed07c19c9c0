"""Data movement of a CTA: TMA loads and stores, cp.async, SMEM/TMEM <-> registers, global loads and stores.

:class:`MemoryOps` is mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA`. Async copies write their data and land
their bytes on a barrier through scheduled :class:`~tlx_workbench.sim.schedule.scheduler.AsyncOp` s; every copy
shares the CTA's TMA bandwidth (``tma_free``); a TMA store holds it for what the calibration measured its loads
lose where that is measured, and then runs its own transfer beside them (``tma_store_free``).
"""
from __future__ import annotations

import numpy as np

from ..schedule import batch
from ..hardware.barriers import MBarrierSlot
from .cluster_ops import RemoteSlot
from ..hardware.memory import SmemView
from ..diagnosis.races import Access
from ..schedule.scheduler import AsyncOp


class MemoryOps:
    """The data-movement methods of a CTA (TMA, cp.async, local loads/stores, charged global accesses)."""

    # -- TMA --------------------------------------------------------------------------------
    def tma_load(self, view: SmemView, data: np.ndarray, slot: MBarrierSlot, nbytes: int, two_ctas=False,
                 multicast=None):
        """A TMA load. Plain: data into ``view``, bytes on ``slot``. ``two_ctas``: data into this CTA's
        buffer, bytes on the barrier of the pair's leader (rank & ~1), which alone expects them.
        ``multicast``: data into the same buffer of each target CTA, bytes on each target's barrier."""
        file, line = self.where()
        t = self.step(line)
        if isinstance(slot, RemoteSlot):
            raise self.error("async_descriptor_load: the barrier is a remote_view; TMA signals the barrier of the "
                             "CTA it writes", line, hint="pass the local barrier")
        if multicast:
            targets = [(self.peer(r, line), r) for r in multicast]
            targets = [(view.on(self.peer_alloc(c, view.alloc, line)), self.remote_slot(slot, c.rank, line))
                       for c, _ in targets]
        elif two_ctas and len(self.cluster) > 1:
            targets = [(view, self.remote_slot(slot, self.rank & ~1, line))]
        else:
            targets = [(view, slot)]
        start = t.clock
        t.clock += self.cost.tma_issue_cycles
        land_time = self._queue_tma_load(t.clock, nbytes)
        dst0 = view.array
        if dst0.size != data.size:
            block, buf = list(np.shape(data)), list(dst0.shape)
            err = self.error(f"the TMA load copies the descriptor's block_shape {block} ({int(np.prod(block))} "
                             f"elements) into {view.slot_name}, a buffer of {buf} ({dst0.size} elements)", line,
                             hint=f"make the TensorDescriptor's block_shape the buffer's shape, {buf}, where the "
                                  "host code makes the descriptor")
            # the value to change is the host's: a notebook cell names the line that made the descriptor
            err.block_shape_mismatch = {"block_shape": block, "buffer_shape": buf, "buffer": view.slot_name}
            raise err
        batch.tma_fanout(data, len(targets))
        for dview, bslot in targets:
            agent = ("tma", bslot.array.id, bslot.index)
            epoch = self.tma_agents.get(agent, 0) + 1
            self.tma_agents[agent] = epoch
            vc = dict(t.vc)
            vc[agent] = epoch
            into = dview.alloc.cta
            what = (f"TMA load into {dview.slot_name}" if into in (None, self) else
                    f"CTA {self.pid}'s multicast TMA load into CTA {into.pid}'s {dview.slot_name}")
            self.races.write(dview.slot, dview.slot_name, vc, Access(agent, epoch, line, t.lane, what), start)
            issued = self._issue_bytes(bslot, line, nbytes)
            # who brings bytes to this barrier, and in which phase it last did (for the deadlock diagnosis)
            if not hasattr(bslot, "tma_last"):
                bslot.tma_last = {}
            bslot.tma_last[(t.lane, line)] = bslot.completed
            owner = bslot.array.cta or self

            def complete(dst=dview.array, bslot=bslot, vc=vc, owner=owner, issued=issued, dview=dview):
                if isinstance(data, np.ndarray):       # else a timing-only run: the bytes land, no data
                    dst[...] = data.reshape(dst.shape)
                    batch.smem_write(dview, data)
                owner._land(bslot, nbytes, land_time, vc, line, issued)

            self.sched.add_async(AsyncOp(complete, f"TMA load into {dview.slot_name} (line {line})"))
        extra = {}
        if multicast:
            extra["multicast"] = [c.pid for c in (self.peer(r, line) for r in multicast)]
        if targets[0][1].array.cta not in (None, self):
            extra.update(self._remote_args(targets[0][1]))
        self.span(t, "tma", start, t.clock, "async_descriptor_load", line, barrier=slot.array.name,
                  slot=slot.index, args={"bytes": nbytes, "lands": land_time, "buffer": view.slot_name, **extra})

    def _queue_tma_load(self, issued: float, nbytes: int) -> float:
        """A TMA load issued at ``issued`` enters this CTA's TMA queue: it holds the queue from when the queue is
        free (``cost.tma_load_transfer``), then lands after the latency for the loads in flight then. Returns
        when it lands."""
        landing = [x for x in self.tma_landing if x > issued]
        xfer_start = max(issued, self.tma_free)
        if self.tma_holds:      # stores issued while the queue stood idle hold the first load that starts after them
            due = [h for h in self.tma_holds if h[0] <= xfer_start]
            self.tma_holds = [h for h in self.tma_holds if h[0] > xfer_start]
            xfer_start += sum(held for _, held in due)
        self.tma_free = xfer_start + self.cost.tma_load_transfer(nbytes)
        land_time = self.tma_free + self.cost.tma_load_latency(len(landing) + 1)
        landing.append(land_time)
        self.tma_landing = landing
        return land_time

    def tma_store(self, view: SmemView, write, what="async_descriptor_store", nbytes=None, args=None):
        """A bulk store from ``view`` (TMA store, TMA store-reduce, ``async_store``): ``write`` runs at issue;
        completion joins this task's bulk async groups (``async_descriptor_store_wait``)."""
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        nbytes = view.nbytes if nbytes is None else nbytes
        t.clock += self.cost.issue
        agent = ("tma_store", t.key)
        epoch = len(t.tma_store_groups) + sum(1 for _ in ()) + getattr(t, "tma_store_epoch", 0) + 1
        t.tma_store_epoch = epoch
        self.races.read(view.slot, view.slot_name, t.vc,
                        Access(agent, epoch, line, t.lane,
                               f"{'TMA store' if what == 'async_descriptor_store' else what} from {view.slot_name}"),
                        start)
        write(view.array.copy())
        held = self.cost.tma_store_queue_cycles(nbytes)
        if held is None:        # the store's whole transfer holds the CTA's TMA queue
            xfer_start = max(t.clock, self.tma_free)
            self.tma_free = done = xfer_start + self.cost.tma_store_transfer(nbytes)
        else:                   # measured: the loads lose ``held`` cycles, the store's transfer runs beside them
            if t.clock <= self.tma_free:    # behind the loads already queued
                self.tma_free += held
            else:                           # the queue stands idle now: the next load to start after it pays
                self.tma_holds.append((t.clock, held))
            self.tma_store_free = done = max(t.clock, self.tma_store_free) + self.cost.tma_store_transfer(nbytes)
        t.tma_store_groups.append((done + self.cost.tma_latency, epoch))
        self.span(t, "store", start, t.clock, what, line,
                  args={"bytes": nbytes, "buffer": view.slot_name, **(args or {})})

    def tma_store_wait(self, pendings: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        keep = t.tma_store_groups[len(t.tma_store_groups) - pendings:] if pendings else []
        done = t.tma_store_groups[:len(t.tma_store_groups) - len(keep)]
        if done:
            t.clock = max(t.clock, max(d[0] for d in done))
            t.vc[("tma_store", t.key)] = max(d[1] for d in done)
        t.tma_store_groups = keep
        t.clock += self.cost.barrier_op
        self.span(t, "wait", start, t.clock, "async_descriptor_store_wait", line)

    # -- cp.async -----------------------------------------------------------------------------
    def cp_async(self, view: SmemView, data: np.ndarray):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        agent = ("cp.async", t.key)
        epoch = len(t.cp_async_groups) + getattr(t, "cp_async_retired", 0) + 1
        vc = dict(t.vc)
        vc[agent] = epoch
        self.races.write(view.slot, view.slot_name, vc,
                         Access(agent, epoch, line, t.lane, f"async_load into {view.slot_name}"), start)
        view.array[...] = data.reshape(view.array.shape)
        batch.smem_write(view, data)
        nbytes = data.nbytes
        t.clock += self.cost.issue
        xfer_start = max(t.clock, self.tma_free)
        row_bytes = view.array.shape[-1] * view.array.itemsize if view.array.ndim else nbytes
        self.tma_free = xfer_start + self.cost.cp_async_transfer(nbytes, row_bytes)
        t.cp_async_uncommitted.append(self.tma_free + self.cost.tma_latency)
        self.span(t, "load", start, t.clock, "async_load", line, args={"bytes": nbytes, "buffer": view.slot_name})

    def cp_async_commit(self):
        t = self.task
        t.cp_async_groups.append(max(t.cp_async_uncommitted, default=t.clock))
        t.cp_async_uncommitted = []

    def cp_async_wait(self, pendings: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        n = len(t.cp_async_groups) - pendings
        if n > 0:
            done, t.cp_async_groups = t.cp_async_groups[:n], t.cp_async_groups[n:]
            t.cp_async_retired = getattr(t, "cp_async_retired", 0) + n
            t.vc[("cp.async", t.key)] = t.cp_async_retired
            t.clock = max(t.clock, max(done))
        t.clock += self.cost.barrier_op
        self.span(t, "wait", start, t.clock, "async_load_wait_group", line)

    # -- SMEM <-> registers ------------------------------------------------------------------------
    def smem_read(self, view: SmemView, what="local_load"):
        file, line = self.where()
        t = self.step(line)
        self.races.read(view.slot, view.slot_name, t.vc,
                        Access(t.key, t.vc.get(t.key, 0), line, t.lane, f"{what} of {view.slot_name}"), t.clock)
        arr = view.array.copy()
        start = t.clock
        t.clock += (self.cost.tmem_cycles(arr.nbytes) if view.storage == "tmem" else self.cost.smem_cycles(arr.nbytes))
        self.span(t, "load", start, t.clock, what, line, args={"buffer": view.slot_name})
        return arr

    def smem_write(self, view: SmemView, data: np.ndarray, what="local_store"):
        file, line = self.where()
        t = self.step(line)
        self.races.write(view.slot, view.slot_name, t.vc,
                         Access(t.key, t.vc.get(t.key, 0), line, t.lane, f"{what} into {view.slot_name}"), t.clock)
        dst = view.array
        try:
            dst[...] = np.broadcast_to(data, dst.shape) if data.shape != dst.shape else data
        except ValueError:
            raise self.error(f"{what}: value of shape {list(data.shape)} does not fit {view.slot_name} "
                             f"of shape {list(dst.shape)}", line) from None
        start = t.clock
        t.clock += (self.cost.tmem_cycles(dst.nbytes) if view.storage == "tmem" else self.cost.smem_cycles(dst.nbytes))
        self.span(t, "store", start, t.clock, what, line, args={"buffer": view.slot_name})

    # -- tl.load / tl.store / descriptor load+store (the interpreter runs them; we charge their time) ----
    def global_access(self, nbytes: int, is_store: bool):
        t = self.task
        if is_store and nbytes:
            self.group.gmem_writes += 1         # wakes tasks that poll global memory (global_poll)
            self.group.gmem_clock = max(self.group.gmem_clock, t.clock if t is not None else 0.0)
        if t is None or self.in_async_op:
            return
        file, line = self.where()
        start = t.clock
        xfer_start = max(start, self.tma_free)
        self.tma_free = xfer_start + self.cost.tma_transfer(nbytes)
        # a load's data is needed at once (latency exposed); a store retires in the background
        t.clock = (self.tma_free + self.cost.tma_latency) if not is_store else start + self.cost.issue
        self.span(t, "store" if is_store else "load", start, t.clock, "tl.store" if is_store else "tl.load", line,
                  args={"bytes": nbytes})

    # -- polls: atomics and volatile loads, what a spin-wait on another CTA is made of -------------------
    def global_poll(self, run_op, key, is_atomic: bool):
        """An atomic or a volatile load: a scheduling point (another task, of this CTA or another resident
        one, may write first), then ``run_op()``. ``key``: the op's addresses and operands. The same op
        repeated at the same line while no task wrote global memory would read the same values, so the
        task blocks instead until some task writes: a spin-wait costs no steps, and one that nothing can
        satisfy any more shows up as a deadlock naming its line."""
        file, line = self.where()
        t = self.step(line)
        g = self.group
        key = (line, key)
        if t.last_poll == (key, g.gmem_writes):
            seen = g.gmem_writes
            start = t.clock
            self.sched.block(t, lambda: g.gmem_writes != seen,
                             {"kind": "poll", "line": line, "since": start, "atomic": is_atomic})
            t.clock = max(t.clock, g.gmem_clock)
            self.span(t, "wait", start, t.clock, "poll", line)
        out, wrote = run_op()
        if wrote:
            g.gmem_writes += 1
            g.gmem_clock = max(g.gmem_clock, t.clock)
        t.last_poll = (key, g.gmem_writes)
        return out
