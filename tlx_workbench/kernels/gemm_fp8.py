"""Hopper warp-specialized FP8 GEMM: C = (A @ B) * scale_a * scale_b, fp8 in, bf16 / fp16 out.

The layout of ``gemm_ws`` (read that file first), for 8-bit operands:

* a loader warp group ("default" task) streams A and B k-slices with TMA into a
  STAGES-deep SMEM ring (``full[s]`` counts landed bytes, ``empty[s]`` is released
  by both consumer groups), persistent over tiles in grouped order;
* two wgmma warp groups split each BM x BN tile by rows and share the B slice;
* the epilogue multiplies the fp32 accumulator by the scales, then goes registers ->
  SMEM -> TMA store in EPI_N-wide strips, without waiting for the store.

**Why B arrives as N x K.** A Hopper wgmma reads 16-bit operands from SMEM in either
order, but 8-bit operands only "K-major": each row of the A tile and each *column* of
the B tile must be K-contiguous. A (M, K) row-major is K-major already. B must be held
as B^T, (N, K) row-major: the ring keeps (BN, BK) tiles and the wgmma reads them through
``tlx.local_trans`` (a view, no data moves). ``torch._scaled_mm`` asks for the same: its
``b`` is (K, N) column-major, i.e. ``b.t()`` is contiguous. :func:`matmul_fp8` takes b
that way and passes ``b.t()`` to TMA as is (no copy); a row-major (K, N) ``b`` is
transposed once with ``b.t().contiguous()``, a copy of K*N bytes read and written
(measured by ``benchmarks/gemm_fp8_h200.py``: ``transpose_us``); do it once per weight,
not per call.

**Scales.** fp8 values carry a scale the GEMM must apply: per tensor (one float32 each,
``scale_a`` of shape () or (1,), the same for ``scale_b``) or row-wise (``scale_a`` (M, 1):
one per row of A, a token; ``scale_b`` (1, N): one per column of B, a channel). Both are
constant along K, so they factor out of the sum and are applied once per output element
in the epilogue, in fp32, before the cast: ``C[i, j] = sa[i] * sb[j] * sum_k A[i, k] B[k, j]``.

**Accumulation.** The wgmma accumulates in fp32 registers across the whole K loop, as
``torch._scaled_mm(..., use_fast_accum=True)`` does. (Hopper's fp8 tensor cores add
products with fewer mantissa bits than fp32; ``use_fast_accum=False`` re-adds into a
full-fp32 accumulator every few k-steps. The ``PROMOTE`` switch does that here: each
k-step's wgmma starts a fresh accumulator that is then added to the running fp32 sum.)
The CPU simulator computes in exact float32 either way.

>>> from tlx_workbench.kernels.gemm_fp8 import matmul_fp8                 # on a Hopper GPU
>>> c = matmul_fp8(a, b, scale_a, scale_b)   # a (M, K) e4m3, b (K, N) col-major e4m3/e5m2
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ..errors import TLXWorkbenchError
from ._common import (SMEM_LIMIT, KernelSpec, check_aligned, check_same_device, grouped_tile, load_tiles,
                      persistent_ctas, ring_slot, sm_count, torch_alloc)
from .gemm_pingpong import TURN_0, pingpong_mainloop
from .gemm_ws import _store_strips
from .host import (LaunchPlans, TunedConfigs, config_key, fastest_first, kept_key, kernel_plan, operand_key,
                   tuned_config)


@triton.jit
def _load_scales(scale_a, scale_b, sa_one, sb_one, row, col, M, N, ROWS: tl.constexpr, COLS: tl.constexpr,
                 A_ROWWISE: tl.constexpr, B_COLWISE: tl.constexpr):
    """The scales of the output block at (row, col): scale_a's ROWS values (row-wise) or ``sa_one``, scale_b's
    COLS values (per column) or ``sb_one`` (the per-tensor values, loaded once per CTA)."""
    sa = sa_one
    sb = sb_one
    if A_ROWWISE:
        rows = row + tl.arange(0, ROWS)
        sa = tl.load(scale_a + rows, mask=rows < M, other=0.0)
    if B_COLWISE:
        cols = col + tl.arange(0, COLS)
        sb = tl.load(scale_b + cols, mask=cols < N, other=0.0)
    return sa, sb


@triton.jit
def _apply_scales(acc, sa, sb, A_ROWWISE: tl.constexpr, B_COLWISE: tl.constexpr):
    """acc (fp32) times its scales, in fp32: one multiply per element when both are per tensor."""
    if A_ROWWISE:
        acc = acc * sa[:, None]
    if B_COLWISE:
        acc = acc * sb[None, :]
    if not A_ROWWISE and not B_COLWISE:
        acc = acc * (sa * sb)
    elif not A_ROWWISE:
        acc = acc * sa
    elif not B_COLWISE:
        acc = acc * sb
    return acc


@triton.jit
def _load_steps(a_desc, b_desc, a_ring, b_ring, full, empty, row, col, k_steps, use,
                HALF_M: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr, STAGE_BYTES: tl.constexpr):
    """Loader: the k-slices of the tile at (row, col) into the ring; returns the ring counter.
    B's slice is a (BN, BK) box of B^T: K-major, as an 8-bit wgmma operand must be."""
    for k in range(0, k_steps):
        s, parity = ring_slot(use, STAGES)
        tlx.barrier_wait(empty[s], parity ^ 1)     # a fresh barrier is in phase 0: parity 1 passes
        tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
        tlx.async_descriptor_load(a_desc, a_ring[2 * s], [row, k * BK], full[s])
        tlx.async_descriptor_load(b_desc, b_ring[s], [col, k * BK], full[s])
        tlx.async_descriptor_load(a_desc, a_ring[2 * s + 1], [row + HALF_M, k * BK], full[s])
        use += 1
    return use


