"""How a tensor-core MMA adds into its fp32 accumulator, as the simulator computes it.

A Hopper wgmma (m64nNk16 for 16-bit operands, k32 for 8-bit, k8 for tf32) and a Blackwell tcgen05 MMA take
one 32-byte slice of K per instruction: its products are exact (fp16, bf16, fp8 and tf32 products fit a
float32 mantissa), their sum is added into the fp32 accumulator, and the result is rounded. The model here:
per 32-byte slice of K, the products summed exactly (float64: a slice's sum of at most 32 such products is
exact) and added into the accumulator with one rounding to float32, to nearest. What it does not model is the
hardware's own alignment and truncation inside that sum (the last bit of some results).

Why it matters: two kernels that accumulate K in the same order through the same instructions agree to the
bit on a GPU, and GPU test suites rely on it (TLX's compare a GEMM with cuBLAS at fp16's tolerance, which a
near-zero output element meets only then). A float32 BLAS product in another order misses that tolerance on a
few elements in 10^4 at K=4096. The pytest plugin computes a GPU test's fp16/bf16 torch matmuls through the
same function (cuBLAS runs the same instructions), so a kernel that sums K in order matches its reference as
it does on the GPU.
"""
from __future__ import annotations

import numpy as np

SLICE_BYTES = 32


def k_slice(operand_bits: int) -> int:
    """Elements of K one MMA instruction takes: 16 for 16-bit operands, 32 for 8-bit, 8 for tf32."""
    return max(1, SLICE_BYTES * 8 // max(1, int(operand_bits)))


def mma_accumulate(acc, a, b, operand_bits: int) -> np.ndarray:
    """``acc + a @ b`` (float32, ``acc`` may be None for zero) as the tensor cores add it: slice by slice of K,
    each slice's exact sum rounded once into the accumulator. ``a`` (M, K), ``b`` (K, N): float arrays whose
    values are the operands' (fp16/bf16/fp8 widened exactly)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    k = a.shape[-1]
    step = k_slice(operand_bits)
    out = (np.zeros(a.shape[:-1] + b.shape[-1:], np.float32) if acc is None
           else np.asarray(acc, dtype=np.float32))
    for k0 in range(0, k, step):
        out = (out + a[..., k0:k0 + step] @ b[..., k0:k0 + step, :]).astype(np.float32)
    return out
