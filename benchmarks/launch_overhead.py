"""What a call of each library launcher costs on the host and on the GPU, next to its vendor op, in one run.

Per launcher and shape, warm (tuned and planned first) and in one process:

* host: microseconds of Python per call, 300 calls without a sync (``--calls``), the median of 5 such runs: what
  a caller's thread spends before the next line runs. For the library launchers also through Triton's JIT
  dispatch (``through_dispatch()``: the launch before launch plans) for comparison.
* do_bench: ``triton.testing.do_bench`` median (25 ms warm-up, 100 ms measured, L2 flushed between runs): the
  GPU time as a caller sees it, host time included where the host is the slower side.
* graph: CUDA-graph replay of 20 calls captured together, per call (the GPU's time alone).
* launch_bound: the timing runner's verdict (``tlx_workbench.runtime.timing``): do_bench well above the graph
  replay, or the host's time per call at least the GPU's.
* the ratios: host time over the vendor op's (goal <= 1.5), vendor do_bench over ours (goal >= 0.97).

Vendor ops: ``torch.matmul`` (fp16 GEMMs), ``torch._scaled_mm`` (FP8, per-tensor scales, B column-major, bf16
out), ``F.scaled_dot_product_attention`` (forward), ``aten._scaled_dot_product_flash_attention_backward`` (the
backward, on the flash forward's outputs).

    python3 benchmarks/launch_overhead.py --out $OUT/launch.json       # ~5 minutes on an H100, fresh caches

Writes the JSON (every row, the command, the device) to ``--out`` (a .json path, or a folder for
launch_overhead.json) after every section, the markdown table beside it (.md), and prints the table. Tuning: each
tuned launcher tunes over the first ``--tune-top`` configs of its space (the spaces are ordered best-first;
0: all), as ``matmul(..., config=None)`` then does with what it found; ``--budget`` seconds after which no new
section starts (a cut-short run still writes what it measured).
"""
from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from _harness import md_table, run_record, try_call, write_json  # noqa: E402
from tlx_workbench.runtime.timing import host_ms, time_call  # noqa: E402

GEMM_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (8192, 8192, 8192)]
FP8_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096)]
ATTN_SHAPES = [(1, 8, 1024, 128), (4, 8, 1024, 128)]
OTHER_GEMMS = ("gemm_pipelined", "gemm_pingpong", "gemm_streamk", "gemm_cluster")


# -- measurements --------------------------------------------------------------------------------------------

def host_us(fn, calls: int, runs: int = 5) -> float:
    """Median over ``runs`` of the host microseconds per call of ``calls`` calls without a sync (warm)."""
    return host_ms(fn, calls, runs) * 1e3


def host_pair_us(fn, vendor_fn, calls: int, runs: int = 5):
    """Host microseconds per call of ``fn`` and of ``vendor_fn``, measured in alternating runs (vendor, ours,
    ours, vendor, ...): the host's speed drifts over a process's life (the same launcher measured 14 and 23 us
    minutes apart on an H100 host), so each ratio compares neighbours. Returns (ours, vendor) medians."""
    ours, vendor = [], []
    for r in range(runs):
        pair = ((vendor_fn, vendor), (fn, ours)) if r % 2 == 0 else ((fn, ours), (vendor_fn, vendor))
        for f, out in pair:
            out.append(host_us(f, calls, runs=1))
    return statistics.median(ours), statistics.median(vendor)


