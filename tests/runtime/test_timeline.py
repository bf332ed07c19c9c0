"""Whole-kernel measured timelines, on the CPU: the recorder's counting launch sizes its buffers so that
every event of every selected CTA is kept, CTA selection (first, last, by SM), circular and small buffers
saying what they dropped, and the decoding to ns at each CTA's own SM clock. The instrumented kernels run
on the simulator (which runs the rewritten source: real event counts); sim_clocks gives the PTX clock
registers a meaning there."""
import json
import re

import numpy as np
import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench._torch_cpu import CudaOnCpu
from tlx_workbench.compiler import instrument_rewrite
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.kernels._common import torch_alloc
from tlx_workbench.runtime import instrument, profiling
from tlx_workbench.sim.api import Simulation
from tlx_workbench.target import gpu_model
from tlx_workbench.trace import Trace

from sim_clocks import sim_clocks

CFG = gemm_ws.SIM_CONFIGS["two_strips"]        # 3 TMA loads per k-step, one wgmma per consumer group
SHAPE = (200, 136, 72)                         # ragged: 2x3 tiles of 128x64, 3 k-steps of 32


def _operands(seed):
    g = torch.Generator().manual_seed(seed)
    M, N, K = SHAPE
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    return a, b, torch.full((M, N), float("nan"), dtype=torch.float16)


def _profile_on_sim(a, b, c, **kw):
    """profile's worker job, run here on the simulator: counting launch, recording launch."""
    with sim_clocks(ghz=1.6), Simulation(gpu="H200"), CudaOnCpu(gpu_model("H200")):
        r = profiling.profile_job(("pickle", gemm_ws.launch), (a, b, c, CFG), {"num_sms": 2}, None,
                                  kw.pop("capacity", None), 4, "gemm_ws_coop_kernel", "clock", overhead=False, **kw)
    return r, profiling.trace_from_records(r, {"kernel": "gemm_ws_coop_kernel"})


def _tiles(cta, grid):
    M, N, _ = SHAPE
    tiles = triton.cdiv(M, CFG["BM"]) * triton.cdiv(N, CFG["BN"])
    return len(range(cta, tiles, grid))


def _names(tr, lane):
    return [(s.name, s.line) for s in sorted(tr.spans_of(*lane), key=lambda s: s.start)]


@pytest.fixture(scope="module")
def full_run():
    a, b, c = _operands(int(torch.randint(0, 2**31, ()).item()))
    r, tr = _profile_on_sim(a, b, c, ctas={"first": 1, "last": 1})
    return a, b, c, r, tr


def test_every_event_of_every_selected_cta_is_recorded(full_run):
    a, b, c, r, tr = full_run
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3       # both launches still compute the product
    grid = r["grid_ctas"]
    assert grid == 2 and tr.meta["selected_ctas"] == [0, 1]
    assert tr.meta["events"] == {"recorded": len(tr.spans), "dropped_early": 0, "dropped_late": 0}
    assert "every event of 2 CTAs recorded" in repr(tr)
    ksteps = triton.cdiv(SHAPE[2], CFG["BK"])
    counted = {e["cta"]: e["events"] for e in r["counting"]}
    for cta in (0, 1):
        steps = _tiles(cta, grid) * ksteps
        # the loop trip counts, seen in the records: 3 loads per k-step, one wgmma per step and group
        assert sum(s.name == "async_descriptor_load" for s in tr.spans_of(cta=cta, task="default")) == 3 * steps
        for rep in (0, 1):
            assert sum(s.name == "async_dot" for s in tr.spans_of(cta=cta, task="task1", replica=rep)) == steps
        # and what the counting launch counted per warp group is what the recording launch kept
        for lane in [l for l in tr.lanes() if l[0] == cta]:
            idx = ["default", "task1"].index(lane[1]) * instrument_rewrite.MAX_REPLICAS + lane[2]
            assert len(list(tr.spans_of(*lane))) == counted[cta][idx]
    launch = tr.meta["counting_launch_ctas"]            # every CTA of the launch: where and when it ran
    assert [c["cta"] for c in launch] == [0, 1] and {c["sm"] for c in launch} == {100, 101}
    assert min(c["start_ns"] for c in launch) == 0 and tr.meta["kernel_extent_ns"] == max(c["end_ns"] for c in launch)
    assert r["capacity_needed"] == max(max(v) for v in counted.values()) <= tr.meta["capacity"]


