"""What every verb of the command line shares: exit codes, where output goes, the JSON document.

Results go to stdout (text for people) and, with ``--json FILE`` (``-`` for stdout, then without the text), to
one document of :mod:`tlx_workbench.json_schema`; progress and diagnostics of the program go to stderr.
"""
from __future__ import annotations

import json
import os
import sys

CLEAN, FINDING, USAGE = 0, 1, 2        # exit codes: nothing found, a finding (or the program failed), usage error


class UsageError(Exception):
    """The command line cannot be carried out as given (exit code 2): a missing file, an unknown kernel."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


def default_gpu(fallback: str = "H200") -> str:
    """``TLXWB_SIM`` (a GPU name) if set, else ``fallback``."""
    return os.environ.get("TLXWB_SIM") or fallback


def progress(text: str, end: str = "\n") -> None:
    sys.stderr.write(text + end)
    sys.stderr.flush()


def write_json(path: str | None, doc: dict) -> None:
    """The document to ``path`` (``-``: stdout), written whole, then renamed: a reader never sees half of it."""
    if not path:
        return
    text = json.dumps(doc, indent=1, allow_nan=False)
    if path == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def say(args, text: str = "") -> None:
    """A result line for people, on stdout (not when the JSON document goes to stdout)."""
    if getattr(args, "json", None) == "-":
        return
    sys.stdout.write(text + "\n")


def parse_assignments(items, what: str = "--config") -> dict:
    """``["BM=128", "BN=64,STAGES=3"]`` -> {"BM": 128, "BN": 64, "STAGES": 3}: values as Python literals where
    they read as one (numbers, True/False/None, tuples), else as text; ``tl.float16`` style dtypes as Triton's."""
    import ast
    out = {}
    for item in items or ():
        for part in _split_top(item):
            if not part.strip():
                continue
            if "=" not in part:
                raise UsageError(f"{what} {part!r}: expected NAME=VALUE", hint=f"e.g. {what} BM=128,BN=64")
            k, v = part.split("=", 1)
            k, v = k.strip(), v.strip()
            if v.startswith(("tl.", "triton.language.")):
                import triton.language as tl
                val = getattr(tl, v.rsplit(".", 1)[1], None)
                if val is None:
                    raise UsageError(f"{what} {k}={v}: triton.language has no {v.rsplit('.', 1)[1]}")
                out[k] = val
                continue
            try:
                out[k] = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                out[k] = v
    return out


def _split_top(text: str) -> list[str]:
    # commas split assignments, except inside brackets: ctas_per_cga=(2,1,1),BM=128
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_shape(text: str) -> tuple:
    """``"256x256x128"`` (or ``256,256,128``) -> (256, 256, 128)."""
    try:
        return tuple(int(v) for v in text.replace(",", "x").split("x") if v)
    except ValueError:
        raise UsageError(f"shape {text!r}: expected integers joined by x, e.g. 4096x4096x4096") from None


def short_path(path: str | None) -> str:
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if not rel.startswith("..") else path
