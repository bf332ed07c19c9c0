"""Which buffers each release barrier guards, and the releases every lane owes.

Read off a finished run's Trace. A barrier slot *guards* the SMEM buffers a lane writes right after passing a
wait on it (the producer's ``barrier_wait(empty[s])`` before its TMA loads into ``a[s]``, ``b[s]``). A lane that
reads a guarded buffer (a wgmma, a ``local_load``, a TMA store) then *owes* that slot a release: a
``barrier_arrive`` on it once the read is retired (a wgmma by the ``async_dot_wait`` that leaves fewer in
flight). Replaying every lane's spans against that gives, per release, whether it paid a debt (``ok``), came
while the read it pays for was still in flight (``early``) or paid none (``unowed``: the lane read nothing the
slot guards since its last release there), and per lane the debts never paid. A deadlock on a release barrier
or a race past one is then traced to the release to add, move or re-aim (``sim/diagnosis/diagnose.py``, ``sim/diagnosis/races.py``).
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
        # a barrier that TMA bytes complete (expect_bytes, a load's barrier) says data landed: it guards nothing
        # a reader releases, even when its waiter then writes a buffer (an epilogue's staging tile)
        tma = {(sp.cta, sp.barrier, sp.slot) for seq in self.spans.values() for sp in seq
               if sp.name in ("barrier_expect_bytes", "async_descriptor_load") and sp.barrier is not None}
        for key in tma & set(self.guards):
            for buf in self.guards.pop(key):
                self.guard_of.get((key[0], buf), set()).discard(key)
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


# -- the line to change for a race past a release barrier -------------------------------------------------------
def _names(lanes) -> str:
    return ", ".join(f"{l[1]}[{l[2]}]" for l in sorted(lanes))


def _lines(ls) -> str:
    ls = sorted({n for n in ls if n})
    return ("line " if len(ls) == 1 else "lines ") + ", ".join(map(str, ls))


def _phase_lanes(trace, key) -> tuple[list, tuple | None]:
    """(distinct arriving lanes of each completed phase of slot ``key``, (arrive count, alloc line))."""
    phases, cur, init = [], set(), None
    for e in trace.barrier_events:
        if (e.cta, e.barrier, e.slot) != key:
            continue
        if e.kind == "init":
            init = (e.count, e.line)
        elif e.kind == "arrive" and e.task is not None:
            cur.add(e.lane)
        elif e.kind == "flip":
            phases.append(cur)
            cur = set()
    return phases, init


_recent: list = []          # [(trace, cta, n spans, Releases)]: a run's races share one replay


def _releases_of(trace, cta) -> Releases:
    for tr, c, n, rel in _recent:
        if tr is trace and c == cta and n == len(trace.spans):
            return rel
    rel = Releases(trace, {cta})
    _recent.insert(0, (trace, cta, len(trace.spans), rel))
    del _recent[4:]
    return rel


def race_release_cause(cta, buffer, reader_line, writer_line, trace, file=None):
    """(line, sentence, fix) for a write that overwrote ``buffer`` while a read of it at ``reader_line`` was not
    released, traced through the release barrier that guards the buffer, or None. In this order: the barrier
    counts fewer arrivals than the lanes that read what it guards and release it (the count leads), a release
    by a lane that read nothing the slot guards (another lane's slot), a release that comes before the read it
    pays for (move it after the read)."""
    rel = _releases_of(trace, cta)
    for key in sorted(rel.guard_of.get((cta, buffer), ()), key=str):
        readers = {lane for lane, rs in rel.reads.items()
                   if any(r.key == key and r.line == reader_line and buffer in r.buffers for r in rs)}
        if not readers:
            continue
        bar = f"{key[1]}[{key[2]}]"
        guarded = ", ".join(sorted(rel.guards[key]))
        releasing = {r.lane for r in rel.releases if r.key == key} & rel.readers(key)
        phases, init = _phase_lanes(trace, key)
        if init and phases and len(releasing) >= 2 and max(len(p) for p in phases) < len(releasing):
            count, alloc = init
            warp = "alloc_warp_barrier" in (linecache.getline(file, alloc) if file and alloc else "")
            what = "per-thread arrivals" if warp else "arrivals"
            sites = sorted({r.line for r in rel.releases if r.key == key})
            n = len(releasing)
            fix = (f"count every arriving thread at line {alloc}: num_warps x 32 x num_arrivals, with "
                   f"num_arrivals={n} for {n} releasing task(s)" if warp else
                   f"set arrive_count={n} at line {alloc} (one per releasing task), or release from fewer tasks")
            return (alloc, (
                f"line {alloc}: {key[1]} counts {count} {what} per phase, but {_names(releasing)} each read the "
                f"buffers a slot guards ({bar}: {guarded}) and release it ({_lines(sites)}): a phase completes with "
                f"the arrivals of {max(len(p) for p in phases)} of them, so the load at line {writer_line} refills "
                f"{buffer} while the read at line {reader_line} ({_names(readers)}) may still use it"), fix)
        for r in rel.releases:
            if r.key != key or r.verdict != "unowed":
                continue
            later = [x for x in rel.reads.get(r.lane, []) if x.key == key and x.seq > r.seq]
            if r.lane in readers and later:
                return (r.line, (
                    f"line {r.line}: {r.lane[1]}[{r.lane[2]}] releases {bar} before it reads {buffer} (line "
                    f"{later[0].line}): the load at line {writer_line} may then refill {buffer} while that read "
                    f"still uses it"),
                    f"move the release at line {r.line} after the read at line {later[0].line} (once it is retired)")
            if r.lane not in readers:
                own = sorted({x.key[2] for x in rel.reads.get(r.lane, []) if x.key[:2] == key[:2]})
                mine = (f" (it reads the buffers of {key[1]}{own} and never releases those)"
                        if own and any(rel.owed.get(r.lane, {}).get(key[:2] + (i,)) for i in own) else "")
                at = slot_line(file, r.line)
                where = f"line {r.line}" if at == r.line else f"line {r.line}, the slot written at line {at}"
                return (at, (
                    f"line {at}: {r.lane[1]}[{r.lane[2]}] releases {bar} ({where}), which guards {guarded}, but "
                    f"has read none of them since its last release there{mine}: {_names(readers)} still reads "
                    f"{buffer} (line {reader_line}) when the load at line {writer_line} refills it: the release "
                    f"names another lane's slot"),
                    f"release the slot whose buffers this lane read (the one its wait on the full barrier names), "
                    f"not {bar}: fix the slot index at line {at}")
    return None


def slot_line(file, line) -> int | None:
    """Where the slot a ``barrier_arrive`` at ``line`` names is written: the call's own line when it indexes the
    barrier there (``barrier_arrive(empty[prev])``), the last assignment before it of the variable it passes
    (``empty_a = tlx.local_view(bars_empty_a, buf + ...)``) otherwise."""
    tree = _tree(file) if file and line else False
    if tree is False:
        return line
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == line and node.args and \
                getattr(node.func, "attr", getattr(node.func, "id", "")) == "barrier_arrive":
            call = node
            break
    if call is None or not isinstance(call.args[0], ast.Name):
        return line
    name, best = call.args[0].id, None
    scope = loop_of(file, line)
    while scope is not None and not isinstance(scope, ast.FunctionDef):
        scope = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and
                      n.lineno < line <= (n.end_lineno or n.lineno)), None)
    for node in ast.walk(scope or tree):
        if isinstance(node, ast.Assign) and node.lineno < line and \
                any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if best is None or node.lineno > best.lineno:
                best = node
    return best.lineno if best is not None else line