@triton.jit
def _mma_steps(a_ring, b_ring, full, empty, wg, k_steps, use, STAGES: tl.constexpr, DOT_WAIT0: tl.constexpr,
               PROMOTE: tl.constexpr):
    """One consumer group: acc = sum over the k-slices of its A half @ B (B read through a
    transposed view of its K-major tile). Returns (acc, ring counter); every slot is released."""
    s, parity = ring_slot(use, STAGES)
    tlx.barrier_wait(full[s], parity)
    acc = tlx.async_dot(a_ring[2 * s + wg], tlx.local_trans(b_ring[s]))
    if DOT_WAIT0 or PROMOTE:
        acc = tlx.async_dot_wait(0, acc)
        tlx.barrier_arrive(empty[s])
    prev = s
    use += 1
    for k in range(1, k_steps):
        s, parity = ring_slot(use, STAGES)
        tlx.barrier_wait(full[s], parity)
        if PROMOTE:
            # a fresh wgmma accumulator per k-step, added into the fp32 sum (full-precision accumulation)
            part = tlx.async_dot(a_ring[2 * s + wg], tlx.local_trans(b_ring[s]))
            part = tlx.async_dot_wait(0, part)
            tlx.barrier_arrive(empty[s])
            acc += part
        else:
            acc = tlx.async_dot(a_ring[2 * s + wg], tlx.local_trans(b_ring[s]), acc)
            if DOT_WAIT0:
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[s])
            else:
                acc = tlx.async_dot_wait(1, acc)    # step k-1 retired: its slot is free
                tlx.barrier_arrive(empty[prev])
        prev = s
        use += 1
    if not (DOT_WAIT0 or PROMOTE):
        acc = tlx.async_dot_wait(0, acc)
        tlx.barrier_arrive(empty[prev])
    return acc, use


