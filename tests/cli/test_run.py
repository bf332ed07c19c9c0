"""`tlx-workbench run SCRIPT`: a program unchanged, its launches simulated, a summary, exit codes and JSON."""
import json

import torch

import tlx_workbench as wb
from cli_helpers import SCRIPTS, line_of, valid


def test_a_clean_program_exits_0_with_one_row_per_kind_of_launch(cli):
    ran = cli("run", str(SCRIPTS / "add_clean.py"), "--n", "700")
    assert ran.code == 0, ran
    # the program's own output and the summary on stdout, progress on stderr
    assert "add of 700 elements matches torch on NVIDIA H200" in ran.out, ran
    assert "add_kernel x2  (3, 1, 1)" in ran.out and "clean" in ran.out and "program: ended normally" in ran.out
    assert "[tlx-workbench] add_kernel(3, 1, 1): clean" in ran.err and "[tlx-workbench]" not in ran.out
    doc = valid(ran.doc, "run")
    assert doc["ok"] and doc["exit_code"] == 0 and doc["args"] == ["--n", "700"]
    assert [la["verdict"] for la in doc["launches"]] == ["clean", "clean"]
    la = doc["launches"][0]
    assert la["kernel"] == "add_kernel" and la["grid"] == [3, 1, 1] and la["compiled"]
    assert la["simulation"]["ok"] and la["simulation"]["ctas_simulated"] == 3
    assert la["line"] == line_of(SCRIPTS / "add_clean.py", "def add_kernel")


def test_the_predicted_time_is_wb_predicts(cli):
    # run simulates each launch once, with values, and predicts from it; wb.predict simulates it timing only
    import importlib.util
    spec = importlib.util.spec_from_file_location("add_clean", SCRIPTS / "add_clean.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ran = cli("run", "--seed", "0", str(SCRIPTS / "add_clean.py"), "--n", "3000", "--bench")
    assert ran.code == 0, ran
    launches = valid(ran.doc, "run")["launches"]
    la = launches[0]
    # do_bench answers with the predicted time of the launch it timed (the third)
    assert len(launches) == 3 and f"add: {launches[2]['prediction']['us']:.3f} us" in ran.out, ran
    x, y = torch.randn(3000), torch.randn(3000)
    p = wb.predict(mod.add, x, y, gpu="H200")
    assert la["prediction"]["us"] == p.us and la["prediction"]["cycles"] == p.cycles
    assert la["prediction"]["occupancy"] == p.occupancy and la["prediction"]["grid"] == list(p.grid)


def test_a_deadlock_stops_the_program_as_a_crash_does_with_the_diagnosis(cli):
    script = SCRIPTS / "ring_deadlock.py"
    ran = cli("run", str(script), "--forget-release")
    assert ran.code == 1, ran
    change = line_of(script, "if not FORGET_RELEASE")        # where the missing release belongs
    # stderr: the program's traceback (its own frames: where the launch was made), then the error
    assert "Traceback (most recent call last)" in ran.err and "DeadlockError" in ran.err
    assert f'ring_deadlock.py", line {line_of(script, "scale_ring[(1,)](")}' in ran.err
    assert "runpy" not in ran.err and "tlx_workbench/" not in ran.err.split("DeadlockError")[0]
    assert "scaled 5 tiles" not in ran.out                   # the program stopped there
    # stdout: the summary, with the finding at file:line and the wait-for graph
    assert "scale_ring  (1, 1, 1)      deadlock" in ran.out, ran
    assert f"ring_deadlock.py:{change}: scale_ring(1, 1, 1): deadlock" in ran.out
    assert "waits on empty[0]" in ran.out and "program: stopped by DeadlockError" in ran.out
    doc = valid(ran.doc, "run")
    assert not doc["ok"] and doc["program_error"]["type"] == "DeadlockError"
    (la,) = doc["launches"]
    d = la["simulation"]["deadlock"]
    assert la["verdict"] == "deadlock" and d["line"] == change
    assert {b["barrier"] for b in d["blocked"]} == {"empty[0]", "full[0]"}
    assert any(e["barrier"] == "full[0]" and e["to"]["task"] == "default" for e in d["edges"])
    fix = d["fix"]
    assert fix is not None and fix["verified"] and fix["line"] == change
    assert fix["edits"][0]["new"] == ["                tlx.barrier_arrive(empty[s])"]


def test_the_fixed_program_is_clean_and_json_on_stdout_is_one_document(cli):
    ran = cli("run", "--no-predict", "--json", "-", str(SCRIPTS / "ring_deadlock.py"), json_doc=False)
    assert ran.code == 0, ran
    # the program's own print went to stderr: stdout holds the document alone
    assert "scaled 5 tiles" in ran.err and "scaled" not in ran.out
    (la,) = valid(json.loads(ran.out), "run")["launches"]
    assert la["verdict"] == "clean" and la["prediction"] is None


def test_a_race_is_reported_and_the_program_goes_on(cli):
    script = SCRIPTS / "smem_race.py"
    ran = cli("run", str(script))
    assert ran.code == 1, ran
    read, load = line_of(script, "tile = tlx.local_load"), line_of(script, "tlx.async_descriptor_load(")
    assert "copied" in ran.out and "program: ended normally" in ran.out     # as on a GPU: no hang, no stop
    assert f"smem_race.py:{read}: copy_tile(1, 1, 1): race (and line {load})" in ran.out, ran
    doc = valid(ran.doc, "run")
    (la,) = doc["launches"]
    assert la["verdict"] == "race" and doc["program_error"] is None
    (f,) = [f for f in la["simulation"]["findings"] if f["kind"] == "race"]
    assert (f["line"], f["other_line"]) == (read, load)


def test_a_tlx_tutorial_unchanged_gets_wb_simulates_verdict(cli):
    import importlib
    ran = cli("run", "--no-predict", str(SCRIPTS / "tutorial_gemm.py"))
    assert ran.code == 0 and "tutorial GEMM matches torch" in ran.out, ran
    launches = valid(ran.doc, "run")["launches"]
    with wb.offline("H200"):           # the tutorial asks the driver for its device when imported
        tutorial = importlib.import_module("tlx.tutorials.hopper_gemm_ws")
    a, b = torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 256, dtype=torch.float16)
    res = wb.simulate(tutorial.matmul, a, b, gpu="H200")
    assert [la["kernel"] for la in launches] == [r.kernel for r in res.launches]
    assert [la["verdict"] for la in launches] == ["clean" if r.ok else "finding" for r in res.launches]
    assert [la["grid"] for la in launches] == [list(r.grid) for r in res.launches]


