"""%%tlx and friends through a real IPython InteractiveShell, on the simulator and the offline compiler."""
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import tlx_workbench as wb
from tlx_workbench.magic import CellResult, KnobPanel, parse_knobs

# a warp-specialized vector add in TLX style: two async tasks, each adds one pair
ADD_CELL = '''
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

@triton.jit
def ws_add(x_ptr, y_ptr, z_ptr, a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(z_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
        with tlx.async_task(num_warps=4):
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=m) + tl.load(b_ptr + offs, mask=m), mask=m)
'''
# a handshake through one mbarrier: the consumer waits until the producer arrived
HANDSHAKE_CELL = '''
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

@triton.jit
def handshake(out_ptr, ARRIVE_COUNT: tl.constexpr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=ARRIVE_COUNT)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(tlx.local_view(bars, 0), 0)
            tl.store(out_ptr, 1.0)
        with tlx.async_task(num_warps=4):
            tlx.barrier_arrive(tlx.local_view(bars, 0))
'''
LAUNCH = "ws_add[(triton.cdiv(n, BLOCK_),)](x, y, z, a, b, c, n, BLOCK=BLOCK_)\n"


@pytest.fixture
def shell():
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tlx_magic")
    g = torch.Generator().manual_seed(11)
    n = 1000
    sh.user_ns.update(n=n, BLOCK_=256, x=torch.randn(n, generator=g), y=torch.randn(n, generator=g),
                      a=torch.randn(n, generator=g), b=torch.randn(n, generator=g),
                      z=torch.empty(n), c=torch.empty(n))
    sh.run_line_magic("tlx_config", "--reset")
    yield sh


def _html(cap):
    return "".join(o.data.get("text/html", "") + o.data.get("text/plain", "") for o in cap.outputs)


def test_help_lists_the_options(shell):
    with capture_output() as cap:
        shell.run_line_magic("pinfo", "%%tlx")
    doc = cap.stdout
    for opt in ("--sim", "--gpu", "--check", "--bench", "--profile", "--knobs", "--memory", "--ir", "--timeline",
                "--barriers", "-o"):
        assert opt in doc, opt


def test_dash_dash_help_prints_usage_and_runs_nothing(shell):
    with capture_output() as cap:
        shell.run_cell("%%tlx --help\nran_anyway = 1\n")
    assert "%tlx [--target TARGET]" in cap.stdout and "--knobs" in cap.stdout
    assert "ran_anyway" not in shell.user_ns
    for magic in ("tlx_bench", "tlx_profile", "tlx_show", "tlx_config"):
        with capture_output() as cap:
            shell.run_line_magic(magic, "--help")
        assert f"%{magic}" in cap.stdout


def test_sim_check_keeps_the_result_and_defines_the_kernel(shell):
    with capture_output() as cap:
        shell.run_cell_magic("tlx", '--sim --check --outputs z --ref "lambda x, y, z, a, b, c, n: x + y" -o r',
                             ADD_CELL + LAUNCH)
    r = shell.user_ns["r"]
    assert isinstance(r, CellResult) and r.mode == "sim"
    assert "ws_add" in shell.user_ns                      # defined in the notebook like a normal cell
    assert r.sim is not None and r.sim.ok
    assert r.check and r.check[0].ok, r
    assert r.findings is not None and r.findings.ok      # the barrier-protocol checker ran: nothing to say
    x, y = shell.user_ns["x"], shell.user_ns["y"]
    torch.testing.assert_close(shell.user_ns["z"], x + y)
    assert isinstance(r.trace, wb.Trace)
    assert "tlxwb-cell" in _html(cap)


def test_sim_check_catches_a_wrong_reference_with_tiles(shell):
    shell.run_cell_magic("tlx", '--sim --check --outputs c --ref "lambda x, y, z, a, b, c, n: a - b" --no-raise -o r',
                         ADD_CELL + LAUNCH)
    r = shell.user_ns["r"]
    assert not r.ok
    assert r.check[0].tile == (256,) and len(r.check[0].bad_tiles) == 4


def test_syntax_error_keeps_the_namespace(shell):
    shell.user_ns["keep_me"] = 42
    with capture_output() as cap:
        shell.run_cell_magic("tlx", "--sim --no-raise", "def broken(:\n    pass\n")
    assert shell.user_ns["keep_me"] == 42
    assert "CellError" in _html(cap) and "syntax error" in _html(cap)


def test_exception_in_cell_is_a_clean_error_and_earlier_definitions_stay(shell):
    with capture_output() as cap:
        shell.run_cell_magic("tlx", "--sim --no-raise", "defined_before = 1\nraise ValueError('boom')\n")
    assert shell.user_ns["defined_before"] == 1
    out = _html(cap)
    assert "CellError" in out and "boom" in out and "variables defined before the error are kept" in out


