"""--knobs re-run the cell's host code (inputs, descriptors, grid built from the knob), keep every run
and compare them."""
import re

import torch

from magic_cells import HANDSHAKE, TMA_REF, TMA_RELU
from tlx_workbench.magic import KnobPanel


def _panel(shell) -> KnobPanel:
    return shell.magics_manager.registry["TLXMagics"].panels[-1]


def test_a_knob_on_a_tma_kernel_rebuilds_the_descriptor_and_compares_runs(run_cell, shell):
    ran = run_cell(f'%%tlx --sim --check {TMA_REF} --knobs "BM=32,16,64" -o r\n' + TMA_RELU)
    assert ran.ok, ran.error
    x_before = shell.user_ns["x"]
    panel = _panel(shell)
    assert shell.user_ns["r"].knobs == {"BM": 32} and shell.user_ns["r"].check[0].ok
    panel.controls["BM"].value = 16                      # what a click does
    r = shell.user_ns["r"]
    # the descriptor, the input and the launch were rebuilt with BM = 16: the TMA kernel still works
    assert r.failure() is None, r.failure()
    assert r.constexprs["BM"] == 16 and r.check[0].ok and tuple(r.check[0].shape) == (4 * 16, 64)
    assert shell.user_ns["x"] is x_before and x_before.shape == (4 * 32, 64)   # the notebook's own run stays
    panel.controls["BM"].value = 64
    assert shell.user_ns["r"].check[0].ok
    # the comparison: every run in a table, cycles against BM, what changed, two timelines on one axis
    cmp = panel.compare.value
    assert "3 runs compared" in cmp
    rows = re.findall(r"<tr[^>]*><td>(\d)</td><td>(\d+)</td>", cmp)
    assert rows == [("1", "32"), ("2", "16"), ("3", "64")]
    assert cmp.count("class='tlxwb-knob-run'") == 3                     # one dot per run on the BM plot
    assert "BM 16 -&gt; 64" in cmp and "cycles" in cmp
    assert cmp.count("class='tlxwb-timeline-svg'") == 2
    cycles = [p.sim.cycles for p in panel.results]
    assert len(set(cycles)) == 3                                        # the runs really differ
    best = panel.keep()
    assert best.sim.cycles == min(cycles) and shell.user_ns["r"] is best


def test_a_knob_the_launch_passes_literally_still_sets_the_constexpr(run_cell, shell):
    cell = TMA_RELU.replace("BM=BM, BK=BK, STAGES=2", "BM=BM, BK=BK, STAGES=2")
    ran = run_cell(f'%%tlx --sim --check {TMA_REF} --knobs "STAGES=1:3" -o r\n' + cell)
    assert ran.ok, ran.error
    panel = _panel(shell)
    assert panel.constexpr_knobs == {"STAGES"} and not panel.host_knobs
    panel.controls["STAGES"].value = 3
    assert shell.user_ns["r"].constexprs["STAGES"] == 3 and shell.user_ns["r"].check[0].ok


def test_a_knob_nothing_uses_fails_the_cell(run_cell):
    ran = run_cell(f'%%tlx --sim {TMA_REF} --knobs "NOT_USED=1,2"\n' + TMA_RELU)
    assert not ran.ok and "NOT_USED" in ran.html and "neither a constexpr" in ran.html


def test_a_first_run_that_fails_fails_the_cell_and_keeps_the_panel(run_cell, shell):
    # two arrivals expected, one comes: the cell's own run deadlocks; the panel stays to try another count
    ran = run_cell('%%tlx --sim --knobs "ARRIVE_COUNT=2,1" -o r\n' + HANDSHAKE
                   + "handshake[(1,)](z, ARRIVE_COUNT=2)\n", z=torch.zeros(4))
    assert not ran.ok and "DeadlockError" in ran.html
    panel = _panel(shell)
    panel.controls["ARRIVE_COUNT"].value = 1
    assert panel.result.failure() is None and shell.user_ns["r"] is panel.result
    assert "verdict: DeadlockError" in panel.compare.value      # what changed: the verdict


