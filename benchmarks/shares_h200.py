"""Per-task busy and wait shares, simulated vs measured, of a kernel the recorder barely changes.

gemm_ws at 4096^3, CONFIGS[0] (the timeline run's kernel and config). The simulator runs the plain source;
the GPU runs it under three recorders, from lightest to heaviest, each timed against the plain kernel:

  totals   wb.profile(ops="waits", totals=True): per wait site its count, summed and longest cycles, by
           atomics (no per-event record): two clock reads and three fire-and-forget atomics per wait
  waits    wb.profile(ops="waits"): a (site, t0, t1) record per wait: per-wait durations, where in the loop
  all      wb.profile(): every op recorded (the 2026-12-02 timeline's recorder, store waits now timed too)

Each is compared with the simulated CTA 0 (the plain kernel, and the kernel that recorder instruments:
``simulate(recorder=...)``) by trace_compare (barrier wait / async wait / busy, only the
waits both sides time) and checked: every lane present, each wait site's count equal to the loop's trip
count (tiles x k-steps), the product correct, the overhead measured. A failed check or step is printed as
FAILED and the script exits 1 (the other steps still run and are written).

  GPU (the H200):  source .gpu/env.sh && python3 benchmarks/shares_h200.py [--only totals,waits,all]
  CPU half here:   .venv/bin/python benchmarks/shares_h200.py --cpu [--measured PATH]
                   (the simulation, and the comparison with a measured trace already on disk: by default
                   benchmarks/results/gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz, the 2026-12-02 run)

Writes under $OUT (./out when unset): shares_summary.json (every step's figures, errors), and per GPU
recorder gemm_ws_4096_<recorder>.json (the Trace; totals: spans-free, its meta holds the totals).
What it decides: the totals recorder's overhead says whether its shares are the plain kernel's (under
~5 %: yes); then "within 10 points" per task is met or not, on a fair comparison; the waits and all
recorders show how the shares move as the recorder gets heavier (the 2026-12-02 gap, reproduced).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time
import traceback
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

import tlx_workbench as wb  # noqa: E402
from tlx_workbench.kernels import gemm_ws  # noqa: E402
from tlx_workbench.compiler.instrument_rewrite import WAIT_OPS  # noqa: E402
from tlx_workbench.runtime.instrument import select_ctas  # noqa: E402
from tlx_workbench.trace import Trace  # noqa: E402
from tlx_workbench.trace_compare import compare, shares  # noqa: E402

M = N = K = 4096
CFG = gemm_ws.CONFIGS[0]
KERNEL = "gemm_ws_coop_kernel"
CTAS = {"first": 2, "last": 2}
RECORDERS = {"totals": dict(ops="waits", totals=True), "waits": dict(ops="waits"), "all": {}}
TILES = triton.cdiv(M, CFG["BM"]) * triton.cdiv(N, CFG["BN"])
KSTEPS = triton.cdiv(K, CFG["BK"])
STRIPS = CFG["BN"] // CFG["EPI_N"]

OUT = pathlib.Path(os.environ.get("OUT", "out"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _harness import run_record  # noqa: E402

res = run_record(shape=[M, N, K], config={k: v for k, v in CFG.items() if not callable(v)})
failed = []
state = {}


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "shares_summary.json").write_text(json.dumps(res, indent=1, default=str))


def step(name, fn):
    t = time.perf_counter()
    try:
        fn()
        res.setdefault("wall_s", {})[name] = round(time.perf_counter() - t, 1)
        print(f"[{name}] ok in {time.perf_counter() - t:.1f} s", flush=True)
    except Exception as e:  # noqa: BLE001 - one broken step must not hide the others; it is FAILED, loudly
        failed.append(name)
        res[name + "_error"] = f"{type(e).__name__}: {str(e)[:2000]}"
        res[name + "_traceback"] = traceback.format_exc()[-4000:]
        print(f"[{name}] FAILED: {type(e).__name__}: {str(e)[:800]}", flush=True)
    save()


def expected_counts(cta: int, grid: int) -> dict:
    """Each wait site's trip count for CTA ``cta`` of ``grid`` persistent CTAs (gemm_ws's source lines)."""
    tiles = len(range(cta, TILES, grid))
    steps = tiles * KSTEPS
    return {"default": {"barrier_wait@103": steps},
            "task1": {"barrier_wait@68": steps, "barrier_wait@69": steps, "async_dot_wait@130": tiles,
                      "async_dot_wait@139": steps - tiles, "async_descriptor_store_wait@52": tiles * STRIPS,
                      "async_descriptor_store_wait@197": 1}}


def check_counts(tr: Trace, grid: int, ctas) -> list[str]:
    """What does not add up in a trace: a missing lane, a wait site counted otherwise than its loop."""
    bad = []
    for cta in ctas:
        lanes = {(l.task, l.replica): l for l in shares(tr, ctas=[cta])}
        want = expected_counts(cta, grid)
        for task, reps in (("default", [0]), ("task1", [0, 1])):
            for rep in reps:
                lane = lanes.get((task, rep))
                if lane is None:
                    bad.append(f"CTA {cta} {task}[{rep}]: no lane recorded")
                    continue
                got = {k: w["count"] for k, w in lane.waits.items()}
                for site, n in want[task].items():
                    if got.get(site) != n:
                        bad.append(f"CTA {cta} {task}[{rep}] {site}: {got.get(site)} waits, the loop runs {n}")
    return bad


def simulate_cta0(recorder=None):
    """CTA 0 on the simulator (timing only: the same cycles, 4-5x faster): the plain kernel, or the one
    ``recorder`` instruments (its measured cost per record charged where it records: sim/timing/recorder.py)."""
    a, b = torch.empty(M, K, dtype=torch.float16), torch.empty(K, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "only 1 of 128 CTAs simulated": meant
        return wb.simulate(gemm_ws.launch, a, b, c, CFG, ctas=[0], gpu="H200", numerics=False, recorder=recorder)


def simulate():
    """CTA 0 of the plain kernel on the simulator."""
    t = time.perf_counter()
    sim = simulate_cta0()
    if not sim.ok:
        raise RuntimeError(f"the simulation did not finish cleanly: {sim}")
    state["sim"] = sim.trace
    sim.trace.save(str(OUT / "gemm_ws_4096_sim_cta0.json"))
    res["sim"] = {"wall_s": round(time.perf_counter() - t, 1), "cycles": float(sim.cycles),
                  "clock_ghz": sim.trace.meta.get("clock_ghz"), "grid": list(sim.grid),
                  "lanes": [lane_row(l) for l in shares(sim.trace, ctas=[0])]}
    bad = check_counts(sim.trace, sim.grid[0], [0])
    if bad:
        raise RuntimeError("the simulated loop counts are not the kernel's: " + "; ".join(bad[:6]))


def lane_row(l) -> dict:
    return {"lane": f"CTA {l.cta} {l.task}[{l.replica}]", "extent": l.extent, "busy": 1 - l.wait,
            "barrier_wait": l.barrier_wait, "async_wait": l.async_wait,
            "waits": {k: {kk: v for kk, v in w.items() if kk != "barrier"} for k, w in l.waits.items()}}


def recorder_gaps(tr: Trace, cta: int) -> dict:
    """Per lane of a measured events trace: the time between consecutive records (not inside any timed op:
    the kernel's own untimed work plus the recorder's), its share of the extent and median per gap, in ns."""
    out = {}
    for lane in [l for l in tr.lanes() if l[0] == cta]:
        ss = sorted(tr.spans_of(*lane), key=lambda s: s.start)
        if len(ss) < 2:
            continue
        gaps = [max(0.0, b.start - a.end) for a, b in zip(ss, ss[1:])]
        ext = ss[-1].end - ss[0].start
        out[f"{lane[1]}[{lane[2]}]"] = {"events": len(ss), "gap_share": sum(gaps) / ext,
                                        "median_gap_ns": statistics.median(gaps)}
    return out


def compare_with(name: str, tr: Trace):
    sim = state["sim"]
    cmp0 = compare(sim, tr, measured_cta=0)
    cmp_all = compare(sim, tr)
    row = {"cta0": cmp0.to_dict(), "measured_ctas_mean": cmp_all.to_dict(), "text": str(cmp0),
           "within_10_points_cta0": cmp0.within(10.0), "within_10_points_mean": cmp_all.within(10.0),
           "recorder": tr.meta.get("recorder"), "timed_ops": tr.meta.get("timed_ops"),
           "overhead": tr.meta.get("overhead"), "sm_clock_ghz": tr.meta.get("sm_clock_ghz")}
    if tr.spans:
        row["recorder_gaps_cta0"] = recorder_gaps(tr, 0)
    rec = recorder_of(tr)
    if rec is not None:
        # the kernel that was measured: the simulation of the instrumented kernel against it
        rsim = simulate_cta0(rec)
        rcmp = compare(rsim.trace, tr, measured_cta=0)
        row["recorded_sim"] = {"recorder": rec, "cta0": rcmp.to_dict(), "text": str(rcmp),
                               "within_10_points_cta0": rcmp.within(10.0),
                               "sim_overhead": rsim.cycles / state["sim"].duration - 1}
        print(f"--- {name}, against the simulated {rec} recorder\n{rcmp}", flush=True)
    res.setdefault("compare", {})[name] = row
    print(f"--- {name} ({tr.meta.get('recorder')}; overhead "
          f"{_ratio(tr.meta.get('overhead'))})\n{cmp0}", flush=True)


def recorder_of(tr: Trace) -> str | None:
    """Which of the profiler's recorders made a measured trace (None: not ours, or not known)."""
    if tr.meta.get("recorder") != "clock64":
        return None
    if tr.meta.get("totals"):
        return "totals"
    timed = set(tr.meta.get("timed_ops") or ())
    return "waits" if timed and timed <= set(WAIT_OPS) else "all"


