"""The attention backward on a GPU against float64 autograd: the defaults per head dim (at D=128 non-causal the split
tail, taken at the first two shapes on a 132-SM H200), causal and not, ragged N, fp16 (bf16 at two), every output
NaN-poisoned first; and ``attention_with_grad`` end to end, as a user calls it (its backward tuned)."""
import math

import pytest
import torch

from tlx_workbench.kernels import attention_bwd as B
from tlx_workbench.kernels._common import sm_count

pytestmark = pytest.mark.gpu
TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2}      # relative Frobenius error (benchmarks' check)
# (1, 17, 1000): 136 K/V blocks, the last head's 8 split in 16 parts on 132 SMs; (2, 9, 1000): 144, the last two
# heads' 16 in 8 parts; the rest the plain kernel (ragged N everywhere but the last)
SHAPES = [(1, 17, 1000, 128), (2, 9, 1000, 128), (1, 2, 2115, 128), (2, 3, 1000, 64), (1, 3, 200, 64),
          (2, 4, 256, 128)]


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written (they stayed NaN)"
    return float((out.double() - ref.double()).norm() / ref.double().norm())


# bf16 at one shape per head dim (each dtype, shape class and causal flag is a compile of its own)
CASES = [(s, torch.float16) for s in SHAPES] + [(SHAPES[1], torch.bfloat16), (SHAPES[3], torch.bfloat16)]


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
@pytest.mark.parametrize("shape,dtype", CASES, ids=lambda x: str(x).replace("torch.", ""))
def test_default_backward_matches_float64(shape, causal, dtype):
    Z, H, N, D = shape
    q, k, v, do = B.make_inputs(shape, dtype, "cuda")
    scale = 1 / math.sqrt(D)
    o, lse, dq_ref, dk_ref, dv_ref = B.reference64(q, k, v, do, causal, scale, device="cuda")
    cfg = B.configs_for(D, causal)[0]
    plan = B.tail_split(Z, H, N, cfg, causal, sm_count())
    if sm_count() == 132 and D == 128 and shape in SHAPES[:2]:
        assert (plan is not None) == (not causal)          # the split tail is what these shapes exercise
    nan = float("nan")
    dk, dv = torch.full_like(k, nan), torch.full_like(v, nan)
    dq32 = torch.full(q.shape, nan, dtype=torch.float32, device="cuda")
    dq, dk, dv = B.launch(q, k, v, o.to(dtype), do, lse.float(), causal, scale, cfg, dq32=dq32, dk=dk, dv=dv)
    for name, got, ref in (("dq", dq, dq_ref), ("dk", dk, dk_ref), ("dv", dv, dv_ref)):
        assert got.dtype == dtype and got.shape == ref.shape
        assert _rel(got, ref) < TOL[dtype], f"{name} {_rel(got, ref):.3g} (plan {plan})"


@pytest.mark.parametrize("causal", [False, True], ids=["noncausal", "causal"])
def test_attention_with_grad_matches_float64(causal):
    shape = (1, 17, 1000, 128)
    q, k, v, do = B.make_inputs(shape, torch.float16, "cuda")
    o, (dq, dk, dv) = B.attention_with_grad(q, k, v, do, causal=causal)
    o_ref, _, dq_ref, dk_ref, dv_ref = B.reference64(q, k, v, do, causal, device="cuda")
    assert _rel(o, o_ref) < 3e-3          # the forward tests' fp16 bound
    for got, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
        assert _rel(got, ref) < TOL[torch.float16]
