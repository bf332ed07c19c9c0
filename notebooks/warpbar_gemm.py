"""The warp-specialized GEMM of notebook 5, with a switch for warp barriers on `empty`.

It lives in a file (not a notebook cell) because the warp-barrier advisor rewrites the kernel's
source file and imports the converted copy.
"""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def ws_matmul_wb(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                 STAGES: tl.constexpr, WARP_BAR: tl.constexpr, ARRIVALS: tl.constexpr):
    HALF: tl.constexpr = BM // 2
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_bufs = tlx.local_alloc((HALF, BK), tl.float16, 2 * STAGES)
    b_bufs = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    if WARP_BAR:
        empty = tlx.alloc_warp_barrier(num_barriers=STAGES, num_warps=4, num_arrivals=ARRIVALS)
    else:
        empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=ARRIVALS)
    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            for k in range(tl.cdiv(K, BK)):
                s = k % STAGES
                p = (k // STAGES) & 1
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], BM * BK * 2 + BK * BN * 2)
                tlx.async_descriptor_load(a_desc, a_bufs[2 * s], [pid_m * BM, k * BK], full[s])
                tlx.async_descriptor_load(a_desc, a_bufs[2 * s + 1], [pid_m * BM + HALF, k * BK], full[s])
                tlx.async_descriptor_load(b_desc, b_bufs[s], [k * BK, pid_n * BN], full[s])
        with tlx.async_task(num_warps=4, replicate=2, registers=232):
            r = tlx.async_task_replica_id()
            acc = tl.zeros((HALF, BN), tl.float32)
            for k in range(tl.cdiv(K, BK)):
                s = k % STAGES
                p = (k // STAGES) & 1
                tlx.barrier_wait(full[s], p)
                acc = tlx.async_dot(a_bufs[2 * s + r], b_bufs[s], acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(empty[s])
            rows = pid_m * BM + r * HALF + tl.arange(0, HALF)
            cols = pid_n * BN + tl.arange(0, BN)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16))
