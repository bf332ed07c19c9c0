"""Happens-before race detection on SMEM buffers, through barriers (not timing luck).

Every agent that touches SMEM — a task, the TMA engine writing for one barrier slot,
a task's in-flight wgmma reads, its in-flight TMA stores — has a vector-clock
component. Releases (arrive, TMA bytes landing, wgmma/store waits retiring) and
acquires (a passing barrier_wait, a named barrier) move clocks the way the hardware
orders memory. An access to a buffer slot is a race when the last conflicting
access to that slot is not ordered before it.
"""
from __future__ import annotations

import copy
import dataclasses
import linecache
import re

from .releases import race_release_cause


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


# ---- the line to change for a race ---------------------------------------------------------------------------
_CTA = re.compile(r"^CTA (\d+): ")
_READER = re.compile(r"while the (async_dot) read of (\S+) \(line (\d+)\) may still read it")


def race_cause(finding, trace, file=None):
    """(line, sentence, fix) of the line to change for a race ``finding`` (engine Finding), or None.

    A TMA load that overwrites a slot a wgmma still reads was let through by a release (barrier_arrive)
    that came before that wgmma retired: the line to change is the ``async_dot_wait`` between the wgmma
    and the release (its ``pendings`` leave the wgmma in flight), or the release itself when no wait
    retires the wgmma first."""
    m = _READER.search(finding.message or "")
    if finding.kind != "race" or m is None or trace is None or finding.lane is None:
        return None
    cta_m = _CTA.match(finding.message)
    cta = int(cta_m.group(1)) if cta_m else finding.lane[0]
    dot_line, buf = int(m.group(3)), m.group(2)
    spans = [s for s in trace.spans if s.cta == cta]
    writer = (finding.lane[1], finding.lane[2])
    # the barrier the writer waited on last before it issued the load: the one the reader released
    released = None
    for s in spans:
        if (s.task, s.replica) != writer:
            continue
        if s.kind == "wait" and s.name == "barrier_wait":
            released = s.barrier
        elif s.line == finding.line and s.name == "async_descriptor_load":
            break
    if released is None:
        return None
    for lane in sorted({(s.task, s.replica) for s in spans if s.name == "async_dot" and s.line == dot_line}):
        seq = [s for s in spans if (s.task, s.replica) == lane]
        for i, s in enumerate(seq):
            if s.name != "async_dot" or s.line != dot_line:
                continue
            last_wait = None
            later = 0              # wgmmas this lane issued after this one
            for t in seq[i + 1:]:
                if t.name == "async_dot":
                    later += 1
                elif t.name == "async_dot_wait":
                    if later >= int(t.args.get("pendings", 0)):
                        break      # this wait retired the wgmma: its release is safe, the culprit is elsewhere
                    last_wait = t
                elif t.name == "barrier_arrive" and t.barrier == released:
                    who = f"{lane[0]}[{lane[1]}]"
                    if last_wait is not None:
                        src = linecache.getline(file, last_wait.line).split("#")[0].strip() if file else ""
                        return (last_wait.line,
                                f"line {last_wait.line}: {src or 'async_dot_wait'} leaves the wgmma that reads "
                                f"{buf} (line {dot_line}) in flight when {who} releases the slot at line {t.line} "
                                f"(barrier_arrive on {released}); the TMA load at line {finding.line} then "
                                f"overwrites {buf} while the wgmma may still read it",
                                f"wait for that wgmma before the release: lower the pendings of the async_dot_wait "
                                f"at line {last_wait.line} (async_dot_wait(0) retires every wgmma in flight), or "
                                f"release the slot one step later")
                    return (t.line,
                            f"line {t.line}: {who} releases {buf} (barrier_arrive on {released}) while the wgmma "
                            f"that reads it (line {dot_line}) is still in flight; the TMA load at line "
                            f"{finding.line} then overwrites it",
                            f"retire the wgmma before the release: async_dot_wait(0) (or enough pendings) between "
                            f"line {dot_line} and line {t.line}")
    return None


_OVERWRITE = re.compile(r"\(line (\d+)\) overwrites (\S+) while the .*? \(line (\d+)\) may still read it")


_UNLANDED = re.compile(r"before the TMA load into (\S+) that fills it \(line (\d+)\) is known to have landed")


def _early_wait_cause(finding, trace, file=None):
    """A read of a buffer before its TMA load landed, where the reader passed a wait on that load's barrier before
    the barrier's phase completed: the wait's phase is the line to change (sim/diagnosis/diagnose.py, ``early_pass_cause``)."""
    if _UNLANDED.search(finding.message or "") is None or trace is None:
        return None
    from .diagnose import Ledger, early_pass_cause       # diagnose builds on this module's findings
    cta_m = _CTA.match(finding.message)
    cta = int(cta_m.group(1)) if cta_m else (finding.lane[0] if finding.lane else 0)
    reader = (cta, finding.lane[1], finding.lane[2]) if finding.lane else None
    c = early_pass_cause(Ledger(trace, {cta}), file, only_lane=reader) or early_pass_cause(Ledger(trace, {cta}), file)
    return None if c is None else (c.line, c.text, c.fix)


def _release_cause(finding, trace, file=None):
    """The race traced through the release barrier that guards the overwritten buffer (sim/diagnosis/releases.py)."""
    m = _OVERWRITE.search(finding.message or "")
    if m is None or trace is None:
        return None
    cta_m = _CTA.match(finding.message)
    cta = int(cta_m.group(1)) if cta_m else (finding.lane[0] if finding.lane else 0)
    return race_release_cause(cta, m.group(2), int(m.group(3)), int(m.group(1)), trace, file)


def rank_findings(findings: list, trace, file=None) -> list:
    """``findings`` with each race that a cause explains rewritten to lead with the line to change, those
    first (stable otherwise): what a person reads first is the fix, the two accesses follow."""
    out = []
    for f in findings:
        c = (race_cause(f, trace, file) or _release_cause(f, trace, file) or _early_wait_cause(f, trace, file)
             if f.kind == "race" else None)
        if c is not None:
            # a copy: the caller's list of already-ranked findings must not pick the original up as well
            f = copy.copy(f)
            line, text, fix = c
            f.other_line = f.line if f.other_line is None else f.other_line
            f.message = f"{text} [{f.message}]"
            f.line, f.hint, f.cause = line, fix, True
        out.append(f)
    return sorted(out, key=lambda f: 0 if getattr(f, "cause", False) or f.kind in ("tx-overflow",) else 1)
