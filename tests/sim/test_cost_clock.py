"""The clock a launch runs at and the roof no prediction passes, on real kernels through ``wb.predict``.

The H200's calibration measures the boost clock (short loops), the clock the wgmma loop holds at the board's
power cap, a real kernel's draw per unit of tensor work (kernels run for seconds) and the tensor core's rate
sustained under a pipeline's copy load; ``cost.PowerModel`` turns a launch's tensor-core utilisation and length
into its clock, ``prediction.finish`` floors its time at the sustained tensor rate."""
import json
import warnings

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.calibration import load, suite
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.sim.timing.cost import PowerModel, SpillsPerWgmma, cost_model
from tlx_workbench.sim.timing.prediction import finish, launch_cost_us


def _predict(shape, window="do_bench", seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else torch.seed() % 2**31)
    M, N, K = shape
    a = torch.randn(M, K, generator=g).half()
    b = torch.randn(K, N, generator=g).half()
    c = torch.empty(M, N, dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline("H200"):
            return wb.predict(gemm_ws.launch, a, b, c, dict(gemm_ws.CONFIGS[0]), gpu="H200", window=window)


def _roof_tflops(p):
    """The calibrated roof at this launch's clock: the sustained fp16 tensor rate on every SM."""
    cm = cost_model("H200")
    return cm.tensor_sustained_share * cm.calibration.mma_flops_per_cycle(16) * cm.gpu.sm_count * p.clock_ghz / 1e3


def test_the_power_figures_are_what_the_raw_readings_give():
    cal = load("H200")
    data = json.loads(open(cal.path).read())
    derived = suite.derive(data["raw"])["power"]
    assert derived.keys() == cal.power.keys()
    for k, v in derived.items():
        if isinstance(v, float):
            assert cal.power[k] == pytest.approx(v), k
    p = cal.power
    # the boost clock is what short loops ran at; the wgmma loop on every SM holds less at the cap
    assert 1.9 < p["boost_ghz"] <= 2.0 and p["mma_capped_ghz"] < p["boost_ghz"]
    assert p["cap_demand"] == pytest.approx((p["mma_capped_ghz"] / p["boost_ghz"]) ** 3)
    # a real kernel draws more per unit of tensor work than the bare wgmma loop (its data movement)
    assert p["data_factor"] > 1.0
    # no GEMM run for seconds sustained the loop's peak: the roof is below it
    assert 0.7 < cost_model("H200").tensor_sustained_share < 1.0


def test_a_flush_draw_the_power_family_cannot_read_keeps_the_calibration_halfs_fit():
    """The H200's power family ran every do_bench length at its burst clock, so the L2 flush's own draw cannot be read
    from it: the value fitted on the calibration half stands (``--fit-flush``); without one, none is charged. A
    reading, where there is one, takes precedence over both."""
    import copy
    raw = json.loads(open(load("H200").path).read())["raw"]
    fitted = raw["fitted"]["flush_demand"]["value"]
    p = suite.derive(raw)["power"]
    assert p["flush_demand"] == fitted and p["flush_demand_from"].startswith("fitted on the calibration half")
    bare = copy.deepcopy(raw)
    del bare["fitted"]
    q = suite.derive(bare)["power"]
    assert q["flush_demand"] == 0.0 and q["flush_demand_from"].startswith("power family: not readable")
    # a launch length held below the burst clock with the flush a large share of its window is a reading
    read = copy.deepcopy(raw)
    b = dict(read["power"]["do_bench"][0])
    t_us = p["flush_us"] / 2                                  # duty 1/3
    b.update(cycles=t_us * 1.2e3, clock_ghz=1.2, ms=(t_us + 3.0) / 1e3)
    read["power"]["do_bench"] = [b]
    r = suite.derive(read)["power"]
    assert r["flush_demand_from"].startswith("power family: 1 do_bench") and r["flush_demand"] != fitted


def test_the_clock_falls_with_tensor_load_and_length():
    pm = cost_model("H200").power
    # idle-ish and short: boost; the wgmma loop's own load, sustained: the clock the calibration measured there
    assert pm.clock(1e4, 0.1).regime == "boost"
    full = pm.clock(1e9, 1.0 / pm.data_factor, window="sustained")
    assert full.ghz == pytest.approx(load("H200").power["mma_capped_ghz"], rel=1e-6)
    utils = [0.3, 0.5, 0.7, 0.9]
    clocks = [pm.clock(5e6, u, window="sustained").ghz for u in utils]
    assert clocks == sorted(clocks, reverse=True) and clocks[0] > clocks[-1]
    # the same load runs faster the shorter it is under do_bench (the flush between launches), and a single
    # launch from idle keeps its boost for what the calibration measured
    lengths = [pm.clock(c, 0.85).ghz for c in (1e4, 1e5, 1e6, 1e7)]
    assert lengths == sorted(lengths, reverse=True) and lengths[0] == pm.top(0.85) > lengths[-1]
    assert pm.clock(pm.boost_s * pm.boost_ghz * 1e9 * 0.5, 0.85, window="single").ghz == pm.top(0.85)
    assert pm.clock(1e9, 0.85, window="single").ghz < pm.boost_ghz
    with pytest.raises(ValueError):
        pm.clock(1e6, 0.5, window="forever")


def test_a_short_gemm_runs_at_boost_and_a_long_one_at_the_power_cap():
    short = _predict((512, 512, 512))
    assert short.clock.regime == "boost" and short.clock_ghz == pytest.approx(cost_model("H200").power.boost_ghz)
    # the same kernel filling every SM for long: the cap holds it below boost, by its own tensor load
    long_ = _predict((2048, 2048, 8192), window="sustained")
    assert long_.clock.regime == "power cap" and long_.clock_ghz < short.clock_ghz
    assert long_.clock.tensor_util > 0.6
    expect = cost_model("H200").power.clock(long_.cycles, long_.clock.tensor_util, "sustained").ghz
    assert long_.clock_ghz == pytest.approx(expect)
    # under do_bench the flush between launches lets it clock higher than back to back, never above boost
    bench = finish(kernel="gemm_ws", gpu="H200", grid=long_.grid, sampled=long_.sampled,
                   slots=long_.slots, cta_cycles=long_.cta_cycles, tensor=long_.tensor_cycles,
                   nbytes=long_.kernel_bytes, window="do_bench", sim_seconds=0.0)
    assert long_.clock_ghz <= bench.clock_ghz <= short.clock_ghz
    assert bench.us < long_.us


@pytest.mark.parametrize("shape", [(256, 256, 256), (1024, 512, 768), (2048, 2048, 2048)])
def test_no_prediction_above_the_roof(shape):
    p = _predict(shape)
    M, N, K = shape
    tflops = 2.0 * M * N * K / (p.us * 1e-6) / 1e12
    assert tflops <= _roof_tflops(p) * (1 + 1e-9)
    # the cycles never undercut the launch's tensor work on every SM at the sustained rate
    assert p.cycles >= p.roof_cycles >= 0
    assert "clock" in repr(p) and "tensor roof" in repr(p) and "clock" in p._repr_html_()


def test_copy_load_slows_the_wgmmas_and_keeps_the_pipelines_bubbles():
    """The simulator runs wgmmas at the bare loop's peak; under a pipeline's copy load the tensor-busy share of the
    critical path stretches by 1 / tensor_copy_share and the rest stays; the launch's tensor work on every SM at
    the sustained rate stays the roof."""
    p = _predict((2048, 2048, 8192))
    cm = cost_model("H200")
    u = p.tensor_cycles / (sum(p.sampled.values()) * p.waves * p.slots / len(p.sampled))
    assert 0.5 < u < 1.0 and 0.9 < cm.tensor_copy_share < 1.0
    assert p.copy_stretch == pytest.approx(1 - u + u / cm.tensor_copy_share)
    assert p.roof_cycles == pytest.approx(p.tensor_cycles / (132 * cm.tensor_sustained_share))
    assert p.cycles == pytest.approx(max(p.cta_cycles * p.copy_stretch, p.roof_cycles, p.hbm_floor_cycles))
    assert p.cycles > p.cta_cycles
    tflops = 2.0 * 2048 * 2048 * 8192 / (p.us * 1e-6) / 1e12
    assert tflops <= _roof_tflops(p) * (1 + 1e-9)


def test_two_configs_whose_pipelines_differ_keep_their_order_near_the_roof():
    """Of two launches with the same tensor work, the one whose pipeline waits longer is predicted slower by its
    extra waits (the tensor roof no longer levels configs that load the tensor core near its sustained rate)."""
    p = _predict((2048, 2048, 8192))
    cm = cost_model("H200")

    def timed(extra):
        # the same launch with ``extra`` cycles of waits on every CTA: what a config with a bubble more costs
        sampled = {c: v + extra for c, v in p.sampled.items()}
        return finish(kernel="gemm_ws", gpu="H200", grid=p.grid, sampled=sampled, slots=p.slots,
                      cta_cycles=p.cta_cycles + extra, tensor=p.tensor_cycles, nbytes=p.kernel_bytes,
                      window="sustained", sim_seconds=0.0)
    # past the sustained share, as FP8's 128x256 configs at 8192^3 are
    base = timed(0.0)
    assert p.tensor_cycles / (base.slots * base.cta_cycles) > 0.8 * cm.tensor_sustained_share
    slower = [timed(f * p.cta_cycles) for f in (0.01, 0.02, 0.04)]
    cycles = [base.cycles] + [q.cycles for q in slower]
    assert cycles == sorted(cycles) and len(set(cycles)) == len(cycles)
    # each extra wait is charged whole (waits do not stretch) unless the roof holds the launch
    for f, q in zip((0.01, 0.02, 0.04), slower):
        if q.bound == "ctas":
            assert q.cta_cycles * q.copy_stretch == pytest.approx(
                p.cta_cycles * (1 + f) * q.copy_stretch)
            assert q.copy_stretch < base.copy_stretch


def test_the_copy_load_share_is_what_the_sustained_gemm_gives_against_its_simulation():
    """cost.MEASURED_COPY_SHARE comes from the calibration half: the library's gemm_ws run for seconds (flop per
    cycle per SM) against its simulated cell. Simulated afresh here at 4096^3, the fp16 and bf16 rows give the
    share the module states for them (0.955 / 0.957), and the median it keeps lies within the rows' range."""
    from tlx_workbench.sim.timing import cost
    p = _predict((4096, 4096, 4096))
    cal = load("H200")
    rows = json.loads(open(cal.path).read())["raw"]["sustained_kernels"]["rows"]
    gemm = [r for r in rows if r["subject"] == "gemm_ws" and r["cell"].startswith("gemm 4096^3")]
    assert len(gemm) == 2
    u = p.tensor_cycles / (sum(p.sampled.values()) * p.waves * p.slots / len(p.sampled))
    f_sim = cal.mma_flops_per_cycle(16) * p.tensor_cycles / (132 * p.cta_cycles)
    shares = [u / (f_sim / r["flop_per_clk_sm"] - 1 + u) for r in gemm]
    assert shares == pytest.approx([0.955, 0.957], abs=0.01)
    assert 0.95 <= cost.MEASURED_COPY_SHARE["H200"] <= 1.0
    assert cost_model("H200").tensor_copy_share == cost.MEASURED_COPY_SHARE["H200"]
    # a GPU without its own derivation takes the mma_copy family's loop (a heavier copy than a GEMM's), else 1
    import dataclasses
    measured = dataclasses.replace(cal, power=dict(cal.power, tensor_under_copy=3900.0))
    assert cost.copy_share("B200", measured) == pytest.approx(3900.0 / cal.mma_flops_per_cycle(16))
    assert cost.copy_share("H200", measured) == cost.MEASURED_COPY_SHARE["H200"]
    assert cost.copy_share("B200", None) == 1.0


def test_the_mma_copy_calibration_loop_runs_on_the_simulator():
    """The calibration family that measures the tensor core under copy load: its protocol on the CPU, and its
    wgmma groups no faster than the bare loop's."""
    t = suite.tma_descriptor(16, 128, 64, "cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = wb.simulate(lambda: suite.launch_mma_copy("float16", 256, 2, iters=8, ctas=1, where="l2", tensor=t,
                                                           timed=False, device="cpu"), gpu="H200")
        bare = wb.simulate(lambda: suite.launch_mma("float16", 256, 2, iters=8, ctas=1, timed=False, device="cpu"),
                           gpu="H200")
    assert loaded.deadlock is None and not loaded.errors
    mma = [st["cycles"] for (task, _), st in loaded.stats.items() if task != "default"]
    assert mma and max(mma) >= 0.95 * bare.cycles


