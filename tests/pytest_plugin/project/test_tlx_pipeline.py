"""TLX kernels as a project tests them on a GPU: a TMA pipeline, and the bugs a GPU would hang on."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

BM, BK = 64, 64


@triton.jit
def copy_pipeline(in_desc, out_ptr, N_TILES, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
                  DROP_ARRIVE: tl.constexpr):
    bufs = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
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
                x = tlx.local_load(bufs[s])
                if not DROP_ARRIVE:
                    tlx.barrier_arrive(empty[s])
                tl.store(out_ptr + (i * BM + rows)[:, None] * BK + cols[None, :], x)


def _copy(n_tiles, drop_arrive=False):
    x = torch.randn(n_tiles * BM, BK, dtype=torch.float16, device="cuda")
    out = torch.zeros_like(x)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
    kernel = copy_pipeline[(1,)](desc, out, n_tiles, BM=BM, BK=BK, STAGES=2, DROP_ARRIVE=drop_arrive)
    return x, out, kernel


def test_pipeline_copies():
    x, out, kernel = _copy(4)
    torch.testing.assert_close(out, x)
    assert "ttng.async_tma_copy_global_to_local" in kernel.asm["ttgir"]


def test_pipeline_dropped_arrive():
    # the consumer never releases a stage: on a GPU this hangs the job
    x, out, _ = _copy(4, drop_arrive=True)
    torch.testing.assert_close(out, x)
