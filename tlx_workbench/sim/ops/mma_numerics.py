"""How a tensor-core MMA adds into its fp32 accumulator, as the simulator computes it.

A Hopper wgmma (m64nNk16 for 16-bit operands, k32 for 8-bit, k8 for tf32) and a Blackwell tcgen05 MMA take
one 32-byte slice of K per instruction: its products are exact (fp16, bf16, fp8 and tf32 products fit a
float32 mantissa), their sum is added into the fp32 accumulator, and the result is rounded. The model here:
per 32-byte slice of K, the products summed in float64 and added into the accumulator with one rounding to
float32, to nearest, slice after slice. What it does not model is the hardware's own alignment and truncation
inside that sum (the last bit of some results).

Why it matters: two kernels that accumulate K in the same order through the same instructions agree to the
bit on a GPU, and GPU test suites rely on it (TLX's compare a GEMM with cuBLAS at fp16's tolerance, which a
near-zero output element meets only then). A float32 BLAS product in another order misses that tolerance on a
few elements in 10^4 at K=4096. The pytest plugin computes a GPU test's fp16/bf16 torch matmuls through the
same function (cuBLAS runs the same instructions), so a kernel that sums K in order matches its reference as
it does on the GPU.

How it is computed. The definition is numpy's: per slice, ``a[..., k0:k1] @ b[..., k0:k1, :]`` in float64
(the BLAS's dgemm, in its own order of additions), added into the float32 accumulator. A compiled kernel
(numba; one thread; the batch and the slices fused, nothing of the products stored) gives the same bits
without that order, per batch element, where it can prove them:
- the slice sums are exact (their products span at most 53 bits: always so for fp8 e4m3, and for others
  of ordinary range), so every order gives them. The proof: per slice, each row of A and column of B is
  reduced to its largest exponent and lowest set bit, and a row and a column that may not fit together are
  checked product by product;
- otherwise the kernel also sums the products' absolute values, which bound how far any order's float64 sum
  can be from its own: where the accumulator's rounding to float32 comes out the same across that whole
  interval, or the element's sum is exact after all, numpy's order gives those bits too.
A batch element where neither proves every element (one whose sum may round and whose result lies within
~step * 2^-50 of a float32 rounding boundary, relative to its sum of absolute products: about one full-fp32
64x64x128 tile in 20, none seen in fp16, bf16, fp8 or tf32 ones, softmax rows included) takes numpy's own
per-slice products, as does everything when numba is missing (then in batch chunks that stay in cache). The
checks cost ~20-25 % of the kernel's time; the products run at ~45-60 GFLOP/s of float64, near one core's
peak here.

Threads: one (the simulator limits BLAS to one thread during a launch, ``blas_threads``; the kernel follows).
On the simulator's shapes (benchmarks/mma_numerics_speed.py) numpy's per-slice loop gained nothing from a
second BLAS thread (11-24 GFLOP/s either way: a 16-deep product is below OpenBLAS's threading threshold),
torch's float64 batched matmul of all slices at once ran at 1-10 GFLOP/s with one or two threads, the kernel
at 40-46 on one (1.7x the loop on one 64x64x128 tile, 2.4x on 132 of them, 3.7x on 512 128x64x128 ones). Inputs: ``a`` (..., M, K), ``b`` (..., K, N), ``acc`` None or
(..., M, N), the leading dimensions broadcast together (a simulated launch passes a leading CTA axis).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ..schedule.blas_threads import on_every_core

SLICE_BYTES = 32

# a batch chunk of the numpy path: its float64 operands, products and accumulator stay within ~1 MB (in cache)
_CHUNK_BYTES = 1 << 20


def k_slice(operand_bits: int) -> int:
    """Elements of K one MMA instruction takes: 16 for 16-bit operands, 32 for 8-bit, 8 for tf32."""
    return max(1, SLICE_BYTES * 8 // max(1, int(operand_bits)))


def mma_accumulate(acc, a, b, operand_bits: int, out=None) -> np.ndarray:
    """``acc + a @ b`` (float32, ``acc`` may be None for zero) as the tensor cores add it: slice by slice of K,
    each slice's float64 sum rounded once into the accumulator. ``a`` (..., M, K), ``b`` (..., K, N), ``acc``
    (..., M, N): float arrays whose values are the operands' (fp16/bf16/fp8 widened exactly), leading
    dimensions broadcast together; returns float32 (..., M, N). ``out``: a C-contiguous float32 array of the
    result's shape to write it into (and return), as a wave writes each core's share of its CTAs into one array.

    >>> mma_accumulate(None, np.ones((2, 16)), np.ones((16, 3)), 16)[0, 0]
    16.0
    """
    step = k_slice(operand_bits)
    a = np.asarray(a)
    b = np.asarray(b)
    out0 = None if acc is None else np.asarray(acc, dtype=np.float32)
    shape = _result_shape(out0, a, b)
    if shape is None:                   # 1-D operands, K = 0, empty or mismatched shapes: the plain loop
        return _into(out, _plain(out0, a, b, step))
    if out is not None and (out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous):
        raise ValueError(f"mma_accumulate: out is {out.dtype}{list(out.shape)}, the result float32{list(shape)}")
    kernel = _compiled()
    if kernel is not None:
        a32, b32 = _as_f32(a), _as_f32(b)
        if a32 is not None and b32 is not None:
            m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
            if max(m, n) > _TILE and m * n * k >= _BIG:
                return _into(out, _tiled(out0, a32, b32, operand_bits, shape))
            return _fused(kernel, out0, a, b, a32, b32, step, shape, out)
    return _into(out, _chunked(out0, a, b, step, shape))


def _into(out, res):
    if out is None:
        return res
    out[...] = res
    return out


# a product this big (M*N*K) with M or N above a tile runs tile by tile: the kernel's operands then stay in cache
_TILE, _TILE_K, _BIG = 128, 256, 1 << 24


def _tiled(out0, a, b, operand_bits, shape):
    """``mma_accumulate`` of a large product as a batch of (128 x 256) @ (256 x 128) tiles, K chunk after K chunk
    (a chunk is whole slices, and each chunk continues from the accumulator the last one left: every element
    adds the same slices in the same order), the row tiles spread over the machine's cores (the kernel releases
    the GIL)."""
    batch = shape[:-2]
    if batch:
        ab = np.broadcast_to(a, batch + a.shape[-2:])
        bb = np.broadcast_to(b, batch + b.shape[-2:])
        ob = None if out0 is None else np.broadcast_to(out0, shape)
        out = np.empty(shape, np.float32)
        for i in np.ndindex(*batch):
            out[i] = _tiled(None if ob is None else ob[i], ab[i], bb[i], operand_bits, shape[-2:])
        return out
    (m, k), n = a.shape, b.shape[1]
    mb, nb = -(-m // _TILE), -(-n // _TILE)
    ap = np.zeros((mb * _TILE, k), np.float32)
    ap[:m] = a
    bp = np.zeros((k, nb * _TILE), np.float32)
    bp[:, :n] = b
    acc = np.zeros((mb, nb, _TILE, _TILE), np.float32)
    if out0 is not None:
        full = np.zeros((mb * _TILE, nb * _TILE), np.float32)
        full[:m, :n] = np.broadcast_to(out0, (m, n))
        acc[...] = full.reshape(mb, _TILE, nb, _TILE).transpose(0, 2, 1, 3)
    a_t = ap.reshape(mb, _TILE, k)
    b_t = bp.reshape(k, nb, _TILE)

    def rows(sl):
        for k0 in range(0, k, _TILE_K):
            k1 = min(k, k0 + _TILE_K)
            a_c = np.ascontiguousarray(a_t[sl, :, k0:k1])[:, None]
            b_c = np.ascontiguousarray(b_t[k0:k1].transpose(1, 0, 2))[None]
            acc[sl] = mma_accumulate(acc[sl], a_c, b_c, operand_bits)
    on_every_core(rows, mb, _TILE * nb * _TILE * k)
    return acc.transpose(0, 2, 1, 3).reshape(mb * _TILE, nb * _TILE)[:m, :n].copy()


def _plain(out, a, b, step):
    # the definition, as written: per slice of K, the float64 product added into float32, one rounding
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    out = np.zeros(a.shape[:-1] + b.shape[-1:], np.float32) if out is None else out
    for k0 in range(0, a.shape[-1], step):
        out = (out + a[..., k0:k0 + step] @ b[..., k0:k0 + step, :]).astype(np.float32)
    return out


def _result_shape(out0, a, b):
    """The output's shape, or None where the plain loop is to run (it also raises what numpy raises)."""
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2] or a.shape[-1] == 0:
        return None
    m, n = a.shape[-2], b.shape[-1]
    if a.shape[:-2] == b.shape[:-2]:
        shape = a.shape[:-2] + (m, n)
    else:
        try:
            shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (m, n)
        except ValueError:
            return None
    if out0 is not None and out0.shape != shape:
        try:
            shape = np.broadcast_shapes(out0.shape, shape)
        except ValueError:
            return None
    if shape[-2:] != (m, n) or 0 in shape:
        return None
    return shape


