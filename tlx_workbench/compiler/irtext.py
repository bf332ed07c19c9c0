"""A light reader of TTIR/TTGIR text: ops, their values, regions and warp-specialize tasks.

Triton prints one op per line (region ops open with ``{`` and close with
``} ... loc(...)``), which is all the structure the analyses need: which op sits
on which line, which SSA values it uses and defines, which async task
(``default`` / ``partitionN``) it runs in, and which SMEM/TMEM allocation a
``!ttg.memdesc`` value is a view of. Reading the text keeps the report
independent of MLIR Python bindings that Triton does not promise to keep.

>>> m = IRModule(open("kernel.ttgir").read())          # doctest: +SKIP
>>> [op.name for op in m.ops if op.name.startswith("ttng.")][:2]  # doctest: +SKIP
['ttng.init_barrier', 'ttng.init_barrier']
"""
from __future__ import annotations

import dataclasses
import re

from .locations import Loc, LocTable, UNKNOWN

_OP_RE = re.compile(r"^\s*(?:(?P<res>%[^=]*?) = )?(?P<name>\"?[a-z_][\w]*\.[\w.]+\"?)(?P<rest>.*)$")
_VAL_RE = re.compile(r"%[\w.$-]+(?:#\d+)?")
_PARTITION_RE = re.compile(r"^\s*partition(\d+)\((.*)\)\s*num_warps\((\d+)\)\s*\{\s*$")
_CONST_RE = re.compile(r"arith\.constant\s+(true|false|-?\d+)\s*:")
_MEMDESC_RE = re.compile(r"!ttg\.memdesc<([^>]*)>")


@dataclasses.dataclass
class Op:
    line: int                        # 1-based line in the module text
    text: str
    name: str                        # "ttng.wait_barrier"
    results: list[str]
    operands: list[str]
    loc: Loc
    task: "str | int | None"         # None outside warp_specialize, "default", or partition index
    scope: int                       # SSA naming scope (partitions are isolated from above)

    def attr(self, key: str) -> str | None:
        m = re.search(rf"\b{re.escape(key)}\s*=\s*([^,}}]+)", self.text)
        return m.group(1).strip() if m else None

    def int_attr(self, key: str) -> int | None:
        v = self.attr(key)
        m = re.match(r"-?\d+", v or "")
        return int(m.group()) if m else None

    @property
    def result_memdesc(self) -> "MemDesc | None":
        """The memdesc type this op defines (the last ``-> !ttg.memdesc<..>`` or ``: !ttg.memdesc<..>``)."""
        body = self.text.rsplit(" loc(", 1)[0]
        if "->" in body:
            body = body.rsplit("->", 1)[1]
        found = _MEMDESC_RE.findall(body)
        return MemDesc.parse(found[-1]) if found else None


@dataclasses.dataclass
class MemDesc:
    shape: tuple[int, ...]
    dtype: str
    encoding: str
    space: str                       # "smem" | "tmem"

    @classmethod
    def parse(cls, inner: str) -> "MemDesc":
        parts = [p.strip() for p in inner.split(",")]
        dims = parts[0].split("x")
        shape = tuple(int(d) for d in dims[:-1] if d.isdigit())
        dtype = dims[-1]
        space = "tmem" if any("tensor_memory" in p for p in parts[1:]) else "smem"
        return cls(shape, dtype, parts[1] if len(parts) > 1 else "", space)

    @property
    def elem_bits(self) -> int:
        m = re.search(r"(\d+)", self.dtype)
        if self.dtype.startswith(("f8", "fp8")) or "f8E" in self.dtype:
            return 8
        return int(m.group(1)) if m else 32


@dataclasses.dataclass
class Partition:
    index: int                       # None-able in spirit: "default" is kept separately
    num_warps: int
    args: list[str]                  # block argument names, positionally = ws operands
    line: int                        # header line
    end_line: int = 0


@dataclasses.dataclass
class WarpSpecialize:
    line: int
    operands: list[str]
    default_line: int = 0
    default_end: int = 0
    partitions: list[Partition] = dataclasses.field(default_factory=list)
    op: Op | None = None
    loc: Loc = UNKNOWN


