"""A failing %%tlx cell fails as a cell (Run All and nbval stop there), after showing its diagnosis once."""
import re

import torch

from magic_cells import ADD_ONE, CROSSED, HANDSHAKE, TMEM_ON_HOPPER, line_of
from tlx_workbench.magic import CellFailed, CellResult


def test_deadlock_fails_the_cell_after_showing_its_diagnosis_once(run_cell, shell):
    cell = "%%tlx --sim --check -o r\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n"
    ran = run_cell(cell, z=torch.zeros(4))
    assert not ran.ok and isinstance(ran.error, CellFailed)          # the frontend's Run All stops here
    assert "DeadlockError" in str(ran.error) and "--no-raise" in ran.error.hint
    r = shell.user_ns["r"]                                            # -o still hands the result over
    assert isinstance(r, CellResult) and r is ran.error.result
    # said once: one error box, the wait-for list once, no SimResult or checker copy of it
    assert ran.html.count("class='tlxwb-error'") == 1
    assert ran.html.count("expected arriver task1[0]") == 1
    assert ran.text.count("expected arriver task1[0]") == 1 and "DEADLOCK:" not in ran.text
    # the line shown is the line to change (the one arrive against arrive_count=2); the wait is in the wait-for list
    assert ran.html.count("barrier_arrive(tlx.local_view(bars, 0))") >= 1
    assert ran.html.count("barrier_wait(tlx.local_view(bars, 0), 0)") == 1
    # the short traceback points up at the diagnosis instead of printing it again
    assert len(ran.error._render_traceback_()) == 2


def test_no_raise_and_the_session_default_keep_going(run_cell, shell):
    cell = "%%tlx --sim --no-raise -o r\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n"
    ran = run_cell(cell, z=torch.zeros(4))
    assert ran.ok and "DeadlockError" in ran.html and not shell.user_ns["r"].ok
    shell.run_line_magic("tlx_config", "--raise no")
    ran = run_cell(cell.replace(" --no-raise", ""))
    assert ran.ok and "DeadlockError" in ran.html
    shell.run_line_magic("tlx_config", "--raise yes")
    assert not run_cell(cell.replace(" --no-raise", "")).ok


def test_a_wrong_output_fails_the_cell_and_a_right_one_does_not(run_cell):
    x = torch.arange(64, dtype=torch.float32)
    wrong = run_cell('%%tlx --sim --check --outputs y --ref "lambda x, y: x + 2"\n' + ADD_ONE
                     + "add_one[(1,)](x, y, BLOCK=64)\n", x=x, y=torch.empty(64))
    assert not wrong.ok and "output is wrong" in str(wrong.error)
    right = run_cell('%%tlx --sim --check --outputs y --ref "lambda x, y: x + 1"\n' + ADD_ONE
                     + "add_one[(1,)](x, y, BLOCK=64)\n")
    assert right.ok, right.error


def test_syntax_error_names_the_cell_line_as_the_editor_numbers_it(run_cell, shell):
    n = shell.execution_count
    cell = "%%tlx --sim\nkeep = 1\ndef broken(:\n    pass\n"
    ran = run_cell(cell)
    assert not ran.ok and "keep" not in shell.user_ns                  # nothing ran
    assert f"cell [{n}], line 3" in ran.html                           # line 1 is the %%tlx line
    assert "def broken(:" in ran.html                                  # the line itself is shown
    assert "&amp;lt;" not in ran.html and "ipython-input" not in ran.html
    assert re.search(r"<div[^>]*>syntax error in the cell: Invalid syntax\.</div>", ran.html)   # its own sentence
    assert f"cell [{n}] failed" in str(ran.error)


def test_an_exception_is_located_in_the_cell_and_earlier_definitions_stay(run_cell, shell):
    n = shell.execution_count
    ran = run_cell("%%tlx --sim\ndefined_before = 1\n\nraise ValueError('boom')\n")
    assert not ran.ok and shell.user_ns["defined_before"] == 1
    assert f"cell [{n}], line 4" in ran.html and "raise ValueError(&#x27;boom&#x27;)" in ran.html.replace("'", "&#x27;")


