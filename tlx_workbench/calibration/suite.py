"""The calibration suite: run the microbenchmarks on a GPU and write what the cost model reads.

    python -m tlx_workbench.calibration.suite --out tlx_workbench/calibration/H200.json

Every case launches one kernel of :mod:`.kernels` and reads its per-CTA records; the figures
are per SM cycle (``clock64`` deltas), so they hold whatever clock the board runs at, and the
clock itself is measured (``clock64`` over ``globaltimer``) under sustained tensor-core load.
The same launch functions run on the simulator with ``device="cpu", timed=False`` (the CPU
tests check each protocol there), so a case cannot hang the GPU unnoticed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import sys
import time

from ..runtime.timing import event_ms, time_call
from . import kernels as K

DTYPES = ("float16", "bfloat16", "float8_e4m3fn", "float32")     # float32 operands run as tf32


def _torch():
    import torch
    return torch


def _bk(dtype: str) -> int:
    """K of one SMEM tile row of 128 bytes: the 128-byte swizzle every wgmma operand here uses."""
    return {"float16": 64, "bfloat16": 64, "float8_e4m3fn": 128, "float8_e5m2": 128, "float32": 32}[dtype]


def _records(rec, n):
    return rec.view(n, K.REC).cpu().tolist()


# ---------------------------------------------------------------------------------------------- launches
def mma_tensors(dtype="float16", BN=256, consumers=2, ctas=132, BM=64, device="cuda"):
    """The wgmma loop's operands, output and records (a, b, out, rec), made once for repeated launches."""
    torch = _torch()
    BK = _bk(dtype)
    dt = getattr(torch, dtype)
    return (torch.randn(BM, BK, device=device).to(dt), torch.randn(BN, BK, device=device).to(dt),
            torch.empty(ctas * consumers * BM * BN, dtype=torch.float32, device=device),
            torch.zeros(ctas * consumers * K.REC, dtype=torch.int64, device=device))


def launch_mma(dtype="float16", BN=256, consumers=2, iters=1000, ctas=132, in_flight=2, BM=64, timed=True,
               device="cuda", tensors=None):
    """The tensor-core loop; returns (records, flops per timed warp group). ``tensors``: :func:`mma_tensors`'s, so
    that a timed window holds the loop's launch only (each call makes its own otherwise)."""
    BK = _bk(dtype)
    a, b, out, rec = tensors or mma_tensors(dtype, BN, consumers, ctas, BM, device)
    K.mma_loop_kernel[(ctas,)](a, b, out, rec, iters, BM=BM, BN=BN, BK=BK, CONSUMERS=consumers,
                               IN_FLIGHT=in_flight, TIMED=timed, num_warps=4)
    return rec, out, 2.0 * BM * BN * BK * iters


def tma_descriptor(rows, box_m, box_k, device="cuda", dtype="float16"):
    torch = _torch()
    from triton.tools.tensor_descriptor import TensorDescriptor
    x = torch.empty(rows * box_m, box_k, dtype=getattr(torch, dtype), device=device)
    if device != "cuda":
        x.normal_()
    return x, TensorDescriptor(x, list(x.shape), [box_k, 1], [box_m, box_k])


#: the box stride between CTAs that re-read one L2 region (odd: every CTA starts at a box of its own in a
#: power-of-two region); without it (0) the L2 loops' CTAs read the same boxes in the same order. Both are
#: measured: an H100 gave 53 B/cycle per CTA to 132 CTAs reading the same 16 KiB boxes in step and 30 to 132 CTAs
#: reading boxes of their own (benchmarks/tma_spread.py); a GEMM's CTAs share their A and B tiles in between
L2_SPREAD = 97


def launch_tma(box_m=128, box_k=64, stages=4, ctas=132, iters=256, region=None, timed=True, device="cuda",
               tensor=None, spread=0):
    """TMA loads; ``region`` boxes (default: every load its own box, i.e. from HBM); ``spread``: the kernel's
    SPREAD (``L2_SPREAD`` for a small region)."""
    torch = _torch()
    region = region or ctas * iters
    x, desc = tensor if tensor is not None else tma_descriptor(region, box_m, box_k, device)
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.tma_stream_kernel[(ctas,)](desc, rec, iters, region, BOX_M=box_m, BOX_K=box_k, STAGES=stages, TIMED=timed,
                                 SPREAD=spread, num_warps=4)
    return rec, box_m * box_k * x.element_size() * iters


def launch_cp_async(box_m=128, box_k=64, stages=3, ctas=132, iters=256, region=None, timed=True, device="cuda",
                    tensor=None, num_warps=8):
    """cp.async loads (every thread its share of a box), stages - 1 boxes in flight."""
    torch = _torch()
    region = region or ctas * iters + stages
    x = tensor if tensor is not None else torch.randn(region * box_m * box_k, device=device).to(torch.float16)
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.cp_async_stream_kernel[(ctas,)](x, rec, iters, region, BOX_M=box_m, BOX_K=box_k, STAGES=stages, TIMED=timed,
                                      num_warps=num_warps)
    return rec, box_m * box_k * 2 * iters


def launch_tma_store(box_m=64, box_n=64, stages=2, ctas=132, iters=256, region=None, timed=True, device="cuda",
                     tensor=None):
    torch = _torch()
    region = region or ctas * iters
    x, desc = tensor if tensor is not None else tma_descriptor(region, box_m, box_n, device)
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.tma_store_kernel[(ctas,)](desc, rec, iters, region, BOX_M=box_m, BOX_N=box_n, STAGES=stages, TIMED=timed,
                                num_warps=4)
    return rec, box_m * box_n * x.element_size() * iters, x


