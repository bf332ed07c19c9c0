"""Seeded protocol bugs: each gives the right deadlock or race diagnosis, naming the right lines, fast."""
import pathlib
import sys

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb
from tlx_workbench.sim import simulate

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import sim_seeded_kernels as sk  # noqa: E402

SRC = pathlib.Path(sk.__file__).read_text().splitlines()
BM, BK, STAGES, N_TILES = 64, 32, 2, 6


def line_of(text, nth=0):
    hits = [i + 1 for i, l in enumerate(SRC) if text in l]
    return hits[nth]


def run_copy(bug, **kw):
    torch.manual_seed(0)
    x = torch.randn(N_TILES * BM, BK, dtype=torch.float16)
    out = torch.zeros_like(x)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
    res = simulate(sk.copy_pipeline, desc, out, N_TILES, BM=BM, BK=BK, STAGES=STAGES, BUG=bug, grid=(1,),
                   on_deadlock="return", **kw)
    return res, x, out


def test_correct_pipeline_copies_and_is_clean():
    res, x, out = run_copy("", schedules=5)
    assert torch.equal(out, x)
    assert res.ok, res
    res.raise_for_errors()


def test_wrong_arrive_count_deadlocks_on_the_empty_barrier(monkeypatch):
    res, _, _ = run_copy("arrive_count", repair=False)
    d = res.deadlock
    assert d is not None
    prod = next(b for b in d.blocked if b.lane[1] == "default")
    assert prod.barrier.startswith("empty[")
    assert prod.line == line_of("tlx.barrier_wait(empty[s], p ^ 1)")
    assert prod.missing_arrivals == 1 and prod.missing_bytes == 0
    assert "arrive_count" in prod.reason and f"line {line_of('arrive_count=2')}" in prod.reason
    # the consumer is the expected arriver, itself stuck on `full`
    assert any(e[0] == "task1" for e in prod.expected)
    # ... and described as blocked where it is, not as finished
    assert any(e[0] == "task1" and "blocked at line" in e[3] for e in prod.expected)
    # the first line is the fix: the one arrive (line 49) against the count of 2 (line 16), not the wait
    arrive = line_of("tlx.barrier_arrive(empty[s])", 1)
    assert d.line == arrive and f"(line {line_of('arrive_count=2')})" in d.message.splitlines()[0], d.message
    assert "arrive_count=1" in d.hint
    with pytest.raises(wb.DeadlockError) as ei:
        res.raise_for_errors()
    assert ei.value.line == arrive
    # both lines could be the fix: the repair search tries them, and the count (line 16) is the one that runs
    # clean; the report then leads with it, the arrive against the count follows as the evidence (the budget is
    # raised: this is about what leads, sim/diagnosis/repair.py's bound is measured by the seeded suite)
    from tlx_workbench.sim.diagnosis import repair
    monkeypatch.setattr(repair, "BUDGET", 1000.0)
    res, x, _ = run_copy("arrive_count")
    d = res.deadlock
    assert d.fix is not None and d.fix.verified and d.line == d.fix.line == line_of("arrive_count=2")
    assert d.cause.line == arrive and f"why: line {arrive}:" in d.message
    assert "arrive_count=1" in d.fix.apply().splitlines()[line_of("arrive_count=2") - 1]


def test_wrong_phase_deadlocks_at_once_and_says_check_the_phase():
    res, _, _ = run_copy("phase")
    d = res.deadlock
    assert d is not None
    prod = next(b for b in d.blocked if b.lane[1] == "default")
    assert prod.line == line_of("# BUG: the first wait")
    assert prod.phase == 0 and prod.completed == 0
    assert "phase" in prod.reason
    cons = next(b for b in d.blocked if b.lane[1] == "task1")
    assert cons.barrier == "full[0]"


def test_dropped_arrive_deadlocks_after_the_pipeline_fills():
    res, _, _ = run_copy("dropped_arrive")
    d = res.deadlock
    prod = next(b for b in d.blocked if b.lane[1] == "default")
    assert prod.barrier == "empty[0]" and prod.phase == 0
    assert "no task ever arrived" in prod.reason


def test_wrong_expect_bytes_leaves_bytes_missing():
    res, _, _ = run_copy("expect_bytes")
    d = res.deadlock
    cons = next(b for b in d.blocked if b.lane[1] == "task1")
    assert cons.barrier == "full[0]"
    assert cons.missing_arrivals == 0 and cons.missing_bytes == BM * BK * 2
    assert "bytes" in cons.reason
    assert cons.line == line_of("tlx.barrier_wait(full[s], p)")