def test_deadlock_box_keeps_its_line_breaks_and_cites_cell_lines(run_cell, shell):
    n = shell.execution_count
    cell = "%%tlx --sim --no-raise\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n"
    ran = run_cell(cell, z=torch.zeros(4))
    wait = line_of(cell, "barrier_wait", magic_line=False)              # cell already starts with %%tlx
    arrive = line_of(cell, "barrier_arrive", magic_line=False)
    assert f"cell [{n}], line {arrive}" in ran.html                       # the line to change leads
    detail = re.search(r"<pre class='tlxwb-error-detail'[^>]*>(.*?)</pre>", ran.html, re.S).group(1)
    assert f"default[0] line {wait}:" in detail and detail.count("\n") >= 3   # one fact per line, not one wall
    assert re.search(r"white-space:pre-wrap", ran.html)
    from tlx_workbench.magics import cells
    assert not any(f in ran.html or f in ran.text for f in cells._LABELS)    # no temp file names


def test_a_deadlock_at_kernel_start_draws_a_stuck_marker_per_task(run_cell):
    cell = "%%tlx --sim --no-raise --timeline --barriers -o r\n" + CROSSED + "crossed[(1,)](z)\n"
    ran = run_cell(cell, z=torch.zeros(4))
    svg = re.search(r"<svg[^>]*class='tlxwb-waitfor'.*?</svg>", ran.html, re.S).group(0)
    stuck = re.findall(r"<g class='tlxwb-stuck' data-lane='([^']+)'", svg)
    assert sorted(stuck) == ["default[0]", "task1[0]"]
    for lane, line in (("default[0]", line_of(cell, "pong, 0), 0)", False)),
                       ("task1[0]", line_of(cell, "ping, 0), 0)", False))):
        assert f"stuck here: line {line}" in svg, lane
    # each waits on the other's barrier, on which nothing has arrived: nothing ran before the deadlock
    assert "ping[0]" in svg and "pong[0]" in svg
    assert svg.count("missing 1 arrival(s)") == 2 and svg.count("no task has arrived on it yet") == 2


def test_missing_constexpr_is_blamed_on_the_launch(run_cell, shell):
    n = shell.execution_count
    cell = "%%tlx --sim -o r\n" + ADD_ONE + "\nadd_one[(1,)](x, y)\n"
    ran = run_cell(cell, x=torch.zeros(64), y=torch.zeros(64))
    assert not ran.ok
    launch = line_of(cell, "add_one[(1,)](x, y)", False)
    assert f"cell [{n}], line {launch}" in ran.html and "add_one[(1,)](x, y)" in ran.html
    assert "BLOCK" in ran.html and "add BLOCK=... to the launch" in ran.html
    assert "@triton.jit" not in re.search(r"<pre class='tlxwb-error-line'.*?</pre>", ran.html, re.S).group(0)


def test_tmem_on_hopper_is_blamed_on_its_local_alloc(run_cell, shell):
    n = shell.execution_count
    cell = "%%tlx --sim --report -o r\n" + TMEM_ON_HOPPER
    ran = run_cell(cell, z=torch.zeros(128, 64))
    assert not ran.ok
    err = shell.user_ns["r"].errors[0]
    assert type(err).__name__ == "CompileError"
    alloc, use = line_of(cell, "tlx.local_alloc", False), line_of(cell, "tlx.local_load", False)
    assert err.line == alloc and f"cell [{n}], line {alloc}" in ran.html
    assert f"line {use}" in err.message and "sm_100" in err.hint


def test_a_kernel_from_an_ordinary_cell_is_located_by_that_cell(run_cell, shell):
    # the kernel defined in a plain cell (as notebook 04 does), launched from a %%tlx cell
    n = shell.execution_count
    assert run_cell(HANDSHAKE, z=torch.zeros(4)).ok
    ran = run_cell("%%tlx --sim --no-raise\nhandshake[(1,)](z, ARRIVE_COUNT=2)\n")
    arrive = line_of(HANDSHAKE, "barrier_arrive", magic_line=False)   # a plain cell has no %%tlx line
    assert f"cell [{n}], line {arrive}" in ran.html
    assert "ipython-input" not in ran.html and "ipykernel" not in ran.html


def _said(ran, words: str) -> int:
    """How often ``words`` is in what a notebook saves as the cell's text: its text/plain outputs, and the
    error output (its value, and its traceback, which IPython prints)."""
    return sum(s.count(words) for s in (ran.text, ran.stdout, str(ran.error)))


