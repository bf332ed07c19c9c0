"""Attention forward on the H200: a default with one constexpr switch added, against the default itself, side by side.

The switches probed so far (``attention_configs._config`` says what each does):

* ``CHAIN`` (2026-12-04, commit f537435, then named ``attention_chain_probe_h200.py``; store
  ``benchmarks/kernels_h200/chain_probe_r14/``): a tile's last P V and the next tile's S_0 share a turn, so the
  next tile's first softmax runs under that P V. Slower.
* ``HALF_DIAG`` (causal): consumer group 0 multiplies only the left half of each tile's diagonal block, whose right
  half is masked for all its rows: a quarter of the diagonal block's wgmma work less per tile (at 4x32x4096 causal
  a tile averages 16.5 K/V blocks, so about 1.5 % of the MMA work; 0.8 % at 8192).
* ``RECIP_NORM``, ``DIAG_FIRST`` and both (2026-12-05, sixteenth session, commit 2dad521; store
  ``benchmarks/kernels_h200/r16/``): the epilogue's per-element division as one reciprocal a row and a multiply
  (since then the kernel's only epilogue, no longer a switch); a causal tile's K/V walked from the diagonal down, so no
  step is masked (slower at 8192: an off switch). Each a tile cost, not a block's (RESULTS.md, fifteenth session's fit).

``--switch`` may be given several times and a switch set written ``A+B``: every set is a subject of its own, timed
in the same rounds; a set a cell's default does not suit (``attention.suits``, e.g. DIAG_FIRST in a non-causal
cell) is left out of that cell.

Two parts, one call:

* check: every default (of the cells' masking) with the switch added, against float64 at ragged and
  many-tiles-per-CTA shapes, fp16 and bf16, O and the log-sum-exp (what the backward pass takes);
* time: torch SDPA, the default without the switch ("default") and with it, in interleaved rounds (shuffled order
  each round; median of do_bench medians).

    source .gpu/env.sh && python3 benchmarks/attention_switch_probe_h200.py --switch HALF_DIAG --cells causal128
    source .gpu/env.sh && python3 benchmarks/attention_switch_probe_h200.py --switch CHAIN --cells all   # the CHAIN run
    source .gpu/env.sh && python3 benchmarks/attention_switch_probe_h200.py --switch DIAG_FIRST --switch HALF_DIAG \
        --switch DIAG_FIRST+P_LATE --cells causal128 --window long     # several switch sets in the same rounds

Results: ``$OUT/attention_switch_probe_h200.{json,md}`` (CHAIN, all cells: ~6.5 min on the H200, most of it compiles).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

TIME_CELLS = [((4, 32, 4096, 128), True), ((2, 32, 8192, 128), True), ((4, 32, 4096, 128), False),
              ((2, 32, 8192, 128), False), ((4, 32, 4096, 64), True), ((4, 32, 4096, 64), False)]
CELLS = {"all": TIME_CELLS, "causal128": TIME_CELLS[:2], "causal": [c for c in TIME_CELLS if c[1]],
         "noncausal128": TIME_CELLS[2:4], "d128": TIME_CELLS[:4]}
CHECK_SHAPES = [(1, 3, 1000, 128), (2, 5, 1024, 128), (4, 32, 1024, 128), (1, 2, 777, 64), (4, 16, 1024, 64)]
DTYPES = ("float16", "bfloat16")


def switched(cfg, switch):
    """``cfg`` with every switch of ``switch`` ("A" or "A+B") on."""
    return dict(cfg, **{name: True for name in switch.split("+")})


def subjects_of(switches, shape, causal) -> dict:
    """{subject name: config} of one cell: "default" (the cell's default config) and each switch set that suits it."""
    from tlx_workbench.kernels import attention as A
    default = A.configs_for(shape[-1], causal, shape[2])[0]
    subj = {"default": default}
    for sw in switches:
        cfg = switched(default, sw)
        if A.suits(cfg, shape[-1], causal, shape[2]):
            subj[sw] = cfg
    return subj


def check(log, switches, cells) -> list:
    """Rows of (shape, dtype, causal, config, O error, lse error, ok): every default of the cells' masking and head
    dims, with each switch set that suits it, at the check shapes."""
    heads = {shape[-1] for shape, _ in cells}
    runs = [(shape, causal, sw, cfg) for shape in CHECK_SHAPES if shape[-1] in heads
            for causal in sorted({c for _, c in cells})
            for sw, cfg in subjects_of(switches, shape, causal).items() if sw != "default"]
    return [check_run(log, shape, dname, causal, sw, cfg) for shape, causal, sw, cfg in runs for dname in DTYPES]


def check_run(log, shape, dname, causal, sw, cfg) -> dict:
    """One config at one shape and dtype, O and the log-sum-exp against float64: a row of ``check``."""
    import math
    import torch
    from _harness import attn_inputs, attn_ref64, rel_error, try_call
    from tlx_workbench.kernels import attention as A
    q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
    o = torch.full_like(q, float("nan"))
    lse = torch.full(shape[:3], float("nan"), device="cuda", dtype=torch.float32)
    got = try_call(f"check {shape} {dname} causal={causal}",
                   lambda: A.launch(q, k, v, o, causal, scale, cfg, lse=lse), log)
    torch.cuda.synchronize()
    err = float("inf") if got is None else rel_error(o, attn_ref64(q, k, v, causal, scale))
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        n = shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse_err = (float((lse.double() - torch.logsumexp(s, -1)).abs().max())
               if torch.isfinite(lse).all() else math.inf)
    ok = "ok" if err < 1e-2 and lse_err < 1e-3 else "FAIL"
    print(f"check {shape} {dname} causal={causal} {sw}: {err:.2e} lse {lse_err:.2e} {ok}", flush=True)
    return dict(shape=list(shape), dtype=dname, causal=causal, switch=sw, config=cfg, rel_err=err, lse_err=lse_err,
                ok=ok)


def cell(shape, causal, dname, rounds, log, switches, window):
    import torch
    from _harness import attn_flops, attn_inputs, sdpa_rounds
    from tlx_workbench.kernels import attention as A
    F = torch.nn.functional
    q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
    o = torch.empty_like(q)
    configs = subjects_of(switches, shape, causal)
    subj = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)}
    subj.update({name: (lambda cfg=cfg: A.launch(q, k, v, o, causal, scale, cfg)) for name, cfg in configs.items()})
    return dict(shape=list(shape), causal=causal, dtype=dname, default=configs["default"],
                **sdpa_rounds(subj, rounds, log, attn_flops(shape, causal), window=window))


