"""The CPU simulator for TLX kernels (Hopper): exact barrier semantics, deadlock and race diagnosis, timelines.

>>> from tlx_workbench import simulate
>>> with simulate(gpu="H200", seed=0) as sim:        # doctest: +SKIP
...     c = matmul(a, b)
>>> sim.result.raise_for_errors()                   # doctest: +SKIP
"""
from .api import SimResult, Simulation, simulate
from .diagnose import DeadlockReport

__all__ = ["simulate", "SimResult", "Simulation", "DeadlockReport"]
