"""The CPU simulator for TLX kernels (Hopper and Blackwell): exact barrier semantics, deadlock and race
diagnosis, timelines. Blackwell: TMEM, tcgen05 MMA (and MX-scaled), tcgen05_commit, clusters
(``ctas_per_cga``: remote arrivals, multicast and 2-CTA TMA, 2-CTA MMA, remote SMEM stores,
cluster barriers) and CLC work stealing.

>>> from tlx_workbench import simulate
>>> with simulate(gpu="H200", seed=0) as sim:        # doctest: +SKIP
...     c = matmul(a, b)
>>> sim.result.raise_for_errors()                   # doctest: +SKIP
"""
from .api import SimResult, Simulation, simulate
from .diagnosis.diagnose import DeadlockReport
from .timing.prediction import CallPrediction, Prediction, predict

__all__ = ["simulate", "SimResult", "Simulation", "DeadlockReport", "predict", "Prediction", "CallPrediction"]
