"""A synthetic warp-specialized pipeline trace, for demos, docs, tests and benchmarks.

It follows the mbarrier rules the simulator keeps (a phase flips when its arrivals
and its expected bytes are all in), so the views show what a real run shows: a
producer that waits for free slots, consumers that wait for TMA data, MMA, and the
arrows from each completing arrival to the waits it releases.

>>> from tlx_workbench.widgets.sample import sample_trace
>>> len(sample_trace(iters=8).spans) > 0
True
"""
from __future__ import annotations

import random

from ..trace import BarrierEvent, Counter, Span, Trace

# The pseudo-kernel the sample's spans point at (their `line`s are lines of this file,
# so a tooltip or a click shows real text):
#   SAMPLE-KERNEL-BEGIN
#   with tlx.async_task("default"):                       # producer
#       tlx.barrier_wait(empty_bars[s], phase ^ 1)
#       tlx.barrier_expect_bytes(full_bars[s], BYTES)
#       tlx.async_descriptor_load(a_desc, a_smem[s], [m, k], full_bars[s])
#   with tlx.async_task(num_warps=4, replicate=2):        # consumers
#       tlx.barrier_wait(full_bars[s], phase)
#       acc = tlx.async_dot(a_smem[s], b_smem[s], acc)
#       tlx.barrier_arrive(empty_bars[s])
#   SAMPLE-KERNEL-END


def _kernel_lines() -> dict[str, int]:
    keys = {"wait_empty": "tlx.barrier_wait(empty_bars", "expect": "tlx.barrier_expect_bytes",
            "tma": "tlx.async_descriptor_load", "wait_full": "tlx.barrier_wait(full_bars",
            "mma": "tlx.async_dot", "arrive": "tlx.barrier_arrive"}
    out = {}
    with open(__file__) as f:
        for i, text in enumerate(f, 1):
            for k, needle in keys.items():
                if k not in out and needle in text and text.lstrip().startswith("#"):
                    out[k] = i
    return out


