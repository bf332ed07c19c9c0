"""Where the causal forward's time goes: a K/V block's cost and a tile's own cost, fitted from whole launches.

The recorders of ``wb.profile`` slow an attention kernel by a quarter or more, too much to weigh a 2 % lever. This
measures the plain default instead, at shapes where the zig-zag schedule makes the arithmetic exact: a causal
launch of ``Z x H`` heads of ``N`` rows with BM = BN = 128 is ``pairs = Z*H*N/256`` zig-zag pairs of equal work,
``num_m + 1`` K/V blocks each (``num_m = N / 128``), on ``C = persistent_ctas(pairs, SMs)`` CTAs; every CTA walks
``P = pairs / C`` pairs (each cell below divides evenly). If a block costs ``t_block`` and a tile (its S_0 alone,
its last P V alone, the epilogue, the diagonal's mask) ``t_tile`` on top of its blocks, then

    ms = P * (num_m + 1) * t_block + 2 * P * t_tile + t_launch

Cells vary ``num_m`` at fixed ``P`` (N = 1024 .. 16384, 16 pairs a CTA) and ``P`` at fixed ``num_m`` (8, 16, 32
pairs a CTA at N = 4096 and 8192), so the three are separable; a least-squares fit gives them with the residual
of every cell (a cell far off says the model misses something there). The non-causal default at the 16-pair
shapes is timed too, for SDPA's curve over N. ``--switch NAME`` (repeatable) also times the causal default with
a switch of ``attention_configs._config`` added, fitted on its own: which of the two costs a switch moves. Each
cell: torch SDPA and ours, checked against each other, then ``--rounds`` interleaved rounds in a shuffled order
(``_harness.sdpa_rounds``: do_bench 100/300 ms, median).

    source .gpu/env.sh && python3 benchmarks/attention_tile_costs_h200.py           # H200: $OUT/attention_tile_costs_h200.{json,md}
    source .gpu/env.sh && python3 benchmarks/attention_tile_costs_h200.py --switch PIN_SOFTMAX --switch P_LATE \
        --dtypes float16 --no-plain
    .venv/bin/python benchmarks/attention_tile_costs_h200.py --fit PATH.json         # the fit again, from a stored run
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

H, D, BM = 32, 128, 128
# (Z, N): 16 pairs a CTA at every N, then 8 and 32 at N = 4096 and 8192 (128 CTAs on 132 SMs throughout)
CAUSAL_CELLS = [(16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384), (2, 4096), (8, 4096), (1, 8192), (4, 8192)]
PLAIN_CELLS = CAUSAL_CELLS[:5]
DTYPES = ("float16", "bfloat16")


def schedule(Z: int, N: int, sms: int = 132) -> dict:
    """The zig-zag arithmetic of a causal cell: pairs, CTAs, pairs per CTA (exact only when they divide)."""
    from tlx_workbench.kernels._common import persistent_ctas
    num_m = N // BM
    pairs = Z * H * num_m // 2
    ctas = persistent_ctas(pairs, sms)
    return dict(num_m=num_m, pairs=pairs, ctas=ctas, per_cta=pairs / ctas, exact=pairs % ctas == 0)


def fit(rows: list) -> dict:
    """Least squares of ``ms = P (num_m + 1) t_block + 2 P t_tile + t_launch`` over causal rows (each with
    ``num_m``, ``per_cta`` and ``ms``) -> {t_block_us, t_tile_us, t_launch_us, residuals (% per cell), and
    the tile's share of a cell's time}.

    >>> rows = [dict(num_m=m, per_cta=p, ms=(p * (m + 1) * 1.5 + 2 * p * 2.0 + 7.0) / 1e3)
    ...         for m, p in ((8, 16), (32, 16), (64, 16), (32, 8), (32, 32))]
    >>> f = fit(rows); round(f["t_block_us"], 6), round(f["t_tile_us"], 6), round(f["t_launch_us"], 6)
    (1.5, 2.0, 7.0)
    """
    import numpy as np
    a = np.array([[r["per_cta"] * (r["num_m"] + 1), 2 * r["per_cta"], 1.0] for r in rows])
    y = np.array([r["ms"] * 1e3 for r in rows])          # microseconds
    (tb, tt, tl_), *_ = np.linalg.lstsq(a, y, rcond=None)
    pred = a @ np.array([tb, tt, tl_])
    out = dict(t_block_us=float(tb), t_tile_us=float(tt), t_launch_us=float(tl_),
               t_tile_in_blocks=float(tt / tb) if tb else float("nan"), cells=[])
    for r, p, yy in zip(rows, pred, y):
        out["cells"].append(dict(Z=r.get("Z"), N=r.get("N"), measured_us=float(yy), fitted_us=float(p),
                                 residual_pct=float(100 * (yy - p) / yy),
                                 tile_share_pct=float(100 * 2 * r["per_cta"] * tt / yy)))
    return out


def _cell(Z, N, causal, dname, rounds, log, switches) -> dict:
    """One cell: SDPA, the default and the default with each switch (causal only), on fresh inputs."""
    import torch
    import torch.nn.functional as F
    from _harness import attn_flops, attn_inputs, sdpa_rounds
    from tlx_workbench.kernels import attention as A
    shape = (Z, H, N, D)
    cfg = A.DEFAULTS[(False, causal)]
    q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
    o = torch.empty_like(q)
    subjects = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale),
                "ours": lambda: A.launch(q, k, v, o, causal, scale, cfg)}
    for sw in switches if causal else ():
        subjects[f"ours+{sw}"] = (lambda c: lambda: A.launch(q, k, v, o, causal, scale, c))(dict(cfg, **{sw: True}))
    r = sdpa_rounds(subjects, rounds, log, attn_flops(shape, causal))
    row = dict(Z=Z, H=H, N=N, D=D, causal=causal, dtype=dname, cfg=cfg, **r)
    row["ms"] = r["median_ms"].get("ours")
    if causal:
        row.update(schedule(Z, N, torch.cuda.get_device_properties(0).multi_processor_count))
    return row


def measure(rounds: int, log: list, switches=(), dtypes=DTYPES, plain=True) -> list:
    import torch
    from _harness import gpu_setup
    gpu_setup()
    rows = []
    cells = [(z, n, True) for z, n in CAUSAL_CELLS] + ([(z, n, False) for z, n in PLAIN_CELLS] if plain else [])
    for Z, N, causal in cells:
        for dname in dtypes:
            row = _cell(Z, N, causal, dname, rounds, log, switches)
            rows.append(row)
            print(f"{dname} Z={Z} N={N} causal={causal}: ours {row['ms']} ms, vs SDPA "
                  f"{row['vs_sdpa'].get('ours')}, errors {row['errors']}", flush=True)
            torch.cuda.empty_cache()         # the cell's inputs are gone with _cell's frame
    return rows


def fits(rows: list) -> dict:
    """The fit per dtype and subject of ours (the default, "ours", and each switch added to it, "ours+NAME"), over
    the causal cells whose schedule divides evenly: keyed "float16" for the default, "float16 ours+NAME" else."""
    out = {}
    for d in DTYPES:
        causal = [r for r in rows if r["causal"] and r["dtype"] == d and r.get("exact")]
        for subj in sorted({s for r in causal for s in r["median_ms"] if s.startswith("ours")}):
            cells = [dict(r, ms=r["median_ms"][subj]) for r in causal if subj in r["median_ms"]]
            if len(cells) >= 3:
                out[d if subj == "ours" else f"{d} {subj}"] = fit(cells)
    return out


def markdown(res: dict) -> str:
    lines = [f"# attention tile costs, {res.get('device', '')} {res.get('date', '')}", "",
             f"`{res.get('command', '')}`", "",
             "| dtype | causal | Z x H x N | pairs / CTA | ours ms | SDPA / ours |", "|---|---|---|---|---|---|"]
    for r in res["rows"]:
        for subj in sorted(s for s in r["median_ms"] if s.startswith("ours")):
            ms, vs = r["median_ms"][subj], r["vs_sdpa"].get(subj)
            lines.append(f"| {r['dtype']}{'' if subj == 'ours' else ' ' + subj} | {r['causal']} | {r['Z']}x{r['H']}x"
                         f"{r['N']} | {r.get('per_cta', '-')} | {ms:.4f} | {vs:.3f} |" if vs else
                         f"| {r['dtype']} {subj} | {r['causal']} | {r['Z']}x{r['H']}x{r['N']} | - | failed | - |")
    for d, f in res["fit"].items():
        lines += ["", f"**{d}**: t_block {f['t_block_us']:.3f} us, t_tile {f['t_tile_us']:.3f} us "
                  f"({f['t_tile_in_blocks']:.2f} blocks), t_launch {f['t_launch_us']:.1f} us", "",
                  "| Z x N | measured us | fitted us | residual | tiles' share |", "|---|---|---|---|---|"]
        for c in f["cells"]:
            lines.append(f"| {c['Z']}x{c['N']} | {c['measured_us']:.1f} | {c['fitted_us']:.1f} | "
                         f"{c['residual_pct']:+.2f} % | {c['tile_share_pct']:.1f} % |")
    if res.get("log"):
        lines += ["", "Errors:"] + [f"- {e['what']}: {e['error']}" for e in res["log"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fit", metavar="JSON", help="refit a stored run (no GPU)")
    ap.add_argument("--switch", action="append", default=[], help="also time the causal default with this switch")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--no-plain", action="store_true", help="causal cells only")
    a = ap.parse_args()
    if a.fit:
        res = json.loads(pathlib.Path(a.fit).read_text())
        res["fit"] = fits(res["rows"])
        print(markdown(res))
        return
    from _harness import run_record, write_outputs
    log = []
    res = run_record(rounds=a.rounds, switches=a.switch)
    res["rows"] = measure(a.rounds, log, a.switch, tuple(a.dtypes.split(",")), not a.no_plain)
    res["fit"] = fits(res["rows"])
    res["log"] = log
    text = markdown(res)
    write_outputs(os.environ.get("OUT", "."), "attention_tile_costs_h200", res, text)
    print(text)


if __name__ == "__main__":
    main()
