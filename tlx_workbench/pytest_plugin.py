"""Run a TLX project's GPU test suite, unchanged, on the CPU: a pytest plugin.

    pytest -p tlx_workbench.pytest_plugin --tlx-sim=H200 --tlx-sim-report=sim.json tests/

or, in the project's ini file, ``tlx_sim = B200`` (then ``-p tlx_workbench.pytest_plugin`` is
still needed: the plugin is never loaded behind a user's back). Under it:

- Triton's driver answers for the chosen GPU (:func:`tlx_workbench.target.offline`), so
  ``torch.cuda.get_device_capability()``, device properties and ``driver.active`` queries say
  what that GPU would say; ``device="cuda"`` tensors, ``.cuda()``, ``.to("cuda")``, streams and
  events map to the CPU (:mod:`tlx_workbench._torch_cpu`).
- Every launch is first compiled for the target through Triton's own JIT path
  (``JITFunction.run(..., warmup=True)``: the kernel's own cache, the real ``asm`` and
  ``metadata``), then simulated by :class:`tlx_workbench.sim.api.Simulation`
  (:mod:`tlx_workbench.intercept`, shared with ``tlx-workbench run``; the launches are caught as everywhere
  in the package, by :mod:`tlx_workbench.compiler.launches`). A kernel the compiler's front
  end rejects raises Triton's own ``CompilationError``, as on a GPU machine. A launch whose lowering
  the installed compiler refuses is still simulated: the test is then "simulate-only", and the
  launch returns a stand-in whose ``asm``/``metadata`` raise with the compiler's message.
- A deadlock or a race fails the test with the simulator's diagnosis (the wait-for graph in a
  report section); ``--tlx-sim-schedules=N`` runs every launch under N interleavings, so that outputs
  that depend on them fail as a race too (outputs that differ only as atomics' order makes them
  differ do not: a GPU orders atomics freely). A test past ``--tlx-sim-deadline`` seconds fails
  with the deadline. The deadline interrupts Python (host code, simulated kernels), not one long
  native call: a test stuck in one torch call on the CPU fails only when that call returns.
- At the end, a table per test (faithful pass, simulate-only pass, failed, unsupported op,
  compiler refused, skipped) in the terminal summary, and as JSON with ``--tlx-sim-report``.
- With pytest-xdist (``-n 8``), tests run in parallel processes, each simulating its own launches;
  the table and the JSON are the whole run's (the workers' records travel with their reports).
"""
from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
import time

import pytest

from .intercept import GPUOnCPU, Interceptor, LaunchArgumentError, SimulateOnlyKernel  # noqa: F401 - re-exported

DEFAULT_DEADLINE_S = 300.0

FAITHFUL = "faithful pass"
SIM_ONLY = "simulate-only pass"
FAILED = "failed"
UNSUPPORTED = "unsupported op"
REFUSED = "compiler refused"
SKIPPED = "skipped"
STATUSES = (FAITHFUL, SIM_ONLY, FAILED, UNSUPPORTED, REFUSED, SKIPPED)

_RECORD_KEY = "tlx_sim"     # a test's record in its teardown report's user_properties
_NOT_MODELLED = re.compile(r"tlx\.(\w+): the CPU simulator does not model")


class SimDeadline(BaseException):
    """A test ran past ``--tlx-sim-deadline``. A BaseException, so that no ``except Exception``
    in the kernel's host code or the simulator swallows it."""


def pytest_addoption(parser):
    group = parser.getgroup("tlx-sim", "run GPU kernel tests on the TLX Workbench CPU simulator")
    group.addoption("--tlx-sim", dest="tlx_sim", default=None, metavar="GPU",
                    help="simulate every kernel launch for this GPU (H100, H200, B200) on the CPU")
    group.addoption("--tlx-sim-report", dest="tlx_sim_report", default=None, metavar="PATH",
                    help="write the per-test table as JSON to PATH")
    group.addoption("--tlx-sim-deadline", dest="tlx_sim_deadline", default=None, type=float, metavar="SECONDS",
                    help=f"fail a test that runs longer than this (default {DEFAULT_DEADLINE_S:.0f})")
    group.addoption("--tlx-sim-schedules", dest="tlx_sim_schedules", default=None, type=int, metavar="N",
                    help="run every launch under N interleavings: outputs that differ fail the test as a race, "
                         "unless only atomics' order makes them differ (default 1)")
    group.addoption("--tlx-sim-seed", dest="tlx_sim_seed", default=None, type=int,
                    help="the simulator's schedule seed (default 0)")
    parser.addini("tlx_sim", "GPU to simulate (as --tlx-sim)", default="")
    parser.addini("tlx_sim_report", "JSON report path (as --tlx-sim-report)", default="")
    parser.addini("tlx_sim_deadline", "per-test deadline in seconds (as --tlx-sim-deadline)", default="")


