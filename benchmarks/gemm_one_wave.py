"""GEMM configs at one-wave sizes (1024³, 2048³ fp16) against torch.matmul, in interleaved rounds, in one run.

At these sizes a launch is a few microseconds of kernel, and do_bench (L2 flushed before each run) and CUDA-graph
replay (L2 warm) can rank configs differently: this measures both, for every config of the library's GEMM spaces
(``gemm_ws``, ``gemm_pingpong``, ``gemm_cluster``) and the extra small-tile candidates below, so a config list for
small problems is chosen on measurements, not on the tuner's single pass. It also records the cuBLAS kernel that
``torch.matmul`` runs (its name carries the tile and cluster shape) and which config ``matmul``'s own tuning picks
in two tunings (how stable the tuner's choice is at this size).

    python3 benchmarks/gemm_one_wave.py --out $OUT/one_wave.json      # ~4 minutes on an H100
"""
from __future__ import annotations

import argparse
import importlib
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import run_record, try_call, write_json  # noqa: E402

ROUNDS = 3


def candidates():
    """(label, module name, config) of every subject: each module's CONFIGS, then small-tile extras."""
    from tlx_workbench.kernels import gemm_cluster, gemm_pingpong, gemm_ws
    from tlx_workbench.kernels._common import SMEM_LIMIT
    out = []
    for name, mod in (("gemm_ws", gemm_ws), ("gemm_pingpong", gemm_pingpong), ("gemm_cluster", gemm_cluster)):
        for i, cfg in enumerate(mod.CONFIGS):
            out.append((f"{name}[{i}]", name, cfg))
    ws = gemm_ws._config
    extras_ws = [
        ws(128, 64, 64, 8, 64, EPI_BUFS=1),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, SPLIT_FULL=True, DOT_WAIT0=True),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, DOT_WAIT0=True),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, GROUP_M=16),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, GROUP_M=4),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, MMA_REGS=None, LOADER_REGS=None),
        ws(128, 64, 128, 4, 64, EPI_BUFS=1),
        ws(128, 64, 128, 3, 64, EPI_BUFS=1),
        ws(128, 64, 64, 6, 32, EPI_BUFS=2),
        ws(128, 128, 64, 6, 64, SPLIT_FULL=True, DOT_WAIT0=True),
        ws(128, 128, 128, 3, 64),
        ws(128, 32, 64, 8, 32, EPI_BUFS=1),
    ]
    # the launch's even register share (no setmaxnreg) with the other small-tile levers
    free = dict(MMA_REGS=None, LOADER_REGS=None)
    extras_ws += [
        ws(128, 64, 64, 8, 64, EPI_BUFS=1, **free),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, GROUP_M=4, **free),
        ws(128, 64, 128, 4, 64, EPI_BUFS=1, **free),
        ws(128, 64, 64, 6, 32, EPI_BUFS=2, **free),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, DOT_WAIT0=True, **free),
        ws(128, 64, 64, 4, 64, EPI_BUFS=1, **free),
        ws(128, 128, 64, 6, 64, **free),
        ws(128, 256, 64, 4, 64, SPLIT_FULL=True, DOT_WAIT0=True, **free),
        ws(128, 64, 64, 6, 64, EPI_BUFS=1, MMA_REGS=240, LOADER_REGS=24),
    ]
    for cfg in extras_ws:
        if gemm_ws.smem_bytes(cfg) <= SMEM_LIMIT:
            out.append((f"gemm_ws+{_short(cfg)}", "gemm_ws", cfg))
    pp = gemm_pingpong._config
    for cfg in (pp(64, 128, 64, 6, 64), pp(64, 64, 64, 8, 64), pp(128, 64, 64, 8, 64)):
        if gemm_pingpong.smem_bytes(cfg) <= SMEM_LIMIT:
            out.append((f"gemm_pingpong+{_short(cfg)}", "gemm_pingpong", cfg))
    cl = gemm_cluster._config
    free = dict(MMA_REGS=None, LOADER_REGS=None)
    for cfg in (cl(BN=128, STAGES=5), cl(BN=128, STAGES=5, LOADER_SYNC=True),
                cl(BN=64, STAGES=8, EPI_BUFS=1, SHARE_A=True, **free), cl(BN=64, STAGES=6, EPI_BUFS=1, SHARE_A=True),
                cl(BN=64, BK=128, STAGES=4, EPI_BUFS=1, SHARE_A=True), cl(BN=64, STAGES=8, EPI_BUFS=1, SHARE_A=True,
                                                                         LOADER_SYNC=True),
                cl(BN=128, STAGES=5, SHARE_A=True), cl(BN=64, STAGES=8, EPI_BUFS=1, SHARE_A=True, GROUP_M=4)):
        out.append((f"gemm_cluster+{_short(cfg)}", "gemm_cluster", cfg))
    return out


def _short(cfg) -> str:
    """``BMxBNxBKxSTAGESxEPI_N`` and the other keys that differ from the kernels' usual defaults."""
    keys = ("BM", "BN", "BK", "STAGES", "EPI_N")
    usual = dict(GROUP_M=8, MMA_REGS=232, LOADER_REGS=40)
    head = "x".join(str(cfg[k]) for k in keys)
    rest = ",".join(f"{k}={v}" for k, v in cfg.items()
                    if k not in keys and v is not False and usual.get(k, "-") != v and k != "EPI_BUFS")
    return head + (f"/B{cfg['EPI_BUFS']}" if "EPI_BUFS" in cfg else "") + (f"({rest})" if rest else "")


