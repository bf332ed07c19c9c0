"""`tlx-workbench check | compile | predict | explore | schema`: exit codes, text, and JSON against the schema."""
import json
import subprocess
import sys

import torch

import tlx_workbench as wb
from cli_helpers import SCRIPTS, line_of, valid
from tlx_workbench.json_schema import SCHEMA


def test_check_a_deadlocking_launch_exits_1_with_the_line_to_change(cli):
    script = SCRIPTS / "ring_deadlock.py"
    ran = cli("check", str(script), "--", "--forget-release")
    assert ran.code == 1, ran
    change = line_of(script, "if not FORGET_RELEASE")
    assert "CheckResult(scale_ring: 1 error(s)" in ran.out and f"deadlock at ring_deadlock.py:{change}" in ran.out
    assert "1 launch(es) captured" in ran.err
    doc = valid(ran.doc, "check")
    (chk,) = doc["checks"]
    assert not chk["ok"] and chk["simulated"] and chk["findings"][0]["lines"][0]["line"] == change
    assert chk["simulation"]["deadlock"]["line"] == change


def test_check_the_fixed_kernel_is_clean(cli):
    ran = cli("check", str(SCRIPTS / "ring_deadlock.py") + "::scale_ring")
    assert ran.code == 0, ran
    (chk,) = valid(ran.doc, "check")["checks"]
    assert chk["ok"] and chk["kernel"] == "scale_ring" and chk["findings"] == []


def test_compile_prints_the_report_and_its_json(cli):
    ran = cli("compile", str(SCRIPTS / "add_clean.py") + "::add_kernel", "--target", "sm_100",
              "--signature", "x_ptr=*fp32:16,y_ptr=*fp32:16,out_ptr=*fp32:16,n=i32", "--config", "BLOCK=512")
    assert ran.code == 0, ran
    assert "CompileReport add_kernel for sm_100 (B200)" in ran.out and "add_clean.py:" in ran.out
    doc = valid(ran.doc, "compile")
    (rep,) = doc["reports"]
    assert doc["target"] == "sm_100" and rep["target"] == "sm_100" and rep["constexprs"] == {"BLOCK": 512}
    assert rep["resources"]["num_warps"] == 4 and rep["resources"]["registers"] > 0


def test_compile_a_launch_the_script_makes_with_a_config(cli):
    # the script's launch, at the shape it makes, with one constexpr set from the command line: the descriptor's
    # block no longer matches the buffer, and the compiler's refusal is a finding at the copy's line
    script = SCRIPTS / "ring_deadlock.py"
    ran = cli("compile", f"{script}::scale_ring", "--target", "sm_90", "--config", "BM=128")
    assert ran.code == 1, ran
    assert f"ring_deadlock.py:{line_of(script, 'tlx.async_descriptor_load(')}" in ran.err
    doc = valid(ran.doc, "compile")
    assert doc["reports"] == [] and "block_shape" in " ".join(doc["notes"])
    ran = cli("compile", f"{script}::scale_ring", "--target", "sm_90")
    assert ran.code == 0, ran
    (rep,) = valid(ran.doc, "compile")["reports"]
    assert {b["name"] for b in rep["barriers"]} >= {"full", "empty"}
    assert [t["name"] for t in rep["tasks"]][:1] == ["default"] and len(rep["tasks"]) == 2


def test_predict_gives_wb_predicts_time(cli):
    import importlib.util
    spec = importlib.util.spec_from_file_location("add_clean_p", SCRIPTS / "add_clean.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ran = cli("predict", f"{SCRIPTS / 'add_clean.py'}::add_kernel", "--", "--n", "5000")
    assert ran.code == 0, ran
    assert "Prediction(add_kernel on H200, grid=(20, 1, 1)" in ran.out
    (p,) = valid(ran.doc, "predict")["predictions"]
    ref = wb.predict(mod.add, torch.randn(5000), torch.randn(5000), gpu="H200")
    assert p["us"] == ref.us and p["grid"] == [20, 1, 1]


def test_predict_in_time_order_gives_wb_predicts_time_order(cli):
    """``--order time``: the warp-specialized launch predicted with its tasks in simulated-time order, as
    ``wb.predict(order="time")`` predicts it; an order the simulator has not is a usage error naming the orders."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ring_p", SCRIPTS / "ring_deadlock.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ran = cli("predict", f"{SCRIPTS / 'ring_deadlock.py'}::scale_ring", "--order", "time")
    assert ran.code == 0, ran
    (p,) = valid(ran.doc, "predict")["predictions"]
    x = torch.randn(5 * 64, 64, dtype=torch.float16)
    ref = wb.predict(lambda: mod.scale(x, 0.5), gpu="H200", order="time")
    assert p["us"] == ref.us
    bad = cli("predict", f"{SCRIPTS / 'ring_deadlock.py'}::scale_ring", "--order", "earliest", json_doc=False)
    assert bad.code == 2 and "--order 'earliest'" in bad.err and "seeded, time" in bad.err


def test_explore_sweeps_into_the_store_and_names_it(cli, tmp_path):
    store = tmp_path / "sweep.sqlite"
    ran = cli("explore", "gemm_ws", "--shapes", "256x256x256", "--stages", "static,simulated", "--limit", "1",
              "--backend", "serial", "--store", str(store))
    assert ran.code == 0, ran
    assert ran.out.rstrip().endswith(f"store: {store}") and "Exploration of gemm_ws: 1 configs" in ran.out
    assert "gemm_ws simulated [256, 256, 256]" in ran.err          # the progress bar
    ex = valid(ran.doc, "explore")["exploration"]
    (e,) = ex["entries"]
    assert ex["store"] == str(store) and e["status"] == "simulated" and e["predicted_us"] > 0
    assert ex["best"] == [{"shape": [256, 256, 256], "measured": None, "predicted": e["config"]}]


def test_schema_prints_the_published_schema():
    out = subprocess.run([sys.executable, "-m", "tlx_workbench.cli", "schema"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and json.loads(out.stdout) == SCHEMA


def test_usage_errors_exit_2(cli):
    ran = cli("compile", str(SCRIPTS / "add_clean.py"), json_doc=False)
    assert ran.code == 2 and "name the kernel, FILE::kernel" in ran.err, ran
    ran = cli("check", str(SCRIPTS / "no_launch.py"), json_doc=False)
    assert ran.code == 2 and "launches no kernel when run as a script" in ran.err, ran
    ran = cli("check", f"{SCRIPTS / 'add_clean.py'}::nope", json_doc=False)
    assert ran.code == 2 and "no kernel named nope (it launches add_kernel)" in ran.err, ran
    ran = cli("explore", "no_such_kernel", "--shapes", "64x64x64", json_doc=False)
    assert ran.code == 2 and "no library problem named" in ran.err, ran


def test_check_and_compile_a_tlx_tutorial_unchanged(cli):
    ran = cli("check", str(SCRIPTS / "tutorial_gemm.py"))
    assert ran.code == 0, ran
    (chk,) = valid(ran.doc, "check")["checks"]
    assert chk["kernel"] == "matmul_kernel_tlx_ws" and chk["ok"] and chk["simulated"]
    assert "the script stopped" in " ".join(valid(ran.doc, "check")["notes"])   # captured: outputs not computed
    ran = cli("compile", f"{SCRIPTS / 'tutorial_gemm.py'}::matmul_kernel_tlx_ws", "--target", "sm_90")
    assert ran.code == 0, ran
    (rep,) = valid(ran.doc, "compile")["reports"]
    assert rep["kernel"] == "matmul_kernel_tlx_ws" and len(rep["tasks"]) >= 2 and rep["barriers"]
