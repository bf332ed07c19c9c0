"""What ptxas actually runs under each in-flight wgmma: a reading of a Hopper kernel's SASS.

A ``tlx.async_dot`` becomes one *group* of ``HGMMA`` instructions in SASS (behind a
``WARPGROUP.ARRIVE``; the last one is marked ``gsb0``), and ``tlx.async_dot_wait(n)`` becomes
``WARPGROUP.DEPBAR.LE gsb0, 0xn``, which retires every group but the ``n`` most recent. What
runs between a group and the wait that retires it is the work that overlaps the tensor cores
(its *shadow*). In PTX that is whatever the kernel wrote between the two; in SASS it is what
ptxas left there: ptxas moves a wait that has no inputs up, above independent work, so the
softmax written under a P V wgmma may well run after it. :func:`analyze` reads that off the
SASS, per group:

- the async_dot's source line, its A operand (registers: ``HGMMA ... R88, R152, gdesc[..]``;
  shared memory: ``HGMMA ... R24, gdesc[..], ...``) and its number of HGMMAs;
- the wait that retires it and its ``tlx.async_dot_wait`` line;
- the shadow, counted by kind: MUFU, floating-point ALU (FFMA, FMUL, FADD, FMNMX, FSEL,
  F2FP, the fp16 H*2 forms ...), other ALU, memory (LD*/ST*/SYNCS/TMA ...), barriers (BAR.*),
  and HGMMAs of later groups; plus the source lines its MUFU/FP work came from;
- *moved behind the wait*: the MUFU/FP instructions written between the async_dot and its
  wait (in program order) that ptxas placed after the wait, up to the next wgmma group,
  backward or unconditional branch, or exit; explained (why, what to do) when that is most
  of the work written there.

When ptxas serialized the wgmma pipeline (C7513 & co. in ``report.ptxas_advisories``) it
issues each HGMMA as its own group and waits for it at once; those one-HGMMA groups are joined
back into one row per async_dot (``serialized=True``, explained with the advisory's why and
what to do), and their final wait is ptxas's own (``wait_line=None``).

Control flow is handled simply: the scan is straight-line in address order from a group's
first HGMMA. It ends at the first ``WARPGROUP.DEPBAR`` that retires the group, at an
``EXIT``, or at a backward branch (a loop's back edge; a spin-retry loop, a predicated
``BRA`` back over a few instructions that poll an mbarrier (``TRYWAIT``) or setmaxnreg
(``TRY_ALLOC``), does not count). A group whose scan hits a back edge *crosses the loop
edge*: it is retired in a later iteration and its shadow here counts only up to the edge.
Forward branches are passed over (their fall-through path is what is counted).

Source lines come from nvdisasm's ``//## File ..., line N inlined at ...`` comments, read
here as the whole inlining chain (innermost first, lines of the kernel's file only; nvdisasm
prints one comment line per frame). ptxas's line tags are approximate, so two are checked
against the PTX, whose ``.loc`` lines are exact: a group's line is that of its
``WARPGROUP.ARRIVE`` or of one of its HGMMAs that is a PTX ``wgmma.commit_group`` line (the
HGMMAs themselves often carry a neighbour's line), and a ``WARPGROUP.DEPBAR``, which ptxas tags
with the statement *after* the ``tlx.async_dot_wait``, gets the PTX ``wgmma.wait_group`` line
with the same count nearest at or above its tag, in the same function. An instruction counts
as written between an async_dot and its wait when any line of its chain lies strictly between
the two (taken in the innermost function that holds both). SASS without line comments gives
``line=None`` and no moved counts, and the shadow counts still hold.

>>> ov = report.wgmma_overlap                          # doctest: +SKIP
>>> [(g.line, g.a_operand, g.mufu, g.moved) for g in ov]   # doctest: +SKIP
[(194, 'smem', 0, 0), (151, 'smem', 0, 0), (152, 'registers', 0, 232), ...]
"""
from __future__ import annotations

import collections
import dataclasses
import html
import linecache
import re

