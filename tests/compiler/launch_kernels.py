"""Kernels and host functions for the launch-catching tests: a plain kernel, an autotuned one, and host code
that launches them as a program would."""
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


@triton.jit
def shift(x_ptr, out_ptr, n, beta, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + beta, mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)],
                 key=["n"])
@triton.jit
def scale_tuned(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


AFTER_FIRST = []      # host_scale_shift appends here once its first launch returned


def host_scale_shift(x, tmp, out, alpha, beta, BLOCK=32):
    """out = x * alpha + beta, in two launches."""
    n = x.numel()
    grid = (triton.cdiv(n, BLOCK),)
    scale[grid](x, tmp, n, alpha, BLOCK=BLOCK, num_warps=2)  # the first launch
    AFTER_FIRST.append(n)
    shift[grid](tmp, out, n, beta, BLOCK=BLOCK)
    return out


def host_tuned(x, out, alpha):
    n = x.numel()
    scale_tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, alpha)  # the tuned launch
    return out
