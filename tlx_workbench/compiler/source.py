"""The kernel's source and the map of its lines through the IR stages: plain data.

Below both ``report.py`` (a CompileReport holds them) and ``sourcemap.py`` (which reads the
stages' locations into a SourceMap), so neither imports the other for them.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class SourceInfo:
    """The kernel's Python source."""
    file: str
    first_line: int                 # line in `file` of the first line of `text` (the first decorator)
    text: str                       # the whole function's source (decorators included)
    def_line: int = 0               # line of the `def` itself

    def line_text(self, line: int) -> str:
        """Text of absolute line `line` of `file` (empty if outside the function)."""
        idx = line - self.first_line
        lines = self.text.splitlines()
        return lines[idx] if 0 <= idx < len(lines) else ""


@dataclasses.dataclass
class SourceMap:
    """Kernel source line <-> lines of each IR stage (1-based line numbers everywhere).

    `forward[stage][src_line]` = sorted stage lines produced by that source line;
    `backward[stage][stage_line]` = the source line a stage line came from.
    Stages: "ttir", "ttgir", "llir", "ptx", "sass".
    """
    file: str
    forward: dict[str, dict[int, list[int]]] = dataclasses.field(default_factory=dict)
    backward: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)

    def lines_for(self, stage: str, src_line: int) -> list[int]:
        return self.forward.get(stage, {}).get(src_line, [])

    def source_line(self, stage: str, stage_line: int) -> int | None:
        return self.backward.get(stage, {}).get(stage_line)
