"""Explore a kernel's configs: sweeps that never hang, a results store, searches, Ray for scale.

Stages, cheapest first, each able to drop a config with its reason: *static* (offline
compile: SMEM/TMEM, registers, spills, CTAs per SM, ptxas advisories), *simulated* (the CPU
simulator proves the protocol at a small shape, or at the real one with ``sim_shape="real"``:
a deadlocking config is dropped with its wait-for graph before it reaches a GPU; the cost model
predicts the time at the real shape),
*measured* (correctness, then do_bench, in watchdog workers: a hang is a row, not the end).
Every result is a row of an SQLite store (:class:`Store`); :class:`Exploration` reads them.

>>> import tlx_workbench.explore as tx
>>> ex = tx.explore("gemm_ws", shapes=[(4096, 4096, 4096)], stages=("static", "simulated"))  # doctest: +SKIP
>>> ex.best(by="predicted_us"), ex.pareto("smem_bytes"), ex.snippet()                      # doctest: +SKIP
"""
from .exploration import Exploration
from .problem import Problem
from .space import Space, config_id
from .store import Row, Store
from .sweep import default_store_path, explore
from .measure import GPUMeasurer, RayGPUMeasurer, ReplayMeasurer

__all__ = ["explore", "Exploration", "Problem", "Space", "Store", "Row", "config_id", "default_store_path",
           "GPUMeasurer", "RayGPUMeasurer", "ReplayMeasurer"]
