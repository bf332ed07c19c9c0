"""Hopper kernels for the ptxas-advisory tests: two chained wgmmas per step, the second with its
A operand (P) in registers, as in attention's S = Q K^T, O += P V.

With ``EARLY=True`` the next P is converted to fp16 while ``p @ b`` is still in flight (between
its issue and ``async_dot_wait(0)``): ptxas 12.x serializes the wgmma pipeline (C7513) at
BK=128. With ``EARLY=False`` the conversion comes after the wait and ptxas says nothing.
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

SIGNATURE = {"x_ptr": "*fp32:16", "b_ptr": "*fp16:16", "out_ptr": "*fp32:16"}


@triton.jit
def chained_dots(x_ptr, b_ptr, out_ptr, ITERS: tl.constexpr, EARLY: tl.constexpr, BK: tl.constexpr):
    BM: tl.constexpr = 64
    rm = tl.arange(0, BM)
    rk = tl.arange(0, BK)
    b_smem = tlx.local_alloc((BK, BK), tl.float16, 1)
    a_smem = tlx.local_alloc((BM, BK), tl.float16, 1)
    tlx.local_store(b_smem[0], tl.load(b_ptr + rk[:, None] * BK + rk[None, :]))
    p = tl.load(x_ptr + rm[:, None] * BK + rk[None, :]).to(tl.float16)
    tlx.local_store(a_smem[0], p)
    tlx.fence_async_shared()
    acc = tl.zeros((BM, BK), tl.float32)
    for i in range(ITERS):
        s = tlx.async_dot(a_smem[0], b_smem[0])
        acc = tlx.async_dot(p, b_smem[0], acc)
        s = tlx.async_dot_wait(1, s)              # s ready, p @ b may still run
        if EARLY:
            p = tl.exp2(s).to(tl.float16)         # the next A operand, written under the wgmma
            acc = tlx.async_dot_wait(0, acc)
        else:
            e = tl.exp2(s)
            acc = tlx.async_dot_wait(0, acc)
            p = e.to(tl.float16)                  # written after the group retired
    tl.store(out_ptr + rm[:, None] * BK + rk[None, :], acc)
