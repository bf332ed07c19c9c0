"""Where a kernel's register spills run: the loops of its SASS, and the local loads and stores in each.

ptxas reports a kernel's spills as the bytes per thread of its ``LDL`` / ``STL`` code (``N bytes spill stores,
M bytes spill loads``): static code, wherever it sits. A warp-specialized kernel spills in its prologue (spilled
accumulators zeroed once), in its main loop (reloaded and stored back every k-step or KV block) and in its
epilogue; only the loop's run once per iteration. :func:`spill_placement` reads that off the SASS:

- basic blocks (a block ends at a branch, ``EXIT`` or ``RET``; a label starts one), the edges between them;
- dominators and *natural loops* (an edge to a block that dominates its source is a back edge; the loop is the
  head and every block that reaches the edge's source without passing the head). An mbarrier wait's retry path
  that ptxas places at the end of the function and that branches back to the wait is a loop of its own, of two
  blocks; a branch back from such a path to the instruction after the wait is not a back edge (the wait's
  block does not dominate the path);
- the *wgmma loops*: loops that hold an ``HGMMA`` and hold no smaller loop that does (the k-step or KV loop of a
  consumer warp group, not the persistent kernel's tile loop around it); their ``LDL`` / ``STL`` bytes per
  thread and their ``HGMMA`` count, of the loop of most ``HGMMA`` instructions (the most spilling of those).
  ptxas unrolls some loops (a body of four iterations and a remainder loop of one), so a loop's bytes are counted
  per wgmma instruction, which unrolling leaves alone, and the simulator charges them per wgmma instruction it runs.

>>> placement = spill_placement(report.sass)     # doctest: +SKIP
>>> placement.loop_loads, placement.loop_stores, placement.loads, placement.stores   # doctest: +SKIP
(748, 744, 1020, 1264)
"""
from __future__ import annotations

import dataclasses

from .wgmma_overlap import _TARGET, _read as _read_sass     # the one reader of SASS text

_ENDS = ("BRA", "EXIT", "RET", "BRX", "JMP", "JMX", "CALL")
_NO_FALL_THROUGH = ("BRA", "EXIT", "RET", "BRX", "JMP", "JMX")
#: bytes per thread of a local load / store by its type suffix (no suffix: 32 bits)
_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}


@dataclasses.dataclass(frozen=True)
class SpillPlacement:
    """A kernel's local-memory code (bytes per thread, as ptxas counts its spills) and the part of it in its
    wgmma loops (``loop_*``: per iteration of the largest such loop; ``loops``: how many wgmma loops there are)."""
    loads: int
    stores: int
    loop_loads: int
    loop_stores: int
    loops: int
    loop_wgmmas: int = 0        # HGMMA instructions in that loop's body (an unrolled loop holds several iterations')

    @property
    def per_iteration(self) -> int:
        """Bytes per thread one pass through a wgmma loop's body loads and stores (a loop ptxas unrolled runs
        several iterations of the source loop a pass): where no loop holds a wgmma, the whole kernel's (run once,
        as one iteration)."""
        return self.loop_loads + self.loop_stores if self.loops else self.loads + self.stores

    @property
    def per_wgmma(self) -> float:
        """Bytes per thread the wgmma loop loads and stores per wgmma instruction it runs: what its spills cost
        whatever ptxas unrolled (0 where no loop holds a wgmma)."""
        return (self.loop_loads + self.loop_stores) / self.loop_wgmmas if self.loops and self.loop_wgmmas else 0.0

    def __str__(self):
        if not self.loops:
            return "no loop holds a wgmma"
        return (f"{self.loop_loads} + {self.loop_stores} B in the wgmma loop's body, {self.loop_wgmmas} wgmma "
                f"instructions: {self.per_wgmma:.0f} B a wgmma")


@dataclasses.dataclass
class _Block:
    start: int
    end: int                    # one past its last instruction
    succ: set = dataclasses.field(default_factory=set)
    pred: set = dataclasses.field(default_factory=set)


def _read(sass: str) -> tuple[list, dict[str, int]]:
    """The instructions (``wgmma_overlap``'s: opcode, operands, whether predicated; in address order) and label ->
    instruction index."""
    return _read_sass(sass, "")


