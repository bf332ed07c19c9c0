"""``tlx.stoch_round(x, dtype, rbits)``: float32 -> fp8 (e4m3, e5m2) / fp16 / bf16 with stochastic rounding, as
Blackwell's ``cvt.rs.satfinite`` does it with the random bits TLX's lowering hands it.

What the lowering does (``lowerFpToFpWithStochRounding``, TritonNVIDIAGPUToLLVM/ElementwiseOpToLLVM.cpp): a
thread's elements go in packs of 4 (fp8: ``cvt.rs.satfinite.{e4m3,e5m2}x4.f32 d, {a, b, e, f}, rbits``) or 2
(16-bit: ``cvt.rs.satfinite.{f16,bf16}x2.f32 d, a, b, rbits``), and the pack's one 32-bit ``rbits`` register is
``r0 ^ (r1 << 1) ^ (r2 << 2) ^ (r3 << 3)`` of its elements' random bits. What the instruction does with it (PTX
ISA, ``cvt``): bf16x2 gives ``a`` the upper 16 bits, ``b`` the lower 16; f16x2 gives each the 13 low bits of its
half; e4m3x4/e5m2x4 give ``a, b`` the upper 16 bits and ``e, f`` the lower 16. ``.rs`` adds those random bits to
the magnitude at the bits the conversion discards and truncates (toward zero); ``.satfinite`` clamps to the
largest finite value (infinities too), NaN stays NaN.

Assumed here, where the documentation does not pin it down:

* a pack is 4 (or 2) consecutive elements of the row-major tensor, aligned: what a thread holds when its layout
  gives it at least that many contiguous elements of the last dimension (Triton's coalesced layout for a 32-bit
  load gives 4). Other layouts pair other elements, so exact bits are the hardware's only for such layouts;
* fp8 discards 20 (e4m3) or 21 (e5m2) bits but gets 16 random bits: they are taken to sit at the top of the
  discarded bits. Where the result is subnormal the discarded field is wider: the random bits sit right below
  the result's last bit there too.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from .. import interp_adapter as ia

# dtype name -> (mantissa bits, smallest normal exponent, largest finite value, random bits used, pack size)
_FORMATS = {
    "fp16": (10, -14, 65504.0, 13, 2),
    "bf16": (7, -126, float(np.ldexp(255.0, 120)), 16, 2),
    "fp8e4nv": (3, -6, 448.0, 16, 4),
    "fp8e5": (2, -14, 57344.0, 16, 4),
}


def element_random_bits(rbits: np.ndarray, pack: int, nbits: int) -> np.ndarray:
    """The random bits ``cvt.rs`` uses for each element (same shape as ``rbits``), from its pack's combined
    register ``r0 ^ (r1 << 1) ^ ...``: the upper half for the pack's first half, the lower half for the rest."""
    flat = np.ascontiguousarray(rbits).reshape(-1).view(np.uint32).astype(np.uint64)
    n = flat.size
    padded = np.zeros(-(-n // pack) * pack, dtype=np.uint64)      # a partial last pack: the missing bits are 0
    padded[:n] = flat
    packs = padded.reshape(-1, pack)
    reg = np.zeros(packs.shape[0], dtype=np.uint64)
    for j in range(pack):
        reg ^= (packs[:, j] << np.uint64(j)) & np.uint64(0xFFFFFFFF)
    upper, lower = (reg >> np.uint64(16)) & np.uint64(0xFFFF), reg & np.uint64(0xFFFF)
    half = pack // 2
    per = np.concatenate([np.repeat(upper[:, None], half, 1), np.repeat(lower[:, None], pack - half, 1)], axis=1)
    per &= np.uint64((1 << nbits) - 1)
    return per.reshape(-1)[:n].reshape(np.shape(rbits))


def stoch_round_values(x: np.ndarray, fmt: str, rand: np.ndarray) -> np.ndarray:
    """float32 ``x`` rounded stochastically to ``fmt`` ('fp16', 'bf16', 'fp8e4nv', 'fp8e5') with per-element random
    bits ``rand`` (already the bits the instruction uses): the values (float64), each exactly representable."""
    mbits, emin, big, nbits, _ = _FORMATS[fmt]
    v = np.asarray(x, dtype=np.float32).astype(np.float64)
    ax = np.abs(v)
    finite = np.isfinite(v) & (ax > 0)
    _, e2 = np.frexp(np.where(finite, ax, 1.0))        # ax = m * 2**e2, m in [0.5, 1)
    ulp = np.ldexp(1.0, np.maximum(e2 - 1, emin) - mbits)
    # the random bits fill the nbits below the result's last bit; float64 holds the sum exactly enough (its
    # error is far below the distance to the next multiple of ulp)
    up = np.floor((ax + rand.astype(np.float64) * (ulp / (1 << nbits))) / ulp) * ulp
    out = np.where(finite, np.minimum(up, big), np.where(np.isinf(v), big, ax))
    return np.copysign(out, v)                 # NaN stays NaN (copysign keeps it), zeros keep their sign


def encode(values: np.ndarray, fmt: str) -> np.ndarray:
    """Exactly representable float64 ``values`` as ``fmt``'s storage (fp16, bf16 bits, fp8 bytes)."""
    if fmt == "fp16":
        return values.astype(np.float16)
    if fmt == "bf16":
        return ia.f32_to_bf16_bits(values.astype(np.float32))
    import torch
    tdt = {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}[fmt]
    return torch.from_numpy(values.astype(np.float32)).to(tdt).view(torch.uint8).numpy()


class _Value(ia.TensorHandle):
    """A result handle uTLX's ``checked_handle`` accepts (it asks for a non-null ``.id()``)."""

    def id(self):
        return 1


class StochRoundBuilderOps:
    """The builder calls of both TLX frontends for ``stoch_round`` (mixed into ``tlx_ops.SimBuilder``)."""

    def get_null_value(self, type):
        # uTLX's stoch_round carries its result type as a null of the block type; the interpreter's
        # get_null_value takes scalar types only
        if isinstance(type, tl.block_type):
            return ia.TensorHandle(np.zeros(1, dtype=ia.np_dtype(type.scalar)), type.scalar)
        return super().get_null_value(type)

    def utlx_fp_to_fp_with_rbits(self, args):              # uTLX: [null of the result type, src, rbits, mode]
        carrier, src, rbits = args[:3]
        return self._stoch_round(src, getattr(carrier.dtype, "scalar", carrier.dtype), rbits)

    def create_cvt_rs(self, src, dst_ty, rbits):            # Meta's tlx frontend
        return self._stoch_round(src, getattr(dst_ty, "scalar", dst_ty), rbits)

    def _stoch_round(self, src, dst, rbits):
        fmt = str(dst)
        if fmt not in _FORMATS or str(getattr(src.dtype, "scalar", src.dtype)) != "fp32":
            raise ValueError(f"stoch_round converts float32 to fp8e4nv, fp8e5, fp16 or bf16, not {src.dtype} to {dst}")
        x = np.asarray(src.data, dtype=np.float32)
        r = np.broadcast_to(np.asarray(rbits.data), x.shape)
        _, _, _, nbits, pack = _FORMATS[fmt]
        out = encode(stoch_round_values(x, fmt, element_random_bits(r, pack, nbits)), fmt).reshape(x.shape)
        if x.size > 1:
            # the conversion (a cvt, weight 2) plus the pack's shift-and-xor of random bits, per element
            if self.cta is not None:
                self.cta.charge_alu(x.size, ia.ALU_WEIGHTS["create_fp_to_fp"] + 2.0 * (pack - 1) / pack)
        return _Value(out, dst)


