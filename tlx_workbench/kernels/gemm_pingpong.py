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

from ._common import SMEM_LIMIT, grouped_tile, load_tiles, ring_slot, sm_count, torch_alloc
from .gemm_ws import _store_strips
from .host import gemm_descriptors, gemm_entry_points, gemm_spec, tma_gemm_call

# named barrier ids of the two turns; kept high, away from the ids Triton itself
# hands out for warp-group-local syncs (1, 2, 3, ...)
TURN_0 = tl.constexpr(14)
TURN_1 = tl.constexpr(15)


@triton.jit
def b_slot(b_ring, s, B_K_MAJOR: tl.constexpr):
    """Ring slot ``s`` of B as the wgmma reads it: as stored, or transposed when B's slices are (BN, BK) boxes of
    B^T (``B_K_MAJOR``)."""
    if B_K_MAJOR:
        b = tlx.local_trans(b_ring[s])
    else:
        b = b_ring[s]
    return b


@triton.jit
def pingpong_mainloop(a_ring, b_ring, full, empty, wg, use, k_steps, STAGES: tl.constexpr,
                      B_K_MAJOR: tl.constexpr):
    """Consumer group ``wg``'s mainloop of one whole tile: it waits for its turn, issues the wgmma of every k-step
    from ring position ``use`` on (one kept in flight behind the newest, each slot released once the wgmma after it
    is issued), hands the turn to the other group once all are issued, then waits for them and releases the last
    slot. Returns the fp32 accumulator. ``B_K_MAJOR``: B's slices are (BN, BK) boxes of B^T, read transposed."""
    if wg == 0:
        tlx.named_barrier_wait(TURN_0, 256)
    else:
        tlx.named_barrier_wait(TURN_1, 256)
    s, parity = ring_slot(use, STAGES)
    tlx.barrier_wait(full[s], parity)
    acc = tlx.async_dot(a_ring[s], b_slot(b_ring, s, B_K_MAJOR))
    prev = s
    use += 1
    for k in range(1, k_steps):
        s, parity = ring_slot(use, STAGES)
        tlx.barrier_wait(full[s], parity)
        acc = tlx.async_dot(a_ring[s], b_slot(b_ring, s, B_K_MAJOR), acc)
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
    return acc


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
            load_tiles(a_desc, b_desc, a_ring, b_ring, full, empty, num_tiles, num_pid_m, num_pid_n, k_steps,
                       BM, BN, BK, GROUP_M, STAGES, NUM_SMS, STAGE_BYTES, False)

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
                acc = pingpong_mainloop(a_ring, b_ring, full, empty, wg, use, k_steps, STAGES, False)
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
) if smem_bytes(c) <= SMEM_LIMIT)

SIM_CONFIGS = {
    "tiny": _config(64, 64, 32, 2, 64, GROUP_M=2),
    "two_strips": _config(64, 64, 32, 3, 32, GROUP_M=1),
}


def make_descriptors(a, b, c, cfg):
    """Host TMA descriptors with the block shapes ``cfg`` loads and stores (whole BM-row tiles)."""
    return gemm_descriptors(a, b, c, [cfg["BM"], cfg["BK"]], [cfg["BK"], cfg["BN"]], [cfg["BM"], cfg["EPI_N"]])


def _kernel_call(a, b, c, cfg, num_sms=132):
    """The kernel's arguments and launch options (``num_sms``: the tile stride NUM_SMS)."""
    return tma_gemm_call(make_descriptors(a, b, c, cfg), cfg, num_sms)


def _launch_call(a, b, c, cfg, num_sms=None):
    """The launch of one explicit config: (kernel, grid, args, options); ``num_sms``: the SMs the persistent CTAs
    take (default: all)."""
    num_sms = num_sms or sm_count()
    tiles = triton.cdiv(a.shape[0], cfg["BM"]) * triton.cdiv(b.shape[1], cfg["BN"])
    triton.set_allocator(torch_alloc)
    args, options = _kernel_call(a, b, c, cfg, num_sms)
    return gemm_pingpong_kernel, (min(num_sms, tiles),), args, options


launch, matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_pingpong_kernel, _launch_call, _kernel_call, CONFIGS, "the ping-pong warp-specialized kernel")

SPEC = gemm_spec("gemm_pingpong", gemm_pingpong_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)
