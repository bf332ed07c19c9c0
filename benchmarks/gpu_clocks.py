"""Clock and power while a kernel runs back to back: is the H200 power-limited on our kernels?

For each subject (cuBLAS and ``gemm_ws`` at 4096^3 / 8192^3, SDPA and our attention at D=128),
launch it back to back for ``SECONDS`` while ``nvidia-smi`` samples the SM clock and board power
every 50 ms; report the achieved TFLOP/s, the median clock and power of the busy samples, and
the work done per SM per clock (FLOP/clk/SM; the H200's dense fp16/bf16 MMA peak is 4096).
A kernel that reaches the power limit runs below the maximum clock; comparing FLOP/clk/SM
separates "slow per clock" from "clocked down".

    source .gpu/env.sh && python3 benchmarks/gpu_clocks.py     # writes clocks.json/.md under $OUT
"""
from __future__ import annotations

import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import device_line, gpu_setup, md_table, write_json  # noqa: E402

SECONDS = float(os.environ.get("CLOCKS_SECONDS", "6"))


def main():
    # the measurement is the calibration suite's ``sustained_kernels`` family (its one home); this writes its rows
    # as a benchmark table
    from tlx_workbench.calibration.suite import measure_sustained_kernels
    gpu_setup()
    rows = measure_sustained_kernels(lambda m: print(m, flush=True), SECONDS)["rows"]
    out = pathlib.Path(os.environ.get("OUT", "bench_out"))
    payload = dict(device=device_line(), seconds=SECONDS, rows=rows)
    write_json(out, "clocks", payload)
    md = f"# clocks and power on {payload['device']}\n\n" + md_table(
        rows, ["cell", "subject", "tflops", "sm_mhz", "max_mhz", "watts", "flop_per_clk_sm"])
    (out / "clocks.md").write_text(md)
    print(md)


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0],
                            epilog="CLOCKS_SECONDS (default 6): how long each subject runs").parse_args()
    main()
