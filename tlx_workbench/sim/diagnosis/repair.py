"""Repairs that prove themselves: small edits of a failing kernel's source, each re-run on the simulator.

A deadlock or a race comes with evidence (the wait-for graph, the phase and byte ledgers, the release map, the
race's two accesses, the ranking's cause). The lines that evidence names, in its order, are the *suspects*;
each suspect statement offers the edits its kind allows (``sim/diagnosis/repair_edits.py``, ``candidates``):

- an ``arrive_count=`` / ``num_arrivals=`` set to what the ledger saw arrive (lanes per phase, arrivals per phase);
- a wait's phase flipped (``p`` <-> ``p ^ 1``);
- a ``barrier_arrive`` removed, or its count dropped, or moved past the read that follows it;
- a missing release added where the release map says it belongs;
- a read moved after the ``barrier_wait`` that follows it;
- an ``expect_bytes`` size set to the bytes the loads bring (in the kernel's terms where the expression allows);
- a named barrier's id or thread count set to one the other side uses;
- a barrier argument swapped for its partner (another barrier the same kind of call names);
- an ``async_dot_wait``'s pending count lowered.

:func:`search` re-runs the same launch with each candidate (its kernel rebuilt from the edited text; the
caller's tensors are never touched): timing only over several schedules first, then once with values (against a
reference when one is given). Candidates are tried smallest first (lines changed, then the evidence's order) and
the first that runs clean is *the* fix: the diagnosis leads with its line. The search is capped in candidates and
in simulated work (``BUDGET`` times the failing launch's own, at least ``FLOOR_OPS``), counted in the simulator's
ops (every task's TLX ops over every CTA: the same however the launch ran, so a diagnosis does not depend on how
busy the machine is); nothing is applied to the user's source — a
:class:`Repair` shows its diff, and :meth:`Repair.apply` (``%tlx_fix`` in a notebook) makes the new text.
"""
from __future__ import annotations

import dataclasses
import time

from .repair_edits import Edit, Repair, candidates, rebuild  # noqa: F401 - Edit, Repair: this module's API too

MAX_CANDIDATES = 16         # tried at most, per failing launch
BUDGET = 10.0               # the whole search <= BUDGET x one simulation of the failing launch
SCHEDULES = 3               # schedules a candidate must run clean: timing only, the last one with values
#: the budget's floor, simulated ops: a launch that deadlocks at once did a few hundred, less than one clean run of
#: a candidate, so 10x of it would try nothing (20,000 ops: about a second of simulation one CTA at a time)
FLOOR_OPS = 20_000
#: the clock of the seconds a search reports (not its bound): this process's CPU time
_clock = time.process_time


def work(stats) -> int:
    """The simulated work of a launch: its tasks' TLX ops over every CTA (a LaunchRun's or SimResult's stats)."""
    return int(sum(s.get("ops", 0) for s in (stats or {}).values()))
#: the last verified repair any search found (what ``%tlx_fix`` applies when not told which)
last = None


@dataclasses.dataclass
class RepairSearch:
    """What a search tried and found: ``best`` (the verified repair the diagnosis leads with, or None)."""
    tried: list
    best: Repair | None
    seconds: float
    ops: int
    budget_ops: int
    baseline_ops: int
    generated: int
    note: str = ""

    def summary(self) -> str:
        if self.best is not None:
            return (f"{len(self.tried)} candidate repair(s) tried, {self.ops:,} simulated ops (budget "
                    f"{self.budget_ops:,}: {BUDGET:.0f} x the failing launch's {self.baseline_ops:,}, at least "
                    f"{FLOOR_OPS:,})")
        why = f": {self.note}" if self.note else ""
        return (f"no candidate repair verified ({len(self.tried)} of {self.generated} tried, {self.ops:,} simulated ops, "
                f"budget {self.budget_ops:,}){why}; the first line is the ledgers' ranking, not verified")

    def __repr__(self):
        rows = [f"RepairSearch({self.summary()}; {self.seconds:.2f} CPU s)"]
        for r in self.tried:
            rows.append(f"  {'OK ' if r.verified else '-- '} line {r.line:>4} {r.kind:14} {r.what[:70]:70} "
                        f"{r.seconds:5.2f} s {'' if r.verified else r.failed[:60]}")
        return "\n".join(rows)


