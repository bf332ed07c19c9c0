"""The cost model reads the H200's calibration file, and the simulator then reproduces what the GPU
measured: the calibration's own microbenchmarks (mbarrier, warp-barrier and named-barrier hand-overs,
the tensor-core loop) simulated here give the cycles the H200 gave. Contention, waves and the
timing-only mode are pinned against full simulations at small shapes."""
import json
import pathlib
import warnings

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.calibration import load, suite
from tlx_workbench.sim.timing.cost import cost_model
from tlx_workbench.sim.timing.prediction import sample_ctas, schedule


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
    assert load("B200") is None and cost_model("B200").calibration is None
    assert cost_model("B200").tma_latency == 500.0
    # the H100 has a calibration of its own (its memory, clock and power), read the same way
    h100 = load("H100")
    assert h100.device.startswith("NVIDIA H100") and cost_model("H100").calibration is h100
    assert cost_model("H100").for_launch(132).tma_load_rate == pytest.approx(h100.l2_bytes_per_cycle_per_sm["132"])


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


def _tma_loop_per_load(box_m, stages, in_flight, iters=24):
    """Steady-state cycles per load of the calibration's TMA loop simulated for CTA 0 among ``in_flight`` CTAs:
    the difference of two lengths (the pipeline's fill and drain cancel), as the GPU's timed stretch has none."""
    def cycles(n):
        return _sim(lambda: suite.launch_tma(box_m, 64, stages, ctas=1, iters=n, region=8, timed=False,
                                             device="cpu"), in_flight=in_flight).cycles
    return (cycles(2 * iters) - cycles(iters)) / iters


def _tma_rows(**match):
    import json
    raw = json.loads(open(load("H200").path).read())["raw"]["tma"]
    # the loops whose CTAs read the same boxes in step: what the TMA queue is fitted on (calibration.suite._tma_queue)
    return [t for t in raw if t["where"] == "l2" and not t.get("spread") and all(t[k] == v for k, v in match.items())]


def test_a_cta_among_many_gets_less_tma_bandwidth():
    """Contention: CTA 0 keeping 4 TMA loads in flight, alone and as one of 132 CTAs streaming from L2, takes per
    load what the H200 measured for that loop (calibration raw readings, box 128 x 64) once the loads wait on
    each other's latency; alone it is faster (the lone loop's ~308-cycle floor per load is not charged: see
    calibration.suite._tma_queue)."""
    alone, crowded = _tma_loop_per_load(128, 4, 1), _tma_loop_per_load(128, 4, 132)
    assert crowded > alone
    assert crowded == pytest.approx(_tma_rows(box=[128, 64], stages=4, ctas=132)[0]["cycles_per_load"], rel=0.1)


@pytest.mark.parametrize("ctas", [33, 132])
def test_the_tma_queue_gives_the_measured_loops_as_loads_pile_up(ctas):
    """The TMA queue (its rate, and a latency that grows with the loads in flight) reproduces the calibration's
    loops of 8 and 16 KiB boxes with 1, 2 and 4 loads in flight among many CTAs, and the deep 16 KiB loop with every
    SM streaming, where one number per load (the old model) was off by up to 45 %. Within 10 %, but the 4-deep loops
    with every SM streaming: they sit partly at the loop's ~308-cycle floor, which the queue does not charge
    (calibration.suite._tma_queue), and the H200's readings of 2026-12-07 put the 8 KiB one 12 % above the queue."""
    for t in _tma_rows(ctas=ctas):
        if t["bytes"] > 16384 or (t["stages"] == 8 and not (ctas == 132 and t["bytes"] == 16384)):
            continue
        sim = _tma_loop_per_load(t["box"][0], t["stages"], ctas)
        tol = 0.15 if (ctas == 132 and t["stages"] == 4) else 0.1
        assert sim == pytest.approx(t["cycles_per_load"], rel=tol), (t["box"], t["stages"], sim)


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