def _as_f32(x):
    """``x`` as float32 when that is its value exactly (NaN payloads aside), else None."""
    if x.dtype == np.float32:
        return x
    if x.dtype in (np.float16, np.int8, np.uint8, np.bool_):
        return x.astype(np.float32)
    x64 = np.asarray(x, dtype=np.float64)
    x32 = x64.astype(np.float32)
    return x32 if np.array_equal(x32, x64, equal_nan=True) else None


def _start(out0, shape):
    if out0 is None:
        return np.zeros(shape, np.float32)
    if out0.shape == shape:
        return out0.copy(order="C")
    out = np.empty(shape, np.float32)
    out[...] = out0
    return out


def _batch_index(x, batch, every):
    """The index of each of ``batch``'s elements into ``x`` (..., R, C) seen as (-1, R, C); ``every`` is
    ``arange(prod(batch))``."""
    xb = x.shape[:-2]
    if xb == batch:
        return every
    return np.broadcast_to(np.arange(math.prod(xb), dtype=np.int64).reshape(xb), batch).ravel()


def _fused(kernel, out0, a, b, a32, b32, step, shape, out=None):
    batch = shape[:-2]
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    every = np.arange(math.prod(batch), dtype=np.int64)
    if out0 is None:
        acc, i_acc = np.zeros((1, m, n), np.float32), np.zeros_like(every)
    else:
        if out0.shape[-2:] != (m, n):                           # a bias row (N,) or (1, N): to (M, N)
            out0 = np.broadcast_to(out0, out0.shape[:-2] + (m, n))
        i_acc = _batch_index(out0, batch, every)
        acc = np.ascontiguousarray(out0).reshape((-1, m, n))
    if out is None:
        out = np.empty(shape, np.float32)
    ok = np.empty(every.size, np.bool_)
    a3 = np.ascontiguousarray(a32).reshape((-1, m, k))
    b3 = np.ascontiguousarray(b32).reshape((-1, k, n))
    ia, ib = _batch_index(a, batch, every), _batch_index(b, batch, every)
    if kernel(out.reshape((-1, m, n)), acc, a3, b3, i_acc, ia, ib, step, ok):
        # the rare elements the kernel can't vouch for: numpy's float64 products, as the definition has them
        ab = np.broadcast_to(a, batch + a.shape[-2:])
        bb = np.broadcast_to(b, batch + b.shape[-2:])
        for i in np.flatnonzero(~ok):
            at = np.unravel_index(i, batch)
            out[at] = _plain(out[at], ab[at], bb[at], step)
    return out


