"""FP8 GEMM on the H200: tlx_workbench.kernels.gemm_fp8 vs torch._scaled_mm (cuBLASLt / CUTLASS FP8).

One run does the parts below, each job in a child process with a deadline (a hung launch kills its
child, never the run), writing ``$OUT/gemm_fp8_h200.json`` (and ``.md``) after every job. Parts 1 and 2
are mostly compiles and run 4 children at a time; parts 3 and 4 run alone on the GPU, after them:

1. ``static``: the explorer's static stage (offline sm_90 compile of what the launcher launches at
   4096^3: SMEM, registers, spills, ptxas advisories) of every candidate config, per-tensor and row-wise;
2. ``check``: correctness against float64 (computed on the GPU) on fresh quantized inputs, NaN-poisoned
   outputs: the first config at every shape (4096^3, 8192^3 and ragged ones), both scale kinds, both
   output dtypes, e4m3 x e5m2 both ways; every other config at a few shapes. ``torch._scaled_mm`` is
   measured on the same inputs for comparison;
3. ``transpose``: what a row-major (K, N) ``b`` costs: ``b.t().contiguous()`` at 4096^2 and 8192^2;
4. ``time``: interleaved rounds (medians of do_bench medians) at 4096^3 and 8192^3, per-tensor and
   row-wise, of every config that passed the check vs ``torch._scaled_mm`` with ``use_fast_accum=True``
   (the same accumulation as ours) and ``False`` (fp32 promotion; compare it with our PROMOTE config).

    source .gpu/env.sh && python3 benchmarks/gemm_fp8_h200.py                   # everything (~4-6 min)
    python3 benchmarks/gemm_fp8_h200.py --parts static,check                    # a subset (merged into an
                                                                                # existing $OUT json)
    python3 benchmarks/gemm_fp8_h200.py --parts time --configs 0,1,4            # time a few configs only
    python3 benchmarks/gemm_fp8_h200.py --dry                                   # CPU: list the jobs
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# ragged: partial tiles in M, N and K, K of one partial k-step, one row, tall and wide, deep K
CHECK_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1000, 1032, 528), (64, 264, 48), (4104, 136, 1024),
                (136, 3000, 784), (1, 8, 16), (2048, 2048, 8192), (333, 4104, 4096)]
OTHER_CFG_SHAPES = [(4096, 4096, 4096), (1000, 1032, 528), (136, 3000, 784)]
# max |out - ref| / max |ref|: bf16 rounding alone is 2^-9 of it; the fp8 tensor cores' accumulation adds
# more at large K (reported, next to _scaled_mm's own error on the same inputs)
TOL = 1e-2
DEADLINE = {"static": 240, "check": 240, "transpose": 120, "time": 300}
ROUNDS = 5
CHECKS_AT_ONCE = 4


# ---- the jobs (run in a child: python3 gemm_fp8_h200.py --job '<json>') ------------------------------------

def _inputs(shape, rowwise, a_dtype="float8_e4m3fn", b_dtype=None):
    from tlx_workbench.kernels import gemm_fp8
    return gemm_fp8.make_inputs(shape, a_dtype, "cuda", rowwise=rowwise, b_dtype=b_dtype)


def _errors(out, ref):
    o, r = out.double(), ref
    if not bool(o.isfinite().all()):
        return dict(max_rel=float("inf"), norm_rel=float("inf"))
    return dict(max_rel=float((o - r).abs().max() / r.abs().max()), norm_rel=float((o - r).norm() / r.norm()))


def _scaled_mm(a, b, sa, sb, out_dtype, fast):
    import torch
    rowwise = sa.numel() != 1
    if rowwise:
        return torch._scaled_mm(a, b, sa.reshape(-1, 1), sb.reshape(1, -1), out_dtype=out_dtype,
                                use_fast_accum=fast)
    return torch._scaled_mm(a, b, sa.reshape(()), sb.reshape(()), out_dtype=out_dtype, use_fast_accum=fast)


def job_static(configs):
    from tlx_workbench.explore import library, stages
    rows = []
    for name in ("gemm_fp8", "gemm_fp8_rowwise"):
        p = library.problem(name, dtype="bfloat16")
        for ci in configs:
            from tlx_workbench.kernels.gemm_fp8 import CONFIGS
            t0 = time.perf_counter()
            o = stages.static(p.travel(), dict(CONFIGS[ci]), (4096, 4096, 4096))
            rows.append(dict(problem=p.name, config=ci, status=o.status, reason=o.reason, line=o.line,
                             metrics=o.metrics, seconds=round(time.perf_counter() - t0, 2)))
    return rows


def job_check(ci, shapes, variants):
    """variants: [(rowwise, a_dtype, b_dtype, out_dtype)]; each at each shape."""
    import torch
    from tlx_workbench.kernels import gemm_fp8
    cfg = gemm_fp8.CONFIGS[ci]
    rows = []
    for shape in shapes:
        M, N, K = shape
        for rowwise, a_dt, b_dt, out_name in variants:
            out_dt = getattr(torch, out_name)
            row = dict(config=ci, shape=list(shape), rowwise=rowwise, a=a_dt, b=b_dt or a_dt, out=out_name)
            try:
                torch.manual_seed(hash((shape, rowwise, a_dt, b_dt)) % 2 ** 31)
                a, b, sa, sb = _inputs(shape, rowwise, a_dt, b_dt)
                c = torch.full((M, N), float("nan"), dtype=out_dt, device="cuda")
                gemm_fp8.launch(a, gemm_fp8.k_major_b(b), c, sa, sb, cfg)
                torch.cuda.synchronize()
                ref = (a.double() @ b.double()) * (sa.double().reshape(-1, 1) if rowwise else sa.double()) \
                    * (sb.double().reshape(1, -1) if rowwise else sb.double())
                row.update(_errors(c, ref))
                row["ok"] = row["max_rel"] <= TOL
                if ci == 0 and a_dt == "float8_e4m3fn" and b_dt is None:
                    for fast in (True, False):
                        try:
                            ref_out = _scaled_mm(a, b, sa, sb, out_dt, fast)
                            row[f"scaled_mm_fast{int(fast)}"] = _errors(ref_out, ref)
                        except Exception as e:  # noqa: BLE001 - e.g. row-wise with fp16 out
                            row[f"scaled_mm_fast{int(fast)}"] = f"{type(e).__name__}: {str(e)[:200]}"
            except Exception as e:  # noqa: BLE001 - record, keep going
                row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:400]}", trace=traceback.format_exc()[-800:])
            rows.append(row)
            print(json.dumps({k: row.get(k) for k in ("config", "shape", "rowwise", "a", "b", "out", "max_rel",
                                                       "ok", "error")}), flush=True)
    return rows


def job_transpose():
    import torch
    from _harness import WINDOWS, bench_ms
    rows = []
    for n in (4096, 8192):
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)     # row-major (K, N)
        ms = bench_ms(lambda: b.t().contiguous(), *WINDOWS["goal"])
        rows.append(dict(K=n, N=n, transpose_us=ms * 1e3, gbps=2 * n * n / (ms * 1e-3) / 1e9))
    return rows


def job_time(shape, rowwise, configs, rounds):
    import torch
    from tlx_workbench.kernels import gemm_fp8
    M, N, K = shape
    torch.manual_seed(7)
    a, b, sa, sb = _inputs(shape, rowwise)
    bt = gemm_fp8.k_major_b(b)
    c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    # descriptors and grid built once per config: the timed call is the kernel's dispatch alone, as for torch
    subjects = {f"cfg{ci}": gemm_fp8.launcher(a, bt, c, sa, sb, gemm_fp8.CONFIGS[ci]) for ci in configs}
    notes = {}
    for fast in (True, False):
        name = f"scaled_mm_fast{int(fast)}"
        try:
            _scaled_mm(a, b, sa, sb, torch.bfloat16, fast)
            subjects[name] = lambda fast=fast: _scaled_mm(a, b, sa, sb, torch.bfloat16, fast)
        except Exception as e:  # noqa: BLE001
            notes[name] = f"{type(e).__name__}: {str(e)[:200]}"
    for fn in subjects.values():        # compile / warm every subject before the first round
        fn()
    torch.cuda.synchronize()
    times = {n: [] for n in subjects}
    from _harness import WINDOWS, bench_ms, round_order
    for r in range(rounds):
        for n in round_order(subjects, r):
            times[n].append(bench_ms(subjects[n], *WINDOWS["goal"]))
    import statistics
    from tlx_workbench.kernels import spec
    flops = spec("gemm_fp8").flops(M, N, K)
    out = {n: dict(ms=statistics.median(t), rounds_ms=t, tflops=flops / (statistics.median(t) * 1e-3) / 1e12)
           for n, t in times.items()}
    return dict(shape=list(shape), rowwise=rowwise, subjects=out, notes=notes)


JOBS = {"static": job_static, "check": job_check, "transpose": job_transpose, "time": job_time}


# ---- the parent -----------------------------------------------------------------------------------------

def plan(parts, configs, rounds=ROUNDS):
    """[(part, label, kwargs)] in run order."""
    variants_full = [(rw, "float8_e4m3fn", None, out) for rw in (False, True) for out in ("bfloat16", "float16")]
    variants_full += [(True, "float8_e4m3fn", "float8_e5m2", "bfloat16"), (False, "float8_e5m2", "float8_e4m3fn",
                                                                           "bfloat16")]
    jobs = []
    if "static" in parts:
        jobs.append(("static", "static", dict(configs=configs)))
    if "check" in parts:
        for ci in configs:
            if ci == 0:
                jobs.append(("check", "check cfg0", dict(ci=0, shapes=CHECK_SHAPES, variants=variants_full)))
            else:
                jobs.append(("check", f"check cfg{ci}", dict(ci=ci, shapes=OTHER_CFG_SHAPES,
                                                             variants=[(False, "float8_e4m3fn", None, "bfloat16"),
                                                                       (True, "float8_e4m3fn", None, "bfloat16")])))
    if "transpose" in parts:
        jobs.append(("transpose", "transpose", {}))
    if "time" in parts:
        for shape in BENCH_SHAPES:
            for rw in (False, True):
                jobs.append(("time", f"time {shape} {'rowwise' if rw else 'per-tensor'}",
                             dict(shape=shape, rowwise=rw, configs=configs, rounds=rounds)))
    return jobs


def start_child(part, kwargs):
    """Start one job in a child process; returns its handle for :func:`finish_child`."""
    res_file = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"gemm_fp8_job_{os.getpid()}_{time.time_ns()}.json"
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--job", json.dumps([part, kwargs]),
           "--result", str(res_file)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, res_file, time.perf_counter()


def finish_child(handle, deadline):
    """Wait for a child until ``deadline`` seconds after its start (then kill it: a hung launch);
    returns (result or None, error or None, seconds)."""
    proc, res_file, t0 = handle
    try:
        stdout, stderr = proc.communicate(timeout=max(1.0, deadline - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        return None, f"hung: no result within {deadline} s (child killed); last output: {(stdout or '')[-1500:]}", \
            time.perf_counter() - t0
    secs = time.perf_counter() - t0
    if proc.returncode != 0 or not res_file.exists():
        return None, f"child exited {proc.returncode}: {(stderr or '')[-1500:]}", secs
    result = json.loads(res_file.read_text())
    res_file.unlink()
    return result, None, secs


def _mark_passing(results):
    """(config indices whose every check row passed, indices that failed a check or the static stage)."""
    bad, seen = set(), set()
    for job in results.get("static", []):
        for row in job.get("rows") or []:
            if row["status"] != "ok":
                bad.add(row["config"])
    for job in results.get("check", []):
        for row in job.get("rows") or []:
            seen.add(row["config"])
            if not row.get("ok"):
                bad.add(row["config"])
        if job.get("error"):
            bad.add(job["kwargs"]["ci"])
            seen.add(job["kwargs"]["ci"])
    return seen - bad, bad


def markdown(results) -> str:
    lines = [f"# gemm_fp8 on {results['meta'].get('gpu')} ({results['meta']['date']})", ""]
    for job in results.get("time", []):
        r = job.get("rows")
        if not r:
            lines.append(f"- {job['label']}: {job.get('error')}")
            continue
        subj = r["subjects"]
        base = {k: v["ms"] for k, v in subj.items() if k.startswith("scaled_mm")}
        ours = {k: v for k, v in subj.items() if k.startswith("cfg")}
        best = min(ours, key=lambda k: ours[k]["ms"]) if ours else None
        lines.append(f"## {r['shape']} {'row-wise' if r['rowwise'] else 'per-tensor'}")
        lines.append("| subject | ms (median of rounds) | TFLOP/s | vs scaled_mm fast | vs scaled_mm fp32-promote |")
        lines.append("|---|---|---|---|---|")
        for k, v in sorted(subj.items(), key=lambda kv: kv[1]["ms"]):
            f1 = f"{base['scaled_mm_fast1'] / v['ms']:.3f}x" if "scaled_mm_fast1" in base else "-"
            f0 = f"{base['scaled_mm_fast0'] / v['ms']:.3f}x" if "scaled_mm_fast0" in base else "-"
            lines.append(f"| {k}{' (best)' if k == best else ''} | {v['ms']:.4f} | {v['tflops']:.0f} | {f1} | {f0} |")
        for k, v in r.get("notes", {}).items():
            lines.append(f"- {k}: {v}")
        lines.append("")
    for job in results.get("transpose", []):
        for row in job.get("rows") or []:
            lines.append(f"- b.t().contiguous() at {row['K']}x{row['N']} fp8: {row['transpose_us']:.1f} us "
                         f"({row['gbps']:.0f} GB/s read+write)")
    for job in results.get("static", []):
        for row in job.get("rows") or []:
            m = row.get("metrics") or {}
            lines.append(f"- static {row['problem']} cfg{row['config']}: {row['status']}"
                         f"{' (' + str(row['reason']) + ')' if row.get('reason') else ''}, smem {m.get('smem_bytes')}, "
                         f"registers {m.get('registers')}, spills {m.get('spills')}, "
                         f"wgmma serialized {m.get('wgmma_serialized')}, advisories {len(m.get('advisories') or [])}")
        if job.get("error"):
            lines.append(f"- static: {job['error'][:300]}")
    ok, bad = _mark_passing(results)
    lines.append(f"- check: configs passing {sorted(ok)}, failing {sorted(bad)} (tolerance max-rel {TOL})")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    ap.add_argument("--parts", default="static,check,transpose,time")
    ap.add_argument("--configs", default=None, help="comma-separated CONFIGS indices (default: all)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved timing rounds (default {ROUNDS})")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--job", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.job:                                            # child
        part, kwargs = json.loads(args.job)
        if "shape" in kwargs:
            kwargs["shape"] = tuple(kwargs["shape"])
        if "shapes" in kwargs:
            kwargs["shapes"] = [tuple(s) for s in kwargs["shapes"]]
        rows = JOBS[part](**kwargs)
        pathlib.Path(args.result).write_text(json.dumps(rows))
        return 0

    from tlx_workbench.kernels import gemm_fp8
    configs = list(range(len(gemm_fp8.CONFIGS))) if args.configs is None else \
        [int(x) for x in args.configs.split(",")]
    parts = args.parts.split(",")
    jobs = plan(parts, configs, args.rounds)
    if args.dry:
        for ci in configs:
            print(f"cfg{ci}", gemm_fp8.CONFIGS[ci], "smem", gemm_fp8.smem_bytes(gemm_fp8.CONFIGS[ci]))
        for part, label, kw in jobs:
            print(part, label, DEADLINE[part], "s")
        return 0

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gemm_fp8_h200.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    import torch
    results["meta"] = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), host=platform.node(),
                           gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                           torch=torch.__version__, command=" ".join(sys.argv), configs=list(gemm_fp8.CONFIGS),
                           tolerance=TOL, rounds=args.rounds)
    for part in parts:
        results[part] = []          # this run's jobs replace the part's earlier ones
    def record(part, label, kw, handle):
        rows, err, secs = finish_child(handle, DEADLINE[part])
        results[part].append(dict(label=label, kwargs=kw, rows=rows, error=err, seconds=round(secs, 1)))
        print(f"== {label}: {'ok' if err is None else err[:600]} ({secs:.0f} s)", flush=True)
        path.write_text(json.dumps(results, indent=1, default=str))
        (out / "gemm_fp8_h200.md").write_text(markdown(results))

    # the static stage and the checks are mostly compiles (CPU): up to CHECKS_AT_ONCE children run together
    # (results do not depend on it); the transpose and the timing rounds run alone, after all of them
    running = []
    for part, label, kw in jobs:
        if part in ("static", "check"):
            if len(running) >= CHECKS_AT_ONCE:
                record(*running.pop(0))
            running.append((part, label, kw, start_child(part, kw)))
            continue
        while running:
            record(*running.pop(0))
        if part == "time":
            ok, bad = _mark_passing(results)
            kw = dict(kw, configs=[ci for ci in kw["configs"] if ci not in bad])
        record(part, label, kw, start_child(part, kw))
    while running:
        record(*running.pop(0))
    print((out / "gemm_fp8_h200.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
