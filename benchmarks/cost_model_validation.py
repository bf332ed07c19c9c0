"""The cost model against measured H200 kernel times, on a split fixed before anything was fitted.

    .venv/bin/python benchmarks/cost_model_validation.py                       # every cell, ~10-20 min here
    .venv/bin/python benchmarks/cost_model_validation.py --only tut: fp8       # cells whose key holds a substring
    .venv/bin/python benchmarks/cost_model_validation.py --reuse OUT.json      # re-time stored simulations
    .venv/bin/python benchmarks/cost_model_validation.py --measured FILE.json  # another run of the predict cells
    .venv/bin/python benchmarks/cost_model_validation.py --measured FILE.json --unmeasured   # predict what it lacks
    source .gpu/env.sh && python3 benchmarks/cost_model_validation.py --gpu    # on the GPU: measure the cells

Writes ``--out`` (default ``$OUT`` or ``/tmp``) ``cost_model_validation.{json,md}`` and prints the table.

**The split.** The model's figures come from the calibration file (``tlx_workbench/calibration/H200.json``):
microbenchmarks, plus kernels run back to back for seconds (its ``sustained_kernels``: cuBLAS, sdpa and the
library's ``gemm_ws`` and ``attention``), from which the clock model takes a kernel's power per unit of tensor
work and the tensor core's sustained rate. So the cells of those two library kernels are the *calibration* half
(nothing is fitted on their times, but their kernels were seen); every other cell is the *validation* half:
TLX's tutorial kernels (``hopper_gemm_ws``, ``hopper_gemm_pipelined``, ``hopper_fa_ws``), the library's
``gemm_pingpong`` and ``gemm_pipelined``, the library's attention backward (a call of several launches, predicted launch by launch) and
the FP8 GEMM's configs. The rule is :func:`half`, fixed here.

**Cells.** The predict cells (``benchmarks/predict_cells.py``) measured on the GPU by ``--gpu`` (do_bench median of
three interleaved rounds, L2 flushed; nvidia-smi's SM clock in each window; the 2026-12-02 figures by the script
that ``--gpu`` replaced, deleted after 7f4523c); the FP8 GEMM's
14 configs at 4096^3 per-tensor scaling (``--fp8-sizes 4096 8192``: and 8192^3; ``benchmarks/gemm_fp8_h200.py``;
the configs as that run timed them), also ranked per size (Spearman). Each cell is simulated once (``wb.predict``: every CTA, timing only, occupancy and
spills from the offline compile); its simulated facts are kept in the output so ``--reuse`` re-times them under
a changed clock model without simulating again.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import sys
import time
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _harness import Clocks, bench_ms, spearman  # noqa: E402

MEASURED = HERE / "results" / "predict_measured_h200_2026-12-02.json"
FP8 = HERE / "results" / "fp8_gemm_h200_2026-12-02.json"
BACKWARD = HERE / "results" / "attention_bwd_vs_sdpa_h200_2026-12-04.json"
#: kernels whose sustained runs set figures of the clock model (calibration ``sustained_kernels``)
CALIBRATION_KERNELS = ("gemm_ws", "attention")
#: cells predicted from k CTAs along the grid's x rather than every CTA (``wb.predict(samples=k)``; within 0.2 % of
#: every CTA on GEMMs and attention): the backward's every-CTA simulation takes ~4 min at 4096 on two cores
SAMPLES = {"attention_bwd": 8}
#: the GPU model whose calibration predicts (set by main from the measured run's device, or --gpu-model)
GPU = "H200"


def gpu_of(measured) -> str:
    """The GPU model a measured run (its JSON's path, or :func:`load_measured`'s) was taken on ("H100", "H200"),
    from its ``device`` line.

    >>> import json, tempfile
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    >>> _ = f.write(json.dumps(dict(device="NVIDIA H100 80GB HBM3, 132 SMs", rows=[]))); f.close()
    >>> gpu_of(f.name)
    'H100'
    """
    from tlx_workbench.target import GPU_MODELS
    data = measured if isinstance(measured, dict) else json.loads(pathlib.Path(measured).read_text())
    device = data.get("device", "")
    return next((name for name in GPU_MODELS if name in device), "H200")


def half(cell: dict) -> str:
    """"calibration" or "validation": the split, by kernel (see the module doc)."""
    return "calibration" if cell["kernel"] in CALIBRATION_KERNELS else "validation"


def key(cell: dict) -> str:
    return json.dumps(cell, sort_keys=True)


def flops(cell: dict) -> float:
    """A cell's flops: the predict cells' (``predict_cells.flops``, the kernels' specs), an FP8 GEMM's 2MNK."""
    if cell["kind"] == "fp8":
        M, N, K = cell["shape"]
        return 2.0 * M * N * K
    from predict_cells import flops as cell_flops
    return cell_flops(cell)


# ------------------------------------------------------------------------------------------------ cells
#: do_bench times the host rather than the kernel where its window over the graph replay is this many times the
#: empty launch's: the launch's host path outlasts the L2 flush queued before each run (an H100 measured 10-12x for
#: Python-dispatched 1024^3 GEMMs, 1.2-1.4x for planned launches and cuBLAS; ``launch_window.py``)
HOST_BOUND_WINDOW = 3.0
#: ... and its do_bench time is this many times its graph replay: a launch long beside its host path keeps its GPU
#: time under do_bench whatever the two timers' windows differ by (an H100's gemm_ws 4096^3: do_bench 202 us, graph
#: replay 185, 50 launches back to back at another clock)
HOST_BOUND_RATIO = 1.5


def host_bound(row: dict, empty: dict | None) -> bool:
    """Whether a ``--gpu`` row's do_bench time is its host's: judged on its graph replay instead.

    >>> host_bound(dict(us=46.6, graph_us=8.4), dict(do_bench_us=4.6, graph_us=1.3))
    True
    >>> host_bound(dict(us=13.0, graph_us=8.4), dict(do_bench_us=4.6, graph_us=1.3))
    False
    >>> host_bound(dict(us=201.9, graph_us=184.5), dict(do_bench_us=4.4, graph_us=1.2))
    False
    """
    if not empty or not row.get("graph_us"):
        return False
    return (row["us"] - row["graph_us"] > HOST_BOUND_WINDOW * (empty["do_bench_us"] - empty["graph_us"])
            and row["us"] > HOST_BOUND_RATIO * row["graph_us"])


def load_measured(paths) -> dict:
    """One ``--gpu`` run's JSON, or several merged: each cell's do_bench and graph time the median over the machine
    starts that timed it, a start's own time the median over its runs; its rounds pooled; the empty launch likewise.
    An item of ``paths`` is one start: a file, or several runs on one warm machine (a list, or on the command line
    their paths joined by commas), so three runs on one start weigh as much as one run on another.

    >>> import json, tempfile
    >>> def run(us):
    ...     f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    ...     _ = f.write(json.dumps(dict(device="NVIDIA H100", date=str(us), empty_launch=dict(do_bench_us=4, graph_us=1),
    ...                                 rows=[dict(cell=dict(kind="gemm"), us=us, graph_us=us - 2, rounds=[{}])])))
    ...     f.close(); return f.name
    >>> m = load_measured([run(10.0), run(12.0), run(11.0)])
    >>> m["rows"][0]["us"], m["rows"][0]["graph_us"], len(m["rows"][0]["rounds"]), m["runs"], m["starts"]
    (11.0, 9.0, 3, 3, 3)
    >>> m = load_measured([",".join([run(10.0), run(10.2), run(10.4)]), run(12.0), run(12.2)])
    >>> m["rows"][0]["us"], m["rows"][0]["starts"], m["runs"], m["starts"]
    (12.0, 3, 5, 3)
    """
    items = [paths] if isinstance(paths, (str, pathlib.Path)) else list(paths)
    starts = [[pathlib.Path(f) for f in (item.split(",") if isinstance(item, str) else
                                         [item] if isinstance(item, pathlib.Path) else item)] for item in items]
    files = [f for group in starts for f in group]
    runs = [[json.loads(f.read_text()) for f in group] for group in starts]
    if len(files) == 1:
        return dict(runs[0][0], runs=1, starts=1, files=[files[0].name])

    def med(xs):
        xs = [x for x in xs if x]
        return statistics.median(xs) if xs else None

    def per_start(field, rows_of_start):
        return med(r.get(field) for r in rows_of_start)
    by_key: dict = {}
    for s, group in enumerate(runs):
        for run in group:
            for r in run["rows"]:
                by_key.setdefault(key(r["cell"]), {}).setdefault(s, []).append(r)
    rows = []
    for by_start in by_key.values():
        rs = [r for group in by_start.values() for r in group]
        rows.append(dict(cell=rs[0]["cell"], us=med(per_start("us", g) for g in by_start.values()),
                         graph_us=med(per_start("graph_us", g) for g in by_start.values()),
                         rounds=[x for r in rs for x in r.get("rounds", [])], runs=len(rs), starts=len(by_start)))
    empty = [[run.get("empty_launch") or {} for run in group] for group in runs]
    return dict(device=runs[0][0]["device"], date=" / ".join(run["date"] for group in runs for run in group),
                runs=len(files), starts=len(starts),
                empty_launch={f: med(per_start(f, g) for g in empty) for f in ("do_bench_us", "graph_us")},
                files=[f.name for f in files], rows=rows)


def _runs_said(data) -> str:
    """How many runs and machine starts a merged measurement is the median of (nothing for one run)."""
    runs, starts = data.get("runs", 1), data.get("starts", data.get("runs", 1))
    if runs <= 1:
        return ""
    return f", median of {runs} runs" if starts == runs else f", median over {starts} machine starts ({runs} runs)"


def predict_cells(measured, timer="do_bench", kinds=("gemm", "attention", "attention_bwd")) -> list[dict]:
    """The measured predict cells of a ``--gpu`` run (its JSON's path or paths, or :func:`load_measured`'s);
    ``timer="graph"``: its CUDA-graph times. Under do_bench a
    cell whose time is its host's (:func:`host_bound`) is taken at its graph replay, with the empty launch's graph
    time as the launch cost (``launch_us``), and says so (``timer``)."""
    data = measured if isinstance(measured, dict) else load_measured(measured)
    empty = data.get("empty_launch")
    out = []
    for r in data["rows"]:
        if r["cell"]["kind"] not in kinds:
            continue
        host = timer == "do_bench" and host_bound(r, empty)
        use = "graph" if host else timer
        us = r.get("graph_us") if use == "graph" else r["us"]
        if not us:
            continue
        out.append(dict(cell=r["cell"], measured_us=us, timer="graph (do_bench timed the host)" if host else timer,
                        measured_mhz=[x.get("sm_mhz") for x in r.get("rounds", [])],
                        source=f"{', '.join(data['files'])} "
                               f"({data.get('date')}, {use}{_runs_said(data)})",
                        **(dict(launch_us=empty["graph_us"]) if host else {})))
    return out


def cells_fp8_measured(measured, timer="do_bench") -> list[dict]:
    """The FP8 cells of a ``--gpu`` run (none in the 2026-12-02 file)."""
    return predict_cells(measured, timer, kinds=("fp8",))


def backward_cells(path=BACKWARD) -> list[dict]:
    """The library's attention backward as ``benchmarks/attention_bwd_variants_h200.py`` timed its default config on
    the H200 (4x32x4096 and 2x32x8192, D=128, causal and not; do_bench of the whole call, the median over three
    runs of each run's median over rounds), with the config as timed."""
    data = json.loads(pathlib.Path(path).read_text())
    by_cell: dict = {}
    for t in data["time"]:
        if t["kernel"] == "default" and t.get("ms") and not t.get("error"):
            by_cell.setdefault((tuple(t["shape"]), bool(t["causal"])), []).append(t)
    out = []
    for (shape, causal), ts in sorted(by_cell.items()):
        out.append(dict(cell=dict(kind="attention_bwd", kernel="attention_bwd", config="default", shape=list(shape),
                                  causal=causal, cfg=ts[0]["cfg"]),
                        measured_us=statistics.median(t["ms"] for t in ts) * 1e3, measured_mhz=[], timer="do_bench",
                        source=f"{pathlib.Path(path).name} ({data['date']}, median of {len(ts)} runs)"))
    return out


def fp8_cells(path=FP8, sizes=(4096,)) -> list[dict]:
    """The FP8 GEMM's configs timed per-tensor at ``sizes`` (cubes) by benchmarks/gemm_fp8_h200.py."""
    data = json.loads(pathlib.Path(path).read_text())
    configs = data["meta"]["configs"]
    out = []
    for t in data["time"]:
        kw = t["kwargs"]
        if kw["rowwise"] or list(kw["shape"]) not in [[n, n, n] for n in sizes]:
            continue
        for ci in kw["configs"]:
            sub = t["rows"]["subjects"].get(f"cfg{ci}")
            if sub:
                out.append(dict(cell=dict(kind="fp8", kernel="gemm_fp8", config=f"cfg{ci}", shape=list(kw["shape"]),
                                          cfg=configs[ci]),
                                measured_us=sub["ms"] * 1e3, measured_mhz=[],
                                source=f"{pathlib.Path(path).name} ({data['meta']['date']})"))
    return out


def make_launch(cell: dict):
    """A no-argument launch of ``cell`` on fresh random CPU inputs, for wb.predict."""
    if cell["kind"] == "fp8":
        from tlx_workbench.kernels import gemm_fp8
        a, b, sa, sb = gemm_fp8.make_inputs(tuple(cell["shape"]), "float8_e4m3fn", "cpu")
        import torch
        c = torch.empty(cell["shape"][0], cell["shape"][1], dtype=torch.bfloat16)
        bt = gemm_fp8.k_major_b(b)
        return lambda: gemm_fp8.launch(a, bt, c, sa, sb, dict(cell["cfg"]))
    from predict_cells import make_call
    return make_call(cell, "cpu")[0]


# ------------------------------------------------------------------------------------------------ GPU side
def _graph_us(fn):
    """One launch's time replayed from a CUDA graph, L2 flushed before each as do_bench does, without the host's
    launch path: the timing runner's flushed replay (50 launches a graph, the flushes' own time taken off, median
    of 5 replays)."""
    from tlx_workbench.runtime.timing import graph_ms
    return graph_ms(fn, per_graph=50, replays=5, flush=True) * 1e3


def measure(out_dir, rounds=3):
    """Time every predict cell and the FP8 configs on this GPU: do_bench (warmup 30 ms, rep 120 ms, median,
    L2 flushed; ``rounds`` interleaved rounds) with nvidia-smi's SM clock in each window, and once replayed from
    a CUDA graph (flushed, no host launch path). Writes ``cost_model_measured.json``."""
    import socket
    import traceback
    import torch
    import triton
    from predict_cells import CELLS, make_call
    from tlx_workbench.kernels._common import torch_alloc
    triton.set_allocator(torch_alloc)
    torch.manual_seed(0)
    subjects, errors = [], []
    fp8 = [c["cell"] for c in fp8_cells()]
    for cell in list(CELLS) + fp8:
        try:
            if cell["kind"] == "fp8":
                from tlx_workbench.kernels import gemm_fp8
                a, b, sa, sb = gemm_fp8.make_inputs(tuple(cell["shape"]), "float8_e4m3fn", "cuda")
                c = torch.empty(cell["shape"][0], cell["shape"][1], dtype=torch.bfloat16, device="cuda")
                fn = gemm_fp8.launcher(a, gemm_fp8.k_major_b(b), c, sa, sb, dict(cell["cfg"]))
            else:
                fn = make_call(cell, "cuda")[0]
            fn()
            torch.cuda.synchronize()
            subjects.append((cell, fn))
        except Exception as e:  # noqa: BLE001 - one failing cell must not cost the others
            errors.append(dict(cell=cell, error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-800:]))
            print("FAILED", label(cell), e, flush=True)
    clocks = Clocks(interval_ms=20)
    times = {key(c): [] for c, _ in subjects}
    t_start = time.time()
    for r in range(rounds):
        for cell, fn in subjects:
            t0 = time.time()
            ms = bench_ms(fn, warmup=30, rep=120)
            mhz, watts = clocks.between(t0, time.time())
            times[key(cell)].append(dict(ms=ms, sm_mhz=mhz, watts=watts))
        print(f"round {r} done at {time.time() - t_start:.0f} s", flush=True)
    graph = {}
    for cell, fn in subjects:
        try:
            t0 = time.time()
            graph[key(cell)] = _graph_us(fn)
            graph[key(cell) + "mhz"] = clocks.between(t0, time.time())[0]
        except Exception as e:  # noqa: BLE001
            errors.append(dict(cell=cell, error=f"graph: {type(e).__name__}: {e}"))
    clocks.stop()
    # the empty launch (132 CTAs) both ways: what each timer adds to any kernel's own time
    from tlx_workbench.calibration import kernels as K
    x = torch.empty(1, device="cuda")
    empty = dict(do_bench_us=bench_ms(lambda: K.empty_kernel[(132,)](x), warmup=30, rep=120) * 1e3,
                 graph_us=_graph_us(lambda: K.empty_kernel[(132,)](x)))
    print(f"empty launch: do_bench {empty['do_bench_us']:.2f} us, graph {empty['graph_us']:.2f} us", flush=True)
    rows = []
    for cell, fn in subjects:
        rs = times[key(cell)]
        us = statistics.median(x["ms"] for x in rs) * 1e3
        rows.append(dict(cell=cell, us=us, ms=us / 1e3, rounds=rs, graph_us=graph.get(key(cell)),
                         graph_mhz=graph.get(key(cell) + "mhz"),
                         sm_mhz=statistics.median([x["sm_mhz"] for x in rs if x["sm_mhz"]] or [0]) or None))
        print(f"{label(cell):52s} do_bench {us:8.1f} us  graph {rows[-1]['graph_us'] or float('nan'):8.1f} us  "
              f"{rows[-1]['sm_mhz']} MHz", flush=True)
    dev = torch.cuda.get_device_properties(0)
    data = dict(device=f"{dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}, triton {triton.__version__}",
                date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                command=f"source .gpu/env.sh && python3 benchmarks/cost_model_validation.py --gpu --rounds {rounds}",
                machine=dict(host=socket.gethostname(), gpu_uuid=str(getattr(dev, "uuid", ""))),
                errors=errors,
                empty_launch=empty, rows=rows)
    path = pathlib.Path(out_dir) / "cost_model_measured.json"
    path.write_text(json.dumps(data, indent=1))
    print("wrote", path)


# ------------------------------------------------------------------------------------------------ model
def simulate(cell: dict) -> dict:
    """The simulated facts of one cell (what ``prediction.finish`` needs), and the wall time; a cell of several
    launches (``wb.CallPrediction``) keeps each launch's facts (``parts``)."""
    import tlx_workbench as wb
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline(GPU):
            p = wb.predict(make_launch(cell), gpu=GPU, samples=SAMPLES.get(cell["kind"]))
    if isinstance(p, wb.CallPrediction):
        facts = dict(gpu=GPU, torch_kernels=[dataclasses.asdict(k) for k in p.torch_kernels],
                     sim_seconds=time.perf_counter() - t0)
        if len(p.parts) == 1:
            return dict(_facts(p.parts[0]), **facts)
        return dict(facts, parts=[dict(_facts(x), kernel=x.kernel) for x in p.parts])
    return dict(_facts(p), gpu=GPU, torch_kernels=[], sim_seconds=time.perf_counter() - t0)


def torch_kernels(cell: dict) -> list:
    """The kernels ``cell``'s call runs through torch beside its launches (a stored simulation from before they were
    noted has none recorded): its host code run once, CTA 0 of each launch simulated, timing only."""
    import tlx_workbench as wb
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with wb.offline(GPU):
            r = wb.simulate(make_launch(cell), gpu=GPU, ctas=[0], numerics=False, on_deadlock="return",
                            torch_kernels=True)
    return [dataclasses.asdict(k) for k in r.torch_kernels]


def _facts(p) -> dict:
    return dict(grid=list(p.grid), slots=p.slots, cta_cycles=p.cta_cycles, tensor=p.tensor_cycles,
                ctas=list(p.sampled.values()), nbytes=p.kernel_bytes, occupancy=p.occupancy,
                spill_bytes=p.spill_bytes, compiled=p.compiled)


def timed(cell: dict, sim: dict, window: str = "do_bench", launch_us: float | None = None):
    """The Prediction of ``cell`` from its simulated facts under the current cost model (``launch_us``: the fixed
    cost of a launch under another timer than do_bench, e.g. CUDA-graph replay, measured beside the cells); a
    ``CallPrediction`` of its launches for a cell of several."""
    from tlx_workbench.sim.timing.prediction import CallPrediction
    from tlx_workbench.sim.torch_kernels import TorchKernel
    if "parts" in sim:
        parts = [_finish(dict(cell, kernel=f["kernel"]), dict(f, sim_seconds=0.0), window) for f in sim["parts"]]
    else:
        parts = [_finish(cell, sim, window)]
    if launch_us is not None:
        parts = [dataclasses.replace(x, launch_us=launch_us) for x in parts]
    host = [TorchKernel(**k) for k in sim.get("torch_kernels") or []]
    if len(parts) == 1 and not host:
        return parts[0]
    return CallPrediction(parts, sim_seconds=sim["sim_seconds"], torch_kernels=host)


def _finish(cell, sim, window):
    from tlx_workbench.sim.timing.prediction import finish
    return finish(kernel=cell["kernel"], gpu=GPU, grid=tuple(sim["grid"]),
                  sampled=dict(enumerate(sim["ctas"])), slots=sim["slots"], cta_cycles=sim["cta_cycles"],
                  tensor=sim["tensor"], nbytes=sim["nbytes"], window=window, sim_seconds=sim["sim_seconds"],
                  occupancy=sim["occupancy"], spill_bytes=sim["spill_bytes"], compiled=sim["compiled"])


def roof_tflops(cell: dict, clock_ghz: float) -> float:
    """The calibrated roof of this cell: the tensor core's sustained rate under copy load on every SM, at the
    clock the launch holds (fp8 at twice fp16's rate, as the calibration measured)."""
    from tlx_workbench.sim.timing.cost import cost_model
    cm = cost_model(GPU)
    per_cycle = cm.tensor_sustained_share * cm.calibration.mma_flops_per_cycle(8 if cell["kind"] == "fp8" else 16)
    return per_cycle * cm.gpu.sm_count * clock_ghz * 1e9 / 1e12


def summary(rows) -> dict:
    errs = [abs(r["error"]) for r in rows]
    if not errs:
        return dict(cells=0)
    worst = max(rows, key=lambda r: abs(r["error"]))
    return dict(cells=len(errs), median_abs_error=statistics.median(errs), worst_error=worst["error"],
                worst_cell=worst["cell"], within_8=sum(e <= 0.08 for e in errs), within_20=sum(e <= 0.20 for e in errs),
                mean_ratio=statistics.mean(1 + r["error"] for r in rows),
                above_roof=sum(r["tflops"] > r["roof_tflops"] * (1 + 1e-9) for r in rows))


def pick_regret(rows) -> float:
    """How much slower, measured, the config the model predicts fastest is than the fastest measured (0: it picked
    the best); configs predicted within 0.1 % of the fastest count as one pick, taken at the slowest of them.

    >>> round(pick_regret([dict(predicted_us=90, measured_us=101), dict(predicted_us=90.05, measured_us=102),
    ...                    dict(predicted_us=95, measured_us=100)]), 4)
    0.02
    """
    best = min(r["predicted_us"] for r in rows)
    picked = max(r["measured_us"] for r in rows if r["predicted_us"] <= best * 1.001)
    return picked / min(r["measured_us"] for r in rows) - 1


def label(cell):
    shape = "x".join(map(str, cell["shape"]))
    causal = " causal" if cell.get("causal") else ""
    return f"{cell['kernel']} {cell['config']} {shape}{causal}"


def fit_flush(reuse_paths):
    """The L2 flush's draw (``PowerModel.flush_demand``) that gives the calibration half's cells their least median
    |error|, written into the calibration file's raw readings (``fitted``) and derived again; the validation half
    is not read. The power family's do_bench series measures it and takes precedence once it ran."""
    import dataclasses
    from tlx_workbench.calibration import load, suite
    from tlx_workbench.sim.timing import cost
    rows = [r for path in reuse_paths for r in json.loads(pathlib.Path(path).read_text())["rows"]
            if half(r["cell"]) == "calibration"]
    base = cost.cost_model(GPU)
    best = None
    real = cost.cost_model
    # the flush alone never holds the clock below boost (the calibration's HBM-streaming TMA loops ran at boost,
    # and nvidia-smi read the boost clock through the short cells' windows): at most the cap's demand
    top = int(base.power.cap_demand * 100)
    try:
        for i in range(0, top + 1):
            fd = i / 100
            cm = dataclasses.replace(base, power=dataclasses.replace(base.power, flush_demand=fd))
            cost.cost_model = lambda gpu, cm=cm: cm
            med = statistics.median(abs(timed(r["cell"], r["sim"]).us / r["measured_us"] - 1) for r in rows)
            if best is None or med < best[1] - 1e-12:
                best = (fd, med)
    finally:
        cost.cost_model = real
    cal = load(GPU)
    data = json.loads(pathlib.Path(cal.path).read_text())
    data["raw"]["fitted"] = dict(flush_demand=dict(
        value=best[0], median_abs_error=best[1], cells=len(rows),
        **{"from": f"fitted on the calibration half ({len(rows)} cells of {', '.join(CALIBRATION_KERNELS)}; median "
                   f"|error| {100 * best[1]:.1f} %) by benchmarks/cost_model_validation.py --fit-flush, "
                   f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"}))
    pathlib.Path(cal.path).write_text(json.dumps(data, indent=1))
    suite.rederive(cal.path)
    print(f"flush_demand {best[0]:.2f}: calibration half median |error| {100 * best[1]:.1f} % over {len(rows)} cells")
    return best


def _sim_share(sim: dict, peak: float, sms: int) -> tuple[float, float]:
    """(u, F): a simulated cell's tensor-busy share of its CTAs' cycles and its flop per cycle per SM on ``sms`` SMs,
    its wgmmas at the loop's ``peak`` as simulated."""
    g = sim["grid"]
    own = sum(sim["ctas"]) * (g[0] * g[1] * g[2]) / len(sim["ctas"])
    return sim["tensor"] / own, peak * sim["tensor"] / (sms * sim["cta_cycles"])


def derive_copy_share(reuse_paths):
    """The tensor core's rate under copy load over its peak (``cost.MEASURED_COPY_SHARE``), from the calibration
    half only: each kernel the calibration ran for seconds (``sustained_kernels``: flop per cycle per SM, its own
    clock) against its simulated cell at the same shape and config (the library's gemm_ws, CONFIGS[0]): the share s
    with 1 - u + u / s = F_sim / F_measured. Attention's sustained runs (Z=4 / Z=2) against the Z=1 cells of the same
    N are printed as a cross-check, not used. Prints each and the median; writes nothing."""
    from tlx_workbench.calibration import load
    from tlx_workbench.target import gpu_model
    cal = load(GPU)
    peak, sms = cal.mma_flops_per_cycle(16), gpu_model(GPU).sm_count
    sustained = json.loads(pathlib.Path(cal.path).read_text())["raw"]["sustained_kernels"]["rows"]
    cells = [r for path in reuse_paths for r in json.loads(pathlib.Path(path).read_text())["rows"]
             if half(r["cell"]) == "calibration" and r["cell"]["config"] == "default" and not r["cell"].get("causal")]
    used, cross = [], []
    for row in sustained:
        if row["subject"] not in ("gemm_ws", "ours"):
            continue
        dims = [int(x) for x in row["cell"].split()[1].replace("^3", "").split("x")]
        if row["cell"].startswith("gemm"):
            match = [r for r in cells if r["cell"]["kernel"] == "gemm_ws" and r["cell"]["shape"] == dims * 3]
        else:
            match = [r for r in cells if r["cell"]["kernel"] == "attention" and r["cell"]["shape"][2:] == dims[2:]]
        if not match:
            continue
        u, f_sim = _sim_share(match[0]["sim"], peak, sms)
        share = u / (f_sim / row["flop_per_clk_sm"] - 1 + u)
        (used if row["cell"].startswith("gemm") else cross).append(share)
        print(f"{row['cell']:36s} measured {row['flop_per_clk_sm']:5.0f} flop/cycle/SM, simulated {f_sim:5.0f} "
              f"(u {u:.3f} over {label(match[0]['cell'])}): share {share:.3f}"
              + ("" if row["cell"].startswith("gemm") else "  (cross-check)"))
    med = statistics.median(used)
    print(f"copy-load share: median {med:.3f} over {len(used)} gemm_ws rows"
          + (f"; attention cross-check {min(cross):.3f}-{max(cross):.3f}" if cross else ""))
    return med


def predicted_row(cell: dict, sim: dict, window: str, launch_us: float | None = None) -> dict:
    """The predicted side of a cell's row: its simulated facts re-timed in ``window``, the clock, bound and rate."""
    p = timed(cell, sim, window, launch_us)
    return dict(cell=cell, half=half(cell), predicted_us=p.us, clock_ghz=p.clock_ghz, regime=p.clock.regime,
                tensor_util=p.clock.tensor_util, bound=p.bound, tflops=flops(cell) / (p.us * 1e-6) / 1e12,
                roof_tflops=roof_tflops(cell, p.clock_ghz), sim=sim)


def run_header(window: str, argv=None) -> dict:
    """What an output JSON starts with: the GPU predicted, when, the command and the calibration's date and power."""
    from tlx_workbench.sim.timing.cost import cost_model
    cal = cost_model(GPU).calibration
    return dict(gpu=GPU, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                command=" ".join(["benchmarks/cost_model_validation.py"] + (argv or sys.argv[1:])), window=window,
                calibration=dict(date=cal.date, power=cal.power))


def load_reuse(paths) -> dict:
    """The simulated facts of earlier outputs' cells, by cell key (a stored simulation is another GPU's when its
    calibration differs: left out, so the cell is simulated again)."""
    return {key(r["cell"]): r["sim"] for path in paths
            for r in json.loads(pathlib.Path(path).read_text())["rows"] if r["sim"].get("gpu", "H200") == GPU}


def simulated(cell: dict, reuse: dict) -> dict:
    """``cell``'s simulated facts: stored ones where ``reuse`` has them (with the call's torch kernels read by one run
    of its host code where they were stored before those were noted), else a simulation."""
    sim = reuse.get(key(cell)) or simulate(cell)
    if "torch_kernels" not in sim:
        sim = dict(sim, torch_kernels=torch_kernels(cell))
    return sim


def predict_unmeasured(measured, out: pathlib.Path, window: str = "do_bench", argv=None, reuse=None) -> dict:
    """Predict every predict cell (``predict_cells.CELLS``) that the ``measured`` runs have not timed: a prediction on
    record before the GPU measures it. Writes ``cost_model_unmeasured.json`` (rows as the validation's, less the
    measured side)."""
    from predict_cells import CELLS
    timed_keys = {key(r["cell"]) for r in measured["rows"]}
    rows = []
    for cell in CELLS:
        if key(cell) in timed_keys:
            continue
        sim = simulated(cell, reuse or {})
        rows.append(predicted_row(cell, sim, window))
        r = rows[-1]
        print(f"{label(cell):60s} pred {r['predicted_us']:9.1f} us  {r['clock_ghz']:.3f} GHz {r['regime']:9s} "
              f"{r['bound']:11s} {r['tflops']:5.0f}/{r['roof_tflops']:4.0f} TF  ({sim['sim_seconds']:.0f} s)", flush=True)
    result = dict(run_header(window, argv), rows=rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cost_model_unmeasured.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="cells whose key holds one of these substrings")
    ap.add_argument("--measured", nargs="*", default=[str(MEASURED)],
                    help="a --gpu run's JSON, or several (machine starts): each cell's median over them; the runs of "
                         "one start joined by commas count as one")
    ap.add_argument("--no-fp8", action="store_true", help="leave the FP8 configs out")
    ap.add_argument("--fp8-sizes", nargs="*", type=int, default=[4096], help="the FP8 cubes to check (4096, 8192)")
    ap.add_argument("--reuse", nargs="*", default=[],
                    help="earlier outputs' JSON: their simulated facts are re-timed, not re-simulated")
    ap.add_argument("--window", default="do_bench", choices=("do_bench", "sustained", "single"))
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    ap.add_argument("--gpu", action="store_true", help="on a GPU: measure the cells (cost_model_measured.json)")
    ap.add_argument("--rounds", type=int, default=3, help="--gpu: interleaved do_bench rounds per cell")
    ap.add_argument("--fit-flush", action="store_true",
                    help="fit the L2 flush's draw on the calibration half of --reuse's cells and write it into the "
                         "calibration file (until the power family measures it)")
    ap.add_argument("--derive-copy-share", action="store_true",
                    help="the tensor core's rate under copy load (cost.MEASURED_COPY_SHARE) from the calibration's "
                         "sustained kernels against --reuse's calibration cells; prints it, writes nothing")
    ap.add_argument("--timer", default="do_bench", choices=("do_bench", "graph"),
                    help="which measured time to check against (graph: a --gpu run's CUDA-graph replay)")
    ap.add_argument("--gpu-model", default=None, help="whose calibration predicts (default: the GPU --measured was "
                                                     "taken on)")
    ap.add_argument("--unmeasured", action="store_true",
                    help="predict the cells the --measured runs have not timed, before a GPU does: writes "
                         "cost_model_unmeasured.json (its rows serve --reuse once they are timed)")
    args = ap.parse_args(argv)
    if args.gpu:
        return measure(args.out, args.rounds)
    measured = load_measured(args.measured)
    global GPU
    GPU = args.gpu_model or gpu_of(measured)
    if args.fit_flush:
        return fit_flush(args.reuse)
    if args.derive_copy_share:
        return derive_copy_share(args.reuse)
    if args.unmeasured:
        return predict_unmeasured(measured, pathlib.Path(args.out), args.window, argv, load_reuse(args.reuse))
    cells = predict_cells(measured, args.timer)
    cells += cells_fp8_measured(measured, args.timer) or \
        ([] if args.no_fp8 else fp8_cells(sizes=tuple(args.fp8_sizes)))
    if GPU == "H200" and args.timer == "do_bench" and not any(c["cell"]["kind"] == "attention_bwd" for c in cells):
        cells += backward_cells()
    if args.no_fp8:
        cells = [c for c in cells if c["cell"]["kind"] != "fp8"]
    if args.only:
        cells = [c for c in cells if any(s in key(c["cell"]) for s in args.only)]
    launch_us = None
    if args.timer == "graph":
        launch_us = measured["empty_launch"]["graph_us"]
    reuse = load_reuse(args.reuse)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for c in cells:
        cell = c["cell"]
        sim = simulated(cell, reuse)
        row = predicted_row(cell, sim, args.window, c.get("launch_us", launch_us))
        row.update(measured_us=c["measured_us"], timer=c.get("timer", args.timer),
                   error=row["predicted_us"] / c["measured_us"] - 1, measured_mhz=c["measured_mhz"], source=c["source"])
        rows.append(row)
        (out / "cost_model_validation.partial.json").write_text(json.dumps(dict(rows=rows), indent=1))
        print(f"{row['half'][:5]} {label(cell):52s} pred {row['predicted_us']:8.1f}  meas {c['measured_us']:8.1f}  "
              f"{100 * row['error']:+6.1f} %  {row['clock_ghz']:.3f} GHz {row['regime']:9s} {row['bound']:11s} "
              f"{row['tflops']:5.0f}/{row['roof_tflops']:4.0f} TF  ({sim['sim_seconds']:.0f} s)", flush=True)
    halves = {h: summary([r for r in rows if r["half"] == h]) for h in ("calibration", "validation")}
    tut = summary([r for r in rows if r["cell"]["kernel"].startswith("tut:")])
    rank = {}
    for n in sorted({r["cell"]["shape"][0] for r in rows if r["cell"]["kind"] == "fp8"}):
        fp8 = [r for r in rows if r["cell"]["kind"] == "fp8" and r["cell"]["shape"][0] == n]
        rank[str(n)] = dict(configs=len(fp8), spearman=spearman([r["predicted_us"] for r in fp8],
                                                                [r["measured_us"] for r in fp8]) if len(fp8) >= 3 else None,
                            pick_regret=pick_regret(fp8))
    result = dict(run_header(args.window, argv), split=dict(
                      rule="calibration = the kernels whose sustained runs set a clock-model figure "
                           f"({', '.join(CALIBRATION_KERNELS)}); validation = every other kernel"),
                  summary=dict(halves, tutorials=tut, fp8_rank=rank), rows=rows)
    (out / "cost_model_validation.json").write_text(json.dumps(result, indent=1))
    lines = [f"| half | cell | predicted µs | measured µs | error | clock GHz | bound | TFLOP/s pred / roof |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["half"], label(r["cell"]))):
        host = " (graph replay: do_bench timed the host)" if r.get("timer", "").startswith("graph (") else ""
        lines.append(f"| {r['half']} | {label(r['cell'])}{host} | {r['predicted_us']:.1f} | {r['measured_us']:.1f} | "
                     f"{100 * r['error']:+.1f} % | {r['clock_ghz']:.3f} ({r['regime']}) | {r['bound']} | "
                     f"{r['tflops']:.0f} / {r['roof_tflops']:.0f} |")
    lines.append("")
    for name, s in list(halves.items()) + [("TLX tutorials", tut)]:
        if s.get("cells"):
            lines.append(f"- **{name}**: {s['cells']} cells, median |error| {100 * s['median_abs_error']:.1f} %, worst "
                         f"{100 * s['worst_error']:+.1f} % ({label(s['worst_cell'])}), {s['within_8']} within ±8 %, "
                         f"{s['within_20']} within ±20 %, mean predicted/measured {s['mean_ratio']:.3f}, "
                         f"{s['above_roof']} above the roof")
    for n, rk in rank.items():
        if rk["spearman"] is not None:
            lines.append(f"- **FP8 config ranking** ({rk['configs']} configs, {n}³ per-tensor): Spearman "
                         f"{rk['spearman']:.2f}; the model's pick measures {100 * rk['pick_regret']:.1f} % over the "
                         f"fastest")
    (out / "cost_model_validation.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-5:]))
    return result


if __name__ == "__main__":
    main()
