"""Grade a puzzle answer on the CPU simulator (and the barrier-protocol checker when it is installed).

A grade runs the learner's kernel over ``schedules`` interleavings with fresh random
inputs, then checks, in order: blanks left, the run itself (deadlock, races, other
simulator findings), the spec's structural rules, the outputs against torch, the
checker's errors. The first failure is the verdict, with the puzzle's hint for that
kind of failure. A pass shows the cost: simulated cycles and SMEM used (offline compile).
"""
from __future__ import annotations

import dataclasses
import html
import itertools
import linecache
import re
import textwrap
from typing import Any

from ..errors import TLXWorkbenchError

_BLANK = re.compile(r"\b___\b")
_counter = itertools.count()


class PuzzleError(TLXWorkbenchError):
    """A puzzle name or an answer the grader cannot even load."""


@dataclasses.dataclass
class GradeResult:
    """The verdict on one answer: ``passed``, ``message`` (what failed), ``hint``, and the cost."""
    puzzle: str
    passed: bool
    message: str
    hint: str = ""
    detail: str = ""                 # the simulator's own diagnosis (wait-for graph, race lines)
    line: int | None = None
    cycles: float | None = None
    smem_bytes: int | None = None
    par_cycles: float | None = None
    sim: Any = None                  # the SimResult of the first schedule that failed (or the last run)
    report: Any = None               # the CompileReport (passing answers)

    @property
    def star(self) -> bool:
        """Passed and at or under the puzzle's cycle target."""
        return bool(self.passed and self.par_cycles and self.cycles is not None and self.cycles <= self.par_cycles)

    def cost(self) -> str:
        parts = []
        if self.cycles is not None:
            parts.append(f"{self.cycles:.0f} simulated cycles" + (f" (par {self.par_cycles:.0f})"
                                                                  if self.par_cycles else ""))
        if self.smem_bytes is not None:
            parts.append(f"{self.smem_bytes} B SMEM")
        return ", ".join(parts)

    def __repr__(self):
        head = f"{'PASS' if self.passed else 'FAIL'} {self.puzzle}: {self.message}"
        if self.star:
            head += "  *"
        lines = [head]
        if self.cost():
            lines.append(f"  cost: {self.cost()}")
        if self.hint and not self.passed:
            lines.append(f"  hint: {self.hint}")
        if self.detail and not self.passed:
            lines.append("  " + self.detail.replace("\n", "\n  "))
        return "\n".join(lines)

    def _repr_html_(self):
        colour = "#27ae60" if self.passed else "#c0392b"
        star = " &#9733;" if self.star else ""
        out = [f"<div class='tlxwb-grade' style='border-left:4px solid {colour};padding:4px 8px'>",
               f"<b style='color:{colour}'>{'PASS' if self.passed else 'FAIL'}</b>{star} "
               f"<code>{html.escape(self.puzzle)}</code>: {html.escape(self.message)}"]
        if self.cost():
            out.append(f"<div>cost: {html.escape(self.cost())}</div>")
        if self.hint and not self.passed:
            out.append(f"<div><i>hint:</i> {html.escape(self.hint)}</div>")
        if self.detail and not self.passed:
            out.append(f"<details><summary>simulator diagnosis</summary><pre>{html.escape(self.detail)}</pre>"
                       "</details>")
        if self.sim is not None and not self.passed and self.sim.trace.barrier_events:
            try:      # the barrier phases up to the failure: where the protocol went wrong, as a picture
                from .. import views
                svg = views.render(self.sim.trace, "barrier_svg")
                if svg is not None:
                    out.append(f"<details><summary>barrier phases</summary>{svg}</details>")
            except Exception:  # noqa: BLE001 - a picture must never hide the verdict
                pass
        out.append("</div>")
        return "".join(out)


def _puzzle(name):
    from .specs import PUZZLES
    if hasattr(name, "solution"):
        return name
    if name not in PUZZLES:
        raise PuzzleError(f"no puzzle named {name!r}", hint=f"pick one of {', '.join(PUZZLES)}")
    return PUZZLES[name]


def _blank_lines(src: str) -> list[int]:
    return [i + 1 for i, line in enumerate(src.splitlines()) if _BLANK.search(line.split("#")[0])]


def kernel_from_source(src: str, name: str | None = None):
    """Define the ``@triton.jit`` kernel written in ``src`` (as a notebook cell would) and return it.

    The source is registered in ``linecache`` so Triton, the simulator and the compiler can read it.
    """
    src = textwrap.dedent(src)
    filename = f"<puzzle answer {next(_counter)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
    import triton
    import triton.language as tl
    import triton.language.extra.tlx as tlx
    ns: dict = {"triton": triton, "tl": tl, "tlx": tlx}
    try:
        exec(compile(src, filename, "exec"), ns)
    except SyntaxError as e:
        raise PuzzleError(f"the answer does not parse: {e.msg}", file=filename, line=e.lineno,
                          hint="fix the line shown") from None
    from triton.runtime.jit import JITFunction
    kernels = {k: v for k, v in ns.items() if isinstance(v, JITFunction)}
    if not kernels:
        raise PuzzleError("the answer defines no @triton.jit kernel", file=filename,
                          hint="start from puzzle.template(): it is a whole @triton.jit function")
    return kernels.get(name) if name in kernels else next(iter(kernels.values()))


def _source_of(kernel) -> str:
    return getattr(kernel, "src", None) or ""


def _with_kind(result: GradeResult, hints: dict, kind: str) -> GradeResult:
    result.hint = hints.get(kind, "")
    return result


