"""Simulated vs measured, side by side: compare() on a real simulated gemm_ws trace and the decoded
records of the same kernel and config (its instrumented copy run on the simulator, sim_clocks giving
the clock registers a meaning), the per-task shares and errors, and the view drawn from them."""
import re

import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench import views
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.kernels._common import torch_alloc
from tlx_workbench.runtime import instrument
from tlx_workbench.target import gpu_model
from tlx_workbench.trace import Trace
from tlx_workbench.trace_compare import compare
from tlx_workbench.widgets.trace_compare import trace_compare_html, trace_compare_svg

from sim_clocks import sim_clocks


@pytest.fixture(scope="module")
def traces():
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()).item()))
    M, N, K = 200, 136, 72
    a, b = torch.randn(M, K, generator=g).half(), torch.randn(K, N, generator=g).half()
    c = torch.empty(M, N, dtype=torch.float16)
    cfg = gemm_ws.SIM_CONFIGS["two_strips"]
    triton.set_allocator(torch_alloc)
    args, options = gemm_ws._kernel_call(a, b, c, cfg, 2)
    sim = wb.simulate(gemm_ws.gemm_ws_coop_kernel, *args, grid=(2,), gpu="H200", **options)
    assert sim.ok, sim
    inst = instrument.instrument(gemm_ws.gemm_ws_coop_kernel)
    buf = inst.buffer("cpu", grid=2, ctas=[0, 1], capacity=128)
    with sim_clocks(ghz=1.6):
        assert wb.simulate(inst.kernel, buf, *args, grid=(2,), gpu="H200", **options).ok
    measured = instrument.decode(buf.numpy(), inst.sites, inst.tasks, file=inst.file,
                                 meta={"kernel": "gemm_ws_coop_kernel"})
    return sim.trace, measured


def _wait_share(tr, cta, task):
    """By hand, from the spans: per replica, time in waits over its extent; their mean."""
    shares = []
    for rep in sorted({s.replica for s in tr.spans_of(cta=cta, task=task)}):
        spans = list(tr.spans_of(cta=cta, task=task, replica=rep))
        ext = max(s.end for s in spans) - min(s.start for s in spans)
        shares.append(sum(s.duration for s in spans if s.kind == "wait") / ext)
    return sum(shares) / len(shares)


def test_tasks_line_up_with_shares_and_errors(traces):
    sim, measured = traces
    cmp = compare(sim, measured)
    assert [t.task for t in cmp.tasks] == ["default", "task1"] and [t.replicas for t in cmp.tasks] == [1, 2]
    assert cmp.sim_cta == 0 and cmp.measured_ctas == [0, 1] and cmp.notes == []
    ghz = sim.meta.get("clock_ghz") or gpu_model("H200").clock_ghz      # the simulator's time clock
    assert cmp.sim_clock_ghz == ghz
    for t in cmp.tasks:
        sw = _wait_share(sim, 0, t.task)
        mw = (_wait_share(measured, 0, t.task) + _wait_share(measured, 1, t.task)) / 2
        assert t.sim_wait == pytest.approx(sw) and t.measured_wait == pytest.approx(mw)
        assert t.sim_busy == pytest.approx(1 - sw) and t.wait_error == pytest.approx(100 * (sw - mw))
        assert t.busy_error == pytest.approx(-t.wait_error)
        assert t.time_error == pytest.approx(t.sim_ns / t.measured_ns - 1)
    spans = list(sim.spans_of(cta=0))
    assert cmp.sim_ns == pytest.approx((max(s.end for s in spans) - min(s.start for s in spans)) / ghz)
    # one measured CTA on its own
    one = compare(sim, measured, measured_cta=1)
    assert one.measured_ctas == [1]
    assert one.task("task1").measured_wait == pytest.approx(_wait_share(measured, 1, "task1"))
    text = str(cmp)
    assert "simulated CTA 0" in text and "measured CTAs 0, 1" in text and re.search(r"task1 .*p", text)
    d = cmp.to_dict()
    assert [r["task"] for r in d["tasks"]] == ["default", "task1"] and d["time_error"] == cmp.time_error


def test_mismatches_are_said(traces):
    sim, measured = traces
    with pytest.raises(ValueError, match=r"no CTA 7 \(it recorded \[0, 1\]\)"):
        compare(sim, measured, measured_cta=7)
    bare = Trace(list(measured.spans), time_unit="cycles")          # cycles and no clock
    with pytest.raises(ValueError, match="measured_clock_ghz="):
        compare(sim, bare)
    renamed = Trace([s for s in measured.spans if s.task == "task1"], time_unit="ns")
    cmp = compare(sim, renamed)
    assert [t.task for t in cmp.tasks] == ["task1"] and cmp.notes == ["tasks only in the simulated trace: default"]


def test_side_by_side_view_draws_both_timelines_task_under_task(traces):
    sim, measured = traces
    cmp = compare(sim, measured)
    svg = trace_compare_svg(cmp)
    labels = re.findall(r">((?:sim|measured) CTA \d+ [\w]+\[\d\])<", svg)
    assert labels == ["sim CTA 0 default[0]", "measured CTA 0 default[0]",
                      "sim CTA 0 task1[0]", "sim CTA 0 task1[1]", "measured CTA 0 task1[0]", "measured CTA 0 task1[1]"]
    assert svg.count("<rect") > 50 and "ns from each CTA's first span" in svg
    html = cmp._repr_html_()
    assert html == trace_compare_html(cmp) and html.count("pts</td>") == 2 * len(cmp.tasks)
    assert views.render(cmp, "svg") == svg
    # errors past 10 points are marked
    assert ("#c0392b" in html) == any(abs(t.wait_error) > 10 for t in cmp.tasks)
