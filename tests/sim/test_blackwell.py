"""The Blackwell tutorials of the triton-utlx wheel, unchanged, on the CPU simulator (B200), against torch.

TMEM accumulators, tcgen05 MMAs whose completion arrives on mbarriers, tcgen05_commit, the
512-column TMEM budget. Cluster, 2-CTA and CLC tutorials are in test_clusters.py.
"""
import dataclasses

import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.language.extra import libdevice
from triton.language.extra.libdevice import fast_dividef

import tlx_workbench as wb
from tlx_workbench.sim import simulate
from tlx_workbench.target import GPU_MODELS

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


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_persistent_flash_attention_on_one_sm_runs_every_tile(tutorial, causal):
    # grid = min(SMs, tiles): on a one-SM B200 the single CTA loops over both tiles (and their barrier phases)
    mod = tutorial("blackwell_fa_ws_persistent")
    q, k, v = (torch.randn(1, 2, 256, 128, dtype=torch.float16) for _ in range(3))
    one_sm = dataclasses.replace(GPU_MODELS["B200"], sm_count=1)
    res = simulate(mod.attention, q, k, v, 0.5, causal, gpu=one_sm, schedules=3)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5,
                                                           is_causal=causal)
    torch.testing.assert_close(res.value.float(), ref, atol=1e-2, rtol=1e-2)
    assert res.ok, res
    assert res.grid == (1, 1, 1)


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


@triton.jit
def _one_tile_mma(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    """One tile: A, B into SMEM, a tcgen05 MMA into TMEM, read back. BUG="no_wait": reads the accumulator
    without waiting for the MMA's barrier; BUG="reuse_b": overwrites B before the MMA has released it."""
    a_s = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_s = tlx.local_alloc((BK, BN), tl.float16, 1)
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    done = tlx.alloc_barriers(1, arrive_count=1)
    rk = tl.arange(0, BK)
    tlx.local_store(a_s[0], tl.load(a_ptr + tl.arange(0, BM)[:, None] * BK + rk[None, :]))
    tlx.local_store(b_s[0], tl.load(b_ptr + rk[:, None] * BN + tl.arange(0, BN)[None, :]))
    tlx.fence_async_shared()
    tlx.async_dot(a_s[0], b_s[0], acc[0], use_acc=False, mBarriers=[done[0]])
    if BUG == "reuse_b":
        tlx.local_store(b_s[0], tl.zeros((BK, BN), tl.float16))  # BUG: the MMA may still read B
    if BUG != "no_wait":
        tlx.barrier_wait(done[0], 0)
    c = tlx.local_load(acc[0])
    tl.store(c_ptr + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], c)


@pytest.mark.parametrize("bug", ["", "no_wait", "reuse_b"])
def test_tmem_and_tcgen05_races(bug):
    a = torch.randn(128, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    c = torch.zeros(128, 128)
    res = simulate(_one_tile_mma, a, b, c, BM=128, BN=128, BK=64, BUG=bug, grid=(1,), gpu="B200", schedules=3)
    src = open(__file__).read().splitlines()
    line = lambda text: next(i + 1 for i, l in enumerate(src) if text in l)  # noqa: E731
    mma = line("tlx.async_dot(a_s[0], b_s[0], acc[0]")
    if not bug:
        torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)
        assert res.ok, res
    elif bug == "no_wait":
        r = [f for f in res.races if "acc[0]" in f.message]
        assert r and {r[0].line, r[0].other_line} == {line("c = tlx.local_load(acc[0])"), mma}, res.findings
    else:
        r = [f for f in res.races if "b_s[0]" in f.message]
        assert r and {r[0].line, r[0].other_line} == {line("# BUG: the MMA may still read B"), mma}, res.findings


