"""Attention forward on the H200: our TLX kernel vs torch SDPA vs TLX's tutorial kernels.

One run: (a) correctness against float64 at many shapes (D 64/128, causal or not,
fp16/bf16, ragged N), poisoned outputs; (b) config sweep at the benchmark shapes;
(c) side by side (do_bench medians, two rounds): ours (best config), SDPA (default
backend, and cuDNN's), the tutorials unchanged through their own launchers;
(d) attention.json + attention.md.

    python benchmarks/attention.py --out /tmp/attn_out        # on a Hopper GPU
    python benchmarks/attention.py --dry                      # CPU: list the jobs only
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import (attn_flops, attn_inputs, bench_ms, check_attn, check_row, interleaved_rounds,  # noqa: E402
                      load_tutorial, md_table, run_check_sweep_compare, timing_rows, try_call)

BENCH = [((4, 32, 4096, 128), False), ((2, 32, 8192, 128), False),
         ((4, 32, 4096, 128), True), ((2, 32, 8192, 128), True), ((4, 32, 4096, 64), False),
         ((4, 32, 4096, 64), True)]
CHECK = [(1, 2, 128, 64), (2, 3, 256, 128), (1, 2, 200, 64), (2, 2, 1000, 128), (1, 1, 77, 128),
         (1, 4, 1024, 64), (1, 1, 4096, 128), (1, 2, 130, 128)]
TOL = {"float16": 3e-3, "bfloat16": 2e-2}


def check_jobs():
    """(dtype, shape, causal, config index, config) of every correctness check, in run order:
    every config that fits at the first three shapes in fp16, the default config (the first of
    ``configs_for`` that head dim and masking) everywhere."""
    from tlx_workbench.kernels import attention as A
    for dname in ("float16", "bfloat16"):
        for shape in CHECK:
            for causal in (False, True):
                default = A.configs_for(shape[-1], causal)[0]
                for ci, cfg in enumerate(A.CONFIGS):
                    if fits(cfg, shape[-1], causal) and (
                            cfg is default or (shape in CHECK[:3] and dname == "float16")):
                        yield dname, shape, causal, ci, cfg


def sweep_jobs():
    """(shape, causal, dtype, [(config index, config)]) of the sweep, in run order."""
    from tlx_workbench.kernels import attention as A
    for shape, causal in BENCH:
        for dname in ("float16", "bfloat16"):
            yield shape, causal, dname, [(ci, cfg) for ci, cfg in enumerate(A.CONFIGS) if fits(cfg, shape[-1], causal)]


def dry():
    """Print every job of the check and the sweep (no GPU needed)."""
    for dname, shape, causal, ci, cfg in check_jobs():
        print("check", f"cfg{ci}", shape, f"causal={causal}", dname, cfg)
    for shape, causal, dname, cfgs in sweep_jobs():
        for ci, cfg in cfgs:
            print("sweep", f"cfg{ci}", shape, f"causal={causal}", dname, cfg)


def check(log):
    import torch
    from tlx_workbench.kernels import attention as A
    rows = []
    for dname, shape, causal, ci, cfg in check_jobs():
        err = check_attn(f"attn cfg{ci} {shape} causal={causal} {dname}",
                         lambda q, k, v, o, scale: A.launch(q, k, v, o, causal, scale, cfg),
                         shape, causal, getattr(torch, dname), log)
        check_row(rows, err, TOL[dname], f"cfg{ci} {shape} causal={causal} {dname}:",
                  config=ci, dtype=dname, shape=str(shape), causal=causal)
    return rows


def fits(cfg, D, causal=False):
    from tlx_workbench.kernels import attention as A
    return A.suits(cfg, D, causal)      # includes the SMEM limit


def sweep(log):
    import torch
    from tlx_workbench.kernels import attention as A
    rows, best = [], {}
    for shape, causal, dname, cfgs in sweep_jobs():
        q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
        o = torch.empty_like(q)
        for ci, cfg in cfgs:
            ms = try_call(f"sweep cfg{ci} {shape} {causal} {dname}",
                          lambda: bench_ms(lambda: A.launch(q, k, v, o, causal, scale, cfg), 25, 100), log)
            if ms is None:
                continue
            rows.append(dict(config=ci, shape=str(shape), causal=causal, dtype=dname, ms=ms,
                             tflops=attn_flops(shape, causal) / ms * 1e-9, cfg=str(cfg)))
            key = (shape, causal, dname)
            if key not in best or ms < best[key][1]:
                best[key] = (cfg, ms)
        if (shape, causal, dname) in best:
            print(f"  swept {shape} causal={causal} {dname}: "
                  f"{attn_flops(shape, causal) / best[(shape, causal, dname)][1] * 1e-9:.0f} TFLOP/s", flush=True)
    return rows, best


def tutorial_subjects(log):
    subj = {}
    pp = try_call("import hopper_fa_ws_pipelined_pingpong",
                  lambda: load_tutorial("hopper_fa_ws_pipelined_pingpong"), log)
    if pp is not None:
        subj["tlx_tut_fa_pingpong"] = pp.attention
    pers = try_call("import hopper_fa_ws_pipelined_pingpong_persistent",
                    lambda: load_tutorial("hopper_fa_ws_pipelined_pingpong_persistent"), log)
    if pers is not None:
        subj["tlx_tut_fa_pingpong_persistent"] = pers.attention
    return subj


def compare(best, log, rounds=2):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from tlx_workbench.kernels import attention as A
    F = torch.nn.functional
    tut = tutorial_subjects(log)
    rows = []
    for shape, causal in BENCH:
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            q, k, v, scale = attn_inputs(shape, dt)
            o = torch.empty_like(q)

            def cudnn():
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

            def flash():
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            subj = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
                    "sdpa_flash": flash, "sdpa_cudnn": cudnn}
            if (shape, causal, dname) in best:
                cfg = best[(shape, causal, dname)][0]
                subj["ours"] = lambda: A.launch(q, k, v, o, causal, scale, cfg)
            if not causal and dname == "float16":
                for name, f in tut.items():
                    subj[name] = (lambda f: lambda: f(q, k, v, scale))(f)
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            times, errs = interleaved_rounds(subj, ref, rounds, log, f"run {{name}} {shape} {causal} {dname}",
                                             f"bench {{name}} {shape}")
            rows += timing_rows(dict(shape=str(shape), causal=causal, dtype=dname), times, errs,
                                attn_flops(shape, causal), "sdpa", "vs_sdpa", "err_vs_sdpa", keep_failed=True)
            print(md_table([r for r in rows if r["shape"] == str(shape) and r["causal"] == causal
                            and r["dtype"] == dname],
                           ["shape", "causal", "dtype", "kernel", "tflops", "vs_sdpa", "rounds"]), flush=True)
    return rows


def main(out_dir, do_check=True):
    return run_check_sweep_compare(
        out_dir, "attention", "Attention forward", check if do_check else None,
        ["config", "dtype", "shape", "causal", "rel_err"],
        sweep, "config sweep", ["config", "shape", "causal", "dtype", "tflops", "cfg"],
        compare, ["shape", "causal", "dtype", "kernel", "tflops", "vs_sdpa", "rounds", "err_vs_sdpa"])


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    p.add_argument("--no-check", action="store_true")
    p.add_argument("--dry", action="store_true", help="list the check and sweep jobs only (no GPU)")
    args = p.parse_args()
    if args.dry:
        dry()
    else:
        main(args.out, do_check=not args.no_check)
