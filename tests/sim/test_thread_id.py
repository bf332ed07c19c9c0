"""``tlx.thread_id`` per thread on the simulator (sim/ops/threads.py), against torch: what a store or atomic under a
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


def _chain_kernel(tmp_path, depth):
    # a kernel with an if/elif chain `depth` long, in a file of its own (the simulator re-reads kernel sources)
    lines = ["import triton", "import triton.language as tl", "", "@triton.jit",
             "def chain(o_ptr, x_ptr, OP: tl.constexpr):", "    x = tl.load(x_ptr + tl.arange(0, 32))"]
    for i in range(depth):
        lines.append(f"    {'if' if i == 0 else 'elif'} OP == {i}:")
        lines.append(f"        z = x * {i + 1}.0")
    lines += ["    else:", "        z = x", "    tl.store(o_ptr + tl.arange(0, 32), z)", ""]
    path = tmp_path / f"chain{depth}.py"
    path.write_text("\n".join(lines))
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"chain{depth}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.chain


def test_an_elif_chain_is_rewritten_once_per_branch(tmp_path):
    # each branch appears once in the simulator's copy of the kernel (it runs uniformly, or under the threads that
    # take it): an if/elif chain copied per level grew as 2^depth (test_bf16's 17-way chain took minutes)
    from tlx_workbench.sim.schedule.rewrite import rewrite
    sizes = {d: len(rewrite(_chain_kernel(tmp_path, d).fn, None).__code__.co_code) for d in (8, 16)}
    assert sizes[16] < 2.5 * sizes[8], sizes
    k = _chain_kernel(tmp_path, 24)
    x = torch.randn(32)
    for op in (0, 13, 23, 99):
        out = torch.zeros(32)
        simulate(k, out, x, OP=op, grid=(1,), gpu="H200")
        assert torch.equal(out, x * (op + 1) if op < 24 else x), op
