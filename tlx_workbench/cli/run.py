"""``tlx-workbench run [--sim H200|B200] [--json FILE] SCRIPT [args...]``: a program, unchanged, on the CPU.

The script runs as ``python SCRIPT args...`` would run it (``__name__ == "__main__"``, ``sys.argv``, its folder
first on ``sys.path``), with its host code answering as on a machine with that GPU and every kernel launch
compiled offline and simulated (:mod:`tlx_workbench.intercept`, shared with the pytest plugin).
``triton.testing.do_bench`` returns the predicted time of the launches it timed (one simulated run stands for
its repetitions; NaN for work that launches no kernel, such as a torch reference).

At the end, a summary of every launch on stdout: kernel, grid, verdict, findings with file:line, predicted
time. A deadlock stops the program with the diagnosis, as a crashed program stops (on the GPU it would hang
there); a race is reported and the program goes on, as on the GPU. Exit code 0 when every launch was clean
and the program ended well, 1 when a launch deadlocked, raced or broke another protocol rule, or the program
failed; 2 for a usage error. ``TLXWB_SIM`` gives the default GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
import traceback

from .common import CLEAN, FINDING, USAGE, UsageError, default_gpu, progress, say, short_path, write_json


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a Python script unchanged, its kernel launches compiled offline and "
                                   "simulated on the CPU", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sim", metavar="GPU", default=None,
                   help="the GPU the program runs on: H200 (default, or $TLXWB_SIM), H100, B200")
    p.add_argument("--json", metavar="FILE", default=None, help="write the launches as JSON to FILE (- : stdout)")
    p.add_argument("--seed", type=int, default=0, help="the simulator's schedule seed (default 0)")
    p.add_argument("--schedules", type=int, default=1, metavar="N",
                   help="run each launch under N interleavings: outputs that differ are a race (default 1)")
    p.add_argument("--no-predict", action="store_true",
                   help="skip the predicted times (no offline compile for occupancy and spills)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    p.set_defaults(func=main)


class Outcome:
    """What one run of a program under the simulator gave: its launches, how the program ended."""

    def __init__(self, script, argv, gpu):
        self.script, self.argv, self.gpu = script, list(argv), gpu
        self.launches: list = []
        self.error: BaseException | None = None     # what the program raised (a deadlock among them)
        self.program_exit_code = 0
        self.traceback = ""

    @property
    def failed_launches(self) -> list:
        return [la for la in self.launches if la.failed]

    @property
    def exit_code(self) -> int:
        return FINDING if (self.failed_launches or self.error is not None or self.program_exit_code) else CLEAN


class Simulated:
    """For a program's whole run (``start``/``stop``, or ``with``): its host code answers as on a machine with
    ``gpu``, its launches are compiled offline and simulated into ``launches``, and ``triton.testing.do_bench``
    returns the launches' predicted time."""

    def __init__(self, gpu: str = "H200", *, seed: int = 0, schedules: int = 1, predict: bool = True, on_start=None,
                 on_end=None):
        self.gpu, self.seed, self.schedules, self.predict = gpu, seed, schedules, predict
        self.on_start, self.on_end = on_start, on_end
        self.launches: list = []
        self._stack = None

    def start(self) -> "Simulated":
        from ..intercept import GPUOnCPU, Interceptor
        stack = contextlib.ExitStack()
        session = stack.enter_context(GPUOnCPU(self.gpu))
        self.gpu = session.gpu
        icpt = stack.enter_context(Interceptor(session.gpu, seed=self.seed, schedules=self.schedules,
                                               raise_findings=False,
                                               predict=self.predict, on_start=self.on_start, on_end=self.on_end,
                                               launches=self.launches))
        stack.enter_context(_benchmarks_predicted(icpt))
        self._stack = stack
        return self

    def stop(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    __enter__ = start

    def __exit__(self, *exc):
        self.stop()
        return False


def run_script(script: str, argv=(), *, gpu: str = "H200", seed: int = 0, schedules: int = 1, predict: bool = True,
               on_start=None, on_end=None) -> Outcome:
    """Run ``script`` as ``python script argv...`` would, every launch compiled offline for ``gpu`` and simulated.

    >>> out = run_script("examples/add.py", gpu="H200")                   # doctest: +SKIP
    >>> [(la.kernel, la.verdict) for la in out.launches], out.exit_code    # doctest: +SKIP
    ([('add_kernel', 'clean')], 0)
    """
    path = os.path.abspath(script)
    if not os.path.isfile(path):
        raise UsageError(f"{script}: no such file", hint="give the path of a Python script")
    out = Outcome(script, argv, gpu)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sim = Simulated(gpu, seed=seed, schedules=schedules, predict=predict, on_start=on_start, on_end=on_end)
    sim.launches = out.launches
    try:
        with sim:
            out.gpu = sim.gpu
            sys.argv = [script, *argv]
            sys.path.insert(0, os.path.dirname(path))
            try:
                runpy.run_path(path, run_name="__main__")
            except SystemExit as e:
                out.program_exit_code = _exit_status(e)
            except BaseException as e:  # noqa: BLE001 - the program's own failure, reported as Python would
                out.error = e
                out.traceback = _program_traceback(e, path)
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return out


def simulate_this_process(gpu: str) -> Simulated:
    """What ``TLXWB_SIM=GPU`` does to a plain ``python`` started with the workbench's start-up folder on
    ``PYTHONPATH`` (``eval "$(tlx-workbench env)"``): this whole process runs simulated, as under ``run``; at exit
    the summary goes to stderr (the program owns stdout), ``TLXWB_JSON`` names a file for the JSON document,
    and a launch with a finding makes a clean exit status 1."""
    import atexit
    from .. import json_schema as js
    sim = Simulated(gpu, predict=os.environ.get("TLXWB_PREDICT", "1") != "0").start()
    script = sys.argv[0] if sys.argv and sys.argv[0] else "<python>"

    def report():
        out = Outcome(script, sys.argv[1:], sim.gpu)
        out.launches = sim.launches
        err = getattr(sys, "last_value", None)
        if err is not None:
            out.error = err
        for line in summary_lines(out):
            sys.stderr.write(line + "\n")
        path = os.environ.get("TLXWB_JSON")
        code = out.exit_code
        if path:
            write_json(path, js.document("run", gpu=out.gpu, exit_code=code, script=script, args=out.argv,
                                         launches=[js.launch(la) for la in out.launches],
                                         program_error=js.error(out.error), program_exit_code=0))
        sim.stop()
        if out.failed_launches:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(FINDING)          # the last exit handler to run (registered first): a finding fails
    atexit.register(report)
    global _PROCESS
    _PROCESS = (sim, report)
    return sim


_PROCESS = None       # (Simulated, its exit report) when TLXWB_SIM switched this process on at start-up


def leave_process_simulation() -> None:
    """The ``tlx-workbench`` command itself is never simulated, even when started with ``TLXWB_SIM`` set: its verbs
    set up their own simulation."""
    global _PROCESS
    if _PROCESS is not None:
        import atexit
        sim, report = _PROCESS
        atexit.unregister(report)
        sim.stop()
        _PROCESS = None


def startup_path() -> str:
    """The folder whose ``sitecustomize`` switches a ``python`` on when ``TLXWB_SIM`` is set."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")


def _exit_status(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    sys.stderr.write(f"{e.code}\n")
    return 1


@contextlib.contextmanager
def _benchmarks_predicted(icpt):
    """``triton.testing.do_bench`` answers with the predicted time of the launches ``fn`` makes."""
    import triton.testing as tt
    saved = tt.do_bench

    def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **kwargs):
        n = len(icpt.launches)
        fn()
        preds = [la.prediction for la in icpt.launches[n:]]
        ms = sum(p.us for p in preds) / 1e3 if preds and all(p is not None for p in preds) else float("nan")
        return [ms for _ in quantiles] if quantiles else ms

    tt.do_bench = do_bench
    try:
        yield
    finally:
        tt.do_bench = saved


def _program_traceback(e: BaseException, script: str) -> str:
    """The traceback a crashed program prints, its own frames only (not the runner's, the simulator's or
    Triton's): where in the program the launch was made."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if _is_program_frame(f.filename)]
    text = "Traceback (most recent call last):\n" + "".join(traceback.format_list(frames)) if frames else ""
    return text + "".join(traceback.format_exception_only(type(e), e))


def _is_program_frame(filename: str) -> bool:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return not (filename.startswith(here) or f"{os.sep}triton{os.sep}" in filename or "runpy" in filename
                or f"{os.sep}torch{os.sep}" in filename)


# -- the summary ----------------------------------------------------------------------------------------
def _grid_text(la) -> str:
    g = la.result.grid if la.result is not None else la.grid
    return str(tuple(g)) if isinstance(g, (list, tuple)) else "?"


def _us_text(values) -> str:
    vals = [v for v in values if v is not None]
    if not vals:
        return "-"
    lo, hi = min(vals), max(vals)
    return f"{lo:.1f} µs" if hi - lo < 0.05 * max(lo, 1e-9) else f"{lo:.1f}-{hi:.1f} µs"


def summary_lines(out: Outcome) -> list[str]:
    """The summary ``run`` prints: one row per kind of launch, then each finding with its file:line."""
    n = len(out.launches)
    lines = [f"== tlx-workbench run: {short_path(out.script)} on {out.gpu} (simulated on the CPU): "
             f"{n} launch(es) =="]
    groups: dict = {}
    for la in out.launches:
        key = (la.kernel, _grid_text(la), la.verdict, la.refused is not None)
        groups.setdefault(key, []).append(la)
    if groups:
        width = max(len(k[0]) + (len(f" x{len(v)}") if len(v) > 1 else 0) for k, v in groups.items())
        width = max(width, 6)
        lines.append(f"  {'kernel':<{width}}  {'grid':<14} {'verdict':<13} {'predicted':<14} simulated")
        for (kernel, grid, verdict, only_sim), las in groups.items():
            name = kernel + (f" x{len(las)}" if len(las) > 1 else "")
            v = verdict + (" (simulate-only)" if only_sim else "")
            us = _us_text([la.prediction.us if la.prediction is not None else None for la in las])
            secs = sum(la.seconds for la in las)
            lines.append(f"  {name:<{width}}  {grid:<14} {v:<13} {us:<14} {secs:.1f} s")
    seen = set()
    found = []
    for la in out.launches:
        for text in _finding_lines(la):
            if text not in seen:
                seen.add(text)
                found.append(text)
    if found:
        lines.append("findings:")
        lines += found
    ordered = sorted({la.kernel for la in out.launches if la.result is not None and la.result.atomic_ordering})
    for kernel in ordered:
        lines.append(f"note: {kernel}'s outputs differ between schedules only as its atomics' order makes them "
                     f"differ (a GPU orders atomics freely too): not a race")
    refused = sorted({(la.kernel, la.refused.splitlines()[0][:200]) for la in out.launches if la.refused})
    for kernel, why in refused:
        lines.append(f"note: the installed compiler refused {kernel}, so it was only simulated: {why}")
    if out.error is not None:
        lines.append(f"program: stopped by {type(out.error).__name__}" + _where(out.error))
    elif out.program_exit_code:
        lines.append(f"program: exited with status {out.program_exit_code}")
    else:
        lines.append("program: ended normally")
    bad = len(out.failed_launches)
    lines.append(f"result: {'FAILED' if out.exit_code else 'clean'} ({bad} of {n} launch(es) with a deadlock, "
                 f"race or protocol error)")
    return lines


def _where(e) -> str:
    f, line = getattr(e, "file", None), getattr(e, "line", None)
    return f" at {short_path(f)}:{line}" if f and line else ""


def _finding_lines(la) -> list[str]:
    r = la.result
    who = f"{la.kernel}{_grid_text(la)}"
    out = []
    if r is None:
        if la.error is not None and la.failed:
            e = la.error
            out.append(f"  {short_path(getattr(e, 'file', None) or la.file)}:{getattr(e, 'line', None) or '?'}: "
                       f"{who}: error: {getattr(e, 'message', None) or str(e).splitlines()[0]}")
        return out
    if r.deadlock is not None:
        d = r.deadlock
        out.append(f"  {short_path(d.file or r.file)}:{d.line or '?'}: {who}: deadlock")
        out += ["      " + ln for ln in d.text().splitlines()]
    for f in r.findings:
        # a finding of the whole launch (outputs that differ between schedules) has no line
        where = short_path(f.file or r.file) + (f":{f.line}" if f.line else "")
        other = f" (and line {f.other_line})" if getattr(f, "other_line", None) else ""
        sev = "" if getattr(f, "severity", "error") == "error" else "warning: "
        out.append(f"  {where}: {who}: {sev}{f.kind}{other}: {f.message}")
        if getattr(f, "hint", ""):
            out.append(f"      what to do: {f.hint}")
    return out


# -- the verb ---------------------------------------------------------------------------------------------
def main(args) -> int:
    from .. import json_schema as js
    gpu = args.sim or default_gpu()
    argv = list(args.args)
    if argv and argv[0] == "--":
        argv = argv[1:]

    def on_start(la):
        if not args.quiet:
            progress(f"[tlx-workbench] {la.kernel}: compiled" + (" (simulate-only)" if la.refused else "")
                     + ", simulating ...")

    def on_end(la):
        if not args.quiet:
            us = f", predicted {la.prediction.us:.1f} µs" if la.prediction is not None else ""
            progress(f"[tlx-workbench] {la.kernel}{_grid_text(la)}: {la.verdict} ({la.seconds:.1f} s{us})")

    # with the JSON document on stdout, the program's own prints go to stderr: stdout stays one document
    quiet_stdout = contextlib.redirect_stdout(sys.stderr) if args.json == "-" else contextlib.nullcontext()
    try:
        with quiet_stdout:
            out = run_script(args.script, argv, gpu=gpu, seed=args.seed, schedules=args.schedules,
                             predict=not args.no_predict, on_start=on_start, on_end=on_end)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - an unknown GPU name and the like: the command line's fault
        from ..errors import TLXWorkbenchError
        if isinstance(e, TLXWorkbenchError):
            raise UsageError(e.message, hint=e.hint) from None
        raise
    if out.error is not None:
        # as a crashed program: its traceback (its own frames), then what the simulator found, on stderr
        sys.stderr.write(out.traceback)
        detail = getattr(out.error, "detail", None)
        if detail and detail not in str(out.error):
            sys.stderr.write(detail + "\n")
        sys.stderr.flush()
    code = out.exit_code
    for line in summary_lines(out):
        say(args, line)
    write_json(args.json, js.document(
        "run", gpu=out.gpu, exit_code=code, script=out.script, args=out.argv,
        launches=[js.launch(la) for la in out.launches], program_error=js.error(out.error),
        program_exit_code=out.program_exit_code))
    return code


__all__ = ["run_script", "Outcome", "summary_lines", "main", "add_parser", "USAGE"]
