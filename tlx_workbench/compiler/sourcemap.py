"""Kernel source line <-> lines of every IR stage.

Each stage records where its lines came from in its own way: TTIR/TTGIR end ops
with ``loc(...)``, LLVM IR attaches ``!dbg`` ``DILocation``s, PTX has ``.loc``
directives, and SASS from ``nvdisasm -gi`` has ``//## File "...", line N``
comments. Every one of them is read into frames (innermost first, inlining
included) and mapped to the kernel's own line: the innermost frame inside the
kernel function, else its call site in the kernel.
"""
from __future__ import annotations

import functools
import re

from .locations import Frame, Loc, LocTable
from .source import SourceMap


def _mlir_frames(text: str) -> dict[int, Loc]:
    table = LocTable.from_text(text)
    out = {}
    for i, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#loc") or "loc(" not in line:
            continue
        loc = table.of_line(line)
        if loc.frames:
            out[i] = loc
    return out


_DILOC_RE = re.compile(r"^(!\d+) = (?:distinct )?!DILocation\((.*)\)\s*$")
_DISCOPE_RE = re.compile(r"^(!\d+) = (?:distinct )?!(DISubprogram|DILexicalBlock\w*|DIFile)\((.*)\)\s*$")
_DBG_RE = re.compile(r"!dbg (!\d+)")
_DI_LINE, _DI_COL = re.compile(r"line: (\d+)"), re.compile(r"column: (\d+)")
_DI_SCOPE, _DI_INLINED = re.compile(r"scope: (!\d+)"), re.compile(r"inlinedAt: (!\d+)")


def _llir_frames(text: str) -> dict[int, Loc]:
    dilocs: dict[str, tuple[int, int, str, str | None]] = {}
    scopes: dict[str, tuple[str, str]] = {}
    # metadata lines (`!12 = ...`) are the module's tail: only that part is read line by line
    first_meta = 0 if text.startswith("!") else text.find("\n!") + 1
    for line in text[first_meta:].splitlines() if first_meta or text.startswith("!") else ():
        if not line.startswith("!"):
            continue
        m = _DILOC_RE.match(line)
        if m:
            body = m.group(2)
            ln, col = _DI_LINE.search(body), _DI_COL.search(body)
            sc, ia = _DI_SCOPE.search(body), _DI_INLINED.search(body)
            dilocs[m.group(1)] = (int(ln.group(1)) if ln else 0, int(col.group(1)) if col else 0,
                                  sc.group(1) if sc else "", ia.group(1) if ia else None)
            continue
        m = _DISCOPE_RE.match(line)
        if m:
            scopes[m.group(1)] = (m.group(2), m.group(3))

    def file_of(scope: str, depth=0) -> str:
        kind, body = scopes.get(scope, ("", ""))
        if kind == "DIFile":
            fn = re.search(r'filename: "([^"]*)"', body)
            d = re.search(r'directory: "([^"]*)"', body)
            if fn:
                name = fn.group(1)
                return name if name.startswith("/") or not d else f"{d.group(1)}/{name}"
            return ""
        f = re.search(r"file: (!\d+)", body)
        if f and depth < 16:
            return file_of(f.group(1), depth + 1)
        s = re.search(r"scope: (!\d+)", body)
        return file_of(s.group(1), depth + 1) if s and depth < 16 else ""

    memo: dict[str, tuple[Frame, ...]] = {}

    def frames_of(ref: str, depth=0) -> tuple[Frame, ...]:
        if ref in memo:
            return memo[ref]
        d = dilocs.get(ref)
        if d is None or depth > 32:
            return ()
        line, col, scope, inlined = d
        fr = (Frame(file_of(scope), line, col),) + (frames_of(inlined, depth + 1) if inlined else ())
        memo[ref] = fr
        return fr

    # the instructions' `!dbg !N`, found by one regex over the text (a Python-level look at
    # each of the module's lines was most of the LLVM IR's time)
    out = {}
    line_no, at, last = 1, 0, 0
    for m in _DBG_RE.finditer(text):
        pos = m.start()
        line_no += text.count("\n", at, pos)
        at = pos
        if line_no == last:         # a line's first !dbg is its own
            continue
        last = line_no
        if text.startswith("!", text.rfind("\n", 0, pos) + 1):    # metadata, not an instruction
            continue
        fr = frames_of(m.group(1))
        if fr:
            out[line_no] = Loc(fr)
    return out


_PTX_FILE_RE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC_RE = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(.*)$")