# ---- reading SASS -----------------------------------------------------------------------------
_INSTR = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;?\s*$")
_PRED = re.compile(r"^@!?U?P[T\d]+\s+")
_LABEL = re.compile(r"^(\.L\w+):\s*$")
_TARGET = re.compile(r"`\((\.L\w+)\)")
_DEPBAR = re.compile(r"^WARPGROUP\.DEPBAR\.LE\s+gsb0\s*,\s*(0x[0-9a-fA-F]+|\d+)")
_HGMMA_SHAPE = re.compile(r"^HGMMA\.(\S+)")
_PTX_WAIT = re.compile(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)")
_GSB0 = re.compile(r"\bgsb0\b")
_PTX_A = re.compile(r"wgmma\.mma_async\S*\s*\{[^}]*\}\s*,\s*(\S)")   # "{" after D: A in registers

_FP = {"FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSET", "FSETP", "F2FP", "F2F", "FCHK", "FSWZADD", "FRND",
       "HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSET2", "HSETP2", "DFMA", "DADD", "DMUL"}
_MEMORY = {"LD", "LDS", "LDG", "LDL", "LDSM", "LDGSTS", "LDGDEPBAR", "ST", "STS", "STG", "STL", "STSM", "ATOM",
           "ATOMS", "ATOMG", "RED", "REDG", "SYNCS", "UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMACMDFLUSH",
           "UBLKCP", "UBLKRED", "UBLKPF", "CCTL", "MEMBAR", "FENCE", "ERRBAR"}
_SKIP = {"NOP"}
_KINDS = ("mufu", "fp32", "alu", "memory", "barriers", "wgmma")


@dataclasses.dataclass(frozen=True)
class _Instr:
    index: int                      # position in the function's instruction list
    address: int
    sass_line: int                  # 1-based line in the SASS text
    opcode: str                     # "HGMMA.64x128x16.F32", "MUFU.EX2", ...
    operands: str
    predicated: bool
    chain: tuple[int, ...]          # kernel-file lines on the inlining chain, innermost first

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def line(self) -> int | None:
        return self.chain[0] if self.chain else None

    @property
    def kind(self) -> str | None:
        b = self.base
        if b in _SKIP:
            return None
        if b == "MUFU":
            return "mufu"
        if b in _FP:
            return "fp32"
        if b == "HGMMA":
            return "wgmma"
        if b == "WARPGROUP":        # ARRIVE / DEPBAR: the wgmma protocol itself, not work
            return None
        if b in _MEMORY:
            return "memory"
        if b == "BAR":
            return "barriers"
        return "alu"


def _read(sass: str, file: str) -> tuple[list[_Instr], dict[str, int]]:
    """Instructions (in text order) and label -> instruction index. Each instruction's chain is
    its ``//##`` inlining block as the source map reads it (``sourcemap._sass_frames``), kept to
    the kernel file's lines, innermost first (none, and the line comments not read, where ``file`` is empty)."""
    from .sourcemap import sass_frames
    locs = sass_frames(sass) if file else {}
    out: list[_Instr] = []
    labels: dict[str, int] = {}
    pending_labels: list[str] = []
    for n, raw in enumerate(sass.splitlines(), start=1):
        m = _LABEL.match(raw.strip())
        if m:
            pending_labels.append(m.group(1))
            continue
        m = _INSTR.match(raw)
        if not m:
            continue
        lines: list[int] = []
        for f in locs[n].frames if n in locs else ():
            if f.file == file and (not lines or lines[-1] != f.line):
                lines.append(f.line)
        text = m.group(2)
        pred = _PRED.match(text)
        body = text[pred.end():] if pred else text
        op, _, operands = body.partition(" ")
        for lab in pending_labels:
            labels[lab] = len(out)
        pending_labels = []
        out.append(_Instr(len(out), int(m.group(1), 16), n, op, operands.strip(), bool(pred), tuple(lines)))
    return out, labels


def _branch_back(ins: list[_Instr], labels: dict[str, int], i: int) -> bool:
    """Is instruction i a backward branch that is not a spin-retry of an mbarrier/setmaxnreg poll?"""
    x = ins[i]
    if x.base not in ("BRA", "BRX", "JMP"):
        return False
    m = _TARGET.search(x.operands)
    if not m or m.group(1) not in labels:
        return False
    t = labels[m.group(1)]
    if t > i:
        return False
    body = ins[t:i]
    spin = x.predicated and len(body) <= 6 and any(
        "TRYWAIT" in b.opcode or "TRY_ALLOC" in b.opcode or "TRY_WAIT" in b.opcode for b in body)
    return not spin


