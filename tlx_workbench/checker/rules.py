"""The barrier-protocol rules. Each rule reads the CompileReport (static facts), the
kernel source (what the IR lost) and, when there was a simulator run, the per-slot
facts (who actually arrived, how many bytes landed), and yields Findings with the
exact line and the exact fix.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict

from .facts import lane_label
from .findings import Finding, at_line
from .source import evaluate, source_file, with_kwargs

RULES = {
    "tma-full-count": "a TMA full barrier armed by barrier_expect_bytes counts one arrival per expect per phase",
    "tma-expect-bytes": "bytes expected per phase equal the bytes of the TMA loads that signal the barrier",
    "release-count": "a software barrier's arrive_count equals the arrivals per phase (replicas included)",
    "warp-barrier-count": "num_warps*32*num_arrivals equals the per-thread arrivals per phase",
    "warp-barrier-on-tma": "full/TMA (and MMA-signalled) barriers stay ordinary barriers",
    "named-barrier-id": "named barrier ids are 0..15 and not reserved by warp specialization",
    "named-barrier-threads": "num_threads: a multiple of 32, equal on every side, equal to the participants",
    "async-dot-shape": "async_dot tiles within the target's limits",
    "two-ctas-m": "two_ctas MMA needs M = 128 per CTA",
    "cta-leader-expect": "2-CTA: only the leader arms TMA barriers, with arrive_count=1",
    "cta-remote-count": "2-CTA: arrivals sent to the leader count NUM_CTAS per phase",
}


class Context:
    """Everything the rules read about one kernel."""

    def __init__(self, report, facts=None, stopped=False):
        self.report = report
        # the simulated run deadlocked or raced: its per-slot counts are what happened before it went wrong,
        # not the protocol's (slots that differ from each other then prove nothing about the alloc)
        self.stopped = stopped
        self.file = report.source.file
        self.sf = source_file(self.file)
        self.facts = facts or {}
        self.names = dict(report.constexprs)
        self.tasks = report.tasks
        self.num_ctas = max(int(report.resources.num_ctas or 1), int(report.options.get("num_ctas") or 1))
        self._alloc_lines: dict[str, int | None] = {}

    def warps_of(self, label) -> int | None:
        for t in self.tasks:
            if t.label == label or (t.name == label and t.replica == 0):
                return t.num_warps
        return None

    def bar_line(self, b) -> int | None:
        """The line of `b`'s allocation: from the IR, else the kernel's ``name = tlx.alloc_...(...)``
        (the IR loses it, e.g. for a kernel defined in a notebook cell), else None."""
        if b.line:
            return b.line
        if b.name not in self._alloc_lines:
            found = None
            fn = _kernel_def(self.sf, self.report.kernel)
            for d in (_assignments(fn).get(b.name, []) if fn is not None else []):
                v = d.value
                if isinstance(v, ast.Call) and getattr(v.func, "attr", None) in ("alloc_barriers",
                                                                                 "alloc_warp_barrier") \
                        and live(self.sf, v, self.names):
                    found = v.lineno
            self._alloc_lines[b.name] = found
        return self._alloc_lines[b.name]

    def alloc_call(self, b):
        line = self.bar_line(b)
        return self.sf.call_at(line, "alloc_barriers", "alloc_warp_barrier") if line else None

    def is_warp(self, b) -> bool:
        """A warp barrier: the IR says so only at a per-thread arrive; the allocation says so always."""
        if b.kind == "warp":
            return True
        call = self.alloc_call(b)
        return call is not None and call.name == "alloc_warp_barrier"

    def at(self, *lines) -> list[tuple[str, int]]:
        seen = []
        for n in lines:
            if n and (self.file, n) not in seen:
                seen.append((self.file, n))
        return seen


def roles(b) -> set[str]:
    """TMA full / MMA / software / remote: what signals a barrier."""
    ops = {s.op for s in b.sites}
    out = set()
    if ops & {"expect", "tma_load"}:
        out.add("tma")
    if "mma_commit" in ops:
        out.add("mma")
    if any(s.op == "arrive" for s in b.sites):
        out.add("software")
    if any(s.args.get("remote") for s in b.sites):
        out.add("remote")
    return out


def _lanes_text(ctx, lanes_per_round: dict, what: str) -> str:
    parts = [f"{lane_label(l, ctx.tasks)} {what} {n}x" for l, n in sorted(lanes_per_round.items(), key=str)]
    return ", ".join(parts) + " per phase"


# ---- counts of mbarriers (TMA full, software, warp) ---------------------------------------
def count_rules(ctx: Context):
    for b in ctx.report.barriers:
        if b.kind == "named":
            continue
        r = roles(b)
        call = ctx.alloc_call(b)
        line = ctx.bar_line(b)
        if ctx.is_warp(b) and r & {"tma", "mma"}:
            yield _warp_on_tma(ctx, b, call, r, line)
            continue
        # only slots that completed a phase are evidence: in a run that deadlocked (a wrong phase, a
        # task stuck elsewhere), what arrived on a slot that never completed is a lower bound, not the
        # protocol's count; the deadlock finding speaks for those, and the static rules still apply
        slots = [sf for (name, _), lst in ctx.facts.items() if name == b.name for sf in lst if sf.flips]
        if slots:
            yield from _dynamic_count(ctx, b, call, r, slots, line)
        else:
            yield from _static_count(ctx, b, call, r, line)


def _warp_on_tma(ctx, b, call, r, line):
    what = "TMA bytes (barrier_expect_bytes / async_descriptor_load)" if "tma" in r else "an MMA commit"
    fix_call = None
    if call is not None:
        num = call.kwarg("num_barriers", 0) or str(b.slots)
        fix_call = f"tlx.alloc_barriers(num_barriers={num}, arrive_count=1)"
    sites = [s.line for s in b.sites if s.op in ("expect", "tma_load", "mma_commit")]
    return Finding("warp-barrier-on-tma", "error",
                   f"{b.name} is a warp barrier but is completed by {what}: a warp barrier counts one arrival "
                   f"per thread ({b.count} per phase) and the hardware arrives once, so the phase never completes "
                   f"(only software-arrived barriers may be warp barriers)",
                   ctx.at(line, *sites[:2]),
                   f"{fix_call or 'tlx.alloc_barriers(..., arrive_count=1)'} {at_line(line, b.name)}: "
                   f"full/TMA barriers "
                   f"stay ordinary", barrier=b.name)


def _dynamic_count(ctx, b, call, r, slots, line):
    declared = b.count if b.count is not None else slots[0].init_count
    need: dict[int, list] = defaultdict(list)
    for sf in slots:
        req = sf.required_count()
        if req:   # 0: nothing arrived at all (a deadlock elsewhere stopped the run first)
            need[req].append(sf)
    if not need or set(need) == {declared}:
        return
    if len(need) > 1:
        if ctx.stopped:
            return
        detail = "; ".join(f"slots {sorted({s.slot for s in v})} need {k}" for k, v in sorted(need.items()))
        yield Finding("release-count", "error",
                      f"the slots of {b.name} need different arrive counts per phase ({detail}) but one "
                      f"alloc gives them all {declared}", ctx.at(line),
                      f"split {b.name} into one barrier array per arrive count ({at_line(line, b.name)})",
                      barrier=b.name)
        return
    req, sfs = next(iter(need.items()))
    sf = sfs[0]
    arrivals = {l: sf.per_round(a) for l, a in sf.arrivals.items()}
    expects = {l: sf.per_round(a) for l, a in sf.expects.items()}
    lines = sorted({n for a in list(sf.arrivals.values()) + list(sf.expects.values()) for n in a.lines if n})
    who = []
    if expects:
        who.append(_lanes_text(ctx, expects, "calls barrier_expect_bytes"))
    if arrivals:
        who.append(_lanes_text(ctx, arrivals, "arrives"))
    who_text = "; ".join(who)
    if ctx.is_warp(b):
        lanes = list(sf.arrivals)
        warps = {ctx.warps_of(lane_label(l, ctx.tasks)) for l in lanes}
        nw = warps.pop() if len(warps) == 1 else None
        if nw and req % (nw * 32) == 0:
            na = req // (nw * 32)
            fix_call = with_kwargs(ctx.sf, call, set_kw={"num_warps": nw, "num_arrivals": na}) if call else \
                f"alloc_warp_barrier(..., num_warps={nw}, num_arrivals={na})"
            fix = (f"{fix_call} {at_line(line, b.name)}: {who_text}, {nw} warps x 32 threads each: "
                   f"{nw} x 32 x {na} = {req} per-thread arrivals")
        else:
            fix = (f"{at_line(line, b.name)}: the arriving tasks have different warp counts; use an ordinary "
                   f"tlx.alloc_barriers(..., arrive_count={sum(arrivals.values()) + sum(expects.values())})")
        yield Finding("warp-barrier-count", "error",
                      f"{b.name} counts {declared} per-thread arrivals per phase but {req} arrive ({who_text})",
                      ctx.at(line, *lines[:2]), fix, barrier=b.name)
        return
    rule = "tma-full-count" if "tma" in r and not arrivals else "release-count"
    fix_call = with_kwargs(ctx.sf, call, set_kw={"arrive_count": req}) if call else f"arrive_count={req}"
    effect = ("the phase completes early: waiters pass before every arrival is in, and the producer may "
              "overwrite a buffer still being read" if req > (declared or 0) else
              "the phase never completes: the waiters hang")
    yield Finding(rule, "error",
                  f"{b.name} has arrive_count={declared} but {req} arrival(s) complete each phase ({who_text}): "
                  f"{effect}", ctx.at(line, *lines[:2]),
                  f"{fix_call} {at_line(line, b.name)}: {who_text}", barrier=b.name)


def _static_count(ctx, b, call, r, line):
    arrive_sites = [s for s in b.sites if s.op == "arrive"]
    if "tma" in r and not arrive_sites and b.count not in (None, 1):
        expects = [s for s in b.sites if s.op == "expect"]
        fix_call = with_kwargs(ctx.sf, call, set_kw={"arrive_count": 1}) if call else "arrive_count=1"
        yield Finding("tma-full-count", "error",
                      f"{b.name} is armed by barrier_expect_bytes (line(s) {', '.join(str(s.line) for s in expects)})"
                      f" and completed by TMA bytes; each expect is one arrival, so arrive_count={b.count} waits "
                      f"for arrivals that never come", ctx.at(line, *(s.line for s in expects[:1])),
                      f"{fix_call} {at_line(line, b.name)}: one barrier_expect_bytes per phase", barrier=b.name)
    elif ctx.is_warp(b) and arrive_sites:
        # per-thread arrivals per phase, assuming each arriving task replica reaches each site once
        labels = sorted({s.task for s in arrive_sites})
        per_task_sites = {l: len({s.line for s in arrive_sites if s.task == l}) for l in labels}
        total = sum((ctx.warps_of(l) or 0) * 32 * n for l, n in per_task_sites.items())
        if total and b.count and total != b.count:
            warps = {ctx.warps_of(l) for l in labels}
            nw = warps.pop() if len(warps) == 1 else None
            na = total // (nw * 32) if nw else None
            fix_call = with_kwargs(ctx.sf, call, set_kw={"num_warps": nw, "num_arrivals": na}) if call and nw else \
                "alloc_warp_barrier(...)"
            yield Finding("warp-barrier-count", "error",
                          f"{b.name} counts {b.count} per-thread arrivals per phase but {', '.join(labels)} "
                          f"({'/'.join(str(ctx.warps_of(l)) for l in labels)} warps) arrive at "
                          f"{sum(per_task_sites.values())} site(s): {total} per-thread arrivals (static estimate: "
                          f"each site once per phase)", ctx.at(line, *(s.line for s in arrive_sites[:1])),
                          f"{fix_call} {at_line(line, b.name)}", barrier=b.name)


# ---- bytes of TMA barriers ---------------------------------------------------------------
def bytes_rules(ctx: Context):
    groups: dict[tuple, list] = defaultdict(list)
    for (name, slot), lst in ctx.facts.items():
        for sf in lst:
            n = sf.expect_calls
            if not n or sf.expect_bytes == sf.tx_bytes:
                continue
            lines = tuple(sorted({l for a in sf.expects.values() for l in a.lines if l}))
            groups[(name, lines, sf.expect_bytes // n, sf.tx_bytes // n)].append(sf)
    for (name, lines, want, got), sfs in sorted(groups.items(), key=str):
        sf = sfs[0]
        loads = sorted(l for l in sf.tx_by_line if l)
        per_load = ", ".join(f"line {l}: {sf.tx_by_line[l] // max(sf.expect_calls, 1)} B" for l in loads)
        call = ctx.sf.call_at(lines[0], "barrier_expect_bytes") if lines else None
        if call is not None:
            size = call.kwarg("size", 1)
            fix_call = with_kwargs(ctx.sf, call, set_kw={"size": got}) if call.kwarg("size") else \
                call.text.replace(size, str(got), 1) if size else f"barrier_expect_bytes(..., {got})"
        else:
            fix_call = f"barrier_expect_bytes(..., {got})"
        slots = sorted({s.slot for s in sfs})
        effect = ("the phase never completes" if want > got else
                  "the extra bytes take the pending count below zero, so the phase never completes")
        yield Finding("tma-expect-bytes", "error",
                      f"barrier_expect_bytes announces {want} bytes per phase on {name} (slots {slots}) but the TMA "
                      f"loads that signal it land {got} ({per_load or 'none'}): {effect}",
                      ctx.at(*lines, *loads[:2]),
                      f"{fix_call} {at_line(lines[0]) if lines else 'on ' + name}: the loads land {got} bytes "
                      f"per phase",
                      barrier=name)


# ---- named barriers ----------------------------------------------------------------------
def named_rules(ctx: Context):
    partitions = sorted({t.partition for t in ctx.tasks if t.partition is not None})
    ws = bool(partitions)
    reserved = {0} | ({1} | {2 + p for p in partitions} if ws else set())
    free = [i for i in range(16) if i not in reserved]
    for b in ctx.report.barriers:
        if b.kind != "named":
            continue
        lines = sorted({s.line for s in b.sites if s.line})
        bid = b.named_id
        if bid is None:
            yield Finding("named-barrier-id", "warning", "the named barrier id is not a compile-time constant",
                          ctx.at(*lines), "pass a literal or constexpr id in "
                                          f"{free[0]}..15 so the reserved ids can be ruled out")
        elif not 0 <= bid <= 15:
            yield Finding("named-barrier-id", "error", f"named barrier id {bid} is outside 0..15",
                          ctx.at(*lines), f"use an id in {free[0]}..15 at line(s) {', '.join(map(str, lines))}")
        elif bid in reserved:
            why = ("0 is bar.sync 0 (the default warp group / __syncthreads), 1 the warp-specialize switch loop, "
                   f"2..{1 + len(partitions)} one per async task partition" if ws else
                   "0 is bar.sync 0 (__syncthreads)")
            yield Finding("named-barrier-id", "error",
                          f"named barrier {bid} is one the compiler reserves ({why}): it collides with the "
                          f"compiler's own barrier", ctx.at(*lines),
                          f"use a free id, e.g. {free[-1] if bid not in free else bid} (free: {free[0]}..15) at "
                          f"line(s) {', '.join(map(str, lines))}")
        yield from _named_threads(ctx, b, lines)


def _named_threads(ctx, b, lines):
    counts = defaultdict(list)
    for s in b.sites:
        counts[s.args.get("threads")].append(s.line)
    counts.pop(None, None)
    participants = sorted({s.task for s in b.sites if s.task is not None})
    want = sum((ctx.warps_of(l) or 0) * 32 for l in participants)
    plist = " + ".join(f"{l} ({ctx.warps_of(l)} warps)" for l in participants)
    for n, ls in sorted(counts.items()):
        if n % 32:
            yield Finding("named-barrier-threads", "error",
                          f"named barrier {b.named_id}: num_threads={n} is not a multiple of 32 (whole warps arrive)",
                          ctx.at(*ls), f"num_threads={want or (n // 32 + 1) * 32} at line(s) "
                                       f"{', '.join(map(str, sorted(set(ls))))}")
    if len(counts) > 1:
        detail = "; ".join(f"{n} at line(s) {', '.join(map(str, sorted(set(ls))))}" for n, ls in sorted(counts.items()))
        yield Finding("named-barrier-threads", "error",
                      f"named barrier {b.named_id}: wait and arrive disagree on num_threads ({detail}); every side "
                      f"of one barrier must pass the same total",
                      ctx.at(*sorted({l for n, ls in counts.items() if n != want for l in ls}), *lines),
                      f"num_threads={want} at line(s) "
                      f"{', '.join(str(l) for n, ls in sorted(counts.items()) if n != want for l in sorted(set(ls)))}"
                      f" (every wait and arrive of barrier {b.named_id} passes {want}): {plist}")
    elif counts and want:
        (n, ls), = counts.items()
        if n != want and n % 32 == 0:
            yield Finding("named-barrier-threads", "error",
                          f"named barrier {b.named_id}: num_threads={n} but the waiting plus arriving threads are "
                          f"{want} ({plist}): the barrier "
                          + ("never releases" if n > want else "releases before everyone is there"),
                          ctx.at(*ls), f"num_threads={want} at line(s) {', '.join(map(str, sorted(set(ls))))}: {plist}")


# ---- MMA shapes --------------------------------------------------------------------------
_LIMITS = {"M": 64, "K": 16, "N": 32}
_MEMDESC = re.compile(r"(?:memdesc|tensor)<(\d+)x(\d+)x")


def mma_rules(ctx: Context):
    ttgir = ctx.report.stages.get("ttgir", "")
    for i, text in enumerate(ttgir.splitlines(), 1):
        if "ttng.warp_group_dot " not in text and "ttng.tc_gen5_mma " not in text:
            continue
        sig = text.rsplit(" : ", 1)[-1]
        shapes = [(int(a), int(b)) for a, b in _MEMDESC.findall(sig)]
        if len(shapes) < 2:
            continue
        (m, k), (_, n) = shapes[0], shapes[1]
        line = ctx.report.source_line("ttgir", i)
        bad = [f"{d} = {v} < {_LIMITS[d]}" for d, v in (("M", m), ("K", k), ("N", n)) if v < _LIMITS[d]]
        if bad:
            yield Finding("async-dot-shape", "error", f"async_dot tile M={m}, N={n}, K={k}: {', '.join(bad)}",
                          ctx.at(line),
                          f"grow the tile{' ' + at_line(line) if line else ''} to M >= 64, K >= 16, N >= 32")
    # two_ctas M = 128 per CTA: the front end asserts it (utlx_plugin/_compat.py), so a kernel that
    # breaks it never reaches TTGIR; see shape_finding_from_error and two_ctas_source_rule


_DOT_ASSERT = re.compile(r"(M|N|K) must be at least (\d+)|K >= 16|WGMMA requires num_warps to be divisible by 4")
_PAIR_M = re.compile(r"only supports M=128 per CTA for pair-CTA mma, but got M=(\d+)")


def shape_finding_from_error(err, names: dict | None = None) -> Finding | None:
    """An async_dot shape assertion of the TLX front end (compile failed) as a finding."""
    msg = getattr(err, "message", str(err))
    pm = _PAIR_M.search(msg)
    if pm is not None and err.file and err.line:
        sf = source_file(err.file)
        call = sf.call_at(err.line, "async_dot", "async_dot_scaled")
        if call is not None:
            return two_ctas_m_finding(sf, call, int(pm.group(1)), names or {})
    m = _DOT_ASSERT.search(msg)
    if m is None:
        return None
    if "WGMMA" in m.group(0):
        fix = "run the async_dot in a task of 4 or 8 warps (a whole warp group)"
        text = ("the compiler rejects this async_dot: wgmma is issued by whole warp groups, so the task needs "
                "num_warps divisible by 4 (the quick reference does not say this)")
    else:
        dim = m.group(1) or "K"
        fix = (f"grow {dim} of the tile{' ' + at_line(err.line) if err.line else ''} to >= {m.group(2) or 16} "
               f"(limits: M >= 64, K >= 16, N >= 32)")
        text = (f"the compiler rejects this async_dot: {m.group(0)} (the TLX front end asserts the quick "
                f"reference's limits M >= 64, K >= 16, N >= 32; wgmma itself would take N >= 8)")
    return Finding("async-dot-shape", "error", text, [(err.file, err.line)] if err.file and err.line else [], fix)


def _a_alloc(sf, fn, dot_call):
    """The local_alloc that A of `dot_call` indexes (``a[0]``, ``tlx.local_view(a, i)``), or None."""
    if fn is None:
        return None
    expr = _arg(dot_call, "A", 0)
    while isinstance(expr, ast.Subscript) or (isinstance(expr, ast.Call) and expr.args and
                                              getattr(expr.func, "attr", None) == "local_view"):
        expr = expr.value if isinstance(expr, ast.Subscript) else expr.args[0]
    if not isinstance(expr, ast.Name):
        return None
    for d in reversed(_assignments(fn).get(expr.id, [])):
        v = d.value
        if isinstance(v, ast.Call) and getattr(v.func, "attr", None) == "local_alloc" and v.lineno < dot_call.line:
            return next((c for c in sf.calls if c.node is v), None)
    return None


def two_ctas_m_finding(sf, dot_call, m: int, names: dict) -> Finding:
    """``two-ctas-m`` at an ``async_dot(..., two_ctas=True)`` whose A tile has `m` rows per CTA."""
    alloc = _a_alloc(sf, sf.enclosing_function(dot_call.node), dot_call)
    lines = [(sf.path, dot_call.line)] + ([(sf.path, alloc.line)] if alloc is not None else [])
    shape = alloc.kwarg("shape", 0) if alloc is not None else None
    rows = None
    if alloc is not None:
        node = alloc.node.args[0] if alloc.node.args else next(
            (k.value for k in alloc.node.keywords if k.arg == "shape"), None)
        if isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            rows = ast.get_source_segment(sf.text, node.elts[-2])
    if shape and rows:
        what = f"{rows} = 128" if not rows.strip().isdigit() else "128 rows"
        fix = (f"{what} per CTA for A's tile {shape} at line {alloc.line} (it has {m} rows): the pair's MMA at "
               f"line {dot_call.line} covers 128 rows in each CTA, 256 across the pair")
    else:
        fix = f"give the async_dot at line {dot_call.line} an A tile of 128 rows per CTA (256 across the pair)"
    return Finding("two-ctas-m", "error",
                   f"async_dot(two_ctas=True) with M={m} rows of A per CTA: the pair-CTA MMA (tcgen05 "
                   f"cta_group::2) needs M = 128 per CTA, 256 across the pair", lines, fix)


def two_ctas_source_rule(file: str, kernel: str, names: dict):
    """two-ctas-m from the source: for kernels the compiler stops building before it reaches the
    MMA (a remote arrival earlier in the kernel)."""
    sf = source_file(file)
    fn = _kernel_def(sf, kernel)
    if fn is None:
        return
    for c in sf.calls:
        if c.name not in ("async_dot", "async_dot_scaled") or not (fn.lineno <= c.line <= fn.end_lineno):
            continue
        if not live(sf, c.node, names) or not evaluate(c.kwarg("two_ctas"), names):
            continue
        alloc = _a_alloc(sf, fn, c)
        shape = evaluate(alloc.kwarg("shape", 0), names) if alloc is not None else None
        if isinstance(shape, tuple) and len(shape) >= 2 and isinstance(shape[-2], int) and shape[-2] != 128:
            yield two_ctas_m_finding(sf, c, shape[-2], names)


# ---- 2-CTA (cluster) rules: read from the source (uTLX cannot build remote arrivals yet) ----
def live(sf, node, names: dict) -> bool:
    """False when `node` sits in a branch a constexpr ``if`` removes for these constexpr values."""
    for test, in_body in sf.enclosing_ifs(node):
        v = evaluate(test, names)
        if v is not None and bool(v) != in_body:
            return False
    return True


def _kernel_def(sf, name: str):
    for node in ast.walk(sf.tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _assignments(fn) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id].append(node)
    return out


def _root(expr, assigns, depth=0) -> str | None:
    """The barrier array a barrier expression views: bars[0], tlx.local_view(bars, i), a name bound to one."""
    if depth > 8 or expr is None:
        return None
    if isinstance(expr, ast.Subscript):
        return _root(expr.value, assigns, depth + 1)
    if isinstance(expr, ast.Call) and expr.args and getattr(expr.func, "attr", None) in ("local_view", "subslice"):
        return _root(expr.args[0], assigns, depth + 1)
    if isinstance(expr, ast.Name):
        defs = assigns.get(expr.id, [])
        for d in defs:
            v = d.value
            if isinstance(v, ast.Call) and getattr(v.func, "attr", None) in ("alloc_barriers", "alloc_warp_barrier"):
                return expr.id
        if defs:
            v = defs[-1].value
            if isinstance(v, (ast.Subscript, ast.Name)) or (
                    isinstance(v, ast.Call) and getattr(v.func, "attr", None) in ("local_view", "subslice")):
                return _root(v, assigns, depth + 1)
        return expr.id
    return None


def _arg(call, name, pos):
    for kw in call.node.keywords:
        if kw.arg == name:
            return kw.value
    return call.node.args[pos] if pos < len(call.node.args) else None


def cta_source_rules(file: str, kernel: str, names: dict, num_ctas: int):
    """2-CTA leader rules over the kernel's source: expect only in the leader for two_ctas TMA loads;
    arrive_count=NUM_CTAS for software arrivals sent to rank 0."""
    if num_ctas < 2:
        return
    sf = source_file(file)
    fn = _kernel_def(sf, kernel)
    if fn is None:
        return
    assigns = _assignments(fn)
    calls = [c for c in sf.calls if fn.lineno <= c.line <= fn.end_lineno and live(sf, c.node, names)]
    live_nodes = {id(c.node) for c in calls}
    allocs = {}
    for name, defs in assigns.items():
        for d in defs:
            v = d.value
            if isinstance(v, ast.Call) and getattr(v.func, "attr", None) in ("alloc_barriers", "alloc_warp_barrier") \
                    and id(v) in live_nodes:
                allocs[name] = next(c for c in calls if c.node is v)
    rank_names = {t.id for d in ast.walk(fn) if isinstance(d, ast.Assign) and isinstance(d.value, ast.Call)
                  and getattr(d.value.func, "attr", None) == "cluster_cta_rank" for t in d.targets
                  if isinstance(t, ast.Name)}
    at = lambda *ls: [(file, l) for l in ls if l]  # noqa: E731

    two_cta_bars: dict[str, int] = {}
    for c in calls:
        if c.name == "async_descriptor_load" and evaluate(c.kwarg("two_ctas"), names):
            root = _root(_arg(c, "barrier", 3), assigns)
            if root:
                two_cta_bars.setdefault(root, c.line)
    for c in calls:
        if c.name != "barrier_expect_bytes":
            continue
        root = _root(_arg(c, "bar", 0), assigns)
        if root not in two_cta_bars:
            continue
        guards = sf.enclosing_ifs(c.node)
        pred = c.kwarg("pred", 2)
        led = any(body and ("leader" in t or any(r in t for r in rank_names)) for t, body in guards) or \
            (pred is not None and ("leader" in pred or any(r in pred for r in rank_names)))
        if not led:
            yield Finding("cta-leader-expect", "error",
                          f"barrier_expect_bytes on {root} runs in every CTA of the {num_ctas}-CTA cluster, but the "
                          f"two_ctas TMA load at line {two_cta_loads_line(two_cta_bars, root)} completes the leader's "
                          f"barrier: only the leader may arm it (the peer's expect is never completed)",
                          at(c.line, two_cta_bars[root]),
                          f"put the barrier_expect_bytes at line {c.line} under `if is_leader:` "
                          f"(is_leader = tlx.cluster_cta_rank() == 0), and keep arrive_count=1", barrier=root)
    for root, line in two_cta_bars.items():
        call = allocs.get(root)
        count = evaluate(call.kwarg("arrive_count", 1), names) if call else None
        if call is not None and call.kwarg("arrive_count", 1) is None:
            count = 1
        if count not in (None, 1):
            yield Finding("cta-leader-expect", "error",
                          f"{root} is armed by the leader's barrier_expect_bytes alone: arrive_count must be 1, "
                          f"not {count}", at(call.line),
                          f"{with_kwargs(sf, call, set_kw={'arrive_count': 1})} at line {call.line}", barrier=root)
    to_leader: dict[str, list] = defaultdict(list)
    for c in calls:
        if c.name != "barrier_arrive":
            continue
        expr = c.kwarg("remote_cta_rank", 2)
        if expr is None:
            continue
        vals = {evaluate(expr, {**names, **{r: rank for r in rank_names}}) for rank in range(num_ctas)}
        if vals == {0}:
            root = _root(_arg(c, "bar", 0), assigns)
            if root:
                to_leader[root].append(c)
    for root, sites in to_leader.items():
        call = allocs.get(root)
        if call is None:
            continue
        count = evaluate(call.kwarg("arrive_count", 1), names) if call.kwarg("arrive_count", 1) else 1
        want = num_ctas * len({c.line for c in sites})
        if count is not None and count != want:
            yield Finding("cta-remote-count", "error",
                          f"{root} receives barrier_arrive(..., remote_cta_rank=0) from all {num_ctas} CTAs of the "
                          f"cluster (line {sites[0].line}) but has arrive_count={count}: the leader passes before "
                          f"the peer arrives", at(call.line, sites[0].line),
                          f"{with_kwargs(sf, call, set_kw={'arrive_count': want})} at line {call.line}: "
                          f"NUM_CTAS={num_ctas} CTAs arrive on the leader's barrier once per phase", barrier=root)


def two_cta_loads_line(bars, root):
    return bars.get(root)


def sim_findings(ctx_file: str, sim) -> list[Finding]:
    """The simulator's own diagnoses (deadlock, races, arrivals past a count) as findings."""
    out: list[Finding] = []
    if sim is None:
        return out
    seen = set()
    d = sim.deadlock
    if d is not None:
        # the root cause's line first, then every other blocked wait
        lines = [d.line] + [getattr(x, "line", None) for x in getattr(d, "blocked", [])]
        lines = list(dict.fromkeys(n for n in lines if n))
        out.append(Finding("deadlock", "error", d.message, [(ctx_file, n) for n in lines], d.hint or "",
                           barrier=None))
    for f in sim.findings:
        key = (f.kind, f.message, f.line, f.other_line)
        if key in seen:
            continue
        seen.add(key)
        out.append(Finding(f.kind, getattr(f, "severity", "error"), f.message,
                           [(ctx_file, l) for l in (f.line, f.other_line) if l],
                           (f.hint or "order the accesses through a barrier") if f.kind == "race" else (f.hint or "")))
    return out


ALL_RULES = (count_rules, bytes_rules, named_rules, mma_rules)
