"""Tune FP8 GEMM and attention backward with the explorer on the H200.

    source .gpu/env.sh && python3 benchmarks/explore_tune_h200.py fp8 bwd bwd_causal     # writes under $OUT

Each part: the library's space through the explorer (static -> simulated -> measured; search="model": configs
ranked by the simulator's predicted time, the best-ranked measured first, widening until the best stops moving,
within ``--measure-seconds`` of GPU time), into one SQLite store (``$OUT/explore_tune.sqlite``); then interleaved
rounds (``do_bench`` medians, median over rounds) of the best found, the library's default and, for FP8, the
vendor on the same inputs (``torch._scaled_mm``, fast accumulation: the same accumulation as ours). The explorer's
attention-backward problem launches the main kernel alone (the row statistics precomputed), so its rounds compare
configs, not the whole backward against SDPA's (``benchmarks/attention_bwd_variants_h200.py`` does that).

Parts: ``fp8`` gemm_fp8 per-tensor scales, bf16 out, 4096^3; ``fp8_rowwise`` the same with row-wise scales;
``bwd`` / ``bwd_causal`` attention backward (4, 32, 4096, 128) fp16. ``--workers`` static/simulated processes
(leave CPU cores for anything else the machine runs).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

PARTS = {
    "fp8": dict(kernel="gemm_fp8", shape=(4096, 4096, 4096), dtype="bfloat16", causal=False),
    "fp8_rowwise": dict(kernel="gemm_fp8_rowwise", shape=(4096, 4096, 4096), dtype="bfloat16", causal=False),
    "bwd": dict(kernel="attention_bwd", shape=(4, 32, 4096, 128), dtype="float16", causal=False),
    "bwd_causal": dict(kernel="attention_bwd", shape=(4, 32, 4096, 128), dtype="float16", causal=True),
}


def _vendor(part, inputs):
    if not part["kernel"].startswith("gemm_fp8"):
        return None, None
    import torch
    a, b, sa, sb = inputs
    out = getattr(torch, part["dtype"])
    if part["kernel"].endswith("_rowwise"):
        return "_scaled_mm", lambda: torch._scaled_mm(a, b, sa.reshape(-1, 1), sb.reshape(1, -1), out_dtype=out,
                                                      use_fast_accum=True)
    return "_scaled_mm", lambda: torch._scaled_mm(a, b, sa.reshape(()), sb.reshape(()), out_dtype=out,
                                                  use_fast_accum=True)


def rounds(problem, part, configs: dict, n: int):
    import torch
    from _harness import bench_ms
    from tlx_workbench.explore.stages import inputs_for
    shape = part["shape"]
    inputs = inputs_for(problem, shape, "cuda", seed=1)
    calls = {name: (lambda c=cfg: problem.call(inputs, c)) for name, cfg in configs.items()}
    vname, vcall = _vendor(part, inputs)
    if vcall is not None:
        calls[vname] = vcall
    for c in calls.values():
        c()
    torch.cuda.synchronize()
    ms = {name: [] for name in calls}
    for _ in range(n):
        for name, c in calls.items():
            ms[name].append(bench_ms(c, warmup=25, rep=100))
    flops = problem.flops(shape)
    return {name: dict(median_us=statistics.median(v) * 1e3, rounds_us=[x * 1e3 for x in v],
                       tflops=flops / (statistics.median(v) * 1e-3) / 1e12) for name, v in ms.items()}, vname


def run_part(key, args, out):
    import tlx_workbench.explore as tx
    from tlx_workbench.explore import library
    from tlx_workbench.explore.space import config_id
    part = PARTS[key]
    shape = part["shape"]
    problem = library.problem(part["kernel"], dtype=part["dtype"], causal=part["causal"])
    space = library.space(part["kernel"], head_dim=shape[-1] if len(shape) == 4 else 128, causal=part["causal"],
                          seeds=[problem.default])
    from _harness import run_record
    summary = run_record(part=key, kernel=problem.name, shape=list(shape), configs=len(space), search="model",
                   measure_seconds=args.measure_seconds, store=str(out / "explore_tune.sqlite"))
    t0 = time.perf_counter()
    ex = tx.explore(problem, space, shapes=[shape], store=out / "explore_tune.sqlite", backend="process",
                    workers=args.workers, timeout=20.0, progress=False, search="model",
                    measure_seconds=args.measure_seconds)
    summary["sweep_seconds"] = time.perf_counter() - t0
    summary["counts"] = ex.counts()
    summary["unmeasured"] = {str(k): len(v) for k, v in ex.sweep.unmeasured.items()}
    entries = [e for e in ex.entries(shape) if e.get("us")]
    summary["measured"] = len(entries)
    best = ex.best(shape)
    summary["best"] = best
    summary["default"] = problem.default
    summary["best_is_default"] = best is not None and config_id(best) == config_id(problem.default)
    summary["top"] = [dict(config=e["config"], us=e["us"], predicted_us=e.get("predicted_us"))
                      for e in sorted(entries, key=lambda e: e["us"])[:8]]
    pairs = [(e["predicted_us"], e["us"]) for e in entries if e.get("predicted_us")]
    if len(pairs) >= 3:
        from scipy.stats import spearmanr
        summary["rank_correlation"] = float(spearmanr([p for p, _ in pairs], [m for _, m in pairs]).correlation)
    print(json.dumps({k: summary[k] for k in ("part", "configs", "measured", "counts", "sweep_seconds", "best",
                                              "best_is_default")}, default=str), flush=True)
    if best is not None:
        configs = {"best": best} if summary["best_is_default"] else {"best": best, "default": problem.default}
        r, vname = rounds(problem, part, configs, args.rounds)
        summary["rounds"] = r
        if "default" in r:
            summary["best_over_default"] = r["default"]["median_us"] / r["best"]["median_us"]
        if vname:
            summary["best_over_vendor"] = r[vname]["median_us"] / r["best"]["median_us"]
        print(json.dumps({k: summary.get(k) for k in ("rounds", "best_over_default", "best_over_vendor")},
                         default=str), flush=True)
    return summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["fp8", "bwd", "bwd_causal"], choices=sorted(PARTS))
    ap.add_argument("--measure-seconds", type=float, default=90.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    out = pathlib.Path(os.environ.get("OUT", "/tmp/explore_tune"))
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for key in args.parts:
        try:
            results[key] = run_part(key, args, out)
        except Exception:  # noqa: BLE001 - one part failing must not lose the others
            results[key] = dict(error=traceback.format_exc()[-3000:])
            print(results[key]["error"], flush=True)
        (out / "explore_tune.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
