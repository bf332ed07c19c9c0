"""Causal attention forward at D=128 on the H200: where the zig-zag default's last wave goes (issue 22's 1.10x line).

4x32x4096 and 2x32x8192 causal are 2048 zig-zag pairs of equal work each, 15.52 waves on 132 SMs: the last wave
keeps 68 SMs busy and 64 idle, about 3 % of the kernel. This times, side by side in interleaved rounds (medians of
do_bench medians), torch SDPA, the default as ``launch`` starts it (since 2026-12-04 on ``persistent_ctas`` CTAs: 128
here, 16 whole waves, the same makespan in pairs), the default on one CTA per SM (132, the launch before), and the
causal autotune space's other configs (``configs_for(128, True)``); each subject is first checked against SDPA's
output. (The stores in ``benchmarks/kernels_h200/causal_probe_r13/`` were made before the change: their "default"
is the 132-CTA launch and "default_128ctas" today's.)

    source .gpu/env.sh && python3 benchmarks/attention_causal_probe_h200.py [--rounds 7]   # ~2 min on the H200

Results: ``$OUT/attention_causal_probe_h200.{json,md}``.
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

SHAPES = [(4, 32, 4096, 128), (2, 32, 8192, 128)]
DTYPES = ("float16", "bfloat16")


def subjects_for(q, k, v, o, scale):
    """{name: callable}: SDPA, the default as launched and on one CTA per SM, then the rest of the causal space."""
    import torch
    import triton
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels._common import sm_count
    F = torch.nn.functional
    space = A.configs_for(q.shape[-1], True, q.shape[2])
    sms = sm_count()
    kernel, args, options = A._kernel_call(q, k, v, o, True, scale, space[0], sms)

    def one_per_sm():
        kernel[(sms,)](*args, **options)
        return o

    triton.set_allocator(A.torch_alloc)
    out = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale),
           "default": lambda: A.launch(q, k, v, o, True, scale, space[0]),
           f"default_{sms}ctas": one_per_sm}
    for i, cfg in enumerate(space[1:], 1):
        out[f"space[{i}]"] = (lambda cfg: lambda: A.launch(q, k, v, o, True, scale, cfg))(cfg)
    return out, space


def cell(shape, dname, rounds, log):
    import torch
    from _harness import attn_flops, attn_inputs, sdpa_rounds
    q, k, v, scale = attn_inputs(shape, getattr(torch, dname))
    o = torch.empty_like(q)
    subj, space = subjects_for(q, k, v, o, scale)
    return dict(shape=list(shape), dtype=dname, space=list(space),
                **sdpa_rounds(subj, rounds, log, attn_flops(shape, True)))


def markdown(res) -> str:
    from _harness import errors_md
    out = [f"# Causal attention forward, D=128, on {res['device']} ({res['date']}; {res['rounds']} interleaved rounds)",
           "", "SDPA's time over each subject's (median of rounds):", ""]
    names = list(res["cells"][0]["median_ms"]) if res["cells"] else []
    out += ["| cell | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for c in res["cells"]:
        out.append(f"| {'x'.join(map(str, c['shape']))} {c['dtype']} | "
                   + " | ".join(f"{c['vs_sdpa'].get(n, float('nan')):.3f}" for n in names) + " |")
    if res["cells"]:
        out += ["", "space: " + "; ".join(f"[{i}] {json.dumps(cfg)}" for i, cfg in enumerate(res["cells"][0]["space"]))]
    if res["log"]:
        out += [""] + errors_md(res["log"])
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    a = ap.parse_args(argv)
    import torch
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               device=torch.cuda.get_device_name(0), command=" ".join(sys.argv), rounds=a.rounds, cells=[], log=[])
    for shape in SHAPES:
        for dname in DTYPES:
            res["cells"].append(cell(shape, dname, a.rounds, res["log"]))
            (out / "attention_causal_probe_h200.json").write_text(json.dumps(res, indent=1, default=str))
            print(json.dumps({k: res["cells"][-1][k] for k in ("shape", "dtype", "vs_sdpa")}), flush=True)
    text = markdown(res)
    (out / "attention_causal_probe_h200.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
