"""The barrier-protocol rules. Each rule reads the CompileReport (static facts), the
kernel source (what the IR lost) and, when there was a simulator run, the per-slot
facts (who actually arrived, how many bytes landed), and yields Findings with the
exact line and the exact fix.
"""
from __future__ import annotations

import re
from collections import defaultdict

from .facts import lane_label
from .findings import Finding
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

    def __init__(self, report, facts=None):
        self.report = report
        self.file = report.source.file
        self.sf = source_file(self.file)
        self.facts = facts or {}
        self.names = dict(report.constexprs)
        self.tasks = report.tasks
        self.num_ctas = max(int(report.resources.num_ctas or 1), int(report.options.get("num_ctas") or 1))

    def warps_of(self, label) -> int | None:
        for t in self.tasks:
            if t.label == label or (t.name == label and t.replica == 0):
                return t.num_warps
        return None

    def alloc_call(self, b):
        return self.sf.call_at(b.line, "alloc_barriers", "alloc_warp_barrier") if b.line else None

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
        if b.kind == "warp" and r & {"tma", "mma"}:
            yield _warp_on_tma(ctx, b, call, r)
            continue
        slots = [sf for (name, _), lst in ctx.facts.items() if name == b.name for sf in lst]
        if slots:
            yield from _dynamic_count(ctx, b, call, r, slots)
        else:
            yield from _static_count(ctx, b, call, r)


def _warp_on_tma(ctx, b, call, r):
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
                   ctx.at(b.line, *sites[:2]),
                   f"{fix_call or 'tlx.alloc_barriers(..., arrive_count=1)'} at line {b.line}: full/TMA barriers "
                   f"stay ordinary", barrier=b.name)


def _dynamic_count(ctx, b, call, r, slots):
    declared = b.count if b.count is not None else slots[0].init_count
    need: dict[int, list] = defaultdict(list)
    for sf in slots:
        req = sf.required_count()
        if req is not None:
            need[req].append(sf)
    if not need or set(need) == {declared}:
        return
    if len(need) > 1:
        detail = "; ".join(f"slots {sorted({s.slot for s in v})} need {k}" for k, v in sorted(need.items()))
        yield Finding("release-count", "error",
                      f"the slots of {b.name} need different arrive counts per phase ({detail}) but one "
                      f"alloc gives them all {declared}", ctx.at(b.line),
                      f"split {b.name} into one barrier array per arrive count (line {b.line})", barrier=b.name)
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
    if b.kind == "warp":
        lanes = list(sf.arrivals)
        warps = {ctx.warps_of(lane_label(l, ctx.tasks)) for l in lanes}
        nw = warps.pop() if len(warps) == 1 else None
        if nw and req % (nw * 32) == 0:
            na = req // (nw * 32)
            fix_call = with_kwargs(ctx.sf, call, set_kw={"num_warps": nw, "num_arrivals": na}) if call else \
                f"alloc_warp_barrier(..., num_warps={nw}, num_arrivals={na})"
            fix = (f"{fix_call} at line {b.line}: {who_text}, {nw} warps x 32 threads each: "
                   f"{nw} x 32 x {na} = {req} per-thread arrivals")
        else:
            fix = (f"at line {b.line}: the arriving tasks have different warp counts; use an ordinary "
                   f"tlx.alloc_barriers(..., arrive_count={sum(arrivals.values()) + sum(expects.values())})")
        yield Finding("warp-barrier-count", "error",
                      f"{b.name} counts {declared} per-thread arrivals per phase but {req} arrive ({who_text})",
                      ctx.at(b.line, *lines[:2]), fix, barrier=b.name)
        return
    rule = "tma-full-count" if "tma" in r and not arrivals else "release-count"
    fix_call = with_kwargs(ctx.sf, call, set_kw={"arrive_count": req}) if call else f"arrive_count={req}"
    effect = ("the phase completes early: waiters pass before every arrival is in, and the producer may "
              "overwrite a buffer still being read" if req > (declared or 0) else
              "the phase never completes: the waiters hang")
    yield Finding(rule, "error",
                  f"{b.name} has arrive_count={declared} but {req} arrival(s) complete each phase ({who_text}): "
                  f"{effect}", ctx.at(b.line, *lines[:2]),
                  f"{fix_call} at line {b.line}: {who_text}", barrier=b.name)


