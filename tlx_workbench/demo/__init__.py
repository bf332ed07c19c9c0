"""``tlx-workbench demo``: compile a warp-specialized Hopper GEMM (sm_90) and a Blackwell
GEMM (sm_100) offline, and write one self-contained HTML report.

The subjects are TLX's own tutorials, loaded unchanged from the installed wheel.
The page is a list of sections. Other parts of the workbench add theirs either with
:func:`add_section` (a title and a function ``render(ctx) -> HTML fragment``), or by
shipping a module named in ``SECTION_PROVIDERS`` (e.g. ``tlx_workbench.demo.simulator``) with
``sections() -> list[Section]``; ``ctx.reports`` / ``ctx.kernels`` hold the compiled
reports and the (kernel, args, compile kwargs) of "hopper" and "blackwell".

>>> from tlx_workbench.demo import run_demo
>>> run_demo("report.html")                     # doctest: +SKIP
'/abs/path/report.html'
"""
from __future__ import annotations

import dataclasses
import datetime
import html
import os
import pathlib
from typing import Callable

from ..compiler import compile, load_module
from ..widgets.compile_report import render_html


@dataclasses.dataclass
class Section:
    title: str
    render: Callable[["DemoContext"], str]     # returns an HTML fragment (no scripts, no network)


@dataclasses.dataclass
class DemoContext:
    """What sections share: the compiled reports by key ("hopper", "blackwell") and the kernels."""
    reports: dict = dataclasses.field(default_factory=dict)
    kernels: dict = dataclasses.field(default_factory=dict)    # key -> (kernel, args, compile kwargs)


_EXTRA: list[Section] = []


def add_section(title: str, render: Callable[[DemoContext], str]) -> None:
    """Append a section to every later demo page (e.g. the simulator's timeline)."""
    _EXTRA.append(Section(title, render))


def _tutorial(name: str) -> pathlib.Path:
    import tlx
    return pathlib.Path(tlx.__file__).parent / "tutorials" / name


def _desc(t):
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), [t.stride(i) for i in range(t.dim())], [1, 1])


def hopper_case():
    """hopper_gemm_ws (TLX tutorial): 128x128x64 tiles, 3 stages, 2 consumer warp groups."""
    import torch
    import triton
    mod = load_module(_tutorial("hopper_gemm_ws.py"), "sm_90")
    M = N = K = 4096
    a, b, c = torch.empty(M, K).half(), torch.empty(K, N).half(), torch.empty(M, N).half()
    cfg = triton.Config(dict(BM=128, BN=128, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
                             EPILOGUE_SUBTILE=False, NUM_CTAS=1, USE_WARP_BARRIER=False),
                        num_warps=4, num_stages=1, pre_hook=mod.matmul_tma_set_block_size_hook)
    return mod.matmul_kernel_tlx_ws, (_desc(a), _desc(b), _desc(c), M, N, K), dict(config=cfg, target="sm_90")


def blackwell_case():
    """blackwell_gemm_ws (TLX tutorial) with the tutorial's own heuristic config for 4096^3."""
    import torch
    mod = load_module(_tutorial("blackwell_gemm_ws.py"), "sm_100")
    M = N = K = 4096
    a, b, c = torch.empty(M, K).half(), torch.empty(K, N).half(), torch.empty(M, N).half()
    cfg = dict(mod.get_heuristic_config(M, N, K))
    return (mod.matmul_kernel_tma_ws_blackwell, (_desc(a), _desc(b), _desc(c), _desc(torch.empty(M, N).half()),
                                                 M, N, K), dict(config=cfg, NUM_SMS=148, target="sm_100"))


def _report_section(key: str, title: str) -> Section:
    def render(ctx: DemoContext) -> str:
        return render_html(ctx.reports[key], excerpts=True)
    return Section(title, render)


def _failed_section(name: str, e: Exception) -> Section:
    msg = f"{type(e).__name__}: {e}"
    return Section(name, lambda ctx: f"<pre>section provider failed: {html.escape(msg)}</pre>")


# modules that may contribute sections: each, when it exists, has `sections() -> list[Section]`
SECTION_PROVIDERS = ("tlx_workbench.demo.simulator",)


def default_sections() -> list[Section]:
    import importlib
    out = [_report_section("hopper", "Hopper: warp-specialized GEMM (hopper_gemm_ws, sm_90)"),
           _report_section("blackwell", "Blackwell: warp-specialized GEMM (blackwell_gemm_ws, sm_100)")]
    for name in SECTION_PROVIDERS:
        try:
            mod = importlib.import_module(name)
            out.extend(mod.sections())
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):   # the provider is not there (yet): fine
                continue
            out.append(_failed_section(name, e))
        except Exception as e:   # a broken provider costs its own section, not the page
            out.append(_failed_section(name, e))
    return out


_PAGE_CSS = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
             "section{margin:18px 0 30px;padding-top:8px;border-top:2px solid #eee}"
             "nav a{margin-right:14px}")


def run_demo(path: "str | os.PathLike" = "tlx_workbench_report.html",
             sections: "list[Section] | None" = None) -> str:
    """Compile the demo kernels offline and write the HTML page; returns its absolute path."""
    ctx = DemoContext()
    for key, case in (("hopper", hopper_case), ("blackwell", blackwell_case)):
        kernel, args, kw = case()
        ctx.kernels[key] = (kernel, args, kw)
        ctx.reports[key] = compile(kernel, *args, **kw)
    secs = (list(sections) if sections is not None else default_sections()) + _EXTRA
    body = []
    for i, sec in enumerate(secs):
        try:
            fragment = sec.render(ctx)
        except Exception as e:   # one broken section must not cost the whole page
            fragment = f"<pre>section failed: {html.escape(type(e).__name__ + ': ' + str(e))}</pre>"
        body.append(f'<section id="s{i}"><h2>{html.escape(sec.title)}</h2>{fragment}</section>')
    nav = "".join(f'<a href="#s{i}">{html.escape(s.title.split(":")[0])}</a>' for i, s in enumerate(secs))
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>TLX Workbench report</title>"
            f"<style>{_PAGE_CSS}</style></head><body><h1>TLX Workbench report</h1>"
            f"<p>Compiled offline (no GPU) with the real TLX compiler, {html.escape(when)}. Resources, shared/tensor "
            f"memory maps, barrier tables and IR excerpts for each kernel.</p><nav>{nav}</nav>{''.join(body)}"
            f"</body></html>")
    out = pathlib.Path(path).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return str(out)
