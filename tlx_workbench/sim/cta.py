"""The state of one simulated CTA, and the hardware meaning of TLX operations on it.

:class:`CTA` holds the CTA's SMEM and TMEM allocations, barriers, named barriers and
trace lanes; its methods are what the TLX builder ops (in ``tlx_ops.py``) call. CTAs
simulated together — the CTAs of a cluster, or several resident clusters of a CLC
kernel — share one :class:`SimGroup`: one scheduler, one race tracker (buffers are
named by globally unique ids, so a leader CTA's MMA reading its peer's SMEM is
checked like any other read) and one record of who arrives and waits where.
Blackwell meanings (TMEM, tcgen05 MMA and commit, 2-CTA MMA, remote arrivals,
multicast TMA, CLC) live in the ``Blackwell`` and ``cluster`` sections below.
Times are per-task cycle clocks advanced by ``cost.py``.
"""
from __future__ import annotations

import re
import sys

import numpy as np

from ..errors import SimulationError
from ..trace import BarrierEvent, Span
from . import rewrite
from .barriers import MBarrierArray, MBarrierSlot, NamedBarrier, vc_join
from .memory import AliasSpec, BufferList, SmemAlloc, SmemView
from .races import Access, RaceTracker
from .scheduler import AsyncOp, CTAScheduler, Task

TMEM_LATENCY = 16.0     # tcgen05.ld/st issue-to-data, cycles (order of a shared-memory access)
CLC_LATENCY = 400.0     # try_cancel round trip to the cluster scheduler, cycles (an L2-like round trip)

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


class SimGroup:
    """CTAs that run together under one scheduler: one cluster, or the resident clusters of a CLC kernel."""

    def __init__(self, run, label: int, seed: int, on_resume):
        self.run = run
        self.sched = CTAScheduler(label, seed, run.max_steps, on_resume)
        self.races = RaceTracker(run.file)
        self.arrivers: dict = {}      # barrier array id -> {(cta, task, replica): set(lines)} over the run
        self.waiters: dict = {}       # barrier array id -> {(cta, task, replica): set(lines)}
        self.passed: dict = {}        # (barrier array id, cta, task, replica) -> waits passed
        self.ctas: list["CTA"] = []


class RemoteSlot:
    """The handle of ``remote_view(bar, rank)``: barrier ``slot`` as seen in CTA ``rank`` of the cluster."""

    def __init__(self, slot: MBarrierSlot, rank: int):
        self.slot = slot
        self.rank = rank

    def __repr__(self):
        return f"RemoteSlot({self.slot.name} in CTA rank {self.rank})"


