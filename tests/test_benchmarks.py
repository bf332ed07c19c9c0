"""The benchmark entry scripts import, and each old GPU experiment's space is the one that ran.

``benchmarks/suite.py`` rebuilds every GPU experiment of the kernel work from the config builders as the
experiments called them (``suite.gemm_ws_config``, ``suite.attention_config``) and the kernels' ``CONFIGS[0]``. The raw JSON each experiment wrote on the
H200 (``benchmarks/results/``) records what it compared (the configs, and the subjects timed in every cell); these
tests hold the rebuilt experiments to it, so a change to a kernel's configs or defaults that would make a re-run
measure something else fails here (pin the old config in ``suite.py`` then). CPU only; the tools beside the suites
(the PTX fingerprint, the MMA model's speed) are run small, the fingerprint on two offline compiles.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import pathlib
import random
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
VENDORS = {"cublas", "sdpa"}


def _load(stem):
    """``benchmarks/<stem>.py`` as a module (the entry scripts import ``suite`` and ``_harness`` by name,
    from ``benchmarks/``, as they do when run)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    if stem == "suite":
        import suite
        return suite
    name = f"bench_{stem}"
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def suite():
    return _load("suite")


@pytest.fixture(scope="module")
def rounds():
    return _load("rounds")


@pytest.fixture(scope="module")
def validate():
    return _load("validate")


def _raw(name):
    return json.loads((BENCH / "results" / name).read_text())


def _cfg(text):
    """A config as the old scripts recorded it (``str(dict)``, or ``str((dict, ctas))``)."""
    v = ast.literal_eval(text)
    return dict(v[0], num_sms=v[1], balance=False) if isinstance(v, tuple) else v


def _expected_cells(suite, rnd):
    """cell label -> the subjects the rebuilt round times there (vendor included, tutorials too)."""
    out = {}
    for p in rnd.parts:
        for shape, d in p.cells:
            label = suite.cell_label(p.kind, shape, d, p.causal)
            subj = out.setdefault(label, {suite.VENDOR[p.kind]})
            subj.update(n for n in p.configs if d in p.dtypes_of(n))
            subj.update(t for t, dts in p.tutorials if d in dts)
    return out


def _timed_cells(raw):
    """cell label -> the subjects an old experiment's JSON has timing rows for."""
    out = {}
    if "timing" in raw:
        for r in raw["timing"]:
            out.setdefault(r["cell"], set()).add(r["subject"])
        return out
    for r in raw.get("gemm_compare", []) + raw.get("attn_compare", []):     # ws_switches' layout
        shape = r["shape"] if "x" in r["shape"] else "x".join(str(x) for x in ast.literal_eval(r["shape"]))
        out.setdefault(f"{shape}{' causal' if r.get('causal') else ''} {r['dtype']}", set()).add(r["kernel"])
    return out


def test_entry_scripts_import_and_list(suite, rounds, validate, capsys):
    assert rounds.main(["--list"]) is None
    listed = capsys.readouterr().out
    for name in suite.ROUNDS:
        assert f"{name}: " in listed
    assert validate.main(["--list"]) is None
    assert "checks" in capsys.readouterr().out
    assert set(suite.ROUNDS) >= {"ws_switches", "persistent", "lazy_rescale", "late_p", "three_groups",
                                 "zigzag", "pinned_softmax", "validate"}


@pytest.mark.parametrize("name", ["ws_switches", "persistent", "lazy_rescale", "late_p", "three_groups",
                                  "zigzag", "pinned_softmax", "validate"])
def test_round_space_is_non_empty_and_one_config_per_name(suite, name):
    from tlx_workbench.explore.space import config_json
    rnd = suite.get(name)
    assert rnd.parts and rnd.ran_as
    for p in rnd.parts:
        space = p.space()
        assert len(space) == len(p.configs) > 0, f"{name} {p.name}: two names for one config"
        assert {config_json(c) for c in space} == {config_json(c) for c in p.configs.values()}
        assert p.cells and all(d in ("float16", "bfloat16") for _, d in p.cells)
        assert rnd.checks.get(p.kind), f"{name} {p.name}: no float64 check shapes"
    # a name means one config throughout an experiment (parts repeat the controls)
    seen = {}
    for p in rnd.parts:
        for n, c in p.configs.items():
            assert seen.setdefault(n, c) == c, f"{name}: {n!r} names two configs"


