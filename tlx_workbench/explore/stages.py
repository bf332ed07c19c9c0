"""The explorer's stages, cheapest first. Each is one of the workbench's verbs applied to one
config at one shape, and returns an :class:`Outcome` (plain data that travels between
processes); the driver turns it into a store row.

* :func:`static` — ``tlx_workbench.compile`` offline for the target: SMEM/TMEM, registers,
  spills, CTAs per SM, ptxas advisories. A config that does not compile, or does not fit, is
  dropped with the compiler's message and the kernel line it names.
* :func:`simulated` — ``tlx_workbench.simulate`` at the problem's small shape (or, with
  ``sim_shape="real"``, at the real shape: every CTA of the launch) proves the protocol (no
  deadlock, no race, output equal to the reference); a deadlocking config is dropped with its
  wait-for graph *before it reaches a GPU*. Then the time at the real shape: ``wb.predict``'s, the one
  prediction the workbench makes (from the proof's own CTAs when it ran at the real shape).
* measured — on a GPU, in a watchdog worker: see :mod:`tlx_workbench.explore.measure`.
"""
from __future__ import annotations

import dataclasses
import time
import traceback
import warnings

from ..compiler.launch_options import compile_kwargs
from ..compiler.occupancy import SERIALIZING, occupancy, spill_loads  # noqa: F401 - re-exported
from ..errors import TLXWorkbenchError
from .problem import Problem, arrive, captured_launches, imposed_config


@dataclasses.dataclass
class Outcome:
    status: str                         # ok | dropped | hung | crashed | error
    reason: str | None = None
    file: str | None = None
    line: int | None = None
    diagnosis: str | None = None
    metrics: dict = dataclasses.field(default_factory=dict)
    device: str | None = None
    env: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0


_INPUTS: dict = {}


def inputs_for(problem: Problem, shape, device: str, *, fresh: bool = False, seed: int | None = None):
    """Random inputs of ``shape`` (kept per process and shape unless ``fresh``: a sweep's
    configs share them, as a bench run would)."""
    import torch
    key = (problem.name, tuple(shape), problem.dtype, device)
    if fresh or key not in _INPUTS:
        if seed is not None:
            torch.manual_seed(seed)
        val = problem.make_inputs(tuple(shape), problem.dtype, device)
        val = val if isinstance(val, tuple) else tuple(val) if isinstance(val, list) else (val,)
        if fresh:
            return val
        _INPUTS[key] = val
    return _INPUTS[key]


def _error_outcome(e: BaseException, t0: float, stage: str) -> Outcome:
    """A workbench error as a dropped row (its file, line and hint), anything else as an error row."""
    if isinstance(e, TLXWorkbenchError):
        text = str(e)
        detail = getattr(e, "detail", None)
        return Outcome("dropped", reason=e.message if hasattr(e, "message") else text.splitlines()[0],
                       file=getattr(e, "file", None), line=getattr(e, "line", None),
                       diagnosis=text + (f"\n\n{detail}" if detail else ""), seconds=time.perf_counter() - t0)
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-8))
    if type(e).__name__ == "OutOfResources":
        # Triton's launch-time check (SMEM, registers): the config does not fit, like a static drop
        return Outcome("dropped", reason=f"does not fit at launch: {str(e)[:300]}", diagnosis=tb,
                       seconds=time.perf_counter() - t0)
    return Outcome("error", reason=f"the {stage} stage failed: {type(e).__name__}: {str(e)[:300]}",
                   diagnosis=tb, seconds=time.perf_counter() - t0)


# ---- static --------------------------------------------------------------------------------
def capture(problem: Problem, cfg: dict, shape, target: str):
    """The launches ``problem`` makes for ``cfg`` at ``shape``, recorded under the offline target
    (nothing runs): [(JITFunction, grid, args, kwargs), ...]."""
    from ..target import offline
    with offline(target):
        inputs = inputs_for(problem, shape, "cpu")
        with captured_launches() as cap:
            problem.call(inputs, cfg)
    if not cap.launches:
        raise TLXWorkbenchError(f"the launcher of {problem.name!r} launched no kernel for config {cfg}",
                                hint="the problem's launch(*inputs, cfg) must launch a @triton.jit kernel")
    return cap.launches




def _spill_bytes(text: str) -> int:
    """The bytes of the first 'N bytes spill stores' of a ptxas line (0 if none)."""
    import re
    m = re.search(r"(\d+) bytes spill stores", text)
    return int(m.group(1)) if m else 0


