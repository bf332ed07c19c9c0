"""The timing runner's figures and verdict on the CPU: its quantiles are torch's (what do_bench's ``quantiles=``
gives), a measurement is launch-bound when do_bench is well above the graph replay or the host is the slower side,
and asking for a graph replay or host time without a GPU says so before anything runs."""
import random

import pytest
import torch

from tlx_workbench.errors import NoGPUError
from tlx_workbench.runtime import timing
from tlx_workbench.runtime.benchmark import BenchResult, make_row
from tlx_workbench.runtime.timing import LAUNCH_BOUND_RATIO, Timing


def _runs(rng, n, centre):
    return [centre * rng.uniform(0.95, 1.1) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_quantiles_are_torch_quantiles(seed):
    rng = random.Random(seed)
    runs = _runs(rng, rng.randint(1, 300), rng.uniform(0.002, 5.0))
    t = Timing("k", runs, [sorted(runs)[len(runs) // 2]])
    ref = torch.quantile(torch.tensor(runs, dtype=torch.float64), torch.tensor([0.5, 0.2, 0.8], dtype=torch.float64))
    assert [t.median_ms, t.p20_ms, t.p80_ms] == pytest.approx(ref.tolist(), rel=1e-12)
    assert t.min_ms == min(runs) and t.summary()["samples"] == len(runs)
    # do_bench's default figure, which a suite that quoted it keeps
    assert t.mean_ms == pytest.approx(torch.tensor(runs, dtype=torch.float64).mean().item(), rel=1e-12)


def test_launch_bound_verdict():
    rng = random.Random(7)
    runs = _runs(rng, 200, 0.5)
    t = Timing("gemm", runs, [0.5, 0.52])
    assert t.launch_bound is None and "not measured" in t.verdict and t.reasons() == []
    med = t.median_ms
    t.graph_ms = med / (0.9 * LAUNCH_BOUND_RATIO)          # do_bench a little above the graph: the kernel's time
    assert t.launch_bound is False and t.verdict == "GPU-bound" and t.gpu_ms == t.graph_ms
    t.host_ms = 0.5 * t.graph_ms
    assert t.launch_bound is False
    t.graph_ms = med / (1.5 * LAUNCH_BOUND_RATIO)          # well above: the launch fills the window
    assert t.launch_bound is True and len(t.reasons()) == 1 and "graph replay" in t.reasons()[0]
    t.host_ms = t.graph_ms                                  # and the host as slow as the GPU
    assert len(t.reasons()) == 2 and "host" in t.reasons()[1]
    assert "launch-bound" in repr(t) and "launch-bound" in t._repr_html_()
    only_host = Timing("<tiny>", runs, [med], host_ms=2 * med)
    assert only_host.launch_bound is True and only_host.gpu_ms == only_host.median_ms
    assert "&lt;tiny&gt;" in only_host._repr_html_()
    assert t.spread == pytest.approx(0.02 / med)


def test_bench_rows_carry_the_graph_replay_and_verdict():
    rng = random.Random(3)
    fast, slow = Timing("ours", _runs(rng, 100, 0.2), [0.2]), Timing("vendor", _runs(rng, 100, 0.004), [0.004])
    fast.graph_ms, slow.graph_ms = fast.median_ms * 0.98, slow.median_ms / 3
    rows = [make_row("ours", fast.summary(), 1e12, None, None),
            make_row("vendor", slow.summary(), 1e12, None, None, baseline=True)]
    assert rows[0].median_ms == fast.median_ms
    assert rows[0].tflops == pytest.approx(1e12 / (fast.median_ms * 1e-3) / 1e12)
    assert (rows[0].launch_bound, rows[1].launch_bound) == (False, True)
    text = repr(BenchResult("ours", rows, flops=1e12, device="cpu"))
    assert "graph ms" in text and "launch-bound" in text
    assert text.splitlines()[2].split()[-1] == "no" and text.splitlines()[3].split()[-1] == "yes"


@pytest.mark.parametrize("ask", [dict(graph=True), dict(host=True)])
def test_graph_or_host_time_without_a_gpu_says_so_first(ask):
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: tests/runtime/test_timing_gpu.py times on it")
    called = []
    with pytest.raises(NoGPUError, match="needs a CUDA GPU") as e:
        timing.time_call(lambda: called.append(1), name="tiny", **ask)
    assert not called and "simulator" in e.value.hint
