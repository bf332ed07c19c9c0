"""The deterministic task scheduler of the CTAs simulated together (one CTA, or the CTAs of a cluster).

Kernel code is plain Python, so each task (an ``async_task`` body times its
``replicate``) runs in its own Python thread; a baton lets exactly one of them run
at a time. At every TLX op the running task calls :meth:`CTAScheduler.step`; the
scheduler then picks who runs next with a seeded RNG among the runnable tasks and
the pending asynchronous completions (TMA bytes landing): ``order="seeded"``, one of the
interleavings the hardware may run, which ``schedules=N`` explores. ``order="time"`` runs the
task whose simulated time is earliest instead (completions first), so shared resources
(the TMA queue, the ALUs, the L1) are claimed in the order the GPU claims them and the
timeline is the same for every seed. A task that must wait
(barrier, named barrier) registers a predicate and is skipped until it holds.
When no task can run and nothing asynchronous is pending, that is a deadlock: the
scheduler stops every task and hands the blocked set to the diagnosis — it never hangs.

The CTAs of one cluster (and, for CLC kernels, several resident clusters) share one
scheduler, so "arrive remote, wait local" interleaves as on the hardware; whenever a
task takes the baton, ``on_resume(task)`` points the op layer at that task's CTA.
"""
from __future__ import annotations

import _thread
import os
import random
import sys
import threading

try:        # coroutines for the tasks when available: a hand-over costs ~1 us instead of ~35 us of OS wake-ups
    import greenlet as _greenlet
except ImportError:     # pragma: no cover - threads do the same, slower
    _greenlet = None


#: the scheduler's orders (CTAScheduler's ``order``): a seeded interleaving, or simulated time
ORDERS = ("seeded", "time")


class Abort(BaseException):
    """Unwinds a task thread when the CTA is stopped (deadlock, error elsewhere)."""


class StepLimit(Exception):
    pass


class Task:
    """One lane: (task name, replica) of one CTA, with its own clock and its own thread."""

    def __init__(self, sched: "CTAScheduler", name: str, replica: int, num_warps: int, fn, line: int | None,
                 cta=None):
        self.sched = sched
        self.cta = cta                  # the CTA object this task runs in
        self.pid = getattr(cta, "pid", sched.cta)
        self.name = name
        self.replica = replica
        self.num_warps = num_warps
        self.fn = fn
        self.def_line = line
        self.baton = _thread.allocate_lock()
        self.baton.acquire()
        self.state = "ready"            # ready | blocked | done
        self.wait_pred = None
        self.wait_info = None           # what the deadlock report says about this wait
        self.clock = 0.0
        self.line = line
        self.vc: dict = {("task", self.pid, name, replica): 0}
        self.stats = {"ops": 0, "busy": 0.0, "waiting": 0.0, "mma": 0.0, "scalar_ops": 0, "spill": 0.0}
        self.wgmma = []                 # in-flight wgmma: [(end_time, agent epoch)]
        self.wgmma_epoch = 0
        self.tma_store_groups = []      # outstanding TMA stores: [(end_time, reads)]
        self.dot_lines: list = []       # the async_dot lines it has run, latest last (a spilling loop's iteration)
        self.cp_async_uncommitted = []
        self.cp_async_groups = []
        self.children: list[Task] = []
        self.parent: Task | None = None
        self.call_stack: list = []      # the TLX builtins this task is inside (tlx_ops._call_stack)
        self.glet = None                # its greenlet, when tasks run as greenlets
        self.last_poll = None           # ((line, addresses + operands), global writes seen) of its last poll
        self.thread0 = 0                # its first thread's CTA-wide index (tlx.thread_id(0) of its thread 0)
        self.lanes: list = []           # thread masks of the per-thread `if`s it is inside (sim/ops/threads.py)

    @property
    def lane(self):
        return (self.pid, self.name, self.replica)

    @property
    def key(self):
        return ("task", self.pid, self.name, self.replica)

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def tick(self) -> None:
        """Advance this task's own component of its vector clock (after a release)."""
        self.vc[self.key] = self.vc.get(self.key, 0) + 1

    def __repr__(self):
        return f"{self.name}[{self.replica}]"


class AsyncOp:
    """Something the hardware completes on its own (a TMA load landing)."""

    def __init__(self, complete, desc: str, ready=lambda: True):
        self.complete = complete
        self.desc = desc
        self.ready = ready


