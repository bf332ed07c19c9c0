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
import re
import textwrap

from .irtext import IRModule
from .report import TaskInfo


@dataclasses.dataclass
class _TaskStmt:
    line: int
    default: bool
    replicate: int


def _async_task_statements(source: str, first_line: int) -> list[_TaskStmt]:
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
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
            rep = 1
            for kw in call.keywords:
                if kw.arg == "replicate" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
                    rep = kw.value.value
            out.append(_TaskStmt(node.lineno + first_line - 1, default, rep))
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


def task_layout(pre: IRModule, post: IRModule | None, source: str, first_line: int, default_warps: int) -> TaskLayout:
    if not pre.warp_specializes:
        t = TaskInfo(name="default", replica=0, num_warps=default_warps, warp_start=0, registers=None)
        return TaskLayout([t], {}, False)
    ws = pre.warp_specializes[0]
    post_ws_text = ""
    if post is not None and post.warp_specializes and post.warp_specializes[0].op is not None:
        post_ws_text = post.warp_specializes[0].op.text
    starts = _int_array(post_ws_text, "warpGroupStartIds") or []
    actual = _int_array(post_ws_text, "actualRegisters")
    requested = _int_array(post_ws_text, "requestedRegisters")
    regs = actual if actual is not None else requested
    n_parts = len(ws.partitions)

    stmts = _async_task_statements(source, first_line)
    default_stmt = next((s for s in stmts if s.default), None)
    others = [s for s in stmts if not s.default]
    # partitions follow the non-default async_task statements in order, `replicate` each
    assign: list[tuple[str, int, int | None]] = []
    for k, s in enumerate(others, start=1):
        for r in range(s.replicate):
            assign.append((f"task{k}", r, s.line))
    if len(assign) != n_parts:
        assign = [(f"partition{i}", 0, None) for i in range(n_parts)]
    replicated = {name for name, r, _ in assign if r > 0}

    def reg_for(i_part: int | None) -> int | None:
        if regs is None:
            return None
        # the arrays list the default region first when they cover it
        if len(regs) == n_parts + 1:
            return regs[0] if i_part is None else regs[i_part + 1]
        if len(regs) == n_parts and i_part is not None:
            return regs[i_part]
        return None

    tasks = []
    d = TaskInfo(name="default", replica=0, num_warps=default_warps, warp_start=0, registers=reg_for(None),
                 line=default_stmt.line if default_stmt else None, partition=None, label="default")
    tasks.append(d)
    by_partition = {"default": d}
    for p in ws.partitions:
        name, rep, line = assign[p.index] if p.index < len(assign) else (f"partition{p.index}", 0, None)
        label = f"{name}[{rep}]" if name in replicated else name
        t = TaskInfo(name=name, replica=rep, num_warps=p.num_warps,
                     warp_start=starts[p.index] if p.index < len(starts) else -1,
                     registers=reg_for(p.index), line=line, partition=p.index, label=label)
        tasks.append(t)
        by_partition[p.index] = t
    return TaskLayout(tasks, by_partition, True)
