"""CPU simulator speed vs Triton's own interpreter, in one process.

    /work/venv/bin/python benchmarks/sim_speed.py [--repeats N] [--no-blackwell]

Simulator: the wheel tutorial hopper_gemm_ws (warp-specialized, TMA + wgmma + mbarriers),
512x512x512 fp16, BM=BN=128, BK=64 -> 16 CTAs. Interpreter (TRITON_INTERPRET=1): a plain
Triton GEMM of the same size and blocks (16 programs).

Made to be read on a shared, loaded machine: after one untimed warm-up of each, the two run
interleaved (the order alternating per round), N rounds (default 7); printed are the minimum
and median wall time of each, the ratio of the minima (the goal: <= 1.0), the CPU time of each
(process time: not inflated by waiting for a core) and the 1-minute load average before and
after. BLAS runs single-threaded (OPENBLAS_NUM_THREADS=1 unless set): the interpreter's only
heavy numpy work is its 128x64x128 tl.dot, and with two BLAS threads on a busy 2-core machine
its time swings 0.5-1.9 s instead of a steady ~0.27 s, so this is the interpreter's best case.

Blackwell (B200 cost model): the wheel tutorials blackwell_gemm_ws (512^3, 1-CTA and 2-CTA
configs) and blackwell_fa_ws_pipelined_persistent (1x4x512x128), unchanged; simulator only
(the interpreter cannot run TMEM / tcgen05).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")     # before numpy loads: see the docstring

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402


def _plain_gemm():
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
            pid = tl.program_id(0)
            n_n = (N + BN - 1) // BN
            pm, pn = pid // n_n, pid % n_n
            rm = pm * BM + tl.arange(0, BM)
            rn = pn * BN + tl.arange(0, BN)
            rk = tl.arange(0, BK)
            acc = tl.full([BM, BN], 0.0, tl.float32)  # tl.zeros is a JIT helper: not interpretable when INTERPRET is set late
            for k in range(0, K, BK):
                a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
                b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
                acc = tl.dot(a, b, acc)
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))
        return gemm
    finally:
        del os.environ["TRITON_INTERPRET"]


def _tutorial(name, gpu):
    import tlx_workbench as wb
    tut = pathlib.Path(__import__("tlx").__file__).parent / "tutorials" / f"{name}.py"
    with wb.offline(gpu):
        spec = importlib.util.spec_from_file_location("tut_" + name, tut)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod


def blackwell(repeats=3):
    from tlx_workbench.sim import simulate
    torch.manual_seed(0)
    gemm = _tutorial("blackwell_gemm_ws", "B200")
    a = torch.randn(512, 512, dtype=torch.float16)
    b = torch.randn(512, 512, dtype=torch.float16)
    base = dict(BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMEM_BUFFERS=3, NUM_TMEM_BUFFERS=1,
                NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=2, SPLIT_K=1, INTERLEAVE_EPILOGUE=0)
    rows = []
    for label, extra in [("blackwell_gemm_ws 512^3, BM=BN=128 (16 CTAs)", dict(BLOCK_SIZE_M=128, NUM_CTAS=1)),
                         ("blackwell_gemm_ws 512^3, 2-CTA BM=256 (8 clusters of 2)",
                          dict(BLOCK_SIZE_M=256, NUM_CTAS=2, ctas_per_cga=(2, 1, 1)))]:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            res = simulate(gemm.matmul, a, b, {**base, **extra}, gpu="B200")
            times.append(time.perf_counter() - t0)
        torch.testing.assert_close(res.value.float(), a.float() @ b.float(), atol=5e-2, rtol=1e-2)
        rows.append((label, min(times), res.cycles))
    fa = _tutorial("blackwell_fa_ws_pipelined_persistent", "B200")
    q, k, v = (torch.randn(1, 4, 512, 128, dtype=torch.float16) for _ in range(3))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = simulate(fa.attention, q, k, v, 0.5, False, 64, 1, gpu="B200")
        times.append(time.perf_counter() - t0)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5)
    torch.testing.assert_close(res.value.float(), ref, atol=1e-2, rtol=1e-2)
    rows.append(("blackwell_fa_ws_pipelined_persistent 1x4x512x128", min(times), res.cycles))
    for label, t, cyc in rows:
        print(f"simulator ({label}): {t:.3f} s  ({cyc:.0f} simulated B200 cycles)")
    return rows


def _timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def main(M=512, N=512, K=512, repeats=7):
    """Interleaved runs of the simulator and the interpreter; returns a dict of the figures printed."""
    import tlx_workbench as wb
    from tlx_workbench.sim import simulate
    tut = pathlib.Path(__import__("tlx").__file__).parent / "tutorials" / "hopper_gemm_ws.py"
    with wb.offline("H100"):
        spec = importlib.util.spec_from_file_location("tut_hopper_gemm_ws", tut)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    torch.manual_seed(0)
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    ref = a.float() @ b.float()
    cfg = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
           "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": False}
    gemm = _plain_gemm()
    c = torch.empty(M, N, dtype=torch.float16)

    def run_sim():
        return simulate(mod.matmul, a, b, config=cfg)

    def run_interp():
        c.zero_()
        gemm[(M // 128 * N // 128,)](a, b, c, M, N, K, BM=128, BN=128, BK=64)

    load0 = os.getloadavg()[0]
    res = run_sim()                     # warm-up (kernel rewrite, imports), untimed
    run_interp()
    sim_w, sim_c, int_w, int_c = [], [], [], []
    for r in range(repeats):
        order = ("sim", "interp") if r % 2 == 0 else ("interp", "sim")
        for which in order:
            if which == "sim":
                w, cpu, res = _timed(run_sim)
                sim_w.append(w)
                sim_c.append(cpu)
            else:
                w, cpu, _ = _timed(run_interp)
                int_w.append(w)
                int_c.append(cpu)
    load1 = os.getloadavg()[0]
    assert len(res.ctas) == 16, res.ctas
    torch.testing.assert_close(res.value.float(), ref, atol=5e-2, rtol=1e-2)
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=1e-2)
    out = {"sim_min": min(sim_w), "sim_median": statistics.median(sim_w), "sim_cpu_min": min(sim_c),
           "interp_min": min(int_w), "interp_median": statistics.median(int_w), "interp_cpu_min": min(int_c),
           "load_before": load0, "load_after": load1, "repeats": repeats, "cycles": res.cycles,
           "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
    out["ratio"] = out["sim_min"] / out["interp_min"]
    out["ratio_cpu"] = out["sim_cpu_min"] / out["interp_cpu_min"]
    fmt = ", ".join
    print(f"{repeats} interleaved rounds, OPENBLAS_NUM_THREADS={out['blas_threads']}, 1-min load average "
          f"{load0:.2f} before / {load1:.2f} after")
    print(f"simulator (hopper_gemm_ws, {M}x{N}x{K}, 16 CTAs): min {out['sim_min']:.3f} s, median "
          f"{out['sim_median']:.3f} s, CPU min {out['sim_cpu_min']:.3f} s  (runs: {fmt(f'{x:.3f}' for x in sim_w)})")
    print(f"interpreter (plain Triton GEMM, same size/blocks): min {out['interp_min']:.3f} s, median "
          f"{out['interp_median']:.3f} s, CPU min {out['interp_cpu_min']:.3f} s  "
          f"(runs: {fmt(f'{x:.3f}' for x in int_w)})")
    print(f"ratio simulator / interpreter: {out['ratio']:.2f}x by minimum wall time, {out['ratio_cpu']:.2f}x by "
          f"minimum CPU time  (goal <= 1.0; {res.cycles:.0f} simulated cycles)")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="interleaved rounds (default 7)")
    ap.add_argument("--no-blackwell", action="store_true", help="skip the Blackwell simulator-only figures")
    opts = ap.parse_args()
    main(repeats=opts.repeats)
    if not opts.no_blackwell:
        blackwell()
