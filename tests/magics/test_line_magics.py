"""The line magics fail their cell like %%tlx does: the error box (or the diagnosis) once, then CellFailed;
--no-raise on the line, or %tlx_config --raise no for the session, keeps going."""
import torch

from magic_cells import ADD_ONE, HANDSHAKE
from tlx_workbench.magic import CellFailed


def _define(run_cell, source, **ns):
    ran = run_cell("%%tlx --sim\n" + source, **ns)              # definitions only: nothing launched
    assert ran.ok, ran.error


def test_profile_of_a_deadlock_fails_the_cell_after_its_diagnosis_once(run_cell, shell):
    _define(run_cell, HANDSHAKE, z=torch.zeros(4))
    n = shell.execution_count
    ran = run_cell("%tlx_profile --sim -o tr handshake[(1,)](z, ARRIVE_COUNT=2)")
    assert not ran.ok and isinstance(ran.error, CellFailed)
    assert f"cell [{n}] failed" in str(ran.error) and "DeadlockError" in str(ran.error)
    assert ran.html.count("class='tlxwb-error'") == 1                 # said once
    assert ran.html.count("expected arriver task1[0]") == 1
    assert "tr" in shell.user_ns                                      # -o still hands the trace over
    assert len(ran.error._render_traceback_()) == 2


def test_profile_no_raise_and_the_session_default_keep_going(run_cell, shell):
    _define(run_cell, HANDSHAKE, z=torch.zeros(4))
    ran = run_cell("%tlx_profile --sim --no-raise handshake[(1,)](z, ARRIVE_COUNT=2)")
    assert ran.ok and "DeadlockError" in ran.html
    shell.run_line_magic("tlx_config", "--raise no")
    ran = run_cell("%tlx_profile --sim handshake[(1,)](z, ARRIVE_COUNT=2)")
    assert ran.ok and "DeadlockError" in ran.html


def test_profile_of_a_good_launch_passes(run_cell, shell):
    _define(run_cell, ADD_ONE, x=torch.arange(64, dtype=torch.float32), y=torch.empty(64))
    ran = run_cell("%tlx_profile --sim -o tr add_one[(1,)](x, y, BLOCK=64)")
    assert ran.ok, ran.error
    assert type(shell.user_ns["tr"]).__name__ == "Trace" and "tlxwb-error" not in ran.html


def test_show_of_a_missing_name_fails_the_cell(run_cell, shell):
    n = shell.execution_count
    ran = run_cell("%tlx_show no_such_trace")
    assert not ran.ok and isinstance(ran.error, CellFailed) and f"cell [{n}] failed" in str(ran.error)
    assert ran.html.count("class='tlxwb-error'") == 1 and "no_such_trace" in ran.html
    ran = run_cell("%tlx_show --no-raise no_such_trace")
    assert ran.ok and ran.html.count("class='tlxwb-error'") == 1


def test_bench_of_a_bad_line_fails_the_cell(run_cell):
    # no name to launch: fails the same way with or without a GPU
    ran = run_cell("%tlx_bench no_such_kernel[(1,)](x)")
    assert not ran.ok and isinstance(ran.error, CellFailed)
    assert ran.html.count("class='tlxwb-error'") == 1
    assert run_cell("%tlx_bench --no-raise no_such_kernel[(1,)](x)").ok


def test_config_with_a_bad_value_or_option_fails_the_cell(run_cell, shell):
    ran = run_cell("%tlx_config --target sm_99")
    assert not ran.ok and isinstance(ran.error, CellFailed) and "sm_99" in ran.html
    ran = run_cell("%tlx_config --seeed 3")
    assert not ran.ok and "did you mean --seed?" in ran.html
    assert run_cell("%tlx_config --no-raise --target sm_99").ok
    # --raise no on the line already counts for it; a line that fails changes no setting
    assert run_cell("%tlx_config --raise no --target sm_99").ok
    assert shell.run_line_magic("tlx_config", "")["raise"] is True
    assert run_cell("%tlx_config --raise no").ok and run_cell("%tlx_show no_such_trace").ok
    assert run_cell("%tlx_config --raise yes").ok and not run_cell("%tlx_show no_such_trace").ok


def test_help_alone_in_a_cell_and_on_a_line_prints_the_usage_of_what_exists(run_cell, shell):
    for source in ("%%tlx --help\n", "%%tlx --help", "%%tlx -h\n\n", "%tlx --help"):
        ran = run_cell(source)
        assert ran.ok, (source, ran.error)
        usage = ran.stdout.split("\n\n")[1].strip()
        assert usage.startswith("%%tlx [--target TARGET]"), usage        # the magic as it is typed
        assert "%tlx_explore" in ran.stdout and "Other magics" in ran.stdout
    # the line form does nothing else: a kernel needs a cell, and the error says so
    ran = run_cell("%tlx --sim")
    assert not ran.ok and "%%tlx (two %)" in ran.html
    # a %%tlx cell with a body is the cell magic, as before
    ran = run_cell("%%tlx --sim\nkept = 3\n")
    assert ran.ok and shell.user_ns["kept"] == 3
