"""hopper_gemm_ws (TLX tutorial, unchanged) through compile(): facts of its CompileReport."""
import re

import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench.compiler.irtext import IRModule

from compile_helpers import desc, tutorial

BM, BN, BK, STAGES, GROUPS = 128, 128, 64, 3, 2


@pytest.fixture(scope="module")
def mod():
    return tutorial("hopper_gemm_ws.py")


def _args(M=1024, N=512, K=256):
    a = torch.randn(M, K).half()
    b = torch.randn(K, N).half()
    c = torch.empty(M, N).half()
    return desc(a), desc(b), desc(c), M, N, K


def _config(mod, **over):
    kw = dict(BM=BM, BN=BN, BK=BK, GROUP_SIZE_M=8, NUM_STAGES=STAGES, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=GROUPS,
              EPILOGUE_SUBTILE=False, NUM_CTAS=1, USE_WARP_BARRIER=False)
    kw.update(over)
    return triton.Config(kw, num_warps=4, num_stages=1, pre_hook=mod.matmul_tma_set_block_size_hook)


@pytest.fixture(scope="module")
def report(mod):
    return wb.compile(mod.matmul_kernel_tlx_ws, *_args(), config=_config(mod), target="sm_90")


def test_buffers_shapes_and_counts(report):
    a, b = report.allocation("a"), report.allocation("b")
    assert (a.num_buffers, a.shape, a.dtype) == (STAGES * GROUPS, (BM // GROUPS, BK), "f16")
    assert (b.num_buffers, b.shape, b.dtype) == (STAGES, (BK, BN), "f16")
    assert a.size == STAGES * GROUPS * (BM // GROUPS) * BK * 2
    assert a.kind == b.kind == "buffer" and a.storage == "smem"
    # the allocation names the source line of the tlx.local_alloc
    assert "local_alloc" in report.source.line_text(a.line)


def test_tasks_one_producer_two_consumer_replicas(report):
    labels = [t.label for t in report.tasks]
    assert labels == ["default", "task1[0]", "task1[1]"]
    assert [t.num_warps for t in report.tasks] == [4, 4, 4]
    assert [t.warp_start for t in report.tasks] == [0, 4, 8]
    assert report.resources.num_warps == 12 == report.metadata["num_warps"]
    assert "async_task" in report.source.line_text(report.task("task1[1]").line)


def test_smem_total_is_the_compiled_kernels(report):
    assert report.resources.smem_bytes == report.metadata["shared"] > 0
    # the re-run allocation reproduces the compiler's total: the offsets come from the same plan
    assert IRModule(report.stages["ttgir_alloc"]).module_int_attr("ttg.shared") == report.metadata["shared"]
    assert report.resources.smem_limit == wb.gpu_model("sm_90").smem_per_block
    assert report.resources.registers and 0 < report.resources.registers <= 255


def test_allocations_within_total_and_disjoint_unless_aliased(report):
    total = report.resources.smem_bytes
    smem = [x for x in report.allocations if x.storage == "smem"]
    for x in smem:
        assert 0 <= x.offset and x.offset + x.size <= total, x
    for i, x in enumerate(smem):
        for y in smem[i + 1:]:
            overlap = x.offset < y.offset + y.size and y.offset < x.offset + x.size
            if overlap:
                assert x.alias_group is not None and x.alias_group == y.alias_group, (x, y)
    # this kernel aliases nothing: every explicit buffer and barrier has its own bytes
    assert all(x.alias_group is None for x in smem if x.kind in ("buffer", "barrier"))


def test_barrier_counts_equal_what_the_ir_initializes(report):
    ttgir = report.stages["ttgir"]
    inits = re.findall(r"ttng\.init_barrier %(\w+?)(?:_\d+)?, (\d+)", ttgir)
    for bar in (b for b in report.barriers if b.kind != "named"):
        counts = [int(c) for name, c in inits if name == bar.name]
        assert len(counts) == bar.slots, bar.name
        assert set(counts) == {bar.count}, bar.name
    expected = {"bars_empty_a": 1, "bars_empty_b": GROUPS, "bars_full_a": 1, "bars_full_b": 1}
    assert {b.name: b.count for b in report.barriers} == expected
    assert {b.name: b.slots for b in report.barriers} == {
        "bars_empty_a": STAGES * GROUPS, "bars_empty_b": STAGES, "bars_full_a": STAGES * GROUPS, "bars_full_b": STAGES}


def test_barrier_sites_have_task_line_and_bytes(report):
    full_a = report.barrier("bars_full_a")
    expects = [s for s in full_a.sites if s.op == "expect"]
    assert expects and all(s.task == "default" and s.args["bytes"] == (BM // GROUPS) * BK * 2 for s in expects)
    assert {s.task for s in full_a.sites if s.op == "wait"} == {"task1[0]", "task1[1]"}
    assert any(s.op == "tma_load" for s in full_a.sites)
    for s in full_a.sites:
        assert "tlx." in report.source.line_text(s.line), s
    empty_b = report.barrier("bars_empty_b")
    assert {s.task for s in empty_b.sites if s.op == "arrive"} == {"task1[0]", "task1[1]"}


def test_source_map_reaches_ptx_and_sass(report):
    dot_line = next(i for i in range(report.source.first_line, report.last_line + 1)
                    if "tlx.async_dot(" in report.source.line_text(i))
    assert "wgmma" in report.ir("ptx", line=dot_line)
    assert "HGMMA" in report.sass_for(dot_line)
    assert report.lines_for("ttgir", dot_line)
    ptx_line = report.lines_for("ptx", dot_line)[0]
    assert report.source_line("ptx", ptx_line) == dot_line
    assert set(report.stages) >= {"ttir", "ttgir", "ttgir_alloc", "llir", "ptx"} and report.cubin[:4] == b"\x7fELF"


def test_cache_hit_returns_the_same_report(mod, report):
    again = wb.compile(mod.matmul_kernel_tlx_ws, *_args(), config=_config(mod), target="sm_90")
    assert again is report


def test_reprs(report):
    text = repr(report)
    assert "bars_full_a" in text and "task1[1]" in text and str(report.resources.smem_bytes) in text
    html = report._repr_html_()
    assert "<svg" in html and "bars_full_a" in html
    # self-contained: nothing fetched from anywhere
    assert "<script" not in html and "src=\"http" not in html and "href=\"http" not in html


def test_warp_barriers_count_threads(mod):
    r = wb.compile(mod.matmul_kernel_tlx_ws, *_args(), config=_config(mod, USE_WARP_BARRIER=True), target="sm_90")
    empty_a, empty_b = r.barrier("bars_empty_a"), r.barrier("bars_empty_b")
    assert empty_a.kind == empty_b.kind == "warp" and r.barrier("bars_full_a").kind == "mbarrier"
    # alloc_warp_barrier(num_warps=4[, num_arrivals=NUM_MMA_GROUPS]): count = warps * 32 * arrivals
    assert empty_a.warp_args == {"threads": 128, "num_warps": 4, "num_arrivals": 1} and empty_a.count == 128
    assert empty_b.warp_args == {"threads": 4 * 32 * GROUPS, "num_warps": 4, "num_arrivals": GROUPS}
    assert all(s.args.get("per_thread") for s in empty_b.sites if s.op == "arrive")


def test_cluster_of_two_ctas_is_a_clear_error_on_upstream_triton(mod):
    # uTLX cannot address a peer CTA's SMEM (no mapa on upstream Triton): one error, at the kernel line
    cfg = _config(mod, NUM_CTAS=2)
    cfg.ctas_per_cga = (2, 1, 1)
    with pytest.raises(wb.CompileError) as e:
        wb.compile(mod.matmul_kernel_tlx_ws, *_args(), config=cfg, target="sm_90")
    assert e.value.file.endswith("hopper_gemm_ws.py") and "barrier_arrive" in e.value.source_line


def test_report_to_dict_is_json_and_pickles(report):
    import json
    import pickle
    data = json.loads(json.dumps(report.to_dict()))
    assert data["resources"]["smem_bytes"] == report.resources.smem_bytes
    assert {a["name"] for a in data["allocations"]} >= {"a", "b", "bars_full_a"}
    assert data["source_map"]["forward"]["ptx"]
    again = pickle.loads(pickle.dumps(report))
    assert again.sass == report.sass and again.barrier("bars_full_b").count == 1