def test_time_order_times_a_launch_the_same_for_every_seed_where_seeded_interleavings_differ():
    """A seeded interleaving claims the CTA's TMA queue, ALUs and L1 in the order its tasks happen to run, so the same
    launch times differently per seed; ``order="time"`` runs the tasks in simulated-time order: one time, which
    wb.predict(order="time") predicts from, and the kernel still computes its product."""
    launch, a, b, cfg = _gemm_ws((1024, 512, 512))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seeded = {wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False, seed=s).cycles for s in range(4)}
        timed = {wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False, seed=s, order="time").cycles
                 for s in range(4)}
        predicted = [wb.predict(launch, a, b, cfg, gpu="H200", seed=s, order="time") for s in (0, 3)]
        c = wb.simulate(launch, a, b, cfg, gpu="H200", order="time").value
    assert len(seeded) > 1
    assert len(timed) == 1
    assert predicted[0].cta_cycles == predicted[1].cta_cycles == pytest.approx(timed.pop(), rel=1e-9)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)


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
    # cycles at the clock the board holds for this launch (a short one: boost), plus the launch's fixed cost
    assert p.clock_ghz == pytest.approx(cost_model("H200").launch_clock(p.cycles, p.clock.tensor_util).ghz)
    assert p.us == pytest.approx(p.cycles / (p.clock_ghz * 1e3) + (load("H200").launch_us or 0.0))
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
    from tlx_workbench.sim.timing.cost import MEASURED_WGMMA_ISSUE
    launch, a, b, cfg = _gemm_ws((256, 128, 256))
    cm = cost_model("H200")
    assert cm.wgmma_instructions(64, 64, 16) == 4 and cm.wgmma_instructions(128, 128, 8) == 8
    assert cm.wgmma_issue_cycles(64, 64, 16) == pytest.approx(4 * MEASURED_WGMMA_ISSUE["H200"])
    # the H100's SM is the H200's: it charges the same; a GPU of another SM keeps the generic slot
    assert cost_model("H100").wgmma_issue_cycles(64, 64, 16) == cm.wgmma_issue_cycles(64, 64, 16)
    assert cost_model("B200").wgmma_issue_cycles(64, 64, 16) == cost_model("B200").issue
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wb.simulate(launch, a, b, cfg, gpu="H200", numerics=False)
    mma = [s for s in res.trace.spans if s.kind == "mma"]
    assert mma
    for s in mma:
        # the span is the tensor core's time (its work), issue or not
        assert s.end - s.start == pytest.approx(cm.mma_cycles(s.args["m"], s.args["n"], s.args["k"], 16))
    # gemm_ws: barrier_wait(full) -> async_dot -> async_dot_wait; the group spends the gap issuing, after the A
    # operand's index (`a_ring[2 * s + wg]`: two scalar ops, cost.scalar_op each; free on GPUs never measured)
    gaps = []
    for lane in {s.lane for s in mma}:
        ops = sorted((x for x in res.trace.spans if x.lane == lane and x.kind != "mma"), key=lambda x: x.start)
        gaps += [b.start - a.end for a, b in zip(ops, ops[1:])
                 if (a.name, b.name) == ("barrier_wait", "async_dot_wait")]
    k = mma[0].args["k"]
    issue = cm.wgmma_issue_cycles(64, k, 16) + 2 * cm.scalar_op
    assert gaps and all(g == pytest.approx(issue) for g in gaps), (set(gaps), k)


