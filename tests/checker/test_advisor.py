"""The warp-barrier advisor on hopper_gemm_ws (TLX tutorial, unchanged): it proposes exactly what
the tutorial's own USE_WARP_BARRIER variant does, refuses the full barriers, and its A/B (on the
simulator, against a torch reference) shows both forms correct."""
import difflib

import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench.checker import advise_warp_barriers

from check_helpers import load_tutorial

CFG = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
       "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": False}


@pytest.fixture(scope="module")
def gemm():
    return load_tutorial("hopper_gemm_ws")


@pytest.fixture(scope="module")
def advice(gemm):
    a = torch.randn(256, 256, dtype=torch.float16)
    b = torch.randn(256, 256, dtype=torch.float16)
    return advise_warp_barriers(gemm.matmul, a, b, config=CFG, reference=lambda a, b: a.float() @ b.float())


def test_proposes_what_use_warp_barrier_does(advice):
    safe = {a.barrier: (a.num_warps, a.num_arrivals) for a in advice.safe}
    assert safe == {"bars_empty_a": (4, 1), "bars_empty_b": (4, 2)}, advice
    for name in ("bars_empty_a", "bars_empty_b"):
        a = advice[name]
        assert a.role == "software empty/reuse"
        assert "alloc_warp_barrier(" in a.replacement and "arrive_count" not in a.replacement
        assert [ok for _, ok, _ in a.checks] == [True] * 7, a.checks


def test_refuses_the_full_barriers(advice):
    for name in ("bars_full_a", "bars_full_b"):
        a = advice[name]
        assert not a.safe and a.role == "TMA full" and a.replacement is None
        assert any(ok is False and "stay ordinary" in p for p, ok, _ in a.checks)


def test_ab_table_shows_both_forms_correct(advice):
    assert [r.form for r in advice.ab] == ["ordinary (original)", "warp barriers (converted)"]
    assert all(r.correct is True and r.cycles > 0 for r in advice.ab), advice.ab
    text, page = repr(advice), advice._repr_html_()
    assert "SAFE -> tlx.alloc_warp_barrier(num_barriers=NUM_STAGES, num_warps=4, num_arrivals=2)" in text
    assert "<table>" in page and "bars_full_a" in page


def test_converted_kernel_changes_only_the_allocations_and_matches_the_tutorials_variant(gemm, advice):
    orig = open(gemm.__file__).read().splitlines()
    new = open(advice.converted_path).read().splitlines()
    assert len(orig) == len(new)       # line numbers are kept
    changed = [i + 1 for i, (x, y) in enumerate(zip(orig, new)) if x != y]
    allocs = {advice["bars_empty_a"].line, advice["bars_empty_b"].line}
    assert changed and all(min(allocs) <= n <= max(allocs) + 2 for n in changed), changed
    assert not [l for l in difflib.unified_diff(orig, new, lineterm="") if l.startswith("+") and
                "alloc_warp_barrier" not in l and "num_warps" not in l and l.strip("+ )") and not l.startswith("+++")]
    # the converted kernel compiles to the same barrier table as the tutorial's own USE_WARP_BARRIER=True
    conv = advice.converted_report
    a, b = torch.randn(256, 256).half(), torch.randn(256, 256).half()
    from triton.tools.tensor_descriptor import TensorDescriptor as TD
    descs = [TD(t, list(t.shape), [t.stride(0), 1], [1, 1]) for t in (a, b, torch.empty(256, 256).half())]
    cfg = triton.Config({**CFG, "USE_WARP_BARRIER": True}, num_warps=4, num_stages=1,
                        pre_hook=gemm.matmul_tma_set_block_size_hook)
    theirs = wb.compile(gemm.matmul_kernel_tlx_ws, *descs, 256, 256, 256, config=cfg, NUM_SMS=132, target="sm_90")
    table = lambda r: {x.name: (x.kind, x.count, x.slots) for x in r.barriers}  # noqa: E731
    assert table(conv) == table(theirs)
    assert table(conv)["bars_empty_b"] == ("warp", 256, 3) and table(conv)["bars_empty_a"] == ("warp", 128, 6)
