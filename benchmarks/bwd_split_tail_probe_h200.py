"""Why the backward's SPLIT_TAIL lost 2-3 % on the H200 (tenth session): at (4, 32, 4096, 128) fp16 non-causal,
interleaved rounds of do_bench medians over
  default       the plain kernel, 2-D grid (32 K/V blocks x 128 heads);
  split_tail    31 whole waves + the 4 leftover blocks in 128 parts (+ the fp32 partials' zeroing and the cast);
  split_form    the split kernel with no tail (main_ctas = every block, a 1-D grid): the form's own cost;
  split_form_2d the same on the plain kernel's 2-D grid (not yet run: is it the grid or the code?);
  split_tail_2d the split tail launched on a 2-D grid (TAIL_2D; not yet run);
  tail_only     the cast kernel and the partials' zeroing alone.
    OUT=/tmp/p python benchmarks/bwd_split_tail_probe_h200.py      # ~1 min
"""
import json
import math
import os
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main():
    import torch
    import triton
    from tlx_workbench.kernels import attention_bwd as B
    from tlx_workbench.kernels._common import torch_alloc
    out = pathlib.Path(os.environ.get("OUT", "probe_out"))
    out.mkdir(parents=True, exist_ok=True)
    Z, H, N, D = 4, 32, 4096, 128
    torch.manual_seed(7)
    q, k, v, do = (torch.randn((Z, H, N, D), dtype=torch.float16, device="cuda") for _ in range(4))
    scale = 1 / math.sqrt(D)
    o, lse = [t.contiguous() for t in torch.ops.aten._scaled_dot_product_flash_attention(
        q, k, v, 0.0, False, False, scale=scale)[:2]]
    lse = lse.float().contiguous()
    triton.set_allocator(torch_alloc)
    dq32 = torch.empty(q.shape, dtype=torch.float32, device="cuda")
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    stats = B.row_statistics(o, do, lse)
    base = B.VARIANT_CONFIGS["lean_pingpong"]
    tail = B.VARIANT_CONFIGS["split_tail"]
    n_kv = triton.cdiv(N, 128)
    total = n_kv * Z * H
    part = torch.zeros((2, 4 * 128, D), dtype=torch.float32, device="cuda")
    plan = B.tail_split(Z, H, N, tail, False, torch.cuda.get_device_properties(0).multi_processor_count)

    def main_kernel(grid, split=None):
        """The main kernel alone (dQ zeroed; no dQ cast): the plain form, or with ``split`` the split form."""
        delta, lse2 = stats
        dq32.zero_()
        args, options = B._kernel_call(q, k, v, do, lse2, delta, dq32, dk, dv, False, scale, base, tail=split)
        B.attention_bwd_kernel[grid](*args, **options)

    no_tail = (part, total, 1, 1)         # the split form with every block a main CTA
    main_ctas, left = plan[0], plan[1]
    row0 = Z * H * N - left * 128         # N is a multiple of BN: the leftover blocks are the last rows

    def tail_only():
        p = torch.zeros((2, left * 128, D), dtype=torch.float32, device="cuda")
        B.attention_bwd_tail_cast_kernel[(left, 4)](p, dk.view(-1, D)[row0:], dv.view(-1, D)[row0:], N, main_ctas,
                                                    left, row0, HEAD_DIM=D, BN=128, ROWS=32)

    subjects = {
        "default": lambda: B.launch(q, k, v, o, do, lse, False, scale, base, dq32=dq32, stats=stats),
        "split_tail": lambda: B.launch(q, k, v, o, do, lse, False, scale, tail, dq32=dq32, stats=stats),
        "split_tail_2d": lambda: B.launch(q, k, v, o, do, lse, False, scale, B.VARIANT_CONFIGS["split_tail_2d"],
                                          dq32=dq32, stats=stats),
        "plain_kernel": lambda: main_kernel((n_kv, Z * H)),
        "split_form": lambda: main_kernel((total,), no_tail),
        "split_form_2d": lambda: main_kernel((n_kv, Z * H), no_tail),
        "tail_only": tail_only,
    }
    for fn in subjects.values():
        fn()
    torch.cuda.synchronize()
    times = {n: [] for n in subjects}
    for _ in range(5):
        for n, fn in subjects.items():
            times[n].append(float(triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")))
    med = {n: statistics.median(t) for n, t in times.items()}
    res = dict(shape=[Z, H, N, D], rounds_ms=times, median_ms=med, gpu=torch.cuda.get_device_name(0),
               plan=plan)
    (out / "bwd_split_tail_probe.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
