"""Round 4 on the H200, one call: cheaper softmax steps in the attention kernel, stream-K GEMM.

Attention variants of the persistent kernel (round 3's default), each a constexpr switch of
``tlx_workbench/kernels/attention.py``: ``pe`` converts P to fp16/bf16 in the softmax, outside
the GEMM turn (the PTX of round 3 had its 32 conversions between the turn's bar.sync and
bar.arrive); ``wb`` makes the K/V/Q release barriers warp barriers (removes two of the three
group-wide bar.sync of every KV step); ``ex2h`` (fp16 only) runs exp2 on packed fp16 pairs.
The plain (non-persistent) grid with ``pe`` + ``wb`` is timed on the causal cell.
GEMM: the default cooperative kernel (128 balanced CTAs at 4096^3) vs cuBLAS, and the stream-K
variant when ``benchmarks/round4_gemm.py`` provides it.

Every variant is first checked against float64 on fresh random inputs (ragged shapes, several
tiles per persistent CTA, causal and not, NaN-poisoned outputs); a variant that fails is not
timed. Timing as round 3 (do_bench median, L2 flushed, interleaved rounds, best shown).

    source .gpu/env.sh && python3 benchmarks/gpu_round4.py      # writes round4.json/.md under $OUT
    python3 benchmarks/gpu_round4.py --dry                        # CPU: list variants and jobs only
"""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import gpu_round3 as r3  # noqa: E402  (its interleaved timing loop)
from _harness import (attn_inputs, check_attn, check_gemm, check_row, device_line, errors_md,  # noqa: E402
                      gemm_inputs, gpu_setup, md_table, prewarm, write_json)

# which variants a run measures: "a" (the first call: pe / wb / ex2h), "lazy" (the second call:
# the lazy O rescale), "plate" (the third: P converted after the P V wgmma retired); no --set
# means "a", the command that made round4.json; "g3" (the fourth: three consumer groups, D=64);
# "zigzag" (the fifth: the causal zig-zag pair schedule of the persistent kernel); "warp1" (the
# persistent kernel with a one-warp loader; its variants were timed in the "pin" call of round 5);
# "pin" and "qregs" (round 5, third session: the softmax pinned under P V, Q in registers)
SET = sys.argv[sys.argv.index("--set") + 1] if "--set" in sys.argv else "a"
STEM = "round4" if SET == "a" else f"round4_{SET}"
r3.DEADLINE_S = float(os.environ.get("ROUND4_DEADLINE_S", "150"))
ATTN_TOL = r3.ATTN_TOL
GEMM_TOL = r3.GEMM_TOL
ATTN_CHECK = r3.ATTN_CHECK
ATTN_BENCH = [((4, 32, 4096, 128), False, ("float16", "bfloat16")),
              ((2, 32, 8192, 128), False, ("float16", "bfloat16")),
              ((4, 32, 4096, 128), True, ("float16",)),
              ((4, 32, 4096, 64), False, ("float16",))]
GEMM_CHECK = [(1000, 1032, 520), (4104, 136, 1024), (4096, 4096, 4096)]
GEMM_BENCH = [(4096, 4096, 4096), (8192, 8192, 8192)]
if SET == "warp1":      # the one-warp loader, D=128, no GEMM (timed within --set pin)
    ATTN_BENCH = [((4, 32, 4096, 128), False, ("float16", "bfloat16")),
                  ((2, 32, 8192, 128), False, ("float16", "bfloat16")),
                  ((4, 32, 4096, 128), True, ("float16",))]
    GEMM_CHECK, GEMM_BENCH = [], []
if SET == "pin":        # the softmax pinned above the P V wait (+ the one-warp loader), no GEMM
    ATTN_BENCH = [((4, 32, 4096, 128), False, ("float16", "bfloat16")),
                  ((2, 32, 8192, 128), False, ("float16", "bfloat16")),
                  ((4, 32, 4096, 128), True, ("float16", "bfloat16")),
                  ((4, 32, 4096, 64), False, ("float16",)),
                  ((4, 32, 4096, 64), True, ("float16",))]
    GEMM_CHECK, GEMM_BENCH = [], []
