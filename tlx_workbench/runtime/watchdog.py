"""Run GPU jobs in a worker process that can be killed when a kernel hangs.

A deadlocked TLX kernel (a wrong arrive count, a missing ``barrier_expect_bytes``)
never returns from ``torch.cuda.synchronize()``; in the notebook's own process it
would take the kernel and every variable down with it. So launches go to one
spawned worker process; the notebook waits with a deadline and, when the deadline
passes, kills the worker (the driver tears down its CUDA context and the hung
grid with it) and raises :class:`KernelTimeoutError`. The next job starts a fresh
worker.

Deadlines have two phases: compiling (Triton JIT, minutes for a big
warp-specialized kernel) and running (from the last kernel launch the worker
reported). A job that reports no phase is timed from its start.

>>> w = Worker()
>>> w.call("tlx_workbench.runtime.watchdog:echo", {"value": 3}, timeout=60)
3
>>> w.close()
"""
from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import sys
import time
import traceback
from typing import Any

from ..errors import GPUError

DEFAULT_TIMEOUT = 20.0          # seconds a launched kernel may run before it counts as hung
DEFAULT_COMPILE_TIMEOUT = 600.0  # seconds the worker may spend compiling before the first launch


@contextlib.contextmanager
def _plain_main():
    """Start the worker without the user's ``__main__``.

    spawn re-imports ``__main__`` in the child when it has a file or a spec, and reads
    ``__main__.__spec__`` (which IPython's terminal shell replaces with a module that has
    none): the worker needs neither, its code lives in this package.
    """
    import types
    saved = sys.modules.get("__main__")
    blank = types.ModuleType("__main__")
    blank.__spec__ = None
    sys.modules["__main__"] = blank
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


class KernelTimeoutError(GPUError):
    """A GPU launch did not finish within its timeout; the worker running it was killed."""


class WorkerCrashedError(GPUError):
    """The worker process died (a segfault, an illegal address, out of memory)."""


class WorkerError(GPUError):
    """The job raised in the worker; the worker's traceback is in ``.detail``."""


# -- the worker side -------------------------------------------------------------------
_conn = None                 # the worker's end of the pipe, set in _worker_main
_phase_sent = [None, 0.0]    # last phase sent and when (launch reports are throttled)


def report_phase(phase: str, *, throttle: float = 0.0) -> None:
    """Worker side: tell the parent the job is now ``"compile"`` or ``"run"`` (resets its deadline)."""
    if _conn is None:
        return
    now = time.monotonic()
    if throttle and _phase_sent[0] == phase and now - _phase_sent[1] < throttle:
        return
    _phase_sent[0], _phase_sent[1] = phase, now
    _conn.send(("phase", phase))


def _resolve(job: str):
    mod, _, name = job.partition(":")
    return getattr(importlib.import_module(mod), name)


def _worker_main(conn) -> None:
    global _conn
    _conn = conn
    keep = None   # the last result stays referenced until the next job: CUDA IPC needs the producer alive
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        job, payload = msg
        keep = None
        _phase_sent[0] = None
        try:
            keep = _resolve(job)(**payload)
            conn.send(("result", keep))
        except BaseException as e:  # noqa: BLE001 - everything goes back to the parent
            tb = traceback.format_exc()
            try:
                conn.send(("error", (e, tb)))
            except Exception:
                conn.send(("error", (None, tb)))


def echo(value=None):
    """A job that returns its argument (to check that a worker is alive)."""
    return value


def hang_in_python(seconds: float = 1e9):
    """A job that never returns, in plain Python: the CPU test of the watchdog."""
    end = time.monotonic() + seconds
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def exec_job(source: str, name: str, args: tuple = (), kwargs: dict | None = None):
    """Run ``name(*args, **kwargs)`` from ``source`` (see :mod:`.transport`) in the worker."""
    from .transport import resolve
    return resolve(("source", source, name, "<job>"))(*args, **(kwargs or {}))


