"""GEMM on the H200: our TLX kernels vs cuBLAS (torch.matmul) vs TLX's tutorial kernels.

One run does, in order: (a) correctness of every kernel of ours against a float64
reference on fresh random inputs, poisoned outputs, many shapes (ragged too);
(b) a config sweep of each kernel at the benchmark shapes; (c) the side-by-side
timing (do_bench medians, two rounds) of ours (best config) vs cuBLAS vs the
tutorials, run unchanged through their own launchers; (d) gemm.json + gemm.md.

    python benchmarks/gemm.py --out /tmp/gemm_out            # on a Hopper GPU
    python benchmarks/gemm.py --dry                          # CPU: list the jobs only
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import (bench_ms, check_gemm, check_row, gemm_inputs, interleaved_rounds, load_tutorial,  # noqa: E402
                      md_table, run_check_sweep_compare, timing_rows, try_call)

BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# ragged shapes: partial tiles in M, N and K, K below one k-step, tall and wide
CHECK_SHAPES_TMA = [(512, 512, 512), (1000, 1032, 520), (64, 264, 40), (4104, 136, 1024),
                    (136, 3000, 776), (1, 8, 8), (2048, 2048, 8192)]
# the pipelined kernel (cp.async) has no TMA box limits: odd M and tiny K too (rows still 16-byte aligned)
CHECK_SHAPES_ANY = [(999, 1000, 336), (77, 136, 8), (300, 520, 64)]
TOL = {"float16": 2e-3, "bfloat16": 1.2e-2}


def _ours():
    from tlx_workbench.kernels import gemm_cluster, gemm_pingpong, gemm_pipelined, gemm_ws
    return {"ws_coop": gemm_ws, "ws_pingpong": gemm_pingpong, "pipelined": gemm_pipelined,
            "cluster": gemm_cluster}


def _flops(M, N, K) -> float:
    """A GEMM's flops, as the library GEMMs' KernelSpec counts them."""
    from tlx_workbench.kernels import spec
    return spec("gemm_ws").flops(M, N, K)


def check_jobs(dtypes):
    """(kernel, module, dtype, config index, config, shape) of every correctness check, in run order:
    each config at the first three shapes, the first config at all of them."""
    for name, mod in _ours().items():
        shapes = CHECK_SHAPES_TMA + (CHECK_SHAPES_ANY if name == "pipelined" else [])
        for dname in dtypes:
            for ci, cfg in enumerate(mod.CONFIGS):
                for shape in (shapes if ci == 0 else shapes[:3]):
                    yield name, mod, dname, ci, cfg, shape


def sweep_jobs(dtypes):
    """((M, N, K), dtype, [(kernel, module, config index, config)]) of the sweep, in run order."""
    for shape in BENCH_SHAPES:
        for dname in dtypes:
            yield shape, dname, [(name, mod, ci, cfg) for name, mod in _ours().items()
                                 for ci, cfg in enumerate(mod.CONFIGS)]


def dry(dtypes):
    """Print every job of the check and the sweep (no GPU needed)."""
    for name, _, dname, ci, cfg, shape in check_jobs(dtypes):
        print("check", name, f"cfg{ci}", shape, dname, cfg)
    for shape, dname, kernels in sweep_jobs(dtypes):
        for name, _, ci, cfg in kernels:
            print("sweep", name, f"cfg{ci}", shape, dname, cfg)


def check(dtypes, log):
    """Every kernel, every config's first entry and best-known config, many shapes."""
    import torch
    rows = []
    for name, mod, dname, ci, cfg, shape in check_jobs(dtypes):
        M, N, K = shape
        err = check_gemm(f"{name} cfg{ci} {shape} {dname}",
                         lambda a, b, c: mod.launch(a, b, c, cfg), M, N, K, getattr(torch, dname), log)
        check_row(rows, err, TOL[dname], f"{name} cfg{ci} {shape} {dname}: rel err",
                  kernel=name, config=ci, dtype=dname, M=M, N=N, K=K)
    return rows


def sweep(dtypes, log):
    """Time every config of every kernel at the benchmark shapes; returns rows and the best."""
    import torch
    rows, best = [], {}
    for (M, N, K), dname, kernels in sweep_jobs(dtypes):
        dt = getattr(torch, dname)
        a, b = gemm_inputs(M, N, K, dt)
        c = torch.empty(M, N, device="cuda", dtype=dt)
        for name, mod, ci, cfg in kernels:
            ms = try_call(f"sweep {name} cfg{ci} {M} {dname}",
                          lambda: bench_ms(lambda: mod.launch(a, b, c, cfg), warmup=25, rep=100), log)
            if ms is None:
                continue
            tf = _flops(M, N, K) / ms * 1e-9
            rows.append(dict(kernel=name, config=ci, dtype=dname, M=M, ms=ms, tflops=tf, cfg=str(cfg)))
            key = (name, M, N, K, dname)
            if key not in best or ms < best[key][1]:
                best[key] = (cfg, ms)
        print(f"  swept {M}^3 {dname}: " + ", ".join(
            f"{n}={_flops(M, N, K) / best[(n, M, N, K, dname)][1] * 1e-9:.0f}" for n in _ours()
            if (n, M, N, K, dname) in best), flush=True)
    return rows, best


