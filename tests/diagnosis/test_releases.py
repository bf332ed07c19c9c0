"""What each release barrier guards, read off a real run (sim/diagnosis/releases.py): on the clean kernels every release
pays for a retired read and none is left unpaid; the seeded wrong-slot release is the one early release."""
import seeded_bugs as sb

from tlx_workbench.sim.diagnosis.releases import Releases


def _run(kernel, module):
    res, pair = sb.KERNELS[kernel].run(module, schedules=1)
    return res, pair


def test_our_gemm_ws_empty_slots_guard_their_ring_buffers_and_every_release_pays():
    res, pair = _run("gemm_ws", sb.clean_copy("gemm_ws"))
    assert res.ok and not sb._wrong(pair)
    rel = Releases(res.trace, {0})
    # empty[s] guards the two A halves and B of ring slot s; the TMA full barriers guard nothing
    assert rel.guards and all(k[1] == "empty" for k in rel.guards), sorted(rel.guards)
    assert set(rel.guards[(0, "empty", 0)]) == {"a_ring[0]", "a_ring[1]", "b_ring[0]"}
    assert set(rel.guards[(0, "empty", 1)]) == {"a_ring[2]", "a_ring[3]", "b_ring[1]"}
    assert rel.releases and all(r.verdict == "ok" for r in rel.releases), [r for r in rel.releases
                                                                           if r.verdict != "ok"][:3]
    assert not any(rel.debtors(k) for k in rel.guards)
    # both consumer groups read what each slot guards, and each pays after async_dot_wait retired its wgmma
    assert {l[1:] for l in rel.readers((0, "empty", 0))} == {("task1", 0), ("task1", 1)}
    assert all(p.retired_line is not None for r in rel.releases for p in r.paid)


def test_the_tutorial_gemm_releases_pay_every_read_and_the_wrong_slot_is_early():
    res, _ = _run("hopper_gemm_ws", sb.clean_copy("hopper_gemm_ws"))
    rel = Releases(res.trace, {0})
    assert {k[1] for k in rel.guards} == {"bars_empty_a", "bars_empty_b"}
    assert all(r.verdict == "ok" for r in rel.releases) and not any(rel.debtors(k) for k in rel.guards)
    s = sb.seeded_copy(next(b for b in sb.BUGS if b.id == "o-release-wrong-slot"))
    res, _ = _run("gemm_ws", s.module)
    rel = Releases(res.trace, {0})
    bad = [r for r in rel.releases if r.verdict != "ok"]
    assert bad and all(r.line == s.line and r.verdict == "early" for r in bad), bad
    assert rel.debtors((0, "empty", 0))