if SET == "qregs":      # Q in registers for S = Q K^T (with P_LATE), no GEMM
    ATTN_BENCH = [((4, 32, 4096, 128), False, ("float16", "bfloat16")),
                  ((2, 32, 8192, 128), False, ("float16", "bfloat16")),
                  ((4, 32, 4096, 128), True, ("float16", "bfloat16")),
                  ((4, 32, 4096, 64), False, ("float16",)),
                  ((4, 32, 4096, 64), True, ("float16", "bfloat16"))]
    GEMM_CHECK, GEMM_BENCH = [], []
if SET == "zigzag":     # causal only (the zig-zag persistent schedule), no GEMM
    ATTN_BENCH = [((4, 32, 4096, 128), True, ("float16", "bfloat16")),
                  ((2, 32, 8192, 128), True, ("float16",)),
                  ((4, 32, 4096, 64), True, ("float16",))]
    GEMM_CHECK, GEMM_BENCH = [], []
if SET == "g3":     # D=64 only, no GEMM
    ATTN_BENCH = [((4, 32, 4096, 64), False, ("float16", "bfloat16")),
                  ((2, 32, 8192, 64), False, ("float16",)),
                  ((4, 32, 4096, 64), True, ("float16", "bfloat16"))]
    GEMM_CHECK, GEMM_BENCH = [], []


def attn_variants():
    """name -> (config, causal cells?, dtypes)"""
    from tlx_workbench.kernels import attention as A
    P = dict(PERSISTENT=True, Q_BUFS=2)
    both = ("float16", "bfloat16")
    if SET == "warp1":
        W = dict(PERSISTENT=True, Q_BUFS=2, WARP1_LOADER=True)
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "pers_warp1": (A._config(128, 2, **W), False, both),
            "pers_zigzag": (A._config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True), True, both),
            "pers_zigzag_warp1": (A._config(128, 2, ZIGZAG=True, **W), True, both),
        }
    if SET == "pin":
        W = dict(PERSISTENT=True, Q_BUFS=2, WARP1_LOADER=True)
        Z = dict(PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)
        G3 = dict(BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2)
        PIN = dict(PIN_SOFTMAX=True, P_LATE=True)
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "pers_plate": (A._config(128, 2, P_LATE=True, **P), False, both),
            "pers_pin": (A._config(128, 2, PIN_SOFTMAX=True, **P), False, both),
            "pers_pin_plate": (A._config(128, 2, **PIN, **P), False, both),
            "pers_warp1": (A._config(128, 2, **W), False, both),
            "pers_warp1_pin_plate": (A._config(128, 2, **PIN, **W), False, both),
            "pers_zigzag": (A._config(128, 2, **Z), True, both),
            "pers_zigzag_pin_plate": (A._config(128, 2, **PIN, **Z), True, both),
            "g3": (A._config(128, 2, **G3), False, both),
            "g3_pin_plate": (A._config(128, 2, **PIN, **G3), False, both),
            "g3_zigzag": (A._config(128, 2, ZIGZAG=True, **G3), True, both),
            "g3_zigzag_pin_plate": (A._config(128, 2, ZIGZAG=True, **PIN, **G3), True, both),
        }
    if SET == "qregs":
        Z = dict(PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)
        QR = dict(Q_REGS=True, P_LATE=True)
        PIN = dict(PIN_SOFTMAX=True, P_LATE=True)
        G3 = dict(BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2)
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "pers_plate": (A._config(128, 2, P_LATE=True, **P), False, both),
            "pers_qregs": (A._config(128, 2, **QR, **P), False, both),
            "pers_qregs_pin": (A._config(128, 2, PIN_SOFTMAX=True, **QR, **P), False, both),
            "pers_zigzag": (A._config(128, 2, **Z), True, both),
            "pers_zigzag_qregs": (A._config(128, 2, **QR, **Z), True, both),
            "pers_zigzag_pin": (A._config(128, 2, **PIN, **Z), True, both),
            "pers_zigzag_qregs_pin": (A._config(128, 2, PIN_SOFTMAX=True, **QR, **Z), True, both),
            "g3": (A._config(128, 2, **G3), False, both),
            "g3_zigzag": (A._config(128, 2, ZIGZAG=True, **G3), True, both),
        }
    if SET == "zigzag":
        Z = dict(PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)
        return {
            "plain": (A._config(128, 2), True, both),
            "pers_zigzag": (A._config(128, 2, **Z), True, both),
            "g3_pers_zigzag": (A._config(128, 2, BM=192, GROUPS=3, MMA_REGS=160, **Z), True, both),
        }
    if SET == "g3":
        G3 = dict(BM=192, GROUPS=3, MMA_REGS=160)
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "plain": (A._config(128, 2), True, both),
            "g3_pers_bn128": (A._config(128, 2, PERSISTENT=True, Q_BUFS=2, **G3), False, both),
            "g3_pers_bn64": (A._config(64, 2, PERSISTENT=True, Q_BUFS=2, **G3), False, both),
            "g3_plain_bn64": (A._config(64, 3, **G3), False, both),
        }
    if SET == "plate":
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "pers_plate": (A._config(128, 2, P_LATE=True, **P), False, both),
            "pers_plate_lazy": (A._config(128, 2, P_LATE=True, LAZY=True, **P), False, both),
            "plain": (A._config(128, 2), True, both),
            "plain_plate": (A._config(128, 2, P_LATE=True), True, both),
        }
    if SET == "lazy":
        return {
            "pers": (A._config(128, 2, **P), False, both),
            "pers_lazy": (A._config(128, 2, LAZY=True, **P), False, both),
            "plain": (A._config(128, 2), True, both),
            "plain_lazy": (A._config(128, 2, LAZY=True), True, both),
        }
    return {
        "pers": (A._config(128, 2, **P), False, both),
        "pers_pe": (A._config(128, 2, P_EARLY=True, **P), False, both),
        "pers_wb": (A._config(128, 2, WARP_BAR=True, **P), False, both),
        "pers_pe_wb": (A._config(128, 2, P_EARLY=True, WARP_BAR=True, **P), False, both),
        "pers_ex2h_wb": (A._config(128, 2, EX2_F16=True, WARP_BAR=True, **P), False, ("float16",)),
        "plain": (A._config(128, 2), True, both),
        "plain_pe_wb": (A._config(128, 2, P_EARLY=True, WARP_BAR=True), True, both),
    }


