"""The calibration's L2 TMA loop with every CTA reading the same boxes in step (SPREAD=0, as the stored H200 readings
were taken) against each CTA starting at a box of its own (``suite.L2_SPREAD``), in interleaved rounds, one run.

    source .gpu/env.sh && python3 benchmarks/tma_spread.py --out $OUT/tma_spread.json      # ~30 s on a GPU

Per case (box rows, loads in flight, CTAs): bytes per cycle per CTA and cycles per load, the median of ``--rounds``
rounds of each form, as ``calibration.suite.measure_tma`` computes them.
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
    args = ap.parse_args(argv)
    import torch
    from tlx_workbench.calibration import suite
    from tlx_workbench.runtime.timing import event_ms
    rows = []
    for box_m in (64, 128, 256):
        hbm_rows = (2 << 30) // (box_m * 64 * 2)
        big = suite.tma_descriptor(hbm_rows, box_m, 64)
        region = max(1, (8 << 20) // (box_m * 64 * 2))
        for stages in (2, 4, 8):
            if stages * box_m * 64 * 2 > 200 * 1024:
                continue
            for ctas in (66, 132):
                runs = {0: [], suite.L2_SPREAD: []}
                for r in range(args.rounds):
                    for spread in (runs if r % 2 == 0 else list(runs)[::-1]):
                        (rec, nbytes), ms = event_ms(lambda: suite.launch_tma(box_m, 64, stages, ctas, 512, region,
                                                                              tensor=big, spread=spread))
                        per, _ = suite._per_cta(suite._records(rec, ctas))
                        cyc = statistics.median([x["cycles"] for x in per])
                        runs[spread].append(dict(bytes_per_cycle_per_cta=nbytes / cyc, cycles_per_load=cyc / 512))
                row = dict(box=[box_m, 64], stages=stages, ctas=ctas)
                for spread, rs in runs.items():
                    row[f"spread_{spread}"] = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
                rows.append(row)
                a, b = row["spread_0"], row[f"spread_{suite.L2_SPREAD}"]
                print(f"box {box_m}x64 stages {stages} ctas {ctas}: same boxes {a['bytes_per_cycle_per_cta']:.1f} "
                      f"B/cycle/CTA ({a['cycles_per_load']:.0f} cyc/load), own boxes {b['bytes_per_cycle_per_cta']:.1f} "
                      f"({b['cycles_per_load']:.0f})", flush=True)
        del big
        torch.cuda.empty_cache()
    dev = torch.cuda.get_device_properties(0)
    pathlib.Path(args.out).write_text(json.dumps(dict(
        device=dev.name, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        command="source .gpu/env.sh && python3 benchmarks/tma_spread.py --out OUT.json", rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