# ---- verification -----------------------------------------------------------------------------------------------
def _clone_args(args, kwargs):
    """Copies of the launch's tensors (views of one storage stay views of one copy), descriptors rebuilt on them."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    storages: dict = {}

    def t(x):
        st = x.untyped_storage()
        key = st.data_ptr()
        if key not in storages:
            storages[key] = st.clone()
        out = torch.empty(0, dtype=x.dtype)
        out.set_(storages[key], x.storage_offset(), x.size(), x.stride())
        return out

    def c(v):
        if isinstance(v, torch.Tensor):
            return t(v)
        if isinstance(v, TensorDescriptor):
            return dataclasses.replace(v, base=t(v.base)) if dataclasses.is_dataclass(v) else \
                TensorDescriptor(t(v.base), v.shape, v.strides, v.block_shape)
        if isinstance(v, tuple):
            return tuple(c(x) for x in v)
        if isinstance(v, list):
            return [c(x) for x in v]
        return v
    return [c(a) for a in args], {k: c(v) for k, v in kwargs.items()}


class Launch:
    """The failing launch, as the search re-runs it: kernel, grid, arguments and the simulator's options."""

    def __init__(self, jitfn, grid, args, kwargs, options, reference=None):
        self.jitfn, self.grid, self.args, self.kwargs = jitfn, grid, args, kwargs
        self.options = dict(options)
        self.reference = reference
        self.ops = 0                # the failing launch's simulated work (``work``)
        self.first_ops = 0          # the largest first run of a candidate so far, in simulated ops


def verify(rep: Repair, launch: Launch, schedules: int = SCHEDULES, budget: int | None = None) -> Repair:
    """Run ``launch`` with ``rep`` made under ``schedules`` seeds: timing only first (a wrong edit usually
    deadlocks or races at once, cheaply), the last one with values (compared with the launch's reference when it
    has one), each started only if its simulated ops (estimated by the last run) fit in ``budget``. Sets
    ``rep.verified``, or why not; ``rep.ops`` the simulated work it took."""
    from ..schedule.engine import run_launch
    t0 = _clock()
    try:
        jit = rebuild(launch.jitfn, rep.apply(), rep.file)
    except Exception as e:  # noqa: BLE001 - an edit that does not parse or define the kernel is no repair
        rep.failed = f"does not build: {type(e).__name__}: {e}"
        rep.seconds = _clock() - t0
        return rep
    seed0 = launch.options.get("seed", 0)
    opts = {k: v for k, v in launch.options.items() if k != "seed"}
    # values are compared only against a reference: without one, every schedule is timing only
    with_values = launch.reference is not None
    # the first run's work: the failing launch's, or the largest first run of a candidate so far
    last = max(launch.ops, launch.first_ops)
    rep.ops = 0
    try:
        for i in range(schedules):
            values = with_values and i == schedules - 1
            # a run is not started that would end past the budget: estimated by this candidate's last run, with a
            # margin, as runs of one kernel vary
            if budget is not None and rep.ops + 1.25 * last > budget:
                rep.failed = "out of budget"
                return rep
            args, kwargs = _clone_args(launch.args, launch.kwargs)
            run = run_launch(jit, launch.grid, args, kwargs, seed=seed0 + i, numerics=values, **opts)
            last = work(run.stats)
            rep.ops += last
            if i == 0:
                launch.first_ops = max(launch.first_ops, last)
            bad = [f for f in run.findings if getattr(f, "severity", "error") == "error"]
            if run.deadlock is not None:
                rep.failed = f"still deadlocks (seed {seed0 + i}): {run.deadlock.message.splitlines()[0][:160]}"
                return rep
            if bad:
                rep.failed = f"{bad[0].kind} (seed {seed0 + i}): {bad[0].message[:160]}"
                return rep
            left = half_arrived(run.trace)
            if left:
                rep.failed = f"ends with {left}: its count and its arrivals still disagree"
                return rep
            if values:
                rep.values = True
                if launch.reference is not None:
                    rep.reference = bool(launch.reference(args, kwargs))
                    if not rep.reference:
                        rep.failed = "runs clean but does not match the reference"
                        return rep
        rep.verified = True
        rep.schedules = schedules
        return rep
    except Exception as e:  # noqa: BLE001 - a candidate that crashes the kernel is no repair
        rep.failed = f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        return rep
    finally:
        rep.seconds = _clock() - t0


def half_arrived(trace) -> str:
    """A barrier slot the run leaves in the middle of a phase (some arrivals of it came, not all), said as words;
    "" when none. A clean run of a sound protocol completes every phase it starts: an edit that silences a wait
    (a phase flipped so that it never waits) leaves the arrivals it was waiting for stranded there."""
    cur: dict = {}
    for e in trace.barrier_events:
        key = (e.cta, e.barrier, e.slot)
        if e.kind in ("arrive", "expect"):
            cur[key] = cur.get(key, 0) + (e.count if e.kind == "arrive" else 1)
        elif e.kind == "flip":
            cur[key] = 0
    for (cta, bar, slot), n in sorted(cur.items(), key=lambda x: (x[0][0], x[0][1], x[0][2])):
        if n:
            return f"{bar}[{slot}] of CTA {cta} half-arrived ({n} arrival(s) of a phase that never completes)"
    return ""


