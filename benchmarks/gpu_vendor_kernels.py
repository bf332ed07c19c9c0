"""Which kernels the vendor baselines launch (cuBLAS for torch.matmul, SDPA's backend), by name.

The names tell tile shape, cluster shape and schedule (e.g. ``..._tilesize128x256x64_cluster2x1x1_...``),
which says what our kernels are compared against.

    source .gpu/env.sh && python3 benchmarks/gpu_vendor_kernels.py      # writes vendor_kernels.json under $OUT
"""
from __future__ import annotations

import json
import os
import pathlib


def names(fn):
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})


def main():
    import torch
    F = torch.nn.functional
    out = {}
    for n in (4096, 8192):
        for dt in (torch.float16, torch.bfloat16):
            a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
            out[f"matmul {n}^3 {str(dt)[6:]}"] = names(lambda a=a, b=b: torch.matmul(a, b))
    for shape, causal in (((4, 32, 4096, 128), False), ((4, 32, 4096, 128), True), ((4, 32, 4096, 64), False)):
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
        out[f"sdpa {shape} causal={causal}"] = names(
            lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(q, k, v, is_causal=c))
    for k, v in out.items():
        print(k, "->", v)
    d = pathlib.Path(os.environ.get("OUT", "bench_out"))
    d.mkdir(parents=True, exist_ok=True)
    (d / "vendor_kernels.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
