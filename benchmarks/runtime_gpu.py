"""GPU measurements of the runtime: verified runs, watchdog, bench vs cuBLAS/SDPA, measured timeline.

Run on the H200 (after `source .gpu/env.sh`):  python3 benchmarks/runtime_gpu.py
Writes $OUT/runtime_gpu.json and $OUT/runtime_timeline.png (or ./ when $OUT is unset).
"""
import importlib.util
import json
import os
import pathlib
import time

import torch

import tlx_workbench as wb
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.runtime import KernelTimeoutError, cublas_matmul, torch_sdpa
from tlx_workbench.runtime.profiling import timeline_png

OUT = pathlib.Path(os.environ.get("OUT", "."))
from _harness import run_record  # noqa: E402

res = run_record()


def rand(*shape, dtype=torch.float16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=dtype)


def step(name, fn):
    t = time.perf_counter()
    try:
        fn()
        print(f"[{name}] ok in {time.perf_counter() - t:.1f} s", flush=True)
    except Exception as e:  # keep going: one broken step must not hide the others
        res[name + "_error"] = f"{type(e).__name__}: {e}"
        print(f"[{name}] FAILED: {type(e).__name__}: {e}", flush=True)


def gemm():
    M = N = K = 4096
    a, b = rand(M, K, seed=1), rand(K, N, seed=2)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    cfg = gemm_ws.CONFIGS[0]
    t = time.perf_counter()
    r = wb.run(gemm_ws.launch, a, b, c, cfg, outputs=("c",), reference=lambda a, b, c, cfg: a @ b)
    res["gemm_first_run_s"] = time.perf_counter() - t          # worker start + compile + launch
    t = time.perf_counter()
    wb.run(gemm_ws.launch, a, b, c, cfg, outputs=("c",))
    res["gemm_warm_run_s"] = time.perf_counter() - t           # warm worker: IPC + launch + sync
    res["gemm_check"] = {"ok": r.ok, "rel_error": r.comparisons[0].rel_error}
    b_res = wb.bench(gemm_ws.launch, a, b, c, cfg, flops=2 * M * N * K, baselines={"cuBLAS": cublas_matmul(a, b)})
    print(b_res, flush=True)
    res["gemm_bench"] = b_res.table()
    res["ceilings"] = b_res.ceilings
    local = wb.bench(gemm_ws.launch, a, b, c, cfg, flops=2 * M * N * K, isolate=False, with_ceilings=False)
    res["gemm_bench_in_process_median_ms"] = local.median_ms   # the worker must not change the kernel's time


def profile_gemm():
    M = N = K = 4096
    a, b = rand(M, K, seed=3), rand(K, N, seed=4)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tr = wb.profile(gemm_ws.launch, a, b, c, gemm_ws.CONFIGS[0], kernel="gemm_ws_coop_kernel")
    res["profile_lanes"] = [list(map(str, l)) for l in tr.lanes()]
    res["profile_spans"] = len(tr.spans)
    res["profile_summary"] = [dict(task=s.task, replica=s.replica, busy_share=s.busy_share, mma_share=s.mma_share)
                              for s in tr.summary() if s.cta == 0]
    res["profile_output_ok"] = bool(torch.allclose(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1))
    timeline_png(tr, str(OUT / "runtime_timeline.png"), title="gemm_ws_coop_kernel 4096³ fp16, CTA 0, H200 (clock64)")
    tr.save(str(OUT / "runtime_timeline_trace.json"))


def attention():
    spec = importlib.util.spec_from_file_location(
        "hopper_fa_ws_tut", pathlib.Path(__import__("tlx").__file__).parent / "tutorials" / "hopper_fa_ws.py")
    fa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fa)
    D = 128
    scale = D ** -0.5
    # checked at a size whose float64 reference (S x S scores in fp64) stays small, timed at a larger one
    q, k, v = (rand(2, 16, 2048, D, seed=20 + i) for i in range(3))
    r = wb.run(fa.attention, q, k, v, scale,
               reference=lambda q, k, v, s: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=s))
    res["fa_check"] = {"ok": r.ok, "rel_error": r.comparisons[0].rel_error, "shape": [2, 16, 2048, D]}
    Z, H, S = 4, 32, 4096
    q, k, v = (rand(Z, H, S, D, seed=30 + i) for i in range(3))
    res["fa_bench_shape"] = [Z, H, S, D]
    b_res = wb.bench(fa.attention, q, k, v, scale, flops=4 * Z * H * S * S * D,
                     baselines={"SDPA": torch_sdpa(q, k, v, scale=scale)})
    print(b_res, flush=True)
    res["fa_bench"] = b_res.table()


def watchdog():
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "runtime"))
    import gpu_kernels
    out = torch.zeros(1, device="cuda")
    t = time.perf_counter()
    try:
        wb.run(gpu_kernels.handshake, out, grid=(1,), ARRIVE_COUNT=2, timeout=5)
        res["watchdog"] = "NOT STOPPED"
    except KernelTimeoutError as e:
        res["watchdog"] = {"stopped_after_s": time.perf_counter() - t, "message": e.message}
    t = time.perf_counter()
    ok = wb.run(gpu_kernels.handshake, out, grid=(1,), ARRIVE_COUNT=1, reference=lambda o: torch.ones(1))
    res["watchdog_next_run"] = {"ok": ok.ok, "seconds_incl_new_worker": time.perf_counter() - t}


def proton():
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "runtime"))
    import gpu_kernels
    n = 1 << 22
    x, y = rand(n, dtype=torch.float32, seed=40), rand(n, dtype=torch.float32, seed=41)
    z = torch.zeros_like(x)
    for method in ("proton", "clock"):
        try:
            tr = wb.profile(gpu_kernels.plain_add, x, y, z, n, grid=(n // 1024,), BLOCK=1024, method=method)
            res[f"plain_add_{method}"] = {"meta": tr.meta, "spans": len(tr.spans), "lanes": len(tr.lanes())}
        except Exception as e:
            res[f"plain_add_{method}"] = f"{type(e).__name__}: {str(e)[:400]}"
    try:   # does Proton still fail inside a warp-specialized TLX kernel?
        M = 1024
        a, b = rand(M, M, seed=5), rand(M, M, seed=6)
        c = torch.zeros(M, M, device="cuda", dtype=torch.float16)
        tr = wb.profile(gemm_ws.launch, a, b, c, gemm_ws.CONFIGS[0], kernel="gemm_ws_coop_kernel", method="proton")
        res["gemm_ws_proton"] = {"meta": tr.meta, "spans": len(tr.spans)}
    except Exception as e:
        res["gemm_ws_proton"] = f"{type(e).__name__}: {str(e)[:400]}"


def main():
    for name, fn in (("gemm", gemm), ("profile", profile_gemm), ("attention", attention), ("watchdog", watchdog),
                     ("proton", proton)):
        step(name, fn)
    wb.runtime.shutdown()
    (OUT / "runtime_gpu.json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: v for k, v in res.items() if "bench" not in k}, indent=1, default=str))


# the watchdog worker is a *spawned* process: it re-imports this file as __mp_main__, so the
# measurements must only run under the guard
if __name__ == "__main__":
    main()
