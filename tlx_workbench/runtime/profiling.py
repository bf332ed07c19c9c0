"""``profile``: a measured per-warp-group timeline of one launch, as a :class:`Trace`.

The kernel is rewritten by :mod:`.instrument` to read the SM cycle counter around
each TLX operation (Proton's scopes do not compile inside warp-specialized TLX
kernels with triton 3.8 + triton-utlx: ``benchmarks/proton_repro/``); the launches
run in the watchdog worker:

1. a *counting* launch (every CTA, nothing recorded): each warp group's event count,
   SM, start and end;
2. the *recording* launch: the selected CTAs (``ctas=``: first N, the last ids, the last to
   start, by SM, ids), buffers sized from the counts, so every event is kept;
3. the same launch plain and instrumented, timed (:func:`.timing.time_call`, do_bench's median): the
   instrumentation's own cost, in ``trace.meta["overhead"]`` and the Trace's repr.

The kernel runs several times: a kernel that accumulates into its outputs (atomics,
``+=`` on global memory) leaves them changed.
A Chrome trace that Proton wrote for a plain kernel imports with :func:`load_proton_trace`.

>>> tr = profile(gemm_kernel, a_d, b_d, c_d, M, N, K, grid=(132,), ctas={"first": 2, "last": 2}, **cfg)   # doctest: +SKIP
>>> tr.meta["overhead"]["ratio"]                                                     # doctest: +SKIP
1.04
"""
from __future__ import annotations

import inspect

from ..errors import GPUError
from .launch import dispatch, install_launch_hook, is_kernel, launch_name, require_gpu
from .timing import time_call
from .watchdog import DEFAULT_COMPILE_TIMEOUT, DEFAULT_TIMEOUT, report_phase


def _kernels_named_by(fn) -> list[tuple[str, object]]:
    """(name, kernel) of each kernel ``fn`` launches by name: named in its code, or in the code of a function it
    holds in its closure (a library launcher built around its module's launch function), two levels deep."""
    return [(name, k) for name, k, _ in _kernel_sites(fn)]


def _kernel_sites(fn, depth: int = 2) -> list[tuple[str, object, dict]]:
    """(name, kernel, the globals the name is looked up in when ``fn`` runs) of each kernel ``fn`` launches."""
    from .transport import _underlying_function
    out: list = []
    seen: set = set()

    def walk(f, d):
        code = getattr(f, "__code__", None)
        if code is None or id(f) in seen:
            return
        seen.add(id(f))
        g = getattr(f, "__globals__", {})
        for name in code.co_names:
            v = g.get(name)
            if v is not None and is_kernel(v) and not any(n == name and gg is g for n, _, gg in out):
                out.append((name, v, g))
        if d > 0:
            for cell in getattr(f, "__closure__", None) or ():
                try:
                    inner = cell.cell_contents
                except ValueError:
                    continue
                if inspect.isfunction(inner):
                    walk(inner, d - 1)
    walk(_underlying_function(fn) or fn, depth)
    return out


def _grid_ctas(kernel, grid, args, kwargs) -> int:
    """How many CTAs ``kernel[grid](*args, **kwargs)`` launches (``grid`` a tuple or a META callable)."""
    if callable(grid):
        meta = dict(zip(getattr(kernel, "arg_names", ()), args))
        meta.update(kwargs)
        grid = grid(meta)
    dims = (tuple(grid) + (1, 1, 1))[:3]
    return int(dims[0]) * int(dims[1]) * int(dims[2])


class _Substitute:
    """Stands in for a kernel inside a host function: launches the instrumented copy instead,
    with the record buffer ``make(grid CTAs)`` gives."""

    def __init__(self, inst, target, make):
        self.inst, self.target, self.make = inst, target, make

    def __getitem__(self, grid):
        launcher = self.inst.kernel[grid]

        def launch(*a, **k):
            if self.make is None:           # Proton's copy: no record buffer
                return launcher(*a, **k)
            return launcher(self.make(_grid_ctas(self.target, grid, a, k)), *a, **k)
        return launch


