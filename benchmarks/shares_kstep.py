"""Where a gemm_ws lane's k-step goes on the GPU: per-op spans and the gaps between them, in cycles.

Reads the measured Chrome traces of benchmarks/shares_h200.py (the waits and every-op recorders) and prints,
over the lanes of each task (loader, consumers) of every recorded CTA, the median of each op's span and of
each gap between two consecutive recorded ops (the recorder's own cost plus whatever untimed work lies
between), each in the cycles of that CTA's measured SM clock. A gap between two ops with no statement
between them (the two ``barrier_wait``s of ``_wait_full``) is the recorder alone; subtracting it from a gap
that holds one untimed op gives that op's cost (the waits trace: the ``async_dot`` issue, the arrive and
the loop).

  .venv/bin/python benchmarks/shares_kstep.py [TRACE ...]   (default: benchmarks/results/gemm_ws_4096_waits_trace_h200_2026-12-02.json.gz)
"""
import ast
import gzip
import json
import pathlib
import statistics
import sys


def site(e):
    return f"{e['name']}@{e.get('args', {}).get('line')}"


def steps(path, task):
    with (gzip.open(path, "rt") if str(path).endswith(".gz") else open(path)) as f:
        d = json.load(f)
    od = d["otherData"]
    meta = (ast.literal_eval(od) if isinstance(od, str) else od)["tlx_workbench"]["meta"]
    ghz = {c["cta"]: c["clock_ghz"] for c in meta["ctas"]}
    names = {}
    for e in d["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "process_name":
            names[e["pid"]] = int(e["args"]["name"].split()[-1])
    lanes = {}
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and names.get((e["pid"], e["tid"]), "").startswith(task):
            lanes.setdefault((e["pid"], e["tid"]), []).append(e)
    spans, gaps, ext = {}, {}, []
    for (pid, tid), es in lanes.items():
        es.sort(key=lambda e: e["ts"])
        f = ghz[names[pid]] * 1e3                     # ts, dur in us -> cycles
        ext.append((es[-1]["ts"] + es[-1]["dur"] - es[0]["ts"]) * f)
        for e in es:
            spans.setdefault(site(e), []).append(e["dur"] * f)
        for a, b in zip(es, es[1:]):
            gaps.setdefault(f"{site(a)} -> {site(b)}", []).append((b["ts"] - a["ts"] - a["dur"]) * f)
    return meta, spans, gaps, ext


def main(paths):
    for path in paths:
        for task in ("default", "task1"):
            meta, spans, gaps, ext = steps(path, task)
            n = len(ext)
            print(f"{path}: {meta.get('recorder')} recorder, ops timed {meta.get('timed_ops')}, "
                  f"overhead {100 * (meta['overhead']['ratio'] - 1):+.1f} %, {n} {task} lanes, "
                  f"mean extent {statistics.mean(ext):.0f} cycles")
            for kind, tab in (("span", spans), ("gap", gaps)):
                for k, v in sorted(tab.items(), key=lambda kv: -sum(kv[1])):
                    if len(v) >= 8 * n:              # per k-step, not per tile
                        print(f"  {kind:4s} {k:50s} n/lane {len(v) // n:4d}  median {statistics.median(v):6.1f}"
                              f"  mean {statistics.mean(v):6.1f}  share {sum(v) / sum(ext) * 100:5.1f} %")


if __name__ == "__main__":
    main(sys.argv[1:] or [str(pathlib.Path(__file__).parent / "results" / "gemm_ws_4096_waits_trace_h200_2026-12-02.json.gz")])
