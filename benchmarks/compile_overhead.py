"""What the CompileReport costs on top of the compiler, and what a cache hit costs.

For each kernel (TLX tutorials, unchanged), in one process:
  bare    triton.compile(ASTSource(...)) of the very source/options compile() builds,
          with a fresh, empty TRITON_CACHE_DIR (no disk-cache hit);
  report  tlx_workbench.compile(...) end to end (binding, compile, every analysis),
          also with a fresh cache dir and an empty in-memory cache; "report work" is that
          call's time minus the triton.compile inside it, "same-call ratio" the two of them;
  +sass   the same until the background nvdisasm has finished (report.sass ready);
  warm    tlx_workbench.compile(...) again: the in-memory cache hit.
Each measurement is the median of --repeat runs, bare and report interleaved so load on the
machine hits both alike; one untimed warm-up per kernel pays the one-time costs (imports,
ptxas version probe) that are no part of either.

    /work/venv/bin/python benchmarks/compile_overhead.py [--repeat 5] [--markdown]
"""
from __future__ import annotations

import argparse
import importlib
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

KERNELS = ["hopper_gemm_ws", "hopper_fa_ws", "vector-add2", "blackwell_gemm_ws"]


def fresh_cache_dir():
    d = tempfile.mkdtemp(prefix="tlxwb-bench-cache-")
    os.environ["TRITON_CACHE_DIR"] = d
    knobs.cache.dir = d
    return d


def bare_compile(kernel, args, kw, target):
    """triton.compile of the same ASTSource and options that compile() hands to Triton."""
    k = compile_mod._resolve(kernel, kw.get("config"))
    model = gpu_model(target)
    consts = {n: v for n, v in kw.items() if n != "config"}
    with offline(model):
        opts = compile_mod._options(k.jit, k, None, None, None)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("kernels", nargs="*", default=KERNELS)
    a = ap.parse_args()
    rows = []
    for name in a.kernels:
        kernel, args, kw, target = case(name)
        report_compile(kernel, args, kw, target)      # warm-up, untimed
        bare, rep, sass, warm, extra = [], [], [], [], []
        for i in range(a.repeat):
            if i % 2 == 0:
                bare.append(bare_compile(kernel, args, kw, target))
                r = report_compile(kernel, args, kw, target)
            else:
                r = report_compile(kernel, args, kw, target)
                bare.append(bare_compile(kernel, args, kw, target))
            rep.append(r[0]), sass.append(r[1]), warm.append(r[2]), extra.append(r[3])
        m = statistics.median
        # same-call ratio: the report's own work against the triton.compile inside that very call,
        # immune to the run-to-run noise of a shared machine
        same_call = [x / (x - e) for x, e in zip(rep, extra)]
        rows.append((name, target, m(bare), m(rep), m(rep) / m(bare), m(extra) * 1e3, m(same_call), m(sass),
                     m(warm) * 1e3))
        print(f"  {name}: bare {m(bare):.3f}s report {m(rep):.3f}s (x{m(rep) / m(bare):.2f}) "
              f"+sass {m(sass):.3f}s warm {m(warm) * 1e3:.2f}ms", file=sys.stderr)
    head = ["kernel", "target", "bare triton.compile", "compile+report", "ratio", "report work",
            "same-call ratio", "+SASS ready", "warm hit"]
    fmt = [str, str, "{:.3f} s".format, "{:.3f} s".format, "{:.2f}×".format, "{:.0f} ms".format, "{:.2f}×".format,
           "{:.3f} s".format, "{:.2f} ms".format]
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
