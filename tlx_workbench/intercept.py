"""An unchanged program's kernel launches, compiled offline and simulated: what the pytest plugin
(:mod:`tlx_workbench.pytest_plugin`) and ``tlx-workbench run`` (:mod:`tlx_workbench.cli.run`) share.

Two pieces:

- :class:`GPUOnCPU`: the host side answers as on a machine with that GPU. Triton's driver answers for it
  (:func:`tlx_workbench.target.offline`), ``device="cuda"`` tensors, streams and events live on the CPU
  (:mod:`tlx_workbench._torch_cpu`), and TLX's tutorials import under the name TLX's own tests use.
- :class:`Interceptor`: inside it every ``kernel[grid](...)`` is first compiled for the GPU through Triton's own
  JIT path (``JITFunction.run(..., warmup=True)``: the kernel's own cache, the real ``asm`` and ``metadata``), in a
  forked child first (a compiler crash takes the child down, not the program), then simulated by
  :class:`tlx_workbench.sim.api.Simulation`. Each launch leaves a :class:`LaunchRecord`. The launches are caught
  as everywhere else in the package, by :class:`tlx_workbench.compiler.launches.catch_launches`, inside the
  simulator's own catcher (which picks an autotuned launch's config).

What a launch answers is what a GPU machine with the installed compiler would answer:

- a kernel the compiler's *front end* rejects (the Python AST -> TTIR code generator: a type that changes in a
  loop, an assertion of a TLX helper) raises Triton's own ``triton.CompilationError``, cause included, as
  ``kernel[grid](...)`` raises it on a GPU machine; nothing is simulated;
- a kernel the front end accepts but a *lowering* pass of the installed build refuses (or crashes on) is still
  simulated: the launch is "simulate-only" and returns a :class:`SimulateOnlyKernel`, whose ``asm``/``metadata``
  raise with the compiler's message;
- a launch whose arguments do not bind to the kernel's parameters raises :class:`LaunchArgumentError` (Triton
  refuses it on a GPU too);
- a deadlock raises :class:`~tlx_workbench.errors.DeadlockError` (a GPU would hang there); a race or another
  protocol finding raises :class:`~tlx_workbench.errors.SimulationError` with ``raise_findings=True`` (the pytest
  plugin: the test fails) or is recorded and the program goes on (``run``: a GPU would go on too).

>>> with GPUOnCPU("H200"), Interceptor("H200") as icpt:          # doctest: +SKIP
...     add_kernel[(4,)](x, y, out, n, BLOCK=256)
>>> icpt.launches[0].verdict, icpt.launches[0].cycles            # doctest: +SKIP
('clean', 1530.0)
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time

FRONT_END = "front end"          # the code generator rejected the kernel: raised, as on a GPU machine
REFUSED = "refused"              # a lowering pass refused it: simulated anyway
CRASHED = "crashed"              # the compiler crashed (in the forked child): simulated anyway

_CHILD_FRONT_END = 5             # the forked child's exit status for a front-end rejection


class LaunchArgumentError(TypeError):
    """The launch does not bind to the kernel's parameters (one missing, one given twice): Triton refuses it on a
    GPU too, before compiling, so it is the program's error, not the compiler's or the simulator's."""


