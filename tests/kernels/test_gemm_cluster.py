"""The 2-CTA cluster GEMM (B multicast): its protocol on the simulator (TLX's own cluster ops), the
inline-PTX form compiled for sm_90 (what Triton must keep giving it: the ``global_smem`` symbol, B's
tensor map as parameter 5, SMEM offsets that do not move), and both against float64 on the GPU."""
import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import gemm_cluster as gc, gemm_ws
from tlx_workbench.kernels._cluster_ptx import B_MAP_PARAM

SMEM_LIMIT = 232448


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


# -- the protocol, on the simulator --------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(gc.SIM_CONFIGS))
@pytest.mark.parametrize("M,num_sms", [(200, 4), (300, 2), (64, 2)])
def test_cluster_protocol_on_simulator(name, M, num_sms):
    # M=300: 3 row tiles, so the second pair's odd CTA computes a tile past M (zeros in, nothing stored);
    # N=264 with share_a's 64-column tiles: 5 column tiles, the same past N; num_sms=2: one cluster walks every
    # pair tile, so the ring wraps and both drains run
    torch.manual_seed(4)
    N, K = 264, 72
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0, schedules=3) as sim:
        gc.launch(a, b, c, gc.SIM_CONFIGS[name], num_sms=num_sms)
    res = sim.result
    assert res.ok, res
    cfg = gc.SIM_CONFIGS[name]
    assert res.cluster_dims == (2, 1, 1) and len(res.ctas) == gc.cluster_ctas(2 * gc.pair_tiles(M, N, cfg), num_sms)
    assert _rel(c, a.double() @ b.double()) < 2e-3
    # each CTA's half of the shared operand (A with share_a, else B) went to both CTAs of the pair
    loads = [s for s in res.trace.spans if s.kind == "tma" and s.args.get("multicast")]
    assert loads


# -- the inline-PTX form, compiled for sm_90 ---------------------------------------------------------------
@pytest.mark.parametrize("cfg", [gc.CONFIGS[0], gc.CONFIGS[1], gc.SMALL_CONFIG], ids=["default", "loader_sync",
                                                                                       "small"])
def test_compiles_for_sm90_with_the_cluster_instructions(cfg):
    from tlx_workbench.compiler import artifacts
    k = gc.compile_offline(cfg)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= SMEM_LIMIT and k.metadata.num_ctas == 1     # compiled as one CTA
    assert artifacts.resource_usage_from_cubin(k.asm["cubin"]).get("LOCAL", 0) == 0
    assert f".param .align 64 .b8 {B_MAP_PARAM}[128]" in ptx
    # one cluster barrier per task (loader + 2 consumer groups), none at the top level
    assert ptx.count("barrier.cluster.wait.acquire.aligned") == 3
    # each CTA multicasts its BN/2 columns of B as 64-column boxes, once per k-step
    assert ptx.count("multicast::cluster") == cfg["BN"] // 2 // 64
    # peer arrivals: the consumers' (4 call sites: peeled step, loop, drain, wait0 path) or the loader's one
    assert ptx.count("mapa.shared::cluster") == (1 if cfg["LOADER_SYNC"] else 4)
    assert "mbarrier.arrive.release.cluster" not in ptx      # cluster-scope release: -22 % on the H200


def test_share_a_compiles_with_a_multicast_of_a_per_box():
    from tlx_workbench.kernels._cluster_ptx import A_MAP_PARAM
    for bk, stages in ((64, 8), (128, 4)):
        cfg = gc._config(BN=64, BK=bk, STAGES=stages, EPI_BUFS=1, SHARE_A=True)
        ptx = gc.compile_offline(cfg).asm["ptx"]
        assert f".param .align 64 .b8 {A_MAP_PARAM}[128]" in ptx
        # each CTA multicasts its half of A's k-slice as 64-column boxes; B is its own (no multicast of B)
        assert ptx.count("multicast::cluster") == bk // 64
        assert ptx.count(f"mov.b64 tmap, {A_MAP_PARAM}") == bk // 64 and f"mov.b64 tmap, {B_MAP_PARAM}" not in ptx


def test_smem_offsets_are_the_allocation_map_and_do_not_move():
    offs = gc.smem_offsets(gc.CONFIGS[1])
    assert set(offs) == {"A_OFF", "B_OFF", "FULL_OFF", "EMPTY_OFF", "PEER_FREE_OFF"}
    # the barriers sit past the rings; every barrier is 8 bytes, STAGES of each
    stages = gc.CONFIGS[1]["STAGES"]
    assert offs["EMPTY_OFF"] - offs["FULL_OFF"] >= 8 * stages and offs["PEER_FREE_OFF"] - offs["EMPTY_OFF"] >= 8 * stages
    assert offs["B_OFF"] + stages * 64 * 256 * 2 <= offs["FULL_OFF"]
    # the A ring (2 * STAGES half tiles of 64 x 64) does not overlap the B ring
    a_end, b_end = offs["A_OFF"] + 2 * stages * 64 * 64 * 2, offs["B_OFF"] + stages * 64 * 256 * 2
    assert a_end <= offs["B_OFF"] or b_end <= offs["A_OFF"]


def test_clustered_launches_pairs_and_refuses_a_foreign_kernel():
    k = gc.compile_offline(gc.SMALL_CONFIG)
    gc.clustered(k)
    assert k.metadata.num_ctas == 2 and k.packed_metadata[1] == 2
    other = gemm_ws.compile_offline(gemm_ws.SIM_CONFIGS["tiny"])
    with pytest.raises(TLXWorkbenchError, match="gemm_cluster_kernel_param_0"):
        gc.clustered(other)
    assert other.metadata.num_ctas == 1


@pytest.mark.parametrize("tiles,sms,ctas", [(512, 132, 128), (4, 4, 4), (2, 132, 2), (1024, 132, 128), (264, 132, 132), (6, 4, 4)])
def test_cluster_cta_count(tiles, sms, ctas):
    assert gc.cluster_ctas(tiles, sms) == ctas


# -- GPU ----------------------------------------------------------------------------------------------------
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1000, 1032, 520), (4104, 136, 1024), (64, 264, 40), (2048, 2048, 2048)], ids=str)
@pytest.mark.parametrize("i", range(len(gc.CONFIGS)))
def test_cluster_gemm_matches_float64_on_gpu(i, shape, dtype):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    gc.launch(a, b, c, gc.CONFIGS[i])
    assert _rel(c, a.double() @ b.double()) < TOL[dtype]
    c2 = torch.full_like(c, float("nan"))
    gc.launch(a, b, c2, gc.CONFIGS[i])
    assert torch.equal(c, c2)
