"""A run that deadlocks is no evidence for the count rules on slots that never completed a phase: the
wrong-phase producer and the replica stuck elsewhere get the deadlock finding at the blocked wait, not a
"fix" of a count that is right (arrive_count=0 or =1 where 2 replicas arrive)."""
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb

from check_helpers import seed_line

BLOCK, N_TILES, STAGES = 64, 4, 2
COUNT_RULES = ("tma-full-count", "release-count", "warp-barrier-count")


def _check(kernel):
    x = torch.randn(N_TILES * BLOCK, BLOCK).half()
    d = TensorDescriptor(x, [N_TILES * BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    return wb.check(kernel, d, torch.zeros(2 * N_TILES * BLOCK, BLOCK).half(), N_TILES, grid=(1,), BLOCK=BLOCK,
                    STAGES=STAGES)


def test_wrong_phase_gives_the_deadlock_not_a_count_fix(seeded):
    res = _check(seeded.ws_copy_phase)
    assert res.sim.deadlock is not None
    assert not [f for f in res if f.rule_id in COUNT_RULES], res
    assert "arrive_count=0" not in repr(res)
    (d,) = res.by_rule("deadlock")
    assert d.line == seed_line("deadlock", "ws_copy_phase"), d
    assert "p ^ 1" in d.fix


def test_a_replica_stuck_elsewhere_is_no_evidence_for_the_count(seeded):
    res = _check(seeded.ws_copy_stuck_replica)
    assert res.sim.deadlock is not None
    # empty's arrive_count=2 is right: only one replica got to arrive before the run stopped
    assert not [f for f in res if f.rule_id in COUNT_RULES], res
    (d,) = res.by_rule("deadlock")
    assert seed_line("stuck", "ws_copy_stuck_replica") in [n for _, n in d.lines], d


def test_a_count_that_deadlocks_is_still_found_statically(seeded):
    # tma-full-count: arrive_count=2 on a barrier armed once per phase never completes: no slot is
    # evidence, the static rule names the line and the fix
    res = _check(seeded.ws_copy_full_count)
    assert res.sim.deadlock is not None
    (f,) = res.by_rule("tma-full-count")
    line = seed_line("tma-full-count", "ws_copy_full_count")
    assert f.line == line and f"arrive_count=1) at line {line}" in f.fix, f