def measure(fn, calls, log, label, graph=True, dispatch_fn=None, vendor_fn=None) -> dict:
    """host / do_bench / graph of ``fn`` (and host through Triton's dispatch, ``dispatch_fn``; with ``vendor_fn``,
    the host times of both in alternating runs, the vendor's as ``vendor_host_us``); do_bench and the graph replay
    are the timing runner's (``time_call``), whose verdict on the three is ``launch_bound``."""
    row = {}
    if vendor_fn is not None:
        pair = try_call(f"{label} host (with the vendor's)", lambda: host_pair_us(fn, vendor_fn, calls), log)
        if pair is not None:
            row["host_us"], row["vendor_host_us"] = pair
    else:
        row["host_us"] = try_call(f"{label} host", lambda: host_us(fn, calls), log)
    if dispatch_fn is not None:
        row["host_dispatch_us"] = try_call(f"{label} host (dispatch)", lambda: host_us(dispatch_fn, calls), log)
    t = try_call(f"{label} do_bench", lambda: time_call(fn, name=label, graph=graph), log)
    if t is None:
        return row
    row["bench_us"] = t.median_ms * 1e3
    if graph:
        row["graph_us"] = None if t.graph_ms is None else t.graph_ms * 1e3
        if t.graph_error:
            log.append({"what": f"{label} graph", "error": t.graph_error})
            print(f"  !! {label} graph: {t.graph_error}", flush=True)
    if row.get("host_us") is not None:
        t.host_ms = row["host_us"] / 1e3
    row["launch_bound"] = t.launch_bound
    return row


def through_dispatch(fn):
    from tlx_workbench.runtime.triton_launch import through_dispatch as ctx

    def run():
        with ctx():
            return fn()
    return run


def close(out, ref, tol) -> str:
    import torch
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return "nan"
    err = float((o - r).norm() / r.norm().clamp_min(1e-30))
    return "ok" if err <= tol else f"err {err:.2g}"


def bound(plans) -> bool:
    return any(getattr(p, "bound", None) is not None for p in plans.plans.values())


def tune_gemm(mod, a, b, top):
    """Seed ``matmul``'s tuned config for (a, b) by tuning over the first ``top`` configs (0: all)."""
    configs = mod.CONFIGS if not top else mod.CONFIGS[:top]
    key = (a.shape[0], b.shape[1], a.shape[1], a.dtype)
    if key not in mod.matmul.tuned:
        mod.matmul.tuned[key] = mod.tune(a, b, configs)[0][0]


# -- the items, in priority order ------------------------------------------------------------------------------

