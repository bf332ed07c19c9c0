"""Hopper warp-specialized GEMM, ping-pong form: C = A @ B (fp16 / bf16).

Same loader as the cooperative kernel (one TMA warp group, STAGES-deep ring), but
the two wgmma warp groups no longer share a tile: each owns whole BM x BN tiles,
alternating (group 0 takes the loader's tiles 0, 2, 4, ... of this CTA, group 1 the
odd ones). Two named barriers hand the tensor core back and forth: a group waits
for its turn, issues its whole mainloop, passes the turn on right after its last
wgmma is issued, and only then drains and runs its epilogue. So one group's
epilogue (convert, SMEM, TMA store) always hides under the other group's mainloop.

>>> from tlx_workbench.kernels.gemm_pingpong import matmul      # on a Hopper GPU
>>> c = matmul(a, b)
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from ._common import (KernelSpec, check_gemm_operands, gemm_flops, gemm_inputs, gemm_reference,
                      grouped_tile, ring_slot, sm_count, torch_alloc)
from .gemm_ws import _store_strips

# named barrier ids of the two turns; kept high, away from the ids Triton itself
# hands out for warp-group-local syncs (1, 2, 3, ...)
TURN_0 = tl.constexpr(14)
TURN_1 = tl.constexpr(15)


@triton.jit
def gemm_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                         EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr,
                         NUM_SMS: tl.constexpr, WARP_BARRIER: tl.constexpr = False,
                         LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232):
    STRIPS: tl.constexpr = BN // EPI_N
    dtype: tl.constexpr = tlx.dtype_of(a_desc)

    a_ring = tlx.local_alloc((BM, BK), dtype, STAGES)
    b_ring = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_strips = tlx.local_alloc((BM, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)

    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    if WARP_BARRIER:
        empty = tlx.alloc_warp_barrier(num_barriers=STAGES, num_warps=4, num_arrivals=1)
    else:
        # exactly one consumer group reads a given stage
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_steps = tl.cdiv(K, BK)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            use = 0
            for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                for k in range(k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(empty[s], parity ^ 1)
                    tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
                    tlx.async_descriptor_load(a_desc, a_ring[s], [pid_m * BM, k * BK], full[s])
                    tlx.async_descriptor_load(b_desc, b_ring[s], [k * BK, pid_n * BN], full[s])
                    use += 1

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            if wg == 1:
                # group 0 owns the first turn
                tlx.named_barrier_arrive(TURN_0, 256)
            seq = wg        # position of this tile in the loader's sequence
            for tile in range(tl.program_id(0) + wg * NUM_SMS, num_tiles, 2 * NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                use = seq * k_steps
                seq += 2
                if wg == 0:
                    tlx.named_barrier_wait(TURN_0, 256)
                else:
                    tlx.named_barrier_wait(TURN_1, 256)
                s, parity = ring_slot(use, STAGES)
                tlx.barrier_wait(full[s], parity)
                acc = tlx.async_dot(a_ring[s], b_ring[s])
                prev = s
                use += 1
                for k in range(1, k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(full[s], parity)
                    acc = tlx.async_dot(a_ring[s], b_ring[s], acc)
                    acc = tlx.async_dot_wait(1, acc)
                    tlx.barrier_arrive(empty[prev])
                    prev = s
                    use += 1
                # every wgmma of this tile is issued: the other group may start its mainloop
                if wg == 0:
                    tlx.named_barrier_arrive(TURN_1, 256)
                else:
                    tlx.named_barrier_arrive(TURN_0, 256)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[prev])
                _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, pid_m * BM, pid_n * BN,
                              STRIPS, EPI_BUFS, EPI_N)
            tlx.async_descriptor_store_wait(0)


def _config(BM, BN, BK, STAGES, EPI_N, GROUP_M=8, EPI_BUFS=1, WARP_BARRIER=False, MMA_REGS=232,
            LOADER_REGS=40):
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
                WARP_BARRIER=WARP_BARRIER, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS)


def smem_bytes(cfg, elem=2) -> int:
    ring = cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * elem
    strips = 2 * cfg["EPI_BUFS"] * cfg["BM"] * cfg["EPI_N"] * elem
    return ring + strips + 1024


CONFIGS = tuple(c for c in (
    _config(128, 128, 64, 6, 64),
    _config(128, 128, 64, 5, 128),
    _config(128, 128, 64, 5, 64, EPI_BUFS=2),
    _config(64, 256, 64, 4, 128),
    _config(128, 128, 64, 6, 64, WARP_BARRIER=True),
    _config(128, 128, 64, 5, 64, EPI_BUFS=2, WARP_BARRIER=True),
) if smem_bytes(c) <= 232448)

SIM_CONFIGS = {
    "tiny": _config(64, 64, 32, 2, 64, GROUP_M=2),
    "two_strips": _config(64, 64, 32, 3, 32, GROUP_M=1),
}


def make_descriptors(a, b, c, cfg):
    M, K = a.shape
    N = b.shape[1]
    return (TensorDescriptor(a, [M, K], [K, 1], [cfg["BM"], cfg["BK"]]),
            TensorDescriptor(b, [K, N], [N, 1], [cfg["BK"], cfg["BN"]]),
            TensorDescriptor(c, [M, N], [N, 1], [cfg["BM"], cfg["EPI_N"]]))


def launch(a, b, c, cfg, num_sms=None):
    """Run once with one explicit config. Returns ``c``."""
    M, K = a.shape
    N = b.shape[1]
    num_sms = num_sms or sm_count()
    tiles = triton.cdiv(M, cfg["BM"]) * triton.cdiv(N, cfg["BN"])
    triton.set_allocator(torch_alloc)
    a_d, b_d, c_d = make_descriptors(a, b, c, cfg)
    gemm_pingpong_kernel[(min(num_sms, tiles),)](a_d, b_d, c_d, M, N, K, NUM_SMS=num_sms,
                                                 num_warps=4, num_stages=0, **cfg)
    return c


_TUNED: dict = {}


def matmul(a, b, config=None):
    """C = A @ B with the ping-pong warp-specialized kernel (fp16/bf16, row-major).

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


SPEC = KernelSpec(name="gemm_pingpong", kernel=gemm_pingpong_kernel, launch=matmul,
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
    with offline(target):
        a, b, c = torch.empty(M, K, dtype=dt), torch.empty(K, N, dtype=dt), torch.empty(M, N, dtype=dt)
        a_d, b_d, c_d = make_descriptors(a, b, c, cfg)
        return gemm_pingpong_kernel.warmup(a_d, b_d, c_d, M, N, K, NUM_SMS=132, grid=(1,),
                                           num_warps=4, num_stages=0, **cfg)
