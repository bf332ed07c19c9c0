"""The magics' options: ``%tlx_config`` session defaults, the option declarations, reading an option line."""
from __future__ import annotations

import inspect
from typing import Any

from IPython.core.magic_arguments import argument


# -- session defaults (%tlx_config) ------------------------------------------------------
DEFAULTS: dict[str, Any] = {"target": "sm_90", "mode": "auto", "timeout": 20.0, "seed": 0, "schedules": 1,
                            "isolate": True, "raise": True}



def unquote(args):
    """IPython's magic_arguments keeps the quotes around an option's value; take them off."""
    for k, v in vars(args).items():
        if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            setattr(args, k, v[1:-1])
        elif isinstance(v, list):
            setattr(args, k, [x[1:-1] if isinstance(x, str) and len(x) >= 2 and x[0] == x[-1] and x[0] in "'\""
                              else x for x in v])
    return args


def print_help(magic, line: str, others: str = "") -> bool:
    """``--help`` / ``-h``: print the magic's usage (magic_arguments builds it into the docstring),
    then ``others`` (the list of the other magics)."""
    tokens = line.split()
    if "--help" in tokens or "-h" in tokens:
        print(inspect.getdoc(magic) or "")
        if others:
            print("\n" + others)
        return True
    return False


def cell_usage(func):
    """A cell magic's usage names it as it is typed, ``%%tlx [...]`` (magic_arguments writes ``%tlx``).

    Goes above ``magic_arguments()``, which writes the usage into the docstring.
    """
    name = func.__name__
    func.__doc__ = (func.__doc__ or "").replace(f"  %{name} ", f"  %%{name} ", 1)
    return func


def magics_list(magics_cls, skip: str = "") -> str:
    """"Other magics:" and one line per magic of ``magics_cls`` (first line of its docstring).

    Read from the class, so a magic added to it later is listed without editing this.
    """
    rows = []
    for kind, prefix in (("cell", "%%"), ("line", "%")):
        for name, meth in sorted(magics_cls.magics.get(kind, {}).items()):
            if name == skip:
                continue
            func = getattr(magics_cls, meth if isinstance(meth, str) else meth.__name__, None)
            # magic_arguments puts the usage ("::", "%name [...]") before the docstring's own first line
            doc = [ln for ln in (inspect.getdoc(func) or "").splitlines()
                   if ln.strip() and ln.strip() != "::" and not ln.startswith((" ", "%"))]
            rows.append(f"  {prefix}{name:<14} {doc[0] if doc else ''}")
    return "Other magics (each takes --help):\n" + "\n".join(rows) if rows else ""


def parse(magic, line: str):
    """``parse_argstring`` with the quotes taken off; a bad option raises a CellError that says
    what was wrong and, for a misspelt option, which one was meant ("did you mean --check?")."""
    import difflib

    from IPython.core.magic_arguments import parse_argstring

    from .errors import CellError
    name = getattr(magic, "__name__", "tlx")
    try:
        return unquote(parse_argstring(magic, line))
    except BaseException as e:  # noqa: BLE001 - argparse raises UsageError (or SystemExit)
        msg = str(e).strip() or type(e).__name__
        known = [s for a in magic.parser._actions for s in a.option_strings]
        unknown = [t.split("=")[0] for t in line.split() if t.startswith("-") and t.split("=")[0] not in known]
        hint = f"see %{'%' if name == 'tlx' else ''}{name} --help"
        for t in unknown:
            close = difflib.get_close_matches(t, known, n=1, cutoff=0.6)
            if close:
                hint = f"did you mean {close[0]}? ({hint})"
                break
        raise CellError(f"%{'%' if name == 'tlx' else ''}{name} options: {msg}", hint=hint) from None



def declare(arguments):
    """Apply ``arguments`` (IPython ``argument`` decorators, in the order the usage lists them) to a magic.

    The same as stacking them as decorators above the magic; ``magic_arguments()`` goes above this.
    """
    def apply(func):
        for arg in reversed(arguments):  # decorators apply bottom-up
            func = arg(func)
        return func
    return apply


