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
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import attn_flops, attn_inputs, device_line, gemm_inputs, gpu_setup, md_table, write_json  # noqa: E402

SECONDS = float(os.environ.get("CLOCKS_SECONDS", "6"))


def sampled(fn, flop):
    """Run ``fn`` back to back for SECONDS; (TFLOP/s, median SM MHz, median W, max MHz seen)."""
    import torch
    from tlx_workbench.runtime.timing import event_ms
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks.max.sm",
                            "--format=csv,noheader,nounits", "-lms", "50"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    t0 = time.time()

    def back_to_back():
        n = 0
        while time.time() - t0 < SECONDS:
            for _ in range(10):
                fn()
            n += 10
            if n % 50 == 0:
                torch.cuda.synchronize()
        return n
    # one event pair around seconds of launches, not do_bench's flushed windows: the clock the board settles at
    n, total_ms = event_ms(back_to_back)
    ms = total_ms / n
    smi.terminate()
    out = smi.communicate()[0]
    rows = [[float(x) for x in line.split(",")] for line in out.strip().splitlines() if line.count(",") == 2]
    rows = rows[len(rows) // 5:]          # skip the ramp
    mhz = statistics.median(r[0] for r in rows)
    watts = statistics.median(r[1] for r in rows)
    return flop / ms / 1e9, mhz, watts, max(r[2] for r in rows)


def main():
    import torch
    F = torch.nn.functional
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels import gemm_ws
    gpu_setup()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    subjects = []
    for n in (4096, 8192):
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            a, b = gemm_inputs(n, n, n, dt)
            c = torch.empty(n, n, device="cuda", dtype=dt)
            subjects.append((f"gemm {n}^3 {dname}", "cublas", lambda a=a, b=b: torch.matmul(a, b), 2.0 * n ** 3))
            subjects.append((f"gemm {n}^3 {dname}", "gemm_ws",
                             lambda a=a, b=b, c=c: gemm_ws.launch(a, b, c, gemm_ws.CONFIGS[0]), 2.0 * n ** 3))
    for shape in ((4, 32, 4096, 128), (2, 32, 8192, 128)):
        for dname in ("float16", "bfloat16"):
            dt = getattr(torch, dname)
            q, k, v, scale = attn_inputs(shape, dt)
            o = torch.empty_like(q)
            fl = attn_flops(shape, False)
            cell = f"attention {'x'.join(map(str, shape))} {dname}"
            subjects.append((cell, "sdpa", lambda q=q, k=k, v=v, s=scale: F.scaled_dot_product_attention(
                q, k, v, scale=s), fl))
            subjects.append((cell, "ours", lambda q=q, k=k, v=v, o=o, s=scale: A.launch(
                q, k, v, o, False, s, A.CONFIGS[0]), fl))
    rows = []
    for cell, name, fn, flop in subjects:
        tf, mhz, watts, maxmhz = sampled(fn, flop)
        per_clk = tf * 1e12 / (sms * mhz * 1e6)
        rows.append(dict(cell=cell, subject=name, tflops=round(tf, 1), sm_mhz=round(mhz), max_mhz=round(maxmhz),
                         watts=round(watts), flop_per_clk_sm=round(per_clk)))
        print(rows[-1], flush=True)
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