def _static_metrics(report, model, grid, kwargs, launches) -> dict:
    res = report.resources
    adv = [dict(code=a.code, line=a.line, text=str(getattr(a, "message", "") or a)) for a in report.ptxas_advisories]
    g = grid(dict(kwargs)) if callable(grid) else grid
    g = tuple(g) + (1,) * (3 - len(tuple(g)))
    metrics = dict(smem_bytes=res.smem_bytes, smem_limit=res.smem_limit, registers=res.registers,
                   spills=res.spills, num_warps=res.num_warps, threads=res.num_warps * 32,
                   tmem_columns=res.tmem_columns, ctas_per_sm=occupancy(res, model), advisories=adv,
                   grid=list(g), ctas=g[0] * g[1] * g[2], kernel=report.kernel,
                   tasks=[dict(label=t.label, warps=t.num_warps, registers=t.registers) for t in report.tasks],
                   compile_seconds=report.compile_seconds, launches=launches)
    # ptxas's own word on register pressure, which the cost model does not see
    metrics["spill_bytes"] = max([res.spills or 0] + [_spill_bytes(a["text"]) for a in adv if a["code"] == "spills"])
    metrics["wgmma_serialized"] = any(a["code"] in SERIALIZING for a in adv)
    metrics["spill_traffic"] = spill_loads(adv)
    return metrics


