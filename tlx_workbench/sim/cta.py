"""The state of one simulated CTA, and the hardware meaning of TLX operations on it.

:class:`CTA` holds the CTA's SMEM allocations, barriers, named barriers, scheduler,
race tracker and trace lanes; its methods are what the TLX builder ops (in
``tlx_ops.py``) call. Times are per-task cycle clocks advanced by ``cost.py``.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ..errors import SimulationError
from ..trace import BarrierEvent, Span
from . import rewrite
from .barriers import MBarrierArray, MBarrierSlot, NamedBarrier, vc_join
from .memory import SmemAlloc, SmemView
from .races import Access, RaceTracker
from .scheduler import AsyncOp, CTAScheduler, Task

_ASSIGN_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=")
_SIM_PKG = __name__.rsplit(".", 1)[0]


def kernel_frame_line() -> tuple[str | None, int | None]:
    """(file, line) of the innermost frame that runs kernel code (a rewritten kernel or helper)."""
    f = sys._getframe(1)
    files = rewrite.kernel_files
    while f is not None:
        fn = f.f_code.co_filename
        if fn in files:
            return fn, f.f_lineno
        f = f.f_back
    return None, None


def _name_from_line(file, line, default):
    if file and line:
        import linecache
        m = _ASSIGN_RE.match(linecache.getline(file, line))
        if m:
            return m.group(1)
    return default


class CTA:
    def __init__(self, run, pid: int, grid_idx: tuple, seed: int):
        self.run = run
        self.cost = run.cost
        self.pid = pid
        self.grid_idx = grid_idx
        self.sched = CTAScheduler(pid, seed, run.max_steps)
        self.races = RaceTracker(run.file)
        self.named: dict[int, NamedBarrier] = {}
        self.allocs: list[SmemAlloc] = []
        self.barrier_arrays: list[MBarrierArray] = []
        self.smem_bytes = 0
        self.tma_free = 0.0     # when this CTA's TMA bandwidth share is next free
        self.tc_free = 0.0      # when the tensor cores are next free
        self.tma_agents: dict = {}
        self.in_async_op = False      # inside a TLX op that reads/writes global memory itself
        self.arrivers: dict = {}      # barrier array id -> {lane: set(lines)} over the run
        self.waiters: dict = {}       # barrier array id -> {lane: set(lines)}
        self.passed: dict = {}        # (barrier array id, task, replica) -> waits passed

    # -- plumbing ------------------------------------------------------------------------
    @property
    def task(self) -> Task:
        return self.sched.current

    def where(self):
        return kernel_frame_line()

    def span(self, t: Task, kind, start, end, name, line, **kw):
        if end < start:
            end = start
        self.run.trace.add_span(Span(cta=self.pid, task=t.name, replica=t.replica, kind=kind, start=start, end=end,
                                     name=name, line=line, file=self.run.file, **kw))
        if kind == "wait":
            t.stats["waiting"] += end - start
        else:
            t.stats["busy"] += end - start
            if kind == "mma":
                t.stats["mma"] += end - start

    def bevent(self, slot, kind, time, t: Task | None = None, **kw):
        name = slot.array.name if isinstance(slot, MBarrierSlot) else f"named_barrier"
        idx = slot.index if isinstance(slot, MBarrierSlot) else slot.id
        ev = BarrierEvent(cta=self.pid, time=time, barrier=name, slot=idx, kind=kind,
                          task=t.name if t else None, replica=t.replica if t else None, **kw)
        if isinstance(slot, MBarrierSlot):
            ev.pending_arrivals = slot.pending
            ev.pending_bytes = slot.tx
        self.run.trace.add_barrier_event(ev)

    def step(self, line=None):
        t = self.task
        t.line = line
        t.stats["ops"] += 1
        self.sched.step(t)
        return t

    def error(self, msg, line, hint=None):
        return SimulationError(msg, file=self.run.file, line=line, hint=hint)

    # -- allocation ------------------------------------------------------------------
    def local_alloc(self, shape, tl_dtype, np_dtype, num, alias):
        file, line = self.where()
        name = _name_from_line(file, line, f"smem{len(self.allocs)}")
        a = SmemAlloc(shape, tl_dtype, np_dtype, num, name, line)
        if isinstance(alias, (SmemAlloc, SmemView)):
            base = alias if isinstance(alias, SmemAlloc) else alias.alloc
            need = a.data.nbytes
            if base.data.nbytes < need:
                raise self.error(f"local_alloc reuse: {name} needs {need} bytes, {base.name} has {base.data.nbytes}",
                                 line)
            a.data = base.data.reshape(-1).view(np.uint8)[:need].view(a.np_dtype).reshape(a.data.shape)
            a.id = base.id
        else:
            self.smem_bytes += a.nbytes
        self.allocs.append(a)
        return a

    def alloc_barriers(self, num, count):
        file, line = self.where()
        arr = MBarrierArray(num, count, _name_from_line(file, line, f"bars{len(self.barrier_arrays)}"), line)
        self.barrier_arrays.append(arr)
        t = self.task
        for s in arr.slots:
            self.bevent(s, "init", t.clock, t, count=arr.arrive_count, line=line)
        return arr

    # -- mbarriers ------------------------------------------------------------------------
    def _flip(self, slot: MBarrierSlot, time, t: Task | None, line):
        self.bevent(slot, "flip", time, t, phase=slot.completed - 1, line=line)

    def arrive(self, slot: MBarrierSlot, count: int, per_thread: bool):
        file, line = self.where()
        t = self.step(line)
        n = count * (t.threads if per_thread else 1)
        start = t.clock
        t.clock += self.cost.barrier_op
        arr = self.arrivers.setdefault(slot.array.id, {})
        arr.setdefault((t.name, t.replica), set()).add(line)
        flipped, excess = slot.arrive(n, t.lane, line, t.clock, t.vc)
        t.tick()
        self.bevent(slot, "arrive", t.clock, t, count=n, line=line, phase=slot.completed - (1 if flipped else 0))
        if excess:
            self.run.finding("arrive-overflow", f"{n} arrivals on {slot.name} (line {line}) go past its count "
                             f"{slot.array.arrive_count} in phase {slot.completed}: {excess} too many", line, t.lane)
        if flipped:
            self._flip(slot, t.clock, t, line)
        self.span(t, "arrive", start, t.clock, "barrier_arrive", line, barrier=slot.array.name, slot=slot.index,
                  phase=slot.completed, args={"count": n})

    def expect(self, slot: MBarrierSlot, nbytes: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        t.clock += self.cost.barrier_op
        slot.expect(nbytes)
        arr = self.arrivers.setdefault(slot.array.id, {})
        arr.setdefault((t.name, t.replica), set()).add(line)
        slot.expect_line = line
        # barrier_expect_bytes lowers to mbarrier.arrive.expect_tx: one arrival plus the byte count
        self.bevent(slot, "expect", t.clock, t, bytes=nbytes, line=line, phase=slot.completed)
        flipped, excess = slot.arrive(1, t.lane, line, t.clock, t.vc)
        t.tick()
        if excess:
            self.run.finding("arrive-overflow", f"barrier_expect_bytes on {slot.name} (line {line}) arrives past "
                             f"its count {slot.array.arrive_count} in phase {slot.completed}", line, t.lane)
        if flipped:
            self._flip(slot, t.clock, t, line)
        self.span(t, "arrive", start, t.clock, "barrier_expect_bytes", line, barrier=slot.array.name,
                  slot=slot.index, phase=slot.completed, args={"bytes": nbytes})

    def wait(self, slot: MBarrierSlot, phase: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        w = self.waiters.setdefault(slot.array.id, {})
        w.setdefault((t.name, t.replica), set()).add(line)
        self.bevent(slot, "wait_begin", start, t, phase=phase, line=line)
        info = {"kind": "mbarrier", "slot": slot, "phase": phase, "line": line, "since": start}
        self.sched.block(t, lambda: slot.can_pass(phase), info)
        vc_join(t.vc, slot.vc_done)
        key = (slot.array.id, t.name, t.replica)
        self.passed[key] = self.passed.get(key, 0) + 1
        if slot.completed and slot.last_flip_time + self.cost.wake > t.clock:
            t.clock = max(t.clock, slot.last_flip_time + self.cost.wake)
        else:
            t.clock += self.cost.barrier_op
        self.bevent(slot, "wait_end", t.clock, t, phase=phase, line=line)
        self.span(t, "wait", start, t.clock, "barrier_wait", line, barrier=slot.array.name, slot=slot.index,
                  phase=phase)

    # -- named barriers -------------------------------------------------------------------
    def named_barrier(self, bid: int, count: int, wait: bool):
        file, line = self.where()
        t = self.step(line)
        op = "named_barrier_wait" if wait else "named_barrier_arrive"
        if not 0 <= bid < 16:
            raise self.error(f"{op}: named barrier id {bid} is out of range", line,
                             hint="use ids 0..15 (id 0 is also used by __syncthreads; prefer 1..15)")
        if count % 32 or count <= 0:
            raise self.error(f"{op}: num_threads {count} is not a positive multiple of 32", line,
                             hint="count threads, a whole number of warps: e.g. 256 for two warp groups")
        nb = self.named.setdefault(bid, NamedBarrier(bid))
        if nb.expected is not None and nb.expected != count:
            self.run.finding("named-barrier-count", f"{op}({bid}, {count}) at line {line} disagrees with "
                             f"num_threads {nb.expected} used by another side of the same barrier", line, t.lane)
        start = t.clock
        gen = nb.generation
        released = nb.arrive(t.threads, count, t.lane, line, "wait" if wait else "arrive", t.clock, t.vc)
        t.tick()
        if wait:
            info = {"kind": "named", "barrier": nb, "count": count, "line": line, "since": start}
            self.sched.block(t, lambda: nb.generation > gen, info)
            vc_join(t.vc, nb.vc_done)
            t.clock = max(t.clock, nb.release_time) + self.cost.named_barrier
            self.span(t, "sync", start, t.clock, op, line, barrier=f"named[{bid}]", slot=bid)
        else:
            t.clock += self.cost.named_barrier
            self.span(t, "arrive", start, t.clock, op, line, barrier=f"named[{bid}]", slot=bid)

    # -- TMA --------------------------------------------------------------------------------
    def tma_load(self, view: SmemView, data: np.ndarray, slot: MBarrierSlot, nbytes: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        t.clock += self.cost.issue
        issue_done = t.clock
        xfer_start = max(issue_done, self.tma_free)
        self.tma_free = xfer_start + self.cost.tma_transfer(nbytes)
        land_time = self.tma_free + self.cost.tma_latency
        agent = ("tma", slot.array.id, slot.index)
        epoch = self.tma_agents.get(agent, 0) + 1
        self.tma_agents[agent] = epoch
        vc = dict(t.vc)
        vc[agent] = epoch
        self.races.write(view.slot, view.slot_name, vc,
                         Access(agent, epoch, line, t.lane, f"TMA load into {view.slot_name}"), start)
        slot.inflight_tma += 1
        lane = t.lane
        dst = view.array
        if dst.size != data.size:
            raise self.error(f"async_descriptor_load: the descriptor's block has {data.shape} elements but the "
                             f"destination buffer {view.slot_name} is {list(dst.shape)}", line,
                             hint="set the TensorDescriptor block_shape to the SMEM buffer's shape")

        def complete():
            dst[...] = data.reshape(dst.shape)
            slot.inflight_tma -= 1
            flipped = slot.land(nbytes, land_time, vc)
            self.bevent(slot, "tx", land_time, None, bytes=nbytes, line=line, phase=slot.completed)
            if flipped:
                self._flip(slot, land_time, None, line)

        self.sched.add_async(AsyncOp(complete, f"TMA load into {view.slot_name} (line {line})"))
        self.span(t, "tma", start, t.clock, "async_descriptor_load", line, barrier=slot.array.name,
                  slot=slot.index, args={"bytes": nbytes, "lands": land_time, "buffer": view.slot_name})

    def tma_store(self, view: SmemView, write):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        nbytes = view.nbytes
        t.clock += self.cost.issue
        agent = ("tma_store", t.key)
        epoch = len(t.tma_store_groups) + sum(1 for _ in ()) + getattr(t, "tma_store_epoch", 0) + 1
        t.tma_store_epoch = epoch
        self.races.read(view.slot, view.slot_name, t.vc,
                        Access(agent, epoch, line, t.lane, f"TMA store from {view.slot_name}"), start)
        write(view.array.copy())
        xfer_start = max(t.clock, self.tma_free)
        self.tma_free = xfer_start + self.cost.tma_transfer(nbytes)
        t.tma_store_groups.append((self.tma_free + self.cost.tma_latency, epoch))
        self.span(t, "store", start, t.clock, "async_descriptor_store", line,
                  args={"bytes": nbytes, "buffer": view.slot_name})

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
        nbytes = data.nbytes
        t.clock += self.cost.issue
        xfer_start = max(t.clock, self.tma_free)
        self.tma_free = xfer_start + self.cost.tma_transfer(nbytes)
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
        t.clock += self.cost.smem_cycles(arr.nbytes)
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
        t.clock += self.cost.smem_cycles(dst.nbytes)
        self.span(t, "store", start, t.clock, what, line, args={"buffer": view.slot_name})

    # -- tl.load / tl.store / descriptor load+store (the interpreter runs them; we charge their time) ----
    def global_access(self, nbytes: int, is_store: bool):
        t = self.task
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

    # -- wgmma ------------------------------------------------------------------------------------
    def wgmma(self, a, b: SmemView, compute, m, n, k, in_bits):
        file, line = self.where()
        t = self.step(line)
        t.wgmma_epoch += 1
        agent = ("wgmma", t.key)
        for v in (a, b):
            if isinstance(v, SmemView):
                self.races.read(v.slot, v.slot_name, t.vc,
                                Access(agent, t.wgmma_epoch, line, t.lane, f"async_dot read of {v.slot_name}"),
                                t.clock)
        out = compute()
        start = t.clock
        t.clock += self.cost.issue
        mstart = max(start, self.tc_free)
        end = mstart + self.cost.mma_cycles(m, n, k, in_bits)
        self.tc_free = end
        t.wgmma.append((end + self.cost.mma_latency, t.wgmma_epoch))
        self.span(t, "mma", mstart, end, "async_dot", line, args={"m": m, "n": n, "k": k})
        return out

    def wgmma_wait(self, pendings: int):
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        n = len(t.wgmma) - pendings
        if n > 0:
            done, t.wgmma = t.wgmma[:n], t.wgmma[n:]
            t.vc[("wgmma", t.key)] = done[-1][1]
            t.clock = max(t.clock, done[-1][0])
        t.clock += self.cost.barrier_op
        self.span(t, "wait", start, t.clock, "async_dot_wait", line)

    # -- tasks ----------------------------------------------------------------------------------------
    def run_tasks(self, specs):
        """The body of ``with tlx.async_tasks()``: run each task (times replicate) concurrently."""
        parent = self.task
        children, inline = [], None
        k = 0
        for obj, fn, line in specs:
            reps = int(getattr(obj, "replicate", None) or 1)
            if getattr(obj, "is_default", False):
                name, warps = "default", self.run.num_warps
            else:
                k += 1
                name = f"task{k}"
                warps = int(getattr(obj, "num_warps", None) or self.run.num_warps)
            for r in range(reps):
                if name == "default" and r == 0 and parent.name == "default" and inline is None:
                    inline = fn
                    continue
                children.append(self.sched.new_task(name, r, warps, (lambda task, fn=fn: fn()), line))
        self.sched.spawn(parent, children)
        if inline is not None:
            inline()
        start = parent.clock
        info = {"kind": "join", "line": None, "since": start}
        self.sched.block(parent, lambda: all(c.state == "done" for c in children), info)
        for c in children:
            vc_join(parent.vc, c.vc)
            parent.clock = max(parent.clock, c.clock)
