"""TLX Workbench: write, understand and speed up TLX kernels.

The public API, short:

    compile(kernel, *args, target="sm_90", **constexprs) -> CompileReport
    simulate(...)          CPU simulator (context manager or call) -> SimResult
    predict(...)           a whole launch's time from a few simulated CTAs (calibrated cost model)
    check(kernel, ...)     barrier-protocol findings; advise_warp_barriers(...)
    run / bench / profile  on a real GPU
    explore(problem, space, shapes)  config sweeps: static, simulated, measured -> Exploration
    offline(target)        import and compile TLX kernel modules without a GPU
    Trace                  the one trace model, simulated or measured

>>> import tlx_workbench as wb
>>> report = wb.compile(my_kernel, a_desc, b_desc, c_desc, M, N, K, target="sm_90", BM=128)
"""
from __future__ import annotations

import importlib

from .errors import TLXWorkbenchError, CompileError, SimulationError, DeadlockError, GPUError, NoGPUError
from .target import offline, gpu_model, GPU_MODELS, GPUModel, has_gpu
from .trace import Trace, Span, BarrierEvent, Counter

from ._version import __version__

# name -> module that defines it; imported on first use so `import tlx_workbench` stays cheap
_LAZY = {
    "compile": "tlx_workbench.compiler",
    "CompileReport": "tlx_workbench.compiler",
    "load_module": "tlx_workbench.compiler",
    "simulate": "tlx_workbench.sim",
    "SimResult": "tlx_workbench.sim",
    "predict": "tlx_workbench.sim",
    "Prediction": "tlx_workbench.sim",
    "CallPrediction": "tlx_workbench.sim",
    "check": "tlx_workbench.checker",
    "Finding": "tlx_workbench.checker",
    "advise_warp_barriers": "tlx_workbench.checker",
    "run": "tlx_workbench.runtime",
    "bench": "tlx_workbench.runtime",
    "profile": "tlx_workbench.runtime",
    "time_call": "tlx_workbench.runtime",
    "Timing": "tlx_workbench.runtime",
    "RunResult": "tlx_workbench.runtime",
    "BenchResult": "tlx_workbench.runtime",
    "explore": "tlx_workbench.explore",
    "Exploration": "tlx_workbench.explore",
}

__all__ = ["TLXWorkbenchError", "CompileError", "SimulationError", "DeadlockError", "GPUError",
           "NoGPUError", "offline", "gpu_model", "GPU_MODELS", "GPUModel", "has_gpu", "Trace", "Span",
           "BarrierEvent", "Counter", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        mod = importlib.import_module(_LAZY[name])
        return getattr(mod, name)
    raise AttributeError(f"module 'tlx_workbench' has no attribute {name!r}")