# ---- results ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class WgmmaGroup:
    """One ``tlx.async_dot`` as ptxas scheduled it: a group of HGMMAs, the wait that retires it,
    and what runs in between (its shadow).

    Counts are SASS instructions per thread, each kind as in the module docstring. ``moved_*``:
    instructions written between the async_dot and its wait that ptxas put after the wait.
    ``explanation`` / ``hint`` are set when the work written under the wgmma mostly runs after
    its wait (no MUFU left in the shadow while some moved, or more moved than stayed).
    """
    index: int
    address: int                    # SASS address of the group's first HGMMA
    sass_line: int                  # line of that HGMMA in ``report.sass``
    line: int | None                # the async_dot's kernel-file line (innermost)
    line_text: str
    a_operand: str                  # "registers" | "smem"
    a_registers: str                # "R152..R180" when A is in registers, else ""
    shape: str                      # "64x128x16.F32"
    num_hgmma: int
    wait_address: int | None        # the WARPGROUP.DEPBAR that retires the group, if the scan reached it
    wait_pending: int | None        # its count N (DEPBAR.LE gsb0, N)
    wait_line: int | None           # the tlx.async_dot_wait line
    wait_text: str
    ends_at: str                    # "wait" | "loop edge" | "exit" | "end"
    serialized: bool = False        # ptxas split it into one-HGMMA groups, each waited on at once
    mufu: int = 0
    fp32: int = 0
    alu: int = 0
    memory: int = 0
    barriers: int = 0
    wgmma: int = 0                  # HGMMAs of later groups issued in the shadow
    shadow_lines: tuple[tuple[int, int], ...] = ()     # (line, MUFU+FP instructions), most first
    written_in_shadow: int = 0      # MUFU+FP instructions written between async_dot and wait, in the shadow
    moved_mufu: int = 0
    moved_fp32: int = 0
    moved_lines: tuple[tuple[int, int], ...] = ()      # (line, MUFU+FP instructions moved), most first
    moved_from: tuple[int, ...] = ()                   # the lines between async_dot and wait they were written at
    written_lines: tuple[int, ...] = ()                # every line between async_dot and wait with SASS near it
    explanation: str = ""
    hint: str = ""

    @property
    def crosses_loop_edge(self) -> bool:
        return self.ends_at == "loop edge"

    @property
    def moved(self) -> int:
        return self.moved_mufu + self.moved_fp32

    @property
    def other(self) -> int:
        return self.alu + self.memory + self.barriers

    @property
    def finding(self) -> str:
        """One line for a report: what ptxas did with the work written under this wgmma."""
        if self.serialized:
            return "serialized"
        return (f"{self.moved_mufu} MUFU + {self.moved_fp32} FP instructions written under it run after its wait"
                + (f" at line {self.wait_line}" if self.wait_line else ""))

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else f"SASS {self.address:#06x}"
        a = f"A in registers ({self.a_registers})" if self.a_operand == "registers" else "A in SMEM"
        if self.ends_at == "wait":
            at = f"line {self.wait_line}" if self.wait_line else "a wait with no async_dot_wait line"
            end = f"waited at {at} (DEPBAR.LE gsb0, {self.wait_pending})"
        else:
            end = {"loop edge": "crosses the loop edge (retired in a later iteration)",
                   "exit": "no wait before EXIT", "end": "no wait found"}[self.ends_at]
        ser = ", serialized" if self.serialized else ""
        out = (f"wgmma {where} [{a}, {self.num_hgmma} HGMMA {self.shape}{ser}] {end}: shadow MUFU {self.mufu}, "
               f"FP {self.fp32}, other {self.other} (ALU {self.alu}, memory {self.memory}, "
               f"barriers {self.barriers}), HGMMA {self.wgmma}; moved behind the wait {self.moved}")
        if self.shadow_lines:
            out += "\n    shadow MUFU/FP from " + ", ".join(f"line {ln} ({c})" for ln, c in self.shadow_lines)
        if self.moved_lines:
            out += "\n    moved behind the wait from " + ", ".join(f"line {ln} ({c})" for ln, c in self.moved_lines)
        if self.explanation:
            out += f"\n    why: {self.explanation}\n    what to do: {self.hint}"
        return out


