"""The watchdog on the CPU: a worker that hangs in plain Python is killed and reported."""
import pytest

from tlx_workbench.errors import GPUError
from tlx_workbench.runtime.watchdog import KernelTimeoutError, Worker, WorkerCrashedError


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def test_hung_job_is_killed_and_the_caller_lives_on(worker):
    worker.call("tlx_workbench.runtime.watchdog:echo", {"value": 1}, timeout=60)
    first_pid = worker.pid
    with pytest.raises(KernelTimeoutError) as ei:
        worker.call("tlx_workbench.runtime.watchdog:hang_in_python", {}, timeout=1.5, what="add_kernel[grid](...)")
    err = ei.value
    assert isinstance(err, GPUError)
    assert "add_kernel[grid](...)" in err.message and "did not finish within 1.5 s" in err.message
    assert "intact" in err.message
    assert "--sim" in err.hint
    assert not worker.alive
    # the next job gets a fresh worker
    assert worker.call("tlx_workbench.runtime.watchdog:echo", {"value": [1, 2]}, timeout=60) == [1, 2]
    assert worker.pid != first_pid


def test_compile_phase_has_its_own_deadline(worker):
    src = ("from tlx_workbench.runtime.watchdog import report_phase\n"
           "def slow_compile_then_hang():\n"
           "    report_phase('compile')\n"
           "    while True:\n"
           "        pass\n")
    with pytest.raises(KernelTimeoutError, match="still compiling"):
        worker.call("tlx_workbench.runtime.watchdog:exec_job", {"source": src, "name": "slow_compile_then_hang"},
                    timeout=60, compile_timeout=1.0)


def test_job_exception_comes_back_with_its_traceback(worker):
    src = "def boom(x):\n    raise ValueError(f'bad value {x}')\n"
    with pytest.raises(ValueError, match="bad value 7"):
        worker.call("tlx_workbench.runtime.watchdog:exec_job", {"source": src, "name": "boom", "args": (7,)},
                    timeout=60)
    assert worker.alive       # an exception is not a reason to kill the worker


def test_worker_that_dies_is_reported(worker):
    src = "import os\ndef die():\n    os._exit(3)\n"
    with pytest.raises(WorkerCrashedError, match="exit code 3"):
        worker.call("tlx_workbench.runtime.watchdog:exec_job", {"source": src, "name": "die"}, timeout=60)


def test_worker_starts_under_ipython_terminal_main():
    # IPython's terminal shell swaps __main__ for a module without __spec__; spawn reads it
    import sys
    import types
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    del sys.modules["__main__"].__spec__
    w = Worker()
    try:
        assert w.call("tlx_workbench.runtime.watchdog:echo", {"value": 7}, timeout=60) == 7
        assert not hasattr(sys.modules["__main__"], "__spec__")   # the user's __main__ is left as it was
    finally:
        w.close()
        sys.modules["__main__"] = saved
