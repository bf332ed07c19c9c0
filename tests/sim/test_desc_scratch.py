"""Descriptors the kernel builds on the device and kernels that take raw addresses from the host.

The wheel's grouped GEMM (blackwell-grouped-gemm_test.py) does both: the host passes a table of
``data_ptr()`` values, the producer encodes TMA descriptors into ``tlx.allocate_tensor_descriptor``
scratch and reads them back with ``tlx.reinterpret_tensor_descriptor``.
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

import tlx_workbench as wb
from tlx_workbench.sim import simulate


@pytest.mark.parametrize("cfg,schedules", [(0, 2), (dict(BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, NUM_SMEM_BUFFERS=3,
                                                         EPILOGUE_SUBTILE=4, NUM_CTAS=2), 1)],
                         ids=["1cta", "2cta-subtile4"])
def test_grouped_gemm_tutorial_matches_torch(tutorial, cfg, schedules):
    mod = tutorial("blackwell-grouped-gemm_test")
    sizes = [256, 128]                       # the host function asks for square problems (A.shape[1] == B.shape[1])
    A = [torch.randn(n, n, dtype=torch.float16) for n in sizes]
    B = [torch.randn(n, n, dtype=torch.float16) for n in sizes]
    res = simulate(mod.group_gemm_tlx_fn, A, B, gpu="B200", schedules=schedules, config=cfg)
    for a, b, c in zip(A, B, res.value):
        torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    assert res.ok, res
    assert res.cluster_dims == ((2, 1, 1) if cfg else (1, 1, 1))


@triton.jit
def _copy_through_scratch(ptrs, out_ptr, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """Row block 0 of the tensor whose address is ptrs[0], copied to out through a descriptor in scratch."""
    x_ptr = tl.load(ptrs).to(tl.pointer_type(tl.float32))
    descs = tlx.allocate_tensor_descriptor(num=2)
    tlx.make_tensor_descriptor(desc_ptr=descs[0], base=x_ptr, shape=[BLOCK, BLOCK], strides=[BLOCK, 1],
                               block_shape=[BLOCK, BLOCK])
    if BUG == "unwritten":
        d = tlx.reinterpret_tensor_descriptor(desc_ptr=descs[1], block_shape=[BLOCK, BLOCK], dtype=tl.float32)
    elif BUG == "shape":
        d = tlx.reinterpret_tensor_descriptor(desc_ptr=descs[0], block_shape=[BLOCK // 2, BLOCK], dtype=tl.float32)
    else:
        d = tlx.reinterpret_tensor_descriptor(desc_ptr=descs[0], block_shape=[BLOCK, BLOCK], dtype=tl.float32)
    buf = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 1)
    bar = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bar[0], BLOCK * BLOCK * 4)
    tlx.async_descriptor_load(d, buf[0], [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    r = tl.arange(0, BLOCK)
    tl.store(out_ptr + r[:, None] * BLOCK + r[None, :], tlx.local_load(buf[0]))


def _run(bug, take_address=True):
    x = torch.randn(16, 16)
    out = torch.zeros(16, 16)
    with simulate(gpu="B200") as sim:
        ptrs = torch.tensor([x.data_ptr() if take_address else 0x1000], dtype=torch.int64)
        _copy_through_scratch[(1,)](ptrs, out, BLOCK=16, BUG=bug)
    return sim.result, x, out


def test_descriptor_written_to_scratch_and_reinterpreted():
    res, x, out = _run("")
    torch.testing.assert_close(out, x)
    assert res.ok, res


@pytest.mark.parametrize("bug,words", [("unwritten", ["slot 1 was never written"]),
                                       ("shape", ["holds a [16, 16]", "[8, 16]"])])
def test_reading_a_descriptor_slot_wrongly_names_the_line(bug, words):
    with pytest.raises(wb.SimulationError) as ei:
        _run(bug)
    e = ei.value
    assert "reinterpret_tensor_descriptor" in e.message and all(w in e.message for w in words), e.message
    assert "tlx.reinterpret_tensor_descriptor(desc_ptr=descs[" in (e.source_line or "")


def test_address_of_no_tensor_is_out_of_bounds_with_a_hint():
    with pytest.raises(wb.SimulationError) as ei:
        _run("", take_address=False)
    e = ei.value
    assert "out-of-bounds load" in e.message and "data_ptr()" in e.hint
    assert "async_descriptor_load" in (e.source_line or "")
