"""The benchmark suites' harness: the record every result starts with (date, machine, command), tutorial loading,
inputs, float64 checks, timing windows and interleaved rounds, tables and JSON.

The TLX tutorials are test subjects: they are imported by path from the installed
wheel and run unchanged, through their own launchers.
"""
from __future__ import annotations

import importlib.util
import json
import math
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


# do_bench windows (warm-up ms, measured ms): Triton's defaults (the goal script's), the probes', and a long one whose
# rounds spread 3-10x less on the power-capped H200 at the same medians (2026-12-04; RESULTS.md)
WINDOWS = {"goal": (25, 100), "probe": (100, 300), "long": (500, 2000)}


def bench_ms(fn, warmup=100, rep=300) -> float:
    """Median milliseconds of ``fn``: the workbench's timing runner (``tlx_workbench.runtime.timing.time_call``,
    do_bench: events, L2 flushed before each run)."""
    from tlx_workbench.runtime.timing import time_call
    return time_call(fn, warmup=warmup, rep=rep).median_ms


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


def write_json(out_dir, stem, payload):
    """Write ``<out_dir>/<stem>.json`` (made if missing); the GPU scripts call it after every
    section so a run cut short still returns what it measured."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=1, default=str))


def write_outputs(out_dir, stem, payload, markdown):
    write_json(out_dir, stem, payload)
    (pathlib.Path(out_dir) / f"{stem}.md").write_text(markdown)


def errors_md(log) -> list:
    """The markdown ``## errors`` section for a run's error log, as a list of 0 or 1 parts."""
    return ["## errors\n" + "\n".join(f"- {e['what']}: {e['error']}" for e in log)] if log else []


def gpu_setup():
    """Seed torch and give Triton the torch allocator (TMA descriptors need scratch memory)."""
    import torch
    import triton
    from tlx_workbench.kernels._common import torch_alloc
    torch.manual_seed(0)
    triton.set_allocator(torch_alloc)


def run_check_sweep_compare(out_dir, stem, title, check, check_cols, sweep, sweep_head, sweep_cols,
                            compare, compare_cols):
    """The kernel-library run of gemm.py and attention.py: ``check(log)`` (skipped when None)
    -> rows with ``ok``; ``sweep(log)`` -> (rows, best); ``compare(best, log)`` -> rows. Writes
    ``<stem>.json`` and ``<stem>.md`` (the failed checks, the sweep, the side by side, errors)."""
    gpu_setup()
    log = []
    payload = {"device": device_line(), "errors": log}
    md = [f"# {title} on {payload['device']}\n"]
    if check is not None:
        rows = check(log)
        payload["check"] = rows
        bad = [r for r in rows if r["ok"] != "ok"]
        md.append(f"## correctness: {len(rows) - len(bad)}/{len(rows)} ok\n")
        md.append(md_table(bad, check_cols))
        print(md[-2], flush=True)
    srows, best = sweep(log)
    payload["sweep"] = srows
    md.append(f"## {sweep_head}\n" + md_table(srows, sweep_cols))
    crows = compare(best, log)
    payload["compare"] = crows
    md.append("## side by side\n" + md_table(crows, compare_cols))
    md += errors_md(log)
    write_outputs(out_dir, stem, payload, "\n".join(md))
    return payload


# ---- inputs and float64 checks -------------------------------------------------------------

def gemm_inputs(M, N, K, dt):
    """Fresh ``a`` (M x K) and ``b`` (K x N) of dtype ``dt`` on the GPU, drawn in that order (the GEMMs'
    KernelSpec's inputs)."""
    from tlx_workbench.kernels import spec
    return spec("gemm_ws").make_inputs((M, N, K), dt, "cuda")


def attn_inputs(shape, dt):
    """Fresh q, k, v of ``shape`` (Z, H, N, D) (the attention KernelSpec's inputs) and their softmax scale
    1/sqrt(D)."""
    from tlx_workbench.kernels import spec
    return (*spec("attention").make_inputs(tuple(shape), dt, "cuda"), 1.0 / math.sqrt(shape[-1]))


def attn_flops(shape, causal) -> float:
    from tlx_workbench.kernels import spec
    return spec("attention").flops(*shape, causal=causal)


