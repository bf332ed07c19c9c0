"""Hopper warp-specialized GEMM in 2-CTA clusters: B is loaded once per pair and multicast.

The cooperative kernel of :mod:`gemm_ws` (a TMA loader warp group, two wgmma warp groups
splitting a BM x BN tile by rows, epilogue through SMEM + TMA store) with one change: the two
CTAs of a cluster work on vertically adjacent tiles (same columns, rows ``2p`` and ``2p + 1``),
so they need the same B k-slice. Each CTA loads its own A and *half* of B, and its TMA copy
of that half lands in both CTAs' SMEM (``multicast::cluster``). Per k-step a CTA then reads
32 KB from L2 instead of 48 KB (BM=128, BN=256, BK=64, fp16): what cuBLAS's 2-CTA
``nvjet_sm90`` kernels do, and the one lever left at 4096^3 on a power-capped H200
(benchmarks/RESULTS.md).

``SHARE_A``: the pair's tiles sit side by side instead (same rows, columns ``2p`` and ``2p + 1``)
and share A: each CTA loads all of its B and one half of A's k-slice (one consumer group's rows),
multicast to both. That is the form cuBLAS picks for one-wave problems (1024^3 fp16 on an H100:
``nvjet_sm90_hsh_128x64_64x8_1x2``); ours, at 128x64 tiles, is correct and measured slower there
than :mod:`gemm_ws` alone (benchmarks/RESULTS.md).

The ring protocol, per slot ``s`` (CUTLASS's multicast pipeline):

* ``full[s]`` (one arrival: the local loader's expect-bytes) counts A + all of B; half of the
  shared operand is the peer's copy, so its bytes may land before the local expect -- the barrier's
  transaction count goes negative for a while and the phase still needs the arrival.
* ``empty[s]`` waits for **four** arrivals: the two local consumer groups and the peer's
  two. A loader may overwrite slot ``s`` in *both* CTAs only when both have finished with it.
* every warp of both CTAs passes a cluster barrier when its task starts (the peer's barriers
  must be initialised before the first copy or arrival), and at the end the loader drains the ring (waits until every slot is free
  again), so that no CTA exits while its peer can still arrive at its barriers.

Upstream Triton 3.8 has no TLX op for a peer CTA's shared memory (``tlx.remote_view``
refuses: no ``mapa.shared::cluster``), and compiling with ``num_ctas=2`` gives every
layout a 2-CTA split that TLX's buffers do not have. So this kernel is compiled as one CTA,
launched in clusters of two (:func:`clustered`), and issues the cluster instructions itself
in inline PTX (:mod:`._cluster_ptx`), at the SMEM offsets the compiler gave ``b_ring``,
``full`` and ``empty`` (read from the compile report's allocation map: :func:`smem_offsets`).

>>> from tlx_workbench.kernels.gemm_cluster import matmul     # on a Hopper GPU
>>> c = matmul(a, b)
"""
from __future__ import annotations

import functools

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ._cluster_ptx import arrive_at_peer, cluster_sync_after_init, multicast_box, one_thread
from ._common import grouped_tile, persistent_ctas, ring_slot, sm_count, torch_alloc
from .gemm_ws import _store_strips
from .host import gemm_descriptors, gemm_entry_points, gemm_spec

@triton.jit
def _cluster_start(TLX_OPS: tl.constexpr):
    """Every task, first thing: wait until both CTAs' barriers are initialised (the peer
    multicasts into our SMEM and arrives at our barriers)."""
    if TLX_OPS:
        tlx.cluster_barrier()
    else:
        cluster_sync_after_init(tl.program_id(0))


@triton.jit
def _arrive_peer(bars, s, bars_off, leader, peer, TLX_OPS: tl.constexpr, CLUSTER_RELEASE: tl.constexpr):
    """One arrival at barrier ``s`` of ``bars`` (at SMEM offset ``bars_off``) in CTA ``peer``."""
    if TLX_OPS:
        tlx.barrier_arrive(bars[s], 1, remote_cta_rank=peer)
    else:
        arrive_at_peer(leader, bars_off + 8 * s, peer, CLUSTER_RELEASE)


@triton.jit
def _release(empty, s, leader, peer, EMPTY_OFF: tl.constexpr, LOADER_SYNC: tl.constexpr, TLX_OPS: tl.constexpr,
             CLUSTER_RELEASE: tl.constexpr):
    """A consumer group is done with ring slot ``s``: tell our loader and, unless the loaders
    talk to each other (LOADER_SYNC), the peer's loader too."""
    tlx.barrier_arrive(empty[s])
    if not LOADER_SYNC:
        _arrive_peer(empty, s, EMPTY_OFF, leader, peer, TLX_OPS, CLUSTER_RELEASE)


