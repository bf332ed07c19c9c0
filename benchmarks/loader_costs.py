"""The TMA loader's own costs on the H200, derived from the stored gemm_ws 4096^3 traces, CPU only.

What ``cost.MEASURED_LOADER`` holds, recomputed from the measured traces on disk, so the figures are reproducible:

* ``tma_issue``: a warp group issuing one ``async_descriptor_load``, the median span of the loader's 3 x 256 TMA
  loads per lane in the every-op trace (``benchmarks/results/gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz``: ``profile()`` of
  gemm_ws CONFIGS[0], CTAs 0, 1, 126, 127, 2026-12-02 01:56 UTC, ``benchmarks/timeline_h200.py``), in cycles of
  each CTA's measured clock;
* ``expect_bytes``: the same for ``barrier_expect_bytes``;
* ``scalar_op``: the loader's k-step in the waits trace (``benchmarks/results/gemm_ws_4096_waits_trace_h200_2026-12-02.json.gz``, the
  lightest recorder, 2026-12-02 05:44 UTC, ``benchmarks/shares_h200.py``) is one wait and, between two waits, its own
  work plus one record: the median gap between two waits less the record (the consumers' gap between their two
  adjacent waits, ``cost.MEASURED_RECORD["H200"]["waits"]``) less 3 TMA issues and 3 expects leaves the loop's
  index arithmetic; divided by the integer scalar ops the simulator runs per loader k-step (``stats["scalar_ops"]``,
  counted on CTA 0 of the same config at two K), it is the cycles of one.

Both spans include the recorder's two clock reads (a few cycles); the every-op trace's gaps are not used for the
arithmetic: its records, each a branch and three stores, sit between every two ops and serialize what ptxas
otherwise overlaps (~150 cycles of arithmetic a loader k-step there against ~45 in the waits trace: printed).

  .venv/bin/python benchmarks/loader_costs.py        # -> $OUT/loader_costs.json (./out when unset)
"""
import json
import os
import pathlib
import statistics
import sys
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from shares_kstep import steps  # noqa: E402

EVERY_OP = ROOT / "benchmarks" / "results" / "gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz"
WAITS = ROOT / "benchmarks" / "results" / "gemm_ws_4096_waits_trace_h200_2026-12-02.json.gz"
WAIT_LINE = 103                     # _load_steps' barrier_wait(empty)
FULL_WAITS = ("barrier_wait@68", "barrier_wait@69")      # _wait_full's two adjacent waits
LOADS_PER_STEP = 3                  # SPLIT_FULL: A half, B, A half, each after its expect


def _pooled(tab, prefix):
    return [x for k, v in tab.items() if k.startswith(prefix) for x in v]


def measured_spans(path=EVERY_OP) -> dict:
    """Median loader spans (cycles) of the every-op trace: TMA issue and barrier_expect_bytes, each pooled over
    its three sites and the recorded lanes, with the per-site medians beside them."""
    meta, spans, gaps, _ = steps(path, "default")
    out = {}
    for name, op in (("tma_issue", "async_descriptor_load@"), ("expect_bytes", "barrier_expect_bytes@")):
        out[name] = statistics.median(_pooled(spans, op))
        out[name + "_by_site"] = {k: statistics.median(v) for k, v in sorted(spans.items()) if k.startswith(op)}
    out["gaps"] = {k: statistics.median(v) for k, v in gaps.items() if len(v) > 100}
    out["trace"] = {"path": str(path.relative_to(ROOT)), "recorder": "every op", "ctas": meta["selected_ctas"]}
    return out


def measured_kstep(path=WAITS) -> dict:
    """The waits trace: the loader's median gap between its waits and the recorder's cost (the consumers' gap
    between their two adjacent waits), cycles; the consumers' gap from the wgmma wait to the next full wait
    (arrive + loop back + one record) for the cross-check."""
    _, lspans, lgaps, _ = steps(path, "default")
    _, cspans, cgaps, _ = steps(path, "task1")
    w = f"barrier_wait@{WAIT_LINE}"
    return {"loader_gap": statistics.median(lgaps[f"{w} -> {w}"]),
            "record": statistics.median(cgaps[f"{FULL_WAITS[0]} -> {FULL_WAITS[1]}"]),
            "consumer_arrive_loop_gap": statistics.median(cgaps[f"async_dot_wait@139 -> {FULL_WAITS[0]}"]),
            "trace": {"path": str(path.relative_to(ROOT)), "recorder": "waits"}}


