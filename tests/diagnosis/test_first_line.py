"""Issue 19: every seeded bug is detected, the clean kernels are clean, and the first line a person reads
(the DeadlockError / the first finding of a SimResult, the first finding of ``wb.check``) is the line to
change (the issue's goal: 18 of 20; see the floor below). Copies are made at test time."""
import math

import pytest

import tlx_workbench as wb
from tlx_workbench.magics.diagnosis import error_text

import seeded_bugs as sb

_outcomes: dict = {}


def _sim(bug):
    if bug.id not in _outcomes:
        _outcomes[bug.id] = sb.simulated(bug)
    return _outcomes[bug.id]


@pytest.mark.parametrize("kernel", sorted({b.kernel for b in sb.BUGS}))
def test_the_clean_kernels_are_clean(kernel):
    res, pair = sb.KERNELS[kernel].run(sb.clean_copy(kernel), schedules=2)
    assert res.ok, res
    assert not sb._wrong(pair)


@pytest.mark.parametrize("bug", sb.BUGS, ids=[b.id for b in sb.BUGS])
def test_every_seeded_bug_is_detected(bug):
    o = _sim(bug)
    assert o.detected, (bug.id, bug.what)


def test_the_first_line_is_the_line_to_change_in_nine_of_ten():
    outs = [_sim(b) for b in sb.BUGS]
    hit = [o.bug.id for o in outs if o.names_fix]
    missed = [(o.bug.id, o.seeded_line, o.first_line, o.first_text[:120]) for o in outs if not o.names_fix]
    assert len(outs) >= 20 and len({b.kernel.split("[")[0] for b in sb.BUGS}) >= 3
    # the goal is 9 of 10; measured all 32 (benchmarks/RESULTS.md, issue 19). A removed or misplaced
    # release is named from what each release barrier guards (sim/releases.py). The floor allows one miss.
    assert len(hit) >= len(outs) - 1, missed
    assert len(hit) >= math.ceil(0.9 * len(outs)), missed


def test_a_wrong_count_says_the_fix_in_the_kernels_terms():
    # the issue's own example: each replica arrives once on its own slot of bars_empty_a, which counts 2
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "g-empty-a-count"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    arrive = next(n for n in s.fix_lines if "barrier_arrive(empty_a)" in open(s.file).read().splitlines()[n - 1])
    alloc = min(s.fix_lines)
    with pytest.raises(wb.DeadlockError) as ei:
        res.raise_for_errors()
    e = ei.value
    assert e.line == arrive
    head = e.message.splitlines()[0]
    assert f"line {arrive}: task1[0] arrives on bars_empty_a once per phase but the barrier counts 2 (line {alloc})" \
        in head, head
    assert "arrive_count=1" in e.hint
    # the waits that starve are listed after it, as consequences, and the %%tlx text leads with the same line
    assert "consequences" in e.message
    assert error_text(e).splitlines()[0].endswith(head.split(": ", 1)[1]) or f"line {arrive}:" in error_text(e)
    assert res.deadlock.text().splitlines()[0] == head


def test_bytes_are_said_as_sentences_not_negative_counts():
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "g-expect-b-bytes"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    head = res.deadlock.message.splitlines()[0]
    assert "bytes more landed on bars_full_b[0] than line 192 expects" in head and "-" not in head.split(":")[2]


def test_a_weak_wgmma_wait_leads_the_race_at_its_line():
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "g-dot-wait-weak"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    assert res.deadlock is None and res.races
    first = res.findings[0]
    assert first.line == s.line and "async_dot_wait" in first.message and "line 296" in first.message
    with pytest.raises(wb.SimulationError) as ei:
        res.raise_for_errors()
    assert ei.value.line == s.line and "async_dot_wait(0)" in ei.value.hint


@pytest.mark.slow
@pytest.mark.parametrize("bug_id", ["g-empty-a-count", "fa-v-expect", "o-dot-wait-weak"])
def test_check_leads_with_the_same_line(bug_id):
    bug = next(b for b in sb.BUGS if b.id == bug_id)
    o = sb.checked(bug)
    assert o.detected and o.names_fix, (o.first_line, o.first_text)
