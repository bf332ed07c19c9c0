"""Kernels that do not compile, each for one reason (used by test_errors.py)."""
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def _helper(x):
    return x + undefined_name  # noqa: F821  (the error under test)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # MARK:arange
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x, mask=offs < n)


@triton.jit
def shape_error_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.reshape(x, (BLOCK + 1, 3))  # MARK:reshape
    tl.store(x_ptr + offs, y)


@triton.jit
def helper_error_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, _helper(x))


@triton.jit
def tmem_kernel(x_ptr, BLOCK: tl.constexpr):
    acc = tlx.local_alloc((128, BLOCK), tl.float32, 1, tlx.storage_kind.tmem)  # MARK:tmem (blamed: the alloc)
    view = tlx.local_view(acc, 0)
    tlx.local_store(view, tl.zeros([128, BLOCK], tl.float32))  # MARK:tmem-use
    v = tlx.local_load(view)
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.sum(v, axis=0))


@triton.jit
def big_smem_kernel(x_ptr, BLOCK: tl.constexpr, NBUF: tl.constexpr):
    bufs = tlx.local_alloc((128, 128), tl.float16, NBUF)  # MARK:bigalloc
    bars = tlx.alloc_barriers(num_barriers=NBUF, arrive_count=1)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tlx.local_store(tlx.local_view(bufs, 0), tl.zeros([128, 128], tl.float16))
    tlx.barrier_arrive(tlx.local_view(bars, 0))
    tl.store(x_ptr + offs, x)


@triton.jit
def tma_mismatch_kernel(a_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr):
    buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    b0 = tlx.local_view(bar, 0)
    tlx.barrier_expect_bytes(b0, BM * BK * 2)
    tlx.async_descriptor_load(a_desc, tlx.local_view(buf, 0), [0, 0], b0)  # MARK:tma
    tlx.barrier_wait(b0, 0)
    x = tlx.local_load(tlx.local_view(buf, 0))
    tl.store(out_ptr + tl.arange(0, BK), tl.sum(x, axis=0))
