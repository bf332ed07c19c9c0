"""simulate(): trace and cost model, determinism, CTA subsets, bad input."""
import json
import pathlib
import sys

import pytest
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb
from tlx_workbench.sim import simulate

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import sim_seeded_kernels as sk  # noqa: E402

BM, BK = 64, 32


def _copy(seed=0, n_tiles=4, gpu="H100", **kw):
    torch.manual_seed(1)
    x = torch.randn(n_tiles * BM, BK, dtype=torch.float16)
    out = torch.zeros_like(x)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
    res = simulate(sk.copy_pipeline, desc, out, n_tiles, BM=BM, BK=BK, STAGES=2, BUG="", grid=(1,), seed=seed,
                   gpu=gpu, **kw)
    return res, x, out


def test_trace_has_spans_and_barrier_events_with_source_lines():
    res, x, out = _copy()
    assert torch.equal(out, x)
    tr = res.trace
    assert tr.time_unit == "cycles" and tr.duration > 0
    kinds = {s.kind for s in tr.spans}
    assert {"tma", "wait", "arrive", "load", "store"} <= kinds
    waits = [s for s in tr.spans if s.kind == "wait" and s.barrier == "full"]
    assert waits and all(s.line and s.slot in (0, 1) and s.phase in (0, 1) for s in waits)
    ev = {e.kind for e in tr.barrier_events}
    assert {"init", "expect", "arrive", "tx", "flip", "wait_begin", "wait_end"} <= ev
    # a TMA load takes at least the modelled latency before its bytes land
    tx = [e for e in tr.barrier_events if e.kind == "tx"]
    assert all(e.bytes == BM * BK * 2 for e in tx)
    tma = [s for s in tr.spans if s.kind == "tma"]
    assert min(e.time for e in tx) >= min(s.start for s in tma) + 500
    assert tr.flows()


def test_same_seed_same_trace_byte_for_byte_and_seeds_differ():
    a = json.dumps(_copy(seed=5)[0].trace.to_chrome(), sort_keys=True)
    b = json.dumps(_copy(seed=5)[0].trace.to_chrome(), sort_keys=True)
    assert a == b
    others = {json.dumps(_copy(seed=s)[0].trace.to_chrome(), sort_keys=True) for s in range(6)}
    assert len(others) > 1


def test_h200_streams_faster_than_h100():
    h100 = _copy(gpu="H100", n_tiles=6)[0].cycles
    h200 = _copy(gpu="H200", n_tiles=6)[0].cycles
    assert h200 < h100


def test_ctas_subset_warns_and_computes_only_those(tutorial):
    mod = tutorial("hopper_gemm_ws")
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 256, dtype=torch.float16)
    with pytest.warns(UserWarning, match="only 1 of 4 CTAs"):
        res = simulate(mod.matmul, a, b, ctas=[0])
    assert res.partial and res.ctas == [0] and "PARTIAL" in repr(res)
    c, ref = res.value.float(), a.float() @ b.float()
    # with GROUP_SIZE_M=8 program 0 computes the tile at rows 0..127, columns 0..127
    torch.testing.assert_close(c[:128, :128], ref[:128, :128], atol=2e-2, rtol=1e-2)


@triton.jit
def _oob_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)        # no mask: runs past n


@triton.jit
def _unsupported_kernel(x_ptr):
    import triton.language.extra.tlx as tlx
    tl.store(x_ptr, tlx.clock64().to(tl.float32))


def test_out_of_bounds_access_is_one_clear_error():
    x = torch.zeros(100)
    with pytest.raises(wb.SimulationError) as ei:
        simulate(_oob_kernel, x, 100, BLOCK=128, grid=(1,))
    e = ei.value
    assert "out-of-bounds" in e.message and e.line is not None
    assert "tl.load" in (e.source_line or "") or "tl.store" in (e.source_line or "")


def test_wrong_launch_arguments_name_the_kernel():
    with pytest.raises(wb.SimulationError, match="_oob_kernel"):
        simulate(_oob_kernel, torch.zeros(4), grid=(1,))


def test_unsupported_op_names_the_op_and_line(monkeypatch):
    from tlx_workbench.sim.ops import tlx_ops
    # every TLX op is modelled today: an op listed as not modelled stands for the next new one
    monkeypatch.setattr(tlx_ops, "UNSUPPORTED", {"clock64"})
    with pytest.raises(wb.SimulationError) as ei:
        simulate(_unsupported_kernel, torch.zeros(4), grid=(1,))
    assert "tlx.clock64" in ei.value.message and "does not model" in ei.value.message
    assert ei.value.line is not None


def test_top_level_package_exports_simulate():
    assert wb.simulate is simulate
    assert wb.SimResult.__name__ == "SimResult"


@pytest.mark.parametrize("bug", ["", "arrive_count"])
def test_greenlet_and_thread_tasks_give_the_same_run(monkeypatch, bug):
    # tasks run as greenlets when the package is there, as threads otherwise: the seeded choices are the
    # same code, so trace, outputs and the deadlock report must not depend on the mechanism
    pytest.importorskip("greenlet")
    runs = []
    for threads in ("1", "0"):
        monkeypatch.setenv("TLXWB_SIM_THREADS", threads)
        torch.manual_seed(1)
        x = torch.randn(4 * BM, BK, dtype=torch.float16)
        out = torch.zeros_like(x)
        desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
        res = simulate(sk.copy_pipeline, desc, out, 4, BM=BM, BK=BK, STAGES=2, BUG=bug, grid=(1,), seed=7,
                       on_deadlock="return")
        runs.append((json.dumps(res.trace.to_chrome(), sort_keys=True), out.clone(),
                     res.deadlock.text() if res.deadlock else None))
    (t_trace, t_out, t_dead), (g_trace, g_out, g_dead) = runs
    assert t_trace == g_trace
    assert torch.equal(t_out, g_out)
    assert t_dead == g_dead
    assert (t_dead is not None) == (bug != "")
