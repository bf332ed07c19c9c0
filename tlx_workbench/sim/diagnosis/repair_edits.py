"""Edits of a kernel's source: what a repair is (:class:`Repair`, its diff, the text it makes, the kernel it
rebuilds) and the candidates a failing launch's evidence suggests (:func:`candidates`); ``sim/diagnosis/repair.py`` tries
them on the simulator.

The suspects are the lines the evidence names, in its order (the ranking's cause first, then every line its
text and the wait-for graph name, then every line that signals a barrier it names); each suspect statement offers
the small edits its kind allows. Edits are made on the kernel's source text, statement by statement (``ast``), so
the diff is the kernel's own lines with only what changes.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import html
import itertools
import linecache
import re
import textwrap

_seq = itertools.count(1)

# ---- edits -----------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Edit:
    """Lines ``start``..``end`` (1-based, inclusive) of the original replaced by ``new`` (full lines, with their
    newlines; empty: deleted). ``start == end + 1`` inserts before ``start``."""
    start: int
    end: int
    new: tuple


@dataclasses.dataclass
class Repair:
    """One candidate edit of the kernel's source and, once tried, whether the simulator proved it.

    ``line`` is where a person changes the kernel; ``diff()`` shows the change in the kernel's own lines;
    ``apply(text)`` returns the edited text (``%tlx_fix`` puts it in a new cell)."""
    file: str
    kind: str                  # count | phase | remove-arrive | arrive-count | add-release | move-read | ...
    what: str                  # "arrive_count=2 -> arrive_count=1"
    edits: tuple
    line: int
    prior: int = 0             # the evidence's order of its line (0: the line the ledgers name first)
    verified: bool = False
    schedules: int = 0         # schedules it ran clean (timing only, the last with values)
    values: bool = False       # its last schedule ran with values
    reference: bool | None = None   # matched the reference (None: none given)
    seconds: float = 0.0
    failed: str = ""           # why it did not verify

    penalty: int = 0           # added to the size: an edit that re-wires more than it says (a wait's barrier)

    @property
    def size(self) -> int:
        """Lines changed (a moved statement counts once: one statement changes its place), plus the kind's
        penalty."""
        if self.kind.startswith("move-"):
            return 1 + self.penalty
        old = self.source().splitlines()
        n = 0
        for e in self.edits:
            was = old[e.start - 1:e.end] if e.end >= e.start else []
            now = [x.rstrip("\n") for x in e.new]
            if len(was) == len(now):
                n += sum(a != b for a, b in zip(was, now))
            else:
                n += max(len(was), len(now))
        return n + self.penalty

    def source(self) -> str:
        return "".join(linecache.getlines(self.file))

    def apply(self, text: str | None = None) -> str:
        """The kernel's source (``text``, default its file's) with this repair made.

        >>> res.fix.apply()          # doctest: +SKIP
        """
        lines = (text if text is not None else self.source()).splitlines(keepends=True)
        for e in sorted(self.edits, key=lambda e: e.start, reverse=True):
            lines[e.start - 1:e.end] = list(e.new)
        return "".join(lines)

    jitfn = None               # the kernel it repairs (set by the search)

    def kernel(self):
        """The repaired kernel: a JITFunction built from the edited source (nothing is written anywhere).

        >>> fixed = res.fix.kernel(); wb.simulate(fixed, *args, grid=grid)     # doctest: +SKIP
        """
        if self.jitfn is None:
            raise LookupError("this repair was not made by a search (no kernel to rebuild)")
        return rebuild(self.jitfn, self.apply(), self.file)

    def verified_text(self) -> str:
        if not self.verified:
            return f"not verified ({self.failed})" if self.failed else "not verified"
        ref = " and matches the reference" if self.reference else ""
        vals = " (the last with values)" if self.values and self.schedules > 1 else ""
        return f"verified: with this change the kernel runs clean over {self.schedules} schedules{vals}{ref}"

    @property
    def headline(self) -> str:
        return f"line {self.line}: {self.what} — {self.verified_text()}"

    def diff_lines(self, context: int = 1) -> list[tuple[str, int | None, str]]:
        """[(" " | "-" | "+", line number in the original (None for an added line), text)] around the edits."""
        old = self.source().splitlines()
        new = self.apply().splitlines()
        out = []
        sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for group in sm.get_grouped_opcodes(context):
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    out += [(" ", i + 1, old[i]) for i in range(i1, i2)]
                    continue
                out += [("-", i + 1, old[i]) for i in range(i1, i2)]
                out += [("+", None, new[j]) for j in range(j1, j2)]
            out.append(("...", None, ""))
        return out[:-1]

    def diff(self, context: int = 1) -> str:
        """The change as text, in the kernel's own lines (``-``/``+`` marks, the original's line numbers)."""
        rows = []
        for mark, n, text in self.diff_lines(context):
            if mark == "...":
                rows.append("    ...")
            else:
                rows.append(f"  {mark} {n if n is not None else '':>5} | {text}")
        return "\n".join(rows)

    def diff_html(self, context: int = 1) -> str:
        colors = {"-": "#fdecea", "+": "#e6f4ea", " ": "transparent", "...": "transparent"}
        rows = []
        for mark, n, text in self.diff_lines(context):
            if mark == "...":
                rows.append("<div style='color:#888'>    ...</div>")
                continue
            rows.append(f"<div style='background:{colors[mark]}'>{html.escape(mark)} "
                        f"{'' if n is None else n:>5} | {html.escape(text)}</div>")
        return ("<div class='tlxwb-fix' style='font-family:monospace;white-space:pre;border:1px solid #ccc;"
                "padding:2px 4px;margin:4px 0'>" + "".join(rows) + "</div>")

    def text(self) -> str:
        return f"{self.headline}\n{self.diff()}"

    def __str__(self):
        return self.text()

    def __repr__(self):
        return f"Repair({self.kind}, line {self.line}: {self.what}, {self.verified_text()})"

    def _repr_html_(self):
        how = ("<i>apply it: <code>%tlx_fix</code> in a notebook (a new cell), or "
               "<code>result.fix.apply()</code></i>")
        return (f"<div class='tlxwb-repair'><b>fix</b> line {self.line}: {html.escape(self.what)} — "
                f"{html.escape(self.verified_text())}{self.diff_html()}{how}</div>")



def rebuild(jitfn, text: str, file: str):
    """The JITFunction ``jitfn`` as ``text`` (the whole edited source of its file) defines it: the kernel's def
    (and every def of the file that differs) executed over a copy of its globals, under a file name of its own
    whose lines linecache holds (the simulator re-reads a kernel's source)."""
    from triton.runtime.jit import JITFunction
    name = f"<tlx repair {next(_seq)}>"
    lines = text.splitlines(keepends=True)
    linecache.cache[name] = (len(text), None, lines, name)
    old_tree = ast.parse("".join(linecache.getlines(file)))
    tree = ast.parse(text)
    fn = jitfn.fn
    old_defs = {n.name: ast.dump(n) for n in old_tree.body if isinstance(n, (ast.FunctionDef,))}
    glb = dict(fn.__globals__)
    if fn.__closure__:
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                glb[var] = cell.cell_contents
            except ValueError:
                pass
    target = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == fn.__name__:
            target = node
    if target is None:
        raise LookupError(f"no def {fn.__name__} in the edited source")
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n is not target and
            old_defs.get(n.name) is not None and old_defs[n.name] != ast.dump(n)]
    for node in defs + [target]:
        exec(compile(ast.Module(body=[node], type_ignores=[]), name, "exec"), glb)
    new = glb[fn.__name__]
    for _ in range(8):
        if isinstance(new, JITFunction):
            return new
        new = getattr(new, "fn", None)
    raise LookupError(f"{fn.__name__} is not a @triton.jit function in the edited source")


