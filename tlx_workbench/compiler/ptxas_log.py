"""What ptxas said about a kernel: its ``-v`` log read into advisories and per-function numbers.

ptxas prints performance advisories that change how fast a TLX kernel runs, e.g.
``(C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized ...``,
and Triton drops that log. :func:`parse` reads it; known messages get a plain-words
explanation and what to do, unknown ones are kept verbatim. Known messages are matched by
their text, not only their code: the ``C75xx`` numbers are ptxas's own and may move between
releases, the wording has not (12.x).

>>> log = parse("ptxas info    : Used 40 registers, used 1 barriers")
>>> log.functions[0].registers, log.advisories
(40, [])
"""
from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class PtxasAdvisory:
    """One message of ptxas worth a kernel author's attention.

    ``severity``: "warning" (a performance loss, spills, a ptxas warning), "error", or "info".
    ``explanation`` / ``hint`` are empty for messages this module does not know.
    """
    code: str                       # "C7513"; "" when ptxas gave none; "spills" / "stack" for the numbers
    severity: str
    message: str                    # ptxas's own words (without the "ptxas info    :" prefix)
    explanation: str = ""
    hint: str = ""
    function: str | None = None     # the kernel / device function the message names
    ptx_line: int | None = None     # for "ptxas file.ptx, line N; warning : ..." messages
    line: int | None = None         # a line of the kernel's file (through the source map), when the IR tells

    @property
    def known(self) -> bool:
        return bool(self.explanation)

    def __str__(self) -> str:
        head = f"[{self.code}] " if self.code else ""
        where = f" (line {self.line})" if self.line else ""
        out = f"{head}{self.message}{where}"
        if self.explanation:
            out += f"\n    why: {self.explanation}"
        if self.hint:
            out += f"\n    what to do: {self.hint}"
        return out


@dataclasses.dataclass
class PtxasFunctionStats:
    """The numbers ptxas reports for one function."""
    name: str
    registers: int | None = None
    barriers: int | None = None     # named barriers (bar.sync ids) the function uses
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0


@dataclasses.dataclass
class PtxasLog:
    """A parsed ptxas ``-v`` log."""
    text: str
    advisories: list[PtxasAdvisory]
    functions: list[PtxasFunctionStats]


# ---- what the known messages mean ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Known:
    code: str                       # the code ptxas 12.x prints (for messages that come without one)
    pattern: str                    # a regular expression on the message text
    explanation: str
    hint: str