def load_store_tensors(stores, ctas=132, box_m=128, box_k=64, st_box=(64, 64), device="cuda"):
    """The tensors of :func:`launch_tma_load_store`: an 8 MiB L2 region of load boxes and ``ctas`` x ``stores`` store
    boxes, each with its descriptor."""
    return (*tma_descriptor(max(1, (8 << 20) // (box_m * box_k * 2)), box_m, box_k, device),
            *tma_descriptor(max(ctas * stores, 1), st_box[0], st_box[1], device))


def launch_tma_load_store(loads=1024, stores=0, ctas=132, box_m=128, box_k=64, stages=4, st_box=(64, 64),
                          st_stages=2, timed=True, device="cuda", tensors=None):
    """TMA loads re-read from an 8 MiB L2 region in step (the ``tma`` family's L2 loop) while another warp group
    stores ``stores`` boxes, each to a box of its own (a GEMM epilogue's C tiles) (``kernels.tma_load_store_kernel``).
    ``tensors``: :func:`load_store_tensors`'s, made once per family. Returns (records, bytes each CTA loads, bytes
    each CTA stores)."""
    torch = _torch()
    x, ld_desc, y, st_desc = tensors or load_store_tensors(stores, ctas, box_m, box_k, st_box, device)
    rec = torch.zeros(ctas * 2 * K.REC, dtype=torch.int64, device=device)
    K.tma_load_store_kernel[(ctas,)](ld_desc, st_desc, rec, loads, x.shape[0] // box_m, stores, y.shape[0] // st_box[0],
                                     BOX_M=box_m, BOX_K=box_k, STAGES=stages, ST_BOX_M=st_box[0], ST_BOX_N=st_box[1],
                                     ST_STAGES=st_stages, TIMED=timed, num_warps=4)
    return rec, box_m * box_k * x.element_size() * loads, st_box[0] * st_box[1] * y.element_size() * stores


def launch_mma_copy(dtype="float16", BN=256, consumers=2, iters=1000, loads=None, where="l2", ctas=132,
                    box_m=128, box_k=64, stages=4, timed=True, device="cuda", tensor=None):
    """The tensor-core loop with a TMA copy streaming beside it (``kernels.mma_copy_kernel``); ``loads``
    defaults to enough boxes to outlast the wgmmas (at the L2 / HBM rates of the calibration). Returns
    (records, flops per timed warp group, bytes each CTA copies)."""
    torch = _torch()
    BM, BK = 64, _bk(dtype)
    dt = getattr(torch, dtype)
    a = torch.randn(BM, BK, device=device).to(dt)
    b = torch.randn(BN, BK, device=device).to(dt)
    if tensor is None:
        rows = ((8 << 20) if where == "l2" else (2 << 30)) // (box_m * box_k * 2)
        tensor = tma_descriptor(rows, box_m, box_k, device)
    x, desc = tensor
    region = x.shape[0] // box_m if where == "hbm" else max(1, min(x.shape[0] // box_m, (8 << 20) // (box_m * box_k * 2)))
    box_bytes = box_m * box_k * x.element_size()
    if loads is None:       # cycles of the wgmmas at 4096 flop/cycle/SM over cycles per box at the copy's rate, + 30 %
        mma_cycles = consumers * 2.0 * BM * BN * BK * iters / 4096 / (2 if "8" in dtype else 1)
        loads = int(1.3 * mma_cycles / (box_bytes / (45.0 if where == "l2" else 17.0))) + stages
    out = torch.empty(ctas * consumers * BM, dtype=torch.float32, device=device)
    rec = torch.zeros(ctas * (consumers + 1) * K.REC, dtype=torch.int64, device=device)
    K.mma_copy_kernel[(ctas,)](a, b, desc, out, rec, iters, loads, region, BM=BM, BN=BN, BK=BK, CONSUMERS=consumers,
                               BOX_M=box_m, BOX_K=box_k, STAGES=stages, TIMED=timed, num_warps=4)
    return rec, 2.0 * BM * BN * BK * iters, box_bytes * loads


def launch_gemm_loads(m=4096, n=4096, k=4096, BM=128, BN=256, BK=64, group_m=8, stages=4, ctas=132, timed=True,
                      device="cuda", tensors=None):
    """The loads of a persistent GEMM in its tile order (``kernels.gemm_loads_kernel``); returns (records, bytes
    each CTA loads, by CTA)."""
    torch = _torch()
    from triton.tools.tensor_descriptor import TensorDescriptor
    if tensors is None:
        a = torch.empty(m, k, dtype=torch.float16, device=device)
        bt = torch.empty(n, k, dtype=torch.float16, device=device)
        if device != "cuda":
            a.normal_()
            bt.normal_()
        tensors = (a, bt)
    a, bt = tensors
    a_desc = TensorDescriptor(a, list(a.shape), [k, 1], [BM, BK])
    b_desc = TensorDescriptor(bt, list(bt.shape), [k, 1], [BN, BK])
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.gemm_loads_kernel[(ctas,)](a_desc, b_desc, rec, m, n, k, BM=BM, BN=BN, BK=BK, GROUP_M=group_m, STAGES=stages,
                                  NUM_SMS=ctas, TIMED=timed, num_warps=4)
    tiles = -(-m // BM) * -(-n // BN)
    per_cta = [len(range(p, tiles, ctas)) * -(-k // BK) * (BM + BN) * BK * 2 for p in range(ctas)]
    return rec, per_cta


def launch_barrier(kind="pingpong", warp_barrier=False, rounds=10000, timed=True, device="cuda"):
    torch = _torch()
    rec = torch.zeros(K.REC, dtype=torch.int64, device=device)
    if kind == "pingpong":
        K.barrier_pingpong_kernel[(1,)](rec, rounds, WARP_BARRIER=warp_barrier, TIMED=timed, num_warps=4)
    elif kind == "self":
        K.barrier_self_kernel[(1,)](rec, rounds, WARP_BARRIER=warp_barrier, TIMED=timed, num_warps=4)
    else:
        K.named_pingpong_kernel[(1,)](rec, rounds, TIMED=timed, num_warps=4)
    return rec


def launch_smem(store=False, BM=128, BN=64, iters=1000, ctas=132, timed=True, device="cuda"):
    torch = _torch()
    x = torch.randn(BM, BN, device=device).to(torch.float16)
    out = torch.empty(ctas * BM * BN, dtype=torch.float16, device=device)
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.smem_loop_kernel[(ctas,)](x, out, rec, iters, BM=BM, BN=BN, STORE=store, TIMED=timed, num_warps=4)
    return rec, out, BM * BN * 2 * iters


# ---------------------------------------------------------------------------------------------- readings
def _per_cta(recs):
    """cycles, ns and SM of each record; only records of CTAs alone on their SM count for rates."""
    rows = [dict(cycles=r[1] - r[0], ns=r[3] - r[2], sm=r[4]) for r in recs]
    by_sm: dict = {}
    for r in rows:
        by_sm.setdefault(r["sm"], []).append(r)
    return rows, by_sm


def _median(xs):
    return float(statistics.median(xs)) if xs else float("nan")


def measure_mma(log):
    out = []
    cases = [("float16", bn, c) for bn in (64, 128, 256) for c in (1, 2)]
    cases += [("bfloat16", 256, 2), ("float8_e4m3fn", 128, 2), ("float8_e4m3fn", 256, 1),
              ("float8_e4m3fn", 256, 2), ("float32", 128, 2), ("float32", 256, 2)]
    for dtype, bn, cons in cases:
        flops_one = 2.0 * 64 * bn * _bk(dtype)
        # ~100 ms at the fp16 rate
        iters = int(100e-3 * 1.6e9 * 4096 / (cons * flops_one) * (2 if "8" in dtype else 0.5 if dtype == "float32"
                                                                  else 1))
        # compile + warm with the very ITERS timed: Triton specializes an int argument on its divisibility by 16,
        # so another count could compile a second kernel inside the timed window (the ms, not the cycles)
        launch_mma(dtype, bn, cons, iters=iters)
        (rec, _, flops), ms = event_ms(lambda: launch_mma(dtype, bn, cons, iters=iters))
        rows, by_sm = _per_cta(_records(rec, 132 * cons))
        alone = [r for r in rows if len(by_sm[r["sm"]]) == cons]
        cyc = _median([r["cycles"] for r in alone])
        ghz = _median([r["cycles"] / r["ns"] for r in alone if r["ns"] > 0])
        out.append(dict(dtype=dtype, BM=64, BN=bn, BK=_bk(dtype), consumers=cons, iters=iters, ms=ms,
                        cycles=cyc, clock_ghz=ghz, sms=len(by_sm),
                        flops_per_cycle_per_sm=cons * flops / cyc,
                        tflops=132 * cons * flops / (ms * 1e-3) / 1e12))
        log(f"mma {dtype} n{bn} x{cons}: {out[-1]['flops_per_cycle_per_sm']:.0f} flop/clk/SM, "
            f"{out[-1]['tflops']:.0f} TFLOP/s at {ghz:.3f} GHz")
    return out


#: the wgmma loops whose accumulator does not fit the registers (BM=128 rows per warp group, BN=256: 256 fp32 a
#: thread), so ptxas spills part of it and reloads it every iteration, beside the same loop that fits (BM=64):
#: (BM, BN, consumer warp groups, CTAs)
SPILL_LOOPS = ((64, 256, 2, 132), (128, 256, 1, 132), (128, 256, 2, 132), (128, 256, 1, 1), (128, 256, 2, 1))


def spill_loop_placement(BM, BN, consumers, gpu="H200"):
    """The spill code of the fp16 wgmma loop ``(BM, BN, consumers)`` (``kernels.mma_loop_kernel``), compiled offline
    for ``gpu``: ``compiler.sass_loops.SpillPlacement`` (bytes per thread: all of it, and per iteration of its
    loop)."""
    from ..compiler import compile as wb_compile
    from ..compiler.sass_loops import spill_placement
    a, b, out, rec = mma_tensors("float16", BN, consumers, 1, BM, "cpu")
    report = wb_compile(K.mma_loop_kernel, a, b, out, rec, 1000, target=gpu, BM=BM, BN=BN, BK=_bk("float16"),
                        CONSUMERS=consumers, IN_FLIGHT=2, TIMED=True, num_warps=4)
    return spill_placement(report.sass)


def measure_spill_loop(log):
    """What a loop's register spills cost: the fp16 wgmma loop of ``SPILL_LOOPS`` (its accumulator spilled and
    reloaded every iteration where BM=128), one CTA and every SM; cycles per iteration per warp group beside the
    spill bytes per thread its SASS runs per iteration (``spill_loop_placement``). The simulator charges those
    bytes at the L1 or L2 rate; these say at what rate they go."""
    out = []
    iters = 4000
    for bm, bn, cons, ctas in SPILL_LOOPS:
        placement = spill_loop_placement(bm, bn, cons)
        tensors = mma_tensors("float16", bn, cons, ctas, bm)
        launch_mma("float16", bn, cons, iters=iters, ctas=ctas, BM=bm, tensors=tensors)
        (rec, _, flops), ms = event_ms(lambda: launch_mma("float16", bn, cons, iters=iters, ctas=ctas, BM=bm,
                                                          tensors=tensors))
        rows, _ = _per_cta(_records(rec, ctas * cons))
        cyc = _median([r["cycles"] for r in rows])
        out.append(dict(dtype="float16", BM=bm, BN=bn, BK=_bk("float16"), consumers=cons, ctas=ctas, iters=iters,
                        ms=ms, cycles_per_iteration=cyc / iters,
                        clock_ghz=_median([r["cycles"] / r["ns"] for r in rows if r["ns"] > 0]),
                        loop_spill_loads=placement.loop_loads, loop_spill_stores=placement.loop_stores,
                        loop_wgmmas=placement.loop_wgmmas, spill_loads=placement.loads, spill_stores=placement.stores,
                        flops_per_cycle_per_sm=cons * flops / cyc))
        log(f"spill loop m{bm}n{bn} x{cons} on {ctas} CTA(s): {cyc / iters:.0f} cycles an iteration, "
            f"{placement.loop_loads} + {placement.loop_stores} B/thread of spills in its body "
            f"({placement.loop_wgmmas} wgmma instructions)")
    return out


def _spill_figures(rows, serial: dict | None) -> dict | None:
    """The rate a wgmma loop's spills move at (bytes per cycle per SM, by CTAs in flight), from the ``spill_loop``
    family's one-group rows: its serialized wgmma loop (ptxas serializes a loop that spills; each instruction waits
    for the one before, ``mma_serial_cycles``) runs its spills and its MMAs one after the other, so an iteration is
    its wgmma instructions at the serial cost plus its spill bytes (the loop's per wgmma instruction, times the
    iteration's) for 128 threads at this rate. The two-group rows overlap one group's spills with the other's MMAs:
    a cross-check through the simulator, not derived from here. None without both families."""
    rows = [r for r in rows or [] if isinstance(r, dict) and r.get("consumers") == 1 and r.get("loop_wgmmas")
            and r.get("loop_spill_loads", 0) + r.get("loop_spill_stores", 0) > 0]
    if not rows or not serial:
        return None
    out, duty = {}, {}
    for r in rows:
        instr = (r["BM"] // 64) * (r["BK"] // 16)
        per_iteration = (r["loop_spill_loads"] + r["loop_spill_stores"]) / r["loop_wgmmas"] * instr
        each = serial[min(serial, key=lambda n: abs(int(n) - r["BN"]))]     # the family times BN=256, measured
        spill_cycles = r["cycles_per_iteration"] - instr * each
        out[str(r["ctas"])] = per_iteration * 128 / spill_cycles
        duty[str(r["ctas"])] = spill_cycles / r["cycles_per_iteration"]
    return dict(bytes_per_cycle_per_sm=out, duty=duty,
                source="spill_loop one-group rows: (per-iteration spill bytes x 128 threads) / (cycles an iteration "
                       "- its wgmma instructions at the serial cost); duty: the share of an iteration its spills take")


def measure_mma_latency(log):
    """One wgmma instruction issued and waited for, again and again, by one warp group (BK=16: one k16
    instruction per async_dot, nothing in flight): what each instruction costs when ptxas serializes the
    wgmma pipeline (C7510-C7515)."""
    out = []
    for bn in (64, 128, 256):
        launch_mma_k("float16", bn, iters=16)
        iters = 20000
        (rec, _, flops), ms = event_ms(lambda: launch_mma_k("float16", bn, iters=iters))
        rows, by_sm = _per_cta(_records(rec, 132))
        cyc = _median([r["cycles"] for r in rows if len(by_sm[r["sm"]]) == 1])
        out.append(dict(dtype="float16", BM=64, BN=bn, BK=16, cycles_per_instruction=cyc / iters,
                        work_cycles=2.0 * 64 * bn * 16 / 4096))
        log(f"serialized wgmma m64n{bn}k16: {cyc / iters:.1f} cycles each")
    return out


def launch_mma_k(dtype="float16", BN=128, iters=1000, ctas=132, timed=True, device="cuda"):
    """The tensor-core loop with BK=16 and one group, nothing in flight (see measure_mma_latency)."""
    torch = _torch()
    dt = getattr(torch, dtype)
    BM, BK = 64, 16
    a = torch.randn(BM, BK, device=device).to(dt)
    b = torch.randn(BN, BK, device=device).to(dt)
    out = torch.empty(ctas * BM * BN, dtype=torch.float32, device=device)
    rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device=device)
    K.mma_loop_kernel[(ctas,)](a, b, out, rec, iters, BM=BM, BN=BN, BK=BK, CONSUMERS=1, IN_FLIGHT=1, TIMED=timed,
                               num_warps=4)
    return rec, out, 2.0 * BM * BN * BK * iters


def measure_clock(log, seconds=3.0):
    """The SM clock under sustained tensor-core load: back-to-back fp16 wgmma loops on every SM."""
    torch = _torch()
    iters = int(0.25 * 1.6e9 * 4096 / (2 * 2.0 * 64 * 256 * 64))
    t0, readings = time.time(), []
    while time.time() - t0 < seconds:
        (rec, _, _), ms = event_ms(lambda: launch_mma("float16", 256, 2, iters=iters))
        rows, _ = _per_cta(_records(rec, 264))
        readings.append(dict(t=time.time() - t0, ms=ms,
                             clock_ghz=_median([r["cycles"] / r["ns"] for r in rows if r["ns"] > 0])))
    torch.cuda.synchronize()
    steady = [r["clock_ghz"] for r in readings if r["t"] > seconds / 2] or [readings[-1]["clock_ghz"]]
    log(f"clock under load: {_median(steady):.3f} GHz (first {readings[0]['clock_ghz']:.3f})")
    return dict(sustained_ghz=_median(steady), readings=readings)


def measure_tma(log):
    torch = _torch()
    out = []
    for box_m in (64, 128, 256):
        hbm_rows = (2 << 30) // (box_m * 64 * 2)             # 2 GiB of boxes: every load misses L2
        big = tma_descriptor(hbm_rows, box_m, 64)
        for stages in (1, 2, 4, 8):
            if stages * box_m * 64 * 2 > 200 * 1024:
                continue
            launch_tma(box_m, 64, stages, ctas=1, iters=16, tensor=big)        # compile
            for ctas in (1, 8, 33, 66, 132):
                for where, spread in (("hbm", 0), ("l2", 0)) + ((("l2", L2_SPREAD),) if ctas > 1 else ()):
                    per_cta = 2048 if ctas == 1 else 512
                    iters = min(per_cta, hbm_rows // ctas)
                    region = None if where == "hbm" else max(1, (8 << 20) // (box_m * 64 * 2))
                    (rec, nbytes), ms = event_ms(lambda: launch_tma(box_m, 64, stages, ctas, iters, region,
                                                                    tensor=big, spread=spread))
                    rows, by_sm = _per_cta(_records(rec, ctas))
                    cyc = _median([r["cycles"] for r in rows])
                    out.append(dict(box=[box_m, 64], bytes=box_m * 128, stages=stages, ctas=ctas, where=where,
                                    spread=spread,
                                    iters=iters, ms=ms, cycles_per_load=cyc / iters,
                                    bytes_per_cycle_per_cta=nbytes / cyc,
                                    gbps=ctas * nbytes / (ms * 1e-3) / 1e9,
                                    clock_ghz=_median([r["cycles"] / r["ns"] for r in rows if r["ns"] > 0])))
        del big
        torch.cuda.empty_cache()
        log(f"tma box {box_m}x64 done ({len(out)} cases)")
    return out


def measure_tma_store(log):
    out = []
    for box_n in (64, 128):
        rows_total = (1 << 30) // (64 * box_n * 2)
        x, desc = tma_descriptor(rows_total, 64, box_n)
        for stages in (1, 2, 4):
            launch_tma_store(64, box_n, stages, ctas=1, iters=8, tensor=(x, desc))
            for ctas in (1, 132):
                iters = min(1024, rows_total // ctas)
                (res, ms) = event_ms(lambda: launch_tma_store(64, box_n, stages, ctas, iters, tensor=(x, desc)))
                rec, nbytes, _ = res
                rows, _ = _per_cta(_records(rec, ctas))
                cyc = _median([r["cycles"] for r in rows])
                out.append(dict(box=[64, box_n], stages=stages, ctas=ctas, iters=iters, ms=ms,
                                cycles_per_store=cyc / iters, bytes_per_cycle_per_cta=nbytes / cyc,
                                gbps=ctas * nbytes / (ms * 1e-3) / 1e9))
        log(f"tma store box 64x{box_n} done")
    return out


#: stores per CTA beside the ``tma_store_beside`` family's 1024 loads of 16 KiB: none (the loads alone), a GEMM
#: epilogue's share and more (a 4096^3 fp8 GEMM stores 1 byte per 40 it loads; these 1 per 128, 32 and 8)
STORES_BESIDE = (0, 32, 128, 512)


def measure_tma_store_beside(log):
    """The ``tma`` family's in-step L2 loop (box 128 x 64 fp16, 4 in flight, 1024 loads a CTA) alone and with a
    warp group storing 64 x 64 fp16 boxes beside it (``STORES_BESIDE``), on 1 and 132 CTAs: what a CTA's stores
    cost its loads."""
    torch = _torch()
    out = []
    tensors = load_store_tensors(max(STORES_BESIDE))
    launch_tma_load_store(16, 2, ctas=1, tensors=tensors)         # compile
    for ctas in (1, 132):
        for stores in STORES_BESIDE:
            (rec, ld_bytes, st_bytes), ms = event_ms(lambda: launch_tma_load_store(1024, stores, ctas,
                                                                                   tensors=tensors))
            recs = _records(rec, 2 * ctas)
            loads, _ = _per_cta(recs[0::2])
            st, _ = _per_cta(recs[1::2])
            ld_cyc = _median([r["cycles"] for r in loads])
            st_cyc = _median([r["cycles"] for r in st]) if stores else 0.0
            out.append(dict(ctas=ctas, stores=stores, load_bytes=ld_bytes, store_bytes=st_bytes, ms=ms,
                            load_cycles=ld_cyc, store_cycles=st_cyc,
                            load_bytes_per_cycle_per_cta=ld_bytes / ld_cyc,
                            store_bytes_per_cycle_per_cta=st_bytes / st_cyc if st_cyc else None,
                            clock_ghz=_median([r["cycles"] / r["ns"] for r in loads if r["ns"] > 0])))
    del tensors
    torch.cuda.empty_cache()
    log(f"tma store beside loads done ({len(out)} cases)")
    return out


def measure_cp_async(log):
    torch = _torch()
    out = []
    rows = (2 << 30) // 2
    x = torch.empty(rows, dtype=torch.float16, device="cuda")
    for box_m, box_k in ((128, 64), (64, 256)):
        region_all = rows // (box_m * box_k)
        for stages in (2, 3, 4):
            launch_cp_async(box_m, box_k, stages, ctas=1, iters=8, tensor=x)
            for ctas in (1, 33, 132):
                for where in ("hbm", "l2"):
                    iters = min(2048 if ctas == 1 else 512, region_all // ctas - stages)
                    region = region_all if where == "hbm" else max(1, (8 << 20) // (box_m * box_k * 2))
                    (res, ms) = event_ms(lambda: launch_cp_async(box_m, box_k, stages, ctas, iters, region, tensor=x))
                    rec, nbytes = res
                    rows_, _ = _per_cta(_records(rec, ctas))
                    cyc = _median([r["cycles"] for r in rows_])
                    out.append(dict(box=[box_m, box_k], bytes=box_m * box_k * 2, stages=stages, ctas=ctas, where=where,
                                    iters=iters, ms=ms, cycles_per_load=cyc / iters,
                                    bytes_per_cycle_per_cta=nbytes / cyc))
        log(f"cp.async box {box_m}x{box_k} done")
    return out


def _mma_copy_case(dtype, bn, cons, where, seconds, tensor, log=None):
    """One mma_copy launch of about ``seconds`` at a sustained clock: the wgmma groups' and the copy's rates."""
    flops_one = 2.0 * 64 * bn * _bk(dtype)
    iters = max(16, int(seconds * 1.6e9 * 4096 * (2 if "8" in dtype else 1) / (cons * flops_one)))
    (rec, flops, nbytes), ms = event_ms(lambda: launch_mma_copy(dtype, bn, cons, iters=iters, where=where,
                                                                tensor=tensor))
    recs = _records(rec, 132 * (cons + 1))
    mma = [r for i, r in enumerate(recs) if i % (cons + 1) != cons]
    copy = [r for i, r in enumerate(recs) if i % (cons + 1) == cons]
    mrows, _ = _per_cta(mma)
    crows, _ = _per_cta(copy)
    cyc = _median([r["cycles"] for r in mrows])
    # the copy must outlast the wgmmas for their rate to be one under copy load
    covered = sum(c[3] >= max(m[3] for m in mma[i * cons:(i + 1) * cons]) for i, c in enumerate(copy)) / len(copy)
    return dict(dtype=dtype, BM=64, BN=bn, BK=_bk(dtype), consumers=cons, where=where, iters=iters, ms=ms,
                cycles=cyc, flops_per_cycle_per_sm=cons * flops / cyc,
                copy_bytes_per_cycle_per_cta=nbytes / _median([r["cycles"] for r in crows]),
                copy_covers_mma=covered, box=[128, 64],
                clock_ghz=_median([r["cycles"] / r["ns"] for r in mrows if r["ns"] > 0]),
                tflops=132 * cons * flops / (ms * 1e-3) / 1e12)


def measure_mma_copy(log):
    """The tensor core's rate while TMA streams into the same SMs (the load a GEMM pipeline adds to the
    wgmma loop): wgmma operand reads and TMA writes share each SM's SMEM, and the copy adds to the board's
    power. ~100 ms per case, every SM busy; from L2 (an 8 MiB region read again and again) and from HBM."""
    torch = _torch()
    out = []
    hbm = tma_descriptor((2 << 30) // (128 * 64 * 2), 128, 64)
    l2 = tma_descriptor((8 << 20) // (128 * 64 * 2), 128, 64)
    for dtype, bn, cons, where in (("float16", 256, 2, "l2"), ("float16", 256, 2, "hbm"), ("float16", 128, 2, "l2"),
                                   ("float16", 256, 1, "l2"), ("float8_e4m3fn", 256, 2, "l2")):
        tensor = l2 if where == "l2" else hbm
        launch_mma_copy(dtype, bn, cons, iters=16, where=where, tensor=tensor)          # compile
        out.append(_mma_copy_case(dtype, bn, cons, where, 0.1, tensor))
        r = out[-1]
        log(f"mma+copy {dtype} n{bn} x{cons} from {where}: {r['flops_per_cycle_per_sm']:.0f} flop/clk/SM, "
            f"copy {r['copy_bytes_per_cycle_per_cta']:.1f} B/clk/CTA, {r['clock_ghz']:.3f} GHz, "
            f"covered {r['copy_covers_mma']:.2f}")
    del hbm
    torch.cuda.empty_cache()
    return out


def _clock_of(rec, n):
    rows, _ = _per_cta(_records(rec, n))
    return _median([r["cycles"] / r["ns"] for r in rows if r["ns"] > 0]), _median([r["cycles"] for r in rows])


def measure_power(log, idle_s=2.0, ramp_s=1.5):
    """The clock the board holds against load and time (what turns a launch's cycles into its time):
    - ``ramp``: after ``idle_s`` idle, ~2 ms launches back to back for ``ramp_s``, each launch's clock (per-CTA
      ``clock64`` over ``globaltimer``) against the time since the load began: the wgmma loop alone, the wgmma
      loop with a TMA copy from L2, and a TMA copy from HBM alone;
    - ``do_bench``: the wgmma loop at launch lengths from 10 us to 3 ms under ``triton.testing.do_bench`` (L2
      flushed between launches, as every measured kernel time of the project): do_bench's time and the clock
      of the window's last launch;
    - ``flush_us``: what do_bench's L2 flush between two launches takes."""
    import triton
    torch = _torch()
    out = dict(idle_s=idle_s, ramp_s=ramp_s, ramp={}, do_bench=[])
    l2 = tma_descriptor((8 << 20) // (128 * 64 * 2), 128, 64)
    hbm = tma_descriptor((2 << 30) // (128 * 64 * 2), 128, 64)
    per_ms = 1.6e6 / 1024                       # wgmma-loop iterations per ms (n256, 2 groups, ~1.6 GHz)
    loads_ms = int(1.6e6 / (128 * 64 * 2 / 17.0))   # HBM box loads per CTA per ms
    kinds = {
        "mma": (lambda: launch_mma("float16", 256, 2, iters=int(2 * per_ms)), 264),
        "mma_copy_l2": (lambda: launch_mma_copy("float16", 256, 2, iters=int(2 * per_ms), where="l2", tensor=l2)[0],
                        396),
        "copy_hbm": (lambda: launch_tma(128, 64, 4, ctas=132, iters=2 * loads_ms, region=hbm[0].shape[0] // 128,
                                        tensor=hbm)[0], 132),
    }
    for name, (fn, nrec) in kinds.items():
        fn()
        torch.cuda.synchronize()
        time.sleep(idle_s)
        t0, rows = time.time(), []
        while time.time() - t0 < ramp_s:
            t = time.time() - t0
            r = fn() if name != "mma" else fn()[0]
            ghz, cyc = _clock_of(r, nrec)
            rows.append(dict(t=t, clock_ghz=ghz, cycles=cyc))
        out["ramp"][name] = rows
        log(f"ramp {name}: {rows[0]['clock_ghz']:.3f} GHz first, {rows[len(rows) // 2]['clock_ghz']:.3f} at "
            f"{rows[len(rows) // 2]['t']:.2f} s, {rows[-1]['clock_ghz']:.3f} at {rows[-1]['t']:.2f} s")
    for us in (10, 30, 100, 300, 1000, 3000):
        iters = max(16, int(us * 1e-3 * per_ms * 1.98 / 1.6))
        holder, made = {}, mma_tensors("float16", 256, 2)

        def fn():       # the operands made once: do_bench's window holds the launch alone
            holder["rec"] = launch_mma("float16", 256, 2, iters=iters, tensors=made)[0]
        fn()
        torch.cuda.synchronize()
        time.sleep(1.0)
        ms = time_call(fn, name=f"wgmma loop x{iters}", warmup=30, rep=120).median_ms
        ghz, cyc = _clock_of(holder["rec"], 264)
        out["do_bench"].append(dict(iters=iters, ms=ms, clock_ghz=ghz, cycles=cyc,
                                    flops_per_cycle_per_sm=2 * 2.0 * 64 * 256 * 64 * iters / cyc))
        log(f"do_bench wgmma loop {ms * 1e3:.1f} us: last launch at {ghz:.3f} GHz")
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    cache.zero_()
    torch.cuda.synchronize()
    (_, ms) = event_ms(lambda: [cache.zero_() for _ in range(100)])
    out["flush_us"] = ms * 10.0
    out["flush_bytes"] = cache.numel() * cache.element_size()
    log(f"do_bench's L2 flush: {out['flush_us']:.1f} us ({out['flush_bytes'] / 2**20:.0f} MiB)")
    del hbm
    torch.cuda.empty_cache()
    return out


# the tile shapes of the gemm_loads family beside the default 128 x 256 x 64 (fp16 boxes with the FP8 GEMM's tiles'
# bytes: BK=64 fp16 is BK=128 fp8): (BM, BN, BK, stages)
GEMM_LOAD_TILES = ((64, 256, 64, 5), (128, 128, 64, 6), (256, 128, 64, 3), (128, 256, 32, 6))


def measure_gemm_loads(log):
    """How often a GEMM's tile order hits L2, measured: the loads of a persistent fp16 GEMM (128 x 256 x 64 tiles,
    4 stages, 132 CTAs) in the grouped order (GROUP_M 8) and row by row (GROUP_M 1), at 4096^3 and 8192^3, no
    math; and at 4096^3 in the grouped order, the tile shapes of ``GEMM_LOAD_TILES``. Bytes per cycle per CTA (the
    best of 3 launches) against the L2 loop's (every load a hit) and the HBM loop's."""
    torch = _torch()
    out = []
    for size in (4096, 8192):
        a = torch.randn(size, size, device="cuda").half()
        bt = torch.randn(size, size, device="cuda").half()
        cases = [(128, 256, 64, 4, g) for g in (8, 1)] + \
            ([(bm, bn, bk, st, 8) for bm, bn, bk, st in GEMM_LOAD_TILES] if size == 4096 else [])
        for bm, bn, bk, stages, group_m in cases:
            def go():
                return launch_gemm_loads(size, size, size, BM=bm, BN=bn, BK=bk, group_m=group_m, stages=stages,
                                         tensors=(a, bt))
            go()
            torch.cuda.synchronize()
            runs = []
            for _ in range(3):
                (rec, per_cta), ms = event_ms(go)
                rows, _ = _per_cta(_records(rec, 132))
                runs.append(dict(ms=ms, bytes_per_cycle_per_cta=_median([b / r["cycles"] for b, r in zip(per_cta, rows)
                                                                          if r["cycles"] > 0]),
                                 clock_ghz=_median([r["cycles"] / r["ns"] for r in rows if r["ns"] > 0]),
                                 gbps=sum(per_cta) / (ms * 1e-3) / 1e9))
            best = max(runs, key=lambda r: r["bytes_per_cycle_per_cta"])
            out.append(dict(M=size, N=size, K=size, BM=bm, BN=bn, BK=bk, group_m=group_m, stages=stages, ctas=132,
                            **best))
            log(f"gemm loads {size}^3 {bm}x{bn}x{bk} GROUP_M={group_m}: {best['bytes_per_cycle_per_cta']:.1f} "
                f"B/clk/CTA, {best['gbps']:.0f} GB/s")
        del a, bt
        torch.cuda.empty_cache()
    return out


def measure_launch(log):
    """What do_bench sees of a launch that does nothing: the fixed cost under every kernel's time (CUDA
    events around the launch, L2 flushed between runs as do_bench does), for 1 and 132 CTAs."""
    torch = _torch()
    x = torch.empty(1, device="cuda")
    out = {}
    for ctas in (1, 132, 1024):
        K.empty_kernel[(ctas,)](x)
        torch.cuda.synchronize()
        ms = time_call(lambda: K.empty_kernel[(ctas,)](x), name=f"empty launch x{ctas}", warmup=50,
                       rep=300).median_ms
        out[str(ctas)] = ms * 1e3
        log(f"empty launch, {ctas} CTAs: {ms * 1e3:.2f} us (do_bench median)")
    return out


def _turnover_read(r, per_sm: int, first_wave: int) -> dict:
    """One launch's records (``[clock0, clock1, ns0, ns1, smid]`` per CTA): the span from the first CTA's start to
    the last one's end, a CTA's own time, the first wave's start spread, and the CTA turnover: on each SM, the gap
    between a CTA's start and the end of the one whose slot it took (the earliest to end of those before it)."""
    t0 = min(c[2] for c in r)
    starts = sorted(c[2] for c in r)[:first_wave]
    by_sm: dict = {}
    for c in r:
        by_sm.setdefault(c[4], []).append(c)
    gaps_ns, gaps_cycles = [], []
    for cs in by_sm.values():
        cs.sort(key=lambda c: c[2])
        ends: list = []
        for c in cs:
            if len(ends) >= per_sm:
                prev = min(ends, key=lambda e: e[1])
                gaps_ns.append(c[2] - prev[1])
                gaps_cycles.append(c[0] - prev[0])
                ends.remove(prev)
            ends.append((c[1], c[3]))
    return dict(span_us=(max(c[3] for c in r) - t0) / 1e3, cta_us=_median([c[3] - c[2] for c in r]) / 1e3,
                cta_cycles=_median([c[1] - c[0] for c in r]), start_spread_us=(starts[-1] - starts[0]) / 1e3,
                turnover_ns=_median(gaps_ns) if gaps_ns else None,
                turnover_cycles=_median(gaps_cycles) if gaps_cycles else None)


def measure_turnover(log):
    """Where a launch's time goes outside its CTAs' own work: a TMA loop (16 KiB boxes from HBM, a CTA's loads all in
    flight at once) launched with the L2 flushed, 1 CTA an SM (12 stages, 192 KiB SMEM) or 3 (4 stages), over 1-8
    waves. Per launch (the median of 7): do_bench's time, the span from the first CTA's start to the last one's end,
    a CTA's own time, the first wave's start spread and the CTA turnover on an SM (``_turnover_read``)."""
    torch = _torch()
    import triton
    driver = triton.runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = []
    for stages, per_sm in ((12, 1), (4, 3)):
        for waves in (1, 2, 4, 8):
            ctas = sms * per_sm * waves
            _, desc = tma_descriptor(ctas * stages, 128, 64)
            rec = torch.zeros(ctas * K.REC, dtype=torch.int64, device="cuda")

            def launch():       # no allocation inside: do_bench times the launch alone
                K.tma_stream_kernel[(ctas,)](desc, rec, stages, ctas * stages, BOX_M=128, BOX_K=64, STAGES=stages,
                                             TIMED=True, num_warps=4)
            launch()
            torch.cuda.synchronize()
            reads = []
            for _ in range(7):
                driver.clear_cache(cache)
                launch()
                torch.cuda.synchronize()
                reads.append(_turnover_read(_records(rec, ctas), per_sm, sms * per_sm))
            ms = time_call(launch, name=f"turnover x{ctas}", warmup=20, rep=100).median_ms
            row = dict(stages=stages, ctas_per_sm=per_sm, waves=waves, ctas=ctas, do_bench_us=ms * 1e3,
                       **{k: _median([d[k] for d in reads]) if reads[0][k] is not None else None for k in reads[0]})
            out.append(row)
            log("turnover " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in row.items()))
    return out


def measure_barriers(log):
    out = {}
    rounds = 20000
    for kind, wb_ in (("pingpong", False), ("pingpong", True), ("self", False), ("self", True), ("named", False)):
        launch_barrier(kind, wb_, rounds=16)
        rec = launch_barrier(kind, wb_, rounds=rounds)
        _torch().cuda.synchronize()
        r = _records(rec, 1)[0]
        name = kind + ("_warp_barrier" if wb_ else "")
        out[name] = (r[1] - r[0]) / rounds
        log(f"barrier {name}: {out[name]:.1f} cycles per round")
    return out


def measure_smem(log):
    out = []
    for store in (False, True):
        launch_smem(store, iters=16)
        rec, _, nbytes = launch_smem(store, iters=20000)
        rows, _ = _per_cta(_records(rec, 132))
        cyc = _median([r["cycles"] for r in rows])
        out.append(dict(op="local_store" if store else "local_load", tile=[128, 64], bytes_per_cycle=nbytes / cyc))
        log(f"smem {out[-1]['op']}: {out[-1]['bytes_per_cycle']:.1f} B/clk per warp group")
    return out


def _back_to_back(fn, flop, seconds):
    """``fn`` launched back to back for ``seconds`` while nvidia-smi samples the SM clock and board power every
    50 ms: (TFLOP/s, median SM MHz, median W, max MHz seen), the first fifth of the samples (the ramp) left out.
    One event pair around the whole run, not do_bench's flushed windows: the clock the board settles at."""
    import subprocess
    torch = _torch()
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks.max.sm",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    t0 = time.time()

    def run():
        n = 0
        while time.time() - t0 < seconds:
            for _ in range(10):
                fn()
            n += 10
            if n % 50 == 0:
                torch.cuda.synchronize()
        return n
    n, total_ms = event_ms(run)
    smi.terminate()
    lines = smi.communicate()[0].strip().splitlines()
    rows = [[float(x) for x in line.split(",")] for line in lines if line.count(",") == 2]
    rows = rows[len(rows) // 5:]
    return (flop / (total_ms / n) / 1e9, statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows),
            max(r[2] for r in rows))


def measure_sustained_kernels(log, seconds=6.0):
    """Real kernels run back to back for ``seconds`` each (cuBLAS and the library's ``gemm_ws`` CONFIGS[0] at
    4096^3 / 8192^3, sdpa and the library's ``attention`` CONFIGS[0] at 4x32x4096x128 / 2x32x8192x128; fp16 and
    bf16): the clock and power each settles at and its work per SM cycle. The clock model reads a kernel's draw per
    unit of tensor work from them (``_power_figures``: ``data_factor``), and the roof takes the fastest GEMM where
    it passes the ``mma_copy`` loop."""
    torch = _torch()
    F = torch.nn.functional
    from ..kernels import attention as A
    from ..kernels import gemm_ws, spec
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    subjects = []
    for n in (4096, 8192):
        for dname in ("float16", "bfloat16"):
            a, b = spec("gemm_ws").make_inputs((n, n, n), getattr(torch, dname), "cuda")
            c = torch.empty(n, n, device="cuda", dtype=a.dtype)
            cell = f"gemm {n}^3 {dname}"
            subjects.append((cell, "cublas", lambda a=a, b=b: torch.matmul(a, b), 2.0 * n ** 3))
            subjects.append((cell, "gemm_ws", lambda a=a, b=b, c=c: gemm_ws.launch(a, b, c, gemm_ws.CONFIGS[0]),
                             2.0 * n ** 3))
    for shape in ((4, 32, 4096, 128), (2, 32, 8192, 128)):
        for dname in ("float16", "bfloat16"):
            q, k, v = spec("attention").make_inputs(shape, getattr(torch, dname), "cuda")
            o, scale = torch.empty_like(q), shape[-1] ** -0.5
            cell = f"attention {'x'.join(map(str, shape))} {dname}"
            flop = spec("attention").flops(*shape, causal=False)
            subjects.append((cell, "sdpa", lambda q=q, k=k, v=v, s=scale: F.scaled_dot_product_attention(
                q, k, v, scale=s), flop))
            subjects.append((cell, "ours", lambda q=q, k=k, v=v, o=o, s=scale: A.launch(q, k, v, o, False, s,
                                                                                         A.CONFIGS[0]), flop))
    rows = []
    for cell, name, fn, flop in subjects:
        tf, mhz, watts, maxmhz = _back_to_back(fn, flop, seconds)
        rows.append(dict(cell=cell, subject=name, tflops=round(tf, 1), sm_mhz=round(mhz), max_mhz=round(maxmhz),
                         watts=round(watts), flop_per_clk_sm=round(tf * 1e12 / (sms * mhz * 1e6))))
        log(f"sustained {cell} {name}: {tf:.0f} TFLOP/s at {mhz:.0f} MHz, {watts:.0f} W, "
            f"{rows[-1]['flop_per_clk_sm']} flop/clk/SM")
    del subjects
    torch.cuda.empty_cache()
    return dict(seconds=seconds, rows=rows,
                how=f"each subject launched back to back for {seconds:g} s, nvidia-smi sampled every 50 ms, the "
                    f"first fifth (the ramp) left out; TFLOP/s from one event pair around the run")


# ---------------------------------------------------------------------------------------------- derive
def _cp_async_figures(rows):
    """cp.async per-CTA rate (L2 hits, 8 warps, 3 stages) by the box's row width in bytes, then by CTAs in
    flight: rows of 128 B (a 128 x 64 fp16 box) coalesce into fewer, smaller requests than rows of 512 B."""
    if not rows or isinstance(rows, dict):
        return None
    out = {}
    for box in sorted({tuple(r["box"]) for r in rows}):
        out[str(box[1] * 2)] = {str(c): next((r["bytes_per_cycle_per_cta"] for r in rows if r["ctas"] == c
                                              and r["where"] == "l2" and tuple(r["box"]) == box and r["stages"] == 3),
                                             None) for c in (1, 33, 132)}
    return out


def _power_figures(raw: dict, hbm_bytes_per_cycle_132: float | None) -> dict:
    """What the clock model (``sim/cost.PowerModel``) reads: the boost clock, the clock the wgmma loop holds at
    the power cap, a real kernel's draw per unit of tensor work over the loop's, how long a launch from idle keeps
    the boost, do_bench's L2 flush, and the tensor-core rate sustained under a pipeline's copy load. Each figure
    says where it came from (``*_from``)."""
    mma = raw.get("mma") if isinstance(raw.get("mma"), list) else []
    peak16 = max((m["flops_per_cycle_per_sm"] for m in mma if m["dtype"] == "float16"), default=4096.0)
    tma = raw.get("tma") if isinstance(raw.get("tma"), list) else []
    short = [t["clock_ghz"] for t in tma if t.get("clock_ghz")]
    boost = statistics.median(short) if short else None
    clock = raw.get("clock") if isinstance(raw.get("clock"), dict) else {}
    capped = clock.get("sustained_ghz")
    if not boost or not capped:
        return {}
    cap_demand = (capped / boost) ** 3
    out = dict(boost_ghz=boost, boost_from="median clock of the TMA loops (short launches, every SM streaming)",
               mma_capped_ghz=capped, mma_capped_from="clock family: the fp16 wgmma loop on every SM, 3 s",
               cap_demand=cap_demand, peak_fp16_flops_per_cycle_per_sm=peak16)
    # a real kernel's draw per unit of tensor work, from kernels run back to back for seconds: at the cap, the
    # demand is cap_demand (boost / clock)^3 (dynamic power ~ f V^2, V ~ f across the DVFS range), over its
    # tensor-core utilisation
    rows = ((raw.get("sustained_kernels") or {}).get("rows") or []) if isinstance(raw.get("sustained_kernels"),
                                                                                  dict) else []
    ratios = [cap_demand * (boost / (r["sm_mhz"] / 1e3)) ** 3 / (r["flop_per_clk_sm"] / peak16) for r in rows
              if r.get("sm_mhz") and r.get("flop_per_clk_sm")]
    out["data_factor"] = statistics.median(ratios) if ratios else 1.0
    out["data_factor_from"] = (f"median over the {len(ratios)} sustained kernels (sustained_kernels): "
                               f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "not measured: the wgmma loop's")
    power = raw.get("power") if isinstance(raw.get("power"), dict) and "error" not in raw.get("power") else {}
    readings = clock.get("readings") or []
    ramp = (power.get("ramp") or {}).get("mma") or []
    top = boost
    if ramp:
        # the clock of the wgmma loop's first launches after idle, before any average could reach the cap: where it
        # is below boost, a limit on the draw itself holds a tensor-busy launch down at any length (an H100: 1.65-1.71
        # GHz from the first 2 ms launch over three machine starts, 1.63-1.71 in do_bench windows of 10-300 us)
        burst = statistics.median(r["clock_ghz"] for r in ramp if r["t"] <= ramp[0]["t"] + 0.02)
        if burst < 0.98 * boost:
            top = burst
            out["burst_ghz"], out["burst_demand"] = burst, (burst / boost) ** 3
            out["burst_from"] = "power family: the wgmma loop's first 20 ms of launches after idle"
        half = (top + capped) / 2
        out["boost_s"] = next((r["t"] for r in ramp if r["clock_ghz"] < half), ramp[-1]["t"])
        out["boost_s_from"] = ("power family: the wgmma loop's ramp after idle, first launch below the midpoint of "
                               "its first clock and the capped clock")
    elif readings:
        r0 = readings[0]
        # the first 0.26 s launch's mean clock: boost for boost_s, then the capped clock
        out["boost_s"] = max(0.0, r0["ms"] * 1e-3 * (r0["clock_ghz"] - capped) / (boost - capped))
        out["boost_s_from"] = "clock family: the first launch's mean clock between boost and the capped clock"
    if power.get("flush_us"):
        out["flush_us"], out["flush_from"] = power["flush_us"], "power family: do_bench's L2 flush, timed"
    elif hbm_bytes_per_cycle_132:
        out["flush_us"] = 256e6 / (132 * hbm_bytes_per_cycle_132 * boost * 1e3)
        out["flush_from"] = "do_bench's 256 MB flush at the calibrated HBM rate (132 CTAs)"
    bench = [b for b in power.get("do_bench") or [] if b.get("clock_ghz") and b.get("cycles")]
    if bench:
        # what do_bench adds to a kernel's own cycles (launch, prologue, epilogue): its time less the loop's
        out["do_bench_overhead_us"] = statistics.median(b["ms"] * 1e3 - b["cycles"] / (b["clock_ghz"] * 1e3)
                                                        for b in bench)
        out["do_bench_overhead_from"] = "power family: do_bench's time of the wgmma loop less its cycles at its clock"
        # the flush's own draw: the wgmma loop (demand ~1 while it runs) held below boost at duty t / (t + flush)
        flush = out.get("flush_us") or 0.0
        draws = []
        for b in bench:
            t = b["cycles"] / (b["clock_ghz"] * 1e3)
            duty = t / (t + flush) if flush else 1.0
            # held down by the average, not the burst, with the flush a share of the window large enough to read
            # its draw from (the error of a clock reading grows by 1 / (1 - duty) in it)
            if b["clock_ghz"] < 0.98 * top and duty < 0.85:
                d = cap_demand * (boost / b["clock_ghz"]) ** 3
                draws.append(max(0.0, (d - duty * b["flops_per_cycle_per_sm"] / peak16) / (1 - duty)))
    fitted = raw["fitted"].get("flush_demand") if isinstance(raw.get("fitted"), dict) else None
    if bench:
        if draws:
            out["flush_demand"] = statistics.median(draws)
            out["flush_demand_from"] = (f"power family: {len(draws)} do_bench launch lengths held below "
                                        f"{'the burst clock' if top < boost else 'boost'}")
        elif top < boost and not fitted:
            out["flush_demand"] = 0.0
            out["flush_demand_from"] = ("power family: not readable (every do_bench length is at the burst clock or "
                                        "the flush under 15 % of its window); the burst clock bounds short launches")
    if "flush_demand" not in out and fitted:
        out["flush_demand"], out["flush_demand_from"] = fitted["value"], fitted["from"]
    copy = raw.get("mma_copy") if isinstance(raw.get("mma_copy"), list) else []
    loaded = [c["flops_per_cycle_per_sm"] for c in copy if c["dtype"] == "float16" and c["BN"] == 256
              and c["consumers"] == 2 and c["where"] == "l2" and c.get("copy_covers_mma", 1) >= 0.9]
    gemms = [r["flop_per_clk_sm"] for r in rows if r.get("cell", "").startswith("gemm")]
    # the best rate any launch sustained: the wgmma loop under a TMA stream from L2 at full rate (more copy than a
    # GEMM's: an H100's gemm_ws 8192^3 sustained 3817 flop/cycle/SM against that loop's 3798), or a GEMM run for
    # seconds
    runs = [(r, "mma_copy family: fp16 wgmma loop + TMA from L2") for r in loaded[:1]]
    runs += [(r, f"the fastest of {len(gemms)} GEMMs run for seconds (sustained_kernels)") for r in gemms]
    if runs:
        out["tensor_sustained"], out["tensor_sustained_from"] = max(runs, key=lambda x: x[0])
    if loaded:
        out["tensor_under_copy"], out["tensor_under_copy_from"] = loaded[0], "mma_copy family: fp16 wgmma loop + TMA from L2"
    if hbm_bytes_per_cycle_132:
        out["hbm_gbps"] = 132 * hbm_bytes_per_cycle_132 * boost
    return out


def _tma_queue(tma: list, where: str) -> dict:
    """A CTA's TMA loads as a queue, per number of CTAs streaming (str -> figures), from the ``tma`` family's loops
    (box 64/128/256 x 64 fp16, 1-8 loads in flight):

    - ``bytes_per_cycle``: a load holds the CTA's queue for its bytes at this rate (the next load starts after
      it), the best any loop reached with that many CTAs streaming (the deep loops are not bound by latency);
    - ``latency`` + ``latency_per_load`` x (loads in flight - 1): from the end of its bytes to landed; it grows
      with the loads in flight (queueing in the L2 and the crossbar): a line through the loops that wait on it
      (1 and 2 in flight, 8 and 16 KiB boxes), each one's round trip (in flight x cycles per load) less its
      bytes' time. A round trip includes the loop's own issue, expect and wake. The 4-deep loops sit near the
      loop's floor (below) and are the check, not the fit.

    Not charged: the deep loops take ~308 cycles a load for 8 and 16 KiB boxes alike (``loop_cycles``, a floor
    of the one-load-per-iteration loop): as a floor per request it would give gemm_ws's three loads a k-step
    (two 8 KiB halves of A, 32 KiB of B) 1232 cycles, more than the ~1070 its sustained runs take.
    ``tma`` is the in-step loops (``derive`` leaves out those with a box of their own per CTA): every CTA loads the
    same boxes in the same order (``p * LOADS % REGION`` is 0), the rate that has matched the GEMMs' shared tiles.
    The 256-row boxes with every SM streaming in step are left out. With every SM streaming, the best in-step rate
    is the 8-deep 16 KiB loop at that floor (16384 / ~308 cycles = 53 B/cycle), a bound of the loop as much as of
    the L2: the ``gemm_loads`` streams read 34-68 B/cycle by tile shape, not charged (docs/cost_model.md)."""
    out = {}
    for c in sorted({t["ctas"] for t in tma if t["where"] == where}):
        rows = [t for t in tma if t["where"] == where and t["ctas"] == c and not (c >= 132 and t["box"][0] >= 256)]
        if not rows:
            continue
        rate = max(t["bytes_per_cycle_per_cta"] for t in rows)
        floor = statistics.median([t["cycles_per_load"] for t in rows if t["stages"] == 8] or [0.0])
        pts = [(t["stages"], t["stages"] * t["cycles_per_load"] - t["bytes"] / rate) for t in rows
               if t["stages"] in (1, 2) and t["bytes"] <= 16384]
        if len({d for d, _ in pts}) < 2:
            continue
        xs, ys = [d - 1 for d, _ in pts], [lat for _, lat in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        growth = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        out[str(c)] = dict(bytes_per_cycle=float(rate), latency=float(my - growth * mx),
                           latency_per_load=float(max(0.0, growth)), loop_cycles=float(floor))
    return out


def _store_beside(rows) -> dict:
    """What a CTA's TMA stores cost its TMA loads, per number of CTAs (str -> cycles of the load stream per stored
    byte), from the ``tma_store_beside`` family: the load stream's cycles over its cycles alone, against the bytes
    stored beside it (a least-squares slope through no stores, no cost), from the runs whose stores ended within
    the load stream; 0 where the stores cost the loads nothing (never below). {} where not measured."""
    out = {}
    if not isinstance(rows, list):
        return out
    for c in sorted({r["ctas"] for r in rows}):
        alone = [r["load_cycles"] for r in rows if r["ctas"] == c and not r["stores"]]
        pts = [(r["store_bytes"], r["load_cycles"] - alone[0]) for r in rows if alone and r["ctas"] == c
               and r["stores"] and r["store_cycles"] <= 1.05 * r["load_cycles"]]
        if pts:
            out[str(c)] = max(0.0, sum(x * y for x, y in pts) / sum(x * x for x, _ in pts))
    return out


def derive(raw: dict) -> dict:
    """The cost model's parameters from the raw readings (see ``calibration.Calibration``). The TMA loops measured
    with a box of their own per CTA (``spread``) are recorded for a model of how much of its tiles a launch's CTAs
    share, and read by nothing here: every figure comes from the in-step loops."""
    raw = dict(raw, tma=[t for t in raw["tma"] if not t.get("spread")])
    mma = raw["mma"]

    def rate(dtype, bn=256, cons=2):
        xs = [m["flops_per_cycle_per_sm"] for m in mma if m["dtype"] == dtype and m["BN"] == bn
              and m["consumers"] == cons]
        return xs[0] if xs else None

    fp16 = rate("float16")
    mma_rates = {}
    for m in mma:
        mma_rates.setdefault(m["dtype"], {})[f"n{m['BN']}x{m['consumers']}"] = m["flops_per_cycle_per_sm"]
    tma = raw["tma"]

    def tma_bw(where, ctas, box=128, stages=4):
        xs = [t["bytes_per_cycle_per_cta"] for t in tma if t["where"] == where and t["ctas"] == ctas
              and t["box"][0] == box and t["stages"] == stages]
        return xs[0] if xs else None

    # latency: one load at a time from one CTA, fitted cycles = latency + bytes / single-CTA rate
    lat = {}
    for where in ("hbm", "l2"):
        pts = sorted((t["bytes"], t["cycles_per_load"]) for t in tma if t["where"] == where and t["ctas"] == 1
                     and t["stages"] == 1)
        if len(pts) >= 2:
            (x0, y0), (x1, y1) = pts[0], pts[-1]
            slope = (y1 - y0) / (x1 - x0)
            lat[where] = dict(latency_cycles=y0 - slope * x0, cycles_per_byte=slope)
    # latency under load: one load at a time per CTA (stages=1) with n CTAs streaming, less its transfer at the
    # n-CTA rate; the median over box sizes
    lat_by_ctas = {}
    for where, table in (("l2", "l2"), ("hbm", "hbm")):
        per = {}
        for c in (1, 8, 33, 66, 132):
            rate = tma_bw(table, c)
            xs = sorted(t["cycles_per_load"] - t["bytes"] / rate for t in tma if t["where"] == where
                        and t["ctas"] == c and t["stages"] == 1) if rate else []
            if xs:
                per[str(c)] = xs[len(xs) // 2]
        lat_by_ctas[where] = per
    bars = raw["barriers"]
    self_round = bars["self"]              # arrive + satisfied wait
    return dict(
        clock_ghz=raw["clock"]["sustained_ghz"],
        mma_flops_per_cycle_per_sm=mma_rates,
        mma_fp16_dense=fp16,
        tma=dict(latency=lat, latency_by_ctas=lat_by_ctas,
                 l2_bytes_per_cycle_per_sm={str(c): tma_bw("l2", c) for c in (1, 8, 33, 66, 132)},
                 hbm_bytes_per_cycle_per_sm={str(c): tma_bw("hbm", c) for c in (1, 8, 33, 66, 132)},
                 queue=dict(l2=_tma_queue(tma, "l2"))),     # what the simulator's TMA loads read (L2 hits)
        cp_async=_cp_async_figures(raw.get("cp_async")),
        launch_us=(raw.get("launch") or {}).get("132") if isinstance(raw.get("launch"), dict) else None,
        mma_serial_cycles={str(r["BN"]): r["cycles_per_instruction"] for r in raw["mma_latency"]}
        if isinstance(raw.get("mma_latency"), list) else None,
        tma_store_bytes_per_cycle_per_sm={str(t["ctas"]): t["bytes_per_cycle_per_cta"] for t in raw["tma_store"]
                                          if t["box"] == [64, 64] and t["stages"] == 2},
        tma_store_load_cycles_per_byte=_store_beside(raw.get("tma_store_beside")),
        barrier=dict(arrive_and_satisfied_wait=self_round,
                     arrive_and_satisfied_wait_warp_barrier=bars["self_warp_barrier"],
                     handover=bars["pingpong"] / 2, handover_warp_barrier=bars["pingpong_warp_barrier"] / 2,
                     named_handover=bars["named"] / 2),
        smem_bytes_per_cycle={s["op"]: s["bytes_per_cycle"] for s in raw["smem"]},
        power=_power_figures(raw, tma_bw("hbm", 132)),
        # a GEMM's loads in its tile order (size^3 / GROUP_M / tile BMxBNxBK fp16 -> bytes per cycle per CTA); not
        # charged: the simulator's TMA loads take the in-step L2 loops' rate (docs/cost_model.md, "A GEMM's loads")
        spill=_spill_figures(raw.get("spill_loop"), {str(r["BN"]): r["cycles_per_instruction"]
                                                       for r in raw.get("mma_latency") or [] if isinstance(r, dict)}),
        gemm_loads={f"{r['M']}/{r['group_m']}/{r['BM']}x{r['BN']}x{r['BK']}": r["bytes_per_cycle_per_cta"]
                    for r in raw.get("gemm_loads") or [] if isinstance(r, dict) and "bytes_per_cycle_per_cta" in r},
        # where a launch's time goes outside its CTAs' work; recorded, not charged yet (docs/cost_model.md,
        # "Short launches: what is left")
        turnover=_turnover_figures(raw.get("turnover")),
    )


def _turnover_figures(rows) -> dict | None:
    """The ``turnover`` family's figures by CTAs an SM: the CTA turnover on an SM (the median over the launches of
    two waves or more, in cycles and ns), the first wave's start spread, and what do_bench times beyond the span of
    the launch's CTAs (the median over its launches). None where the family has not run.

    >>> rows = [dict(ctas_per_sm=1, waves=w, do_bench_us=10.0 + w, span_us=6.0 + w, start_spread_us=0.2,
    ...              turnover_cycles=900.0 if w > 1 else None, turnover_ns=470.0 if w > 1 else None) for w in (1, 2, 4)]
    >>> _turnover_figures(rows)["1"]
    {'turnover_cycles': 900.0, 'turnover_ns': 470.0, 'start_spread_us': 0.2, 'outside_us': 4.0}
    """
    rows = [r for r in rows or [] if isinstance(r, dict) and "span_us" in r]
    if not rows:
        return None
    out = {}
    for per_sm in sorted({r["ctas_per_sm"] for r in rows}):
        rs = [r for r in rows if r["ctas_per_sm"] == per_sm]
        turn = [r for r in rs if r["waves"] > 1 and r.get("turnover_cycles") is not None]
        out[str(per_sm)] = dict(turnover_cycles=_median([r["turnover_cycles"] for r in turn]),
                                turnover_ns=_median([r["turnover_ns"] for r in turn]),
                                start_spread_us=_median([r["start_spread_us"] for r in rs]),
                                outside_us=_median([r["do_bench_us"] - r["span_us"] for r in rs]))
    return out


def run(log=print, only=()) -> dict:
    torch = _torch()
    raw = {}
    for name, fn in FAMILIES.items():
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            raw[name] = fn(log)
        except Exception as e:  # noqa: BLE001 - one failed family must not lose the others
            raw[name] = dict(error=f"{type(e).__name__}: {e}")
            log(f"{name} FAILED: {e}")
        log(f"  ({name}: {time.time() - t0:.1f} s)")
    dev = torch.cuda.get_device_properties(0)
    return dict(device=dev.name, sm_count=dev.multi_processor_count,
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                torch=torch.__version__, triton=__import__("triton").__version__, raw=raw)


FAMILIES = {"launch": measure_launch, "mma_latency": measure_mma_latency, "barriers": measure_barriers, "smem": measure_smem, "mma": measure_mma, "tma": measure_tma,
            "tma_store": measure_tma_store, "tma_store_beside": measure_tma_store_beside, "cp_async": measure_cp_async, "clock": measure_clock,
            "mma_copy": measure_mma_copy, "power": measure_power, "gemm_loads": measure_gemm_loads,
            "spill_loop": measure_spill_loop, "turnover": measure_turnover,
            "sustained_kernels": measure_sustained_kernels}


def rederive(path):
    """Recompute a calibration file's ``derived`` section from its ``raw`` readings (after ``derive`` changed);
    the readings, date, device and command stay as the GPU run wrote them."""
    data = json.loads(open(path).read())
    data["derived"] = derive(data["raw"])
    data["derived_by"] = (f"tlx_workbench.calibration.suite.rederive, "
                          f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return data["derived"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="where to write the calibration JSON")
    ap.add_argument("--rederive", action="store_true", help="recompute --out's derived figures from its raw readings")
    ap.add_argument("--only", nargs="*", default=(), choices=sorted(FAMILIES),
                    help="measure these families only and merge them into --out's raw readings")
    ap.add_argument("--command", default="python -m tlx_workbench.calibration.suite", help="recorded in the file")
    args = ap.parse_args(argv)
    if args.rederive:
        print(json.dumps(rederive(args.out)["tma"], indent=1))
        return 0
    result = run(lambda m: print(m, flush=True), tuple(args.only))
    if args.only and pathlib.Path(args.out).exists():
        old = json.loads(open(args.out).read())
        old["raw"].update(result["raw"])
        old.setdefault("added", []).append(dict(families=list(args.only), date=result["date"], device=result["device"],
                                                command=args.command))
        result = old
    try:
        result["derived"] = derive(result["raw"])
        result.pop("derived_error", None)
    except Exception as e:  # noqa: BLE001 - keep the raw readings whatever derive makes of them
        result["derived_error"] = f"{type(e).__name__}: {e}"
    result["command"] = args.command
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
