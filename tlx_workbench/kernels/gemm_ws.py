"""Hopper warp-specialized GEMM, cooperative form: C = A @ B (fp16 / bf16 in, same out).

Layout of one CTA (persistent: it walks tiles ``pid, pid + #SMs, ...`` in grouped order):

* a loader warp group ("default" task, few registers) streams A and B k-slices
  with TMA into a STAGES-deep SMEM ring; ``full[s]`` counts the landed bytes,
  ``empty[s]`` is released by both consumers.
* two wgmma warp groups split each BM x BN tile by rows (BM/2 each) and share the
  B slice. Each keeps one wgmma in flight: it issues step k, then waits for step
  k-1 only, and frees that step's slot, so the tensor core never drains between
  k-steps.
* the epilogue goes registers -> SMEM -> TMA store, in EPI_N-wide column strips,
  and does not wait for the store to finish: the next tile's mainloop runs while
  the TMA engine drains the strip (we only wait before overwriting a strip buffer).

>>> from tlx_workbench.kernels.gemm_ws import matmul          # on a Hopper GPU
>>> c = matmul(a, b)                                         # a: (M, K), b: (K, N)
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ._common import SMEM_LIMIT, grouped_tile, persistent_ctas, ring_slot, sm_count, torch_alloc
from .host import gemm_descriptors, gemm_entry_points, gemm_spec, tma_gemm_call


@triton.jit
def _strips(x, STRIPS: tl.constexpr):
    """The columns of ``x`` as STRIPS equal strips, left to right: 1, 2 or 4 (halves, recursively)."""
    if STRIPS == 1:
        strips = (x,)
    else:
        left, right = _halves(x)
        if STRIPS == 2:
            strips = (left, right)
        else:
            tl.static_assert(STRIPS == 4, "EPI_N must be BN, BN/2 or BN/4")
            s0, s1 = _halves(left)
            s2, s3 = _halves(right)
            strips = (s0, s1, s2, s3)
    return strips


@triton.jit
def _store_strips(acc, c_desc, c_smem, buf_base, row, col, STRIPS: tl.constexpr,
                  EPI_BUFS: tl.constexpr, EPI_N: tl.constexpr):
    """Write ``acc`` (rows x STRIPS*EPI_N, fp32) to C at (row, col) through SMEM + TMA,
    one EPI_N-wide strip at a time, rotating over EPI_BUFS strip buffers."""
    # strip j goes to buffer j % EPI_BUFS and the rotation restarts every tile, so it only
    # stays a true rotation across tiles when EPI_BUFS divides the strip count
    tl.static_assert(STRIPS % EPI_BUFS == 0, "EPI_BUFS must divide BN // EPI_N")
    strips = _strips(acc.to(tlx.dtype_of(c_desc)), STRIPS)
    for j in tl.static_range(STRIPS):
        buf = buf_base + (j % EPI_BUFS)
        tlx.async_descriptor_store_wait(EPI_BUFS - 1)
        tlx.local_store(c_smem[buf], strips[j])
        tlx.fence("async_shared")
        tlx.async_descriptor_store(c_desc, c_smem[buf], [row, col + j * EPI_N])


@triton.jit
def _halves(x):
    """The left and right column halves of a 2-D tensor."""
    return tl.split(tl.permute(tl.reshape(x, (x.shape[0], 2, x.shape[1] // 2)), (0, 2, 1)))


@triton.jit
def _wait_full(full, full_a, full_b, s, wg, parity, SPLIT_FULL: tl.constexpr):
    """Wait until this group's operands of ring slot ``s`` have landed."""
    if SPLIT_FULL:
        tlx.barrier_wait(full_a[2 * s + wg], parity)
        tlx.barrier_wait(full_b[s], parity)
    else:
        tlx.barrier_wait(full[s], parity)


