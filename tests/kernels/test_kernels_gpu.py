"""Our kernels against float64 on fresh random inputs, poisoned outputs, many shapes (ragged too)."""
import math

import pytest
import torch

from tlx_workbench.kernels import attention, gemm_pingpong, gemm_pipelined, gemm_ws
from tlx_workbench.kernels._common import sm_count

pytestmark = pytest.mark.gpu
TOL = {torch.float16: 2e-3, torch.bfloat16: 1.2e-2}
SHAPES = [(512, 512, 512), (1000, 1032, 520), (64, 264, 40), (136, 3000, 776), (1, 8, 8)]


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("mod", [gemm_ws, gemm_pingpong, gemm_pipelined], ids=lambda m: m.__name__.rsplit(".")[-1])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gemm_matches_float64(mod, dtype, shape):
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    mod.launch(a, b, c, mod.CONFIGS[0])
    assert _rel(c, a.double() @ b.double()) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", SHAPES + [(1024, 1024, 1024), (1000, 2056, 1032)], ids=str)
def test_gemm_ws_small_problem_config_matches_float64(dtype, shape):
    # the space's last config: 128x64 tiles, 8 stages, no setmaxnreg (what one-wave problems tune to)
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=dtype)
    b = torch.randn(K, N, device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    gemm_ws.launch(a, b, c, gemm_ws.CONFIGS[-1])
    assert _rel(c, a.double() @ b.double()) < TOL[dtype]


def test_gemm_autotuning_launcher():
    a = torch.randn(768, 520, device="cuda", dtype=torch.float16)
    b = torch.randn(520, 1024, device="cuda", dtype=torch.float16)
    assert _rel(gemm_ws.matmul(a, b), a.double() @ b.double()) < TOL[torch.float16]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1, 2, 200, 64), (2, 3, 1000, 64), (1, 16, 2048, 64)], ids=str)
def test_attention_d64_default_three_groups_matches_float64(shape, dtype):
    """D=64's default config: three consumer groups (BM=192, ragged query tiles at every N
    here), persistent, several tiles per CTA at the largest shape."""
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    scale = 1 / math.sqrt(shape[-1])
    cfg = attention.configs_for(64)[0]
    assert cfg.get("GROUPS") == 3
    attention.launch(q, k, v, o, False, scale, cfg)
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    assert _rel(o, torch.softmax(s, -1) @ v.double()) < TOL[dtype] * 1.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1, 3, 200, 128), (2, 16, 2048, 128), (1, 5, 1000, 64)], ids=str)
def test_attention_causal_default_zigzag_schedule_matches_float64(shape, dtype):
    """Causal default per head dim: persistent, zig-zag pairs of query tiles (odd tile counts, several
    pairs per CTA); at D=64 with the softmax pinned under P V (PIN_SOFTMAX + P_LATE)."""
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    scale = 1 / math.sqrt(shape[-1])
    cfg = attention.configs_for(shape[-1], causal=True)[0]
    assert cfg.get("ZIGZAG") and cfg.get("PIN_SOFTMAX", False) == (shape[-1] == 64)
    attention.launch(q, k, v, o, True, scale, cfg)
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    s = s.masked_fill(torch.ones(shape[2], shape[2], dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    assert _rel(o, torch.softmax(s, -1) @ v.double()) < TOL[dtype] * 1.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 256, 128), (1, 2, 200, 64), (1, 1, 1000, 128), (2, 2, 128, 64)], ids=str)
def test_attention_matches_float64(shape, causal, dtype):
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    scale = 1 / math.sqrt(shape[-1])
    attention.launch(q, k, v, o, causal, scale, attention.CONFIGS[0])
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(torch.ones(shape[2], shape[2], dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    assert _rel(o, torch.softmax(s, -1) @ v.double()) < TOL[dtype] * 1.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(1, 17, 1000, 128), (2, 9, 1000, 128), (1, 5, 2115, 128)], ids=str)
def test_attention_default_split_tail_matches_float64_with_its_lse(shape, dtype):
    """The D=128 non-causal default: persistent with its last partial wave split over K/V (SPLIT_TAIL; on a 132-SM
    H200 the first two shapes leave 4 and 12 tiles to split), O and lse NaN-poisoned, lse against float64 too."""
    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full(shape[:3], float("nan"), dtype=torch.float32, device="cuda")
    scale = 1 / math.sqrt(shape[-1])
    cfg = attention.configs_for(128)[0]
    assert cfg.get("SPLIT_TAIL") and cfg.get("PERSISTENT")
    if sm_count() == 132 and shape[1] in (17, 9):
        Z, H, N, _ = shape
        assert attention.tail_plan(Z * H * -(-N // cfg["BM"]), 132, N)[1] > 0     # the split is taken
    attention.launch(q, k, v, o, False, scale, cfg, lse=lse)
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    assert _rel(o, torch.softmax(s, -1) @ v.double()) < TOL[dtype] * 1.5
    assert torch.isfinite(lse).all() and float((lse.double() - torch.logsumexp(s, -1)).abs().max()) < 1e-3
