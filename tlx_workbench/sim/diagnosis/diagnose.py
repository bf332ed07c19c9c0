"""Deadlock diagnosis: the wait-for graph of CTAs (one, or a cluster's) whose live tasks are all blocked.

Lanes are (cta, task, replica); an expected arriver may live in another CTA of the cluster
(a remote ``barrier_arrive``, a leader's 2-CTA MMA commit, a 2-CTA TMA load signalling the
leader), and the reasons name those cross-CTA rules when they are what went wrong."""
from __future__ import annotations

import dataclasses
import html
import linecache

from .releases import Releases, loop_of, slot_line, statement_end as _statement_end


def _bytes_text(n) -> str:
    """Transaction bytes still missing, said as a sentence when more landed than announced (the count is negative)."""
    if n is not None and n < 0:
        return f"0 transaction byte(s): {-n} more landed than announced"
    return f"{n} transaction byte(s)"


@dataclasses.dataclass
class BlockedTask:
    lane: tuple                 # (cta, task, replica)
    kind: str                   # mbarrier | named | join
    line: int | None
    barrier: str | None = None  # "bars_full[2]" / "named[1]"
    phase: int | None = None    # the parity waited on
    completed: int | None = None  # phases the barrier completed so far
    missing_arrivals: int | None = None
    missing_bytes: int | None = None
    inflight_tma: int = 0
    arrived: list = dataclasses.field(default_factory=list)     # [(lane, line, count)] this phase
    expected: list = dataclasses.field(default_factory=list)    # [(task, replica, lines, where it is, cta)]
    since: float = 0.0
    reason: str = ""
    multi: bool = False         # several CTAs in the graph: name the CTA of each lane
    priority: int = 1           # 0: breaks a cluster rule (the likely root cause); the report lists it first
    hint: str = ""              # what to do, where the kind of wait alone says it

    def describe(self, file=None) -> str:
        who = f"{self.lane[1]}[{self.lane[2]}]"
        if self.multi:
            who = f"CTA {self.lane[0]} {who}"
        if self.kind == "join":
            return f"{who} waits for its async tasks to finish"
        if self.kind in ("remote", "cluster", "cluster-ws", "poll"):
            src = linecache.getline(file, self.line).strip() if file and self.line else ""
            return f"{who} line {self.line}: {src}\n      {self.reason}"
        src = linecache.getline(file, self.line).strip() if file and self.line else ""
        head = f"{who} line {self.line}: {src}"
        if self.kind == "named":
            return f"{head}\n      waits on {self.barrier}: {self.reason}"
        lines = [head, f"      waits on {self.barrier} for phase parity {self.phase} to complete "
                       f"(barrier has completed {self.completed} phase(s); current parity {self.completed & 1})",
                 f"      missing: {self.missing_arrivals} arrival(s), {_bytes_text(self.missing_bytes)}"
                 + (f", {self.inflight_tma} TMA load(s) in flight" if self.inflight_tma else "")]
        if self.reason:
            lines.append(f"      why: {self.reason}")
        for task, rep, arr_lines, where, cta in self.expected:
            in_cta = f"CTA {cta} " if self.multi else ""
            lines.append(f"      expected arriver {in_cta}{task}[{rep}] (arrives at line(s) "
                         f"{', '.join(map(str, sorted(arr_lines)))}): {where}")
        return "\n".join(lines)


@dataclasses.dataclass
class DeadlockReport:
    cta: int
    blocked: list
    message: str
    line: int | None
    hint: str
    file: str | None = None
    time: float = 0.0

    @property
    def edges(self) -> list[tuple]:
        """Wait-for edges: (waiting lane, barrier, lane expected to arrive)."""
        out = []
        for b in self.blocked:
            for task, rep, _, _, cta in b.expected:
                out.append((b.lane, b.barrier, (cta, task, rep)))
        return out

    ctas: list = dataclasses.field(default_factory=list)   # every CTA simulated together (a cluster)
    cause: "Cause | None" = None   # the line to change, when the ledgers name it (then the waits are its consequences)
    fix: object = None             # the verified repair (sim/diagnosis/repair.py: Repair) the report leads with, or None
    repair_search: object = None   # what the repair search tried (sim/diagnosis/repair.py: RepairSearch), or None

    def _where(self) -> str:
        return f"CTA {self.cta}" if len(self.ctas) <= 1 else f"the cluster of CTAs {self.ctas}"

    def _at_cause(self, b) -> bool:
        """Whether blocked wait ``b`` is the wait the cause names (a flipped phase): the line to change, not one
        of its consequences."""
        c = self.cause
        return (c is not None and bool(c.line) and b.kind == "mbarrier" and c.rule == "phase" and
                b.line is not None and c.line <= b.line <= _statement_end(self.file, c.line))

    def compose(self, fix_line: bool = True) -> str:
        """The report's text: the lead (the verified fix and its diff, else the cause, else the graph), then the
        wait the cause names, if blocked, then the blocked waits as consequences."""
        where = self._where()
        parts = []
        search = self.repair_search
        if self.fix is not None:
            parts += [f"deadlock in {where}: {self.fix.headline}",
                      "  the fix (verified by simulation; %tlx_fix applies it in a notebook):", self.fix.diff()]
            if self.cause is not None and self.cause.line:
                parts.append(f"  why: {self.cause.text}")
        elif self.cause is not None and self.cause.line:
            parts.append(f"deadlock in {where}: {self.cause.text}")
            if fix_line:
                parts.append(f"  fix: {self.cause.fix}")
        else:
            parts.append(f"deadlock in {where}: every live task is blocked")
        if self.fix is None and search is not None and search.tried:
            parts.append(f"  ({search.summary()})")
        at = [b for b in self.blocked if self._at_cause(b)]
        rest = [b for b in self.blocked if b not in at]
        if at:
            parts.append("  the wait to change (it is blocked too):")
            parts += ["  - " + b.describe(self.file) for b in at]
        if (self.cause is not None and self.cause.line) or self.fix is not None:
            parts.append("  consequences (every live task is blocked):")
        parts += ["  - " + b.describe(self.file) for b in rest]
        return "\n".join(parts)

    def text(self) -> str:
        return self.compose(True)

    def __str__(self):
        return self.text()

    def _repr_html_(self):
        fix = self.fix._repr_html_() if self.fix is not None else ""
        return ("<div class='tlxwb-deadlock' style='border-left:4px solid #c0392b;padding:4px 8px'>"
                f"<b>Deadlock</b> in CTA {self.cta if len(self.ctas) <= 1 else self.ctas}{fix}"
                f"<pre>{html.escape(self.text())}</pre>"
                f"<i>what to do:</i> {html.escape(self.hint)}</div>")


