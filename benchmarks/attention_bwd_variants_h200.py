"""Attention backward at D=128 on the H200: the default (DQ_SPLIT + DQ_TMA=1) against its register and schedule
variants (``attention_bwd.VARIANT_CONFIGS``) and torch SDPA's backward, lean (under 4 minutes).

The variants: ``lean`` (DP_DELTA + P_ROUND: dP^T's accumulator starts at -delta, dS^T from the rounded P^T; the
hot loop about spill-free at sm_90), ``handoff`` (DQ_HANDOFF: dS^T handed between the consumer groups by
bar.arrive / bar.sync pairs, each group's own dQ share first), ``lean_handoff`` (both), ``lean_pingpong`` (both and
DQ_STAGGER: group 1 starts once group 0's first P^T is done and stays behind, its GEMMs under group 0's exps).

1. check: the default and every variant, causal and not, against float64 autograd (on the GPU) at (2,16,1024),
   (2,3,1000) and (1,2,2115) in fp16 and (2,3,1000) in bf16 (two ragged: N % 64 != 0, N % 4 != 0); dK, dV and
   the fp32 dQ accumulator NaN-poisoned first (the launcher must zero dQ; dK, dV must be written whole). One
   child process per (config, causal) with a deadline (a protocol bug hangs the GPU, not this script), all at
   once (compiles dominate). The first check shape has the timed shapes' integer specialisation (Z > 1, H and
   N multiples of 16), so the timing children find those kernels compiled.
2. time: D=128, N=4096 (4 x 32 heads) and 8192 (2 x 32), causal and not, fp16: --rounds interleaved rounds over
   SDPA's backward (its default choice), the default (``default_for(128, causal)``) and the variants that passed the check,
   each a do_bench median; the figure kept is the median over rounds. Ours times the whole backward (delta
   kernel, zeroing the fp32 dQ, main kernel, dQ's cast). The forward's o and lse come from SDPA's flash forward.

    OUT=/tmp/bwdvar python benchmarks/attention_bwd_variants_h200.py          # ~3 min on the H200
    python benchmarks/attention_bwd_variants_h200.py --only time --runs 3 --configs default --tuned
                                          # the goal's measurement: three separate runs of the timing (each cell
                                          # a fresh child: its own inputs, compile, do_bench), SDPA, the default
                                          # and attention_backward() as a user calls it (it tunes its space on
                                          # the cell's inputs; the pick is named); the figure is the median over
                                          # the runs of each run's median over rounds. ~2 min
    python benchmarks/attention_bwd_variants_h200.py --configs default,lean_pingpong --runs 3
                                          # check those two only (SPLIT_TAIL also at two shapes with a split last
                                          # wave), then three runs of their timing
    python benchmarks/attention_bwd_variants_h200.py --dry                    # CPU: the jobs, then every child
                                                                              # up to its first CUDA call
    python benchmarks/attention_bwd_variants_h200.py --static                 # CPU: sm_90 compile of each config
                                                                              # (registers, spills, SMEM, the
                                                                              # step loops' STL/LDL), ~3 min

Results: ``$OUT/attention_bwd_variants_h200.{json,md}`` (the json rewritten after every job);
``--static``: ``$OUT/attention_bwd_variants_static.{json,md}``.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECK_SHAPES = [((2, 16, 1024), "float16"), ((2, 3, 1000), "float16"), ((1, 2, 2115), "float16"),
                ((2, 3, 1000), "bfloat16")]
# SPLIT_TAIL configs also at shapes whose last heads are split on 132 SMs: 136 K/V blocks (the last head's 8, 16
# parts of one query block each) and 144 (the last two heads' 16, 8 parts of two), both ragged
TAIL_CHECK_SHAPES = [((1, 17, 1000), "float16"), ((2, 9, 1000), "bfloat16")]
TOL = {"float16": 5e-3, "bfloat16": 2e-2}     # relative Frobenius error vs float64
D = 128
TIME_SHAPES = [(4, 32, 4096, D), (2, 32, 8192, D)]
CHECK_DEADLINE_S = 150
TIME_DEADLINE_S = 240              # a tuned cell times its whole space first


def configs(causal=False):
    """{name: config} for one masking: the D=128 default (``default_for(128, causal)``) first, then the variants
    (but the default's own: non-causal split_tail, causal handoff; causal, no SPLIT_TAIL config: a causal launch
    drops the switch), then the autotune space's other configs."""
    from tlx_workbench.kernels import attention_bwd as B
    first = B.default_for(D, causal)
    named = {"default": first} | {n: c for n, c in B.VARIANT_CONFIGS.items()
                                  if c != first and not (causal and c.get("SPLIT_TAIL"))}
    # and the rest of attention_backward()'s autotune space at D=128 (its pick is checked before it is timed)
    rest = {f"CONFIGS[{i}]": c for i, c in enumerate(B.CONFIGS)
            if c not in named.values() and B.suits(c, D, causal)}
    return named | rest