def test_a_knob_named_like_a_host_variable_and_a_kernel_argument_overrides_the_argument(run_cell, shell):
    # the host code's N_TILES is also the kernel's N_TILES, passed by position: the knob sets both
    by_name = TMA_RELU.replace("(desc, out, N_TILES, 0.5,", "(desc, out, scale=0.5, N_TILES=N_TILES,")
    for cell, ref in ((TMA_RELU, TMA_REF), (by_name, TMA_REF.replace("d, out, n, scale:", "d, out:").replace("* scale", "* 0.5"))):
        ran = run_cell(f'%%tlx --sim --check {ref} --knobs "N_TILES=3:9" -o r\n' + cell)
        assert ran.ok, ran.error
        assert shell.user_ns["r"].check[0].ok and shell.user_ns["r"].constexprs["N_TILES"] == 4
        panel = _panel(shell)
        panel.controls["N_TILES"].value = 7
        r = shell.user_ns["r"]
        assert r.failure() is None, r.failure()
        assert r.check[0].ok and tuple(r.check[0].shape) == (7 * 32, 64)


def test_a_knob_on_a_positional_constexpr_replaces_the_argument(run_cell, shell):
    cell = TMA_RELU.replace("relu_scale[(1,)](desc, out, N_TILES, 0.5, BM=BM, BK=BK, STAGES=2)",
                            "relu_scale[(1,)](desc, out, N_TILES, 0.5, BM, BK, 2)")
    ref = TMA_REF.replace("n, scale:", "n, scale, *constexprs:")
    ran = run_cell(f'%%tlx --sim --check {ref} --knobs "STAGES=1:3" -o r\n' + cell)
    assert ran.ok, ran.error
    assert _panel(shell).controls["STAGES"].value == 2 and shell.user_ns["r"].constexprs["STAGES"] == 2  # the cell's
    _panel(shell).controls["STAGES"].value = 3
    r = shell.user_ns["r"]
    assert r.failure() is None and r.constexprs["STAGES"] == 3 and r.check[0].ok
    # the kernel really ran with 3 stages: its ring used three full barriers (the cell's own run, two)
    slots = [{e.slot for e in run.trace.barrier_events if e.barrier == "full"} for run in _panel(shell).results]
    assert slots == [{0, 1}, {0, 1, 2}]


def test_a_misspelt_knob_says_which_name_was_meant(run_cell, shell):
    n = shell.execution_count
    ran = run_cell(f'%%tlx --sim {TMA_REF} --knobs "STAGS=1:3"\n' + TMA_RELU)
    assert not ran.ok and "did you mean STAGES?" in ran.html
    assert f"cell [{n}], line 1" in ran.html and "--knobs" in ran.html       # the line with the knob, shown
    # a host variable is a knob too: its misspelling is caught the same way
    assert "did you mean N_TILES?" in run_cell(f'%%tlx --sim {TMA_REF} --knobs "N_TILE=2,4"\n' + TMA_RELU).html


def test_keep_the_fastest_moves_the_controls_and_the_output_to_the_run_it_keeps(run_cell, shell):
    ran = run_cell(f'%%tlx --sim --check {TMA_REF} --knobs "STAGES=1:3" -o r\n' + TMA_RELU)
    assert ran.ok, ran.error
    panel = _panel(shell)
    for stages in (3, 1):
        panel.controls["STAGES"].value = stages
    by_stages = {r.knobs["STAGES"]: r.sim.cycles for r in panel.results}
    fastest = min(by_stages, key=by_stages.get)
    assert fastest != 1 and panel.controls["STAGES"].value == 1            # the last run is not the fastest
    best = panel.keep()
    assert best.knobs["STAGES"] == fastest and shell.user_ns["r"] is best
    assert panel.controls["STAGES"].value == fastest                       # the slider says the kept run
    assert panel.shown is best and len(panel.results) == 3                 # shown, not run again
    assert f"STAGES={fastest}" in panel.status.value