# how sure the report is that a blocked wait is the root cause; the report lists the lowest first
CONCRETE, PLAIN, INFERRED, CONSEQUENCE = 0, 1, 2, 3


def stuck_tasks(sched) -> set:
    """The tasks of a deadlock that can still arrive somewhere: blocked on a barrier. A task that only
    waits at the end of ``async_tasks`` for its siblings (the default task, once its body is done) has
    finished its work and will never arrive again."""
    return {t for t in (sched.deadlock or ()) if (t.wait_info or {}).get("kind") != "join"}


def _where(t, stuck=()) -> str:
    # tasks of a deadlock are aborted (state "done") before the report is built: ask the
    # deadlock set, not the state, whether a task finished on its own
    if t not in stuck and (t.state == "done" or (t.wait_info or {}).get("kind") == "join"):
        return "already finished (it will never arrive again)"
    info = t.wait_info or {}
    if info.get("kind") == "mbarrier":
        return f"itself blocked at line {info['line']} on {info['slot'].name} (parity {info['phase']})"
    if info.get("kind") == "named":
        return f"itself blocked at line {info['line']} on named barrier {info['barrier'].id}"
    if info.get("kind") == "join":
        return "waiting for its async tasks"
    if info.get("kind") in ("cluster", "cluster-ws"):
        return f"itself blocked at line {info['line']} in cluster_barrier"
    return f"at line {t.line}"


def deadlock_report(run, group) -> DeadlockReport:
    tasks = {(t.pid, t.name, t.replica): t for t in group.sched.tasks}
    pids = sorted({c.pid for c in group.ctas})
    multi = len(pids) > 1
    blocked = []
    waits = []          # (BlockedTask, its slot or named barrier), for the ranking of causes
    for t in group.sched.deadlock:
        info = t.wait_info or {"kind": "join", "line": None, "since": t.clock}
        lane = (t.pid, t.name, t.replica)
        if info["kind"] == "mbarrier":
            s = info["slot"]
            arrivers = group.arrivers.get(s.array.id, {})
            expected = []
            stuck = stuck_tasks(group.sched)
            for key, lines in sorted(arrivers.items()):
                if key == lane:
                    continue
                other = tasks.get(key)
                expected.append((key[1], key[2], lines, _where(other, stuck) if other else "unknown",
                                 key[0]))
            phase = info["phase"]
            passed = group.passed.get((s.array.id, t.pid, t.name, t.replica), 0)
            stuck_all = bool(expected) and all(tasks.get((e[4], e[0], e[1])) in stuck for e in expected)
            done_all = bool(expected) and not any(tasks.get((e[4], e[0], e[1])) in stuck for e in expected)
            # a blocked task never seen arriving here may be the arriver that is missing
            others = any((o.pid, o.name, o.replica) not in arrivers and o is not t for o in stuck)
            came = {a[0] for a in s.arrivals if a[0] is not None}
            missing = [key for key in arrivers if key not in came and key != lane]
            missing_stuck = ", ".join(f"CTA {k[0]} {k[1]}[{k[2]}]" if multi else f"{k[1]}[{k[2]}]"
                                      for k in missing if tasks.get(k) in stuck)
            if missing and any(tasks.get(k) not in stuck for k in missing):
                missing_stuck = ""
            # TMA issuers that brought bytes in earlier phases but not yet in this one
            tma = {k for k, ph in getattr(s, "tma_last", {}).items() if ph < s.completed}
            tma_stuck = ", ".join(sorted({(f"CTA {ln[0][0]} " if multi else "") + f"{ln[0][1]}[{ln[0][2]}] (issues "
                                          f"them at line {ln[1]})" for ln in tma if ln[0] != lane and tasks.get(ln[0]) in stuck}))
            creason = _cluster_reason(s, group)
            rank, reason = ((CONCRETE, creason) if creason else
                            _reason(s, arrivers, passed, phase, stuck_all, missing_stuck, tma_stuck, done_all,
                                    others))
            blocked.append(BlockedTask(lane, "mbarrier", info["line"], s.name, phase,
                                       s.completed, s.pending, s.tx, s.inflight_tma, list(s.arrivals), expected,
                                       info["since"], reason, multi, rank))
            waits.append((blocked[-1], s))
        elif info["kind"] == "named":
            nb = info["barrier"]
            got = nb.arrived
            reason = (f"{got} of {nb.expected} thread(s) arrived (num_threads={info['count']}); "
                      f"participants so far: " + ", ".join(f"{p[0][1]}[{p[0][2]}] line {p[1]} ({p[2]} thr)"
                                                            for p in nb.participants))
            blocked.append(BlockedTask(lane, "named", info["line"], f"named[{nb.id}]",
                                       since=info["since"], reason=reason, multi=multi))
            waits.append((blocked[-1], nb))
        elif info["kind"] == "remote":
            blocked.append(BlockedTask(lane, "remote", info["line"], None, since=info["since"], multi=multi,
                                       reason=f"waits for {info['what']} (a remote arrive, 2-CTA MMA or multicast "
                                              f"names a buffer or barrier the peer CTA never allocated)"))
        elif info["kind"] == "cluster":
            blocked.append(BlockedTask(lane, "cluster", info["line"], "cluster", since=info["since"], multi=multi,
                                       reason="waits in cluster_barrier for every CTA of the cluster; some task "
                                              "of the cluster is blocked elsewhere and never arrives",
                                       priority=INFERRED))
        elif info["kind"] == "cluster-ws":
            blocked.append(BlockedTask(lane, "cluster-ws", info["line"], "cluster", since=info["since"], multi=multi,
                                       reason=_ws_cluster_reason(info), priority=CONCRETE,
                                       hint=_ws_cluster_hint(info)))
        elif info["kind"] == "poll":
            blocked.append(BlockedTask(lane, "poll", info["line"], "global memory", since=info["since"], multi=multi,
                                       reason=_poll_reason(run, info), priority=CONCRETE))
        else:
            blocked.append(BlockedTask(lane, "join", None, since=info.get("since", 0), multi=multi))
    real = [b for b in blocked if b.kind != "join"] or blocked
    # the root cause first: a wait with concrete evidence (bytes announced that never land, arrivals short
    # of the count while the arrivers finished, a fresh barrier waited on with phase 0) before an inferred
    # one ("nothing ever arrived", while the would-be arriver is itself blocked), consequences last
    real.sort(key=lambda b: b.priority)
    first = real[0]
    where = f"CTA {first.lane[0]}" if not multi else f"the cluster of CTAs {pids}"
    who = f"{first.lane[1]}[{first.lane[2]}]" if not multi else f"CTA {first.lane[0]} {first.lane[1]}[{first.lane[2]}]"
    if first.kind == "mbarrier":
        msg = (f"deadlock in {where}: {len(real)} task(s) blocked; {who} waits on "
               f"{first.barrier} phase parity {first.phase} (missing {first.missing_arrivals} arrival(s), "
               f"{_bytes_text(first.missing_bytes)})")
        hint = first.reason or "check arrive counts, phases and expect_bytes of the barriers in the wait-for graph"
    elif first.kind == "cluster-ws":
        msg = (f"deadlock in {where}: tlx.cluster_barrier() at line {first.line} runs outside tlx.async_tasks() "
               f"in a warp-specialized kernel, where the other tasks' warps never arrive: the GPU hangs there")
        hint = first.hint
    else:
        msg = f"deadlock in {where}: {len(real)} task(s) blocked on {first.barrier or 'tasks'}"
        hint = ("check num_threads on every side of the named barrier" if first.kind == "named" else
                first.reason or "check the barriers of the blocked tasks")
    time = max((t.clock for t in group.sched.tasks), default=0.0)
    cause = None
    if first.priority != CONCRETE or first.kind == "mbarrier":
        try:
            cause = find_cause(run, group, waits)
        except Exception:  # noqa: BLE001 - the ranking is advice; the wait-for graph below stays right
            cause = None
    line = first.line
    if cause is not None and cause.line:
        msg = f"deadlock in {where}: {cause.text}"
        hint, line = cause.fix, cause.line
    graph = "\n".join("  - " + b.describe(run.file) for b in real)
    rep = DeadlockReport(first.lane[0], real if real is not blocked else blocked, msg + "\n" + graph, line, hint,
                         run.file, time, pids)
    rep.cause = cause
    for b in rep.blocked:
        if rep._at_cause(b) and "consequence" in b.reason:
            # the faulty wait is blocked too (its flipped phase let it pass once, now it waits a phase ahead): it
            # is the line to change, not a consequence of another task's wait
            b.reason = (f"this is the wait to change (line {cause.line}, above): its phase is flipped, so it "
                        f"returned before its data landed and now waits for a phase no task completes")
            b.priority = CONCRETE
    if cause is not None and cause.line:
        rep.message = rep.compose(fix_line=False)
    return rep


