"""TLX's own GPU test suite (the `tutorials/testing/test_correctness.py` that ships in triton-utlx), on a real GPU.

The ground truth for the pytest plugin's CPU run: the same file, unchanged, run by plain pytest on the
H200, each test's outcome and duration written to $OUT/tlx_suite_gpu.json. The one thing added is the alias the
plugin also makes: the file imports TLX's tutorials as `triton.language.extra.tlx.tutorials` (TLX's own tree), the
wheel ships them as `tlx.tutorials`; without it no test would be collected on any machine.

    source .gpu/env.sh && python3 benchmarks/tlx_suite/run_gpu.py [-k EXPR]
"""
from __future__ import annotations

import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import pytest  # noqa: E402


class Record:
    def __init__(self):
        self.tests = {}

    def pytest_runtest_logreport(self, report):
        t = self.tests.setdefault(report.nodeid.split("::", 1)[-1], {"outcome": "passed", "duration_s": 0.0})
        t["duration_s"] += report.duration
        if report.outcome == "skipped":
            t["outcome"] = "skipped"
            lr = report.longrepr
            t["why"] = lr[2] if isinstance(lr, tuple) else str(lr)[-300:]
        elif report.outcome == "failed":
            t["outcome"] = "failed"
            t["why"] = str(report.longrepr)[-1500:]


def main(argv):
    from tlx_workbench.pytest_plugin import _alias_tlx_tutorials
    import tlx
    import torch
    alias = _alias_tlx_tutorials()
    suite = pathlib.Path(tlx.__file__).parent / "tutorials" / "testing" / "test_correctness.py"
    out = pathlib.Path(os.environ.get("OUT", "out"))
    out.mkdir(parents=True, exist_ok=True)
    rec = Record()
    t0 = time.time()
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-rfE", str(suite), *argv], plugins=[rec])
    data = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": torch.cuda.get_device_name(),
            "torch": torch.__version__, "triton": __import__("triton").__version__, "alias": alias,
            "command": "python3 benchmarks/tlx_suite/run_gpu.py " + " ".join(argv), "exit": int(rc),
            "wall_s": round(time.time() - t0, 1), "tests": rec.tests}
    (out / "tlx_suite_gpu.json").write_text(json.dumps(data, indent=1))
    for name, t in rec.tests.items():
        print(f"{t['outcome']:8} {t['duration_s']:7.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
