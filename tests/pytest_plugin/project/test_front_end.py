"""Kernels the compiler's front end rejects: on a GPU machine the launch raises triton.CompilationError."""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def retyped_in_loop(out_ptr, N: tl.constexpr):
    acc = tl.zeros((N,), dtype=tl.int32)
    for _ in range(4):
        acc = acc.to(tl.float32) + 1.0      # int32 into the loop, float32 out of it
    tl.store(out_ptr + tl.arange(0, N), acc)


@triton.jit
def fp8_code(out_ptr, DTYPE: tl.constexpr):
    name: tl.constexpr = tlx.get_fp8_format_name(DTYPE)
    if name == "e4m3":
        tl.store(out_ptr, 43)
    else:
        tl.store(out_ptr, 52)


def test_a_loop_carried_type_change_raises():
    out = torch.zeros(16, device="cuda")
    with pytest.raises(triton.CompilationError) as err:
        retyped_in_loop[(1,)](out, N=16)
    assert "acc" in str(err.value)


@pytest.mark.parametrize("dtype", [tl.float16, tl.int8])
def test_a_tlx_helpers_assertion_raises(dtype):
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    with pytest.raises(triton.CompilationError) as err:
        fp8_code[(1,)](out, DTYPE=dtype)
    assert "float8" in str(err.value.__cause__)


def test_an_fp8_dtype_compiles_and_runs():
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    fp8_code[(1,)](out, DTYPE=tl.float8e4nv)
    assert out.item() == 43


def test_an_unexpected_front_end_error_fails_the_test():
    retyped_in_loop[(1,)](torch.zeros(16, device="cuda"), N=16)