def _ws_cluster_reason(info) -> str:
    """Why a cluster barrier outside async_tasks hangs a warp-specialized kernel (a "cluster-ws" wait)."""
    tasks = f"the async_tasks at line {info['tasks_line']}" if info.get("tasks_line") else "async_tasks"
    if info.get("after"):
        return (f"a cluster barrier after {tasks}: only the default task's warps run the code outside "
                f"tlx.async_tasks(); the other tasks' warps, once their async_task bodies end, wait parked in "
                f"the compiler's dispatch loop until the kernel exits, so they never arrive at this barrier, "
                f"which waits for every thread of every CTA of the cluster — it never completes")
    return (f"a cluster barrier before {tasks}: only the default task's warps run the code outside "
            f"tlx.async_tasks(); the other tasks' warps wait parked until the default warps enter "
            f"async_tasks, so they never arrive at this barrier, which waits for every thread of every CTA "
            f"of the cluster — it never completes (the simulator stops where the CTA enters async_tasks)")


def _ws_cluster_hint(info) -> str:
    where = "last thing in every async_task" if info.get("after") else "first thing in every async_task"
    return (f"call tlx.cluster_barrier() {where}, inside each `with tlx.async_task(...)`, not outside "
            f"tlx.async_tasks() (a kernel without async_tasks may keep it at top level)")


def _poll_reason(run, info) -> str:
    what = "an atomic" if info.get("atomic") else "a volatile load"
    why = (f"spins on {what} that keeps reading the same value, and no task that is still running writes "
           f"global memory any more: the value it waits for never comes")
    resident, clusters = getattr(run, "resident", 1), getattr(run, "num_clusters", 1)
    if resident < clusters:
        why += (f" — the simulator runs {resident} CTA cluster(s) at a time, one batch after another, so a CTA "
                f"that waits for a flag raised by a later CTA waits forever: simulate with resident={clusters} "
                f"(every CTA at once), as on a GPU where the whole grid is resident")
    else:
        why += " — check which CTA should raise it, and that it does before it waits on anything itself"
    return why


def _tx_detail(s) -> tuple[str, str]:
    """(the barrier_expect_bytes line, the lines of the loads that signal ``s``) for a bytes reason."""
    exp = getattr(s, "expect_line", None)
    loads = sorted({ln for by in s.issued.values() for ln in by} | {k[1] for k in getattr(s, "tma_last", {})})
    return (f"barrier_expect_bytes (line {exp})" if exp else "no barrier_expect_bytes",
            f"line(s) {', '.join(map(str, loads))}" if loads else "no TMA load")


