"""Hopper GEMM, software-pipelined without warp specialization: C = A @ B.

Every warp both loads and multiplies. The k-loop keeps STAGES-1 k-slices of A and B
in flight with ``cp.async`` (``tlx.async_load``), one commit group per slice; at step
k it waits until slice k has landed (``async_load_wait_group(STAGES-2)``), issues the
wgmma for it, waits for the wgmma of step k-1 only, and refills the slot that step
just freed. Loads are masked, so any M, N, K works (no TMA alignment rules): this is
simple to read; its one shape rule is that rows are 16-byte aligned (K and N
multiples of 8), as cp.async has no 2-byte form.

>>> from tlx_workbench.kernels.gemm_pipelined import matmul    # on a Hopper GPU
>>> c = matmul(a, b)
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ._common import check_gemm_operands, grouped_tile
from .host import gemm_entry_points, gemm_spec


@triton.jit
def _issue_slice(a_ptr, b_ptr, a_buf, b_buf, rows, cols, ks, k0, M, N, K,
                 stride_am, stride_bk):
    """Start the cp.async copies of k-slice starting at k0 into (a_buf, b_buf); one commit group."""
    kk = k0 + ks
    a_mask = (rows[:, None] < M) & (kk[None, :] < K)
    b_mask = (kk[:, None] < K) & (cols[None, :] < N)
    ta = tlx.async_load(a_ptr + rows[:, None] * stride_am + kk[None, :], a_buf, mask=a_mask, other=0.0)
    tb = tlx.async_load(b_ptr + kk[:, None] * stride_bk + cols[None, :], b_buf, mask=b_mask, other=0.0)
    tlx.async_load_commit_group([ta, tb])


@triton.jit
def gemm_pipelined_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, STAGES: tl.constexpr):
    # cp.async moves 4, 8 or 16 bytes per thread: promise Triton 16-byte rows (the launcher
    # checks K % 8 == N % 8 == 0), else it falls back to 2-byte copies that do not exist
    # (written as (x // 8) * 8, which Triton's alignment analysis can see through)
    K = (K // 8) * 8
    N = (N // 8) * 8
    stride_am = (stride_am // 8) * 8
    stride_bk = (stride_bk // 8) * 8
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = grouped_tile(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    dtype: tl.constexpr = a_ptr.dtype.element_ty

    a_ring = tlx.local_alloc((BM, BK), dtype, STAGES)
    b_ring = tlx.local_alloc((BK, BN), dtype, STAGES)

    # prologue: slices 0 .. STAGES-2 in flight (masked loads make the extra ones no-ops)
    for i in tl.static_range(STAGES - 1):
        _issue_slice(a_ptr, b_ptr, a_ring[i], b_ring[i], rows, cols, ks, i * BK, M, N, K,
                     stride_am, stride_bk)

    k_steps = tl.cdiv(K, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(k_steps, num_stages=0):    # num_stages=0: we pipeline by hand
        s = k % STAGES
        # at most STAGES-2 younger groups may still be pending: slice k has landed
        tlx.async_load_wait_group(STAGES - 2)
        acc = tlx.async_dot(a_ring[s], b_ring[s], acc)
        # step k-1 retired, so its slot ((k + STAGES - 1) % STAGES) may be refilled
        acc = tlx.async_dot_wait(1, acc)
        nxt = k + STAGES - 1
        _issue_slice(a_ptr, b_ptr, a_ring[nxt % STAGES], b_ring[nxt % STAGES], rows, cols, ks,
                     nxt * BK, M, N, K, stride_am, stride_bk)
    acc = tlx.async_dot_wait(0, acc)
    tlx.async_load_wait_group(0)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _config(BM, BN, BK, STAGES, num_warps, GROUP_M=8):
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, GROUP_M=GROUP_M, num_warps=num_warps)


CONFIGS = (
    _config(128, 256, 64, 3, 8),
    _config(128, 128, 64, 4, 8),
    _config(128, 128, 64, 4, 4),
    _config(64, 128, 64, 4, 4),
)

SIM_CONFIGS = {
    "tiny": _config(64, 64, 32, 2, 4, GROUP_M=2),
    "three_stages": _config(64, 64, 16, 3, 4, GROUP_M=1),
}


def _kernel_call(a, b, c, cfg):
    """The kernel's positional arguments and launch options for one config (num_warps is a
    launch option, not a constexpr; num_stages=0: the k-loop is pipelined by hand)."""
    M, K = a.shape
    N = b.shape[1]
    meta = dict(cfg)
    num_warps = meta.pop("num_warps")
    args = (a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return args, dict(num_warps=num_warps, num_stages=0, **meta)


def _launch_call(a, b, c, cfg):
    """The launch of one explicit config: (kernel, grid, args, options)."""
    # the kernel assumes 16-byte rows (see its comment): refuse anything else here, not silently
    check_gemm_operands(__file__, a, b, need_tma=True)
    args, options = _kernel_call(a, b, c, cfg)
    grid = (triton.cdiv(a.shape[0], cfg["BM"]) * triton.cdiv(b.shape[1], cfg["BN"]),)
    return gemm_pipelined_kernel, grid, args, options


launch, matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_pipelined_kernel, _launch_call, _kernel_call, CONFIGS, "the software-pipelined kernel (any M)")

SPEC = gemm_spec("gemm_pipelined", gemm_pipelined_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)
