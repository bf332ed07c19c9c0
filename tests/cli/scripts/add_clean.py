"""A plain Triton add, launched twice, checked against torch: what `tlx-workbench run` should call clean."""
import argparse

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y, block=256):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), BLOCK=block)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--bench", action="store_true")
    opts = parser.parse_args()
    n = opts.n
    for _ in range(2):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        torch.testing.assert_close(add(x, y), x + y)
    print(f"add of {n} elements matches torch on {torch.cuda.get_device_name()}")
    if opts.bench:
        ms = triton.testing.do_bench(lambda: add(x, y))
        print(f"add: {ms * 1e3:.3f} us")
