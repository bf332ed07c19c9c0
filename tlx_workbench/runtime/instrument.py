"""Measured timelines without Proton: rewrite a TLX kernel to record ``clock64`` around its ops.

Proton's instrumentation scopes inside a warp-specialized TLX kernel fail to
compile with triton 3.8 + triton-utlx (on the H200, 2026-11-30: ``make_llir``
"PassManager::run failed"). This module does what those scopes would: it
rewrites the kernel's source so that every TLX operation of interest (barrier
waits and arrives, TMA loads and stores, ``async_dot`` and its wait, stores) is
bracketed by ``tlx.clock64()`` reads, and each warp group (task replica) writes
``(op id, start, end)`` records into a global int64 buffer:

    buffer[cta, lane, i] = (event id + 1, t0, t1)      lane = task index * 8 + replica

Only the first ``max_ctas`` CTAs record, at most ``capacity`` events per lane.
:func:`decode` turns the buffer into a :class:`~tlx_workbench.trace.Trace`
(time unit: SM cycles, each CTA from its own first record, since SM clocks are
not synchronised).

>>> inst = instrument(my_kernel)                  # doctest: +SKIP
>>> inst.kernel[grid](buf, *args, **constexprs)   # doctest: +SKIP
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import os
import textwrap

from ..errors import GPUError

MAX_REPLICAS = 8
PARAM = "_wb_prof"

# op name -> (span kind, shown name)
OPS = {
    "barrier_wait": "wait",
    "named_barrier_wait": "sync",
    "barrier_arrive": "arrive",
    "named_barrier_arrive": "arrive",
    "barrier_expect_bytes": "other",
    "async_descriptor_load": "tma",
    "async_descriptor_store": "store",
    "async_load": "load",
    "async_dot": "mma",
    "async_dot_wait": "wait",
    "async_dot_scaled": "mma",
    "tcgen05_commit": "mma",
    "store": "store",
    "load": "load",
    "dot": "mma",
    "descriptor_load": "load",
    "descriptor_store": "store",
    "fence_async_shared": "sync",
}


@dataclasses.dataclass
class EventSite:
    id: int
    op: str
    kind: str
    line: int
    lane_task: str
    barrier: str | None = None


@dataclasses.dataclass
class Instrumented:
    """An instrumented kernel: launch ``kernel[grid](buffer, *args, **kw)`` with :meth:`buffer`."""
    kernel: object
    source: str
    sites: list[EventSite]
    tasks: list[str]           # task names by task index
    capacity: int
    max_ctas: int
    file: str

    @property
    def lanes(self) -> int:
        return max(1, len(self.tasks)) * MAX_REPLICAS

    def buffer(self, device="cuda"):
        import torch
        return torch.zeros(self.max_ctas * self.lanes * self.capacity * 3, dtype=torch.int64, device=device)


def _call_op(node) -> str | None:
    """'barrier_wait' for ``tlx.barrier_wait(...)`` / ``tl.store(...)`` calls of interest."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("tlx", "tl") \
            and f.attr in OPS:
        return f.attr
    return None


def _stmt_op(stmt) -> tuple[str, ast.Call] | None:
    call = None
    if isinstance(stmt, ast.Expr):
        call = stmt.value
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        call = stmt.value
    op = _call_op(call)
    return (op, call) if op else None


def _is_async_task(item) -> ast.Call | None:
    e = item.context_expr
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "async_task":
        return e
    return None


def _is_async_tasks(item) -> bool:
    e = item.context_expr
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "async_tasks"


