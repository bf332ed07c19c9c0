"""The PTX registers the clock64 recorder reads, given meanings on the CPU simulator for tests.

``%clock64`` ticks by ``step`` per read; ``%globaltimer`` by ``step / ghz`` ns per read, so every
CTA runs at ``ghz`` (cycles per ns); ``%smid`` is ``sm_base`` + the CTA's id. The simulator stores an
inline-PTX result as the dtype the kernel asks for. Each reading is a one-element array, as the
interpreter holds every other scalar (a 0-d result would reach ops such as ``tl.atomic_add`` as a
numpy scalar, which the interpreter's atomics refuse).
"""
import contextlib
import itertools

import numpy as np


@contextlib.contextmanager
def sim_clocks(step: int = 10, ghz: float = 1.6, sm_base: int = 100):
    from triton.runtime.interpreter import interpreter_builder

    from tlx_workbench.sim.ops import tl_extras
    ticks = itertools.count(1)
    last = {"clock": 0}

    def clock():
        last["clock"] = next(ticks) * step
        return np.array([last["clock"]], dtype=np.int64)

    def gtime():
        # the same instant as the next clock read, in ns (a huge offset, like a real timer)
        return np.array([10**12 + round((last["clock"] + step) / ghz)], dtype=np.int64)

    entries = [(r"mov\.u64 \$0, %clock64;", clock), (r"mov\.u64 \$0, %globaltimer;", gtime),
               (r"mov\.u32 \$0, %smid;", lambda: np.array([sm_base + interpreter_builder.grid_idx[0]], dtype=np.int32))]
    for pat, fn in entries:
        tl_extras.register_inline_asm(pat, fn)
    added = tl_extras._KNOWN[:len(entries)]
    try:
        yield
    finally:
        for e in added:
            if e in tl_extras._KNOWN:
                tl_extras._KNOWN.remove(e)
