"""Seeded protocol bugs in one space: each is dropped at the simulated stage with its diagnosis
(the kernel line, the wait-for graph or both race sites), the correct configs go on, and a
re-run skips every known row."""
import pytest

import explore_kernels as ek
from tlx_workbench.explore import Space, Store, explore

BUGS = {"": None, "early_release": "race", "phase": "deadlock", "expect_bytes": "deadlock",
        "arrive_count": "deadlock"}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeded") / "store.sqlite"
    space = Space({"BUG": list(BUGS), "STAGES": [2, 3], "BM": [64]})
    ex = explore(ek.problem(), space, shapes=[(1024, 64)], stages=("static", "simulated"), store=path,
                 backend="process", workers=2, schedules=2, progress=False)
    return ex, path


def test_every_seeded_bug_is_dropped_at_the_simulated_stage_with_its_diagnosis(swept):
    ex, _ = swept
    entries = {(e["config"]["BUG"], e["config"]["STAGES"]): e for e in ex.entries()}
    assert len(entries) == 10
    for (bug, stages), e in entries.items():
        want = BUGS[bug]
        if want is None:
            assert e["status"] == "simulated", e
            assert e["sim_rel_err"] == 0.0
            continue
        assert e["status"] == "dropped" and e["dropped_at"] == "simulated", e
        assert e["reason"].startswith(want), e["reason"]
        assert e["file"].endswith("sim_seeded_kernels.py") and e["line"], e
        if want == "deadlock":
            assert "waits on" in e["diagnosis"] and "missing" in e["diagnosis"]
        else:
            assert "line 35" in e["diagnosis"] and "line 45" in e["diagnosis"]   # both sides of the race
    # the early release's race leads with the line to change: the release before the read it pays for
    assert entries[("early_release", 2)]["line"] == 44


def test_the_static_stage_passes_every_config_and_records_resources(swept):
    ex, _ = swept
    static = ex.rows("static")
    assert len(static) == 10 and all(r.ok for r in static)
    assert all(r.metrics["smem_bytes"] > 0 and r.metrics["ctas_per_sm"] >= 1 for r in static)


def test_a_rerun_finds_every_row_and_runs_nothing(swept):
    _, path = swept
    space = Space({"BUG": list(BUGS), "STAGES": [2, 3], "BM": [64]})
    again = explore(ek.problem(), space, shapes=[(1024, 64)], stages=("static", "simulated"), store=path,
                    backend="serial", schedules=2, progress=False)
    assert again.sweep.ran == {"static": 0, "simulated": 0, "measured": 0}
    assert again.sweep.reused["static"] == 10 and again.sweep.reused["simulated"] == 10


def test_a_lambda_in_a_problem_runs_here_with_a_warning_instead_of_failing():
    p = ek.problem()
    p.sim_shape = lambda cfg: (4 * cfg["STAGES"] * cfg["BM"], 64)
    with pytest.warns(UserWarning, match="cannot travel"):
        ex = explore(p, [{"BUG": "", "STAGES": 2, "BM": 64}], shapes=[(512, 64)], stages=("simulated",),
                     store=Store(":memory:"), backend="process", progress=False)
    assert ex.entries()[0]["status"] == "simulated"
