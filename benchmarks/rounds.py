"""Re-run a GPU experiment of the kernel work as an explorer run (the experiments are in ``benchmarks/suite.py``).

    python3 benchmarks/rounds.py --list                          # every experiment: parts, cells, configs, checks
    python3 benchmarks/rounds.py ws_switches --stages static,simulated --shape 256x256x256   # CPU: compile + simulate
    source .gpu/env.sh && python3 benchmarks/rounds.py ws_switches    # GPU: writes ws_switches.json/.md (+ stores) under $OUT

On a GPU an experiment is (1) the explorer over each part's configs at its shapes, static -> simulated ->
measured (one sweep per dtype, stores ``$OUT/<experiment>_<dtype>.sqlite``); (2) the float64 checks of every config
at the experiment's check shapes, ragged ones included, outputs NaN-poisoned (``benchmarks/validate.py``
runs the same checks); (3) interleaved rounds over every cell: the configs that passed both, the
vendor (cuBLAS / SDPA) and the experiment's TLX tutorials, best round shown, every round listed. Without a
GPU only the explorer's CPU stages run. ``--shape`` replaces the cells' shapes of the parts whose
shapes have as many dimensions (``256x256x256``: the GEMM parts; ``1x2x256x128``: attention), and
leaves the other parts out. Results are written after every section, so a call cut short still
returns what it measured.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
# explorer workers rebuild GEMM problems as ``suite:problem``: they need benchmarks/ on their path
os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent)] + [p for p in [os.environ.get("PYTHONPATH")] if p])

import suite  # noqa: E402
from _harness import errors_md, md_table, write_json  # noqa: E402


def parse_shape(text):
    return tuple(int(x) for x in text.lower().split("x"))


def selected_parts(rnd, part=None, dtype=None, shape=None):
    """The round's parts after ``--part`` (a substring of the part's name), ``--dtype`` and
    ``--shape`` (kept: parts whose shapes have its rank, their cells at that shape)."""
    import dataclasses
    out = []
    for p in rnd.parts:
        if part and part not in p.name:
            continue
        cells = [(s, d) for s, d in p.cells if dtype is None or d == dtype]
        if shape is not None:
            if len(shape) != len(p.cells[0][0]):
                continue
            cells = list(dict.fromkeys((tuple(shape), d) for _, d in cells))
        if cells:
            out.append(dataclasses.replace(p, cells=tuple(cells)))
    return out


def explore_part(rnd, p, stages, out, gate, workers, log):
    """The explorer over one part, one sweep per dtype, each into ``<out>/<round>_<dtype>.sqlite``: a
    store row's key does not name the problem's dtype, so one file would hand a bf16 sweep the fp16
    rows. Returns (summary rows, {(name, dtype)} dropped)."""
    import tlx_workbench.explore as tx
    from tlx_workbench.explore.space import config_id
    names = {config_id(c): n for n, c in p.configs.items()}
    rows, dropped = [], set()
    for dname in dict.fromkeys(d for _, d in p.cells):
        prob = suite.problem(p.kernel, dtype=dname, causal=p.causal)
        space = tx.Space([c for n, c in p.configs.items() if dname in p.dtypes_of(n)])
        t0 = time.perf_counter()
        store = str(out / f"{rnd.name}_{dname}.sqlite")
        ex = suite.try_call(f"explore {p.name} {dname}", lambda: tx.explore(
            prob, space, shapes=p.shapes(dname), stages=stages, store=store, gate=gate, backend="process",
            workers=workers, timeout=20.0, progress=False), log)
        if ex is None:
            continue
        for e in ex.entries():
            name = names.get(e["config_id"], e["config_id"])
            if e["status"] in ("dropped", "hung", "crashed", "error"):
                dropped.add((name, dname))
            rows.append(dict(part=p.name, kernel=p.kernel, config=name, dtype=dname,
                             shape="x".join(map(str, e["shape"])), status=e["status"], stage=e["stage"],
                             reason=(e.get("reason") or "")[:200], line=e.get("line"), smem=e.get("smem_bytes"),
                             registers=e.get("registers"), spills=e.get("spills"), ctas=e.get("ctas"),
                             predicted_us=e.get("predicted_us"), us=e.get("us"), tflops=e.get("tflops")))
        print(f"{p.name} {dname}: {ex.counts()} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return rows, dropped


EXPLORE_COLS = ["part", "config", "dtype", "shape", "status", "smem", "registers", "spills", "predicted_us", "us",
                "reason"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("round", nargs="?", help=f"one of: {', '.join(suite.ROUNDS)}")
    ap.add_argument("--list", "--dry-run", action="store_true", dest="list",
                    help="print what the round (or every round) compares; run nothing")
    ap.add_argument("--stages", default="static,simulated,measured",
                    help="explorer stages (comma-separated); the checks and side by side run with 'measured'")
    ap.add_argument("--shape", type=parse_shape, help="replace the cells' shapes (e.g. 256x256x256)")
    ap.add_argument("--part", help="only the parts whose name contains this (e.g. gemm, 'D=64', causal)")
    ap.add_argument("--dtype", choices=("float16", "bfloat16"))
    ap.add_argument("--no-gate", action="store_true", help="time every config, even those a CPU stage dropped")
    ap.add_argument("--deadline", type=float, help="start no timed round after this many seconds")
    ap.add_argument("--rounds", type=int, help="interleaved rounds per cell (default: the round's)")
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1))
    ap.add_argument("--out", default=os.environ.get("OUT", "bench_out"))
    a = ap.parse_args(argv)
    if a.round is None:
        if not a.list:
            ap.error("name a round, or --list")
        for name in suite.ROUNDS:
            print(suite.describe(suite.get(name)), end="\n\n")
        return None
    rnd = suite.get(a.round)
    if a.rounds:
        rnd.rounds = a.rounds
    parts = selected_parts(rnd, a.part, a.dtype, a.shape)
    if a.list:
        import dataclasses
        print(suite.describe(dataclasses.replace(rnd, parts=parts)))
        return None
    if not parts:
        raise SystemExit(f"no part of {rnd.name} is left after --part/--dtype/--shape")
    from tlx_workbench.target import has_gpu
    stages = tuple(s.strip() for s in a.stages.split(",") if s.strip())
    gpu = has_gpu() and "measured" in stages
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = []
    if gpu:
        from _harness import device_line, gpu_setup
        gpu_setup()
        device = device_line()
    else:
        device = f"no GPU ({platform.node()}): CPU stages only"
    payload = {"device": device, "round": rnd.name, "title": rnd.title, "errors": log,
               "ran_as": [dict(command=c, commit=k, raw=r) for c, k, r in rnd.ran_as],
               "stages": list(stages), "parts": {p.name: dict(kernel=p.kernel, causal=p.causal,
                                                              cells=[["x".join(map(str, s)), d] for s, d in p.cells],
                                                              configs=p.configs) for p in parts}}
    print(f"# {rnd.title} on {device}\n", flush=True)
    t0 = time.time()
    gate = () if a.no_gate else ("static", "simulated")
    rows, dropped = [], set()
    for p in parts:
        r, d = explore_part(rnd, p, stages, out, gate, a.workers, log)
        rows += r
        dropped |= {(p.name,) + x for x in d}
    payload["explore"] = rows
    print(md_table(rows, EXPLORE_COLS), flush=True)
    write_json(out, rnd.name, payload)
    md = [f"# {rnd.title} on {device}\n", "## explorer\n", md_table(rows, EXPLORE_COLS)]
    if gpu:
        checks, bad = [], set()
        for p in parts:
            crows, cbad = suite.run_checks(p, rnd.checks.get(p.kind, []), log, cast_ref=rnd.cast_ref)
            checks += crows
            bad |= {(p.name,) + x for x in cbad}
        payload["check"] = checks
        msg = f"## float64 checks: {sum(r['ok'] == 'ok' for r in checks)}/{len(checks)} ok ({time.time() - t0:.0f} s)\n"
        print(msg, flush=True)
        md += [msg, md_table([r for r in checks if r["ok"] != "ok"], ["part", "config", "shape", "dtype", "rel_err"])]
        write_json(out, rnd.name, payload)

        def keep(part, name, dname):
            return (part.name, name, dname) not in bad and (a.no_gate or (part.name, name, dname) not in dropped)

        groups = suite.side_by_side_groups(rnd, keep, log, parts=parts)
        payload["timing"], payload["rounds"] = suite.timed(groups, log, a.deadline)
        write_json(out, rnd.name, payload)
        table = md_table(payload["timing"], ["cell", "subject", "tflops", "vs_vendor", "rounds"])
        md += [f"## side by side ({payload['rounds']} rounds)\n", table]
        print(table, flush=True)
    md += errors_md(log)
    (out / f"{rnd.name}.md").write_text("\n".join(md))
    print(f"total {time.time() - t0:.0f} s; {out / (rnd.name + '.json')}", flush=True)
    return payload


if __name__ == "__main__":
    main()
