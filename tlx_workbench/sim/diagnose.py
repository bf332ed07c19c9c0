"""Deadlock diagnosis: the wait-for graph of CTAs (one, or a cluster's) whose live tasks are all blocked.

Lanes are (cta, task, replica); an expected arriver may live in another CTA of the cluster
(a remote ``barrier_arrive``, a leader's 2-CTA MMA commit, a 2-CTA TMA load signalling the
leader), and the reasons name those cross-CTA rules when they are what went wrong."""
from __future__ import annotations

import dataclasses
import html
import linecache


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
                 f"      missing: {self.missing_arrivals} arrival(s), {self.missing_bytes} transaction byte(s)"
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

    def text(self) -> str:
        where = f"CTA {self.cta}" if len(self.ctas) <= 1 else f"the cluster of CTAs {self.ctas}"
        parts = [f"deadlock in {where}: every live task is blocked"]
        for b in self.blocked:
            parts.append("  - " + b.describe(self.file))
        return "\n".join(parts)

    def __str__(self):
        return self.text()

    def _repr_html_(self):
        return ("<div class='tlxwb-deadlock' style='border-left:4px solid #c0392b;padding:4px 8px'>"
                f"<b>Deadlock</b> in CTA {self.cta if len(self.ctas) <= 1 else self.ctas}<pre>{html.escape(self.text())}</pre>"
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
        elif info["kind"] == "named":
            nb = info["barrier"]
            got = nb.arrived
            reason = (f"{got} of {nb.expected} thread(s) arrived (num_threads={info['count']}); "
                      f"participants so far: " + ", ".join(f"{p[0][1]}[{p[0][2]}] line {p[1]} ({p[2]} thr)"
                                                            for p in nb.participants))
            blocked.append(BlockedTask(lane, "named", info["line"], f"named[{nb.id}]",
                                       since=info["since"], reason=reason, multi=multi))
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
               f"{first.missing_bytes} byte(s))")
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
    rep = DeadlockReport(first.lane[0], real if real is not blocked else blocked, msg + "\n" + "\n".join(
        "  - " + b.describe(run.file) for b in real), first.line, hint, run.file, time, pids)
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
