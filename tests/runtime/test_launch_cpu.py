"""run() end to end on the CPU (through the worker process), and NoGPUError without a GPU."""
import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.compiler import instrument_rewrite
from tlx_workbench.errors import NoGPUError
from tlx_workbench.runtime import instrument
from tlx_workbench.runtime.launch import infer_tile, poisoned_allocations

HOST_CELL = '''
import torch
def add_half_written(x, y):
    out = torch.empty_like(x)
    out[: x.shape[0] // 2] = x[: x.shape[0] // 2] + y[: x.shape[0] // 2]   # forgets the second half
    return out
def add_right(x, y):
    out = torch.empty_like(x)
    out.copy_(x + y)
    return out
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
@pytest.mark.parametrize("api", ["run", "bench", "profile"])
def test_without_gpu_the_error_points_to_the_simulator(api):
    with pytest.raises(NoGPUError) as ei:
        getattr(wb, api)(torch.add, torch.ones(2), torch.ones(2))
    assert "simulate" in ei.value.hint and "--sim" in ei.value.hint


def test_run_in_worker_poisons_host_allocations_and_maps_unwritten_tiles():
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(256, 64, generator=g), torch.randn(256, 64, generator=g)
    from tlx_workbench.runtime.launch import run
    bad = run(_named("add_half_written"), x, y, source=HOST_CELL, reference=lambda x, y: x + y,
              tile=(64, 64), _allow_cpu=True)
    assert not bad.ok
    c = bad.comparisons[0]
    assert c.unwritten_tiles == [(2, 0), (3, 0)]          # rows 128..255 never written: poisoned
    assert "WRONG" in repr(bad) and "never written" in repr(bad)
    assert "tlxwb-run" in bad._repr_html_()
    with pytest.raises(wb.runtime.WrongResultError, match="wrong result"):
        bad.raise_for_status()
    good = run(_named("add_right"), x, y, source=HOST_CELL, reference=lambda x, y: x + y, _allow_cpu=True)
    assert good.ok and good.comparisons[0].rel_error < 1e-6
    assert torch.equal(good.output, x + y)


def _named(name):
    # the worker finds the function in the shipped source by this name
    f = lambda *a: None  # noqa: E731
    f.__name__ = name
    return f


def test_poisoned_allocations_only_inside():
    with poisoned_allocations():
        assert torch.isnan(torch.empty(3)).all()
        assert (torch.empty_like(torch.zeros(2, dtype=torch.int32)) == 0x5A5A5A5A).all()
    assert torch.empty(0).numel() == 0


def test_infer_tile_from_block_constexprs():
    assert infer_tile({"BM": 128, "BN": 256, "BK": 64}, 2) == (128, 256)
    assert infer_tile({"BLOCK_SIZE": 1024}, 1) == (1024,)
    assert infer_tile({"NUM_STAGES": 3}, 2) is None


def test_instrument_rewrites_tlx_ops_per_task():
    src = '''
@triton.jit
def k(x_ptr, bars, N: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N):
                tlx.barrier_wait(bar=tlx.local_view(bars, 0), phase=i & 1)
                tl.store(x_ptr + i, i)
        with tlx.async_task(num_warps=4, replicate=2):
            tlx.barrier_arrive(tlx.local_view(bars, 0))
