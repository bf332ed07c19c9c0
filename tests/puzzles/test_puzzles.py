"""Puzzles: every reference solution passes its grader; wrong answers fail with a message that helps."""
import pytest
import torch

from tlx_workbench.puzzles import PUZZLES, GradeResult, PuzzleError, check_references, grade


@pytest.fixture(scope="module")
def references():
    return check_references()


def test_every_reference_solution_passes_with_a_visible_cost(references):
    assert set(references) == set(PUZZLES) and len(PUZZLES) >= 6
    for name, r in references.items():
        assert r.passed, r
        assert r.cycles and r.cycles > 0, name
        assert r.smem_bytes and r.smem_bytes > 0, name           # from a real offline sm_90 compile
        assert "simulated cycles" in repr(r) and "B SMEM" in repr(r)
        if PUZZLES[name].par:
            assert r.star, r                                      # the reference meets its own par
        assert "PASS" in r._repr_html_()


def test_templates_have_blanks_and_are_the_solution_with_blanks():
    for p in PUZZLES.values():
        t = p.template()
        assert "___" in t, p.name
        assert p.kernel_name in t
    # filling the blanks with the answers gives back the solution
    assert PUZZLES["arrive_count"].fill("2") == PUZZLES["arrive_count"].solution_source()
    assert PUZZLES["phases"].fill("(r & 1) ^ 1", "r & 1") == PUZZLES["phases"].solution_source()
    assert PUZZLES["named_barrier"].fill("256", "256") == PUZZLES["named_barrier"].solution_source()


def test_unfilled_template_says_which_lines():
    p = PUZZLES["phases"]
    r = grade("phases", p.template())
    assert not r.passed and "fill in the blank" in r.message
    lines = [i + 1 for i, l in enumerate(p.template().splitlines()) if "___" in l]
    assert str(lines[0]) in r.message and r.line == lines[0]


def _fail(name, *values):
    r = grade(name, PUZZLES[name].fill(*values), cost=False)
    assert isinstance(r, GradeResult) and not r.passed, r
    assert r.hint or "replicas" in r.message, r          # every failure says what to think about
    return r


def test_arrive_count_too_many_deadlocks_naming_the_wait():
    r = _fail("arrive_count", "3")
    assert r.message.startswith("deadlock") and "ready[0]" in r.message and "missing 1 arrival" in r.message
    assert "count the" in r.hint and "replicas" in r.hint
    assert "arrive_count at line" in r.detail            # the simulator's own reason points at the count
    assert "barrier phases" in r._repr_html_() and "<svg" in r._repr_html_()


def test_arrive_count_too_few_fails():
    r = _fail("arrive_count", "1")
    assert "arrive_count" in r.hint


def test_phase_same_parity_on_both_sides_deadlocks_at_once():
    r = _fail("phases", "r & 1", "r & 1")
    assert "deadlock" in r.message and "empty[0]" in r.message
    assert "parity" in r.hint and "first" in r.hint
    assert "p ^ 1" in r.detail or "phase" in r.detail


def test_consumer_with_producer_parity_deadlocks():
    r = _fail("phases", "(r & 1) ^ 1", "(r & 1) ^ 1")
    assert "deadlock" in r.message and "wait-for graph" in r.detail


def test_too_many_expected_bytes_leave_bytes_missing():
    r = _fail("expect_bytes", "BM * BK * 2 + BK * BN * 4")
    assert "loaded[0]" in r.message and "4096 byte(s)" in r.message
    assert "2 bytes" in r.hint


def test_too_few_expected_bytes_read_a_tile_in_flight():
    r = _fail("expect_bytes", "BM * BK * 2")
    assert "landed" in r.hint or "in flight" in r.hint


def test_ring_always_slot_zero_is_wrong_data():
    r = _fail("ring", "i % STAGES", "0", "i % STAGES", "0")
    assert "slot" in r.hint


def test_ring_wrong_slot_deadlocks():
    r = _fail("ring", "0", "(i // STAGES) & 1", "0", "(i // STAGES) & 1")
    assert "deadlock" in r.message


def test_task_split_count_not_matching_replicas_deadlocks():
    r = _fail("task_split", "2", "1")
    assert "empty[" in r.message and "replicas" in r.hint


def test_task_split_one_replica_breaks_the_spec():
    r = _fail("task_split", "1", "1")
    assert "2 consumer replicas" in r.message


def test_named_barrier_counting_warps_instead_of_threads():
    r = _fail("named_barrier", "128", "128")
    assert "race" in r.message and "threads" in r.hint


def test_named_barrier_sides_disagree():
    r = _fail("named_barrier", "256", "128")
    assert "named-barrier-count" in r.message and "same count" in r.hint


def test_a_jit_kernel_can_be_graded_too():
    from tlx_workbench.puzzles.solutions import named_barrier
    r = grade("named_barrier", named_barrier, schedules=1, cost=False)
    assert r.passed, r


def test_unknown_puzzle_and_unparsable_answer_are_clear_errors():
    with pytest.raises(PuzzleError, match="no puzzle named"):
        grade("nope", "x")
    with pytest.raises(PuzzleError, match="does not parse"):
        grade("phases", "def broken(:\n")