class SimulateOnlyKernel:
    """What a launch returns when the installed compiler refused the kernel: it was simulated,
    but there is no ``asm``, ``metadata`` or binary to look at."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        from .errors import CompileError
        raise CompileError(f"{self.name}.{attr}: the installed compiler refused this kernel, so the launch was "
                           f"only simulated: {self.reason}",
                           hint="read the compiler's message above; the simulated outputs are in the tensors")

    def __repr__(self):
        return f"SimulateOnlyKernel({self.name}: {self.reason})"


class LaunchRecord:
    """One intercepted launch: the kernel, its grid, what the compiler said, what the simulator found.

    ``verdict``: "deadlock", "race" (a race or an output that depends on the interleaving), "finding" (another
    protocol error: arrivals past a count, bytes past a barrier's announcement, ...), "error" (the simulator
    stopped the launch: an out-of-bounds access, an op it refused), "warning" (outputs left unwritten or
    non-finite), "clean", or "not simulated".
    ``prediction``: the launch's predicted time (a :class:`~tlx_workbench.sim.timing.prediction.Prediction`) when the
    interceptor was asked to predict."""

    def __init__(self, kernel: str, file: str | None, line: int | None, grid):
        self.kernel = kernel
        self.file = file
        self.line = line                 # the kernel's def line
        self.grid = grid
        self.compiled = False
        self.refused: str | None = None  # the compiler's message when it refused or crashed (simulate-only)
        self.result = None               # the SimResult
        self.prediction = None
        self.error: BaseException | None = None     # what the launch raised (deadlock, finding, simulator error)
        self.seconds = 0.0
        self.launch = None               # (JITFunction, args, kwargs) as the program made the launch
        self.caller = (None, None)       # the program's (file, line) that made the launch

    @property
    def cycles(self) -> float | None:
        return round(float(self.result.cycles), 1) if self.result is not None else None

    @property
    def ctas(self) -> int | None:
        return len(self.result.ctas) if self.result is not None else None

    @property
    def warnings(self) -> list[str]:
        """The simulator's warnings (outputs unwritten, NaN/Inf): the program still runs."""
        return [repr(f) for f in self.result.warnings] if self.result is not None else []

    @property
    def verdict(self) -> str:
        r = self.result
        if r is None:
            # the simulator stopped the launch (an out-of-bounds access, an op's error, a deadline) or never ran
            return "error" if self.error is not None else "not simulated"
        if r.deadlock is not None:
            return "deadlock"
        kinds = {f.kind for f in r.errors}
        if kinds & {"race", "schedule-divergence"}:
            return "race"
        if kinds:
            return "finding"
        return "warning" if r.warnings else "clean"

    @property
    def failed(self) -> bool:
        """A deadlock, a race or another protocol finding: what makes ``run`` exit non-zero."""
        return self.verdict in ("deadlock", "race", "finding", "error")

    def as_dict(self) -> dict:
        """The pytest plugin's per-launch record (its ``--tlx-sim-report`` JSON)."""
        return {"kernel": self.kernel, "compiled": self.compiled, "compiler_refused": self.refused,
                "cycles": self.cycles, "ctas": self.ctas, "warnings": self.warnings}

    def __repr__(self):
        return (f"LaunchRecord({self.kernel}, grid={self.grid}, {self.verdict}"
                + (", simulate-only" if self.refused else "") + ")")


class GPUOnCPU:
    """For a session (``enable``/``disable``) or a ``with`` block: the program's host code sees ``gpu`` (driver
    queries, ``torch.cuda``), its ``cuda`` tensors live on the CPU. Enable it before the program imports its
    modules: some ask ``driver.active`` or ``torch.cuda`` at import time."""

    def __init__(self, gpu):
        from .target import gpu_model
        self.model = gpu_model(gpu)
        self.gpu = self.model.name
        self._offline = None
        self._torch = None
        self.aliased: str | None = None

    def enable(self) -> "GPUOnCPU":
        from . import _torch_cpu
        from .target import offline
        self._offline = offline(self.model).enable()
        self._torch = _torch_cpu.CudaOnCpu(self.model).enable()
        self.aliased = alias_tlx_tutorials()
        return self

    def disable(self) -> None:
        if self._torch is not None:
            self._torch.disable()
            self._torch = None
        if self._offline is not None:
            self._offline.disable()
            self._offline = None

    __enter__ = enable

    def __exit__(self, *exc):
        self.disable()
        return False