def pytest_configure(config):
    gpu = config.getoption("tlx_sim") or config.getini("tlx_sim")
    if not gpu:
        return
    deadline = config.getoption("tlx_sim_deadline") or config.getini("tlx_sim_deadline") or DEFAULT_DEADLINE_S
    report = config.getoption("tlx_sim_report") or config.getini("tlx_sim_report") or None
    plugin = TLXSimPlugin(gpu, float(deadline), report, seed=config.getoption("tlx_sim_seed") or 0,
                          schedules=config.getoption("tlx_sim_schedules") or 1)
    plugin._is_worker = hasattr(config, "workerinput")
    plugin.start()
    config.pluginmanager.register(plugin, "tlx-sim-session")
    config.addinivalue_line("markers", "tlx_sim_deadline(seconds): this test's deadline under --tlx-sim")


def _first_lines(e: BaseException, n: int = 6, width: int = 600) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # Triton's CompilationError leads with the source; its last line says what went wrong
    if len(lines) > n:
        lines = lines[:2] + ["..."] + lines[-(n - 3):]
    out = "\n".join(lines)
    return out if len(out) <= width else out[:width] + " ..."


class TLXSimPlugin:
    """The session's state: the offline target, the torch mapping, one record per test."""

    def __init__(self, gpu: str, deadline_s: float, report_path: str | None, seed: int = 0, schedules: int = 1):
        from .target import gpu_model
        self.model = gpu_model(gpu)
        self.gpu = self.model.name
        self.deadline_s = deadline_s
        self.report_path = report_path
        self.seed = seed
        self.schedules = max(1, int(schedules))
        self.records: dict[str, dict] = {}
        self._session: GPUOnCPU | None = None
        self._launches: list | None = None   # the current test's LaunchRecords
        self._icpt: Interceptor | None = None      # while a test runs
        self._t0 = None
        self._is_worker = False

    # -- the session -----------------------------------------------------------------------
    def start(self):
        # before collection: test modules ask driver.active / torch.cuda at import time
        self._session = GPUOnCPU(self.model).enable()
        self.aliased = self._session.aliased

    def pytest_report_header(self, config):
        return (f"tlx-sim: kernels compiled for {self.gpu} (sm_{self.model.arch}) and simulated on the CPU; "
                f"deadline {self.deadline_s:g} s per test"
                + (f"; {self.schedules} schedules per launch" if self.schedules > 1 else "")
                + (f"; {self.aliased}" if self.aliased else ""))

    def pytest_unconfigure(self, config):
        if self._session is not None:
            self._session.disable()
            self._session = None

    # -- one test --------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.records[item.nodeid] = {"test": item.nodeid, "status": None, "why": None, "message": None,
                                     "seconds": 0.0, "launches": []}
        self._launches = []
        self._t0 = time.perf_counter()
        with Interceptor(self.gpu, seed=self.seed, schedules=self.schedules, raise_findings=True,
                         launches=self._launches) as icpt:
            self._icpt = icpt
            try:
                yield
            finally:
                self._icpt = None
        self._finish(item.nodeid)
        self._launches = None

    def _finish(self, nodeid):
        rec = self.records.get(nodeid)
        if rec is not None and self._launches is not None:
            rec["seconds"] = round(time.perf_counter() - self._t0, 3)
            rec["launches"] = [la.as_dict() for la in self._launches]
        return rec

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        marker = item.get_closest_marker("tlx_sim_deadline")
        limit = float(marker.args[0]) if marker and marker.args else self.deadline_s
        with _deadline(limit, item.nodeid, self._may_stop, self._stop_task_thread):
            yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        exc = call.excinfo.value if call.excinfo is not None else None
        diag = getattr(exc, "detail", None) if exc is not None else None
        if diag and getattr(exc, "report", None) is not None and diag not in str(exc):
            report.sections.append(("tlx-sim: deadlock (wait-for graph)", diag))
        warned = [f"{la.kernel}: {w}" for la in (self._launches or []) for w in la.warnings]
        if warned and report.when == "call":
            report.sections.append(("tlx-sim: simulator warnings", "\n".join(warned)))
        self._classify(item.nodeid, report, exc)
        if report.when == "teardown":
            # the record travels with the test's last report: under pytest-xdist (``-n N``) the controller
            # builds the table and the JSON from the workers' records (pytest_runtest_logreport)
            rec = self._finish(item.nodeid)
            if rec is not None and hasattr(item.config, "workerinput"):
                report.user_properties.append((_RECORD_KEY, dict(rec)))

    def pytest_runtest_logreport(self, report):
        if report.when != "teardown":
            return
        if report.nodeid not in self.records:         # a worker's test: its record came with the report
            for key, rec in report.user_properties:
                if key == _RECORD_KEY:
                    self.records[report.nodeid] = rec
        # the JSON after every test (written whole, then renamed): a long suite stopped midway keeps its table
        self._write_report(complete=False)

    def _classify(self, nodeid, report, exc):
        rec = self.records.get(nodeid)
        if rec is None:
            return
        launches = self._launches or []
        refused = [la for la in launches if la.refused]
        if report.skipped and rec["status"] is None:
            rec["status"], rec["why"] = SKIPPED, _skip_reason(report)
            return
        if report.failed:
            if rec["status"] in (FAILED, UNSUPPORTED, REFUSED):
                return           # the first failing phase says why
            rec.update(_failure(exc, refused))
            return
        if report.when == "call" and report.passed and rec["status"] is None:
            rec["status"] = SIM_ONLY if refused else FAITHFUL
            if refused:
                rec["why"] = "compiler refused " + ", ".join(sorted({la.kernel for la in refused}))
                rec["message"] = refused[0].refused
            warned = [(la.kernel, w) for la in launches for w in la.warnings]
            if warned:
                # a pass, but no clean bill: an output left partly unwritten or holding NaN/Inf (sim/diagnosis/outputs.py)
                kinds = sorted({w.split("]", 1)[0].removeprefix("[warning: ") for _, w in warned})
                note = f"simulator warning: {', '.join(kinds)}"
                rec["why"] = f"{rec['why']}; {note}" if rec["why"] else note
                text = "\n".join(f"{k}: {w}" for k, w in warned)
                rec["message"] = f"{rec['message']}\n{text}" if rec["message"] else text

    def _may_stop(self, frame) -> bool:
        # a deadline stops a simulated launch only at a line of the kernel itself: from there the
        # exception unwinds as a kernel's own error does, and the simulator restores what it patched
        # (stopped inside the simulator's set-up, it would leave Triton's ops patched)
        # and only inside a simulated task (a greenlet of its own): a grid lambda or pre_hook in the
        # kernel's file runs in the set-up, in the main greenlet, where raising leaves Triton patched
        kf = self._icpt.kernel_file if self._icpt is not None else None
        if kf is None:
            return True
        if frame is None or frame.f_code.co_filename != kf:
            return False
        try:
            import greenlet
        except ImportError:
            return False
        return greenlet.getcurrent().parent is not None

    def _stop_task_thread(self, exc_type) -> bool:
        # simulated tasks as threads (TLXWB_SIM_THREADS=1): SIGALRM reaches the main thread, which only waits
        # for the launch, never at a kernel line. The task thread running the kernel (inside one of its lines or
        # an op it called, not in the scheduler's hand-over: the others wait there for their turn) gets the
        # deadline raised instead, at its next bytecode check, and unwinds as an op's own error does. Only the
        # top frame would do too, but a kernel spends most of its time inside its ops: that waited seconds.
        kf = self._icpt.kernel_file if self._icpt is not None else None
        if kf is None:
            return False
        import ctypes
        import sys
        from .sim.schedule import scheduler
        main = threading.main_thread().ident
        for ident, frame in sys._current_frames().items():
            f = frame if ident != main else None
            while f is not None and f.f_code.co_filename != scheduler.__file__:
                if f.f_code.co_filename == kf:
                    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident),
                                                                      ctypes.py_object(exc_type)) == 1
                f = f.f_back
        return False

    # -- the end ---------------------------------------------------------------------------
    def table(self) -> list[dict]:
        return list(self.records.values())

    def counts(self) -> dict:
        out = {s: 0 for s in STATUSES}
        for r in self.records.values():
            if r["status"]:
                out[r["status"]] += 1
        return out

    def pytest_sessionfinish(self, session):
        self._write_report(complete=True)

    def _write_report(self, complete: bool):
        if not self.report_path or self._is_worker:           # an xdist worker: the controller writes
            return
        import os
        data = {"gpu": self.gpu, "arch": f"sm_{self.model.arch}", "deadline_s": self.deadline_s,
                "complete": complete, "counts": self.counts(), "tests": self.table()}
        tmp = f"{self.report_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self.report_path)

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section(f"tlx-sim: {self.gpu} (sm_{self.model.arch}), simulated on the CPU")
        names = {k: _short(k) for k in self.records}
        width = min(max([len(n) for n in names.values()] + [4]), 90)
        for k, r in self.records.items():
            why = f"  ({r['why']})" if r["why"] else ""
            tr.write_line(f"{names[k][-width:]:<{width}}  {r['status'] or '?':<18}{why}")
        c = self.counts()
        tr.write_line(", ".join(f"{n} {s}" for s, n in c.items() if n) or "no tests")
        if self.report_path:
            tr.write_line(f"table written to {self.report_path}")


