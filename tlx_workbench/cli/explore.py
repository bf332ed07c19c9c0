"""``tlx-workbench explore KERNEL --shapes MxNxK [...]``: a config sweep of a library kernel (``wb.explore``).

The sweep shows its progress bar on stderr, writes every row to the results store as it arrives (a re-run
reuses them), and ends with the summary and the store's path on stdout. Exit code 1 when a config was dropped
by the simulator (a deadlock, a race, a wrong result) or a stage failed, hung or crashed: configs over a
resource budget are the sweep doing its job, not findings.

    tlx-workbench explore gemm_ws --shapes 4096x4096x4096 --stages static,simulated --where BM=128 --limit 8
"""
from __future__ import annotations

import argparse

from .common import CLEAN, FINDING, UsageError, default_gpu, parse_assignments, parse_shape, say, write_json


def add_parser(sub) -> None:
    p = sub.add_parser("explore", help="sweep a library kernel's configs (static, simulated, measured stages)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernel", help="a library kernel: gemm_ws, gemm_pingpong, gemm_streamk, gemm_pipelined, "
                                  "gemm_fp8, attention, attention_bwd")
    p.add_argument("--shapes", nargs="+", required=True, metavar="MxNxK", help="problem shapes, e.g. 4096x4096x4096")
    p.add_argument("--stages", default="static,simulated,measured",
                   help="comma-separated stages (measured is left out without a GPU)")
    p.add_argument("--where", action="append", default=[], metavar="K=V,...",
                   help="keep only configs with these values, e.g. BM=128,STAGES=3")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N configs left")
    p.add_argument("--search", default="exhaustive", help="exhaustive, random or model (which configs to measure)")
    p.add_argument("--store", default=None, metavar="PATH",
                   help="the SQLite results store (default: $TLXWB_STORE or the per-user store)")
    p.add_argument("--backend", default="process", choices=("process", "serial", "ray"))
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--sim", metavar="GPU", default=None, help="the GPU: H200 (default, or $TLXWB_SIM), H100, B200")
    p.add_argument("--sim-shape", default="small", help='where the simulator proves each config: "small", "real"')
    p.add_argument("--dtype", default="float16")
    p.add_argument("--causal", action="store_true", help="attention: the causal variant")
    p.add_argument("--json", metavar="FILE", default=None, help="write the exploration as JSON to FILE (- : stdout)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


FINDING_STATUSES = ("hung", "crashed", "error")


def main(args) -> int:
    from .. import json_schema as js
    from ..errors import TLXWorkbenchError
    from ..explore import Space, default_store_path, explore, library
    from ..target import gpu_model
    gpu = gpu_model(args.sim or default_gpu()).name
    shapes = [parse_shape(s) for s in args.shapes]
    stages = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    try:
        problem = library.problem(args.kernel, dtype=args.dtype, causal=args.causal)
        space = library.space(args.kernel, causal=args.causal)
    except TLXWorkbenchError as e:
        raise UsageError(e.message, hint=e.hint) from None
    where = parse_assignments(args.where, "--where")
    configs = [c for c in space if all(c.get(k) == v for k, v in where.items())]
    if args.limit is not None:
        configs = configs[:args.limit]
    if not configs:
        raise UsageError(f"no config of {args.kernel} has {where}", hint=f"its knobs: {sorted(space[0])}")
    store = args.store or default_store_path()
    try:
        ex = explore(problem, Space.of(configs), shapes, stages=stages, search=args.search, store=store,
                     backend=args.backend, workers=args.workers, target=gpu, gpu=gpu, progress=not args.quiet,
                     sim_shape=args.sim_shape)
    except TLXWorkbenchError as e:
        raise UsageError(e.message, hint=e.hint) from None
    entries = ex.entries()
    bad = [e for e in entries if e["status"] in FINDING_STATUSES
           or (e["status"] == "dropped" and e.get("dropped_at") == "simulated")]
    code = FINDING if bad else CLEAN
    for line in ex.summary_lines():
        say(args, line)
    say(args, f"store: {store}")
    write_json(args.json, js.document("explore", gpu=gpu, exit_code=code, exploration=js.exploration(ex, store)))
    return code