# ---- the source, as statements ----------------------------------------------------------------------------------
class _Source:
    def __init__(self, file):
        self.file = file
        self.text = "".join(linecache.getlines(file))
        self.lines = self.text.splitlines(keepends=True)
        self.tree = ast.parse(self.text)
        self.parent: dict = {}
        self.owner: dict = {}           # statement -> the node whose body holds it
        for node in ast.walk(self.tree):
            for field in ("body", "orelse", "finalbody"):
                body = getattr(node, field, None)
                if isinstance(body, list):
                    for i, st in enumerate(body):
                        if isinstance(st, ast.stmt):
                            self.parent[st] = (body, i)
                            self.owner[st] = node

    def stmt(self, line):
        """The innermost simple statement that spans ``line``."""
        best = None
        for st in self.parent:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While, ast.If,
                               ast.With, ast.Try)):
                continue
            if st.lineno <= line <= (st.end_lineno or st.lineno):
                if best is None or (st.end_lineno - st.lineno) < (best.end_lineno - best.lineno):
                    best = st
        return best

    def seg(self, st) -> str:
        return "".join(self.lines[st.lineno - 1:st.end_lineno])

    def func_of(self, line):
        best = None
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.lineno <= line <= node.end_lineno:
                if best is None or node.lineno > best.lineno:
                    best = node
        return best

    def calls(self, name, within=None):
        """(statement, Call) of every call of ``...name(...)`` (in ``within``'s subtree)."""
        out = []
        for node in ast.walk(within or self.tree):
            if isinstance(node, ast.Call) and _callee(node) == name:
                st = self.stmt(node.lineno)
                if st is not None:
                    out.append((st, node))
        return sorted(out, key=lambda x: x[1].lineno)

    def src(self, node) -> str:
        return ast.get_source_segment(self.text, node) or ""