def _short(nodeid: str) -> str:
    # a suite outside the rootdir has node ids with its whole path: keep the file's name
    path, sep, rest = nodeid.partition("::")
    return path.rsplit("/", 1)[-1] + sep + rest


def _skip_reason(report) -> str | None:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return str(lr[2]).removeprefix("Skipped: ")
    return None


def _failure(exc, refused) -> dict:
    from .errors import DeadlockError, SimulationError
    msg = _first_lines(exc) if exc is not None else None
    text = f"{exc}" if exc is not None else ""
    m = _NOT_MODELLED.search(text)
    if m:
        return {"status": UNSUPPORTED, "why": f"tlx.{m.group(1)} is not modelled", "message": msg}
    if isinstance(exc, LaunchArgumentError):
        return {"status": FAILED, "why": "launch arguments (fails on a GPU too)", "message": msg}
    from triton.compiler.errors import CompilationError
    if isinstance(exc, CompilationError):
        return {"status": FAILED, "why": "the compiler's front end rejected the kernel (fails on a GPU too)",
                "message": msg}
    if isinstance(exc, SimDeadline) or "SimDeadline:" in text:      # the simulator wraps a task's exception
        return {"status": FAILED, "why": "deadline", "message": msg}
    if isinstance(exc, DeadlockError):
        return {"status": FAILED, "why": "deadlock", "message": msg}
    if isinstance(exc, SimulationError):
        return {"status": FAILED, "why": "simulator finding", "message": msg}
    if refused:
        return {"status": REFUSED, "why": "compiler refused " + ", ".join(sorted({la.kernel for la in refused})),
                "message": refused[0].refused + "\n-- then the test failed: " + (msg or "")}
    if isinstance(exc, AssertionError):
        return {"status": FAILED, "why": "assertion", "message": msg}
    return {"status": FAILED, "why": "error" if exc is not None else None, "message": msg}


@contextlib.contextmanager
def _deadline(seconds: float, nodeid: str, may_stop=lambda frame: True, elsewhere=lambda exc_type: False):
    # SIGALRM reaches the main thread, where pytest runs the test and the simulator its greenlets;
    # ``elsewhere(exc_type)`` raises it in another thread instead (tasks as threads) and says whether it did
    usable = seconds and seconds > 0 and hasattr(signal, "setitimer") \
        and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return
    text = (f"{nodeid} ran past its deadline of {seconds:g} s under --tlx-sim "
            f"(raise it with --tlx-sim-deadline or @pytest.mark.tlx_sim_deadline(s))")

    class Expired(SimDeadline):
        # raised in another thread by type alone (PyThreadState_SetAsyncExc): the message comes with the type
        def __init__(self, *args):
            super().__init__(*(args or (text,)))
    Expired.__name__ = Expired.__qualname__ = "SimDeadline"

    def fire(signum, frame):
        if not may_stop(frame):
            # again later, should that thread swallow it; else try again at the next kernel line
            signal.setitimer(signal.ITIMER_REAL, 0.5 if elsewhere(Expired) else 0.005)
            return
        # again later, should this one be swallowed (raised inside an at-fork hook, a __del__, ...)
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        raise Expired()
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