@triton.jit
def gemm_fp8_kernel(a_desc, b_desc, c_desc, scale_a, scale_b, M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                    EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr, NUM_SMS: tl.constexpr,
                    A_ROWWISE: tl.constexpr = False, B_COLWISE: tl.constexpr = False,
                    LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                    DOT_WAIT0: tl.constexpr = False, PROMOTE: tl.constexpr = False,
                    SCALES_EARLY: tl.constexpr = False):
    HALF_M: tl.constexpr = BM // 2
    STRIPS: tl.constexpr = BN // EPI_N

    # SMEM: the A half-tiles of stage s at 2*s and 2*s+1; B^T tiles (BN, BK), K-major
    a_ring = tlx.local_alloc((HALF_M, BK), tlx.dtype_of(a_desc), 2 * STAGES)
    b_ring = tlx.local_alloc((BN, BK), tlx.dtype_of(b_desc), STAGES)
    c_strips = tlx.local_alloc((HALF_M, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_steps = tl.cdiv(K, BK)
    STAGE_BYTES: tl.constexpr = (BM + BN) * BK      # one byte per fp8 element

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            use = 0
            for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                use = _load_steps(a_desc, b_desc, a_ring, b_ring, full, empty, pid_m * BM, pid_n * BN,
                                  k_steps, use, HALF_M, BK, STAGES, STAGE_BYTES)

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            sa_one = tl.load(scale_a)       # per-tensor scales: once per CTA (unused when row-wise)
            sb_one = tl.load(scale_b)
            use = 0
            for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                row = pid_m * BM + wg * HALF_M
                if SCALES_EARLY:
                    # issued before the mainloop, so their latency hides under it (registers held across it)
                    sa, sb = _load_scales(scale_a, scale_b, sa_one, sb_one, row, pid_n * BN, M, N, HALF_M, BN,
                                          A_ROWWISE, B_COLWISE)
                acc, use = _mma_steps(a_ring, b_ring, full, empty, wg, k_steps, use, STAGES, DOT_WAIT0, PROMOTE)
                if not SCALES_EARLY:
                    sa, sb = _load_scales(scale_a, scale_b, sa_one, sb_one, row, pid_n * BN, M, N, HALF_M, BN,
                                          A_ROWWISE, B_COLWISE)
                acc = _apply_scales(acc, sa, sb, A_ROWWISE, B_COLWISE)
                _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, row, pid_n * BN, STRIPS, EPI_BUFS, EPI_N)
            tlx.async_descriptor_store_wait(0)



@triton.jit
def gemm_fp8_pingpong_kernel(a_desc, b_desc, c_desc, scale_a, scale_b, M, N, K,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                             GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                             EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr, NUM_SMS: tl.constexpr,
                             A_ROWWISE: tl.constexpr = False, B_COLWISE: tl.constexpr = False,
                             LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                             SCALES_EARLY: tl.constexpr = False):
    """The ping-pong form (``gemm_pingpong``'s protocol): each consumer group owns whole BM x BN tiles,
    alternating; two named barriers hand the tensor core over once a group has issued its last wgmma of a
    tile, so one group's epilogue (scales, convert, TMA store) hides under the other's mainloop."""
    STRIPS: tl.constexpr = BN // EPI_N
    a_ring = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), STAGES)
    b_ring = tlx.local_alloc((BN, BK), tlx.dtype_of(b_desc), STAGES)
    c_strips = tlx.local_alloc((BM, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)     # one group reads a given stage

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_steps = tl.cdiv(K, BK)
    STAGE_BYTES: tl.constexpr = (BM + BN) * BK

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            load_tiles(a_desc, b_desc, a_ring, b_ring, full, empty, num_tiles, num_pid_m, num_pid_n, k_steps,
                       BM, BN, BK, GROUP_M, STAGES, NUM_SMS, STAGE_BYTES, True)

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            sa_one = tl.load(scale_a)
            sb_one = tl.load(scale_b)
            if wg == 1:
                tlx.named_barrier_arrive(TURN_0, 256)       # group 0 owns the first turn
            seq = wg        # position of this group's tile in the loader's sequence
            for tile in range(tl.program_id(0) + wg * NUM_SMS, num_tiles, 2 * NUM_SMS):
                pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
                if SCALES_EARLY:
                    sa, sb = _load_scales(scale_a, scale_b, sa_one, sb_one, pid_m * BM, pid_n * BN, M, N, BM, BN,
                                          A_ROWWISE, B_COLWISE)
                use = seq * k_steps
                seq += 2
                acc = pingpong_mainloop(a_ring, b_ring, full, empty, wg, use, k_steps, STAGES, True)
                if not SCALES_EARLY:
                    sa, sb = _load_scales(scale_a, scale_b, sa_one, sb_one, pid_m * BM, pid_n * BN, M, N, BM, BN,
                                          A_ROWWISE, B_COLWISE)
                acc = _apply_scales(acc, sa, sb, A_ROWWISE, B_COLWISE)
                _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, pid_m * BM, pid_n * BN, STRIPS, EPI_BUFS, EPI_N)
            tlx.async_descriptor_store_wait(0)