_CSS = (".tlxwb-wgmma{font-family:sans-serif;font-size:13px}.tlxwb-wgmma table{border-collapse:collapse;"
        "margin:4px 0}.tlxwb-wgmma th,.tlxwb-wgmma td{border:1px solid #ddd;padding:2px 6px;text-align:left;"
        "vertical-align:top}.tlxwb-wgmma th{background:#f3f3f3}.tlxwb-wgmma td.num{text-align:right;"
        "font-variant-numeric:tabular-nums}.tlxwb-wgmma code{font-family:ui-monospace,Menlo,monospace;font-size:12px}")


class WgmmaOverlap(list):
    """The wgmma groups of a Hopper kernel's SASS (``WgmmaGroup`` rows, address order) with
    what overlaps each. Empty for other targets and kernels without wgmma (``note`` says why).

    >>> ov = report.wgmma_overlap                                     # doctest: +SKIP
    >>> [g for g in ov if g.a_operand == "registers" and g.explanation]    # doctest: +SKIP
    """

    def __init__(self, rows=(), kernel: str = "", target: str = "", file: str = "", note: str = ""):
        super().__init__(rows)
        self.kernel, self.target, self.file, self.note = kernel, target, file, note

    @property
    def explained(self) -> list[WgmmaGroup]:
        """The groups whose written overlap ptxas undid (rows with an explanation)."""
        return [g for g in self if g.explanation]

    @property
    def findings(self) -> list[WgmmaGroup]:
        """``explained``, one row per (async_dot line, wait line): a loop's copies of one
        async_dot are one finding (what the compile report's text and HTML show)."""
        seen, out = set(), []
        for g in self.explained:
            if (g.line, g.wait_line, g.serialized) not in seen:
                seen.add((g.line, g.wait_line, g.serialized))
                out.append(g)
        return out

    def __str__(self) -> str:
        head = f"wgmma overlap of {self.kernel} for {self.target}"
        if not self:
            return f"{head}: {self.note or 'no wgmma'}"
        return "\n".join([f"{head}: {len(self)} groups"] + [f"  {g}" for g in self])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        def e(x) -> str:
            return html.escape(str(x))
        head = f"<b>wgmma overlap</b> of <code>{e(self.kernel)}</code> for {e(self.target)}"
        if not self:
            return f'<div class="tlxwb-wgmma">{head}: {e(self.note or "no wgmma")}</div>'
        rows = []
        for g in self:
            a = f"registers <code>{e(g.a_registers)}</code>" if g.a_operand == "registers" else "smem"
            if g.ends_at == "wait":
                wait = f"{e(g.wait_line or 'ptxas')} <small>(DEPBAR ≤{g.wait_pending})</small>"
            else:
                wait = {"loop edge": "crosses loop edge", "exit": "exit", "end": "-"}[g.ends_at]
            lines = ", ".join(f"{ln}×{c}" for ln, c in g.shadow_lines) or "-"
            moved_style = ' style="color:#c0392b;font-weight:bold"' if g.explanation else ""
            rows.append(
                f'<tr><td title="SASS {g.address:#06x}">{e(g.line or "?")}</td>'
                f"<td><code>{e(g.line_text)}</code></td><td>{a}</td>"
                f'<td class="num">{g.num_hgmma}{" <small>serialized</small>" if g.serialized else ""}</td>'
                f'<td class="num">{g.mufu}</td><td class="num">{g.fp32}</td>'
                f'<td class="num">{g.other}</td><td class="num">{g.wgmma}</td><td>{e(lines)}</td>'
                f'<td class="num"{moved_style}>{g.moved}</td><td>{wait}</td></tr>')
            if g.explanation:
                rows.append(f'<tr><td></td><td colspan="10" style="border-left:4px solid #e67e22;'
                            f'background:#fff8ef"><i>why:</i> {e(g.explanation)}<br><i>what to do:</i> {e(g.hint)}</td></tr>')
        return (f'<div class="tlxwb-wgmma"><style>{_CSS}</style>{head}: {len(self)} groups '
                f"<small>(shadow: SASS instructions between a group's first HGMMA and the wait that retires it)"
                f"</small><table><tr><th>line</th><th>async_dot</th><th>A</th><th>HGMMA</th><th>MUFU</th>"
                f"<th>FP</th><th>other</th><th>later HGMMA</th><th>MUFU/FP from lines</th>"
                f"<th>moved behind wait</th><th>wait line</th></tr>{''.join(rows)}</table></div>")


