"""Simulator speed: the CPU simulator against torch's own CPU computation of the same result, on one machine.

    .venv/bin/python benchmarks/sim_speed.py [--cells a,b|all] [--one-at-a-time] [--repeats N]
                                             [--big-repeats N] [--json PATH] [--tiny]

Each cell runs a TLX tutorial from the installed wheel, unchanged (loaded under ``tlx_workbench.offline``),
through ``tlx_workbench.simulate`` with every CTA and numerics on, and times a reference computing the same
result. Default cells (H100 cost model, fp16 inputs, reference in fp32 on torch's CPU kernels):

  gemm1024 / gemm2048   ``hopper_gemm_ws`` at 1024^3 / 2048^3 (BM=BN=128, BK=64, 3 stages, 2 MMA groups;
                        a persistent launch of min(132, tiles) CTAs) vs ``a.float() @ b.float()``
  fa2048 / fa4096       ``hopper_fa_ws`` at (Z,H,N,D) = 1x4x2048x128 / 1x16x4096x128 (BLOCK_M=BLOCK_N=128,
                        one MMA group), ``mod.attention(q, k, v, sm_scale, config=cfg)`` vs torch's fp32
                        ``scaled_dot_product_attention``

Further cells (``--cells all`` or by name): ``interp512``, the earlier comparison with Triton's interpreter
(``hopper_gemm_ws`` 512^3, 16 CTAs, against a plain Triton GEMM of the same size and blocks under
``TRITON_INTERPRET=1``, its BLAS on one thread: its best case on a busy 2-core machine, goal <= 1x); and
the Blackwell tutorials (B200 cost model) against torch: ``bw_gemm512``, ``bw_gemm512_2cta`` (clusters
of 2 CTAs) and ``bw_fa512``.

How a cell is timed: one untimed warm-up of the simulation and of the reference (kernel rewrite, compile and
allocator caches), then rounds interleaving the two (order alternating per round); the best round of each is
reported (``--repeats``, default 3; ``--big-repeats`` for fa4096, default 1), and the median simulation round
against the best reference round (``x_ref_median``). The simulated time is the
``simulate()`` call; the first access of the trace (``len(res.trace.spans)``: the trace of the CTAs replayed in a
wave is built lazily then) is timed separately, in its own column. ``wave_leaders`` is how many CTAs were
simulated in full (``res.trace.meta``); a launch that fell back to one CTA at a time says why in ``waves``
("fell back" in the table), and one that never tried waves (clusters of several CTAs, CLC kernels run with
two resident clusters) has neither ("no waves").
``--one-at-a-time`` adds the old path (``waves=False``, ``--one-at-a-time-repeats`` rounds, default 1, after
the waves warm-up) and checks that its output equals the waves output bit for bit.

Every simulated output (warm-up included) is checked against the reference: relative error (fp64 norm) and
an elementwise tolerance loose enough for the fp16 output, tight enough that one wrong tile fails it.

torch runs with the machine's cores (``torch.set_num_threads(os.cpu_count())``, printed and recorded before
every reference run); the simulator runs as it is (it limits BLAS to one thread during a launch itself).
The 1-minute load average is recorded before and after each cell and the run. ``--tiny`` shrinks every
cell (the test suite runs it). ``--json`` writes the rows and the run's head as data; a markdown table is
printed.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time
import traceback

import torch

GEMM_CFG = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
            "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": False}
FA_CFG = {"BLOCK_M": 128, "BLOCK_N": 128, "NUM_BUFFERS": 2, "NUM_MMA_WARPS": 4, "NUM_MMA_GROUPS": 1,
          "num_warps": 4, "num_stages": 1}
BW_GEMM_CFG = dict(BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMEM_BUFFERS=3, NUM_TMEM_BUFFERS=1,
                   NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=2, SPLIT_K=1, INTERLEAVE_EPILOGUE=0)

# tolerances of the check against the fp32 reference (the simulated output is fp16): elementwise
# |out - ref| <= atol + rtol * |ref|, and ||out - ref|| / ||ref|| <= REL_MAX (one zeroed 128x128 tile of a
# 2048^2 output alone gives ~0.06)
GEMM_TOL = dict(atol=5e-2, rtol=1e-2)
FA_TOL = dict(atol=1e-2, rtol=1e-2)
REL_MAX = 1e-2


# ---- the subjects ------------------------------------------------------------------------------

_TUTORIALS: dict = {}


def tutorial(name, gpu):
    """The wheel's ``tlx/tutorials/<name>.py``, unchanged, imported under ``offline(gpu)`` (cached)."""
    key = (name, gpu)
    if key not in _TUTORIALS:
        import tlx_workbench as wb
        path = pathlib.Path(__import__("tlx").__file__).parent / "tutorials" / f"{name}.py"
        with wb.offline(gpu):
            spec = importlib.util.spec_from_file_location(f"tut_{name}_{gpu}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        _TUTORIALS[key] = mod
    return _TUTORIALS[key]


def _plain_gemm():
    """A plain Triton GEMM (no TLX) for the interpreter (``TRITON_INTERPRET=1`` while it is defined)."""
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


@dataclasses.dataclass(frozen=True)
class Cell:
    """One measured cell: ``inputs(shape)`` -> tensors; ``launcher()`` -> the host function simulated on them;
    ``reference(shape)`` -> (its name, a function of the inputs returning the result to compare with)."""
    name: str
    what: str
    gpu: str
    shape: tuple
    tiny: tuple
    inputs: object
    launcher: object
    reference: object
    tol: dict
    goal: float = 10.0
    big: bool = False           # timed --big-repeats rounds, not --repeats
    default: bool = True


def gemm_inputs(shape):
    M, N, K = shape
    return torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)


