"""Does a TMA load take fixed SM cycles or fixed nanoseconds? The calibration's TMA loop alone (the SMs at boost)
against the same loop while the wgmma loop runs on the other SMs (the board lowers every SM's clock), one run.

    source .gpu/env.sh && python3 benchmarks/tma_clock.py --out $OUT/tma_clock.json      # ~30 s on a GPU

The calibration's TMA loops all run at the boost clock (short launches, no tensor load), while a GEMM's loads run
at the clock its tensor load holds (1.3-1.7 GHz on an H100). If the L2 and the HBM keep their own clocks, a load's
latency is fixed in nanoseconds and takes fewer SM cycles at a lower SM clock; if they follow the SM clock, its
cycles stay. Per case (box, loads in flight, L2 or HBM, CTAs): cycles and nanoseconds per load and the loop's SM
clock (per-CTA ``clock64`` over ``globaltimer``), alone and beside the wgmma loop, interleaved over ``--rounds``.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ctas", type=int, default=32, help="the TMA loop's CTAs (the wgmma loop takes 132 - this)")
    args = ap.parse_args(argv)
    import torch
    from tlx_workbench.calibration import suite
    hot = torch.cuda.Stream()
    box_m, ctas = 128, args.ctas
    big = suite.tma_descriptor((2 << 30) // (box_m * 64 * 2), box_m, 64)
    l2_region = max(1, (8 << 20) // (box_m * 64 * 2))
    mma = suite.mma_tensors("float16", 256, 2, ctas=132 - ctas)
    suite.launch_mma("float16", 256, 2, iters=16, ctas=132 - ctas, tensors=mma)
    rows = []
    for where in ("l2", "hbm"):
        for stages in (1, 2, 4, 8):
            iters = 256 if stages <= 2 else 1024
            region = l2_region if where == "l2" else big[0].shape[0] // box_m
            suite.launch_tma(box_m, 64, stages, ctas, 16, region, tensor=big)         # compile
            torch.cuda.synchronize()
            got = {"alone": [], "beside wgmma": []}
            for r in range(args.rounds):
                for mode in (got if r % 2 == 0 else list(got)[::-1]):
                    if mode != "alone":
                        with torch.cuda.stream(hot):          # ~1 s of wgmma on the other SMs: the clock falls
                            suite.launch_mma("float16", 256, 2, iters=1_500_000, ctas=132 - ctas, tensors=mma)
                        time.sleep(0.7)
                    rec, nbytes = suite.launch_tma(box_m, 64, stages, ctas, iters, region, tensor=big)
                    torch.cuda.synchronize()
                    per, _ = suite._per_cta(suite._records(rec, ctas))
                    cyc = statistics.median(r["cycles"] for r in per)
                    ns = statistics.median(r["ns"] for r in per)
                    got[mode].append(dict(cycles_per_load=cyc / iters, ns_per_load=ns / iters, clock_ghz=cyc / ns,
                                          bytes_per_ns_per_cta=nbytes / ns))
                    hot.synchronize()
                    time.sleep(0.3)
            for mode, runs in got.items():
                med = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
                rows.append(dict(where=where, box=[box_m, 64], stages=stages, ctas=ctas, mode=mode, **med))
                print(f"{where} {stages} in flight {mode:13s}: {med['cycles_per_load']:7.1f} cycles "
                      f"{med['ns_per_load']:7.1f} ns per load at {med['clock_ghz']:.3f} GHz", flush=True)
    dev = torch.cuda.get_device_properties(0)
    out = dict(device=f"{dev.name}, {dev.multi_processor_count} SMs", date=time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                          time.gmtime()),
               command="source .gpu/env.sh && python3 benchmarks/tma_clock.py --out $OUT/tma_clock.json", rows=rows)
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
