"""Inline PTX in the simulator keeps the kernel's dtypes: integer results stay integers (a clock or
an index is not rounded through float32) and bf16 operands/results are values, not bit patterns."""
import numpy as np
import torch
import triton
import triton.language as tl

from tlx_workbench.sim import simulate
from tlx_workbench.sim.ops import tl_extras


@triton.jit
def _add_big(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("add.s64 $0, $1, 4294967297;", "=l,l", [x], dtype=tl.int64,
                                  is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


@triton.jit
def _ex2_bf16(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("ex2.approx.ftz.bf16 $0, $1;", "=h,h", [x], dtype=tl.bfloat16,
                                  is_pure=True, pack=1)
    tl.store(y_ptr + offs, y)


def _register(pattern, fn):
    tl_extras.register_inline_asm(pattern, fn)
    return tl_extras._KNOWN[0]


def test_int64_results_are_exact():
    entry = _register(r"add\.s64 \$0, \$1, 4294967297;", lambda a: a + 4294967297)
    try:
        x = torch.randint(-2**40, 2**40, (64,), dtype=torch.int64)
        y = torch.zeros_like(x)
        res = simulate(_add_big, x, y, 64, grid=(1,))
        assert res.ok, res
        assert torch.equal(y, x + 4294967297)          # float32 would have lost the low bits
    finally:
        tl_extras._KNOWN.remove(entry)


def test_bf16_operands_and_results_are_values():
    entry = _register(r"ex2\.approx\.ftz\.bf16\b", lambda a: np.exp2(a))
    try:
        x = (torch.randn(64) * 3).to(torch.bfloat16)
        y = torch.zeros_like(x)
        res = simulate(_ex2_bf16, x, y, 64, grid=(1,))
        assert res.ok, res
        torch.testing.assert_close(y, torch.exp2(x.float()).to(torch.bfloat16), atol=0, rtol=0)
    finally:
        tl_extras._KNOWN.remove(entry)