# -- the option declarations, one tuple per magic -------------------------------------------
# %%tlx
TLX_OPTIONS = (
    argument("--target", "-t", default=None, help="sm_90 (Hopper, default: this machine's GPU, else H200), sm_100 (Blackwell: B200), "
                                                        "or a GPU model: H100, H200, B200"),
    argument("--sim", action="store_true", help="run on the CPU simulator"),
    argument("--gpu", action="store_true", help="run on the GPU (default when one is present)"),
    argument("--check", action="store_true",
             help="verify outputs against --ref (and run the barrier-protocol checker when present)"),
    argument("--ref", default=None, help="reference: an expression giving a function of the launch's arguments, "
                                         "or the expected tensor(s)"),
    argument("--outputs", default=None, help="comma-separated names of the kernel arguments it writes"),
    argument("--bench", action="store_true", help="benchmark with do_bench (GPU)"),
    argument("--flops", default=None, help="expression: flops per call (for TFLOP/s)"),
    argument("--bytes", default=None, help="expression: bytes moved per call (for GB/s)"),
    argument("--baseline", action="append", default=None, help="NAME=EXPR timed alongside, e.g. cuBLAS=a @ b"),
    argument("--profile", action="store_true", help="measure a per-warp-group timeline (GPU)"),
    argument("--report", action="store_true", help="show the compile report"),
    argument("--memory", action="store_true", help="show the SMEM/TMEM memory map"),
    argument("--ir", action="store_true", help="show the IR explorer"),
    argument("--timeline", action="store_true", help="show the timeline (simulated or measured)"),
    argument("--barriers", action="store_true", help="show barrier phases"),
    argument("--knobs", default=None, help='controls for constexprs or the cell\'s own variables (a move re-runs the cell\'s host '
                                             'code), e.g. "BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER"'),
    argument("--timeout", type=float, default=None, help="seconds before a GPU launch counts as hung"),
    argument("--seed", type=int, default=None, help="simulator schedule seed"),
    argument("--no-raise", action="store_true", dest="no_raise",
             help="show a failure without failing the cell (for a cell that fails on purpose)"),
    argument("-o", "--output", default=None, dest="output", help="keep the result object in this variable"),
)

# %tlx_bench
BENCH_OPTIONS = (
    argument("--flops", default=None, help="expression: flops per call"),
    argument("--bytes", default=None, help="expression: bytes per call"),
    argument("--baseline", action="append", default=None, help="NAME=EXPR timed alongside"),
    argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung"),
    argument("-o", "--output", default=None, dest="output", help="keep the BenchResult in this variable"),
    argument("--no-raise", action="store_true", dest="no_raise", help="show an error without failing the cell"),
    argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)"),
)

# %tlx_profile
PROFILE_OPTIONS = (
    argument("--sim", action="store_true", help="the simulated timeline instead of a measured one"),
    argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung"),
    argument("-o", "--output", default=None, dest="output", help="keep the Trace in this variable"),
    argument("--no-raise", action="store_true", dest="no_raise", help="show an error without failing the cell"),
    argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)"),
)

# %tlx_show
SHOW_OPTIONS = (
    argument("--barriers", action="store_true", help="barrier phases instead of the timeline (traces)"),
    argument("--no-raise", action="store_true", dest="no_raise", help="show an error without failing the cell"),
    argument("obj", help="a variable: a Trace, CompileReport, SimResult, RunResult, BenchResult or %%tlx result"),
)

# %tlx_config
CONFIG_OPTIONS = (
    argument("--target", default=None, help="default target: sm_90, sm_100 or a GPU model (H100, H200, B200)"),
    argument("--mode", default=None, choices=["auto", "sim", "gpu"], help="default mode"),
    argument("--timeout", type=float, default=None, help="default GPU launch timeout, seconds"),
    argument("--seed", type=int, default=None, help="default simulator seed"),
    argument("--schedules", type=int, default=None, help="simulator schedules to explore"),
    argument("--isolate", default=None, choices=["yes", "no"],
             help="run GPU launches in the watchdog worker (yes, default) or in this process"),
    argument("--raise", default=None, choices=["yes", "no"], dest="raise_",
             help="a failing %%%%tlx cell fails (yes, default: Run All and nbval stop there) or only shows it"),
    argument("--reset", action="store_true", help="back to the defaults"),
    argument("--no-raise", action="store_true", dest="no_raise", help="show an error without failing the cell"),
)
