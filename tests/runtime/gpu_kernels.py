"""Small TLX kernels for the GPU tests of the runtime (importable by the watchdog worker)."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def ws_add(x_ptr, y_ptr, z_ptr, a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
        with tlx.async_task(num_warps=4):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)


def ws_add_host(x, y, a, b, BLOCK=1024):
    z, c = torch.empty_like(x), torch.empty_like(a)
    n = x.numel()
    ws_add[(triton.cdiv(n, BLOCK),)](x, y, z, a, b, c, n, BLOCK=BLOCK)
    return z, c


@triton.jit
def handshake(out_ptr, ARRIVE_COUNT: tl.constexpr):
    """The consumer waits for ARRIVE_COUNT arrivals; only one comes. ARRIVE_COUNT=2 hangs forever."""
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=ARRIVE_COUNT)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(tlx.local_view(bars, 0), 0)
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=4):
            tlx.barrier_arrive(tlx.local_view(bars, 0))


@triton.jit
def plain_add(x_ptr, y_ptr, z_ptr, n, BLOCK: tl.constexpr):
    """No async tasks: the kind of kernel Proton's instrumentation handles."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(z_ptr + offs, x + y, mask=m)