def _target_kernel(fn, kernel_name):
    if is_kernel(fn):
        return fn, None
    cands = _kernel_sites(fn)
    if kernel_name:
        cands = [c for c in cands if c[0] == kernel_name]
    if len(cands) != 1:
        raise GPUError(f"{launch_name(fn)} launches {len(cands)} kernels that profile could time "
                       f"({', '.join(n for n, _, _ in cands) or 'none found'})",
                       hint="pass kernel='name' of the one to time, or profile the kernel itself with grid=")
    name, target, _ = cands[0]
    return target, name


def _launch(fn, inst, target, make, grid, args, kwargs, kernel_name):
    """Launch ``fn`` once with the instrumented copy standing in for its kernel (``inst`` None: the
    plain kernel; ``make``: the record buffer for a launch of so many CTAs)."""
    from .transport import _underlying_function
    if is_kernel(fn):
        if grid is None:
            raise GPUError("profile of a kernel needs grid=", hint="pass grid=(n,) as for a launch")
        if inst is None:
            fn[grid](*args, **kwargs)
        else:
            _Substitute(inst, target, make)[grid](*args, **kwargs)
        return
    if inst is None:
        fn(*args, **kwargs)
        return
    # the name is swapped where the function that launches it looks it up; a library launcher's bound launch
    # (kernels/host.py) would skip the stand-in, so the call goes through the kernel's dispatch
    from .triton_launch import through_dispatch
    g = next((gg for n, _, gg in _kernel_sites(fn) if n == kernel_name), None)
    if g is None:
        g = _underlying_function(fn).__globals__
    saved = g[kernel_name]
    g[kernel_name] = _Substitute(inst, target, make)
    try:
        with through_dispatch():
            fn(*args, **kwargs)
    finally:
        g[kernel_name] = saved


def _time_ms(f, name: str) -> float:
    """do_bench's median of ``f`` through the timing runner, in a short window (10 ms warm-up, 60 ms measured)."""
    report_phase("run")
    return time_call(f, name=name, warmup=10, rep=60).median_ms


def profile_job(spec, args, kwargs, grid, capacity, max_ctas, kernel_name=None, method="clock", ctas=None,
                circular=False, overhead=True, ops=None, totals=False):
    """Worker job: instrument; count, record, time plain vs instrumented; the raw records (clock),
    or Proton's Chrome trace."""
    import torch

    from .instrument import counts_of, instrument, select_ctas, sizes_from_counts
    from .transport import resolve
    install_launch_hook()
    report_phase("compile")
    fn = resolve(spec)
    target, kernel_name = _target_kernel(fn, kernel_name)
    if hasattr(target, "configs") and not hasattr(target, "arg_names"):
        raise GPUError(f"{launch_name(target)} is autotuned; profile times one config",
                       hint="profile the @triton.jit kernel under the autotuner (kernel.fn) with the config's "
                            "constexprs as keyword arguments")
    if method == "proton":
        return _proton_job(fn, target, kernel_name, grid, args, kwargs)
    if totals and circular:
        raise GPUError("totals=True keeps no events to circle over", hint="pass circular=False with totals=True")
    inst = instrument(target, ops=ops, totals=totals)
    made = {}

    def counting(g):
        made["grid"] = g
        made["buf"] = inst.buffer("cuda", grid=g, ctas=range(g), capacity=0)
        return made["buf"]

    _launch(fn, inst, target, counting, grid, args, kwargs, kernel_name)
    torch.cuda.synchronize()
    report_phase("run")
    if "buf" not in made:
        raise GPUError(f"{launch_name(fn)} did not launch {launch_name(target)}",
                       hint="profile a host function that launches the kernel, or the kernel with grid=")
    g = made["grid"]
    counts = counts_of(made["buf"].cpu().numpy())
    chosen = select_ctas(max_ctas if ctas is None else ctas, g, counts)
    if not chosen:
        raise GPUError(f"the CTA selection {ctas!r} names no CTA of the grid of {g}",
                       hint="pass ctas=N (the first N), {'first': N, 'last': M, 'sms': [...]} or a list of ids")
    needed = sizes_from_counts(counts, chosen)
    # room for the busiest warp group of the whole launch, and an eighth more: a kernel that hands out
    # work at run time (atomics, CLC) may give the chosen CTAs more events in the next launch
    roomy = sizes_from_counts(counts, counts)
    cap = roomy + roomy // 8 + 8 if capacity is None else int(capacity)
    if totals:
        cap = len(inst.sites)           # one (count, sum, max) triple per op site, whatever the events
    if circular and capacity is None:
        raise GPUError("a circular buffer needs capacity= (the events kept per warp group)",
                       hint=f"pass capacity=N; every event of these CTAs fits in capacity={needed}")
    record = inst.buffer("cuda", grid=g, ctas=chosen, capacity=cap, circular=circular)
    _launch(fn, inst, target, lambda _g: record, grid, args, kwargs, kernel_name)
    torch.cuda.synchronize()
    buf = record.cpu().numpy()
    report_phase("run")
    timing = None
    if overhead:
        # the plain kernel's first launch compiles it: under the compile deadline, not the launch's
        report_phase("compile")
        _launch(fn, None, target, None, grid, args, kwargs, kernel_name)
        torch.cuda.synchronize()
        plain = _time_ms(lambda: _launch(fn, None, target, None, grid, args, kwargs, kernel_name), "plain")
        instr = _time_ms(lambda: _launch(fn, inst, target, lambda _g: record, grid, args, kwargs, kernel_name),
                         "instrumented")
        count_only = inst.buffer("cuda", grid=g, ctas=range(g), capacity=0)
        counting_ms = _time_ms(lambda: _launch(fn, inst, target, lambda _g: count_only, grid, args, kwargs,
                                               kernel_name), "counting")
        timing = {"plain_ns": plain * 1e6, "instrumented_ns": instr * 1e6, "counting_ns": counting_ms * 1e6,
                  "ratio": instr / plain if plain else None, "method": "triton.testing.do_bench median"}
    all_ctas = [{"cta": p, "sm": c["smid"], "start": c["gt0"], "end": c["gt1"], "events": c["events"]}
                for p, c in sorted(counts.items())]
    return dict(buf=buf, sites=inst.sites, tasks=inst.tasks, file=inst.file, name=launch_name(target),
                device=torch.cuda.get_device_name(), method="clock", grid_ctas=g, ctas=chosen,
                capacity_needed=needed, overhead=timing, counting=all_ctas, totals=bool(totals),
                ops=sorted({s.op for s in inst.sites}))


