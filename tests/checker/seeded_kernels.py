"""Small TLX kernels with one seeded barrier-protocol mistake each.

The line with the mistake carries a `# SEED: <rule-id>` comment; the tests expect that
rule's finding at that line. `ws_copy_ok` is the same protocol without a mistake.
Pattern of the WS kernels: a TMA producer (default task) fills a STAGES-deep ring of
BLOCK x BLOCK tiles; two consumer replicas each read every tile and write it to their own
half of `out`, then release the slot.
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def ws_copy_ok(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_full_count(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)  # SEED: tma-full-count
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_expect_bytes(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK)  # SEED: tma-expect-bytes
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_release_count(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)  # SEED: release-count
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_warp_count(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_warp_barrier(num_barriers=STAGES, num_warps=4)  # SEED: warp-barrier-count
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_warp_on_tma(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_warp_barrier(num_barriers=STAGES, num_warps=1)  # SEED: warp-barrier-on-tma
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def _ordered_store(out_ptr, x, rows, offs, r, BLOCK: tl.constexpr, BAR: tl.constexpr, ARRIVE: tl.constexpr,
                   WAIT: tl.constexpr):
    # replica 1 stores only after replica 0 has (a named barrier orders the two stores)
    if r == 0:
        tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)
        tlx.named_barrier_arrive(BAR, ARRIVE)
    else:
        tlx.named_barrier_wait(BAR, WAIT)
        tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_named(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr, BAR: tl.constexpr,
                  ARRIVE: tl.constexpr, WAIT: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                _ordered_store(out_ptr, x, i * BLOCK + offs, offs, r, BLOCK, BAR, ARRIVE, WAIT)


@triton.jit
def ws_copy_named_reserved(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = i * BLOCK + offs
                if r == 0:
                    tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)
                    tlx.named_barrier_arrive(3, 256)  # SEED: named-barrier-id
                else:
                    tlx.named_barrier_wait(3, 256)
                    tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_named_threads(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = i * BLOCK + offs
                if r == 0:
                    tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)
                    tlx.named_barrier_arrive(9, 256)
                else:
                    tlx.named_barrier_wait(9, 128)  # SEED: named-barrier-threads
                    tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def small_dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a = tlx.local_alloc((BM, BK), tl.float16, 1)
    b = tlx.local_alloc((BK, BN), tl.float16, 1)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    tlx.local_store(tlx.local_view(a, 0), tl.load(a_ptr + rm[:, None] * BK + rk[None, :]))
    tlx.local_store(tlx.local_view(b, 0), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]))
    tlx.fence_async_shared()
    acc = tl.zeros((BM, BN), tl.float32)
    acc = tlx.async_dot(tlx.local_view(a, 0), tlx.local_view(b, 0), acc)  # SEED: async-dot-shape
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def cluster_pair(x_desc, out_ptr, BLOCK: tl.constexpr, LEADER_ONLY: tl.constexpr, READY_COUNT: tl.constexpr):
    # both CTAs of a 2-CTA cluster load their tile with a 2-CTA TMA; each tells the leader it is done
    rank = tlx.cluster_cta_rank()
    is_leader = rank == 0
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float16, 1)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=READY_COUNT)  # SEED: cta-remote-count
    if LEADER_ONLY:
        if is_leader:
            tlx.barrier_expect_bytes(full[0], BLOCK * BLOCK * 2)
    else:
        tlx.barrier_expect_bytes(full[0], BLOCK * BLOCK * 2)  # SEED: cta-leader-expect
    tlx.async_descriptor_load(x_desc, buf[0], [rank * BLOCK, 0], full[0], two_ctas=True)
    tlx.barrier_wait(full[0], 0, pred=is_leader)
    tlx.barrier_arrive(ready[0], 1, remote_cta_rank=0)
    tlx.barrier_wait(ready[0], 0, pred=is_leader)
    offs = tl.arange(0, BLOCK)
    x = tlx.local_load(buf[0])
    tl.store(out_ptr + (rank * BLOCK + offs[:, None]) * BLOCK + offs[None, :], x)


@triton.jit
def pair_mma(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, REMOTE: tl.constexpr):
    # a 2-CTA MMA (sm_100): each CTA holds BM rows of A and half of B; the leader's MMA computes both
    # CTAs' tiles. REMOTE: the peer tells the leader its A has landed with a remote arrival (uTLX cannot
    # build that), else both CTAs meet at a cluster barrier.
    rank = tlx.cluster_cta_rank()
    is_leader = rank == 0
    a_smem = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_smem = tlx.local_alloc((BK, BN // 2), tl.float16, 1)
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    a_bar = tlx.alloc_barriers(1, arrive_count=1)
    b_bar = tlx.alloc_barriers(1, arrive_count=1)
    peer_bar = tlx.alloc_barriers(1, arrive_count=2)
    mma_bar = tlx.alloc_barriers(1, arrive_count=1)
    tlx.barrier_expect_bytes(a_bar[0], BM * BK * 2)
    tlx.async_descriptor_load(a_desc, a_smem[0], [rank * BM, 0], a_bar[0])
    if is_leader:
        tlx.barrier_expect_bytes(b_bar[0], BK * BN * 2)
    tlx.async_descriptor_load(b_desc, b_smem[0], [0, rank * (BN // 2)], b_bar[0], two_ctas=True)
    tlx.barrier_wait(a_bar[0], 0)
    tlx.barrier_wait(b_bar[0], 0, pred=is_leader)
    if REMOTE:
        tlx.barrier_arrive(peer_bar[0], 1, remote_cta_rank=0)
        tlx.barrier_wait(peer_bar[0], 0, pred=is_leader)
    else:
        tlx.cluster_barrier()
    tlx.async_dot(a_smem[0], b_smem[0], acc[0], False, mBarriers=[mma_bar[0]], two_ctas=True,  # SEED: two-ctas-m
                  out_dtype=tl.float32)
    tlx.barrier_wait(mma_bar[0], 0)
    out = tlx.local_load(acc[0])
    rows = rank * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    tl.store(c_ptr + rows[:, None] * BN + cols[None, :], out)


@triton.jit
def ws_copy_phase(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # the producer's first wait on a fresh `empty` slot uses phase p, not p ^ 1: it blocks at once, nothing
    # ever arrives anywhere; the counts are right and must not be "fixed"
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p)  # SEED: deadlock
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def ws_copy_stuck_replica(x_desc, out_ptr, N_TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # replica 1 blocks before its first tile on a barrier nobody arrives at: `empty` sees one arrival where
    # its (right) count is 2, and never completes a phase; that one arrival is no evidence for the count
    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    gate = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(empty, s), p ^ 1)
                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)
                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], tlx.local_view(full, s))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = tl.arange(0, BLOCK)
            if r == 1:
                tlx.barrier_wait(gate[0], 0)  # SEED: stuck
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(tlx.local_view(full, s), p)
                x = tlx.local_load(tlx.local_view(bufs, s))
                tlx.barrier_arrive(tlx.local_view(empty, s))
                rows = r * N_TILES * BLOCK + i * BLOCK + offs
                tl.store(out_ptr + rows[:, None] * BLOCK + offs[None, :], x)