def _reason(s, arrivers, passed, phase, stuck_all=False, missing_stuck="", tma_stuck="",
            done_all=False, others=False) -> tuple[int, str]:
    """(rank, why) of a blocked mbarrier wait; rank CONCRETE when the barrier's own counts prove the mistake."""
    if not arrivers and passed == 0 and s.completed == 0 and (phase & 1) == 0:
        return CONCRETE, (
            f"waits for phase parity 0 of a barrier that has not completed any phase, and nothing "
            f"has arrived on {s.array.name}: a wait on a fresh barrier with phase 0 blocks until the "
            f"first phase completes — if this task waits for a free buffer (one a consumer "
            f"releases), it must start with phase 1 (p ^ 1); if it waits for data, the task that "
            f"fills it is stuck: check the phase passed to barrier_wait")
    if not arrivers:
        return INFERRED, (
            f"no task ever arrived on {s.array.name} or announced bytes on it in this run: a "
            f"barrier_arrive on it is missing (dropped?), so after {passed} passing wait(s) this "
            f"one can never complete")
    if s.pending == s.array.arrive_count and s.tx == 0 and not s.inflight_tma and stuck_all:
        return CONSEQUENCE, (
            "nothing has arrived in the current phase because every task that arrives here is "
            "itself blocked (a cycle in the wait-for graph): this wait is a consequence — fix "
            "the other blocked task's wait first")
    if s.pending == s.array.arrive_count and s.tx == 0 and not s.inflight_tma and done_all:
        return CONCRETE, (
            f"every task that arrives on {s.array.name} has finished, after {s.completed} completed phase(s): "
            f"this wait needs phase {s.completed + 1}, which no one will complete — check the phase passed "
            f"to barrier_wait (it returns once the parity differs from it) and how many times the "
            f"arrivers loop")
    if s.pending == s.array.arrive_count and s.tx == 0 and not s.inflight_tma:
        return PLAIN, (
            "nothing has arrived in the current phase; every expected arriver is blocked or done "
            "— check the phase passed to barrier_wait (it returns once the parity differs from it)")
    if s.pending > 0 and s.arrivals and missing_stuck:
        return CONSEQUENCE, (
            f"{len(s.arrivals)} of {s.array.arrive_count} arrival(s) came this phase; the others come from "
            f"{missing_stuck}, itself blocked: this wait is a consequence — fix that task's wait first")
    if s.pending == 0 and s.tx > 0 and tma_stuck:
        return CONSEQUENCE, (
            f"{s.tx} announced byte(s) have not landed: the TMA load(s) that bring them are issued by "
            f"{tma_stuck}, itself blocked: this wait is a consequence — fix that task's wait first")
    if s.pending > 0 and s.arrivals:
        # concrete when every task that could arrive has arrived or finished; a blocked task never seen
        # arriving here might be the missing one
        return PLAIN if others else CONCRETE, (
            f"{len(s.arrivals)} arrival(s) came this phase but the barrier counts "
            f"{s.array.arrive_count}: check arrive_count at line {s.array.line} against the "
            f"number of barrier_arrive calls per phase")
    if s.pending == 0 and s.tx > 0:
        exp, loads = _tx_detail(s)
        return CONCRETE, (
            f"all arrivals are in but {s.tx} announced byte(s) never landed: {exp} announced "
            f"{s.expected_tx} this phase, more than the TMA loads that signal {s.name} ({loads}) bring "
            f"— announce exactly the bytes of those loads")
    if s.tx < 0:
        exp, loads = _tx_detail(s)
        over = s.array.tx_phases
        need = (f"announce the bytes of every load that signals this barrier: {over[0][4]}" if over else
                "announce the bytes of every load that signals this barrier")
        return CONCRETE, (
            f"{-s.tx} byte(s) more landed on {s.name} than were announced ({exp} announced {s.expected_tx} "
            f"this phase; the TMA loads at {loads} bring more): the transaction count is below zero, so the "
            f"phase cannot complete — {need}")
    return PLAIN, ""


def _cluster_reason(s, group) -> str:
    """The 2-CTA / cluster rules, when the blocked barrier breaks one of them."""
    owner = s.array.cta
    if owner is None or len(owner.cluster) < 2:
        return ""
    arrivers = group.arrivers.get(s.array.id, {})
    ctas = sorted({k[0] for k in arrivers})
    if len(ctas) > s.array.arrive_count and any(c != owner.pid for c in ctas):
        lines = sorted({ln for ls in arrivers.values() for ln in ls if ln})
        return (f"{s.array.name} of CTA {owner.pid} has arrive_count {s.array.arrive_count} but {len(ctas)} CTAs "
                f"({', '.join(map(str, ctas))}) arrive on it (line(s) {', '.join(map(str, lines))}, some through "
                f"remote_cta_rank): each arrival completes a phase on its own, so the phases run ahead of the "
                f"waits — set arrive_count at line {s.array.line} to the number of CTAs that arrive "
                f"({len(ctas)}, e.g. NUM_CTAS)")
    if s.tx > 0 and s.pending == 0 and owner.rank % 2 == 1 and not s.inflight_tma:
        return (f"{s.tx} byte(s) expected on {s.name} of CTA {owner.pid} (cluster rank {owner.rank}), a 2-CTA "
                f"peer: two_ctas TMA loads signal the LEADER's barrier (rank {owner.rank & ~1}), so bytes "
                f"announced on the peer never land — only the leader calls barrier_expect_bytes, for the "
                f"bytes of both CTAs (its barrier has arrive_count 1)")
    if not arrivers:
        # arrivals meant for this barrier went to its counterpart in another CTA (remote_cta_rank)
        for c in owner.cluster:
            if c is owner or len(c.barrier_arrays) <= s.array.ordinal:
                continue
            other = c.barrier_arrays[s.array.ordinal]
            got = group.arrivers.get(other.id, {})
            if any(k[0] == owner.pid for k in got):
                lines = sorted({ln for k, ls in got.items() if k[0] == owner.pid for ln in ls if ln})
                return (f"nothing arrives on {s.array.name} of CTA {owner.pid}: this CTA's arrivals (line(s) "
                        f"{', '.join(map(str, lines))}) go to the copy in CTA {c.pid} (cluster rank {c.rank}) "
                        f"through remote_cta_rank — a remote arrive counts where it lands; wait on that barrier "
                        f"only in the CTA that receives the arrivals (barrier_wait(..., pred=is_leader))")
    return ""


# ---- ranking causes, not symptoms ---------------------------------------------------------------------------
# A deadlock's blocked waits and a race's two accesses are symptoms. The line to change is found from the
# ledgers the trace keeps (per slot and phase: who arrived, at which line, how many bytes were announced and
# landed; per lane: how often each barrier call ran) and said first, in the kernel's terms; the symptoms
# follow as consequences.

@dataclasses.dataclass
class Cause:
    """The line whose change removes the deadlock or race, what is wrong there, and the fix."""
    line: int | None
    text: str                  # "line 296: task1[0] arrives on bars_empty_a[0] once per phase, but ..."
    fix: str                   # what to do, in the kernel's terms
    rule: str = ""             # which evidence named it (count, bytes, phase, skipped-arrive, ...)
    other_line: int | None = None
    data: dict = dataclasses.field(default_factory=dict)   # what a repair needs (sim/diagnosis/repair.py): the barrier, lines


