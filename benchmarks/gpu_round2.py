"""One short H200 call for the remaining gaps: targeted kernel variants, checked and timed.

GEMM: the cooperative kernel's variants (barrier split, per-step drain, register split,
epilogue strips) vs cuBLAS vs TLX's tutorial ``hopper_gemm_ws`` (config c0, unchanged,
through its own launcher), interleaved rounds at 4096^3 and 8192^3, fp16 and bf16.
Attention: every config of ours that suits the head dim vs torch SDPA at the goal shapes.
Every variant is first checked against float64 on fresh random inputs (ragged shapes too,
outputs NaN-poisoned); a variant that fails is not timed.

    source .gpu/env.sh && python3 benchmarks/gpu_round2.py        # writes round2.json/.md under $OUT
    python3 benchmarks/gpu_round2.py --dry                        # CPU: list the prewarm jobs only

Results are written after every section, so a call cut short still returns what it measured.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import (attn_flops, attn_inputs, check_attn, check_gemm, check_row, device_line,  # noqa: E402
                      errors_md, gemm_inputs, gpu_setup, interleaved_rounds, load_tutorial, md_table, prewarm,
                      timing_rows, try_call, write_json)

GEMM_TOL = {"float16": 2e-3, "bfloat16": 1.2e-2}
ATTN_TOL = {"float16": 3e-3, "bfloat16": 2e-2}
GEMM_CHECK = [(1000, 1032, 520), (64, 264, 40), (4104, 136, 1024)]
GEMM_BENCH = [(4096, 4096, 4096), (8192, 8192, 8192)]
ATTN_BENCH = [((4, 32, 4096, 128), False), ((2, 32, 8192, 128), False), ((4, 32, 4096, 64), False)]
ATTN_CHECK = [(1, 2, 200, 64), (2, 2, 1000, 128), (1, 4, 1024, 64), (1, 2, 130, 128)]


def gemm_variants():
    """name -> config of gemm_ws (first: round 1's default; split_w0 won and is CONFIGS[0] now)."""
    from tlx_workbench.kernels.gemm_ws import _config
    return {
        "default": _config(128, 256, 64, 4, 64),      # round 1's default
        "epi128": _config(128, 256, 64, 4, 128, EPI_BUFS=1),
        "split": _config(128, 256, 64, 4, 64, SPLIT_FULL=True),
        "wait0": _config(128, 256, 64, 4, 64, DOT_WAIT0=True),
        "noregs": _config(128, 256, 64, 4, 64, MMA_REGS=None, LOADER_REGS=None),
        "split_w0": _config(128, 256, 64, 4, 64, SPLIT_FULL=True, DOT_WAIT0=True),
        "tutlike": _config(128, 256, 64, 4, 128, EPI_BUFS=1, SPLIT_FULL=True, DOT_WAIT0=True,
                           MMA_REGS=None, LOADER_REGS=None),
        "split_e128": _config(128, 256, 64, 4, 128, EPI_BUFS=1, SPLIT_FULL=True),
    }


TUT_C0 = dict(BM=128, BN=256, BK=64, GROUP_SIZE_M=8, NUM_STAGES=4, NUM_MMA_WARPS=8, NUM_MMA_GROUPS=2,
              EPILOGUE_SUBTILE=True, NUM_CTAS=1, USE_WARP_BARRIER=False)


def warm_jobs(variants, attention=True):
    from tlx_workbench.kernels import attention as A
    jobs = []
    for dname in ("float16", "bfloat16"):
        for cfg in variants.values():
            for shape in GEMM_CHECK + GEMM_BENCH[:1]:     # 8192^3 specializes like 4096^3
                jobs.append(("gemm", cfg, dname, shape))
        if attention:
            for cfg in A.CONFIGS:
                for shape, causal in ATTN_BENCH:
                    if A.suits(cfg, shape[-1]):
                        jobs.append(("attn", cfg, dname, shape, causal))
            for shape in ATTN_CHECK:
                if shape[-1] == 64:
                    for causal in (False, True):
                        jobs.append(("attn", _bm256(), dname, shape, causal))
    return jobs


def _bm256():
    from tlx_workbench.kernels import attention as A
    return next(c for c in A.CONFIGS if c["BM"] == 256)


def _dump(out, payload):
    write_json(out, "round2", payload)


def gemm_check(variants, log):
    import torch
    from tlx_workbench.kernels import gemm_ws
    rows, bad = [], set()
    for dname in ("float16", "bfloat16"):
        dt = getattr(torch, dname)
        for name, cfg in variants.items():
            for (M, N, K) in GEMM_CHECK:
                err = check_gemm(f"check {name} {(M, N, K)} {dname}",
                                 lambda a, b, c: gemm_ws.launch(a, b, c, cfg), M, N, K, dt, log)
                if not check_row(rows, err, GEMM_TOL[dname], f"{name} {(M, N, K)} {dname}:",
                                 variant=name, dtype=dname, shape=f"{M}x{N}x{K}"):
                    bad.add((name, dname))
    return rows, bad


def gemm_compare(variants, bad, log, rounds=3):
    import torch
    from tlx_workbench.kernels import gemm_ws
    tut = try_call("import hopper_gemm_ws", lambda: load_tutorial("hopper_gemm_ws"), log)
    rows = []
    for (M, N, K) in GEMM_BENCH:
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            a, b = gemm_inputs(M, N, K, dt)
            ref = torch.matmul(a, b)
            subj = {"cublas": lambda: torch.matmul(a, b)}
            for name, cfg in variants.items():
                if (name, dname) not in bad:
                    c = torch.empty(M, N, device="cuda", dtype=dt)
                    subj[name] = (lambda cfg, c: lambda: gemm_ws.launch(a, b, c, cfg))(cfg, c)
            if tut is not None and dname == "float16":
                subj["tlx_tut_gemm_ws[c0]"] = lambda: tut.matmul(a, b, config=TUT_C0)
            times, errs = interleaved_rounds(subj, ref, rounds, log, f"run {{name}} {M} {dname}",
                                             f"bench {{name}} {M} {dname}", max_err=1e-2)
            rows += timing_rows(dict(shape=f"{M}x{N}x{K}", dtype=dname), times, errs, 2 * M * N * K,
                                "cublas", "vs_cublas", "err_vs_cublas")
            print(md_table([r for r in rows if r["shape"] == f"{M}x{N}x{K}" and r["dtype"] == dname],
                           ["shape", "dtype", "kernel", "tflops", "vs_cublas", "rounds"]), flush=True)
    return rows


def attn_check(log):
    import torch
    from tlx_workbench.kernels import attention as A
    rows, bad = [], set()
    new = _bm256()                       # the config this round adds; the others passed before
    for dname in ("float16", "bfloat16"):
        dt = getattr(torch, dname)
        for shape in ATTN_CHECK:
            if shape[-1] != 64:
                continue
            for causal in (False, True):
                err = check_attn(f"attn check {shape} {causal} {dname}",
                                 lambda q, k, v, o, scale: A.launch(q, k, v, o, causal, scale, new),
                                 shape, causal, dt, log)
                if not check_row(rows, err, ATTN_TOL[dname], f"attn bm256 {shape} {causal} {dname}:",
                                 config="bm256", dtype=dname, shape=str(shape), causal=causal):
                    bad.add(("bm256", dname))
    return rows, bad


def attn_compare(bad, log, rounds=2):
    import torch
    from tlx_workbench.kernels import attention as A
    F = torch.nn.functional
    rows = []
    for shape, causal in ATTN_BENCH:
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            q, k, v, scale = attn_inputs(shape, dt)
            ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            subj = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)}
            for ci, cfg in enumerate(A.CONFIGS):
                if not A.suits(cfg, shape[-1]) or (cfg["BM"] == 256 and ("bm256", dname) in bad):
                    continue
                o = torch.empty_like(q)
                subj[f"ours_cfg{ci}"] = (lambda cfg, o: lambda: A.launch(q, k, v, o, causal, scale, cfg))(cfg, o)
            fl = attn_flops(shape, causal)
            times, errs = interleaved_rounds(subj, ref, rounds, log, f"run {{name}} {shape} {dname}",
                                             f"bench {{name}} {shape}", max_err=2e-2)
            rows += timing_rows(dict(shape=str(shape), causal=causal, dtype=dname), times, errs, fl,
                                "sdpa", "vs_sdpa", "err")
            print(md_table([r for r in rows if r["shape"] == str(shape) and r["dtype"] == dname],
                           ["shape", "dtype", "kernel", "tflops", "vs_sdpa", "rounds"]), flush=True)
    return rows