class Interceptor:
    """Inside it, every launch is compiled offline for ``gpu`` and simulated (see the module doc).

    ``seed``: the simulator's schedule seed; ``schedules``: how many interleavings each launch runs (outputs that
    differ between them are a race, unless only atomics' order makes them differ). ``raise_findings``: a race or another protocol finding raises
    (True, the pytest plugin) or is only recorded (False, ``run``). ``predict``: also ask the compiler for the
    kernel's occupancy and spills, simulate with them, and turn the simulated CTAs into the launch's predicted
    time (what :func:`tlx_workbench.predict` says of the same launch). ``on_start(record)`` / ``on_end(record)``:
    called around each launch (progress). ``launches`` (a list to append to; default a new one) keeps every
    :class:`LaunchRecord`; ``kernel_file`` is the file of the kernel being simulated while a launch runs.
    ``capture_only``: record each launch (``LaunchRecord.launch``) and return, compiling and running nothing (the
    program's outputs are then not computed): how the command line's ``check``/``compile``/``predict`` find a
    script's launches."""

    def __init__(self, gpu, *, seed: int = 0, schedules: int = 1, raise_findings: bool = True, predict: bool = False,
                 on_start=None, on_end=None, launches: list | None = None, capture_only: bool = False):
        from .target import gpu_model
        self.model = gpu_model(gpu)
        self.gpu = self.model.name
        self.seed = int(seed)
        self.schedules = max(1, int(schedules))
        self.raise_findings = raise_findings
        self.predict = predict
        self.capture_only = capture_only
        self.on_start, self.on_end = on_start, on_end
        self.launches: list[LaunchRecord] = launches if launches is not None else []
        self.kernel_file: str | None = None
        self._sim = None
        self._catch = None

    def __enter__(self) -> "Interceptor":
        from .compiler.launches import catch_launches
        from .sim.api import Simulation
        self._sim = Simulation(gpu=self.gpu, seed=self.seed, schedules=self.schedules, on_deadlock="raise")
        self._sim.__enter__()
        # inside the simulator's catcher (which still picks an autotuned launch's config): ours compiles first,
        # warmups too, then hands the launch to the simulator
        self._catch = catch_launches(self._launch).__enter__()
        return self

    def __exit__(self, *exc):
        if self._catch is not None:
            self._catch.__exit__(*exc)
            self._catch = None
        if self._sim is not None:
            self._sim.__exit__(*exc)
            self._sim = None
        return False

    def _record(self, launch) -> "LaunchRecord":
        la = LaunchRecord(launch.kernel, launch.file, launch.def_line, launch.grid)
        la.launch = (launch.jit, launch.args, launch.kwargs)
        la.caller = launch.caller
        self.launches.append(la)
        return la

    def _launch(self, launch):
        __tracebackhide__ = True
        sim, jit, args, kwargs, grid = self._sim, launch.jit, launch.args, launch.kwargs, launch.grid
        name = launch.kernel
        if self.capture_only:
            if not launch.warmup:
                self._record(launch)
            return None
        unbound = launch.unbound()
        if unbound:
            raise LaunchArgumentError(f"{name}(): {unbound} (the launch does not give every kernel parameter; "
                                      f"Triton refuses it on a GPU too)")
        compile_once = launch.compile
        compiled = None
        kind, refused = compile_in_child(compile_once, jit, self.model, name)
        if kind == FRONT_END:
            # the code generator is Python: compiling here raises Triton's own CompilationError (its cause
            # kept), as the launch raises it on a GPU machine; Triton caches no failed compile
            compile_once()
            raise RuntimeError(f"{name}: the compiler's front end rejected the kernel in a child process, "
                               f"but not here: {refused}")
        if kind is None:
            try:
                compiled = compile_once()
            except Exception as e:  # noqa: BLE001 - the compiler's refusal is reported, the launch still simulated
                from .compiler.diagnose import compile_error
                refused = str(compile_error(e, jit, self.model))
        if launch.warmup:
            if refused is not None:
                raise RuntimeError(f"{name}: the installed compiler refused the kernel: {refused}")
            return compiled
        la = self._record(launch)
        la.compiled, la.refused = compiled is not None, refused
        if self.on_start is not None:
            self.on_start(la)
        t0 = time.perf_counter()
        facts = None
        if self.predict:
            from .sim.timing.prediction import charged_spills, launch_facts
            facts = launch_facts(jit, args, kwargs, self.gpu) if compiled is not None else \
                (None, 0, False, f"not compiled (the installed compiler refused {name})")
            spills, note = charged_spills((jit, args, kwargs), grid, self.gpu, facts[0] or 1, facts)
            facts = (facts[0], spills, facts[2], note)
            sim.occupancy, sim.spills, sim.serialized_wgmma = facts[0] or 1, facts[1], facts[2]
        self.kernel_file = launch.file
        before = len(sim.results)
        try:
            sim.launch(jit, grid, args, kwargs)
            if facts is not None:
                from .sim.timing.prediction import prediction_from
                la.prediction = prediction_from(sim.results[before], self.gpu, occupancy=facts[0] or 1,
                                                spills=facts[1], compiled=facts[3],
                                                sim_seconds=time.perf_counter() - t0)
        except BaseException as e:
            la.error = e
            raise
        finally:
            self.kernel_file = None
            la.seconds = time.perf_counter() - t0
            # the simulator keeps the launch's result before it raises a deadlock
            la.result = sim.results[before] if len(sim.results) > before else None
            if self.on_end is not None:
                self.on_end(la)
        if self.raise_findings:
            la.result.raise_for_errors()
        return compiled if compiled is not None else SimulateOnlyKernel(name, refused)