class _SlotLedger:
    __slots__ = ("count", "line", "phases", "cur", "ever", "expect_lines", "tx_lines", "waits", "flips")

    def __init__(self):
        self.count = None
        self.line = None
        self.phases: list[list] = []        # per completed phase: [(lane, line, count, kind)]
        self.cur: list = []                 # the current phase's arrivals
        self.ever: dict = {}                # lane -> {line: arrive calls}
        self.expect_lines: dict = {}        # line -> bytes announced (all phases)
        self.tx_lines: dict = {}            # TMA load line -> bytes landed (all phases)
        self.waits: list = []               # (lane, line, phases completed when it returned, parity)
        self.flips = 0


class Ledger:
    """Per barrier slot and phase, who arrived where; per lane, how often each barrier call ran.

    Built from the Trace's barrier events (their order is the order things happened)."""

    def __init__(self, trace, ctas=None):
        self.slots: dict[tuple, _SlotLedger] = {}
        self.sites: dict[tuple, dict] = {}      # lane -> {line: calls begun (arrive, expect, wait)}
        self.named: dict[tuple, list] = {}      # (cta, id) -> [(lane, line, kind)]
        for e in trace.barrier_events:
            if ctas is not None and e.cta not in ctas:
                continue
            sl = self.slots.get((e.cta, e.barrier, e.slot))
            if sl is None:
                sl = self.slots[(e.cta, e.barrier, e.slot)] = _SlotLedger()
            lane = e.lane
            k = e.kind
            if k == "init":
                sl.count, sl.line = e.count, e.line
            elif k in ("arrive", "expect"):
                sl.cur.append((lane, e.line, e.count if k == "arrive" else 1, k))
                per = sl.ever.setdefault(lane, {})
                per[e.line] = per.get(e.line, 0) + 1
                if k == "expect":
                    sl.expect_lines[e.line] = sl.expect_lines.get(e.line, 0) + e.bytes
                self._site(lane, e.line)
            elif k == "tx":
                sl.tx_lines[e.line] = sl.tx_lines.get(e.line, 0) + e.bytes
            elif k == "flip":
                sl.phases.append(sl.cur)
                sl.cur = []
                sl.flips += 1
            elif k == "wait_begin":
                self._site(lane, e.line)
            elif k == "wait_end":
                sl.waits.append((lane, e.line, sl.flips, e.phase))

    def _site(self, lane, line):
        per = self.sites.setdefault(lane, {})
        per[line] = per.get(line, 0) + 1

    def slot(self, s) -> _SlotLedger:
        cta = s.array.cta.pid if s.array.cta is not None else 0
        return self.slots.get((cta, s.array.name, s.index)) or _SlotLedger()

    def array_slots(self, cta, name) -> list[tuple[int, _SlotLedger]]:
        return sorted((k[2], v) for k, v in self.slots.items() if k[0] == cta and k[1] == name)


def _lane(lane, multi=False) -> str:
    return (f"CTA {lane[0]} " if multi else "") + f"{lane[1]}[{lane[2]}]"


def _lines(ls) -> str:
    ls = sorted({n for n in ls if n})
    return ("line " if len(ls) == 1 else "lines ") + ", ".join(map(str, ls))


def _src(file, line) -> str:
    return linecache.getline(file, line).strip() if file and line else ""


def _is_warp_alloc(file, line) -> bool:
    return "alloc_warp_barrier" in _src(file, line)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def find_cause(run, group, waits) -> Cause | None:
    """The line to change for a deadlock: ``waits`` are (BlockedTask, slot or named barrier) of the blocked
    mbarrier and named-barrier waits. None when no ledger evidence names one (the wait-for graph then leads)."""
    file = run.file
    pids = {c.pid for c in group.ctas}
    led = Ledger(run.trace, pids)
    multi = len(pids) > 1
    mb = [(b, s) for b, s in waits if b.kind == "mbarrier"]
    for rule in (_early_pass, _misdirected_load, _bytes_over, _bytes_short, _fresh_phase0,
                 _count_too_low, _count_too_high, _skipped_arrive, _named_cause, _release_cause):
        c = rule(run, group, led, mb if rule is not _named_cause else waits, file, multi)
        if c is not None:
            return c
    return None


def _tma_slot(sl: _SlotLedger) -> bool:
    return bool(sl.expect_lines or sl.tx_lines)


def early_pass_cause(led: Ledger, file, multi=False, only_lane=None, only_slot=None) -> Cause | None:
    """A wait on a data (TMA) barrier that returned before the phase it stands for completed: the k-th wait
    of a lane on a slot must return after k+1 completed phases; one that returns sooner has the wrong phase
    (``p ^ 1`` where ``p`` belongs, or a constant that never flips)."""
    for (cta, bar, idx), sl in led.slots.items():
        if not _tma_slot(sl) or (only_slot is not None and (cta, bar, idx) != only_slot):
            continue
        nth: dict = {}
        for lane, line, flips, parity in sl.waits:
            k = nth.get(lane, 0)
            nth[lane] = k + 1
            if only_lane is not None and lane != only_lane:
                continue
            if flips <= k:
                need = "0" if k == 0 else "the parity of the phases completed so far"
                return Cause(line, (
                    f"line {line}: {_lane(lane, multi)}'s wait number {k + 1} on {bar}[{idx}] (phase parity "
                    f"{parity}) returned when {flips} phase(s) had completed, before the TMA bytes it waits "
                    f"for had landed: the phase it waits on is flipped"),
                    f"wait on {bar}[{idx}] for the phase that the loads fill: parity {need} on the first round, "
                    f"flipping once per round (e.g. phase=p, not p ^ 1), at line {line}", "phase")
    return None


def _early_pass(run, group, led, mb, file, multi):
    return early_pass_cause(led, file, multi)


