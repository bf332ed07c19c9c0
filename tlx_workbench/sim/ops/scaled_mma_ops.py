"""What ``tlx.async_dot_scaled`` computes (Blackwell ``tcgen05.mma`` ``kind::mxf8f6f4`` / ``kind::mxf4``):
D (+)= (A x 2^(sa - 127)) @ (B x 2^(sb - 127)), one e8m0 scale per 32 elements along K.

Operands as TLX's frontend and tests lay them out (``test_tlx_dot.py``):

* mxfp8 (``"e4m3"``, ``"e5m2"``): A is (M, K), B is (K, N), one byte per element;
* mxfp4 (``"e2m1"``): two elements per byte, packed along K (element 2i in the low nibble, as
  ``triton.tools.mxfp.MXFP4Tensor.to_packed_tensor``): A is (M, K/2), B is the (K/2, N) view ``local_trans`` makes of
  an (N, K/2) buffer. (Mixed with mxfp8, the compiler marks the fp4 operand's SMEM layout ``fp4Padded``: TMA spreads
  each element over a byte; the buffer TLX sees is still the packed one, and so is the simulator's.)
* scales (uint8 e8m0, A's [M, K/32], B's [N, K/32]): in TMEM as that logical matrix (what ``local_store`` of an
  [M, K/32] tensor writes); in SMEM either that 2-D matrix or, as TLX's tests and cuBLAS lay them out, the 5-D
  block-scaling layout [1, M/128, K/128, 2, 256]: each 128-row x 4-column block is 512 bytes, row r and column c at
  byte (r % 32) * 16 + (r // 32) * 4 + c. ``tmem_copy`` of such a buffer into an [M, K/32] TMEM buffer puts the
  logical matrix there (``tcgen05.cp``'s 32x128b.warpx4 copy, which the MMA's TMEM scale layout expects).

The product is computed in float64 and rounded once to float32 (every dequantized term is exact; the tensor
core's internal summation order and width are not specified). Cost: ``cost.mma_cycles`` at the operand width, 4 bits for mxfp4 x mxfp4
(kind::mxf4 runs at twice the fp8 rate) and 8 bits for every other mix (kind::mxf8f6f4 runs at the fp8 rate).
"""
from __future__ import annotations

import numpy as np

_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                 dtype=np.float32)
_F8: dict = {}


def format_name(fmt) -> str:
    """'e2m1', 'e4m3', 'e5m2' from the frontend's ScaleDotElemType value (or a string)."""
    return (fmt if isinstance(fmt, str) else fmt.name).lower()


def operand_bits(a_fmt: str, b_fmt: str) -> int:
    return 4 if a_fmt == b_fmt == "e2m1" else 8


def decode(arr: np.ndarray, fmt: str, k_axis: int) -> np.ndarray:
    """An operand's values as float32; e2m1 is unpacked along ``k_axis`` (K doubles)."""
    if fmt == "e2m1":
        b = np.ascontiguousarray(arr).view(np.uint8)
        lo, hi = _E2M1[b & 0xF], _E2M1[b >> 4]
        out = np.stack([lo, hi], axis=k_axis + 1)
        shape = list(b.shape)
        shape[k_axis] *= 2
        return out.reshape(shape)
    table = _F8.get(fmt)
    if table is None:
        import torch
        tdt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
        table = _F8[fmt] = torch.arange(256, dtype=torch.uint8).view(tdt).float().numpy()
    return table[np.ascontiguousarray(arr).view(np.uint8)]


def scales_to_logical(arr: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A scale buffer as the logical [rows, cols] uint8 matrix: 2-D as it is, the 5-D block-scaling layout
    [1, rows/128, ceil(cols/4), 2, 256] unswizzled (columns past ``cols`` are padding)."""
    a = np.ascontiguousarray(arr).view(np.uint8)
    if a.ndim == 2:
        if a.shape != (rows, cols):
            raise ValueError(f"scales of shape {list(a.shape)}, expected [{rows}, {cols}] (one per 32 elements of K)")
        return a
    rb, kb = -(-rows // 128), -(-cols // 4)
    if a.size != rb * kb * 512 or (a.ndim == 5 and tuple(a.shape[1:3]) != (rb, kb)):
        raise ValueError(f"scales of shape {list(a.shape)}: expected [{rows}, {cols}] or the block-scaling layout "
                         f"[1, {rb}, {kb}, 2, 256]")
    blocks = a.reshape(rb, kb, 512)
    r, c = np.meshgrid(np.arange(128), np.arange(4), indexing="ij")
    idx = (r % 32) * 16 + (r // 32) * 4 + c      # (128, 4): byte of row r, column c
    out = blocks[:, :, idx]                                           # (rb, kb, 128, 4)
    out = out.transpose(0, 2, 1, 3).reshape(rb * 128, kb * 4)
    return np.ascontiguousarray(out[:rows, :cols])


def mx_product(a, a_scale, a_fmt, b, b_scale, b_fmt) -> np.ndarray:
    """A @ B for MX operands (see the module doc): float32, (M, N)."""
    fa, fb = decode(a, a_fmt, 1), decode(b, b_fmt, 0)
    m, k = fa.shape
    if fb.shape[0] != k:
        raise ValueError(f"A has K={k} ({a_fmt}) but B has K={fb.shape[0]} ({b_fmt})")
    if k % 32:
        raise ValueError(f"K={k} is not a multiple of 32 (one e8m0 scale per 32 elements)")
    n = fb.shape[1]
    sa = scales_to_logical(a_scale, m, k // 32).astype(np.int32)
    sb = scales_to_logical(b_scale, n, k // 32).astype(np.int32)
    # e8m0: 2^(s - 127); 255 is NaN
    pa = np.where(sa == 255, np.nan, np.ldexp(1.0, sa - 127))
    pb = np.where(sb == 255, np.nan, np.ldexp(1.0, sb - 127))
    da = fa.astype(np.float64) * np.repeat(pa, 32, axis=1)
    db = fb.astype(np.float64) * np.repeat(pb, 32, axis=1).T
    return (da @ db).astype(np.float32)
