"""The pytest plugin, run as a user runs it: pytest on a GPU test project, in a subprocess."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

PROJECT = pathlib.Path(__file__).parent / "project"


def _pytest(tmp_path, *args, env=None):
    report = tmp_path / "sim.json"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tlx_workbench.pytest_plugin", "-p", "no:cacheprovider",
                           "-q", "--tlx-sim-report", str(report), *args],
                          cwd=PROJECT, capture_output=True, text=True, timeout=300, env=env)
    data = json.loads(report.read_text()) if report.exists() else None
    return proc, data


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    return _pytest(tmp_path_factory.mktemp("h200"), "--tlx-sim=H200")


def _status(data):
    return {t["test"].split("::")[-1]: (t["status"], t["why"]) for t in data["tests"]}


def test_every_test_gets_its_named_outcome(h200):
    proc, data = h200
    assert data is not None, proc.stdout + proc.stderr
    assert data["gpu"] == "H200" and data["arch"] == "sm_90" and data["complete"] is True
    assert _status(data) == {
        "test_add_matches_torch": ("faithful pass", None),
        "test_add_ir_and_metadata": ("faithful pass", None),          # kernel.asm / metadata are the compiler's
        "test_device_answers_for_the_gpu": ("faithful pass", None),
        "test_wrong_reference_fails": ("failed", "assertion"),
        "test_pipeline_copies": ("faithful pass", None),
        "test_pipeline_dropped_arrive": ("failed", "deadlock"),
        "test_one_slot_barrier_values": ("simulate-only pass", "compiler refused one_slot_load"),
        "test_one_slot_barrier_ir": ("compiler refused", "compiler refused one_slot_load"),
        "test_ballot": ("simulate-only pass", "compiler refused ballot"),   # the compiler crashes on it
        "test_spin_forever": ("failed", "deadlock"),       # a volatile spin nobody ends: diagnosed, no hang
        "test_endless_launches": ("failed", "deadline"),
        "test_one_endless_launch": ("failed", "deadline"),         # stopped inside the one launch
        "test_launch_missing_a_constexpr": ("failed", "launch arguments (fails on a GPU too)"),
        # a pass, but the simulator says the grid left the tail of the output unwritten
        "test_short_grid_passes_with_a_warning": ("faithful pass", "simulator warning: unwritten-output"),
        # the compiler's front end rejects these kernels: the launch raises triton.CompilationError, as on a GPU
        # machine, so tests that expect it pass and one that does not fails (before: simulated anyway)
        "test_a_loop_carried_type_change_raises": ("faithful pass", None),
        "test_a_tlx_helpers_assertion_raises[dtype0]": ("faithful pass", None),
        "test_a_tlx_helpers_assertion_raises[dtype1]": ("faithful pass", None),
        "test_an_fp8_dtype_compiles_and_runs": ("faithful pass", None),
        "test_an_unexpected_front_end_error_fails_the_test": (
            "failed", "the compiler's front end rejected the kernel (fails on a GPU too)"),
        # one interleaving per launch by default: the racing stores agree with themselves
        "test_tickets_in_either_order": ("faithful pass", None),
        "test_racing_stores": ("faithful pass", None),
    }, proc.stdout
    assert data["counts"] == {"faithful pass": 11, "simulate-only pass": 2, "failed": 7, "unsupported op": 0,
                              "compiler refused": 1, "skipped": 0}
    assert proc.returncode == 1          # failures fail the run, as on a GPU


def test_in_parallel_under_xdist_the_table_is_the_whole_runs(h200, tmp_path):
    # pytest -n 2: each worker simulates its own tests; the controller's table and JSON hold every test with
    # the verdict, reason and launches a serial run gives
    files = ["test_vector.py", "test_tlx_pipeline.py"]
    proc, data = _pytest(tmp_path, "--tlx-sim=H200", "-n", "2", *files)
    assert data is not None and data["complete"] is True, proc.stdout + proc.stderr
    serial = {t["test"]: t for t in h200[1]["tests"] if t["test"].split("::")[0] in files}
    assert {t["test"]: (t["status"], t["why"]) for t in data["tests"]} == \
        {k: (t["status"], t["why"]) for k, t in serial.items()}, proc.stdout
    for t in data["tests"]:
        assert [la["kernel"] for la in t["launches"]] == [la["kernel"] for la in serial[t["test"]]["launches"]]
    assert "bringing up nodes" in proc.stdout and "5 faithful pass, 2 failed" in proc.stdout, proc.stdout


def test_launches_are_compiled_then_simulated(h200):
    _, data = h200
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    (add,) = by["test_add_matches_torch"]["launches"]
    assert add["kernel"] == "add_kernel" and add["compiled"] and add["ctas"] == 4 and add["cycles"] > 0
    (one,) = by["test_one_slot_barrier_values"]["launches"]
    assert not one["compiled"] and "barrier allocation must be a descriptor" in one["compiler_refused"]
    assert "barrier allocation must be a descriptor" in by["test_one_slot_barrier_ir"]["message"]
    # the installed compiler crashes on it (in a forked child, so the run goes on), and says why first
    assert "crashed compiling ballot" in by["test_ballot"]["launches"][0]["compiler_refused"]
    assert "vote_ballot_sync" in by["test_ballot"]["launches"][0]["compiler_refused"]


def test_a_front_end_rejection_is_tritons_own_error_and_nothing_is_simulated(h200):
    _, data = h200
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    rec = by["test_an_unexpected_front_end_error_fails_the_test"]
    assert rec["launches"] == []
    assert rec["message"].startswith("CompilationError") and "type stays consistent" in rec["message"]
    assert by["test_an_fp8_dtype_compiles_and_runs"]["launches"][0]["compiled"]


def test_a_passing_test_shows_the_simulators_warnings(h200):
    proc, data = h200
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    rec = by["test_short_grid_passes_with_a_warning"]
    (la,) = rec["launches"]
    assert len(la["warnings"]) == 1 and "out_ptr (1000 float32): 232 of 1000 elements were written by no CTA " \
        "(elements 768-999)" in la["warnings"][0]
    assert "add_kernel: [warning: unwritten-output]" in rec["message"]
    assert any("test_short_grid_passes_with_a_warning" in line and "faithful pass" in line
               and "simulator warning: unwritten-output" in line for line in proc.stdout.splitlines())
    assert by["test_add_matches_torch"]["launches"][0]["warnings"] == []


def test_failures_carry_the_diagnosis_and_the_summary_has_the_table(h200):
    proc, _ = h200
    out = proc.stdout
    # the deadlock's wait-for graph, with the line to change, in the test's failure text
    assert "deadlock in CTA 0" in out and "waits on empty[0]" in out and "a barrier_arrive on it is missing" in out
    assert "ran past its deadline of 1 s" in out
    assert "tlx-sim: H200 (sm_90), simulated on the CPU" in out
    # the ballot: simulated although the installed compiler refuses it, and said in its table row
    assert any("test_tlx_newer_forms.py::test_ballot" in line and "simulate-only pass" in line
               and "compiler refused ballot" in line for line in out.splitlines())
    assert "simulated as bars[0], as newer TLX reads it" in out     # the one-slot form is said, not silent


def test_over_several_schedules_racing_stores_fail_and_atomics_order_does_not(tmp_path):
    proc, data = _pytest(tmp_path, "--tlx-sim=H200", "--tlx-sim-schedules=4", "test_atomics.py")
    assert data is not None, proc.stdout + proc.stderr
    assert _status(data) == {"test_tickets_in_either_order": ("faithful pass", None),
                             "test_racing_stores": ("failed", "simulator finding")}, proc.stdout
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    assert "schedule-divergence" in by["test_racing_stores"]["message"]


def test_ini_option_and_blackwell(tmp_path):
    proc, data = _pytest(tmp_path, "-o", "tlx_sim=B200", "test_vector.py", "-k", "not wrong")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["arch"] == "sm_100"
    assert {t["status"] for t in data["tests"]} == {"faithful pass"}


def test_without_the_option_the_plugin_does_nothing():
    import torch
    from triton.runtime import driver

    from tlx_workbench import pytest_plugin

    class Config:            # what pytest hands pytest_configure when neither --tlx-sim nor tlx_sim is given
        pluginmanager = None

        def getoption(self, name):
            return None

        def getini(self, name):
            return ""
    before = (torch.cuda.is_available, driver._active)
    pytest_plugin.pytest_configure(Config())
    assert (torch.cuda.is_available, driver._active) == before


def test_deadline_with_tasks_as_threads(tmp_path):
    # before: with TLXWB_SIM_THREADS=1 SIGALRM found the main thread waiting for the launch, never at a kernel
    # line, and retried forever: one long launch ran on past its deadline
    proc, data = _pytest(tmp_path, "--tlx-sim=H200", "test_spin.py", "-k", "endless", env={"TLXWB_SIM_THREADS": "1"})
    assert data is not None, proc.stdout + proc.stderr
    assert _status(data) == {"test_endless_launches": ("failed", "deadline"),
                             "test_one_endless_launch": ("failed", "deadline")}, proc.stdout
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    assert by["test_one_endless_launch"]["seconds"] < 30
    assert "ran past its deadline of 2 s" in proc.stdout


def test_a_launch_missing_a_parameter_is_the_tests_error(h200):
    # TLX's test of its persistent attention tutorial launches with a config that lacks RESCALE_OPT: before, the
    # compile child and then the simulator refused it, and the table said "simulator finding"
    _, data = h200
    by = {t["test"].split("::")[-1]: t for t in data["tests"]}
    t = by["test_launch_missing_a_constexpr"]
    assert "missing a required argument: 'FACTOR'" in t["message"] and "on a GPU too" in t["message"]
    assert t["launches"] == []            # neither compiled nor simulated: Triton stops it first