def _misdirected_load(run, group, led, mb, file, multi):
    """Bytes announced on a barrier no load signals, while another barrier gets more bytes than announced
    from a load that brings just the missing amount: the load names the wrong barrier."""
    for b, s in mb:
        if not (s.pending == 0 and s.tx > 0 and not s.inflight_tma):
            continue
        sl = led.slot(s)
        if sl.tx_lines:
            continue
        for other in _all_slots(group):
            if other is s or other.tx >= 0:
                continue
            if getattr(other.array, "cta", None) is not getattr(s.array, "cta", None):
                # a load whose bytes land on another CTA's barrier does so by design (two_ctas, multicast):
                # the barrier it names is not the mistake
                continue
            osl = led.slot(other)
            uses = max(1, len(osl.phases) + 1)
            fits = [line for line, by in osl.tx_lines.items()
                    if by % s.expected_tx == 0 or by // uses == s.expected_tx or
                    by == s.expected_tx * max(1, s.completed + 1)]
            for line in _after_expect(run.trace, s, fits)[:1]:
                exp = getattr(s, "expect_line", None)
                return Cause(line, (
                    f"line {line}: this TMA load signals {other.name}, but its bytes are the ones "
                    f"{s.name} waits for: line {exp} announces {s.expected_tx} bytes on {s.name} and no load "
                    f"ever signals it, while {-other.tx} bytes more landed on {other.name} than "
                    f"{_lines(osl.expect_lines)} expects"),
                    f"pass {s.array.name}[...] (the barrier whose bytes line {exp} announces) as this load's "
                    f"barrier at line {line}", "bytes", exp)
    return None


def _after_expect(trace, s, lines) -> list:
    """``lines`` (TMA loads that signal another barrier) with first the one each announcement on ``s`` was for:
    the load its lane issues next, after its ``barrier_expect_bytes`` on ``s`` (program order says which load an
    announcement belongs to, where several loads bring the same bytes)."""
    if len(lines) < 2:
        return list(lines)
    cta = s.array.cta.pid if s.array.cta is not None else 0
    loads: dict = {}
    for sp in trace.spans:
        if sp.cta == cta and sp.line in lines and "load" in (sp.name or ""):
            loads.setdefault((sp.cta, sp.task, sp.replica), []).append((sp.start, sp.line))
    votes: dict = {}
    for e in trace.barrier_events:
        if e.kind == "expect" and e.cta == cta and e.barrier == s.array.name:
            nxt = min((t, ln) for t, ln in loads.get(e.lane, []) if t >= e.time) if any(
                t >= e.time for t, _ in loads.get(e.lane, [])) else None
            if nxt is not None:
                votes[nxt[1]] = votes.get(nxt[1], 0) + 1
    return sorted(lines, key=lambda ln: -votes.get(ln, 0))


def _all_slots(group):
    for c in group.ctas:
        for arr in c.barrier_arrays:
            yield from arr.slots


def _brought(s, sl) -> int | None:
    over = s.array.tx_phases
    if over:
        return over[0][4]
    per = [sum(v.values()) for ph, v in sorted(s.issued.items()) if ph < s.completed]
    return per[-1] if per else None


def _bytes_over(run, group, led, mb, file, multi):
    for b, s in mb:
        if s.tx >= 0:
            continue
        sl = led.slot(s)
        exp = getattr(s, "expect_line", None) or next(iter(sl.expect_lines), None)
        brought = _brought(s, sl)
        loads = _lines(sl.tx_lines) if sl.tx_lines else "its TMA loads"
        per = f"; the loads at {loads} bring {brought} per phase" if brought else f"; the loads at {loads} bring more"
        fix = (f"announce {brought} bytes at line {exp} (every load that signals {s.array.name}[...] counts)"
               if brought else f"announce at line {exp} the bytes of every load that signals {s.array.name}[...]")
        return Cause(exp or b.line, (
            f"line {exp}: {-s.tx} bytes more landed on {s.name} than line {exp} expects (it announces "
            f"{s.expected_tx or (sl.expect_lines.get(exp, 0) // max(1, len(sl.phases) + 1))} bytes per phase{per}): "
            f"the surplus counts against the next phase, which then never completes"), fix, "bytes")
    return None


def _bytes_short(run, group, led, mb, file, multi):
    stuck = stuck_tasks(group.sched)
    stuck_lanes = {(t.pid, t.name, t.replica) for t in stuck}
    for b, s in mb:
        if not (s.pending == 0 and s.tx > 0 and not s.inflight_tma):
            continue
        issuers = {k[0] for k in getattr(s, "tma_last", {})}
        if any(i in stuck_lanes and i != b.lane for i in issuers) and s.landed_tx == 0:
            continue     # the loader is stuck before its loads: a consequence
        sl = led.slot(s)
        exp = getattr(s, "expect_line", None)
        landed = s.landed_tx
        loads = _lines({k[1] for k in getattr(s, "tma_last", {})}) if getattr(s, "tma_last", None) else "no load"
        return Cause(exp or b.line, (
            f"line {exp}: announces {s.expected_tx} bytes on {s.name} per phase, but the TMA loads that signal it "
            f"({loads}) bring {landed}: {s.tx} announced bytes never land, so {_lane(b.lane, multi)}'s wait at "
            f"line {b.line} never returns"),
            f"announce {landed} bytes at line {exp} (the bytes of the loads that signal {s.array.name}[...])",
            "bytes", b.line)
    return None


def _fresh_phase0(run, group, led, mb, file, multi):
    for b, s in mb:
        sl = led.slot(s)
        if s.completed == 0 and (b.phase & 1) == 0 and not s.arrivals and not sl.ever and \
                not _tma_slot(sl) and group.passed.get((s.array.id, *b.lane), 0) == 0:
            return Cause(b.line, (
                f"line {b.line}: {_lane(b.lane, multi)} waits on {s.name} for phase parity 0 before any phase "
                f"completed; nothing has arrived on it yet, and the tasks that release it wait for this task "
                f"first"),
                f"start the wait on a free buffer with phase 1 (e.g. p ^ 1) at line {b.line}: a fresh barrier "
                f"is in phase 0, and waiting for parity 1 returns at once", "phase")
    return None


def _alloc_text(s, file) -> str:
    return f"the barrier counts {s.array.arrive_count} (line {s.array.line})"


