"""mbarrier and named-barrier operations of a CTA: arrive, expect, wait, transaction bytes, named barriers.

:class:`BarrierOps` is mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA`; the barrier state itself (phases,
pending arrivals and bytes, vector clocks) is in ``barriers.py``. The transaction-byte helpers
(``_issue_bytes``/``_land``) are shared by every async copy that completes bytes on a barrier: TMA loads,
async remote stores and CLC responses.
"""
from __future__ import annotations

from ..hardware.barriers import MBarrierSlot, NamedBarrier, vc_join
from .cluster_ops import RemoteSlot
from . import threads
from ..schedule.scheduler import Task


class BarrierOps:
    """The barrier methods of a CTA (mbarriers, their transaction bytes, named barriers)."""

    # -- mbarriers ------------------------------------------------------------------------
    def _flip(self, slot: MBarrierSlot, time, t: Task | None, line):
        self.bevent(slot, "flip", time, t, phase=slot.completed - 1, line=line)

    def arrive(self, slot, count: int, per_thread: bool):
        file, line = self.where()
        t = self.step(line)
        remote = isinstance(slot, RemoteSlot)
        slot = self.resolve_slot(slot, line)
        n = threads.arrive_count(t, count, per_thread)
        start = t.clock
        t.clock += ((self.cost.barrier_arrive_warp if per_thread else self.cost.barrier_op)
                    + (self.cost.remote_extra if remote else 0.0))
        phase = slot.completed           # the phase this arrival counts toward (numbered from 0), as the flip says
        self._record_arrival(slot, t, line, n, "barrier_arrive")
        self.span(t, "arrive", start, t.clock, "barrier_arrive", line, barrier=slot.array.name, slot=slot.index,
                  phase=phase, args={"count": n, **self._remote_args(slot)})

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
        t.clock += self.cost.expect_cycles
        slot.expect(nbytes)
        arr = self.arrivers.setdefault(slot.array.id, {})
        arr.setdefault((t.pid, t.name, t.replica), set()).add(line)
        slot.expect_line = line
        # barrier_expect_bytes lowers to mbarrier.arrive.expect_tx: one arrival plus the byte count
        self.bevent(slot, "expect", t.clock, t, bytes=nbytes, line=line, phase=slot.completed)
        phase = slot.completed
        flipped, excess = slot.arrive(1, t.lane, line, t.clock, t.vc)
        t.tick()
        if excess:
            self.run.finding("arrive-overflow", f"barrier_expect_bytes on {slot.name} (line {line}) arrives past "
                             f"its count {slot.array.arrive_count} in phase {phase}", line, t.lane)
        if flipped:
            self._flip(slot, t.clock, t, line)
        self.span(t, "arrive", start, t.clock, "barrier_expect_bytes", line, barrier=slot.array.name,
                  slot=slot.index, phase=phase, args={"bytes": nbytes, **self._remote_args(slot)})

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
        if slot.completed and slot.last_flip_time > start:
            # it blocked: the phase flipped while it waited, it wakes up after the flip
            t.clock = max(t.clock, slot.last_flip_time + self.cost.wake)
        else:
            # satisfied: the phase had completed before the wait began
            t.clock += self.cost.barrier_wait
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
        nb.arrive(t.threads, count, t.lane, line, "wait" if wait else "arrive", t.clock, t.vc)
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
