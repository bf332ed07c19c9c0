"""TLX puzzles: small exercises on counts, phases, expect-bytes and task splits, graded on the simulator.

>>> from tlx_workbench.puzzles import PUZZLES, grade
>>> p = PUZZLES["arrive_count"]
>>> print(p.template())                      # doctest: +SKIP
>>> grade("arrive_count", p.fill("2"))       # doctest: +SKIP
PASS arrive_count: correct under 4 schedule(s), no deadlock, no races
"""
from .grader import GradeResult, PuzzleError, check_references, grade, kernel_from_source
from .specs import PUZZLES, Launch, Puzzle

__all__ = ["PUZZLES", "Puzzle", "Launch", "grade", "GradeResult", "PuzzleError", "check_references",
           "kernel_from_source"]