_SERIALIZED = r"wgmma\.mma_async instructions are serialized due to "
_KNOWN: tuple[_Known, ...] = (
    _Known("C7513", _SERIALIZED + r"non wgmma instructions defining input registers",
           "ptxas serialized the wgmma pipeline (each wgmma now waits for the one before it): a register "
           "that feeds a wgmma operand (the A operand from registers, e.g. P in P@V) is written by ordinary "
           "instructions while a wgmma of the same pipeline stage is still in flight.",
           "move the conversion / definition of that operand (e.g. `p.to(tl.float16)`) to after the "
           "`tlx.async_dot_wait` that retires the in-flight group, or before the group's first "
           "`tlx.async_dot` is issued."),
    _Known("C7514", _SERIALIZED + r"non wgmma instructions reading accumulator registers",
           "ptxas serialized the wgmma pipeline: ordinary instructions read the accumulator of a wgmma "
           "that is still in flight (e.g. rescaling or storing O before its wait).",
           "read an accumulator only after the `tlx.async_dot_wait` that retires its wgmma (pendings low "
           "enough that this group is done)."),
    _Known("C7515", _SERIALIZED + r"non wgmma instructions defining accumulator registers",
           "ptxas serialized the wgmma pipeline: ordinary instructions write the accumulator registers of a "
           "wgmma while the pipeline stage is open (e.g. `acc = acc * alpha` or a zero init between an "
           "issued wgmma and its wait).",
           "update or initialize the accumulator after the `tlx.async_dot_wait` that retires the group, or "
           "before the group is issued (or start with use_acc=False instead of zeroing it)."),
    _Known("C7511", _SERIALIZED + r"insufficient register resources for the wgmma pipeline",
           "ptxas serialized the wgmma pipeline: the registers live across it (accumulators, register "
           "operands and everything else in flight) do not fit the function's register budget.",
           "keep fewer values live across in-flight wgmmas: smaller tiles per warp group, fewer "
           "accumulators in flight, or a larger setmaxnreg budget (`registers=`) for the MMA task."),
    _Known("C7512", _SERIALIZED + r"insufficient register resources for the function",
           "ptxas serialized the wgmma pipeline because the whole function is short of registers.",
           "reduce register pressure (smaller tiles, fewer buffers held in registers) or raise the "
           "register budget (`registers=` of the MMA task, `maxnreg`)."),
    _Known("C7509", _SERIALIZED + r"the presence of Extern calls",
           "ptxas serialized the wgmma pipeline because the function calls external functions (device "
           "printf / assert, non-inlined library calls).",
           "remove `tl.device_print` / `tl.device_assert` (and debug=True) from the kernel for timing "
           "runs."),
    _Known("C7510", _SERIALIZED + r"wgmma pipeline crossing function boundary",
           "ptxas serialized the wgmma pipeline: a wgmma is in flight across a call to a function that "
           "was not inlined.",
           "let the @triton.jit helpers that run between `tlx.async_dot` and its wait be inlined "
           "(no noinline=True), or wait before calling them."),
    _Known("C7516", _SERIALIZED + r"ill formed pipeline stage",
           "ptxas serialized the wgmma pipeline: it could not match the wgmmas of a stage with their "
           "commit and wait (e.g. a wait that some paths skip).",
           "issue each async_dot group and its `tlx.async_dot_wait` on every path, outside data-dependent "
           "branches."),
    _Known("C7517", _SERIALIZED + r"program dependence on compiler-inserted WG\.DP in divergent path",
           "ptxas serialized the wgmma pipeline: a wgmma sits under control flow that is not uniform "
           "across the warp group.",
           "make the conditions around `tlx.async_dot` / its wait uniform for the whole warp group."),
    _Known("C7518", _SERIALIZED + r"program dependence on compiler-inserted WG\.AR in divergent path",
           "ptxas serialized the wgmma pipeline: a wgmma sits under control flow that is not uniform "
           "across the warp group.",
           "make the conditions around `tlx.async_dot` / its wait uniform for the whole warp group."),
    _Known("C7508", r"'setmaxnreg' ignored; unable to determine register count at entry",
           "ptxas dropped every setmaxnreg of the kernel: it does not know the register count the kernel "
           "starts with, so the per-task register budgets (`registers=` of the async tasks) do nothing.",
           "give the kernel a fixed register count at entry: set `maxnreg` in the launch / triton.Config."),
    _Known("C7507", r"'setmaxnreg' ignored to maintain minimum register requirements",
           "ptxas dropped every setmaxnreg of the kernel: a task's budget is below what its code needs, so "
           "all tasks run with the kernel's entry register count.",
           "raise the smallest `registers=` of the async tasks (e.g. a producer at 24 may need 40), or "
           "make that task's code need fewer registers."),
    _Known("C7506", r"'setmaxnreg' ignored to maintain compatibility into 'extern' call",
           "ptxas dropped every setmaxnreg because the kernel calls an external function.",
           "remove device print / assert and other non-inlined calls from the kernel."),
    _Known("", r"'setmaxnreg' ignored to allow debugging",
           "ptxas dropped every setmaxnreg because it compiled with debugging on (optimizations off).",
           "unset TRITON_DISABLE_PTXAS_OPT / knobs.nvidia.disable_ptxas_opt for timing runs."),
    _Known("C7504", r"'setmaxnreg' ignored to maintain compatibility across compilation units",
           "ptxas dropped every setmaxnreg because the code is compiled for linking with other units.",
           "compile the kernel as one unit (the default for Triton)."),
    _Known("", r"setmaxnreg\.dec has register count \(\d+\) which is larger than",
           "a task's setmaxnreg.dec asks for more registers than the program ever uses at once.",
           "lower that task's `registers=` (or drop it: a decrease above the need does nothing)."),
)
_KNOWN_RES = tuple((k, re.compile(k.pattern)) for k in _KNOWN)
_BY_CODE = {k.code: k for k in _KNOWN if k.code}


def explain(code: str, message: str) -> tuple[str, str, str]:
    """(code, explanation, hint) for a message; explanation and hint are "" when unknown.

    >>> explain("", "'setmaxnreg' ignored; unable to determine register count at entry.")[0]
    'C7508'
    """
    for k, rx in _KNOWN_RES:
        if rx.search(message):
            return code or k.code, k.explanation, k.hint
    k = _BY_CODE.get(code)
    if k is not None and "Potential Performance Loss" in message:
        return code, k.explanation, k.hint
    return code, "", ""


# ---- reading the log ------------------------------------------------------------------------
# "ptxas info    : (C7513) msg", "ptxas warning : msg", "ptxas /tmp/x.ptx, line 12; warning : msg"
_LINE = re.compile(r"^ptxas\s*(?:(?P<file>[^,:]+?), line (?P<ptx_line>\d+);\s*)?(?P<level>info|warning|error|fatal)"
                   r"\s*:\s*(?:\((?P<code>C\d+)\)\s*)?(?P<msg>.*)$")
_FUNCTION = re.compile(r"in (?:the )?function '([^']+)'")
_ENTRY = re.compile(r"^Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"^Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"^Used (\d+) registers(?:, used (\d+) barriers)?")
_QUIET = re.compile(r"^(\d+ bytes gmem|Compile time =|Compiling entry function|Function properties for|Used \d+ "
                    r"registers|\d+ bytes (?:stack|smem|cmem|lmem))")


