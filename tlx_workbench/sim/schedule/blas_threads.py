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

import itertools
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


#: a share of on_every_core's work is at least this many multiply-adds (or elements): its per-share overhead (a
#: kernel call, array views) stays small against it
_MIN_SHARE = 1 << 21
#: shares per core at most: a core that is busy elsewhere (another process) takes fewer of them
_SHARES_PER_CORE = 4


def on_every_core(part, n: int, work_per_item: int):
    """``[part(slice), ...]`` over an axis ``0..n`` (the slices in order, covering it), split across the machine's
    cores when the work is big enough to pay for a thread; results in order. The work is cut into a few shares per
    core, and each thread takes the next share left when it finishes one: a core that another process also runs
    on (a 2-core machine beside another job) does fewer, instead of the others waiting for its half. The calling
    thread takes shares too (it would only wait). Inside a part (a nested call) it runs inline: the other cores are
    busy.

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
    shares = max(k, min(n, k * _SHARES_PER_CORE, n * work_per_item // _MIN_SHARE))
    bounds = [n * i // shares for i in range(shares + 1)]
    out: list = [None] * shares
    taken = itertools.count()       # next() on it is atomic (the GIL): each share goes to one thread

    def work():
        _in_pool.on = True
        try:
            for i in iter(taken.__next__, None):
                if i >= shares:
                    return
                out[i] = part(slice(bounds[i], bounds[i + 1]))
        finally:
            _in_pool.on = False
    futs = [_POOL.submit(work) for _ in range(k - 1)]
    try:
        work()
    finally:
        for f in futs:              # the pool's shares finish before anything else happens
            f.result()
    return out
