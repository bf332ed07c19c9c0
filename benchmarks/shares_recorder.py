"""Per-task shares of the *instrumented* kernel, simulated against measured, CPU only.

A measured trace of gemm_ws 4096^3 (CONFIGS[0]) is a trace of the kernel its recorder made (+26 % to +50 % slower
than the plain one: benchmarks/shares_h200.py, 2026-12-02 05:44 UTC on the H200). This script simulates CTA 0 of
the plain kernel and of each instrumented one (``wb.simulate(..., recorder=...)``: the recorder's measured cost
after every op it records, ``sim/timing/recorder.py``) and compares each with the measured CTA 0 of that recorder, task by
task (``trace_compare``: busy, barrier wait, async wait, in points of the lane's extent). The measurements are the
ones on disk: the waits and totals traces in benchmarks/results/, and for the every-op recorder (its 4 MB trace was
not kept) the CTA 0 lanes that shares_summary.json kept, and also the every-op trace of an earlier run of the same
config that was kept (benchmarks/results/gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz, 01:56 UTC; its consumers' TMA store waits
were not timed yet). It also derives the totals recorder's cost per record
(``cost.MEASURED_RECORD``) from the two traces, and predicts each recorder's overhead against the plain kernel.

  .venv/bin/python benchmarks/shares_recorder.py [--no-loader]   # -> $OUT/shares_recorder.json (./out when unset)

The H200 model charges the TMA loader's measured costs (``cost.MEASURED_LOADER``: TMA issue, barrier_expect_bytes,
index arithmetic; ``cost.APPLIED_LOADER``); ``--no-loader`` simulates with the generic figures instead (the model
before 2026-12-02's switch).
"""
import json
import os
import pathlib
import statistics
import sys
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tlx_workbench as wb  # noqa: E402
from tlx_workbench.kernels import gemm_ws  # noqa: E402
from tlx_workbench.sim.timing.cost import cost_model, record_cycles  # noqa: E402
from tlx_workbench.trace import Trace  # noqa: E402
from tlx_workbench.trace_compare import WAITS, compare, shares  # noqa: E402

M = N = K = 4096
CFG = gemm_ws.CONFIGS[0]
RESULTS = ROOT / "benchmarks" / "results"
#: the H200's measured traces of gemm_ws 4096^3 CONFIGS[0] (benchmarks/shares_h200.py, 2026-12-02 05:44 UTC: the
#: waits and totals recorders, and the summary of all three; benchmarks/timeline_h200.py, 01:56 UTC: every op)
SUMMARY = RESULTS / "shares_summary_h200_2026-12-02.json"
MEASURED = {"waits": RESULTS / "gemm_ws_4096_waits_trace_h200_2026-12-02.json.gz",
            "totals": RESULTS / "gemm_ws_4096_totals_trace_h200_2026-12-02.json"}
TIMELINE = RESULTS / "gemm_ws_4096_every_op_trace_h200_2026-12-02.json.gz"
OUT = pathlib.Path(os.environ.get("OUT", "out"))
TASKS = {"default": "loader", "task1": "consumers"}