def all_names():
    """Every config name of either masking, in order."""
    return list(dict.fromkeys([*configs(False), *configs(True)]))


def check_jobs(names=None):
    """One job per (config, causal); ``names``: only those configs (None: every config)."""
    from tlx_workbench.kernels import attention_bwd as B
    for causal in (False, True):
        for name, cfg in configs(causal).items():
            if names is not None and name not in names:
                continue
            if B.suits(cfg, D, causal):
                shapes = CHECK_SHAPES + (TAIL_CHECK_SHAPES if cfg.get("SPLIT_TAIL") else [])
                yield dict(kind="check", name=name, cfg=cfg, causal=causal,
                           shapes=[[*s, D, dt] for s, dt in shapes])


def time_jobs(rounds, passed=None, names=None, tuned=False, run=0, causals=(False, True)):
    """One job per cell; ``passed``: {(name, causal)} that passed the check (None: every config); ``names``: the
    configs to time (None: all); ``tuned``: time attention_backward()'s own pick too; ``run``: which run;
    ``causals``: the cells' causal flags."""
    from tlx_workbench.kernels import attention_bwd as B
    for shape in TIME_SHAPES:
        for causal in causals:
            # by default the default and the variants; the rest of the space is checked (a tuned pick) and timed
            # only when named
            cfgs = {n: c for n, c in configs(causal).items() if B.suits(c, D, causal)
                    and (passed is None or (n, causal) in passed)
                    and (n in names if names is not None else not n.startswith("CONFIGS["))}
            yield dict(kind="time", shape=list(shape), causal=causal, cfgs=cfgs, rounds=rounds, tuned=tuned,
                       run=run)


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


def _inputs(shape, seed, dtype="float16"):
    """Fresh q, k, v, do (the backward's own inputs; its forward statistics come from SDPA or float64 here)."""
    import torch
    from tlx_workbench.kernels import attention_bwd as B
    torch.manual_seed(seed)
    return B.make_inputs(tuple(shape), getattr(torch, dtype), "cuda")


