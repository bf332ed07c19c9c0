"""Each seeded mistake gives its rule's finding at the marked line, with a fix that names the
right value; the same protocol without the mistake gives none (and copies correctly)."""
import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb

from check_helpers import seed_line

BLOCK, N_TILES, STAGES = 64, 6, 2


def _copy_args():
    x = torch.randn(N_TILES * BLOCK, BLOCK).half()
    d = TensorDescriptor(x, [N_TILES * BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    out = torch.zeros(2 * N_TILES * BLOCK, BLOCK).half()
    return x, d, out


def _check(kernel, **kw):
    x, d, out = _copy_args()
    res = wb.check(kernel, d, out, N_TILES, grid=(1,), BLOCK=BLOCK, STAGES=STAGES, **kw)
    return res, x, out


def test_correct_protocol_has_no_findings_and_copies(seeded):
    res, x, out = _check(seeded.ws_copy_ok)
    assert res.ok and len(res) == 0, res
    assert res.sim is not None and res.sim.deadlock is None
    assert torch.equal(out[:N_TILES * BLOCK], x) and torch.equal(out[N_TILES * BLOCK:], x)
    assert "no findings" in repr(res) and "tlxwb-check" in res._repr_html_()


CASES = [
    # kernel, rule, the fix must say
    ("ws_copy_full_count", "tma-full-count", "arrive_count=1"),
    ("ws_copy_expect_bytes", "tma-expect-bytes", str(BLOCK * BLOCK * 2)),
    ("ws_copy_release_count", "release-count", "arrive_count=2"),
    ("ws_copy_warp_count", "warp-barrier-count", "num_warps=4, num_arrivals=2"),
    ("ws_copy_warp_on_tma", "warp-barrier-on-tma", "alloc_barriers(num_barriers=STAGES, arrive_count=1)"),
    ("ws_copy_named_reserved", "named-barrier-id", "free: 4..15"),
    ("ws_copy_named_threads", "named-barrier-threads", "num_threads=256"),
]


@pytest.mark.parametrize("kernel,rule,fix", CASES, ids=[c[1] for c in CASES])
def test_seeded_mistake_found_at_its_line(seeded, kernel, rule, fix):
    res, _, _ = _check(getattr(seeded, kernel))
    hits = res.by_rule(rule)
    assert hits, res
    line = seed_line(rule, kernel)
    assert any(line in [n for _, n in f.lines] for f in hits), (line, hits)
    assert any(fix in f.fix and str(line) in f.fix for f in hits), hits
    assert not res.ok
    # no other count rule misfires on the barriers that are right
    wrong = {f.barrier for f in res if f.rule_id in ("tma-full-count", "release-count", "warp-barrier-count")}
    assert len(wrong) <= 1, res


def test_static_only_still_finds_what_needs_no_simulation(seeded):
    for kernel, rule in [("ws_copy_full_count", "tma-full-count"), ("ws_copy_warp_count", "warp-barrier-count"),
                         ("ws_copy_warp_on_tma", "warp-barrier-on-tma"), ("ws_copy_named_threads",
                                                                          "named-barrier-threads")]:
        res, _, _ = _check(getattr(seeded, kernel), simulate=False)
        assert res.sim is None
        assert [f.line for f in res.by_rule(rule)][:1] == [seed_line(rule, kernel)], (kernel, res)


def test_async_dot_below_limits_is_a_finding_not_a_crash(seeded):
    a, b = torch.randn(32, 16).half(), torch.randn(16, 64).half()
    res = wb.check(seeded.small_dot, a, b, torch.empty(32, 64), BM=32, BN=64, BK=16, simulate=False)
    (f,) = res.by_rule("async-dot-shape")
    assert f.line == seed_line("async-dot-shape") and "M must be at least 64" in f.message and ">= 64" in f.fix
    ok = wb.check(seeded.small_dot, torch.randn(64, 16).half(), b, torch.empty(64, 64), BM=64, BN=64, BK=16,
                  simulate=False)
    assert ok.ok and not ok, ok


def _cluster(seeded, leader_only, ready_count):
    x = torch.randn(2 * BLOCK, BLOCK).half()
    d = TensorDescriptor(x, [2 * BLOCK, BLOCK], [BLOCK, 1], [BLOCK, BLOCK])
    return wb.check(seeded.cluster_pair, d, torch.empty(2 * BLOCK, BLOCK).half(), BLOCK=BLOCK,
                    LEADER_ONLY=leader_only, READY_COUNT=ready_count, ctas_per_cga=(2, 1, 1), simulate=False)


def test_two_cta_leader_rules(seeded):
    good = _cluster(seeded, True, 2)
    assert good.ok and not good, good
    peer_expects = _cluster(seeded, False, 2)
    (f,) = peer_expects.by_rule("cta-leader-expect")
    assert f.line == seed_line("cta-leader-expect") and "if is_leader:" in f.fix
    one_count = _cluster(seeded, True, 1)
    (g,) = one_count.by_rule("cta-remote-count")
    assert g.line == seed_line("cta-remote-count") and "arrive_count=2" in g.fix
    assert not peer_expects.by_rule("cta-remote-count") and not one_count.by_rule("cta-leader-expect")
