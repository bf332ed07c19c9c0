"""Microbenchmark kernels that measure what the simulator's cost model charges.

Each kernel times itself with ``%clock64`` (the SM's cycle counter) and ``%globaltimer`` (ns),
per CTA, and records ``%smid``: a rate per SM cycle does not depend on the clock the board
happens to run at, and the two counters together give that clock. ``TIMED=False`` leaves the
timers out, so the simulator (which has no cycle counter) can run each protocol on the CPU.

Record layout (int64, per CTA and per timed task): ``[clock0, clock1, ns0, ns1, smid]``.
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ..runtime.counters import global_ns as _ns, sm_clock as _clock, sm_id as _smid

REC = 5          # int64 fields per record


@triton.jit
def _start(TIMED: tl.constexpr):
    if TIMED:
        return _clock(), _ns()
    else:
        return 0, 0


@triton.jit
def _record(rec_ptr, slot, c0, n0, TIMED: tl.constexpr):
    """Write [clock0, clock1, ns0, ns1, smid] of one timed stretch at record ``slot``."""
    if TIMED:
        c1 = _clock()
        n1 = _ns()
        p = rec_ptr + slot * 5
        tl.store(p, c0)
        tl.store(p + 1, c1)
        tl.store(p + 2, n0)
        tl.store(p + 3, n1)
        tl.store(p + 4, _smid().to(tl.int64))


@triton.jit
def _mma_loop(a_ptr, b_ptr, a_buf, b_buf, wg, ITERS, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              IN_FLIGHT: tl.constexpr, TIMED: tl.constexpr):
    """One consumer group's timed wgmma loop: its operands into SMEM (random data, loaded once), then ITERS wgmmas
    (BM x BK) @ (BK x BN) keeping IN_FLIGHT outstanding. Returns (acc, clock0, ns0): the record is the caller's."""
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[:, None]
    rk = tl.arange(0, BK)[None, :]
    tlx.local_store(a_buf[wg], tl.load(a_ptr + rm * BK + rk))
    tlx.local_store(b_buf[wg], tl.load(b_ptr + rn * BK + rk))
    tlx.fence("async_shared")
    c0, n0 = _start(TIMED)
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(ITERS):
        acc = tlx.async_dot(a_buf[wg], tlx.local_trans(b_buf[wg]), acc)
        acc = tlx.async_dot_wait(IN_FLIGHT - 1, acc)
    acc = tlx.async_dot_wait(0, acc)
    return acc, c0, n0


@triton.jit
def mma_loop_kernel(a_ptr, b_ptr, out_ptr, rec_ptr, ITERS,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CONSUMERS: tl.constexpr,
                    IN_FLIGHT: tl.constexpr, TIMED: tl.constexpr):
    """Tensor-core throughput: each of CONSUMERS warp groups issues ITERS wgmmas
    (BM x BK) @ (BK x BN) on operands already in SMEM (random data, loaded once), keeping
    IN_FLIGHT of them outstanding. No memory traffic in the loop."""
    dtype: tl.constexpr = a_ptr.dtype.element_ty
    a_buf = tlx.local_alloc((BM, BK), dtype, CONSUMERS)
    b_buf = tlx.local_alloc((BN, BK), dtype, CONSUMERS)      # K-major B: what fp8 / tf32 wgmma needs
    with tlx.async_tasks():
        with tlx.async_task("default"):
            pass
        with tlx.async_task(num_warps=4, replicate=CONSUMERS):
            wg = tlx.async_task_replica_id()
            acc, c0, n0 = _mma_loop(a_ptr, b_ptr, a_buf, b_buf, wg, ITERS, BM, BN, BK, IN_FLIGHT, TIMED)
            _record(rec_ptr, tl.program_id(0) * CONSUMERS + wg, c0, n0, TIMED)
            base = out_ptr + (tl.program_id(0) * CONSUMERS + wg) * BM * BN
            tl.store(base + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :], acc)


