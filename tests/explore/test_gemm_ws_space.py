"""The explorer over the library's gemm_ws space at 4096^3 (>= 100 configs), static and simulated
stages, once on a local process pool and once on a local Ray cluster started here: seeded
deadlocks are dropped before any GPU with their wait-for graph, over-budget configs with the
compiler's message and line, and every real config of the space proves its protocol."""
import os

import pytest

from tlx_workbench.explore import Space, Store, explore, library

SHAPE = (4096, 4096, 4096)
pytestmark = pytest.mark.slow


def _space():
    seeds = library.seeded("gemm_ws")
    return Space(library.space("gemm_ws").configs, seeds=seeds["deadlock"] + seeds["over_budget"])


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    path = tmp_path_factory.mktemp("pool") / "store.sqlite"
    return explore("gemm_ws", _space(), shapes=[SHAPE], stages=("static", "simulated"), store=path,
                   backend="process", workers=2, progress=False)


def _verdicts(ex):
    return {e["config_id"]: (e["status"], e.get("dropped_at")) for e in ex.entries(SHAPE)}


def test_the_space_has_at_least_100_configs_and_every_one_gets_a_row_per_stage_it_reached(pooled):
    space = _space()
    assert len(space) >= 100
    entries = pooled.entries(SHAPE)
    assert len(entries) == len(space)
    assert len(pooled.rows("static")) == len(space)
    static_ok = sum(r.ok for r in pooled.rows("static"))
    assert len(pooled.rows("simulated")) == static_ok      # the simulator ran what compiled and fit


def test_seeded_deadlocks_are_dropped_at_the_simulated_stage_with_the_wait_for_graph(pooled):
    from tlx_workbench.explore.space import config_id
    for cfg in library.seeded("gemm_ws")["deadlock"]:
        e = pooled.entry(config_id(cfg), SHAPE)
        assert e["status"] == "dropped" and e["dropped_at"] == "simulated", e
        assert e["reason"].startswith("deadlock") and e["file"].endswith("gemm_ws.py")
        # the loader's wait on the slot the consumers cannot release yet
        assert "barrier_wait(empty[s], parity ^ 1)" in e["diagnosis"] and "waits on full[0]" in e["diagnosis"]


def test_over_budget_configs_are_dropped_at_the_static_stage_with_the_compiler_message(pooled):
    from tlx_workbench.explore.space import config_id
    for cfg in library.seeded("gemm_ws")["over_budget"]:
        e = pooled.entry(config_id(cfg), SHAPE)
        assert e["status"] == "dropped" and e["dropped_at"] == "static", e
        assert "shared memory" in e["reason"] and e["line"] and e["file"].endswith("gemm_ws.py")


def test_every_config_of_the_library_space_proves_its_protocol_and_gets_a_predicted_time(pooled):
    from tlx_workbench.explore.space import config_id
    seeded = {config_id(c) for v in library.seeded("gemm_ws").values() for c in v}
    for e in pooled.entries(SHAPE):
        if e["config_id"] in seeded or e["dropped_at"] == "static":
            continue
        assert e["status"] == "simulated", (e["config"], e["reason"])
        assert e["sim_rel_err"] < 2e-2
        assert e["predicted_us"] > 0
    # the library's default config is among those predicted fastest for its SMEM
    assert pooled.best(SHAPE, by="predicted_us") is not None
    front = pooled.pareto("smem_bytes", SHAPE)
    assert front and all(a["smem_bytes"] < b["smem_bytes"] and a["predicted_us"] > b["predicted_us"]
                         for a, b in zip(front, front[1:]))


def _start_local_ray(ray):
    """A local Ray on loopback, started here. Its raylet has a fixed 30 s to register, which a loaded
    2-core machine can miss (seen while other processes compiled): try again once before failing."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    for attempt in range(3):
        try:
            return ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                            object_store_memory=200 * 2**20)
        except Exception as e:  # noqa: BLE001 - ray raises a bare Exception for this
            ray.shutdown()
            if "timed out during startup" not in str(e) or attempt == 2:
                raise


def test_a_local_ray_cluster_gives_the_same_verdicts(pooled, tmp_path):
    ray = pytest.importorskip("ray")
    _start_local_ray(ray)
    try:
        ex = explore("gemm_ws", _space(), shapes=[SHAPE], stages=("static", "simulated"),
                     store=tmp_path / "ray.sqlite", backend="ray", progress=False)
        assert ex.sweep.backend == "ray" and ex.sweep.ran["static"] == len(_space())
        assert _verdicts(ex) == _verdicts(pooled)
        # a cluster without GPUs: the measured stage is skipped with a warning, the CPU stages stand
        with pytest.warns(UserWarning, match="measured stage skipped"):
            one = explore("gemm_ws", [library.problem("gemm_ws").default], shapes=[SHAPE],
                          store=tmp_path / "ray.sqlite", backend="ray", progress=False)
        assert one.entries(SHAPE)[0]["status"] == "simulated" and one.sweep.unmeasured[SHAPE]
    finally:
        ray.shutdown()