def parse(text: str) -> PtxasLog:
    """Read a ptxas ``-v`` log: advisories (known ones explained) and per-function numbers.

    >>> a = parse("ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are "
    ...           "serialized due to non wgmma instructions defining input registers of a wgmma between "
    ...           "start and end of the pipeline stage in the function 'k'").advisories[0]
    >>> a.code, a.severity, a.function, a.known
    ('C7513', 'warning', 'k', True)
    """
    advisories: list[PtxasAdvisory] = []
    seen: set[tuple] = set()
    functions: dict[str, PtxasFunctionStats] = {}
    entry: str | None = None        # the entry function "Used N registers" belongs to
    current: str | None = None      # the function the next "bytes stack frame" line belongs to

    def stats(name: str) -> PtxasFunctionStats:
        if name not in functions:
            functions[name] = PtxasFunctionStats(name)
        return functions[name]

    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LINE.match(line)
        if m is None:
            f = _FRAME.search(line)
            if f and (current or entry):
                s = stats(current or entry)
                s.stack_bytes, s.spill_store_bytes, s.spill_load_bytes = map(int, f.groups())
            continue
        level, code, msg = m.group("level"), m.group("code") or "", m.group("msg").strip()
        if level == "info" and not code:
            e = _ENTRY.match(msg)
            if e:
                entry = current = e.group(1)
                stats(entry)
                continue
            p = _PROPERTIES.match(msg)
            if p:
                current = p.group(1)
                continue
            u = _USED.match(msg)
            if u:
                s = stats(entry or current or "?")
                s.registers = int(u.group(1))
                s.barriers = int(u.group(2)) if u.group(2) else 0
                continue
            if _QUIET.match(msg) or "Potential Performance Loss" not in msg:
                continue
        code, explanation, hint = explain(code, msg)
        severity = {"fatal": "error"}.get(level, level)
        if "Potential Performance Loss" in msg:
            severity = "warning"
        fn = _FUNCTION.search(msg)
        key = (code, msg, m.group("ptx_line"))
        if key in seen:
            continue
        seen.add(key)
        advisories.append(PtxasAdvisory(code, severity, msg, explanation, hint, fn.group(1) if fn else None,
                                        int(m.group("ptx_line")) if m.group("ptx_line") else None))
    for s in functions.values():
        if s.spill_store_bytes or s.spill_load_bytes:
            advisories.append(PtxasAdvisory(
                "spills", "warning",
                f"{s.spill_store_bytes} bytes spill stores, {s.spill_load_bytes} bytes spill loads in '{s.name}'",
                "the function needs more registers than it may use, so values go to local memory (off-chip, "
                "cached in L1) and come back: slow, and in a wgmma loop often the reason it serializes.",
                "use smaller tiles or fewer pipeline buffers in registers, or raise the register budget "
                "(`registers=` of the task that spills, `maxnreg`).", s.name))
        elif s.stack_bytes:
            advisories.append(PtxasAdvisory(
                "stack", "info", f"{s.stack_bytes} bytes stack frame in '{s.name}'",
                "the function keeps data in local memory (a stack frame) without spilling: usually a "
                "register-indexed array or a call.",
                "index tensors with compile-time constants and avoid non-inlined calls in hot loops.", s.name))
    return PtxasLog(text or "", advisories, list(functions.values()))


# ---- pointing at the kernel --------------------------------------------------------------------
_REGISTER_A_WGMMA = re.compile(r"ttng\.warp_group_dot %[\w#]+, .*:\s*tensor<")


def register_operand_wgmma_lines(ttgir: str, source_line) -> list[int]:
    """Kernel lines of the wgmmas whose A operand is in registers (``tlx.async_dot(p, ...)``
    with `p` a tensor), read from the TTGIR; `source_line(ttgir_line)` maps a TTGIR line back."""
    out: list[int] = []
    for i, text in enumerate(ttgir.splitlines(), 1):
        if _REGISTER_A_WGMMA.search(text):
            line = source_line(i)
            if line and line not in out:
                out.append(line)
    return out


def locate(advisories: list[PtxasAdvisory], stages: dict, source_line) -> list[PtxasAdvisory]:
    """Advisories with kernel lines where the IR tells: a message on a PTX line maps through the
    PTX's locations; C7513 names the wgmmas that read A from registers (one of their operands
    is what is written too early). `source_line(stage, line)` is the report's source map."""
    out = []
    for a in advisories:
        if a.ptx_line and a.line is None:
            a = dataclasses.replace(a, line=source_line("ptx", a.ptx_line))
        elif a.known and "defining input registers" in a.message and stages.get("ttgir"):
            lines = register_operand_wgmma_lines(stages["ttgir"], lambda i: source_line("ttgir", i))
            if lines:
                where = ", ".join(map(str, lines))
                a = dataclasses.replace(a, line=lines[0], hint=a.hint + f" The wgmmas with A from registers are "
                                        f"`tlx.async_dot` at line{'s' if len(lines) > 1 else ''} {where}: "
                                        "look where their A operand is computed.")
        out.append(a)
    return out