def attn_ref64(q, k, v, causal, sm_scale):
    """float64 attention on the GPU (fast enough for the check shapes)."""
    import torch
    qd, kd, vd = q.double(), k.double(), v.double()
    s = (qd @ kd.transpose(-1, -2)) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ vd


def check_gemm(label, launch, M, N, K, dt, log, cast_ref=True):
    """Relative error of ``launch(a, b, c)`` vs float64 on fresh inputs, ``c`` NaN-poisoned so an
    unwritten element shows; inf when the launch fails. ``cast_ref`` rounds the reference to ``dt``
    first (as gemm.py and the ws_switches experiment do; the persistent one compares to the float64 product itself)."""
    import torch
    a, b = gemm_inputs(M, N, K, dt)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
    got = try_call(label, lambda: launch(a, b, c), log)
    if got is None:
        return float("inf")
    ref = a.double() @ b.double()
    return rel_error(c, ref.to(dt) if cast_ref else ref)


def check_attn(label, launch, shape, causal, dt, log, sync=False):
    """Relative error of ``launch(q, k, v, o, scale)`` vs float64 attention, ``o`` NaN-poisoned;
    inf when the launch fails. ``sync`` waits for the GPU before the check (the persistent experiment did)."""
    import torch
    q, k, v, scale = attn_inputs(shape, dt)
    o = torch.full_like(q, float("nan"))
    got = try_call(label, lambda: launch(q, k, v, o, scale), log)
    if sync:
        torch.cuda.synchronize()
    return float("inf") if got is None else rel_error(o, attn_ref64(q, k, v, causal, scale))


def check_row(rows, err, tol, what, **fields) -> bool:
    """Append the check's row (``fields``, rel_err, ok) to ``rows``; print ``FAIL <what> <err>``
    when ``err`` exceeds ``tol``. Returns whether it passed."""
    ok = err <= tol
    rows.append(dict(fields, rel_err=err, ok="ok" if ok else "FAIL"))
    if not ok:
        print(f"  FAIL {what} {err:.3g}", flush=True)
    return ok


# ---- timing ------------------------------------------------------------------------------

def round_order(names, r: int) -> list:
    """The order subjects are timed in round ``r``: shuffled, seeded by the round, so that no subject always follows
    the same one. In a fixed order one kernel timed as two subjects (the variants script's "default" and "tuned")
    differed by a median 0.9 % and up to 2.6 %, the earlier position faster in 19 of 24 cells (H200, 2026-12-04).

    >>> round_order(["a", "b", "c"], 0) == round_order(["a", "b", "c"], 0), sorted(round_order(["a", "b", "c"], 1))
    (True, ['a', 'b', 'c'])
    """
    import random
    order = list(names)
    random.Random(r).shuffle(order)
    return order


def check_subjects(subjects, ref, log, run_label) -> dict:
    """Run every subject once, untimed: {name: its error against ``ref``} (inf when it failed; the failure is in
    ``log``, under ``run_label`` formatted with ``name``)."""
    import triton
    from tlx_workbench.kernels._common import torch_alloc
    errs = {}
    for name, fn in subjects.items():
        out = try_call(run_label.format(name=name), fn, log)
        errs[name] = float("inf") if out is None else rel_error(out, ref)
        triton.set_allocator(torch_alloc)    # a tutorial launcher may have set its own
    return errs


def interleaved_rounds(subjects, ref, rounds, log, run_label, bench_label, max_err=None, window=WINDOWS["probe"]):
    """Time every subject in ``rounds`` interleaved rounds (do_bench median each, over ``window``: (warm-up ms,
    measured ms)), in ``round_order``.

    First each subject runs once untimed and its error against ``ref`` is measured; a subject that
    failed (or, with ``max_err``, differs by more) is not timed. Labels are formatted with ``name``.
    Returns ({name: [ms per round]}, {name: error}).
    """
    times, errs = {k: [] for k in subjects}, check_subjects(subjects, ref, log, run_label)
    for r in range(rounds):
        for name in round_order(subjects, r):
            if (errs[name] == float("inf")) if max_err is None else (errs[name] > max_err):
                continue
            ms = try_call(bench_label.format(name=name), lambda: bench_ms(subjects[name], *window), log)
            if ms is not None:
                times[name].append(ms)
    return times, errs


