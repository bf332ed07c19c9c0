"""``tlx.stoch_round`` on the simulator (B200), bit for bit against a torch reference of ``cvt.rs.satfinite``.

The reference is written on the float32 bit patterns (add the random bits at the discarded bits, truncate), a
different route from the simulator's (values); packs of 4 (fp8) or 2 (16-bit) consecutive elements share one
random register, ``r0 ^ (r1 << 1) ^ (r2 << 2) ^ (r3 << 3)``, as TLX's lowering builds it. The installed compiler
refuses stoch_round on sm_100 ("Not implemented"; sm_90: the frontend's "requires compute capability >= 100"), so
these kernels are simulate-only here.
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from tlx_workbench.errors import SimulationError
from tlx_workbench.sim import simulate


@triton.jit
def _stoch(x_ptr, r_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    y = tlx.stoch_round(tl.load(x_ptr + offs), tlx.dtype_of(y_ptr), tl.load(r_ptr + offs))
    tl.store(y_ptr + offs, y)


# dtype -> (discarded mantissa bits of a normal result, random bits used, pack size, smallest normal)
_FMT = {torch.bfloat16: (16, 16, 2, 2.0 ** -126), torch.float16: (13, 13, 2, 2.0 ** -14),
        torch.float8_e4m3fn: (20, 16, 4, 2.0 ** -6), torch.float8_e5m2: (21, 16, 4, 2.0 ** -14)}


def _random_bits_per_element(rbits, pack, nbits):
    """Each element's random bits: its pack's register, upper half for the first half of the pack."""
    flat = rbits.reshape(-1).to(torch.int64) & 0xFFFFFFFF
    out = torch.empty_like(flat)
    for p in range(0, flat.numel(), pack):
        reg = 0
        for j in range(pack):
            reg ^= (int(flat[p + j]) << j) & 0xFFFFFFFF
        for j in range(pack):
            out[p + j] = ((reg >> 16) if j < pack // 2 else reg) & 0xFFFF & ((1 << nbits) - 1)
    return out.reshape(rbits.shape)


def _reference(x, rbits, dtype):
    shift, nbits, pack, _ = _FMT[dtype]
    rnd = _random_bits_per_element(rbits, pack, nbits)
    u = x.view(torch.int32).to(torch.int64)
    mag = u & 0x7FFFFFFF
    # add the random bits at the top of the discarded bits, then cut them off (truncation toward zero)
    cut = ((mag + (rnd << (shift - nbits))) >> shift) << shift
    val = cut.to(torch.int32).view(torch.float32)
    val = torch.where(u < 0, -val, val)
    big = torch.finfo(dtype).max
    return val.clamp(-big, big).to(dtype)             # exact: val is representable in dtype (or saturated)


@pytest.mark.parametrize("dtype", list(_FMT), ids=lambda d: str(d).split(".")[-1])
def test_stoch_round_matches_cvt_rs_bit_for_bit(dtype):
    R, C = 8, 64
    _, _, _, tiny = _FMT[dtype]
    x = torch.randn(R, C) * {torch.float8_e4m3fn: 30, torch.float8_e5m2: 3e3}.get(dtype, 1.0)
    x[0, :4] = torch.tensor([1e30, -1e30, float("inf"), -float("inf")]) if dtype != torch.bfloat16 else x[0, :4]
    x = torch.where(x.abs() < tiny, torch.full_like(x, tiny) * 1.5, x)    # normal results (subnormals: below)
    rbits = torch.randint(-2 ** 31, 2 ** 31 - 1, (R, C), dtype=torch.int32)
    y = torch.empty(R, C, dtype=dtype)
    res = simulate(_stoch, x, rbits, y, R=R, C=C, grid=(1,), gpu="B200")
    assert res.ok, res
    want = _reference(x, rbits, dtype)
    assert torch.equal(y.view(torch.uint8) if dtype.itemsize == 1 else y.view(torch.int16),
                       want.view(torch.uint8) if dtype.itemsize == 1 else want.view(torch.int16))
    # one of the two neighbours of x, never further: less than one step of the result's binade away
    mbits = {torch.bfloat16: 7, torch.float16: 10, torch.float8_e4m3fn: 3, torch.float8_e5m2: 2}[dtype]
    _, e = torch.frexp(x.abs())
    step = torch.ldexp(torch.ones_like(x), e - 1 - mbits)
    inside = x.abs() < torch.finfo(dtype).max
    assert ((y.float() - x).abs()[inside] < step[inside]).all()


def test_stoch_round_is_unbiased_over_random_bits():
    n = 1 << 14
    x = torch.full((1, n), 1.0 + 2.0 ** -10 * 0.3)        # 30% of the way from 1 to the next bf16... and e4m3
    rbits = torch.randint(-2 ** 31, 2 ** 31 - 1, (1, n), dtype=torch.int32)
    for dtype, up in ((torch.bfloat16, 1.0 + 2.0 ** -7), (torch.float8_e4m3fn, 1.125)):
        y = torch.empty(1, n, dtype=dtype)
        simulate(_stoch, x, rbits, y, R=1, C=n, grid=(1,), gpu="B200")
        got = set(y.float().unique().tolist())
        assert got <= {1.0, up}, got
        frac = float((y.float() == up).double().mean())
        want = (float(x[0, 0]) - 1.0) / (up - 1.0)
        assert abs(frac - want) < 0.02, (dtype, frac, want)


def test_stoch_round_subnormal_result_keeps_the_random_bits_below_its_last_bit():
    # e4m3's subnormals are multiples of 2**-9; 0.25 * 2**-9 with random bits just past 3/4 of that step rounds up
    ulp = 2.0 ** -9
    x = torch.tensor([[0.25 * ulp, 0.25 * ulp, 0.25 * ulp, 0.25 * ulp]])
    rb = torch.tensor([[0, 0, 0xC001, 0]], dtype=torch.int32)   # e, f share the register's low half: r2 << 2
    y = torch.empty(1, 4, dtype=torch.float8_e4m3fn)
    simulate(_stoch, x, rb, y, R=1, C=4, grid=(1,), gpu="B200")
    reg = (0xC001 << 2) & 0xFFFF                              # 0x0004: too little to reach the next step
    assert reg == 0x0004
    assert y.float().tolist() == [[0.0, 0.0, 0.0, 0.0]]
    rb = torch.tensor([[0, 0, 0x3001, 0]], dtype=torch.int32)  # (0x3001 << 2) & 0xFFFF = 0xC004 >= 0.75 * 2**16
    simulate(_stoch, x, rb, y, R=1, C=4, grid=(1,), gpu="B200")
    assert y.float().tolist() == [[0.0, 0.0, ulp, ulp]]


def test_stoch_round_on_hopper_is_the_frontends_refusal():
    x, rb, y = torch.randn(1, 4), torch.zeros(1, 4, dtype=torch.int32), torch.empty(1, 4, dtype=torch.bfloat16)
    with pytest.raises(SimulationError, match="compute capability >= 100"):
        simulate(_stoch, x, rb, y, R=1, C=4, grid=(1,), gpu="H200")