def test_expect_too_few_bytes_is_a_finding_and_a_race_naming_both_lines():
    # half the tile's bytes announced: the phase completes when they are in, before the tile has landed
    res, _, _ = run_copy("expect_too_few", schedules=3)
    assert not res.ok
    expect_line = line_of("# BUG: half the tile's bytes")
    tma_line = line_of("tlx.async_descriptor_load(in_desc")
    load_line = line_of("x = tlx.local_load(bufs[s])", 1)     # the read after barrier_wait(full)
    over = [f for f in res.findings if f.kind == "tx-overflow"]
    assert len(over) == 1, res.findings          # one finding per barrier array, its phases listed
    f = over[0]
    assert (f.line, f.other_line) == (expect_line, tma_line)
    tile = BM * BK * 2
    assert f"announced {tile // 2}" in f.message and f"bring {tile}" in f.message
    assert f"announce the bytes of every load that signals this barrier: {tile}" in f.message
    assert f"full[0] phase 0: {tile // 2} announced / {tile} brought" in f.message
    # the consumer's read of the half-landed tile is a race naming the read and the TMA load
    assert any({r.line, r.other_line} == {load_line, tma_line} for r in res.races), res.findings
    # the bytes the next phases never asked for leave the barrier stuck: a deadlock whose root cause names them
    first = res.deadlock.blocked[0]
    assert first.barrier.startswith("full[") and first.missing_bytes < 0
    assert f"line {expect_line}" in first.reason and f"line(s) {tma_line}" in first.reason
    assert f"announce the bytes of every load that signals this barrier: {tile}" in first.reason
    res.deadlock = None                      # the finding alone raises, at the expect_bytes line
    with pytest.raises(wb.SimulationError) as ei:
        res.raise_for_errors()
    assert ei.value.line == expect_line and "tx-overflow" in str(ei.value)


@pytest.mark.parametrize("bug, task, wait, fix", [
    # bytes announced that never land: the expect_bytes line is the fix
    ("expect_bytes", "task1", "tlx.barrier_wait(full[s], p)", "# BUG: twice the tile's bytes"),
    # arrivals short, the arriver came: the one arrive against the count
    ("arrive_count", "default", "tlx.barrier_wait(empty[s], p ^ 1)", ("tlx.barrier_arrive(empty[s])", 1)),
    # no arrive site ran at all: the release belongs right after the read of the buffer it guards (the
    # condition that drops it sits there)
    ("dropped_arrive", "default", "tlx.barrier_wait(empty[s], p ^ 1)", 'if BUG != "dropped_arrive":'),
    ("phase", "default", "# BUG: the first wait", "# BUG: the first wait"),   # a fresh barrier waited on with phase 0
])
def test_the_root_cause_is_listed_first_and_the_error_line_is_the_fix(bug, task, wait, fix):
    res, _, _ = run_copy(bug, repair=False)        # the ledgers' ranking (a verified repair would lead otherwise)
    d = res.deadlock
    first = d.blocked[0]
    assert (first.lane[1], first.line) == (task, line_of(wait)), d.text()
    fix_line = line_of(*fix) if isinstance(fix, tuple) else line_of(fix)
    assert d.line == fix_line and d.message.split("\n")[0].startswith(f"deadlock in CTA 0"), d.message
    # the other blocked task is named a consequence (or an inferred cause), never before the root cause
    assert all(b.priority >= first.priority for b in d.blocked)
    with pytest.raises(wb.DeadlockError) as ei:
        res.raise_for_errors()
    assert ei.value.line == fix_line


def test_a_finished_arriver_is_not_called_blocked_in_a_cycle():
    # the producer (the default task, which then only waits at the end of async_tasks) completed two
    # phases ahead of the consumer and finished: the wait is a phase mistake, not a wait-for cycle
    out = torch.zeros(64)
    res = simulate(sk.run_ahead, out, BLOCK=64, grid=(1,), on_deadlock="return")
    d = res.deadlock
    assert d is not None and len(d.blocked) == 1
    b = d.blocked[0]
    assert b.lane[1] == "task1" and b.line == line_of("# BUG: `ready` has completed two phases")
    assert b.completed == 2 and b.phase == 0
    assert "cycle" not in b.reason and "consequence" not in b.reason
    assert "finished" in b.reason and "phase" in b.reason
    assert [e[3] for e in b.expected] == ["already finished (it will never arrive again)"]
    assert "blocked" not in d.text().split("why:")[1]


