"""Tensor-core operations of a CTA: Hopper wgmma, Blackwell tcgen05 MMA (1- and 2-CTA), commit, tmem_copy.

:class:`MmaOps` is mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA`. wgmma is tracked per task (its own wait
groups); tcgen05 ops are tracked per SM (``tc_epoch``/``tc_end``) and complete on barriers through commits,
delivered in issue order.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..schedule import batch
from ..hardware.memory import SmemView
from ..diagnosis.races import Access
from .scaled_mma_ops import scales_to_logical
from ..schedule.scheduler import AsyncOp, Task

TMEM_LATENCY = 16.0     # tcgen05.ld/st issue-to-data, cycles (order of a shared-memory access)


def _iteration_lines(seen: list, line) -> int:
    """How many async_dot lines a loop's iteration holds, as seen from a warp group that runs ``line`` now after
    ``seen`` (its earlier async_dot lines, latest last): the distinct lines since it last ran ``line``, this one
    included; all of them where it never has (the first iteration, or a dot before the loop).

    >>> _iteration_lines([133], 142), _iteration_lines([133, 142], 142), _iteration_lines([189, 211, 189], 211)
    (2, 1, 2)
    """
    for back in range(len(seen) - 1, -1, -1):
        if seen[back] == line:
            return len(set(seen[back + 1:]) | {line})
    return len(set(seen) | {line})


class MmaOps:
    """The MMA methods of a CTA (wgmma and its wait, tcgen05 MMA/commit, tmem_copy)."""

    tc_floor = 0.0          # before this, the tensor core counts as busy (intervals no longer kept)

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
        if self.cost.spill_bytes:
            # a spilling kernel's loop stores and reloads its spilled registers once per iteration, through the L1
            # path that every warp group of the CTA shares: read off the compiled loop, its bytes per wgmma
            # instruction times this async_dot's instructions; given per iteration, spread over the async_dot lines
            # of the loop's iteration, those this warp group ran since it last ran this line (a loop's first
            # iteration, and a dot peeled before the loop, pay a little more)
            if self.cost.spill_per_wgmma:
                nbytes = self.cost.spill_bytes * t.threads * self.cost.wgmma_instructions(m, k, in_bits)
            else:
                nbytes = self.cost.spill_bytes * t.threads / _iteration_lines(t.dot_lines, line)
                t.dot_lines = (t.dot_lines + [line])[-64:]
            path_cycles = nbytes / self.cost.l1_bytes_per_cycle
            t.stats["spill"] += path_cycles
            lsu = max(t.clock, self.lsu_free) + path_cycles
            self.lsu_free = lsu
            self.span(t, "spill", start, lsu, "register spills", line, args={"bytes": nbytes})
            start = t.clock = lsu
        # the group issues its wgmma instructions one by one (busy, not waiting: ~120 cycles for 4 on the H200);
        # the tensor core starts on the first, so the MMA runs from ``start`` and ends no earlier than the issue
        issue = self.cost.wgmma_issue_cycles(m, k, in_bits)
        t.clock += issue
        # the tensor core is the CTA's; a warp group alone also waits out its own turnaround (mma_group_gap)
        work = (self.cost.serial_mma_cycles(m, n, k, in_bits) if self.cost.wgmma_serialized
                else self.cost.mma_cycles(m, n, k, in_bits))
        mstart = self._tc_claim(max(start, getattr(t, "mma_free", 0.0) + self.cost.mma_group_gap), work)
        end = max(start + issue, mstart + work)
        self._tc_book(mstart, end)
        t.mma_free = end
        if self.cost.wgmma_serialized:
            # ptxas follows each serialized wgmma with a wait for it (WARPGROUP.DEPBAR.LE gsb0, 0x0): the group
            # runs nothing of its own, softmax or spills, beside its MMA; other groups still do
            t.clock = max(t.clock, end)
        t.wgmma.append((end + self.cost.mma_latency, t.wgmma_epoch))
        self.span(t, "mma", mstart, end, "async_dot", line,
                  args={"m": m, "n": n, "k": k, "reads": [v.slot_name for v in (a, b) if isinstance(v, SmemView)]})
        return out

    # The tensor core is claimed by time, not in the order the tasks run: the scheduler interleaves them in a
    # seeded order, so one warp group can run several k-steps ahead of another in simulated time. A single
    # "free at" mark let the group that ran ahead take the tensor core from one that issued earlier (gemm_ws
    # 4096^3: 1 k-step in 7 doubled, a wgmma waiting ~2500 cycles); the GPU runs the earlier one first. So the
    # busy intervals are kept (the last _TC_KEPT), and a wgmma starts in the first gap at or after it is ready
    # that holds it; before the oldest kept interval the tensor core counts as busy.
    _TC_KEPT = 64

    def _tc_claim(self, ready: float, work: float) -> float:
        """When a wgmma of ``work`` cycles, ready at ``ready``, starts on this CTA's tensor core."""
        busy = self.__dict__.get("tc_busy")
        if not busy:
            return max(ready, self.tc_free)
        s = max(ready, self.tc_floor)
        for a, b in busy:
            if b <= s:
                continue
            if a >= s + work:
                break
            s = b
        return s

    def _tc_book(self, start: float, end: float) -> None:
        busy = self.__dict__.setdefault("tc_busy", [])
        bisect.insort(busy, (start, end))
        if len(busy) > self._TC_KEPT:
            old = busy[:len(busy) - self._TC_KEPT]
            del busy[:len(old)]
            self.tc_floor = max(self.tc_floor, max(b for _, b in old))
        self.tc_free = max(self.tc_free, end)

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
        self.span(t, "wait", start, t.clock, "async_dot_wait", line, args={"pendings": pendings})


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
            into = getattr(product, "accumulates", False) and use_acc and \
                cv.array.shape == av.array.shape[:-1] + b_arr.shape[-1:]
            out = product(av.array, b_arr, cv.array) if into else product(av.array, b_arr)
            if out.shape != cv.array.shape:
                raise self.error(f"{what}: A @ B is {list(out.shape)} but the accumulator {cv.slot_name} is "
                                 f"{list(cv.array.shape)}", line, hint="check the shapes of A, B and acc"
                                 + (" (2-CTA: B is each CTA's half, the product spans both halves)" if two_ctas else ""))
            if into:
                cv.array[...] = out                         # the product added into the accumulator already
            elif use_acc:
                cv.array[...] = cv.array + out.astype(cv.array.dtype, copy=False)
            else:
                cv.array[...] = out
            batch.tmem_mma(av, (pairs[0][2], pairs[1][2]) if two_ctas else bv, cv, use_acc, into, product)
            # packed mxfp4 holds two elements of K per byte: the product says its K (async_dot_scaled)
            m, k = av.array.shape[-2], getattr(product, "k", av.array.shape[-1])
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
        if sa.ndim == 5 and d.ndim == 2 and sa.dtype == np.uint8:
            # e8m0 scales in the block-scaling layout land in TMEM as the logical matrix the scaled MMA reads
            d[...] = scales_to_logical(sa, *d.shape)
        elif sa.size * sa.itemsize != d.size * d.itemsize:
            raise self.error(f"tmem_copy: {src.slot_name} ({sa.nbytes} bytes) does not fit {dst.slot_name} "
                             f"({d.nbytes} bytes)", line, hint="copy a buffer of the same size")
        else:
            d[...] = np.ascontiguousarray(sa).view(np.uint8).reshape(-1).view(d.dtype).reshape(d.shape)
        mstart = max(t.clock, self.tc_end)
        self.tc_end = mstart + self.cost.tmem_cycles(sa.nbytes)
        self.span(t, "load", start, t.clock, "tmem_copy", line, args={"bytes": int(sa.nbytes), "buffer": dst.slot_name})