class _Rewriter:
    def __init__(self, first_line: int, mode: str = "clock"):
        self.first_line = first_line
        self.mode = mode            # "clock": cycle-counter records; "proton": Proton scopes
        self.sites: list[EventSite] = []
        self.tasks: list[str] = []

    def prologue(self, task_idx: int, replicated: bool) -> list[ast.stmt]:
        if self.mode == "proton":
            return []
        replica = "tlx.async_task_replica_id()" if replicated else "0"
        src = (f"_wb_pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)\n"
               f"_wb_lim = tl.where(_wb_pid < _WB_MAXC, _WB_CAP, 0)\n"
               f"_wb_base = ((tl.minimum(_wb_pid, _WB_MAXC - 1).to(tl.int64) * _WB_LANES + "
               f"{task_idx * MAX_REPLICAS} + {replica}) * _WB_CAP) * 3\n"
               f"_wb_n = 0\n")
        return ast.parse(src).body

    def stmts(self, body: list, task: str) -> list:
        out = []
        for stmt in body:
            found = _stmt_op(stmt)
            if found and task is not None:
                op, call = found
                barrier = None
                if op in ("barrier_wait", "barrier_arrive", "barrier_expect_bytes") and (call.args or call.keywords):
                    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "bar"),
                                                              call.keywords[0].value)
                    barrier = ast.unparse(arg)
                site = EventSite(len(self.sites), op, OPS[op], self.first_line + stmt.lineno - 1, task, barrier)
                self.sites.append(site)
                if self.mode == "proton":
                    scope = proton_scope_name(site)
                    out += (ast.parse(f"pl.enter_scope({scope!r})").body + [stmt]
                            + ast.parse(f"pl.exit_scope({scope!r})").body)
                    continue
                pre = ast.parse("_wb_t0 = _wb_clock()").body
                post = ast.parse(f"_wb_t1 = _wb_clock()\n"
                                 f"_wb_rec({PARAM}, _wb_base, _wb_n, _wb_lim, {site.id}, _wb_t0, _wb_t1)\n"
                                 f"_wb_n = _wb_n + 1\n").body
                out += pre + [stmt] + post
                continue
            if isinstance(stmt, ast.With):
                tasks_item = next((it for it in stmt.items if _is_async_tasks(it)), None)
                task_item = next((it for it in stmt.items if _is_async_task(it)), None)
                if task_item is not None:
                    call = _is_async_task(task_item)
                    name = (call.args[0].value if call.args and isinstance(call.args[0], ast.Constant)
                            else f"task{len(self.tasks)}")
                    replicated = any(k.arg == "replicate" for k in call.keywords)
                    idx = len(self.tasks)
                    self.tasks.append(name)
                    stmt.body = self.prologue(idx, replicated) + self.stmts(stmt.body, name)
                elif tasks_item is not None:
                    stmt.body = self.stmts(stmt.body, None)
                else:
                    stmt.body = self.stmts(stmt.body, task)
            elif isinstance(stmt, (ast.For, ast.While)):
                stmt.body = self.stmts(stmt.body, task)
            elif isinstance(stmt, ast.If):
                stmt.body = self.stmts(stmt.body, task)
                stmt.orelse = self.stmts(stmt.orelse, task)
            out.append(stmt)
        return out


# tlx.clock64 does not lower on triton 3.8 + triton-utlx ("uTLX op 'clock64' is not available"),
# so read the SM cycle counter with one PTX instruction instead
_RECORD_SRC = '''
@triton.jit
def _wb_clock():
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)

@triton.jit
def _wb_rec(buf, base, n, lim, ev: tl.constexpr, t0, t1):
    if n < lim:
        p = buf + base + n * 3
        tl.store(p, (t0 * 0 + ev + 1).to(tl.int64))
        tl.store(p + 1, t0)
        tl.store(p + 2, t1)
'''


def _uses_async_tasks(fdef) -> bool:
    return any(isinstance(n, ast.With) and any(_is_async_tasks(it) for it in n.items) for n in ast.walk(fdef))


def proton_scope_name(site: EventSite) -> str:
    """The Proton scope name of one op site: ``barrier_wait@120#3`` (op, source line, site id)."""
    return f"{site.op}@{site.line}#{site.id}"


def instrument_source(source: str, first_line: int = 1, mode: str = "clock") -> tuple[str, list[EventSite], list[str]]:
    """Rewrite one kernel's ``def`` source; returns (new source, event sites, task names).

    ``mode="clock"`` adds the record buffer parameter and cycle-counter records;
    ``mode="proton"`` brackets the same ops with ``pl.enter_scope``/``pl.exit_scope``.
    """
    tree = ast.parse(textwrap.dedent(source))
    fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    fdef.decorator_list = []
    if mode == "clock":
        fdef.args.args.insert(0, ast.arg(arg=PARAM))
    rw = _Rewriter(first_line, mode)
    if _uses_async_tasks(fdef):
        fdef.body = rw.stmts(fdef.body, None)
    else:
        rw.tasks.append("default")
        fdef.body = rw.prologue(0, False) + rw.stmts(fdef.body, "default")
    ast.fix_missing_locations(tree)
    return ast.unparse(tree), rw.sites, rw.tasks