def test_deadlock_shows_the_simulator_diagnosis(shell):
    # two arrivals expected, one comes: the consumer waits forever
    with capture_output() as cap:
        shell.run_cell_magic("tlx", "--sim --check --no-raise -o r",
                             HANDSHAKE_CELL + "handshake[(1,)](z, ARRIVE_COUNT=2)\n")
    r = shell.user_ns["r"]
    assert not r.ok and r.errors and type(r.errors[0]).__name__ == "DeadlockError"
    assert r.findings is not None and not r.findings.ok      # the checker names the protocol error too
    assert "DeadlockError" in _html(cap)
    assert shell.user_ns["n"] == 1000


def test_definitions_only_cell(shell):
    shell.run_cell_magic("tlx", "-o r", "VALUE_ONLY = 3\n")
    assert shell.user_ns["VALUE_ONLY"] == 3
    assert "definitions only" in repr(shell.user_ns["r"])


def test_bad_option_is_reported_and_fails_the_cell(shell):
    with capture_output() as cap:
        res = shell.run_cell("%%tlx --no-such-option\nx1 = 1\n")
    assert "CellError" in _html(cap) and not res.success and "x1" not in shell.user_ns


def test_report_memory_ir_through_offline_compile(shell):
    shell.run_cell_magic("tlx", "--sim --report --memory --ir -o r", ADD_CELL + LAUNCH)
    r = shell.user_ns["r"]
    assert not r.errors, r.errors
    assert r.report is not None and r.report.resources.num_warps >= 8
    html = r._repr_html_()
    assert "ttgir" in html.lower() or "IR" in html


def test_knobs_recompute_in_place(shell):
    launch = 'ws_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, z, a, b, c, n, BLOCK=256)\n'
    shell.run_cell_magic("tlx", '--sim --check --outputs z --ref "lambda x, y, z, a, b, c, n: x + y" '
                                '--knobs "BLOCK=128,256" -o r', ADD_CELL + launch)
    magics = shell.magics_manager.registry["TLXMagics"]
    panel = magics.panels[-1]
    assert isinstance(panel, KnobPanel)
    assert shell.user_ns["r"].constexprs["BLOCK"] == 256          # the launch's own value is the start
    panel.controls["BLOCK"].value = 128                          # what a click does
    r = shell.user_ns["r"]
    assert r.constexprs["BLOCK"] == 128 and r.check[0].ok and r.check[0].tile == (128,)
    assert len(panel.results) == 2


def test_knob_with_a_fixed_grid_shows_the_unwritten_tiles(shell):
    # the grid is computed for BLOCK_=256: with BLOCK=128 half the output is never written
    shell.run_cell_magic("tlx", '--sim --check --outputs z --ref "lambda x, y, z, a, b, c, n: x + y" '
                                '--knobs "BLOCK=256,128" -o r', ADD_CELL + LAUNCH)     # its own run is correct
    panel = shell.magics_manager.registry["TLXMagics"].panels[-1]
    panel.controls["BLOCK"].value = 128
    c = shell.user_ns["r"].check[0]
    assert not c.ok and c.unwritten_tiles == [(4,), (5,), (6,), (7,)]


def test_parse_knobs_kinds_and_errors():
    ks = parse_knobs("BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER")
    assert [k.kind for k in ks] == ["choice", "range", "flag"]
    assert ks[1].widget(3).value == 3 and ks[1].widget().min == 2
    with pytest.raises(wb.TLXWorkbenchError):
        parse_knobs("S=5:2")


def test_config_sets_session_defaults(shell):
    cfg = shell.run_line_magic("tlx_config", "--mode sim --timeout 7")
    assert cfg["mode"] == "sim" and cfg["timeout"] == 7
    shell.run_cell_magic("tlx", "-o r", ADD_CELL + LAUNCH)
    assert shell.user_ns["r"].mode == "sim"


def test_profile_line_magic_without_gpu_gives_the_simulated_trace(shell):
    shell.run_cell_magic("tlx", "--sim", HANDSHAKE_CELL)
    shell.run_line_magic("tlx_profile", "--sim -o tr handshake[(1,)](z, ARRIVE_COUNT=1)")
    tr = shell.user_ns["tr"]
    assert isinstance(tr, wb.Trace) and tr.source == "sim" and tr.spans