def _proton_job(fn, target, kernel_name, grid, args, kwargs):
    import glob
    import json
    import os
    import tempfile

    import torch
    import triton.profiler as proton
    import triton.profiler.language as pl

    from .instrument import instrument
    inst = instrument(target, mode="proton")
    base = os.path.join(tempfile.mkdtemp(prefix="tlxwb_proton_"), "trace")
    pl.enable_semantic("triton")
    proton.start(base, data="trace", backend="instrumentation")
    try:
        _launch(fn, inst, target, None, grid, args, kwargs, kernel_name)
        report_phase("run")
        torch.cuda.synchronize()
    finally:
        proton.finalize()
    files = sorted(glob.glob(base + "*"))
    if not files:
        raise GPUError("Proton wrote no trace", hint="use method='clock'")
    with open(files[0]) as f:
        chrome = json.load(f)
    return dict(chrome=chrome, sites=inst.sites, tasks=inst.tasks, file=inst.file, name=launch_name(target),
                device=torch.cuda.get_device_name(), method="proton")


def _source_uses_async_tasks(fn, kernel_name) -> bool:
    import inspect

    from .transport import _underlying_function
    try:
        target = fn if is_kernel(fn) else dict(_kernels_named_by(fn)).get(kernel_name) if kernel_name else \
            (_kernels_named_by(fn)[0][1] if len(_kernels_named_by(fn)) == 1 else None)
        return target is not None and "async_tasks" in inspect.getsource(_underlying_function(target))
    except (OSError, TypeError):
        return False