# -- the parent side ---------------------------------------------------------------------
class Worker:
    """A spawned worker process and the pipe to it; restarts itself after a kill."""

    def __init__(self, env: dict | None = None):
        # ``env``: variables the worker starts with (e.g. CUDA_VISIBLE_DEVICES: one worker per GPU)
        self.env = dict(env or {})
        self._proc = None
        self._conn = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        if self.alive:
            return
        # torch's reductions make CUDA tensors travel through the pipe as IPC handles
        try:
            import torch.multiprocessing  # noqa: F401
        except ImportError:  # pragma: no cover - torch is a dependency
            pass
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child,), daemon=True, name="tlx-workbench-gpu")
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            with _plain_main():
                self._proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self._conn = parent

    def kill(self) -> None:
        """End the worker now (terminate, then kill)."""
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is None:
            return
        if proc.is_alive():
            proc.terminate()
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(5.0)

    def close(self) -> None:
        if self.alive:
            try:
                self._conn.send(None)
                self._proc.join(5.0)
            except (OSError, BrokenPipeError):
                pass
        self.kill()

    def call(self, job: str, payload: dict | None = None, *, timeout: float = DEFAULT_TIMEOUT,
             compile_timeout: float = DEFAULT_COMPILE_TIMEOUT, what: str = "the kernel launch",
             hint: str | None = None, file: str | None = None, line: int | None = None) -> Any:
        """Run ``job`` ("module:function") with ``payload`` in the worker; its return value.

        Raises :class:`KernelTimeoutError` (worker killed) if the job runs past its deadline,
        :class:`WorkerCrashedError` if the worker dies, the job's own exception otherwise.
        """
        self.start()
        start = time.monotonic()
        self._conn.send((job, dict(payload or {})))
        phase, deadline = "run", start + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                waited = time.monotonic() - start
                if phase == "compile":
                    msg = (f"{what} was still compiling after {compile_timeout:.0f} s; the worker process "
                           f"was killed. Your notebook and its variables are intact.")
                    raise KernelTimeoutError(msg, file=file, line=line, hint=hint or
                                             "raise compile_timeout, or compile offline first with "
                                             "tlx_workbench.compile to see where the time goes")
                msg = (f"{what} did not finish within {timeout:g} s (waited {waited:.1f} s in all) and looks "
                       f"hung; the GPU worker process was killed. Your notebook and its variables are intact.")
                raise KernelTimeoutError(msg, file=file, line=line, hint=hint or (
                    "run the same launch under the simulator (`%%tlx --sim` or tlx_workbench.simulate) to see "
                    "the deadlock: which task waits on which barrier and phase, and who never arrived; "
                    "or pass a larger timeout= if the kernel is just slow"))
            try:
                ready = self._conn.poll(min(remaining, 0.25))
            except KeyboardInterrupt:
                self.kill()
                raise
            if not ready:
                if not self._proc.is_alive():
                    code = self._proc.exitcode
                    self.kill()
                    raise WorkerCrashedError(
                        f"the GPU worker process died (exit code {code}) while running {what}; "
                        f"your notebook and its variables are intact", file=file, line=line,
                        hint="an illegal memory access or a driver error ends the worker: check the "
                             "kernel's masks and offsets, or run it under the simulator")
                continue
            try:
                kind, value = self._conn.recv()
            except (EOFError, OSError):
                # the pipe closes a moment before the process is reaped: wait for its exit code
                self._proc.join(5.0)
                code = self._proc.exitcode
                self.kill()
                raise WorkerCrashedError(
                    f"the GPU worker process died (exit code {code}) while running {what}; "
                    f"your notebook and its variables are intact", file=file, line=line,
                    hint="an illegal memory access or a driver error ends the worker: check the kernel's masks "
                         "and offsets, or run it under the simulator")
            if kind == "phase":
                phase = value
                deadline = time.monotonic() + (compile_timeout if value == "compile" else timeout)
            elif kind == "result":
                return value
            elif kind == "error":
                exc, tb = value
                if isinstance(exc, Exception):
                    if not getattr(exc, "detail", None) and hasattr(exc, "detail"):
                        exc.detail = tb
                    raise exc
                raise WorkerError(f"{what} failed in the GPU worker", file=file, line=line, detail=tb,
                                  hint="the worker's traceback is in this error's .detail")


_worker: Worker | None = None


def default_worker() -> Worker:
    """The process-wide GPU worker (started on first use)."""
    global _worker
    if _worker is None:
        _worker = Worker()
    return _worker


def shutdown() -> None:
    """Stop the process-wide worker (it restarts on the next job)."""
    global _worker
    if _worker is not None:
        _worker.close()
        _worker = None


def in_worker() -> bool:
    """True inside a watchdog worker process."""
    return _conn is not None or os.environ.get("TLXWB_IN_WORKER") == "1"
