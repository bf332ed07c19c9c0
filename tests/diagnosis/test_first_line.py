"""Every seeded bug is detected, the clean kernels are clean, and the first line a person reads (the
DeadlockError / the first finding of a SimResult, the first finding of ``wb.check``) is the line to change, in
at least 95 % of the bugs, with a verified fix offered for at least 80 %. Copies are made at test time."""
import math

import pytest
import torch

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


def test_the_first_line_is_the_line_to_change_in_95_percent():
    outs = [_sim(b) for b in sb.BUGS]
    hit = [o.bug.id for o in outs if o.names_fix]
    missed = [(o.bug.id, o.seeded_line, o.first_line, o.first_text[:120]) for o in outs if not o.names_fix]
    assert len(outs) >= 44 and len({b.kernel.split("[")[0] for b in sb.BUGS}) >= 3
    # the first line is the verified repair's where the search finds one within its budget (sim/diagnosis/repair.py, counted in
    # simulated ops: the same on every machine), the ledgers' ranking elsewhere; the goal is 95 %
    assert len(hit) >= math.ceil(0.95 * len(outs)), missed
    # a verified fix is offered for at least 80 % of them
    offered = [o for o in outs if o.fix is not None and o.fix.verified]
    assert len(offered) >= math.ceil(0.8 * len(outs)), [o.bug.id for o in outs if o.fix is None]
    # the five classes an outside check found hardest, in kernels the suite did not use before
    assert len([b for b in sb.BUGS if b.cls]) >= 12 and len({b.cls for b in sb.BUGS if b.cls}) == 5


def test_a_wrong_count_says_the_fix_in_the_kernels_terms(monkeypatch):
    # each replica arrives once on its own slot of bars_empty_a, which counts 2 (the budget is raised: this is about
    # what leads; the seeded suite measures the search's cost)
    from tlx_workbench.sim.diagnosis import repair
    monkeypatch.setattr(repair, "BUDGET", 1000.0)
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "g-empty-a-count"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    arrive = next(n for n in s.fix_lines if "barrier_arrive(empty_a)" in open(s.file).read().splitlines()[n - 1])
    alloc = min(s.fix_lines)
    with pytest.raises(wb.DeadlockError) as ei:
        res.raise_for_errors()
    e = ei.value
    # both lines could be the fix; the simulator tried them and leads with the count, which runs clean
    assert e.line == s.line and e.fix is not None and e.fix.verified
    head = e.message.splitlines()[0]
    assert head.endswith(f"line {s.line}: arrive_count=2 -> arrive_count=1 — " + e.fix.verified_text()), head
    assert "verified: with this change the kernel runs clean over 3 schedules" in head
    assert "-   136 |" in e.message and "arrive_count=1)" in e.fix.diff()
    # the ledgers' evidence follows: the arrive against the count
    assert f"why: line {arrive}: task1[0] arrives on bars_empty_a once per phase but the barrier counts 2 (line " \
           f"{alloc})" in e.message
    assert "arrive_count=1" in e.hint
    # the waits that starve are listed after it, as consequences, and the %%tlx text leads with the same line
    assert "consequences" in e.message
    assert error_text(e).splitlines()[0].endswith(head.split(": ", 1)[1]) or f"line {arrive}:" in error_text(e)
    assert res.deadlock.text().splitlines()[0] == head


def test_bytes_are_said_as_sentences_not_negative_counts():
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "g-expect-b-bytes"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    # the ledgers' sentence: the head (no verified repair) or the "why:" under the verified repair's head
    why = res.deadlock.cause.text
    assert why in res.deadlock.message
    assert "bytes more landed on bars_full_b[0] than line 192 expects" in why and "-" not in why.split(":")[1]


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


def _bug(bug_id):
    return next(b for b in sb.BUGS if b.id == bug_id)


def _src(s, n):
    return open(s.file).read().splitlines()[n - 1]