def test_early_release_is_a_race_naming_both_lines():
    res, _, _ = run_copy("early_release")
    assert res.deadlock is None
    races = res.races
    assert races, res
    load_line = line_of("x = tlx.local_load(bufs[s])")
    tma_line = line_of("tlx.async_descriptor_load(in_desc")
    # it leads with the release to move (before the read it pays for), the read and the TMA load in its text
    release_line = line_of("# BUG: releases the buffer before reading it")
    first = races[0]
    assert (first.line, first.other_line) == (release_line, load_line), races
    assert f"before it reads bufs[0] (line {load_line})" in first.message and f"line {tma_line}" in first.message
    with pytest.raises(wb.SimulationError) as ei:
        res.raise_for_errors()
    assert ei.value.line == release_line and f"after the read at line {load_line}" in ei.value.hint


def test_deadlock_raises_by_default_with_the_wait_for_graph():
    torch.manual_seed(0)
    x = torch.randn(N_TILES * BM, BK, dtype=torch.float16)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
    with pytest.raises(wb.DeadlockError) as ei:
        simulate(sk.copy_pipeline, desc, torch.zeros_like(x), N_TILES, BM=BM, BK=BK, STAGES=STAGES,
                 BUG="arrive_count", grid=(1,))
    text = str(ei.value) + ei.value.detail
    assert "empty[" in text and "missing" in text
    assert ei.value.result.trace.spans            # the partial trace is kept


def test_named_barrier_orders_the_handoff():
    out = torch.zeros(128)
    res = simulate(sk.named_barrier_handoff, out, BLOCK=128, COUNT=256, grid=(1,), schedules=4)
    assert torch.equal(out, torch.arange(128, dtype=torch.float32) * 2)
    assert res.ok, res


def test_named_barrier_count_mismatch_is_reported():
    out = torch.zeros(128)
    res = simulate(sk.named_barrier_handoff, out, BLOCK=128, COUNT=128, grid=(1,), schedules=4,
                   on_deadlock="return")
    assert not res.ok


@pytest.mark.parametrize("bug", ["", "expect_one"])
def test_a_load_whose_bytes_were_not_announced_lands_after_the_phase(bug):
    # A and B signal one barrier; announcing A's bytes only completes the phase before B has landed
    torch.manual_seed(0)
    a, b = (torch.randn(BM, BK, dtype=torch.float16) for _ in range(2))
    out = torch.zeros(BM, BK, dtype=torch.float16)
    descs = [TensorDescriptor(t, shape=[BM, BK], strides=[BK, 1], block_shape=[BM, BK]) for t in (a, b)]
    res = simulate(sk.two_loads_one_barrier, *descs, out, BM=BM, BK=BK, BUG=bug, grid=(1,), schedules=3,
                   on_deadlock="return")
    if not bug:
        assert res.ok, res
        assert torch.equal(out, a + b)
        return
    over = [f for f in res.findings if f.kind == "tx-overflow"]
    assert len(over) == 1, res.findings
    b_line = line_of("tlx.async_descriptor_load(b_desc")
    assert over[0].line == line_of("# BUG: B's bytes are not announced")
    assert f"line(s) {line_of('tlx.async_descriptor_load(a_desc')}, {b_line}" in over[0].message
    assert f"this barrier: {2 * BM * BK * 2}" in over[0].message
    read = line_of("x = tlx.local_load(a_buf[0])")
    assert any(r.line == read and r.other_line == b_line for r in res.races), res.findings


@pytest.mark.parametrize("bug", ["", "arrive_count", "phase", "dropped_arrive", "expect_bytes"])
def test_the_time_ordered_schedule_copies_and_deadlocks_as_a_seeded_one(bug):
    """``order="time"`` (what wb.predict runs) is one of the hardware's interleavings too: the correct pipeline copies
    its tiles, and each seeded bug stops at the same wait with the same first line as under the seed."""
    timed, x, out = run_copy(bug, order="time", repair=False)
    seeded, _, _ = run_copy(bug, repair=False)
    if not bug:
        assert timed.ok and torch.equal(out, x)
        return
    assert timed.deadlock is not None
    assert timed.deadlock.line == seeded.deadlock.line
    assert {(b.lane[1], b.barrier, b.line) for b in timed.deadlock.blocked} == \
        {(b.lane[1], b.barrier, b.line) for b in seeded.deadlock.blocked}


def test_an_unknown_scheduling_order_is_refused_with_the_orders_there_are():
    with pytest.raises(wb.SimulationError) as ei:
        run_copy("", order="earliest")
    assert "order='earliest'" in str(ei.value) and "seeded, time" in ei.value.hint