def test_usage_errors_exit_2(cli):
    ran = cli("run", "no_such_script.py", json_doc=False)
    assert ran.code == 2 and "no_such_script.py: no such file" in ran.err, ran
    ran = cli("run", "--sim", "V100", str(SCRIPTS / "add_clean.py"), json_doc=False)
    assert ran.code == 2 and "V100" in ran.err, ran


def test_the_environment_switches_a_plain_python_on(cli, tmp_path):
    # eval "$(tlx-workbench env --sim H200 --json F)"; python SCRIPT: as TRITON_INTERPRET=1 switches Triton's on
    import os
    import subprocess
    import sys
    ran = cli("env", "--sim", "H200", "--json", str(tmp_path / "env.json"), json_doc=False)
    assert ran.code == 0, ran
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    for line in ran.out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = value.strip("'")
    assert env["TLXWB_SIM"] == "H200" and env["TLXWB_JSON"] == str(tmp_path / "env.json")
    proc = subprocess.run([sys.executable, str(SCRIPTS / "ring_deadlock.py"), "--forget-release"], env=env,
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1 and "DeadlockError" in proc.stderr, proc.stderr[-3000:]
    assert "scale_ring  (1, 1, 1)      deadlock" in proc.stderr and "scaled 5 tiles" not in proc.stdout
    (la,) = valid(json.loads((tmp_path / "env.json").read_text()), "run")["launches"]
    assert la["verdict"] == "deadlock"
    env["TLXWB_PREDICT"] = "0"
    proc = subprocess.run([sys.executable, str(SCRIPTS / "smem_race.py")], env=env, capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    # a race: the program ends normally, as on a GPU, but the process exits 1 with the summary on stderr
    assert proc.returncode == 1 and "copied" in proc.stdout and "copy_tile  (1, 1, 1)      race" in proc.stderr


def test_a_kernel_the_front_end_rejects_raises_tritons_compilation_error(cli):
    ran = cli("run", "--no-predict", str(SCRIPTS / "front_end.py"))
    assert ran.code == 0 and "raised CompilationError: True" in ran.out, ran
    assert valid(ran.doc, "run")["launches"] == []          # nothing was simulated
    ran = cli("run", "--no-predict", str(SCRIPTS / "front_end.py"), "--uncaught")
    assert ran.code == 1 and "CompilationError" in ran.err and "program: stopped by CompilationError" in ran.out, ran
    assert valid(ran.doc, "run")["program_error"]["type"] == "CompilationError"


def test_atomics_order_is_no_race_over_schedules_but_racing_stores_are(cli):
    ran = cli("run", "--no-predict", "--schedules", "6", str(SCRIPTS / "tickets.py"))
    assert ran.code == 0 and "tickets taken" in ran.out, ran
    assert "take_ticket's outputs differ between schedules only as its atomics' order" in ran.out
    (la,) = valid(ran.doc, "run")["launches"]
    assert la["verdict"] == "clean" and la["simulation"]["schedules"] == 6 and la["simulation"]["atomic_ordering"]
    ran = cli("run", "--no-predict", "--schedules", "6", str(SCRIPTS / "tickets.py"), "--race")
    assert ran.code == 1, ran
    assert "tickets.py: last_store_wins(1, 1, 1): schedule-divergence" in ran.out
    assert [la["verdict"] for la in valid(ran.doc, "run")["launches"]] == ["clean", "race"]
