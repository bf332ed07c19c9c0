"""Measured whole-kernel timelines on a real GPU: every event of the chosen CTAs of a 4096^3 gemm_ws,
the SM clock, the instrumentation's own cost (benchmarks/timeline_h200.py runs these on the H200)."""
import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench.kernels import gemm_ws

pytestmark = pytest.mark.gpu

M = N = K = 4096
CFG = gemm_ws.CONFIGS[0]


def _rand(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float16)


def _tiles_of(cta, tr):
    tiles = triton.cdiv(M, CFG["BM"]) * triton.cdiv(N, CFG["BN"])
    grid = tr.meta["grid_ctas"]
    stride = grid if tiles > torch.cuda.get_device_properties(0).multi_processor_count else 132
    return len(range(cta, tiles, stride))


def _count(tr, cta, task, replica, name):
    return sum(1 for s in tr.spans_of(cta=cta, task=task, replica=replica) if s.name == name)


@pytest.fixture(scope="module")
def operands():
    seed = int(torch.randint(0, 2**31, ()).item())
    return _rand(M, K, seed=seed), _rand(K, N, seed=seed + 1)


def test_gemm_ws_4096_timeline_covers_the_whole_kernel_for_the_chosen_ctas(operands):
    a, b = operands
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tr = wb.profile(gemm_ws.launch, a, b, c, CFG, kernel="gemm_ws_coop_kernel", ctas={"first": 2, "last": 2})
    print(tr)
    grid = tr.meta["grid_ctas"]
    chosen = [0, 1, grid - 2, grid - 1]
    assert tr.meta["selected_ctas"] == chosen and tr.time_unit == "ns"
    assert tr.meta["events"]["dropped_early"] == tr.meta["events"]["dropped_late"] == 0
    assert 0.8 < tr.meta["sm_clock_ghz"] < 2.1
    ksteps = triton.cdiv(K, CFG["BK"])
    ctas = {c["cta"]: c for c in tr.meta["ctas"]}
    assert sorted(ctas) == chosen
    for cta in chosen:
        tiles = _tiles_of(cta, tr)
        # every k-step of every tile of this CTA is there: 3 TMA loads, one wgmma per consumer group
        assert _count(tr, cta, "default", 0, "async_descriptor_load") == 3 * tiles * ksteps
        for rep in (0, 1):
            assert _count(tr, cta, "task1", rep, "async_dot") == tiles * ksteps
        spans = list(tr.spans_of(cta=cta))
        first, last = min(s.start for s in spans), max(s.end for s in spans)
        extent = ctas[cta]["end"] - ctas[cta]["start"]
        # the records reach from the CTA's start to its end (%globaltimer), not part of the way
        assert (last - first) / extent > 0.97, (cta, first, last, ctas[cta])
    oh = tr.meta["overhead"]
    assert oh["plain_ns"] > 0 and oh["instrumented_ns"] > 0 and "instrumented" in repr(tr)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)


def test_circular_buffer_keeps_the_last_events_and_counts_the_early_ones(operands):
    a, b = operands
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    cap = 200
    tr = wb.profile(gemm_ws.launch, a, b, c, CFG, kernel="gemm_ws_coop_kernel", ctas=[3], capacity=cap,
                    circular=True, overhead=False)
    lanes = tr.lanes()
    assert {l[0] for l in lanes} == {3} and all(len(list(tr.spans_of(*l))) == cap for l in lanes)
    ksteps = triton.cdiv(K, CFG["BK"])
    tiles = _tiles_of(3, tr)
    total = tr.meta["events"]["recorded"] + tr.meta["events"]["dropped_early"]
    assert total > 3 * tiles * ksteps + 2 * tiles * ksteps        # at least every load and wgmma happened
    assert tr.meta["events"]["dropped_late"] == 0 and "early events dropped" in repr(tr)
    # the kept events are the CTA's last: they end at its end
    end = tr.meta["ctas"][0]["end"]
    assert end - max(s.end for s in tr.spans) < 0.02 * end
