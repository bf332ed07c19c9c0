"""Kernels written for a newer TLX than the one installed, and an op the installed compiler crashes on."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def one_slot_load(in_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr):
    buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BM * BK * 2)
    # newer TLX takes the whole one-barrier allocation here; the installed compiler refuses it
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bars)
    tlx.barrier_wait(bars[0], 0)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BK)
    tl.store(out_ptr + rows[:, None] * BK + cols[None, :], tlx.local_load(buf[0]))


def _one_slot():
    x = torch.randn(64, 64, dtype=torch.float16, device="cuda")
    out = torch.zeros_like(x)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[64, 1], block_shape=[64, 64])
    kernel = one_slot_load[(1,)](desc, out, BM=64, BK=64)
    return x, out, kernel


def test_one_slot_barrier_values():
    x, out, _ = _one_slot()
    torch.testing.assert_close(out, x)


def test_one_slot_barrier_ir():
    _, _, kernel = _one_slot()
    assert "ttng.async_tma_copy_global_to_local" in kernel.asm["ttgir"]


@triton.jit
def ballot(x_ptr, out_ptr):
    offs = tl.arange(0, 32)
    votes = tlx.vote_ballot_sync(0xFFFFFFFF, tl.load(x_ptr + offs) > 0)
    tl.store(out_ptr + offs, votes)


def test_ballot():
    x = torch.randn(32, device="cuda")
    out = torch.zeros(32, dtype=torch.int32, device="cuda")
    ballot[(1,)](x, out, num_warps=1)
    bits = sum(1 << i for i in range(32) if x[i] > 0)
    assert int(out[0]) & 0xFFFFFFFF == bits
