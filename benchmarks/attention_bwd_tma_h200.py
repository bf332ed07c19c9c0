"""Attention backward on the H200 with dQ by TMA reduce-add (``DQ_TMA``, issue 22) vs the atomics' default and
torch SDPA's backward, lean (under 3 minutes).

1. check: every ``attention_bwd.DQ_TMA_CONFIGS`` config at its head dims (D = 64, 128), causal and not, fp16,
   against float64 autograd (on the GPU) at three shapes, two ragged (N % 64 != 0; N % 4 != 0); dK, dV and
   the fp32 dQ accumulator NaN-poisoned first (the launcher must zero dQ; dK, dV must be written whole).
   One child process per (config, D, causal) with a deadline (a protocol bug hangs the GPU, not this
   script), all at once (compiles dominate). The first check shape has the timed shapes' integer
   specialisation (Z > 1, H and N multiples of 16), so the timing children find those kernels compiled.
2. time: D=128, N=4096 (4 x 32 heads) and 8192 (2 x 32), causal and not, fp16: --rounds interleaved
   rounds over SDPA's backward (its default choice), our default config (``default_for(128, causal)``; the atomics when this was written)
   and the DQ_TMA configs that passed the check, each a do_bench median; the figure kept is the median
   over rounds. Ours times the whole backward (delta kernel, zeroing the fp32 dQ, main kernel, dQ's cast).
   The forward's o and lse come from SDPA's flash forward (natural-log lse, what ours takes).

    OUT=/tmp/bwdtma python benchmarks/attention_bwd_tma_h200.py             # ~2-3 min on the H200
    python benchmarks/attention_bwd_tma_h200.py --dry                       # CPU: the jobs, then every child
                                                                            # up to its first CUDA call

Results: ``$OUT/attention_bwd_tma_h200.json`` (rewritten after every job) and a table printed at the end.
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

CHECK_SHAPES = [(2, 16, 1024), (2, 3, 1000), (1, 2, 2115)]
TOL = 5e-3                       # fp16, relative Frobenius error vs float64 (attention_bwd_h200.py's)
TIME_SHAPES = [(4, 32, 4096, 128), (2, 32, 8192, 128)]
CHECK_DEADLINE_S = 150
TIME_DEADLINE_S = 120


def check_jobs():
    from tlx_workbench.kernels import attention_bwd as B
    for ci, cfg in enumerate(B.DQ_TMA_CONFIGS):
        for D in (128, 64):
            if not B.suits(cfg, D):
                continue
            for causal in (False, True):
                yield dict(kind="check", cfg=cfg, cfg_index=ci, D=D, causal=causal,
                           shapes=[list(s) + [D] for s in CHECK_SHAPES])


def time_jobs(rounds, passed=None):
    """One job per cell; ``passed``: {(cfg json, causal, D)} that passed the check (None: every config)."""
    from tlx_workbench.kernels import attention_bwd as B
    for shape in TIME_SHAPES:
        for causal in (False, True):
            D = shape[-1]
            cfgs = [c for c in B.DQ_TMA_CONFIGS if B.suits(c, D, causal)
                    and (passed is None or (json.dumps(c, sort_keys=True), causal, D) in passed)]
            yield dict(kind="time", shape=list(shape), causal=causal, default=B.default_for(D, causal), cfgs=cfgs, rounds=rounds)


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


def _inputs(shape, seed):
    import torch
    torch.manual_seed(seed)
    return tuple(torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(4))


def child_check(job):
    import torch
    from tlx_workbench.kernels import attention_bwd as B
    cfg, causal = job["cfg"], job["causal"]
    for si, shape in enumerate(job["shapes"]):
        row = dict(kind="check", cfg=cfg, cfg_index=job["cfg_index"], shape=shape, causal=causal)
        try:
            q, k, v, do = _inputs(shape, 1000 + si)
            scale = 1.0 / math.sqrt(shape[-1])
            o_r, lse_r, dq_r, dk_r, dv_r = B.reference64(q, k, v, do, causal, scale, device="cuda")
            nan = float("nan")
            dk, dv = torch.full_like(k, nan), torch.full_like(v, nan)
            dq32 = torch.full(q.shape, nan, dtype=torch.float32, device="cuda")
            dq, dk, dv = B.launch(q, k, v, o_r.half(), do, lse_r.float(), causal, scale, cfg, dq32=dq32, dk=dk, dv=dv)
            torch.cuda.synchronize()
            row.update(err_dq=_rel(dq, dq_r), err_dk=_rel(dk, dk_r), err_dv=_rel(dv, dv_r))
            row["ok"] = max(row["err_dq"], row["err_dk"], row["err_dv"]) < TOL
            del o_r, dq_r, dk_r, dv_r
            torch.cuda.empty_cache()
        except Exception as e:   # a failing shape must not cost the others
            row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:500]}", trace=traceback.format_exc()[-1200:])
        _emit(row)


def _forward(q, k, v, causal, scale):
    """(o, lse) of SDPA's flash forward (our forward's, if that op is not there); lse (Z, H, N) fp32, natural log."""
    import torch
    try:
        out = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=scale)
        return out[0], out[1].float().contiguous()
    except Exception:
        from tlx_workbench.kernels import attention as A
        return A.attention(q, k, v, causal, scale, config=A.DEFAULTS[(q.shape[-1] <= 64, bool(causal))],
                           return_lse=True)


def child_time(job):
    import torch
    import triton
    from tlx_workbench.kernels import attention_bwd as B
    from tlx_workbench.kernels._common import torch_alloc
    shape, causal = job["shape"], job["causal"]
    Z, H, N, D = shape
    scale = 1.0 / math.sqrt(D)
    cell = dict(kind="time", shape=shape, causal=causal, flops=B.flops(Z, H, N, D, causal))
    q, k, v, do = _inputs(shape, 7)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o_s = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
    subjects = {"sdpa": lambda: torch.autograd.grad(o_s, (qg, kg, vg), do, retain_graph=True)}
    o, lse = _forward(q, k, v, causal, scale)
    dq32 = torch.empty(q.shape, dtype=torch.float32, device="cuda")
    cfgs = {"default": job["default"]} | {f"tma{i}": c for i, c in enumerate(job["cfgs"])}
    for name, cfg in cfgs.items():
        subjects[name] = (lambda cfg: lambda: B.launch(q, k, v, o, do, lse, causal, scale, cfg, dq32=dq32))(cfg)
    ref = subjects["sdpa"]()
    errs, made, times = {}, {}, {n: [] for n in subjects}
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
            times[name].append(float(triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")))
    med = {n: statistics.median(t) for n, t in times.items() if t}
    for name, ts in times.items():
        row = dict(cell, kernel=name, cfg=cfgs.get(name), err_vs_sdpa=errs.get(name), rounds_ms=ts,
                   error=made.get(name))
        if ts:
            row.update(ms=med[name], tflops=cell["flops"] / med[name] * 1e-9,
                       vs_sdpa=med["sdpa"] / med[name] if "sdpa" in med else None,
                       vs_default=med["default"] / med[name] if "default" in med else None)
        _emit(row)


# ---- the parent -------------------------------------------------------------------------------------

def run_child(job, deadline):
    """Run ``job`` in a child process; returns (rows it emitted, error or None); on a deadline the child is
    killed and what it emitted is kept."""
    cmd = [sys.executable, __file__, "--child", json.dumps(job)]
    err = None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, cwd=str(ROOT))
        out = p.stdout
        if p.returncode != 0:
            err = f"child exited {p.returncode}: {p.stderr[-1200:]}"
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"deadline: killed after {deadline} s (a hang?)"
    return [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")], err


def _label(job):
    if job["kind"] == "check":
        return f"check tma{job['cfg_index']} D={job['D']} causal={job['causal']}"
    return f"time {tuple(job['shape'])} causal={job['causal']}"


def _device_info():
    import torch
    import triton
    info = dict(torch=torch.__version__, triton=triton.__version__, cuda=torch.version.cuda)
    try:
        info["gpu"] = torch.cuda.get_device_properties(0).name
    except Exception as e:       # no GPU (--dry): the children say so, row by row
        info["gpu"] = f"none ({type(e).__name__})"
    return info


def _f(x):
    return f"{x:.3g}" if isinstance(x, float) else ("" if x is None else str(x))


def table(result):
    out = [f"# Attention backward, dQ by TMA reduce-add, on {result['device'].get('gpu')} ({result['date']})", "",
           "## check vs float64 (fp16; ||x - ref|| / ||ref||)", "",
           "| cfg | D | causal | shape | dq | dk | dv | ok |", "|---|---|---|---|---|---|---|---|"]
    for r in result["check"]:
        out.append(f"| tma{r['cfg_index']} {r['cfg']} | {r['shape'][-1]} | {r['causal']} | {tuple(r['shape'])} | "
                   f"{_f(r.get('err_dq', r.get('error')))} | {_f(r.get('err_dk'))} | {_f(r.get('err_dv'))} | "
                   f"{r['ok']} |")
    out += ["", "## time (fp16, median of interleaved rounds of do_bench medians)", "",
            "| shape | causal | kernel | ms | TFLOP/s | vs SDPA | vs default | err vs SDPA | rounds (ms) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in result["time"]:
        name = r["kernel"] + (f" {r['cfg']}" if r.get("cfg") else "")
        out.append(f"| {tuple(r['shape'])} | {r['causal']} | {name} | {_f(r.get('ms', r.get('error')))} | "
                   f"{_f(r.get('tflops'))} | {_f(r.get('vs_sdpa'))} | {_f(r.get('vs_default'))} | "
                   f"{_f(r.get('err_vs_sdpa'))} | {' / '.join(f'{t:.3f}' for t in r['rounds_ms'])} |")
    if result["errors"]:
        out += ["", "## errors", ""] + [f"- {e['job']}: {e['error'][-400:]}" for e in result["errors"]]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "attention_bwd_tma_out"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=12, help="check children at once")
    ap.add_argument("--dry", action="store_true", help="list the jobs, then run them (on a CPU: up to CUDA)")
    ap.add_argument("--child")
    a = ap.parse_args(argv)
    if a.child:
        job = json.loads(a.child)
        (child_check if job["kind"] == "check" else child_time)(job)
        return 0
    if a.dry:
        for j in list(check_jobs()) + list(time_jobs(a.rounds)):
            print(_label(j), j.get("cfg", j.get("cfgs")), j.get("shapes", ""))
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command=" ".join([os.path.basename(sys.executable)] + sys.argv), device=_device_info(),
                  check=[], time=[], errors=[])

    def save():
        (out / "attention_bwd_tma_h200.json").write_text(json.dumps(result, indent=1))

    t0 = time.time()
    jobs = list(check_jobs())
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(run_child, j, CHECK_DEADLINE_S): j for j in jobs}
        for fut in concurrent.futures.as_completed(futures):
            j = futures[fut]
            rows, err = fut.result()
            result["check"] += rows
            if err:
                result["errors"].append(dict(job=_label(j), error=err))
            print(f"[{time.time() - t0:5.0f} s] {_label(j)}: {sum(r['ok'] for r in rows)}/{len(j['shapes'])} ok"
                  + (f"; {err[-300:]}" if err else ""), flush=True)
            save()
    passed = set()
    for j in jobs:
        rows = [r for r in result["check"] if r["cfg"] == j["cfg"] and r["causal"] == j["causal"]
                and r["shape"][-1] == j["D"]]
        if len(rows) == len(j["shapes"]) and all(r["ok"] for r in rows):
            passed.add((json.dumps(j["cfg"], sort_keys=True), j["causal"], j["D"]))
    for j in time_jobs(a.rounds, passed):
        rows, err = run_child(j, TIME_DEADLINE_S)
        result["time"] += rows
        if err:
            result["errors"].append(dict(job=_label(j), error=err))
        line = ", ".join(f"{r['kernel']} {r.get('vs_sdpa') or 0:.3f}x" for r in rows if r["kernel"] != "sdpa")
        print(f"[{time.time() - t0:5.0f} s] {_label(j)}: vs SDPA {line}" + (f"; {err[-300:]}" if err else ""),
              flush=True)
        save()
    save()
    text = table(result)
    (out / "attention_bwd_tma_h200.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