def _blocks(instrs: list, labels: dict[str, int]) -> list[_Block]:
    leaders = {0} | set(labels.values())
    for i, ins in enumerate(instrs):
        if ins.opcode.startswith(_ENDS) and i + 1 < len(instrs):
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < len(instrs))
    blocks = [_Block(s, starts[n + 1] if n + 1 < len(starts) else len(instrs)) for n, s in enumerate(starts)]
    at = {b.start: n for n, b in enumerate(blocks)}
    for n, b in enumerate(blocks):
        last = instrs[b.end - 1]
        target = _TARGET.search(last.operands)
        if last.opcode.startswith(("BRA", "BRX", "JMP", "JMX")) and target and target.group(1) in labels:
            b.succ.add(at[labels[target.group(1)]])
        if (last.predicated or not last.opcode.startswith(_NO_FALL_THROUGH)) and n + 1 < len(blocks):
            b.succ.add(n + 1)
    for n, b in enumerate(blocks):
        for s in b.succ:
            blocks[s].pred.add(n)
    return blocks


def _dominators(blocks: list[_Block]) -> dict[int, set]:
    """Block -> the blocks that dominate it (itself included), over the blocks reachable from the entry."""
    reach, stack = {0}, [0]
    while stack:
        for s in blocks[stack.pop()].succ:
            if s not in reach:
                reach.add(s)
                stack.append(s)
    dom = {n: set(reach) for n in reach}
    dom[0] = {0}
    changed = True
    while changed:
        changed = False
        for n in sorted(reach - {0}):
            preds = [dom[p] for p in blocks[n].pred if p in reach]
            new = set.intersection(*preds) | {n} if preds else {n}
            if new != dom[n]:
                dom[n] = new
                changed = True
    return dom


def loops(sass: str) -> list[tuple[int, frozenset]]:
    """The natural loops of ``sass`` (one function): (head block, its blocks' instruction indices), one per head
    (the back edges to a head joined)."""
    return _loops(*_read(sass))


def _loops(instrs: list, labels: dict[str, int]) -> list[tuple[int, frozenset]]:
    if not instrs:
        return []
    blocks = _blocks(instrs, labels)
    dom = _dominators(blocks)
    bodies: dict[int, set] = {}
    for u in dom:
        for h in blocks[u].succ:
            if h in dom[u]:                     # u -> h is a back edge
                body = bodies.setdefault(h, {h})
                stack = [u] if u not in body else []
                body.add(u)
                while stack:
                    for p in blocks[stack.pop()].pred:
                        if p not in body and p in dom:
                            body.add(p)
                            stack.append(p)
    return [(h, frozenset(i for b in body for i in range(blocks[b].start, blocks[b].end)))
            for h, body in bodies.items()]


def _local_bytes(instrs, kind: str) -> int:
    total = 0
    for ins in instrs:
        op = ins.opcode.split(".")
        if op[0] == kind:
            total += next((_WIDTH[s] for s in reversed(op[1:]) if s in _WIDTH), 4)
    return total


def spill_placement(sass: str) -> SpillPlacement:
    """The local loads and stores of ``sass`` (bytes per thread, as ptxas counts spills) and those of its
    wgmma loops, per iteration of the largest."""
    instrs, labels = _read(sass)
    wgmma = {i for i, ins in enumerate(instrs) if ins.base == "HGMMA"}
    found = [body for _, body in _loops(instrs, labels) if body & wgmma]
    inner = [b for b in found if not any(o < b and o & wgmma for o in found)]
    per_loop = [(_local_bytes((instrs[i] for i in b), "LDL"), _local_bytes((instrs[i] for i in b), "STL"),
                 len(b & wgmma)) for b in inner]
    # the loop of most wgmma instructions, the most spilling of those: an unrolled body, not its remainder loop
    ld, st, n = max(per_loop, key=lambda x: (x[2], x[0] + x[1])) if per_loop else (0, 0, 0)
    return SpillPlacement(loads=_local_bytes(instrs, "LDL"), stores=_local_bytes(instrs, "STL"),
                          loop_loads=ld, loop_stores=st, loops=len(inner), loop_wgmmas=n)