@pytest.mark.parametrize("name,raw", [("ws_switches", "ws_switches_h200_2026-11-30.json"), ("persistent", "persistent_h200_2026-11-30.json"),
                                      ("lazy_rescale", "lazy_rescale_h200_2026-11-30.json"), ("late_p", "late_p_h200_2026-11-30.json"),
                                      ("three_groups", "three_groups_h200_2026-11-30.json"), ("zigzag", "zigzag_h200_2026-11-30.json"),
                                      ("pinned_softmax", "pinned_softmax_h200_2026-11-30.json")])
def test_round_is_what_ran(suite, name, raw):
    rnd = suite.get(name)
    data = _raw(raw)
    assert rnd.ran_as[0][2] == raw
    configs = rnd.configs()
    recorded = {}
    for key in ("gemm_variants", "attn_variants"):
        recorded.update({n: _cfg(t) for n, t in data.get(key, {}).items()})
    for n, cfg in recorded.items():
        assert n in configs, f"{name}: the round compared {n!r}, the rebuilt round has no such config"
        assert configs[n] == cfg, (f"{name}: {n!r} is not the config that ran (a kernel's configs or defaults "
                                   f"changed? pin the old one in benchmarks/suite.py)")
    assert _expected_cells(suite, rnd) == _timed_cells(data)


def test_ws_switches_attention_is_the_config_list_of_its_commit(suite):
    # attention.CONFIGS at c21212b (ws_switches timed them as ours_cfg0..4; BM=256 at D=64 only)
    then = [dict(BM=128, BN=128, NUM_BUFS=2, LOADER_REGS=24, MMA_REGS=240),
            dict(BM=128, BN=128, NUM_BUFS=3, LOADER_REGS=24, MMA_REGS=240),
            dict(BM=128, BN=64, NUM_BUFS=3, LOADER_REGS=24, MMA_REGS=240),
            dict(BM=128, BN=128, NUM_BUFS=2, LOADER_REGS=40, MMA_REGS=232),
            dict(BM=256, BN=64, NUM_BUFS=2, LOADER_REGS=24, MMA_REGS=240)]
    d128, d64 = suite.get("ws_switches").parts[1:]
    assert list(d128.configs.values()) == then[:4]
    assert list(d64.configs.values()) == then


def test_stream_k_and_validate_subjects(suite):
    from tlx_workbench.kernels import gemm_streamk, gemm_ws
    r4 = suite.get("lazy_rescale").configs()
    assert r4["ws_default"] == gemm_ws.CONFIGS[0]
    assert r4["streamk_g132"] == dict(gemm_streamk.CONFIGS[0], num_sms=132)     # the stream-K subject as first timed
    v = suite.get("validate")
    rows = _raw("validate_h200_2026-11-30.json")["rows"]
    assert [d for _, d in v.parts[0].cells] == [r["dtype"] for r in rows]
    assert v.parts[0].configs == {"ws_128ctas_balanced": gemm_ws.CONFIGS[0],
                                  "ws_132ctas": dict(gemm_ws.CONFIGS[0], num_sms=132, balance=False)}
    assert suite.split_launch(v.parts[0].configs["ws_132ctas"]) == (gemm_ws.CONFIGS[0], dict(num_sms=132, balance=False))


def test_selected_parts_and_checks(suite, rounds):
    rnd = suite.get("ws_switches")
    parts = rounds.selected_parts(rnd, shape=(256, 256, 256))
    assert [p.name for p in parts] == ["gemm"]
    assert parts[0].cells == (((256, 256, 256), "float16"), ((256, 256, 256), "bfloat16"))
    assert rounds.selected_parts(rnd, part="D=64", dtype="bfloat16")[0].cells == (((4, 32, 4096, 64), "bfloat16"),)
    # attention checks only at the head dims the part times; every config in each of its dtypes
    import dataclasses
    r4 = suite.get("lazy_rescale")
    d64 = next(p for p in r4.parts if p.name == "attention D=64")
    d64 = dataclasses.replace(d64, cells=d64.cells + (((4, 32, 4096, 64), "bfloat16"),),
                              dtypes={"pers_lazy": ("float16",)})      # a config timed in one dtype only
    jobs = suite.check_jobs(d64, r4.checks["attention"])
    assert {s[-1] for _, s, _ in jobs} == {64}
    assert ("pers_lazy", (1, 2, 200, 64), "float16") in jobs and ("pers", (1, 2, 200, 64), "bfloat16") in jobs
    assert not any(n == "pers_lazy" and d == "bfloat16" for n, _, d in jobs)