def child_check(job):
    import torch
    from tlx_workbench.kernels import attention_bwd as B
    cfg, causal = job["cfg"], job["causal"]
    for si, (*shape, dtype) in enumerate(job["shapes"]):
        row = dict(kind="check", name=job["name"], cfg=cfg, shape=shape, dtype=dtype, causal=causal)
        try:
            q, k, v, do = _inputs(shape, 1000 + si, dtype)
            scale = 1.0 / math.sqrt(shape[-1])
            o_r, lse_r, dq_r, dk_r, dv_r = B.reference64(q, k, v, do, causal, scale, device="cuda")
            nan = float("nan")
            dk, dv = torch.full_like(k, nan), torch.full_like(v, nan)
            dq32 = torch.full(q.shape, nan, dtype=torch.float32, device="cuda")
            dq, dk, dv = B.launch(q, k, v, o_r.to(q.dtype), do, lse_r.float(), causal, scale, cfg,
                                  dq32=dq32, dk=dk, dv=dv)
            torch.cuda.synchronize()
            row.update(err_dq=_rel(dq, dq_r), err_dk=_rel(dk, dk_r), err_dv=_rel(dv, dv_r))
            row["ok"] = max(row["err_dq"], row["err_dk"], row["err_dv"]) < TOL[dtype]
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
    Z, H, N, Dh = shape
    scale = 1.0 / math.sqrt(Dh)
    from tlx_workbench.kernels import spec
    cell = dict(kind="time", shape=shape, causal=causal, flops=spec("attention_bwd").flops(Z, H, N, Dh, causal))
    q, k, v, do = _inputs(shape, 7 + 100 * job.get("run", 0))    # each run its own inputs
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o_s = torch.nn.functional.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
    subjects = {"sdpa": lambda: torch.autograd.grad(o_s, (qg, kg, vg), do, retain_graph=True)}
    o, lse = _forward(q, k, v, causal, scale)
    dq32 = torch.empty(q.shape, dtype=torch.float32, device="cuda")
    cfgs = dict(job["cfgs"])
    if job.get("tuned"):
        # what attention_backward(..., config=None) picks on these inputs: its autotune space, timed, fastest first
        tuned = B.tune(q, k, v, o, do, lse, causal, scale, B.configs_for(Dh, causal))
        cfgs["tuned"] = tuned[0][0]
        cell["tuned_ms"] = [[c, round(ms, 4)] for c, ms in tuned]
    for name, cfg in cfgs.items():
        subjects[name] = (lambda cfg: lambda: B.launch(q, k, v, o, do, lse, causal, scale, cfg, dq32=dq32))(cfg)
    ref = subjects["sdpa"]()
    errs, made, times = {}, {}, {n: [] for n in subjects}
    for name, fn in subjects.items():
        try:
            out = fn()
            torch.cuda.synchronize()
            errs[name] = max(_rel(a, b) for a, b in zip(out, ref))
        except Exception as e:
            errs[name] = float("inf")
            made[name] = f"{type(e).__name__}: {str(e)[:300]}"
        triton.set_allocator(torch_alloc)
    from _harness import bench_ms, round_order     # a shuffled order each round (since 2026-12-04)
    for r in range(job["rounds"]):
        for name in round_order(subjects, r):
            if errs[name] == float("inf"):
                continue
            times[name].append(bench_ms(subjects[name], warmup=10, rep=100))
    med = {n: statistics.median(t) for n, t in times.items() if t}
    for name, ts in times.items():
        row = dict(cell, kernel=name, cfg=cfgs.get(name), err_vs_sdpa=errs.get(name), rounds_ms=ts,
                   error=made.get(name), run=job.get("run", 0))
        if name != "sdpa" and errs.get(name) is not None and errs[name] > TOL["float16"]:
            row["error"], ts = f"wrong: {errs[name]:.3g} from SDPA's gradients", []     # not timed as a result
        if ts:
            row.update(ms=med[name], tflops=cell["flops"] / med[name] * 1e-9,
                       vs_sdpa=med["sdpa"] / med[name] if "sdpa" in med else None,
                       vs_default=med["default"] / med[name] if "default" in med else None)
        _emit(row)


# ---- static: the offline sm_90 compile of each config (no GPU) -------------------------------------

def step_loops(sass: str) -> list[dict]:
    """The innermost loops of a SASS listing that run wgmma (the consumers' step loops: three per consumer
    replica, diagonal / plain / ragged tail, in source order): their length, HGMMA, STL and LDL counts."""
    lines = sass.splitlines()
    labels, spans = {}, []
    for n, text in enumerate(lines):
        m = re.match(r"^\s*\.(L_x_\d+):", text)
        if m:
            labels[m.group(1)] = n
        m = re.search(r"BRA `\(\.(L_x_\d+)\)", text)
        if m and m.group(1) in labels and labels[m.group(1)] < n:
            spans.append((labels[m.group(1)], n))
    inner = [s for s in spans if not any(o != s and s[0] <= o[0] and o[1] <= s[1] for o in spans)]
    out = []
    for a, b in sorted(inner):
        body = lines[a:b + 1]
        hg = sum("HGMMA" in t for t in body)
        if hg:
            out.append(dict(instructions=sum(bool(re.search(r"/\*[0-9a-f]+\*/", t)) for t in body), hgmma=hg,
                            stl=sum(" STL" in t for t in body), ldl=sum(" LDL" in t for t in body)))
    return out


def static_row(name, cfg, causal):
    from tlx_workbench.kernels import attention_bwd as B
    t0 = time.time()
    r = B.compile_report(cfg, dtype="float16", shape=(1, 2, 256, D), causal=causal)
    f = max(r.ptxas_functions, key=lambda f: f.spill_store_bytes)
    loops = step_loops(r.sass)
    # the plain (unmasked) loop of each replica: the second of its three
    plain = [lp for i, lp in enumerate(loops) if i % 3 == 1] if len(loops) % 3 == 0 else []
    return dict(name=name, cfg=cfg, causal=causal, registers=r.resources.registers, spill_store=f.spill_store_bytes,
                spill_load=f.spill_load_bytes, smem=r.resources.smem_bytes, loops=loops,
                plain_loop_stl=[lp["stl"] for lp in plain], plain_loop_ldl=[lp["ldl"] for lp in plain],
                compile_s=round(time.time() - t0, 1))


