"""One call on the H200 for the kernel library: correctness, config sweep, side-by-side timing.

    source .gpu/env.sh && python3 benchmarks/gpu_bench_all.py gemm attention   # writes under $OUT

Each part writes <part>.json and <part>.md under $OUT and prints its tables; a part
that fails is reported and the next one still runs.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def main(argv):
    out = os.environ.get("OUT", "bench_out")
    flags = {a for a in argv if a.startswith("--")}
    parts = [a for a in argv if not a.startswith("--")] or ["gemm", "attention"]
    for part in parts:
        t0 = time.time()
        print(f"=== {part} ===", flush=True)
        try:
            if part == "gemm":
                import gemm
                gemm.main(out, do_check="--no-check" not in flags)
            elif part == "attention":
                import attention
                attention.main(out, do_check="--no-check" not in flags)
            else:
                print(f"unknown part {part!r}")
        except Exception:
            traceback.print_exc()
        print(f"=== {part} took {time.time() - t0:.0f} s ===", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
