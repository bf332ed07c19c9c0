"""mbarriers and named barriers of one simulated CTA, with the hardware's phase rules.

An mbarrier slot counts, for its current phase, the arrivals still pending
(``arrive_count`` at init, or num_warps*32*num_arrivals for a warp barrier, counted
per thread) and the transaction bytes still pending (``barrier_expect_bytes`` adds,
TMA bytes landing subtract). When both reach zero the phase completes: the
completed-phase counter goes up by one and the counts reset. ``barrier_wait(bar, p)``
returns once the parity of the completed-phase counter differs from ``p``.

The hardware counts a TMA load's bytes as they arrive, not all at once: when fewer
bytes were announced than a load brings, the phase completes as soon as the announced
bytes are in, and the rest of the load counts against the next phase. ``land`` models
that split (the load's data is then not ordered before the completed phase's waits).
"""
from __future__ import annotations

import itertools

_ids = itertools.count()


def vc_join(a: dict, b: dict) -> None:
    """a := a ⊔ b (vector clocks, for happens-before)."""
    for k, v in b.items():
        if a.get(k, -1) < v:
            a[k] = v


class MBarrierArray:
    """The slots of one ``alloc_barriers`` / ``alloc_warp_barrier`` call."""

    def __init__(self, num: int, arrive_count: int, name: str, line: int | None):
        self.id = next(_ids)
        self.name = name
        self.line = line
        self.arrive_count = int(arrive_count)
        self.slots = [MBarrierSlot(self, i) for i in range(int(num))]
        self.cta = None             # the CTA whose SMEM holds it (set by the CTA)
        self.ordinal = None         # its place among that CTA's barrier allocations (same in every CTA)
        self.tx_finding = None      # the "tx-overflow" finding of this array (one, its phases listed)
        self.tx_phases: list = []   # (slot name, phase, announced, landed when it completed, brought)

    def subview(self, idx: int) -> "MBarrierSlot":
        if not 0 <= idx < len(self.slots):
            raise IndexError(f"barrier index {idx} out of range: {self.name} has {len(self.slots)} barriers")
        return self.slots[idx]

    def __repr__(self):
        return f"MBarrierArray({self.name}, {len(self.slots)} x count {self.arrive_count})"


class MBarrierSlot:
    """One mbarrier: phase counter, pending arrivals and bytes, who arrived in this phase."""

    def __init__(self, array: MBarrierArray, index: int):
        self.array = array
        self.index = index
        self.completed = 0                    # phases completed so far; parity = completed & 1
        self.pending = array.arrive_count     # arrivals still missing in the current phase
        self.tx = 0                           # transaction bytes still missing (may dip below 0)
        self.expected_tx = 0                  # bytes announced in the current phase
        self.arrivals: list = []              # (lane, line, count) in the current phase
        self.flip_times: list[float] = []     # time each phase completed
        self.last_flip_time = 0.0
        self.last_flip_lane = None
        self.vc_cur: dict = {}                # happens-before: joined from arrivals of this phase
        self.vc_done: dict = {}               # ... of the last completed phase
        self.inflight_tma = 0                 # TMA loads issued on it, not landed
        self.landed_tx = 0                    # bytes landed in the current phase
        self.split = None                     # (phase, announced, landed, rest) of the last load split by a flip
        self.issued: dict = {}                # phase -> {TMA load line: bytes issued in that phase}
        self.phase_log: list = []             # per completed phase: (bytes announced, bytes landed)

    @property
    def name(self) -> str:
        return f"{self.array.name}[{self.index}]"

    @property
    def parity(self) -> int:
        return self.completed & 1

    def can_pass(self, phase: int) -> bool:
        return (self.completed & 1) != (int(phase) & 1)

    def arrive(self, count: int, lane, line, time: float, vc: dict | None) -> tuple[bool, int]:
        """Count ``count`` arrivals. Returns (phase completed?, arrivals in excess of the count)."""
        excess = max(0, count - self.pending)
        self.pending -= count - excess
        self.arrivals.append((lane, line, count))
        if vc:
            vc_join(self.vc_cur, vc)
        return self._maybe_complete(time, lane), excess

    def expect(self, nbytes: int) -> None:
        self.tx += int(nbytes)
        self.expected_tx += int(nbytes)

    def land(self, nbytes: int, time: float, vc: dict | None) -> bool:
        """TMA bytes arrived; returns True when that completed the phase.

        When the arrivals are in and fewer bytes are pending than this load brings, the phase
        completes with the pending bytes and the rest counts against the next phase (``split``
        says so); the load's writes then join the next phase only, so a wait on the completed
        phase does not order them (a read there is a race)."""
        nbytes = int(nbytes)
        self.split = None
        if self.pending == 0 and 0 < self.tx < nbytes:
            rest = nbytes - self.tx
            self.landed_tx += self.tx
            self.split = (self.completed, self.expected_tx, self.landed_tx, rest)
            self.tx = 0
            self._maybe_complete(time, None)
            self.tx = -rest
            self.landed_tx = rest
            if vc:
                vc_join(self.vc_cur, vc)
            return True
        self.tx -= nbytes
        self.landed_tx += nbytes
        if vc:
            vc_join(self.vc_cur, vc)
        return self._maybe_complete(time, None)

    def _maybe_complete(self, time, lane) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase_log.append((self.expected_tx, self.landed_tx))
            self.completed += 1
            self.pending = self.array.arrive_count
            self.expected_tx = 0
            self.landed_tx = 0
            self.arrivals = []
            self.last_flip_time = time
            self.last_flip_lane = lane
            self.flip_times.append(time)
            self.vc_done = self.vc_cur
            self.vc_cur = {}
            return True
        return False


class NamedBarrier:
    """A hardware named barrier (``bar.sync`` / ``bar.arrive`` id, count), counted in threads."""

    def __init__(self, bid: int):
        self.id = bid
        self.expected: int | None = None
        self.arrived = 0
        self.generation = 0
        self.participants: list = []          # (lane, line, threads, kind) of this generation
        self.vc_cur: dict = {}
        self.vc_done: dict = {}
        self.release_time = 0.0
        self.max_time = 0.0
        self.counts: dict = {}                # line -> num_threads it passed, over every generation

    def arrive(self, threads: int, count: int, lane, line, kind: str, time: float, vc: dict) -> bool:
        self.counts.setdefault(line, count)
        if self.expected is None:
            self.expected = count
        self.arrived += threads
        self.participants.append((lane, line, threads, kind, count))
        vc_join(self.vc_cur, vc)
        self.max_time = max(self.max_time, time)
        if self.arrived >= self.expected:
            self.generation += 1
            self.release_time = self.max_time
            self.arrived = 0
            self.expected = None
            self.participants = []
            self.vc_done, self.vc_cur = self.vc_cur, {}
            self.max_time = 0.0
            return True
        return False