def sdpa_rounds(subjects, rounds, log, fl, max_err=2e-2, window=WINDOWS["probe"]) -> dict:
    """``interleaved_rounds`` of ``subjects`` (one of them "sdpa", the reference every output is checked
    against), summarised: {errors, rounds_ms, median_ms (of rounds), vs_sdpa (SDPA's median over each
    subject's), tflops (``fl`` flops over each median)}."""
    ref = subjects["sdpa"]()
    times, errs = interleaved_rounds(subjects, ref, rounds, log, "run {name}", "time {name}", max_err=max_err,
                                     window=window)
    med = {n: statistics.median(t) for n, t in times.items() if t}
    return dict(errors=errs, rounds_ms=times, median_ms=med,
                vs_sdpa={n: med["sdpa"] / m for n, m in med.items()} if "sdpa" in med else {},
                tflops={n: fl / m * 1e-9 for n, m in med.items()})


def rounds_text(fl, ts) -> str:
    """TFLOP/s of each round, e.g. ``"612 / 618"``."""
    return " / ".join(f"{fl / t * 1e-9:.0f}" for t in ts)


def timing_rows(cell, times, errs, fl, base, vs_key, err_key, keep_failed=False):
    """One row per subject of a timed cell: ``cell``'s fields, then the best round's ms and
    TFLOP/s (``fl`` flops), the speed relative to subject ``base`` (under ``vs_key``), every
    round's TFLOP/s and the untimed run's error (under ``err_key``). A subject never timed
    gets a ``failed`` row with ``keep_failed``, none otherwise."""
    bt = times[base]
    base_ms = min(bt) if bt else float("nan")
    rows = []
    for name, ts in times.items():
        row = dict(cell, kernel=name)
        if not ts:
            if keep_failed:
                row.update({"tflops": 0.0, vs_key: 0.0, "rounds": "failed", err_key: errs.get(name)})
                rows.append(row)
            continue
        ms = min(ts)
        row.update({"ms": ms, "tflops": fl / ms * 1e-9, vs_key: base_ms / ms, "rounds": rounds_text(fl, ts),
                    err_key: errs[name]})
        rows.append(row)
    return rows


def device_line() -> str:
    import torch
    import triton
    p = torch.cuda.get_device_properties(0)
    return (f"{p.name}, {p.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def machine() -> str:
    """What ran the suite: the GPU (name, SMs) when there is one, else the CPU (model, cores)."""
    import os
    import platform
    try:
        import torch
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            return f"{p.name}, {p.multi_processor_count} SMs"
    except ImportError:
        pass
    model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, no GPU"


def run_record(**fields) -> dict:
    """The head of a suite's result: UTC date, device (the machine, torch, triton), the command line, then ``fields``.

    >>> sorted(run_record(x=1))
    ['command', 'date', 'device', 'x']
    """
    import datetime
    versions = []
    for name in ("torch", "triton"):
        try:
            versions.append(f"{name} {importlib.import_module(name).__version__}")
        except ImportError:
            pass
    return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                device=", ".join([machine()] + versions), command=" ".join(["python3"] + sys.argv), **fields)


def median(xs):
    return statistics.median(xs) if xs else float("nan")


class Clocks:
    """nvidia-smi sampling the SM clock and board power every ``interval_ms`` in the background; ``between(t0, t1)``
    gives the medians (MHz, W) of the samples taken in that window (``time.time()`` seconds)."""

    def __init__(self, interval_ms: int = 50):
        import subprocess
        import threading
        self.samples = []
        self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                                      "-lms", str(int(interval_ms))], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                mhz, w = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), mhz, w))

    def between(self, t0, t1):
        xs = [x for x in self.samples if t0 <= x[0] <= t1]
        return (statistics.median(x[1] for x in xs), statistics.median(x[2] for x in xs)) if xs else (None, None)

    def stop(self):
        self.proc.terminate()


def spearman(xs, ys) -> float:
    """Spearman's rank correlation of two equal-length sequences (ties get their mean rank); NaN without spread.

    >>> spearman([1, 2, 3], [10, 30, 20])
    0.5
    """
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else float("nan")
