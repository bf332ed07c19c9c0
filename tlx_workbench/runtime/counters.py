"""The SM's own counters, read in device code with one PTX instruction each: the cycle counter (``%clock64``), the
global nanosecond timer (``%globaltimer``) and the SM's id (``%smid``). ``tlx.clock64`` does not lower on triton 3.8
+ triton-utlx ("uTLX op 'clock64' is not available"). The instrumented copies of a kernel (``instrument.py``) and
the calibration's microbenchmarks (``calibration/kernels.py``) read them through these.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def sm_clock():
    """The SM's cycle counter."""
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def global_ns():
    """The global timer, in ns."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def sm_id():
    """The id of the SM the CTA runs on."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)