def _chunked(out0, a, b, step, shape):
    # numpy's per-slice products, chunk by chunk of the first batch dimension (the same BLAS calls per element
    # as one whole-batch loop: the same bits), so that a chunk's float64 operands and products stay in cache
    out = _start(out0, shape)
    if len(shape) == 2:
        return _plain(out, a, b, step)
    batch = shape[:-2]
    ab = np.broadcast_to(a, batch + a.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    per = 8 * (m * k + k * n + 2 * m * n) * math.prod(batch[1:])
    size = max(1, _CHUNK_BYTES // max(1, per))
    for c0 in range(0, batch[0], size):
        out[c0:c0 + size] = _plain(out[c0:c0 + size], ab[c0:c0 + size], bb[c0:c0 + size], step)
    return out


# -- the compiled path (numba). The functions below are plain Python until _compiled() replaces each by its
# numba-compiled version (on first use: importing numba costs ~0.2 s, so the simulator's import doesn't pay it)

_KERNEL = []
_KERNEL_LOCK = threading.Lock()


def _compiled():
    """The numba-compiled :func:`_fused_kernel` (compiled on first use, cached on disk), or None without numba."""
    if _KERNEL:
        return _KERNEL[0]
    with _KERNEL_LOCK:
        if not _KERNEL:
            _KERNEL.append(_compile())
    return _KERNEL[0]


def _compile():
    try:
        import numba
    except ImportError:
        return None
    g = globals()
    for name in ("_bounds", "_width", "_settle", "_pow2"):
        g[name] = numba.njit(inline="always", cache=True)(g[name])
    for name in ("_row_spans", "_col_spans", "_pair_fits"):
        g[name] = numba.njit(cache=True, nogil=True)(g[name])
    # contract: a*b + t as one fma, the same value here (float32 products are exact in float64)
    for name in ("_tile", "_tile_bounded"):
        g[name] = numba.njit(cache=True, nogil=True, fastmath={"contract"})(g[name])
    return numba.njit(cache=True, nogil=True)(_fused_kernel)


# Which slice sums are exact. A partial sum of a slice's products is a multiple of the lowest set bit among
# them and below ``step`` times the largest product, so every order gives the exact sum when those two are at
# most 53 bits apart. A float32 with exponent field e and significand sig (the implicit bit included) lies
# below 2^(max(e, 1) - 126) and is a multiple of 2^(max(e, 1) - 150 + tz(sig)). Per slice, each row of A gets
# the bits from its largest bound to its lowest set bit, each column of B likewise; the products of row m and
# column n span at most the sum of the two. A row or column holding an infinity or NaN counts as 0 bits: its
# sums are infinite or NaN in any order (float32 products, and sums of a slice of them, never overflow
# float64). A row of zeros counts as 0 bits too.
_DEAD_HI = -(1 << 20)                   # a zero: below every bound, above every lowest bit
_DEAD_LO = 1 << 20
_NONFINITE = 1 << 24                    # an infinity or NaN's bound


def _bounds(v):
    """(max(e, 1), max(e, 1) + 127 + tz(sig)) of the float32 whose bits are ``v`` (int32), with _DEAD_HI,
    _DEAD_LO for a zero and _NONFINITE as the first for an infinity or NaN."""
    v = v & np.int32(0x7FFFFFFF)
    e = v >> np.int32(23)
    sig = (v & np.int32(0x7FFFFF)) | (min(e, np.int32(1)) << np.int32(23))
    low = np.float32(sig & -sig).view(np.int32) >> np.int32(23)          # 127 + tz(sig), exactly
    h = max(e, np.int32(1))
    hi = np.int32(_DEAD_HI) if v == 0 else (np.int32(_NONFINITE) if e == 255 else h)
    lo = np.int32(_DEAD_LO) if v == 0 else h + low
    return hi, lo


def _width(hi, lo):
    # bits from the bound 2^(hi - 126) down to the lowest set bit 2^(lo - 277); 0 for zeros or non-finite
    return 0 if (hi < 0 or hi >= _NONFINITE) else hi - lo + 151


def _row_spans(x, step, span, widest, lowest, group_hi, group_lo):
    """For a tile x (M, K): span[s, r] the bits row r spans in slice s, widest[s] their maximum, lowest[s, r]
    the row's lowest set bit (as _bounds gives it). group_hi, group_lo: scratch of K elements."""
    m_rows, k_len = x.shape
    n_slices = (k_len + step - 1) // step
    bits = x.view(np.int32)
    by4 = step % 4 == 0
    n_groups = (k_len + 3) // 4 if by4 else k_len
    per_slice = step // 4 if by4 else step
    widest[:] = 0
    for r in range(m_rows):
        # the row's elements four by four (this vectorizes; reducing 16 at a time per slice doesn't)
        if by4:
            for j in range(k_len // 4):
                h0, l0 = _bounds(bits[r, 4 * j])
                h1, l1 = _bounds(bits[r, 4 * j + 1])
                h2, l2 = _bounds(bits[r, 4 * j + 2])
                h3, l3 = _bounds(bits[r, 4 * j + 3])
                group_hi[j] = max(max(h0, h1), max(h2, h3))
                group_lo[j] = min(min(l0, l1), min(l2, l3))
            if k_len % 4:
                hi = np.int32(_DEAD_HI)
                lo = np.int32(_DEAD_LO)
                for k in range(k_len - k_len % 4, k_len):
                    h, low = _bounds(bits[r, k])
                    hi = max(hi, h)
                    lo = min(lo, low)
                group_hi[n_groups - 1] = hi
                group_lo[n_groups - 1] = lo
        else:
            for k in range(k_len):
                group_hi[k], group_lo[k] = _bounds(bits[r, k])
        for s in range(n_slices):
            hi = np.int32(_DEAD_HI)
            lo = np.int32(_DEAD_LO)
            for j in range(s * per_slice, min(s * per_slice + per_slice, n_groups)):
                hi = max(hi, group_hi[j])
                lo = min(lo, group_lo[j])
            w = _width(hi, lo)
            span[s, r] = w
            widest[s] = max(widest[s], w)
            lowest[s, r] = lo


def _col_spans(y, step, span, widest, lowest, col_hi, col_lo):
    """:func:`_row_spans` for the columns of a tile y (K, N); col_hi, col_lo: scratch of N elements."""
    k_len, n_cols = y.shape
    n_slices = (k_len + step - 1) // step
    bits = y.view(np.int32)
    for s in range(n_slices):
        col_hi[:] = _DEAD_HI
        col_lo[:] = _DEAD_LO
        for k in range(s * step, min(s * step + step, k_len)):
            for c in range(n_cols):
                h, low = _bounds(bits[k, c])
                col_hi[c] = max(col_hi[c], h)
                col_lo[c] = min(col_lo[c], low)
        widest[s] = 0
        for c in range(n_cols):
            w = _width(col_hi[c], col_lo[c])
            span[s, c] = w
            widest[s] = max(widest[s], w)
            lowest[s, c] = col_lo[c]


def _pair_fits(a_bits, b_bits, r, c, k0, k1, fit):
    """Whether row r of A and column c of B have a slice sum (k0..k1) exact in any order: product by product,
    the largest bound and the lowest set bit at most ``fit`` bits apart (or a non-finite product)."""
    hi = -(1 << 20)
    lo = 1 << 20
    for k in range(k0, k1):
        ha, la = _bounds(a_bits[r, k])
        hb, lb = _bounds(b_bits[k, c])
        if ha >= _NONFINITE or hb >= _NONFINITE:
            return True
        if ha >= 0 and hb >= 0:
            hi = max(hi, ha + hb)
            lo = min(lo, la + lb)
    # products below 2^(hi - 252), multiples of 2^(lo - 554)
    return hi < 0 or hi - lo + 302 <= fit


def _tile(o, x, y, step, t0, t1, t2, t3):
    """o (M, N) float32 += x (M, K) @ y (K, N), slice by slice: each slice's products summed into float64 rows
    t0..t3 (four rows of o at a time, K four at a time: a product of y's row feeds four rows), then added into
    o with one rounding."""
    m_rows, k_len = x.shape
    n_cols = y.shape[1]
    r = 0
    while r + 4 <= m_rows:
        for k0 in range(0, k_len, step):
            k1 = min(k0 + step, k_len)
            t0[:] = 0.0
            t1[:] = 0.0
            t2[:] = 0.0
            t3[:] = 0.0
            k = k0
            while k + 4 <= k1:
                x00 = np.float64(x[r, k])
                x01 = np.float64(x[r, k + 1])
                x02 = np.float64(x[r, k + 2])
                x03 = np.float64(x[r, k + 3])
                x10 = np.float64(x[r + 1, k])
                x11 = np.float64(x[r + 1, k + 1])
                x12 = np.float64(x[r + 1, k + 2])
                x13 = np.float64(x[r + 1, k + 3])
                x20 = np.float64(x[r + 2, k])
                x21 = np.float64(x[r + 2, k + 1])
                x22 = np.float64(x[r + 2, k + 2])
                x23 = np.float64(x[r + 2, k + 3])
                x30 = np.float64(x[r + 3, k])
                x31 = np.float64(x[r + 3, k + 1])
                x32 = np.float64(x[r + 3, k + 2])
                x33 = np.float64(x[r + 3, k + 3])
                for c in range(n_cols):
                    y0 = np.float64(y[k, c])
                    y1 = np.float64(y[k + 1, c])
                    y2 = np.float64(y[k + 2, c])
                    y3 = np.float64(y[k + 3, c])
                    t0[c] = t0[c] + x00 * y0 + x01 * y1 + x02 * y2 + x03 * y3
                    t1[c] = t1[c] + x10 * y0 + x11 * y1 + x12 * y2 + x13 * y3
                    t2[c] = t2[c] + x20 * y0 + x21 * y1 + x22 * y2 + x23 * y3
                    t3[c] = t3[c] + x30 * y0 + x31 * y1 + x32 * y2 + x33 * y3
                k += 4
            while k < k1:
                x00 = np.float64(x[r, k])
                x10 = np.float64(x[r + 1, k])
                x20 = np.float64(x[r + 2, k])
                x30 = np.float64(x[r + 3, k])
                for c in range(n_cols):
                    y0 = np.float64(y[k, c])
                    t0[c] += x00 * y0
                    t1[c] += x10 * y0
                    t2[c] += x20 * y0
                    t3[c] += x30 * y0
                k += 1
            for c in range(n_cols):
                o[r, c] = np.float32(np.float64(o[r, c]) + t0[c])
                o[r + 1, c] = np.float32(np.float64(o[r + 1, c]) + t1[c])
                o[r + 2, c] = np.float32(np.float64(o[r + 2, c]) + t2[c])
                o[r + 3, c] = np.float32(np.float64(o[r + 3, c]) + t3[c])
        r += 4
    while r < m_rows:
        for k0 in range(0, k_len, step):
            k1 = min(k0 + step, k_len)
            t0[:] = 0.0
            for k in range(k0, k1):
                x00 = np.float64(x[r, k])
                for c in range(n_cols):
                    t0[c] += x00 * np.float64(y[k, c])
            for c in range(n_cols):
                o[r, c] = np.float32(np.float64(o[r, c]) + t0[c])
        r += 1


# Where a slice sum may round (bf16 softmax probabilities against values, full fp32 operands), numpy's sum,
# in BLAS's order, and this one differ by at most 2 * gamma * sum|products| (gamma ~ (step - 1) * 2^-53 for
# any order or blocking of the additions); ``bound = step * 2^-51`` is twice that. The accumulator's update
# out -> float32(out + P) is monotone in P: when it gives the same bits at both ends of that interval, it gives
# them for numpy's P too. That leaves the sums that are exact but land on a float32 rounding midpoint (common
# with 8-bit significands): an element's sum is exact when sum|products| is below 2^52 times the lowest set
# bit of its products (at least that of its row's times that of its column). Left undecided: an element whose
# sum may round and whose exact result lies within ~step * 2^-51 (relative) of a float32 rounding boundary;
# then its batch element takes numpy's products.


def _pow2(e):
    # 2^e as float64 for a lowest set bit from _bounds (biased by 277), scaled by 2^26; infinity for none
    return np.inf if e >= _DEAD_LO else math.ldexp(1.0, e - 277 + 26)


def _settle(o, t, u, bound, exact_below):
    """``float32(o + t)``, and whether numpy's sum gives the same: the sum is exact (``u < exact_below``) or
    every sum within ``bound * u`` of ``t`` gives the same bits."""
    o64 = np.float64(o)
    e = u * bound
    low = np.float32(o64 + (t - e)).view(np.int32)
    high = np.float32(o64 + (t + e)).view(np.int32)
    return np.float32(o64 + t), (u < exact_below) | (low == high)


def _tile_bounded(o, x, y, step, t0, t1, u0, u1, low_a, low_b, quantum):
    """:func:`_tile` for sums that may round, two rows at a time: also each slice's sum of absolute products
    (u0, u1), from which :func:`_settle` decides whether numpy's order could round differently. ``low_a`` (per
    slice, per row) and ``low_b`` (per slice, per column): lowest set bits from :func:`_row_spans`. Returns
    False when it could for some element (``o`` is then partly updated)."""
    m_rows, k_len = x.shape
    n_cols = y.shape[1]
    bound = step * 2.0 ** -51
    r = 0
    while r < m_rows:
        pair = r + 1 < m_rows
        r1 = r + 1 if pair else r
        for k0 in range(0, k_len, step):
            k1 = min(k0 + step, k_len)
            s = k0 // step
            t0[:] = 0.0
            t1[:] = 0.0
            u0[:] = 0.0
            u1[:] = 0.0
            k = k0
            while k + 2 <= k1:
                x00 = np.float64(x[r, k])
                x01 = np.float64(x[r, k + 1])
                x10 = np.float64(x[r1, k])
                x11 = np.float64(x[r1, k + 1])
                a00 = abs(x00)
                a01 = abs(x01)
                a10 = abs(x10)
                a11 = abs(x11)
                for c in range(n_cols):
                    y0 = np.float64(y[k, c])
                    y1 = np.float64(y[k + 1, c])
                    b0 = abs(y0)
                    b1 = abs(y1)
                    t0[c] = t0[c] + x00 * y0 + x01 * y1
                    t1[c] = t1[c] + x10 * y0 + x11 * y1
                    u0[c] = u0[c] + a00 * b0 + a01 * b1
                    u1[c] = u1[c] + a10 * b0 + a11 * b1
                k += 2
            if k < k1:
                x00 = np.float64(x[r, k])
                x10 = np.float64(x[r1, k])
                a00 = abs(x00)
                a10 = abs(x10)
                for c in range(n_cols):
                    y0 = np.float64(y[k, c])
                    b0 = abs(y0)
                    t0[c] += x00 * y0
                    t1[c] += x10 * y0
                    u0[c] += a00 * b0
                    u1[c] += a10 * b0
            for c in range(n_cols):
                quantum[c] = _pow2(low_b[s, c])
            q0 = _pow2(low_a[s, r])
            same = True
            for c in range(n_cols):
                v, s0 = _settle(o[r, c], t0[c], u0[c], bound, q0 * quantum[c])
                o[r, c] = v
                same &= s0
            if pair:
                q1 = _pow2(low_a[s, r1])
                for c in range(n_cols):
                    v, s1 = _settle(o[r1, c], t1[c], u1[c], bound, q1 * quantum[c])
                    o[r1, c] = v
                    same &= s1
            if not same:
                return False
        r += 2
    return True


def _fused_kernel(out, acc, a, b, i_acc, ia, ib, step, ok):
    """``out[i] = acc[i_acc[i]] + a[ia[i]] @ b[ib[i]]`` (slice by slice of ``step``; float32, C-contiguous) for
    each batch element i where that gives numpy's bits provably: its slice sums exact (any order then gives
    them), or, where they may round, within bounds that leave the float32 result the same. ``ok[i]`` says
    which; the others get ``acc[i_acc[i]]``. Returns how many are not."""
    total, m_rows, n_cols = out.shape
    k_len = a.shape[2]
    n_slices = (k_len + step - 1) // step
    carry = 0
    while (1 << carry) < step:
        carry += 1
    fit = 53 - carry
    # each operand tile's spans, computed when first used (just before its products, while it is in cache)
    span_a = np.empty((a.shape[0], n_slices, m_rows), np.int32)
    wide_a = np.empty((a.shape[0], n_slices), np.int32)
    low_a = np.empty((a.shape[0], n_slices, m_rows), np.int32)
    span_b = np.empty((b.shape[0], n_slices, n_cols), np.int32)
    wide_b = np.empty((b.shape[0], n_slices), np.int32)
    low_b = np.empty((b.shape[0], n_slices, n_cols), np.int32)
    seen_a = np.zeros(a.shape[0], np.bool_)
    seen_b = np.zeros(b.shape[0], np.bool_)
    scratch_hi = np.empty(max(k_len, n_cols), np.int32)
    scratch_lo = np.empty(max(k_len, n_cols), np.int32)
    a_bits = a.view(np.int32)
    b_bits = b.view(np.int32)
    # past this many row-column pairs checked product by product, an element takes the bounded sums instead
    budget = max(64, m_rows * n_cols // 16)
    t0 = np.empty(n_cols, np.float64)
    t1 = np.empty(n_cols, np.float64)
    t2 = np.empty(n_cols, np.float64)
    t3 = np.empty(n_cols, np.float64)
    quantum = np.empty(n_cols, np.float64)
    n_bad = 0
    for i in range(total):
        xa = ia[i]
        xb = ib[i]
        if not seen_a[xa]:
            _row_spans(a[xa], step, span_a[xa], wide_a[xa], low_a[xa], scratch_hi, scratch_lo)
            seen_a[xa] = True
        if not seen_b[xb]:
            _col_spans(b[xb], step, span_b[xb], wide_b[xb], low_b[xb], scratch_hi, scratch_lo)
            seen_b[xb] = True
        o = out[i]
        start = acc[i_acc[i]]
        for r in range(m_rows):                 # the accumulator, copied tile by tile (it stays in cache)
            for c in range(n_cols):
                o[r, c] = start[r, c]
        exact = True
        left = budget
        for s in range(n_slices):
            if wide_a[xa, s] + wide_b[xb, s] <= fit:
                continue
            # the widest row and column don't fit: check the pairs that may not, product by product
            k0 = s * step
            k1 = min(k0 + step, k_len)
            for r in range(m_rows):
                if span_a[xa, s, r] + wide_b[xb, s] <= fit:
                    continue
                for c in range(n_cols):
                    if span_a[xa, s, r] + span_b[xb, s, c] > fit:
                        left -= 1
                        if left < 0 or not _pair_fits(a_bits[xa], b_bits[xb], r, c, k0, k1, fit):
                            exact = False
                            break
                if not exact:
                    break
            if not exact:
                break
        if exact:
            _tile(o, a[xa], b[xb], step, t0, t1, t2, t3)
            ok[i] = True
            continue
        if _tile_bounded(o, a[xa], b[xb], step, t0, t1, t2, t3, low_a[xa], low_b[xb], quantum):
            ok[i] = True
        else:
            for r in range(m_rows):
                for c in range(n_cols):
                    o[r, c] = start[r, c]
            ok[i] = False
            n_bad += 1
    return n_bad