def _config(BM, BN, BK, STAGES, EPI_N, GROUP_M=8, EPI_BUFS=2, MMA_REGS=232, LOADER_REGS=40,
            DOT_WAIT0=False, PROMOTE=False, SCALES_EARLY=False, PINGPONG=False):
    # MMA_REGS/LOADER_REGS None: no setmaxnreg, every warp keeps the launch's even share
    cfg = dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
               MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS, SCALES_EARLY=SCALES_EARLY)
    if PINGPONG:        # the ping-pong kernel: no DOT_WAIT0 / PROMOTE forms
        return dict(cfg, PINGPONG=True)
    return dict(cfg, DOT_WAIT0=DOT_WAIT0, PROMOTE=PROMOTE)


def smem_bytes(cfg, out_elem=2) -> int:
    """SMEM this config asks for: the fp8 ring (1 byte an element), the output strips, barriers.

    >>> smem_bytes(CONFIGS[0]) <= SMEM_LIMIT
    True
    """
    ring = cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"]
    rows = cfg["BM"] if cfg.get("PINGPONG") else cfg["BM"] // 2      # a consumer group's tile rows
    strips = 2 * cfg["EPI_BUFS"] * rows * cfg["EPI_N"] * out_elem
    return ring + strips + 2560      # barriers and alignment: 0.2-2.1 KiB measured


# candidates for the H200, not yet measured (benchmarks/gemm_fp8_h200.py ranks them). BK=128: one
# 128-byte swizzled row of fp8 per k-slice row, the k-depth a 16-bit BK=64 slice has in bytes, and
# 4 wgmma k32 instructions per slice. 128x256 tiles keep the 16-bit kernel's register budget
# (64x256 fp32 accumulator = 128 registers per consumer thread); 4 stages of 48 KiB fill the SMEM.
# the default first: fastest in 3 of the 4 cells of the H200 run on 2026-12-02 (4096^3 and 8192^3, per-tensor and
# row-wise; 1.024-1.051x torch._scaled_mm with fast accumulation), listed then as cfg2 (benchmarks/RESULTS.md)
CONFIGS = tuple(c for c in (
    _config(128, 256, 128, 3, 128),
    _config(128, 256, 128, 4, 64),
    _config(128, 256, 128, 4, 64, DOT_WAIT0=True),
    _config(128, 256, 128, 3, 64, GROUP_M=16),
    _config(128, 256, 128, 4, 128, EPI_BUFS=1),
    _config(128, 256, 128, 4, 64, MMA_REGS=240, LOADER_REGS=24),
    _config(128, 128, 128, 6, 64),
    _config(256, 128, 128, 3, 64, EPI_BUFS=1),
    _config(128, 256, 64, 6, 64),
    # a second fp32 accumulator per k-step: 64 x 128 per group (64 x 256 spills: measured by ptxas offline)
    _config(128, 128, 128, 6, 64, PROMOTE=True),
    _config(128, 256, 128, 4, 64, SCALES_EARLY=True),
    # ping-pong: a group's whole-tile accumulator, 128 x 128 or 64 x 256 fp32 = 128 registers a thread
    _config(128, 128, 128, 6, 64, EPI_BUFS=1, PINGPONG=True),
    _config(128, 128, 128, 5, 128, EPI_BUFS=1, PINGPONG=True, SCALES_EARLY=True),
    _config(64, 256, 128, 5, 64, EPI_BUFS=1, PINGPONG=True),
) if smem_bytes(c) <= SMEM_LIMIT)

# small tiles the CPU simulator gets through quickly (wgmma: >= 64 rows per group, fp8 k >= 32)
SIM_CONFIGS = {
    "tiny": _config(128, 64, 64, 2, 64, GROUP_M=2, EPI_BUFS=1),
    "two_strips_wait0": _config(128, 64, 32, 3, 32, GROUP_M=1, EPI_BUFS=2, DOT_WAIT0=True,
                                MMA_REGS=None, LOADER_REGS=None),
    "promote_scales_early": _config(128, 64, 32, 2, 64, GROUP_M=2, EPI_BUFS=1, PROMOTE=True, SCALES_EARLY=True),
    "pingpong": _config(64, 64, 32, 2, 64, GROUP_M=2, EPI_BUFS=1, PINGPONG=True),
    "pingpong_scales_early": _config(64, 64, 64, 3, 32, GROUP_M=1, EPI_BUFS=2, PINGPONG=True, SCALES_EARLY=True),
}

FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")
OUT_DTYPES = ("bfloat16", "float16")


def _fail(msg, hint):
    import sys
    raise TLXWorkbenchError(msg, file=sys.modules[__name__].__file__, line=None, hint=hint)


def _scale_kind(scale, rows: int, name: str, shape_word: str) -> bool:
    """True for a per-row/per-column scale, False for one per tensor; checks dtype, shape, layout."""
    import torch
    if not isinstance(scale, torch.Tensor) or scale.dtype != torch.float32:
        _fail(f"{name} must be a float32 tensor; got {getattr(scale, 'dtype', type(scale).__name__)}",
              f"pass torch.tensor(s, dtype=torch.float32, device=a.device) or a float32 {shape_word} tensor")
    if scale.numel() == 1:
        return False
    want = (rows, 1) if name == "scale_a" else (1, rows)
    if tuple(scale.shape) != want or not scale.is_contiguous():
        _fail(f"{name} has shape {tuple(scale.shape)}: expected one value (per tensor) or a contiguous "
              f"{want} ({shape_word})", f"reshape {name} to {want}, or pass a single scale")
    return True


def k_major_b(b):
    """B^T as the kernel reads it: (N, K) row-major. ``b`` (K, N) column-major (``b.t()`` contiguous,
    the layout ``torch._scaled_mm`` asks for) costs nothing; a row-major ``b`` is copied once
    (``b.t().contiguous()``: K*N bytes read and written)."""
    bt = b.t()
    return bt if bt.is_contiguous() else bt.contiguous()


def check_operands(a, b, scale_a, scale_b, out_dtype):
    """Shape, dtype, layout and alignment checks; returns (A_ROWWISE, B_COLWISE)."""
    import torch
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        _fail(f"matmul_fp8 needs a (M, K) and b (K, N); got {tuple(a.shape)} and {tuple(b.shape)}",
              "pass 2-D tensors whose inner dimensions agree")
    for name, t in (("a", a), ("b", b)):
        if str(t.dtype).removeprefix("torch.") not in FP8_DTYPES:
            _fail(f"matmul_fp8 takes float8_e4m3fn or float8_e5m2 operands; {name} is {t.dtype}",
                  f"quantize {name} first, e.g. ({name} / scale).to(torch.float8_e4m3fn)")
    if str(out_dtype).removeprefix("torch.") not in OUT_DTYPES:
        _fail(f"out_dtype must be torch.bfloat16 or torch.float16; got {out_dtype}", "pick one of those two")
    if not a.is_contiguous():
        _fail("a must be row-major (M, K) contiguous: the wgmma reads it K-major", "call a.contiguous() first")
    M, K = a.shape
    N = b.shape[1]
    if K % 16 or N % 8:
        _fail(f"TMA needs 16-byte aligned rows: K={K} must be a multiple of 16 (fp8 rows of A and B^T) and "
              f"N={N} of 8 (16-bit rows of C)", "pad K to a multiple of 16 and N to a multiple of 8")
    kinds = _scale_kind(scale_a, M, "scale_a", "per row of a"), _scale_kind(scale_b, N, "scale_b", "per column of b")
    import sys
    here = sys.modules[__name__].__file__
    check_same_device(here, "matmul_fp8", a=a, b=b, scale_a=scale_a, scale_b=scale_b)
    check_aligned(here, "matmul_fp8", a=a, b=b)
    return kinds


