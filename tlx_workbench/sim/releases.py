"""Which buffers each release barrier guards, and the releases every lane owes (issue 19).

Read off a finished run's Trace. A barrier slot *guards* the SMEM buffers a lane writes right after passing a
wait on it (the producer's ``barrier_wait(empty[s])`` before its TMA loads into ``a[s]``, ``b[s]``). A lane that
reads a guarded buffer (a wgmma, a ``local_load``, a TMA store) then *owes* that slot a release: a
``barrier_arrive`` on it once the read is retired (a wgmma by the ``async_dot_wait`` that leaves fewer in
flight). Replaying every lane's spans against that gives, per release, whether it paid a debt (``ok``), came
while the read it pays for was still in flight (``early``) or paid none (``unowed``: the lane read nothing the
slot guards since its last release there), and per lane the debts never paid. A deadlock on a release barrier
or a race past one is then traced to the release to add, move or re-aim (``sim/diagnose.py``, ``sim/races.py``).
"""
from __future__ import annotations

import ast
import dataclasses
import linecache

WRITES = ("async_descriptor_load", "async_load", "local_store")
READS = ("local_load", "async_descriptor_store")


@dataclasses.dataclass
class Read:
    lane: tuple                    # (cta, task, replica)
    line: int | None
    buffers: tuple                 # the guarded buffers it read ("a[0]", ...)
    key: tuple                     # (cta, barrier, slot) of the release barrier that guards them
    seq: int                       # position in the lane's spans
    retired_line: int | None = None  # the async_dot_wait that retired it (its own line for a synchronous read)
    retired_seq: int | None = None


@dataclasses.dataclass
class Release:
    lane: tuple
    line: int | None
    key: tuple
    seq: int
    verdict: str                   # ok | early | unowed
    paid: list                     # the Reads it released
    inflight: list                 # those of them still in flight when it arrived


def _lane(sp) -> tuple:
    return (sp.cta, sp.task, sp.replica)