def simulated_scalar_ops() -> dict:
    """Integer scalar ops the simulator runs per k-step of gemm_ws CONFIGS[0], per task (steady state: CTA 0, one
    tile, at two K; the difference over the extra k-steps, so a tile's own arithmetic drops out)."""
    import torch
    import tlx_workbench as wb
    from tlx_workbench.kernels import gemm_ws
    cfg = gemm_ws.CONFIGS[0]
    got = {}
    for K in (512, 1024):
        a, b = torch.empty(128, K, dtype=torch.float16), torch.empty(K, 256, dtype=torch.float16)
        c = torch.empty(128, 256, dtype=torch.float16)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = wb.simulate(gemm_ws.launch, a, b, c, cfg, ctas=[0], gpu="H200", numerics=False)
        got[K] = {task: st["scalar_ops"] for (task, rep), st in res.stats.items() if rep == 0}
    steps_ = (1024 - 512) // cfg["BK"]
    return {task: (got[1024][task] - got[512][task]) / steps_ for task in got[1024]}


def derive() -> dict:
    spans = measured_spans()
    ks = measured_kstep()
    ops = simulated_scalar_ops()
    own = ks["loader_gap"] - ks["record"]
    arith = own - LOADS_PER_STEP * (spans["tma_issue"] + spans["expect_bytes"])
    scalar_op = arith / ops["default"]
    # the every-op trace's gaps less its record (the same adjacent-wait gap there): what its records serialize
    _, _, cg, _ = steps(EVERY_OP, "task1")
    rec_all = statistics.median(cg[f"{FULL_WAITS[0]} -> {FULL_WAITS[1]}"])
    every_op_arith = sum(v - rec_all for v in spans["gaps"].values())
    return {"tma_issue": spans["tma_issue"], "expect_bytes": spans["expect_bytes"], "scalar_op": scalar_op,
            "inputs": {"every_op": spans, "waits": ks, "scalar_ops_per_kstep": ops,
                       "loader_own_work_per_kstep": own, "loader_arithmetic_per_kstep": arith,
                       "every_op_record": rec_all, "every_op_loader_arithmetic_per_kstep": every_op_arith}}


def main():
    out = pathlib.Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    d = derive()
    from _harness import run_record
    d.update(run_record(traces="NVIDIA H200, 2026-12-02"))
    (out / "loader_costs.json").write_text(json.dumps(d, indent=1))
    i = d["inputs"]
    print(f"TMA issue {d['tma_issue']:.1f} cycles (by site {i['every_op']['tma_issue_by_site']}); "
          f"barrier_expect_bytes {d['expect_bytes']:.1f} ({i['every_op']['expect_bytes_by_site']})")
    print(f"waits trace: loader gap between waits {i['waits']['loader_gap']:.1f} - record {i['waits']['record']:.1f}"
          f" = own work {i['loader_own_work_per_kstep']:.1f} per k-step; - 3 x (issue + expect) = arithmetic "
          f"{i['loader_arithmetic_per_kstep']:.1f}; / {i['scalar_ops_per_kstep']['default']:.2f} scalar ops "
          f"= {d['scalar_op']:.2f} cycles per op")
    cons = i["scalar_ops_per_kstep"].get("task1", 0.0)
    print(f"cross-check, a consumer k-step: {cons:.2f} scalar ops -> {cons * d['scalar_op']:.0f} cycles of arithmetic;"
          f" measured arrive + loop back {i['waits']['consumer_arrive_loop_gap'] - i['waits']['record']:.1f}")
    print(f"every-op trace: record {i['every_op_record']:.1f}; its loader gaps hold "
          f"{i['every_op_loader_arithmetic_per_kstep']:.1f} cycles a k-step beyond the records")
    print(f"wrote {out / 'loader_costs.json'}")


if __name__ == "__main__":
    main()
