"""The measured side of the cost model's check: kernel times on the GPU, and the calibration.

1. the calibration suite (``tlx_workbench.calibration.suite``) -> ``$OUT/H200.json``;
2. every (kernel, shape) of :data:`CELLS` timed with do_bench (median, L2 flushed), interleaved in
   ``ROUNDS`` rounds, while ``nvidia-smi`` samples the SM clock -> ``$OUT/predict_measured.json``.

The predictions are made on a CPU from the same cells (``benchmarks/predict_table.py``), so the
table in RESULTS.md compares a CPU run of the simulator with this GPU run.

    source .gpu/env.sh && python3 benchmarks/predict_h200.py
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import statistics
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import Clocks  # noqa: E402
from predict_cells import CELLS, make_call  # noqa: E402

ROUNDS = int(os.environ.get("PREDICT_ROUNDS", "3"))


def main():
    import torch
    import triton
    from tlx_workbench.kernels._common import torch_alloc
    out = pathlib.Path(os.environ.get("OUT", "."))
    triton.set_allocator(torch_alloc)
    torch.manual_seed(0)
    t_start = time.time()
    part = os.environ.get("PREDICT_PART", "both")       # "calibration", "cells" or "both"
    if part in ("calibration", "both"):
        from tlx_workbench.calibration import suite
        suite.main(["--out", str(out / "H200.json"), "--command",
                    "source .gpu/env.sh && python3 benchmarks/predict_h200.py  (calibration part)"])
        print(f"calibration: {time.time() - t_start:.0f} s", flush=True)
    if part == "calibration":
        return
    clocks = Clocks()
    subjects, log = [], []
    for cell in CELLS:
        try:
            fn, flops = make_call(cell, "cuda")
            fn()
            torch.cuda.synchronize()
            subjects.append((cell, fn, flops))
        except Exception as e:  # noqa: BLE001 - one failing subject must not cost the others
            log.append(dict(cell=cell, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-1200:]))
            print("FAILED", cell, e, flush=True)
    print(f"{len(subjects)} cells ready at {time.time() - t_start:.0f} s", flush=True)
    times = {json.dumps(c): [] for c, _, _ in subjects}
    for r in range(ROUNDS):
        for cell, fn, flops in subjects:
            t0 = time.time()
            ms = float(triton.testing.do_bench(fn, warmup=30, rep=120, return_mode="median"))
            mhz, watts = clocks.between(t0, time.time())
            times[json.dumps(cell)].append(dict(ms=ms, sm_mhz=mhz, watts=watts))
        print(f"round {r} done at {time.time() - t_start:.0f} s", flush=True)
    clocks.stop()
    rows = []
    for cell, fn, flops in subjects:
        rs = times[json.dumps(cell)]
        ms = statistics.median(x["ms"] for x in rs)
        mhz = [x["sm_mhz"] for x in rs if x["sm_mhz"]]
        rows.append(dict(cell=cell, ms=ms, us=ms * 1e3, tflops=flops / ms / 1e9, rounds=rs,
                         sm_mhz=statistics.median(mhz) if mhz else None))
        print(f"{cell}: {ms * 1e3:.1f} us, {rows[-1]['tflops']:.0f} TFLOP/s, {rows[-1]['sm_mhz']} MHz", flush=True)
    from _harness import run_record
    payload = run_record(rows=rows, errors=log)
    (out / "predict_measured.json").write_text(json.dumps(payload, indent=1))
    print(f"done in {time.time() - t_start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
