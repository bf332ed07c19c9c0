"""Happens-before race detection on SMEM buffers, through barriers (not timing luck).

Every agent that touches SMEM — a task, the TMA engine writing for one barrier slot,
a task's in-flight wgmma reads, its in-flight TMA stores — has a vector-clock
component. Releases (arrive, TMA bytes landing, wgmma/store waits retiring) and
acquires (a passing barrier_wait, a named barrier) move clocks the way the hardware
orders memory. An access to a buffer slot is a race when the last conflicting
access to that slot is not ordered before it.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Access:
    agent: tuple
    epoch: int
    line: int | None
    lane: tuple
    what: str


@dataclasses.dataclass
class RaceFinding:
    kind: str                     # "read-before-landed" | "write-before-release"
    slot: str
    message: str
    line: int | None              # the access that raced
    other_line: int | None        # the earlier, unordered access
    lane: tuple | None = None
    other_lane: tuple | None = None
    file: str | None = None
    time: float | None = None
    hint: str = ""                # what to do, when the tracker knows more than "order them"

    def __str__(self):
        return (f"race ({self.kind}) on {self.slot}: {self.message} "
                f"[line {self.line} vs line {self.other_line}]")


class _Slot:
    __slots__ = ("write", "reads")

    def __init__(self):
        self.write: Access | None = None
        self.reads: dict = {}


_WHOLE = (0, float("inf"))


class RaceTracker:
    """Per buffer slot: the last write and the reads since. SMEM slots are keyed by (allocation, buffer);
    TMEM keys are ("tmem", allocation, first column, end column): TMEM aliases (``reuse=``) share columns,
    not bytes, so an access conflicts with every access to overlapping columns of the same allocation.
    SMEM shared with ``reuse=`` aliases: ("smem", root allocation, first byte, end byte), likewise."""

    def __init__(self, file: str | None):
        self.file = file
        self.slots: dict = {}
        self.findings: list[RaceFinding] = []
        self._seen: set = set()

    def _slots(self, key) -> list[_Slot]:
        """The slot of ``key`` (created if new) first, then those of overlapping column ranges."""
        if isinstance(key, tuple) and key and key[0] in ("tmem", "smem"):
            group, rng = key[:2], (key[2], key[3])
        else:
            group, rng = key, _WHOLE
        ranges = self.slots.setdefault(group, {})
        own = ranges.get(rng)
        if own is None:
            own = ranges[rng] = _Slot()
        return [own] + [sl for r, sl in ranges.items() if r != rng and r[0] < rng[1] and rng[0] < r[1]]

    def _report(self, kind, slot_name, msg, acc: Access, other: Access, time, hint=""):
        sig = (kind, slot_name.split("[")[0], acc.line, other.line)
        if sig in self._seen:
            return
        self._seen.add(sig)
        self.findings.append(RaceFinding(kind, slot_name, msg, acc.line, other.line, acc.lane, other.lane,
                                         self.file, time, hint))

    def read(self, key, slot_name, vc: dict, acc: Access, time=None) -> None:
        slots = self._slots(key)
        for s in slots:
            w = s.write
            if w is not None and w.agent != acc.agent and vc.get(w.agent, -1) < w.epoch:
                self._report("read-before-landed", slot_name,
                             f"{acc.what} (line {acc.line}) reads {slot_name} before the {w.what} that fills it "
                             f"(line {w.line}) is known to have landed: no barrier wait orders them", acc, w, time)
                break
        slots[0].reads[acc.agent] = acc

    def write(self, key, slot_name, vc: dict, acc: Access, time=None) -> None:
        slots = self._slots(key)
        for s in slots:
            for r in s.reads.values():
                if r.agent != acc.agent and vc.get(r.agent, -1) < r.epoch:
                    why, hint = "the consumer has not released the buffer", ""
                    if acc.lane and r.lane and acc.lane[0] != r.lane[0]:
                        # a multicast copy writes the same slot in every target CTA
                        why = (f"CTA {r.lane[0]}'s consumer has not released the buffer to CTA {acc.lane[0]}, whose "
                               f"copy writes it: a multicast loader must wait until the consumers of every target "
                               f"CTA released the slot (they arrive on its barrier with remote_cta_rank=, and its "
                               f"arrive count counts them)")
                        hint = ("make the loader wait until the consumers of every CTA its copy writes have "
                                "released the slot: each consumer also arrives on the peer's barrier "
                                "(barrier_arrive(..., remote_cta_rank=peer)), and the barrier's arrive_count "
                                "counts those arrivals")
                    self._report("write-before-release", slot_name,
                                 f"{acc.what} (line {acc.line}) overwrites {slot_name} while the {r.what} "
                                 f"(line {r.line}) may still read it: {why}", acc, r, time, hint)
                    break
        s = slots[0]
        w = s.write
        if w is not None and w.agent != acc.agent and vc.get(w.agent, -1) < w.epoch and not s.reads:
            self._report("write-before-release", slot_name,
                         f"{acc.what} (line {acc.line}) overwrites {slot_name} before the earlier "
                         f"{w.what} (line {w.line}) is ordered before it", acc, w, time)
        s.write = acc
        s.reads = {}