def test_show_and_bench_line_magics(shell):
    shell.run_cell_magic("tlx", "--sim -o r", ADD_CELL + LAUNCH)
    with capture_output() as cap:
        shell.run_line_magic("tlx_show", "r.trace")
    assert "tlxwb-cell" in _html(cap)
    if not torch.cuda.is_available():
        from tlx_workbench.magic import CellFailed
        with capture_output() as cap, pytest.raises(CellFailed):     # shown, then the cell fails
            shell.run_line_magic("tlx_bench", LAUNCH.strip())
        assert "NoGPUError" in _html(cap) and "--sim" in _html(cap)
        with capture_output() as cap:
            shell.run_line_magic("tlx_bench", "--no-raise " + LAUNCH.strip())
        assert "NoGPUError" in _html(cap)


def test_every_view_option_in_sim_mode_for_blackwell(shell):
    shell.run_cell_magic("tlx", "--sim --target sm_100 --report --memory --ir --timeline --barriers --bench "
                                "--profile --seed 3 -o r", ADD_CELL + LAUNCH)
    r = shell.user_ns["r"]
    assert not r.errors, r.errors
    assert r.report.target == "sm_100" and r.report.arch == 100
    assert r.sim is not None and r.sim.seed == 3
    assert any("cost model" in n for n in r.notes) and any("--bench needs a GPU" in n for n in r.notes)
    assert set(r.show) == {"report", "memory", "ir", "timeline", "barriers"}
    html = r._repr_html_()
    assert "not available" not in html          # every view rendered (widgets' static HTML)
    assert len(html) > 2000


def test_magic_module_re_exports_the_magics_package():
    # tlx_magic, the tests and notebooks import from tlx_workbench.magic; the code lives in tlx_workbench.magics
    import tlx_workbench.magic as magic
    import tlx_workbench.magics as magics
    for name in magics.__all__:
        assert getattr(magic, name) is getattr(magics, name), name
    assert magic.load_ipython_extension.__module__ == "tlx_workbench.magics.ipython_magics"


def test_split_cell_finds_the_launch_only_in_the_last_statement():
    from tlx_workbench.magic import split_cell
    body, node = split_cell("k = 2\nf(k,\n  3)\n")
    assert body == "k = 2\n" and node.value.func.id == "f" and node.lineno == 2
    body, node = split_cell("f(1)\nk = 2\n")          # a call that is not last is part of the body
    assert body == "f(1)\nk = 2\n" and node is None
    with pytest.raises(SyntaxError):
        split_cell("def f(:\n")


def test_declared_options_are_the_parsers_options(shell):
    # each magic's option tuple (options.py) becomes its argparse usage, in declaration order
    from tlx_workbench.magics import options
    magics = shell.magics_manager.registry["TLXMagics"]
    for name, declared in [("tlx", options.TLX_OPTIONS), ("tlx_bench", options.BENCH_OPTIONS),
                           ("tlx_profile", options.PROFILE_OPTIONS), ("tlx_show", options.SHOW_OPTIONS),
                           ("tlx_config", options.CONFIG_OPTIONS)]:
        parser = getattr(magics, name).parser
        flags = [a.option_strings[-1] if a.option_strings else a.dest for a in parser._actions if a.dest != "help"]
        assert flags == [d.args[-1] for d in declared], name


def test_launch_options_are_not_listed_as_constexprs(shell):
    launch = "ws_add[(triton.cdiv(n, BLOCK_),)](x, y, z, a, b, c, n, BLOCK=BLOCK_, num_warps=4)\n"
    with capture_output():
        shell.run_cell_magic("tlx", "--sim -o r", ADD_CELL + launch)
    r = shell.user_ns["r"]
    assert r.sim is not None and r.sim.ok
    assert r.constexprs == {"BLOCK": 256}            # the kernel's specialization; num_warps is a launch option
    assert "num_warps" not in repr(r).split("constexprs:")[1].splitlines()[0]


def test_error_repr_html_escapes_the_location_once_and_keeps_line_breaks(tmp_path):
    # a result or error displayed on its own (not through %%tlx) uses TLXWorkbenchError's own HTML
    import re
    src = tmp_path / "k<1>.py"
    src.write_text("a = 1\nb = a < 2\n")
    err = wb.TLXWorkbenchError("first line\nsecond line", file=str(src), line=2, hint="change b")
    html = err._repr_html_()
    assert f"{src.parent}/k&lt;1&gt;.py:2" in html and "&amp;lt;" not in html
    assert "b = a &lt; 2" in html                                        # the line shown, escaped once
    msg = re.search(r"<div style='white-space:pre-wrap'>(.*?)</div>", html, re.S).group(1)
    assert msg == "first line\nsecond line"
    assert "k&lt;1&gt;.py:None" not in wb.TLXWorkbenchError("m", file=str(src))._repr_html_()
    assert wb.TLXWorkbenchError("m", file="<tlx cell>")._repr_html_().count("&lt;tlx cell&gt;") == 1
