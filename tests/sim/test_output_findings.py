"""Outputs left partly unwritten, or written with NaN/Inf from finite inputs, are reported."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from tlx_workbench import simulate


@triton.jit
def scale_rows(x_ptr, y_ptr, N: tl.constexpr, BM: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)


@triton.jit
def log_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.log(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def tma_copy(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(1)
    off_m = tl.program_id(0) * BM
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [off_m, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tlx.async_descriptor_store(out_desc, buf[0], [off_m, 0])
    tlx.async_descriptor_store_wait(0)


def test_a_grid_one_cta_short_leaves_the_last_tile_unwritten():
    x = torch.randn(64, 32)
    y = torch.zeros(64, 32)
    res = simulate(scale_rows, x, y, N=32, BM=16, grid=(3,))          # 4 tiles of 16 rows
    assert not res.ok and not res.errors
    (f,) = res.warnings
    assert f.kind == "unwritten-output" and f.severity == "warning"
    assert "y_ptr (64x32 float32): 512 of 2048 elements were written by no CTA (rows 48-63, cols 0-31)" in f.message
    assert f.line == scale_rows.fn.__code__.co_firstlineno + 5            # the tl.store line
    assert "grid too small" in f.hint
    res.raise_for_errors()                                               # a warning raises nothing
    assert "warning(s) about the outputs" in repr(res)


def test_the_whole_grid_is_a_clean_bill():
    x = torch.randn(64, 32)
    y = torch.zeros(64, 32)
    res = simulate(scale_rows, x, y, N=32, BM=16, grid=(4,))
    assert res.ok and res.findings == [], res
    torch.testing.assert_close(y, 2 * x)


def test_log_of_zero_from_finite_inputs_is_reported():
    x = torch.rand(100) + 0.5
    x[37] = 0.0                       # log(0) = -inf
    y = torch.empty(100)
    res = simulate(log_kernel, x, y, 100, BLOCK=64, grid=(2,))
    (f,) = res.warnings
    assert f.kind == "nonfinite-output"
    assert "the kernel stored 1 Inf (the first at [37], value -inf)" in f.message
    assert f.line == log_kernel.fn.__code__.co_firstlineno + 4


def test_nan_already_in_an_input_is_not_the_kernels():
    x = torch.rand(100)
    x[5] = float("nan")
    y = torch.empty(100)
    res = simulate(log_kernel, x, y, 100, BLOCK=64, grid=(2,))
    assert res.ok, res


def test_masked_tail_writes_only_the_tensors_own_extent():
    # a launch over a view: the kernel writes the view, not the buffer it lies in
    x = torch.rand(100) + 0.5
    buf = torch.zeros(128)
    res = simulate(log_kernel, x, buf[:100], 100, BLOCK=64, grid=(2,))
    assert res.ok, res


@triton.jit
def padded_rows(x_ptr, y_ptr, N: tl.constexpr, N_PAD: tl.constexpr, B: tl.constexpr):
    # logical (rows, N) values into a (rows, N_PAD) array whose rows start 16-byte aligned
    r = tl.program_id(0)
    cols = tl.arange(0, B)
    tl.store(y_ptr + r * N_PAD + cols, tl.load(x_ptr + r * N + cols, mask=cols < N), mask=cols < N)


def test_alignment_padding_and_masked_off_elements_are_meant():
    x = torch.randn(4, 6)
    y = torch.zeros(4, 8)           # 2 fp32 columns of padding per row, never addressed: not reported
    res = simulate(padded_rows, x, y, N=6, N_PAD=8, B=8, grid=(4,))
    assert res.ok, res
    y = torch.zeros(4, 16)          # 8 columns never addressed: more than alignment; and the grid is one row short
    res = simulate(padded_rows, x, y, N=6, N_PAD=16, B=8, grid=(3,))
    assert [f.kind for f in res.findings] == ["unwritten-output"]
    # columns 6-7 were masked off by the store: meant, not missing
    assert "40 of 64 elements were written by no CTA (within rows 0-3, cols 0-15, the first at [0, 8])" \
        in res.findings[0].message


def test_tma_stores_are_logged_and_a_short_grid_is_reported():
    a = torch.randn(128, 64, dtype=torch.float16)
    out = torch.zeros_like(a)
    in_d = TensorDescriptor.from_tensor(a, [32, 64])
    out_d = TensorDescriptor.from_tensor(out, [32, 64])
    res = simulate(tma_copy, in_d, out_d, BM=32, BN=64, grid=(4,))
    assert res.ok, res
    assert torch.equal(out, a)
    out.zero_()
    res = simulate(tma_copy, in_d, out_d, BM=32, BN=64, grid=(3,))
    (f,) = res.warnings
    assert "out_desc (128x64 float16): 2048 of 8192 elements were written by no CTA (rows 96-127, cols 0-63)" \
        in f.message, f.message


def test_partial_simulation_reports_nothing():
    x = torch.randn(64, 32)
    y = torch.zeros(64, 32)
    res = simulate(scale_rows, x, y, N=32, BM=16, grid=(4,), ctas=[0])
    assert res.findings == []


@triton.jit
def log_cast(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.log(tl.load(x_ptr + offs).to(tl.float32)).to(y_ptr.dtype.element_ty))


def test_nan_in_bf16_and_fp16_outputs_is_counted():
    for dt in (torch.bfloat16, torch.float16):
        x = (torch.rand(64) + 0.5).to(dt)
        x[3], x[9] = 0.0, -1.0                 # log(0) = -inf, log(-1) = nan
        y = torch.zeros(64, dtype=dt)
        res = simulate(log_cast, x, y, BLOCK=64, grid=(1,))
        (f,) = res.warnings
        assert "the kernel stored 1 NaN and 1 Inf (the first at [3], value -inf)" in f.message, (dt, f.message)