@triton.jit
def _ring_barriers(STAGES: tl.constexpr, SPLIT_FULL: tl.constexpr, WARP_BARRIER: tl.constexpr):
    """The k-slice ring's barriers: (full, full_a, full_b, empty)."""
    if SPLIT_FULL:
        # one barrier per A half and one for B: consumer wg starts on its own half + B,
        # without waiting for the other group's half to land
        full_a = tlx.alloc_barriers(num_barriers=2 * STAGES, arrive_count=1)
        full_b = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
        full = full_b      # unused in this form; keeps one signature for _wait_full
    else:
        full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
        full_a = full
        full_b = full
    if WARP_BARRIER:
        # every thread of both consumer groups arrives: no intra-group sync before arriving
        empty = tlx.alloc_warp_barrier(num_barriers=STAGES, num_warps=4, num_arrivals=2)
    else:
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    return full, full_a, full_b, empty


@triton.jit
def _load_steps(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, row, col, k0, k1, use,
                HALF_M: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr, STAGE_BYTES: tl.constexpr,
                HALF_A_BYTES: tl.constexpr, B_BYTES: tl.constexpr, SPLIT_FULL: tl.constexpr):
    """Loader: k-slices k0..k1-1 of the tile at (row, col) into the ring; returns the ring counter."""
    for k in range(k0, k1):
        s, parity = ring_slot(use, STAGES)
        # a fresh barrier is in phase 0: waiting for parity 1 passes at once
        tlx.barrier_wait(empty[s], parity ^ 1)
        if SPLIT_FULL:
            tlx.barrier_expect_bytes(full_a[2 * s], HALF_A_BYTES)
            tlx.async_descriptor_load(a_desc, a_ring[2 * s], [row, k * BK], full_a[2 * s])
            tlx.barrier_expect_bytes(full_b[s], B_BYTES)
            tlx.async_descriptor_load(b_desc, b_ring[s], [k * BK, col], full_b[s])
            tlx.barrier_expect_bytes(full_a[2 * s + 1], HALF_A_BYTES)
            tlx.async_descriptor_load(a_desc, a_ring[2 * s + 1], [row + HALF_M, k * BK], full_a[2 * s + 1])
        else:
            tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
            tlx.async_descriptor_load(a_desc, a_ring[2 * s], [row, k * BK], full[s])
            tlx.async_descriptor_load(b_desc, b_ring[s], [k * BK, col], full[s])
            tlx.async_descriptor_load(a_desc, a_ring[2 * s + 1], [row + HALF_M, k * BK], full[s])
        use += 1
    return use


@triton.jit
def _mma_steps(a_ring, b_ring, full, full_a, full_b, empty, wg, k0, k1, use,
               STAGES: tl.constexpr, SPLIT_FULL: tl.constexpr, DOT_WAIT0: tl.constexpr):
    """One consumer group: acc = sum over k-slices k0..k1-1 (k1 > k0) of its A half @ B.
    Returns (acc, ring counter); every slot it used is released."""
    # first k-step peeled: it starts the accumulator and has no slot to free yet
    s, parity = ring_slot(use, STAGES)
    _wait_full(full, full_a, full_b, s, wg, parity, SPLIT_FULL)
    acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s])
    if DOT_WAIT0:
        acc = tlx.async_dot_wait(0, acc)
        tlx.barrier_arrive(empty[s])
    prev = s
    use += 1
    for k in range(k0 + 1, k1):
        s, parity = ring_slot(use, STAGES)
        _wait_full(full, full_a, full_b, s, wg, parity, SPLIT_FULL)
        acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s], acc)
        if DOT_WAIT0:
            acc = tlx.async_dot_wait(0, acc)
            tlx.barrier_arrive(empty[s])
        else:
            acc = tlx.async_dot_wait(1, acc)    # step k-1 retired: its slot is free
            tlx.barrier_arrive(empty[prev])
        prev = s
        use += 1
    if not DOT_WAIT0:
        acc = tlx.async_dot_wait(0, acc)
        tlx.barrier_arrive(empty[prev])
    return acc, use


