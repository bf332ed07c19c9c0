"""What do_bench adds to a kernel beyond its CUDA-graph replay, per kind of launch: is a launcher's do_bench gap to
its vendor op the kernel or the launch inside do_bench's window?

    source .gpu/env.sh && python3 benchmarks/launch_window.py --out $OUT/launch_window.json      # on a GPU, ~1 min

Times, interleaved over ``--rounds`` rounds (the timing runner's do_bench median, L2 flushed, and its CUDA-graph
replay): an empty Triton kernel with no arguments, the same with three TMA descriptors passed by value (as the
library's GEMM launches take A, B and C), ``torch.matmul`` and ``gemm_ws.matmul`` at 1024³ fp16, and the cost model's
1024³ cells that its do_bench times miss (``cost_model_cells``). For each, do_bench
minus graph replay is what the window adds: the launch's own latency, and the host's path wherever it outlasts
the flush queued before it. Prints a table and writes ``--out``.

Three more columns split do_bench's window by what the flush leaves cold (each the median of ``--calls`` calls
between two events, one call per window, as do_bench times them): ``flushed`` (the L2 flushed before each call:
do_bench's own conditions), ``data warm`` (flushed, then the GEMM's operands read back into the L2, so only the
kernel's code, parameters and descriptors come from HBM) and ``warm`` (nothing flushed).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import triton
import triton.language as tl

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


@triton.jit
def empty(x_ptr):
    pass


@triton.jit
def empty_descs(a_desc, b_desc, c_desc, x_ptr, N: tl.constexpr):
    pass


def subjects(n=1024):
    """(name, fn, operands) of every launch timed."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    from tlx_workbench.kernels import gemm_ws
    x = torch.empty(1, device="cuda")
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    descs = [TensorDescriptor(t, list(t.shape), [n, 1], [128, 64]) for t in (a, b, c)]
    return [
        ("empty kernel, 132 CTAs", lambda: empty[(132,)](x), ()),
        ("empty kernel + 3 TMA descriptors, 132 CTAs", lambda: empty_descs[(132,)](*descs, x, N=n), ()),
        (f"torch.matmul {n}^3 fp16", lambda: torch.matmul(a, b), (a, b)),
        (f"gemm_ws.matmul {n}^3 fp16", lambda: gemm_ws.matmul(a, b), (a, b)),
    ] + cost_model_cells(n)


def cost_model_cells(n):
    """The cost model's two validation cells at ``n``³ that its do_bench times miss most: ``gemm_pingpong`` (its
    default config) through its launch plan and through Triton's JIT dispatch (as launches were timed before launch
    plans), and TLX's tutorial ``hopper_gemm_ws`` (config c0) through its own launcher, unchanged."""
    from predict_cells import make_call
    from tlx_workbench.runtime.triton_launch import through_dispatch
    pingpong, _ = make_call(dict(kind="gemm", kernel="gemm_pingpong", config="default", shape=[n, n, n]))
    tutorial, _ = make_call(dict(kind="gemm", kernel="tut:hopper_gemm_ws", config="c0", shape=[n, n, n]))

    def dispatched():
        with through_dispatch():
            return pingpong()
    return [(f"gemm_pingpong.launch {n}^3 (CONFIGS[0]), launch plan", pingpong, ()),
            (f"gemm_pingpong.launch {n}^3 (CONFIGS[0]), Triton's dispatch", dispatched, ()),
            (f"tutorial hopper_gemm_ws {n}^3 (c0), its own launcher", tutorial, ())]


def window_us(fn, calls: int, flush: bool, warm=()) -> float:
    """Median microseconds of ``calls`` calls of ``fn``, each between two events; with ``flush`` the L2 is flushed
    before each (a 256 MB write, as do_bench does), and then the tensors ``warm`` read back into it."""
    import torch
    cache = torch.empty(256 * 2 ** 20, dtype=torch.int8, device="cuda")
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    fn()
    for start, end in ev:
        if flush:
            cache.zero_()
            for t in warm:
                t.sum(dtype=torch.float32)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="a .json path")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=200, help="calls per window column")
    args = ap.parse_args(argv)
    import torch
    from tlx_workbench.kernels._common import torch_alloc
    from tlx_workbench.runtime.timing import time_call
    triton.set_allocator(torch_alloc)
    subs = subjects()
    for _, fn, _ in subs:
        fn()
    torch.cuda.synchronize()
    runs = {name: [] for name, _, _ in subs}
    keys = ("bench_us", "graph_us", "host_us", "flushed_us", "data_warm_us", "warm_us")
    for r in range(args.rounds):
        for name, fn, ops in (subs if r % 2 == 0 else subs[::-1]):
            t = time_call(fn, name=name, graph=True, host=True)
            runs[name].append(dict(bench_us=t.median_ms * 1e3, graph_us=t.graph_ms * 1e3, host_us=t.host_ms * 1e3,
                                   flushed_us=window_us(fn, args.calls, True),
                                   data_warm_us=window_us(fn, args.calls, True, ops),
                                   warm_us=window_us(fn, args.calls, False)))
    rows = []
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        rows.append(dict(call=name, **med, window_us=med["bench_us"] - med["graph_us"], rounds=rs))
    dev = torch.cuda.get_device_properties(0)
    data = dict(device=f"{dev.name}, torch {torch.__version__}, triton {triton.__version__}",
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                command="source .gpu/env.sh && python3 benchmarks/launch_window.py --out OUT.json", rows=rows)
    pathlib.Path(args.out).write_text(json.dumps(data, indent=1))
    print("| call | do_bench µs | graph µs | do_bench - graph µs | host µs | flushed µs | data warm µs | warm µs |\n"
          "|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['call']} | {r['bench_us']:.2f} | {r['graph_us']:.2f} | {r['window_us']:.2f} | {r['host_us']:.1f} "
              f"| {r['flushed_us']:.2f} | {r['data_warm_us']:.2f} | {r['warm_us']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
