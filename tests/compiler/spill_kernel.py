"""A kernel that keeps many values live per thread: with a register cap it spills to the
stack, which gives the resource-usage reader a non-zero STACK to get right."""
import triton
import triton.language as tl


@triton.jit
def many_live_values(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    a = tl.exp(x) * tl.sin(x)
    b = tl.cos(a) + tl.sqrt(tl.abs(x))
    c = tl.cumsum(a * b, 0)
    tl.store(y_ptr + offs, c + a + b + x, mask=offs < n)