_PARTITION_LINE_RE = re.compile(r"^[ \t]*partition\d+\(.*$", re.M)


class WarpSpecializeHeaders:
    """The ``ttg.warp_specialize`` ops of a module and their partition headers, and nothing
    else: what the task layout reads, found with two regexes over the text instead of
    :class:`IRModule`'s op-by-op parse (which the task layout does not need). Each
    :class:`WarpSpecialize` has its op's line (``op.text``, with the attributes), operands and
    partitions (index, num_warps, block args, header line); ``default_*``, ``end_line`` and
    locations stay unset.

    >>> WarpSpecializeHeaders(ttgir).warp_specializes[0].partitions[0].num_warps   # doctest: +SKIP
    4
    """

    def __init__(self, text: str):
        self.warp_specializes: list[WarpSpecialize] = []
        found = [(m.start(), 1, m.group(0)) for m in _PARTITION_LINE_RE.finditer(text)]
        i = text.find("ttg.warp_specialize")
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            found.append((start, 0, text[start:end]))
            i = text.find("ttg.warp_specialize", end)
        found.sort(key=lambda x: x[0])
        line, at = 1, 0
        current: WarpSpecialize | None = None
        for pos, kind, raw in found:
            line += text.count("\n", at, pos)
            at = pos
            if kind == 0:
                om = _OP_RE.match(raw)
                if not om or om.group("name").strip('"') != "ttg.warp_specialize":
                    continue
                rest = om.group("rest")
                body = rest.rsplit(" loc(", 1)[0] if rest.rstrip().endswith(")") else rest
                operands = _VAL_RE.findall(body)
                op = Op(line, raw, "ttg.warp_specialize", IRModule._results(om.group("res")), operands,
                        UNKNOWN, None, 0)
                current = WarpSpecialize(line, operands, op=op)
                self.warp_specializes.append(current)
            elif current is not None:
                pm = _PARTITION_RE.match(raw)
                if pm:
                    args = re.findall(r"(%[\w.$-]+)\s*:", pm.group(2))
                    current.partitions.append(Partition(int(pm.group(1)), int(pm.group(3)), args, line))