def test_validate_suite_covers_the_library_defaults(validate):
    from tlx_workbench.kernels import attention, gemm_ws
    parts = validate.library_suite()
    configs = [c for p, _ in parts for c in p.configs.values()]
    assert gemm_ws.CONFIGS[0] in configs
    assert all(cfg in configs for cfg in attention.DEFAULTS.values())
    ragged = [s for p, shapes in parts for s in shapes if p.kind == "attention" and s[2] % 128]
    assert ragged, "the suite checks ragged sequence lengths"


def test_side_by_side_binds_each_cell_to_its_own_inputs(suite, monkeypatch):
    """The timed rounds' machinery on the CPU: kernels replaced by torch (a launch into the given
    output), do_bench by a call; every subject of every cell must see that cell's inputs."""
    import dataclasses
    import torch

    def fake_launch_into(kernel, cfg, causal=False):
        if kernel == "attention":
            def attn(q, k, v, o, scale):
                o.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale))
                return o
            return attn
        return lambda a, b, c: c.copy_(a @ b)

    monkeypatch.setattr(suite, "launch_into", fake_launch_into)
    monkeypatch.setattr(suite, "bench_ms", lambda fn: (fn(), 1.0)[1])
    rnd = suite.get("lazy_rescale")
    small = []
    for p in rnd.parts:
        shape = (64, 48, 32) if p.kind == "gemm" else (1, 2, 16, p.cells[0][0][-1])
        shape2 = (32, 16, 8) if p.kind == "gemm" else (1, 1, 8, p.cells[0][0][-1])
        small.append(dataclasses.replace(p, cells=((shape, "float32"), (shape2, "float32")),
                                         dtypes={n: ("float32",) for n in p.configs}))
    dropped = {("attention D=128", "pers_lazy", "float32")}
    groups = suite.side_by_side_groups(rnd, lambda p, n, d: (p.name, n, d) not in dropped, [], parts=small,
                                       device="cpu")
    rows, done = suite.timed(groups, [])
    assert done == rnd.rounds
    cells = {g[1]: set(g[3]) for g in groups}
    assert cells["64x48x32 float32"] == {"cublas", "ws_default", "streamk_g132"}
    assert "pers_lazy" not in cells["1x2x16x128 float32"] and "pers" in cells["1x2x16x128 float32"]
    assert "pers_lazy" in cells["1x2x16x64 float32"]        # dropped in one part only
    assert all(r["err_vs_vendor"] < 1e-5 and r["vs_vendor"] == 1.0 for r in rows), rows