# ---- the analysis -------------------------------------------------------------------------------
def _text(file: str, line: int | None, source=None) -> str:
    if not line:
        return ""
    t = linecache.getline(file, line).strip()
    if not t and source is not None:
        t = source.line_text(line).strip()
    return t


def _ptx_sites(report) -> tuple[dict[int, set[str]], set[tuple[int, int]], list[int]]:
    """Kernel lines of the PTX's wgmmas with the kinds of their A operand ("registers" /
    "smem"), (line, N) of its ``wgmma.wait_group N``s (PTX ``.loc`` lines are exact, SASS's are
    smeared over neighbouring instructions), and the number of wgmmas of each commit group."""
    ptx = report.stages.get("ptx") or ""
    smap = report.source_map
    commits: dict[int, set[str]] = {}
    waits, sizes = set(), []
    n = 0
    for i, line in enumerate(ptx.splitlines(), start=1):
        if "wgmma." not in line:
            continue
        if "wgmma.commit_group" in line:
            sizes.append(n)
            n = 0
        src = smap.source_line("ptx", i)
        if "wgmma.mma_async" in line:
            n += 1
            m = _PTX_A.search(line)
            if src is not None and m:
                commits.setdefault(src, set()).add("registers" if m.group(1) == "{" else "smem")
        if src is None:
            continue
        if "wgmma.commit_group" in line:
            commits.setdefault(src, set())
        else:
            m = _PTX_WAIT.search(line)
            if m:
                waits.add((src, int(m.group(1))))
    return commits, waits, sizes


def _in_function(file: str, lo: int, hi: int) -> bool:
    """No function starts between lines lo and hi of `file` (so both are in one body)."""
    for k in range(lo + 1, hi + 1):
        t = linecache.getline(file, k).lstrip()
        if t.startswith(("def ", "@triton.jit", "@jit", "class ")):
            return False
    return True


def _dot_chain(ins: list[_Instr], members: list[int], commits: dict[int, set[str]], a_kind: str,
               file: str) -> tuple[int, ...]:
    """The async_dot's chain. ptxas smears line tags over the HGMMAs (some carry the softmax's or
    a later statement's line); the group's ``WARPGROUP.ARRIVE`` (wgmma.fence) keeps it best. The
    first of ARRIVE, HGMMAs whose line is a PTX wgmma's with the same kind of A operand wins, else
    the PTX wgmma line of that kind nearest a tag, else one on a PTX wgmma line, else one on an
    async_dot line, else the most common."""
    cands = []
    j = members[0] - 1
    while j >= 0 and ins[j].base not in ("HGMMA", "BRA", "EXIT") and members[0] - j <= 64:
        if ins[j].opcode == "WARPGROUP.ARRIVE":
            cands.append(ins[j].chain)
            break
        j -= 1
    # a serialized wgmma: the ARRIVE of each of its one-HGMMA groups, in order
    cands += [x.chain for x in ins[members[0]:members[-1] + 1] if x.opcode == "WARPGROUP.ARRIVE"]
    cands += [ins[i].chain for i in members]
    cands = [c for c in cands if c]
    for c in cands:
        if a_kind in commits.get(c[0], ()):
            return c
    # a serialized wgmma may carry no line of its own at all: the nearest PTX wgmma line with
    # this kind of A operand, in the same function as a tag
    near = [(abs(ln - c[0]), i, (ln,) + c[1:]) for i, c in enumerate(cands) for ln, kinds in commits.items()
            if a_kind in kinds and _in_function(file, min(ln, c[0]), max(ln, c[0]))]
    if near:
        return min(near)[2]
    for ok in (lambda c: c[0] in commits, lambda c: "dot(" in linecache.getline(file, c[0])):
        for c in cands:
            if ok(c):
                return c
    return collections.Counter(cands).most_common(1)[0][0] if cands else ()