def _applies(entry, shape, causal, dname):
    from tlx_workbench.kernels import attention as A
    cfg, causal_ok, dnames = entry
    if dname not in dnames or not A.suits(cfg, shape[-1], causal):
        return False
    # plain configs are timed on the causal cell only (round 3 timed them everywhere)
    return causal or bool(cfg.get("PERSISTENT")) or not causal_ok


def gemm_streamk_jobs():
    """[(label, launch(a, b, c))] of the stream-K module, or [] when it is not there yet."""
    try:
        import round4_gemm
    except ImportError:
        return []
    return [(lbl, fn) for lbl, fn in round4_gemm.gemm_jobs() if "streamk" in lbl]


def gemm_subjects():
    from tlx_workbench.kernels import gemm_ws
    subj = [("ws_default", lambda a, b, c: gemm_ws.launch(a, b, c, gemm_ws.CONFIGS[0]))]
    return subj + gemm_streamk_jobs()


def jobs():
    from tlx_workbench.kernels import attention as A
    out = []
    for name, entry in attn_variants().items():
        cfg = entry[0]
        for dname in entry[2]:
            for shape in ATTN_CHECK:
                for causal in (False, True):
                    if A.suits(cfg, shape[-1], causal):
                        out.append(("attn", cfg, dname, shape, causal))
        for shape, causal, dnames in ATTN_BENCH:
            for dname in dnames:
                if _applies(entry, shape, causal, dname):
                    out.append(("attn", cfg, dname, shape, causal))
    from tlx_workbench.kernels import gemm_ws
    for dname in ("float16", "bfloat16"):
        for shape in GEMM_CHECK + GEMM_BENCH:
            out.append(("gemm", gemm_ws.CONFIGS[0], dname, shape))
    seen, uniq = set(), []
    for j in out:
        key = (j[0], json.dumps(j[1], sort_keys=True), j[2], str(j[3]), j[4:] and j[4])
        if key not in seen:
            seen.add(key)
            uniq.append(j)
    return uniq


def attn_check(log):
    import torch
    from tlx_workbench.kernels import attention as A
    rows, bad = [], set()
    for name, entry in attn_variants().items():
        cfg, _, dnames = entry
        for dname in dnames:
            dt = getattr(torch, dname)
            for shape in ATTN_CHECK:
                for causal in (False, True):
                    if not A.suits(cfg, shape[-1], causal):
                        continue
                    err = check_attn(f"attn check {name} {shape} {causal} {dname}",
                                     lambda q, k, v, o, scale: A.launch(q, k, v, o, causal, scale, cfg),
                                     shape, causal, dt, log, sync=True)
                    if not check_row(rows, err, ATTN_TOL[dname], f"attn {name} {shape} causal={causal} {dname}:",
                                     variant=name, dtype=dname, shape=str(shape), causal=causal):
                        bad.add((name, dname))
    return rows, bad