def test_interleaved_rounds_time_every_subject_each_round_in_a_shuffled_order(monkeypatch):
    """Each subject is checked once against the reference, then timed once a round, in a seeded order that varies
    from round to round (a fixed order biased one kernel timed as two subjects by up to 2.6 % on the H200); a wrong
    subject is left untimed."""
    import torch
    H = _load("_harness")
    calls = []
    monkeypatch.setattr(H, "bench_ms", lambda fn, *window: (calls.append(fn), 1.0)[1])
    a, b = torch.randn(16, 8, dtype=torch.float64), torch.randn(8, 4, dtype=torch.float64)
    subjects = {n: (lambda: a @ b) for n in "pqrs"}
    subjects["wrong"] = lambda: a @ b + 1.0
    log = []
    times, errs = H.interleaved_rounds(subjects, a @ b, 6, log, "run {name}", "time {name}", max_err=1e-9)
    assert errs["wrong"] > 1e-3 and all(errs[n] < 1e-12 for n in "pqrs") and not log
    assert all(times[n] == [1.0] * 6 for n in "pqrs") and times["wrong"] == []
    by_fn = {id(f): n for n, f in subjects.items()}
    rounds = [[by_fn[id(f)] for f in calls[4 * r:4 * r + 4]] for r in range(6)]
    assert all(sorted(r) == list("pqrs") for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1 and rounds == [[n for n in H.round_order(subjects, r) if n != "wrong"]
                                                              for r in range(6)]


def test_tile_cost_cells_divide_evenly_and_the_fit_separates_block_tile_and_launch():
    """The tile-cost script's causal cells are whole zig-zag waves on the H200's 132 SMs (8, 16 and 32 pairs a CTA,
    the kernel's own ``persistent_ctas``), so its model holds exactly; its fit recovers a block's, a tile's and the
    launch's cost from noisy whole-launch times (fresh random constants), and its residuals show a cell the model
    misses."""
    import random
    T = _load("attention_tile_costs_h200")
    per = {(z, n): T.schedule(z, n, 132) for z, n in T.CAUSAL_CELLS}
    assert all(s["exact"] and s["ctas"] == 128 for s in per.values())
    assert sorted({s["per_cta"] for s in per.values()}) == [8, 16, 32]
    assert len({s["num_m"] for s in per.values() if s["per_cta"] == 16}) == 5
    rng = random.Random()
    tb, tt, tl_ = rng.uniform(1, 3), rng.uniform(0.5, 4), rng.uniform(3, 20)
    rows = [dict(Z=z, N=n, **s, ms=(s["per_cta"] * (s["num_m"] + 1) * tb + 2 * s["per_cta"] * tt + tl_)
                 * (1 + rng.uniform(-1e-4, 1e-4)) / 1e3) for (z, n), s in per.items()]
    f = T.fit(rows)
    assert abs(f["t_block_us"] - tb) < 1e-3 * tb and abs(f["t_tile_us"] - tt) < 0.05 * tt
    assert abs(f["t_launch_us"] - tl_) < 0.5 and all(abs(c["residual_pct"]) < 0.05 for c in f["cells"])
    rows[2]["ms"] *= 1.05                        # one cell 5 % slower than the model says: its residual shows it
    worst = max(T.fit(rows)["cells"], key=lambda c: abs(c["residual_pct"]))
    assert (worst["Z"], worst["N"]) == (rows[2]["Z"], rows[2]["N"]) and worst["residual_pct"] > 2


def test_sim_speed_suite_runs_tiny_and_checks_every_output(tmp_path):
    """The simulator-speed suite (simulated tutorial launches against torch on the same CPU) end to end at tiny
    shapes: every default cell simulated in waves and one CTA at a time, both outputs checked against torch (and
    equal), the rows written as JSON and as a markdown table; its check fails an output with one wrong tile."""
    import torch
    S = _load("sim_speed")
    path = tmp_path / "sim_speed.json"
    threads = torch.get_num_threads()
    out = S.main(["--tiny", "--one-at-a-time", "--json", str(path), "--no-progress"])
    assert torch.get_num_threads() == threads
    rows = out["rows"]
    assert [r["cell"] for r in rows] == S.DEFAULT_CELLS == ["gemm1024", "gemm2048", "fa2048", "fa4096"]
    for r in rows:
        assert "error" not in r, r.get("trace")
        assert r["ok"] and r["one_equal_to_waves"] and r["checked_runs"] == 3, r
        assert r["ctas"] > 1 and r["wave_leaders"] == 1 and r["waves_fallback"] is None, r
        assert r["sim_s"] > 0 and r["ref_s"] > 0 and r["trace_s"] >= 0 and r["spans"] > 0
        assert r["x_ref"] == r["sim_s"] / r["ref_s"] and r["torch_threads"] == out["torch_threads"]
    assert json.loads(path.read_text())["rows"][0]["cell"] == "gemm1024"
    table = S.markdown(rows)
    assert table.count("\n") == 2 + len(rows) and "| gemm1024 | 256x256x256 |" in table
    assert "one CTA at a time" in table and "≤ 10x" in table
    # a fast wrong simulator does not pass: one 128x128 tile of zeros, or one wrong element
    torch.manual_seed(0)
    a, b = S.gemm_inputs((256, 256, 256))
    ref = a.float() @ b.float()
    good = ref.half()
    assert S.check(good, ref, S.GEMM_TOL)["ok"]
    tile = good.clone()
    tile[:128, :128] = 0
    one = good.clone()
    one[7, 9] += 1.0
    assert not S.check(tile, ref, S.GEMM_TOL)["ok"] and not S.check(one, ref, S.GEMM_TOL)["ok"]
    assert not S.check(torch.full_like(good, float("nan")), ref, S.GEMM_TOL)["ok"]


def test_ptx_fingerprint_ignores_what_the_source_text_moves_and_tells_configs_apart():
    fp = _load("ptx_fingerprint")
    body = "\tmov.u32 %r1, %r2;\n$L__BB0_3:\n\tbra $L__BB0_3;\n"
    one = ".version 8.4\n\t.loc 1 12 4\n// a comment\n" + body + "$L__tmp7:\n.section .debug_info {}\n"
    two = ".version 8.4\n\t.loc 1 40 2\n" + body.replace("BB0_3", "BB0_9") + "\n\n.section .debug_abbrev {}\n"
    assert fp.code_of(one) == fp.code_of(two)
    assert fp.code_of(one) != fp.code_of(one.replace("%r2", "%r3"))
    # real compiles (offline, sm_90): the same config twice gives one digest, another config another
    rows = {label: make for label, _, make in fp.gemm_rows() if label.startswith("gemm_ws sim_")}
    tiny, two_strips = rows["gemm_ws sim_tiny float16"], rows["gemm_ws sim_two_strips float16"]
    assert fp._digest(tiny()) == fp._digest(tiny()) != fp._digest(two_strips())


def test_mma_numerics_speed_checks_every_variant_bit_for_bit(monkeypatch, capsys):
    speed = _load("mma_numerics_speed")
    monkeypatch.setattr(speed, "CASES", {"2d": ((), 3), "cta132": ((3,), 2)})
    monkeypatch.setattr(speed, "ROUNDS", 1)
    speed.main()                  # asserts each variant's bits against the per-slice numpy definition
    out = capsys.readouterr().out
    assert "2d:" in out and "cta132:" in out and out.count("GFLOP/s") == 8


def test_the_cost_model_check_judges_a_cell_whose_do_bench_timed_the_host_on_its_graph_replay(tmp_path):
    """A --gpu row whose do_bench window passes the empty launch's several times over timed the host's launch path
    (an H100: 46.6 µs through Triton's dispatch, 8.4 in graph replay): the check takes its graph time and the empty
    launch's graph cost; a planned launch's row keeps do_bench."""
    cmv = _load("cost_model_validation")
    cell = lambda k: dict(kind="gemm", kernel=k, config="default", shape=[1024, 1024, 1024])  # noqa: E731
    measured = dict(date="d", empty_launch=dict(do_bench_us=4.6, graph_us=1.3), rows=[
        dict(cell=cell("gemm_pingpong"), us=46.6, graph_us=8.4, rounds=[dict(sm_mhz=1980)]),
        dict(cell=cell("gemm_ws"), us=9.8, graph_us=6.0, rounds=[]),
        dict(cell=cell("gemm_pipelined"), us=30.0, rounds=[])])            # no graph time: do_bench stands
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(measured))
    cells = {c["cell"]["kernel"]: c for c in cmv.predict_cells(path)}
    host = cells["gemm_pingpong"]
    assert host["measured_us"] == 8.4 and host["launch_us"] == 1.3 and host["timer"].startswith("graph")
    for k, us in (("gemm_ws", 9.8), ("gemm_pipelined", 30.0)):
        assert cells[k]["measured_us"] == us and "launch_us" not in cells[k] and cells[k]["timer"] == "do_bench"
    graph = {c["cell"]["kernel"]: c for c in cmv.predict_cells(path, timer="graph")}
    assert graph["gemm_ws"]["measured_us"] == 6.0 and "gemm_pipelined" not in graph


