"""Helpers of the checker tests: tutorials loaded unchanged, seeded-mistake lines."""
import importlib.util
import pathlib
import sys

import tlx_workbench as wb

HERE = pathlib.Path(__file__).parent
TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"
_loaded = {}


def load_tutorial(name):
    """Import a TLX wheel tutorial, unchanged, by path, under an offline Hopper target."""
    if name not in _loaded:
        with wb.offline("H100"):
            spec = importlib.util.spec_from_file_location("tlxcheck_" + name.replace("-", "_"),
                                                          TUTORIALS / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        _loaded[name] = mod
    return _loaded[name]


def seed_line(rule_id: str, kernel=None) -> int:
    """The line of seeded_kernels.py marked `# SEED: rule_id` (inside `kernel`, if given)."""
    lines = (HERE / "seeded_kernels.py").read_text().splitlines()
    start = 0
    if kernel is not None:
        start = next(i for i, l in enumerate(lines) if l.startswith(f"def {kernel}("))
    for i in range(start, len(lines)):
        if lines[i].rstrip().endswith(f"# SEED: {rule_id}"):
            return i + 1
    raise KeyError(rule_id)
