"""The command line, run as a person or a CI job runs it: the `tlx-workbench` console script in a subprocess."""
import json
import os
import shutil
import subprocess
import sys

import pytest

def _command() -> list[str]:
    exe = shutil.which("tlx-workbench", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "tlx_workbench.cli"]


class Ran:
    def __init__(self, proc, doc):
        self.code, self.out, self.err, self.doc = proc.returncode, proc.stdout, proc.stderr, doc

    def __repr__(self):
        return f"exit {self.code}\n--- stdout\n{self.out}\n--- stderr\n{self.err[-4000:]}"


@pytest.fixture
def cli(tmp_path):
    """cli(verb, *args, json=True) -> Ran: exit code, stdout, stderr and the --json document (None without)."""
    def run(verb, *args, json_doc=True, env=None, timeout=600):
        path = tmp_path / f"{verb}.json"
        opts = ["--json", str(path)] if json_doc else []
        e = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", **(env or {})}
        e.pop("CUDA_VISIBLE_DEVICES", None)
        proc = subprocess.run([*_command(), verb, *opts, *args], capture_output=True, text=True, timeout=timeout,
                              env=e, cwd=tmp_path)
        doc = json.loads(path.read_text()) if json_doc and path.exists() else None
        return Ran(proc, doc)
    return run
