"""Shared helpers of the GPU benchmarks: tutorial loading, timing, error metric, tables.

The TLX tutorials are test subjects: they are imported by path from the installed
wheel and run unchanged, through their own launchers.
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import statistics
import sys
import time
import traceback


def tutorials_dir() -> pathlib.Path:
    import tlx
    return pathlib.Path(tlx.__file__).parent / "tutorials"


_TUTORIALS: dict = {}


def load_tutorial(stem: str):
    """Import ``tlx/tutorials/<stem>.py`` unchanged (cached); returns the module or raises."""
    if stem not in _TUTORIALS:
        path = tutorials_dir() / f"{stem}.py"
        spec = importlib.util.spec_from_file_location(f"tlx_tutorial_{stem.replace('-', '_')}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        _TUTORIALS[stem] = mod
    return _TUTORIALS[stem]


def rel_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere (an unwritten poisoned element) -> inf."""
    import torch
    o = out.double()
    r = ref.double().to(o.device)
    if not torch.isfinite(o).all():
        return float("inf")
    return float((o - r).norm() / r.norm().clamp_min(1e-30))


def bench_ms(fn, warmup=100, rep=300) -> float:
    """Median milliseconds of ``fn`` with do_bench (events, L2 flushed between runs)."""
    import triton
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def try_call(label, fn, log):
    """Run ``fn``; on error record it (type, message, tail of traceback) instead of dying."""
    try:
        return fn()
    except Exception as e:  # a failing subject must not cost the rest of the GPU run
        msg = f"{type(e).__name__}: {str(e)[:400]}"
        log.append({"what": label, "error": msg, "trace": traceback.format_exc()[-1500:]})
        print(f"  !! {label}: {msg}", flush=True)
        return None


def md_table(rows, cols) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "|".join("---" for _ in cols) + "|\n"
    body = "".join("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |\n" for r in rows)
    return head + body


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 0.01 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
    return str(v)


def write_outputs(out_dir, stem, payload, markdown):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1, default=str))
    (out / f"{stem}.md").write_text(markdown)


def device_line() -> str:
    import torch
    import triton
    p = torch.cuda.get_device_properties(0)
    return (f"{p.name}, {p.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def median(xs):
    return statistics.median(xs) if xs else float("nan")
