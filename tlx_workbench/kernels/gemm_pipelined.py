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

from ._common import KernelSpec, check_gemm_operands, gemm_flops, gemm_inputs, gemm_reference, grouped_tile


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


def launch(a, b, c, cfg):
    """Run once with one explicit config. Returns ``c``."""
    # the kernel assumes 16-byte rows (see its comment): refuse anything else here, not silently
    check_gemm_operands(__file__, a, b, need_tma=True)
    M, K = a.shape
    N = b.shape[1]
    meta = dict(cfg)
    num_warps = meta.pop("num_warps")
    grid = (triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"]),)
    gemm_pipelined_kernel[grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                num_warps=num_warps, num_stages=0, **meta)
    return c


_TUNED: dict = {}


def matmul(a, b, config=None):
    """C = A @ B with the software-pipelined kernel; any M, K and N multiples of 8 (fp16/bf16).

    >>> c = matmul(a, b)     # a: (M, K), b: (K, N) on a Hopper GPU
    """
    import torch
    check_gemm_operands(__file__, a, b, need_tma=True)
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if config is None:
        key = (a.shape[0], b.shape[1], a.shape[1], a.dtype)
        if key not in _TUNED:
            _TUNED[key] = tune(a, b)[0][0]
        config = _TUNED[key]
    return launch(a, b, c, config)


def tune(a, b, configs=CONFIGS):
    """Time every config on (a, b); returns [(config, ms), ...] fastest first."""
    import torch
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    results = [(cfg, triton.testing.do_bench(lambda: launch(a, b, c, cfg), warmup=25, rep=100))
               for cfg in configs]
    return sorted(results, key=lambda r: r[1])


SPEC = KernelSpec(name="gemm_pipelined", kernel=gemm_pipelined_kernel, launch=matmul,
                  reference=gemm_reference, configs=CONFIGS, sim_configs=SIM_CONFIGS,
                  make_inputs=gemm_inputs, flops=gemm_flops, doc=__doc__)


def compile_offline(cfg, target="sm_90", dtype="float16", shape=(512, 512, 512)):
    """Compile (no launch) for ``target`` on any machine; returns Triton's CompiledKernel.

    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0
    True
    """
    import torch
    from ..target import offline
    M, N, K = shape
    dt = getattr(torch, dtype)
    meta = dict(cfg)
    num_warps = meta.pop("num_warps")
    with offline(target):
        a, b, c = torch.empty(M, K, dtype=dt), torch.empty(K, N, dtype=dt), torch.empty(M, N, dtype=dt)
        return gemm_pipelined_kernel.warmup(a, b, c, M, N, K, K, N, N, grid=(1,), num_warps=num_warps,
                                            num_stages=0, **meta)
