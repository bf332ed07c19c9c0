"""The cost model's check: predicted (CPU, ``wb.predict``) against measured (H200) per cell.

    .venv/bin/python benchmarks/predict_table.py [--only SUBSTRING ...]   # -> benchmarks/results/predict_table_<date>.{json,md}

Reads the GPU run's ``benchmarks/results/predict_measured_h200_2026-12-02.json`` (``benchmarks/predict_h200.py``) and predicts
every cell of ``predict_cells.CELLS`` on this machine; the table gives kernel, shape, predicted, measured,
the error and the simulator's wall time.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from predict_cells import CELLS, make_call  # noqa: E402


def main(argv=None):
    import tlx_workbench as wb
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--out", default=str(HERE / "results" / f"predict_table_{time.strftime('%Y-%m-%d', time.gmtime())}"))
    args = ap.parse_args(argv)
    measured = json.loads((HERE / "results" / "predict_measured_h200_2026-12-02.json").read_text())
    meas = {json.dumps(r["cell"]): r for r in measured["rows"]}
    rows = []
    for cell in CELLS:
        key = json.dumps(cell)
        if args.only and not any(s in key for s in args.only):
            continue
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with wb.offline("H200"):
                fn, _ = make_call(cell, "cpu")
                p = wb.predict(fn, gpu="H200")
        m = meas.get(key)
        row = dict(cell=cell, predicted_us=p.us, predicted_cycles=p.cycles, bound=p.bound, sampled=p.sampled,
                   measured_us=m["us"] if m else None, measured_mhz=m.get("sm_mhz") if m else None,
                   sim_seconds=time.perf_counter() - t0)
        row["error"] = row["predicted_us"] / row["measured_us"] - 1 if m else None
        rows.append(row)
        print(f"{cell['kernel']:28s} {cell['config']:12s} {str(cell['shape']):22s} {str(cell.get('causal', '')):5s} "
              f"pred {p.us:9.1f} us  meas {row['measured_us'] or float('nan'):9.1f} us  "
              f"err {100 * (row['error'] or float('nan')):+6.1f} %  ({row['sim_seconds']:.0f} s)", flush=True)
    errs = [abs(r["error"]) for r in rows if r["error"] is not None]
    summary = dict(cells=len(rows), median_abs_error=statistics.median(errs) if errs else None,
                   max_abs_error=max(errs) if errs else None,
                   within_20=sum(e <= 0.2 for e in errs), within_35=sum(e <= 0.35 for e in errs))
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from _harness import run_record
    out.with_suffix(".json").write_text(json.dumps(run_record(measured=dict(device=measured["device"], date=measured["date"],
                                                                            command=measured["command"]),
                                                              rows=rows, summary=summary), indent=1))
    lines = ["| kernel | config | shape | causal | predicted µs | measured µs | error | sim s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["cell"]
        lines.append(f"| {c['kernel']} | {c['config']} | {'x'.join(map(str, c['shape']))} | {c.get('causal', '')} | "
                     f"{r['predicted_us']:.1f} | {r['measured_us']:.1f} | {100 * r['error']:+.1f} % | {r['sim_seconds']:.0f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
