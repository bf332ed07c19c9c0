"""The ``tlx-workbench`` command."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tlx-workbench", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="compile a Hopper and a Blackwell GEMM offline and write one self-contained HTML report")
    d.add_argument("-o", "--output", default="tlx_workbench_report.html")
    args = p.parse_args(argv)
    if args.cmd == "demo":
        from .demo import run_demo
        path = run_demo(args.output)
        print(path)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
