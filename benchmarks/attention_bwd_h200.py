"""Attention backward on the H200: our TLX kernel (``tlx_workbench.kernels.attention_bwd``) vs torch SDPA's
backward, in one self-contained run.

1. check: dQ, dK, dV against float64 autograd (computed on the GPU) at N = 1000 .. 8192, ragged N included
   (N % 64 != 0, N % 4 != 0), D = 64 and 128, causal and not, fp16 and bf16; dK, dV NaN-poisoned first. The
   default config everywhere, every other candidate at two shapes. Each (config, D, causal, dtype) is
   one child process with a deadline (a protocol bug hangs the GPU, not this script); up to --jobs
   children at once (compiles dominate). With ``--only time`` every candidate is timed (no check ran).
   The default configs also run forward (``return_lse=True``) then backward (``attention_with_grad``):
   the forward's log-sum-exp is checked too. SDPA's own error against float64 is listed beside ours.
2. time: D=128, N=4096 (4 x 32 heads) and 8192 (2 x 32), causal and not, fp16 and bf16: --rounds
   interleaved rounds over our candidate configs (those that passed the check) and SDPA's backward
   (its default choice, then flash, cuDNN and memory-efficient forced), each a do_bench median; the
   figure kept is the median over rounds. The backend SDPA's dispatcher picks is named twice: by
   ``torch._fused_sdp_choice`` and by the CUDA kernels a profiled backward ran. One child per cell.
   Ours times the whole backward: the delta kernel, zeroing the fp32 dQ, the main kernel, dQ's cast
   (SDPA's backward includes its own pre- and post-processing).

    OUT=/tmp/bwd python benchmarks/attention_bwd_h200.py --only check       # ~3-5 min (compiles, 8 at once)
    OUT=/tmp/bwd python benchmarks/attention_bwd_h200.py --only time        # ~4-6 min; no --only: both
    OUT=/tmp/bwd python benchmarks/attention_bwd_h200.py --only time --dtype bfloat16 --rounds 3
    python benchmarks/attention_bwd_h200.py --dry                          # CPU: list the jobs

Results: ``$OUT/attention_bwd_h200.json`` (rewritten after every job, so a run cut short keeps what it
measured) and ``$OUT/attention_bwd_h200.md`` (the tables).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import pathlib
import statistics
import subprocess
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECK_ALL = [(1, 2, 1024), (1, 2, 1000), (2, 3, 1000), (1, 2, 2115), (1, 2, 4096), (1, 2, 4100),
             (1, 1, 8192), (1, 1, 8000)]
CHECK_FEW = [(1, 2, 1000), (2, 3, 1024)]
TOL = {"float16": 5e-3, "bfloat16": 2e-2}
TIME_SHAPES = [(4, 32, 4096, 128), (2, 32, 8192, 128)]
DTYPES = ("float16", "bfloat16")
CHECK_DEADLINE_S = 480
TIME_DEADLINE_S = 300


# ---- the jobs ------------------------------------------------------------------------------------

def check_jobs(dtypes=DTYPES):
    from tlx_workbench.kernels import attention_bwd as B
    for D in (128, 64):
        for causal in (False, True):
            for dname in dtypes:
                for ci, cfg in enumerate(B.configs_for(D, causal)):
                    default = cfg == B.default_for(D, causal)
                    if not default and D == 64 and dname != "float16":
                        continue
                    shapes = CHECK_ALL if default else CHECK_FEW
                    yield dict(kind="check", cfg=cfg, cfg_index=ci, default=default, D=D, causal=causal,
                               dtype=dname, shapes=[list(s) + [D] for s in shapes])


def time_jobs(dtypes=DTYPES, rounds=3, passed=None):
    """One job per cell; ``passed``: {(cfg json, dtype, causal)} that passed the check (None: all)."""
    from tlx_workbench.kernels import attention_bwd as B
    for shape in TIME_SHAPES:
        for causal in (False, True):
            for dname in dtypes:
                cfgs = [c for c in B.configs_for(shape[-1], causal)
                        if passed is None or (json.dumps(c, sort_keys=True), dname, causal, shape[-1]) in passed]
                yield dict(kind="time", shape=list(shape), causal=causal, dtype=dname, cfgs=cfgs, rounds=rounds)


# ---- what a child runs ---------------------------------------------------------------------------

def _emit(row):
    print("RESULT " + json.dumps(row), flush=True)


def _rel(out, ref):
    import torch
    o = out.double()
    r = ref.double().to(o.device)
    if not torch.isfinite(o).all():
        return float("inf")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def _inputs(shape, dtype, seed):
    import torch
    torch.manual_seed(seed)
    return tuple(torch.randn(shape, dtype=dtype, device="cuda") for _ in range(4))


def _sdpa_grads(q, k, v, do, causal, scale, backend=None):
    """SDPA forward (under ``backend`` when given) and a closure running its backward."""
    import torch
    from torch.nn.attention import sdpa_kernel
    F = torch.nn.functional
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    if backend is None:
        o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
    else:
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
    return lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)


def child_check(job):
    import torch
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels import attention_bwd as B
    dt = getattr(torch, job["dtype"])
    cfg, causal = job["cfg"], job["causal"]
    for si, shape in enumerate(job["shapes"]):
        row = dict(kind="check", cfg=cfg, cfg_index=job["cfg_index"], default=job["default"], shape=shape,
                   causal=causal, dtype=job["dtype"])
        try:
            q, k, v, do = _inputs(shape, dt, 1000 + si)
            scale = 1.0 / math.sqrt(shape[-1])
            o_r, lse_r, dq_r, dk_r, dv_r = B.reference64(q, k, v, do, causal, scale, device="cuda")
            o, lse = o_r.to(dt), lse_r.float()
            dk = torch.full_like(k, float("nan"))
            dv = torch.full_like(v, float("nan"))
            dq, dk, dv = B.launch(q, k, v, o, do, lse, causal, scale, cfg, dk=dk, dv=dv)
            torch.cuda.synchronize()
            row.update(err_dq=_rel(dq, dq_r), err_dk=_rel(dk, dk_r), err_dv=_rel(dv, dv_r))
            sq, sk, sv = _sdpa_grads(q, k, v, do, causal, scale)()
            row["sdpa_err"] = max(_rel(sq, dq_r), _rel(sk, dk_r), _rel(sv, dv_r))
            if job["default"]:
                # the library's forward (its default config, lse stored) feeding the backward
                fwd = A.DEFAULTS[(shape[-1] <= 64, bool(causal))]
                o2, (dq2, dk2, dv2) = B.attention_with_grad(q, k, v, do, causal, scale, config=cfg, fwd_config=fwd)
                o2b, lse2 = A.attention(q, k, v, causal, scale, config=fwd, return_lse=True)
                row.update(chain_err_o=_rel(o2, o_r), chain_err=max(_rel(dq2, dq_r), _rel(dk2, dk_r), _rel(dv2, dv_r)),
                           lse_max_abs_err=float((lse2.double() - lse_r).abs().max()))
            errs = [row["err_dq"], row["err_dk"], row["err_dv"]] + ([row["chain_err"]] if job["default"] else [])
            row["ok"] = bool(max(errs) < TOL[job["dtype"]]) and (
                not job["default"] or row["lse_max_abs_err"] < 1e-3)
            del o_r, dq_r, dk_r, dv_r
            torch.cuda.empty_cache()
        except Exception as e:   # a failing config must not cost the other shapes
            row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:500]}", trace=traceback.format_exc()[-1500:])
        _emit(row)


def _profiled_kernels(fn):
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
    return sorted(set(n[:120] for n in names))


def child_time(job):
    import torch
    import triton
    from torch.nn.attention import SDPBackend
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels import attention_bwd as B
    from tlx_workbench.kernels._common import torch_alloc
    dt = getattr(torch, job["dtype"])
    shape, causal = job["shape"], job["causal"]
    Z, H, N, D = shape
    scale = 1.0 / math.sqrt(D)
    q, k, v, do = _inputs(shape, dt, 7)
    cell = dict(kind="time", shape=shape, causal=causal, dtype=job["dtype"], flops=B.flops(Z, H, N, D, causal))
    try:
        # asked with inputs that need grad, as the timed calls have (a backend may lack a backward)
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        choice = torch._fused_sdp_choice(qq, kk, vv, is_causal=causal, scale=scale)
        cell["sdpa_choice"] = SDPBackend(choice).name
    except Exception as e:
        cell["sdpa_choice"] = f"unknown ({type(e).__name__}: {e})"
    cell["flash_sdp_enabled"] = torch.backends.cuda.flash_sdp_enabled()
    cell["cudnn_sdp_enabled"] = torch.backends.cuda.cudnn_sdp_enabled()
    subjects, made = {}, {}
    for name, backend in (("sdpa", None), ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                          ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        try:
            subjects[name] = _sdpa_grads(q, k, v, do, causal, scale, backend)
        except Exception as e:
            made[name] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        cell["sdpa_kernels"] = _profiled_kernels(subjects["sdpa"])
    except Exception as e:
        cell["sdpa_kernels"] = [f"profile failed: {type(e).__name__}: {e}"]
    fwd = A.DEFAULTS[(D <= 64, bool(causal))]
    o, lse = A.attention(q, k, v, causal, scale, config=fwd, return_lse=True)
    dq32 = torch.empty(q.shape, dtype=torch.float32, device="cuda")
    for i, cfg in enumerate(job["cfgs"]):
        subjects[f"ours{i}"] = (lambda cfg: lambda: B.launch(q, k, v, o, do, lse, causal, scale, cfg, dq32=dq32))(cfg)
    ref = subjects["sdpa"]()
    errs, times = {}, {n: [] for n in subjects}
    for r in range(job["rounds"]):
        for name, fn in subjects.items():
            if r == 0:
                try:
                    out = fn()
                    torch.cuda.synchronize()
                    errs[name] = max(_rel(a, b) for a, b in zip(out, ref))
                except Exception as e:
                    errs[name] = float("inf")
                    made[name] = f"{type(e).__name__}: {str(e)[:300]}"
                triton.set_allocator(torch_alloc)
            if errs[name] == float("inf"):
                continue
            times[name].append(float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")))
    med = {n: statistics.median(t) for n, t in times.items() if t}
    base = med.get("sdpa")
    best_sdpa = min((m for n, m in med.items() if n.startswith("sdpa")), default=None)
    rows = [dict(cell, kernel=name, rounds_ms=[], error=msg) for name, msg in made.items() if name not in times]
    for name, ts in times.items():
        row = dict(cell, kernel=name, err_vs_sdpa=errs.get(name), rounds_ms=ts)
        if name.startswith("ours"):
            row["cfg"] = job["cfgs"][int(name[4:])]
        if name in made:
            row["error"] = made[name]
        if ts:
            row.update(ms=med[name], tflops=cell["flops"] / med[name] * 1e-9,
                       vs_sdpa=(base / med[name]) if base else None,
                       vs_best_sdpa=(best_sdpa / med[name]) if best_sdpa else None)
        rows.append(row)
    for row in rows:
        _emit(row)


# ---- the parent: children with deadlines, the JSON, the tables -----------------------------------

def run_child(job, deadline):
    """Run ``job`` in a child process; returns (rows it emitted, error or None). On a deadline the
    child is killed and what it emitted so far is kept."""
    cmd = [sys.executable, __file__, "--child", json.dumps(job)]
    err = None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, cwd=str(ROOT))
        out, tail = p.stdout, p.stderr
        if p.returncode != 0:
            err = f"child exited {p.returncode}: {tail[-1500:]}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"deadline: killed after {deadline} s (a hang?)"
    rows = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    return rows, err


def _job_label(job):
    if job["kind"] == "check":
        return f"check cfg{job['cfg_index']} D={job['D']} causal={job['causal']} {job['dtype']}"
    return f"time {tuple(job['shape'])} causal={job['causal']} {job['dtype']}"


def _device_info():
    import torch
    import triton
    info = dict(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda)
    try:
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, sms=p.multi_processor_count, cudnn=torch.backends.cudnn.version())
    except Exception as e:       # no GPU: the children will say so, row by row
        info["gpu"] = f"none ({type(e).__name__})"
    return info


def md(result):
    out = [f"# Attention backward on {result['device'].get('gpu')} ({result['date']})\n"]
    checks = result["check"]
    if checks:
        out.append("## check vs float64 (max over dq, dk, dv of ||x - ref|| / ||ref||)\n")
        out.append("| cfg | D | causal | dtype | shape | ours | chain | lse | SDPA | ok |\n|---|---|---|---|---|---|---|---|---|---|")
        for r in checks:
            ours = (max(r[k] for k in ("err_dq", "err_dk", "err_dv")) if "err_dq" in r
                    else r.get("error", "?"))
            out.append(f"| {r['cfg_index']}{'*' if r['default'] else ''} | {r['shape'][-1]} | {r['causal']} | {r['dtype']} | "
                       f"{tuple(r['shape'])} | {_f(ours)} | {_f(r.get('chain_err', ''))} | {_f(r.get('lse_max_abs_err', ''))} | "
                       f"{_f(r.get('sdpa_err', ''))} | {r['ok']} |")
    times = result["time"]
    if times:
        out.append("\n## time (median of interleaved rounds; vs_sdpa = SDPA default / ours)\n")
        out.append("| shape | causal | dtype | kernel | ms | TFLOP/s | vs_sdpa | vs_best_sdpa | rounds (ms) | SDPA picks |\n"
                   "|---|---|---|---|---|---|---|---|---|---|")
        for r in times:
            name = r["kernel"] + (f" {r['cfg']}" if "cfg" in r else "")
            out.append(f"| {tuple(r['shape'])} | {r['causal']} | {r['dtype']} | {name} | {_f(r.get('ms', 'failed'))} | "
                       f"{_f(r.get('tflops', ''))} | {_f(r.get('vs_sdpa', ''))} | {_f(r.get('vs_best_sdpa', ''))} | "
                       f"{' / '.join(f'{t:.3f}' for t in r['rounds_ms'])} | {r.get('sdpa_choice', '')} |")
    if result["errors"]:
        out.append("\n## errors\n")
        out += [f"- {e['job']}: {e['error'][:400]}" for e in result["errors"]]
    return "\n".join(out) + "\n"


def _f(x):
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "attention_bwd_out"))
    ap.add_argument("--only", choices=("check", "time"))
    ap.add_argument("--dtype", choices=DTYPES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=8, help="check children at once (compiles dominate)")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--child")
    a = ap.parse_args(argv)
    if a.child:
        job = json.loads(a.child)
        (child_check if job["kind"] == "check" else child_time)(job)
        return 0
    dtypes = (a.dtype,) if a.dtype else DTYPES
    if a.dry:
        for j in list(check_jobs(dtypes)) + list(time_jobs(dtypes, a.rounds)):
            print(_job_label(j), j.get("cfg", j.get("cfgs")), j.get("shapes", ""))
        return 0
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command=" ".join([os.path.basename(sys.executable)] + sys.argv), device=_device_info(),
                  check=[], time=[], errors=[])

    def save():
        (out / "attention_bwd_h200.json").write_text(json.dumps(result, indent=1))
        (out / "attention_bwd_h200.md").write_text(md(result))

    t0 = time.time()
    passed = None
    if a.only in (None, "check"):
        jobs = list(check_jobs(dtypes))
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            futures = {pool.submit(run_child, j, CHECK_DEADLINE_S): j for j in jobs}
            for fut in concurrent.futures.as_completed(futures):
                j = futures[fut]
                rows, err = fut.result()
                result["check"] += rows
                if err:
                    result["errors"].append(dict(job=_job_label(j), error=err))
                bad = [r for r in rows if not r["ok"]]
                print(f"[{time.time() - t0:5.0f} s] {_job_label(j)}: {len(rows) - len(bad)}/{len(j['shapes'])} ok"
                      + (f"; {err}" if err else ""), flush=True)
                save()
        passed = set()
        for j in jobs:
            rows = [r for r in result["check"] if r["cfg"] == j["cfg"] and r["dtype"] == j["dtype"]
                    and r["causal"] == j["causal"] and r["shape"][-1] == j["D"]]
            if len(rows) == len(j["shapes"]) and all(r["ok"] for r in rows):
                passed.add((json.dumps(j["cfg"], sort_keys=True), j["dtype"], j["causal"], j["D"]))
    if a.only in (None, "time"):
        for j in time_jobs(dtypes, a.rounds, passed):
            rows, err = run_child(j, TIME_DEADLINE_S)
            result["time"] += rows
            if err:
                result["errors"].append(dict(job=_job_label(j), error=err))
            line = ", ".join(f"{r['kernel']} {r.get('vs_sdpa') or 0:.3f}x" for r in rows if r["kernel"].startswith("ours"))
            pick = rows[0].get("sdpa_choice") if rows else "?"
            print(f"[{time.time() - t0:5.0f} s] {_job_label(j)}: SDPA picks {pick}; {line}" + (f"; {err}" if err else ""),
                  flush=True)
            save()
    save()
    print(md(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