def make_descriptors(a, bt, c, cfg):
    """TMA descriptors of A (M, K), B^T (N, K) and C (M, N) with the blocks ``cfg`` moves."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    half, BK = (cfg["BM"] if cfg.get("PINGPONG") else cfg["BM"] // 2), cfg["BK"]
    M, K = a.shape
    N = bt.shape[0]
    return (TensorDescriptor(a, [M, K], [K, 1], [half, BK]),
            TensorDescriptor(bt, [N, K], [K, 1], [cfg["BN"], BK]),
            TensorDescriptor(c, [M, N], [N, 1], [half, cfg["EPI_N"]]))


def kernel_for(cfg):
    """The kernel a config runs: the ping-pong one for ``PINGPONG`` configs, else the cooperative one."""
    return gemm_fp8_pingpong_kernel if cfg.get("PINGPONG") else gemm_fp8_kernel


def _kernel_call(a, bt, c, scale_a, scale_b, cfg, a_rowwise, b_colwise, num_sms=132):
    """The positional arguments and launch options of ``kernel_for(cfg)``."""
    a_d, b_d, c_d = make_descriptors(a, bt, c, cfg)
    M, K = a.shape
    args = (a_d, b_d, c_d, scale_a, scale_b, M, bt.shape[0], K)
    constexprs = {k: v for k, v in cfg.items() if k != "PINGPONG"}
    if cfg.get("PINGPONG"):
        if cfg.get("DOT_WAIT0") or cfg.get("PROMOTE"):
            _fail(f"config {cfg}: the ping-pong kernel has no DOT_WAIT0 or PROMOTE form",
                  "set PINGPONG=False for those switches, or drop them")
        constexprs = {k: v for k, v in constexprs.items() if k not in ("DOT_WAIT0", "PROMOTE")}
    return args, dict(NUM_SMS=num_sms, A_ROWWISE=a_rowwise, B_COLWISE=b_colwise, num_warps=4, num_stages=0,
                      **constexprs)


def _launch_call(a, bt, c, scale_a, scale_b, cfg, num_sms=None):
    """The launch of one config: (kernel, grid, args, options). Per-tensor or row-wise scales are read off the
    scale tensors' sizes."""
    import torch
    num_sms = num_sms or sm_count()
    a_rowwise = scale_a.numel() != 1
    b_colwise = scale_b.numel() != 1
    tiles = triton.cdiv(a.shape[0], cfg["BM"]) * triton.cdiv(bt.shape[0], cfg["BN"])
    ctas = persistent_ctas(tiles, num_sms)
    # NUM_SMS is the tile stride: the CTA count, or num_sms in the one-wave case (one compiled kernel)
    stride = ctas if tiles > num_sms else num_sms
    triton.set_allocator(torch_alloc)
    sa = scale_a.reshape(-1).to(torch.float32)
    sb = scale_b.reshape(-1).to(torch.float32)
    args, options = _kernel_call(a, bt, c, sa, sb, cfg, a_rowwise, b_colwise, stride)
    return kernel_for(cfg), (ctas,), args, options


_launch_plans = LaunchPlans("gemm_fp8.launch")


def launch(a, bt, c, scale_a, scale_b, cfg, num_sms=None):
    """Run the kernel once with one config, on B^T ``bt`` (N, K) row-major. Returns ``c``. Planned: the first call
    with these operand shapes, strides, dtypes and config works the launch out and binds it to the GPU launcher;
    later ones launch at once."""
    try:
        key = (operand_key(a, bt, c, scale_a, scale_b), config_key(cfg), num_sms)
    except (AttributeError, TypeError):
        key = None
    plan = _launch_plans.lookup(key) if key is not None else None
    if plan is None:
        kernel, grid, args, options = _launch_call(a, bt, c, scale_a, scale_b, cfg, num_sms)
        plan = kernel_plan(kernel, grid, args, options, (a, bt, c, scale_a, scale_b))
        if scale_a.dtype != scale_b.dtype or str(scale_a.dtype) != "torch.float32":
            plan.bound = None          # the kernel reads float32 copies, not the tensors' own memory
        _launch_plans.add(key, plan)
        if plan.bound is None:
            kernel[grid](*args, **options)
            return c
    if plan.bound is not None and plan.bound.ready():
        plan.launch(a.data_ptr(), bt.data_ptr(), c.data_ptr(), scale_a.data_ptr(), scale_b.data_ptr())
        return c
    kernel, grid, args, options = _launch_call(a, bt, c, scale_a, scale_b, cfg, num_sms)
    kernel[grid](*args, **options)
    return c


launch.plans = _launch_plans


