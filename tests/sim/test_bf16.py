"""bf16 on the simulator computes on values, as the GPU does.

Triton's interpreter (which the simulator runs ``tl`` ops on) keeps bf16 as raw uint16 bits and then
multiplies, adds and compares those bits as integers: a bf16 ``tl.dot`` gave ~1e9 for an O(1) result
(the plain-Triton variants of the wheel's HSTU cross attention), a bf16 wgmma GEMM inf. Casts to bf16
truncated where the GPU rounds to nearest even.
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tlx_workbench.sim import simulate


@triton.jit
def _silu_attention(q_ptr, k_ptr, v_ptr, o_ptr, scale, M: tl.constexpr, N: tl.constexpr, D: tl.constexpr):
    # the cross-attention pattern: bf16 Q K^T into float32, silu, P cast to bf16, P V into float32
    rm, rn, rd = tl.arange(0, M), tl.arange(0, N), tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    k = tl.load(k_ptr + rn[:, None] * D + rd[None, :])
    v = tl.load(v_ptr + rn[:, None] * D + rd[None, :])
    s = tl.dot(q, tl.trans(k)) * scale
    p = (s / (1.0 + tl.exp(-s))).to(v.dtype)
    o = tl.dot(p, v)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], o.to(o_ptr.dtype.element_ty))


def _rounding_flip_slack(p64, v):
    """How far O = bf16(P) V may move because the kernel rounds its fp32 P where the float64 reference rounds the exact
    one: a P within ~1e-5 (relative) of the midpoint between two bf16 neighbours may round to either, which moves
    every element of its row of O by that P's bf16 ulp times V's row. The slack per output element; zero for a P
    far from a midpoint, so nearest-even rounding is still checked everywhere else."""
    pb = p64.to(torch.bfloat16).double()
    ulp = torch.exp2(torch.floor(torch.log2(pb.abs().clamp_min(2.0 ** -126))) - 7)
    mid = pb + torch.sign(p64 - pb) * ulp / 2
    near = ((p64 - mid).abs() <= 1e-5 * p64.abs()) & (p64 != pb)
    return (near.double() * ulp) @ v.double().abs()


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_bf16_dot_pattern_matches_float64(out_dtype):
    M, N, D, scale = 32, 64, 32, 0.3
    q, k, v = (torch.randn(n, D).to(torch.bfloat16) for n in (M, N, N))
    out = torch.zeros(M, D, dtype=out_dtype)
    res = simulate(_silu_attention, q, k, v, out, scale, M=M, N=N, D=D, grid=(1,), gpu="H100")
    s = (q.double() @ k.double().T).float() * scale
    p64 = torch.nn.functional.silu(s.double())
    ref = p64.to(torch.bfloat16).double() @ v.double()     # P is rounded to bf16 in the kernel
    assert ref.abs().max() > 1                 # O(1) values: bits multiplied as integers gave ~1e9
    atol, rtol = (1e-3, 1e-4) if out_dtype == torch.float32 else (1e-2, 8e-3)
    err = (out.double() - ref).abs()
    bound = atol + rtol * ref.abs() + _rounding_flip_slack(p64, v)
    assert bool((err <= bound).all()), f"{int((err > bound).sum())} elements off, worst {float((err - bound).max()):.3g}"
    assert res.ok, res


@triton.jit
def _ops(x_ptr, y_ptr, o_ptr, OP: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(x_ptr + r)
    y = tl.load(y_ptr + r)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "const":
        z = x * 3.0 - 1.5
    elif OP == "neg":
        z = -x
    elif OP == "lt":
        z = (x < y).to(tl.float32)
    elif OP == "maximum":
        z = tl.maximum(x, y)
    elif OP == "max":
        z = tl.max(x, 0) + tl.zeros_like(x)
    elif OP == "min":
        z = tl.min(x, 0) + tl.zeros_like(x)
    elif OP == "argmax":
        z = tl.argmax(x, 0) + tl.zeros_like(r)
    elif OP == "sum":
        z = tl.sum(x, 0) + tl.zeros_like(x)
    elif OP == "cumsum":
        z = tl.cumsum(x, 0)
    elif OP == "fma":
        z = tl.fma(x, y, x)
    elif OP == "clamp":
        z = tl.clamp(x, -1.0, 0.5)
    elif OP == "from_int":
        z = (r - N // 2).to(tl.bfloat16) * x
    elif OP == "to_int":
        z = (x * 8.0).to(tl.int32)
    elif OP == "to_fp16":
        z = x.to(tl.float16)
    tl.store(o_ptr + r, z.to(tl.float32))


def _bf16(t):
    return t.to(torch.bfloat16)


OPS = {
    "add": lambda x, y: _bf16(x + y), "sub": lambda x, y: _bf16(x - y), "mul": lambda x, y: _bf16(x * y),
    "const": lambda x, y: _bf16(_bf16(x * 3.0) - 1.5), "neg": lambda x, y: -x, "lt": lambda x, y: (x < y).double(),
    "maximum": lambda x, y: torch.maximum(x, y), "max": lambda x, y: x.max().expand(x.shape),
    "min": lambda x, y: x.min().expand(x.shape), "argmax": lambda x, y: x.argmax().double().expand(x.shape),
    "sum": None, "cumsum": None, "fma": lambda x, y: _bf16(x * y + x), "clamp": lambda x, y: x.clamp(-1.0, 0.5),
    "from_int": lambda x, y: _bf16((torch.arange(x.numel()) - x.numel() // 2).double() * x),
    "to_int": lambda x, y: (x * 8.0).trunc(), "to_fp16": lambda x, y: x.half().double(),
}


@pytest.mark.parametrize("op", list(OPS))
def test_bf16_elementwise_and_reductions_compute_on_values(op):
    n = 64
    x, y = _bf16(torch.randn(n, dtype=torch.float64) * 2), _bf16(torch.randn(n, dtype=torch.float64) * 2)
    out = torch.zeros(n)
    res = simulate(_ops, x, y, out, OP=op, N=n, grid=(1,), gpu="H100")
    xd, yd = x.double(), y.double()
    if op == "sum":           # a bf16 sum: rounded at least once, to bf16
        torch.testing.assert_close(out.double(), xd.sum().expand(n), atol=0.05, rtol=1e-2)
    elif op == "cumsum":
        torch.testing.assert_close(out.double(), xd.cumsum(0), atol=0.05, rtol=1e-2)
    else:
        torch.testing.assert_close(out.double(), OPS[op](xd, yd).double(), atol=0, rtol=0)
    assert res.ok, res


@triton.jit
def _cast(x_ptr, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(o_ptr + r, tl.load(x_ptr + r).to(tl.bfloat16))


def test_float32_to_bf16_rounds_to_nearest_even_like_the_gpu():
    # cvt.rn.bf16.f32: nearest even (the interpreter truncated: half of these were one ulp toward zero)
    x = torch.randn(4096) * 100
    x[:4] = torch.tensor([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, float("inf"), 3.4e38])      # ties to even, inf, overflow
    out = torch.zeros(4096, dtype=torch.bfloat16)
    simulate(_cast, x, out, N=4096, grid=(1,), gpu="H100")
    assert torch.equal(out.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    xn = torch.full((16,), float("nan"))
    outn = torch.zeros(16, dtype=torch.bfloat16)
    simulate(_cast, xn, outn, N=16, grid=(1,), gpu="H100")
    assert torch.isnan(outn).all()


def test_bf16_wgmma_gemm_tutorial(tutorial):
    # Hopper's wgmma on bf16 SMEM operands (the tutorial writes fp16 out)
    mod = tutorial("hopper_gemm_ws")
    a, b = torch.randn(256, 128, dtype=torch.bfloat16), torch.randn(128, 256, dtype=torch.bfloat16)
    res = simulate(mod.matmul, a, b, gpu="H200", schedules=3)
    torch.testing.assert_close(res.value.double(), a.double() @ b.double(), atol=2e-2, rtol=1e-2)
    assert res.ok, res


def test_bf16_numerics_are_undone_after_the_launch():
    from triton.runtime import interpreter
    before = np.array(interpreter.interpreter_builder.binary_op.__func__ is interpreter.InterpreterBuilder.binary_op)
    simulate(_ops, torch.ones(16, dtype=torch.bfloat16), torch.ones(16, dtype=torch.bfloat16), torch.zeros(16),
             OP="add", N=16, grid=(1,), gpu="H100")
    assert "binary_op" not in interpreter.interpreter_builder.__dict__ and bool(before)
    assert interpreter.ReduceOps.sum.__name__ == "sum"