@triton.jit
def _ws_buffers(a_desc, c_desc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
                EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr):
    """SMEM of the cooperative kernel: (A ring, B ring, epilogue strips). The A half-tiles of stage s live at 2*s
    (rows 0..BM/2) and 2*s+1; each consumer group has EPI_BUFS strips."""
    HALF_M: tl.constexpr = BM // 2
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    a_ring = tlx.local_alloc((HALF_M, BK), dtype, 2 * STAGES)
    b_ring = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_strips = tlx.local_alloc((HALF_M, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)
    return a_ring, b_ring, c_strips


@triton.jit
def _load_tiles(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, end, num_pid_m, num_pid_n, k_steps,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                NUM_SMS: tl.constexpr, SPLIT_FULL: tl.constexpr):
    """Loader: every k-slice of the tiles this CTA walks (tiles pid, pid + NUM_SMS, ... below ``end``, in grouped
    order) into the ring; returns the ring counter."""
    HALF_M: tl.constexpr = BM // 2
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)
    HALF_A_BYTES: tl.constexpr = HALF_M * BK * tlx.size_of(dtype)
    B_BYTES: tl.constexpr = BK * BN * tlx.size_of(dtype)
    use = 0
    for tile in range(tl.program_id(0), end, NUM_SMS):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        use = _load_steps(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, pid_m * BM,
                          pid_n * BN, 0, k_steps, use, HALF_M, BK, STAGES, STAGE_BYTES, HALF_A_BYTES,
                          B_BYTES, SPLIT_FULL)
    return use


@triton.jit
def _mma_tiles(a_ring, b_ring, full, full_a, full_b, empty, c_desc, c_strips, wg, end, num_pid_m, num_pid_n,
               k_steps, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr, STAGES: tl.constexpr,
               EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr, NUM_SMS: tl.constexpr, SPLIT_FULL: tl.constexpr,
               DOT_WAIT0: tl.constexpr):
    """Consumer group ``wg``: the tiles ``_load_tiles`` loads, each accumulated and stored (its BM/2 rows);
    returns the ring counter."""
    HALF_M: tl.constexpr = BM // 2
    STRIPS: tl.constexpr = BN // EPI_N
    use = 0
    for tile in range(tl.program_id(0), end, NUM_SMS):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        acc, use = _mma_steps(a_ring, b_ring, full, full_a, full_b, empty, wg, 0, k_steps, use,
                              STAGES, SPLIT_FULL, DOT_WAIT0)
        _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, pid_m * BM + wg * HALF_M, pid_n * BN,
                      STRIPS, EPI_BUFS, EPI_N)
    return use


@triton.jit
def gemm_ws_coop_kernel(a_desc, b_desc, c_desc, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                        EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr,
                        NUM_SMS: tl.constexpr, WARP_BARRIER: tl.constexpr = False,
                        LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                        SPLIT_FULL: tl.constexpr = False, DOT_WAIT0: tl.constexpr = False):
    a_ring, b_ring, c_strips = _ws_buffers(a_desc, c_desc, BM, BN, BK, STAGES, EPI_N, EPI_BUFS)
    full, full_a, full_b, empty = _ring_barriers(STAGES, SPLIT_FULL, WARP_BARRIER)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_steps = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            _load_tiles(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, num_tiles, num_pid_m, num_pid_n,
                        k_steps, BM, BN, BK, GROUP_M, STAGES, NUM_SMS, SPLIT_FULL)

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            _mma_tiles(a_ring, b_ring, full, full_a, full_b, empty, c_desc, c_strips, wg, num_tiles, num_pid_m,
                       num_pid_n, k_steps, BM, BN, GROUP_M, STAGES, EPI_N, EPI_BUFS, NUM_SMS, SPLIT_FULL, DOT_WAIT0)
            tlx.async_descriptor_store_wait(0)


def _config(BM, BN, BK, STAGES, EPI_N, GROUP_M=8, EPI_BUFS=2, WARP_BARRIER=False, MMA_REGS=232,
            LOADER_REGS=40, SPLIT_FULL=False, DOT_WAIT0=False):
    # MMA_REGS/LOADER_REGS None: no setmaxnreg, every warp keeps the launch's even share
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
                WARP_BARRIER=WARP_BARRIER, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS,
                SPLIT_FULL=SPLIT_FULL, DOT_WAIT0=DOT_WAIT0)


