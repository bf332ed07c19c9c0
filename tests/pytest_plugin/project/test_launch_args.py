"""A test whose launch misses a kernel parameter (as TLX's own test of its persistent attention tutorial does
with RESCALE_OPT): Triton refuses the launch on a GPU, before compiling."""
import torch
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, FACTOR: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * FACTOR)


def test_launch_missing_a_constexpr():
    x = torch.randn(64, device="cuda")
    out = torch.empty_like(x)
    config = {"N": 64}                    # FACTOR forgotten
    scale[(1,)](x, out, **config)
