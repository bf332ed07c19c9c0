"""The per-task shares that trace_compare puts side by side, pinned on real kernels: what a simulated
trace counts as barrier wait, async wait and busy (spans by op name; satisfied waits count; a simulated
async_dot span is the tensor core's time and overlaps the wait for it), that only waits both sides time
count, and the recorder's per-site totals (``totals=True``, the near-plain GPU measurement) read back
and compared by the same definitions: its instrumented copy runs on the simulator, sim_clocks giving
the clock registers a meaning, through profile's own worker job."""
import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench._torch_cpu import CudaOnCpu
from tlx_workbench.compiler import instrument_rewrite
from tlx_workbench.errors import GPUError
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.kernels._common import torch_alloc
from tlx_workbench.runtime import instrument, profiling
from tlx_workbench.sim.api import Simulation
from tlx_workbench.target import gpu_model
from tlx_workbench.trace import Span, Trace


def _kernel_line(helper: str, statement: str, nth: int = 0) -> int:
    """The gemm_ws source line of ``statement`` (its ``nth`` occurrence) in the ``@triton.jit`` helper ``helper``."""
    import inspect
    lines, first = inspect.getsourcelines(getattr(gemm_ws, helper).fn)
    return [first + i for i, t in enumerate(lines) if t.strip().startswith(statement)][nth]
from tlx_workbench.trace_compare import ASYNC_WAITS, BARRIER_WAITS, compare, shares

from sim_clocks import sim_clocks

CFG = gemm_ws.SIM_CONFIGS["split_wait0"]        # the 4096^3 default's protocol: per-half full barriers, drain every step
SHAPE = (256, 64, 96)                           # 2 tiles of 128x64, 3 k-steps of 32
STEPS = 3


def _operands(seed=0):
    g = torch.Generator().manual_seed(seed)
    M, N, K = SHAPE
    return (torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half(),
            torch.empty(M, N, dtype=torch.float16))


@pytest.fixture(scope="module")
def sim_trace():
    a, b, c = _operands(int(torch.randint(0, 2**31, ()).item()))
    triton.set_allocator(torch_alloc)
    args, options = gemm_ws._kernel_call(a, b, c, CFG, 1)
    res = wb.simulate(gemm_ws.gemm_ws_coop_kernel, *args, grid=(1,), gpu="H200", **options)
    assert res.ok, res
    return res.trace


def test_simulated_shares_are_wait_spans_by_op_over_the_lanes_extent(sim_trace):
    lanes = {(l.task, l.replica): l for l in shares(sim_trace)}
    assert set(lanes) == {("default", 0), ("task1", 0), ("task1", 1)}
    for (task, rep), lane in lanes.items():
        spans = list(sim_trace.spans_of(cta=0, task=task, replica=rep))
        ext = max(s.end for s in spans) - min(s.start for s in spans)
        bar = sum(s.duration for s in spans if s.name in BARRIER_WAITS)
        asy = sum(s.duration for s in spans if s.name in ASYNC_WAITS)
        assert lane.extent == pytest.approx(ext)
        assert lane.barrier_wait == pytest.approx(bar / ext) and lane.async_wait == pytest.approx(asy / ext)
        assert 0 < lane.wait <= 1
    loader, consumer = lanes[("default", 0)], lanes[("task1", 0)]
    # the loader waits for free slots only; every wait counts, satisfied ones at their cost too
    empty_wait = f"barrier_wait@{_kernel_line('_load_steps', 'tlx.barrier_wait(empty[s], parity ^ 1)')}"
    assert set(loader.waits) == {empty_wait} and loader.async_wait == 0
    assert loader.waits[empty_wait]["count"] == 2 * STEPS
    assert {w["op"] for w in consumer.waits.values()} == {"barrier_wait", "async_dot_wait",
                                                          "async_descriptor_store_wait"}
    full = [w for w in consumer.waits.values() if w["op"] == "barrier_wait"]
    assert sorted(w["count"] for w in full) == [2 * STEPS, 2 * STEPS]       # full_a and full_b, every k-step
    assert all(w["time"] >= w["count"] * 1 for w in full)                  # none is free, satisfied or not
    # the simulated wgmma runs on the tensor core while its group waits for it: counted once, as the wait
    dots = [s for s in sim_trace.spans_of(cta=0, task="task1", replica=0) if s.name == "async_dot"]
    dot_waits = [s for s in sim_trace.spans_of(cta=0, task="task1", replica=0) if s.name == "async_dot_wait"]
    assert len(dots) == len(dot_waits) == 2 * STEPS
    assert all(any(w.start < d.end and d.start < w.end for w in dot_waits) for d in dots)
    spans = list(sim_trace.spans_of(cta=0, task="task1", replica=0))
    # the group's own ops follow one another (the async_dot's issue is busy time between them, no span); the
    # wgmma overlaps them (its issue and the wait for it, above), so it is never counted as the group's time
    assert sum(s.duration for s in spans if s.kind != "mma") <= consumer.extent + 1e-6
    assert consumer.wait < 1


