"""What the CompileReport costs on top of the compiler, and what a cache hit costs.

For each kernel (TLX tutorials, unchanged), in one process:
  bare    triton.compile(ASTSource(...)) of the very source/options compile() builds,
          with a fresh, empty TRITON_CACHE_DIR (no disk-cache hit);
  report  tlx_workbench.compile(...) end to end (binding, compile, every analysis),
          also with a fresh cache dir and an empty in-memory cache; "report work" is that
          call's time minus the triton.compile inside it, "same-call ratio" the two of them;
  +sass   the same until the background nvdisasm has finished (report.sass ready);
  warm    tlx_workbench.compile(...) again: the in-memory cache hit;
  static  what a sweep's static stage pays: compile(..., sass="lazy") (plain compile() where
          the workbench has no such option) and reading report.resources, .metadata,
          .ptxas_advisories and .tasks; a background nvdisasm, if any, is waited for after
          the clock stops, so that it does not run into the next measurement;
  full    a forced full report: compile(...) and then everything the reprs show (SASS, the
          source map, wgmma_overlap, allocations, barriers, advisories, text and HTML).
Each measurement is the median of --repeat runs, bare, report, static and full interleaved
(their order rotating) so load on the machine hits all alike; one untimed warm-up per kernel
pays the one-time costs (imports, ptxas version probe) that are no part of either. Every
ratio comes twice: against the bare compile's median, and against the triton.compile inside
that very call (``same-call``; immune to the run-to-run noise of a shared machine).

Kernels: the TLX tutorials (tests/compiler/tutorial_cases.py) and ``gemm_ws``, the library's
cooperative GEMM (tlx_workbench/kernels/gemm_ws.py) with CONFIGS[0] at 4096^3.

    .venv/bin/python benchmarks/compile_overhead.py [--repeat 5] [--markdown] [kernel ...]
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "compiler"))

import triton  # noqa: E402
from triton import knobs  # noqa: E402

import tlx_workbench as wb  # noqa: E402
compile_mod = importlib.import_module("tlx_workbench.compiler.compile")  # the module (the package exports the function)
from tlx_workbench.target import gpu_model, offline  # noqa: E402

from tutorial_cases import case  # noqa: E402

KERNELS = ["gemm_ws", "hopper_gemm_ws", "hopper_fa_ws", "vector-add2", "blackwell_gemm_ws"]
LAZY_SASS = "sass" in inspect.signature(wb.compile).parameters


def bench_case(name):
    """(kernel, args, compile kwargs, target): a tutorial, or the library's gemm_ws."""
    if name != "gemm_ws":
        return case(name)
    import torch
    from tlx_workbench.kernels import gemm_ws
    M = N = K = 4096
    with offline("sm_90"):
        a, b, c = (torch.empty(M, K, dtype=torch.float16), torch.empty(K, N, dtype=torch.float16),
                   torch.empty(M, N, dtype=torch.float16))
        args, options = gemm_ws._kernel_call(a, b, c, gemm_ws.CONFIGS[0])
    return gemm_ws.gemm_ws_coop_kernel, args, options, "sm_90"


def fresh_cache_dir():
    d = tempfile.mkdtemp(prefix="tlxwb-bench-cache-")
    os.environ["TRITON_CACHE_DIR"] = d
    knobs.cache.dir = d
    return d


def bare_compile(kernel, args, kw, target):
    """triton.compile of the same ASTSource and options that compile() hands to Triton."""
    k = compile_mod._resolve(kernel, kw.get("config"))
    model = gpu_model(target)
    launch = ("config", "num_warps", "num_stages", "ctas_per_cga")
    consts = {n: v for n, v in kw.items() if n not in launch}
    with offline(model):
        opts = compile_mod._options(k.jit, k, kw.get("num_warps"), kw.get("num_stages"), kw.get("ctas_per_cga"))
        src, options, _ = compile_mod._bind(k, model, args, consts, opts, None)
        fresh_cache_dir()
        t0 = time.perf_counter()
        triton.compile(src, target=model.gpu_target(), options=options.__dict__)
        return time.perf_counter() - t0


