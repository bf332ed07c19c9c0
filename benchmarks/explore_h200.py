"""The explorer on the H200: gemm_ws and attention spaces, each with a seeded hanging config.

One command per part (each fits a device call):

    python3 benchmarks/explore_h200.py gemm        # gemm_ws space at 4096^3, fp16
    python3 benchmarks/explore_h200.py attention   # attention space at (4, 32, 4096, 128), fp16, non-causal

Each part: (1) the sweep with the default gate: static -> simulated -> measured, the seeded
deadlocking config is dropped by the simulator before it reaches the GPU; (2) the same seed
forced onto the GPU (gate="static" only), to see the watchdog record it as hung, respawn the
worker and check the device; (3) interleaved rounds of the best config found, the library's
default config and the vendor (cuBLAS / SDPA), medians; (4) the GPU measurements each search
needs to reach the best, replayed over the measured rows. Everything lands in $OUT: the store
file (explore_<part>.sqlite) and a JSON summary (explore_<part>.json).
"""
from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import tlx_workbench.explore as tx  # noqa: E402
from tlx_workbench.explore import library  # noqa: E402
from tlx_workbench.explore.space import config_id  # noqa: E402

OUT = pathlib.Path(os.environ.get("OUT", "/tmp/explore_out"))
PARTS = {"gemm": ("gemm_ws", (4096, 4096, 4096)), "attention": ("attention", (4, 32, 4096, 128))}


def vendor(part, shape):
    import torch
    if part == "gemm":
        M, N, K = shape
        a, b = torch.randn(M, K, device="cuda", dtype=torch.float16), torch.randn(K, N, device="cuda",
                                                                                  dtype=torch.float16)
        return "cuBLAS", lambda: torch.matmul(a, b)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
    return "SDPA", lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)


def rounds(problem, shape, configs: dict, part, n=5):
    """Interleaved rounds: each config and the vendor once per round, do_bench's mean each (the timing runner)."""
    import torch
    from tlx_workbench.explore.stages import inputs_for
    from tlx_workbench.runtime.timing import time_call
    inputs = inputs_for(problem, shape, "cuda", seed=1)
    calls = {name: (lambda c=cfg: problem.call(inputs, c)) for name, cfg in configs.items()}
    vname, vcall = vendor(part, shape)
    calls[vname] = vcall
    for c in calls.values():
        c()
    torch.cuda.synchronize()
    ms = {name: [] for name in calls}
    for _ in range(n):
        for name, c in calls.items():
            # do_bench's mean, not its median: the figure this suite's explorer tables were measured with
            ms[name].append(time_call(c, name=name, warmup=25, rep=100).mean_ms)
    flops = problem.flops(shape)
    return {name: dict(median_us=statistics.median(v) * 1e3, min_us=min(v) * 1e3, max_us=max(v) * 1e3,
                       tflops=flops / (statistics.median(v) * 1e-3) / 1e12) for name, v in ms.items()}, vname


def main(part):
    name, shape = PARTS[part]
    OUT.mkdir(parents=True, exist_ok=True)
    store_path = OUT / f"explore_{part}.sqlite"
    problem = library.problem(name)
    seeds = library.seeded(name)
    hang = seeds["deadlock"][0]
    space = tx.Space(library.space(name).configs, seeds=[problem.default, hang])
    from _harness import run_record
    summary = run_record(part=part, kernel=name, shape=list(shape), configs=len(space))
    t0 = time.perf_counter()
    ex = tx.explore(problem, space, shapes=[shape], store=store_path, backend="process",
                    workers=min(16, os.cpu_count() or 1), timeout=15.0, progress=False,
                    measure_seconds=float(os.environ.get("MEASURE_SECONDS", "300")))
    summary["unmeasured"] = {str(k): len(v) for k, v in ex.sweep.unmeasured.items()}
    summary["sweep_seconds"] = time.perf_counter() - t0
    summary["rates"] = ex.rates()
    summary["counts"] = ex.counts()
    hang_entry = ex.entry(config_id(hang), shape)
    summary["seed_gated"] = dict(status=hang_entry["status"], stage=hang_entry.get("dropped_at"),
                                 reason=hang_entry.get("reason"), line=hang_entry.get("line"))
    print(json.dumps(summary, indent=1, default=str), flush=True)

    # the seed forced onto the GPU: the watchdog's path
    t1 = time.perf_counter()
    forced = tx.explore(problem, [hang], shapes=[shape], store=store_path, backend="serial", gate=("static",),
                        timeout=15.0, progress=False)
    fr = [r for r in forced.rows("measured") if r.config_id == config_id(hang)][-1]
    summary["seed_forced"] = dict(status=fr.status, reason=fr.reason, metrics=fr.metrics, seconds=time.perf_counter() - t1,
                                  diagnosis_head=(fr.diagnosis or "")[:400])
    print(json.dumps(summary["seed_forced"], indent=1, default=str), flush=True)

    best = ex.best(shape)
    summary["best"] = best
    summary["best_is_default"] = config_id(best) == config_id(problem.default) if best else None
    summary["search_costs"] = ex.search_costs(shape)
    summary["pareto_smem"] = [dict(config_id=e["config_id"], smem=e["smem_bytes"], us=e.get("us"))
                              for e in ex.pareto("smem_bytes", shape)]
    # the simulated prediction against the measured time, config by config
    pairs = [(e["predicted_us"], e["us"]) for e in ex.entries(shape) if e.get("us") and e.get("predicted_us")]
    if pairs:
        ratios = sorted(p / m for p, m in pairs)
        summary["predicted_over_measured"] = dict(n=len(ratios), median=statistics.median(ratios), min=ratios[0],
                                                  max=ratios[-1])
        from scipy.stats import spearmanr
        summary["rank_correlation"] = float(spearmanr([p for p, _ in pairs], [m for _, m in pairs]).correlation)
    r, vname = rounds(problem, shape, {"best": best, "default": problem.default}, part)
    summary["rounds"] = r
    summary["best_over_default"] = r["default"]["median_us"] / r["best"]["median_us"]
    summary["best_over_vendor"] = r[vname]["median_us"] / r["best"]["median_us"]
    summary["default_over_vendor"] = r[vname]["median_us"] / r["default"]["median_us"]
    (OUT / f"explore_{part}.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps({k: summary[k] for k in ("best", "search_costs", "rounds", "best_over_default",
                                              "best_over_vendor", "predicted_over_measured")
                      if k in summary}, indent=1, default=str), flush=True)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["gemm", "attention"], choices=sorted(PARTS))
    for p in ap.parse_args().parts:
        main(p)