# the tutorial hopper_gemm_ws tunes over 64 configs with CUDA graphs; we run its own
# launcher with these explicit configs (the launcher's `config=` path) and keep the best
TUTORIAL_WS_CONFIGS = [
    dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
         EPILOGUE_SUBTILE=True, NUM_CTAS=1, USE_WARP_BARRIER=False),
    dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
         EPILOGUE_SUBTILE=False, NUM_CTAS=1, USE_WARP_BARRIER=False),
    dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=3, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
         EPILOGUE_SUBTILE=True, NUM_CTAS=1, USE_WARP_BARRIER=True),
]


def tutorial_subjects(log):
    """name -> callable(a, b) for each tutorial that imports here, fp16 only (they write fp16)."""
    import torch  # noqa: F401
    subjects = {}
    ws = try_call("import hopper_gemm_ws", lambda: load_tutorial("hopper_gemm_ws"), log)
    if ws is not None:
        for i, cfg in enumerate(TUTORIAL_WS_CONFIGS):
            subjects[f"tlx_tut_gemm_ws[c{i}]"] = (lambda cfg: lambda a, b: ws.matmul(a, b, config=cfg))(cfg)
    pp = try_call("import pingpong", lambda: load_tutorial("hopper-persistent-gemm-ws-pingpong"), log)
    if pp is not None:
        subjects["tlx_tut_pingpong"] = pp.matmul_tlx_ws_persistent
    co = try_call("import cooperative", lambda: load_tutorial("hopper-persistent-gemm-ws-cooperative"), log)
    if co is not None:
        subjects["tlx_tut_cooperative"] = co.matmul_tlx_ws_persistent
    pl = try_call("import pipelined", lambda: load_tutorial("hopper_gemm_pipelined"), log)
    if pl is not None:
        # its own autotuned path (one config, num_warps=8); config= would launch with 4 warps
        subjects["tlx_tut_pipelined"] = pl.matmul
    return subjects


def compare(dtypes, best, log, rounds=3):
    """Side by side: cuBLAS, ours (best swept config), tutorials; ``rounds`` interleaved rounds."""
    import torch
    rows = []
    tut = tutorial_subjects(log)
    for (M, N, K) in BENCH_SHAPES:
        for dname in dtypes:
            dt = getattr(torch, dname)
            a, b = gemm_inputs(M, N, K, dt)
            ref = torch.matmul(a, b)
            subjects = {"cublas": lambda: torch.matmul(a, b)}
            for name, mod in _ours().items():
                if (name, M, N, K, dname) in best:
                    cfg = best[(name, M, N, K, dname)][0]
                    c = torch.empty(M, N, device="cuda", dtype=dt)
                    subjects[name] = (lambda mod, cfg, c: lambda: mod.launch(a, b, c, cfg))(mod, cfg, c)
            if dname == "float16":
                for tname, f in tut.items():
                    subjects[tname] = (lambda f: lambda: f(a, b))(f)
            times, errs = interleaved_rounds(subjects, ref, rounds, log, f"run {{name}} {M} {dname}",
                                             f"bench {{name}} {M} {dname}")
            rows += timing_rows(dict(shape=f"{M}x{N}x{K}", dtype=dname), times, errs, _flops(M, N, K),
                                "cublas", "vs_cublas", "err_vs_cublas", keep_failed=True)
            print(md_table([r for r in rows if r["shape"] == f"{M}x{N}x{K}" and r["dtype"] == dname],
                           ["shape", "dtype", "kernel", "tflops", "vs_cublas", "rounds"]), flush=True)
    return rows


def main(out_dir, dtypes=("float16", "bfloat16"), do_check=True):
    return run_check_sweep_compare(
        out_dir, "gemm", "GEMM", (lambda log: check(dtypes, log)) if do_check else None,
        ["kernel", "config", "dtype", "M", "N", "K", "rel_err"],
        lambda log: sweep(dtypes, log), "config sweep (TFLOP/s)", ["kernel", "config", "dtype", "M", "tflops", "cfg"],
        lambda best, log: compare(dtypes, best, log),
        ["shape", "dtype", "kernel", "tflops", "vs_cublas", "rounds", "err_vs_cublas"])


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--dry", action="store_true", help="list the check and sweep jobs only (no GPU)")
    args = p.parse_args()
    if args.dry:
        dry(tuple(args.dtypes.split(",")))
    else:
        main(args.out, tuple(args.dtypes.split(",")), do_check=not args.no_check)
