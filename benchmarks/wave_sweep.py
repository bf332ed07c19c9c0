"""Where a short launch's time goes: the same attention kernel over 1 to 128 heads (N=1024, D=128: 8 to 1024 CTAs,
0.06 to 7.8 waves on 132 SMs), measured and predicted. A straight line through time against waves splits it into
what each wave costs (the slope) and what the launch costs once (the intercept); the model's line beside the GPU's
says which of the two it misses. The GPU side also times each launch with the L2 warm (a CUDA graph of launches
back to back, no flush between), so that a cold L2's share shows as the gap between the flushed and warm lines.

    source .gpu/env.sh && python3 benchmarks/wave_sweep.py --gpu --out $OUT      # -> wave_sweep.json
    .venv/bin/python benchmarks/wave_sweep.py --measured results/wave_sweep_h100_<date>.json   # the model beside it
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
KERNELS = (("attention", "default"), ("tut:hopper_fa_ws_pipelined", "c1"))


def cells():
    return [dict(kind="attention", kernel=k, config=c, shape=[1, h, 1024, 128], causal=False)
            for k, c in KERNELS for h in HEADS]


def measure(out_dir):
    """do_bench (L2 flushed), and CUDA-graph replays flushed and warm, of every cell on this GPU."""
    import torch
    import triton
    from _harness import bench_ms
    from predict_cells import make_call
    from tlx_workbench.kernels._common import torch_alloc
    from tlx_workbench.runtime.timing import graph_ms
    triton.set_allocator(torch_alloc)
    rows = []
    for cell in cells():
        fn = make_call(cell, "cuda")[0]
        fn()
        torch.cuda.synchronize()
        row = dict(cell=cell, do_bench_us=bench_ms(fn, warmup=30, rep=120) * 1e3,
                   graph_flushed_us=graph_ms(fn, per_graph=50, replays=5, flush=True) * 1e3,
                   graph_warm_us=graph_ms(fn, per_graph=50, replays=5, flush=False) * 1e3)
        rows.append(row)
        print(f"{cell['kernel']:32s} H={cell['shape'][1]:4d}  do_bench {row['do_bench_us']:8.1f}  graph flushed "
              f"{row['graph_flushed_us']:8.1f}  warm {row['graph_warm_us']:8.1f} us", flush=True)
    dev = torch.cuda.get_device_properties(0)
    data = dict(device=f"{dev.name}, {dev.multi_processor_count} SMs", sms=dev.multi_processor_count,
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                command="source .gpu/env.sh && python3 benchmarks/wave_sweep.py --gpu", rows=rows)
    path = pathlib.Path(out_dir) / "wave_sweep.json"
    path.write_text(json.dumps(data, indent=1))
    print("wrote", path)


def compare(measured_path, gpu):
    """The model's time per cell beside the measured ones, and each kernel's line (intercept, slope per wave) over
    the cells of at least one full wave."""
    import numpy as np
    import tlx_workbench as wb
    from cost_model_validation import make_launch
    data = json.loads(pathlib.Path(measured_path).read_text())
    sms = data.get("sms", 132)
    out = []
    for row in data["rows"]:
        cell = row["cell"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with wb.offline(gpu):
                p = wb.predict(make_launch(cell), gpu=gpu, samples=8)
        # waves of work: 128-row query tiles over the SMs (the library's kernel is persistent: its grid is the SMs)
        waves = cell["shape"][2] // 128 * cell["shape"][1] / sms
        out.append(dict(row, predicted_us=p.us, waves=waves))
        print(f"{cell['kernel']:32s} H={cell['shape'][1]:4d} waves {waves:5.2f}  predicted {p.us:8.1f}  "
              f"do_bench {row['do_bench_us']:8.1f}  flushed {row['graph_flushed_us']:8.1f}  warm "
              f"{row['graph_warm_us']:8.1f} us", flush=True)
    lines = {}
    for kernel, _ in KERNELS:
        rs = [r for r in out if r["cell"]["kernel"] == kernel and r["waves"] >= 1]
        if len(rs) < 2:
            continue
        xs = [r["waves"] for r in rs]
        # least squares: (intercept, slope per wave)
        lines[kernel] = {name: tuple(float(v) for v in np.polyfit(xs, [r[name] for r in rs], 1)[::-1])
                         for name in ("predicted_us", "do_bench_us", "graph_flushed_us", "graph_warm_us")}
        for name, (a, b) in lines[kernel].items():
            print(f"{kernel:32s} {name:18s} {a:7.1f} us + {b:6.2f} us a wave")
    return dict(gpu=gpu, measured=str(measured_path), rows=out, lines=lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="measure on this GPU")
    ap.add_argument("--out", default=".", help="--gpu: the folder for wave_sweep.json")
    ap.add_argument("--measured", help="a --gpu run's JSON: predict the same cells beside it")
    ap.add_argument("--gpu-model", default="H100")
    args = ap.parse_args(argv)
    if args.gpu:
        return measure(args.out)
    if args.measured:
        res = compare(args.measured, args.gpu_model)
        path = HERE / "predict" / f"wave_sweep_{args.gpu_model.lower()}.json"
        path.write_text(json.dumps(res, indent=1))
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
