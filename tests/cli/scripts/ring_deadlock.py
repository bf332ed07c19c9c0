"""A two-slot TMA ring: the producer loads tiles of x, the consumer scales them. With --forget-release the
consumer never frees a slot, so the producer waits for the third tile forever: a deadlock."""
import sys

import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def scale_ring(x_desc, y_ptr, alpha, N_TILES, BM: tl.constexpr, BN: tl.constexpr, FORGET_RELEASE: tl.constexpr):
    slots = tlx.local_alloc((BM, BN), tl.float16, 2)
    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for t in range(N_TILES):
                s = t % 2
                tlx.barrier_wait(empty[s], ((t // 2) & 1) ^ 1)
                tlx.barrier_expect_bytes(full[s], BM * BN * 2)
                tlx.async_descriptor_load(x_desc, slots[s], [t * BM, 0], full[s])
        with tlx.async_task(num_warps=4):
            rows = tl.arange(0, BM)[:, None]
            cols = tl.arange(0, BN)[None, :]
            for t in range(N_TILES):
                s = t % 2
                tlx.barrier_wait(full[s], (t // 2) & 1)
                tile = tlx.local_load(slots[s])
                if not FORGET_RELEASE:
                    tlx.barrier_arrive(empty[s])
                tl.store(y_ptr + (t * BM + rows) * BN + cols, (tile.to(tl.float32) * alpha).to(tl.float16))


def scale(x, alpha, forget_release=False, bm=64, bn=64):
    y = torch.empty_like(x)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[bn, 1], block_shape=[bm, bn])
    scale_ring[(1,)](desc, y, alpha, x.shape[0] // bm, BM=bm, BN=bn, FORGET_RELEASE=forget_release)
    return y


if __name__ == "__main__":
    x = torch.randn(5 * 64, 64, device="cuda", dtype=torch.float16)
    y = scale(x, 0.5, forget_release="--forget-release" in sys.argv)
    torch.testing.assert_close(y, (x.float() * 0.5).half())
    print("scaled 5 tiles")
