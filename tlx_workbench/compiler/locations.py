"""MLIR source locations (``loc(...)``) as Triton prints them, resolved to Python lines.

Triton's TTIR/TTGIR text ends every op with ``loc(#locN)`` (or an inline
location) and lists ``#locN = loc(...)`` definitions at the end of the module.
Locations nest: a *name* location (``loc("bars_full_a"(#loc7))``) carries the
Python variable an op was assigned to, a *callsite* location records inlining
(``callsite(#callee at #caller)``), and a *file* location gives file:line:col.

>>> table = LocTable.from_text('#loc1 = loc("k.py":12:5)\\n#loc2 = loc("acc"(#loc1))')
>>> table.resolve("#loc2").name, table.resolve("#loc2").frames[0].line
('acc', 12)
"""
from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Frame:
    file: str
    line: int
    col: int = 0


@dataclasses.dataclass(frozen=True)
class Loc:
    """A resolved location: frames innermost (callee) first, and the nearest variable name."""
    frames: tuple[Frame, ...] = ()
    name: str | None = None

    def pick(self, file: str | None = None, first: int | None = None, last: int | None = None) -> Frame | None:
        """The frame a user thinks of: the innermost one in `file` (the kernel's file, so an
        inlined @jit helper of that file keeps its own line), else the outermost call site.
        `first`/`last` (the kernel's line range) break ties in favour of the kernel body."""
        if not self.frames:
            return None
        if file is not None:
            in_file = [f for f in self.frames if f.file == file]
            if in_file:
                return in_file[0]
        return self.frames[-1]

    def lines_in(self, file: str) -> list[int]:
        """Every line of `file` on the inlining chain, innermost first."""
        out = []
        for f in self.frames:
            if f.file == file and f.line not in out:
                out.append(f.line)
        return out


UNKNOWN = Loc()

_DEF_RE = re.compile(r"^(#loc\d*)\s*=\s*loc\((.*)\)\s*$")
_FILE_RE = re.compile(r'^"([^"]*)":(\d+):(\d+)$')
_NAMED_REF_RE = re.compile(r'^"([^"]*)"\((#loc\d*)\)$')
_CALLSITE_RE = re.compile(r"^callsite\((#loc\d*) at (#loc\d*)\)$")


class _Parser:
    """Recursive descent over the body of ``loc(...)``."""

    def __init__(self, text: str, table: "LocTable"):
        self.s = text
        self.i = 0
        self.table = table

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def peek(self, tok: str) -> bool:
        self.ws()
        return self.s.startswith(tok, self.i)

    def eat(self, tok: str) -> bool:
        if self.peek(tok):
            self.i += len(tok)
            return True
        return False

    def string(self) -> str:
        self.ws()
        assert self.s[self.i] == '"'
        j = self.i + 1
        out = []
        while j < len(self.s) and self.s[j] != '"':
            if self.s[j] == "\\" and j + 1 < len(self.s):
                out.append(self.s[j + 1])
                j += 2
                continue
            out.append(self.s[j])
            j += 1
        self.i = j + 1
        return "".join(out)

    def number(self) -> int:
        self.ws()
        m = re.compile(r"\d+").match(self.s, self.i)
        if not m:
            return 0
        self.i = m.end()
        return int(m.group())

    def parse(self) -> Loc:
        self.ws()
        if self.eat("unknown"):
            return UNKNOWN
        if self.peek("#loc"):
            m = re.compile(r"#loc\d*").match(self.s, self.i)
            self.i = m.end()
            return self.table.resolve(m.group())
        if self.eat("callsite("):
            callee = self.parse()
            self.eat("at")
            caller = self.parse()
            self.eat(")")
            return Loc(callee.frames + caller.frames, callee.name or caller.name)
        if self.eat("fused"):
            if self.peek("<"):  # fused<metadata>[...]
                depth = 0
                while self.i < len(self.s):
                    c = self.s[self.i]
                    self.i += 1
                    depth += c == "<"
                    depth -= c == ">"
                    if depth == 0:
                        break
            self.eat("[")
            parts = [self.parse()]
            while self.eat(","):
                parts.append(self.parse())
            self.eat("]")
            frames = next((p.frames for p in parts if p.frames), ())
            name = next((p.name for p in parts if p.name), None)
            return Loc(frames, name)
        if self.peek('"'):
            text = self.string()
            if self.eat(":"):  # "file":line:col [to :line:col]
                line = self.number()
                col = self.number() if self.eat(":") else 0
                if self.eat("to"):
                    self.eat(":"), self.number(), self.eat(":"), self.number()
                return Loc((Frame(text, line, col),))
            if self.eat("("):  # "name"(child)
                child = self.parse()
                self.eat(")")
                return Loc(child.frames, text)
            return Loc((), text)
        # something we do not know: skip it rather than fail the whole report
        self.i = len(self.s)
        return UNKNOWN


class LocTable:
    """The ``#locN`` definitions of one module, resolved on demand."""

    def __init__(self, defs: dict[str, str]):
        self._defs = defs
        self._memo: dict[str, Loc] = {}

    @classmethod
    def from_text(cls, text: str) -> "LocTable":
        defs = {}
        # definitions sit at the end of the module, and some (those attributes refer to) at the top
        for line in text.splitlines():
            if line.startswith("#loc"):
                m = _DEF_RE.match(line)
                if m:
                    defs[m.group(1)] = m.group(2)
        return cls(defs)

    def resolve(self, ref: str) -> Loc:
        loc = self._memo.get(ref)
        if loc is None:
            body = self._defs.get(ref)
            self._memo[ref] = UNKNOWN  # guards against cycles
            loc = self._parse_body(body) if body is not None else UNKNOWN
            self._memo[ref] = loc
        return loc

    def _parse_body(self, body: str) -> Loc:
        # the forms Triton prints nearly always, by regex; anything else by the full parser
        m = _FILE_RE.match(body)
        if m:
            return Loc((Frame(m.group(1), int(m.group(2)), int(m.group(3))),))
        m = _NAMED_REF_RE.match(body)
        if m:
            child = self.resolve(m.group(2))
            return Loc(child.frames, m.group(1))
        m = _CALLSITE_RE.match(body)
        if m:
            callee, caller = self.resolve(m.group(1)), self.resolve(m.group(2))
            return Loc(callee.frames + caller.frames, callee.name or caller.name)
        if body == "unknown":
            return UNKNOWN
        return _Parser(body, self).parse()

    def parse(self, body: str) -> Loc:
        """Resolve the inside of an inline ``loc(...)``."""
        if body.startswith("#loc"):
            return self.resolve(body)
        loc = self._memo.get(body)
        if loc is None:
            loc = self._memo[body] = self._parse_body(body)
        return loc

    def of_line(self, line: str) -> Loc:
        """The location that ends an IR line, UNKNOWN if it has none."""
        if "loc(" not in line:
            return UNKNOWN
        stripped = line.rstrip()
        i = stripped.rfind(" loc(")
        if i < 0 or not stripped.endswith(")"):
            return UNKNOWN
        return self.parse(stripped[i + 5:-1])
