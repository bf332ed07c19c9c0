"""TLX kernels typed into %%tlx cells by the tests (as text: the magic runs them)."""

HEAD = '''import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor
'''

# one mbarrier: the consumer waits until ARRIVE_COUNT arrivals came; one producer arrives once
HANDSHAKE = HEAD + '''
@triton.jit
def handshake(out_ptr, ARRIVE_COUNT: tl.constexpr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=ARRIVE_COUNT)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(tlx.local_view(bars, 0), 0)
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=4):
            tlx.barrier_arrive(tlx.local_view(bars, 0))
'''

# each task waits first for the other's arrival: both are stuck at their first instruction
CROSSED = HEAD + '''
@triton.jit
def crossed(out_ptr):
    ping = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    pong = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(tlx.local_view(pong, 0), 0)
            tlx.barrier_arrive(tlx.local_view(ping, 0))
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(tlx.local_view(ping, 0), 0)
            tlx.barrier_arrive(tlx.local_view(pong, 0))
            tl.store(out_ptr, 1.0)
'''

# a TMA pipeline whose host code builds the input, the descriptor and the grid from BM
TMA_RELU = HEAD + '''
@triton.jit
def relu_scale(in_desc, out_ptr, N_TILES, scale, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
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
                x = tlx.local_load(bufs[s]).to(tl.float32)
                tlx.barrier_arrive(empty[s])
                y = tl.maximum(x, 0.0) * scale
                tl.store(out_ptr + (i * BM + rows)[:, None] * BK + cols[None, :], y.to(tl.float16))

N_TILES, BM, BK = 4, 32, 64
x = torch.randn(N_TILES * BM, BK, dtype=torch.float16, generator=torch.Generator().manual_seed(3))
out = torch.empty_like(x)
desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
relu_scale[(1,)](desc, out, N_TILES, 0.5, BM=BM, BK=BK, STAGES=2)
'''
TMA_REF = '--ref "lambda d, out, n, scale: (torch.relu(x.float()) * scale).half()" --outputs out'

# a plain kernel: one program writes x + 1 for BLOCK elements
ADD_ONE = HEAD + '''
@triton.jit
def add_one(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1)
'''

# a Blackwell tensor-memory accumulator, compiled for Hopper
TMEM_ON_HOPPER = HEAD + '''
@triton.jit
def tmem_k(out_ptr, BM: tl.constexpr, BN: tl.constexpr):
    acc = tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem)
    v = tlx.local_load(acc[0])
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + offs, v)

tmem_k[(1,)](z, BM=128, BN=64)
'''


def line_of(cell_text: str, needle: str, magic_line: bool = True) -> int:
    """The line of ``needle`` as the notebook editor numbers the cell (the %%tlx line is line 1)."""
    lines = cell_text.splitlines()
    i = next(i for i, t in enumerate(lines, 1) if needle in t)
    return i + 1 if magic_line else i
