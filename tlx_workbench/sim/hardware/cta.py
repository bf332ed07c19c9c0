"""The state of one simulated CTA, and the hardware meaning of TLX operations on it.

:class:`CTA` holds the CTA's SMEM and TMEM allocations, barriers, named barriers and
trace lanes; its methods are what the TLX builder ops (in ``tlx_ops.py``) call. CTAs
simulated together — the CTAs of a cluster, or several resident clusters of a CLC
kernel — share one :class:`SimGroup`: one scheduler, one race tracker (buffers are
named by globally unique ids, so a leader CTA's MMA reading its peer's SMEM is
checked like any other read) and one record of who arrives and waits where.
The operations live in mixins, one module per kind: ``barrier_ops.py`` (mbarriers, transaction bytes,
named barriers), ``memory_ops.py`` (TMA, cp.async, SMEM/TMEM loads and stores), ``bulk_copy_ops.py`` (TMA
store-reduce, the non-tensor bulk copies), ``mma_ops.py`` (wgmma,
tcgen05 MMA and commit, 2-CTA MMA, tmem_copy), ``cluster_ops.py`` (peers, remote barriers and buffers,
cluster barrier, remote stores) and ``clc.py`` (cluster launch control). This module keeps the state they
share, the trace plumbing, allocation and async_tasks.
Times are per-task cycle clocks advanced by ``cost.py``.
"""
from __future__ import annotations

import numpy as np

from ...errors import SimulationError
from ...trace import BarrierEvent, Span
from ..ops.barrier_ops import BarrierOps
from .barriers import MBarrierArray, MBarrierSlot, NamedBarrier, vc_join
from ..ops.bulk_copy_ops import BulkCopyOps
from .clc import ClcOps
from ..ops.cluster_ops import ClusterOps
from .memory import AliasSpec, BufferList, SmemAlloc, SmemView
from ..ops.memory_ops import MemoryOps
from ..ops.mma_ops import MmaOps
from ..diagnosis.races import RaceTracker
from ..schedule.scheduler import CTAScheduler, Task
from ..diagnosis.source_lines import kernel_frame_line, name_from_line


class SimGroup:
    """CTAs that run together under one scheduler: one cluster, or the resident clusters of a CLC kernel."""

    def __init__(self, run, label: int, seed: int, on_resume):
        self.run = run
        run.groups.append(self)       # let go of at the launch's end (engine._release_groups)
        self.sched = CTAScheduler(label, seed, run.max_steps, on_resume, run.order)
        self.races = RaceTracker(run.file)
        self.arrivers: dict = {}      # barrier array id -> {(cta, task, replica): set(lines)} over the run
        self.waiters: dict = {}       # barrier array id -> {(cta, task, replica): set(lines)}
        self.passed: dict = {}        # (barrier array id, cta, task, replica) -> waits passed
        self.ctas: list["CTA"] = []
        self.gmem_writes = 0          # global stores and changing atomics so far: what wakes a blocked poll
        self.gmem_clock = 0.0         # the latest clock of such a write


