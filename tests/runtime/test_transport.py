"""Shipping notebook-defined kernels to the worker: definitions only, a real file for Triton."""
import inspect

from tlx_workbench.runtime import transport


def test_definitions_only_drops_launch_code_and_data():
    cell = ("import torch\nimport triton\nBLOCK = 128\nDEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
            "x = torch.randn(10)\n@triton.jit\ndef k(x_ptr):\n    pass\nk[(1,)](x)\nprint('hi')\n")
    out = transport.definitions_only(cell)
    assert "BLOCK = 128" in out and "@triton.jit\ndef k(x_ptr)" in out and "get_active_torch_device" in out
    assert "randn" not in out and "k[(1,)]" not in out and "print" not in out


def test_source_spec_resolves_to_a_function_with_readable_source():
    src = "SCALE = 3\ndef triple(v):\n    return SCALE * v\nresult = triple(2)\n"
    fn = transport.resolve(transport.callable_spec(None, source=src, name="triple"))
    assert fn(5) == 15
    assert "return SCALE * v" in inspect.getsource(fn)   # what triton.jit needs


def test_ipython_cell_function_travels_as_source():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_cell("def helper_tw(v):\n    return v + 1\n", store_history=True)
    shell.run_cell("def uses_helper_tw(v):\n    return helper_tw(v) * 2\nuses_helper_tw(1)\n", store_history=True)
    spec = transport.callable_spec(shell.user_ns["uses_helper_tw"])
    assert spec[0] == "source"
    assert "def helper_tw" in spec[1] and "uses_helper_tw(1)" not in spec[1]
    assert transport.resolve(spec)(3) == 8


def test_importable_function_is_pickled():
    import math
    assert transport.callable_spec(math.sqrt)[0] == "pickle"


def test_module_added_to_sys_path_after_the_worker_started_still_resolves(tmp_path):
    import sys

    from tlx_workbench.runtime.watchdog import Worker
    w = Worker()
    try:
        w.call("tlx_workbench.runtime.watchdog:echo", {"value": 0}, timeout=60)   # the worker starts here
        (tmp_path / "late_module_tw.py").write_text("def triple(v):\n    return 3 * v\n")
        sys.path.insert(0, str(tmp_path))
        import late_module_tw
        spec = transport.callable_spec(late_module_tw.triple)
        assert spec[0] == "module" and spec[3].endswith("late_module_tw.py")
        src = "from tlx_workbench.runtime.transport import resolve\ndef go(spec, v):\n    return resolve(spec)(v)\n"
        assert w.call("tlx_workbench.runtime.watchdog:exec_job",
                      {"source": src, "name": "go", "args": (spec, 5)}, timeout=60) == 15
    finally:
        sys.path.remove(str(tmp_path))
        w.close()
