"""Where Proton's instrumentation compiles inside TLX async tasks (offline sm_90, Proton's own compiler
passes): why wb.profile times warp-specialized kernels with its own clock64 recorder. The failing case
is the upstream bug of benchmarks/proton_repro/; when it compiles, Proton can time them (change
profile's method="auto" then)."""
import importlib.util
import pathlib

import pytest

REPRO = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "proton_repro" / "repro.py"


@pytest.fixture(scope="module")
def repro():
    spec = importlib.util.spec_from_file_location("proton_repro", REPRO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_task_with_scoped_loops_compiles(repro):
    r = repro.try_compile(repro.default_and_task_loops, 2, "warp")
    assert r["compiles"], r.get("error")
    assert r["clock_reads"] > 0                   # the scopes really became clock records


def test_scoped_loops_in_two_tasks_do_not_lower(repro):
    r = repro.try_compile(repro.two_tasks_loops, 2, "warp")
    assert not r["compiles"], "Proton now compiles scoped loops in two async tasks: see this file's docstring"
    assert "'llvm.cond_br' op operand #1 must be variadic of LLVM dialect-compatible type" in r["error"]
    assert "!proton_gpu.segment" in r["error"]
