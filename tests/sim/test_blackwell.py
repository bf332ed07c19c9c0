"""The Blackwell tutorials of the triton-utlx wheel, unchanged, on the CPU simulator (B200), against torch.

TMEM accumulators, tcgen05 MMAs whose completion arrives on mbarriers, tcgen05_commit, the
512-column TMEM budget. Cluster, 2-CTA and CLC tutorials are in test_clusters.py.
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

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


FA = [("blackwell_fa_ws", ()), ("blackwell_fa_ws_pipelined", (False,)),
      ("blackwell_fa_ws_pipelined_persistent", (False, 64, 1))]


@pytest.mark.parametrize("name,extra", FA, ids=[f[0] for f in FA])
def test_flash_attention_tutorial_matches_torch_over_10_schedules(tutorial, name, extra):
    mod = tutorial(name)
    q, k, v = (torch.randn(1, 2, 256, 128, dtype=torch.float16) for _ in range(3))
    res = simulate(mod.attention, q, k, v, 0.5, *extra, gpu="B200", schedules=10)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5)
    torch.testing.assert_close(res.value.float(), ref, atol=1e-2, rtol=1e-2)
    assert res.ok, res
    # P is written into the upper TMEM columns of the QK tile it was computed from (reuse= aliasing)
    assert any(s.name == "local_store" and s.args.get("buffer", "").startswith("p_tiles") for s in res.trace.spans)


@pytest.mark.parametrize("name,extra", FA[1:], ids=[f[0] for f in FA[1:]])
def test_causal_flash_attention_map_elementwise_and_inline_ptx(tutorial, name, extra):
    # the causal mask goes through tl.map_elementwise, the persistent kernel's rescaling through f32x2 PTX
    mod = tutorial(name)
    q, k, v = (torch.randn(1, 1, 256, 128, dtype=torch.float16) for _ in range(3))
    res = simulate(mod.attention, q, k, v, 0.5, True, *extra[1:], gpu="B200", schedules=3)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5,
                                                           is_causal=True)
    torch.testing.assert_close(res.value.float(), ref, atol=1e-2, rtol=1e-2)
    assert res.ok, res


@triton.jit
def _overlay(out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    big = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    halves = tlx.local_alloc((BM, BN // 2), tl.float32, 2, tlx.storage_kind.tmem, reuse=big)
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tlx.local_store(big[0], (rows * 1000 + cols).to(tl.float32))
    right = tlx.local_load(halves[1])            # columns BN/2.. of every row
    offs = rows * (BN // 2) + tl.arange(0, BN // 2)[None, :]
    tl.store(out_ptr + offs, right)


@triton.jit
def _weird_ptx(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("popc.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(x_ptr + tl.arange(0, BLOCK), y)


def test_tmem_aliases_share_columns_not_bytes():
    """A reuse= TMEM allocation overlays columns of the one it reuses: rows stay on their lanes."""
    out = torch.zeros(128, 32)
    res = simulate(_overlay, out, BM=128, BN=64, grid=(1,), gpu="B200")
    ref = (torch.arange(128)[:, None] * 1000 + torch.arange(32, 64)[None, :]).float()
    torch.testing.assert_close(out, ref)
    assert res.ok, res


def test_unknown_inline_ptx_is_a_clear_error():
    with pytest.raises(wb.SimulationError) as ei:
        simulate(_weird_ptx, torch.zeros(32), BLOCK=32, grid=(1,), gpu="B200")
    assert "popc.b32" in ei.value.message and "register_inline_asm" in ei.value.message
    assert "inline_asm_elementwise" in (ei.value.source_line or "")
