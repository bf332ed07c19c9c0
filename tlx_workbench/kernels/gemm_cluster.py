"""Hopper warp-specialized GEMM in 2-CTA clusters: B is loaded once per pair and multicast.

The cooperative kernel of :mod:`gemm_ws` (a TMA loader warp group, two wgmma warp groups
splitting a BM x BN tile by rows, epilogue through SMEM + TMA store) with one change: the two
CTAs of a cluster work on vertically adjacent tiles (same columns, rows ``2p`` and ``2p + 1``),
so they need the same B k-slice. Each CTA loads its own A and *half* of B, and its TMA copy
of that half lands in both CTAs' SMEM (``multicast::cluster``). Per k-step a CTA then reads
32 KB from L2 instead of 48 KB (BM=128, BN=256, BK=64, fp16): what cuBLAS's 2-CTA
``nvjet_sm90`` kernels do, and the one lever left at 4096^3 on a power-capped H200
(benchmarks/RESULTS.md).

The ring protocol, per slot ``s`` (CUTLASS's multicast pipeline):

* ``full[s]`` (one arrival: the local loader's expect-bytes) counts A + all of B; half of B
  is the peer's copy, so its bytes may land before the local expect -- the barrier's
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
from ._common import grouped_tile, ring_slot, sm_count, torch_alloc
from .gemm_ws import _store_strips, persistent_ctas
from .host import gemm_descriptors, gemm_entry_points, gemm_spec

KERNEL_NAME = "gemm_cluster_kernel"
B_DESC_PARAM = 5      # PTX parameter index of b_desc's tensor map (a_desc takes 0..4)
BOX_N = 64            # columns of one TMA box of B (128-byte swizzle: 64 fp16/bf16)


@triton.jit
def gemm_cluster_kernel(a_desc, b_desc, c_desc, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                        EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr,
                        NUM_SMS: tl.constexpr, DOT_WAIT0: tl.constexpr = False,
                        LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                        LOADER_SYNC: tl.constexpr = False, CLUSTER_RELEASE: tl.constexpr = False,
                        B_OFF: tl.constexpr = 0, FULL_OFF: tl.constexpr = 0, EMPTY_OFF: tl.constexpr = 0,
                        PEER_FREE_OFF: tl.constexpr = 0):
    HALF_M: tl.constexpr = BM // 2
    STRIPS: tl.constexpr = BN // EPI_N
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    ELEM: tl.constexpr = tlx.size_of(dtype)
    BOXES: tl.constexpr = BN // 64                 # TMA boxes of 64 columns per B slice
    HALF_BOXES: tl.constexpr = BOXES // 2          # ... each CTA loads and multicasts half of them
    BOX_BYTES: tl.constexpr = BK * 64 * ELEM
    B_SLOT: tl.constexpr = BK * BN * ELEM
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * ELEM

    a_ring = tlx.local_alloc((HALF_M, BK), dtype, 2 * STAGES)
    b_ring = tlx.local_alloc((BK, BN), dtype, STAGES)
    c_strips = tlx.local_alloc((HALF_M, EPI_N), tlx.dtype_of(c_desc), 2 * EPI_BUFS)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    if LOADER_SYNC:
        # consumers release locally; the loaders tell each other (peer_free) that a slot is free
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
        peer_free = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    else:
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=4)
        peer_free = empty

    rank = tl.program_id(0) % 2          # CTA rank in the cluster: clusters are (2, 1, 1)
    cluster = tl.program_id(0) // 2
    clusters: tl.constexpr = NUM_SMS // 2
    num_pid_m = tl.cdiv(M, BM)
    num_pairs_m = tl.cdiv(num_pid_m, 2)
    num_pid_n = tl.cdiv(N, BN)
    num_pair_tiles = num_pairs_m * num_pid_n
    k_steps = tl.cdiv(K, BK)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            # the peer multicasts into our SMEM and arrives at our barriers: both CTAs' barriers
            # must be initialised first. Every warp of both CTAs waits here once (the top level
            # runs on the default warps only, so the cluster barrier cannot go there)
            cluster_sync_after_init(tl.program_id(0))
            leader = one_thread(128)
            use = 0
            for pair_tile in range(cluster, num_pair_tiles, clusters):
                pair_m, pid_n = grouped_tile(pair_tile, num_pairs_m, num_pid_n, GROUP_M // 2)
                row = (2 * pair_m + rank) * BM
                col = pid_n * BN
                for k in range(0, k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(empty[s], parity ^ 1)
                    if LOADER_SYNC:
                        arrive_at_peer(leader, PEER_FREE_OFF + 8 * s, 1 - rank, CLUSTER_RELEASE)
                        tlx.barrier_wait(peer_free[s], parity)
                    tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
                    tlx.async_descriptor_load(a_desc, a_ring[2 * s], [row, k * BK], full[s])
                    tlx.async_descriptor_load(a_desc, a_ring[2 * s + 1], [row + HALF_M, k * BK], full[s])
                    for j in tl.static_range(HALF_BOXES):
                        box = rank * HALF_BOXES + j
                        multicast_box(leader, B_OFF + s * B_SLOT + box * BOX_BYTES, FULL_OFF + 8 * s,
                                      col + box * 64, k * BK)
                    use += 1
            # drain: every slot released by all four consumer groups, so no peer arrival is pending
            for i in range(0, STAGES):
                s, parity = ring_slot(use, STAGES)
                tlx.barrier_wait(empty[s], parity ^ 1)
                use += 1

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            cluster_sync_after_init(tl.program_id(0))
            wg = tlx.async_task_replica_id()
            leader = one_thread(128)
            peer = 1 - rank
            use = 0
            for pair_tile in range(cluster, num_pair_tiles, clusters):
                pair_m, pid_n = grouped_tile(pair_tile, num_pairs_m, num_pid_n, GROUP_M // 2)
                row = (2 * pair_m + rank) * BM
                s, parity = ring_slot(use, STAGES)
                tlx.barrier_wait(full[s], parity)
                acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s])
                if DOT_WAIT0:
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(empty[s])
                    if not LOADER_SYNC:
                        arrive_at_peer(leader, EMPTY_OFF + 8 * s, peer, CLUSTER_RELEASE)
                prev = s
                use += 1
                for k in range(1, k_steps):
                    s, parity = ring_slot(use, STAGES)
                    tlx.barrier_wait(full[s], parity)
                    acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s], acc)
                    if DOT_WAIT0:
                        acc = tlx.async_dot_wait(0, acc)
                        tlx.barrier_arrive(empty[s])
                        if not LOADER_SYNC:
                            arrive_at_peer(leader, EMPTY_OFF + 8 * s, peer, CLUSTER_RELEASE)
                    else:
                        acc = tlx.async_dot_wait(1, acc)
                        tlx.barrier_arrive(empty[prev])
                        if not LOADER_SYNC:
                            arrive_at_peer(leader, EMPTY_OFF + 8 * prev, peer, CLUSTER_RELEASE)
                    prev = s
                    use += 1
                if not DOT_WAIT0:
                    acc = tlx.async_dot_wait(0, acc)
                    tlx.barrier_arrive(empty[prev])
                    if not LOADER_SYNC:
                        arrive_at_peer(leader, EMPTY_OFF + 8 * prev, peer, CLUSTER_RELEASE)
                _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, row + wg * HALF_M, pid_n * BN,
                              STRIPS, EPI_BUFS, EPI_N)
            tlx.async_descriptor_store_wait(0)


def _config(BM=128, BN=256, BK=64, STAGES=4, EPI_N=64, GROUP_M=8, EPI_BUFS=2, DOT_WAIT0=False,
            MMA_REGS=232, LOADER_REGS=40, LOADER_SYNC=False, CLUSTER_RELEASE=False):
    return dict(BM=BM, BN=BN, BK=BK, STAGES=STAGES, EPI_N=EPI_N, GROUP_M=GROUP_M, EPI_BUFS=EPI_BUFS,
                DOT_WAIT0=DOT_WAIT0, MMA_REGS=MMA_REGS, LOADER_REGS=LOADER_REGS, LOADER_SYNC=LOADER_SYNC,
                CLUSTER_RELEASE=CLUSTER_RELEASE)


CONFIGS = (
    _config(),
    _config(LOADER_SYNC=True),
    _config(CLUSTER_RELEASE=True),
    _config(LOADER_SYNC=True, DOT_WAIT0=True),
)

# small tiles for the compile tests (the CPU simulator does not run this kernel: inline PTX)
SMALL_CONFIG = _config(BN=128, BK=32, STAGES=2, EPI_N=64, EPI_BUFS=1, MMA_REGS=None, LOADER_REGS=None)


@functools.lru_cache(maxsize=None)
def _offsets(cfg_items: tuple) -> dict:
    cfg = dict(cfg_items)
    import torch
    from ..compiler.compile import compile as compile_report
    from ..target import offline
    from ..errors import TLXWorkbenchError

    def allocated(offsets):
        with offline("sm_90"):
            a, b, c = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
            args, options = _kernel_call(a, b, c, cfg, offsets=offsets)
            del options["num_warps"], options["num_stages"]
            report = compile_report(gemm_cluster_kernel, *args, target="sm_90", num_warps=4, num_stages=0,
                                    **options)
        names = {a.name for a in report.allocations}
        return {key: report.allocation(name).offset for key, name in
                (("B_OFF", "b_ring"), ("FULL_OFF", "full"), ("EMPTY_OFF", "empty"), ("PEER_FREE_OFF", "peer_free"))
                if name in names}

    found = allocated(None)
    again = allocated(found)
    if again != found:
        raise TLXWorkbenchError(
            f"gemm_cluster: SMEM offsets moved when compiled with them ({found} -> {again})",
            file=__file__, hint="the allocation must not depend on B_OFF/FULL_OFF/EMPTY_OFF; report this config")
    return found


def smem_offsets(cfg) -> dict:
    """Byte offsets in shared memory of ``b_ring``, ``full`` and ``empty`` for ``cfg``, as the
    compiler allocates them (the compile report's SMEM map; the inline PTX addresses them).
    Compiled twice: the offsets must come out the same when the kernel is compiled with them.

    >>> smem_offsets(CONFIGS[0])                                             # doctest: +SKIP
    {'B_OFF': 0, 'FULL_OFF': 229504, 'EMPTY_OFF': 229536}
    """
    return dict(_offsets(tuple(sorted(cfg.items()))))


def clustered(compiled):
    """Make Triton launch ``compiled`` (a CompiledKernel of :func:`gemm_cluster_kernel`, compiled
    as one CTA) in clusters of 2 CTAs: its launcher then starts ``2 * grid[0]`` CTAs.
    Refuses a kernel whose PTX does not hold B's tensor map where the inline PTX reads it."""
    from ._cluster_ptx import B_MAP_PARAM
    from ..errors import TLXWorkbenchError
    if compiled.metadata.num_ctas == 2:
        return compiled
    if f".param .align 64 .b8 {B_MAP_PARAM}[128]" not in compiled.asm["ptx"]:
        raise TLXWorkbenchError(
            f"gemm_cluster: the PTX has no {B_MAP_PARAM}, the parameter the multicast copy reads B's "
            "tensor map from (kernels/_cluster_ptx.py); Triton changed how it passes tensor descriptors",
            hint="update B_MAP_PARAM in kernels/_cluster_ptx.py to the b_desc tensor map parameter")
    compiled.metadata = compiled.metadata._replace(num_ctas=2)
    compiled.packed_metadata = (compiled.metadata.num_warps, 2, compiled.metadata.shared)
    if compiled.module is not None:      # already loaded: its launcher was made for one CTA
        compiled._run = triton.runtime.driver.active.launcher_cls(compiled.src, compiled.metadata)
    return compiled


def make_descriptors(a, b, c, cfg):
    half = cfg["BM"] // 2
    return gemm_descriptors(a, b, c, [half, cfg["BK"]], [cfg["BK"], cfg["BN"]], [half, cfg["EPI_N"]])


def _kernel_call(a, b, c, cfg, num_ctas=132, offsets=None):
    a_d, b_d, c_d = make_descriptors(a, b, c, cfg)
    M, K = a.shape
    N = b.shape[1]
    return (a_d, b_d, c_d, M, N, K), dict(NUM_SMS=num_ctas, num_warps=4, num_stages=0, **cfg, **(offsets or {}))


def cluster_ctas(tiles: int, num_sms: int) -> int:
    """Persistent CTA count (even: whole clusters) for ``tiles`` tiles (an even count: pairs)."""
    return 2 * max(1, persistent_ctas(-(-tiles // 2), num_sms // 2))


def launch(a, b, c, cfg, num_sms=None):
    """Run the kernel once with one explicit config (no tuning). Returns ``c``."""
    num_sms = num_sms or sm_count()
    pairs = triton.cdiv(triton.cdiv(a.shape[0], cfg["BM"]), 2) * triton.cdiv(b.shape[1], cfg["BN"])
    ctas = cluster_ctas(2 * pairs, num_sms)
    triton.set_allocator(torch_alloc)
    args, options = _kernel_call(a, b, c, cfg, ctas, smem_offsets(cfg))
    clustered(gemm_cluster_kernel.warmup(*args, grid=(ctas // 2,), **options))
    gemm_cluster_kernel[(ctas // 2,)](*args, **options)
    return c


def _offline_call(a, b, c, cfg, num_sms=132):
    return _kernel_call(a, b, c, cfg, num_sms, smem_offsets(cfg))


matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_cluster_kernel, launch, _offline_call, CONFIGS, "the 2-CTA cluster kernel (B multicast)")

SPEC = gemm_spec("gemm_cluster", gemm_cluster_kernel, matmul, CONFIGS, {}, __doc__)