@triton.jit
def _load_b_half(b_desc, b_ring, full, s, rank, leader, col, k_off, BK: tl.constexpr, BN: tl.constexpr,
                 B_OFF: tl.constexpr, FULL_OFF: tl.constexpr, TLX_OPS: tl.constexpr):
    """Our half of B's k-slice (columns ``rank * BN/2`` on) into slot ``s`` of both CTAs."""
    HALF_N: tl.constexpr = BN // 2
    if TLX_OPS:
        # slice offsets must be constants: one branch per rank
        if rank == 0:
            tlx.async_descriptor_load(b_desc, tlx.local_slice(b_ring[s], [0, 0], [BK, HALF_N]), [k_off, col],
                                      full[s], multicast_targets=[0, 1])
        else:
            tlx.async_descriptor_load(b_desc, tlx.local_slice(b_ring[s], [0, HALF_N], [BK, HALF_N]),
                                      [k_off, col + HALF_N], full[s], multicast_targets=[0, 1])
    else:
        # a 128-byte-swizzled slot is a row of [BK, 64] boxes, 64 columns each; ours are contiguous
        BOX_BYTES: tl.constexpr = BK * 64 * 2
        for j in tl.static_range(HALF_N // 64):
            box = rank * (HALF_N // 64) + j
            multicast_box(leader, B_OFF + s * (BK * BN * 2) + box * BOX_BYTES, FULL_OFF + 8 * s, col + box * 64,
                          k_off)


@triton.jit
def _load_a_half(a_desc, a_ring, full, s, rank, leader, row, k_off, BK: tl.constexpr, HALF_M: tl.constexpr,
                 A_OFF: tl.constexpr, FULL_OFF: tl.constexpr, TLX_OPS: tl.constexpr):
    """Our half of A's k-slice (rows ``row + rank * HALF_M`` on: one consumer group's operand) into slot
    ``2 * s + rank`` of both CTAs (SHARE_A: the pair's tiles sit side by side and read the same A)."""
    if TLX_OPS:
        tlx.async_descriptor_load(a_desc, a_ring[2 * s + rank], [row + rank * HALF_M, k_off], full[s],
                                  multicast_targets=[0, 1])
    else:
        # a 128-byte-swizzled [HALF_M, BK] buffer is a row of [HALF_M, 64] boxes; the ring's buffers are contiguous
        BOX_BYTES: tl.constexpr = HALF_M * 64 * 2
        for j in tl.static_range(BK // 64):
            multicast_box(leader, A_OFF + (2 * s + rank) * (HALF_M * BK * 2) + j * BOX_BYTES, FULL_OFF + 8 * s,
                          k_off + j * 64, row + rank * HALF_M, OF_A=True)


@triton.jit
def _pair_tile(pair_tile, rank, num_pid_m, num_pid_n, GROUP_M: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
               SHARE_A: tl.constexpr):
    """(row, col) of our tile of pair tile ``pair_tile``: the pair's two tiles one above the other (they share B),
    or side by side (SHARE_A: they share A). The odd CTA of a last half pair gets a tile past M (or N): its
    operand there is zeros and TMA stores none of it."""
    if SHARE_A:
        pid_m, pair_n = grouped_tile(pair_tile, num_pid_m, tl.cdiv(num_pid_n, 2), GROUP_M)
        row = pid_m * BM
        col = (2 * pair_n + rank) * BN
    else:
        pair_m, pid_n = grouped_tile(pair_tile, tl.cdiv(num_pid_m, 2), num_pid_n, GROUP_M // 2)
        row = (2 * pair_m + rank) * BM
        col = pid_n * BN
    return row, col


@triton.jit
def gemm_cluster_kernel(a_desc, b_desc, c_desc, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                        EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr,
                        NUM_SMS: tl.constexpr, DOT_WAIT0: tl.constexpr = False,
                        LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                        LOADER_SYNC: tl.constexpr = False, CLUSTER_RELEASE: tl.constexpr = False,
                        TLX_OPS: tl.constexpr = False, SHARE_A: tl.constexpr = False,
                        B_OFF: tl.constexpr = 0, FULL_OFF: tl.constexpr = 0, EMPTY_OFF: tl.constexpr = 0,
                        PEER_FREE_OFF: tl.constexpr = 0, A_OFF: tl.constexpr = 0):
    HALF_M: tl.constexpr = BM // 2
    STRIPS: tl.constexpr = BN // EPI_N
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    tl.static_assert(tlx.size_of(dtype) == 2, "fp16 / bf16 only")
    if SHARE_A:
        if not TLX_OPS:
            tl.static_assert(BK % 64 == 0, "each CTA multicasts whole 64-column boxes of A: BK must be a multiple "
                                           "of 64")
    else:
        tl.static_assert(BN % 128 == 0, "each CTA multicasts whole 64-column boxes: BN must be a multiple of 128")
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * 2      # the shared operand: our half and the peer's

    a_ring = tlx.local_alloc((HALF_M, BK), dtype, 2 * STAGES)
    b_ring = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_strips = tlx.local_alloc((HALF_M, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    if LOADER_SYNC:
        # consumers release locally; the loaders tell each other (peer_free) that a slot is free
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
        peer_free = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    else:
        # both CTAs' consumer groups release each slot: ours and the peer's two
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=4)
        peer_free = empty

    rank = tl.program_id(0) % 2          # CTA rank in the cluster: clusters are (2, 1, 1)
    peer = 1 - rank
    cluster = tl.program_id(0) // 2
    clusters: tl.constexpr = NUM_SMS // 2
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    # a pair = our tile and the peer's, one above the other (or side by side: SHARE_A)
    if SHARE_A:
        num_pair_tiles = num_pid_m * tl.cdiv(num_pid_n, 2)
    else:
        num_pair_tiles = tl.cdiv(num_pid_m, 2) * num_pid_n
    k_steps = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            _cluster_start(TLX_OPS)
            leader = one_thread(128)
            use = 0
            for pair_tile in range(cluster, num_pair_tiles, clusters):
                row, col = _pair_tile(pair_tile, rank, num_pid_m, num_pid_n, GROUP_M, BM, BN, SHARE_A)
                for k in range(0, k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(empty[s], parity ^ 1)
                    if LOADER_SYNC:
                        _arrive_peer(peer_free, s, PEER_FREE_OFF, leader, peer, TLX_OPS, CLUSTER_RELEASE)
                        tlx.barrier_wait(peer_free[s], parity)
                    tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
                    if SHARE_A:
                        tlx.async_descriptor_load(b_desc, b_ring[s], [k * BK, col], full[s])
                        _load_a_half(a_desc, a_ring, full, s, rank, leader, row, k * BK, BK, HALF_M, A_OFF,
                                     FULL_OFF, TLX_OPS)
                    else:
                        tlx.async_descriptor_load(a_desc, a_ring[2 * s], [row, k * BK], full[s])
                        tlx.async_descriptor_load(a_desc, a_ring[2 * s + 1], [row + HALF_M, k * BK], full[s])
                        _load_b_half(b_desc, b_ring, full, s, rank, leader, col, k * BK, BK, BN, B_OFF, FULL_OFF,
                                     TLX_OPS)
                    use += 1
            # drain: every slot released by all its consumers, so no peer arrival is still on its way
            for i in range(0, STAGES):
                s, parity = ring_slot(use, STAGES)
                tlx.barrier_wait(empty[s], parity ^ 1)
                use += 1

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            _cluster_start(TLX_OPS)
            wg = tlx.async_task_replica_id()
            leader = one_thread(128)
            use = 0
            for pair_tile in range(cluster, num_pair_tiles, clusters):
                row, col = _pair_tile(pair_tile, rank, num_pid_m, num_pid_n, GROUP_M, BM, BN, SHARE_A)
                # first k-step peeled: it starts the accumulator and has no slot to free yet
                s, parity = ring_slot(use, STAGES)
                tlx.barrier_wait(full[s], parity)
                acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s])
                if DOT_WAIT0:
                    acc = tlx.async_dot_wait(0, acc)
                    _release(empty, s, leader, peer, EMPTY_OFF, LOADER_SYNC, TLX_OPS, CLUSTER_RELEASE)
                prev = s
                use += 1
                for k in range(1, k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(full[s], parity)
                    acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s], acc)
                    if DOT_WAIT0:
                        acc = tlx.async_dot_wait(0, acc)
                        _release(empty, s, leader, peer, EMPTY_OFF, LOADER_SYNC, TLX_OPS, CLUSTER_RELEASE)
                    else:
                        acc = tlx.async_dot_wait(1, acc)     # step k-1 retired: its slot is free
                        _release(empty, prev, leader, peer, EMPTY_OFF, LOADER_SYNC, TLX_OPS, CLUSTER_RELEASE)
                    prev = s
                    use += 1
                if not DOT_WAIT0:
                    acc = tlx.async_dot_wait(0, acc)
                    _release(empty, prev, leader, peer, EMPTY_OFF, LOADER_SYNC, TLX_OPS, CLUSTER_RELEASE)
                _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, row + wg * HALF_M, col,
                              STRIPS, EPI_BUFS, EPI_N)
            tlx.async_descriptor_store_wait(0)


def _config(BM=128, BN=256, BK=64, STAGES=4, EPI_N=64, GROUP_M=8, EPI_BUFS=2, DOT_WAIT0=False,
            MMA_REGS=232, LOADER_REGS=40, LOADER_SYNC=False, CLUSTER_RELEASE=False, TLX_OPS=False, SHARE_A=False):
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
                DOT_WAIT0=DOT_WAIT0, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS, LOADER_SYNC=LOADER_SYNC,
                CLUSTER_RELEASE=CLUSTER_RELEASE, TLX_OPS=TLX_OPS, SHARE_A=SHARE_A)


# the autotune space, best-first on the H200 (benchmarks/RESULTS.md, GEMM, levers measured): consumers
# release the peer's slot themselves, or the loaders hand the slot over (LOADER_SYNC), level;
# draining every step (DOT_WAIT0) 1 % behind. CLUSTER_RELEASE (-22 %) is left out.
CONFIGS = (
    _config(),
    _config(LOADER_SYNC=True),
    _config(LOADER_SYNC=True, DOT_WAIT0=True),
    # one-wave problems (1024^3: 128 tiles): 128x64 tiles in pairs side by side, A multicast
    _config(BN=64, STAGES=8, EPI_BUFS=1, SHARE_A=True),
)

# the same protocol written with TLX's own cluster ops (multicast_targets, remote_cta_rank,
# cluster_barrier), which the simulator runs and uTLX cannot compile; small tiles
SIM_CONFIGS = {
    "tiny": _config(BN=128, BK=32, STAGES=2, EPI_N=64, EPI_BUFS=1, GROUP_M=2, MMA_REGS=None, LOADER_REGS=None,
                    TLX_OPS=True),
    "loader_sync": _config(BN=128, BK=32, STAGES=2, EPI_N=64, EPI_BUFS=1, GROUP_M=2, MMA_REGS=None,
                           LOADER_REGS=None, TLX_OPS=True, LOADER_SYNC=True, DOT_WAIT0=True),
    # pairs side by side, A multicast (cuBLAS's one-wave form: 128x64 tiles, 1x2 clusters)
    "share_a": _config(BN=64, BK=32, STAGES=2, EPI_N=64, EPI_BUFS=1, GROUP_M=2, MMA_REGS=None, LOADER_REGS=None,
                       TLX_OPS=True, SHARE_A=True),
}

# small tiles for the compile tests (inline PTX, not simulated)
SMALL_CONFIG = dict(SIM_CONFIGS["tiny"], TLX_OPS=False)


@functools.lru_cache(maxsize=None)
def _offsets(cfg_items: tuple) -> dict:
    cfg = dict(cfg_items)
    import torch
    from ..compiler import compile as compile_report
    from ..errors import TLXWorkbenchError

    def allocated(offsets):
        a, b, c = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
        args, options = _kernel_call(a, b, c, cfg, offsets=offsets)
        report = compile_report(gemm_cluster_kernel, *args, target="sm_90", **options)
        offset = {alloc.name: alloc.offset for alloc in report.allocations}
        return {key: offset[name] for key, name in
                (("A_OFF", "a_ring"), ("B_OFF", "b_ring"), ("FULL_OFF", "full"), ("EMPTY_OFF", "empty"),
                 ("PEER_FREE_OFF", "peer_free"))
                if name in offset}

    found = allocated(None)
    again = allocated(found)
    if again != found:
        raise TLXWorkbenchError(
            f"gemm_cluster: SMEM offsets moved when compiled with them ({found} -> {again})",
            file=__file__, hint="the allocation must not depend on B_OFF/FULL_OFF/EMPTY_OFF; report this config")
    return found


def smem_offsets(cfg) -> dict:
    """Byte offsets in shared memory of ``a_ring``, ``b_ring``, ``full`` and ``empty`` for ``cfg``, as the
    compiler allocates them (the compile report's SMEM map; the inline PTX addresses them).
    Compiled twice: the offsets must come out the same when the kernel is compiled with them.

    >>> smem_offsets(CONFIGS[0])                                             # doctest: +SKIP
    {'A_OFF': 98304, 'B_OFF': 0, 'FULL_OFF': 229504, 'EMPTY_OFF': 229536}
    """
    return dict(_offsets(tuple(sorted(cfg.items()))))


def clustered(compiled):
    """Make Triton launch ``compiled`` (a CompiledKernel of :func:`gemm_cluster_kernel`, compiled
    as one CTA) in clusters of 2 CTAs: its launcher then starts ``2 * grid[0]`` CTAs.
    Refuses a kernel whose PTX does not hold A's and B's tensor maps where the inline PTX reads them.
    (How Triton is told is ``runtime/triton_launch.py``'s: the one module that edits a
    CompiledKernel.)"""
    from ._cluster_ptx import A_MAP_PARAM, B_MAP_PARAM
    from ..errors import TLXWorkbenchError
    from ..runtime.triton_launch import cluster_size, launch_in_clusters
    if cluster_size(compiled) == 2:
        return compiled
    for what, param in (("A", A_MAP_PARAM), ("B", B_MAP_PARAM)):
        if f".param .align 64 .b8 {param}[128]" not in compiled.asm["ptx"]:
            raise TLXWorkbenchError(
                f"gemm_cluster: the PTX has no {param}, the parameter the multicast copy reads {what}'s "
                "tensor map from (kernels/_cluster_ptx.py); Triton changed how it passes tensor descriptors",
                hint=f"update {what}_MAP_PARAM in kernels/_cluster_ptx.py to the {what.lower()}_desc tensor map "
                     "parameter")
    return launch_in_clusters(compiled, 2)


def make_descriptors(a, b, c, cfg):
    """Host TMA descriptors: A in BM/2-row halves, B in BN/2-column halves (each CTA of a pair
    loads one; SHARE_A: all of B, the halves of A are what the pair shares), C in BM/2 x EPI_N strips."""
    half = cfg["BM"] // 2
    b_cols = cfg["BN"] if cfg.get("SHARE_A") else cfg["BN"] // 2
    return gemm_descriptors(a, b, c, [half, cfg["BK"]], [cfg["BK"], b_cols], [half, cfg["EPI_N"]])


def _kernel_call(a, b, c, cfg, num_ctas=132, offsets=None):
    a_d, b_d, c_d = make_descriptors(a, b, c, cfg)
    M, K = a.shape
    N = b.shape[1]
    return (a_d, b_d, c_d, M, N, K), dict(NUM_SMS=num_ctas, num_warps=4, num_stages=0, **cfg, **(offsets or {}))


def cluster_ctas(tiles: int, num_sms: int) -> int:
    """Persistent CTA count (even: whole clusters) for ``tiles`` tiles (an even count: pairs)."""
    return 2 * max(1, persistent_ctas(-(-tiles // 2), num_sms // 2))


def pair_tiles(M: int, N: int, cfg) -> int:
    """Pair tiles of an M x N output: pairs of tiles one above the other, or side by side (SHARE_A).

    >>> pair_tiles(1024, 1024, _config(BN=64, SHARE_A=True)), pair_tiles(1024, 1024, _config())
    (64, 16)
    """
    tiles_m, tiles_n = triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"])
    return tiles_m * triton.cdiv(tiles_n, 2) if cfg.get("SHARE_A") else triton.cdiv(tiles_m, 2) * tiles_n


def _launch_call(a, b, c, cfg, num_sms=None):
    """The launch of one explicit config: (kernel, grid, args, options); the kernel is compiled and made to
    launch in clusters of 2 first. ``num_sms``: SMs to spread the clusters over (default: all)."""
    num_sms = num_sms or sm_count()
    ctas = cluster_ctas(2 * pair_tiles(a.shape[0], b.shape[1], cfg), num_sms)
    triton.set_allocator(torch_alloc)
    if cfg["TLX_OPS"]:
        # TLX's cluster ops (the simulator): TLX's launch convention, grid = every CTA
        args, options = _kernel_call(a, b, c, cfg, ctas)
        return gemm_cluster_kernel, (ctas,), args, dict(options, ctas_per_cga=(2, 1, 1))
    args, options = _kernel_call(a, b, c, cfg, ctas, smem_offsets(cfg))
    clustered(gemm_cluster_kernel.warmup(*args, grid=(ctas // 2,), **options))
    return gemm_cluster_kernel, (ctas // 2,), args, options


def _offline_call(a, b, c, cfg, num_sms=132):
    return _kernel_call(a, b, c, cfg, num_sms, smem_offsets(cfg))


launch, matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_cluster_kernel, _launch_call, _offline_call, CONFIGS, "the 2-CTA cluster kernel (multicast)")

SPEC = gemm_spec("gemm_cluster", gemm_cluster_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)
