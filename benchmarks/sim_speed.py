"""CPU simulator speed vs Triton's own interpreter, in one process.

    /work/venv/bin/python benchmarks/sim_speed.py

Simulator: the wheel tutorial hopper_gemm_ws (warp-specialized, TMA + wgmma + mbarriers),
512x512x512 fp16, BM=BN=128, BK=64 -> 16 CTAs. Interpreter (TRITON_INTERPRET=1): a plain
Triton GEMM of the same size and blocks (16 programs). Best of 3 runs each.

Blackwell (B200 cost model): the wheel tutorials blackwell_gemm_ws (512^3, 1-CTA and 2-CTA
configs) and blackwell_fa_ws_pipelined_persistent (1x4x512x128), unchanged; simulator only
(the interpreter cannot run TMEM / tcgen05).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import time

import torch


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


def main(M=512, N=512, K=512, repeats=3):
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
    sim_t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = simulate(mod.matmul, a, b, config=cfg)
        sim_t.append(time.perf_counter() - t0)
    assert len(res.ctas) == 16, res.ctas
    torch.testing.assert_close(res.value.float(), ref, atol=5e-2, rtol=1e-2)

    gemm = _plain_gemm()
    c = torch.empty(M, N, dtype=torch.float16)
    int_t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        gemm[(M // 128 * N // 128,)](a, b, c, M, N, K, BM=128, BN=128, BK=64)
        int_t.append(time.perf_counter() - t0)
    torch.testing.assert_close(c.float(), ref, atol=5e-2, rtol=1e-2)
    s, i = min(sim_t), min(int_t)
    print(f"simulator (hopper_gemm_ws, {M}x{N}x{K}, 16 CTAs): {s:.3f} s  (runs: {', '.join(f'{x:.3f}' for x in sim_t)})")
    print(f"interpreter (plain Triton GEMM, same size/blocks): {i:.3f} s  (runs: {', '.join(f'{x:.3f}' for x in int_t)})")
    print(f"ratio simulator / interpreter: {s / i:.2f}x  ({res.cycles:.0f} simulated cycles)")
    return s, i


if __name__ == "__main__":
    main()
    blackwell()
