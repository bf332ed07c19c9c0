"""The demo page (`tlx-workbench demo`): one self-contained HTML with both GEMMs' reports."""
import re

from tlx_workbench import demo
from tlx_workbench.cli import main


def test_demo_page_via_cli(tmp_path, capsys):
    extra = demo.Section("Extra", lambda ctx: f"<p>extra section sees {sorted(ctx.reports)}</p>")
    demo._EXTRA.append(extra)
    try:
        assert main(["demo", "-o", str(tmp_path / "report.html")]) == 0
    finally:
        demo._EXTRA.remove(extra)
    path = capsys.readouterr().out.strip()
    assert path == str((tmp_path / "report.html").resolve())
    page = open(path, encoding="utf-8").read()
    for text in ("matmul_kernel_tlx_ws", "matmul_kernel_tma_ws_blackwell", "sm_90", "sm_100",
                 "Shared memory map", "Tensor memory map", "bars_full_a", "tmem_full_bars", "Barriers",
                 "extra section sees ['blackwell', 'hopper']"):
        assert text in page, text
    assert page.count("<svg") >= 3                       # SMEM maps of both, TMEM map of the Blackwell one
    assert re.search(r"<h4>PTX</h4><pre>.*wgmma", page, re.S) and "tcgen05" in page   # IR excerpts
    # the simulator's section: the same Hopper GEMM run on the CPU, checked against torch, with views
    assert "Output matches torch" in page and "no deadlock, no races" in page
    assert "Barrier phases (CTA 0)" in page and "section failed" not in page and "provider failed" not in page
    assert "<script" not in page and not re.search(r"(src|href)=\"https?://", page)  # self-contained
