"""Threads of a simulation: BLAS on one, the simulator's own big array work over every core.

The simulator's only BLAS work is the dots of small tiles (a 64x256x64 wgmma is ~50 us on one core), between
long stretches of single-threaded Python. OpenBLAS's extra threads spin-wait between calls; on a machine
whose other cores are busy (CI, a notebook beside other jobs) they fought the simulator for the CPU: a 512^3
GEMM took 3.1 s with OpenBLAS's default two threads against 0.43 s with one, on this 2-core box under load.
The limit is the process's, for the launch only, and restored after it (nothing of the user's is changed).
The simulator's own big operations (a wave's MMAs and elementwise ops, a large MMA's tiles, ``sim/schedule/batch.py``,
``sim/ops/mma_numerics.py``) split their leading axis over the machine's cores instead (:func:`on_every_core`): the
compiled MMA kernel and numpy's ufuncs release the GIL.
"""
from __future__ import annotations

import os
import threading

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def one_blas_thread():
    """Limit every loaded BLAS to one thread; returns a function that restores the previous limits."""
    global _controller
    if _controller is None:             # inspects the loaded libraries once (numpy's BLAS is loaded by now)
        _controller = ThreadpoolController()
    limiter = _controller.limit(limits=1, user_api="blas")
    return limiter.restore_original_limits


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:       # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_POOL = None
_in_pool = threading.local()


def on_every_core(part, n: int, work_per_item: int):
    """``[part(slice)]`` over an axis ``0..n``, split across the machine's cores when the work is big enough to pay
    for a thread; results in order. The calling thread does the last share itself (it would only wait: one
    thread fewer to wake, and its share starts at once). Inside a part (a nested call) it runs inline: the other
    cores are busy.

    >>> on_every_core(lambda sl: sl, 4, 1)
    [slice(0, 4, None)]
    """
    global _POOL
    k = min(cores(), n)
    if k < 2 or n * work_per_item < (1 << 22) or getattr(_in_pool, "on", False):
        return [part(slice(0, n))]
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor
        _POOL = ThreadPoolExecutor(max_workers=cores() - 1, thread_name_prefix="tlxwb-sim")

    def run(sl):
        _in_pool.on = True
        try:
            return part(sl)
        finally:
            _in_pool.on = False
    bounds = [n * i // k for i in range(k + 1)]
    futs = [_POOL.submit(run, slice(bounds[i], bounds[i + 1])) for i in range(k - 1)]
    try:
        mine = run(slice(bounds[k - 1], bounds[k]))
    finally:
        done = [f.result() for f in futs]      # the pool's shares finish before anything else happens
    return done + [mine]