class IRModule:
    """The ops of one TTIR/TTGIR module, with tasks, constants and memdesc roots."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines()
        self.locs = LocTable.from_text(text)
        self.ops: list[Op] = []
        self.warp_specializes: list[WarpSpecialize] = []
        self.defs: dict[tuple[int, str], Op] = {}
        self.consts: dict[tuple[int, str], int] = {}
        self._alias: dict[tuple[int, str], tuple[int, str]] = {}
        self._parse()

    # ---- parsing -------------------------------------------------------------------------
    def _parse(self) -> None:
        stack: list[tuple[str, object]] = []   # (kind, payload)
        scope_counter = 0
        pending_ws: WarpSpecialize | None = None
        for i, raw in enumerate(self.lines, start=1):
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            task, scope = self._context(stack)
            if s.startswith("}"):
                kind, payload = stack.pop() if stack else ("other", None)
                if kind == "default" and pending_ws is not None:
                    pending_ws.default_end = i
                if kind == "partition":
                    payload[1].end_line = i
                if kind in ("default", "partition") and pending_ws is not None and not s.endswith("{"):
                    # the closing line of the last region carries the ws op's type and loc
                    pending_ws.loc = self.locs.of_line(raw)
                    if pending_ws.op is not None:
                        pending_ws.op.loc = pending_ws.loc
                task, scope = self._context(stack)
            if s == "default {" and pending_ws is not None:
                pending_ws.default_line = i
                stack.append(("default", pending_ws))
                continue
            m = _PARTITION_RE.match(raw)
            if m and pending_ws is not None:
                scope_counter += 1
                args = re.findall(r"(%[\w.$-]+)\s*:", m.group(2))
                part = Partition(int(m.group(1)), int(m.group(3)), args, i)
                pending_ws.partitions.append(part)
                stack.append(("partition", (scope_counter, part)))
                # partition block args stand for the ws operands (defined outside, scope 0)
                for a, o in zip(args, pending_ws.operands):
                    self._alias[(scope_counter, a)] = (0, o)
                continue
            if s.startswith("}"):
                if s.endswith("{"):
                    stack.append(("other", None))
                continue
            om = _OP_RE.match(raw)
            if not om:
                if s.endswith("{"):
                    stack.append(("other", None))
                continue
            name = om.group("name").strip('"')
            rest = om.group("rest")
            body = rest.rsplit(" loc(", 1)[0] if rest.rstrip().endswith(")") else rest
            results = self._results(om.group("res"))
            operands = _VAL_RE.findall(body)
            op = Op(i, raw, name, results, operands, self.locs.of_line(raw), task, scope)
            self.ops.append(op)
            for r in results:
                self.defs[(scope, r)] = op
            if name == "arith.constant":
                cm = _CONST_RE.search(raw)
                if cm and results:
                    v = cm.group(1)
                    self.consts[(scope, results[0])] = 1 if v == "true" else 0 if v == "false" else int(v)
            # loop-carried values: iter_args(%x = %y), scf.while (%x = %y)
            carried = body
            if name == "scf.for":  # `%k = %lb to %ub`: the induction variable is no alias
                im = re.search(r"iter_args\((.*?)\)", body)
                carried = im.group(1) if im else ""
            for a, b in re.findall(r"(%[\w.$-]+) = (%[\w.$-]+(?:#\d+)?)", carried):
                self._alias[(scope, a)] = (scope, b)
            if name in ("scf.for", "scf.while") and results:
                inits = re.findall(r"%[\w.$-]+ = (%[\w.$-]+(?:#\d+)?)", carried)
                for r, b in zip(results, inits):
                    self._alias.setdefault((scope, r), (scope, b))
            if name == "ttg.warp_specialize":
                pending_ws = WarpSpecialize(i, operands, op=op)
                self.warp_specializes.append(pending_ws)
            if s.endswith("{"):
                stack.append(("other", None))

    @staticmethod
    def _results(res: str | None) -> list[str]:
        if not res:
            return []
        out = []
        for part in res.split(","):
            part = part.strip()
            if ":" in part:
                base, n = part.split(":", 1)
                n = int(n) if n.isdigit() else 1
                out.extend(f"{base}#{k}" for k in range(n))
                out.append(base)
            else:
                out.append(part)
        return out

    @staticmethod
    def _context(stack) -> tuple["str | int | None", int]:
        for kind, payload in reversed(stack):
            if kind == "partition":
                return payload[1].index, payload[0]
            if kind == "default":
                return "default", 0
        return None, 0

    # ---- queries -------------------------------------------------------------------------
    def const(self, scope: int, name: str) -> int | None:
        key = self._canon(scope, name)
        return self.consts.get(key)

    def _canon(self, scope: int, name: str) -> tuple[int, str]:
        key = (scope, name)
        seen = set()
        while key in self._alias and key not in seen:
            seen.add(key)
            key = self._alias[key]
        if key not in self.defs and key[0] != 0 and (0, key[1]) in self.defs and key not in self._alias:
            key = (0, key[1])
        return key

    def def_of(self, scope: int, name: str) -> Op | None:
        return self.defs.get(self._canon(scope, name))

    def root(self, scope: int, name: str, _depth: int = 0) -> tuple[Op | None, list[int | None]]:
        """The allocating op a memdesc value views, and the constant indices taken on the way
        (outermost first; None where the index is not a compile-time constant)."""
        op = self.def_of(scope, name)
        indices: list[int | None] = []
        while op is not None and _depth < 64:
            _depth += 1
            if op.name in ("ttg.local_alloc", "ttng.tmem_alloc") or op.name.endswith("alloc_barriers"):
                return op, list(reversed(indices))
            if not op.operands:
                return None, []
            if op.name == "ttg.memdesc_index" and len(op.operands) > 1:
                indices.append(self.const(op.scope, op.operands[1]))
            op = self.def_of(op.scope, op.operands[0])
        return None, []

    def ops_named(self, *names: str) -> list[Op]:
        return [op for op in self.ops if op.name in names]

    def module_int_attr(self, key: str) -> int | None:
        for line in self.lines:
            if line.startswith("module attributes"):
                m = re.search(rf'"?{re.escape(key)}"?\s*=\s*(-?\d+)', line)
                return int(m.group(1)) if m else None
        return None
