"""Does the vendor ratio depend on how long do_bench measures? (the H200 is power-capped: its clock follows the load)

The goal script times with ``do_bench(warmup=25, rep=100)`` (Triton's defaults), the probes with 100/300 ms; on
2026-12-04 the same default read 1-4 % lower against SDPA in a probe run than in the goal runs. Here the same
subjects are timed in one run by three windows, interleaved: ``goal`` (25/100 ms), ``probe`` (100/300) and
``long`` (500/2000), each a do_bench median (L2 flushed between launches, as always), while ``nvidia-smi`` samples
the SM clock and board power every 20 ms; each measurement gets the median clock and power of the samples inside
its window. Cells: the issue-22 cells whose margins are smallest (attention D=128 fp16 at 4096 and 8192, causal and
not; GEMM 4096^3 fp16, gemm_cluster and gemm_ws against cuBLAS). Rounds shuffle the cells' subjects and the
windows (``_harness.round_order``).

    source .gpu/env.sh && python3 benchmarks/timing_window_h200.py [--rounds 5]   # $OUT/timing_window_h200.{json,md}
"""
from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _harness import WINDOWS  # noqa: E402

ATTN = [((4, 32, 4096, 128), False), ((4, 32, 4096, 128), True), ((2, 32, 8192, 128), True),
        ((2, 32, 8192, 128), False)]


class Sampler:
    """``nvidia-smi`` in the background: (unix time, SM MHz, W) every ``ms`` milliseconds."""

    def __init__(self, ms=20):
        self.samples = []
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                                      "--format=csv,noheader,nounits", "-lms", str(ms)],
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            try:
                t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((t, float(parts[1]), float(parts[2])))
            except ValueError:
                continue

    def between(self, t0, t1):
        """Median SM MHz and W of the samples in [t0, t1] (None when there are none)."""
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if not s:
            return None, None, 0
        return statistics.median(x[1] for x in s), statistics.median(x[2] for x in s), len(s)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def cells():
    """[(cell name, vendor name, {subject: fn})] on fresh inputs."""
    import torch
    import torch.nn.functional as F
    from _harness import attn_inputs, gemm_inputs
    from tlx_workbench.kernels import attention as A
    from tlx_workbench.kernels import gemm_cluster, gemm_ws
    out = []
    for shape, causal in ATTN:
        q, k, v, scale = attn_inputs(shape, torch.float16)
        o = torch.empty_like(q)
        cfg = A.DEFAULTS[(False, causal)]
        subj = {"sdpa": (lambda q=q, k=k, v=v, c=causal, s=scale:
                         F.scaled_dot_product_attention(q, k, v, is_causal=c, scale=s)),
                "ours": lambda q=q, k=k, v=v, o=o, c=causal, s=scale, cfg=cfg: A.launch(q, k, v, o, c, s, cfg)}
        out.append((f"attention {'x'.join(map(str, shape))} {'causal' if causal else 'non-causal'} fp16", "sdpa",
                    subj))
    a, b = gemm_inputs(4096, 4096, 4096, torch.float16)
    subj = {"cublas": lambda: torch.matmul(a, b)}
    for name, mod in (("gemm_cluster", gemm_cluster), ("gemm_ws", gemm_ws)):
        c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
        subj[name] = (lambda mod, c: lambda: mod.launch(a, b, c, mod.CONFIGS[0]))(mod, c)
    out.append(("gemm 4096^3 fp16", "cublas", subj))
    return out


def measure(rounds: int, log: list) -> dict:
    import torch
    import triton
    from _harness import check_subjects, gpu_setup, round_order, try_call
    gpu_setup()
    todo = cells()
    res = {}
    for cell, vendor, subj in todo:
        errs = check_subjects(subj, subj[vendor](), log, f"{cell} {{name}}")
        res[cell] = dict(vendor=vendor, errors=errs, windows={w: {n: [] for n in subj} for w in WINDOWS})
    torch.cuda.synchronize()
    sampler = Sampler()
    time.sleep(1.0)
    try:
        for r in range(rounds):
            for cell, vendor, subj in todo:
                for w in round_order(list(WINDOWS), 1000 + r):
                    warmup, rep = WINDOWS[w]
                    for name in round_order(list(subj), r):
                        if res[cell]["errors"][name] > 2e-2:
                            continue
                        torch.cuda.synchronize()
                        t0 = time.time()
                        ms = try_call(f"{cell} {name} {w}", lambda: float(triton.testing.do_bench(
                            subj[name], warmup=warmup, rep=rep, return_mode="median")), log)
                        t1 = time.time()
                        # the samples of the timed part: do_bench's warm-up and estimate come first
                        mhz, watts, n = sampler.between(t0 + (t1 - t0) * warmup / (warmup + rep), t1)
                        if ms is not None:
                            res[cell]["windows"][w][name].append(dict(ms=ms, mhz=mhz, watts=watts, samples=n))
            print(f"round {r + 1}/{rounds} done", flush=True)
    finally:
        sampler.stop()
    return res


def summary(res: dict) -> list:
    """Per cell, window, subject: median ms, MHz, W over the rounds; the vendor's median over ours."""
    rows = []
    for cell, c in res.items():
        for w, subj in c["windows"].items():
            med = {n: statistics.median(x["ms"] for x in xs) for n, xs in subj.items() if xs}
            for n, xs in subj.items():
                if not xs or n == c["vendor"]:
                    continue
                clk = [x["mhz"] for x in xs if x["mhz"]]
                vclk = [x["mhz"] for x in subj[c["vendor"]] if x["mhz"]]
                watts = [x["watts"] for x in xs if x["watts"]]
                rows.append(dict(cell=cell, window=w, subject=n, ms=med[n], vendor_ms=med.get(c["vendor"]),
                                 vs_vendor=med[c["vendor"]] / med[n] if c["vendor"] in med else None,
                                 ours_mhz=statistics.median(clk) if clk else None,
                                 vendor_mhz=statistics.median(vclk) if vclk else None,
                                 ours_watts=statistics.median(watts) if watts else None,
                                 rounds_vs_vendor=[v["ms"] / o["ms"] for v, o in zip(subj[c["vendor"]], xs)]))
    return rows


def markdown(rec: dict) -> str:
    f = (lambda x, p=3: "–" if x is None else f"{x:.{p}f}")
    lines = [f"# do_bench's window and the vendor ratio, {rec['device']} ({rec['date']})", "", f"`{rec['command']}`",
             "", "| cell | subject | window | ours ms | vendor ms | vendor / ours | per round | ours MHz | vendor MHz "
             "| ours W |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rec["summary"]:
        lines.append(f"| {r['cell']} | {r['subject']} | {r['window']} | {f(r['ms'], 4)} | {f(r['vendor_ms'], 4)} | "
                     f"**{f(r['vs_vendor'])}** | {' / '.join(f'{x:.3f}' for x in r['rounds_vs_vendor'])} | "
                     f"{f(r['ours_mhz'], 0)} | {f(r['vendor_mhz'], 0)} | {f(r['ours_watts'], 0)} |")
    if rec["log"]:
        lines += ["", "Errors:"] + [f"- {e['what']}: {e['error']}" for e in rec["log"]]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from _harness import run_record, write_outputs
    log = []
    rec = run_record(rounds=a.rounds, windows=WINDOWS)
    rec["cells"] = measure(a.rounds, log)
    rec["summary"] = summary(rec["cells"])
    rec["log"] = log
    text = markdown(rec)
    write_outputs(os.environ.get("OUT", "."), "timing_window_h200", rec, text)
    print(text)


if __name__ == "__main__":
    main()