def test_a_removed_release_is_named_where_it_belongs():
    # bars_empty_b's release is gone (its line is `pass`): the report names that line, after the consumer's other
    # release of the round, says which read owes it and that the loader's wait starves
    s = sb.seeded_copy(_bug("g-drop-empty-b"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    with pytest.raises(wb.DeadlockError) as ei:
        res.raise_for_errors()
    e = ei.value
    assert e.line == s.line and _src(s, s.line).strip() == "pass"
    head = e.message
    assert "pass -> tlx.barrier_arrive(empty_b)" in head.splitlines()[0]
    assert "a release is missing here" in head and "never release bars_empty_b[0]" in head, head
    assert "b[0] (line 283, retired by the async_dot_wait at line 289)" in head, head
    assert "add the release after line 296" in e.hint and "barrier_arrive on bars_empty_b[0]" in e.hint
    # a release that exists elsewhere in the lane (the loop's) is said, and the prologue's is the one missing
    s = sb.seeded_copy(_bug("fa-drop-k-release-first"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    assert res.deadlock.line == s.line
    assert "they release k_empties at line 240, but not for this read" in res.deadlock.message


def test_a_release_on_the_wrong_slot_leads_with_its_slot_index():
    # the loop releases the slot of the wgmma still in flight instead of the one async_dot_wait(1) retired
    s = sb.seeded_copy(_bug("o-release-wrong-slot"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    d = res.deadlock
    assert d.line == s.line and "empty[s]" in _src(s, s.line)
    head = d.message
    assert "releases empty[1] while its read of" in head and "is still in flight" in head, head
    assert "never releases empty[0]" in head and "the release names the wrong slot" in head, head
    # the slot is computed in a local_view a few lines above the arrive: that line leads, the arrive is said
    s = sb.seeded_copy(_bug("g-release-other-replica"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    assert res.deadlock.line in s.fix_lines and res.races
    arrive = next(n for n in range(s.line, s.line + 5) if "barrier_arrive(empty_a)" in _src(s, n))
    race = res.races[0]
    assert race.line in s.fix_lines and f"(line {arrive}, the slot written at line {race.line})" in race.message
    assert "names another lane's slot" in race.message


def test_a_miscounted_warp_barrier_leads_every_view_with_its_count(tmp_path):
    # notebook 05's kernel with num_arrivals=1 for two consumer groups: the races and the deadlock all lead with
    # the alloc_warp_barrier line (its count), as does wb.check
    import importlib.util
    import pathlib

    from triton.tools.tensor_descriptor import TensorDescriptor

    path = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "warpbar_gemm.py"
    spec = importlib.util.spec_from_file_location("warpbar_gemm_first_line", path)
    mod = importlib.util.module_from_spec(spec)
    with wb.offline("H100"):
        spec.loader.exec_module(mod)
    alloc = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "alloc_warp_barrier" in ln)
    M, N, K, BM, BN, BK = 128, 64, 256, 128, 64, 32
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    a_desc = TensorDescriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM // 2, BK])
    b_desc = TensorDescriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    args = (a_desc, b_desc, torch.empty(M, N, dtype=torch.float16), M, N, K)
    kw = dict(BM=BM, BN=BN, BK=BK, STAGES=2, WARP_BAR=True, ARRIVALS=1, grid=(1, 1))
    res = wb.simulate(mod.ws_matmul_wb, *args, **kw, on_deadlock="return")
    assert res.races and all(r.line == alloc for r in res.races), res.races
    assert "num_arrivals=2" in res.races[0].hint
    assert res.deadlock is not None and res.deadlock.line == alloc
    found = [f for f in wb.check(mod.ws_matmul_wb, *args, **kw) if f.severity in ("error", "warning")]
    assert found and found[0].line == alloc, found[:2]


def test_the_views_stuck_markers_name_the_line_to_change():
    # the barrier and timeline views' stuck-here markers carry the report's lead line, and surplus bytes as words
    from tlx_workbench.widgets import barrier_svg
    from tlx_workbench.widgets.timeline import stuck_label, stuck_waits

    s = sb.seeded_copy(_bug("g-expect-b-bytes"))
    res, _ = sb.KERNELS[s.bug.kernel].run(s.module)
    labels = [stuck_label(st) for st in stuck_waits(res.trace, res.deadlock)]
    assert labels and all(f"(the line to change: {res.deadlock.line})" in lb for lb in labels), labels
    assert any("B more landed than announced" in lb for lb in labels) and not any(" -" in lb for lb in labels)
    assert f"the line to change: {res.deadlock.line}" in barrier_svg(res.trace, deadlock=res.deadlock)