def search(cands: list[Repair], launch: Launch, budget: float | None = None, cap: int | None = None) -> RepairSearch:
    """Try ``cands`` in their order until one verifies, within ``cap`` candidates (default MAX_CANDIDATES) and
    ``budget`` (default BUDGET) x the failing launch's simulated ops (at least FLOOR_OPS). The first verified one is
    the fix (the smallest: candidates come sorted)."""
    budget = BUDGET if budget is None else budget
    cap = MAX_CANDIDATES if cap is None else cap
    t0 = _clock()
    budget_ops = int(max(budget * launch.ops, FLOOR_OPS))
    spent = 0
    tried = []
    best = None
    note = ""
    for rep in cands[:cap]:
        # each run is started only if it fits (verify): a failing candidate usually stops at its first run, at a
        # deadlock or race
        if spent + 1.25 * max(launch.ops, launch.first_ops) > budget_ops:
            note = "out of budget"
            break
        verify(rep, launch, budget=budget_ops - spent)
        spent += rep.ops
        tried.append(rep)
        if rep.verified:
            best = rep
            break
        if rep.failed == "out of budget":
            note = "out of budget"
            break
    if not cands:
        note = "no edit the evidence suggests"
    return RepairSearch(tried, best, _clock() - t0, spent, budget_ops, launch.ops, len(cands), note)


# ---- a failing launch, diagnosed by its repair ------------------------------------------------------------------
def enabled_default() -> bool:
    """Whether ``simulate`` searches for a verified repair when a launch fails (``TLXWB_SIM_REPAIR=0``: not)."""
    import os
    return os.environ.get("TLXWB_SIM_REPAIR", "1") not in ("0", "false", "no", "")


def evidence(res) -> tuple[list, list, object]:
    """(texts, lead lines, cause) of a failing SimResult: what the candidates are drawn from."""
    d = res.deadlock
    texts, lead, cause = [], [], None
    if d is not None:
        cause = getattr(d, "cause", None)
        lead = [d.line] + ([cause.other_line] if cause is not None and cause.other_line else [])
        texts += [d.message, d.text()]
    errs = [f for f in res.findings if getattr(f, "severity", "error") == "error"]
    if d is None and errs:
        lead = [errs[0].line, errs[0].other_line]
    for f in errs:
        texts += [f"line {f.line}" if f.line else "", f"line {f.other_line}" if f.other_line else "",
                  f.message, f.hint or ""]
    return texts, lead, cause


def diagnose(res, launch: Launch) -> RepairSearch | None:
    """Search repairs for the failing ``res`` and lead its diagnosis with the verified one (``res.fix``, the
    deadlock report's first line, ``raise_for_errors``' line); without one, say so and keep the ranking."""
    if res.file is None or launch is None:
        return None
    texts, lead, cause = evidence(res)
    launch.ops = work(getattr(res, "stats", None))
    try:
        cands = candidates(res.file, res.trace, texts, lead, cause)
    except Exception:  # noqa: BLE001 - the search is advice: the diagnosis without it stays right
        cands = []
    found = search(cands, launch)
    res.repair_search = found
    res.fix = found.best
    if found.best is not None:
        global last
        last = found.best
        found.best.jitfn = launch.jitfn
    d = res.deadlock
    if d is not None:
        d.repair_search = found
        d.fix = found.best
        if found.best is not None:
            d.line = found.best.line
            d.hint = (f"make the change shown at line {found.best.line} ({found.best.what}); "
                      f"{found.best.verified_text()}" + (f" — {cause.fix}" if cause is not None and cause.line else ""))
            d.message = d.compose(fix_line=False)
        elif found.tried:
            # the ranking leads, as it would without the search, and the report says that nothing was proven
            head, _, rest = d.message.partition("\n")
            d.message = f"{head}\n  ({found.summary()})" + (f"\n{rest}" if rest else "")
    return found


def matches(expected, atol=5e-2, rtol=5e-2):
    """A values check for the repair search: every tensor of ``expected`` (one, or a list/tuple) equals, within
    tolerance, some argument of the launch of the same shape once the candidate ran (an output the kernel wrote).

    >>> wb.simulate(matmul, a, b, repair=matches(a.float() @ b.float()))     # doctest: +SKIP
    """
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    wanted = list(expected) if isinstance(expected, (list, tuple)) else [expected]

    def tensors(v):
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, TensorDescriptor):
            yield v.base
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from tensors(x)

    def ok(args, kwargs) -> bool:
        got = [t for v in list(args) + list(kwargs.values()) for t in tensors(v)]
        for w in wanted:
            if not any(g.shape == w.shape and torch.allclose(g.float(), w.float(), atol=atol, rtol=rtol)
                       for g in got):
                return False
        return True
    ok.expected = wanted
    return ok


def as_check(repair):
    """``simulate(repair=...)`` as a values check: a function ``ok(args, kwargs)``, expected tensors, or None."""
    if repair is None or isinstance(repair, bool):
        return None
    if callable(repair):
        return repair
    return matches(repair)