def gemm_check(log):
    import torch
    rows, bad = [], set()
    for name, fn in gemm_subjects():
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            for (M, N, K) in GEMM_CHECK:
                err = check_gemm(f"gemm check {name} {(M, N, K)} {dname}", fn, M, N, K, dt, log, cast_ref=False)
                if not check_row(rows, err, GEMM_TOL[dname], f"gemm {name} {(M, N, K)} {dname}:",
                                 variant=name, dtype=dname, shape=f"{M}x{N}x{K}"):
                    bad.add((name, dname))
    return rows, bad


def build_subjects(abad, gbad):
    import torch
    from tlx_workbench.kernels import attention as A
    F = torch.nn.functional
    groups = []
    for shape, causal, dnames in ATTN_BENCH:
        for dname in dnames:
            dt = getattr(torch, dname)
            q, k, v, scale = attn_inputs(shape, dt)
            subj = {"sdpa": (lambda q, k, v, causal, scale:
                             lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale))(
                                 q, k, v, causal, scale)}
            for name, entry in attn_variants().items():
                if _applies(entry, shape, causal, dname) and (name, dname) not in abad:
                    o = torch.empty_like(q)
                    subj[name] = (lambda q, k, v, o, causal, scale, cfg:
                                  lambda: A.launch(q, k, v, o, causal, scale, cfg))(q, k, v, o, causal, scale,
                                                                                     entry[0])
            Z, H, N, D = shape
            groups.append(("attention", f"{Z}x{H}x{N}x{D}{' causal' if causal else ''} {dname}",
                           r3.attn_flops(shape, causal), subj, "sdpa"))
    for (M, N, K) in GEMM_BENCH:
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            a, b = gemm_inputs(M, N, K, dt)
            subj = {"cublas": (lambda a, b: lambda: torch.matmul(a, b))(a, b)}
            for name, fn in gemm_subjects():
                if (name, dname) not in gbad:
                    c = torch.empty(M, N, device="cuda", dtype=dt)
                    subj[name] = (lambda a, b, c, fn: lambda: fn(a, b, c))(a, b, c, fn)
            groups.append(("gemm", f"{M}x{N}x{K} {dname}", 2.0 * M * N * K, subj, "cublas"))
    return groups


def main():
    if "--dry" in sys.argv:
        js = jobs()
        print(json.dumps({k: v[0] for k, v in attn_variants().items()}, indent=1))
        print([lbl for lbl, _ in gemm_subjects()])
        print(len(js), "prewarm jobs;", sum(j[0] == "attn" for j in js), "attention")
        return
    out = pathlib.Path(os.environ.get("OUT", "bench_out"))
    gpu_setup()
    log = []
    payload = {"device": device_line(), "errors": log,
               "attn_variants": {k: str(v[0]) for k, v in attn_variants().items()},
               "gemm_subjects": [lbl for lbl, _ in gemm_subjects()]}
    prewarm(jobs())
    rows, abad = attn_check(log)
    payload["attn_check"] = rows
    print(f"attention check: {sum(r['ok'] == 'ok' for r in rows)}/{len(rows)} ok ({time.time() - r3.T0:.0f} s)",
          flush=True)
    grows, gbad = gemm_check(log)
    payload["gemm_check"] = grows
    print(f"gemm check: {sum(r['ok'] == 'ok' for r in grows)}/{len(grows)} ok ({time.time() - r3.T0:.0f} s)",
          flush=True)
    write_json(out, STEM, payload)
    groups = build_subjects(abad, gbad)
    payload["timing"], payload["rounds"] = r3.timed(groups, log)
    write_json(out, STEM, payload)
    md = [f"# round 4 on {payload['device']} ({payload['rounds']} rounds)\n",
          md_table(payload["timing"], ["cell", "subject", "tflops", "vs_vendor", "rounds"])]
    md += errors_md(log)
    (out / f"{STEM}.md").write_text("\n".join(md))
    print("\n".join(md), flush=True)
    print(f"total {time.time() - r3.T0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
