"""The puzzles: what each asks, its blanks, how it is launched, its torch reference and its hints.

A puzzle's template is its reference solution (``solutions.py``) with the asked-for
pieces replaced by ``___``; :func:`Puzzle.template` builds it, so the two cannot drift.
"""
from __future__ import annotations

import dataclasses
import inspect
import textwrap
from typing import Callable

from . import solutions


@dataclasses.dataclass
class Launch:
    """One launch of a puzzle kernel: positional args, constexprs, the outputs and their expected values."""
    args: tuple
    constexprs: dict
    outputs: list            # tensors the kernel writes
    expected: list           # torch reference values, same order


@dataclasses.dataclass
class Puzzle:
    """One exercise. ``blanks``: (text in the solution, what the template shows instead)."""
    name: str
    title: str
    spec: str
    solution: Callable
    blanks: list
    make_launch: Callable[[], Launch]
    hints: dict                               # failure kind -> what to think about
    par: bool = False                         # star when as fast as the reference solution
    requires: Callable | None = None          # (SimResult) -> message when a structural rule is broken
    schedules: int = 4

    @property
    def kernel_name(self) -> str:
        return self.solution.fn.__name__

    def solution_source(self) -> str:
        return textwrap.dedent(inspect.getsource(self.solution.fn))

    def template(self) -> str:
        """The source the learner starts from: the solution with its blanks as ``___``."""
        src = self.solution_source()
        for answer, blank in self.blanks:
            if src.count(answer) != 1:
                raise ValueError(f"puzzle {self.name}: blank {answer!r} occurs {src.count(answer)} times")
            src = src.replace(answer, blank)
        return src

    def fill(self, *values: str) -> str:
        """The template with its ``___`` blanks replaced, in order, by ``values`` (source text).

        >>> PUZZLES["arrive_count"].fill("2") == PUZZLES["arrive_count"].solution_source()
        True
        """
        src = self.template()
        if src.count("___") != len(values):
            raise ValueError(f"puzzle {self.name} has {src.count('___')} blank(s), got {len(values)} value(s)")
        for v in values:
            src = src.replace("___", str(v), 1)
        return src

    def __repr__(self):
        return f"Puzzle {self.name}: {self.title}\n\n{self.spec}\n\n{self.template()}"

    def _repr_html_(self):
        import html
        return (f"<div class='tlxwb-puzzle' style='border-left:4px solid #2980b9;padding:4px 8px'>"
                f"<b>Puzzle <code>{html.escape(self.name)}</code>: {html.escape(self.title)}</b>"
                f"<p style='white-space:pre-wrap'>{html.escape(self.spec)}</p>"
                f"<pre>{html.escape(self.template())}</pre></div>")


# -- launches (small shapes: the whole set grades in a few seconds on a CPU) ------------------------
def _rand(*shape, dtype=None):
    import torch
    x = torch.randn(*shape)
    return x.to(dtype) if dtype is not None else x


def _arrive_count_launch():
    import torch
    x = _rand(64)
    out = torch.zeros(64)
    return Launch((x, out), {"HALF": 32}, [out], [x * 2.0])


def _phases_launch():
    import torch
    x = _rand(4 * 32)
    out = torch.zeros(32)
    return Launch((x, out), {"BLOCK": 32, "ROUNDS": 4}, [out], [x.view(4, 32).sum(0)])


def _expect_bytes_launch():
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    a, b = _rand(64, 32, dtype=torch.float16), _rand(32, 64, dtype=torch.float16)
    ao, bo = torch.zeros_like(a), torch.zeros_like(b)
    ad = TensorDescriptor(a, list(a.shape), [32, 1], [64, 32])
    bd = TensorDescriptor(b, list(b.shape), [64, 1], [32, 64])
    return Launch((ad, bd, ao, bo), {"BM": 64, "BK": 32, "BN": 64}, [ao, bo], [a.clone(), b.clone()])


def _tiles_launch(block_rows, op, stages=2):
    def make():
        import torch
        from triton.tools.tensor_descriptor import TensorDescriptor
        x = _rand(6 * 32, 32, dtype=torch.float16)
        out = torch.zeros_like(x)
        d = TensorDescriptor(x, list(x.shape), [32, 1], [block_rows, 32])
        return Launch((d, out, 6), {"BM": 32, "BK": 32, "STAGES": stages}, [out], [op(x)])
    return make


def _named_launch():
    import torch
    x = _rand(32)
    out = torch.zeros(32)
    return Launch((x, out), {"BLOCK": 32}, [out], [x - 1.0])


def _two_consumer_replicas(sim):
    reps = {rep for (task, rep) in sim.stats if task != "default"}
    if len(reps) != 2:
        return (f"the spec asks for 2 consumer replicas; the kernel ran {len(reps)} "
                "(set replicate= on the consumer task)")
    return None


