"""A TMA load into shared memory whose reader forgets to wait for it: the read races the load's bytes."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def copy_tile(x_desc, y_ptr, BM: tl.constexpr, BN: tl.constexpr, WAIT: tl.constexpr):
    buf = tlx.local_alloc((BM, BN), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], BM * BN * 2)
    tlx.async_descriptor_load(x_desc, buf[0], [0, 0], bar[0])
    if WAIT:
        tlx.barrier_wait(bar[0], 0)
    tile = tlx.local_load(buf[0])
    rows = tl.arange(0, BM)[:, None]
    cols = tl.arange(0, BN)[None, :]
    tl.store(y_ptr + rows * BN + cols, tile)
    if not WAIT:
        tlx.barrier_wait(bar[0], 0)


if __name__ == "__main__":
    x = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    y = torch.zeros_like(x)
    desc = TensorDescriptor(x, shape=[64, 64], strides=[64, 1], block_shape=[64, 64])
    copy_tile[(1,)](desc, y, BM=64, BN=64, WAIT=False)
    print("copied", bool(torch.equal(x, y)))