def test_the_cost_model_check_takes_each_cell_at_its_median_over_machine_starts(tmp_path):
    """Several --gpu runs (one per machine start): each cell's do_bench and graph time is the median over the runs
    that timed it, the empty launch likewise, and the model that predicts is the GPU the runs were taken on."""
    cmv = _load("cost_model_validation")
    cell = lambda k: dict(kind="gemm", kernel=k, config="default", shape=[2048, 2048, 2048])  # noqa: E731
    rng = random.Random()
    times = [rng.uniform(20, 40) for _ in range(3)]
    paths = []
    for i, us in enumerate(times):
        rows = [dict(cell=cell("gemm_ws"), us=us, graph_us=us - 1, rounds=[dict(sm_mhz=1700 + i)])]
        if i == 0:
            rows.append(dict(cell=cell("gemm_pingpong"), us=50.0, graph_us=49.0, rounds=[]))
        path = tmp_path / f"run{i}.json"
        path.write_text(json.dumps(dict(device="NVIDIA H100 80GB HBM3, 132 SMs", date=f"d{i}", rows=rows,
                                        empty_launch=dict(do_bench_us=4.0 + i, graph_us=1.0 + i))))
        paths.append(path)
    cells = {c["cell"]["kernel"]: c for c in cmv.predict_cells(paths)}
    assert cells["gemm_ws"]["measured_us"] == pytest.approx(sorted(times)[1])
    assert cells["gemm_ws"]["measured_mhz"] == [1700, 1701, 1702] and "median of 3 runs" in cells["gemm_ws"]["source"]
    assert cells["gemm_pingpong"]["measured_us"] == 50.0             # timed by one run: that run's time
    assert cmv.load_measured(paths)["empty_launch"] == dict(do_bench_us=5.0, graph_us=2.0)
    assert cmv.gpu_of(paths[0]) == "H100"


