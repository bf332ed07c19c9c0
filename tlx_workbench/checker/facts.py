"""Per-phase facts of one simulated launch, read from its Trace: for each barrier slot,
who arrived how often, how many bytes were announced and how many landed, and how many
times each waiter waited (the number of protocol rounds the slot went through).

Counts here come from what the kernel actually did, never from the barrier's own
arrive count: a wrong count changes when phases flip, not how often a lane reaches
its arrive or wait site.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict


@dataclasses.dataclass
class LaneActs:
    events: int = 0          # arrive (or expect) calls
    units: int = 0           # arrivals counted (per thread for warp barriers)
    bytes: int = 0           # expect: bytes announced
    lines: set = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class SlotFacts:
    """What happened on one barrier slot of one CTA."""
    barrier: str
    slot: int
    cta: int
    init_count: int | None = None
    arrivals: dict = dataclasses.field(default_factory=lambda: defaultdict(LaneActs))   # (task, replica) -> acts
    expects: dict = dataclasses.field(default_factory=lambda: defaultdict(LaneActs))
    waits: dict = dataclasses.field(default_factory=lambda: defaultdict(int))           # (task, replica) -> waits
    wait_lines: set = dataclasses.field(default_factory=set)
    tx_bytes: int = 0
    tx_by_line: dict = dataclasses.field(default_factory=lambda: defaultdict(int))
    flips: int = 0

    @property
    def rounds(self) -> int:
        """Protocol rounds: how often one waiter waited on this slot (0: nobody waited)."""
        return max(self.waits.values(), default=0)

    def per_round(self, acts: LaneActs) -> int:
        """Calls per round of one lane (rounded up: a deadlocked run stops mid-round)."""
        r = self.rounds
        return math.ceil(acts.events / r) if r else 0

    def required_count(self) -> int | None:
        """The arrive count these arrivals need per phase (expects count one each)."""
        if not self.rounds:
            return None
        total = 0
        for acts in self.arrivals.values():
            per_event = acts.units // max(acts.events, 1)
            total += self.per_round(acts) * per_event
        for acts in self.expects.values():
            total += self.per_round(acts)
        return total

    @property
    def expect_calls(self) -> int:
        return sum(a.events for a in self.expects.values())

    @property
    def expect_bytes(self) -> int:
        return sum(a.bytes for a in self.expects.values())


def slot_facts(trace) -> dict[tuple[str, int], list[SlotFacts]]:
    """{(barrier, slot): [SlotFacts of each simulated CTA]} from a simulator Trace."""
    by_key: dict[tuple[int, str, int], SlotFacts] = {}
    for e in trace.barrier_events:
        key = (e.cta, e.barrier, e.slot)
        sf = by_key.get(key)
        if sf is None:
            sf = by_key[key] = SlotFacts(e.barrier, e.slot, e.cta)
        lane = (e.task, e.replica)
        if e.kind == "init":
            sf.init_count = e.count
        elif e.kind == "arrive":
            a = sf.arrivals[lane]
            a.events += 1
            a.units += e.count
            a.lines.add(e.line)
        elif e.kind == "expect":
            a = sf.expects[lane]
            a.events += 1
            a.units += 1
            a.bytes += e.bytes
            a.lines.add(e.line)
        elif e.kind == "tx":
            sf.tx_bytes += e.bytes
            sf.tx_by_line[e.line] += e.bytes
        elif e.kind == "wait_begin":
            sf.waits[lane] += 1
            sf.wait_lines.add(e.line)
        elif e.kind == "flip":
            sf.flips += 1
    out: dict[tuple[str, int], list[SlotFacts]] = defaultdict(list)
    for (cta, bar, slot), sf in sorted(by_key.items()):
        out[(bar, slot)].append(sf)
    return dict(out)


def lane_label(lane, tasks) -> str:
    """"task1[0]" for a replicated task, "default" for one without replicas."""
    task, rep = lane
    reps = [t for t in tasks if t.name == task]
    if len(reps) > 1 or (reps and reps[0].label != reps[0].name):
        return f"{task}[{rep}]"
    return str(task)