def _wait_chain(x: _Instr, pending: int, waits: set[tuple[int, int]], file: str) -> tuple[int, ...]:
    """The async_dot_wait's chain: ptxas tags a DEPBAR with the next statement's line, so the
    innermost line becomes the PTX wait with the same N nearest at or above it (same function).
    () when there is none: a wait ptxas added (a serialized wgmma) has no async_dot_wait line."""
    if not x.chain:
        return ()
    at = x.chain[0]
    best = max((ln for ln, n in waits if n == pending and ln <= at and _in_function(file, ln, at)), default=None)
    return () if best is None else (best,) + x.chain[1:]


def _level_range(dot: tuple[int, ...], wait: tuple[int, ...], file: str) -> tuple[int, int] | None:
    """(dot line, wait line) in the innermost function that holds both (the chains' common
    callers dropped); None when they share none or the wait comes first."""
    if not dot or not wait:
        return None
    s = 0
    while s < min(len(dot), len(wait)) - 1 and dot[-1 - s] == wait[-1 - s]:
        s += 1
    lo, hi = dot[len(dot) - s - 1], wait[len(wait) - s - 1]
    if lo >= hi or not _in_function(file, lo, hi):
        return None
    return lo, hi


def _written_between(x: _Instr, rng) -> int | None:
    """The line of x's chain strictly between the async_dot and its wait, if any.

    Any frame counts, not only the one at the dot's inlining depth under the same callers: the
    SASS line info of a helper inlined twice (two loops calling ``_kv_step``) may name the other
    call site. A line strictly inside one function's (dot, wait) range is that function's, and
    the scans that use this are bounded (one shadow, or the stretch after one wait)."""
    if rng is None:
        return None
    lo, hi = rng
    for v in x.chain:
        if lo < v < hi:
            return v
    return None


_TOP = 4


def _explain(g: dict, inner_lines) -> tuple[str, str]:
    """Why and what to do, when the work written under a wgmma mostly runs after its wait: no
    MUFU left in the shadow while some moved, or more MUFU/FP moved than stayed."""
    moved = g["moved_mufu"] + g["moved_fp32"]
    if not moved or g["ends_at"] != "wait":
        return "", ""
    if not ((g["mufu"] == 0 and g["moved_mufu"] > 0) or moved > g["written_in_shadow"]):
        return "", ""
    at = g["moved_from"]
    span = f"line {at[0]}" if len(at) == 1 else "lines " + ", ".join(map(str, at))
    inner = sorted(set(inner_lines) - set(at))
    code = f" (code on lines {inner[0]}-{inner[-1]})" if inner else ""
    what = f"{g['moved_mufu']} MUFU and {g['moved_fp32']} FP instructions of it"
    if g["mufu"] == 0 and g["fp32"] == 0:
        left = "nothing overlaps the wgmma"
    elif g["mufu"] == 0:
        left = f"no MUFU overlaps the wgmma (only {g['fp32']} FP instructions do)"
    else:
        left = f"only {g['written_in_shadow']} MUFU/FP instructions of it stay under the wgmma"
    explanation = (f"ptxas placed the wait for the wgmma at line {g['line']} (the async_dot_wait at line "
                   f"{g['wait_line']}) before the work written under it, {span}{code}: {what} run after "
                   f"the wait, {left}. ptxas hoists a wgmma wait that has no inputs above independent work.")
    hint = (f"keep that work above the wait at line {g['wait_line']}: give the wait something it may not "
            f"pass, a memory operation that needs the work's result (a store that never happens, see "
            f"PIN_SOFTMAX in tlx_workbench/kernels/attention.py), then look at this table again and at "
            f"ptxas's advisories (waiting in the next loop iteration instead made ptxas serialize the "
            f"attention kernel's wgmmas, C7512). Then measure: overlap here is not speed by itself (pinned, "
            f"the attention kernel ran 2-7 % slower on an H200; its other warp group's GEMMs already hid "
            f"the softmax).")
    return explanation, hint