'''
    new, sites, tasks = instrument_rewrite.instrument_source(src, first_line=10)
    assert tasks == ["default", "task1"]
    assert [(s.op, s.kind, s.lane_task, s.line) for s in sites] == [
        ("barrier_wait", "wait", "default", 16), ("store", "store", "default", 17),
        ("barrier_arrive", "arrive", "task1", 19)]
    assert new.count("_wb_clock()") == 6 and "tlx.async_task_replica_id()" in new
    assert new.splitlines()[0].startswith("def k(_wb_prof, x_ptr")


def test_decode_builds_a_gpu_trace_per_cta_and_lane():
    import numpy as np
    sites = [instrument_rewrite.EventSite(0, "barrier_wait", "wait", 20, "default", "full"),
             instrument_rewrite.EventSite(1, "async_dot", "mma", 30, "task1")]
    lay = instrument.Layout(grid=2, slots=1, lanes=2 * instrument_rewrite.MAX_REPLICAS, capacity=4)
    buf = instrument.make_buffer(lay, [0]).numpy()
    v = lay.lanes_view(buf)
    hdr = instrument.HEADER
    v[0, 0, hdr:hdr + 3] = (1, 1000, 1400)                     # default task waits 400 cycles
    v[0, instrument_rewrite.MAX_REPLICAS + 1, hdr:hdr + 3] = (2, 1100, 1900)   # task1 replica 1: one wgmma
    for lane in (0, instrument_rewrite.MAX_REPLICAS + 1):
        v[0, lane, :7] = (1, 1, 3, 0, 0, 1000, 2000)          # no globaltimer readings: cycles
    tr = instrument.decode(buf, sites, ["default", "task1"])
    assert tr.source == "gpu" and tr.time_unit == "cycles"
    assert tr.lanes() == [(0, "default", 0), (0, "task1", 1)]
    wait = next(tr.spans_of(kind="wait"))
    assert (wait.start, wait.end, wait.barrier, wait.line) == (0.0, 400.0, "full", 20)
    assert next(tr.spans_of(kind="mma")).duration == 800


def test_timeline_png_of_a_measured_trace(tmp_path):
    from tlx_workbench.runtime.profiling import timeline_png
    from tlx_workbench.trace import Span, Trace
    tr = Trace(time_unit="cycles", source="gpu")
    tr.add_span(Span(0, "default", 0, "tma", 0, 100, name="async_descriptor_load"))
    tr.add_span(Span(0, "task1", 0, "wait", 0, 120, name="barrier_wait"))
    tr.add_span(Span(0, "task1", 0, "mma", 120, 400, name="async_dot"))
    png = timeline_png(tr, str(tmp_path / "t.png"))
    assert png[:4] == b"\x89PNG" and (tmp_path / "t.png").stat().st_size == len(png)


def test_instrumented_ws_gemm_compiles_offline_for_hopper():
    # the clock64 records must not break the compile of a real warp-specialized kernel
    from tlx_workbench.kernels import gemm_ws
    from tlx_workbench.target import offline
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    inst = instrument.instrument(gemm_ws.gemm_ws_coop_kernel, capacity=64, max_ctas=2)
    assert inst.tasks == ["default", "task1"]
    assert {"wait", "tma", "mma", "arrive"} <= {s.kind for s in inst.sites}
    M = N = K = 256
    with offline("sm_90"):
        a, b, c = (torch.empty(M, K, dtype=torch.float16), torch.empty(K, N, dtype=torch.float16),
                   torch.empty(M, N, dtype=torch.float16))
        a_d, b_d, c_d = gemm_ws.make_descriptors(a, b, c, cfg)
        k = inst.kernel.warmup(inst.buffer("cpu"), a_d, b_d, c_d, M, N, K, NUM_SMS=132, grid=(1,),
                               num_warps=4, num_stages=0, **cfg)
    assert "clock64" in k.asm["ptx"]


def test_host_function_outputs_named_are_poisoned_and_checked_in_place():
    cell = ("def add_into(x, y, out):\n"
            "    out[:64] = x[:64] + y[:64]      # the last 64 rows are never written\n")
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(128, 32, generator=g), torch.randn(128, 32, generator=g)
    out = x + y                                   # already right: only poisoning exposes the bug
    from tlx_workbench.runtime.launch import run
    ns = {}
    exec(cell, ns)                                # the notebook's own copy of the function
    r = run(ns["add_into"], x, y, out, source=cell, outputs=("out",), reference=lambda x, y, out: x + y,
            tile=(64, 32), _allow_cpu=True)
    assert not r.ok and r.comparisons[0].name == "out"
    assert r.comparisons[0].unwritten_tiles == [(1, 0)]
    assert torch.isnan(out[64:]).all()            # the worker wrote the caller's own tensor


def test_proton_mode_scopes_and_their_trace_map_back_to_ops():
    from tlx_workbench.runtime.profiling import _trace_from_proton
    src = "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n" \
          "    x = tl.load(x_ptr + offs)\n    tl.store(x_ptr + offs, x + 1)\n"
    new, sites, tasks = instrument_rewrite.instrument_source(src, first_line=1, mode="proton")
    assert "pl.enter_scope('load@4#0')" in new and "pl.exit_scope('store@5#1')" in new
    assert "_wb_prof" not in new
    # what Proton's instrumentation writes: one process per (core, CTA), one thread per warp, µs at 1 GHz
    chrome = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "kernel Core0 CTA0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 1, "args": {"name": "warp 0 (line 0)"}},
        {"ph": "X", "name": "load@4#0", "pid": 0, "tid": 1, "ts": 0.0, "dur": 0.5},
        {"ph": "X", "name": "store@5#1", "pid": 0, "tid": 1, "ts": 0.5, "dur": 0.25}]}
    tr = _trace_from_proton(dict(chrome=chrome, sites=sites, file="k.py"), {"kernel": "k"})
    assert tr.meta["recorder"] == "proton" and tr.time_unit == "cycles"
    assert [(s.name, s.kind, s.line) for s in tr.spans] == [("load", "load", 4), ("store", "store", 5)]
    assert [s.duration for s in tr.spans] == [500.0, 250.0]