def _count_too_low(run, group, led, mb, file, multi):
    """Each phase completes with the arrivals of fewer lanes than arrive on the slot per round: the count is
    below what arrives (or one site arrives too much per call)."""
    for b, s in mb:
        sl = led.slot(s)
        if not sl.phases or _tma_slot(sl):
            continue
        lanes = set(sl.ever)
        per_phase = [{a[0] for a in ph} for ph in sl.phases]
        if len(lanes) < 2 or not per_phase or max(len(p) for p in per_phase) >= len(lanes):
            continue
        calls = [a for ph in sl.phases for a in ph]
        big = sorted({(a[1], a[2]) for a in calls if a[2] > 1 and a[2] >= s.array.arrive_count})
        site = sorted({a[1] for a in calls})
        names = ", ".join(_lane(l, multi) for l in sorted(lanes))
        if big and not _is_warp_alloc(file, s.array.line):
            line, n = big[0]
            return Cause(line, (
                f"line {line}: each call arrives {n} times on {s.array.name}, which counts {s.array.arrive_count} "
                f"(line {s.array.line}): one call of {names} completes a whole phase, so the others' arrivals count "
                f"in the next one and the phases run ahead of the waits"),
                f"arrive once per call at line {line} (barrier_arrive(bar) counts 1), or count "
                f"{n * len(lanes)} at line {s.array.line}", "count", s.array.line)
        line = site[0]
        need = sum(max(1, round(sum(sl.ever[l].values()) / max(1, len(sl.phases) / len(lanes)))) for l in lanes)
        need = len(lanes) if need <= s.array.arrive_count else need
        what = "per-thread arrivals" if _is_warp_alloc(file, s.array.line) else "arrivals"
        # the count is what to change (the arrivals are the design): the alloc line leads, the arrive follows
        return Cause(s.array.line, (
            f"line {s.array.line}: {s.array.name} counts {s.array.arrive_count} "
            f"{what if s.array.arrive_count != 1 else what[:-1]} per phase, but {names} each "
            f"arrive on it once per phase ({_lines(site)}): each phase completes with the arrivals of "
            f"{max(len(p) for p in per_phase)} of them, so the phases run ahead of the waits and a producer "
            f"overwrites a buffer still in use"),
            _count_fix(s, file, len(lanes), line), "count", line)
    return None


def _count_fix(s, file, lanes_n, line) -> str:
    if _is_warp_alloc(file, s.array.line):
        return (f"count every arriving thread at line {s.array.line} (num_warps x 32 x num_arrivals, with "
                f"num_arrivals={lanes_n} for {lanes_n} arriving task(s))")
    return f"set arrive_count={lanes_n} at line {s.array.line} (one per arriving task), or arrive from fewer tasks"


def _count_too_high(run, group, led, mb, file, multi):
    """Arrivals came this phase, and every lane that could still arrive waits (transitively) on this very wait:
    the count asks for arrivals that can only come after it returns."""
    stuck = stuck_tasks(group.sched)
    by_lane = {(t.pid, t.name, t.replica): t for t in group.sched.tasks}
    deps = _depends(mb, stuck)
    for b, s in mb:
        if not s.arrivals or s.pending <= 0:
            continue
        came = {a[0] for a in s.arrivals}
        arrivers = group.arrivers.get(s.array.id, {})
        others = [l for l in by_lane if l not in came and l != b.lane and by_lane[l] in stuck and l in arrivers]
        if any(b.lane not in deps.get(l, set()) for l in others):
            continue
        sl = led.slot(s)
        calls = [a for a in s.arrivals]
        n = sum(a[2] for a in calls)
        expect = [a for a in calls if a[1] in sl.expect_lines]
        warp = _is_warp_alloc(file, s.array.line)
        if expect or warp:
            why = ("a warp barrier counts one arrival per thread, and barrier_expect_bytes (a TMA barrier) "
                   "arrives once" if warp and expect else
                   f"{n} per-thread arrival(s) came" if warp else
                   f"each barrier_expect_bytes is one arrival ({_lines(a[1] for a in expect)})")
            fix = ("make it an ordinary barrier: tlx.alloc_barriers(..., arrive_count=1)" if warp and expect else
                   f"set arrive_count={n} at line {s.array.line}")
            return Cause(s.array.line, (
                f"line {s.array.line}: {s.array.name} counts {s.array.arrive_count} arrivals per phase, but only "
                f"{n} come per phase ({why}), so {_lane(b.lane, multi)}'s wait at line {b.line} never returns"),
                f"{fix} at line {s.array.line}" if not fix.endswith(str(s.array.line)) else fix, "count", b.line)
        line = calls[0][1]
        who = ", ".join(sorted({_lane(a[0], multi) for a in calls}))
        per = {a[0]: 0 for a in calls}
        for a in calls:
            per[a[0]] += a[2]
        times = _times(max(per.values())) if len(set(per.values())) == 1 else "per phase"
        reps = sorted({a[0] for a in calls})
        sib = [l for l in by_lane if l[1] == reps[0][1] and l not in came]
        either = (f"either arrive from {'every replica of ' + reps[0][1] if sib else 'more tasks'} or set "
                  f"arrive_count={n}" if not warp else f"count {n} per-thread arrivals")
        return Cause(line, (
            f"line {line}: {who} arrives on {s.array.name} {times} per phase but {_alloc_text(s, file)}: "
            f"{n} of {s.array.arrive_count} arrivals come, and nobody else arrives before {_lane(b.lane, multi)}'s "
            f"wait at line {b.line} returns"),
            f"{either} (line {s.array.line})", "count", s.array.line)
    return None


def _depends(mb, stuck) -> dict:
    """lane -> the stuck lanes it waits for, transitively (through the expected arrivers of its wait)."""
    direct = {}
    for b, s in mb:
        direct[b.lane] = {(e[4], e[0], e[1]) for e in b.expected}
    out = {}
    for lane in direct:
        seen, todo = set(), [lane]
        while todo:
            x = todo.pop()
            for y in direct.get(x, ()):
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        out[lane] = seen
    return out


def _skipped_arrive(run, group, led, mb, file, multi):
    """An arrive site that ran fewer times than the other barrier calls of its loop, in the same lane: it did
    not run in some rounds (under a condition, or on a path that skips it)."""
    for b, s in mb:
        arr = group.arrivers.get(s.array.id, {})
        for lane, lines in sorted(arr.items()):
            runs = led.sites.get(lane, {})
            for line in sorted(l for l in lines if l):
                loop = loop_of(file, line)
                if loop is None:
                    continue
                sibs = [n for l, n in runs.items() if l != line and l and loop_of(file, l) is loop]
                if not sibs:
                    continue
                mine, most = runs.get(line, 0), max(sibs)
                if most - mine >= 2:
                    return Cause(line, (
                        f"line {line}: {_lane(lane, multi)} ran this barrier_arrive on {s.array.name} {_times(mine)}, "
                        f"but the other barrier calls of its loop {most} times: it did not run in "
                        f"{most - mine} round(s), so {_lane(b.lane, multi)}'s wait on {s.name} at line {b.line} "
                        f"misses its arrival"),
                        f"arrive on {s.array.name}[...] in every round at line {line} (take it out of the "
                        f"condition that skips it)", "skipped-arrive", b.line)
    return None