def _ptx_frames(text: str) -> dict[int, Loc]:
    lines = text.splitlines()
    files = {}
    for line in lines:
        m = _PTX_FILE_RE.match(line)
        if m:
            files[m.group(1)] = m.group(2)
    out = {}
    cur: Loc | None = None
    in_asm = False
    for i, line in enumerate(lines, start=1):
        if "// begin inline asm" in line:
            in_asm = True
        elif "// end inline asm" in line:
            in_asm = False
        m = _PTX_LOC_RE.match(line)
        if m and in_asm:
            # LLVM interleaves stray .loc lines into multi-line inline asm (an mbarrier wait
            # loop); the asm belongs to the op whose .loc came before it
            continue
        if m:
            frames = [Frame(files.get(m.group(1), ""), int(m.group(2)), int(m.group(3)))]
            for fid, ln, col in re.findall(r"inlined_at\s+(\d+)\s+(\d+)\s+(\d+)", m.group(4)):
                frames.append(Frame(files.get(fid, ""), int(ln), int(col)))
            cur = Loc(tuple(frames))
            continue
        s = line.strip()
        if cur is not None and s and not s.startswith(("//", ".", "$", "{", "}")):
            out[i] = cur
        if (s.startswith("}") and not in_asm and line.startswith("}")) or s.startswith(".section"):
            cur = None
    return out


_SASS_LINE_RE = re.compile(r'"([^"]*)", line (\d+)')
_SASS_INSN_RE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/")


def _sass_frames(text: str) -> dict[int, Loc]:
    """``nvdisasm -gi`` writes an instruction's inlining chain as a block of ``//##`` lines,
    innermost first, one frame each, with that frame's caller after ``inlined at``::

        //## File "k.py", line 127 inlined at "k.py", line 202
        //## File "k.py", line 202 inlined at "k.py", line 516
        //## File "k.py", line 516

    The block is one Loc (frames innermost first), as the other stages read theirs; it holds
    for the instructions after it up to the next block. (Keeping only the block's last line
    mapped every instruction of a helper to the kernel's outermost call line.)

    >>> sass = ('//## File "k.py", line 9 inlined at "k.py", line 20\\n//## File "k.py", line 20\\n'
    ...         '        /*0010*/    MUFU.EX2 R1, R2 ;')
    >>> [f.line for f in _sass_frames(sass)[3].frames]
    [9, 20]
    """
    out = {}
    cur: Loc | None = None
    block: list[list[tuple[str, str]]] = []
    for i, line in enumerate(text.splitlines(), start=1):
        if "//##" in line:
            block.append(_SASS_LINE_RE.findall(line))
            continue
        if block:
            frames = [Frame(fl[0][0], int(fl[0][1])) for fl in block if fl]
            if len(block[-1]) > 1:  # a block cut short still names its last frame's caller
                frames.append(Frame(block[-1][1][0], int(block[-1][1][1])))
            cur = Loc(tuple(frames)) if frames else None
            block = []
        if cur is not None and _SASS_INSN_RE.match(line):
            out[i] = cur
        elif line.lstrip().startswith(".section"):   # a new function starts with no line yet
            cur = None
    return out


# the source map and the wgmma analysis both read the SASS's frames: once per text (the
# callers only read the result)
sass_frames = functools.lru_cache(maxsize=2)(_sass_frames)

_READERS = {"ttir": _mlir_frames, "ttgir": _mlir_frames, "ttgir_alloc": _mlir_frames, "llir": _llir_frames, "ptx": _ptx_frames,
            "sass": sass_frames}


def add_stage(smap: SourceMap, stage: str, text: str, first_line: int, last_line: int) -> None:
    """Fill ``smap.forward[stage]`` / ``smap.backward[stage]`` from one stage's text."""
    fwd: dict[int, list[int]] = {}
    bwd: dict[int, int] = {}
    for stage_line, loc in _READERS[stage](text).items():
        lines = loc.lines_in(smap.file)
        if not lines:
            continue
        # back: the innermost line (a helper's own line); forth: every line on the inlining
        # chain, so the kernel's call of a helper also shows the helper's code
        bwd[stage_line] = lines[0]
        for ln in lines:
            fwd.setdefault(ln, []).append(stage_line)
    smap.forward[stage] = fwd
    smap.backward[stage] = bwd


def build(file: str, first_line: int, last_line: int, stages: dict[str, str]) -> SourceMap:
    """A SourceMap for `file` lines first_line..last_line over the given stage texts.

    >>> smap = build("k.py", 1, 3, {"ptx": '.file 1 "k.py"\\n.loc 1 2 0\\nadd.s32 %r1, %r2, 1;'})
    >>> smap.lines_for("ptx", 2)
    [3]
    """
    smap = SourceMap(file=file)
    for stage, text in stages.items():
        if stage in _READERS and isinstance(text, str):
            add_stage(smap, stage, text, first_line, last_line)
    return smap