def alias_tlx_tutorials() -> str | None:
    """TLX's tests import its tutorials as ``triton.language.extra.tlx.tutorials`` (TLX's own tree);
    the triton-utlx wheel ships them as ``tlx.tutorials``. Alias the one to the other, so the tests
    run unchanged; returns what it did, or None."""
    import importlib
    import importlib.util
    name = "triton.language.extra.tlx.tutorials"
    try:
        if importlib.util.find_spec(name) is not None:
            return None
    except (ImportError, ValueError):
        pass
    try:
        mod = importlib.import_module("tlx.tutorials")
    except ImportError:
        return None
    sys.modules[name] = mod
    return f"{name} aliased to tlx.tutorials (the triton-utlx wheel's layout)"


def compile_in_child(compile_once, jit, model, name: str) -> tuple[str | None, str | None]:
    """Compile first in a forked child: some kernels crash the installed compiler (an MLIR assertion, a
    segfault), which would take the whole program down. Returns (None, None) when it compiled (the compile in
    this process then hits Triton's disk cache instead of compiling twice), else (kind, why): ``FRONT_END``
    (Triton's code generator raised its ``CompilationError``), ``REFUSED`` (a lowering pass failed) or
    ``CRASHED``, with the compiler's own message as ``tlx_workbench.compile`` words it."""
    if not hasattr(os, "fork"):
        return None, None
    with tempfile.TemporaryDirectory(prefix="tlxsim-") as tmp:
        log, msg = os.path.join(tmp, "stderr"), os.path.join(tmp, "message")
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        pid = os.fork()
        if pid == 0:                               # the child: compile, and leave without cleanup
            code = 0
            try:
                import faulthandler
                faulthandler.disable()      # pytest's points at the terminal; a crash is said by the parent
                fd = os.open(log, os.O_WRONLY | os.O_CREAT, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                try:
                    compile_once()
                except Exception as e:  # noqa: BLE001 - worded for the parent
                    from triton.compiler.errors import CompilationError
                    code = _CHILD_FRONT_END if isinstance(e, CompilationError) else 3
                    from .compiler.diagnose import compile_error
                    with open(log, errors="replace") as f:
                        printed = f.read()
                    with open(msg, "w") as f:
                        f.write(str(compile_error(e, jit, model, printed)))
            except BaseException:  # noqa: BLE001 - never return into the parent's program
                code = 4
            os._exit(code)
        try:
            _, status = os.waitpid(pid, 0)
        except BaseException:
            # a deadline fired while the child compiled
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            raise
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return None, None
        kind = FRONT_END if os.WIFEXITED(status) and os.WEXITSTATUS(status) == _CHILD_FRONT_END else REFUSED
        if os.path.exists(msg):
            with open(msg, errors="replace") as f:
                return kind, f.read().strip() or f"the installed compiler refused {name}"
        printed = ""
        if os.path.exists(log):
            with open(log, errors="replace") as f:
                printed = f.read()
        said = [ln.strip() for ln in printed.splitlines() if "error" in ln.lower()][:3]
        how = (f"signal {signal.Signals(os.WTERMSIG(status)).name}" if os.WIFSIGNALED(status)
               else f"exit status {os.WEXITSTATUS(status)}")
        return CRASHED, (f"the installed compiler crashed compiling {name} ({how})"
                         + (": " + " / ".join(said) if said else ""))