def test_an_uncalibrated_gpu_keeps_its_fixed_clock():
    cm = cost_model("B200")
    assert cm.power is None
    c = cm.launch_clock(1e6, 0.9)
    assert c.regime == "fixed" and c.ghz == cm.gpu.clock_ghz
    assert isinstance(cost_model("H200").power, PowerModel)


def test_spills_that_do_not_fit_the_l1_the_smem_leaves_reload_from_l2(tutorial):
    """TLX's hopper_fa_ws spills (1264 B stored, 1020 B loaded per thread; 748 + 744 B of it in its KV loop) beside
    196 KB of SMEM: the L1 left (28 KB of the SM's 256) cannot hold a warp group's spilled locals, so the loop's go
    through L2, at the rate the calibration's ``spill_loop`` family measured (the launch's L2 rate where it never
    ran), charged per wgmma instruction the loop runs."""
    mod = tutorial("hopper_fa_ws")
    g = torch.Generator().manual_seed(torch.seed() % 2**31)
    q, k, v = (torch.randn(1, 4, 512, 128, generator=g).half() for _ in range(3))
    cfg = dict(mod.configs[0].kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline("H200"):
            p = wb.predict(lambda: mod.attention(q, k, v, 0.5, config=cfg), gpu="H200")
            at_l1 = wb.predict(lambda: mod.attention(q, k, v, 0.5, config=cfg), gpu="H200", spills=1020 + 1264)
    assert "1020 B/thread spill loads, 1264 B/thread spill stores" in p.compiled and "through L2" in p.compiled
    assert "748 + 744 B in the wgmma loop's body, 32 wgmma instructions" in p.compiled
    cm = cost_model("H200").for_launch(min(p.grid[0] * p.grid[1] * p.grid[2], 132))
    # charged per wgmma instruction (QK^T and PV: 2 x 8 m64n128k16 each an iteration)
    assert isinstance(p.spill_bytes, SpillsPerWgmma)
    import jsonschema
    from tlx_workbench import json_schema as js
    as_json = js.prediction(p)            # what scripts and agents read: the figure and its unit
    jsonschema.validate(as_json, js._PREDICTION)
    assert as_json["spills_per"] == "wgmma" and as_json["spill_bytes"] == pytest.approx(float(p.spill_bytes))
    assert js.prediction(at_l1)["spills_per"] == "iteration" and js.prediction(at_l1)["spill_bytes"] == 1020 + 1264
    assert p.spill_bytes == pytest.approx((748 + 744) / 32 * cm.spill_rate_scale(196684, 128 * 10 ** 4), rel=0.01)
    assert p.us > at_l1.us
    # what fits stays in L1; a GPU never measured keeps the L1 charge
    assert cm.spill_rate_scale(smem_bytes=64 * 1024, local_bytes=32 * 1024) == 1.0
    assert cm.spill_rate_scale(smem_bytes=196 * 1024, local_bytes=128 * 1020) > 1.0
    assert cost_model("B200").spill_rate_scale(smem_bytes=196 * 1024, local_bytes=128 * 1020) == 1.0


def test_the_explorer_predicts_what_wb_predict_does():
    """The explorer's simulated stage has no model of its own: its time at the real shape is wb.predict's (the same
    CTAs simulated, the same clock model, compiled facts and launch cost), for a GEMM and a causal attention."""
    from tlx_workbench.explore import library
    from tlx_workbench.explore.stages import PREDICT_SAMPLES, predict
    from tlx_workbench.kernels import attention as att
    cases = [("gemm_ws", dict(gemm_ws.CONFIGS[0]), (2048, 2048, 1024), dict()),
             ("attention", dict(att.DEFAULTS[(False, True)]), (1, 4, 1024, 128), dict(causal=True))]
    for name, cfg, shape, kw in cases:
        problem = library.problem(name, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = predict(problem, cfg, shape, "H200")
            inputs = problem.make_inputs(shape, "float16", "cpu")
            p = wb.predict(problem.call, inputs, cfg, gpu="H200", samples=PREDICT_SAMPLES)
        assert m["predicted_from"].startswith("wb.predict at the real shape")
        assert m["predicted_us"] == pytest.approx(p.us, rel=1e-9) and m["bound"] == p.bound
        assert m["clock_ghz"] == pytest.approx(p.clock_ghz, rel=1e-9)
        assert m["predicted_us"] == pytest.approx(p.cycles / (p.clock_ghz * 1e3)
                                                  + launch_cost_us(cost_model("H200").calibration), rel=1e-9)


def test_a_burst_limit_holds_a_tensor_heavy_launch_below_boost_at_any_length():
    """The H100's wgmma loop on every SM ran below boost from its first launch after idle (the power family's
    ramp; its TMA stream from HBM kept boost, and the loop with a TMA copy beside it started at the loop's clock):
    the board limits the tensor cores' draw itself, not only the average. A launch whose tensor cores are busy
    past that limit runs below boost however short; a light one keeps boost; the average cap still holds a long
    one lower. The H200's power family (2026-12-07) read the same: its loop's first 20 ms at 1.67 GHz."""
    cal = load("H100")
    data = json.loads(open(cal.path).read())
    assert suite.derive(data["raw"]) == data["derived"]
    p, pm = cal.power, cost_model("H100").power
    ramp = data["raw"]["power"]["ramp"]
    assert p["burst_ghz"] < 0.95 * p["boost_ghz"] <= ramp["copy_hbm"][0]["clock_ghz"]
    assert pm.burst_demand == pytest.approx((p["burst_ghz"] / p["boost_ghz"]) ** 3)
    c = pm.clock(2e4, 1.0)                      # tensor cores busy every cycle, 10 us between flushes
    assert c.regime == "burst cap" and c.ghz == pytest.approx(p["burst_ghz"], rel=1e-6)
    assert pm.clock(2e4, 1.0, window="single").ghz == pytest.approx(p["burst_ghz"], rel=1e-6)
    assert pm.clock(2e4, 0.5).regime == "boost"
    long_ = pm.clock(1e9, 1.0, window="sustained")
    assert long_.regime == "power cap" and long_.ghz < p["burst_ghz"]
    # the busier a launch's tensor cores, the lower its clock, short or long
    short = [pm.clock(5e4, u).ghz for u in (0.5, 0.7, 0.8, 0.9, 1.0)]
    assert short == sorted(short, reverse=True) and short[-1] < short[0] == p["boost_ghz"]
    h200 = load("H200").power
    assert h200["burst_ghz"] < 0.9 * h200["boost_ghz"]
    assert cost_model("H200").power.burst_demand == pytest.approx((h200["burst_ghz"] / h200["boost_ghz"]) ** 3)


def test_a_loop_moves_its_spilled_registers_once_per_iteration_whatever_its_async_dots():
    """ptxas's spill bytes are the kernel's static spill code, which a loop runs once per iteration: a warp group
    whose loop holds several async_dots pays them once per iteration, spread over its async_dot lines, not once per
    async_dot. The library's attention backward (six async_dots a step, 216 B loaded and 176 stored per thread)
    simulated with its spills pays them once a step, and a little more in the first step, where each async_dot
    meets a line not seen before."""
    from tlx_workbench.kernels import attention_bwd as ab
    q, k, v, o, do, lse = ab.backward_inputs((1, 2, 1024, 128), torch.float16, "cpu")
    cfg = dict(ab.configs_for(128, False)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = wb.simulate(lambda: ab.attention_backward(q, k, v, o, do, lse, config=cfg), gpu="H200",
                           ctas=[0], numerics=False)
        main = [r for r in base.launches if r.kernel == "attention_bwd_kernel"][0]
        lines = {s.line for s in main.trace.spans if s.name == "async_dot"}
        charged = wb.simulate(lambda: ab.attention_backward(q, k, v, o, do, lse, config=cfg), gpu="H200",
                              ctas=[0], numerics=False, spills=6000)
    main_sp = [r for r in charged.launches if r.kernel == "attention_bwd_kernel"][0]
    spills = [s for s in main_sp.trace.spans if s.name == "register spills"]
    dots = [s for s in main_sp.trace.spans if s.name == "async_dot"]
    assert len(lines) >= 5 and len(spills) == len(dots)
    per_thread = [s.args["bytes"] / 128 for s in spills]
    steps = len(dots) / len(lines) / 2             # two consumer groups
    # every step pays 6000 once; the first, whose async_dots each meet a line not seen before, 6000 x (1 + 1/2 + ...)
    first = sum(6000 / j for j in range(1, len(lines) + 1))
    assert sum(per_thread) / 2 == pytest.approx(6000 * (steps - 1) + first, rel=1e-9)
    assert min(per_thread) == pytest.approx(6000 / len(lines))


def test_the_explorer_predicts_a_config_of_several_launches_as_wb_predict_does():
    """An attention-backward config that splits its short last wave into a second launch (and a cast): the explorer's
    simulated stage takes wb.predict's CallPrediction, the launches' sum (it had no cycles to read and failed)."""
    from tlx_workbench.explore import library
    from tlx_workbench.explore.stages import PREDICT_SAMPLES, predict
    from tlx_workbench.kernels.attention_bwd_configs import VARIANT_CONFIGS
    problem = library.problem("attention_bwd")
    cfg, shape = dict(VARIANT_CONFIGS["split_tail"]), (1, 20, 1024, 128)     # 160 CTAs: 28 past the first wave
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = predict(problem, cfg, shape, "H200")
        p = wb.predict(problem.call, problem.make_inputs(shape, "float16", "cpu"), cfg, gpu="H200",
                       samples=PREDICT_SAMPLES)
    assert isinstance(p, wb.CallPrediction) and len(p.parts) >= 2
    assert m["predicted_us"] == pytest.approx(p.us, rel=1e-9) and m["bound"] == p.bound
    assert m["predicted_cycles"] == pytest.approx(sum(x.cycles for x in p.parts), rel=1e-9)


def test_a_spilling_loop_pays_its_spills_once_per_iteration_even_after_a_peeled_dot():
    """gemm_ws runs its first k-step's async_dot at a line of its own before the loop: the loop's iterations still
    pay the whole per-iteration spill charge at the loop's one async_dot (it was halved: spread over both lines)."""
    from tlx_workbench.kernels import gemm_ws
    g = torch.Generator().manual_seed(torch.seed() % 2**31)
    a, b = (torch.randn(512, 512, generator=g).half() for _ in range(2))
    c = torch.empty(512, 512, dtype=torch.float16)
    cfg = dict(gemm_ws.CONFIGS[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = wb.simulate(lambda: gemm_ws.launch(a, b, c, cfg), gpu="H200", ctas=[0], spills=1000, numerics=False)
    spans = [s for s in res.trace.spans if s.name == "register spills" and s.lane[0] == 0]
    by_lane = {}
    for s in sorted(spans, key=lambda s: s.start):
        by_lane.setdefault(s.lane, []).append(s)
    assert by_lane
    for lane, ss in by_lane.items():
        lines = [s.line for s in ss]
        assert len(set(lines)) == 2, lines                 # the peeled dot, then the loop's
        loop = [s for s in ss if s.line == lines[-1]][1:]  # every iteration after the loop's first
        assert loop and all(s.args["bytes"] == pytest.approx(1000 * 128) for s in loop)
