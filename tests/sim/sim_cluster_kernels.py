"""Small cluster kernels for the simulator's tests: a 2-CTA GEMM with switchable 2-CTA protocol bugs,
a cluster all-gather through remote SMEM stores, and a warp-specialized 2-CTA exchange whose cluster
barrier is in every task or (SYNC="top"/"after", a GPU hang) outside async_tasks.

BUG (each marked on its line with ``# BUG:``):
"" (none), "expect_both" (a 1-CTA habit: every CTA announces and waits for its B bytes on its own
barrier, but two_ctas loads signal the leader's), "count1" (arrive_count 1 where both CTAs arrive),
"peer_waits" (the peer waits on its own copy of the barrier the arrivals are sent to in the leader).
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def gemm_2cta(a_desc, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              BUG: tl.constexpr):
    rank = tlx.cluster_cta_rank()
    is_leader = rank % 2 == 0
    pid_m = tl.program_id(0)
    a_smem = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_smem = tlx.local_alloc((BK, BN // 2), tl.float16, 1)     # each CTA holds half of B
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    a_bar = tlx.alloc_barriers(1, arrive_count=1)
    b_bar = tlx.alloc_barriers(1, arrive_count=1)              # the leader's counts both CTAs' B bytes
    if BUG == "count1":
        cta_bar = tlx.alloc_barriers(1, arrive_count=1)  # BUG: both CTAs arrive on it
    else:
        cta_bar = tlx.alloc_barriers(1, arrive_count=2)
    mma_bar = tlx.alloc_barriers(1, arrive_count=1)
    phase = 0
    for k in range(0, tl.cdiv(K, BK)):
        tlx.barrier_expect_bytes(a_bar[0], BM * BK * 2)
        tlx.async_descriptor_load(a_desc, a_smem[0], [pid_m * BM, k * BK], a_bar[0])
        if BUG == "expect_both":
            tlx.barrier_expect_bytes(b_bar[0], BK * (BN // 2) * 2)  # BUG: the peer expects its bytes locally
        else:
            tlx.barrier_expect_bytes(b_bar[0], BK * BN * 2, pred=is_leader)
        tlx.async_descriptor_load(b_desc, b_smem[0], [k * BK, (rank % 2) * (BN // 2)], b_bar[0], two_ctas=True)
        tlx.barrier_wait(a_bar[0], phase)
        if BUG == "expect_both":
            tlx.barrier_wait(b_bar[0], phase)  # BUG: waits for bytes that land in the leader
        else:
            tlx.barrier_wait(b_bar[0], phase, pred=is_leader)
        # the leader's MMA reads the peer's A: the peer says its A has landed
        tlx.barrier_arrive(cta_bar[0], 1, remote_cta_rank=rank & ~1)
        if BUG == "peer_waits":
            tlx.barrier_wait(cta_bar[0], phase)  # BUG: the arrivals went to the leader's cta_bar
        else:
            tlx.barrier_wait(cta_bar[0], phase, pred=is_leader)
        tlx.async_dot(a_smem[0], b_smem[0], acc[0], use_acc=k > 0, mBarriers=[mma_bar[0]], two_ctas=True,
                      out_dtype=tl.float32)
        tlx.barrier_wait(mma_bar[0], phase)
        phase = phase ^ 1
    out = tlx.local_load(acc[0])
    rows = pid_m * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    tl.store(c_ptr + rows[:, None] * BN + cols[None, :], out)


@triton.jit
def cluster_allgather(x_ptr, out_ptr, BLOCK: tl.constexpr, NUM_CTAS: tl.constexpr, ASYNC: tl.constexpr):
    """Every CTA of the cluster puts its block into slot [rank] of every CTA's buffer; each then writes the
    whole gathered row. ASYNC: st.async with mbarrier bytes; else plain remote stores + cluster_barrier."""
    rank = tlx.cluster_cta_rank()
    cid = tl.program_id(0) // NUM_CTAS
    buf = tlx.local_alloc((1, BLOCK), tl.float32, NUM_CTAS)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    if ASYNC:
        tlx.barrier_expect_bytes(bar[0], (NUM_CTAS - 1) * BLOCK * 4)
    tlx.cluster_barrier()
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + (cid * NUM_CTAS + rank) * BLOCK + offs)[None, :]
    tlx.local_store(buf[rank], x)
    for i in tl.static_range(NUM_CTAS):
        if rank != i:
            if ASYNC:
                tlx.async_remote_shmem_store(dst=buf[rank], src=x, remote_cta_rank=i, barrier=bar[0])
            else:
                tlx.remote_shmem_store(dst=buf[rank], src=x, remote_cta_rank=i)
    if ASYNC:
        tlx.barrier_wait(bar[0], 0)
    else:
        tlx.cluster_barrier()
    for i in tl.static_range(NUM_CTAS):
        v = tlx.local_load(buf[i])
        tl.store(out_ptr + ((cid * NUM_CTAS + rank) * NUM_CTAS + i) * BLOCK + offs[None, :], v)


@triton.jit
def clc_pairs(out_ptr, NUM_CTAS: tl.constexpr):
    """Clusters of NUM_CTAS steal cluster tiles with CLC (multi_ctas=True): CTA rank r of a cluster that
    handles cluster tile t writes t * NUM_CTAS + r into slot t * NUM_CTAS + r, and counts its visits."""
    rank = tlx.cluster_cta_rank()
    ctx = tlx.clc_create_context(num_consumers=NUM_CTAS)
    tile = tl.program_id(0) // NUM_CTAS
    p_prod = 1
    p_cons = 0
    while tile != -1:
        tlx.clc_producer(ctx, p_prod, multi_ctas=True)
        p_prod ^= 1
        slot = tile * NUM_CTAS + rank
        tl.atomic_add(out_ptr + slot, 1)
        first_cta = tlx.clc_consumer(ctx, p_cons, multi_ctas=True)
        p_cons ^= 1
        tile = tl.where(first_cta == -1, -1, first_cta // NUM_CTAS)


@triton.jit
def wait_remote(out_ptr):
    bar = tlx.alloc_barriers(1, arrive_count=2)
    tlx.barrier_arrive(bar[0], 1, remote_cta_rank=0)
    tlx.barrier_wait(tlx.remote_view(bar[0], 0), 0)  # BUG: waits on the leader's barrier from every CTA
    tl.store(out_ptr + tl.program_id(0), 1)


@triton.jit
def ws_exchange(x_ptr, out_ptr, BLOCK: tl.constexpr, SYNC: tl.constexpr):
    """A warp-specialized 2-CTA exchange: each CTA's producer task sends its block of x into the peer's SMEM
    (st.async, bytes counted on the peer's barrier); the consumer task waits for the peer's block and stores it
    to out. The peer's barrier must be initialised before the send, which a cluster barrier orders.

    SYNC: "tasks" (correct: cluster_barrier first thing in every async_task), "top" (the cluster barrier at the
    top level, before async_tasks: the producer task's warps never arrive, the GPU hangs), "after" (correct
    per-task barriers plus one more after async_tasks, where the producer task's warps are parked again)."""
    rank = tlx.cluster_cta_rank()
    cid = tl.program_id(0) // 2
    offs = tl.arange(0, BLOCK)
    buf = tlx.local_alloc((1, BLOCK), tl.float32, 1)
    bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BLOCK * 4)
    if SYNC == "top":
        tlx.cluster_barrier()  # BUG: outside async_tasks, before it
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if SYNC != "top":
                tlx.cluster_barrier()
            tlx.barrier_wait(bar[0], 0)
            v = tlx.local_load(buf[0])
            tl.store(out_ptr + (cid * 2 + rank) * BLOCK + offs[None, :], v)
        with tlx.async_task(num_warps=1):
            if SYNC != "top":
                tlx.cluster_barrier()
            x = tl.load(x_ptr + (cid * 2 + rank) * BLOCK + offs)[None, :]
            tlx.async_remote_shmem_store(dst=buf[0], src=x, remote_cta_rank=rank ^ 1, barrier=bar[0])
    if SYNC == "after":
        tlx.cluster_barrier()  # BUG: outside async_tasks, after it