class Bench:
    """The run's state: rows, error log, arguments, each shape's inputs and vendor row (measured once)."""

    def __init__(self, args):
        self.args, self.rows, self.log = args, [], []
        self.inputs, self.vendor = {}, {}

    def top(self, configs, top):
        return configs if not top else configs[:top]

    # GEMM fp16 -------------------------------------------------------------------------------------------------
    def gemm_operands(self, M, N, K):
        import torch
        key = ("gemm", M, N, K)
        if key not in self.inputs:
            self.inputs[key] = (torch.randn(M, K, device="cuda", dtype=torch.float16),
                                torch.randn(K, N, device="cuda", dtype=torch.float16))
        a, b = self.inputs[key]
        shape = f"{M}x{N}x{K} fp16"
        if key not in self.vendor:
            self.vendor[key] = measure(lambda: torch.matmul(a, b), self.args.calls, self.log, f"torch.matmul {shape}")
            self.rows.append(dict(call="torch.matmul", shape=shape, **self.vendor[key]))
        return a, b, shape, self.vendor[key]

    def gemm(self, name, M, N, K, top=None, default_config=False):
        import importlib

        import torch
        mod = importlib.import_module(f"tlx_workbench.kernels.{name}")
        a, b, shape, vendor = self.gemm_operands(M, N, K)
        label = f"{name}.matmul {shape}"
        cfg = mod.CONFIGS[0] if default_config else None
        if cfg is None:
            try_call(f"{label} tune", lambda: tune_gemm(mod, a, b, top), self.log)
        out = try_call(f"{label} first call", lambda: mod.matmul(a, b, cfg), self.log)
        if out is None:
            return
        ok = close(out, a.float() @ b.float(), 1e-2)
        fn = (lambda: mod.matmul(a, b, cfg))
        row = measure(fn, self.args.calls, self.log, label, dispatch_fn=through_dispatch(fn),
                      vendor_fn=lambda: torch.matmul(a, b))
        self.rows.append(dict(call=f"{name}.matmul" + (" (CONFIGS[0])" if default_config else ""), shape=shape,
                              check=ok, bound=bound(mod.matmul.plans), **row, **ratios(row, vendor)))

    # FP8 -------------------------------------------------------------------------------------------------------
    def fp8(self, M, N, K, top):
        import torch
        from tlx_workbench.kernels import gemm_fp8
        shape = f"{M}x{N}x{K} e4m3"
        a, b, sa, sb = gemm_fp8.make_inputs((M, N, K), "float8_e4m3fn", "cuda")      # b column-major
        vendor = measure(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16), self.args.calls,
                         self.log, f"_scaled_mm {shape}")
        self.rows.append(dict(call="torch._scaled_mm", shape=shape, **vendor))
        bt = gemm_fp8.k_major_b(b)
        c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
        key = (M, N, K, a.dtype, b.dtype, torch.bfloat16, False, False)
        if key not in gemm_fp8.matmul_fp8.tuned:
            try_call(f"matmul_fp8 {shape} tune", lambda: gemm_fp8.matmul_fp8.tuned.__setitem__(
                key, gemm_fp8.tune(a, bt, sa, sb, c, self.top(gemm_fp8.CONFIGS, top))[0][0]), self.log)
        out = try_call(f"matmul_fp8 {shape} first call", lambda: gemm_fp8.matmul_fp8(a, b, sa, sb), self.log)
        if out is None:
            return
        ok = close(out, (a.float() @ b.float()) * sa * sb, 1e-2)
        fn = lambda: gemm_fp8.matmul_fp8(a, b, sa, sb)  # noqa: E731
        row = measure(fn, self.args.calls, self.log, f"matmul_fp8 {shape}", dispatch_fn=through_dispatch(fn),
                      vendor_fn=lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16))
        self.rows.append(dict(call="gemm_fp8.matmul_fp8", shape=shape, check=ok,
                              bound=bound(gemm_fp8.matmul_fp8.plans), **row, **ratios(row, vendor)))

    # attention -------------------------------------------------------------------------------------------------
    def attention_operands(self, shape):
        import torch
        key = ("attention", shape)
        if key not in self.inputs:
            self.inputs[key] = tuple(torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(4))
        return self.inputs[key], "x".join(map(str, shape)) + " fp16"

    def attention(self, shape, top):
        import torch.nn.functional as F
        from tlx_workbench.kernels import attention as A
        (q, k, v, _), name = self.attention_operands(shape)
        vendor = measure(lambda: F.scaled_dot_product_attention(q, k, v), self.args.calls, self.log, f"sdpa {name}")
        self.rows.append(dict(call="sdpa", shape=name, **vendor))
        tkey = (tuple(q.shape), q.dtype, False)
        if tkey not in A.attention.tuned:
            configs = self.top(A.configs_for(shape[-1], False, shape[2]), top)
            try_call(f"attention {name} tune", lambda: A.attention.tuned.__setitem__(
                tkey, A.tune(q, k, v, False, 1 / math.sqrt(shape[-1]), configs)[0][0]), self.log)
        out = try_call(f"attention {name} first call", lambda: A.attention(q, k, v), self.log)
        if out is None:
            return
        ok = close(out, F.scaled_dot_product_attention(q, k, v), 2e-2)
        fn = lambda: A.attention(q, k, v)  # noqa: E731
        row = measure(fn, self.args.calls, self.log, f"attention {name}", dispatch_fn=through_dispatch(fn),
                      vendor_fn=lambda: F.scaled_dot_product_attention(q, k, v))
        self.rows.append(dict(call="attention.attention", shape=name, check=ok, bound=bound(A.attention.plans),
                              **row, **ratios(row, vendor)))

    def attention_backward(self, shape, top):
        """The flash backward op on the flash forward's outputs, vs attention_backward on ours."""
        import torch
        from tlx_workbench.kernels import attention as A
        from tlx_workbench.kernels import attention_bwd as B
        (q, k, v, do), name = self.attention_operands(shape)
        scale = 1 / math.sqrt(shape[-1])
        fwd = try_call("flash forward", lambda: torch.ops.aten._scaled_dot_product_flash_attention(
            q, k, v, 0.0, False, return_debug_mask=False, scale=scale), self.log)
        if fwd is None:
            return
        o_f, lse_f, cq, ck, mq, mk, seed, off, _ = fwd

        def flash_bwd():
            return torch.ops.aten._scaled_dot_product_flash_attention_backward(
                do, q, k, v, o_f, lse_f, cq, ck, mq, mk, 0.0, False, seed, off, scale=scale)
        vendor = measure(flash_bwd, self.args.bwd_calls, self.log, f"flash backward {name}")
        self.rows.append(dict(call="aten flash backward", shape=name, **vendor))
        o, lse = A.attention(q, k, v, return_lse=True)
        bkey = (tuple(q.shape), q.dtype, False)
        if bkey not in B.attention_backward.tuned:
            configs = self.top(B.configs_for(shape[-1], False), top)
            try_call(f"attention_backward {name} tune", lambda: B.attention_backward.tuned.__setitem__(
                bkey, B.tune(q, k, v, o, do, lse, False, scale, configs)[0][0]), self.log)
        got = try_call(f"attention_backward {name} first call", lambda: B.attention_backward(q, k, v, o, do, lse),
                       self.log)
        if got is None:
            return
        ok = ", ".join(close(g, r, 3e-2) for g, r in zip(got, flash_bwd()))
        fn = lambda: B.attention_backward(q, k, v, o, do, lse)  # noqa: E731
        row = measure(fn, self.args.bwd_calls, self.log, f"attention_backward {name}",
                      dispatch_fn=through_dispatch(fn), vendor_fn=flash_bwd)
        self.rows.append(dict(call="attention_bwd.attention_backward", shape=name, check=ok,
                              bound=bound(B.launch.plans), **row, **ratios(row, vendor)))


