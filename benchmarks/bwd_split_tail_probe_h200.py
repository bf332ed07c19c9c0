"""Where the backward's SPLIT_TAIL time goes on the H200, at (4, 32, 4096, 128) fp16 non-causal: interleaved rounds
of do_bench medians over
  default       launch() with the default (the plain kernel, 2-D grid of 32 K/V blocks x 128 heads, dQ's cast);
  split_tail    launch() with SPLIT_TAIL: the plain kernel on the first heads, the last heads' blocks in parts,
                the partials' zeroing and cast, dQ's cast;
  plain_kernel  the plain kernel alone on every head (dQ zeroed, no dQ cast);
  main_heads    the plain kernel alone on the heads SPLIT_TAIL gives it;
  parts         the parts launch alone (partials zeroed);
  parts_kept    the parts launch alone, into one partials buffer zeroed in place (not a new one a call);
  tail_cast     the partials' zeroing and the cast kernel alone.
So split_tail ~ main_heads + parts + tail_cast + dQ's cast, and plain_kernel - main_heads is what the split saves.
    OUT=/tmp/p python benchmarks/bwd_split_tail_probe_h200.py [Z H N] [rounds]     # 4 32 4096 5; ~30 s
(The tenth session's one-launch split form, every CTA choosing main or part at run time, measured 5.53-5.61 ms for
the plain kernel's 5.29 on the same work: benchmarks/kernels_h200/bwd_split_tail_r1{0,1}/.)
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
    Z, H, N = (int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (4, 32, 4096)
    D, rounds = 128, int(sys.argv[4]) if len(sys.argv) >= 5 else 5
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
    plan = B.tail_split(Z, H, N, tail, False, torch.cuda.get_device_properties(0).multi_processor_count)
    main_ctas, left, splits, blocks = plan
    row0 = (main_ctas // n_kv) * N
    dk_flat, dv_flat = dk.view(-1, D), dv.view(-1, D)
    delta, lse2 = stats

    def plain(heads):
        dq32.zero_()
        args, options = B._kernel_call(q, k, v, do, lse2, delta, dq32, dk, dv, False, scale, base)
        B.attention_bwd_kernel[(n_kv, heads)](*args, **options)

    kept = torch.zeros((2, left * 128, D), dtype=torch.float32, device="cuda")

    def parts(part=None):
        part = torch.zeros((2, left * 128, D), dtype=torch.float32, device="cuda") if part is None else part.zero_()
        args, options = B._kernel_call(q, k, v, do, lse2, delta, dq32, dk_flat[:0], dv_flat[:0], False, scale,
                                       base, tail=(part, main_ctas, splits, blocks))
        B.attention_bwd_kernel[(left * splits,)](*args, **options)

    def tail_cast():
        part = torch.zeros((2, left * 128, D), dtype=torch.float32, device="cuda")
        B.attention_bwd_tail_cast_kernel[(left, 4)](part, dk_flat[row0:], dv_flat[row0:], N, main_ctas, left, row0,
                                                    HEAD_DIM=D, BN=128, ROWS=32)

    subjects = {
        "default": lambda: B.launch(q, k, v, o, do, lse, False, scale, base, dq32=dq32, stats=stats),
        "split_tail": lambda: B.launch(q, k, v, o, do, lse, False, scale, tail, dq32=dq32, stats=stats),
        "plain_kernel": lambda: plain(Z * H),
        "main_heads": lambda: plain(main_ctas // n_kv),
        "parts": parts,
        "parts_kept": lambda: parts(kept),
        "tail_cast": tail_cast,
    }
    for fn in subjects.values():
        fn()
    torch.cuda.synchronize()
    times = {n: [] for n in subjects}
    for _ in range(rounds):
        for n, fn in subjects.items():
            times[n].append(float(triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")))
    med = {n: statistics.median(t) for n, t in times.items()}
    res = dict(shape=[Z, H, N, D], rounds_ms=times, median_ms=med, gpu=torch.cuda.get_device_name(0),
               plan=plan)
    (out / f"bwd_split_tail_probe_{N}.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