@triton.jit
def _tma_stream(desc, ring, full, LOADS, REGION, BOX_M: tl.constexpr, STAGES: tl.constexpr,
                BOX_BYTES: tl.constexpr, TIMED: tl.constexpr, SPREAD: tl.constexpr = 0):
    """LOADS TMA box loads into ``ring``, STAGES in flight; box i of CTA p is rows ``((p * (LOADS + SPREAD) + i) %
    REGION) * BOX_M``. SPREAD (odd, against a power-of-two REGION) starts every CTA at a box of its own where the
    CTAs re-read one L2 region: with SPREAD=0 and LOADS a multiple of REGION every CTA reads the same boxes in the
    same order. Returns (clock0, ns0) of the timed stretch (after the first STAGES are issued): the record is the
    caller's."""
    first = tl.program_id(0) * (LOADS + SPREAD)
    for j in tl.static_range(STAGES):
        tlx.barrier_expect_bytes(full[j], BOX_BYTES)
        tlx.async_descriptor_load(desc, ring[j], [((first + j) % REGION) * BOX_M, 0], full[j])
    c0, n0 = _start(TIMED)
    for i in range(LOADS):
        s = i % STAGES
        tlx.barrier_wait(full[s], (i // STAGES) & 1)
        nxt = i + STAGES
        if nxt < LOADS:
            tlx.barrier_expect_bytes(full[s], BOX_BYTES)
            tlx.async_descriptor_load(desc, ring[s], [((first + nxt) % REGION) * BOX_M, 0], full[s])
    return c0, n0


@triton.jit
def tma_stream_kernel(desc, rec_ptr, ITERS, REGION,
                      BOX_M: tl.constexpr, BOX_K: tl.constexpr, STAGES: tl.constexpr, TIMED: tl.constexpr,
                      SPREAD: tl.constexpr = 0):
    """TMA load bandwidth and latency: each CTA keeps STAGES box loads in flight, ITERS loads in
    all. Box i of CTA p is rows ``((p * (ITERS + SPREAD) + i) % REGION) * BOX_M``: a REGION as large as all
    CTAs' loads streams from HBM, a small one is read again and again from L2 (SPREAD: see ``_tma_stream``)."""
    dtype: tl.constexpr = tlx.dtype_of(desc)
    BOX_BYTES: tl.constexpr = BOX_M * BOX_K * tlx.size_of(dtype)
    buf = tlx.local_alloc((BOX_M, BOX_K), dtype, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    c0, n0 = _tma_stream(desc, buf, full, ITERS, REGION, BOX_M, STAGES, BOX_BYTES, TIMED, SPREAD)
    _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)


@triton.jit
def tma_store_kernel(desc, rec_ptr, ITERS, REGION,
                     BOX_M: tl.constexpr, BOX_N: tl.constexpr, STAGES: tl.constexpr, TIMED: tl.constexpr):
    """The epilogue's TMA store: ITERS box stores from SMEM, at most STAGES - 1 outstanding
    while the next box is written (the library's epilogue rotation)."""
    buf = tlx.local_alloc((BOX_M, BOX_N), tlx.dtype_of(desc), STAGES)
    c0, n0 = _tma_store_stream(desc, buf, ITERS, REGION, BOX_M, BOX_N, STAGES, TIMED)
    _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)


@triton.jit
def _tma_store_stream(desc, buf, ITERS, REGION, BOX_M: tl.constexpr, BOX_N: tl.constexpr, STAGES: tl.constexpr,
                      TIMED: tl.constexpr):
    """ITERS TMA box stores from ``buf`` (STAGES boxes, filled with ones first), at most STAGES - 1 outstanding; box
    i of CTA p to rows ``((p * ITERS + i) % REGION) * BOX_M``. Returns (clock0, ns0) of the timed stretch."""
    dtype: tl.constexpr = tlx.dtype_of(desc)
    for j in tl.static_range(STAGES):
        tlx.local_store(buf[j], tl.full((BOX_M, BOX_N), 1.0, dtype))
    tlx.fence("async_shared")
    first = tl.program_id(0) * ITERS
    c0, n0 = _start(TIMED)
    for i in range(ITERS):
        tlx.async_descriptor_store_wait(STAGES - 1)
        tlx.async_descriptor_store(desc, buf[i % STAGES], [((first + i) % REGION) * BOX_M, 0])
    tlx.async_descriptor_store_wait(0)
    return c0, n0


@triton.jit
def tma_load_store_kernel(ld_desc, st_desc, rec_ptr, LOADS, REGION, STORES, ST_REGION,
                          BOX_M: tl.constexpr, BOX_K: tl.constexpr, STAGES: tl.constexpr,
                          ST_BOX_M: tl.constexpr, ST_BOX_N: tl.constexpr, ST_STAGES: tl.constexpr,
                          TIMED: tl.constexpr):
    """Whether a CTA's TMA stores hold up its TMA loads: the default warp group streams LOADS loads as
    ``tma_stream_kernel`` does (STAGES in flight, rows ``((p * LOADS + i) % REGION) * BOX_M``) while a second warp
    group stores STORES boxes from SMEM (ST_STAGES - 1 outstanding, an epilogue's strip rotation) to rows
    ``((p * STORES + i) % ST_REGION) * ST_BOX_M``. STORES=0 is the loads alone, with the same SMEM and warps.
    Records: the loads, then the stores, per CTA."""
    dtype: tl.constexpr = tlx.dtype_of(ld_desc)
    BOX_BYTES: tl.constexpr = BOX_M * BOX_K * tlx.size_of(dtype)
    ring = tlx.local_alloc((BOX_M, BOX_K), dtype, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    strips = tlx.local_alloc((ST_BOX_M, ST_BOX_N), tlx.dtype_of(st_desc), ST_STAGES)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            c0, n0 = _tma_stream(ld_desc, ring, full, LOADS, REGION, BOX_M, STAGES, BOX_BYTES, TIMED)
            _record(rec_ptr, tl.program_id(0) * 2, c0, n0, TIMED)
        with tlx.async_task(num_warps=4):
            c1, n1 = _tma_store_stream(st_desc, strips, STORES, ST_REGION, ST_BOX_M, ST_BOX_N, ST_STAGES, TIMED)
            _record(rec_ptr, tl.program_id(0) * 2 + 1, c1, n1, TIMED)


@triton.jit
def barrier_pingpong_kernel(rec_ptr, ROUNDS, WARP_BARRIER: tl.constexpr, TIMED: tl.constexpr):
    """mbarrier round trip between two warp groups: A arrives on ping and waits on pong, B waits
    on ping and arrives on pong; one round = two arrive -> phase flip -> wake-up hand-overs.
    ``WARP_BARRIER``: every thread arrives (``alloc_warp_barrier``) instead of one per group."""
    if WARP_BARRIER:
        ping = tlx.alloc_warp_barrier(num_barriers=1, num_warps=4, num_arrivals=1)
        pong = tlx.alloc_warp_barrier(num_barriers=1, num_warps=4, num_arrivals=1)
    else:
        ping = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
        pong = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            c0, n0 = _start(TIMED)
            for i in range(ROUNDS):
                tlx.barrier_arrive(ping[0])
                tlx.barrier_wait(pong[0], i & 1)
            _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tlx.barrier_wait(ping[0], i & 1)
                tlx.barrier_arrive(pong[0])


@triton.jit
def barrier_self_kernel(rec_ptr, ROUNDS, WARP_BARRIER: tl.constexpr, TIMED: tl.constexpr):
    """The cost of an arrive plus a wait that is already satisfied: one warp group arrives on a
    one-arrival barrier and waits for the phase it just completed, ROUNDS times."""
    if WARP_BARRIER:
        bar = tlx.alloc_warp_barrier(num_barriers=1, num_warps=4, num_arrivals=1)
    else:
        bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            c0, n0 = _start(TIMED)
            for i in range(ROUNDS):
                tlx.barrier_arrive(bar[0])
                tlx.barrier_wait(bar[0], i & 1)
            _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)
        with tlx.async_task(num_warps=4):
            pass


@triton.jit
def named_pingpong_kernel(rec_ptr, ROUNDS, TIMED: tl.constexpr):
    """Named-barrier round trip between two warp groups (bar.arrive / bar.sync, 256 threads)."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            c0, n0 = _start(TIMED)
            for i in range(ROUNDS):
                tlx.named_barrier_arrive(1, 256)
                tlx.named_barrier_wait(2, 256)
            _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tlx.named_barrier_wait(1, 256)
                tlx.named_barrier_arrive(2, 256)


@triton.jit
def smem_loop_kernel(x_ptr, out_ptr, rec_ptr, ITERS, BM: tl.constexpr, BN: tl.constexpr, STORE: tl.constexpr,
                     TIMED: tl.constexpr):
    """SMEM <-> registers: one warp group reads (``STORE=False``: local_load, summed) or writes
    (local_store) a BM x BN tile ITERS times, alternating two buffers."""
    dtype: tl.constexpr = x_ptr.dtype.element_ty
    buf = tlx.local_alloc((BM, BN), dtype, 2)
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    tlx.local_store(buf[0], x)
    tlx.local_store(buf[1], x)
    acc = x
    c0, n0 = _start(TIMED)
    for i in range(ITERS):
        if STORE:
            tlx.local_store(buf[i % 2], acc)
            acc = acc + x
        else:
            acc = acc + tlx.local_load(buf[i % 2])
    _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)
    tl.store(out_ptr + tl.program_id(0) * BM * BN + offs, acc)


@triton.jit
def cp_async_stream_kernel(x_ptr, rec_ptr, ITERS, REGION, BOX_M: tl.constexpr, BOX_K: tl.constexpr,
                           STAGES: tl.constexpr, TIMED: tl.constexpr):
    """cp.async (``tlx.async_load``) bandwidth: every thread copies its share of a BOX_M x BOX_K box per
    step, STAGES - 1 boxes in flight (one commit group each), as a non-warp-specialized pipelined
    GEMM loads its operands. Box i of CTA p is rows ``((p * ITERS + i) % REGION) * BOX_M``."""
    dtype: tl.constexpr = x_ptr.dtype.element_ty
    buf = tlx.local_alloc((BOX_M, BOX_K), dtype, STAGES)
    offs = tl.arange(0, BOX_M)[:, None] * BOX_K + tl.arange(0, BOX_K)[None, :]
    first = tl.program_id(0) * ITERS
    for j in tl.static_range(STAGES - 1):
        t = tlx.async_load(x_ptr + ((first + j) % REGION) * BOX_M * BOX_K + offs, buf[j])
        tlx.async_load_commit_group([t])
    c0, n0 = _start(TIMED)
    for i in range(ITERS):
        tlx.async_load_wait_group(STAGES - 2)
        nxt = i + STAGES - 1
        t = tlx.async_load(x_ptr + ((first + nxt) % REGION) * BOX_M * BOX_K + offs, buf[nxt % STAGES])
        tlx.async_load_commit_group([t])
    tlx.async_load_wait_group(0)
    _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)


@triton.jit
def empty_kernel(x_ptr):
    """Nothing: what a launch costs before and after any work (timed from the host, with events)."""
    pass


@triton.jit
def mma_copy_kernel(a_ptr, b_ptr, desc, out_ptr, rec_ptr, ITERS, LOADS, REGION,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, CONSUMERS: tl.constexpr,
                    BOX_M: tl.constexpr, BOX_K: tl.constexpr, STAGES: tl.constexpr, TIMED: tl.constexpr):
    """The tensor-core loop of ``mma_loop_kernel`` while the CTA's default warp group streams LOADS TMA box
    loads into a SMEM ring of its own (STAGES in flight; box i of CTA p is rows ``((p * LOADS + i) % REGION) *
    BOX_M``: a large REGION streams from HBM, a small one from L2): the wgmma rate, the copy rate and the clock
    under the load a GEMM's pipeline puts on an SM (wgmma operand reads and TMA writes share its SMEM).
    Records: ``CONSUMERS`` wgmma groups, then the copy, per CTA."""
    dtype: tl.constexpr = a_ptr.dtype.element_ty
    ring_dtype: tl.constexpr = tlx.dtype_of(desc)
    BOX_BYTES: tl.constexpr = BOX_M * BOX_K * tlx.size_of(ring_dtype)
    a_buf = tlx.local_alloc((BM, BK), dtype, CONSUMERS)
    b_buf = tlx.local_alloc((BN, BK), dtype, CONSUMERS)
    ring = tlx.local_alloc((BOX_M, BOX_K), ring_dtype, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            c0, n0 = _tma_stream(desc, ring, full, LOADS, REGION, BOX_M, STAGES, BOX_BYTES, TIMED)
            _record(rec_ptr, tl.program_id(0) * (CONSUMERS + 1) + CONSUMERS, c0, n0, TIMED)
        with tlx.async_task(num_warps=4, replicate=CONSUMERS):
            wg = tlx.async_task_replica_id()
            acc, c0, n0 = _mma_loop(a_ptr, b_ptr, a_buf, b_buf, wg, ITERS, BM, BN, BK, 2, TIMED)
            _record(rec_ptr, tl.program_id(0) * (CONSUMERS + 1) + wg, c0, n0, TIMED)
            # row sums only: the whole accumulator's layout conversion would need the SMEM the ring holds
            tl.store(out_ptr + (tl.program_id(0) * CONSUMERS + wg) * BM + tl.arange(0, BM), tl.sum(acc, axis=1))


@triton.jit
def gemm_loads_kernel(a_desc, b_desc, rec_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr, STAGES: tl.constexpr, NUM_SMS: tl.constexpr, TIMED: tl.constexpr):
    """The TMA loads of a persistent GEMM and nothing else: each CTA walks its tiles in the grouped order
    (GROUP_M rows of tiles at a time, as the library's and TLX's GEMMs do) and loads the A (BM x BK) and B^T
    (BN x BK) boxes of every k-step, STAGES in flight. Its bytes per cycle against the L2-resident loop's say
    how often the order's loads hit L2."""
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BM + BN) * BK * tlx.size_of(dtype)
    a_ring = tlx.local_alloc((BM, BK), dtype, STAGES)
    b_ring = tlx.local_alloc((BN, BK), dtype, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    c0, n0 = _start(TIMED)
    i = 0
    for tile in range(tl.program_id(0), num_m * num_n, NUM_SMS):
        group = tile // (GROUP_M * num_n)
        first_m = group * GROUP_M
        rows = tl.minimum(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % (GROUP_M * num_n)) % rows
        pid_n = (tile % (GROUP_M * num_n)) // rows
        for k in range(0, k_steps):
            s = i % STAGES
            if i >= STAGES:
                tlx.barrier_wait(full[s], ((i - STAGES) // STAGES) & 1)
            tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
            tlx.async_descriptor_load(a_desc, a_ring[s], [pid_m * BM, k * BK], full[s])
            tlx.async_descriptor_load(b_desc, b_ring[s], [pid_n * BN, k * BK], full[s])
            i += 1
    for j in range(tl.maximum(i - STAGES, 0), i):
        tlx.barrier_wait(full[j % STAGES], (j // STAGES) & 1)
    _record(rec_ptr, tl.program_id(0), c0, n0, TIMED)
