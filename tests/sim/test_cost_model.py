"""The cost model reads the H200's calibration file, and the simulator then reproduces what the GPU
measured: the calibration's own microbenchmarks (mbarrier, warp-barrier and named-barrier hand-overs,
the tensor-core loop) simulated here give the cycles the H200 gave. Contention, waves and the
timing-only mode are pinned against full simulations at small shapes."""
import warnings

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.calibration import load, suite
from tlx_workbench.sim.cost import cost_model
from tlx_workbench.sim.prediction import sample_ctas, schedule


def _sim(fn, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.simulate(fn, gpu="H200", **kw)


def test_h200_cost_model_reads_its_calibration_file():
    cal = load("H200")
    assert cal is not None and cal.device == "NVIDIA H200"
    assert cal.date and "calibration" in cal.command
    cm = cost_model("H200")
    assert cm.calibration is cal
    assert cm.time_clock_ghz == pytest.approx(cal.clock_ghz)
    assert cm.for_launch(132).tma_latency == pytest.approx(cal.tma_latency_by_ctas["132"])
    assert cm.for_launch(132).tma_load_rate == pytest.approx(cal.l2_bytes_per_cycle_per_sm["132"])
    # a k16 fp16 wgmma group of 64x256x64 at the measured 4096 flop per cycle per SM
    assert cm.mma_cycles(64, 256, 64, 16) == pytest.approx(2 * 64 * 256 * 64 / cal.mma_flops_per_cycle(16))
    assert cm.mma_cycles(64, 256, 64, 8) == pytest.approx(cm.mma_cycles(64, 256, 64, 16) / 2, rel=0.01)
    # GPUs never measured keep the documented estimates
    assert load("H100") is None and cost_model("H100").calibration is None
    assert cost_model("H100").tma_latency == 500.0


@pytest.mark.parametrize("kind,warp_barrier,measured", [
    ("pingpong", False, "pingpong"), ("pingpong", True, "pingpong_warp_barrier"),
    ("self", False, "self"), ("self", True, "self_warp_barrier"), ("named", False, "named")])
def test_barrier_loops_take_the_cycles_the_h200_measured(kind, warp_barrier, measured):
    rounds = 6
    res = _sim(lambda: suite.launch_barrier(kind, warp_barrier, rounds=rounds, timed=False, device="cpu"))
    assert res.ok
    per_round = res.cycles / rounds
    raw = load("H200")
    import json
    gpu = json.loads(open(raw.path).read())["raw"]["barriers"][measured]
    assert per_round == pytest.approx(gpu, rel=0.06), (per_round, gpu)


def test_warp_barrier_hand_over_is_cheaper_by_what_the_gpu_measured():
    plain = _sim(lambda: suite.launch_barrier("pingpong", False, rounds=8, timed=False, device="cpu")).cycles
    warp = _sim(lambda: suite.launch_barrier("pingpong", True, rounds=8, timed=False, device="cpu")).cycles
    b = load("H200").barrier
    assert plain - warp == pytest.approx(8 * 2 * (b["handover"] - b["handover_warp_barrier"]), rel=0.05)


def _mma_rate(res, flops_per_dot):
    # steady state: from the end of the first quarter of the dots to the end of the last
    spans = sorted((s for s in res.trace.spans if s.kind == "mma"), key=lambda s: s.end)
    q = len(spans) // 4
    return (len(spans) - q) * flops_per_dot / (spans[-1].end - spans[q - 1].end)


@pytest.mark.parametrize("bn,consumers", [(64, 1), (256, 1), (128, 2)])
def test_tensor_core_loop_runs_at_the_measured_rate(bn, consumers):
    iters = 24
    res = _sim(lambda: suite.launch_mma("float16", bn, consumers, iters=iters, ctas=1, timed=False, device="cpu"))
    assert res.ok
    rate = _mma_rate(res, 2.0 * 64 * bn * 64)
    gpu = load("H200").mma["float16"][f"n{bn}x{consumers}"]
    assert rate == pytest.approx(gpu, rel=0.1), (rate, gpu)


def test_a_cta_among_many_gets_less_tma_bandwidth():
    """Contention: CTA 0 keeping 4 TMA loads in flight, alone and as one of 132 CTAs streaming from L2,
    takes per load what the H200 measured for that loop (calibration raw readings, box 128 x 64)."""
    import json
    iters = 48

    def per_load(in_flight):
        return _sim(lambda: suite.launch_tma(128, 64, 4, ctas=1, iters=iters, region=8, timed=False, device="cpu"),
                    in_flight=in_flight).cycles / iters
    raw = json.loads(open(load("H200").path).read())["raw"]["tma"]

    def gpu(ctas):
        return next(t["cycles_per_load"] for t in raw if t["box"] == [128, 64] and t["stages"] == 4
                    and t["ctas"] == ctas and t["where"] == "l2")
    alone, crowded = per_load(1), per_load(132)
    assert crowded > alone
    assert alone == pytest.approx(gpu(1), rel=0.15)
    assert crowded == pytest.approx(gpu(132), rel=0.15)


def _gemm_ws(shape):
    from tlx_workbench.explore.library import gemm_launch
    from tlx_workbench.kernels import gemm_ws
    M, N, K = shape
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    return gemm_launch("gemm_ws"), a, b, dict(gemm_ws.SIM_CONFIGS["tiny"])


@pytest.mark.parametrize("shape", [(256, 128, 256), (384, 192, 160)])
def test_timing_only_gives_the_full_simulations_cycles(shape):
    launch, a, b, cfg = _gemm_ws(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = wb.simulate(launch, a, b, cfg, gpu="H200")
        fast = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False)
    assert full.ok and fast.ok
    assert not fast.numerics and full.numerics
    assert fast.cycles == pytest.approx(full.cycles, rel=1e-9)
    assert fast.trace.meta["numerics"] is False
    # the full run computed C, the timing-only run never wrote it
    assert torch.allclose(full.value.float(), a.float() @ b.float(), atol=0.5, rtol=2e-2)
    assert not torch.allclose(fast.value.float(), a.float() @ b.float(), atol=0.5, rtol=2e-2)


def test_causal_attention_timing_only_keeps_the_clocks():
    from tlx_workbench.explore.library import problem
    p = problem("attention", causal=True)
    cfg = dict(p.default)
    q, k, v = p.make_inputs((1, 2, 2 * cfg["BM"], 128), "float16", "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = wb.simulate(p.call, (q, k, v), cfg, gpu="H200")
        fast = wb.simulate(p.call, (q, k, v), cfg, gpu="H200", numerics=False)
    assert full.ok and fast.ok
    assert fast.cycles == pytest.approx(full.cycles, rel=1e-9)


def test_prediction_from_sampled_ctas_equals_the_full_simulation_of_one_wave():
    """Every CTA of a one-wave launch simulated, against wb.predict's few sampled CTAs."""
    launch, a, b, cfg = _gemm_ws((512, 256, 256))       # 4 x 4 = 16 tiles of 128 x 64: one wave
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False)
    per_cta = {}
    for s in full.trace.spans:
        per_cta[s.cta] = max(per_cta.get(s.cta, 0.0), s.end)
    p = wb.predict(launch, a, b, cfg, gpu="H200")
    assert set(p.sampled) <= set(per_cta) and len(p.sampled) >= 2
    for c, cyc in p.sampled.items():
        assert cyc == pytest.approx(per_cta[c], rel=1e-9)
    assert p.cta_cycles == pytest.approx(max(per_cta.values()), rel=0.05)
    assert p.us == pytest.approx(p.cycles / (load("H200").clock_ghz * 1e3) + (load("H200").launch_us or 0.0))
    assert "Prediction(" in repr(p) and "<table>" in p._repr_html_()


def test_waves_and_tail():
    # 264 equal CTAs on 132 slots: two waves; 133: a tail of one more wave
    assert schedule((264, 1, 1), {0: 100.0, 263: 100.0}, 132) == pytest.approx(200.0)
    assert schedule((133, 1, 1), {0: 100.0, 132: 100.0}, 132) == pytest.approx(200.0)
    # one wave: the longest CTA (a causal attention's last query tile is the longest)
    assert schedule((8, 4, 1), {0: 10.0, 7: 80.0}, 132) == pytest.approx(80.0)
    # two heads of 132 q-tiles each on 132 slots, work growing along x: the second wave starts where the
    # first one's short CTAs end
    t = schedule((132, 2, 1), {0: 10.0, 131: 141.0}, 132)
    assert 141.0 < t < 2 * 141.0
    assert sample_ctas((8, 4, 1), 3) == [0, 4, 7] and sample_ctas((1, 9, 1), 3) == [0]


@pytest.mark.parametrize("bn", [64, 256])
def test_one_wgmma_at_a_time_takes_what_the_h200_measured(bn):
    """The BK=16 loop (one instruction per async_dot, waited for at once) simulated here against the H200's cycles."""
    iters = 16
    res = _sim(lambda: suite.launch_mma_k("float16", bn, iters=iters, ctas=1, timed=False, device="cpu"))
    assert res.ok
    spans = sorted((s for s in res.trace.spans if s.kind == "mma"), key=lambda s: s.start)
    per = (spans[-1].start - spans[3].start) / (len(spans) - 4)
    assert per == pytest.approx(load("H200").mma_serial_cycles[str(bn)], rel=0.15), per


def test_a_serialized_wgmma_pipeline_costs_each_instruction():
    """ptxas's 'wgmma serialized' (C7510-C7515): an async_dot of K=64 (four k16 instructions) then takes four
    one-at-a-time instructions, not one pipelined run; the kernel is slower by that much."""
    launch, a, b, cfg = _gemm_ws((256, 128, 256))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False)
        serial = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False, serialized_wgmma=True)
    dur = {}
    for name, r in (("plain", plain), ("serial", serial)):
        spans = [s for s in r.trace.spans if s.kind == "mma"]
        dur[name] = spans[0].end - spans[0].start
        m, n, k = spans[0].args["m"], spans[0].args["n"], spans[0].args["k"]
    cm = cost_model("H200")
    assert dur["plain"] == pytest.approx(cm.mma_cycles(m, n, k, 16))
    assert dur["serial"] == pytest.approx((m // 64) * (k // 16) * load("H200").mma_serial_cycles[str(n)], rel=0.2)
    assert serial.cycles > plain.cycles


def test_an_async_dot_keeps_its_warp_group_busy_issuing_what_the_h200_measured():
    """A warp group issuing an async_dot is busy (not waiting) for its wgmma instructions' issue, ~30 cycles each
    on the H200 (cost.MEASURED_WGMMA_ISSUE, from the gemm_ws 4096^3 traces); the tensor core starts on the
    first instruction, so the wgmma's own time is unchanged. GPUs never measured keep the generic issue slot."""
    from tlx_workbench.sim.cost import MEASURED_WGMMA_ISSUE
    launch, a, b, cfg = _gemm_ws((256, 128, 256))
    cm = cost_model("H200")
    assert cm.wgmma_instructions(64, 64, 16) == 4 and cm.wgmma_instructions(128, 128, 8) == 8
    assert cm.wgmma_issue_cycles(64, 64, 16) == pytest.approx(4 * MEASURED_WGMMA_ISSUE["H200"])
    assert cost_model("H100").wgmma_issue_cycles(64, 64, 16) == cost_model("H100").issue
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False)
    mma = [s for s in res.trace.spans if s.kind == "mma"]
    assert mma
    for s in mma:
        # the span is the tensor core's time (its work), issue or not
        assert s.end - s.start == pytest.approx(cm.mma_cycles(s.args["m"], s.args["n"], s.args["k"], 16))
    # gemm_ws: barrier_wait(full) -> async_dot -> async_dot_wait; the group spends the gap issuing
    gaps = []
    for lane in {s.lane for s in mma}:
        ops = sorted((x for x in res.trace.spans if x.lane == lane and x.kind != "mma"), key=lambda x: x.start)
        gaps += [b.start - a.end for a, b in zip(ops, ops[1:])
                 if (a.name, b.name) == ("barrier_wait", "async_dot_wait")]
    k = mma[0].args["k"]
    assert gaps and all(g == pytest.approx(cm.wgmma_issue_cycles(64, k, 16)) for g in gaps), (set(gaps), k)
