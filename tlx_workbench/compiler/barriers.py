"""The barrier table: every barrier array the kernel initializes, and every site that
waits on it, arrives at it, expects bytes on it or has a TMA copy / MMA signal it.

Read from the final TTGIR (structured control flow, tasks still visible):
``ttng.init_barrier`` gives each slot's arrive count, the memdesc a site uses is
traced back to its ``local_alloc`` (through ``memdesc_index`` views, loop-carried
values and the operands a warp-specialize partition captures), and the site's
``loc`` gives the source line.
"""
from __future__ import annotations

from .irtext import IRModule, Op
from .report import BarrierInfo, BarrierSite

# op -> site kind; any other op that takes a barrier is recorded under its own short name
_SITE_KIND = {
    "ttng.wait_barrier": "wait",
    "ttng.arrive_barrier": "arrive",
    "tlx.warp_barrier_arrive": "arrive",
    "ttng.barrier_expect": "expect",
    "ttng.async_tma_copy_global_to_local": "tma_load",
    "ttng.async_tma_gather": "tma_load",
    "ttng.async_copy_mbarrier_arrive": "cp_async_arrive",
    "ttng.tc_gen5_mma": "mma_commit",
    "ttng.tc_gen5_mma_scaled": "mma_commit",
    "ttng.tc_gen5_commit": "mma_commit",
    "ttng.async_clc_try_cancel": "clc",
}
_NAMED = ("tlx.named_barrier_wait", "tlx.named_barrier_arrive", "ttng.named_barrier_wait",
          "ttng.named_barrier_arrive")


def _line(op: Op, file: str, first: int, last: int) -> int | None:
    fr = op.loc.pick(file, first, last)
    return fr.line if fr is not None and fr.file == file else None


def barrier_table(m: IRModule, task_label, file: str, first: int, last: int,
                  constexprs: dict | None = None) -> tuple[list[BarrierInfo], set[str]]:
    """(barriers, names of the barrier allocations) for one TTGIR module.

    `task_label(op.task)` turns "default" / a partition index into the report's task name.
    """
    by_alloc: dict[int, BarrierInfo] = {}
    counts: dict[int, dict[int, int]] = {}
    alloc_ops: dict[int, Op] = {}
    for op in m.ops_named("ttng.init_barrier"):
        alloc, idx = m.root(op.scope, op.operands[0])
        if alloc is None:
            continue
        count = op.int_attr("count")
        if count is None:
            # printed as `ttng.init_barrier %bar, 2 : ...`
            tail = op.text.split(",", 1)[1] if "," in op.text else ""
            num = tail.strip().split(" ", 1)[0]
            count = int(num) if num.lstrip("-").isdigit() else None
        md = alloc.result_memdesc
        slots = md.shape[0] if md is not None and len(md.shape) >= 2 else 1
        key = id(alloc)
        if key not in by_alloc:
            name = alloc.loc.name or (alloc.results[-1].lstrip("%") if alloc.results else f"barrier@{alloc.line}")
            by_alloc[key] = BarrierInfo(name=name, line=_line(alloc, file, first, last), kind="mbarrier",
                                        count=count, slots=slots)
            counts[key] = {}
            alloc_ops[key] = alloc
        slot = idx[0] if idx and idx[0] is not None else len(counts[key])
        counts[key][slot] = count
    for key, info in by_alloc.items():
        vals = set(counts[key].values())
        info.count = vals.pop() if len(vals) == 1 else None
        info.slot_counts = [counts[key].get(s) for s in range(info.slots)]

    for op in m.ops:
        if op.name in ("ttng.init_barrier", "ttg.local_alloc", "ttg.warp_specialize", "scf.for", "scf.while",
                       "scf.yield", "scf.condition", "scf.if", "arith.select") or op.name.startswith("ttg.memdesc"):
            continue
        if op.name in _NAMED:
            continue
        for v in op.operands:
            alloc, idx = m.root(op.scope, v)
            if alloc is None or id(alloc) not in by_alloc:
                continue
            info = by_alloc[id(alloc)]
            kind = _SITE_KIND.get(op.name, op.name.split(".", 1)[-1])
            args = {}
            if idx and idx[0] is not None:
                args["slot"] = idx[0]
            if kind == "wait" and len(op.operands) > 1:
                phase = m.const(op.scope, op.operands[1])
                if phase is not None:
                    args["phase"] = phase
            elif kind == "expect":
                tail = op.text.split(",", 2)
                num = tail[1].strip().split(" ", 1)[0] if len(tail) > 1 else ""
                if num.isdigit():
                    args["bytes"] = int(num)
            elif kind == "arrive":
                c = op.int_attr("count")
                if c is None and "," in op.text:
                    num = op.text.split(",", 1)[1].strip().split(" ", 1)[0]
                    c = int(num) if num.isdigit() else None
                if c is not None:
                    args["count"] = c
                if op.name == "tlx.warp_barrier_arrive" or "perThread" in op.text:
                    args["per_thread"] = True
                    info.kind = "warp"
            if "remote" in op.text or "map_to_remote" in op.text:
                args["remote"] = True
            info.sites.append(BarrierSite(op=kind, task=task_label(op.task), line=_line(op, file, first, last),
                                          args=args, ir_line=op.line))
            break

    # warp barriers: arrive count is per thread (num_warps * 32 * num_arrivals)
    for info in by_alloc.values():
        if info.kind == "warp" and info.count:
            info.warp_args = {"threads": info.count, **_warp_barrier_args(file, info.line, constexprs or {})}

    named = _named_barriers(m, task_label, file, first, last)
    return list(by_alloc.values()) + named, {r for a in alloc_ops.values() for r in a.results}


def _named_barriers(m: IRModule, task_label, file, first, last) -> list[BarrierInfo]:
    out: dict[object, BarrierInfo] = {}
    for op in m.ops_named(*_NAMED):
        if len(op.operands) < 2:
            continue
        bar_id = m.const(op.scope, op.operands[0])
        threads = m.const(op.scope, op.operands[1])
        key = bar_id if bar_id is not None else op.operands[0]
        info = out.get(key)
        if info is None:
            info = out[key] = BarrierInfo(name=f"named barrier {bar_id if bar_id is not None else '?'}",
                                          line=None, kind="named", count=threads, slots=1, named_id=bar_id)
        elif info.count != threads:
            info.count = None   # sides disagree: the checker reports it
        kind = "wait" if op.name.endswith("wait") else "arrive"
        info.sites.append(BarrierSite(op=kind, task=task_label(op.task), line=_line(op, file, first, last),
                                      args={"threads": threads} if threads is not None else {},
                                      ir_line=op.line))
        if info.line is None:
            info.line = _line(op, file, first, last)
    return sorted(out.values(), key=lambda b: (b.named_id is None, b.named_id or 0))


def _warp_barrier_args(file: str, line: int | None, env: dict) -> dict[str, int]:
    """num_warps / num_arrivals of the ``tlx.alloc_warp_barrier(...)`` call at `line` (defaults 1)."""
    import ast
    import linecache
    from .tasks import _eval
    if not line:
        return {}
    # the call may span lines: parse from `line` until the text is a complete statement
    text = ""
    for ln in range(line, line + 12):
        text += linecache.getline(file, ln).strip() + " "
        try:
            tree = ast.parse(text.strip())
            break
        except SyntaxError:
            continue
    else:
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "alloc_warp_barrier":
            out = {"num_warps": 1, "num_arrivals": 1}
            for kw in node.keywords:
                if kw.arg in out:
                    v = _eval(kw.value, env)
                    if isinstance(v, int):
                        out[kw.arg] = v
            return out
    return {}
