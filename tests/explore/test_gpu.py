"""The measured stage on a real GPU: correctness then timing in a watchdog worker, a seeded hang
recorded as hung with the simulator's diagnosis, the worker respawned and the sweep finished."""
import pytest

from tlx_workbench.explore import Space, Store, explore, library
from tlx_workbench.explore.space import config_id

pytestmark = pytest.mark.gpu
SHAPE = (2048, 2048, 2048)


def test_a_sweep_on_the_gpu_measures_and_survives_a_hang(tmp_path):
    default = library.problem("gemm_ws").default
    hang = library.seeded("gemm_ws")["deadlock"][0]
    other = dict(default, STAGES=3)
    store = Store(tmp_path / "s.sqlite")
    # the seed is forced past the simulator's gate, so the GPU sees it after the first good config
    ex = explore("gemm_ws", Space([default, hang, other]), shapes=[SHAPE], store=store, backend="serial",
                 gate=("static",), timeout=10.0, progress=False)
    e = {x["config_id"]: x for x in ex.entries(SHAPE)}
    assert e[config_id(hang)]["status"] == "hung"
    assert "simulator's diagnosis" in e[config_id(hang)]["diagnosis"]
    hung = [r for r in ex.rows("measured") if r.config_id == config_id(hang)][0]
    assert hung.metrics["device_healthy"]
    for cfg in (default, other):
        x = e[config_id(cfg)]
        assert x["status"] == "measured" and x["max_rel_err"] < 2e-2 and x["tflops"] > 100, x
    row = [r for r in ex.rows("measured") if r.config_id == config_id(other)][0]
    assert row.device and row.env.get("triton")            # measured after the respawn, recorded with its device


def test_the_default_gate_keeps_the_seed_off_the_gpu(tmp_path):
    hang = library.seeded("gemm_ws")["deadlock"][0]
    ex = explore("gemm_ws", Space([hang]), shapes=[SHAPE], store=Store(tmp_path / "s.sqlite"), backend="serial",
                 timeout=10.0, progress=False)
    assert ex.entries(SHAPE)[0]["dropped_at"] == "simulated" and not ex.rows("measured")