def _is_wait(x: _Instr):
    return _DEPBAR.match(f"{x.opcode} {x.operands}")


def _operands(x: _Instr) -> list[str]:
    return [o.strip() for o in x.operands.split(",") if o.strip() and o.strip() != "gsb0"]


def _merge_serialized(ins: list[_Instr], groups: list[list[int]], cap: int) -> tuple[list[list[int]], set[int]]:
    """Join the one-HGMMA groups of a wgmma that ptxas serialized (C7513 & co.: each HGMMA its
    own group, waited on with DEPBAR 0 before the next is issued) back into one row per
    async_dot. Only when SASS has more groups than the PTX has commit groups (``cap``: the most
    wgmmas of one PTX group, 0 = none); a group joins the one before when its HGMMA accumulates
    into the same register, a ``DEPBAR.LE gsb0, 0`` and no branch lie between them, and the
    joined count stays within ``cap``. Returns the groups and the indices of joined ones."""
    if not cap:
        return groups, set()
    out: list[list[int]] = []
    joined: set[int] = set()
    for g in groups:
        if out and len(out[-1]) + len(g) <= cap:
            prev, head = ins[out[-1][-1]], ins[g[0]]
            po, ho = _operands(prev), _operands(head)
            between = ins[prev.index + 1:head.index]
            if (len(ho) >= 3 and ho[0] == po[0] and ho[-1] == ho[0] and (len(po) > 1 and len(ho) > 1)
                    and po[1].startswith("R") == ho[1].startswith("R")
                    and not any(b.base in ("BRA", "BRX", "JMP", "EXIT") for b in between)
                    and any((m := _is_wait(b)) and int(m.group(1), 0) == 0 for b in between)):
                out[-1] = out[-1] + g
                joined.add(len(out) - 1)
                continue
        out.append(list(g))
    return out, joined


