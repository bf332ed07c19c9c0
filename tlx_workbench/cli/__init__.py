"""The ``tlx-workbench`` command: the workbench from a shell, a CI job or a coding agent.

    tlx-workbench run [--sim GPU] [--json FILE] SCRIPT [args...]     a program, unchanged, simulated
    tlx-workbench check FILE[::kernel] [--json FILE]                  barrier-protocol findings of its launches
    tlx-workbench compile FILE::kernel --target sm_90 [--config K=V]  the CompileReport as text
    tlx-workbench predict FILE[::kernel] [--sim GPU]                  each launch's predicted time
    tlx-workbench explore KERNEL --shapes MxNxK [...]                 a config sweep into the results store
    tlx-workbench schema                                              the JSON schema every --json follows
    eval "$(tlx-workbench env --sim H200)"; python SCRIPT             the same as run, by the environment
    tlx-workbench demo [-o FILE]                                      a self-contained HTML report

Results on stdout, progress on stderr; ``--json FILE`` (``-``: stdout) writes one document of the versioned
schema in :mod:`tlx_workbench.json_schema`. Exit codes: 0 clean, 1 a finding (a deadlock, a race, a broken
rule, a failed program), 2 a usage error. Each verb calls the Python API (``wb.simulate``, ``wb.check``,
``wb.compile``, ``wb.predict``, ``wb.explore``) and adds nothing a Python caller cannot do.
"""
from __future__ import annotations

import argparse
import sys

from .common import USAGE, UsageError


def _parser() -> argparse.ArgumentParser:
    from . import explore, kernels, run
    p = argparse.ArgumentParser(prog="tlx-workbench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    run.add_parser(sub)
    kernels.add_parsers(sub)
    explore.add_parser(sub)
    e = sub.add_parser("env", help="print the shell lines that make a plain `python` run simulated "
                                   "(eval \"$(tlx-workbench env)\")")
    e.add_argument("--sim", metavar="GPU", default=None, help="H200 (default, or $TLXWB_SIM), H100, B200")
    e.add_argument("--json", metavar="FILE", default=None, help="each process writes its JSON document to FILE")
    e.set_defaults(func=_env)
    s = sub.add_parser("schema", help="print the JSON schema every --json document follows")
    s.set_defaults(func=_schema)
    d = sub.add_parser("demo", help="compile a Hopper and a Blackwell GEMM offline and write one self-contained "
                                    "HTML report")
    d.add_argument("-o", "--output", default="tlx_workbench_report.html")
    d.set_defaults(func=_demo)
    return p


def _demo(args) -> int:
    from ..demo import run_demo
    print(run_demo(args.output))
    return 0


def _env(args) -> int:
    import os
    import shlex
    from ..target import gpu_model
    from .common import default_gpu
    from .run import startup_path
    try:
        gpu = gpu_model(args.sim or default_gpu()).name
    except Exception as e:  # noqa: BLE001 - an unknown GPU name
        raise UsageError(str(e).splitlines()[0]) from None
    path = os.pathsep.join(p for p in (startup_path(), os.environ.get("PYTHONPATH", "")) if p)
    print(f"export TLXWB_SIM={shlex.quote(gpu)}")
    print(f"export PYTHONPATH={shlex.quote(path)}")
    if args.json:
        print(f"export TLXWB_JSON={shlex.quote(os.path.abspath(args.json))}")
    return 0


def _schema(args) -> int:
    import json
    from ..json_schema import SCHEMA
    print(json.dumps(SCHEMA, indent=1))
    return 0


def main(argv=None) -> int:
    """Run one verb; returns its exit code (0 clean, 1 finding, 2 usage error)."""
    from .run import leave_process_simulation
    leave_process_simulation()
    p = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    rest = []
    if argv and argv[0] != "run" and "--" in argv:
        # the script's own arguments, after --: argparse's subcommands do not pass them on
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    try:
        args = p.parse_args(argv)
    except SystemExit as e:           # argparse's own usage errors and --help
        return int(e.code or 0) if isinstance(e.code, int) else USAGE
    if rest:
        args.args = list(getattr(args, "args", None) or []) + rest
    try:
        return args.func(args)
    except UsageError as e:
        sys.stderr.write(f"tlx-workbench {args.cmd}: {e.message}\n")
        if e.hint:
            sys.stderr.write(f"  what to do: {e.hint}\n")
        return USAGE


if __name__ == "__main__":
    sys.exit(main())
