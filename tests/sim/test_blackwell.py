"""The Blackwell tutorials of the triton-utlx wheel, unchanged, on the CPU simulator (B200), against torch.

TMEM accumulators, tcgen05 MMAs whose completion arrives on mbarriers, tcgen05_commit, the
512-column TMEM budget. Cluster, 2-CTA and CLC tutorials are in test_clusters.py.
"""
import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.sim import simulate

WS_BASE = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMEM_BUFFERS=2,
               NUM_TMEM_BUFFERS=2, NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=2, NUM_CTAS=1, SPLIT_K=1, INTERLEAVE_EPILOGUE=0)


def _gemm_inputs(m, n, k):
    return torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)


def test_gemm_pipelined_matches_torch_over_10_schedules(tutorial):
    mod = tutorial("blackwell_gemm_pipelined")
    a, b = _gemm_inputs(256, 256, 256)
    res = simulate(mod.matmul, a, b, gpu="B200", schedules=10, config=0)
    torch.testing.assert_close(res.value.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    assert res.ok, res
    assert len(res.schedules) == 10
    # the MMA runs on the tensor cores; its completion is an arrival on dot_bars
    assert any(s.kind == "mma" and s.name == "async_dot" for s in res.trace.spans)
    assert any(e.barrier == "dot_bars" and e.kind == "flip" for e in res.trace.barrier_events)


@pytest.mark.parametrize("extra,schedules", [
    ({}, 10),
    ({"INTERLEAVE_EPILOGUE": 1, "EPILOGUE_SUBTILE": 4}, 3),
    ({"USE_WARP_BARRIER": True, "NUM_MMA_GROUPS": 1, "NUM_TMEM_BUFFERS": 1}, 3),
], ids=["base", "interleaved-epilogue", "warp-barriers"])
def test_gemm_ws_matches_torch(tutorial, extra, schedules):
    mod = tutorial("blackwell_gemm_ws")
    a, b = _gemm_inputs(256, 256, 192)
    res = simulate(mod.matmul, a, b, {**WS_BASE, **extra}, gpu="B200", schedules=schedules)
    torch.testing.assert_close(res.value.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    assert res.ok, res
    assert {l[1] for l in res.trace.lanes()} == {"default", "task1", "task2"}
    # the MMA task's tensor-core time is there, the epilogue's TMEM loads too
    assert res.stats[("task1", 0)]["mma"] > 0
    assert any(s.name == "local_load" and "tmem_buffers" in s.args.get("buffer", "") for s in res.trace.spans)


def test_tmem_budget_is_enforced_with_the_line(tutorial):
    mod = tutorial("blackwell_gemm_ws")
    a, b = _gemm_inputs(256, 256, 128)
    cfg = {**WS_BASE, "BLOCK_SIZE_N": 256, "NUM_TMEM_BUFFERS": 3}     # 6 x 256 columns > 512
    with pytest.raises(wb.SimulationError) as ei:
        simulate(mod.matmul, a, b, cfg, gpu="B200")
    e = ei.value
    assert "TMEM" in e.message and "512" in e.message and "1536" in e.message
    assert "tmem_buffers = tlx.local_alloc(" in (e.source_line or "")


def test_tmem_on_hopper_is_a_clear_error(tutorial):
    mod = tutorial("blackwell_gemm_pipelined")
    a, b = _gemm_inputs(128, 128, 128)
    with pytest.raises(wb.SimulationError) as ei:
        simulate(mod.matmul, a, b, gpu="H100", config=0)
    assert "tensor memory" in ei.value.message and "B200" in ei.value.hint and ei.value.line is not None