class CTA:
    def __init__(self, run, pid: int, grid_idx: tuple, group: SimGroup, rank: int = 0, cluster=None,
                 cluster_id: int = 0):
        self.run = run
        self.cost = run.cost
        self.pid = pid
        self.grid_idx = grid_idx
        self.group = group
        self.sched = group.sched
        self.races = group.races
        self.rank = rank                        # cluster_cta_rank()
        self.cluster = cluster if cluster is not None else [self]   # CTAs of the cluster, by rank
        self.cluster_id = cluster_id
        self.tmem_columns = 0
        self.tc_epoch = 0                       # tcgen05 ops (MMA, tmem_copy) issued on this SM
        self.tc_end = 0.0                       # when the last one finishes
        self.tc_commits: list = []              # commit arrivals in flight, delivered in issue order
        self.clc_arrays: list = []
        self.named: dict[int, NamedBarrier] = {}
        self.allocs: list[SmemAlloc] = []
        self.barrier_arrays: list[MBarrierArray] = []
        self.smem_bytes = 0
        self.tma_free = 0.0     # when this CTA's TMA bandwidth share is next free
        self.tc_free = 0.0      # when the tensor cores are next free
        self.tma_agents: dict = {}
        self.in_async_op = False      # inside a TLX op that reads/writes global memory itself
        self.arrivers = group.arrivers
        self.waiters = group.waiters
        self.passed = group.passed
        group.ctas.append(self)

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
        owner = slot.array.cta if isinstance(slot, MBarrierSlot) and slot.array.cta is not None else self
        ev = BarrierEvent(cta=owner.pid, time=time, barrier=name, slot=idx, kind=kind,
                          task=t.name if t else None, replica=t.replica if t else None, **kw)
        if isinstance(slot, MBarrierSlot):
            ev.pending_arrivals = slot.pending
            ev.pending_bytes = slot.tx
        # an arrival from another CTA of the cluster (remote arrive, a leader's 2-CTA commit): the lane that
        # arrived is in CTA src_cta, not in the barrier's CTA (Trace.flows draws the arrow from there)
        ev.src_cta = t.pid if t is not None else None
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
    def local_alloc(self, shape, tl_dtype, np_dtype, num, alias, storage="smem"):
        file, line = self.where()
        name = _name_from_line(file, line, f"{storage}{len(self.allocs)}")
        a = SmemAlloc(shape, tl_dtype, np_dtype, num, name, line, storage)
        a.cta, a.ordinal = self, len(self.allocs)
        if isinstance(alias, AliasSpec):
            # placed later, when set_buffer_overlap says how the spec's allocations overlap
            if alias.storage != storage:
                raise self.error(f"local_alloc: {name} is in {storage} but its storage_alias_spec is in "
                                 f"{alias.storage}", line, hint="allocate in the spec's storage kind")
            alias.allocs.append(a)
            a.root = alias
            self.allocs.append(a)
            return a
        if isinstance(alias, (SmemAlloc, SmemView)) and storage == "tmem":
            # a TMEM alias shares the columns of the allocation it reuses (rows are lanes, not bytes)
            base = (alias if isinstance(alias, SmemAlloc) else alias.alloc).root
            if base.col0 is None or not a.place_in_tmem(self._tmem(), base.col0):
                raise self.error(f"local_alloc reuse: {name} ({num} x {list(shape)} {tl_dtype}) cannot be laid out "
                                 f"over the TMEM columns of {base.name}", line,
                                 hint="alias 2-D TMEM buffers of at most 128 rows")
            if a.col0 + a.num * a.cpb > base.col0 + base.num * base.cpb:
                raise self.error(f"local_alloc reuse: {name} needs {a.num * a.cpb} TMEM columns, {base.name} has "
                                 f"{base.num * base.cpb}", line, hint="reuse a larger TMEM allocation")
            a.root = base
        elif isinstance(alias, (SmemAlloc, SmemView)):
            base = alias if isinstance(alias, SmemAlloc) else alias.alloc
            need = a.data.nbytes
            if base.data.nbytes < need:
                raise self.error(f"local_alloc reuse: {name} needs {need} bytes, {base.name} has {base.data.nbytes}",
                                 line)
            a.data = base.data.reshape(-1).view(np.uint8)[:need].view(a.np_dtype).reshape(a.data.shape)
            a.id = base.id
        elif storage == "tmem":
            budget = self.run.gpu.tmem_columns or 0
            if budget and self.tmem_columns + a.tmem_columns <= budget:
                a.place_in_tmem(self._tmem(), self.tmem_columns)
            self.tmem_columns += a.tmem_columns
            if self.tmem_columns > budget:
                raise self.error(
                    f"local_alloc: TMEM over budget: {name} ({num} x {list(shape)} {tl_dtype}) takes "
                    f"{a.tmem_columns} columns, {self.tmem_columns} in all, but {self.run.gpu.name} has "
                    f"{budget} TMEM columns per CTA" if budget else
                    f"local_alloc: {name} is in tensor memory, which {self.run.gpu.name} does not have", line,
                    hint="use fewer or smaller TMEM buffers (reuse= one allocation for another)" if budget else
                    "simulate on gpu='B200' (TMEM is a Blackwell feature)")
        else:
            self.smem_bytes += a.nbytes
        self.allocs.append(a)
        return a

    def alias_spec(self, storage: str, size_bytes):
        file, line = self.where()
        return AliasSpec(storage, size_bytes, _name_from_line(file, line, "alias_spec"), line)

    def set_buffer_overlap(self, spec: AliasSpec, group):
        """Place the allocations of ``spec`` as ``group`` says: a reuse_group ("shared": its members start
        at the same offset; "distinct": one after another), repeated once per buffer of the outermost
        allocation (``group_size`` buffers of a member per repetition). TMEM offsets are in columns,
        SMEM offsets in bytes."""
        file, line = self.where()
        tmem = spec.storage == "tmem"

        def unit(a: SmemAlloc) -> int:
            if tmem:
                if len(a.shape) != 2 or a.shape[0] > 128:
                    raise self.error(f"set_buffer_overlap: TMEM buffer {a.name} {a.shape} is not a 2-D tile of at "
                                     f"most 128 rows", line)
                return max(1, -(-a.shape[1] * a.np_dtype.itemsize // 4))
            return int(np.prod(a.shape)) * a.np_dtype.itemsize

        placed = []

        def place(node, offset, g) -> int:
            if isinstance(node, SmemAlloc):
                placed.append((node, offset, g))
                return g * unit(node)
            kind, size, members = node
            g2 = g * size
            if kind == "shared":
                return max((place(m, offset, g2) for m in members), default=0)
            cur = offset
            for m in members:
                cur += place(m, cur, g2)
            return cur - offset

        step = place(group, 0, 1)
        reps = max(-(-a.num // g) for a, _, g in placed)
        total = step * reps
        if tmem:
            budget = self.run.gpu.tmem_columns or 0
            base = self.tmem_columns
            if base + total > budget:
                raise self.error(f"set_buffer_overlap: TMEM over budget: the spec at line {spec.line} needs {total} "
                                 f"columns, {base + total} in all, but {self.run.gpu.name} has {budget}", line,
                                 hint="use fewer or smaller TMEM buffers")
            self.tmem_columns += total
            mem = self._tmem()
        else:
            base = 0
            mem = np.zeros(total, dtype=np.uint8)
            self.smem_bytes += total
        for a, off, g in placed:
            u = unit(a)
            cols, views = [], []
            for j in range(a.num):
                c = base + (j // g) * step + off + (j % g) * u
                cols.append(c)
                if tmem:
                    views.append(mem[:a.shape[0], c:c + u].view(a.np_dtype)[:, :a.shape[1]])
                else:
                    views.append(mem[c:c + u].view(a.np_dtype).reshape(a.shape))
            a.data = BufferList(views, a.shape, a.np_dtype)
            if tmem:
                a.col0, a.cpb, a.buf_cols = cols[0], u, cols
        spec.placed = True

    def _tmem(self) -> np.ndarray:
        """This CTA's tensor memory: 128 lanes x 512 columns of 32 bits."""
        if getattr(self, "tmem", None) is None:
            self.tmem = np.zeros((128, max(512, self.run.gpu.tmem_columns or 0)), dtype=np.uint32)
        return self.tmem

    def alloc_barriers(self, num, count):
        file, line = self.where()
        arr = MBarrierArray(num, count, _name_from_line(file, line, f"bars{len(self.barrier_arrays)}"), line)
        arr.cta, arr.ordinal = self, len(self.barrier_arrays)
        self.barrier_arrays.append(arr)
        t = self.task
        for s in arr.slots:
            self.bevent(s, "init", t.clock, t, count=arr.arrive_count, line=line)
        return arr

    # -- mbarriers ------------------------------------------------------------------------
    def _flip(self, slot: MBarrierSlot, time, t: Task | None, line):
        self.bevent(slot, "flip", time, t, phase=slot.completed - 1, line=line)

    def arrive(self, slot, count: int, per_thread: bool):
        file, line = self.where()
        t = self.step(line)
        remote = isinstance(slot, RemoteSlot)
        slot = self.resolve_slot(slot, line)
        n = count * (t.threads if per_thread else 1)
        start = t.clock
        t.clock += self.cost.barrier_op + (self.cost.remote_extra if remote else 0.0)
        self._record_arrival(slot, t, line, n, "barrier_arrive")
        self.span(t, "arrive", start, t.clock, "barrier_arrive", line, barrier=slot.array.name, slot=slot.index,
                  phase=slot.completed, args={"count": n, **self._remote_args(slot)})

    def _remote_args(self, slot) -> dict:
        owner = slot.array.cta
        return {"cta": owner.pid, "cta_rank": owner.rank} if owner is not None and owner is not self else {}

    def _record_arrival(self, slot: MBarrierSlot, t: Task, line, n: int, what: str):
        arr = self.arrivers.setdefault(slot.array.id, {})
        arr.setdefault((t.pid, t.name, t.replica), set()).add(line)
        owner = slot.array.cta
        if owner is not None and len(owner.cluster) > 1 and not getattr(slot.array, "count_flagged", False):
            ctas = {k[0] for k in arr}
            if len(ctas) > slot.array.arrive_count and any(c != owner.pid for c in ctas):
                slot.array.count_flagged = True
                self.run.finding(
                    "cluster-arrive-count",
                    f"{slot.array.name} of CTA {owner.pid} (arrive_count {slot.array.arrive_count}, line "
                    f"{slot.array.line}) gets arrivals from {len(ctas)} CTAs ({', '.join(map(str, sorted(ctas)))}), "
                    f"some through remote_cta_rank: each completes a phase alone, so a wait can pass before the "
                    f"other CTAs have arrived — set arrive_count to the number of CTAs that arrive",
                    slot.array.line, t.lane, other_line=line)
        flipped, excess = slot.arrive(n, t.lane, line, t.clock, t.vc)
        t.tick()
        self.bevent(slot, "arrive", t.clock, t, count=n, line=line, phase=slot.completed - (1 if flipped else 0))
        if excess:
            where = f" of CTA {slot.array.cta.pid}" if slot.array.cta is not self else ""
            self.run.finding("arrive-overflow", f"{n} arrivals on {slot.name}{where} (line {line}, {what}) go past "
                             f"its count {slot.array.arrive_count} in phase {slot.completed}: {excess} too many",
                             line, t.lane)
        if flipped:
            self._flip(slot, t.clock, t, line)

    def expect(self, slot, nbytes: int):
        file, line = self.where()
        t = self.step(line)
        slot = self.resolve_slot(slot, line)
        start = t.clock
        t.clock += self.cost.barrier_op
        slot.expect(nbytes)
        arr = self.arrivers.setdefault(slot.array.id, {})
        arr.setdefault((t.pid, t.name, t.replica), set()).add(line)
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
                  slot=slot.index, phase=slot.completed, args={"bytes": nbytes, **self._remote_args(slot)})

    # -- transaction bytes: TMA loads, async remote stores, CLC responses -------------------------
    @staticmethod
    def _issue_bytes(bslot: MBarrierSlot, line, nbytes: int) -> int:
        """An async copy that will complete ``nbytes`` on ``bslot`` was issued; the phase it was issued in."""
        bslot.inflight_tma += 1
        ph = bslot.completed
        by_line = bslot.issued.setdefault(ph, {})
        by_line[line] = by_line.get(line, 0) + int(nbytes)
        for old in [k for k in bslot.issued if k < ph - 2]:
            del bslot.issued[old]
        return ph

    def _land(self, bslot: MBarrierSlot, nbytes: int, when, vc, line, issued: int):
        """``nbytes`` of an async copy issued in phase ``issued`` land on ``bslot`` (this CTA owns it)."""
        bslot.inflight_tma -= 1
        late = bslot.completed > issued       # the phase it was issued in completed without its bytes
        flipped = bslot.land(nbytes, when, vc)
        self.bevent(bslot, "tx", when, None, bytes=nbytes, line=line, phase=bslot.completed)
        if flipped:
            self._flip(bslot, when, None, line)
        if bslot.split is not None:
            ph, announced, landed, rest = bslot.split
            self._tx_overflow(bslot, ph, announced, landed, landed + rest, line)
        elif late and issued < len(bslot.phase_log):
            announced, landed = bslot.phase_log[issued]
            self._tx_overflow(bslot, issued, announced, landed, landed + nbytes, line)

    def _tx_overflow(self, bslot: MBarrierSlot, ph: int, announced: int, landed: int, brought: int, line):
        """Phase ``ph`` of ``bslot`` completed before every byte of the loads that signal it had landed:
        barrier_expect_bytes announced too few. One finding per barrier array, its phases listed."""
        arr = bslot.array
        loads = bslot.issued.get(ph, {})
        brought = max(brought, sum(loads.values()))
        lines = sorted(set(loads) | {line})
        if any(p[:2] == (bslot.name, ph) for p in arr.tx_phases):
            return
        arr.tx_phases.append((bslot.name, ph, announced, landed, brought))
        exp = getattr(bslot, "expect_line", None)
        first = arr.tx_phases[0]
        per_phase = "; ".join(f"{n} phase {p}: {a} announced / {b} brought" for n, p, a, _l, b in arr.tx_phases[:4])
        if len(arr.tx_phases) > 4:
            per_phase += f"; ... ({len(arr.tx_phases)} phases so far)"
        where = f"barrier_expect_bytes (line {exp})" if exp else "no barrier_expect_bytes"
        msg = (f"{first[0]} phase {first[1]} completed when {first[3]} byte(s) had landed, but the TMA load(s) "
               f"that signal it (line(s) {', '.join(map(str, lines))}) bring {first[4]}: {where} announced "
               f"{first[2]}. On the GPU the phase completes as soon as the announced bytes are in, so a "
               f"barrier_wait on it can return before the buffer is filled (garbage reads), and the other "
               f"{first[4] - first[3]} byte(s) count against the next phase — announce the bytes of every load "
               f"that signals this barrier: {first[4]} [{per_phase}]")
        if arr.tx_finding is None:
            owner = arr.cta or self
            owner.run.finding("tx-overflow", msg, exp or line, None, other_line=lines[0])
            arr.tx_finding = owner.run.findings[-1]
        else:
            arr.tx_finding.message = msg

    def wait(self, slot, phase: int):
        file, line = self.where()
        t = self.step(line)
        if isinstance(slot, RemoteSlot) or (isinstance(slot, MBarrierSlot) and slot.array.cta not in (None, self)):
            raise self.error("barrier_wait on a barrier of another CTA: a CTA can only wait on its own mbarriers",
                             line, hint="arrive remotely (barrier_arrive(bar, remote_cta_rank=r)) and wait on the "
                                        "local barrier in the CTA that owns it")
        start = t.clock
        w = self.waiters.setdefault(slot.array.id, {})
        w.setdefault((t.pid, t.name, t.replica), set()).add(line)
        self.bevent(slot, "wait_begin", start, t, phase=phase, line=line)
        info = {"kind": "mbarrier", "slot": slot, "phase": phase, "line": line, "since": start}
        self.sched.block(t, lambda: slot.can_pass(phase), info)
        vc_join(t.vc, slot.vc_done)
        key = (slot.array.id, t.pid, t.name, t.replica)
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
        t.clock += self.cost.issue
        issue_done = t.clock
        xfer_start = max(issue_done, self.tma_free)
        self.tma_free = xfer_start + self.cost.tma_transfer(nbytes)
        land_time = self.tma_free + self.cost.tma_latency
        dst0 = view.array
        if dst0.size != data.size:
            raise self.error(f"async_descriptor_load: the descriptor's block has {data.shape} elements but the "
                             f"destination buffer {view.slot_name} is {list(dst0.shape)}", line,
                             hint="set the TensorDescriptor block_shape to the SMEM buffer's shape")
        for dview, bslot in targets:
            agent = ("tma", bslot.array.id, bslot.index)
            epoch = self.tma_agents.get(agent, 0) + 1
            self.tma_agents[agent] = epoch
            vc = dict(t.vc)
            vc[agent] = epoch
            self.races.write(dview.slot, dview.slot_name, vc,
                             Access(agent, epoch, line, t.lane, f"TMA load into {dview.slot_name}"), start)
            issued = self._issue_bytes(bslot, line, nbytes)
            # who brings bytes to this barrier, and in which phase it last did (for the deadlock diagnosis)
            if not hasattr(bslot, "tma_last"):
                bslot.tma_last = {}
            bslot.tma_last[(t.lane, line)] = bslot.completed
            owner = bslot.array.cta or self

            def complete(dst=dview.array, bslot=bslot, vc=vc, owner=owner, issued=issued):
                dst[...] = data.reshape(dst.shape)
                owner._land(bslot, nbytes, land_time, vc, line, issued)

            self.sched.add_async(AsyncOp(complete, f"TMA load into {dview.slot_name} (line {line})"))
        extra = {}
        if multicast:
            extra["multicast"] = [c.pid for c in (self.peer(r, line) for r in multicast)]
        if targets[0][1].array.cta not in (None, self):
            extra.update(self._remote_args(targets[0][1]))
        self.span(t, "tma", start, t.clock, "async_descriptor_load", line, barrier=slot.array.name,
                  slot=slot.index, args={"bytes": nbytes, "lands": land_time, "buffer": view.slot_name, **extra})

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
                children.append(self.sched.new_task(name, r, warps, (lambda task, fn=fn: fn()), line, self))
        self.sched.spawn(parent, children)
        if inline is not None:
            inline()
        start = parent.clock
        info = {"kind": "join", "line": None, "since": start}
        self.sched.block(parent, lambda: all(c.state == "done" for c in children), info)
        for c in children:
            vc_join(parent.vc, c.vc)
            parent.clock = max(parent.clock, c.clock)

    # -- cluster: peers, remote barriers and buffers ---------------------------------------------
    def peer(self, rank: int, line=None) -> "CTA":
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

    def peer_alloc(self, target: "CTA", alloc: SmemAlloc, line=None) -> SmemAlloc:
        """``alloc``'s counterpart in CTA ``target`` (the buffer at the same SMEM/TMEM address there)."""
        if alloc.cta is target or alloc.cta is None:
            return alloc
        ordn = alloc.ordinal
        self._await_remote(f"CTA {target.pid} to allocate {alloc.name}", lambda: len(target.allocs) > ordn, line)
        return target.allocs[ordn]

    def cluster_barrier(self):
        """barrier.cluster.arrive + wait: every running task of every CTA of the cluster meets here."""
        file, line = self.where()
        t = self.step(line)
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

    # -- Blackwell: tcgen05 MMA, commit, tmem_copy --------------------------------------------------
    def _tc_commit_op(self, t: Task, line, slots):
        """Arrive once on each of ``slots`` when every tcgen05 op issued so far on this SM has completed."""
        e = self.tc_epoch
        when = self.tc_end + self.cost.mma_latency
        vc = dict(t.vc)
        vc[("tcgen05", self.pid)] = e
        lane = t.lane
        for sl in slots:
            self.arrivers.setdefault(sl.array.id, {}).setdefault((t.pid, t.name, t.replica), set()).add(line)

        def complete():
            self.tc_commits.pop(0)
            for sl in slots:
                owner = sl.array.cta or self
                flipped, excess = sl.arrive(1, lane, line, when, vc)
                owner.bevent(sl, "arrive", when, t, count=1, line=line,
                             phase=sl.completed - (1 if flipped else 0))
                if excess:
                    self.run.finding("arrive-overflow", f"the tcgen05 commit (line {line}) arrives on {sl.name} of "
                                     f"CTA {owner.pid} past its count {sl.array.arrive_count} in phase "
                                     f"{sl.completed}: {excess} too many", line, lane)
                if flipped:
                    owner._flip(sl, when, t, line)

        op = AsyncOp(complete, f"tcgen05 commit (line {line})")
        op.ready = lambda: self.tc_commits and self.tc_commits[0] is op
        self.tc_commits.append(op)
        self.sched.add_async(op)
        t.tick()

    def tcgen05_commit(self, bar, two_ctas: bool):
        file, line = self.where()
        t = self.step(line)
        slot = self.resolve_slot(bar, line)
        slots = [slot]
        if two_ctas and len(self.cluster) > 1:
            slots.append(self.remote_slot(slot, self.rank | 1, line))
        start = t.clock
        t.clock += self.cost.issue
        self._tc_commit_op(t, line, slots)
        self.span(t, "arrive", start, t.clock, "tcgen05_commit", line, barrier=slot.array.name, slot=slot.index,
                  args={"completes_at": self.tc_end + self.cost.mma_latency})

    def tcgen05_mma(self, a: SmemView, b: SmemView, acc: SmemView, use_acc: bool, barriers, two_ctas: bool,
                    sync: bool, product, in_bits: int, what="async_dot", extra_reads=()):
        """A tcgen05 MMA: acc (TMEM) = A @ B (+ acc). ``product(a_arr, b_arr)`` gives A @ B in float32.

        Two-CTA: issued by the leader (even rank) only; A per CTA, B is the pair's two halves side by side,
        each CTA's accumulator gets its own rows; the completion arrives on both CTAs' barriers."""
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        t.clock += self.cost.issue
        if acc.storage != "tmem":
            raise self.error(f"{what}: the accumulator {acc.slot_name} is not in tensor memory", line,
                             hint="allocate it with tlx.local_alloc(..., tlx.storage_kind.tmem) (sm_100)")
        if two_ctas:
            if len(self.cluster) < 2:
                raise self.error(f"{what}(two_ctas=True) in a CTA without a peer: the launch has no cluster of 2",
                                 line, hint="launch with ctas_per_cga=(2, 1, 1) (or a multiple of 2 along x)")
            if self.rank % 2:
                # the peer issues nothing: the leader's MMA computes both halves and signals both CTAs; the
                # leader's task of the same name is who the peer's barriers wait for (for the diagnosis)
                leader = self.peer(self.rank & ~1).pid
                for bar in barriers:
                    sl = self.resolve_slot(bar, line)
                    self.arrivers.setdefault(sl.array.id, {}).setdefault((leader, t.name, t.replica), set()).add(line)
                self.span(t, "other", start, t.clock, f"{what} (2-CTA: issued by the leader)", line,
                          args={"leader_cta": self.peer(self.rank & ~1).pid})
                return
        pairs = [(self, a, b, acc)]
        if two_ctas:
            peer = self.peer(self.rank | 1, line)
            pairs.append((peer, a.on(self.peer_alloc(peer, a.alloc, line)), b.on(self.peer_alloc(peer, b.alloc, line)),
                          acc.on(self.peer_alloc(peer, acc.alloc, line))))
        self.tc_epoch += 1
        e = self.tc_epoch
        agent = ("tcgen05", self.pid)
        wvc = dict(t.vc)
        wvc[agent] = e
        for cta, av, bv, cv in pairs:
            for v in (av, bv, *extra_reads):
                self.races.read(v.slot, v.slot_name, t.vc,
                                Access(agent, e, line, t.lane, f"{what} read of {v.slot_name}"), start)
            self.races.write(cv.slot, cv.slot_name, wvc,
                             Access(agent, e, line, t.lane, f"{what} accumulate into {cv.slot_name}"), start)
        b_arr = (np.concatenate([pairs[0][2].array, pairs[1][2].array], axis=1) if two_ctas else b.array)
        m = n = k = 0
        for cta, av, bv, cv in pairs:
            out = product(av.array, b_arr)
            if out.shape != cv.array.shape:
                raise self.error(f"{what}: A @ B is {list(out.shape)} but the accumulator {cv.slot_name} is "
                                 f"{list(cv.array.shape)}", line, hint="check the shapes of A, B and acc"
                                 + (" (2-CTA: B is each CTA's half, the product spans both halves)" if two_ctas else ""))
            if use_acc:
                cv.array[...] = cv.array + out.astype(cv.array.dtype, copy=False)
            else:
                cv.array[...] = out
            m, k = av.array.shape[-2], av.array.shape[-1]
            n = b_arr.shape[1]
        mstart = max(t.clock, self.tc_end)
        self.tc_end = mstart + self.cost.mma_cycles(m, n, k, in_bits)
        if two_ctas:
            pairs[1][0].tc_end = max(pairs[1][0].tc_end, self.tc_end)
        self.span(t, "mma", mstart, self.tc_end, what, line,
                  args={"m": m * len(pairs), "n": n, "k": k, "acc": acc.slot_name, "two_ctas": bool(two_ctas)})
        slots = []
        for bar in barriers:
            sl = self.resolve_slot(bar, line)
            slots.append(sl)
            if two_ctas:
                slots.append(self.remote_slot(sl, self.rank | 1, line))
        if slots:
            self._tc_commit_op(t, line, slots)
        elif sync:
            # no mBarriers and not force_async: the MMA is waited for in place
            t.clock = max(t.clock, self.tc_end + self.cost.mma_latency)
            t.vc[agent] = max(t.vc.get(agent, 0), e)

    def tmem_copy(self, src: SmemView, dst: SmemView):
        """tcgen05.cp: SMEM -> TMEM, in order with this SM's MMAs (a later commit covers it)."""
        file, line = self.where()
        t = self.step(line)
        start = t.clock
        t.clock += self.cost.issue
        self.tc_epoch += 1
        e = self.tc_epoch
        agent = ("tcgen05", self.pid)
        self.races.read(src.slot, src.slot_name, t.vc, Access(agent, e, line, t.lane, f"tmem_copy read of "
                                                                                       f"{src.slot_name}"), start)
        wvc = dict(t.vc)
        wvc[agent] = e
        self.races.write(dst.slot, dst.slot_name, wvc, Access(agent, e, line, t.lane, f"tmem_copy into "
                                                                                       f"{dst.slot_name}"), start)
        d = dst.array
        sa = src.array
        if sa.size * sa.itemsize != d.size * d.itemsize:
            raise self.error(f"tmem_copy: {src.slot_name} ({sa.nbytes} bytes) does not fit {dst.slot_name} "
                             f"({d.nbytes} bytes)", line, hint="copy a buffer of the same size")
        d[...] = np.ascontiguousarray(sa).view(np.uint8).reshape(-1).view(d.dtype).reshape(d.shape)
        mstart = max(t.clock, self.tc_end)
        self.tc_end = mstart + self.cost.tmem_cycles(sa.nbytes)
        self.span(t, "load", start, t.clock, "tmem_copy", line, args={"bytes": int(sa.nbytes), "buffer": dst.slot_name})

    # -- CLC: cluster launch control ---------------------------------------------------------------
    def clc_alloc(self, num: int):
        file, line = self.where()
        arr = ClcResponses(num, _name_from_line(file, line, f"clc{len(self.clc_arrays)}"), line)
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