def _bench(stem):
    """``benchmarks/<stem>.py`` as a module (it imports its neighbours by name, as when run)."""
    import importlib.util
    import pathlib
    import sys
    bench = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location(f"bench_{stem}", bench / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_loader_figures_are_what_the_stored_h200_traces_give():
    """cost.MEASURED_LOADER is benchmarks/loader_costs.py's derivation from the traces on disk (the every-op
    trace's TMA-issue and expect spans; the waits trace's loader k-step less its record, issues and expects, over
    the scalar ops the simulator counts per loader k-step): the same figures, to their rounding."""
    from tlx_workbench.sim.timing.cost import MEASURED_LOADER
    d = _bench("loader_costs").derive()
    got = MEASURED_LOADER["H200"]
    assert got["tma_issue"] == pytest.approx(d["tma_issue"], abs=0.5)
    assert got["expect_bytes"] == pytest.approx(d["expect_bytes"], abs=0.5)
    assert got["scalar_op"] == pytest.approx(d["scalar_op"], abs=0.05)
    # gemm_ws's loader runs 15 integer scalar ops a k-step (ring slot and parity, the SPLIT_FULL indices), a
    # consumer 8; the every-op trace's gaps hold far more arithmetic than the waits trace's (records serialize it)
    assert d["inputs"]["scalar_ops_per_kstep"] == {"default": 15.0, "task1": 8.0}
    assert d["inputs"]["every_op_loader_arithmetic_per_kstep"] > 3 * d["inputs"]["loader_arithmetic_per_kstep"] > 0


def test_a_tma_loader_k_step_costs_what_the_h200_measured(monkeypatch):
    """gemm_ws CONFIGS[0]'s loader on the H200 model with the loader's figures charged: each TMA load issue and
    barrier_expect_bytes takes the measured span, the loop's index arithmetic its scalar ops, so a steady k-step
    of the waits-recorded kernel between two loader waits is the waits trace's median gap (351 cycles). The model
    charges them by default (cost.APPLIED_LOADER; a study sets it to () for the generic figures); GPUs never
    measured keep the generic issue slot, an arrive for the expect, and free scalars either way."""
    from tlx_workbench.kernels import gemm_ws
    from tlx_workbench.sim.timing import cost
    from tlx_workbench.sim.timing.cost import MEASURED_LOADER, MEASURED_RECORD
    monkeypatch.setattr(cost, "APPLIED_LOADER", ())
    generic = cost_model("H200")
    assert (generic.tma_issue_cycles, generic.expect_cycles, generic.scalar_op) == (generic.issue,
                                                                                    generic.barrier_op, 0.0)
    monkeypatch.undo()
    cm, fig = cost_model("H200"), MEASURED_LOADER["H200"]
    assert (cm.tma_issue_cycles, cm.expect_cycles, cm.scalar_op) == (fig["tma_issue"], fig["expect_bytes"],
                                                                     fig["scalar_op"])
    h100, b200 = cost_model("H100"), cost_model("B200")
    assert (h100.tma_issue_cycles, h100.expect_cycles, h100.scalar_op) == (cm.tma_issue_cycles, cm.expect_cycles,
                                                                           cm.scalar_op)
    assert (b200.tma_issue_cycles, b200.expect_cycles, b200.scalar_op) == (b200.issue, b200.barrier_op, 0.0)
    K = 1024                                # CTA 0: one tile of 16 k-steps
    a, b = torch.randn(128, K).half(), torch.randn(K, 256).half()
    c = torch.empty(128, 256).half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wb.simulate(gemm_ws.launch, a, b, c, gemm_ws.CONFIGS[0], ctas=[0], gpu="H200", numerics=False,
                          recorder="waits")
    assert res.ok
    loader = sorted(res.trace.spans_of(0, "default", 0), key=lambda s: s.start)
    for name, cycles in (("async_descriptor_load", fig["tma_issue"]), ("barrier_expect_bytes", fig["expect_bytes"])):
        got = [s.duration for s in loader if s.name == name]
        assert len(got) == 3 * 16 and all(g == pytest.approx(cycles) for g in got), (name, set(got))
    waits = [s for s in loader if s.name == "barrier_wait"]
    gaps = sorted(y.start - x.end for x, y in zip(waits, waits[1:]))
    own = 3 * (fig["tma_issue"] + fig["expect_bytes"]) + 15 * fig["scalar_op"]
    assert gaps[len(gaps) // 2] == pytest.approx(MEASURED_RECORD["H200"]["waits"] + own)
    assert gaps[len(gaps) // 2] == pytest.approx(351.0, abs=1.0)         # the waits trace's median
    assert res.stats[("default", 0)]["scalar_ops"] >= 15 * 16


def test_l2_loops_with_a_box_of_their_own_per_cta_are_recorded_but_not_fitted():
    """The suite measures the L2 TMA loops both ways; the queue and the rates stay the in-step loops' (what the GEMMs'
    shared tiles match), so the own-box rows (132 CTAs: 30 B/cycle each on an H100, against 53 in step) change no
    derived figure."""
    import copy
    import json
    raw = json.loads(open(load("H200").path).read())["raw"]
    more = copy.deepcopy(raw)
    for t in raw["tma"]:
        if t["where"] == "l2" and t["ctas"] > 1:
            more["tma"].append(dict(t, spread=suite.L2_SPREAD, bytes_per_cycle_per_cta=t["bytes_per_cycle_per_cta"] / 2,
                                    cycles_per_load=t["cycles_per_load"] * 2))
    assert suite.derive(more) == suite.derive(raw)


def test_a_gemms_loads_are_recorded_by_tile_shape_and_leave_the_queue_alone():
    """The ``gemm_loads`` family's streams (a GEMM's loads in its tile order) are kept by size, GROUP_M and tile
    shape; on the H100 the 64 x 256 tile's loads get more than the in-step queue's rate with every SM streaming and
    the 128 x 128 tile's less (docs/cost_model.md, "A GEMM's loads by tile shape"), so one rate serves neither and
    the queue stays the in-step loops': dropping the family changes no TMA figure."""
    import copy
    import json
    raw = json.loads(open(load("H100").path).read())["raw"]
    derived = suite.derive(raw)
    loads, queue = derived["gemm_loads"], derived["tma"]["queue"]["l2"]["132"]["bytes_per_cycle"]
    for bm, bn, bk, _ in suite.GEMM_LOAD_TILES:
        assert f"4096/8/{bm}x{bn}x{bk}" in loads
    assert loads["4096/8/64x256x64"] > 1.2 * queue > loads["4096/8/128x128x64"]
    assert loads["4096/1/128x256x64"] < loads["4096/8/128x256x64"]      # the grouped order shares more in L2
    bare = copy.deepcopy(raw)
    del bare["gemm_loads"]
    assert suite.derive(bare)["tma"] == derived["tma"] and suite.derive(bare)["gemm_loads"] == {}


def test_a_call_that_makes_several_launches_is_predicted_launch_by_launch():
    """``wb.predict`` of the library's attention backward (a row-statistics launch, then the main kernel): one
    prediction per launch, each what predicting that launch alone gives, and the call's time their sum (it used
    to be the last launch's alone)."""
    from tlx_workbench.kernels import attention_bwd as ab
    torch.manual_seed(4)
    q, k, v, o, do, lse = ab.backward_inputs((1, 2, 256, 128), torch.float16, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call = wb.predict(lambda: ab.attention_backward(q, k, v, o, do, lse), gpu="H200", compile=False)
        assert isinstance(call, wb.CallPrediction)
        names = [p.kernel for p in call.parts]
        assert names[0] == "attention_bwd_delta_kernel" and "attention_bwd_kernel" in names
        res = wb.simulate(lambda: ab.attention_backward(q, k, v, o, do, lse), gpu="H200", numerics=False)
        assert [r.kernel for r in res.launches] == names
        for r, part in zip(res.launches, call.parts):
            jit, args, kwargs = r.launch
            alone = wb.predict(jit, *args, grid=tuple(r.grid), gpu="H200", compile=False, **kwargs)
            assert part.us == pytest.approx(alone.us, rel=1e-9) and part.grid == tuple(r.grid)
    # beside its launches the call casts dQ from fp32 to fp16 through torch: a kernel of its own on a GPU
    (cast,) = call.torch_kernels
    assert cast.op == "aten._to_copy" and cast.bytes_read == q.numel() * 4 and cast.bytes_written == q.numel() * 2
    assert call.torch_us == pytest.approx(cast.nbytes / (call.dram_gbps * 1e3) + call.parts[0].launch_us)
    assert call.us == pytest.approx(sum(p.us for p in call.parts) + call.torch_us)
    assert call.kernel == " + ".join(names)
    assert "launch(es) on H200" in repr(call) and "attention_bwd_kernel" in call._repr_html_()
    assert "aten._to_copy" in repr(call) and "aten._to_copy" in call._repr_html_()


@pytest.mark.parametrize("ctas", [1, 132])
def test_a_ctas_tma_stores_cost_its_loads_what_the_h200_measured(ctas):
    """The calibration's tma_store_beside loop (the L2 load stream with a warp group storing 64 x 64 fp16 boxes
    beside it) simulated for CTA 0 among ``ctas``: the loads lose what the H200 measured per stored byte (alone on
    the GPU a store costs its CTA's loads ~0.004 cycles a byte; with every SM storing, 0.05), and the stores run
    their own transfer beside them (the model before charged a store's whole transfer to the queue: at 1 CTA 8x
    what was measured)."""
    cal = load("H200")
    cpb = cost_model("H200").for_launch(ctas).tma_store_load_cpb
    assert cpb == pytest.approx(float(cal.tma_store_load_cpb[str(ctas)]))
    x, d = suite.tma_descriptor(16, 128, 64, "cpu")
    y, sd = suite.tma_descriptor(64, 64, 64, "cpu")
    cycles = {}
    for stores in (0, 48):
        res = _sim(lambda: suite.launch_tma_load_store(128, stores, ctas=1, timed=False, device="cpu",
                                                       tensors=(x, d, y, sd)), in_flight=ctas)
        assert res.deadlock is None and not res.errors
        cycles[stores] = res.stats[("default", 0)]["cycles"]
    lost, measured = cycles[48] - cycles[0], cpb * 48 * 64 * 64 * 2
    if ctas == 132:
        assert lost == pytest.approx(measured, rel=0.1)
    else:       # ~0.1 cycle per load: stores issued while the queue idles hold the next load only
        assert 0 <= lost <= 1.1 * measured


def test_a_call_of_several_launches_serializes_to_the_json_schema():
    """A CallPrediction as JSON (``json_schema.prediction``): the call's kernels and time, its longest launch's
    grid and bound, and every launch on its own, valid against the schema a document's prediction has."""
    import jsonschema
    from tlx_workbench import json_schema as js
    from tlx_workbench.kernels import attention_bwd as ab
    q, k, v, o, do, lse = ab.backward_inputs((1, 2, 256, 128), torch.float16, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call = wb.predict(lambda: ab.attention_backward(q, k, v, o, do, lse), gpu="H200", compile=False)
    d = js.prediction(call)
    jsonschema.validate(d, js._PREDICTION)
    assert d["us"] == pytest.approx(call.us) and d["kernel"] == call.kernel and d["grid"] == list(call.main.grid)
    assert [x["kernel"] for x in d["launches"]] == [p.kernel for p in call.parts]
    for x in d["launches"]:
        jsonschema.validate(x, js._PREDICTION)
    assert [(x["op"], x["bytes_read"] + x["bytes_written"]) for x in d["torch_kernels"]] == \
        [(k.op, k.nbytes) for k in call.torch_kernels]


def test_the_spill_loop_family_spills_in_its_loop_and_its_measured_rate_times_it_again():
    """The ``spill_loop`` family's wgmma loops: with 128 rows a warp group the fp16 accumulator (128 x 256) does not
    fit, ptxas spills part of it, serializes the wgmmas and reloads and stores the spilled part every iteration; with
    64 rows nothing spills. ``wb.predict`` on the H100 (its rates derived from the one-group rows,
    ``suite._spill_figures``; charged per wgmma instruction at the rate the launch's spill demand leaves) times
    those loops again as measured, one CTA and every SM; the two-group loops (one group's spills beside the other's
    MMAs) are the cross-check, within 20 %."""
    fits = suite.spill_loop_placement(64, 256, 2)
    assert fits.loop_loads + fits.loop_stores == 0 and fits.loads + fits.stores == 0
    cal = load("H100")
    rows = [r for r in json.loads(pathlib.Path(cal.path).read_text())["raw"]["spill_loop"] if r["BM"] == 128]
    assert {r["ctas"] for r in rows} == {1, 132} and {str(c) for c in (1, 132)} <= set(cal.spill_bytes_per_cycle_per_sm)
    for r in rows:
        cycles = {}
        for iters in (8, 24):
            def launch():
                return suite.launch_mma("float16", 256, r["consumers"], iters=iters, ctas=r["ctas"], BM=128,
                                        timed=False, device="cpu")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = wb.predict(launch, gpu="H100", samples=1)
            assert "wgmma serialized" in p.compiled and "through L2" in p.compiled
            cycles[iters] = p.cycles
        per_iteration = (cycles[24] - cycles[8]) / 16
        tolerance = 0.05 if r["consumers"] == 1 else 0.2
        assert per_iteration == pytest.approx(r["cycles_per_iteration"], rel=tolerance), r


@pytest.mark.parametrize("per_sm", [1, 3])
def test_the_turnover_family_reads_a_launchs_records(per_sm):
    """``suite._turnover_read`` on records made to order (``[clock0, clock1, ns0, ns1, smid]`` a CTA): the span from
    the first start to the last end, the first wave's start spread, and on each SM the gap from a CTA's end to the
    start of the one that takes its slot (the earliest to end of those before it), in ns and in that SM's cycles."""
    import random
    r = random.Random()
    gap_ns, own, sms, waves = r.randint(50, 900), r.randint(2000, 9000), r.randint(2, 5), r.randint(2, 4)
    recs, spread = [], 0
    for sm in range(sms):
        for slot in range(per_sm):
            t = r.randint(0, 300)              # this slot's first CTA starts here
            spread = max(spread, t)
            for _ in range(waves):
                recs.append([2 * t, 2 * (t + own), t, t + own, sm])     # a 2 GHz clock
                t += own + gap_ns
    starts0 = sorted(c[2] for c in recs)[:sms * per_sm]
    got = suite._turnover_read(recs, per_sm, sms * per_sm)
    assert got["turnover_ns"] == gap_ns and got["turnover_cycles"] == 2 * gap_ns
    assert got["cta_us"] == pytest.approx(own / 1e3) and got["cta_cycles"] == 2 * own
    assert got["span_us"] == pytest.approx((max(c[3] for c in recs) - min(c[2] for c in recs)) / 1e3)
    assert got["start_spread_us"] == pytest.approx((starts0[-1] - starts0[0]) / 1e3)


def test_the_turnover_figures_are_the_families_medians_by_ctas_an_sm():
    """``derive``'s ``turnover`` figures: per CTAs an SM, the turnover over the launches of two waves or more, the
    start spread, and do_bench's time beyond the launch's span; None where the family has not run (the stored
    calibrations: it waits for a GPU)."""
    import random
    r = random.Random()
    rows = []
    for per_sm in (1, 3):
        for waves in (1, 2, 4, 8):
            span = r.uniform(5, 50) * waves
            rows.append(dict(ctas_per_sm=per_sm, waves=waves, ctas=132 * per_sm * waves, span_us=span,
                             do_bench_us=span + 3.0 + per_sm, start_spread_us=0.1 * per_sm, cta_us=4.0,
                             cta_cycles=8000.0, turnover_ns=None if waves == 1 else 400.0 + waves,
                             turnover_cycles=None if waves == 1 else 800.0 + 2 * waves))
    got = suite._turnover_figures(rows)
    assert set(got) == {"1", "3"}
    for per_sm in (1, 3):
        g = got[str(per_sm)]
        assert g["turnover_cycles"] == 808.0 and g["turnover_ns"] == 404.0      # the median of waves 2, 4, 8
        assert g["outside_us"] == pytest.approx(3.0 + per_sm) and g["start_spread_us"] == pytest.approx(0.1 * per_sm)
    assert suite._turnover_figures(None) is None
    assert suite.derive(json.loads(pathlib.Path(load("H100").path).read_text())["raw"])["turnover"] is None
