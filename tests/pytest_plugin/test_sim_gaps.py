"""Simulator gaps that TLX's own GPU tests showed (issue 20), each with its test."""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from tlx_workbench import simulate
from tlx_workbench.errors import SimulationError


@triton.jit
def whole_barrier_array_load(in_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr, NBARS: tl.constexpr):
    buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=NBARS, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BM * BK * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bars)      # the whole allocation, as newer TLX allows
    tlx.barrier_wait(bars[0], 0)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BK)
    tl.store(out_ptr + rows[:, None] * BK + cols[None, :], tlx.local_load(buf[0]))


def _inputs():
    x = torch.randn(64, 64, dtype=torch.float16)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[64, 1], block_shape=[64, 64])
    return x, torch.zeros_like(x), desc


def test_one_slot_allocation_passed_whole_is_its_slot_and_said():
    # before: SimulationError "'MBarrierArray' object has no attribute 'array'"
    x, out, desc = _inputs()
    with pytest.warns(UserWarning, match=r"simulated as bars\[0\], as newer TLX reads it"):
        res = simulate(whole_barrier_array_load, desc, out, BM=64, BK=64, NBARS=1, grid=(1,))
    assert res.ok
    assert torch.equal(out, x)


def test_a_several_slot_allocation_passed_whole_names_the_fix():
    x, out, desc = _inputs()
    with pytest.raises(SimulationError, match=r"bars \(2 barriers\) passed where one barrier is expected") as e:
        simulate(whole_barrier_array_load, desc, out, BM=64, BK=64, NBARS=2, grid=(1,))
    assert "bars[i]" in str(e.value)