def main():
    if "--dry" in sys.argv:         # CPU: list the variants and the prewarm jobs only
        js = warm_jobs(gemm_variants(), attention="--no-attention" not in sys.argv)
        for j in js:
            print(j[0], j[2], *j[3:], j[1])
        print(len(js), "prewarm jobs;", sum(j[0] == "attn" for j in js), "attention")
        return
    out = pathlib.Path(os.environ.get("OUT", "bench_out"))
    gpu_setup()
    log = []
    payload = {"device": device_line(), "errors": log}
    t0 = time.time()
    variants = gemm_variants()
    prewarm(warm_jobs(variants, attention="--no-attention" not in sys.argv))
    payload["gemm_variants"] = {k: str(v) for k, v in variants.items()}
    rows, bad = gemm_check(variants, log)
    payload["gemm_check"] = rows
    print(f"gemm check: {sum(r['ok'] == 'ok' for r in rows)}/{len(rows)} ok ({time.time() - t0:.0f} s)", flush=True)
    _dump(out, payload)
    payload["gemm_compare"] = gemm_compare(variants, bad, log)
    print(f"gemm done ({time.time() - t0:.0f} s)", flush=True)
    _dump(out, payload)
    if "--no-attention" not in sys.argv:
        rows, abad = attn_check(log)
        payload["attn_check"] = rows
        print(f"attn check: {sum(r['ok'] == 'ok' for r in rows)}/{len(rows)} ok", flush=True)
        _dump(out, payload)
        payload["attn_compare"] = attn_compare(abad, log)
        print(f"attention done ({time.time() - t0:.0f} s)", flush=True)
    _dump(out, payload)
    md = [f"# round 2 on {payload['device']}\n", "## GEMM\n",
          md_table(payload["gemm_compare"], ["shape", "dtype", "kernel", "tflops", "vs_cublas", "rounds"])]
    if "attn_compare" in payload:
        md += ["## attention\n", md_table(payload["attn_compare"],
                                          ["shape", "causal", "dtype", "kernel", "tflops", "vs_sdpa", "rounds"])]
    md += errors_md(log)
    (out / "round2.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
