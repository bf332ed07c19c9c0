"""The magics' options: ``%tlx_config`` session defaults, the option declarations, reading an option line."""
from __future__ import annotations

import inspect
from typing import Any

from IPython.core.magic_arguments import argument


# -- session defaults (%tlx_config) ------------------------------------------------------
DEFAULTS: dict[str, Any] = {"target": "sm_90", "mode": "auto", "timeout": 20.0, "seed": 0, "schedules": 1,
                            "isolate": True}



def unquote(args):
    """IPython's magic_arguments keeps the quotes around an option's value; take them off."""
    for k, v in vars(args).items():
        if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            setattr(args, k, v[1:-1])
        elif isinstance(v, list):
            setattr(args, k, [x[1:-1] if isinstance(x, str) and len(x) >= 2 and x[0] == x[-1] and x[0] in "'\""
                              else x for x in v])
    return args


def print_help(magic, line: str) -> bool:
    """``--help`` / ``-h``: print the magic's usage (magic_arguments builds it into the docstring)."""
    tokens = line.split()
    if "--help" in tokens or "-h" in tokens:
        print(inspect.getdoc(magic) or "")
        return True
    return False



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
    argument("--target", "-t", default=None, help="sm_90 (Hopper, default) or sm_100 (Blackwell)"),
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
    argument("--knobs", default=None, help='constexpr controls, e.g. "BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER"'),
    argument("--timeout", type=float, default=None, help="seconds before a GPU launch counts as hung"),
    argument("--seed", type=int, default=None, help="simulator schedule seed"),
    argument("-o", "--output", default=None, dest="output", help="keep the result object in this variable"),
)

# %tlx_bench
BENCH_OPTIONS = (
    argument("--flops", default=None, help="expression: flops per call"),
    argument("--bytes", default=None, help="expression: bytes per call"),
    argument("--baseline", action="append", default=None, help="NAME=EXPR timed alongside"),
    argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung"),
    argument("-o", "--output", default=None, dest="output", help="keep the BenchResult in this variable"),
    argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)"),
)

# %tlx_profile
PROFILE_OPTIONS = (
    argument("--sim", action="store_true", help="the simulated timeline instead of a measured one"),
    argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung"),
    argument("-o", "--output", default=None, dest="output", help="keep the Trace in this variable"),
    argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)"),
)

# %tlx_show
SHOW_OPTIONS = (
    argument("--barriers", action="store_true", help="barrier phases instead of the timeline (traces)"),
    argument("obj", help="a variable: a Trace, CompileReport, SimResult, RunResult, BenchResult or %%tlx result"),
)

# %tlx_config
CONFIG_OPTIONS = (
    argument("--target", default=None, help="default target: sm_90 or sm_100"),
    argument("--mode", default=None, choices=["auto", "sim", "gpu"], help="default mode"),
    argument("--timeout", type=float, default=None, help="default GPU launch timeout, seconds"),
    argument("--seed", type=int, default=None, help="default simulator seed"),
    argument("--schedules", type=int, default=None, help="simulator schedules to explore"),
    argument("--isolate", default=None, choices=["yes", "no"],
             help="run GPU launches in the watchdog worker (yes, default) or in this process"),
    argument("--reset", action="store_true", help="back to the defaults"),
)
