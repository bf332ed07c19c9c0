"""The cluster instructions :mod:`gemm_cluster` needs and upstream Triton 3.8 + uTLX cannot
build: a TMA copy multicast to both CTAs of a pair, an arrival at the peer CTA's mbarrier,
and the cluster barrier after mbarrier initialisation. Inline PTX, one thread issuing where
one must; SMEM operands are byte offsets into Triton's dynamic shared memory
(``global_smem``), as the compiler allocated them.

These are the only lines of the kernel library that name PTX directly; the tests in
``tests/kernels/test_gemm_cluster.py`` compile them for sm_90 and fail if Triton changes
what they rely on (the ``global_smem`` symbol, the kernel parameter that holds B's tensor map).
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

# the tensor maps of gemm_cluster_kernel's a_desc and b_desc: parameters 0 and 5 (a_desc's map and its 2 shapes
# and 2 strides are parameters 0..4); checked against the PTX by gemm_cluster.clustered
A_MAP_PARAM = "gemm_cluster_kernel_param_0"
B_MAP_PARAM = "gemm_cluster_kernel_param_5"
_MULTICAST_ASM = """
        {
        .reg .pred p;
        .reg .b32 base, dst, bar;
        .reg .b64 tmap;
        .reg .b16 mask;
        setp.ne.b32 p, $1, 0;
        mov.u32 base, global_smem;
        add.u32 dst, base, $2;
        add.u32 bar, base, $3;
        mov.b64 tmap, B_MAP;
        cvta.param.u64 tmap, tmap;
        mov.b16 mask, 3;
        @p cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [dst], [tmap, {$4, $5}], [bar], mask;
        mov.u32 $0, 0;
        }
        """
_MULTICAST_A = tl.constexpr(_MULTICAST_ASM.replace("B_MAP", A_MAP_PARAM))
_MULTICAST_B = tl.constexpr(_MULTICAST_ASM.replace("B_MAP", B_MAP_PARAM))


@triton.jit
def one_thread(GROUP: tl.constexpr):
    """1 in the first thread of each GROUP consecutive threads (a warp group: 128), else 0."""
    return (tlx.thread_id(0) % GROUP == 0).to(tl.int32)


@triton.jit
def cluster_sync_after_init(dummy):
    """Make this CTA's mbarrier initialisation visible to the cluster, then wait until every
    thread of both CTAs got here. Every warp of the kernel must call it once: in a
    warp-specialized kernel, first thing in each ``async_task`` (top-level code runs on the
    default task's warps only, and the others would never arrive)."""
    tl.inline_asm_elementwise(
        """
        fence.mbarrier_init.release.cluster;
        barrier.cluster.arrive.release.aligned;
        barrier.cluster.wait.acquire.aligned;
        mov.u32 $0, $1;
        """, "=r,r", [dummy], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def multicast_box(pred, dst_off, bar_off, c0, c1, OF_A: tl.constexpr = False):
    """If ``pred``: TMA-load the box of B (``OF_A``: of A) at coordinates (c0 = column, c1 = row) into SMEM at
    ``dst_off`` of *both* CTAs of the pair; each CTA's mbarrier at ``bar_off`` gets the bytes."""
    if OF_A:
        tl.inline_asm_elementwise(_MULTICAST_A, "=r,r,r,r,r,r", [pred, dst_off, bar_off, c0, c1], dtype=tl.int32,
                                  is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(_MULTICAST_B, "=r,r,r,r,r,r", [pred, dst_off, bar_off, c0, c1], dtype=tl.int32,
                                  is_pure=False, pack=1)


_ARRIVE_ASM = """
        {
        .reg .pred p;
        .reg .b32 base, loc, rem;
        setp.ne.b32 p, $1, 0;
        mov.u32 base, global_smem;
        add.u32 loc, base, $2;
        mapa.shared::cluster.u32 rem, loc, $3;
        @p mbarrier.arrive%s.shared::cluster.b64 _, [rem];
        mov.u32 $0, 0;
        }
        """
_ARRIVE_CTA = tl.constexpr(_ARRIVE_ASM % "")
_ARRIVE_CLUSTER = tl.constexpr(_ARRIVE_ASM % ".release.cluster")


@triton.jit
def arrive_at_peer(pred, bar_off, peer, CLUSTER_RELEASE: tl.constexpr = False):
    """If ``pred``: one arrival at the mbarrier at ``bar_off`` in CTA ``peer`` of the cluster.
    Release semantics at CTA scope (as CUTLASS's ``ClusterBarrier::arrive(cta_id)``): what it
    orders is our wgmma's reads of a slot before the peer's TMA overwrites it, and those reads
    are complete once the wgmma retired. ``CLUSTER_RELEASE``: ``.release.cluster`` instead."""
    if CLUSTER_RELEASE:
        tl.inline_asm_elementwise(_ARRIVE_CLUSTER, "=r,r,r,r", [pred, bar_off, peer], dtype=tl.int32,
                                  is_pure=False, pack=1)
    else:
        tl.inline_asm_elementwise(_ARRIVE_CTA, "=r,r,r,r", [pred, bar_off, peer], dtype=tl.int32,
                                  is_pure=False, pack=1)
