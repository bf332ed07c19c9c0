"""Does the cost model rank gemm_ws configs as the H200 does? (goal: Spearman >= 0.8 over >= 30 configs)

    .venv/bin/python benchmarks/predict_rank.py     # -> benchmarks/predict/rank_gemm_ws.json

The measured side is the explorer's H200 store (``benchmarks/explore_h200.sqlite``: every gemm_ws config of the
library space timed at 4096^3, fp16); the predicted side is the explorer's simulated-stage prediction
(``explore.stages.predict``: ``wb.predict`` of the launch at 4096^3 from 8 CTAs, the compiled facts charged), made
here with the calibrated cost model. Also the median |error| of the times themselves.
"""
from __future__ import annotations

import json
import pathlib
import sqlite3
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _harness import spearman  # noqa: E402


def main():
    from tlx_workbench.explore import library
    from tlx_workbench.explore.stages import predict
    db = sqlite3.connect(HERE / "explore_h200.sqlite")
    rows = db.execute("select config, metrics from results where kernel='gemm_ws' and stage='measured' "
                      "and status='ok' and shape='[4096, 4096, 4096]'").fetchall()
    problem = library.problem("gemm_ws")
    shape = (4096, 4096, 4096)
    out = []
    t0 = time.time()
    for cfg_s, met_s in rows:
        cfg = json.loads(cfg_s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = predict(problem, cfg, shape, "H200")
        m = json.loads(met_s)
        out.append(dict(config=cfg, measured_us=m["us"], predicted_us=p.get("predicted_us"), note=p.get("predict_note")))
        print(f"{len(out):3d} {cfg} meas {m['us']:.1f} pred {p.get('predicted_us') or float('nan'):.1f}", flush=True)
    ok = [r for r in out if r["predicted_us"]]
    rho = spearman([r["predicted_us"] for r in ok], [r["measured_us"] for r in ok])
    ratios = sorted(r["predicted_us"] / r["measured_us"] for r in ok)
    errors = sorted(abs(x - 1) for x in ratios)
    summary = dict(configs=len(ok), spearman=rho, ratio_min=ratios[0], ratio_median=ratios[len(ratios) // 2],
                   ratio_max=ratios[-1], median_abs_error=errors[len(errors) // 2], seconds=time.time() - t0)
    (HERE / "predict").mkdir(exist_ok=True)
    from _harness import run_record
    (HERE / "predict" / "rank_gemm_ws.json").write_text(json.dumps(run_record(summary=summary, rows=out), indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