def profile(fn, *args, grid=None, kernel: str | None = None, method: str = "auto", ctas=None,
            capacity: int | None = None, circular: bool = False, max_ctas: int = 4, overhead: bool = True,
            timeout: float = DEFAULT_TIMEOUT, compile_timeout: float = DEFAULT_COMPILE_TIMEOUT,
            isolate: bool = True, source: str | None = None, ops=None, totals: bool = False, **kwargs):
    """Launch with per-op timing records; the measured :class:`Trace` (source "gpu", in ns).

    ``fn`` is a ``@triton.jit`` TLX kernel (with ``grid=``) or a host function that
    launches one (name it with ``kernel=`` when it launches several). ``method``:
    ``"proton"`` (Proton instrumentation scopes around each TLX op), ``"clock"``
    (cycle-counter records of the CTAs ``ctas`` selects: an int N (the first N, default
    ``max_ctas``), ``"all"``, a list of CTA ids, or ``{"first": N, "last": M, "last_wave": K, "sms": [...]}``: the
    last M ids, the K that started last in the counting launch, those that ran on those SMs there),
    or ``"auto"``: Proton where it compiles, else clock (warp-specialized kernels go straight
    to clock). ``trace.meta["recorder"]`` says which one ran.

    Clock records keep every event of the selected CTAs (a counting launch sizes the buffers),
    unless ``capacity=`` caps the events per warp group: then the late ones are dropped, or
    with ``circular=True`` the early ones; ``trace.meta["events"]`` says how many. With
    ``overhead=True`` the plain and the instrumented launch are timed: ``trace.meta["overhead"]``.
    ``ops="waits"`` times the waits only (``instrument``'s ``ops``); ``totals=True`` keeps per-site totals,
    not events: the Trace has no spans, ``meta["totals"]`` holds them (``trace_compare`` reads either).

    >>> tr = profile(gemm_ws.launch, a, b, c, cfg, kernel="gemm_ws_coop_kernel", ctas={"first": 2, "last": 2})  # doctest: +SKIP
    >>> tr.summary()[0].busy_share          # doctest: +SKIP
    """
    from .watchdog import KernelTimeoutError
    name = launch_name(fn)
    require_gpu(f"tlx_workbench.profile({name})")
    from .transport import callable_spec
    spec = callable_spec(fn, source=source, name=name if source else None) if isolate else ("pickle", fn)
    notes = {}
    first = method
    if (ops is not None or totals) and method == "proton":
        raise GPUError("ops= and totals= are the clock recorder's", hint="pass method='clock' (or 'auto')")
    if method == "auto" and (ops is not None or totals):
        first = "clock"
    elif method == "auto":
        if _source_uses_async_tasks(fn, kernel):
            first = "clock"
            notes["proton"] = "skipped: Proton scopes do not compile inside warp-specialized TLX kernels"
        else:
            first = "proton"
    payload = dict(spec=spec, args=tuple(args), kwargs=kwargs, grid=grid, capacity=capacity, max_ctas=max_ctas,
                   kernel_name=kernel, ctas=ctas, circular=circular, overhead=overhead, ops=ops, totals=totals)
    try:
        r = dispatch(profile_job, dict(payload, method=first), isolate=isolate, timeout=timeout,
                     compile_timeout=compile_timeout, what=f"profiling {name}")
    except KernelTimeoutError:
        raise
    except Exception as e:
        if method != "auto" or first != "proton":
            raise
        notes["proton_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        if first == "proton" and isolate:
            # Proton's session and semantic switches are process-wide: later compiles in the
            # same worker must not be instrumented, so the next job gets a fresh worker
            from .watchdog import shutdown
            shutdown()
    if "proton_error" in notes:
        r = dispatch(profile_job, dict(payload, method="clock"), isolate=isolate, timeout=timeout,
                     compile_timeout=compile_timeout, what=f"profiling {name}")
    meta = {"kernel": r["name"], "device": r["device"], **notes}
    if r["method"] == "proton":
        return _trace_from_proton(r, meta)
    return trace_from_records(r, meta)


def trace_from_records(r: dict, meta: dict | None = None):
    """The Trace of a clock-recorder job's result ``r`` (the buffer, sites, tasks, selection, timings)."""
    from .instrument import decode
    meta = dict(meta or {}, grid_ctas=r["grid_ctas"], selected_ctas=list(r["ctas"]),
                capacity_needed=r["capacity_needed"])
    if r.get("overhead"):
        meta["overhead"] = r["overhead"]
    if r.get("ops"):
        meta["timed_ops"] = list(r["ops"])
    if r.get("totals"):
        return _trace_of_totals(r, meta)
    tr = decode(r["buf"], r["sites"], r["tasks"], file=r["file"], meta=meta)
    counting = [c for c in r.get("counting") or [] if c["start"] > 0 and c["end"] > c["start"]]
    if counting:
        # every CTA of the counting launch (clock reads, no records): where and when it ran, for waves and tails
        t0 = min(c["start"] for c in counting)
        tr.meta["kernel_extent_ns"] = max(c["end"] for c in counting) - t0
        tr.meta["counting_launch_ctas"] = [{"cta": c["cta"], "sm": c["sm"], "start_ns": c["start"] - t0,
                                            "end_ns": c["end"] - t0} for c in counting]
    return tr


def _trace_of_totals(r: dict, meta: dict):
    """A Trace without spans whose ``meta["totals"]`` holds each recorded lane's per-site totals (cycles)
    and life (:func:`.instrument.decode_totals`); ``trace_compare`` reads shares from it."""
    from ..trace import Trace
    from .instrument import decode_totals
    tot = decode_totals(r["buf"], r["sites"], r["tasks"])
    tr = Trace(time_unit="cycles", source="gpu", meta=dict(meta, recorder="clock64 totals", totals=tot["ctas"]))
    tr.meta["ctas"] = [{"cta": c["cta"], "sm": c["sm"], "clock_ghz": c["clock_ghz"]} for c in tot["ctas"]]
    clocks = sorted(c["clock_ghz"] for c in tot["ctas"] if c["clock_ghz"])
    if clocks:
        tr.meta["sm_clock_ghz"] = round(clocks[len(clocks) // 2], 4)
    return tr


def _trace_from_proton(r, meta):
    """Proton's Chrome trace -> Trace; scope names map back to the op sites (kind, source line)."""
    from ..trace import Trace
    from ..compiler.instrument_rewrite import proton_scope_name
    tr = Trace.from_chrome(r["chrome"], tasks=r.get("task_layout"))
    by_scope = {proton_scope_name(s): s for s in r["sites"]}
    for span in tr.spans:
        site = by_scope.get(span.name)
        if site is not None:
            span.kind, span.line, span.file, span.barrier = site.kind, site.line, r["file"], site.barrier
            span.name = site.op
    tr.source = "gpu"
    tr.meta.update(meta, recorder="proton")
    return tr


def load_proton_trace(path: str, *, clock_ghz: float | None = None, tasks=None):
    """A Chrome trace written by Proton's instrumentation mode, as a :class:`Trace` in ns at the real
    SM clock, warps grouped into async tasks by ``tasks`` (see :meth:`Trace.from_chrome`)."""
    from ..trace import Trace
    return Trace.from_chrome(path, clock_ghz=clock_ghz, tasks=tasks)


def timeline_png(trace, path: str | None = None, *, cta: int = 0, title: str | None = None) -> bytes:
    """A static PNG (matplotlib) of one CTA's lanes of ``trace``: one row per warp group, spans coloured by kind.

    For reports and files (benchmarks/, READMEs); the live view is ``widgets.TimelineWidget``.
    """
    import io

    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    colours = {"compute": "#95a5a6", "mma": "#2980b9", "tma": "#27ae60", "load": "#16a085", "store": "#8e44ad",
               "wait": "#e74c3c", "arrive": "#f39c12", "sync": "#d35400", "other": "#bdc3c7"}
    lanes = [l for l in trace.lanes() if l[0] == cta]
    fig, ax = plt.subplots(figsize=(11, 0.6 + 0.45 * max(1, len(lanes))), dpi=110)
    for row, lane in enumerate(lanes):
        by_kind: dict = {}
        for s in trace.spans_of(cta=lane[0], task=lane[1], replica=lane[2]):
            by_kind.setdefault(s.kind, []).append((s.start, max(s.duration, 1.0)))
        for kind, bars in by_kind.items():
            ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colours.get(kind, "#7f8c8d"), label=kind)
    ax.set_yticks(range(len(lanes)), [f"{t}[{r}]" for _, t, r in lanes])
    ax.invert_yaxis()
    ax.set_xlabel(f"{trace.time_unit} " + ("(%globaltimer: one axis for every CTA)" if trace.time_unit == "ns"
                                           else "(from the CTA's start)"))
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), loc="upper right", fontsize=7, ncol=len(uniq))
    ax.set_title(title or f"{trace.meta.get('kernel', 'kernel')}: CTA {cta}, measured ({trace.source})")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    data = buf.getvalue()
    if path:
        with open(path, "wb") as f:
            f.write(data)
    return data