def sample_trace(iters: int = 16, ctas: int = 1, consumers: int = 2, stages: int = 3,
                 seed: int = 0, tma_cycles: float = 180.0, mma_cycles: float = 120.0,
                 nbytes: int = 32768) -> Trace:
    """A producer/consumer pipeline over ``stages`` SMEM slots, ``iters`` K-steps per CTA.

    >>> t = sample_trace(iters=4, consumers=2)
    >>> sorted({s.task for s in t.spans})
    ['consumer', 'producer']
    """
    rng = random.Random(seed)
    ln = _kernel_lines()
    f = __file__
    tr = Trace(time_unit="cycles", source="sample", meta={"kernel": "sample_pipeline", "stages": stages})
    for cta in range(ctas):
        t0 = rng.uniform(0, 40)
        for s in range(stages):
            tr.add_barrier_event(BarrierEvent(cta, t0, "full_bars", s, "init", count=1, phase=0, line=ln["expect"]))
            tr.add_barrier_event(BarrierEvent(cta, t0, "empty_bars", s, "init", count=consumers, phase=0,
                                              line=ln["arrive"]))
        released = [t0] * stages          # when each slot was last freed by all consumers
        prod = ("producer", 0)
        tp = t0
        tc = [t0 + rng.uniform(0, 10) for _ in range(consumers)]
        level = []                        # (time, +1 landed / -1 freed) for the slots-full counter
        for k in range(iters):
            # phase n of slot s (numbered from 0) is its n-th round; a wait names its parity (docs/phases.md)
            s, n_ph = k % stages, k // stages
            ph = n_ph & 1
            # producer: wait for the consumers to free slot s, expect the bytes, issue the TMA load
            if k >= stages:
                end = max(tp, released[s])
                tr.add_span(Span(cta, *prod, "wait", tp, end, "barrier_wait", ln["wait_empty"], f,
                                 "empty_bars", s, ph ^ 1))
                tr.add_barrier_event(BarrierEvent(cta, tp, "empty_bars", s, "wait_begin", task=prod[0],
                                                  replica=0, phase=ph ^ 1, line=ln["wait_empty"]))
                tr.add_barrier_event(BarrierEvent(cta, end, "empty_bars", s, "wait_end", task=prod[0],
                                                  replica=0, phase=ph ^ 1, line=ln["wait_empty"]))
                tp = end
            d = rng.uniform(4, 8)
            tr.add_span(Span(cta, *prod, "arrive", tp, tp + d, "barrier_expect_bytes", ln["expect"], f,
                             "full_bars", s, n_ph, args={"bytes": nbytes}))
            tr.add_barrier_event(BarrierEvent(cta, tp + d, "full_bars", s, "expect", task=prod[0], replica=0,
                                              count=1, bytes=nbytes, phase=n_ph, line=ln["expect"],
                                              pending_arrivals=0, pending_bytes=nbytes))
            tp += d
            d = rng.uniform(10, 20)
            tr.add_span(Span(cta, *prod, "tma", tp, tp + d, "async_descriptor_load", ln["tma"], f,
                             "full_bars", s, n_ph, args={"bytes": nbytes}))
            landed = tp + d + tma_cycles * rng.uniform(0.8, 1.3)
            tr.add_barrier_event(BarrierEvent(cta, landed, "full_bars", s, "tx", bytes=nbytes, phase=n_ph,
                                              line=ln["tma"], pending_arrivals=0, pending_bytes=0))
            tr.add_barrier_event(BarrierEvent(cta, landed, "full_bars", s, "flip", phase=n_ph, line=ln["tma"],
                                              pending_arrivals=0, pending_bytes=0))
            level.append((landed, 1))
            tp += d
            # consumers: wait for step k's data, run the MMA, free the slot
            arrivals = []
            for r in range(consumers):
                lane = ("consumer", r)
                end = max(tc[r], landed)
                tr.add_span(Span(cta, *lane, "wait", tc[r], end, "barrier_wait", ln["wait_full"], f,
                                 "full_bars", s, ph))
                tr.add_barrier_event(BarrierEvent(cta, tc[r], "full_bars", s, "wait_begin", task=lane[0],
                                                  replica=r, phase=ph, line=ln["wait_full"]))
                tr.add_barrier_event(BarrierEvent(cta, end, "full_bars", s, "wait_end", task=lane[0],
                                                  replica=r, phase=ph, line=ln["wait_full"]))
                d = mma_cycles * rng.uniform(0.9, 1.2)
                tr.add_span(Span(cta, *lane, "mma", end, end + d, "async_dot", ln["mma"], f, slot=s,
                                 args={"M": 64, "N": 256, "K": 64}))
                a = end + d
                d2 = rng.uniform(3, 6)
                tr.add_span(Span(cta, *lane, "arrive", a, a + d2, "barrier_arrive", ln["arrive"], f,
                                 "empty_bars", s, n_ph))
                arrivals.append((a + d2, r))
                tc[r] = a + d2
            arrivals.sort()
            for n, (t, r) in enumerate(arrivals, 1):
                tr.add_barrier_event(BarrierEvent(cta, t, "empty_bars", s, "arrive", task="consumer", replica=r,
                                                  count=1, phase=n_ph, line=ln["arrive"],
                                                  pending_arrivals=consumers - n, pending_bytes=0))
            t_last, r_last = arrivals[-1]
            tr.add_barrier_event(BarrierEvent(cta, t_last, "empty_bars", s, "flip", task="consumer",
                                              replica=r_last, phase=n_ph, line=ln["arrive"],
                                              pending_arrivals=0, pending_bytes=0))
            released[s] = t_last
            level.append((t_last, -1))
        full = 0
        for t, dlt in sorted(level):
            full += dlt
            tr.add_counter(Counter("smem slots full", t, full, cta))
    return tr
