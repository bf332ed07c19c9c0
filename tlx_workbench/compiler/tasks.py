"""The task layout of a warp-specialized kernel.

The compiler's ``ttg.warp_specialize`` op holds a ``default`` region (the
kernel's own warps) and one ``partitionN`` region per replica of every other
``tlx.async_task``, each with its ``num_warps``. After warp-group allocation the
op also carries ``warpGroupStartIds`` (first warp of each partition) and, when
the kernel set budgets, ``requestedRegisters`` / ``actualRegisters``
(``setmaxnreg``). The Python ``with tlx.async_task(...)`` statements, read from
the kernel's source, give each partition its task name and source line.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import re
import textwrap
from typing import Any

from .irtext import IRModule
from .report import TaskInfo


@dataclasses.dataclass
class _TaskStmt:
    line: int
    default: bool
    replicate: int


def _eval(node, env: dict):
    """The value of a constexpr expression such as ``NUM_MMA_WARPS // NUM_MMA_GROUPS``."""
    import operator
    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Div: operator.truediv}
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        v = env.get(node.id)
        return getattr(v, "value", v)
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        a, b = _eval(node.left, env), _eval(node.right, env)
        return ops[type(node.op)](a, b) if isinstance(a, int) and isinstance(b, int) else None
    return None


@functools.lru_cache(maxsize=64)
def _async_task_calls(source: str) -> tuple[tuple[int, bool, Any], ...]:
    """(line in `source`, is the default task, the replicate= expression) of every
    ``with ...async_task(...)``; parsed once per kernel text, since recompiling one kernel
    with other constexprs or arguments is the common case."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return ()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            call = item.context_expr
            if not isinstance(call, ast.Call):
                continue
            fn = call.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name != "async_task":
                continue
            default = any(isinstance(a, ast.Constant) and a.value == "default" for a in call.args)
            replicate = next((kw.value for kw in call.keywords if kw.arg == "replicate"), None)
            out.append((node.lineno, default, replicate))
    return tuple(out)


def _async_task_statements(source: str, first_line: int, env: dict) -> list[_TaskStmt]:
    out = []
    for line, default, replicate in _async_task_calls(source):
        rep = 1
        if replicate is not None:
            v = _eval(replicate, env)
            rep = v if isinstance(v, int) and v > 0 else 1
        out.append(_TaskStmt(line + first_line - 1, default, rep))
    out.sort(key=lambda t: t.line)
    return out


def _int_array(text: str, key: str) -> list[int] | None:
    m = re.search(rf"{key}\s*=\s*array<i32(?::\s*([-\d,\s]*))?>", text)
    if not m:
        return None
    return [int(x) for x in (m.group(1) or "").replace(" ", "").split(",") if x]


class TaskLayout:
    """Partition index -> task, and the TaskInfo list."""

    def __init__(self, tasks: list[TaskInfo], by_partition: dict, has_ws: bool):
        self.tasks = tasks
        self._by_partition = by_partition
        self.has_ws = has_ws

    def label(self, task) -> str | None:
        """The report's name for an op's task ("default", a partition index or None)."""
        if task is None:
            return None
        t = self._by_partition.get(task)
        if t is None:
            return f"partition{task}" if isinstance(task, int) else str(task)
        return t.label


def task_layout(pre: IRModule, post: IRModule | None, source: str, first_line: int, default_warps: int,
                constexprs: dict | None = None) -> TaskLayout:
    """Tasks from the final TTGIR (`pre`) and the post-allocation TTGIR (`post`): the latter
    has the compiler's last word on warps, first warps and register budgets, including any
    partition it added to pad the CTA to whole warp groups (reported as ``pad``)."""
    if not pre.warp_specializes:
        t = TaskInfo(name="default", replica=0, num_warps=default_warps, warp_start=0, registers=None)
        return TaskLayout([t], {}, False)
    ws = pre.warp_specializes[0]
    post_ws = post.warp_specializes[0] if post is not None and post.warp_specializes else None
    post_ws_text = post_ws.op.text if post_ws is not None and post_ws.op is not None else ""
    parts = post_ws.partitions if post_ws is not None and len(post_ws.partitions) >= len(ws.partitions) \
        else ws.partitions
    starts = _int_array(post_ws_text, "warpGroupStartIds") or []
    actual = _int_array(post_ws_text, "actualRegisters")
    requested = _int_array(post_ws_text, "requestedRegisters")
    regs = actual if actual is not None else requested
    n_parts = len(parts)

    stmts = _async_task_statements(source, first_line, constexprs or {})
    default_stmt = next((s for s in stmts if s.default), None)
    others = [s for s in stmts if not s.default]
    # the kernel's partitions follow its non-default async_task statements in order, `replicate` each
    assign: list[tuple[str, int, int | None]] = []
    for k, s in enumerate(others, start=1):
        for r in range(s.replicate):
            assign.append((f"task{k}", r, s.line))
    if len(assign) != len(ws.partitions):
        assign = [(f"partition{i}", 0, None) for i in range(len(ws.partitions))]
    replicated = {name for name, r, _ in assign if r > 0}

    def reg_for(i_part: int | None) -> int | None:
        if regs is None:
            return None
        # actualRegisters lists the default region first; requestedRegisters only the partitions
        if len(regs) == n_parts + 1:
            v = regs[0] if i_part is None else regs[i_part + 1]
        elif len(regs) == n_parts and i_part is not None:
            v = regs[i_part]
        else:
            return None
        # setmaxnreg takes 24..256: the lowering clamps a larger leftover budget to 256
        return min(v, 256)

    tasks = []
    d = TaskInfo(name="default", replica=0, num_warps=default_warps, warp_start=0, registers=reg_for(None),
                 line=default_stmt.line if default_stmt else None, partition=None, label="default")
    tasks.append(d)
    by_partition = {"default": d}
    for p in parts:
        if p.index < len(assign):
            name, rep, line = assign[p.index]
            label = f"{name}[{rep}]" if name in replicated else name
        else:  # added by the compiler: idle warps that make the CTA whole warp groups
            name, rep, line, label = "pad", 0, None, f"pad{p.index - len(assign)}" if n_parts - len(assign) > 1 else "pad"
        t = TaskInfo(name=name, replica=rep, num_warps=p.num_warps,
                     warp_start=starts[p.index] if p.index < len(starts) else -1,
                     registers=reg_for(p.index), line=line, partition=p.index, label=label)
        tasks.append(t)
        by_partition[p.index] = t
    tasks[1:] = sorted(tasks[1:], key=lambda t: (t.warp_start, t.partition))
    return TaskLayout(tasks, by_partition, True)