def grade(puzzle, answer, *, schedules: int | None = None, cost: bool = True) -> GradeResult:
    """Grade ``answer`` (a ``@triton.jit`` kernel or its source text) for ``puzzle`` (a name).

    >>> from tlx_workbench.puzzles import PUZZLES, grade
    >>> grade("arrive_count", PUZZLES["arrive_count"].fill("2")).passed      # doctest: +SKIP
    True
    """
    from ..errors import SimulationError
    from ..sim import simulate
    p = _puzzle(puzzle)
    src = answer if isinstance(answer, str) else _source_of(answer)
    blanks = _blank_lines(src)
    if blanks:
        return GradeResult(p.name, False, f"fill in the blank(s) ___ on line(s) {', '.join(map(str, blanks))}",
                           hint=p.spec.splitlines()[-1], line=blanks[0])
    kernel = kernel_from_source(src, p.kernel_name) if isinstance(answer, str) else answer
    last = None
    for seed in range(schedules or p.schedules):
        launch = p.make_launch()
        try:
            res = simulate(kernel, *launch.args, grid=(1,), seed=seed, on_deadlock="return", **launch.constexprs)
        except SimulationError as e:
            return GradeResult(p.name, False, f"the simulator could not run the answer: {e.message}",
                               hint=e.hint or "", line=e.line)
        last = res
        if res.deadlock is not None:
            d = res.deadlock
            # the blocked task the diagnosis points at (its line is the report's line)
            first = next((b for b in d.blocked if b.line == d.line), d.blocked[0] if d.blocked else None)
            if first is not None and first.barrier:
                who = f"{first.lane[1]}[{first.lane[2]}]"
                msg = (f"deadlock: {who} waits forever at line {first.line} on {first.barrier} "
                       f"(missing {first.missing_arrivals} arrival(s), {first.missing_bytes} byte(s))")
            else:
                msg = f"deadlock: {d.message.splitlines()[0]}"
            return _with_kind(GradeResult(p.name, False, msg, detail=d.text(), line=d.line, sim=res), p.hints,
                              "deadlock")
        if res.errors:          # warnings about the outputs: the comparison below says what is wrong
            f = res.errors[0]
            kind = "race" if f.kind == "race" else ("named" if "named" in f.kind and "named" in p.hints
                                                    else "race")
            where = f" (line {f.line}" + (f" vs line {f.other_line})" if f.other_line else ")") if f.line else ""
            return _with_kind(GradeResult(p.name, False, f"{f.kind}{where}: {f.message}",
                                          detail="\n".join(repr(x) for x in res.findings), line=f.line, sim=res),
                              p.hints, kind)
        if p.requires is not None:
            why = p.requires(res)
            if why:
                return GradeResult(p.name, False, why, sim=res)
        for i, (out, ref) in enumerate(zip(launch.outputs, launch.expected)):
            bad = _mismatch(out, ref)
            if bad:
                name = f"output {i}" if len(launch.outputs) > 1 else "the output"
                return _with_kind(GradeResult(p.name, False, f"{name} is wrong under schedule {seed}: {bad}",
                                              sim=res), p.hints, "mismatch")
    result = GradeResult(p.name, True, f"correct under {schedules or p.schedules} schedule(s), no deadlock, "
                                       "no races", cycles=last.cycles, sim=last)
    if p.par:
        result.par_cycles = _par_cycles(p, last.seed)
    if cost:
        _add_cost(result, p, kernel)
    return result


_PAR: dict = {}


def _par_cycles(p, seed) -> float:
    """The reference solution's simulated cycles under the same schedule: the target for a star."""
    from ..sim import simulate
    if (p.name, seed) not in _PAR:
        launch = p.make_launch()
        res = simulate(p.solution, *launch.args, grid=(1,), seed=seed, on_deadlock="return", **launch.constexprs)
        _PAR[(p.name, seed)] = res.cycles
    return _PAR[(p.name, seed)]


def _mismatch(out, ref) -> str:
    import torch
    o, r = out.float(), ref.float()
    if o.shape != r.shape:
        return f"shape {tuple(o.shape)}, expected {tuple(r.shape)}"
    close = torch.isclose(o, r, atol=1e-3, rtol=1e-3)
    if bool(close.all()):
        return ""
    n = int((~close).sum())
    i = int((~close).flatten().nonzero()[0])
    return f"{n} of {o.numel()} values differ (first at flat index {i}: got {o.flatten()[i]:.4g}, " \
           f"expected {r.flatten()[i]:.4g})"


def _add_cost(result: GradeResult, p, kernel) -> None:
    """SMEM from an offline compile, and the barrier-protocol checker's errors when it is installed."""
    import tlx_workbench as wb
    launch = p.make_launch()
    try:
        report = wb.compile(kernel, *launch.args, target="sm_90", **launch.constexprs)
    except TLXWorkbenchError as e:
        result.passed = False
        result.message = f"runs in the simulator but does not compile for sm_90: {e.message}"
        result.hint, result.line = e.hint or "", e.line
        return
    result.report = report
    result.smem_bytes = report.resources.smem_bytes
    try:
        from ..checker import check
    except ImportError:
        return
    try:
        findings = check(report)
    except Exception:  # noqa: BLE001 - the checker is young: never let it hide a grade
        return
    errors = [f for f in (findings or []) if getattr(f, "severity", "error") == "error"]
    if errors:
        f = errors[0]
        result.passed = False
        result.message = (f"the barrier-protocol checker objects ({getattr(f, 'rule_id', 'rule')}): "
                          f"{getattr(f, 'message', f)}")
        result.hint = getattr(f, "fix", "") or getattr(f, "hint", "") or ""
        result.line = getattr(f, "line", None)


def check_references(names=None) -> dict:
    """Grade every puzzle's reference solution; ``{name: GradeResult}`` (all should pass)."""
    from .specs import PUZZLES
    return {n: grade(n, PUZZLES[n].solution_source()) for n in (names or PUZZLES)}