def attn_inputs(shape):
    q, k, v = (torch.randn(shape, dtype=torch.float16) for _ in range(3))
    return q, k, v, 1.0 / math.sqrt(shape[-1])


def torch_matmul(_shape):
    return "torch fp32 matmul", lambda a, b: a.float() @ b.float()


def torch_sdpa(_shape):
    return "torch fp32 SDPA", lambda q, k, v, s: torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), scale=s)


def interpreter_gemm(shape):
    """The plain Triton GEMM under the interpreter, BLAS on one thread (numpy's, during the call only)."""
    from threadpoolctl import threadpool_limits
    M, N, K = shape
    gemm = _plain_gemm()

    def run(a, b):
        c = torch.zeros(M, N, dtype=torch.float16)
        with threadpool_limits(limits=1, user_api="blas"):
            gemm[(M // 128 * N // 128,)](a, b, c, M, N, K, BM=128, BN=128, BK=64)
        return c
    return "Triton interpreter, plain GEMM", run


# every call gets its own copy of the config: blackwell_gemm_ws's matmul pops ``ctas_per_cga`` from the dict it
# is given, so a reused dict turns the second 2-CTA launch into a 1-CTA launch of the 2-CTA kernel (a deadlock)

def _hopper_gemm():
    mm = tutorial("hopper_gemm_ws", "H100").matmul
    return lambda a, b: mm(a, b, config=dict(GEMM_CFG))


def _hopper_fa():
    fa = tutorial("hopper_fa_ws", "H100").attention
    return lambda q, k, v, s: fa(q, k, v, s, config=dict(FA_CFG))


def _bw_gemm(extra):
    mm = tutorial("blackwell_gemm_ws", "B200").matmul
    return lambda a, b: mm(a, b, config={**BW_GEMM_CFG, **extra})


def _bw_fa():
    fa = tutorial("blackwell_fa_ws_pipelined_persistent", "B200")
    return lambda q, k, v, s: fa.attention(q, k, v, s, False, 64, 1)


_G = "hopper_gemm_ws"
_F = "hopper_fa_ws"
CELLS = {c.name: c for c in [
    Cell("gemm1024", _G, "H100", (1024, 1024, 1024), (256, 256, 256), gemm_inputs, _hopper_gemm, torch_matmul,
         GEMM_TOL),
    Cell("gemm2048", _G, "H100", (2048, 2048, 2048), (256, 256, 256), gemm_inputs, _hopper_gemm, torch_matmul,
         GEMM_TOL),
    Cell("fa2048", _F, "H100", (1, 4, 2048, 128), (1, 1, 256, 128), attn_inputs, _hopper_fa, torch_sdpa, FA_TOL),
    Cell("fa4096", _F, "H100", (1, 16, 4096, 128), (1, 1, 256, 128), attn_inputs, _hopper_fa, torch_sdpa, FA_TOL,
         big=True),
    Cell("interp512", _G, "H100", (512, 512, 512), (256, 256, 256), gemm_inputs, _hopper_gemm, interpreter_gemm,
         GEMM_TOL, goal=1.0, default=False),
    Cell("bw_gemm512", "blackwell_gemm_ws", "B200", (512, 512, 512), (256, 256, 256), gemm_inputs,
         lambda: _bw_gemm(dict(BLOCK_SIZE_M=128, NUM_CTAS=1)), torch_matmul, GEMM_TOL, default=False),
    Cell("bw_gemm512_2cta", "blackwell_gemm_ws 2-CTA", "B200", (512, 512, 512), (256, 256, 256), gemm_inputs,
         lambda: _bw_gemm(dict(BLOCK_SIZE_M=256, NUM_CTAS=2, ctas_per_cga=(2, 1, 1))), torch_matmul, GEMM_TOL,
         default=False),
    Cell("bw_fa512", "blackwell_fa_ws_pipelined_persistent", "B200", (1, 4, 512, 128), (1, 1, 256, 128),
         lambda shape: attn_inputs(shape)[:3] + (0.5,), _bw_fa,
         lambda shape: ("torch fp32 SDPA", torch_sdpa(shape)[1]), FA_TOL, default=False),
]}
DEFAULT_CELLS = [n for n, c in CELLS.items() if c.default]


# ---- measuring -----------------------------------------------------------------------------------

def check(out, ref, tol) -> dict:
    """The simulated output against the reference: relative error (fp64 norms; inf if not finite), largest
    elementwise error, and whether both are within the cell's tolerance."""
    o, r = out.double(), ref.double()
    if o.shape != r.shape or not torch.isfinite(o).all():
        return {"rel_err": float("inf"), "max_abs_err": float("inf"), "ok": False}
    rel = float((o - r).norm() / r.norm().clamp_min(1e-30))
    close = bool(torch.allclose(o, r, atol=tol["atol"], rtol=tol["rtol"]))
    return {"rel_err": rel, "max_abs_err": float((o - r).abs().max()), "ok": close and rel <= REL_MAX}


def _simulate(fn, args, gpu, waves):
    from tlx_workbench.sim import simulate
    w0, c0 = time.perf_counter(), time.process_time()
    res = simulate(fn, *args, gpu=gpu, waves=waves)
    sim_s, sim_cpu = time.perf_counter() - w0, time.process_time() - c0
    t0 = time.perf_counter()
    n_spans = len(res.trace.spans)            # first access: builds the replayed CTAs' trace
    return res, {"s": sim_s, "cpu_s": sim_cpu, "trace_s": time.perf_counter() - t0, "spans": n_spans}


def _reference_run(ref_fn, args, threads):
    if torch.get_num_threads() != threads:      # nothing should change it; if something did, say so and undo it
        print(f"  note: torch threads were {torch.get_num_threads()}, set back to {threads}", flush=True)
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    out = ref_fn(*args)
    return out, time.perf_counter() - t0


def measure(cell, shape, repeats, one_at_a_time=0, threads=None, bar=None) -> dict:
    """Warm-up, then ``repeats`` interleaved rounds of the simulation (waves) and the reference, then
    ``one_at_a_time`` rounds of ``waves=False``; one result row (best round of each)."""
    threads = threads or torch.get_num_threads()
    torch.manual_seed(0)
    args = cell.inputs(shape)
    fn = cell.launcher()
    ref_name, ref_fn = cell.reference(shape)
    load0 = os.getloadavg()[0]
    checks = []

    def step(label):
        if bar is not None:
            bar.set_postfix_str(f"{cell.name} {label}")

    def done():
        if bar is not None:
            bar.update(1)

    step("warm-up")
    res, warm = _simulate(fn, args, cell.gpu, None)
    ref, ref_warm_s = _reference_run(ref_fn, args, threads)
    ref = ref.float()
    checks.append(check(res.value, ref, cell.tol))
    done()
    sims, refs = [], []
    for r in range(repeats):
        step(f"round {r + 1}/{repeats}")
        for which in (("sim", "ref") if r % 2 == 0 else ("ref", "sim")):
            if which == "sim":
                del res
                res, t = _simulate(fn, args, cell.gpu, None)
                checks.append(check(res.value, ref, cell.tol))
                sims.append(t)
            else:
                refs.append(_reference_run(ref_fn, args, threads)[1])
        done()
    meta = res.trace.meta
    best = min(sims, key=lambda t: t["s"])
    ref_s = min(refs)
    row = {"cell": cell.name, "what": cell.what, "gpu_model": cell.gpu, "shape": "x".join(map(str, shape)),
           "ctas": len(res.ctas), "wave_leaders": meta.get("wave_leaders"), "waves_fallback": meta.get("waves"),
           "sim_s": best["s"], "sim_cpu_s": best["cpu_s"], "trace_s": min(t["trace_s"] for t in sims),
           "spans": best["spans"], "sim_rounds_s": [t["s"] for t in sims],
           "trace_rounds_s": [t["trace_s"] for t in sims],
           "warmup_sim_s": warm["s"], "warmup_trace_s": warm["trace_s"],
           "reference": ref_name, "ref_s": ref_s, "ref_rounds_s": refs, "warmup_ref_s": ref_warm_s,
           "torch_threads": torch.get_num_threads(), "repeats": repeats, "cycles": res.cycles, "goal_x": cell.goal}
    row["x_ref"] = row["sim_s"] / ref_s
    # the median round against the same reference: a collection or a busy core in one round moves it, not the best
    row["x_ref_median"] = statistics.median(t["s"] for t in sims) / ref_s
    row["x_ref_with_trace"] = (row["sim_s"] + row["trace_s"]) / ref_s
    if one_at_a_time:
        waves_out = res.value.clone()
        del res
        olds = []
        for r in range(one_at_a_time):
            step(f"waves=False {r + 1}/{one_at_a_time}")
            res, t = _simulate(fn, args, cell.gpu, False)
            checks.append(check(res.value, ref, cell.tol))
            olds.append(t)
            done()
        row.update(one_s=min(t["s"] for t in olds), one_cpu_s=min(t["cpu_s"] for t in olds),
                   one_trace_s=min(t["trace_s"] for t in olds), one_rounds_s=[t["s"] for t in olds],
                   one_equal_to_waves=bool(torch.equal(res.value, waves_out)),
                   one_ctas=len(res.ctas), one_wave_leaders=res.trace.meta.get("wave_leaders"))
        row["waves_speedup"] = row["one_s"] / row["sim_s"]
    worst = max(checks, key=lambda c: c["rel_err"])
    row.update(rel_err=worst["rel_err"], max_abs_err=max(c["max_abs_err"] for c in checks),
               ok=all(c["ok"] for c in checks) and row.get("one_equal_to_waves", True), checked_runs=len(checks))
    row["goal_met"] = row["ok"] and row["x_ref"] <= cell.goal
    row["load_before"], row["load_after"] = load0, os.getloadavg()[0]
    return row


# ---- the run -------------------------------------------------------------------------------------

def machine() -> str:
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
                 platform.processor()) if os.path.exists("/proc/cpuinfo") else platform.processor()
    return f"{os.cpu_count()}-core {model}, {platform.system()} {platform.release()}"


def _git() -> dict:
    root = pathlib.Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "tlx_workbench"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        return {"head": head or "not a git checkout",
                "tlx_workbench_uncommitted": [ln[3:] for ln in dirty if ln.strip()]}
    except (OSError, subprocess.SubprocessError):
        return {}


COLS = ["cell", "shape", "ctas", "wave_leaders", "sim_s", "sim_cpu_s", "one_s", "reference", "ref_s", "x_ref",
        "x_ref_median", "trace_s", "x_ref_with_trace", "rel_err", "ok", "goal"]


def markdown(rows) -> str:
    cols = [c for c in COLS if c != "one_s" or any("one_s" in r for r in rows)]
    head = {"sim_s": "simulated s (waves)", "sim_cpu_s": "its CPU s", "one_s": "simulated s (one CTA at a time)",
            "ref_s": "reference s",
            "x_ref": "simulated / reference", "x_ref_median": "median simulated / reference",
            "trace_s": "first trace access s",
            "x_ref_with_trace": "(simulated + trace) / reference", "rel_err": "rel. error (worst run)",
            "ok": "check", "wave_leaders": "wave leaders"}

    def fmt(r, c):
        v = r.get(c, "")
        if c == "goal":
            return f"≤ {r['goal_x']:g}x: {'met' if r['goal_met'] else 'MISSED'}"
        if c == "ok":
            return f"ERROR: {r['error'][:120]}" if "error" in r else "ok" if v else "FAIL"
        if v is None or v == "":
            return {"wave_leaders": "fell back" if r.get("waves_fallback") else "no waves"}.get(c, "") \
                if "error" not in r else ""
        if c in ("x_ref", "x_ref_median", "x_ref_with_trace"):
            return f"{v:.2f}x"
        if c == "rel_err":
            return f"{v:.1e}"
        if isinstance(v, float):
            return f"{v:#.3g}" if v < 0.1 else f"{v:.3f}" if v < 10 else f"{v:.1f}"
        return "" if v is None else str(v)
    out = "| " + " | ".join(head.get(c, c) for c in cols) + " |\n|" + "|".join("---" for _ in cols) + "|\n"
    return out + "".join("| " + " | ".join(fmt(r, c) for c in cols) + " |\n" for r in rows)


def run(cells=None, tiny=False, repeats=3, big_repeats=1, one_at_a_time=0, json_path=None, threads=None,
        progress=True) -> dict:
    """Measure ``cells`` (names; default the four torch cells); returns the run's head and rows (also written
    to ``json_path`` after every cell)."""
    from tqdm import tqdm
    names = cells or DEFAULT_CELLS
    unknown = [n for n in names if n not in CELLS]
    if unknown:
        raise SystemExit(f"unknown cells {unknown}; known: {', '.join(CELLS)}")
    threads = threads or os.cpu_count()
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    payload = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": machine(), "command": " ".join([pathlib.Path(sys.executable).name] + sys.argv),
               "python": platform.python_version(), "torch": torch.__version__,
               "torch_threads": torch.get_num_threads(), "git": _git(), "tiny": tiny,
               "load_before": os.getloadavg()[0], "rows": []}
    print(f"{payload['machine']}; torch {torch.__version__} on {payload['torch_threads']} threads; 1-min load "
          f"average {payload['load_before']:.2f}", flush=True)
    plan = {n: (1 if tiny else big_repeats if CELLS[n].big else repeats) for n in names}
    total = sum(1 + r + one_at_a_time for r in plan.values())
    with tqdm(total=total, desc="sim_speed", disable=not progress, file=sys.stderr) as bar:
        for n in names:
            cell = CELLS[n]
            shape = cell.tiny if tiny else cell.shape
            try:
                row = measure(cell, shape, plan[n], one_at_a_time, threads, bar)
            except Exception as e:      # a failing cell is recorded, and the others still run
                row = {"cell": n, "what": cell.what, "shape": "x".join(map(str, shape)), "ok": False,
                       "goal_met": False, "goal_x": cell.goal, "error": f"{type(e).__name__}: {str(e)[:300]}",
                       "trace": traceback.format_exc()[-2000:]}
            payload["rows"].append(row)
            if json_path:
                _write(json_path, payload)
            if "error" in row:
                tqdm.write(f"{n}: ERROR {row['error']}", file=sys.stdout)
                continue
            tqdm.write(f"{n}: simulated {row['sim_s']:.3f} s, {row['reference']} {row['ref_s']:.4f} s "
                       f"({row['x_ref']:.2f}x; median round {row['x_ref_median']:.2f}x), trace {row['trace_s']:.3f} s, wave leaders {row['wave_leaders']}, "
                       f"check {'ok' if row['ok'] else 'FAIL'} (rel. error {row['rel_err']:.1e})", file=sys.stdout)
    payload["load_after"] = os.getloadavg()[0]
    torch.set_num_threads(threads_before)
    if json_path:
        _write(json_path, payload)
    print(f"\n1-min load average {payload['load_before']:.2f} before / {payload['load_after']:.2f} after; torch "
          f"threads {payload['torch_threads']}\n")
    print(markdown(payload["rows"]))
    return payload


def _write(path, payload):
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=1, default=str))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", help=f"comma-separated cells, or 'all' (default {','.join(DEFAULT_CELLS)}; "
                                    f"known: {', '.join(CELLS)})")
    ap.add_argument("--repeats", type=int, default=3, help="timed rounds of each cell (default 3)")
    ap.add_argument("--big-repeats", type=int, default=1, help="timed rounds of the big FA cell (default 1)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="also time waves=False (one CTA at a time; slow) and compare its output")
    ap.add_argument("--one-at-a-time-repeats", type=int, default=1, help="its rounds (default 1)")
    ap.add_argument("--threads", type=int, help="torch threads (default: the machine's cores)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes, one round (a smoke test)")
    ap.add_argument("--no-progress", action="store_true")
    o = ap.parse_args(argv)
    cells = list(CELLS) if o.cells == "all" else o.cells.split(",") if o.cells else None
    return run(cells, tiny=o.tiny, repeats=o.repeats, big_repeats=o.big_repeats,
               one_at_a_time=o.one_at_a_time_repeats if o.one_at_a_time else 0, json_path=o.json,
               threads=o.threads, progress=not o.no_progress)


if __name__ == "__main__":
    sys.exit(0 if all(r["ok"] for r in main()["rows"]) else 1)
