"""Findings read well: a finding of the whole run (outputs that differ between schedules) names no line."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

import tlx_workbench as wb


@triton.jit
def handoff(x_ptr, out_ptr, BLOCK: tl.constexpr, WAIT_COUNT: tl.constexpr):
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.load(x_ptr + tl.arange(0, BLOCK)))
            tlx.named_barrier_arrive(1, 256)
        with tlx.async_task(num_warps=4):
            tlx.named_barrier_wait(1, WAIT_COUNT)     # 128 here, 256 at the arrive: they disagree
            tl.store(out_ptr + tl.arange(0, BLOCK), tlx.local_load(buf[0]))


def test_no_finding_prints_line_none():
    res = wb.simulate(handoff, torch.randn(32), torch.zeros(32), BLOCK=32, WAIT_COUNT=128, grid=(1,),
                      schedules=4, on_deadlock="return")
    assert not res.ok
    texts = [repr(f) for f in res.findings]
    assert texts and not any("line None" in t for t in texts), texts
    assert any(f.line for f in res.findings)        # the count mismatch itself names its line