def faster_rounds(rounds_ms, name) -> str:
    """In how many rounds subject ``name`` was faster than "default" (rounds are paired by index), e.g. "5/7"."""
    pairs = list(zip(rounds_ms.get("default", []), rounds_ms.get(name, [])))
    return f"{sum(d > s for d, s in pairs)}/{len(pairs)}"


def markdown(res) -> str:
    from _harness import errors_md
    sws = res["switches"]
    nan = float("nan")
    out = [f"# The attention defaults with {', '.join(sws)} vs without on {res['device']} ({res['date']})", ""]
    if res["check"]:
        bad = [r for r in res["check"] if r["ok"] != "ok"]
        out += [f"check: {len(res['check']) - len(bad)}/{len(res['check'])} default + switch runs match float64 "
                f"(O max-rel 1e-2, lse max-abs 1e-3), worst O {max(r['rel_err'] for r in res['check']):.2e}, "
                f"worst lse {max(r['lse_err'] for r in res['check']):.2e}", ""]
        out += [f"- FAIL {r['shape']} {r['dtype']} causal={r['causal']} {r.get('switch')}: {r['rel_err']:.3g} / "
                f"{r['lse_err']:.3g}" for r in bad]
    if res["cells"]:
        out += [f"SDPA's time over each subject's, medians of {res['rounds']} interleaved rounds (shuffled); for each "
                "switch set: SDPA's ratio, default ms over its ms, the rounds it was faster than the default:", "",
                "| shape | causal | dtype | SDPA ms | default | " + " | ".join(f"+ {sw}" for sw in sws) + " |",
                "|---|---|---|---|---|" + "---|" * len(sws)]
        for c in res["cells"]:
            vs, med = c["vs_sdpa"], c["median_ms"]
            cols = [f"{vs[sw]:.3f} ({med['default'] / med[sw]:.3f}, {faster_rounds(c['rounds_ms'], sw)})"
                    if sw in med and "default" in med else "–" for sw in sws]
            out.append(f"| {'x'.join(map(str, c['shape']))} | {c['causal']} | {c['dtype']} | {med.get('sdpa', 0):.3f} "
                       f"| {vs.get('default', nan):.3f} | " + " | ".join(cols) + " |")
    if res["log"]:
        out += [""] + errors_md(res["log"])
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--parts", default="check,time")
    ap.add_argument("--switch", action="append", help="a constexpr switch (or A+B) added to each default; repeatable "
                    "(default: HALF_DIAG)")
    ap.add_argument("--cells", default="causal128", choices=sorted(CELLS))
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated, of " + ", ".join(DTYPES))
    from _harness import WINDOWS
    ap.add_argument("--window", default="probe", choices=sorted(WINDOWS),
                    help="do_bench's warm-up and measured ms (_harness.WINDOWS); long: rounds spread least")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    a = ap.parse_args(argv)
    switches = a.switch or ["HALF_DIAG"]
    import torch
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               device=torch.cuda.get_device_name(0), command=" ".join(sys.argv), rounds=a.rounds, switches=switches,
               window=WINDOWS[a.window],
               check=[], cells=[], log=[])
    path = out / "attention_switch_probe_h200.json"
    cells = CELLS[a.cells]
    if "check" in a.parts:
        res["check"] = check(res["log"], switches, cells)
        path.write_text(json.dumps(res, indent=1, default=str))
    if "time" in a.parts:
        for shape, causal in cells:
            for dname in a.dtypes.split(","):
                res["cells"].append(cell(shape, causal, dname, a.rounds, res["log"], switches, WINDOWS[a.window]))
                path.write_text(json.dumps(res, indent=1, default=str))
                print(json.dumps({k: res["cells"][-1][k] for k in ("shape", "causal", "dtype", "vs_sdpa")}), flush=True)
    text = markdown(res)
    (out / "attention_switch_probe_h200.md").write_text(text)
    print(text)
    return 0 if all(r["ok"] == "ok" for r in res["check"]) else 1


if __name__ == "__main__":
    sys.exit(main())
