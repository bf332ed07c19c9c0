"""The report views on a real compile: TLX's hopper_gemm_ws tutorial (unchanged), sm_90."""
import pathlib

import pytest
import torch
import triton

from tlx_workbench.widgets import IRExplorer, MemoryMapWidget
from tlx_workbench.widgets.memory_map import memory_map_data

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"


def _desc(t):
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), [t.stride(i) for i in range(t.dim())], [1, 1])


@pytest.fixture(scope="module")
def report():
    import tlx_workbench as wb
    mod = wb.load_module(TUTORIALS / "hopper_gemm_ws.py", target="sm_90")
    M = N = K = 512
    a, b, c = torch.randn(M, K).half(), torch.randn(K, N).half(), torch.empty(M, N).half()
    cfg = triton.Config(dict(BM=128, BN=128, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_WARPS=8,
                             NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=False, NUM_CTAS=1, USE_WARP_BARRIER=False),
                        num_warps=4, num_stages=1, pre_hook=mod.matmul_tma_set_block_size_hook)
    return wb.compile(mod.matmul_kernel_tlx_ws, _desc(a), _desc(b), _desc(c), M, N, K, config=cfg, target="sm_90")


def _wait_line(report):
    """The first barrier_wait line of the kernel that made PTX (some are inlined elsewhere)."""
    for i, text in enumerate(report.source.text.splitlines()):
        n = report.source.first_line + i
        if "barrier_wait" in text and report.source_map.lines_for("ptx", n):
            return n
    raise AssertionError("hopper_gemm_ws has a barrier_wait that made PTX")


def test_memory_map_of_a_real_kernel(report):
    (smem,) = memory_map_data(report)                         # Hopper: no TMEM bar
    names = [a["name"] for a in smem["allocations"]]
    assert names == [a.name for a in sorted((a for a in report.allocations if a.storage == "smem"),
                                            key=lambda a: (a.offset, -a.size, a.name))]
    assert smem["capacity"] == report.resources.smem_limit and smem["used"] == report.resources.smem_bytes
    assert any(a["kind"] == "barrier" for a in smem["allocations"])
    html = MemoryMapWidget(report)._repr_mimebundle_()[0]["text/html"]
    assert html.count("class='tlxwb-alloc'") == len(names)


def test_ir_explorer_of_a_real_kernel(report):
    w = IRExplorer(report)
    stages = [p["stage"] for p in w._panes]
    assert stages[:3] == ["source", "ttgir", "ptx"]
    line = _wait_line(report)
    assert w.lines_for("ttgir", line) and w.lines_for("ptx", line)
    # both directions agree: each PTX line the wait became leads back to the wait
    assert all(w._backward["ptx"][str(j)] == line for j in w.lines_for("ptx", line))
    assert len(w._panes[2]["lines"]) == len(report.stages["ptx"].splitlines())


@pytest.mark.browser
def test_real_kernel_views_in_chromium(show, report):
    line = _wait_line(report)
    ir = IRExplorer(report)
    page = show(MemoryMapWidget(report), ir)
    assert page.locator(".tlxwb-memmap .tlxwb-alloc").count() == len([a for a in report.allocations if a.storage == "smem"])
    page.click(f".tlxwb-ir-pane[data-stage='source'] .tlxwb-ir-line[data-line='{line}']")
    got = page.evaluate("""() => Array.from(document.querySelectorAll(".tlxwb-ir-pane[data-stage='ptx'] .tlxwb-hl"))
                                 .map(e => +e.dataset.line)""")
    assert got == ir.lines_for("ptx", line)
    # the PTX pane scrolled to the first of them
    top = page.evaluate("() => document.querySelector(\".tlxwb-ir-pane[data-stage='ptx'] .tlxwb-ir-lines\").scrollTop")
    assert top > 0 or got[0] < 20


def test_the_report_thumbnail_is_the_labelled_map_scaled_to_what_is_used(report):
    import re

    from tlx_workbench.widgets.compile_report import render_html
    html = render_html(report, excerpts=False)
    svg = html[html.index("<h4>Shared memory map</h4>"):]
    svg = svg[:svg.index("</svg>")]
    used = report.resources.smem_bytes
    assert used < 0.75 * report.resources.smem_limit
    assert f"scaled to the {used / 1024:.1f} KiB used" in svg
    labels = re.findall(r"class='tlxwb-alloc-label'[^>]*>([^<]*)<", svg)
    buffers = [a for a in report.allocations if a.storage == "smem" and a.kind == "buffer"]
    assert buffers and all(any(lab.startswith(a.name) for lab in labels) for a in buffers), labels
    barriers = [a.name for a in report.allocations if a.storage == "smem" and a.kind == "barrier"]
    assert all(f">{n}" in svg for n in barriers)                    # named under the bar
