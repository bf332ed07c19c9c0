"""fp8 in the simulator: Triton's interpreter keeps fp8 as bytes; loads and widening casts decode them, and
float -> e4m3 / e5m2 casts round as the GPU's cvt.rn.satfinite does (sim/interp_adapter.py, _fp8_downcast):
to nearest even, subnormals included, out-of-range values saturated to the largest finite value, NaN kept."""
import pytest
import torch
import triton
import triton.language as tl

import tlx_workbench as wb


@triton.jit
def _casts(x_ptr, y_ptr, f_ptr, o32_ptr, o8_ptr, o8_from16_ptr, o5_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i).to(tl.float32)
    y = tl.load(y_ptr + i).to(tl.float32)
    f = tl.load(f_ptr + i)
    tl.store(o32_ptr + i, x * 2.0 + y)
    tl.store(o8_ptr + i, f.to(tl.float8e4nv))
    tl.store(o8_from16_ptr + i, f.to(o5_ptr.dtype.element_ty).to(tl.float8e4nv))
    tl.store(o5_ptr + i, f.to(tl.float8e5).to(o5_ptr.dtype.element_ty))


def _gpu_fp8(vals, dt):
    """What cvt.rn.satfinite gives: round to nearest even after clamping to the finite range."""
    big = torch.finfo(dt).max
    return vals.clamp(-big, big).to(dt)


@pytest.mark.parametrize("mid", [torch.float16, torch.bfloat16], ids=["via_fp16", "via_bf16"])
def test_fp8_loads_and_casts_are_values(mid):
    torch.manual_seed(21)
    n = 128
    x, y = torch.randn(n).to(torch.float8_e4m3fn), (4 * torch.randn(n)).to(torch.float8_e5m2)
    # subnormal ties (e4m3 steps by 2^-9 there), values past the finite range, NaN and random values
    special = torch.tensor([3.5 * 2 ** -9, 2.5 * 2 ** -9, -1.5 * 2 ** -9, 1000.0, -1e5, float("inf"), float("nan"),
                            0.0, 464.0, 2 ** -12])
    f = torch.cat([special, 50 * torch.randn(n - len(special))])
    o32, o8, o8h = torch.empty(n), torch.empty(n, dtype=torch.float8_e4m3fn), torch.empty(n, dtype=torch.float8_e4m3fn)
    o5 = torch.empty(n, dtype=mid)
    with wb.simulate(gpu="H200") as sim:
        _casts[(1,)](x, y, f, o32, o8, o8h, o5, n)
    assert sim.result.ok
    assert torch.equal(o32, x.float() * 2 + y.float())
    keep = ~f.isnan()          # NaN stays NaN; its sign bit is not compared
    for got, want in ((o8, _gpu_fp8(f, torch.float8_e4m3fn)),
                      (o8h, _gpu_fp8(f.to(mid).float(), torch.float8_e4m3fn))):
        assert got.float()[~keep].isnan().all()
        assert torch.equal(got.view(torch.uint8)[keep], want.view(torch.uint8)[keep])
    assert o8[3].float() == 448 and o8[4].float() == -448 and o8[5].float() == 448
    assert o8[0].float() == 4 * 2 ** -9 and o8[1].float() == 2 * 2 ** -9      # ties to even, subnormal
    assert torch.equal(o5[keep], _gpu_fp8(f, torch.float8_e5m2).to(mid)[keep]) and o5[~keep].isnan().all()