def static(travelled, cfg: dict, shape, target: str = "sm_90") -> Outcome:
    """The static stage: compile what the launcher launches for ``cfg`` at ``shape``, offline."""
    import tlx_workbench as wb
    from ..target import gpu_model
    t0 = time.perf_counter()
    model = gpu_model(target)
    launches = None
    try:
        problem = arrive(travelled)
        launches = capture(problem, cfg, shape, target)
        jit, grid, args, kwargs = launches[0]
        # nvdisasm only when someone opens the SASS: a sweep's next compile should not share the cores
        report = wb.compile(jit, *args, target=target, sass="lazy", **compile_kwargs(kwargs))
        return Outcome("ok", metrics=_static_metrics(report, model, grid, kwargs, len(launches)), device=target,
                       seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a config that fails is a row, not the end of a sweep
        out = _error_outcome(e, t0, "static")
        rep = getattr(e, "report", None)
        if rep is not None and launches:
            # over the SMEM/TMEM budget: the compile finished, so its figures place the config on the plots
            try:
                out.metrics = _static_metrics(rep, model, launches[0][1], launches[0][3], len(launches))
            except Exception:   # noqa: BLE001 - the drop stands without them
                pass
        return out


# ---- simulated -----------------------------------------------------------------------------
SIM_SHAPES = ("small", "real")


def sim_shape_option(sim_shape, shapes=None):
    """``sim_shape`` checked: "small" (the problem's small shape, the default), "real" (the
    sweep's shape itself) or an explicit shape (a tuple of positive ints, of the rank of
    ``shapes``), which proves every config at that one shape.

    >>> sim_shape_option("real"), sim_shape_option([64, 128, 256])
    ('real', (64, 128, 256))
    """
    if sim_shape is None:
        return "small"
    if isinstance(sim_shape, str):
        if sim_shape in SIM_SHAPES:
            return sim_shape
        raise TLXWorkbenchError(f"sim_shape={sim_shape!r} is not a shape the simulated stage knows",
                                hint='use "small" (the problem\'s small shape), "real" (every CTA at the '
                                     'sweep\'s shape) or a shape tuple such as (512, 512, 1024)')
    try:
        shape = tuple(int(d) for d in sim_shape)
        ok = bool(shape) and all(d > 0 and d == d0 for d, d0 in zip(shape, sim_shape))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TLXWorkbenchError(f"sim_shape={sim_shape!r} is not a shape",
                                hint='use "small", "real" or a tuple of positive whole numbers, e.g. (512, 512, 1024)')
    for s in shapes or ():
        if len(tuple(s)) != len(shape):
            raise TLXWorkbenchError(f"sim_shape={shape} has {len(shape)} dimensions; the shape {list(s)} has "
                                    f"{len(tuple(s))}", hint="give a shape of the problem's rank")
    return shape


def proof_shape(problem: Problem, cfg: dict, shape, sim_shape="small") -> tuple:
    """The shape the simulated stage proves ``cfg`` at, for the sweep's ``shape``: the problem's
    small shape (``sim_shape="small"``), ``shape`` itself ("real") or the explicit shape given."""
    sim_shape = sim_shape_option(sim_shape)
    if sim_shape == "small":
        return problem.sim_shape_for(cfg, shape)
    return tuple(shape) if sim_shape == "real" else sim_shape


def sim_shape_tag(sim_shape, shape) -> str:
    """What a simulated row's key adds for ``sim_shape`` at the sweep's ``shape``: nothing for the
    small shape (the keys rows had before the option), else the shape proved ("real" when it is
    the sweep's shape, given as "real" or spelt out)."""
    sim_shape = sim_shape_option(sim_shape)
    if sim_shape == "small":
        return ""
    if sim_shape == "real" or tuple(sim_shape) == tuple(shape):
        return "; sim_shape=real"
    return f"; sim_shape={list(sim_shape)}"


def _compare(out, ref, dtype: str, tolerance: float | None):
    """(ok, max relative error) of ``out`` against ``ref`` (|out - ref| max over |ref| max)."""
    import torch
    o, r = out.double().cpu(), ref.double().cpu()
    if o.shape != r.shape:
        return False, float("inf")
    if not torch.isfinite(o).all():
        return False, float("inf")
    err = float((o - r).abs().max() / r.abs().max().clamp_min(1e-30))
    tol = tolerance if tolerance is not None else {"float16": 2e-2, "bfloat16": 5e-2}.get(dtype, 1e-3)
    return err <= tol, err


#: CTAs along x the simulated stage predicts from (``wb.predict(samples=...)``), the others interpolated: as close
#: as every CTA for the library's kernels (GEMMs and attention at 4096-8192: within 0.2 %) at a bounded cost
#: (causal attention 8192: 15 s, where every CTA takes 470 s on the 2-core CPU)
PREDICT_SAMPLES = 8


def _prediction_metrics(p, predicted_from: str) -> dict:
    return dict(predicted_cycles=p.cycles, predicted_us=p.us, clock_ghz=p.clock_ghz, bound=p.bound,
                spills_charged=p.spill_bytes, predicted_from=predicted_from)


def predict(problem: Problem, cfg: dict, shape, gpu: str, samples: int | None = PREDICT_SAMPLES) -> dict:
    """The simulated time at ``shape``: ``wb.predict`` of the launch at that shape (timing only; the occupancy,
    spills and serialized wgmma from the offline compile, which the static stage has cached), from ``samples``
    CTAs along x (None: every CTA). The one prediction the workbench makes, so a sweep's ranking is
    ``wb.predict``'s (on the H200 store's 104 ``gemm_ws`` configs at 4096³: Spearman 0.95, median error 3.6 %)."""
    import tlx_workbench as wb
    inputs = inputs_for(problem, tuple(shape), "cpu", fresh=True, seed=0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "only k of n CTAs simulated": meant
            p = wb.predict(problem.call, inputs, cfg, gpu=gpu, samples=samples)
    except Exception as e:  # noqa: BLE001 - a config proved at the small shape may still fail at the real one
        first = str(e).splitlines()[0] if str(e) else ""
        return dict(predict_note=f"no prediction at {list(shape)}: {type(e).__name__}: {first[:200]}")
    how = "every CTA" if samples is None else f"{samples} CTAs along x, the others interpolated"
    return _prediction_metrics(p, f"wb.predict at the real shape ({how})")


def predict_whole(res, gpu: str) -> dict | None:
    """The time at the shape the simulated stage proved a config at, when that is the sweep's shape: the proof ran
    every CTA of the real launch, so the prediction is ``wb.predict``'s from those CTAs (``prediction.prediction_from``;
    numerics do not change the cycles), without simulating the launch again. None where the compiled kernel spills
    or serializes its wgmmas (those change the cycles, and :func:`predict` simulates with them), or where the proof made
    several launches or ran torch kernels beside its launch (:func:`predict` predicts each)."""
    from ..sim.timing.prediction import compiled_facts, prediction_from
    if len(getattr(res, "launches", [res])) > 1 or getattr(res, "torch_kernels", None):
        return None     # a call of several kernels: wb.predict predicts each
    occ, spills, serial, note = compiled_facts(res, gpu)
    if spills or serial:
        return None
    p = prediction_from(res, gpu, occupancy=occ or 1, compiled=note)
    return _prediction_metrics(p, "every CTA of the proof at the real shape")


def _waves(res) -> dict:
    """How the simulator ran the launches' CTAs: ``wave_leaders``, the CTAs it simulated in full (the
    others replayed a leader's data flow), and ``waves``, its sentence where a launch ran one CTA at a
    time. Empty when the simulator says neither."""
    out: dict = {}
    metas = [getattr(getattr(r, "trace", None), "meta", None) or {} for r in getattr(res, "launches", [res])]
    leaders = [m["wave_leaders"] for m in metas if m.get("wave_leaders") is not None]
    if leaders:
        out["wave_leaders"] = int(sum(leaders))
    notes = [m["waves"] for m in metas if m.get("waves")]
    if notes:
        out["waves"] = str(notes[0])
    return out


def simulated(travelled, cfg: dict, shape, gpu: str = "H200", schedules: int = 1, seed: int = 0,
              do_predict: bool = True, sim_shape="small", predict_samples: int | None = PREDICT_SAMPLES) -> Outcome:
    """The simulated stage: prove the protocol at the problem's small shape (``sim_shape="small"``),
    at ``shape`` itself ("real": every CTA of the launch, numerics on) or at an explicit shape, then
    predict the time at ``shape`` (:func:`predict`: ``wb.predict`` from ``predict_samples`` CTAs; from the proof
    itself when it ran at ``shape``). The output is compared with the problem's reference at the shape
    proved, on fresh random inputs (``seed``); a reference that returns None there (too large for
    the CPU) leaves the output unchecked, and the row says so (``checked``)."""
    import tlx_workbench as wb
    t0 = time.perf_counter()
    try:
        problem = arrive(travelled)
        small = proof_shape(problem, cfg, shape, sim_shape)
        inputs = inputs_for(problem, small, "cpu", fresh=True, seed=seed)
        # a sweep records verdicts: the repair search (sim/diagnosis/repair.py) is for the config a person looks into
        # (Exploration.simulate), not for every hanging config of a sweep
        res = wb.simulate(problem.call, inputs, cfg, gpu=gpu, schedules=schedules, seed=seed, on_deadlock="return",
                          repair=False, torch_kernels=True)
        metrics = dict(sim_shape=list(small), sim_cycles=res.cycles, schedules=len(res.schedules))
        metrics.update(_waves(res))
        if res.deadlock is not None:
            d = res.deadlock
            return Outcome("dropped", reason=d.message.splitlines()[0], file=res.file, line=d.line,
                           diagnosis=d.text() + (f"\n\nwhat to do: {d.hint}" if getattr(d, "hint", None) else ""),
                           metrics=dict(metrics, verdict="deadlock"), device=gpu, seconds=time.perf_counter() - t0)
        if res.errors:
            f = res.errors[0]
            text = "\n".join(getattr(x, "text", lambda: str(x))() if callable(getattr(x, "text", None))
                             else str(x) for x in res.findings)
            return Outcome("dropped", reason=f"{f.kind}: {f.message}", file=getattr(f, "file", None) or res.file,
                           line=f.line, diagnosis=text, metrics=dict(metrics, verdict=f.kind), device=gpu,
                           seconds=time.perf_counter() - t0)
        ref = problem.reference(*inputs) if problem.reference is not None else None
        metrics["checked"] = ref is not None
        if ref is not None:
            ok, err = _compare(res.value, ref, problem.dtype, problem.tolerance)
            metrics["max_rel_err"] = err
            if not ok:
                return Outcome("dropped", reason=f"wrong result on the simulator at shape {list(small)}: max "
                               f"relative error {err:.3g}", metrics=dict(metrics, verdict="wrong result"),
                               device=gpu, seconds=time.perf_counter() - t0)
        if do_predict:
            whole = tuple(small) == tuple(shape) and len(getattr(res, "launches", None) or [res]) == 1
            metrics.update((predict_whole(res, gpu) if whole else None)
                           or predict(problem, cfg, shape, gpu, predict_samples))
        return Outcome("ok", metrics=dict(metrics, verdict="ok"), device=gpu, seconds=time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001
        return _error_outcome(e, t0, "simulated")


def run_stage(stage: str, travelled, cfg: dict, shape, options: dict) -> dict:
    """One CPU stage, as the workers call it; returns the Outcome as a dict (plain data)."""
    fn = {"static": static, "simulated": simulated}[stage]
    return dataclasses.asdict(fn(travelled, cfg, shape, **options))