def _static_count(ctx, b, call, r):
    arrive_sites = [s for s in b.sites if s.op == "arrive"]
    if "tma" in r and not arrive_sites and b.count not in (None, 1):
        expects = [s for s in b.sites if s.op == "expect"]
        fix_call = with_kwargs(ctx.sf, call, set_kw={"arrive_count": 1}) if call else "arrive_count=1"
        yield Finding("tma-full-count", "error",
                      f"{b.name} is armed by barrier_expect_bytes (line(s) {', '.join(str(s.line) for s in expects)})"
                      f" and completed by TMA bytes; each expect is one arrival, so arrive_count={b.count} waits "
                      f"for arrivals that never come", ctx.at(b.line, *(s.line for s in expects[:1])),
                      f"{fix_call} at line {b.line}: one barrier_expect_bytes per phase", barrier=b.name)
    elif b.kind == "warp" and arrive_sites:
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
                          f"each site once per phase)", ctx.at(b.line, *(s.line for s in arrive_sites[:1])),
                          f"{fix_call} at line {b.line}", barrier=b.name)


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
                  "the phase completes before all bytes land (or never, once the count goes negative)")
        yield Finding("tma-expect-bytes", "error",
                      f"barrier_expect_bytes announces {want} bytes per phase on {name} (slots {slots}) but the TMA "
                      f"loads that signal it land {got} ({per_load or 'none'}): {effect}",
                      ctx.at(*lines, *loads[:2]),
                      f"{fix_call} at line {lines[0] if lines else '?'}: the loads land {got} bytes per phase",
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
                      f"of one barrier must pass the same total", ctx.at(*lines),
                      f"num_threads={want} at every wait and arrive of barrier {b.named_id}: {plist}")
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
                          ctx.at(line), f"grow the tile at line {line} to M >= 64, K >= 16, N >= 32")
        if "ttng.tc_gen5_mma " in text and "two_ctas" in text and m != 128:
            yield Finding("two-ctas-m", "error",
                          f"async_dot(two_ctas=True) with M={m} per CTA: the pair-CTA MMA needs M = 128 per CTA "
                          f"(256 across the pair)", ctx.at(line),
                          f"use a 128-row A tile per CTA at line {line} (BLOCK_M = 128 per CTA)")


_DOT_ASSERT = re.compile(r"(M|N|K) must be at least (\d+)|K >= 16|WGMMA requires num_warps to be divisible by 4")


def shape_finding_from_error(err) -> Finding | None:
    """An async_dot shape assertion of the TLX front end (compile failed) as a finding."""
    msg = getattr(err, "message", str(err))
    m = _DOT_ASSERT.search(msg)
    if m is None:
        return None
    if "WGMMA" in m.group(0):
        fix = "run the async_dot in a task of 4 or 8 warps (a whole warp group)"
        text = ("the compiler rejects this async_dot: wgmma is issued by whole warp groups, so the task needs "
                "num_warps divisible by 4 (the quick reference does not say this)")
    else:
        dim = m.group(1) or "K"
        fix = f"grow {dim} of the tile at line {err.line} to >= {m.group(2) or 16} (limits: M >= 64, K >= 16, N >= 32)"
        text = (f"the compiler rejects this async_dot: {m.group(0)} (the TLX front end asserts the quick "
                f"reference's limits M >= 64, K >= 16, N >= 32; wgmma itself would take N >= 8)")
    return Finding("async-dot-shape", "error", text, [(err.file, err.line)] if err.file else [], fix)


