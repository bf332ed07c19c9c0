"""``tlx.thread_id`` per thread on the simulator (sim/threads.py), against torch: what a store or atomic under a
condition on the thread id writes, as the compiler's sm_90 lowering does it, and the clear refusals."""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from tlx_workbench.errors import SimulationError
from tlx_workbench.sim import simulate


@triton.jit
def _scalar_store_tid0(out_ptr, v):
    tid = tlx.thread_id(0)
    if tid == 0:
        tl.store(out_ptr + tid, v)


def test_scalar_store_under_tid_0_writes_one_element():
    out = torch.zeros(128, dtype=torch.int32)
    simulate(_scalar_store_tid0, out, 7, grid=(1,), num_warps=4, gpu="H200")
    ref = torch.zeros(128, dtype=torch.int32)
    ref[0] = 7
    assert torch.equal(out, ref)


@triton.jit
def _scalar_store_tid40(out_ptr, v):
    if tlx.thread_id(0) == 40:
        tl.store(out_ptr, v)


def test_scalar_store_under_another_thread_stores_nothing():
    # the lowering predicates a scalar store on the task's first thread, which is not in this branch
    out = torch.zeros(4, dtype=torch.int32)
    simulate(_scalar_store_tid40, out, 7, grid=(1,), num_warps=4, gpu="H200")
    assert out.tolist() == [0, 0, 0, 0]


