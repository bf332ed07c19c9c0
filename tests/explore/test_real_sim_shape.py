"""The simulated stage at the real shape (``explore(..., sim_shape="real")``): a seeded phase bug that needs more
trips round the ring than the small shape makes passes at the small shape and is dropped at the real one; the
option is part of a simulated row's key (small and real rows live side by side, a resumed sweep reuses its own)."""
import random

import pytest

import wrap_kernels as wk
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.explore import Space, Store, explore

SPACE = Space({"PHASE_MOD": [2, 3], "STAGES": [2, 3], "BM": [64], "BK": [64]})
SHAPE = (2048, 256)          # 32 tiles a CTA (10 or more trips round the ring), 4 CTAs


def _sweep(store, sim_shape, seed, stages=("static", "simulated")):
    return explore(wk.problem(), SPACE, shapes=[SHAPE], stages=stages, store=store, backend="serial",
                   progress=False, seed=seed, sim_shape=sim_shape)


@pytest.fixture(scope="module")
def seed():
    return random.randrange(1 << 16)     # fresh inputs and interleaving each run (a failure names it)


@pytest.fixture(scope="module")
def swept(tmp_path_factory, seed):
    store = Store(tmp_path_factory.mktemp("real_sim") / "store.sqlite")
    small = _sweep(store, "small", seed)
    real = _sweep(store, "real", seed)
    return store, small, real


def _by_bug(ex):
    return {(e["config"]["PHASE_MOD"], e["config"]["STAGES"]): e for e in ex.entries()}


def test_the_bug_passes_at_the_small_shape(swept, seed):
    _, small, _ = swept
    for (mod, stages), e in _by_bug(small).items():
        assert e["status"] == "simulated", (seed, e)
        assert e["sim_shape"] == [(2 * stages + 1) * 64, 128] and e["sim_rel_err"] == 0.0, (seed, e)


def test_the_bug_is_dropped_at_the_real_shape(swept, seed):
    _, _, real = swept
    entries = _by_bug(real)
    for (mod, stages), e in entries.items():
        assert e["sim_shape"] == list(SHAPE), (seed, e)
        if mod == 2:
            assert e["status"] == "simulated" and e["sim_rel_err"] == 0.0, (seed, e)
            continue
        assert e["status"] == "dropped" and e["dropped_at"] == "simulated", (seed, e)
        assert e["verdict"] in ("deadlock", "race", "wrong result"), (seed, e)
        assert e["file"] is None or e["file"].endswith("wrap_kernels.py"), (seed, e)
    row = next(r for r in real.rows("simulated") if r.config["PHASE_MOD"] == 2)
    assert row.metrics["checked"] and row.metrics.get("wave_leaders", 1) >= 1


def test_real_rows_are_apart_from_small_rows(swept, seed):
    store, small, real = swept
    # the real sweep simulated every config again and compiled none again (the static rows are shared)
    assert real.sweep.ran == {"static": 0, "simulated": 4, "measured": 0}
    assert real.sweep.reused == {"static": 4, "simulated": 0, "measured": 0}
    sim_rows = store.rows(kernel="ring_copy", stage="simulated")
    assert len(sim_rows) == 8 and len({r.key for r in sim_rows}) == 8
    assert sorted(tuple(r.metrics["sim_shape"]) == SHAPE for r in sim_rows) == [False] * 4 + [True] * 4
    # each Exploration shows its own sweep's rows: the small one still has every config through
    assert all(e["status"] == "simulated" for e in small.entries())
    assert sum(e["status"] == "dropped" for e in real.entries()) == 2


@pytest.mark.parametrize("sim_shape", ["real", "small", SHAPE])
def test_resuming_the_same_sim_shape_runs_nothing(swept, seed, sim_shape):
    store, *_ = swept
    again = _sweep(store, sim_shape, seed)
    assert again.sweep.ran == {"static": 0, "simulated": 0, "measured": 0}
    assert again.sweep.reused["simulated"] == 4
    want = list(SHAPE) if sim_shape != "small" else None
    for e in again.entries():
        assert (e["sim_shape"] == want) if want else (e["sim_shape"] != list(SHAPE)), e
    assert len(store.rows(stage="simulated")) == 8