class Releases:
    """Guards, releases and unpaid debts of the lanes of ``ctas`` (all CTAs when None) in ``trace``."""

    def __init__(self, trace, ctas=None):
        self.spans: dict[tuple, list] = {}
        for sp in trace.spans:
            if ctas is None or sp.cta in ctas:
                self.spans.setdefault(_lane(sp), []).append(sp)
        #: (cta, barrier, slot) -> {buffer: {lines of the writes}}
        self.guards: dict[tuple, dict] = {}
        #: (cta, buffer) -> {(cta, barrier, slot)} that guard it
        self.guard_of: dict[tuple, set] = {}
        #: (cta, buffer) -> the writes into it: [(lane, line)]
        self.writes: dict[tuple, list] = {}
        for lane, seq in self.spans.items():
            passed, after_write = [], False
            for sp in seq:
                if sp.name == "barrier_wait" and sp.kind == "wait" and sp.barrier is not None:
                    if after_write:
                        passed, after_write = [], False
                    passed.append((sp.cta, sp.barrier, sp.slot))
                elif sp.name in WRITES and sp.args.get("buffer"):
                    buf = sp.args["buffer"]
                    self.writes.setdefault((sp.cta, buf), []).append((lane, sp.line))
                    for key in passed:
                        self.guards.setdefault(key, {}).setdefault(buf, set()).add(sp.line)
                        self.guard_of.setdefault((sp.cta, buf), set()).add(key)
                    after_write = True
        self.releases: list[Release] = []
        self.owed: dict[tuple, dict] = {}          # lane -> {key: [Read]} never released
        self.reads: dict[tuple, list] = {}         # lane -> every guarded Read, in order
        for lane, seq in self.spans.items():
            self._replay(lane, seq)

    def _replay(self, lane, seq):
        owed = self.owed.setdefault(lane, {})
        inflight: list[list] = []                  # per issued wgmma: its Reads
        for i, sp in enumerate(seq):
            if sp.name == "async_dot" and "reads" in sp.args:
                mine = self._reads(lane, sp, sp.args["reads"], i)
                inflight.append(mine)
            elif sp.name == "async_dot_wait":
                keep = int(sp.args.get("pendings", 0))
                done = inflight[:len(inflight) - keep] if keep else inflight
                for group in done:
                    for r in group:
                        r.retired_line, r.retired_seq = sp.line, i
                inflight = inflight[len(inflight) - keep:] if keep else []
            elif sp.name in READS and sp.args.get("buffer"):
                for r in self._reads(lane, sp, [sp.args["buffer"]], i):
                    r.retired_line, r.retired_seq = sp.line, i
            elif sp.name == "barrier_arrive" and sp.barrier is not None:
                key = (sp.cta, sp.barrier, sp.slot)
                if key not in self.guards:
                    continue
                paid = owed.pop(key, [])
                late = [r for r in paid if r.retired_seq is None]
                verdict = "early" if late else ("ok" if paid else "unowed")
                self.releases.append(Release(lane, sp.line, key, i, verdict, paid, late))

    def _reads(self, lane, sp, buffers, i) -> list[Read]:
        by_key: dict = {}
        for buf in buffers:
            for key in self.guard_of.get((sp.cta, buf), ()):
                by_key.setdefault(key, []).append(buf)
        out = []
        for key, bufs in sorted(by_key.items(), key=lambda kv: str(kv[0])):
            r = Read(lane, sp.line, tuple(bufs), key, i)
            self.owed[lane].setdefault(key, []).append(r)
            self.reads.setdefault(lane, []).append(r)
            out.append(r)
        return out

    # -- questions a diagnosis asks ------------------------------------------------------------------------------
    def debtors(self, key) -> dict:
        """lane -> the Reads of ``key``'s buffers it never released."""
        return {lane: d[key] for lane, d in sorted(self.owed.items()) if d.get(key)}

    def readers(self, key) -> set:
        """The lanes that ever read a buffer ``key`` guards."""
        return {lane for lane, rs in self.reads.items() if any(r.key == key for r in rs)}

    def bad_releases(self, lane, cta, barrier, after_seq=-1) -> list[Release]:
        """``lane``'s early or unowed releases on any slot of ``barrier`` after its span ``after_seq``."""
        return [r for r in self.releases if r.lane == lane and r.key[0] == cta and r.key[1] == barrier
                and r.seq > after_seq and r.verdict != "ok"]

    def release_lines(self, lane, barrier) -> list[int]:
        return sorted({r.line for r in self.releases if r.lane == lane and r.key[1] == barrier and r.line})

    def insertion_line(self, read: Read, file) -> tuple[int | None, int | None]:
        """(the line a missing release of ``read`` belongs at, the line it goes after): after the read is retired
        and after the lane's other releases that follow it in the same loop (where a reader looks for it), past
        the comment lines right after that statement."""
        seq = self.spans[read.lane]
        anchor = read.retired_line or read.line
        start = read.retired_seq if read.retired_seq is not None else read.seq
        loop = loop_of(file, anchor)
        for sp in seq[start + 1:]:
            if sp.name == "barrier_wait":
                break
            if sp.name == "barrier_arrive" and sp.line and sp.line > anchor and loop_of(file, sp.line) is loop:
                anchor = sp.line
        if not file or not anchor:
            return None, anchor
        end = statement_end(file, anchor)
        line = end + 1
        while linecache.getline(file, line).strip().startswith("#"):
            line += 1
        return line, anchor


# -- source structure ---------------------------------------------------------------------------------------------
_trees: dict = {}


def _tree(file):
    tree = _trees.get(file)
    if tree is None:
        try:
            tree = ast.parse("".join(linecache.getlines(file)) or open(file).read())
        except (OSError, SyntaxError, ValueError):
            tree = False
        _trees[file] = tree
    return tree


def loop_of(file, line):
    """The innermost for/while loop (or function) whose body holds ``line``; None when unknown."""
    tree = _tree(file) if file and line else False
    if tree is False:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef)) and \
                node.lineno < line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.lineno:
                best = node
    return best


def statement_end(file, line) -> int:
    """The last line of the simple statement that starts at (or spans) ``line``."""
    tree = _tree(file)
    best = None
    if tree is not False:
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not isinstance(node, (ast.For, ast.While, ast.If, ast.With,
                                                                    ast.FunctionDef)) and \
                    node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno >= best.lineno:
                    best = node
    return (best.end_lineno or line) if best is not None else line
