"""two_ctas MMA (sm_100) needs M = 128 rows of A per CTA: the seeded pair_mma with a 64-row A tile
gives the two-ctas-m finding at its async_dot (from the compiler's rejection, or from the source when
the compiler stops earlier at a remote arrival); the 128-row form gives none and runs correctly on the
simulator."""
import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb
from tlx_workbench.sim import simulate

from check_helpers import HERE, seed_line

BN, BK = 128, 64


def _args(bm):
    a = torch.randn(2 * bm, BK, dtype=torch.float16)
    b = torch.randn(BK, BN, dtype=torch.float16)
    c = torch.zeros(2 * bm, BN)
    ad = TensorDescriptor(a, list(a.shape), [BK, 1], [bm, BK])
    bd = TensorDescriptor(b, list(b.shape), [BN, 1], [BK, BN // 2])
    return a, b, c, ad, bd


def _check(seeded, bm, remote):
    _, _, c, ad, bd = _args(bm)
    return wb.check(seeded.pair_mma, ad, bd, c, BM=bm, BN=BN, BK=BK, REMOTE=remote, ctas_per_cga=(2, 1, 1),
                    target="sm_100")


def _alloc_line():
    lines = (HERE / "seeded_kernels.py").read_text().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("def pair_mma("))
    return next(i + 1 for i in range(start, len(lines)) if "a_smem = tlx.local_alloc((BM, BK)" in lines[i])


@pytest.mark.parametrize("remote", [False, True], ids=["compiler-rejects", "source-rule"])
def test_64_rows_per_cta_is_found_at_the_mma(seeded, remote):
    res = _check(seeded, 64, remote)
    (f,) = res.by_rule("two-ctas-m")
    assert f.line == seed_line("two-ctas-m", "pair_mma"), f
    assert (f.file, _alloc_line()) in f.lines, f            # and the allocation that sets M
    assert "M=64" in f.message and "128 per CTA" in f.message
    assert f.fix.startswith("BM = 128 per CTA") and f"line {_alloc_line()}" in f.fix, f.fix
    assert not res.ok and "None" not in f.text()


@pytest.mark.parametrize("remote", [False, True], ids=["cluster-barrier", "remote-arrive"])
def test_128_rows_per_cta_gives_no_finding(seeded, remote):
    res = _check(seeded, 128, remote)
    assert not res.by_rule("two-ctas-m") and res.ok, res


def test_128_rows_per_cta_runs_correctly_and_64_is_refused_on_the_simulator(seeded):
    a, b, c, ad, bd = _args(128)
    res = simulate(seeded.pair_mma, ad, bd, c, BM=128, BN=BN, BK=BK, REMOTE=True, grid=(2,), ctas_per_cga=(2, 1, 1),
                   gpu="B200", on_deadlock="return")
    assert res.ok, res
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
    _, _, c64, ad64, bd64 = _args(64)
    with pytest.raises(wb.SimulationError) as ei:
        simulate(seeded.pair_mma, ad64, bd64, c64, BM=64, BN=BN, BK=BK, REMOTE=True, grid=(2,),
                 ctas_per_cga=(2, 1, 1), gpu="B200")
    assert ei.value.line == seed_line("two-ctas-m", "pair_mma")