class CTAScheduler:
    def __init__(self, cta, seed: int, max_steps: int, on_resume=None, order: str = "seeded"):
        self.cta = cta                  # a label: the CTA id, or the first CTA of the group
        self.on_resume = on_resume or (lambda task: None)
        self.rng = random.Random(seed)
        self.in_time_order = order == "time"
        self.max_steps = max_steps
        self.steps = 0
        self.tasks: list[Task] = []
        self.pending: list[AsyncOp] = []
        self.current: Task | None = None
        self.aborting = False
        self.error: BaseException | None = None
        self.error_tb = None
        self.deadlock: list[Task] | None = None
        self._finished = _thread.allocate_lock()
        self._finished.acquire()
        # Tasks run as greenlets of this thread when the greenlet package is there (TLXWB_SIM_THREADS=1 forces
        # threads); either way exactly one runs at a time and every choice of who runs next is made by
        # _pick with the seeded RNG, so both give the same schedule, trace and results.
        self.green = _greenlet is not None and os.environ.get("TLXWB_SIM_THREADS") != "1"
        self.hub = None

    # -- running ----------------------------------------------------------------------
    def run(self, name: str, fn, num_warps: int, line=None, ctas=(None,)) -> None:
        """Run ``fn`` (the kernel body) as task ``name`` in each of ``ctas``, and everything they spawn."""
        roots = [self.new_task(name, 0, num_warps, fn, line, cta) for cta in ctas]
        if self.green:
            self.hub = _greenlet.getcurrent()
        for r in roots:
            self._start(r)
        first = roots[0] if len(roots) == 1 else roots[self.rng.randrange(len(roots))]
        self.current = first
        if self.green:
            nxt = first
            while nxt is not None:        # a task that finishes returns here with the next one to run
                nxt = nxt.glet.switch()
            return
        first.baton.release()
        self._finished.acquire()      # released when every task is done (or stopped)

    def new_task(self, name, replica, num_warps, fn, line, cta=None) -> Task:
        t = Task(self, name, replica, num_warps, fn, line, cta)
        self.tasks.append(t)
        return t

    def _start(self, t: Task) -> None:
        if self.green:
            t.glet = _greenlet.greenlet(lambda: self._green_main(t), parent=self.hub)
            return
        th = threading.Thread(target=self._thread_main, args=(t,), daemon=True,
                              name=f"tlxsim-cta{t.pid}-{t.name}{t.replica}")
        th.start()

    def spawn(self, parent: Task, children: list[Task]) -> None:
        """Start child tasks (they wait for the baton); the parent keeps running."""
        for c in children:
            c.parent = parent
            c.cta, c.pid = parent.cta, parent.pid
            c.vc = dict(parent.vc)
            c.vc[c.key] = 0
            c.clock = parent.clock
            parent.children.append(c)
            self._start(c)

    def _thread_main(self, t: Task) -> None:
        t.baton.acquire()
        self._body(t)
        self._pass_baton(t)

    def _green_main(self, t: Task):
        self._body(t)
        nxt = self._pick()
        self.current = nxt
        return nxt

    def _body(self, t: Task) -> None:
        try:
            if self.aborting:
                raise Abort()
            self.on_resume(t)
            t.fn(t)
        except Abort:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the launcher with its traceback
            if self.error is None:
                self.error = e
                self.error_tb = sys.exc_info()[2]
                self.error_task = t
            self.aborting = True
        t.state = "done"

    def _runnable(self, t: Task) -> bool:
        if t.state == "ready":
            return True
        if t.state == "blocked" and t.wait_pred():
            return True
        return False

    @staticmethod
    def _resume_time(t: Task) -> float:
        """The simulated time ``t`` goes on from: its clock, or for a wait that now holds the time its barrier
        released it (what the wait's op then sets its clock to, less the wake-up)."""
        info = t.wait_info if t.state == "blocked" else None
        if info and info.get("kind") == "mbarrier":
            return max(t.clock, info["slot"].last_flip_time)
        if info and info.get("kind") == "named":
            return max(t.clock, info["barrier"].release_time)
        return t.clock

    def _pick(self):
        """The next task to run, or None. Completes asynchronous ops picked on the way."""
        while True:
            if self.aborting:
                for t in self.tasks:
                    if t.state != "done" and t is not self.current:
                        return t
                return None
            cands = [t for t in self.tasks if t.state != "done" and self._runnable(t)]
            ops = [op for op in self.pending if op.ready()]
            n = len(cands) + len(ops)
            if n == 0:
                live = [t for t in self.tasks if t.state != "done"]
                if live:
                    self.deadlock = live
                    self.aborting = True
                    continue
                return None
            if self.in_time_order and n > 1:
                if ops:         # a completion carries its own time: done first, in the order issued
                    self.pending.remove(ops[0])
                    ops[0].complete()
                    continue
                return min(cands, key=self._resume_time)
            i = self.rng.randrange(n) if n > 1 else 0
            if i < len(cands):
                return cands[i]
            op = ops[i - len(cands)]
            self.pending.remove(op)
            op.complete()

    def _pass_baton(self, me: Task) -> None:
        nxt = self._pick()
        if nxt is None:
            self.current = None
            self._finished.release()
            return
        self.current = nxt
        nxt.baton.release()

    def step(self, me: Task) -> None:
        """A scheduling point: maybe let another task (or a TMA completion) go first."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise StepLimit()
        if self.aborting:
            raise Abort()
        nxt = self._pick()
        if nxt is me or nxt is None:
            if self.aborting:
                raise Abort()
            if nxt is None:
                return
            if me.state == "blocked":
                me.state = "ready"
            return
        self.current = nxt
        if self.green:
            nxt.glet.switch()
        else:
            nxt.baton.release()
            me.baton.acquire()
        if self.aborting:
            raise Abort()
        self.current = me
        self.on_resume(me)

    def block(self, me: Task, pred, info) -> None:
        """Wait until ``pred()`` holds, letting others run; ``info`` describes the wait for a deadlock report."""
        if pred():
            return
        me.state = "blocked"
        me.wait_pred = pred
        me.wait_info = info
        while True:
            self.step(me)
            if me.state == "blocked" and pred():
                break
            if me.state == "ready":
                break
        me.state = "ready"
        me.wait_pred = None
        me.wait_info = None

    def add_async(self, op: AsyncOp) -> None:
        self.pending.append(op)

    def drain_async(self) -> None:
        """Complete every pending asynchronous op (at the end of the CTA)."""
        while self.pending:
            op = self.pending.pop(0)
            op.complete()