def static_table(rows, date):
    out = [f"# Attention backward D=128 variants, sm_90 offline compile (fp16, {date})", "",
           "| config | causal | registers | spill B stored / loaded | SMEM B | plain loop STL / LDL per replica | "
           "all step loops STL / LDL |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['name']} | {r['causal']} | {r['error'][:200]} | | | | |")
            continue
        plain = ", ".join(f"{s}/{ld}" for s, ld in zip(r["plain_loop_stl"], r["plain_loop_ldl"]))
        every = ", ".join(f"{lp['stl']}/{lp['ldl']}" for lp in r["loops"])
        out.append(f"| {r['name']} | {r['causal']} | {r['registers']} | {r['spill_store']} / {r['spill_load']} | "
                   f"{r['smem']} | {plain} | {every} |")
    return "\n".join(out) + "\n"


def main_static(out):
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for causal in (False, True):
        for name, cfg in configs(causal).items():
            try:
                rows.append(static_row(name, cfg, causal))
            except Exception as e:
                rows.append(dict(name=name, cfg=cfg, causal=causal, error=f"{type(e).__name__}: {str(e)[:400]}"))
            print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("cfg", "loops")}), flush=True)
    (out / "attention_bwd_variants_static.json").write_text(json.dumps(dict(date=date, rows=rows), indent=1))
    text = static_table(rows, date)
    (out / "attention_bwd_variants_static.md").write_text(text)
    print(text)
    return 0


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
        return f"check {job['name']} causal={job['causal']}"
    return f"time {tuple(job['shape'])} causal={job['causal']} run={job.get('run', 0)}"


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


def _r(x):
    return "–" if x is None else f"{x:.3f}"