def test_ctas_share_one_ns_axis_at_the_measured_clock(full_run):
    *_, tr = full_run
    assert tr.time_unit == "ns" and tr.meta["sm_clock_ghz"] == pytest.approx(1.6, rel=0.05)
    ctas = {c["cta"]: c for c in tr.meta["ctas"]}
    assert {c["sm"] for c in ctas.values()} == {100, 101}            # %smid of each CTA
    for cta, c in ctas.items():
        spans = list(tr.spans_of(cta=cta))
        assert c["start"] <= min(s.start for s in spans) and max(s.end for s in spans) <= c["end"] + 1
    assert min(c["start"] for c in ctas.values()) == 0
    # and it travels as a Chrome trace (Perfetto) with what it says about itself
    back = Trace.from_chrome(json.loads(json.dumps(tr.to_chrome(), allow_nan=False)))
    assert back.time_unit == "ns" and len(back.spans) == len(tr.spans) and back.meta["events"] == tr.meta["events"]
    assert back.meta["ctas"] == tr.meta["ctas"] and repr(back) == repr(tr)


def test_the_recorders_cost_is_in_the_trace_and_its_repr(full_run):
    *_, r, _ = full_run
    timed = dict(r, overhead={"plain_ns": 180_000.0, "instrumented_ns": 190_000.0, "counting_ns": 185_000.0,
                              "ratio": 190 / 180, "method": "triton.testing.do_bench median"})
    tr = profiling.trace_from_records(timed, {"kernel": "gemm_ws_coop_kernel"})
    assert tr.meta["overhead"]["ratio"] == pytest.approx(1.0556, abs=1e-4)
    assert "instrumented 190.0 us vs plain 180.0 us (+5.6%)" in repr(tr)
    assert re.search(r"SM clock 1\.[56]\d* GHz", repr(tr))


def test_selection_by_first_last_sm_and_ids():
    assert instrument.select_ctas(3, 128) == [0, 1, 2]
    assert instrument.select_ctas({"first": 2, "last": 2}, 128) == [0, 1, 126, 127]
    assert instrument.select_ctas({"first": 2, "last": 2}, 3) == [0, 1, 2]
    assert instrument.select_ctas([5, 3, 5], 8) == [5, 3] and instrument.select_ctas("all", 3) == [0, 1, 2]
    counts = {0: {"smid": 7, "gt0": 50}, 1: {"smid": 3, "gt0": 900}, 2: {"smid": 7, "gt0": 400}, 3: {"smid": 3, "gt0": 60}}
    assert instrument.select_ctas({"sms": [7]}, 4, counts) == [0, 2]
    assert instrument.select_ctas({"last_wave": 2}, 4, counts) == [1, 2]          # the two that started last
    assert instrument.select_ctas({"first": 1, "last_wave": 2}, 4, counts) == [0, 1, 2]
    with pytest.raises(ValueError, match="outside the grid"):
        instrument.select_ctas([9], 8)
    with pytest.raises(ValueError, match="counting launch"):
        instrument.select_ctas({"sms": [1]}, 8)
    with pytest.raises(ValueError, match="first=, last=, last_wave=, sms="):
        instrument.select_ctas({"middle": 1}, 8)


def test_selected_by_sm_on_the_simulator_records_that_cta_only():
    a, b, c = _operands(5)
    r, tr = _profile_on_sim(a, b, c, ctas={"sms": [101]})            # sim_clocks: CTA k runs on SM 100 + k
    assert tr.meta["selected_ctas"] == [1] and {l[0] for l in tr.lanes()} == {1}
    assert tr.meta["ctas"][0]["sm"] == 101 and tr.meta["events"]["dropped_late"] == 0


