"""on_every_core (sim/schedule/blas_threads.py): the simulator's big array work split over the machine's cores."""
import threading

import numpy as np
import pytest

from tlx_workbench.sim.schedule import blas_threads
from tlx_workbench.sim.schedule.blas_threads import on_every_core


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(blas_threads, "cores", lambda: 2)


@pytest.mark.parametrize("n,work", [(63, 1 << 19), (5, 1 << 22), (1000, 1 << 12), (3, 1)])
def test_the_shares_cover_the_axis_in_order(two_cores, n, work):
    x = np.random.default_rng().standard_normal((n, 16))
    seen = []
    lock = threading.Lock()

    def part(sl):
        with lock:
            seen.append(sl)
        return np.exp(x[sl])
    parts = on_every_core(part, n, work)
    assert np.array_equal(np.concatenate(parts), np.exp(x))
    starts = sorted((s.start, s.stop) for s in seen)
    assert starts[0][0] == 0 and starts[-1][1] == n and all(a[1] == b[0] for a, b in zip(starts, starts[1:]))
    assert len(seen) == len(parts)
    if n * work >= 1 << 22:
        assert len(parts) >= 2


def test_a_nested_call_runs_inline_and_errors_come_back(two_cores):
    inner = []

    def part(sl):
        inner.append(len(on_every_core(lambda s: s, 64, 1 << 22)))
        return sl
    on_every_core(part, 64, 1 << 22)
    assert inner and set(inner) == {1}

    def bad(sl):
        if sl.start == 0:
            raise ValueError("share 0")
        return sl
    with pytest.raises(ValueError, match="share 0"):
        on_every_core(bad, 64, 1 << 22)