def table(result):
    out = [f"# Attention backward D=128, register and schedule variants, on {result['device'].get('gpu')} "
           f"({result['date']})", "", "## check vs float64 (||x - ref|| / ||ref||)", "",
           "| config | causal | shape | dtype | dq | dk | dv | ok |", "|---|---|---|---|---|---|---|---|"]
    for r in result["check"]:
        out.append(f"| {r['name']} | {r['causal']} | {tuple(r['shape'])} | {r['dtype']} | "
                   f"{_f(r.get('err_dq', r.get('error')))} | {_f(r.get('err_dk'))} | {_f(r.get('err_dv'))} | "
                   f"{r['ok']} |")
    out += ["", "## time (fp16, median of interleaved rounds of do_bench medians)", "",
            "| shape | causal | kernel | ms | TFLOP/s | vs SDPA | vs default | err vs SDPA | rounds (ms) |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in result["time"]:
        out.append(f"| {tuple(r['shape'])} | {r['causal']} | {r['kernel']} | {_f(r.get('ms', r.get('error')))} | "
                   f"{_f(r.get('tflops'))} | {_f(r.get('vs_sdpa'))} | {_f(r.get('vs_default'))} | "
                   f"{_f(r.get('err_vs_sdpa'))} | {' / '.join(f'{t:.3f}' for t in r['rounds_ms'])} |")
    runs = sorted({r.get("run", 0) for r in result["time"]})
    if len(runs) > 1:
        out += ["", f"## over the {len(runs)} runs: SDPA's time over ours, each run's median over rounds; the "
                "median of the runs", "", "| shape | causal | kernel | " + " | ".join(f"run {i + 1}" for i in runs)
                + " | median | picked (tuned) |", "|---|---|---|" + "---|" * len(runs) + "---|---|"]
        for row in over_runs(result["time"]):
            out.append(f"| {tuple(row['shape'])} | {row['causal']} | {row['kernel']} | "
                       + " | ".join(_r(x) for x in row["vs_sdpa"]) + f" | **{_r(row['median'])}** | "
                       + f"{', '.join(row['picked'])} |")
    for masking, named in result["configs"].items():
        out += ["", f"configs ({masking}): " + "; ".join(f"{n} = {json.dumps(c)}" for n, c in named.items())]
    if result["errors"]:
        out += ["", "## errors", ""] + [f"- {e['job']}: {e['error'][-400:]}" for e in result["errors"]]
    return "\n".join(out) + "\n"


def over_runs(time_rows):
    """One row per (cell, kernel): SDPA's time over ours in each run, their median, and the configs named
    by a tuned pick (by their VARIANT / CONFIGS name where they have one)."""
    import statistics as st
    named = {causal: {json.dumps(c, sort_keys=True): n for n, c in configs(causal).items()} for causal in (False, True)}
    cells = {}
    for r in time_rows:
        if r["kernel"] == "sdpa":
            continue
        key = (tuple(r["shape"]), r["causal"], r["kernel"])
        cells.setdefault(key, []).append(r)
    out = []
    for (shape, causal, kernel), rows in cells.items():
        rows = sorted(rows, key=lambda r: r.get("run", 0))
        ratios = [r.get("vs_sdpa") for r in rows]
        ok = [x for x in ratios if x is not None]
        picked = sorted({named[causal].get(json.dumps(r["cfg"], sort_keys=True), json.dumps(r["cfg"]))
                         for r in rows if kernel == "tuned" and r.get("cfg")})
        out.append(dict(shape=list(shape), causal=causal, kernel=kernel, vs_sdpa=ratios,
                        median=st.median(ok) if len(ok) == len(ratios) else None, picked=picked))
    return out


def passed_set(check_rows, jobs):
    """{(name, causal)} whose every check shape ran and passed."""
    passed = set()
    for j in jobs:
        rows = [r for r in check_rows if r["name"] == j["name"] and r["causal"] == j["causal"]]
        if len(rows) == len(j["shapes"]) and all(r["ok"] for r in rows):
            passed.add((j["name"], j["causal"]))
    return passed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "attention_bwd_variants_out"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=12, help="check children at once")
    ap.add_argument("--dry", action="store_true", help="list the jobs, then run them (on a CPU: up to CUDA)")
    ap.add_argument("--static", action="store_true", help="no GPU: compile each config for sm_90, report spills")
    ap.add_argument("--only", choices=("check", "time"), help="one phase (time: every config, unchecked here)")
    ap.add_argument("--runs", type=int, default=1, help="separate runs of the timing phase, one after another")
    ap.add_argument("--configs", help="comma-separated config names to time (default: all)")
    ap.add_argument("--tuned", action="store_true", help="time attention_backward()'s autotuned pick too")
    ap.add_argument("--causal", choices=("both", "no", "yes"), default="both", help="which cells to time")
    ap.add_argument("--child")
    a = ap.parse_args(argv)
    if a.child:
        job = json.loads(a.child)
        (child_check if job["kind"] == "check" else child_time)(job)
        return 0
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.static:
        return main_static(out)
    if a.dry:
        for j in list(check_jobs()) + list(time_jobs(a.rounds)):
            print(_label(j), j.get("cfg", list(j.get("cfgs", {}))), j.get("shapes", ""))
    result = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command=" ".join([os.path.basename(sys.executable)] + sys.argv), device=_device_info(),
                  configs={"non-causal": configs(False), "causal": configs(True)}, check=[], time=[], errors=[])

    def save():
        (out / "attention_bwd_variants_h200.json").write_text(json.dumps(result, indent=1))

    t0 = time.time()
    names = set(a.configs.split(",")) if a.configs else None
    unknown = sorted((names or set()) - set(all_names()))
    if unknown:       # e.g. a variant that is now the default (it is timed as "default")
        ap.error(f"no config named {', '.join(unknown)}; the names: {', '.join(all_names())}")
    # --configs without --tuned: check only what is timed (a tuned pick can be any config of the space)
    jobs = list(check_jobs(None if a.tuned else names)) if a.only != "time" else []
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
    result["check"].sort(key=lambda r: (all_names().index(r["name"]), r["causal"]))
    passed = passed_set(result["check"], jobs) if a.only != "time" else None
    time_list = [] if a.only == "check" else [j for run in range(a.runs)
                                             for j in time_jobs(a.rounds, passed, names, a.tuned, run,
                                                                {"both": (False, True), "no": (False,),
                                                                 "yes": (True,)}[a.causal])]
    for j in time_list:
        rows, err = run_child(j, TIME_DEADLINE_S)
        result["time"] += rows
        if err:
            result["errors"].append(dict(job=_label(j), error=err))
        line = ", ".join(f"{r['kernel']} {r.get('vs_sdpa') or 0:.3f}x" for r in rows if r["kernel"] != "sdpa")
        print(f"[{time.time() - t0:5.0f} s] {_label(j)}: vs SDPA {line}" + (f"; {err[-300:]}" if err else ""),
              flush=True)
        save()
    result["over_runs"] = over_runs(result["time"])
    save()
    text = table(result)
    (out / "attention_bwd_variants_h200.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
