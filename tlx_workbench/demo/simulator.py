"""The demo page's simulator section: the Hopper GEMM of the demo, run on the CPU.

Picked up by :mod:`tlx_workbench.demo` (``SECTION_PROVIDERS``): the same TLX tutorial
kernel that the page compiles, simulated unchanged at a small shape, checked against
torch, with its timeline, barrier phases and per-task summary.
"""
from __future__ import annotations

import html

from ..trace import Trace

M, N, K = 256, 256, 512
SCHEDULES = 3


def _one_cta(trace: Trace, cta: int = 0) -> Trace:
    return Trace([s for s in trace.spans if s.cta == cta],
                 [e for e in trace.barrier_events if e.cta == cta],
                 [c for c in trace.counters if c.cta == cta],
                 time_unit=trace.time_unit, source=trace.source, meta=trace.meta)


def render(ctx) -> str:
    import torch
    from .. import views
    from ..compiler import load_module
    from ..sim import simulate
    from . import _tutorial

    mod = load_module(_tutorial("hopper_gemm_ws.py"), "sm_90")
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=gen).half()
    b = torch.randn(K, N, generator=gen).half()
    res = simulate(mod.matmul, a, b, gpu="H200", schedules=SCHEDULES)
    ref = a.double() @ b.double()
    err = ((res.value.double() - ref).norm() / ref.norm()).item()
    verdict = "matches" if err < 2e-3 and res.ok else "DOES NOT match"
    cta0 = _one_cta(res.trace)
    summary = cta0.summary()
    summary_html = summary._repr_html_() if hasattr(summary, "_repr_html_") else html.escape(str(summary))
    return (
        f"<p>TLX's <code>hopper_gemm_ws</code> tutorial, unchanged, on the CPU simulator (H200 cost model): "
        f"C = A·B at {M}×{N}×{K} fp16, {len(res.ctas)} CTAs, {SCHEDULES} interleavings. "
        f"Output {verdict} torch (relative error {err:.1e} against float64); "
        f"{'no deadlock, no races' if res.ok else html.escape(repr(res))}; "
        f"{res.cycles:,.0f} simulated cycles.</p>"
        f"<h3>Timeline (all CTAs)</h3>{views.render(res.trace, 'timeline_svg') or ''}"
        f"<h3>Barrier phases (CTA 0)</h3>{views.render(cta0, 'barrier_svg') or ''}"
        f"<h3>Where each task's time went (CTA 0)</h3>{summary_html}")


def sections():
    from . import Section
    return [Section("Simulated: hopper_gemm_ws on the CPU (timeline, barrier phases)", render)]