def _ratio(ov) -> str:
    return f"{ov['ratio'] - 1:+.1%}" if ov and ov.get("ratio") else "not measured"


def measure(name: str, kw: dict):
    """One recorder on the GPU: profile, check every count, save, compare."""
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(M, K, generator=g, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, generator=g, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tr = wb.profile(gemm_ws.launch, a, b, c, CFG, kernel=KERNEL, ctas=CTAS, timeout=60, **kw)
    ref = a.float() @ b.float()
    err = float((c.float() - ref).norm() / ref.norm())
    tr.save(str(OUT / f"gemm_ws_4096_{name}.json"))
    res.setdefault("measured", {})[name] = {
        "repr": repr(tr), "rel_error": err, "overhead": tr.meta.get("overhead"), "grid_ctas": tr.meta["grid_ctas"],
        "lanes": [lane_row(l) for l in shares(tr)]}
    problems = []
    if not err < 1e-2:
        problems.append(f"the product is wrong under the {name} recorder (relative error {err:.2e})")
    if not (tr.meta.get("overhead") or {}).get("ratio"):
        problems.append("the plain and instrumented launches were not both timed")
    asked = select_ctas(CTAS, tr.meta["grid_ctas"])
    if sorted(c_["cta"] for c_ in tr.meta["ctas"]) != sorted(asked):
        problems.append(f"recorded CTAs {[c_['cta'] for c_ in tr.meta['ctas']]}, asked for {asked}")
    problems += check_counts(tr, tr.meta["grid_ctas"], [c_["cta"] for c_ in tr.meta["ctas"]])
    compare_with(name, tr)
    if problems:
        raise RuntimeError(f"{len(problems)} check(s) failed: " + "; ".join(problems[:8]))


def verdict():
    cmp = res.get("compare", {})
    lines = []
    for name, row in cmp.items():
        ov = row.get("overhead")
        worst = max((max(abs(t["busy_error_pts"]), abs(t["barrier_wait_error_pts"]), abs(t["async_wait_error_pts"]))
                     for t in row["cta0"]["tasks"]), default=None)
        lines.append(f"{name:>8}: overhead {_ratio(ov):>13}, worst share error (CTA 0) "
                     f"{worst:.1f} points, within 10: {row['within_10_points_cta0']} "
                     f"(CTA mean: {row['within_10_points_mean']})")
        rs = row.get("recorded_sim")
        if rs:
            worst = max((max(abs(t["busy_error_pts"]), abs(t["barrier_wait_error_pts"]), abs(t["async_wait_error_pts"]))
                         for t in rs["cta0"]["tasks"]), default=None)
            lines.append(f"{'':>8}  against the simulated {rs['recorder']} recorder: worst {worst:.1f} points, "
                         f"within 10: {rs['within_10_points_cta0']}")
    t = cmp.get("totals")
    if t and t.get("overhead") and t["overhead"].get("ratio"):
        near = t["overhead"]["ratio"] < 1.05
        lines.append("decision: " + (
            f"the totals recorder leaves the kernel within 5 % of plain; its shares are the plain kernel's, and "
            f"the goal (per-task shares within 10 points) is {'MET' if t['within_10_points_cta0'] else 'NOT MET'}"
            if near else "even the totals recorder costs more than 5 %: no measured shares of the plain kernel"))
    res["verdict"] = lines
    print("\n".join(lines), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="the CPU half only: simulate, compare with --measured")
    ap.add_argument("--measured", default=str(ROOT / "benchmarks/results/gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz"),
                    help="with --cpu: a measured trace (Chrome JSON) of the same kernel, config and shape")
    ap.add_argument("--only", default=",".join(RECORDERS), help="GPU recorders to run, comma-separated")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.cpu:
        if not torch.cuda.is_available():
            print("FAILED: no GPU here; run with --cpu for the CPU half", flush=True)
            sys.exit(1)
        res["device"] = torch.cuda.get_device_name()
    step("sim", simulate)
    if args.cpu:
        def on_disk():
            tr = Trace.load(args.measured)
            res["measured_file"] = args.measured
            compare_with("on_disk", tr)
        step("compare_on_disk", on_disk)
    else:
        for name in [n for n in args.only.split(",") if n]:
            if name not in RECORDERS:
                failed.append(name)
                print(f"[{name}] FAILED: no such recorder (choose among {', '.join(RECORDERS)})", flush=True)
                continue
            if "sim" in state:
                step(name, lambda n=name: measure(n, RECORDERS[n]))
            else:
                failed.append(name)
                print(f"[{name}] FAILED: not compared, the simulation failed", flush=True)
    verdict()
    res["failed"] = failed
    save()
    print(f"wrote {OUT / 'shares_summary.json'}" + (f"; FAILED: {', '.join(failed)}" if failed else ""), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