def report_compile(kernel, args, kw, target):
    wb.compiler.clear_cache()
    fresh_cache_dir()
    t0 = time.perf_counter()
    r = wb.compile(kernel, *args, target=target, **kw)
    t1 = time.perf_counter()
    r.sass  # noqa: B018  (wait for the background disassembly)
    t2 = time.perf_counter()
    t3 = time.perf_counter()
    again = wb.compile(kernel, *args, target=target, **kw)
    t4 = time.perf_counter()
    assert again is r
    return t1 - t0, t2 - t0, t4 - t3, (t1 - t0) - r.compile_seconds


def static_stage(kernel, args, kw, target):
    """compile() as a sweep's static stage calls it, and the fields that stage reads."""
    wb.compiler.clear_cache()
    fresh_cache_dir()
    extra = {"sass": "lazy"} if LAZY_SASS else {}
    t0 = time.perf_counter()
    r = wb.compile(kernel, *args, target=target, **kw, **extra)
    r.resources, r.metadata, r.ptxas_advisories, r.tasks  # noqa: B018
    t1 = time.perf_counter()
    if not LAZY_SASS:
        r.sass  # noqa: B018  (the background nvdisasm, off the clock)
    return t1 - t0, r.compile_seconds


def full_report(kernel, args, kw, target):
    """compile() and everything the report's reprs show, forced."""
    wb.compiler.clear_cache()
    fresh_cache_dir()
    t0 = time.perf_counter()
    r = wb.compile(kernel, *args, target=target, **kw)
    r.sass, r.source_map, r.wgmma_overlap, r.ptxas_advisories, r.allocations, r.barriers  # noqa: B018
    r.summary(), r._repr_html_()
    return time.perf_counter() - t0, r.compile_seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("kernels", nargs="*", default=KERNELS)
    a = ap.parse_args()
    rows = []
    for name in a.kernels:
        kernel, args, kw, target = bench_case(name)
        report_compile(kernel, args, kw, target)      # warm-up, untimed
        bare, rep, sass, warm, extra, static, full = [], [], [], [], [], [], []
        static_same, full_same = [], []

        def do_bare():
            bare.append(bare_compile(kernel, args, kw, target))

        def do_report():
            r = report_compile(kernel, args, kw, target)
            rep.append(r[0]), sass.append(r[1]), warm.append(r[2]), extra.append(r[3])

        def do_static():
            t, c = static_stage(kernel, args, kw, target)
            static.append(t), static_same.append(t / c)

        def do_full():
            t, c = full_report(kernel, args, kw, target)
            full.append(t), full_same.append(t / c)

        steps = [do_bare, do_report, do_static, do_full]
        for i in range(a.repeat):
            for step in steps[i % 4:] + steps[:i % 4]:
                step()
        m = statistics.median
        # same-call ratio: the report's own work against the triton.compile inside that very call,
        # immune to the run-to-run noise of a shared machine
        same_call = [x / (x - e) for x, e in zip(rep, extra)]
        rows.append((name, target, m(bare), m(rep), m(rep) / m(bare), m(extra) * 1e3, m(same_call), m(sass),
                     m(warm) * 1e3, m(static), m(static) / m(bare), m(static_same), m(full), m(full) / m(bare),
                     m(full_same)))
        print(f"  {name}: bare {m(bare):.3f}s report {m(rep):.3f}s (x{m(rep) / m(bare):.2f}) "
              f"+sass {m(sass):.3f}s warm {m(warm) * 1e3:.2f}ms static {m(static):.3f}s "
              f"(x{m(static) / m(bare):.2f}, same-call x{m(static_same):.2f}) full {m(full):.3f}s "
              f"(x{m(full) / m(bare):.2f}, same-call x{m(full_same):.2f})", file=sys.stderr)
    head = ["kernel", "target", "bare triton.compile", "compile+report", "ratio", "report work",
            "same-call ratio", "+SASS ready", "warm hit", "static stage", "static ratio", "static same-call",
            "forced full", "full ratio", "full same-call"]
    x = "{:.2f}×".format
    fmt = [str, str, "{:.3f} s".format, "{:.3f} s".format, x, "{:.0f} ms".format, x,
           "{:.3f} s".format, "{:.2f} ms".format, "{:.3f} s".format, x, x, "{:.3f} s".format, x, x]
    cells = [[f(v) for f, v in zip(fmt, row)] for row in rows]
    if a.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        w = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
        print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
        for c in cells:
            print("  ".join(x.ljust(w[i]) for i, x in enumerate(c)))


if __name__ == "__main__":
    main()
