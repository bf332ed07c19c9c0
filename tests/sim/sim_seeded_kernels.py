"""Small TLX kernels for the simulator's tests: a TMA copy pipeline with switchable, deliberate bugs.

BUG selects one mistake (each marked on its line with ``# BUG:``):
"" (none), "arrive_count", "phase", "dropped_arrive", "expect_bytes", "expect_too_few", "early_release".
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def copy_pipeline(in_desc, out_ptr, N_TILES, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
                  BUG: tl.constexpr):
    bufs = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    if BUG == "arrive_count":
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)  # BUG: one consumer arrives
    else:
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                if BUG == "phase":
                    tlx.barrier_wait(empty[s], p)  # BUG: the first wait on a fresh barrier must use p ^ 1
                else:
                    tlx.barrier_wait(empty[s], p ^ 1)
                if BUG == "expect_bytes":
                    tlx.barrier_expect_bytes(full[s], 2 * BM * BK * 2)  # BUG: twice the tile's bytes
                elif BUG == "expect_too_few":
                    tlx.barrier_expect_bytes(full[s], BM * BK)  # BUG: half the tile's bytes
                else:
                    tlx.barrier_expect_bytes(full[s], BM * BK * 2)
                tlx.async_descriptor_load(in_desc, bufs[s], [i * BM, 0], full[s])
        with tlx.async_task(num_warps=4):
            rows = tl.arange(0, BM)
            cols = tl.arange(0, BK)
            for i in range(N_TILES):
                s = i % STAGES
                p = (i // STAGES) & 1
                tlx.barrier_wait(full[s], p)
                if BUG == "early_release":
                    tlx.barrier_arrive(empty[s])  # BUG: releases the buffer before reading it
                    x = tlx.local_load(bufs[s])
                else:
                    x = tlx.local_load(bufs[s])
                    if BUG != "dropped_arrive":
                        tlx.barrier_arrive(empty[s])
                tl.store(out_ptr + (i * BM + rows)[:, None] * BK + cols[None, :], x)


@triton.jit
def named_barrier_handoff(out_ptr, BLOCK: tl.constexpr, COUNT: tl.constexpr):
    """Two tasks hand a value over SMEM, ordered by named barrier 1 (COUNT threads on each side)."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = tl.arange(0, BLOCK)
            tlx.local_store(buf[0], offs.to(tl.float32) * 2.0)
            tlx.named_barrier_arrive(1, 256)
        with tlx.async_task(num_warps=4):
            tlx.named_barrier_wait(1, COUNT)
            x = tlx.local_load(buf[0])
            tl.store(out_ptr + tl.arange(0, BLOCK), x)


@triton.jit
def run_ahead(out_ptr, BLOCK: tl.constexpr):
    """The producer completes two phases of `ready` and finishes; the consumer then waits for a third."""
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    go = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.arange(0, BLOCK).to(tl.float32))
            tlx.barrier_arrive(ready[0])
            tlx.barrier_arrive(ready[0])
            tlx.barrier_arrive(go[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(go[0], 0)
            tlx.barrier_wait(ready[0], 0)  # BUG: `ready` has completed two phases; parity 0 needs a third
            tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))


@triton.jit
def two_loads_one_barrier(a_desc, b_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr, BUG: tl.constexpr):
    """Two TMA loads signal one barrier (as A and B tiles of a GEMM do); BUG="expect_one" announces A's only."""
    a_buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    b_buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if BUG == "expect_one":
                tlx.barrier_expect_bytes(bar[0], BM * BK * 2)  # BUG: B's bytes are not announced
            else:
                tlx.barrier_expect_bytes(bar[0], 2 * BM * BK * 2)
            tlx.async_descriptor_load(a_desc, a_buf[0], [0, 0], bar[0])
            tlx.async_descriptor_load(b_desc, b_buf[0], [0, 0], bar[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(bar[0], 0)
            x = tlx.local_load(a_buf[0]) + tlx.local_load(b_buf[0])
            rows = tl.arange(0, BM)
            tl.store(out_ptr + rows[:, None] * BK + tl.arange(0, BK)[None, :], x)
