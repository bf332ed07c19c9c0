"""The correctness suite on a GPU: library configs against float64 at many shapes, ragged ones included.

Every check draws fresh random inputs, fills the output with NaN (an element the kernel never
writes shows as an infinite error), launches the config once and compares with the float64
result (``||out - ref|| / ||ref||``; tolerance 2e-3 fp16 / 1.2e-2 bf16 for GEMMs, 3e-3 / 2e-2 for
attention). The checks are ``benchmarks/suite.py``'s, the same that ``benchmarks/rounds.py`` runs
before it times an experiment.

    python3 benchmarks/validate.py --list                  # CPU: the checks, run nothing
    source .gpu/env.sh && python3 benchmarks/validate.py   # the library's defaults; $OUT/validate_suite.json
    source .gpu/env.sh && python3 benchmarks/validate.py --round pinned_softmax   # one experiment's configs and checks

The default suite: ``gemm_ws``'s default config (balanced persistent CTA count, and one CTA per SM as
it was first launched), at the experiments' GEMM check shapes and 8192^3, ``gemm_streamk``'s on 132 CTAs at the
later experiments' and 8192^3; and attention's default for each head dim and masking (``attention.DEFAULTS``) at the
experiments' ragged check shapes, fp16 and bf16.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import suite  # noqa: E402
from _harness import md_table, write_json, errors_md  # noqa: E402

GEMM_SHAPES = list(dict.fromkeys(suite.GEMM_CHECK_FIRST + suite.GEMM_CHECK_LATER + [suite.G8192]))
STREAMK_SHAPES = suite.GEMM_CHECK_LATER + [suite.G8192]
ATTN_SHAPES = list(dict.fromkeys(suite.ATTN_CHECK_PERSISTENT + suite.ATTN_CHECK_FIRST))


def library_suite():
    """[(Part, check shapes)]: the library defaults, each part's cells being its check shapes."""
    from tlx_workbench.kernels import attention, gemm_streamk, gemm_ws
    ws = gemm_ws.CONFIGS[0]
    out = [(suite.Part("gemm_ws default", "gemm_ws", {"ws_default": ws, "ws_132ctas": dict(ws, num_sms=132, balance=False)},
                       suite.cells(GEMM_SHAPES, suite.BOTH)), GEMM_SHAPES),
           # stream-K at the shapes the experiments checked it at (and 8192^3), not below one tile per CTA
           (suite.Part("gemm_streamk default", "gemm_streamk", {"streamk_g132": dict(gemm_streamk.CONFIGS[0], num_sms=132)},
                       suite.cells(STREAMK_SHAPES, suite.BOTH)), STREAMK_SHAPES)]
    for (d64, causal), cfg in attention.DEFAULTS.items():
        shapes = [s for s in ATTN_SHAPES if (s[-1] <= 64) == d64]
        name = f"attention default D{'=64' if d64 else '=128'}{' causal' if causal else ''}"
        out.append((suite.Part(name, "attention", {"default": cfg}, suite.cells(shapes, suite.BOTH), causal=causal),
                    shapes))
    return out


def round_suite(name):
    rnd = suite.get(name)
    return [(p, rnd.checks.get(p.kind, [])) for p in rnd.parts], rnd.cast_ref


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--round", help=f"check one round's configs instead (one of: {', '.join(suite.ROUNDS)})")
    ap.add_argument("--list", "--dry-run", action="store_true", dest="list", help="print the checks; run nothing")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    a = ap.parse_args(argv)
    parts, cast_ref = round_suite(a.round) if a.round else (library_suite(), False)
    jobs = [(p, suite.check_jobs(p, shapes)) for p, shapes in parts]
    if a.list:
        from tlx_workbench.explore.space import config_json
        for p, js in jobs:
            print(f"{p.name} ({p.kernel}{', causal' if p.causal else ''}): {len(js)} checks")
            for n, c in p.configs.items():
                print(f"  {n}: {config_json(c)}")
            print("  at " + ", ".join(sorted({f"{'x'.join(map(str, s))} {d}" for _, s, d in js})))
        print(sum(len(js) for _, js in jobs), "checks")
        return None
    from _harness import device_line, gpu_setup
    gpu_setup()
    log, rows = [], []
    stem = f"validate_{a.round}" if a.round else "validate_suite"
    payload = {"device": device_line(), "suite": a.round or "library", "errors": log, "check": rows}
    t0 = time.time()
    for p, shapes in parts:
        r, _ = suite.run_checks(p, shapes, log, cast_ref=cast_ref)
        rows += r
        print(f"{p.name}: {sum(x['ok'] == 'ok' for x in r)}/{len(r)} ok ({time.time() - t0:.0f} s)", flush=True)
        write_json(a.out, stem, payload)
    bad = [r for r in rows if r["ok"] != "ok"]
    md = [f"# correctness suite ({payload['suite']}) on {payload['device']}\n",
          f"## {len(rows) - len(bad)}/{len(rows)} ok\n",
          md_table(bad, ["part", "config", "shape", "causal", "dtype", "rel_err"])] + errors_md(log)
    (pathlib.Path(a.out) / f"{stem}.md").write_text("\n".join(md))
    print("\n".join(md), flush=True)
    return payload


if __name__ == "__main__":
    main()