def analyze(report) -> WgmmaOverlap:
    """The wgmma groups of ``report``'s SASS with what ptxas runs under each (see the module
    docstring for the rules). Empty, with a note, for non-Hopper targets or no HGMMA.

    >>> analyze(report)[0].a_operand                    # doctest: +SKIP
    'smem'
    """
    file = report.source.file
    meta = {"kernel": report.kernel, "target": report.target, "file": file}
    if report.arch != 90:
        return WgmmaOverlap(note=f"wgmma is Hopper's (sm_90); this report is for {report.target}", **meta)
    if "wgmma.mma_async" not in (report.stages.get("ptx") or ""):
        return WgmmaOverlap(note="no HGMMA: the PTX has no wgmma (no tlx.async_dot on wgmma)", **meta)   # SASS not read
    sass = report.sass
    if "HGMMA" not in sass:
        return WgmmaOverlap(note="the SASS has no HGMMA (no tlx.async_dot on wgmma)", **meta)
    ins, labels = _read(sass, file)

    # the groups: HGMMAs up to the one marked gsb0
    groups: list[list[int]] = []
    cur: list[int] = []
    for x in ins:
        if x.base == "HGMMA":
            cur.append(x.index)
            if _GSB0.search(x.operands):
                groups.append(cur)
                cur = []
    if cur:
        groups.append(cur)
    commits, ptx_waits, sizes = _ptx_sites(report)
    groups, serialized = _merge_serialized(ins, groups, max(sizes, default=0) if len(groups) > len(sizes) else 0)
    group_of = {i: k for k, g in enumerate(groups) for i in g}
    advisory = next((a for a in report.ptxas_advisories if "serialized" in a.message), None)

    rows = []
    for k, members in enumerate(groups):
        first, last = ins[members[0]], ins[members[-1]]
        a_regs = []
        for i in members:
            ops = [o.strip() for o in ins[i].operands.split(",")]
            if len(ops) > 1 and re.fullmatch(r"R\d+", ops[1]):
                a_regs.append(int(ops[1][1:]))
        a_operand = "registers" if a_regs else "smem"
        a_text = ""
        if a_regs:
            a_text = f"R{min(a_regs)}" if len(set(a_regs)) == 1 else f"R{min(a_regs)}..R{max(a_regs)}"
        shape = _HGMMA_SHAPE.match(last.opcode)
        dot_chain = _dot_chain(ins, members, commits, a_operand, file)
        dot_line = dot_chain[0] if dot_chain else None

        counts = dict.fromkeys(_KINDS, 0)
        shadow_src: collections.Counter = collections.Counter()
        later_groups = 0            # groups committed after this one, so far
        ends_at, wait = "end", None
        i = first.index + 1
        while i < len(ins):
            x = ins[i]
            if group_of.get(i) == k:
                i += 1
                continue
            if x.base == "HGMMA" and _GSB0.search(x.operands):
                later_groups += 1
            m = _is_wait(x)
            if m and i > last.index and later_groups >= int(m.group(1), 0):
                ends_at, wait = "wait", x
                break
            if x.base == "EXIT" and not x.predicated:
                ends_at = "exit"
                break
            if _branch_back(ins, labels, i):
                ends_at = "loop edge"
                break
            kind = x.kind
            if kind is not None:
                counts[kind] += 1
                if kind in ("mufu", "fp32") and x.line is not None:
                    shadow_src[x.line] += 1
            i += 1

        wait_pending = int(_is_wait(wait).group(1), 0) if wait else None
        wait_chain = _wait_chain(wait, wait_pending, ptx_waits, file) if wait else ()
        wait_line = wait_chain[0] if wait_chain else None
        rng = _level_range(dot_chain, wait_chain, file) if wait else None
        written_in_shadow = 0
        written: set[int] = set()
        moved = {"mufu": 0, "fp32": 0}
        moved_src: collections.Counter = collections.Counter()
        moved_from: set[int] = set()
        if rng is not None:
            for j in range(first.index + 1, wait.index):
                v = _written_between(ins[j], rng)
                if v is not None:
                    written.add(v)
                    written_in_shadow += ins[j].kind in ("mufu", "fp32")
            j = wait.index + 1
            while j < len(ins):
                x = ins[j]
                if (x.base == "HGMMA" or x.opcode == "WARPGROUP.ARRIVE" or (x.base == "EXIT" and not x.predicated)
                        or (x.base == "BRA" and not x.predicated) or _branch_back(ins, labels, j)):
                    break
                v = _written_between(x, rng)
                if v is not None:
                    written.add(v)
                    if x.kind in ("mufu", "fp32"):
                        moved[x.kind] += 1
                        moved_src[x.line] += 1
                        moved_from.add(v)
                j += 1
        g = dict(index=k, address=first.address, sass_line=first.sass_line, line=dot_line,
                 line_text=_text(file, dot_line, report.source), a_operand=a_operand, a_registers=a_text,
                 shape=shape.group(1) if shape else last.opcode, num_hgmma=len(members),
                 wait_address=wait.address if wait else None, wait_pending=wait_pending, wait_line=wait_line,
                 wait_text=_text(file, wait_line, report.source), ends_at=ends_at, serialized=k in serialized,
                 **counts,
                 shadow_lines=tuple(shadow_src.most_common(_TOP)), written_in_shadow=written_in_shadow,
                 moved_mufu=moved["mufu"], moved_fp32=moved["fp32"],
                 moved_lines=tuple(moved_src.most_common(_TOP)), moved_from=tuple(sorted(moved_from)),
                 written_lines=tuple(sorted(written)))
        g["explanation"], g["hint"] = _explain(g, moved_src)
        if g["serialized"]:
            g["explanation"] = (
                f"ptxas serialized the wgmma at line {dot_line}: its {len(members)} HGMMAs run as one-HGMMA "
                f"groups, each waited on (DEPBAR.LE gsb0, 0) before the next is issued, so they do not "
                f"pipeline. " + (advisory.explanation if advisory and advisory.explanation else "")).strip()
            g["hint"] = (advisory.hint if advisory and advisory.hint else
                         "see report.ptxas_advisories for why ptxas serialized the wgmma pipeline")
        rows.append(WgmmaGroup(**g))
    return WgmmaOverlap(rows, **meta)
