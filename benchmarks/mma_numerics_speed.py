"""Speed of the simulator's tensor-core MMA model, ``tlx_workbench.sim.ops.mma_numerics.mma_accumulate``, against
the plain per-slice numpy loop that defines it (``old``: numpy's float64 product per slice of K, added into the
float32 accumulator), on fp16-valued float32 operands with a float32 accumulator, three cases:

  2d      2048 calls of (64x64) @ (64x128)
  cta132  32 calls of (132,64,64) @ (132,64,128)          (a wgmma per CTA of a 132-CTA launch)
  att512  16 calls of (512,128,64) @ (512,64,128)         (attention-like tiles, 512 CTAs)

Variants: ``old`` with BLAS limited to one thread (as during a simulated launch, sim/schedule/blas_threads.py) and with
two; ``new`` (the compiled kernel, one thread) and ``new-numpy`` (its path without numba: numpy's products in
cache-sized chunks), both under the one-thread limit. Each case runs the variants in turn, three rounds; the
best round is reported, as wall-clock ms per call, GFLOP/s (2*M*N*K per batch element) and the process's CPU
ms per call (all threads: the fairer figure when other jobs share the machine). Every result is checked bit
for bit against ``old``. Add ``--torch`` for torch's float64 batched matmul (one and two threads; it only
matches where the slice sums are exact, which these inputs are).

    .venv/bin/python benchmarks/mma_numerics_speed.py [--torch]
"""
from __future__ import annotations

import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from tlx_workbench.sim.ops import mma_numerics as mn

CASES = {"2d": ((), 2048), "cta132": ((132,), 32), "att512": ((512,), 16)}
SHAPES = {"2d": (64, 64, 128), "cta132": (64, 64, 128), "att512": (128, 64, 128)}
ROUNDS = 3


def old(acc, a, b, bits):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    step = mn.k_slice(bits)
    out = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32) if acc is None else np.asarray(acc, np.float32)
    for k0 in range(0, a.shape[-1], step):
        out = (out + a[..., k0:k0 + step] @ b[..., k0:k0 + step, :]).astype(np.float32)
    return out


def new_numpy(acc, a, b, bits):
    saved = mn._KERNEL[:]
    mn._KERNEL[:] = [None]
    try:
        return mn.mma_accumulate(acc, a, b, bits)
    finally:
        mn._KERNEL[:] = saved


def torch_batched(acc, a, b, bits):
    import torch
    step = mn.k_slice(bits)
    x, y = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    k, m, n = x.shape[-1], x.shape[-2], y.shape[-1]
    s = k // step
    p = torch.matmul(x.reshape(x.shape[:-1] + (s, step)).transpose(-3, -2), y.reshape(y.shape[:-2] + (s, step, n)))
    out = torch.from_numpy(acc.copy())
    for i in range(s):
        out = (out + p[..., i, :, :]).float()
    return out.numpy()


def main():
    use_torch = "--torch" in sys.argv
    rng = np.random.default_rng()
    mn._compiled()                                      # compile (or load the cached kernel) before timing
    variants = [("old, 1 BLAS thread", old, 1), ("old, 2 BLAS threads", old, 2),
                ("new", mn.mma_accumulate, 1), ("new-numpy", new_numpy, 1)]
    if use_torch:
        variants += [("torch f64, 1 thread", torch_batched, 1), ("torch f64, 2 threads", torch_batched, 2)]
    print(f"numba kernel: {'yes' if mn._compiled() is not None else 'no (numba missing)'}")
    for case, (batch, calls) in CASES.items():
        m, k, n = SHAPES[case]
        a = np.float32(np.float16(rng.standard_normal(batch + (m, k))))
        b = np.float32(np.float16(rng.standard_normal(batch + (k, n))))
        acc = rng.standard_normal(batch + (m, n)).astype(np.float32)
        flop = 2.0 * m * n * k * int(np.prod(batch)) * calls
        want = old(acc, a, b, 16)
        best = {name: float("inf") for name, _, _ in variants}
        cpu = {name: float("inf") for name, _, _ in variants}
        for _ in range(ROUNDS):
            for name, fn, threads in variants:
                with threadpool_limits(threads, user_api="blas"):
                    if fn is torch_batched:
                        import torch
                        torch.set_num_threads(threads)
                    got = fn(acc, a, b, 16)
                    t0, c0 = time.perf_counter(), time.process_time()
                    for _ in range(calls):
                        fn(acc, a, b, 16)
                    best[name] = min(best[name], time.perf_counter() - t0)
                    cpu[name] = min(cpu[name], time.process_time() - c0)
                same = np.array_equal(got.view(np.uint32), want.view(np.uint32))
                assert same or fn is torch_batched, f"{case} {name}: not the old bits"
        shape = f"{batch + (m, k)} @ {batch + (k, n)} x {calls}"
        print(f"\n{case}: {shape}")
        for name, _, _ in variants:
            t = best[name]
            print(f"  {name:22s} {t * 1e3:8.1f} ms total {t / calls * 1e3:8.3f} ms/call {flop / t / 1e9:6.1f} GFLOP/s"
                  f"  x{best['old, 1 BLAS thread'] / t:5.2f} vs old 1 thread"
                  f"   cpu {cpu[name] / calls * 1e3:8.3f} ms/call")


if __name__ == "__main__":
    main()
