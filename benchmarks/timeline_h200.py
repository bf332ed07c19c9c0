"""Whole-kernel measured timeline of gemm_ws at 4096^3 on the H200.

Run on the H200 (after `source .gpu/env.sh`):  python3 benchmarks/timeline_h200.py
Writes under $OUT (./ when unset), each file as soon as its step ends:
  timeline_summary.json          every step's figures (below), errors of failed steps
  gemm_ws_4096_timeline.json     the Trace, Chrome JSON (Perfetto): CTAs 0, 1 and the last two
  gemm_ws_4096_cta0.png, gemm_ws_4096_last.png   static timelines of CTA 0 and the last CTA
  compare_gemm_ws_4096.html      simulated (CTA 0, gpu="H200") vs measured (CTA 0), side by side
  proton_repro_gpu.txt           benchmarks/proton_repro/repro.py on this machine (real driver)
  gpu_tests.txt                  pytest tests/runtime/test_timeline_gpu.py
Steps: (1) wb.profile CTAs {first 2, last 2}: every event (counting launch sizes the buffers), each
CTA's extent (%globaltimer) vs the span its records cover, event counts vs the loop trip counts,
the SM clock, plain vs instrumented time; (2) the same with every CTA recorded (overhead only);
(3) the simulator's trace of CTA 0 against the measured one (per-task shares and errors);
(4) the Proton reproducer; (5) the GPU tests. Launches run in the watchdog worker (deadline per
launch); the reproducer and the tests in child processes with a deadline.
"""
import json
import os
import pathlib
import subprocess
import sys
import time
import traceback

import torch
import triton

import tlx_workbench as wb
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.runtime.profiling import timeline_png

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = pathlib.Path(os.environ.get("OUT", "."))
OUT.mkdir(parents=True, exist_ok=True)
M = N = K = 4096
CFG = gemm_ws.CONFIGS[0]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _harness import run_record  # noqa: E402

res = run_record(shape=[M, N, K], config={k: v for k, v in CFG.items() if not callable(v)})


def save():
    (OUT / "timeline_summary.json").write_text(json.dumps(res, indent=1, default=str))


def step(name, fn):
    t = time.perf_counter()
    try:
        fn()
        res.setdefault("wall_s", {})[name] = round(time.perf_counter() - t, 1)
        print(f"[{name}] ok in {time.perf_counter() - t:.1f} s", flush=True)
    except Exception as e:  # one broken step must not hide the others
        res[name + "_error"] = f"{type(e).__name__}: {str(e)[:2000]}"
        res[name + "_traceback"] = traceback.format_exc()[-3000:]
        print(f"[{name}] FAILED: {type(e).__name__}: {str(e)[:500]}", flush=True)
    save()


def rand(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float16)


a, b = rand(M, K, seed=1), rand(K, N, seed=2)
tiles = triton.cdiv(M, CFG["BM"]) * triton.cdiv(N, CFG["BN"])
ksteps = triton.cdiv(K, CFG["BK"])
state = {}


def coverage(tr, grid):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stride = grid if tiles > sms else sms
    out = []
    for c in tr.meta["ctas"]:
        spans = list(tr.spans_of(cta=c["cta"]))
        first, last = min(s.start for s in spans), max(s.end for s in spans)
        mine = len(range(c["cta"], tiles, stride))
        lanes = {}
        for lane in sorted({s.lane for s in spans}):
            ss = list(tr.spans_of(*lane))
            lanes[f"{lane[1]}[{lane[2]}]"] = {
                "events": len(ss), "tma_loads": sum(s.name == "async_descriptor_load" for s in ss),
                "wgmma": sum(s.name == "async_dot" for s in ss)}
        out.append({**c, "first_span_ns": first, "last_span_ns": last, "extent_ns": c["end"] - c["start"],
                    "covered_share": (last - first) / (c["end"] - c["start"]), "tiles": mine,
                    "expected_tma_loads": 3 * mine * ksteps, "expected_wgmma_per_consumer": mine * ksteps,
                    "lanes": lanes})
    return out


