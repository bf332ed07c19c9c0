"""SPLIT_TAIL on the H200 (issue 22's forward goal): the persistent attention forward with its last partial wave
split over K/V across the SMs, against the persistent kernel without it and torch SDPA, in one run (~2 min).

At D=128, N=4096 (4 x 32 heads) and N=8192 (2 x 32) the persistent kernel has 4096 query tiles of 128 rows for
132 SMs: 31 whole waves and 4 tiles, so 128 SMs idle for a 32nd tile's time (1/32 of the kernel). ``SPLIT_TAIL``
walks the 31 waves and splits the 4 leftover tiles into 32 K/V chunks each (128 programs on the SMs), merged by a
second small kernel (``attention_configs.tail_plan``).

1. check: both configs against float64 (on the GPU) at ragged shapes where a reduced CTA count leaves a tail
   (fp16 and bf16, O and lse NaN-poisoned, lse against float64's logsumexp), and at the timed shapes against
   SDPA, the tail's rows alone too (4 of 4096 tiles would vanish in a whole-tensor error);
2. time: fp16 and bf16 at the two timed shapes, ``--rounds`` interleaved rounds of SDPA, the persistent config
   without the split (``_PERSISTENT``, the default before) and with it (``_PERSISTENT_TAIL``, the default since),
   a do_bench median each; the figure is the median over rounds.

    source .gpu/env.sh && python3 benchmarks/attention_split_tail_h200.py     # $OUT/attention_split_tail_h200.{json,md}
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

STEM = "attention_split_tail_h200"
TIME_SHAPES = [(4, 32, 4096, 128), (2, 32, 8192, 128)]
# (shape, CTAs): each leaves a tail of at most half the CTAs (tail_plan), some across a head's ragged last block
CHECK_SHAPES = [((2, 3, 1000, 128), 20), ((1, 5, 2115, 128), 40), ((3, 2, 777, 64), 10), ((1, 1, 4096, 128), 30)]
TOL = {"float16": 3e-3, "bfloat16": 2e-2}


def _configs():
    from tlx_workbench.kernels import attention as A
    return {"persistent": A._PERSISTENT, "split_tail": A._PERSISTENT_TAIL}


def _lse64(q, k, scale):
    import torch
    return torch.logsumexp((q.double() @ k.double().transpose(-1, -2)) * scale, -1)


def check(log):
    import torch
    from _harness import attn_inputs, attn_ref64, rel_error
    from tlx_workbench.kernels import attention as A
    rows = []
    for (shape, ctas) in CHECK_SHAPES:
        for dname in ("float16", "bfloat16"):
            q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
            ref, lref = attn_ref64(q, k, v, False, scale), _lse64(q, k, scale)
            tiles = -(-shape[2] // 128) * shape[0] * shape[1]
            plan = A.tail_plan(tiles, min(ctas, tiles), shape[2])
            for name, cfg in _configs().items():
                o = torch.full_like(q, float("nan"))
                lse = torch.full(shape[:3], float("nan"), device="cuda")
                try:
                    A.launch(q, k, v, o, False, scale, cfg, num_sms=ctas, lse=lse)
                    torch.cuda.synchronize()
                    err, lerr = rel_error(o, ref), float((lse.double() - lref).abs().max())
                    if lerr != lerr:
                        lerr = float("inf")
                except Exception as e:  # noqa: BLE001
                    err = lerr = float("inf")
                    log["errors"].append(f"check {name} {shape}: {type(e).__name__}: {str(e)[:400]}")
                rows.append(dict(config=name, shape=list(shape), ctas=ctas, dtype=dname, plan=list(plan), err=err,
                                 lse_err=lerr, ok=err < TOL[dname] and lerr < 1e-2))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def time_cells(rounds, log):
    import torch
    import triton
    from _harness import attn_flops, attn_inputs, rel_error
    from restated_goals_h200 import _rounds
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels._common import sm_count
    F = torch.nn.functional
    rows = []
    for shape in TIME_SHAPES:
        for dname in ("float16", "bfloat16"):
            q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
            Z, H, N, D = shape
            plan = A.tail_plan(-(-N // 128) * Z * H, sm_count(), N)
            subj = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, scale=scale)}
            outs = {}
            for name, cfg in _configs().items():
                outs[name] = torch.full_like(q, float("nan"))
                subj[name] = (lambda cfg, o: lambda: A.launch(q, k, v, o, False, scale, cfg))(cfg, outs[name])
            ref = subj["sdpa"]()
            times, errs = _rounds(subj, ref, rounds)
            # the tail's rows alone: the last (leftover tiles x 128) rows of (Z*H*N, D)
            tail_rows = plan[1] * 128
            tail_err = (rel_error(outs["split_tail"].view(-1, D)[-tail_rows:], ref.view(-1, D)[-tail_rows:])
                        if tail_rows else None)
            med = {n: statistics.median(t) for n, t in times.items()}
            for name in _configs():
                row = dict(shape=list(shape), dtype=dname, kernel=name, plan=list(plan), ms=med.get(name),
                           sdpa_ms=med.get("sdpa"), err_vs_sdpa=errs.get(name), rounds_ms=times.get(name),
                           sdpa_rounds_ms=times.get("sdpa"),
                           tail_err_vs_sdpa=tail_err if name == "split_tail" else None)
                if name in med:
                    row.update(vs_sdpa=med["sdpa"] / med[name], vs_persistent=med["persistent"] / med[name],
                               tflops=attn_flops(shape, False) / med[name] * 1e-9)
                rows.append(row)
                print(json.dumps({k_: row.get(k_) for k_ in ("shape", "dtype", "kernel", "ms", "vs_sdpa",
                                                             "vs_persistent", "tail_err_vs_sdpa")}), flush=True)
            del q, k, v, outs, ref
            torch.cuda.empty_cache()
            triton.set_allocator(A.torch_alloc)
    return rows


def _f(x, p=3):
    return "–" if x is None else (f"{x:.{p}f}" if isinstance(x, float) else str(x))


def markdown(res) -> str:
    out = [f"# SPLIT_TAIL on {res['device']} ({res['date']})", "", "## check vs float64", "",
           "| config | shape | CTAs | dtype | tail plan (main, left, splits, chunk) | rel err O | max abs err lse | ok |",
           "|---|---|---|---|---|---|---|---|"]
    for r in res["check"]:
        out.append(f"| {r['config']} | {tuple(r['shape'])} | {r['ctas']} | {r['dtype']} | {tuple(r['plan'])} | "
                   f"{r['err']:.3g} | {r['lse_err']:.3g} | {r['ok']} |")
    out += ["", f"## time (median of {res['rounds']} interleaved rounds of do_bench medians)", "",
            "| shape | dtype | kernel | ms | TFLOP/s | vs SDPA | vs persistent | err vs SDPA (tail rows) |",
            "|---|---|---|---|---|---|---|---|"]
    for r in res["time"]:
        tail = "" if r.get("tail_err_vs_sdpa") is None else f" ({r['tail_err_vs_sdpa']:.3g})"
        out.append(f"| {'x'.join(map(str, r['shape']))} | {r['dtype']} | {r['kernel']} | {_f(r['ms'])} | "
                   f"{_f(r.get('tflops'), 0)} | **{_f(r.get('vs_sdpa'))}x** | {_f(r.get('vs_persistent'))}x | "
                   f"{_f(r['err_vs_sdpa'], 5) if isinstance(r['err_vs_sdpa'], float) else r['err_vs_sdpa']}{tail} |")
    if res["errors"]:
        out += ["", "Errors:", ""] + [f"- {e}" for e in res["errors"]]
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    from _harness import gpu_setup, run_record, write_json, write_outputs
    gpu_setup()
    out = os.environ.get("OUT", "/tmp/split_tail")
    res = run_record(rounds=a.rounds, configs=_configs(), check=[], time=[], errors=[])
    for part, fn in (("check", lambda: check(res)), ("time", lambda: time_cells(a.rounds, res))):
        try:
            res[part] = fn()
        except Exception:  # noqa: BLE001
            res["errors"].append(f"{part}: {traceback.format_exc()[-1500:]}")
        write_json(out, STEM, res)
    text = markdown(res)
    write_outputs(out, STEM, res, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
