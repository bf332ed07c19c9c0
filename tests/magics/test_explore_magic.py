"""%tlx_explore through a real IPython InteractiveShell: a tiny gemm_ws sweep (static + simulated, a
seeded deadlock among the configs) and the lines a user gets wrong, which fail the cell with what to do."""
import pytest

from tlx_workbench.explore import Exploration, Space, explore, library
from tlx_workbench.magic import CellFailed

SHAPE = "4096x4096x4096"


def _configs():
    # two healthy configs that differ in one knob, and the seed whose one-slot ring deadlocks
    sp = library.space("gemm_ws")
    return [sp[0], sp[1], library.seeded("gemm_ws")["deadlock"][0]]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return str(tmp_path_factory.mktemp("explore_magic") / "sweep.sqlite")


@pytest.fixture
def swept(run_cell, shell, store):
    """The sweep, once per module (later runs find every row in the store and are fast)."""
    ran = run_cell(f"%tlx_explore gemm_ws --space cfgs --shapes {SHAPE} --stages static,simulated "
                   f"--store {store} --backend process --workers 2 --no-progress -o ex", cfgs=_configs())
    return ran


def test_a_real_sweep_is_shown_and_kept_under_o(swept, shell):
    assert swept.ok, swept.error
    ex = shell.user_ns["ex"]
    assert isinstance(ex, Exploration) and len(ex.space) == 3
    assert ex.counts()["static"] == {"ok": 3}
    # the deadlock seed is dropped at the simulated stage with its wait-for graph, not run further
    (dead,) = ex.dropped()
    assert dead["config"]["STAGES"] == 1 and dead["dropped_at"] == "simulated"
    assert "deadlock" in dead["reason"] and dead["line"] and "waits on" in dead["diagnosis"]
    assert ex.best(by="predicted_us") in _configs()[:2]
    # shown once, by the Exploration's own static view (summary, table, pictures)
    assert swept.html.count("tlxwb-ex-summary") == 1 and "<img" in swept.html
    assert "Exploration of gemm_ws: 3 configs" in swept.text


def test_the_magic_is_the_python_call(swept, shell, store):
    # the same call from Python finds every row in the store: the magic added nothing of its own
    ex = explore("gemm_ws", _configs(), shapes=[(4096, 4096, 4096)], stages=("static", "simulated"), store=store,
                 backend="serial", progress=False)
    assert ex.sweep.ran == {"static": 0, "simulated": 0, "measured": 0}
    assert ex.entries() and {e["config_id"]: e["status"] for e in ex.entries()} == \
        {e["config_id"]: e["status"] for e in shell.user_ns["ex"].entries()}


def test_a_problem_and_space_of_the_notebook(swept, run_cell, shell, store):
    ran = run_cell(f"%tlx_explore --problem prob --space my_space --shapes {SHAPE} --stages static,simulated "
                   f"--store {store} --backend serial --no-progress -o mine",
                   prob=library.problem("gemm_ws"), my_space=Space(_configs()[:2]))
    assert ran.ok, ran.error
    mine = shell.user_ns["mine"]
    assert len(mine.space) == 2 and not mine.dropped()
    assert mine.sweep.ran["simulated"] == 0          # found in the store


def test_widget_and_background(swept, run_cell, shell, store):
    line = (f"%tlx_explore gemm_ws --space cfgs --shapes {SHAPE} --stages static,simulated --store {store} "
            f"--backend serial")
    ran = run_cell(line + " --widget -o w")
    assert ran.ok, ran.error
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in ran.outputs)
    ran = run_cell(line + " --background -o bg")
    assert ran.ok, ran.error
    bg = shell.user_ns["bg"].wait(120)
    assert not bg.running and len(bg.dropped()) == 1


@pytest.mark.parametrize("line, says, hint", [
    (f"%tlx_explore gemm_ws --shapes {SHAPE} --stagse static", "unrecognized arguments: --stagse",
     "did you mean --stages?"),
    ("%tlx_explore gemm_ws --shapes 4096x4096", "gemm_ws cannot take the shape 4096x4096", "M x N x K"),
    ("%tlx_explore gemm_ws --shapes 4096x40g6x4096", "'4096x40g6x4096' is not a shape", "joined by x"),
    ("%tlx_explore gemm_ws", "needs the problem shapes", f"--shapes {SHAPE}"),
    (f"%tlx_explore gemm_wss --shapes {SHAPE}", "unknown library kernel 'gemm_wss'", "did you mean gemm_ws?"),
    (f"%tlx_explore gemm_ws --shapes {SHAPE} --stages static,simulted", "unknown stage 'simulted'",
     "did you mean simulated?"),
    (f"%tlx_explore gemm_ws --shapes {SHAPE} --search modle", "unknown search 'modle'", "did you mean model?"),
    (f"%tlx_explore gemm_ws --shapes {SHAPE} --backend threads", "unknown backend 'threads'", "process, ray, serial"),
    (f"%tlx_explore gemm_ws --shapes {SHAPE} --gpu H300", "unknown GPU 'H300'", "H200"),
    (f"%tlx_explore --problem nowhere --shapes {SHAPE}", "no variable `nowhere`", "define `nowhere`"),
    (f"%tlx_explore --problem kept --shapes {SHAPE}", "`kept` is not a Problem (an int)", "Problem(name="),
    (f"%tlx_explore gemm_ws --space kept[0] --shapes {SHAPE}", "cannot evaluate `kept[0]`", "expression"),
    (f"%tlx_explore --shapes {SHAPE}", "needs a kernel to explore", "--problem VAR"),
])
def test_a_bad_line_fails_the_cell_with_one_error_box_and_keeps_the_notebook(run_cell, shell, line, says, hint):
    shell.user_ns.pop("out", None)
    ran = run_cell(line + " -o out", kept=7)
    assert not ran.ok and isinstance(ran.error, CellFailed)
    assert says in ran.error.error.message and hint in ran.error.error.hint
    assert ran.html.count("class='tlxwb-error'") == 1
    assert len(ran.error._render_traceback_()) == 2
    # nothing ran: the notebook's variables are as they were, and -o bound nothing
    assert shell.user_ns["kept"] == 7 and "out" not in shell.user_ns


def test_no_raise_shows_the_error_and_goes_on(run_cell, shell):
    ran = run_cell("%tlx_explore gemm_ws --shapes 4096x4096 --no-raise")
    assert ran.ok and "cannot take the shape" in ran.html
    shell.run_line_magic("tlx_config", "--raise no")
    assert run_cell("%tlx_explore gemm_ws --shapes 4096x4096").ok
    shell.run_line_magic("tlx_config", "--raise yes")


def test_help_and_the_list_of_magics(run_cell):
    ran = run_cell("%tlx_explore --help")
    assert ran.ok and "--shapes" in ran.stdout and "--problem" in ran.stdout
    assert "%tlx_explore" in run_cell("%%tlx --help\npass\n").stdout
