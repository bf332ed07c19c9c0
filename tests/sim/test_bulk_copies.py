"""TMA store-reduce, ``tlx.async_store`` and bulk ``tlx.async_load`` on the simulator, against torch.

The installed compiler builds the TMA store-reduce for sm_90 and sm_100 (``cp.reduce.async.bulk.tensor``) and
refuses what its verifier refuses (e.g. ``max`` on fp32), as the simulator does. It refuses ``async_store``
("'ttng.async_store' is not registered in this Triton build"): those kernels are simulate-only here.
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from tlx_workbench.errors import SimulationError
from tlx_workbench.sim import simulate


@triton.jit
def _reduce_splits(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, OP: tl.constexpr,
                   BUG: tl.constexpr = ""):
    """y <OP>= x[k] for each split k (program axis 2), one TMA store-reduce per tile and split."""
    pm, pn, pk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    x_in = tl.make_tensor_descriptor(x_ptr + pk * M * N, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    y_out = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    buf = tlx.local_alloc((BM, BN), tlx.dtype_of(x_ptr), 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], BM * BN * tlx.size_of(tlx.dtype_of(x_ptr)))
    tlx.async_descriptor_load(x_in, buf[0], [pm * BM, pn * BN], bars[0])
    tlx.barrier_wait(bars[0], 0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(y_out, buf[0], [pm * BM, pn * BN], store_reduce=OP)
    if BUG == "no_wait":
        tlx.local_store(buf[0], tl.zeros((BM, BN), tlx.dtype_of(x_ptr)))   # BUG: the reduce may still read buf
    tlx.async_descriptor_store_wait(0)
    if BUG == "":
        tlx.local_store(buf[0], tl.zeros((BM, BN), tlx.dtype_of(x_ptr)))   # after the wait: the source is free


_TORCH_OP = {"add": lambda y, x: y + x.sum(0), "min": lambda y, x: torch.minimum(y, x.amin(0)),
             "max": lambda y, x: torch.maximum(y, x.amax(0))}


@pytest.mark.parametrize("gpu", ["H200", "B200"])
@pytest.mark.parametrize("op,dtype", [("add", torch.float32), ("add", torch.int32), ("add", torch.bfloat16),
                                      ("min", torch.int32), ("max", torch.float16), ("min", torch.bfloat16)])
def test_tma_store_reduce_matches_torch(op, dtype, gpu):
    M, N, S = 100, 96, 3                     # ragged: the last row tile is partly out of bounds
    if dtype.is_floating_point:
        x = torch.randn(S, M, N).to(dtype)
        y = torch.randn(M, N).to(dtype)
    else:
        x = torch.randint(-50, 50, (S, M, N), dtype=dtype)
        y = torch.randint(-50, 50, (M, N), dtype=dtype)
    want = y.clone()
    for k in range(S):                      # the splits reduce one after another, each rounded to dtype
        want = _TORCH_OP[op](want.float(), x[k:k + 1].float()).to(dtype) if dtype.is_floating_point \
            else _TORCH_OP[op](want, x[k:k + 1])
    res = simulate(_reduce_splits, x, y, M, N, BM=64, BN=32, OP=op, grid=(2, 3, S), gpu=gpu)
    assert res.ok, res
    if op == "add" and dtype.is_floating_point:
        # three splits, summed in the schedule's order: rounding may differ from torch's left-to-right order
        tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2}[dtype]
        torch.testing.assert_close(y.float(), want.float(), atol=tol * 4, rtol=tol)
    else:
        assert torch.equal(y, want)
    spans = [s for s in res.trace.spans if s.name == f"async_descriptor_store ({op})"]
    assert len(spans) == 2 * 3 * S and all(s.kind == "store" and s.args["reduce"] == op for s in spans)
    assert sum(s.name == "async_descriptor_store_wait" for s in res.trace.spans) == 2 * 3 * S


def test_tma_store_reduce_source_overwritten_before_its_wait_is_a_race():
    x = torch.randn(1, 64, 32)
    y = torch.zeros(64, 32)
    res = simulate(_reduce_splits, x, y, 64, 32, BM=64, BN=32, OP="add", BUG="no_wait", grid=(1, 1, 1), gpu="H200")
    races = [f for f in res.races if "buf[0]" in f.message]
    assert races, res.findings
    assert "async_descriptor_store (add)" in races[0].message


def test_tma_store_reduce_kind_the_compiler_refuses_is_refused_with_its_words():
    x = torch.randn(1, 64, 32)
    y = torch.zeros(64, 32)
    with pytest.raises(SimulationError, match="unsupported reduce kind max for element type fp32"):
        simulate(_reduce_splits, x, y, 64, 32, BM=64, BN=32, OP="max", grid=(1, 1, 1), gpu="B200")


@triton.jit
def _bulk_roundtrip(x_ptr, y_ptr, N: tl.constexpr, NBYTES: tl.constexpr, BUG: tl.constexpr = ""):
    """NBYTES of row pid of x into SMEM by one bulk copy, doubled there, and out to row pid of y by another."""
    pid = tl.program_id(0)
    buf = tlx.local_alloc((N,), tlx.dtype_of(x_ptr), 2)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], NBYTES + (16 if BUG == "bytes" else 0))
    tlx.async_load(x_ptr + pid * N, buf[0], bulk=True, bulk_size=NBYTES, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)
    v = tlx.local_load(buf[0])
    tlx.local_store(buf[1], v * 2)
    tlx.fence("async_shared")
    tlx.async_store(y_ptr + pid * N, buf[1], NBYTES)
    if BUG == "no_wait":
        tlx.local_store(buf[1], v)                      # BUG: the bulk store may still read buf[1]
    tlx.async_descriptor_store_wait(0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_bulk_async_load_and_async_store_copy_the_bytes_asked(dtype):
    rows, N = 3, 128
    nbytes = 96 * dtype.itemsize             # a prefix of each row: the rest of y stays as it was
    x = torch.randn(rows, N).to(dtype)
    y = torch.randn(rows, N).to(dtype)
    want = y.clone()
    want[:, :96] = x[:, :96] * 2
    res = simulate(_bulk_roundtrip, x, y, N=N, NBYTES=nbytes, grid=(rows,), gpu="H200")
    assert not res.errors and res.deadlock is None, res
    # the tail of each row is left as it was on purpose, and said (sim/diagnosis/outputs.py)
    assert [f.kind for f in res.warnings] == ["unwritten-output"] and "cols 96-127" in res.warnings[0].message
    assert torch.equal(y, want)
    loads = [s for s in res.trace.spans if s.name == "async_load (bulk)"]
    assert len(loads) == rows and all(s.kind == "tma" and s.args["bytes"] == nbytes for s in loads)
    # the bytes land on the barrier as transaction bytes, as a TMA load's do
    assert sum(e.kind == "tx" and e.barrier == "bars" for e in res.trace.barrier_events) == rows
    assert sum(s.name == "async_store" and s.kind == "store" for s in res.trace.spans) == rows


def test_bulk_load_bytes_announced_wrong_deadlocks():
    x, y = torch.randn(1, 64), torch.zeros(1, 64)
    res = simulate(_bulk_roundtrip, x, y, N=64, NBYTES=256, BUG="bytes", grid=(1,), gpu="H200", on_deadlock="return")
    assert res.deadlock is not None
    assert "bars" in str(res.deadlock)


def test_async_store_source_overwritten_before_its_wait_is_a_race():
    x, y = torch.randn(1, 64), torch.zeros(1, 64)
    res = simulate(_bulk_roundtrip, x, y, N=64, NBYTES=256, BUG="no_wait", grid=(1,), gpu="H200")
    races = [f for f in res.races if "buf[1]" in f.message]
    assert races and "async_store" in races[0].message, res.findings


@triton.jit
def _bulk_misaligned(x_ptr, y_ptr, N: tl.constexpr):
    buf = tlx.local_alloc((N,), tl.float32, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 60)
    tlx.async_load(x_ptr + 1, buf[0], bulk=True, bulk_size=60, barrier=bars[0])
    tlx.barrier_wait(bars[0], 0)


def test_bulk_copy_needs_16_byte_alignment():
    with pytest.raises(SimulationError, match="16-byte aligned"):
        simulate(_bulk_misaligned, torch.randn(64), torch.zeros(64), N=64, grid=(1,), gpu="H200")