# ---- 2-CTA (cluster) rules ----------------------------------------------------------------
def cta_rules(ctx: Context):
    n = ctx.num_ctas
    sf = ctx.sf
    rank_names = set()
    for c in sf.calls:
        if c.name == "cluster_cta_rank":
            st = sf.statement_of(c.node)
            if st is not None:
                node = st[0][st[1]]
                for t in getattr(node, "targets", []):
                    if hasattr(t, "id"):
                        rank_names.add(t.id)
    for b in ctx.report.barriers:
        if b.kind == "named":
            continue
        call = ctx.alloc_call(b)
        # a TMA load with two_ctas=True arms the leader's barrier: the leader alone expects
        two_cta_loads = []
        for s in b.sites:
            if s.op == "tma_load" and s.line:
                c = sf.call_at(s.line, "async_descriptor_load")
                if c is not None and evaluate(c.kwarg("two_ctas"), ctx.names):
                    two_cta_loads.append(s)
        if two_cta_loads and n > 1:
            for s in (s for s in b.sites if s.op == "expect" and s.line):
                c = sf.call_at(s.line, "barrier_expect_bytes")
                guards = sf.enclosing_ifs(c.node) if c is not None else []
                pred = c.kwarg("pred", 2) if c is not None else None
                led = any(("leader" in t or "rank" in t) and body for t, body in guards) or \
                    (pred is not None and ("leader" in pred or "rank" in pred))
                if not led:
                    yield Finding("cta-leader-expect", "error",
                                  f"barrier_expect_bytes on {b.name} runs in every CTA, but the two_ctas TMA load at "
                                  f"line {two_cta_loads[0].line} signals the leader's barrier: the peer's expect "
                                  f"arms a barrier nobody completes", ctx.at(s.line, two_cta_loads[0].line),
                                  f"put the barrier_expect_bytes at line {s.line} under `if is_leader:` "
                                  f"(is_leader = tlx.cluster_cta_rank() == 0)", barrier=b.name)
            if b.count not in (None, 1) and not any(s.op == "arrive" for s in b.sites):
                yield Finding("cta-leader-expect", "error",
                              f"{b.name} is armed by the leader's barrier_expect_bytes only: arrive_count must be 1, "
                              f"not {b.count}", ctx.at(b.line),
                              f"{with_kwargs(sf, call, set_kw={'arrive_count': 1}) if call else 'arrive_count=1'} "
                              f"at line {b.line}", barrier=b.name)
        # software arrivals sent to the leader: every CTA of the cluster arrives
        to_leader = []
        for s in b.sites:
            if s.op != "arrive" or not s.line:
                continue
            c = sf.call_at(s.line, "barrier_arrive")
            expr = c.kwarg("remote_cta_rank", 2) if c is not None else None
            if expr is None or n < 2:
                continue
            vals = {evaluate(expr, {**ctx.names, **{r: rank for r in rank_names}}) for rank in range(n)}
            if vals == {0}:
                to_leader.append(s)
        if to_leader:
            per_cta = len({s.line for s in to_leader if s.task == to_leader[0].task})
            want = n * per_cta
            if b.count is not None and b.count != want:
                fix_call = with_kwargs(sf, call, set_kw={"arrive_count": want}) if call else f"arrive_count={want}"
                yield Finding("cta-remote-count", "error",
                              f"{b.name} receives barrier_arrive(..., remote_cta_rank=0) from all {n} CTAs of the "
                              f"cluster (line {to_leader[0].line}) but has arrive_count={b.count}",
                              ctx.at(b.line, to_leader[0].line),
                              f"{fix_call} at line {b.line}: NUM_CTAS={n} CTAs arrive on the leader's barrier "
                              f"once per phase", barrier=b.name)


def sim_findings(ctx_file: str, sim) -> list[Finding]:
    """The simulator's own diagnoses (deadlock, races, arrivals past a count) as findings."""
    out = []
    if sim is None:
        return out
    d = sim.deadlock
    if d is not None:
        out.append(Finding("deadlock", "error", d.message, [(ctx_file, d.line)] if d.line else [],
                           d.hint or "", barrier=None))
    for f in sim.findings:
        out.append(Finding(f.kind, "error", f.message, [(ctx_file, l) for l in (f.line, f.other_line) if l],
                           "order the accesses through a barrier" if f.kind == "race" else ""))
    return out


ALL_RULES = (count_rules, bytes_rules, named_rules, mma_rules, cta_rules)