def test_the_fp8_check_says_what_the_models_pick_costs_and_a_long_kernel_keeps_do_bench():
    """The config the model predicts fastest, measured against the fastest measured (ties in the prediction taken at
    their slowest); a 200 µs GEMM whose do_bench and graph replay differ by more than the empty launch's window but
    not by half is judged on do_bench (its host is not what do_bench timed)."""
    cmv = _load("cost_model_validation")
    rng = random.Random()
    measured = [rng.uniform(90, 110) for _ in range(8)]
    rows = [dict(predicted_us=m * rng.uniform(0.9, 1.1), measured_us=m) for m in measured]
    best = min(rows, key=lambda r: r["predicted_us"])
    assert cmv.pick_regret(rows) == pytest.approx(best["measured_us"] / min(measured) - 1)
    rows.append(dict(predicted_us=best["predicted_us"] * 1.0005, measured_us=max(measured) + 1))
    assert cmv.pick_regret(rows) == pytest.approx((max(measured) + 1) / min(measured) - 1)
    empty = dict(do_bench_us=4.4, graph_us=1.2)
    assert not cmv.host_bound(dict(us=201.9, graph_us=184.5), empty)
    assert cmv.host_bound(dict(us=46.6, graph_us=8.4), empty)


def test_the_cost_model_check_keeps_each_launch_of_a_backward_cell_and_re_times_them_to_its_prediction():
    """The attention backward is a call of several launches: its cell's simulated facts keep every launch's, and
    re-timed (``--reuse``) they give the call's prediction again, its time the launches' sum."""
    import warnings
    import tlx_workbench as wb
    cmv = _load("cost_model_validation")
    cmv.GPU = "H200"
    cell = dict(kind="attention_bwd", kernel="attention_bwd", config="default", shape=[1, 2, 256, 128], causal=True)
    sim = cmv.simulate(cell)
    assert [p["kernel"] for p in sim["parts"]][:2] == ["attention_bwd_delta_kernel", "attention_bwd_kernel"]
    again = cmv.timed(cell, json.loads(json.dumps(sim)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline("H200"):
            direct = wb.predict(cmv.make_launch(cell), gpu="H200", samples=cmv.SAMPLES["attention_bwd"])
    assert again.us == pytest.approx(direct.us, rel=1e-9)
    assert again.us == pytest.approx(sum(p.us for p in again.parts) + again.torch_us)
    assert [k.op for k in again.torch_kernels] == [k.op for k in direct.torch_kernels] == ["aten._to_copy"]
    assert cmv.flops(cell) == pytest.approx(10.0 * 2 * 256 * 256 * 128 / 2)


def test_the_backward_cells_are_the_default_configs_median_over_the_runs_that_timed_them():
    cmv = _load("cost_model_validation")
    data = json.loads(cmv.BACKWARD.read_text())
    cells = cmv.backward_cells()
    assert len(cells) == 4 and {c["cell"]["causal"] for c in cells} == {False, True}
    for c in cells:
        ms = sorted(t["ms"] for t in data["time"] if t["kernel"] == "default" and t["shape"] == c["cell"]["shape"]
                    and t["causal"] == c["cell"]["causal"])
        assert len(ms) == 3 and c["measured_us"] == pytest.approx(ms[1] * 1e3)
        assert c["cell"]["cfg"] and cmv.half(c["cell"]) == "validation"


def test_the_cost_model_check_predicts_the_cells_no_run_has_timed_and_its_rows_serve_reuse(tmp_path):
    """``--unmeasured``: every predict cell the --gpu runs lack is predicted (a prediction on record before a GPU
    times it), here the one cell left out of a run that timed all the others; its row keeps the simulated facts,
    so a later check re-times it with --reuse instead of simulating again."""
    cmv = _load("cost_model_validation")
    from predict_cells import CELLS
    left = next(c for c in CELLS if c["kernel"] == "tut:hopper-persistent-gemm-ws-pingpong" and c["shape"][0] == 1024)
    device = "NVIDIA H100 80GB HBM3, 132 SMs"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(dict(device=device, date="d", rows=[dict(cell=c, us=100.0, rounds=[])
                                                                   for c in CELLS if c != left])))
    out = cmv.main(["--measured", str(path), "--unmeasured", "--out", str(tmp_path)])
    assert [r["cell"] for r in out["rows"]] == [left] and out["gpu"] == "H100"
    row = out["rows"][0]
    assert row["predicted_us"] > 0 and row["sim"]["cta_cycles"] > 0 and "measured_us" not in row
    stored = json.loads((tmp_path / "cost_model_unmeasured.json").read_text())
    assert stored["rows"][0]["predicted_us"] == pytest.approx(row["predicted_us"])
    # once timed: --reuse re-times the stored simulation to the same prediction
    path.write_text(json.dumps(dict(device=device, date="d", rows=[dict(cell=left, us=row["predicted_us"] * 1.1,
                                                                        rounds=[])])))
    again = cmv.main(["--measured", str(path), "--no-fp8", "--reuse", str(tmp_path / "cost_model_unmeasured.json"),
                      "--out", str(tmp_path)])
    (timed,) = again["rows"]
    assert timed["cell"] == left and timed["sim"] == row["sim"]
    assert timed["predicted_us"] == pytest.approx(row["predicted_us"]) and timed["error"] == pytest.approx(1 / 1.1 - 1)


def test_the_wave_sweep_sets_the_model_beside_a_measured_sweep(tmp_path):
    """``wave_sweep.py``: a measured sweep's cells predicted at their shapes (the same time ``wb.predict`` gives),
    and each kernel's line through time against waves, from the cells of a wave or more."""
    import warnings
    import tlx_workbench as wb
    ws = _load("wave_sweep")
    cells = [c for c in ws.cells() if c["kernel"] == "attention" and c["shape"][1] in (32, 64, 128)]
    assert [c["shape"][1] * 8 / 132 for c in cells] == pytest.approx([1.94, 3.88, 7.76], abs=0.01)
    rows = [dict(cell=c, do_bench_us=10.0 * h, graph_flushed_us=9.0 * h, graph_warm_us=8.0 * h)
            for c, h in zip(cells, (1, 2, 4))]
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(dict(device="NVIDIA H100", sms=132, date="", rows=rows)))
    res = ws.compare(path, "H100")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline("H100"):
            p = wb.predict(_load("cost_model_validation").make_launch(cells[0]), gpu="H100", samples=8)
    assert res["rows"][0]["predicted_us"] == pytest.approx(p.us)
    a, b = res["lines"]["attention"]["do_bench_us"]
    assert b == pytest.approx(10.0 / (64 * 8 / 132 - 32 * 8 / 132), rel=1e-6) and a == pytest.approx(0.0, abs=1e-6)
    a, b = res["lines"]["attention"]["predicted_us"]
    assert b > 0 and a > 0                      # a wave costs time, and so does the launch once
