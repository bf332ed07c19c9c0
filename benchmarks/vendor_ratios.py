"""The library's kernels against the vendors, side by side in one run on the H200 (~2-3 min): the goals' table.

    source .gpu/env.sh && python3 benchmarks/vendor_ratios.py          # $OUT/vendor_ratios.{json,md}

Attention forward, D=128, N=4096 (4 x 32 heads) and 8192 (2 x 32), causal and not, fp16 and bf16: the library's
default config for the cell (``attention_configs.DEFAULTS``) against torch SDPA (its default backend choice) on the
same inputs; goals >= 1.05x non-causal, >= 1.10x causal. GEMM fp16 and bf16 at 4096^3 and 8192^3: the library's
GEMMs at their first config (gemm_ws, gemm_pingpong, gemm_cluster) against cuBLAS (``torch.matmul``); goals
>= 1.00x at 8192^3, within 1 % at 4096^3. Each subject first runs once and is checked against the vendor's output
(relative Frobenius error); then ``--rounds`` interleaved rounds, a ``do_bench`` median each (``--window``: Triton's
25/100 ms by default, ``long`` = 500/2000, whose rounds spread least), in a shuffled order
per round (``_harness.round_order``, since 2026-12-04); the figure is the median over the rounds (every round kept
in the JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import WINDOWS  # noqa: E402

ATTN = [((4, 32, 4096, 128), False), ((2, 32, 8192, 128), False), ((4, 32, 4096, 128), True),
        ((2, 32, 8192, 128), True)]
GEMM = [(4096, 4096, 4096), (8192, 8192, 8192)]
GOALS = {("attention", False): 1.05, ("attention", True): 1.10, ("gemm", 4096): 0.99, ("gemm", 8192): 1.00}


def _rounds(subjects, ref, n, window=WINDOWS["goal"]):
    import torch
    import triton
    from _harness import rel_error
    from tlx_workbench.kernels._common import torch_alloc
    errs, times = {}, {k: [] for k in subjects}
    for name, fn in list(subjects.items()):
        try:
            out = fn()
            torch.cuda.synchronize()
            errs[name] = rel_error(out, ref)
        except Exception as e:  # noqa: BLE001 - a failing subject is reported, the others still timed
            errs[name] = f"{type(e).__name__}: {str(e)[:300]}"
            del subjects[name]
        triton.set_allocator(torch_alloc)
    from _harness import bench_ms, round_order
    for r in range(n):
        for name in round_order(subjects, r):
            times[name].append(bench_ms(subjects[name], *window))
    return {k: v for k, v in times.items() if v}, errs


def attention_cells(n, log, window=WINDOWS["goal"]):
    import torch
    from _harness import attn_flops, attn_inputs
    from tlx_workbench.kernels import attention as A
    F = torch.nn.functional
    rows = []
    for shape, causal in ATTN:
        for dname in ("float16", "bfloat16"):
            q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
            o = torch.empty_like(q)
            cfg = A.DEFAULTS[(shape[-1] <= 64, causal)]
            subj = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
                    "ours": lambda: A.launch(q, k, v, o, causal, scale, cfg)}
            ref = subj["sdpa"]()
            times, errs = _rounds(subj, ref, n, window)
            med = {k_: statistics.median(t) for k_, t in times.items()}
            row = dict(part="attention", shape=list(shape), causal=causal, dtype=dname, cfg=cfg,
                       sdpa_ms=med.get("sdpa"), ours_ms=med.get("ours"), err_vs_sdpa=errs.get("ours"),
                       rounds_ms={k_: t for k_, t in times.items()},
                       tflops=attn_flops(shape, causal) / med["ours"] * 1e-9 if "ours" in med else None)
            row["vs_sdpa"] = med["sdpa"] / med["ours"] if "ours" in med and "sdpa" in med else None
            row["goal"] = GOALS[("attention", causal)]
            rows.append(row)
            log(row)
    return rows


def gemm_cells(n, log, window=WINDOWS["goal"]):
    import torch
    from _harness import gemm_inputs
    from tlx_workbench.kernels import gemm_cluster, gemm_pingpong, gemm_ws
    ours = {"gemm_ws": gemm_ws, "gemm_pingpong": gemm_pingpong, "gemm_cluster": gemm_cluster}
    rows = []
    for M, N, K in GEMM:
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            a, b = gemm_inputs(M, N, K, dt)
            subj = {"cublas": lambda: torch.matmul(a, b)}
            for name, mod in ours.items():
                c = torch.empty(M, N, device="cuda", dtype=dt)
                subj[name] = (lambda mod, c: lambda: mod.launch(a, b, c, mod.CONFIGS[0]))(mod, c)
            ref = subj["cublas"]()
            times, errs = _rounds(subj, ref, n, window)
            med = {k: statistics.median(t) for k, t in times.items()}
            for name in ours:
                row = dict(part="gemm", shape=[M, N, K], dtype=dname, kernel=name, cublas_ms=med.get("cublas"),
                           ours_ms=med.get(name), err_vs_cublas=errs.get(name),
                           rounds_ms={"cublas": times.get("cublas"), name: times.get(name)},
                           vs_cublas=med["cublas"] / med[name] if name in med and "cublas" in med else None,
                           tflops=2 * M * N * K / med[name] * 1e-9 if name in med else None,
                           goal=GOALS[("gemm", M)])
                rows.append(row)
                log(row)
    return rows


def _f(x, p=3):
    return "–" if x is None else (f"{x:.{p}f}" if isinstance(x, float) else str(x))


def markdown(res) -> str:
    out = [f"# The library against the vendors on {res['device']} ({res['date']})", "", "Attention forward, D=128 (medians of "
           f"{res['rounds']} interleaved rounds):", "",
           "| shape | causal | dtype | SDPA ms | ours ms | ours / SDPA | goal | TFLOP/s |", "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        if r["part"] == "attention":
            out.append(f"| {'x'.join(map(str, r['shape']))} | {r['causal']} | {r['dtype']} | {_f(r['sdpa_ms'])} | "
                       f"{_f(r['ours_ms'])} | **{_f(r['vs_sdpa'])}x** | {r['goal']:.2f}x | {_f(r['tflops'], 0)} |")
    out += ["", "GEMM:", "", "| shape | dtype | kernel | cuBLAS ms | ours ms | ours / cuBLAS | goal | TFLOP/s |",
            "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        if r["part"] == "gemm":
            out.append(f"| {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['kernel']} | {_f(r['cublas_ms'])} | "
                       f"{_f(r['ours_ms'])} | **{_f(r['vs_cublas'])}x** | {r['goal']:.2f}x | {_f(r['tflops'], 0)} |")
    if res["errors"]:
        out += ["", "Errors:", ""] + [f"- {e}" for e in res["errors"]]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--window", default="goal", choices=sorted(WINDOWS),
                    help="do_bench's warm-up and measured ms (_harness.WINDOWS): goal = Triton's 25/100, the method "
                         "of every goal run before 2026-12-04 evening; long = 500/2000, rounds spread least")
    ap.add_argument("parts", nargs="*", default=["attention", "gemm"])
    a = ap.parse_args(argv)
    from _harness import run_record, write_json, write_outputs
    out = os.environ.get("OUT", "/tmp/vendor_ratios")
    res = run_record(rounds=a.rounds, window=WINDOWS[a.window], rows=[], errors=[])

    def log(row):
        res["rows"].append(row)
        write_json(out, "vendor_ratios", res)
        print(json.dumps({k: row.get(k) for k in ("part", "shape", "causal", "dtype", "kernel", "vs_sdpa",
                                                  "vs_cublas", "tflops")}), flush=True)

    for part in a.parts:
        try:
            (attention_cells if part == "attention" else gemm_cells)(a.rounds, log, WINDOWS[a.window])
        except Exception:  # noqa: BLE001
            res["errors"].append(f"{part}: {traceback.format_exc()[-1500:]}")
    text = markdown(res)
    write_outputs(out, "vendor_ratios", res, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