def whole_kernel():
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    t = time.perf_counter()
    tr = wb.profile(gemm_ws.launch, a, b, c, CFG, kernel="gemm_ws_coop_kernel", ctas={"first": 2, "last": 2},
                    timeout=60)
    wall = time.perf_counter() - t
    state["measured"] = tr
    tr.save(str(OUT / "gemm_ws_4096_timeline.json"))
    timeline_png(tr, str(OUT / "gemm_ws_4096_cta0.png"), cta=0)
    last = max(c_["cta"] for c_ in tr.meta["ctas"])
    timeline_png(tr, str(OUT / "gemm_ws_4096_last.png"), cta=last)
    err = float((c.float() - a.float() @ b.float()).norm() / (a.float() @ b.float()).norm())
    res["whole_kernel"] = {
        "repr": repr(tr), "profile_wall_s": round(wall, 1), "rel_error": err,
        "meta": {k: v for k, v in tr.meta.items() if k != "ctas"}, "ctas": coverage(tr, tr.meta["grid_ctas"]),
        "spans": len(tr.spans), "summary": [{k: (v if not isinstance(v, float) else round(v, 4)) for k, v in r.items()}
                                            for r in tr.summary().rows()]}
    print(tr, flush=True)


def all_ctas():
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tr = wb.profile(gemm_ws.launch, a, b, c, CFG, kernel="gemm_ws_coop_kernel", ctas="all", timeout=60)
    ext = [x["end"] - x["start"] for x in tr.meta["ctas"]]
    res["all_ctas"] = {"repr": repr(tr), "overhead": tr.meta.get("overhead"), "events": tr.meta["events"],
                       "ctas": len(tr.meta["ctas"]), "sm_clock_ghz": tr.meta.get("sm_clock_ghz"),
                       "cta_extent_ns": {"min": min(ext), "max": max(ext), "mean": sum(ext) / len(ext)},
                       "clocks_ghz": sorted(round(x["clock_ghz"], 3) for x in tr.meta["ctas"] if x["clock_ghz"])}
    print(tr, flush=True)


def simulated_vs_measured():
    from tlx_workbench.trace_compare import compare
    from tlx_workbench.widgets.trace_compare import trace_compare_html
    tr = state["measured"]
    ac, bc = a.cpu(), b.cpu()
    cc = torch.empty(M, N, dtype=torch.float16)
    t = time.perf_counter()
    sim = wb.simulate(gemm_ws.launch, ac, bc, cc, CFG, ctas=[0], gpu="H200")
    sim_wall = time.perf_counter() - t
    cmp = compare(sim.trace, tr, measured_cta=0)
    (OUT / "compare_gemm_ws_4096.html").write_text(
        "<html><meta charset='utf-8'><body>" + trace_compare_html(cmp) + "</body></html>")
    cmp_all = compare(sim.trace, tr)
    # the simulated cycles at the clock the GPU really ran at: what is left is the cycle count's error
    at_clock = compare(sim.trace, tr, measured_cta=0, sim_clock_ghz=tr.meta["sm_clock_ghz"])
    res["simulated_vs_measured"] = {"sim_wall_s": round(sim_wall, 1), "sim_cycles": float(sim.cycles),
                                    "cta0": cmp.to_dict(), "measured_ctas_mean": cmp_all.to_dict(),
                                    "cta0_at_measured_clock": at_clock.to_dict(), "text": str(cmp),
                                    "text_at_measured_clock": str(at_clock)}
    print(cmp, flush=True)


def child(name, cmd, timeout):
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        text, rc = p.stdout + "\n--- stderr (tail) ---\n" + p.stderr[-20000:], p.returncode
    except subprocess.TimeoutExpired as e:
        text, rc = f"TIMEOUT after {timeout} s\n{e.stdout or ''}", "timeout"
    (OUT / f"{name}.txt").write_text(text)
    res[name] = {"rc": rc, "tail": (text.split("--- stderr")[0])[-3000:]}


step("whole_kernel", whole_kernel)
step("all_ctas", all_ctas)
step("simulated_vs_measured", simulated_vs_measured)
step("proton_repro_gpu", lambda: child(
    "proton_repro_gpu", [sys.executable, "benchmarks/proton_repro/repro.py", "--granularity", "warp",
                         "--granularity", "warp_group", "--out", str(OUT / "proton_repro_gpu.json")], 300))
step("gpu_tests", lambda: child(
    "gpu_tests", [sys.executable, "-m", "pytest", "-q", "-rs", "tests/runtime/test_timeline_gpu.py", "-p", "no:nbval",
                  "-o", "addopts=--import-mode=importlib", "-s"], 420))
print(json.dumps({k: v for k, v in res.items() if k.endswith("_error") or k == "wall_s"}, indent=1))