def launcher(a, bt, c, scale_a, scale_b, cfg, num_sms=None):
    """A function of no arguments that launches the kernel on these tensors (``launch``, whose plan keeps the
    TMA descriptors, grid and bound kernel). ``bt``: B^T, (N, K) row-major."""
    def run():
        return launch(a, bt, c, scale_a, scale_b, cfg, num_sms)
    return run


class Fp8Plan:
    """What ``matmul_fp8`` works out once per operand signature: the config, the output, whether B is read as it
    is (column-major) or transposed first, and the kernel plan."""
    __slots__ = ("config", "shape", "dtype", "device", "b_as_is", "launch")

    def __init__(self, config, shape, dtype, device, b_as_is, launch):
        self.config, self.shape, self.dtype, self.device = config, shape, dtype, device
        self.b_as_is, self.launch = b_as_is, launch

    @property
    def bound(self):
        return self.launch.bound if self.launch is not None else None


_plans = LaunchPlans("gemm_fp8.matmul_fp8")
_tuned = TunedConfigs(_plans)


def matmul_fp8(a, b, scale_a, scale_b, out_dtype=None, config=None):
    """C = (A @ B) * scale_a * scale_b in ``out_dtype`` (bf16 by default), fp32 accumulation.

    ``a``: (M, K) float8_e4m3fn or float8_e5m2, row-major. ``b``: (K, N) fp8 of either format (the
    wgmma takes any pair; ``torch._scaled_mm`` refuses e5m2 x e5m2), best given column-major
    (``b.t()`` contiguous, as for ``torch._scaled_mm``): the kernel then reads ``b.t()`` directly. A row-major ``b`` is transposed first (one K*N-byte
    copy per call; transpose a weight once with ``k_major_b`` and pass ``bt.t()``).
    ``scale_a``: float32, one value or (M, 1); ``scale_b``: one value or (1, N).
    ``config``: one dict of ``CONFIGS``; by default the fastest for (M, N, K, dtypes, scale kinds)
    is found once with ``tune`` and remembered (in ``matmul_fp8.tuned``). The first call with an operand
    signature checks in full and plans the launch (``matmul_fp8.plans``); a repeated call costs about what
    ``torch._scaled_mm``'s host side does. Capturable in a CUDA graph once warm; under ``torch.compile`` an
    opaque custom op.

    >>> c = matmul_fp8(a, b.t().contiguous().t(), sa, sb)     # doctest: +SKIP
    """
    import torch
    if torch.compiler.is_compiling():
        from .torch_ops import matmul_fp8_op
        return matmul_fp8_op(a, b, scale_a, scale_b, out_dtype, config)
    out_dtype = out_dtype or torch.bfloat16
    try:
        key = (operand_key(a, b, scale_a, scale_b), out_dtype, config_key(config))
    except (AttributeError, TypeError):
        key = None
    plan = _plans.lookup(key) if key is not None else None
    if plan is None:
        check_operands(a, b, scale_a, scale_b, out_dtype)
        bt = k_major_b(b)
        c = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
        cfg = config
        if cfg is None:
            tkey = (a.shape[0], b.shape[1], a.shape[1], a.dtype, b.dtype, out_dtype, scale_a.numel() != 1,
                    scale_b.numel() != 1)
            cfg = tuned_config(_tuned, tkey, lambda: tune(a, bt, scale_a, scale_b, c))
        launch(a, bt, c, scale_a, scale_b, cfg)
        kp = _launch_plans.plans.get((operand_key(a, bt, c, scale_a, scale_b), config_key(cfg), None))
        _plans.add(kept_key(key, config),
                   Fp8Plan(cfg, c.shape, out_dtype, c.device, bt.data_ptr() == b.data_ptr(), kp))
        return c
    c = torch.empty(plan.shape, dtype=plan.dtype, device=plan.device)
    kp = plan.launch
    if plan.b_as_is and kp is not None and kp.bound is not None and kp.bound.ready():
        # b column-major: B^T is b's own memory, at b's address
        kp.launch(a.data_ptr(), b.data_ptr(), c.data_ptr(), scale_a.data_ptr(), scale_b.data_ptr())
        return c
    bt = b.t() if plan.b_as_is else b.t().contiguous()
    if kp is not None and kp.bound is not None and kp.bound.ready():
        kp.launch(a.data_ptr(), bt.data_ptr(), c.data_ptr(), scale_a.data_ptr(), scale_b.data_ptr())
        return c
    launch(a, bt, c, scale_a, scale_b, plan.config)
    if kp is None:              # planned when the launch could not be bound: take its plan now, if kept
        key = (operand_key(a, bt, c, scale_a, scale_b), config_key(plan.config), None)
        plan.launch = _launch_plans.plans.get(key)
    return c


