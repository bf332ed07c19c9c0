"""What the explorer's static stage costs on top of the compiler, per config.

For each of N gemm_ws configs of the library space at 4096^3 (fresh TRITON_CACHE_DIR and an empty
workbench cache for each, so every compile is a real one), in one process: the static stage as a
sweep runs it (`tlx_workbench.explore.stages.static`: capture the launcher's launch under the
offline target, `wb.compile(..., sass="lazy")`, read resources, advisories, tasks, occupancy)
against the `triton.compile` inside that very call (`report.compile_seconds`). The same-call ratio
is immune to other load on the machine. One untimed config first pays the imports and the shape's
inputs, which a sweep pays once per worker.

    .venv/bin/python benchmarks/explore_static_overhead.py [--configs 6]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from triton import knobs

import tlx_workbench.compiler as wb_compiler
from tlx_workbench.explore import library, stages

SHAPE = (4096, 4096, 4096)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=6)
    a = ap.parse_args()
    problem = library.problem("gemm_ws")
    travel = problem.travel()
    space = library.space("gemm_ws")
    picks = [space[i * (len(space) // (a.configs + 1))] for i in range(a.configs + 1)]
    rows = []
    for i, cfg in enumerate(picks):
        d = tempfile.mkdtemp(prefix="tlxwb-static-")
        os.environ["TRITON_CACHE_DIR"] = d
        knobs.cache.dir = d
        wb_compiler.clear_cache()
        t0 = time.perf_counter()
        out = stages.static(travel, cfg, SHAPE, target="H200")
        total = time.perf_counter() - t0
        assert out.status == "ok", out.reason
        if i == 0:
            continue                       # warm-up: imports, the shape's inputs
        compile_s = out.metrics["compile_seconds"]
        rows.append((total, compile_s, total / compile_s))
        print(f"  config {i}: stage {total:.3f} s, triton.compile {compile_s:.3f} s, x{total / compile_s:.3f}")
    m = statistics.median
    print(f"static stage per config: median {m(r[0] for r in rows):.3f} s; triton.compile inside it "
          f"{m(r[1] for r in rows):.3f} s; same-call ratio median x{m(r[2] for r in rows):.3f} "
          f"(min x{min(r[2] for r in rows):.3f}, max x{max(r[2] for r in rows):.3f}); load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