def instrument(kernel, *, capacity: int = 512, max_ctas: int = 4, mode: str = "clock") -> Instrumented:
    """An instrumented copy of ``kernel`` (a ``@triton.jit`` TLX kernel); see the module docstring.

    ``mode="proton"`` gives a copy with Proton scopes instead (launched without the buffer).
    """
    import triton
    import triton.language as tl
    from .transport import _underlying_function
    func = _underlying_function(kernel)
    if func is None:
        raise GPUError(f"cannot instrument {kernel!r}: not a Triton kernel",
                       hint="pass the @triton.jit function itself")
    try:
        lines, first = inspect.getsourcelines(func)
    except OSError as e:
        raise GPUError(f"cannot read the source of {func.__name__}: {e}",
                       hint="define the kernel in a file or a notebook cell") from None
    file = func.__code__.co_filename
    new_src, sites, tasks = instrument_source("".join(lines), first, mode)
    if not sites:
        raise GPUError(f"{func.__name__} has no TLX operation to time", file=file, line=first,
                       hint="profile records barrier waits/arrives, TMA loads/stores, async_dot and stores")
    lanes = max(1, len(tasks)) * MAX_REPLICAS
    if mode == "proton":
        body = "\n\n@triton.jit\n" + new_src + "\n"
    else:
        header = (f"_WB_CAP = tl.constexpr({capacity})\n_WB_MAXC = tl.constexpr({max_ctas})\n"
                  f"_WB_LANES = tl.constexpr({lanes})\n")
        body = header + _RECORD_SRC + "\n\n@triton.jit\n" + new_src + "\n"
    digest = hashlib.sha1(body.encode()).hexdigest()[:16]
    from .transport import _CACHE_DIR
    os.makedirs(_CACHE_DIR, exist_ok=True)
    path = os.path.join(_CACHE_DIR, f"instrumented_{mode}_{func.__name__}_{digest}.py")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
    ns = dict(func.__globals__)
    import triton.language.extra.tlx as tlx
    ns.update(triton=triton, tl=tl, tlx=tlx, __file__=path, __name__=f"tlxwb_instrumented_{digest}")
    if mode == "proton":
        import triton.profiler.language as pl
        ns["pl"] = pl
    exec(compile(body, path, "exec"), ns)
    return Instrumented(ns[func.__name__], body, sites, tasks, capacity, max_ctas, file)


def decode(buf, sites: list[EventSite], tasks: list[str], *, capacity: int, max_ctas: int, file: str | None = None,
           meta: dict | None = None):
    """The :class:`Trace` (cycles, source "gpu") that an instrumented launch's buffer holds."""
    import numpy as np

    from ..trace import Span, Trace
    a = np.asarray(buf, dtype=np.int64).reshape(max_ctas, max(1, len(tasks)) * MAX_REPLICAS, capacity, 3)
    tr = Trace(time_unit="cycles", source="gpu", meta=dict(meta or {}, recorder="clock64", capacity=capacity))
    truncated = 0
    for cta in range(max_ctas):
        recs = a[cta]
        used = recs[..., 0] > 0
        if not used.any():
            continue
        t_min = recs[..., 1][used].min()
        for lane in range(recs.shape[0]):
            n = int(used[lane].sum())
            if n == capacity:
                truncated += 1
            task, replica = tasks[lane // MAX_REPLICAS] if lane // MAX_REPLICAS < len(tasks) else "?", \
                lane % MAX_REPLICAS
            for ev, t0, t1 in recs[lane][used[lane]]:
                site = sites[int(ev) - 1]
                tr.add_span(Span(cta=cta, task=task, replica=replica, kind=site.kind, start=float(t0 - t_min),
                                 end=float(max(t1, t0) - t_min), name=site.op, line=site.line, file=file,
                                 barrier=site.barrier))
    if truncated:
        tr.meta["truncated_lanes"] = truncated
    return tr