matmul_fp8.tuned = _tuned
matmul_fp8.plans = _plans
matmul = matmul_fp8          # the name every library module's launcher has


def tune(a, bt, scale_a, scale_b, c, configs=CONFIGS):
    """Time every config on (a, B^T ``bt``) with do_bench; returns [(config, ms), ...] fastest first."""
    return fastest_first(configs, lambda cfg: launch(a, bt, c, scale_a, scale_b, cfg))


def compile_offline(cfg, target="sm_90", shape=(512, 512, 512), a_dtype="float8_e4m3fn",
                    b_dtype="float8_e4m3fn", out_dtype="bfloat16", rowwise=False):
    """Compile (no launch) for ``target`` on any machine, on empty operands of ``shape`` = (M, N, K);
    returns Triton's CompiledKernel.

    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0      # doctest: +SKIP
    True
    """
    import torch
    from ..target import offline
    M, N, K = shape
    with offline(target):
        a = torch.empty(M, K, dtype=getattr(torch, a_dtype))
        bt = torch.empty(N, K, dtype=getattr(torch, b_dtype))
        c = torch.empty(M, N, dtype=getattr(torch, out_dtype))
        sa = torch.empty(M if rowwise else 1, dtype=torch.float32)
        sb = torch.empty(N if rowwise else 1, dtype=torch.float32)
        args, options = _kernel_call(a, bt, c, sa, sb, cfg, rowwise, rowwise)
        return kernel_for(cfg).warmup(*args, grid=(1,), **options)


def reference(a, b, scale_a, scale_b, out_dtype=None):
    """(A @ B) * scale_a * scale_b in float64 on the CPU, cast to ``out_dtype``: the yardstick."""
    import torch
    out_dtype = out_dtype or torch.bfloat16
    sa = scale_a.double().cpu().reshape(-1, 1) if scale_a.numel() != 1 else scale_a.double().cpu().reshape(())
    sb = scale_b.double().cpu().reshape(1, -1) if scale_b.numel() != 1 else scale_b.double().cpu().reshape(())
    out = (a.cpu().double() @ b.cpu().double()) * sa * sb
    return out.to(out_dtype).to(a.device)


def make_inputs(shape, dtype="float8_e4m3fn", device="cpu", rowwise=False, b_dtype=None):
    """Fresh random quantized (a, b, scale_a, scale_b) for ``shape`` = (M, N, K), quantized as a
    user would: each operand (or each row of A / column of B) scaled so that its largest magnitude
    is the format's largest finite value. ``b`` comes column-major, as ``torch._scaled_mm`` wants."""
    import torch
    M, N, K = shape
    a_dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    b_dt = getattr(torch, b_dtype) if isinstance(b_dtype, str) else (b_dtype or a_dt)
    a32 = torch.randn(M, K, device=device)
    b32 = torch.randn(N, K, device=device)          # B^T: quantized per column of B

    def quantize(x, dt, dim):
        amax = x.abs().amax(dim=dim, keepdim=True) if rowwise else x.abs().amax().reshape(1)
        scale = (amax / torch.finfo(dt).max).clamp(min=1e-12).float()
        return (x / scale).to(dt), scale

    a, sa = quantize(a32, a_dt, 1)          # sa (M, 1) or (1,)
    bt, sb = quantize(b32, b_dt, 1)         # sb (N, 1) or (1,)
    return a, bt.t(), sa, sb.reshape(1, -1) if rowwise else sb


def flops(M, N, K) -> float:
    return 2.0 * M * N * K


def _spec_inputs(shape, dtype, device):
    return make_inputs(shape, "float8_e4m3fn", device)


SPEC = KernelSpec(name="gemm_fp8", kernel=gemm_fp8_kernel, launch=matmul_fp8, reference=reference, configs=CONFIGS,
                  sim_configs=SIM_CONFIGS, make_inputs=_spec_inputs, flops=flops, doc=__doc__)