def host_profile(fn, calls: int, top: int = 40) -> str:
    """cProfile of ``calls`` warm calls of ``fn`` (no sync between): where a call's host time goes, by own time."""
    import cProfile
    import io
    import pstats

    import torch
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def profiles(bench: Bench, calls: int) -> dict:
    """Host profiles of the launchers at their goal shapes (warm: run after the items that tuned them)."""
    import torch
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels import attention_bwd as B
    from tlx_workbench.kernels import gemm_ws
    out = {}
    (q, k, v, do), _ = bench.attention_operands(ATTN_SHAPES[0])
    o, lse = A.attention(q, k, v, return_lse=True)
    out["attention_backward"] = host_profile(lambda: B.attention_backward(q, k, v, o, do, lse), calls)
    out["attention"] = host_profile(lambda: A.attention(q, k, v), calls)
    a, b, _, _ = bench.gemm_operands(2048, 2048, 2048)
    out["gemm_ws"] = host_profile(lambda: gemm_ws.matmul(a, b), calls)
    out["torch.matmul"] = host_profile(lambda: torch.matmul(a, b), calls)
    return out


def items(bench: Bench, args):
    """(label, callable) in priority order: the goal cells first (tuned over their whole spaces, or the first
    ``--tune-top`` configs where a space is large), then the large shapes and the other launchers."""
    out = []
    for M, N, K in GEMM_SHAPES[:2]:
        out.append((f"gemm_ws {M}^3", lambda M=M, N=N, K=K: bench.gemm("gemm_ws", M, N, K, top=0)))
    for M, N, K in FP8_SHAPES:
        out.append((f"fp8 {M}^3", lambda M=M, N=N, K=K: bench.fp8(M, N, K, args.tune_top + 2)))
    for shape in ATTN_SHAPES:
        out.append((f"attention {shape}", lambda shape=shape: bench.attention(shape, 0)))
    out.append((f"attention_backward {ATTN_SHAPES[0]}",
                lambda: bench.attention_backward(ATTN_SHAPES[0], args.tune_top)))
    big = GEMM_SHAPES[2]
    out.append((f"gemm_ws {big[0]}^3", lambda: bench.gemm("gemm_ws", *big, top=args.tune_top)))
    for name in OTHER_GEMMS:
        for M, N, K in GEMM_SHAPES[:2]:
            out.append((f"{name} {M}^3", lambda name=name, M=M, N=N, K=K: bench.gemm(name, M, N, K,
                                                                                     default_config=True)))
    return out


