"""What the IR has lost and the kernel's Python source still says: which call sits on a
line, its keyword arguments, the ``if`` tests around it, and edits to one call.

Lines are absolute line numbers of the kernel's file (as the CompileReport gives them).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import linecache


@dataclasses.dataclass
class Call:
    """One call in the source: ``tlx.barrier_arrive(bar, 1, remote_cta_rank=0)``."""
    name: str                      # last attribute: "barrier_arrive"
    line: int
    end_line: int
    node: ast.Call
    file: str
    text: str                      # the call's own source

    def kwarg(self, name: str, pos: int | None = None) -> str | None:
        """Source of keyword `name` (or of positional argument `pos`), None when absent."""
        for kw in self.node.keywords:
            if kw.arg == name:
                return _seg(self.file, kw.value)
        if pos is not None and pos < len(self.node.args):
            return _seg(self.file, self.node.args[pos])
        return None


class SourceFile:
    """A parsed kernel file, cached per path and content."""

    def __init__(self, path: str):
        self.path = path
        self.text = "".join(linecache.getlines(path))
        self.tree = ast.parse(self.text)
        self.lines = self.text.splitlines(keepends=True)
        self._parents: dict[int, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self._parents[id(child)] = node
        self.calls = [Call(_name(n.func), n.lineno, n.end_lineno, n, path, _seg(path, n) or "")
                      for n in ast.walk(self.tree) if isinstance(n, ast.Call)]

    def calls_at(self, line: int, *names: str) -> list[Call]:
        """Calls named `names` whose source spans `line` (innermost first)."""
        out = [c for c in self.calls if (not names or c.name in names) and c.line <= line <= c.end_line]
        return sorted(out, key=lambda c: c.end_line - c.line)

    def call_at(self, line: int, *names: str) -> Call | None:
        hits = self.calls_at(line, *names)
        return hits[0] if hits else None

    def enclosing_ifs(self, node: ast.AST) -> list[tuple[str, bool]]:
        """[(test source, in the body?)] of every ``if`` around `node`, outermost last."""
        out = []
        child = node
        parent = self._parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.If) and child is not parent.test:
                out.append((_seg(self.path, parent.test) or "?", child in parent.body))
            if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            child, parent = parent, self._parents.get(id(parent))
        return out

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | None:
        parent = self._parents.get(id(node))
        while parent is not None and not isinstance(parent, ast.FunctionDef):
            parent = self._parents.get(id(parent))
        return parent

    def statement_of(self, node: ast.AST) -> tuple[list, int] | None:
        """(the statement list holding `node`'s statement, its index there)."""
        child, parent = node, self._parents.get(id(node))
        while parent is not None:
            for field in ("body", "orelse", "finalbody"):
                seq = getattr(parent, field, None)
                if isinstance(seq, list) and child in seq:
                    return seq, seq.index(child)
            child, parent = parent, self._parents.get(id(parent))
        return None

    def offset(self, line: int, col: int) -> int:
        """Character offset of (1-based line, 0-based UTF-8 byte column) in the file text."""
        before = sum(len(x) for x in self.lines[:line - 1])
        return before + len(self.lines[line - 1].encode()[:col].decode(errors="ignore"))

    def node_span(self, node: ast.AST) -> tuple[int, int]:
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)


@functools.lru_cache(maxsize=64)
def _parsed(path: str, stamp: int) -> SourceFile:
    return SourceFile(path)


def source_file(path: str) -> SourceFile:
    """The parsed file at `path` (cached until its text changes)."""
    return _parsed(path, hash("".join(linecache.getlines(path))))


def _name(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _seg(path: str, node: ast.AST) -> str | None:
    return ast.get_source_segment("".join(linecache.getlines(path)), node)


def evaluate(expr: str | None, names: dict):
    """The value of a small constant expression over constexpr names, or None."""
    if expr is None:
        return None
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Load, ast.operator,
               ast.unaryop, ast.Compare, ast.cmpop, ast.BoolOp, ast.boolop, ast.Call, ast.Attribute, ast.Tuple)
    if not all(isinstance(n, allowed) for n in ast.walk(tree)):
        return None
    env = {k: getattr(v, "value", v) for k, v in names.items()}
    env["constexpr"] = lambda v: v

    class _TL:  # tl.constexpr(3) -> 3
        constexpr = staticmethod(lambda v: v)
    env.setdefault("tl", _TL)
    try:
        return eval(compile(tree, "<expr>", "eval"), {"__builtins__": {}}, env)  # noqa: S307 - checked node types
    except Exception:  # noqa: BLE001 - anything not constant here is simply unknown
        return None


def with_kwargs(sf: SourceFile, call: Call, new_name: str | None = None, set_kw: dict | None = None,
                drop_kw: tuple = ()) -> str:
    """The call's source with its function renamed and keywords set / dropped (one line)."""
    node = call.node
    func = _seg(sf.path, node.func) or call.name
    if new_name:
        func = func.rsplit(".", 1)[0] + "." + new_name if "." in func else new_name
    args = [_seg(sf.path, a) for a in node.args]
    kws = [(kw.arg, _seg(sf.path, kw.value)) for kw in node.keywords if kw.arg not in drop_kw]
    set_kw = dict(set_kw or {})
    kws = [(k, str(set_kw.pop(k)) if k in set_kw else v) for k, v in kws]
    kws += [(k, str(v)) for k, v in set_kw.items()]
    parts = [a for a in args if a is not None] + [f"{k}={v}" for k, v in kws]
    return f"{func}({', '.join(parts)})"


def replace_call(sf: SourceFile, call: Call, new_text: str) -> str:
    """The whole file text with `call` replaced by `new_text`."""
    start, end = sf.node_span(call.node)
    return sf.text[:start] + new_text + sf.text[end:]
