"""The launchers refuse what the kernels cannot do with a workbench error that says what to do."""
import pytest
import torch

from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import attention, gemm_pipelined, gemm_ws


def test_gemm_rejects_unaligned_rows():
    a = torch.randn(64, 30, dtype=torch.float16)
    b = torch.randn(30, 64, dtype=torch.float16)
    with pytest.raises(TLXWorkbenchError, match="multiples of 8") as e:
        gemm_ws.matmul(a, b)
    assert e.value.file.endswith("gemm_ws.py") and e.value.hint
    with pytest.raises(TLXWorkbenchError, match="multiples of 8"):
        gemm_pipelined.matmul(a, b)


def test_gemm_rejects_mismatched_shapes_and_dtypes():
    with pytest.raises(TLXWorkbenchError, match="inner dimensions"):
        gemm_ws.matmul(torch.randn(8, 16).half(), torch.randn(8, 16).half())
    with pytest.raises(TLXWorkbenchError, match="float16 and bfloat16"):
        gemm_ws.matmul(torch.randn(16, 16), torch.randn(16, 16))


def test_attention_rejects_unsupported_head_dim():
    q = torch.randn(1, 1, 64, 96, dtype=torch.float16)
    with pytest.raises(TLXWorkbenchError, match="head dim 96"):
        attention.attention(q, q, q)


def test_references_agree_with_torch():
    a = torch.randn(33, 40, dtype=torch.float16)
    b = torch.randn(40, 24, dtype=torch.float16)
    from tlx_workbench.kernels._common import gemm_reference
    torch.testing.assert_close(gemm_reference(a, b).float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    q, k, v = (torch.randn(1, 2, 50, 64, dtype=torch.float32) for _ in range(3))
    for causal in (False, True):
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.testing.assert_close(attention.reference(q, k, v, causal=causal), want, atol=1e-5, rtol=1e-5)


def test_gemm_ws_persistent_cta_count_keeps_the_wave_count():
    from tlx_workbench.kernels.gemm_ws import persistent_ctas
    # 512 tiles (4096^3 at 128x256) on 132 SMs: 4 waves either way, 128 CTAs of 4 tiles each
    assert persistent_ctas(512, 132) == 128
    assert persistent_ctas(2048, 132) == 128
    assert persistent_ctas(133, 132) == 67          # 2 waves
    assert persistent_ctas(100, 132) == 100         # less than a wave: one CTA per tile
    for tiles in range(1, 700, 7):
        ctas = persistent_ctas(tiles, 132)
        assert ctas <= 132 and -(-tiles // ctas) == max(1, -(-tiles // 132))