def _callee(call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _arg(call, pos, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[pos] if len(call.args) > pos else None


def _replace_node(src: _Source, st, node, new_text: str) -> Edit:
    """The statement ``st`` with the text of ``node`` (inside it) replaced."""
    lines = src.lines[st.lineno - 1:st.end_lineno]
    start = sum(len(x) for x in lines[:node.lineno - st.lineno]) + _col(lines[node.lineno - st.lineno],
                                                                         node.col_offset)
    end = sum(len(x) for x in lines[:node.end_lineno - st.lineno]) + _col(lines[node.end_lineno - st.lineno],
                                                                          node.end_col_offset)
    seg = "".join(lines)
    return Edit(st.lineno, st.end_lineno, tuple((seg[:start] + new_text + seg[end:]).splitlines(keepends=True)))


def _col(line: str, byte_col: int) -> int:
    # ast columns count UTF-8 bytes
    return len(line.encode()[:byte_col].decode(errors="ignore"))


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


# ---- the evidence -----------------------------------------------------------------------------------------------
_LINES = re.compile(r"\blines?(?:\(s\))? ((?:\d+)(?:(?:, | and )\d+)*)")


def suspects(texts, lead=()) -> list[int]:
    """The lines the evidence names, in its order: ``lead`` first, then every "line N" of ``texts``."""
    out = []
    for n in lead:
        if n and n not in out:
            out.append(n)
    for t in texts:
        for m in _LINES.finditer(t or ""):
            for n in re.findall(r"\d+", m.group(1)):
                n = int(n)
                if n not in out:
                    out.append(n)
    return out


class _Ledger:
    """Per barrier array (by name): lanes that arrive, arrivals per phase, bytes landed per round."""

    def __init__(self, trace):
        self.lanes: dict = {}            # name -> {lane}
        self.per_phase: dict = {}        # name -> max arrivals (counts summed) in one phase of one slot
        self.init: dict = {}             # name -> count at init
        self.tx_by_line: dict = {}       # name -> {load line: [bytes per event]}
        self.expect_by_line: dict = {}   # name -> {expect line: [bytes per event]}
        self.arrive_lines: dict = {}     # name -> {arrive line}
        cur: dict = {}
        for e in trace.barrier_events:
            key = (e.cta, e.barrier, e.slot)
            if e.kind == "init":
                self.init.setdefault(e.barrier, e.count)
            elif e.kind in ("arrive", "expect"):
                self.lanes.setdefault(e.barrier, set()).add(e.lane)
                if e.kind == "arrive":
                    self.arrive_lines.setdefault(e.barrier, set()).add(e.line)
                cur[key] = cur.get(key, 0) + (e.count if e.kind == "arrive" else 1)
                self.per_phase[e.barrier] = max(self.per_phase.get(e.barrier, 0), cur[key])
                if e.kind == "expect":
                    self.expect_by_line.setdefault(e.barrier, {}).setdefault(e.line, []).append(e.bytes)
            elif e.kind == "flip":
                cur[key] = 0
            elif e.kind == "tx":
                self.tx_by_line.setdefault(e.barrier, {}).setdefault(e.line, []).append(e.bytes)

    def landed_per_round(self, name) -> int | None:
        by = self.tx_by_line.get(name)
        if not by:
            return None
        return sum(_mode(v) for v in by.values())

    def announced(self, name, line) -> int | None:
        v = self.expect_by_line.get(name, {}).get(line)
        return _mode(v) if v else None


def _mode(vals):
    return max(set(vals), key=vals.count)


# ---- candidates -------------------------------------------------------------------------------------------------
def candidates(file, trace, texts, lead=(), cause=None) -> list[Repair]:
    """Candidate repairs of ``file`` from the evidence: ``texts`` (the diagnosis, the findings) name the suspect
    lines in order after ``lead``; ``cause`` (a sim.diagnosis.diagnose.Cause) adds a release to insert where one is missing.
    Ordered for trying: fewest lines changed, then the evidence's order."""
    try:
        src = _Source(file)
    except (SyntaxError, ValueError, OSError):
        return []
    if not src.lines:
        return []
    led = _Ledger(trace) if trace is not None else None
    sus = suspects(texts, lead)
    if led is not None:
        # then every line that signals a barrier the evidence names (its loads, arrives, announcements): the line
        # that is wrong may be one the ranking did not name (the second load of a barrier, an extra arrive)
        named = list(dict.fromkeys(re.findall(r"\b([A-Za-z_]\w*)\[\d+\]", " ".join(t or "" for t in texts))))
        for name in named:
            for ln in sorted(set(led.tx_by_line.get(name, {})) | set(led.arrive_lines.get(name, ()))):
                if ln and ln not in sus:
                    sus.append(ln)
    sus = [n for n in sus if 1 <= n <= len(src.lines)]
    out: list[Repair] = []
    seen = set()

    def add(kind, what, edits, line, prior, penalty=0):
        key = tuple(edits)
        if key in seen or not edits:
            return
        seen.add(key)
        out.append(Repair(file, kind, what, tuple(edits), line, prior, penalty=penalty))

    if cause is not None and getattr(cause, "rule", "") == "missing-release" and getattr(cause, "data", None):
        for rep in _add_release(src, cause):
            add(*rep, prior=0)
    done = set()
    for prior, n in enumerate(sus):
        st = src.stmt(n)
        if st is None or st in done:
            continue
        done.add(st)
        for kind, what, edits, line, *pen in _edits_of(src, st, led):
            add(kind, what, edits, line, prior, pen[0] if pen else 0)
    out.sort(key=lambda r: (r.size, r.prior))
    return out


def _edits_of(src, st, led):
    for call in [c for c in ast.walk(st) if isinstance(c, ast.Call)]:
        name = _callee(call)
        if name in ("alloc_barriers", "alloc_warp_barrier"):
            yield from _count_edits(src, st, call, led)
        elif name == "barrier_wait":
            yield from _phase_edits(src, st, call)
            yield from _partner_edits(src, st, call, 0, "bar", ("barrier_wait",))
        elif name == "barrier_arrive":
            yield from _arrive_edits(src, st, call)
            yield from _partner_edits(src, st, call, 0, "bar", ("barrier_arrive", "barrier_wait"), same=True)
        elif name == "local_view":
            yield from _slot_edits(src, st, call)
        elif name == "barrier_expect_bytes":
            yield from _bytes_edits(src, st, call, led)
        elif name == "async_descriptor_load":
            yield from _partner_edits(src, st, call, 3, "barrier", ("barrier_expect_bytes",
                                                                    "async_descriptor_load"))
        elif name in ("named_barrier_arrive", "named_barrier_wait"):
            yield from _named_edits(src, st, call)
        elif name == "async_dot_wait":
            yield from _dot_wait_edits(src, st, call)
        elif name in ("local_load", "async_dot"):
            yield from _move_read(src, st)


def _count_edits(src, st, call, led):
    kw = "num_arrivals" if _callee(call) == "alloc_warp_barrier" else "arrive_count"
    node = _arg(call, 2 if kw == "num_arrivals" else 1, kw)
    target = st.targets[0] if isinstance(st, ast.Assign) and st.targets else None
    name = target.id if isinstance(target, ast.Name) else None
    if name is None or led is None:
        return
    if kw == "num_arrivals" and led.expect_by_line.get(name):
        # a warp barrier that TMA loads complete: barrier_expect_bytes arrives once, a warp barrier counts threads
        nb = _arg(call, 0, "num_barriers")
        if nb is not None:
            prefix = src.src(call.func).rsplit(".", 1)[0]
            prefix = f"{prefix}." if "." in src.src(call.func) else ""
            new = f"{prefix}alloc_barriers(num_barriers={src.src(nb)}, arrive_count=1)"
            yield ("partner", f"an mbarrier for a TMA barrier: {src.src(call)} -> {new}",
                   [_replace_node(src, st, call, new)], call.lineno)
    lanes = len(led.lanes.get(name, ()))
    per = led.per_phase.get(name, 0)
    cur = led.init.get(name)
    if node is None:
        return
    want = [lanes, per] if kw == "arrive_count" else [lanes]
    if kw == "num_arrivals" and cur:
        # a warp barrier's init count is threads: num_warps x 32 x num_arrivals; what arrives is lanes
        want = [lanes]
        cur = None
    old = src.src(node)
    if _is_parameter(src, st, node):
        # the count is the kernel's parameter: its value comes from the launch, which is not the kernel's line to
        # change (a number in its place would fix this launch and break the others)
        return
    for v in dict.fromkeys(w for w in want if w and w != cur):
        for text in _retarget(old, cur, v):
            yield "count", f"{kw}={old} -> {kw}={text}", [_replace_node(src, st, node, text)], node.lineno


def _is_parameter(src, st, node) -> bool:
    """Whether ``node`` is a bare parameter of the function that holds ``st``."""
    fn = src.func_of(st.lineno)
    if fn is None or not isinstance(node, ast.Name):
        return False
    return node.id in {a.arg for a in fn.args.args + fn.args.kwonlyargs}


def _retarget(old: str, cur: int | None, want: int) -> list[str]:
    """Ways to write ``want`` where ``old`` (worth ``cur``, when known) stands: in the expression's own terms
    first (a constant factor or term of it changed or dropped), else the number."""
    out = []
    try:
        expr = ast.parse(old, mode="eval").body
    except SyntaxError:
        return [str(want)]
    if isinstance(expr, ast.Constant):
        return [str(want)]
    if cur:
        # a term at the root: X + k / X - k
        if isinstance(expr, ast.BinOp) and isinstance(expr.right, ast.Constant) and \
                isinstance(expr.right.value, int) and isinstance(expr.op, (ast.Add, ast.Sub)):
            k = expr.right.value
            if (cur - k if isinstance(expr.op, ast.Add) else cur + k) == want:
                out.append(ast.unparse(expr.left))
        # a constant factor of the root product: replace or drop it
        for node in _factors(expr):
            k = node.value
            if want * k % cur == 0:
                nk = want * k // cur
                new = _swap_const(expr, node, nk)
                if new:
                    out.append(new)
        if cur % want == 0 and cur != want:
            out.append(f"{old} // {cur // want}" if not isinstance(expr, ast.BinOp) or
                       isinstance(expr.op, (ast.Mult, ast.FloorDiv)) else f"({old}) // {cur // want}")
        elif want % cur == 0:
            out.append(f"{old} * {want // cur}" if not isinstance(expr, ast.BinOp) or
                       isinstance(expr.op, (ast.Mult, ast.FloorDiv)) else f"({old}) * {want // cur}")
    out.append(str(want))
    return list(dict.fromkeys(out))


def _factors(expr):
    """Integer constants that multiply the whole expression (through a chain of ``*`` from the root)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        for side in (expr.left, expr.right):
            if isinstance(side, ast.Constant) and isinstance(side.value, int) and side.value > 0:
                yield side
            else:
                yield from _factors(side)


def _swap_const(expr, node, value) -> str | None:
    """``expr`` with the factor ``node`` set to ``value`` (dropped when 1)."""
    def walk(n):
        if n is node:
            return ast.Constant(value) if value != 1 else None
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            left, right = walk(n.left), walk(n.right)
            if left is None:
                return right
            if right is None:
                return left
            return ast.BinOp(left, n.op, right)
        return n
    new = walk(expr)
    return ast.unparse(new) if new is not None else None


def _phase_edits(src, st, call):
    node = _arg(call, 1, "phase")
    if node is None:
        return
    old = src.src(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor) and \
            isinstance(node.right, ast.Constant) and node.right.value == 1:
        new = src.src(node.left)
    elif isinstance(node, ast.Constant) and node.value in (0, 1):
        new = str(1 - node.value)
    else:
        new = f"{old} ^ 1"
    yield "phase", f"phase {old} -> {new}", [_replace_node(src, st, node, new)], node.lineno


def _arrive_edits(src, st, call):
    cnt = _arg(call, 1, "arrive_count")
    if cnt is not None and src.src(cnt) not in ("1",):
        bar = src.src(call.args[0]) if call.args else ""
        yield ("arrive-count", f"arrive once: barrier_arrive({bar}, {src.src(cnt)}) -> barrier_arrive({bar})",
               [_replace_node(src, st, call, f"{src.src(call.func)}({bar})")], call.lineno)
    body, i = src.parent[st]
    own = src.owner.get(st)
    if isinstance(own, ast.If) and own.body == [st] and not own.orelse:
        # an arrive under a condition that skips it in some rounds: make it unconditional
        if st.lineno == own.lineno:         # `if cond: tlx.barrier_arrive(...)` on one line
            text = src.src(st) + "\n"
        else:
            text = textwrap.dedent("".join(src.lines[st.lineno - 1:st.end_lineno]))
        new = textwrap.indent(text, _indent(src.lines[own.lineno - 1]))
        yield ("unconditional", f"arrive in every round: drop `if {src.src(own.test)}:` at line {own.lineno}",
               [Edit(own.lineno, own.end_lineno, tuple(new.splitlines(keepends=True)))], own.lineno)
    keep = "pass" if len(body) == 1 else None
    ind = _indent(src.lines[st.lineno - 1])
    shared = [o for o in body if o is not st and o.lineno <= st.end_lineno and (o.end_lineno or o.lineno) >= st.lineno]
    if shared:
        # one of several statements on its line (``a; b``): only its own text goes
        line = src.lines[st.lineno - 1]
        a, b = _col(line, st.col_offset), _col(line, st.end_col_offset)
        left, right = line[:a], line[b:]
        if right.lstrip().startswith(";"):
            right = right.lstrip()[1:].lstrip()
            new = left + right
        else:
            new = left.rstrip().rstrip(";").rstrip() + right
        yield ("remove-arrive", f"remove the barrier_arrive `{src.src(st)}` at line {st.lineno}",
               [Edit(st.lineno, st.lineno, (new if new.endswith("\n") else new + "\n",))], st.lineno)
        return
    yield ("remove-arrive", f"remove the barrier_arrive at line {st.lineno}",
           [Edit(st.lineno, st.end_lineno, (f"{ind}pass\n",) if keep else ())], st.lineno)
    # a release before the read it pays for: move it past the next read of the same block
    for j in range(i + 1, min(len(body), i + 4)):
        nxt = body[j]
        if not isinstance(nxt, ast.stmt) or isinstance(nxt, (ast.For, ast.While, ast.If, ast.With)):
            break
        if any(isinstance(c, ast.Call) and _callee(c) in ("local_load", "async_dot", "async_dot_wait")
               for c in ast.walk(nxt)):
            yield ("move-arrive", f"move the barrier_arrive at line {st.lineno} after line {nxt.end_lineno}",
                   [Edit(st.lineno, st.end_lineno, ()),
                    Edit(nxt.end_lineno + 1, nxt.end_lineno, tuple(src.lines[st.lineno - 1:st.end_lineno]))],
                   st.lineno)
            break


def _wait_after(body, i):
    """The first statement of ``body`` after index ``i`` (within a few, before any block) that waits on a barrier."""
    for j in range(i + 1, min(len(body), i + 7)):
        nxt = body[j]
        if isinstance(nxt, (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef)):
            return None
        if any(isinstance(c, ast.Call) and _callee(c) == "barrier_wait" for c in ast.walk(nxt)):
            return nxt
    return None


def _move_read(src, st):
    body, i = src.parent[st]
    nxt = _wait_after(body, i)
    if nxt is not None:
        yield ("move-read", f"move the read at line {st.lineno} after the wait at line {nxt.lineno}",
               [Edit(st.lineno, st.end_lineno, ()),
                Edit(nxt.end_lineno + 1, nxt.end_lineno, tuple(src.lines[st.lineno - 1:st.end_lineno]))],
               st.lineno)
        return
    # the read is in a branch of an ``if`` (an operand chosen by a constexpr, say) and the wait follows the ``if``:
    # the wait moves up, before the branch, at the branch's own indentation
    own = src.owner.get(st)
    if isinstance(own, ast.If) and own in src.parent:
        obody, oi = src.parent[own]
        nxt = _wait_after(obody, oi)
        if nxt is not None:
            yield ("move-read", f"move the wait at line {nxt.lineno} before the branch at line {own.lineno}, whose "
                                f"read at line {st.lineno} it guards",
                   [Edit(own.lineno, own.lineno - 1, tuple(src.lines[nxt.lineno - 1:nxt.end_lineno])),
                    Edit(nxt.lineno, nxt.end_lineno, ())],
                   st.lineno)


def _bytes_edits(src, st, call, led):
    node = _arg(call, 1, "size")
    bar = _arg(call, 0, "bar")
    if node is None or bar is None or led is None:
        return
    name = _array_of(src, bar, st)
    cur = led.announced(name, st.lineno) if name else None
    landed = led.landed_per_round(name) if name else None
    if not cur or not landed:
        return
    others = sum(_mode(v) for ln, v in led.expect_by_line.get(name, {}).items() if ln != st.lineno)
    want = landed - others
    if want <= 0 or want == cur:
        return
    old = src.src(node)
    if _is_parameter(src, st, node):
        return
    for text in _retarget(old, cur, want)[:3]:
        yield "bytes", f"expect {old} -> {text} ({want} bytes)", [_replace_node(src, st, node, text)], node.lineno


def _array_of(src, bar, st) -> str | None:
    """The barrier array a barrier expression names: ``full[s]`` -> full; a ``local_view(arr, i)`` alias -> arr."""
    root = bar
    while isinstance(root, ast.Subscript):
        root = root.value
    if not isinstance(root, ast.Name):
        return None
    fn = src.func_of(st.lineno)
    for node in ast.walk(fn or src.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id == root.id and isinstance(node.value, ast.Call) and \
                _callee(node.value) == "local_view" and node.value.args:
            inner = node.value.args[0]
            while isinstance(inner, ast.Subscript):
                inner = inner.value
            if isinstance(inner, ast.Name):
                return inner.id
    return root.id


def _partner_edits(src, st, call, pos, kw, kinds, same=False):
    """The barrier argument swapped for its partner: another barrier (or, with ``same``, another slot of the same
    array) that the same kinds of call in the function name, nearest first."""
    node = _arg(call, pos, kw)
    if node is None:
        return
    old = src.src(node)
    mine = _array_of(src, node, st)
    fn = src.func_of(st.lineno)
    alts = {}
    for kind in kinds:
        for ost, oc in src.calls(kind, fn):
            bn = _arg(oc, 0 if kind != "async_descriptor_load" else 3, "bar" if kind != "async_descriptor_load"
                      else "barrier")
            if bn is None or src.src(bn) == old:
                continue
            other = _array_of(src, bn, ost)
            if (other == mine) != same:
                continue
            t = src.src(bn)
            alts[t] = min(alts.get(t, 1 << 30), abs(ost.lineno - st.lineno))
    wait = _callee(call) == "barrier_wait"
    alts = {t: d for t, d in alts.items() if _visible(src, st, t)}
    for t, _ in sorted(alts.items(), key=lambda x: x[1])[:2]:
        yield ("slot" if same else "partner", f"{old} -> {t}", [_replace_node(src, st, node, t)], node.lineno,
               1 if wait else 0)


def _slot_edits(src, st, call):
    """A barrier view's slot index set to one the function's other views of barriers use (nearest first)."""
    if len(call.args) < 2 or not isinstance(call.args[0], ast.Name):
        return
    arr, idx = call.args[0].id, call.args[1]
    if not _is_barrier_array(src, arr, st):
        return
    old = src.src(idx)
    fn = src.func_of(st.lineno)
    alts = {}
    for ost, oc in src.calls("local_view", fn):
        if oc is call or len(oc.args) < 2 or not isinstance(oc.args[0], ast.Name) or \
                not _is_barrier_array(src, oc.args[0].id, ost):
            continue
        t = src.src(oc.args[1])
        if t != old:
            alts[t] = min(alts.get(t, 1 << 30), abs(ost.lineno - st.lineno))
    alts = {t: d for t, d in alts.items() if _visible(src, st, t)}
    for t, _ in sorted(alts.items(), key=lambda x: x[1])[:2]:
        yield "slot", f"slot {old} -> {t}", [_replace_node(src, st, idx, t)], idx.lineno


def _visible(src, st, text: str) -> bool:
    """Whether every name ``text`` reads is bound where ``st`` runs: a parameter, a module-level name, or a name
    assigned in the function outside any ``async_task`` block or inside the one that holds ``st`` (each task
    body runs on its own: a name another task assigns is not there)."""
    try:
        names = {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}
    except SyntaxError:
        return False
    fn = src.func_of(st.lineno)
    if fn is None:
        return True
    bound = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    for node in src.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    tasks = [w for w in ast.walk(fn) if isinstance(w, ast.With) and any(
        isinstance(i.context_expr, ast.Call) and _callee(i.context_expr) == "async_task" for i in w.items)]
    mine = next((w for w in tasks if w.lineno <= st.lineno <= w.end_lineno), None)

    def in_other_task(n):
        return any(w is not mine and w.lineno <= n.lineno <= w.end_lineno for w in tasks)
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not in_other_task(n):
            bound.add(n.id)          # assignments, loop and with targets alike
    import builtins
    return all(x in bound or hasattr(builtins, x) for x in names)


def _is_barrier_array(src, name, st) -> bool:
    fn = src.func_of(st.lineno)
    for node in ast.walk(fn or src.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id == name and isinstance(node.value, ast.Call) and \
                _callee(node.value) in ("alloc_barriers", "alloc_warp_barrier"):
            return True
    return False


def _named_edits(src, st, call):
    bid, cnt = _arg(call, 0, "bar"), _arg(call, 1, "num_threads")
    fn = src.func_of(st.lineno)
    ids, counts = [], []
    for kind in ("named_barrier_arrive", "named_barrier_wait"):
        for ost, oc in src.calls(kind, fn):
            if oc is call:
                continue
            b, c = _arg(oc, 0, "bar"), _arg(oc, 1, "num_threads")
            if b is not None and bid is not None and src.src(b) != src.src(bid):
                ids.append((abs(ost.lineno - st.lineno), src.src(b)))
            if c is not None and cnt is not None and b is not None and bid is not None and \
                    src.src(b) == src.src(bid) and src.src(c) != src.src(cnt):
                counts.append((abs(ost.lineno - st.lineno), src.src(c)))
    for _, t in sorted(dict((t, (d, t)) for d, t in counts).values())[:2]:
        yield "named-threads", f"num_threads {src.src(cnt)} -> {t}", [_replace_node(src, st, cnt, t)], cnt.lineno
    for _, t in sorted(dict((t, (d, t)) for d, t in ids).values())[:3]:
        yield "named-id", f"named barrier {src.src(bid)} -> {t}", [_replace_node(src, st, bid, t)], bid.lineno


def _dot_wait_edits(src, st, call):
    node = _arg(call, 0, "pendings")
    if node is None:
        return
    inner = node
    if isinstance(node, ast.Call) and node.args and _callee(node) == "constexpr":
        inner = node.args[0]
    if not (isinstance(inner, ast.Constant) and isinstance(inner.value, int) and inner.value > 0):
        return
    for v in range(inner.value - 1, -1, -1):
        yield ("dot-wait", f"async_dot_wait pendings {inner.value} -> {v}",
               [_replace_node(src, st, inner, str(v))], inner.lineno)


def _add_release(src, cause):
    """A release where the release map says one is missing: after the read that owes it (``cause.data``)."""
    d = cause.data
    name, after = d.get("array"), d.get("after")
    if not name or not after or after > len(src.lines):
        return
    fn = src.func_of(after)
    exprs = []
    for kind in ("barrier_arrive", "barrier_wait"):
        for ost, oc in src.calls(kind, fn):
            bn = _arg(oc, 0, "bar")
            if bn is not None and _array_of(src, bn, ost) == name:
                t = src.src(bn)
                exprs.append((0 if kind == "barrier_arrive" else 1, abs(ost.lineno - after), t))
    at = cause.line
    st_at = src.stmt(at) if at else None
    anchor = src.stmt(after)
    if anchor is None:
        return
    ind = _indent(src.lines[anchor.lineno - 1])
    exprs = [e for e in exprs if _visible(src, anchor, e[2])]
    for _, _, t in sorted(dict((e[2], e) for e in exprs).values())[:2]:
        new = f"{ind}tlx.barrier_arrive({t})\n"
        if st_at is not None and isinstance(st_at, ast.Pass) and st_at.lineno == at:
            yield "add-release", f"pass -> tlx.barrier_arrive({t})", [Edit(at, at, (new,))], at
        else:
            yield ("add-release", f"add tlx.barrier_arrive({t}) after line {anchor.end_lineno}",
                   [Edit(anchor.end_lineno + 1, anchor.end_lineno, (new,))], anchor.end_lineno + 1)
