"""Where the CPU stages run: here, a local process pool, or Ray tasks on a Ray cluster.

Each executor's ``map(calls)`` takes ``(stage, travelled problem, cfg, shape, options)``
tuples and yields ``(index, outcome dict)`` as the results arrive, in any order; the driver
writes each to the store as it comes. No scheduling of our own beyond that.
"""
from __future__ import annotations

import os

from .stages import run_stage


class SerialExecutor:
    """Every stage in this process, one after another (a kernel defined in a notebook cell
    that cannot travel still runs this way)."""
    name = "serial"
    workers = 1

    def map(self, calls):
        for i, c in enumerate(calls):
            yield i, run_stage(*c)

    def close(self):
        pass


def _init_worker():
    # a pool worker compiles and simulates on the CPU: it must never grab a GPU of the host
    os.environ.setdefault("TLXWB_IN_POOL", "1")


class PoolExecutor:
    """A local pool of spawned processes (default: one per CPU core)."""
    name = "process"

    def __init__(self, workers: int | None = None):
        import concurrent.futures
        import multiprocessing
        self.workers = workers or max(1, os.cpu_count() or 1)
        self._pool = concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                            initializer=_init_worker)

    def map(self, calls):
        import concurrent.futures
        from ..runtime.watchdog import _plain_main
        # the pool's processes start on the first submit: without the user's __main__ (a script
        # or notebook re-imported in every worker would run its sweep again)
        with _plain_main():
            futs = {self._pool.submit(run_stage, *c): i for i, c in enumerate(calls)}
        try:
            for f in concurrent.futures.as_completed(futs):
                yield futs[f], f.result()
        finally:
            for f in futs:
                f.cancel()

    def close(self):
        self._pool.shutdown(wait=False, cancel_futures=True)


class RayExecutor:
    """Ray tasks (``num_cpus=1`` each) on the cluster at ``address`` (``ray.init(address=...)``);
    with no address and no Ray running, a local Ray is started on loopback."""
    name = "ray"

    def __init__(self, address: str | None = None, **init_kwargs):
        import ray
        self._started = False
        if not ray.is_initialized():
            kw = dict(init_kwargs)
            if address is None:
                kw.setdefault("include_dashboard", False)
                kw.setdefault("num_cpus", os.cpu_count() or 1)
            kw.setdefault("log_to_driver", False)
            ray.init(address=address, **kw)
            self._started = True
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        self._task = ray.remote(num_cpus=1)(run_stage)

    def map(self, calls):
        import ray
        refs = {self._task.remote(*c): i for i, c in enumerate(calls)}
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                yield refs[ready[0]], ray.get(ready[0])
        finally:
            for r in pending:
                ray.cancel(r)

    def close(self):
        pass    # the cluster belongs to the user (or to ray.shutdown() at exit)


def executor(backend: str, workers: int | None = None, address: str | None = None):
    """The executor of ``backend``: "process" (default), "ray" or "serial"."""
    if backend == "process":
        return PoolExecutor(workers)
    if backend == "ray":
        return RayExecutor(address)
    if backend == "serial":
        return SerialExecutor()
    from ..errors import TLXWorkbenchError
    raise TLXWorkbenchError(f"unknown backend {backend!r}", hint="use 'process', 'ray' or 'serial'")