def test_a_failing_cell_says_its_diagnosis_once(run_cell):
    # a deadlock: the headline in the box, not again on the CellFailed line
    dead = run_cell("%%tlx --sim --check\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n", z=torch.zeros(4))
    headline = dead.error.error.message.splitlines()[0]
    assert not dead.ok and len(headline) > 30 and _said(dead, headline) == 1
    assert "DeadlockError" in str(dead.error)
    # an out-of-bounds store, found by the checker's run and by the cell's own: said once
    oob = run_cell('%%tlx --sim --check --outputs y --ref "lambda x, y: x + 1"\n' + ADD_ONE
                   + "add_one[(1,)](x, y, BLOCK=128)\n", x=torch.randn(128), y=torch.empty(64))
    assert not oob.ok and _said(oob, "out-of-bounds store") == 1
    # a knob nothing uses
    knob = run_cell('%%tlx --sim --knobs "NOPE=1,2"\n' + ADD_ONE + "add_one[(1,)](x, y, BLOCK=64)\n",
                    x=torch.randn(64), y=torch.empty(64))
    assert not knob.ok and _said(knob, "neither a constexpr") == 1
    # a knob run that fails: one box, one CellFailed (not a CellFailed about a CellFailed)
    bad = run_cell('%%tlx --sim --knobs "BLOCK=128,64"\n' + ADD_ONE + "add_one[(1,)](x, y, BLOCK=128)\n",
                   x=torch.randn(128), y=torch.empty(64))
    assert not bad.ok and _said(bad, "out-of-bounds store") == 1 and _said(bad, "CellFailed") <= 1


def test_a_tma_block_shape_mismatch_names_the_host_line_that_made_the_descriptor(run_cell, shell):
    from magic_cells import TMA_RELU
    cell_body = TMA_RELU.replace("block_shape=[BM, BK]", "block_shape=[BM // 2, BK]")
    for flags in ("--sim", "--sim --report"):            # the simulator's finding, and the compiler's
        n = shell.execution_count
        cell = f"%%tlx {flags} -o r\n" + cell_body
        ran = run_cell(cell)
        assert not ran.ok
        err = shell.user_ns["r"].errors[0]
        made, copied = line_of(cell, "desc = TensorDescriptor", False), line_of(cell, "async_descriptor_load", False)
        assert err.line == made, (flags, err.message)
        assert err.message.startswith("desc's block_shape [16, 64] (set here)"), err.message
        assert f"cell [{n}], line {copied}" in err.message and "ttng" not in err.message
        assert f"cell [{n}], line {made}" in ran.html and "block_shape=[BM // 2, BK]" in ran.html
        assert "block_shape" in err.hint


def test_an_out_of_bounds_store_names_the_tensor_it_ran_past(run_cell, shell):
    n = shell.execution_count
    cell = "%%tlx --sim -o r\n" + ADD_ONE + "add_one[(1,)](x, out, BLOCK=128)\n"
    ran = run_cell(cell, x=torch.randn(128), out=torch.empty(64))
    assert not ran.ok
    err = shell.user_ns["r"].errors[0]
    assert "out-of-bounds store through y_ptr (`out` in the launch)" in err.message, err.message
    assert "index 64 of y_ptr, which has 64 elements" in err.message
    assert err.line == line_of(cell, "tl.store", False) and f"cell [{n}], line {err.line}" in ran.html
    assert "y_ptr" in err.hint


def test_bounds_name_the_argument_a_bad_address_lies_past():
    from tlx_workbench.sim.diagnosis.bounds import argument_ranges, out_of_bounds
    named = argument_ranges({"x_ptr": torch.zeros(16), "y_ptr": torch.zeros(8), "n": 8})
    low = min(named, key=lambda r: r[1])
    high = max(named, key=lambda r: r[2])
    # three floats past the end of the tensor placed highest, and one before the start of the lowest
    err = out_of_bounds(is_store=True, bad=high[2] + 12, n_bad=4, n=12, itemsize=4, named=named, file=None,
                        line=None)
    size = (high[2] - high[1]) // 4
    assert err.argument == high[0] and f"index {size + 3} of {high[0]}, which has {size} elements" in err.message
    err = out_of_bounds(is_store=False, bad=low[1] - 4, n_bad=1, n=16, itemsize=4, named=named, file=None,
                        line=None)
    assert f"through {low[0]}" in err.message and f"index -1 of {low[0]}" in err.message
