"""Reference solutions of the TLX puzzles.

Each kernel here is the answer to one puzzle. The learner's template is made from
this source by blanking what the puzzle asks for (see ``specs.py``: ``blanks``),
so the template and the answer can never drift apart. Peek only when stuck.
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def arrive_count(x_ptr, out_ptr, HALF: tl.constexpr):
    # two producer replicas each fill one half, then arrive; the consumer may read once both did
    halves = tlx.local_alloc((HALF,), tl.float32, 2)
    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(ready[0], 0)
            offs = tl.arange(0, HALF)
            tl.store(out_ptr + offs, tlx.local_load(halves[0]))
            tl.store(out_ptr + HALF + offs, tlx.local_load(halves[1]))
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            offs = r * HALF + tl.arange(0, HALF)
            tlx.local_store(halves[r], tl.load(x_ptr + offs) * 2.0)
            tlx.barrier_arrive(ready[0])


@triton.jit
def phases(x_ptr, out_ptr, BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    # one SMEM slot used ROUNDS times: `full` says "data is in", `empty` says "slot is free again"
    slot = tlx.local_alloc((BLOCK,), tl.float32, 1)
    full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for r in range(ROUNDS):
                tlx.barrier_wait(empty[0], (r & 1) ^ 1)
                tlx.local_store(slot[0], tl.load(x_ptr + r * BLOCK + tl.arange(0, BLOCK)))
                tlx.barrier_arrive(full[0])
        with tlx.async_task(num_warps=4):
            acc = tl.zeros((BLOCK,), tl.float32)
            for r in range(ROUNDS):
                tlx.barrier_wait(full[0], r & 1)
                acc += tlx.local_load(slot[0])
                tlx.barrier_arrive(empty[0])
            tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@triton.jit
def expect_bytes(a_desc, b_desc, a_out, b_out, BM: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr):
    # two TMA loads complete ONE barrier: it must expect the bytes of both tiles (fp16: 2 bytes each)
    a = tlx.local_alloc((BM, BK), tl.float16, 1)
    b = tlx.local_alloc((BK, BN), tl.float16, 1)
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_expect_bytes(loaded[0], BM * BK * 2 + BK * BN * 2)
            tlx.async_descriptor_load(a_desc, a[0], [0, 0], loaded[0])
            tlx.async_descriptor_load(b_desc, b[0], [0, 0], loaded[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(loaded[0], 0)
            rk = tl.arange(0, BK)
            rm = tl.arange(0, BM)
            rn = tl.arange(0, BN)
            tl.store(a_out + rm[:, None] * BK + rk[None, :], tlx.local_load(a[0]))
            tl.store(b_out + rk[:, None] * BN + rn[None, :], tlx.local_load(b[0]))


@triton.jit
def ring(in_desc, out_ptr, N_TILES, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    # a STAGES-deep ring of SMEM tiles, each slot with its own full/empty barrier pair
    bufs = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], BM * BK * 2)
                tlx.async_descriptor_load(in_desc, bufs[s], [i * BM, 0], full[s])
        with tlx.async_task(num_warps=4):
            rows = tl.arange(0, BM)
            cols = tl.arange(0, BK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(full[s], p)
                x = tlx.local_load(bufs[s])
                tlx.barrier_arrive(empty[s])
                tl.store(out_ptr + (i * BM + rows)[:, None] * BK + cols[None, :], x * 2.0)


@triton.jit
def task_split(in_desc, out_ptr, N_TILES, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    # the loader brings each tile in as two halves; two consumer replicas take one half each,
    # and a slot is free again only when BOTH have released it
    HALF: tl.constexpr = BM // 2
    bufs = tlx.local_alloc((HALF, BK), tl.float16, 2 * STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], BM * BK * 2)
                tlx.async_descriptor_load(in_desc, bufs[2 * s], [i * BM, 0], full[s])
                tlx.async_descriptor_load(in_desc, bufs[2 * s + 1], [i * BM + HALF, 0], full[s])
        with tlx.async_task(num_warps=4, replicate=2):
            r = tlx.async_task_replica_id()
            rows = tl.arange(0, HALF)
            cols = tl.arange(0, BK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(full[s], p)
                x = tlx.local_load(bufs[2 * s + r])
                tlx.barrier_arrive(empty[s])
                tl.store(out_ptr + (i * BM + r * HALF + rows)[:, None] * BK + cols[None, :], x + 1.0)


@triton.jit
def named_barrier(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # a named barrier (ids 0..15) counts THREADS: every thread of both warp groups takes part
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tlx.local_store(buf[0], tl.load(x_ptr + offs) - 1.0)
            tlx.named_barrier_arrive(3, 256)
        with tlx.async_task(num_warps=4):
            tlx.named_barrier_wait(3, 256)
            tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))