class CTA(BarrierOps, MemoryOps, BulkCopyOps, MmaOps, ClusterOps, ClcOps):
    def __init__(self, run, pid: int, grid_idx: tuple, group: SimGroup, rank: int = 0, cluster=None,
                 cluster_id: int = 0):
        self.run = run
        self.cost = run.cost
        self.alu_free = 0.0                     # when the CTA's ALUs are next free (charge_alu)
        self.lsu_free = 0.0                     # when its L1 path is next free (register spills)
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
        self.tma_landing = []   # when its TMA loads in flight land (the latency grows with them)
        self.tma_store_free = 0.0   # when its TMA stores' own transfer is next free (where they run beside the loads)
        self.tma_holds = []         # (issued, cycles) of stores that hold the queue's next load (issued while idle)
        self.tc_free = 0.0      # when the tensor cores are next free
        self.tma_agents: dict = {}
        self.in_async_op = False      # inside a TLX op that reads/writes global memory itself
        # warp specialization and the cluster barrier (see ClusterOps.cluster_barrier): the line of the first
        # tlx.cluster_barrier() run outside async_tasks, the line of the first async_tasks entered, and whether
        # the root task is running the default async_task's body inline (then it is inside async_tasks)
        self.top_cluster_barrier: int | None = None
        self.async_tasks_line: int | None = None
        self.in_default_body = 0
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
        name = slot.array.name if isinstance(slot, MBarrierSlot) else "named_barrier"
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

    def charge_alu(self, elements: int, weight: float):
        """Elementwise work of the running task: the CTA's ALUs (128 FP32 lanes per SM) are shared by its warp
        groups, like its tensor core; scalar index arithmetic is free (interp_adapter.ALU_WEIGHTS)."""
        t = self.sched.current
        if t is None:
            return
        owner = getattr(t, "cta", None) or self
        cycles = elements * weight / owner.cost.elems_per_cycle
        start = max(t.clock, owner.alu_free)
        owner.alu_free = t.clock = start + cycles
        t.stats["busy"] += cycles

    def charge_scalar(self):
        """One integer scalar op of the running task's own code (index arithmetic: ``use % STAGES``, ``2 * s``),
        ``cost.scalar_op`` cycles on its own clock, not on the shared ALUs: a warp group's scalar op is one
        instruction per warp, and what it costs is its latency in the chain of the loop's control, not lanes.
        Free inside a TLX op (its own bookkeeping) and where the cost model has no figure (0)."""
        t = self.sched.current
        if t is None or t.call_stack:
            return
        owner = getattr(t, "cta", None) or self
        cycles = owner.cost.scalar_op
        t.stats["scalar_ops"] += 1
        if cycles:
            t.clock += cycles
            t.stats["busy"] += cycles

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
        name = name_from_line(file, line, f"{storage}{len(self.allocs)}")
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
            if isinstance(base.root, SmemAlloc):
                # both now share bytes from the start of the root allocation: races are tracked on byte
                # ranges of it, as buffer i of one need not be buffer i of the other (other shape or dtype)
                a.root = base.root
                a.root.byte_keys = a.byte_keys = True
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
        return AliasSpec(storage, size_bytes, name_from_line(file, line, "alias_spec"), line)

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
        arr = MBarrierArray(num, count, name_from_line(file, line, f"bars{len(self.barrier_arrays)}"), line)
        arr.cta, arr.ordinal = self, len(self.barrier_arrays)
        self.barrier_arrays.append(arr)
        t = self.task
        for s in arr.slots:
            self.bevent(s, "init", t.clock, t, count=arr.arrive_count, line=line)
        return arr


    # -- tasks ----------------------------------------------------------------------------------------
    def run_tasks(self, specs):
        """The body of ``with tlx.async_tasks()``: run each task (times replicate) concurrently."""
        parent = self.task
        if self.async_tasks_line is None:
            self.async_tasks_line = self.where()[1]
        if self.top_cluster_barrier is not None:
            # on the GPU this CTA never got past that cluster barrier: no task starts
            self.hang_outside_tasks(parent, self.top_cluster_barrier, after=False)
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
        # CTA-wide thread ids: the default task's warps first, then the partitions as the compiler's warp-group
        # allocation places them (largest first, declaration order among equals)
        first = self.run.num_warps * 32
        for c in sorted((c for c in children if c.name != "default"), key=lambda c: -c.num_warps):
            c.thread0, first = first, first + c.threads
        self.sched.spawn(parent, children)
        if inline is not None:
            self.in_default_body += 1
            try:
                inline()
            finally:
                self.in_default_body -= 1
        start = parent.clock
        info = {"kind": "join", "line": None, "since": start}
        self.sched.block(parent, lambda: all(c.state == "done" for c in children), info)
        for c in children:
            vc_join(parent.vc, c.vc)
            parent.clock = max(parent.clock, c.clock)
