"""``tlx.async_dot_scaled`` with MX operands (mxfp8 e4m3/e5m2, mxfp4 e2m1, mixed) on the simulated B200, against
a torch reference that dequantizes (value x 2^(scale - 127), one e8m0 scale per 32 elements along K).

Operands are laid out as TLX's own tests lay them out: fp4 packed two per byte along K (B as an (N, K/2) buffer
seen through ``local_trans``), scales in SMEM in the 5-D block-scaling layout [1, rows/128, K/128, 2, 256] that
TMA loads, or in TMEM (``tmem_copy`` of that buffer, or ``local_store`` of the logical [rows, K/32] matrix).
The result is in TMEM. (The fp8 x fp8 forms with 2-D SMEM scales are in test_blackwell.py.)
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from tlx_workbench.sim import simulate


@triton.jit
def _mx_dot(a_desc, as_desc, b_desc, bs_desc, as_ptr, bs_ptr, c_ptr, A_FMT: tl.constexpr, B_FMT: tl.constexpr,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SCALES: tl.constexpr):
    REP_M: tl.constexpr = BM // 128
    REP_N: tl.constexpr = BN // 128
    REP_K: tl.constexpr = BK // 128
    A_FP4: tl.constexpr = A_FMT == "e2m1"
    B_FP4: tl.constexpr = B_FMT == "e2m1"
    if A_FP4:
        a_tile = tlx.local_alloc((BM, BK // 2), tl.uint8, 1)
    else:
        a_tile = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), 1)
    if B_FP4:
        b_tile = tlx.local_alloc((BN, BK // 2), tl.uint8, 1)
    else:
        b_tile = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), 1)
    as_smem = tlx.local_alloc((1, REP_M, REP_K, 2, 256), tl.uint8, 1)
    bs_smem = tlx.local_alloc((1, REP_N, REP_K, 2, 256), tl.uint8, 1)
    A_BYTES: tl.constexpr = BM * BK // 2 if A_FP4 else BM * BK
    B_BYTES: tl.constexpr = BN * BK // 2 if B_FP4 else BK * BN
    bars = tlx.alloc_barriers(2)
    tlx.barrier_expect_bytes(bars[0], A_BYTES + B_BYTES + (REP_M + REP_N) * REP_K * 512)
    tlx.async_descriptor_load(a_desc, a_tile[0], [0, 0], bars[0])
    tlx.async_descriptor_load(b_desc, b_tile[0], [0, 0], bars[0])
    tlx.async_descriptor_load(as_desc, as_smem[0], [0, 0, 0, 0, 0], bars[0])
    tlx.async_descriptor_load(bs_desc, bs_smem[0], [0, 0, 0, 0, 0], bars[0])
    tlx.barrier_wait(bars[0], 0)
    if B_FP4:
        b_op = tlx.local_trans(b_tile[0])
    else:
        b_op = b_tile[0]
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    if SCALES == "smem":
        tlx.async_dot_scaled(a_tile[0], b_op, acc[0], as_smem[0], A_FMT, bs_smem[0], B_FMT, use_acc=False,
                             mBarriers=[bars[1]])
    else:
        as_tmem = tlx.local_alloc((BM, BK // 32), tl.uint8, 1, tlx.storage_kind.tmem)
        bs_tmem = tlx.local_alloc((BN, BK // 32), tl.uint8, 1, tlx.storage_kind.tmem)
        if SCALES == "tmem_copy":
            tlx.tmem_copy(as_smem[0], as_tmem[0])
            tlx.tmem_copy(bs_smem[0], bs_tmem[0])
        else:
            rs = tl.arange(0, BK // 32)
            tlx.local_store(as_tmem[0], tl.load(as_ptr + tl.arange(0, BM)[:, None] * (BK // 32) + rs[None, :]))
            tlx.local_store(bs_tmem[0], tl.load(bs_ptr + tl.arange(0, BN)[:, None] * (BK // 32) + rs[None, :]))
        tlx.async_dot_scaled(a_tile[0], b_op, acc[0], as_tmem[0], A_FMT, bs_tmem[0], B_FMT, use_acc=False,
                             mBarriers=[bars[1]])
    tlx.barrier_wait(bars[1], 0)
    rm, rn = tl.arange(0, BM), tl.arange(0, BN)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tlx.local_load(acc[0]))


_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _operand(fmt, rows, k):
    """(what the kernel gets: (rows, k) fp8, or (rows, k/2) packed e2m1 bytes; its float values (rows, k))."""
    if fmt == "e2m1":
        codes = torch.randint(0, 16, (rows, k), dtype=torch.uint8)
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)            # element 2i in the low nibble
        return packed, _E2M1[codes.long()]
    x = (torch.randn(rows, k) * 4).to(_FP8[fmt])
    return x, x.float()


def _block_scaling_5d(s):
    """[rows, K/32] e8m0 scales as [1, rows/128, K/128, 2, 256]: row r, column c of each 128 x 4 block at byte
    (r % 32) * 16 + (r // 32) * 4 + c."""
    rows, cols = s.shape
    out = torch.empty(rows // 128, cols // 4, 512, dtype=torch.uint8)
    for r in range(rows):
        for c in range(cols):
            rr, cc = r % 128, c % 4
            out[r // 128, c // 4, (rr % 32) * 16 + (rr // 32) * 4 + cc] = s[r, c]
    return out.reshape(1, rows // 128, cols // 4, 2, 256)


@pytest.mark.parametrize("a_fmt,b_fmt,k,scales", [
    ("e2m1", "e2m1", 128, "smem"), ("e2m1", "e2m1", 256, "tmem_copy"), ("e2m1", "e2m1", 128, "tmem_store"),
    ("e4m3", "e2m1", 128, "smem"), ("e2m1", "e4m3", 256, "smem"), ("e2m1", "e5m2", 128, "tmem_copy"),
    ("e4m3", "e4m3", 256, "smem"), ("e5m2", "e4m3", 128, "tmem_copy"),
])
def test_async_dot_scaled_mx_matches_dequantized_torch(a_fmt, b_fmt, k, scales):
    M = N = 128
    a, fa = _operand(a_fmt, M, k)
    b_rows, fb_t = _operand(b_fmt, N, k)                         # B as (N, K): K-major, as fp4 needs it
    b = b_rows if b_fmt == "e2m1" else b_rows.view(torch.uint8).T.contiguous().view(_FP8[b_fmt])   # fp8: (K, N)
    a_sc = torch.randint(120, 134, (M, k // 32), dtype=torch.uint8)
    b_sc = torch.randint(120, 134, (N, k // 32), dtype=torch.uint8)
    a5, b5 = _block_scaling_5d(a_sc), _block_scaling_5d(b_sc)
    a_desc = TensorDescriptor.from_tensor(a, list(a.shape))
    b_desc = TensorDescriptor.from_tensor(b, list(b.shape))
    as_desc = TensorDescriptor.from_tensor(a5, list(a5.shape))
    bs_desc = TensorDescriptor.from_tensor(b5, list(b5.shape))
    c = torch.zeros(M, N)
    res = simulate(_mx_dot, a_desc, as_desc, b_desc, bs_desc, a_sc, b_sc, c, A_FMT=a_fmt, B_FMT=b_fmt, BM=M, BN=N,
                   BK=k, SCALES=scales, grid=(1,), gpu="B200")
    assert res.ok, res
    deq_a = fa.double() * torch.exp2(a_sc.double() - 127).repeat_interleave(32, dim=1)
    deq_b = (fb_t.double() * torch.exp2(b_sc.double() - 127).repeat_interleave(32, dim=1)).T
    ref = deq_a @ deq_b
    # one rounding to float32 of an exactly computed sum, against the float64 reference
    bound = 2 ** -23 * ref.abs() + 1e-30
    assert float(((c.double() - ref).abs() - bound).max()) <= 0
    mma = [s for s in res.trace.spans if s.name == "async_dot_scaled" and s.kind == "mma"]
    assert len(mma) == 1 and mma[0].args["k"] == k
    assert any(s.name == "tmem_copy" for s in res.trace.spans) == (scales == "tmem_copy")


def test_mxfp4_runs_at_twice_the_mxfp8_rate():
    from tlx_workbench.sim.timing.cost import cost_model
    cm = cost_model("B200")
    assert cm.mma_cycles(128, 128, 128, 4) * 2 == pytest.approx(cm.mma_cycles(128, 128, 128, 8))