@triton.jit
def _scaled_mma(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                A_FMT: tl.constexpr, B_FMT: tl.constexpr, SCALES_IN_TMEM: tl.constexpr = False):
    a_s = tlx.local_alloc((BM, BK), tlx.dtype_of(a_ptr), 1)
    b_s = tlx.local_alloc((BK, BN), tlx.dtype_of(b_ptr), 1)
    as_s = tlx.local_alloc((BM, BK // 32), tl.uint8, 1)
    bs_s = tlx.local_alloc((BN, BK // 32), tl.uint8, 1)
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    done = tlx.alloc_barriers(1, arrive_count=1)
    rm, rn, rk, rs = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK), tl.arange(0, BK // 32)
    tlx.local_store(a_s[0], tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))
    tlx.local_store(b_s[0], tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    tlx.local_store(as_s[0], tl.load(as_ptr + rm[:, None] * (BK // 32) + rs[None, :]))
    tlx.local_store(bs_s[0], tl.load(bs_ptr + rn[:, None] * (BK // 32) + rs[None, :]))
    tlx.fence_async_shared()
    if SCALES_IN_TMEM:
        # tcgen05.cp the scales into TMEM; the MMA after it (same tcgen05 pipeline) reads them there
        as_t = tlx.local_alloc((BM, BK // 32), tl.uint8, 1, tlx.storage_kind.tmem)
        bs_t = tlx.local_alloc((BN, BK // 32), tl.uint8, 1, tlx.storage_kind.tmem)
        tlx.tmem_copy(as_s[0], as_t[0])
        tlx.tmem_copy(bs_s[0], bs_t[0])
        tlx.async_dot_scaled(a_s[0], b_s[0], acc[0], as_t[0], A_FMT, bs_t[0], B_FMT, use_acc=False,
                             mBarriers=[done[0]])
    else:
        tlx.async_dot_scaled(a_s[0], b_s[0], acc[0], as_s[0], A_FMT, bs_s[0], B_FMT, use_acc=False,
                             mBarriers=[done[0]])
    tlx.barrier_wait(done[0], 0)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tlx.local_load(acc[0]))


@pytest.mark.parametrize("a_fmt,b_fmt,tmem", [("e4m3", "e4m3", False), ("e5m2", "e5m2", False),
                                              ("e4m3", "e5m2", False), ("e4m3", "e4m3", True)],
                         ids=["e4m3", "e5m2", "mixed", "scales-tmem_copy"])
def test_async_dot_scaled_mx_fp8(a_fmt, b_fmt, tmem):
    tdt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    M, N, K = 128, 128, 128
    a = (torch.randn(M, K) * 4).to(tdt[a_fmt])
    b = (torch.randn(K, N) * 4).to(tdt[b_fmt])
    a_sc = torch.randint(120, 134, (M, K // 32), dtype=torch.uint8)     # e8m0: 2 ** (s - 127)
    b_sc = torch.randint(120, 134, (N, K // 32), dtype=torch.uint8)
    c = torch.zeros(M, N)
    res = simulate(_scaled_mma, a, a_sc, b, b_sc, c, BM=M, BN=N, BK=K, A_FMT=a_fmt, B_FMT=b_fmt,
                   SCALES_IN_TMEM=tmem, grid=(1,), gpu="B200")
    deq_a = a.float() * torch.exp2(a_sc.float() - 127).repeat_interleave(32, dim=1)
    deq_b = b.float() * torch.exp2(b_sc.float() - 127).repeat_interleave(32, dim=1).T
    # float32 sums of 128 products in another order than the reference: the error is bounded by the
    # sum of the terms' magnitudes (not by the result's, which cancellation can make tiny)
    ref = deq_a.double() @ deq_b.double()
    bound = 2e-5 * (deq_a.abs().double() @ deq_b.abs().double()) + 1e-3
    worst = float(((c.double() - ref).abs() - bound).max())
    assert worst <= 0, f"{worst} past the float32 accumulation bound"
    assert res.ok, res
    assert any(s.name == "async_dot_scaled" for s in res.trace.spans)
    assert any(s.name == "tmem_copy" for s in res.trace.spans) == tmem


def test_b200_cost_model_streams_and_multiplies_faster_than_h100():
    # both from the documented estimates (the H100's calibration file aside): the B200's figures are faster
    from tlx_workbench.sim.timing.cost import CostModel, cost_model
    from tlx_workbench.target import gpu_model
    h, b = CostModel(gpu_model("H100")), cost_model("B200")
    assert b.tma_transfer(1 << 20) < h.tma_transfer(1 << 20)
    assert b.mma_cycles(128, 128, 64, 16) < h.mma_cycles(128, 128, 64, 16)
    assert b.gpu.tmem_columns == 512 and h.gpu.tmem_columns == 0


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


def _hstu_inputs(lens_kv, lens_q, H=2, D=128):
    so = torch.zeros(len(lens_kv) + 1, dtype=torch.int64)
    so[1:] = torch.cumsum(torch.tensor(lens_kv), 0)
    soq = torch.zeros(len(lens_q) + 1, dtype=torch.int64)
    soq[1:] = torch.cumsum(torch.tensor(lens_q), 0)
    q = torch.empty(int(soq[-1]), H, D, dtype=torch.bfloat16).uniform_(-0.1, 0.1)
    k = torch.empty(int(so[-1]), H, D, dtype=torch.bfloat16).uniform_(-0.1, 0.1)
    v = torch.empty(int(so[-1]), H, D, dtype=torch.bfloat16).uniform_(-0.1, 0.1)
    return q, k, v, so, soq


def _hstu_reference(q, k, v, so, soq, alpha, max_seq_len):
    """HSTU cross attention: per sequence and head, silu(alpha Q K^T) V / max_seq_len, in float64."""
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[2], dtype=torch.float64)
    for b in range(len(so) - 1):
        qs, ks = slice(soq[b], soq[b + 1]), slice(so[b], so[b + 1])
        for h in range(q.shape[1]):
            s = alpha * q[qs, h].double() @ k[ks, h].double().T
            out[qs, h] = torch.nn.functional.silu(s) @ v[ks, h].double() / max_seq_len
    return out


@pytest.mark.parametrize("variant", ["tlx_single_q", "tlx_pipeline", "triton", "triton_dyn_spec"])
def test_hstu_cross_attention_tutorial_matches_torch(tutorial, variant):
    # jagged sequences (uneven lengths, partial tiles); libdevice.fast_dividef and tanh.approx PTX on numpy;
    # the plain-Triton variants' bf16 tl.dot (Triton's interpreter multiplies the bits: ~7e8, see test_bf16.py)
    mod = tutorial("blackwell-cross-attention")
    lens_kv, lens_q = (200, 96), (40, 17)
    q, k, v, so, soq = _hstu_inputs(lens_kv, lens_q)
    max_seq_len, alpha = max(lens_kv), 1.0 / 128 ** 0.5
    res = simulate(mod.hstu_cross_mha, max_seq_len, alpha, q, k, v, so, soq, torch.tensor(1.0 / max_seq_len),
                   variant, max_q_len=max(lens_q), gpu="B200", schedules=3)
    ref = _hstu_reference(q, k, v, so, soq, alpha, max_seq_len)
    torch.testing.assert_close(res.value.double(), ref, atol=2e-7, rtol=1e-2)     # outputs ~3e-5, bf16
    assert res.ok, res


@triton.jit
def _libdevice_ops(x_ptr, y_ptr, BLOCK: tl.constexpr, UNKNOWN: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = libdevice.rsqrt(x) + fast_dividef(x, x + 1.0)
    if UNKNOWN:
        y = libdevice.cyl_bessel_i0(x)
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


def test_libdevice_functions_run_on_numpy_and_unknown_ones_name_the_line():
    x = torch.rand(64) + 0.5
    y = torch.zeros(64)
    res = simulate(_libdevice_ops, x, y, BLOCK=64, UNKNOWN=False, grid=(1,), gpu="B200")
    torch.testing.assert_close(y, x.rsqrt() + x / (x + 1))
    assert res.ok, res
    with pytest.raises(wb.SimulationError) as ei:
        simulate(_libdevice_ops, x, y, BLOCK=64, UNKNOWN=True, grid=(1,), gpu="B200")
    assert "libdevice.cyl_bessel_i0" in ei.value.message and "register_libdevice" in ei.value.hint
    assert "libdevice.cyl_bessel_i0(x)" in (ei.value.source_line or "")


@triton.jit
def _tmem_packed_p(out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    s = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    rows = tl.arange(0, BM)[:, None]
    tlx.local_store(s[0], (rows * 1000 + tl.arange(0, BN)[None, :]).to(tl.float32))
    right = tlx.subslice(s[0], BN // 2, BN // 2)
    p_view = tlx.local_reinterpret(right, tl.float16)        # P written over the right half of S, packed
    tlx.local_store(p_view, (rows + tl.arange(0, BN // 2)[None, :]).to(tl.float16))
    p = tlx.local_load(p_view).to(tl.float32)
    left = tlx.local_load(tlx.subslice(s[0], 0, BN // 2))
    offs = rows * BN + tl.arange(0, BN // 2)[None, :]
    tl.store(out_ptr + offs, left)
    tl.store(out_ptr + offs + BN // 2, p)


def test_tmem_column_slice_reinterpreted_as_16_bit_packs_two_values_per_column():
    # what blackwell-gdpa does: S in float32 columns, P (bf16/fp16) written over a column slice of it
    out = torch.zeros(128, 64)
    res = simulate(_tmem_packed_p, out, BM=128, BN=64, grid=(1,), gpu="B200")
    rows = torch.arange(128)[:, None]
    torch.testing.assert_close(out[:, :32], (rows * 1000 + torch.arange(32)[None, :]).float())
    torch.testing.assert_close(out[:, 32:], (rows + torch.arange(32)[None, :]).float())
    assert res.ok, res


@pytest.mark.filterwarnings("ignore::RuntimeWarning")        # the racy schedule feeds NaNs to later MMAs
def test_gdpa_tutorial_epilogue_reads_the_accumulator_without_waiting(tutorial):
    # blackwell-gdpa's epilogue loads O from TMEM with the wait for the P V MMA commented out ("FIXME: wait till
    # o0 is done"): the simulator reports the race between that load and the MMA, on both O halves
    mod = tutorial("blackwell-gdpa")
    lq, lk = [150, 70], [160, 160]                 # K/V dense: its descriptor spans max_seq_len_kv rows a sequence
    qo, ko = (torch.tensor([0, *torch.tensor(x).cumsum(0).tolist()], dtype=torch.int32) for x in (lq, lk))
    q = (torch.rand(int(qo[-1]), 2, 128) - 0.5).to(torch.bfloat16)
    k, v = ((torch.rand(int(ko[-1]), 2, 128) - 0.5).to(torch.bfloat16) for _ in range(2))
    res = simulate(mod.gdpa_forward_tlx, q, k, v, qo, ko, max(lq), max(lk), gpu="B200", activation="fast_gelu")
    src = open(mod.__file__).read().splitlines()
    load_o0 = next(i + 1 for i, l in enumerate(src) if "o0 = tlx.local_load(o0_view)" in l)
    pairs = {frozenset((f.line, f.other_line)) for f in res.races}
    assert any(load_o0 in p for p in pairs), res.findings
    assert any("o0_buf" in f.message for f in res.races) and any("o1_buf" in f.message for f in res.races)
