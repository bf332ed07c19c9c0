"""The FP8 GEMM on a GPU against float64: the default config, per-tensor and row-wise scales, e4m3 and e5m2 operands,
bf16 and fp16 out, square and ragged shapes, the output NaN-poisoned first; and ``matmul_fp8`` as a user calls it,
with B row-major (transposed for the kernel) and column-major (read as it is)."""
import pytest
import torch

from tlx_workbench.kernels import gemm_fp8

pytestmark = pytest.mark.gpu
TOL = 1e-2          # max |c - ref| / max |ref| (the output's own rounding: bf16 carries 8 bits)
SHAPES = [(512, 512, 512), (1000, 1032, 528)]          # every operand / scale / output combination at these
MORE_SHAPES = [(136, 3000, 784), (64, 264, 48)]         # e4m3, bf16 out, both scale kinds (fewer compiles)
DTYPES = [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn")]


def _max_rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written (they stayed NaN)"
    return float((out.double() - ref).abs().max() / ref.abs().max())


def _ref(a, b, sa, sb, rowwise):
    return (a.double() @ b.double()) * (sa.double().reshape(-1, 1) if rowwise else sa.double()) \
        * (sb.double().reshape(1, -1) if rowwise else sb.double())


@pytest.mark.parametrize("out", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("rowwise", [False, True], ids=["per_tensor", "rowwise"])
@pytest.mark.parametrize("dtypes", DTYPES, ids="x".join)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_default_fp8_gemm_matches_float64(shape, dtypes, rowwise, out):
    _check(shape, dtypes, rowwise, out)


@pytest.mark.parametrize("rowwise", [False, True], ids=["per_tensor", "rowwise"])
@pytest.mark.parametrize("shape", MORE_SHAPES, ids=str)
def test_default_fp8_gemm_matches_float64_at_more_shapes(shape, rowwise):
    _check(shape, DTYPES[0], rowwise, torch.bfloat16)


def _check(shape, dtypes, rowwise, out):
    M, N, K = shape
    a, b, sa, sb = gemm_fp8.make_inputs(shape, dtypes[0], "cuda", rowwise=rowwise, b_dtype=dtypes[1])
    c = torch.full((M, N), float("nan"), dtype=out, device="cuda")
    gemm_fp8.launch(a, gemm_fp8.k_major_b(b), c, sa, sb, gemm_fp8.CONFIGS[0])
    assert _max_rel(c, _ref(a, b, sa, sb, rowwise)) <= TOL


@pytest.mark.parametrize("layout", ["column_major_b", "row_major_b"])
def test_matmul_fp8_as_users_call_it(layout):
    a, b, sa, sb = gemm_fp8.make_inputs((768, 1024, 640), "float8_e4m3fn", "cuda", rowwise=True)
    if layout == "row_major_b":
        b = b.contiguous()
    assert b.is_contiguous() == (layout == "row_major_b")
    c = gemm_fp8.matmul_fp8(a, b, sa, sb)
    assert c.dtype == torch.bfloat16 and c.shape == (768, 1024)
    assert _max_rel(c, _ref(a, b, sa, sb, True)) <= TOL