def cublas_kernel(a, b) -> list:
    """The CUDA kernels ``torch.matmul(a, b)`` launches (names from the torch profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.matmul(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.matmul(a, b)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def shape_run(M, log, only=None, rounds=ROUNDS) -> dict:
    import torch
    from tlx_workbench.runtime.timing import time_call
    a = torch.randn(M, M, device="cuda", dtype=torch.float16)
    b = torch.randn(M, M, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    subjects = {"torch.matmul": lambda: torch.matmul(a, b)}
    configs = {}
    for label, name, cfg in candidates():
        if only is not None and label not in only:
            continue
        mod = importlib.import_module(f"tlx_workbench.kernels.{name}")
        out = try_call(f"{label} {M}^3 first call", lambda: mod.matmul(a, b, cfg), log)
        if out is None:
            continue
        err = float((out.float() - ref).norm() / ref.norm())
        if not err < 1e-2:
            log.append({"what": f"{label} {M}^3", "error": f"rel error {err:.3g}"})
            continue
        subjects[label] = (lambda mod=mod, cfg=cfg: mod.matmul(a, b, cfg))
        configs[label] = cfg
    bench, graph = {k: [] for k in subjects}, {k: [] for k in subjects}
    for r in range(rounds):
        order = list(subjects) if r % 2 == 0 else list(reversed(subjects))
        for label in order:
            t = try_call(f"time {label} {M}^3", lambda: time_call(subjects[label], name=label, graph=True), log)
            if t is None:
                continue
            bench[label].append(t.median_ms * 1e3)
            if t.graph_ms is not None:
                graph[label].append(t.graph_ms * 1e3)
    med = {k: statistics.median(v) for k, v in bench.items() if v}
    gmed = {k: statistics.median(v) for k, v in graph.items() if v}
    rows = []
    for label in subjects:
        if label not in med:
            continue
        rows.append(dict(subject=label, config=configs.get(label), bench_us=med[label], bench_rounds=bench[label],
                         graph_us=gmed.get(label), graph_rounds=graph[label],
                         vendor_over_ours=med["torch.matmul"] / med[label],
                         graph_vendor_over_ours=(gmed["torch.matmul"] / gmed[label]
                                                 if label in gmed and "torch.matmul" in gmed else None)))
    rows.sort(key=lambda r: r["bench_us"])
    return dict(M=M, rows=rows, cublas=try_call("cublas kernel", lambda: cublas_kernel(a, b), log))


def tuner_picks(M, log, tunings=2) -> list:
    """The config ``gemm_ws.matmul``'s own tuning picks at M³, ``tunings`` times from an empty cache."""
    import torch
    from tlx_workbench.kernels import gemm_ws
    a = torch.randn(M, M, device="cuda", dtype=torch.float16)
    b = torch.randn(M, M, device="cuda", dtype=torch.float16)
    picks = []
    for _ in range(tunings):
        ranked = try_call(f"tune {M}^3", lambda: gemm_ws.tune(a, b), log)
        if ranked:
            picks.append([(_short(c), ms * 1e3) for c, ms in ranked[:4]])
    return picks


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="one_wave.json")
    p.add_argument("--sizes", default="1024,2048")
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--only", default="", help="time only subjects whose label contains one of these (comma-separated)")
    p.add_argument("--top", type=int, default=8, help="subjects of the first size timed again at the others")
    args = p.parse_args()
    log, t0, runs = [], time.time(), []
    sizes = [int(s) for s in args.sizes.split(",")]
    from tlx_workbench.kernels import gemm_ws
    small = f"gemm_ws[{len(gemm_ws.CONFIGS) - 1}]"       # the space's small-problem config: always timed
    pick = [w for w in args.only.split(",") if w]
    only = None if not pick else {lab for lab, _, _ in candidates() if any(w in lab for w in pick)} | {small}
    first = shape_run(sizes[0], log, only=only, rounds=args.rounds)
    runs.append(first)
    _print(first)
    out = pathlib.Path(args.out)
    write_json(out.parent, out.stem, run_record(runs=runs, errors=log))
    keep = {r["subject"] for r in first["rows"][:args.top]} | {"gemm_ws[0]", small}
    for M in sizes[1:]:
        runs.append(shape_run(M, log, only=keep, rounds=args.rounds))
        _print(runs[-1])
    picks = {M: tuner_picks(M, log) for M in sizes}
    write_json(out.parent, out.stem, run_record(runs=runs, tuner_picks=picks, errors=log,
                                                seconds=time.time() - t0))
    print("tuner picks:", picks)
    print(f"{len(log)} errors; {time.time() - t0:.0f} s")


def _print(run):
    print(f"\n{run['M']}^3   cuBLAS: {run['cublas']}")
    for r in run["rows"]:
        g = r["graph_us"]
        print(f"  {r['subject']:<48} bench {r['bench_us']:7.2f} us  vendor/ours {r['vendor_over_ours']:.3f}   "
              f"graph {g if g is None else round(g, 2)}  g-ratio {r['graph_vendor_over_ours']}", flush=True)


if __name__ == "__main__":
    main()
