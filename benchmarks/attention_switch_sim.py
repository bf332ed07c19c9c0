"""The simulator's cost model on the attention switches (CPU): predicted cycles of a default with and without a switch.

One head on one CTA, so the persistent walk goes through every tile of the head (``num_sms=1``); the cost model is the
H200 calibration (``wb.simulate(gpu="H200")``). What the GPU measured for the same switches is in
``attention_switch_probe_h200.py``'s stores; this says whether the model would have predicted it.

    python benchmarks/attention_switch_sim.py [--shape 1,1,4096,128] [--switches CHAIN,HALF_DIAG]   # ~30 s
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def subjects(switches):
    """(name, config, causal): each default of D=128 with and without each switch that suits its masking."""
    from tlx_workbench.kernels import attention as A
    out = []
    for causal in (True, False):
        base = A.configs_for(128, causal)[0]
        out.append(("causal default" if causal else "non-causal default", base, causal))
        for sw in switches:
            cfg = dict(base, **{sw: True})
            if A.suits(cfg, 128, causal):
                out.append((f"  + {sw}", cfg, causal))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="1,1,4096,128")
    ap.add_argument("--switches", default="CHAIN,HALF_DIAG")
    a = ap.parse_args(argv)
    import torch
    import tlx_workbench as wb
    from tlx_workbench.kernels import attention as A
    shape = tuple(int(x) for x in a.shape.split(","))
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape, dtype=torch.float16) for _ in range(3))
    rows, base_cycles = [], {}
    for name, cfg, causal in subjects(a.switches.split(",")):
        o = torch.empty_like(q)
        with wb.simulate(gpu="H200", seed=0, schedules=1) as sim:
            A.launch(q, k, v, o, causal, 1 / math.sqrt(shape[-1]), cfg, num_sms=1)
        res = sim.result
        ref = A.reference(q.double(), k.double(), v.double(), causal=causal).double()
        err = float((o.double() - ref).norm() / ref.norm())
        base_cycles.setdefault(causal, res.cycles)
        rows.append(f"| {name} | {res.cycles:.0f} | {base_cycles[causal] / res.cycles:.3f} | {res.ok} | {err:.1e} |")
    print(f"Simulated cycles, {'x'.join(map(str, shape))} on one CTA (H200 cost model):\n")
    print("| subject | cycles | default cycles / subject's | clean bill | rel. error vs float64 |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
