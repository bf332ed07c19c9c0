"""BLAS runs on one thread while a launch is simulated.

The simulator's only BLAS work is the dots of small tiles (a 64x256x64 wgmma is ~50 us on one core), between
long stretches of single-threaded Python. OpenBLAS's extra threads spin-wait between calls; on a machine
whose other cores are busy (CI, a notebook beside other jobs) they fought the simulator for the CPU: a 512^3
GEMM took 3.1 s with OpenBLAS's default two threads against 0.43 s with one, on this 2-core box under load.
The limit is the process's, for the launch only, and restored after it (nothing of the user's is changed).
"""
from __future__ import annotations

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def one_blas_thread():
    """Limit every loaded BLAS to one thread; returns a function that restores the previous limits."""
    global _controller
    if _controller is None:             # inspects the loaded libraries once (numpy's BLAS is loaded by now)
        _controller = ThreadpoolController()
    limiter = _controller.limit(limits=1, user_api="blas")
    return limiter.restore_original_limits