def ratios(row, vendor) -> dict:
    out = {}
    vendor_host = row.get("vendor_host_us") or vendor.get("host_us")
    if row.get("host_us") and vendor_host:
        out["host_vs_vendor"] = row["host_us"] / vendor_host
    if row.get("bench_us") and vendor.get("bench_us"):
        out["vendor_over_ours"] = vendor["bench_us"] / row["bench_us"]
    if row.get("graph_us") and vendor.get("graph_us"):
        out["graph_vendor_over_ours"] = vendor["graph_us"] / row["graph_us"]
    return out


COLS = ["call", "shape", "host_us", "vendor_host_us", "host_dispatch_us", "bench_us", "graph_us", "launch_bound",
        "host_vs_vendor", "vendor_over_ours", "graph_vendor_over_ours", "check", "bound"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="a .json path, or a folder (launch_overhead.json in it)")
    p.add_argument("--calls", type=int, default=300, help="calls per host-time run (no sync between)")
    p.add_argument("--bwd-calls", type=int, default=100, help="the same for the backward (several kernels a call)")
    p.add_argument("--tune-top", type=int, default=4,
                   help="the large spaces (FP8: this + 2, the backward, GEMM 8192^3) tune over their first N configs")
    p.add_argument("--budget", type=float, default=300.0, help="seconds after which no new item starts")
    p.add_argument("--only", action="append", help="items whose label starts with this (gemm_ws, fp8, attention...)")
    p.add_argument("--profile", action="store_true",
                   help="after the items, cProfile each launcher's warm calls (launch_overhead_profile.txt)")
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    json_path = out if out.suffix == ".json" else out / "launch_overhead.json"
    import torch
    import triton
    from tlx_workbench.kernels._common import torch_alloc
    torch.manual_seed(0)
    triton.set_allocator(torch_alloc)
    t0 = time.time()
    bench = Bench(args)
    rows, log = bench.rows, bench.log
    payload = run_record(rows=rows, errors=log, calls=args.calls, tune_top=args.tune_top)
    skipped = []
    for label, item in items(bench, args):
        if args.only and not any(label.startswith(o) for o in args.only):
            continue
        if time.time() - t0 > args.budget:
            skipped.append(label)
            continue
        print(f"-- {label} ({time.time() - t0:.0f} s)", flush=True)
        n = len(rows)
        try_call(label, item, log)
        write_json(json_path.parent, json_path.stem, payload)
        print(md_table(rows[n:], COLS), flush=True)
    if args.profile:
        found = try_call("profiles", lambda: profiles(bench, args.bwd_calls), log) or {}
        json_path.with_name(json_path.stem + "_profile.txt").write_text(
            "".join(f"==== {name}\n{text}\n" for name, text in found.items()))
    payload["skipped"] = skipped
    payload["seconds"] = time.time() - t0
    write_json(json_path.parent, json_path.stem, payload)
    md = (f"# Launch overhead: host time per call, do_bench and CUDA-graph replay (us)\n\n{payload['device']}, "
          f"{payload['date']}\n\n`{payload['command']}`\n\n" + md_table(rows, COLS))
    if skipped:
        md += f"\nskipped (budget of {args.budget:.0f} s spent): " + "; ".join(skipped) + "\n"
    if log:
        md += "\n## errors\n" + "\n".join(f"- {e['what']}: {e['error']}" for e in log) + "\n"
    json_path.with_suffix(".md").write_text(md)
    print(md)
    return payload


if __name__ == "__main__":
    main()