@triton.jit
def _block_store_first(x_ptr, out_ptr, K: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if tlx.thread_id(0) < K:
        tl.store(out_ptr + offs, x)


def test_block_store_under_tid_lt_16_writes_the_first_16_elements():
    x = torch.randn(128)
    out = torch.zeros(128)
    simulate(_block_store_first, x, out, K=16, N=128, grid=(1,), num_warps=4, gpu="H200")
    ref = torch.zeros(128)
    ref[:16] = x[:16]
    assert torch.equal(out, ref)


def test_block_smaller_than_the_task_is_stored_by_its_lowest_holders():
    # 64 elements over 128 threads: warps 0-1 and 2-3 both hold them; element e is stored by thread e
    x = torch.randn(64)
    out = torch.zeros(64)
    simulate(_block_store_first, x, out, K=40, N=64, grid=(1,), num_warps=4, gpu="H200")
    ref = torch.zeros(64)
    ref[:40] = x[:40]
    assert torch.equal(out, ref)


@triton.jit
def _ws_block_store(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tid = tlx.thread_id(0)
            if tid < 16:
                tl.store(out_ptr + offs, tl.load(x_ptr + offs))
        with tlx.async_task(num_warps=4):
            tid = tlx.thread_id(0)              # 128..255: this task's warps follow the default's 4
            if tid < 128 + 16:
                tl.store(out_ptr + N + offs, tl.load(x_ptr + N + offs) * 2)
            if tid == 128:
                tl.store(out_ptr + 2 * N, tid)


def test_second_async_task_sees_ids_from_128():
    x = torch.randn(2 * 128)
    out = torch.zeros(2 * 128 + 1)
    simulate(_ws_block_store, x, out, N=128, grid=(1,), num_warps=4, gpu="H200")
    ref = torch.zeros(2 * 128 + 1)
    ref[:16] = x[:16]
    ref[128:144] = x[128:144] * 2
    ref[256] = 128
    assert torch.equal(out, ref)


@triton.jit
def _partition_order(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tl.store(out_ptr, tlx.thread_id(0))
        with tlx.async_task(num_warps=1):
            tl.store(out_ptr + 1, tlx.thread_id(0))
        with tlx.async_task(num_warps=4):
            tl.store(out_ptr + 2, tlx.thread_id(0))


def test_partitions_are_placed_largest_first_after_the_default_warps():
    # the compiler's warp-group allocation: the 4-warp partition at warp 4, the 1-warp one after it (warp 8);
    # a scalar store of thread_id is done by each task's first thread
    out = torch.full((3,), -1, dtype=torch.int32)
    simulate(_partition_order, out, grid=(1,), num_warps=4, gpu="H200")
    assert out.tolist() == [0, 256, 128]


@triton.jit
def _atomic_once(ctr_ptr):
    if tlx.thread_id(0) == 0:
        tl.atomic_add(ctr_ptr, 1)


def test_atomic_add_under_tid_0_adds_once():
    ctr = torch.zeros(1, dtype=torch.int32)
    simulate(_atomic_once, ctr, grid=(3,), num_warps=4, gpu="H200")
    assert ctr.item() == 3          # once per CTA


@triton.jit
def _block_atomic(ctr_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    if tlx.thread_id(0) >= 100:
        tl.atomic_add(ctr_ptr + offs, tl.full([N], 1, tl.int32))


def test_block_atomic_under_a_mask_adds_the_active_threads_elements():
    ctr = torch.zeros(128, dtype=torch.int32)
    simulate(_block_atomic, ctr, N=128, grid=(1,), num_warps=4, gpu="H200")
    ref = torch.zeros(128, dtype=torch.int32)
    ref[100:] = 1
    assert torch.equal(ctr, ref)


@triton.jit
def _else_branch(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    if tlx.thread_id(0) < 32:
        tl.store(out_ptr + offs, tl.full([N], 1, tl.int32))
    else:
        tl.store(out_ptr + offs, tl.full([N], 2, tl.int32))


def test_else_branch_runs_under_the_other_threads():
    out = torch.zeros(128, dtype=torch.int32)
    simulate(_else_branch, out, N=128, grid=(1,), num_warps=4, gpu="H200")
    assert out.tolist() == [1] * 32 + [2] * 96


@triton.jit
def _uniform_condition(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    if tlx.thread_id(0) < 1024:          # true in every thread: an ordinary branch
        tl.store(out_ptr + offs, offs)


def test_condition_true_in_every_thread_is_an_ordinary_branch():
    out = torch.zeros(256, dtype=torch.int32)
    simulate(_uniform_condition, out, N=256, grid=(1,), num_warps=4, gpu="H200")
    assert torch.equal(out, torch.arange(256, dtype=torch.int32))


@triton.jit
def _too_many_elements(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    if tlx.thread_id(0) < 16:
        tl.store(out_ptr + offs, offs)


@triton.jit
def _used_after(out_ptr):
    v = 0
    if tlx.thread_id(0) < 16:
        v = 1
    tl.store(out_ptr, v)


@triton.jit
def _barrier_under_mask(out_ptr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    if tlx.thread_id(0) == 0:
        tlx.barrier_arrive(bars[0])
    tl.store(out_ptr, 1)


@triton.jit
def _splat_per_thread(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, offs + tlx.thread_id(0))


@pytest.mark.parametrize("kernel, kw, words, line_of", [
    (_too_many_elements, {"N": 256}, "256 elements", "tl.store(out_ptr + offs, offs)"),
    (_used_after, {}, "`v` is assigned inside the `if`", "tl.store(out_ptr, v)"),
    (_barrier_under_mask, {}, "tlx.barrier_arrive on an mbarrier", "tlx.barrier_arrive(bars[0])"),
    (_splat_per_thread, {"N": 128}, "differs between the threads", "offs + tlx.thread_id(0)"),
])
def test_unfaithful_patterns_are_refused_with_the_line(kernel, kw, words, line_of):
    import inspect
    lines, start = inspect.getsourcelines(kernel.fn)
    line = start + next(i for i, s in enumerate(lines) if line_of in s)
    out = torch.zeros(256, dtype=torch.int32)
    with pytest.raises(SimulationError) as e:
        simulate(kernel, out, grid=(1,), num_warps=4, gpu="H200", **kw)
    assert words in str(e.value)
    assert e.value.line == line
    assert e.value.hint


@triton.jit
def _warp_barrier_half(out_ptr):
    bar = tlx.alloc_warp_barrier(num_barriers=1, num_warps=4)
    if tlx.thread_id(0) < 64:
        tlx.barrier_arrive(bar[0])
    tlx.barrier_wait(bar[0], 0)
    tl.store(out_ptr, 1)


def test_warp_barrier_counts_only_the_threads_that_arrive():
    # half the threads arrive on a barrier expecting all 128: the wait never returns
    out = torch.zeros(1, dtype=torch.int32)
    res = simulate(_warp_barrier_half, out, grid=(1,), num_warps=4, gpu="H200", on_deadlock="return")
    assert res.deadlock is not None
    assert "64" in str(res.deadlock)
