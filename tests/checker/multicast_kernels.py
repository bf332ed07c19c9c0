"""Hopper 2-CTA kernels for the checker tests: a pair of CTAs shares B through a multicast TMA copy
(notebook 10's protocol), with seeded mistakes marked ``# BUG: <name>``."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def pair_gemm(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              STAGES: tl.constexpr, BUG: tl.constexpr):
    HALF_N: tl.constexpr = BN // 2
    rank = tlx.cluster_cta_rank()
    peer = 1 - rank
    pair = tl.program_id(0) // 2
    num_n = tl.cdiv(N, BN)
    row = (2 * (pair // num_n) + rank) * BM
    col = (pair % num_n) * BN
    a_bufs = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_bufs = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    if BUG == "local_release":
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    else:
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)
    if BUG == "sync_at_top":
        tlx.cluster_barrier()  # BUG: sync_at_top
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if BUG != "sync_at_top":
                tlx.cluster_barrier()
            n = 0
            for k in range(tl.cdiv(K, BK)):
                s = n % STAGES
                tlx.barrier_wait(empty[s], ((n // STAGES) & 1) ^ 1)
                tlx.barrier_expect_bytes(full[s], (BM * BK + BK * BN) * 2)
                tlx.async_descriptor_load(a_desc, a_bufs[s], [row, k * BK], full[s])
                if rank == 0:
                    tlx.async_descriptor_load(b_desc, tlx.local_slice(b_bufs[s], [0, 0], [BK, HALF_N]),  # BUG: multicast
                                              [k * BK, col], full[s], multicast_targets=[0, 1])
                else:
                    tlx.async_descriptor_load(b_desc, tlx.local_slice(b_bufs[s], [0, HALF_N], [BK, HALF_N]),
                                              [k * BK, col + HALF_N], full[s], multicast_targets=[0, 1])
                n += 1
            for i in range(STAGES):
                s = n % STAGES
                tlx.barrier_wait(empty[s], ((n // STAGES) & 1) ^ 1)
                n += 1
        with tlx.async_task(num_warps=4):
            if BUG != "sync_at_top":
                tlx.cluster_barrier()
            acc = tl.zeros((BM, BN), tl.float32)
            for k in range(tl.cdiv(K, BK)):
                s = k % STAGES
                tlx.barrier_wait(full[s], (k // STAGES) & 1)
                acc = tlx.async_dot(a_bufs[s], b_bufs[s], acc)  # BUG: read
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[s])
                if BUG != "local_release":
                    tlx.barrier_arrive(empty[s], 1, remote_cta_rank=peer)  # BUG: remote
            rows = row + tl.arange(0, BM)
            cols = col + tl.arange(0, BN)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16), mask=mask)


@triton.jit
def slice_at_rank(x_desc, out_ptr, BN: tl.constexpr):
    buf = tlx.local_alloc((64, BN), tl.float16, 1)
    half = tlx.local_slice(buf[0], [0, tlx.cluster_cta_rank() * (BN // 2)], [64, BN // 2])  # BUG: runtime offset
    tl.store(out_ptr + tl.arange(0, 64)[:, None] * (BN // 2) + tl.arange(0, BN // 2)[None, :],
             tlx.local_load(half))