def test_a_trace_against_itself_agrees_to_the_point(sim_trace):
    ns = 1 / sim_trace.meta["clock_ghz"]
    same = Trace([Span(**{**s.__dict__, "start": s.start * ns, "end": s.end * ns}) for s in sim_trace.spans],
                 time_unit="ns", source="gpu")
    cmp = compare(sim_trace, same)
    assert cmp.notes == [] and cmp.within(0.01)
    for t in cmp.tasks:
        assert t.wait_error == pytest.approx(0, abs=1e-9) and t.barrier_wait_error == pytest.approx(0, abs=1e-9)
        assert t.sim_waits.keys() == t.measured_waits.keys()
        for k, w in t.sim_waits.items():
            assert w["count"] == t.measured_waits[k]["count"] and w["ns"] == pytest.approx(t.measured_waits[k]["ns"])


def test_a_wait_one_side_does_not_time_counts_on_neither(sim_trace):
    # the recorder before store waits were timed: the same run without them
    old = Trace([s for s in sim_trace.spans if s.name != "async_descriptor_store_wait"], time_unit="cycles",
                source="gpu", meta={"sm_clock_ghz": sim_trace.meta["clock_ghz"]})
    cmp = compare(sim_trace, old)
    assert cmp.notes == ["waits only the simulated trace times, left out of both sides' shares: "
                         "async_descriptor_store_wait"]
    for t in cmp.tasks:          # the same wait sites and times on both sides (the extents end at the last span)
        assert t.sim_waits.keys() == t.measured_waits.keys()
        assert not any(k.startswith("async_descriptor_store_wait") for k in t.sim_waits)
        for k, w in t.sim_waits.items():
            assert w["ns"] == pytest.approx(t.measured_waits[k]["ns"])
    # told outright which ops it times (a measured trace's meta), absent spans are zero-time waits, not unknowns
    told = Trace(list(old.spans), time_unit="cycles", source="gpu",
                 meta={"sm_clock_ghz": sim_trace.meta["clock_ghz"],
                       "timed_ops": sorted(instrument_rewrite.op_set("waits"))})
    cmp = compare(sim_trace, told)
    assert cmp.notes[0].startswith("waits only the measured trace times")
    assert cmp.task("task1").async_wait_error > 0          # the store waits now count on both sides


def _profile_totals_on_sim(a, b, c, **kw):
    """profile's worker job with totals=True, run here on the simulator (what shares_h200.py runs on the GPU)."""
    with sim_clocks(ghz=1.6), Simulation(gpu="H200"), CudaOnCpu(gpu_model("H200")):
        r = profiling.profile_job(("pickle", gemm_ws.launch), (a, b, c, CFG), {"num_sms": 1}, None, None, 4,
                                  "gemm_ws_coop_kernel", "clock", ctas=[0], overhead=False, **kw)
    return r, profiling.trace_from_records(r, {"kernel": "gemm_ws_coop_kernel"})


def test_totals_keep_each_wait_sites_count_and_time_and_compare_by_the_same_definitions(sim_trace):
    a, b, c = _operands(3)
    r, tr = _profile_totals_on_sim(a, b, c, ops="waits", totals=True)
    assert r["totals"] and not tr.spans and tr.meta["recorder"] == "clock64 totals"
    assert "per-site totals of async_descriptor_store_wait, async_dot_wait, barrier_wait for 3 lanes" in repr(tr)
    assert set(tr.meta["timed_ops"]) <= set(instrument_rewrite.op_set("waits"))
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3        # the atomics leave the result alone
    lanes = {(l.task, l.replica): l for l in shares(tr)}
    assert set(lanes) == {("default", 0), ("task1", 0), ("task1", 1)}
    empty_wait = f"barrier_wait@{_kernel_line('_load_steps', 'tlx.barrier_wait(empty[s], parity ^ 1)')}"
    assert lanes[("default", 0)].waits[empty_wait]["count"] == 2 * STEPS
    for rep in (0, 1):
        lane = lanes[("task1", rep)]
        assert sorted(w["count"] for w in lane.waits.values() if w["op"] == "barrier_wait") == [2 * STEPS] * 2
        assert sum(w["count"] for w in lane.waits.values() if w["op"] == "async_dot_wait") == 2 * STEPS
        assert all(0 < w["max"] <= w["time"] for w in lane.waits.values())
        assert 0 < lane.wait <= 1
    cmp = compare(sim_trace, tr)
    assert [t.task for t in cmp.tasks] == ["default", "task1"] and cmp.notes == []
    assert cmp.sim_ns > 0 and cmp.measured_ns > 0
    # and a buffer whose counts do not add up to the events its lanes timed is an error, not a share
    buf = r["buf"].copy()
    lay = instrument.Layout.read(buf)
    lay.lanes_view(buf)[0, 0, instrument.HEADER] += 128          # as if every thread of the loader had added
    with pytest.raises(GPUError, match="per-site counts add up to"):
        instrument.decode_totals(buf, r["sites"], r["tasks"])


def test_waits_only_recorder_times_nothing_else():
    inst = instrument.instrument(gemm_ws.gemm_ws_coop_kernel, ops="waits")
    assert {s.op for s in inst.sites} <= set(instrument_rewrite.WAIT_OPS) and {s.kind for s in inst.sites} == {"wait"}
    with pytest.raises(ValueError, match="not ops the recorder times"):
        instrument.instrument(gemm_ws.gemm_ws_coop_kernel, ops=["barrier_wiat"])