PUZZLES: dict[str, Puzzle] = {p.name: p for p in [
    Puzzle(
        "arrive_count", "How many arrivals?",
        "Two producer replicas (replicate=2) each write one half of the output into SMEM and then arrive on "
        "`ready`. The consumer waits on `ready` once and copies both halves out.\n"
        "Fill in: the barrier's arrive_count, so the consumer reads only after BOTH halves are written.",
        solutions.arrive_count, [("arrive_count=2)", "arrive_count=___)")], _arrive_count_launch,
        {"deadlock": "arrive_count is the number of barrier_arrive calls that complete ONE phase; count the "
                     "tasks (times their replicas) that arrive on `ready`, each arrives once. Too many and the "
                     "phase never completes; too few and it completes early (and again, flipping the parity back)",
         "race": "the phase completed before every producer had written its half: the count is too small",
         "mismatch": "the consumer read a half before it was written: the count is too small"}),
    Puzzle(
        "phases", "Which parity?",
        "One SMEM slot is reused ROUNDS times. The producer waits for `empty` (slot free), writes, arrives on "
        "`full`; the consumer waits for `full`, reads, arrives on `empty`.\n"
        "barrier_wait(bar, p) returns once the barrier's phase with parity p has COMPLETED; a fresh barrier is "
        "in phase 0, and its 'previous phase' (parity 1) counts as completed.\n"
        "Fill in: the parity each side waits for in round r.",
        solutions.phases, [("tlx.barrier_wait(empty[0], (r & 1) ^ 1)", "tlx.barrier_wait(empty[0], ___)"),
                           ("tlx.barrier_wait(full[0], r & 1)", "tlx.barrier_wait(full[0], ___)")],
        _phases_launch,
        {"deadlock": "round r is phase r of each barrier: which parity does phase r have? The producer's first "
                     "wait on a fresh `empty` must pass at once: which parity counts as already completed then?",
         "race": "a wait passed too early: the producer overwrote the slot before the consumer released it, "
                 "or the consumer read before the producer filled it; check each wait's parity",
         "mismatch": "a round was read twice or skipped: check each wait's parity"}, par=True),
    Puzzle(
        "expect_bytes", "How many bytes?",
        "The loader issues two TMA loads, tile A (BM x BK, fp16) and tile B (BK x BN, fp16), both completing "
        "the one barrier `loaded`. The barrier's phase completes when its arrivals AND its expected transaction "
        "bytes have all come in.\n"
        "Fill in: the bytes the loader tells `loaded` to expect (an expression of BM, BK, BN).",
        solutions.expect_bytes, [("BM * BK * 2 + BK * BN * 2", "___")], _expect_bytes_launch,
        {"deadlock": "the barrier waits for more bytes than the loads bring: fp16 is 2 bytes, and both tiles "
                     "land on the same barrier (BM*BK + BK*BN elements)",
         "race": "the phase completed before all bytes landed (too few bytes expected): the consumer read a "
                 "tile still in flight; count both tiles, 2 bytes per fp16",
         "mismatch": "a tile was read before it landed: expect the bytes of both tiles"}),
    Puzzle(
        "ring", "Which slot, which phase?",
        "A STAGES-deep ring copies N_TILES tiles (and doubles them). Tile i goes through slot s of the ring; "
        "each slot has its own full/empty barrier pair, and each use of a slot is one phase of its barriers.\n"
        "Fill in: the slot s and the parity p of tile i (the same two lines appear on both sides).",
        solutions.ring, [("""                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(empty[s]""", """                s = ___
                p = ___
                tlx.barrier_wait(empty[s]"""),
                         ("""                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(full[s]""", """                s = ___
                p = ___
                tlx.barrier_wait(full[s]""")],
        _tiles_launch(32, lambda x: x * 2.0),
        {"deadlock": "tiles take turns through the STAGES slots, round and round; a slot's k-th use is phase k "
                     "of its barriers: which use of its slot is tile i, and what is that phase's parity?",
         "race": "two tiles were in the same slot at once, or a wait passed on the wrong phase: tiles take turns "
                 "through the slots, one use = one phase",
         "mismatch": "a tile was copied from the wrong slot: consecutive tiles go to consecutive slots, wrapping "
                     "round after STAGES"},
        par=True),
    Puzzle(
        "task_split", "Split the consumer",
        "The loader brings each tile in as two halves (two TMA loads, one `full` barrier). The spec: TWO "
        "consumer replicas, replica r takes half r of every tile (adds 1 and stores it). A ring slot may be "
        "refilled only when BOTH replicas have released it.\n"
        "Fill in (in the order they appear): the arrive_count of the `empty` barriers, and the consumer "
        "task's replicate=.",
        solutions.task_split, [("replicate=2)", "replicate=___)"),
                               ("empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)",
                                "empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=___)")],
        _tiles_launch(16, lambda x: x + 1.0),
        {"deadlock": "each replica arrives on empty[s] once per tile: the count is the number of consumer "
                     "replicas (and the loader waits for that many)",
         "race": "the loader refilled a slot one replica was still reading: `empty` must count the arrivals "
                 "of every replica",
         "mismatch": "a half was not stored, or stored twice: one replica per half"},
        requires=_two_consumer_replicas, par=True),
    Puzzle(
        "named_barrier", "Count the threads",
        "The default task (4 warps) writes SMEM and arrives on named barrier 3; the other task (4 warps) waits "
        "on it, then reads. Named barriers count THREADS (a warp is 32), and both sides must name the same "
        "count: every thread taking part.\n"
        "Fill in: the thread count on both sides.",
        solutions.named_barrier, [("tlx.named_barrier_arrive(3, 256)", "tlx.named_barrier_arrive(3, ___)"),
                                  ("tlx.named_barrier_wait(3, 256)", "tlx.named_barrier_wait(3, ___)")],
        _named_launch,
        {"deadlock": "the barrier never saw the count it waits for: count the threads of BOTH tasks "
                     "(4 warps x 32 threads each side)",
         "named": "both sides must give the same count, the threads of both warp groups together",
         "race": "the reader passed the barrier before the writer arrived: count the threads of both tasks",
         "mismatch": "the reader ran ahead of the writer: count the threads of both tasks"}),
]}
