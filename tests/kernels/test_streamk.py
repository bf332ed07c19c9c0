"""The stream-K GEMM: its work split (every (tile, k-step) done once, fix-up roles consistent), on the CPU
simulator with a few CTAs (all resident at once, as on the GPU) against float64, and on the GPU."""
import itertools

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.errors import DeadlockError
from tlx_workbench.kernels import gemm_streamk as sk


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


# -- the split, on the host ---------------------------------------------------------------------------------
@pytest.mark.parametrize("tiles,k_steps,G", [(512, 64, 132), (40, 9, 132), (33, 16, 132), (9, 7, 4), (8, 4, 3),
                                             (1, 2, 3), (5, 1, 3), (12, 5, 4), (7, 3, 5)])
def test_segments_cover_every_iteration_once(tiles, k_steps, G):
    seen = {}
    per_cta = [sk.sk_segments(tiles, k_steps, G, c) for c in range(G)]
    for c, segs in enumerate(per_cta):
        for i, (kind, tile, k0, k1) in enumerate(segs):
            assert 0 <= k0 < k1 <= k_steps
            if kind == "sk" and k0 > 0:
                # a contributor only ever starts the CTA's stream-K range: one workspace slot per CTA is enough
                assert i == sum(1 for s in segs if s[0] == "dp")
            if kind == "sk" and k0 == 0 and k1 < k_steps:
                assert i == len(segs) - 1      # an owner ends its CTA's range
            for k in range(k0, k1):
                assert (tile, k) not in seen, f"({tile}, {k}) done by CTA {seen[(tile, k)]} and CTA {c}"
                seen[(tile, k)] = c
    assert set(seen) == set(itertools.product(range(tiles), range(k_steps)))
    # the owner's view (as the kernel computes it): the CTAs after it whose non-empty ranges start inside
    # its tile are exactly the tile's contributors
    T = (tiles % G) * k_steps
    for c, segs in enumerate(per_cta):
        if segs and segs[-1][0] == "sk" and segs[-1][2] == 0 and segs[-1][3] < k_steps:
            tile = segs[-1][1] - (tiles - tiles % G)
            found = [d for d in range(c + 1, G) if d * T // G < (tile + 1) * k_steps and (d + 1) * T // G > d * T // G]
            want = [d for d in range(G) for s in per_cta[d] if s[0] == "sk" and s[1] == segs[-1][1] and s[2] > 0]
            assert found == want


def test_last_partial_wave_is_stream_k():
    # 4096^3 with 128 x 256 tiles on 132 SMs: 3 data-parallel waves, then 116 tiles over all 132 CTAs
    segs = sk.sk_segments(512, 64, 132, 5)
    assert [s[1] for s in segs if s[0] == "dp"] == [5, 137, 269]
    assert sum(s[3] - s[2] for s in segs if s[0] == "sk") in (56, 57)


# -- the CPU simulator ----------------------------------------------------------------------------------------
CASES = [
    # 9 tiles on 4 CTAs: 1 stream-K tile of 7 k-steps (K ragged) shared 1 + 2 + 2 + 2: an owner, 3 contributors
    pytest.param("tiny", (300, 136, 200), 4, id="one-sk-tile-three-contributors"),
    # 8 tiles on 3 CTAs: 2 stream-K tiles of 4 k-steps (K ragged): ranges cross a tile boundary
    pytest.param("split_wait0", (200, 200, 104), 3, id="ranges-cross-tiles"),
    # 1 tile of 2 k-steps on 3 CTAs: all stream-K, CTA 0 has an empty range
    pytest.param("tiny", (128, 64, 64), 3, id="empty-range"),
]


@pytest.mark.parametrize("name,shape,G", CASES)
def test_streamk_on_simulator(name, shape, G):
    torch.manual_seed(4)
    M, N, K = shape
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    cfg = sk.SIM_CONFIGS[name]
    # resident=G: every CTA runs at once, as on the GPU (an owner waits for later CTAs' flags)
    with wb.simulate(gpu="H200", seed=0, schedules=2, resident=G) as sim:
        sk.launch(a, b, c, cfg, num_sms=G)
    assert sim.result.ok, sim.result
    assert _rel(c, a.double() @ b.double()) < 2e-3
    # the owners lowered every flag: a second launch on the same workspace gives the same bits
    _, flags = sk.workspace(a.device, G, cfg)
    assert not flags.any()
    c2 = torch.full_like(c, float("nan"))
    with wb.simulate(gpu="H200", seed=1, resident=G):
        sk.launch(a, b, c2, cfg, num_sms=G)
    assert torch.equal(c, c2)


def test_streamk_one_cta_at_a_time_is_a_clear_deadlock():
    # the simulator's default runs CTAs one after another: CTA 0's owner then waits for CTA 1's flag forever
    a, b = torch.randn(300, 200, dtype=torch.float16), torch.randn(200, 136, dtype=torch.float16)
    c = torch.empty(300, 136, dtype=torch.float16)
    with pytest.raises(DeadlockError) as e:
        with wb.simulate(gpu="H200"):
            sk.launch(a, b, c, sk.SIM_CONFIGS["tiny"], num_sms=4)
    assert "atomic_cas" in e.value.detail and "resident=4" in e.value.hint
    assert e.value.file.endswith("gemm_streamk.py")


# -- offline compile for sm_90 ---------------------------------------------------------------------------------
SMEM_LIMIT = 232448   # H100/H200 opt-in SMEM per CTA


@pytest.mark.parametrize("name,dtype", [("default", "bfloat16"), ("default", "float16"), ("tiny", "float16"),
                                        ("split_wait0", "float16")])
def test_streamk_compiles_for_sm90_without_spills(name, dtype):
    from tlx_workbench.compiler import artifacts
    cfg = sk.CONFIGS[0] if name == "default" else sk.SIM_CONFIGS[name]
    k = sk.compile_offline(cfg, dtype=dtype)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= SMEM_LIMIT      # the fix-up stages through the epilogue strips: no scratch
    assert artifacts.resource_usage_from_cubin(k.asm["cubin"]).get("LOCAL", 0) == 0
    # fix-up: one release per warp group after its own 128-thread barrier, a single-thread acquire CAS
    # whose result is shared through the partition's barrier (never a whole-CTA bar.sync 0), .cg loads
    assert "bar.sync \t12, 128" in ptx and "bar.sync \t13, 128" in ptx
    assert ptx.count("atom.global.gpu.release.exch.b32") == 2
    assert ptx.count("atom.global.acquire.gpu.cas.b32") == 2
    assert "ld.global.cg" in ptx
    assert "bar.sync \t0;" not in ptx and "barrier.sync \t0;" not in ptx
    if name == "default":
        # the loader walks data-parallel tiles, then segments: 3 expect-tx arrivals (A halves, B) in each loop
        assert "setmaxnreg.inc.sync.aligned.u32 \t232" in ptx and ptx.count("mbarrier.arrive.expect_tx") == 6


# -- GPU ----------------------------------------------------------------------------------------------------
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 1032, 520), (4104, 136, 1024)], ids=str)
def test_streamk_matches_float64_on_gpu(shape, dtype):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    sk.launch(a, b, c, sk.CONFIGS[0])
    assert _rel(c, a.double() @ b.double()) < TOL[dtype]
    c2 = torch.full_like(c, float("nan"))
    sk.launch(a, b, c2, sk.CONFIGS[0])          # same workspace: every flag was lowered again
    assert torch.equal(c, c2)