def simulate(recorder):
    a, b = torch.empty(M, K, dtype=torch.float16), torch.empty(K, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "only 1 of 128 CTAs simulated": meant
        res = wb.simulate(gemm_ws.launch, a, b, c, CFG, ctas=[0], gpu="H200", numerics=False, recorder=recorder)
    if not res.ok:
        raise RuntimeError(f"the simulation did not finish cleanly: {res}")
    return res, time.perf_counter() - t


def rows_of(cmp) -> dict:
    """task -> sim / measured shares and errors (points) of a trace_compare comparison."""
    out = {}
    for t in cmp.tasks:
        out[t.task] = {"busy": [t.sim_busy, t.measured_busy], "barrier_wait": [t.sim_barrier_wait,
                                                                                t.measured_barrier_wait],
                       "async_wait": [t.sim_async_wait, t.measured_async_wait],
                       "errors_pts": [t.busy_error, t.barrier_wait_error, t.async_wait_error]}
    return out


def rows_from_summary(sim_trace, lanes, timed) -> dict:
    """The same rows against the measured lanes shares_summary.json kept (CTA 0), by the same definitions."""
    ops = set(timed) & set(WAITS)
    sim = {}
    for ln in shares(sim_trace, ctas=[0], ops=ops):
        sim.setdefault(ln.task, []).append((1 - ln.wait, ln.barrier_wait, ln.async_wait))
    meas = {}
    for ln in lanes:
        if not ln["lane"].startswith("CTA 0 "):
            continue
        task = ln["lane"].split()[2].split("[")[0]
        bar = sum(w["time"] for w in ln["waits"].values() if w["op"] in ("barrier_wait", "named_barrier_wait"))
        asy = sum(w["time"] for w in ln["waits"].values() if w["op"] in ops) - bar
        meas.setdefault(task, []).append((1 - (bar + asy) / ln["extent"], bar / ln["extent"], asy / ln["extent"]))
    out = {}
    for task in sim:
        s = [statistics.fmean(x) for x in zip(*sim[task])]
        m = [statistics.fmean(x) for x in zip(*meas[task])]
        out[task] = {"busy": [s[0], m[0]], "barrier_wait": [s[1], m[1]], "async_wait": [s[2], m[2]],
                     "errors_pts": [100 * (x - y) for x, y in zip(s, m)]}
    return out


def totals_record_cost(waits_tr, totals_tr) -> dict:
    """Cycles a totals record costs: the waits recorder's plus the totals trace's extra busy cycles per record
    (both record the same wait sites; busy = a lane's extent less its waits), per task over the 4 CTAs."""
    ghz = {c["cta"]: c["clock_ghz"] for c in waits_tr.meta["ctas"]}

    def busy(tr, to_cycles):
        per = {}
        for ln in shares(tr):
            w = sum(x["time"] for x in ln.waits.values())
            n = sum(x["count"] for x in ln.waits.values())
            per.setdefault(ln.task, []).append(((ln.extent - w) * to_cycles(ln.cta), n))
        return per
    bw = busy(waits_tr, lambda cta: ghz[cta])        # ns -> cycles at each CTA's clock
    bt = busy(totals_tr, lambda cta: 1.0)
    out = {}
    for task in bw:
        extra = (statistics.fmean(b for b, _ in bt[task]) - statistics.fmean(b for b, _ in bw[task])) \
            / statistics.fmean(n for _, n in bt[task])
        out[task] = round(extra, 1)
    return out


def main():
    if "--no-loader" in sys.argv:   # the generic issue / arrive / free scalars instead of cost.MEASURED_LOADER
        from tlx_workbench.sim.timing import cost
        cost.APPLIED_LOADER = ()
    OUT.mkdir(parents=True, exist_ok=True)
    summary = json.loads(SUMMARY.read_text())
    measured = {name: Trace.load(str(path)) for name, path in MEASURED.items()}
    res = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "machine": "CPU only", "measured_on": summary.get("date"), "device": summary.get("device"),
           "loader_costs": {k: v for k, v in cost_model("H200").__dict__.items()
                            if k in ("tma_issue", "expect_bytes", "scalar_op")},
           "record_cycles": {r: record_cycles("H200", r)[0] for r in ("waits", "totals", "all")},
           "totals_extra_per_record": totals_record_cost(measured["waits"], measured["totals"]), "recorders": {}}
    plain, wall = simulate(None)
    res["plain"] = {"cycles": plain.cycles, "wall_s": round(wall, 1)}
    for name in ("waits", "totals", "all"):
        sim, wall = simulate(name)
        ov = summary["measured"][name]["overhead"]
        row = {"wall_s": round(wall, 1), "records": sim.trace.meta["recorder"]["records"],
               "sim_overhead": sim.cycles / plain.cycles - 1, "measured_overhead": ov["ratio"] - 1}
        if name in measured:
            for side, s in (("plain", plain), ("recorded", sim)):
                cmp = compare(s.trace, measured[name], measured_cta=0)
                row[side] = rows_of(cmp)
                row[side + "_extent_error"] = cmp.time_error
        else:
            lanes = summary["measured"][name]["lanes"]
            timed = summary["compare"][name]["timed_ops"]
            row["plain"] = rows_from_summary(plain.trace, lanes, timed)
            row["recorded"] = rows_from_summary(sim.trace, lanes, timed)
            # the every-op trace that was kept: the same recorder and config, an earlier run (01:56 UTC)
            cmp = compare(sim.trace, Trace.load(str(TIMELINE)), measured_cta=0)
            row["recorded_timeline_trace"] = rows_of(cmp)
            row["recorded_timeline_trace_extent_error"] = cmp.time_error
        res["recorders"][name] = row
    (OUT / "shares_recorder.json").write_text(json.dumps(res, indent=1))
    print(f"cycles per record {res['record_cycles']}; totals: waits' + {res['totals_extra_per_record']} per record")
    print(f"{'recorder':8} {'task':10} {'plain kernel: busy / barrier / async err':>42}   {'recorded kernel':>22}"
          f"   overhead sim / meas")
    for name, row in res["recorders"].items():
        for task in row["recorded"]:
            p, r = row["plain"][task]["errors_pts"], row["recorded"][task]["errors_pts"]
            print(f"{name:8} {TASKS.get(task, task):10} {p[0]:+10.1f} {p[1]:+8.1f} {p[2]:+8.1f} "
                  f"(worst {max(map(abs, p)):4.1f})   {r[0]:+6.1f} {r[1]:+6.1f} {r[2]:+6.1f} "
                  f"(worst {max(map(abs, r)):4.1f})   {row['sim_overhead']:+.1%} / {row['measured_overhead']:+.1%}")
    for task, r in res["recorders"]["all"]["recorded_timeline_trace"].items():
        e = r["errors_pts"]
        print(f"{'all':8} {TASKS.get(task, task):10} against the kept every-op trace (01:56 UTC): "
              f"{e[0]:+6.1f} {e[1]:+6.1f} {e[2]:+6.1f} (worst {max(map(abs, e)):4.1f})")
    print(f"wrote {OUT / 'shares_recorder.json'}")


if __name__ == "__main__":
    main()
