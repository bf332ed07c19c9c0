"""The short public API: every name resolves, and stays a function after its module is imported."""
import importlib
import random
import statistics

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.runtime import timing


def test_every_lazy_name_resolves():
    for name in wb._LAZY:
        assert getattr(wb, name) is not None, name


def test_verbs_stay_callable_after_their_packages_are_imported():
    for mod in set(wb._LAZY.values()):
        importlib.import_module(mod)         # binds the subpackage on tlx_workbench
    for verb in ("compile", "simulate", "check", "run", "bench", "profile", "time_call", "advise_warp_barriers"):
        fn = getattr(wb, verb)
        assert callable(fn) and not isinstance(fn, type(wb)), verb


def test_the_timing_runner_is_on_the_facade():
    assert wb.time_call is timing.time_call and wb.Timing is timing.Timing
    assert {"time_call", "Timing"} <= set(wb.runtime.__all__)
    rng = random.Random()
    runs = [rng.uniform(0.1, 2.0) for _ in range(rng.randint(3, 200))]
    t = wb.Timing("kernel", runs, [statistics.median(runs)])
    ref = torch.tensor(runs, dtype=torch.float64)
    assert t.median_ms == pytest.approx(torch.quantile(ref, 0.5).item(), rel=1e-12)
    assert t.mean_ms == pytest.approx(ref.mean().item(), rel=1e-12)
    assert repr(t).startswith("Timing(kernel: do_bench median") and "not measured" in t.verdict
    if not torch.cuda.is_available():
        with pytest.raises(wb.NoGPUError):
            wb.time_call(lambda: None, graph=True)