def smem_bytes(cfg, elem=2) -> int:
    """SMEM this config asks for (ring + epilogue strips), to prune configs over 227 KiB."""
    ring = cfg["STAGES"] * (cfg["BM"] * cfg["BK"] + cfg["BK"] * cfg["BN"]) * elem
    strips = 2 * cfg["EPI_BUFS"] * (cfg["BM"] // 2) * cfg["EPI_N"] * elem
    return ring + strips + 1024


# the autotune space, best-first on the H200 (the first entry is the default): per-half full
# barriers + drain-and-release every step measured best or tied-best at 4096^3 and 8192^3, fp16
# and bf16 (benchmarks/RESULTS.md, GEMM, levers measured)
CONFIGS = tuple(c for c in (
    _config(128, 256, 64, 4, 64, SPLIT_FULL=True, DOT_WAIT0=True),
    _config(128, 256, 64, 4, 64),
    _config(128, 256, 64, 4, 64, DOT_WAIT0=True),
    _config(128, 256, 64, 4, 128, EPI_BUFS=1, SPLIT_FULL=True),
    _config(128, 256, 64, 4, 128, EPI_BUFS=1),
    _config(128, 256, 64, 3, 128),
    _config(128, 256, 64, 4, 64, WARP_BARRIER=True),
    _config(128, 256, 64, 3, 128, GROUP_M=16),
    _config(128, 256, 64, 4, 64, MMA_REGS=240, LOADER_REGS=24),
    _config(256, 128, 64, 4, 64),
    _config(128, 128, 64, 6, 64),
    # small problems: 128x64 tiles put twice the CTAs of 128x128 on the SMs (1024^3: 128 tiles for 132 SMs), 8
    # stages, every warp keeping the launch's even register share (a 64x64 accumulator needs no more): CUDA-graph
    # replay at 1024^3 level with cuBLAS, where 6 stages with setmaxnreg ran 0.93-0.96 of it (RESULTS.md)
    _config(128, 64, 64, 8, 64, EPI_BUFS=1, MMA_REGS=None, LOADER_REGS=None),
) if smem_bytes(c) <= SMEM_LIMIT)

# small tiles that the CPU simulator gets through quickly (wgmma needs >= 64 rows per group)
SIM_CONFIGS = {
    "tiny": _config(128, 64, 32, 2, 64, GROUP_M=2, EPI_BUFS=1),
    "two_strips": _config(128, 64, 32, 2, 32, GROUP_M=1, EPI_BUFS=2),
    # per-half full barriers + drain-every-step release, no register split (the 4096^3 fp16 form)
    "split_wait0": _config(128, 64, 32, 2, 64, GROUP_M=2, EPI_BUFS=1, SPLIT_FULL=True, DOT_WAIT0=True,
                           MMA_REGS=None, LOADER_REGS=None),
}


def make_descriptors(a, b, c, cfg):
    """Host TMA descriptors with the block shapes ``cfg`` loads and stores (each consumer
    group loads and stores BM/2 rows)."""
    half = cfg["BM"] // 2
    return gemm_descriptors(a, b, c, [half, cfg["BK"]], [cfg["BK"], cfg["BN"]], [half, cfg["EPI_N"]])


def _kernel_call(a, b, c, cfg, num_sms=132):
    """The kernel's arguments and launch options (``num_sms``: the tile stride NUM_SMS)."""
    return tma_gemm_call(make_descriptors(a, b, c, cfg), cfg, num_sms)


def _launch_call(a, b, c, cfg, num_sms=None, balance=True):
    """The launch of one explicit config: (kernel, grid, args, options).

    ``num_sms``: SMs to spread the persistent CTAs over (default: all); the CTA count is
    ``persistent_ctas(tiles, num_sms)``, or ``min(num_sms, tiles)`` with ``balance=False``
    (the launch before the balanced CTA count)."""
    num_sms = num_sms or sm_count()
    tiles = triton.cdiv(a.shape[0], cfg["BM"]) * triton.cdiv(b.shape[1], cfg["BN"])
    ctas = persistent_ctas(tiles, num_sms) if balance else min(num_sms, tiles)
    # NUM_SMS is the tile stride: the CTA count, except in the one-wave case, where it stays
    # num_sms so that every small problem shares one compiled kernel
    stride = ctas if tiles > num_sms else num_sms
    triton.set_allocator(torch_alloc)
    args, options = _kernel_call(a, b, c, cfg, stride)
    return gemm_ws_coop_kernel, (ctas,), args, options


launch, matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_ws_coop_kernel, _launch_call, _kernel_call, CONFIGS, "the cooperative warp-specialized kernel")

SPEC = gemm_spec("gemm_ws", gemm_ws_coop_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)