def _named_cause(run, group, led, waits, file, multi):
    for b, nb in waits:
        if b.kind != "named":
            continue
        counts = {p[4] for p in nb.participants}
        for f in run.findings:
            if f.kind == "named-barrier-count":
                return Cause(f.line, f"line {f.line}: {f.message}",
                             f"pass the same num_threads on every side of the named barrier at line {f.line}",
                             "named")
        # a side that counted fewer threads completed a generation alone, earlier: it disagrees with this wait
        want = getattr(b, "count", None) or next(iter(counts), None)
        other = sorted((ln, n) for ln, n in getattr(nb, "counts", {}).items() if n != want)
        if want is not None and other:
            ln, n = other[0]
            return Cause(ln, (f"line {ln}: named barrier {nb.id} is synced there with num_threads {n}, but the "
                              f"wait at line {b.line} counts {want}: the side with fewer threads completed on its "
                              f"own and the other waits for threads that already left"),
                         f"pass the same num_threads on every side of named barrier {nb.id} at line {ln}",
                         "named", b.line)
        if len(counts) > 1:
            return None
    # a task that arrives at a named barrier it also waits on: the arrive names the wrong id (each side of a
    # hand-off waits on one id and arrives at the other's)
    pids = {c.pid for c in group.ctas}
    sites: dict = {}
    for sp in run.trace.spans:
        if sp.cta in pids and sp.name in ("named_barrier_arrive", "named_barrier_wait"):
            sites.setdefault((sp.cta, sp.task, sp.replica), set()).add((sp.name, sp.barrier, sp.line))
    for (b, nb) in waits:
        if b.kind != "named":
            continue
        for lane, ss in sorted(sites.items()):
            waited: dict = {}           # the first line waiting on each id (a set's order is the hash seed's)
            for nm, bar, ln in sorted(ss, key=lambda x: x[2] or 0):
                if nm == "named_barrier_wait":
                    waited.setdefault(bar, ln)
            for nm, bar, ln in sorted(ss, key=lambda x: x[2] or 0):
                if nm == "named_barrier_arrive" and bar in waited and bar != b.barrier:
                    return Cause(ln, (
                        f"line {ln}: {_lane(lane, multi)} arrives at {bar}, which it also waits on (line "
                        f"{waited[bar]}), while {_lane(b.lane, multi)} waits at {b.barrier} (line {b.line}) for an "
                        f"arrival that never comes: the arrive names the wrong barrier id"),
                        f"arrive at the id the other side waits on ({b.barrier}) at line {ln}", "named", b.line)
    return None


def _names(lanes, multi=False) -> str:
    return ", ".join(_lane(l, multi) for l in sorted(lanes))


def _bufs(reads) -> str:
    return ", ".join(sorted({b for r in reads for b in r.buffers}))


def _read_text(r) -> str:
    retired = (f", retired by the async_dot_wait at line {r.retired_line}" if r.retired_line and
               r.retired_line != r.line else "")
    return f"line {r.line}{retired}"


def _release_cause(run, group, led, mb, file, multi):
    """A release barrier that a reader owes: the lanes that read the buffers it guards (a wgmma, a local_load)
    never arrived on it for that read. Either one of their releases names another slot, or came while its own
    read was in flight (the release to re-aim), or there is none (the release to add, after the read retires)."""
    rel = None
    for b, s in mb:
        cta = s.array.cta.pid if s.array.cta is not None else 0
        key = (cta, s.array.name, s.index)
        rel = rel or Releases(run.trace, {c.pid for c in group.ctas})
        guarded = rel.guards.get(key)
        debtors = rel.debtors(key)
        if not guarded or not debtors:
            continue
        refill = sorted({ln for lines in guarded.values() for ln in lines if ln})
        wait = f"{_lane(b.lane, multi)}'s wait on {s.name} at line {b.line}"
        for lane, reads in debtors.items():
            bad = rel.bad_releases(lane, cta, s.array.name, reads[0].seq)
            if not bad:
                continue
            r = bad[0]
            what = (f"while its read of {_bufs(r.inflight)} ({_read_text(r.inflight[0])}) is still in flight"
                    if r.verdict == "early" else
                    f"whose buffers it has not read since it last released that slot")
            at = slot_line(file, r.line)       # where the slot index is written (the arrive, or its view)
            where = "" if at == r.line else f" (line {r.line}, its slot written at line {at})"
            return Cause(at, (
                f"line {at}: {_lane(lane, multi)} releases {s.array.name}[{r.key[2]}]{where} {what}, and never "
                f"releases {s.name}, which guards {_bufs(reads)} that it read ({_read_text(reads[-1])}): the "
                f"release names the wrong slot, so {wait} (before the refill at {_lines(refill)}) never returns"),
                f"release {s.name} (fix the slot index at line {at}): the slot whose read is retired "
                f"({_read_text(reads[-1])}), not one still in use", "release", b.line)
        # a debt whose read is still in flight may be paid later by design (a release one step behind, after
        # the next wgmma retires this one): only a retired read proves the release missing
        debtors = {l: rs for l, rs in debtors.items() if rs[-1].retired_seq is not None}
        if not debtors:
            continue
        lane, reads = next(iter(debtors.items()))
        line, after = rel.insertion_line(reads[-1], file)
        if line is None:
            continue
        others = [ln for ln in rel.release_lines(lane, s.array.name)]
        they = "it releases" if len(debtors) == 1 else "they release"
        elsewhere = (f" ({they} {s.array.name} at {_lines(others)}, but not for this read)" if others else "")
        last = [rs[-1] for rs in debtors.values()]
        them = "them" if len(_bufs(last).split(", ")) > 1 else "it"
        return Cause(line, (
            f"line {line}: a release is missing here: {_names(debtors, multi)} read {_bufs(last)} "
            f"({_read_text(reads[-1])}) but never release{'s' if len(debtors) == 1 else ''} {s.name}, which "
            f"guards {them}{elsewhere}: {wait}, "
            f"before the refill at {_lines(refill)}, never returns"),
            f"add the release after line {after}: tlx.barrier_arrive on {s.name} (the slot {_lane(b.lane, multi)} "
            f"waits on at line {b.line}) once the read is retired", "missing-release", b.line,
            {"array": s.array.name, "after": after})
    return None
