"""A %%tlx cell names one GPU: its header, its compile report and its simulation say the same model
(the report once said "sm_90 (H100)" while the run said H200)."""
import html

import pytest

from magic_cells import TMA_REF, TMA_RELU


@pytest.mark.parametrize("target, model", [(None, "H200"), ("H100", "H100"), ("sm_90", "H200")])
def test_the_report_the_simulation_and_the_header_name_one_gpu(run_cell, shell, target, model):
    opt = f"--target {target} " if target else ""
    ran = run_cell(f"%%tlx --sim --report {opt}{TMA_REF} -o r\n" + TMA_RELU)
    assert ran.ok, ran.error
    r = shell.user_ns["r"]
    assert r.target == f"sm_90 ({model})"
    assert (r.report.target, r.report.gpu) == ("sm_90", model)
    assert r.sim.trace.meta["gpu"] == model
    assert f"sm_90 ({model})" in ran.html and f"for sm_90 ({model})" in repr(r.report)
    others = {"H100", "H200", "B200"} - {model}
    assert not any(f"({o})" in ran.html or f" on {o}" in ran.html for o in others), others


def test_a_session_default_target_names_its_model_everywhere(run_cell, shell):
    shell.run_line_magic("tlx_config", "--target H100")
    ran = run_cell(f"%%tlx --sim --memory {TMA_REF} -o r\n" + TMA_RELU)
    assert ran.ok, ran.error
    r = shell.user_ns["r"]
    assert r.target == "sm_90 (H100)" and r.report.gpu == "H100" and r.sim.trace.meta["gpu"] == "H100"
    assert "on H100" in ran.html and "H200" not in ran.html


def test_the_report_names_the_cell_not_the_kernels_cache_file(run_cell, shell):
    # a %%tlx cell's kernel lives in a file IPython invents (/tmp/ipykernel_.../N.py): the report says "cell [n]"
    ran = run_cell(f"%%tlx --sim --report {TMA_REF} -o r\n" + TMA_RELU)
    assert ran.ok, ran.error
    n = shell.user_ns["r"].report.source.file
    assert "ipykernel" in n or "ipython-input" in n                   # what the compiler saw
    assert html.escape(n) not in ran.html and n not in ran.html and n not in ran.text
    assert "in <code>cell [" in ran.html and ", cell [" in ran.text
