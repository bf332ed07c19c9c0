"""A kernel the compiler's front end rejects: on a GPU machine the launch raises triton.CompilationError."""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def retyped_in_loop(out_ptr, N: tl.constexpr):
    acc = tl.zeros((N,), dtype=tl.int32)
    for _ in range(4):
        acc = acc.to(tl.float32) + 1.0      # int32 into the loop, float32 out of it
    tl.store(out_ptr + tl.arange(0, N), acc)


if __name__ == "__main__":
    out = torch.zeros(16, device="cuda")
    if "--uncaught" in sys.argv:
        retyped_in_loop[(1,)](out, N=16)
    try:
        retyped_in_loop[(1,)](out, N=16)
    except triton.CompilationError as e:
        print("raised CompilationError:", "type stays consistent" in str(e))