def test_an_explicit_shape_is_a_third_key(tmp_path, seed):
    cfgs = [c for c in SPACE if c["PHASE_MOD"] == 3 and c["STAGES"] == 2]
    store = Store(tmp_path / "s.sqlite")
    ex = explore(wk.problem(), cfgs, shapes=[SHAPE], stages=("simulated",), store=store, backend="serial",
                 progress=False, seed=seed, sim_shape=(512, 128))
    (e,) = ex.entries()
    # 8 tiles a CTA: trip 3 of a two-slot ring is reached at 512 rows already
    assert e["sim_shape"] == [512, 128] and e["status"] == "dropped", (seed, e)
    again = explore(wk.problem(), cfgs, shapes=[SHAPE], stages=("simulated",), store=store, backend="serial",
                    progress=False, seed=seed, sim_shape="real")
    assert again.sweep.ran["simulated"] == 1 and len(store) == 2


@pytest.mark.parametrize("bad,msg", [("large", "not a shape the simulated stage knows"), ((512,), "1 dimensions"),
                                     ((512, 0), "not a shape"), ((512.5, 64), "not a shape")])
def test_a_bad_sim_shape_fails_before_any_work(bad, msg):
    with pytest.raises(TLXWorkbenchError, match=msg):
        explore(wk.problem(), SPACE, shapes=[SHAPE], stages=("simulated",), store=Store(":memory:"),
                backend="serial", progress=False, sim_shape=bad)


def test_the_magic_forwards_sim_shape():
    from tlx_workbench.magics import options as opts
    from tlx_workbench.magics.errors import CellError
    from tlx_workbench.magics.explore import explore_call
    from tlx_workbench.magics.ipython_magics import TLXMagics

    def kwargs_of(line):
        return explore_call(opts.parse(TLXMagics.tlx_explore, line), {})[1]

    base = "gemm_ws --shapes 4096x4096x4096 --stages static,simulated"
    assert "sim_shape" not in kwargs_of(base)
    assert kwargs_of(base + " --sim-shape real")["sim_shape"] == "real"
    assert kwargs_of(base + " --sim-shape 512x512x1024")["sim_shape"] == (512, 512, 1024)
    with pytest.raises(CellError, match="did you mean real"):
        kwargs_of(base + " --sim-shape reel")
    with pytest.raises(CellError, match="2 dimensions"):
        kwargs_of(base + " --sim-shape 512x512")


def test_a_real_shape_proof_predicts_from_every_cta_as_wb_predict_does(tmp_path):
    """At the real shape the proof simulated every CTA: the row's time is wb.predict's from them (not simulated
    again); a small-shape proof's row runs wb.predict at the real shape."""
    import warnings

    import torch

    import tlx_workbench as wb
    from tlx_workbench.explore.library import gemm_launch, problem
    from tlx_workbench.kernels import gemm_ws
    shape = (384, 256, 192)
    cfg = dict(gemm_ws.SIM_CONFIGS["tiny"])
    rows = {}
    for sim_shape in ("real", "small"):
        ex = explore(problem("gemm_ws"), [cfg], shapes=[shape], stages=("simulated",), store=Store(":memory:"),
                     backend="serial", progress=False, sim_shape=sim_shape)
        (rows[sim_shape],) = ex.rows("simulated")
    real, small = rows["real"].metrics, rows["small"].metrics
    M, N, K = shape
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    from tlx_workbench.explore.stages import PREDICT_SAMPLES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = wb.predict(gemm_launch("gemm_ws"), a, b, cfg, gpu="H200")
        p8 = wb.predict(gemm_launch("gemm_ws"), a, b, cfg, gpu="H200", samples=PREDICT_SAMPLES)
    assert real["predicted_from"].startswith("every CTA")
    assert real["predicted_us"] == pytest.approx(p.us, rel=1e-9)
    assert real["predicted_cycles"] == pytest.approx(p.cycles, rel=1e-9)
    assert small["predicted_from"].startswith("wb.predict at the real shape")
    assert small["predicted_us"] == pytest.approx(p8.us, rel=1e-9)