def test_circular_and_small_buffers_say_what_they_dropped(full_run):
    a, b, c, _, full = full_run
    cap = 5
    _, circ = _profile_on_sim(a, b, c, ctas=[0], capacity=cap, circular=True)
    _, small = _profile_on_sim(a, b, c, ctas=[0], capacity=cap)
    lanes = [l for l in full.lanes() if l[0] == 0]
    total = sum(len(list(full.spans_of(*l))) for l in lanes)
    assert circ.meta["events"] == {"recorded": cap * len(lanes), "dropped_early": total - cap * len(lanes),
                                   "dropped_late": 0}
    assert small.meta["events"] == {"recorded": cap * len(lanes), "dropped_early": 0,
                                    "dropped_late": total - cap * len(lanes)}
    assert "early events dropped (circular buffer)" in repr(circ) and "late events dropped" in repr(small)
    for lane in lanes:
        assert _names(circ, lane) == _names(full, lane)[-cap:]      # a ring keeps the last events, in order
        assert _names(small, lane) == _names(full, lane)[:cap]      # a full buffer the first


def test_one_compiled_kernel_for_every_capacity():
    k = gemm_ws.gemm_ws_coop_kernel
    assert instrument.instrument(k, capacity=8).source == instrument.instrument(k, capacity=4096).source


def test_decode_converts_each_ctas_cycles_at_its_own_clock():
    rng = np.random.default_rng()
    tasks = ["default", "task1"]
    lanes = len(tasks) * instrument_rewrite.MAX_REPLICAS
    sites = [instrument_rewrite.EventSite(0, "barrier_wait", "wait", 10, "default", "full"),
             instrument_rewrite.EventSite(1, "async_dot", "mma", 20, "task1")]
    lay = instrument.Layout(grid=12, slots=2, lanes=lanes, capacity=4)
    buf = instrument.make_buffer(lay, [5, 9]).numpy()
    v = lay.lanes_view(buf)
    want = []
    for slot, (pid, sm, ghz, gt0) in enumerate([(5, 17, 1.5, 10**12), (9, 40, 1.7, 10**12 + 2000)]):
        clk0 = int(rng.integers(10**6, 10**9))
        for lane, site in ((0, 0), (instrument_rewrite.MAX_REPLICAS + 1, 1)):         # default[0], task1[1]
            t, n = clk0 + 30, int(rng.integers(1, 5))
            for i in range(n):
                d = int(rng.integers(10, 500))
                v[slot, lane, instrument.HEADER + 3 * i:][:3] = (site + 1, t, t + d)
                want.append((pid, tasks[lane // 8], lane % 8, (gt0 - 10**12) + (t - clk0) / ghz, d / ghz))
                t += d + int(rng.integers(0, 40))
            v[slot, lane, :7] = (n, pid + 1, sm, gt0, gt0 + round((t + 60 - clk0) / ghz), clk0, t + 60)
    tr = instrument.decode(buf, sites, tasks, file="k.py")
    got = sorted((s.cta, s.task, s.replica, s.start, s.duration) for s in tr.spans)
    assert len(got) == len(want)
    for g, w in zip(got, sorted(want)):
        assert g[:3] == w[:3] and g[3] == pytest.approx(w[3], abs=1.0) and g[4] == pytest.approx(w[4], rel=2e-3)
    assert [(c["cta"], c["sm"]) for c in tr.meta["ctas"]] == [(5, 17), (9, 40)]
    assert [round(c["clock_ghz"], 2) for c in tr.meta["ctas"]] == [1.5, 1.7]
    # without asking for ns: each CTA in its own cycles from its start
    cyc = instrument.decode(buf, sites, tasks, unit="cycles")
    assert cyc.time_unit == "cycles" and min(s.start for s in cyc.spans_of(cta=9)) == 30
