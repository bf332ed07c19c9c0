"""The driver: stages, cheapest first, over a space, at each shape, into a store.

It only composes: the stages are the workbench's verbs (compile, simulate, bench in a
watchdog worker), the executors run them (here, a process pool, Ray), the searches pick what
to measure, and every result goes to the store as it arrives. A row already in the store
(same source, config, shape, stage, versions and target) is not run again, so a re-run is
cheap and a killed sweep resumes where it stopped. A simulated row proved at the real shape
(``sim_shape="real"``) has a key of its own: it is never taken for a small-shape row.
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid

from ..errors import NoGPUError, TLXWorkbenchError
from .problem import Problem
from .search import rank_score
from .space import Space, config_id
from .stages import PREDICT_SAMPLES, sim_shape_option, sim_shape_tag
from .store import Row, Store, row_key

STAGE_ORDER = ("static", "simulated", "measured")


def default_store_path() -> str:
    """Where results go when no store is named: one file per user, shared by every sweep."""
    base = os.environ.get("TLXWB_STORE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "tlx_workbench", "explore.sqlite")
    return base


def versions_text() -> str:
    import triton
    from importlib.metadata import PackageNotFoundError, version
    from .._version import __version__
    try:
        utlx = version("triton-utlx")
    except PackageNotFoundError:
        utlx = "?"
    return f"triton {triton.__version__}; utlx {utlx}; workbench {__version__}"


def as_problem(problem) -> Problem:
    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, str):
        from . import library
        return library.problem(problem)
    raise TLXWorkbenchError(f"explore() takes a Problem or a library kernel name, not {type(problem).__name__}",
                            hint="build one with tlx_workbench.explore.Problem(name=..., launch=..., make_inputs=...)")


def _progress(total, desc, enabled):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)


class Sweep:
    """One run of the stages (``explore()`` makes and runs it; ``Exploration.sweep`` keeps it)."""

    def __init__(self, problem: Problem, space: Space, shapes, *, stages, search, search_options, store: Store,
                 backend, workers, address, measure, gate, target, gpu, schedules, seed, timeout,
                 compile_timeout, warmup, rep, progress, measure_seconds=None, sim_shape="small"):
        self.problem, self.space, self.shapes = problem, space, [tuple(s) for s in shapes]
        self.stages = tuple(s for s in STAGE_ORDER if s in stages)
        self.search, self.search_options = search, dict(search_options or {})
        self.store = store
        self.backend, self.workers, self.address = backend, workers, address
        self.measure_with = measure
        self.gate = set(gate)
        self.target, self.gpu = target, gpu
        self.schedules, self.seed = schedules, seed
        self.sim_shape = sim_shape_option(sim_shape, self.shapes)
        self.timeout, self.compile_timeout, self.warmup, self.rep = timeout, compile_timeout, warmup, rep
        self.progress = progress
        self.measure_seconds = measure_seconds
        self.unmeasured: dict = {}                      # shape -> config ids left when measure_seconds ran out
        self.id = uuid.uuid4().hex[:12]
        self.versions = versions_text()
        self.ran = {s: 0 for s in STAGE_ORDER}          # stage calls this sweep made (not found in the store)
        self.reused = {s: 0 for s in STAGE_ORDER}       # rows the store already had
        self.stage_seconds = {s: 0.0 for s in STAGE_ORDER}   # wall time of each stage phase
        self.measured_order: dict = {}                  # shape -> config ids in the order measured
        self.error: BaseException | None = None
        self.done = threading.Event()
        try:
            self._travel = problem.travel()
        except TLXWorkbenchError as e:
            if backend == "serial":
                self._travel = ("local", problem)
            else:
                import warnings
                warnings.warn(f"{e.message if hasattr(e, 'message') else e}; running every stage in this process "
                              f"(backend='serial'). {getattr(e, 'hint', '')}", stacklevel=3)
                self.backend = "serial"
                self._travel = ("local", problem)

    # -- keys -----------------------------------------------------------------------------------
    def where(self, stage: str, device: str | None = None) -> str:
        if stage == "static":
            return str(self.target)
        if stage == "simulated":
            from ..sim.timing.cost import model_id
            return (f"{self.gpu}; schedules={self.schedules}; seed={self.seed}; cost model {model_id(self.gpu)}; "
                    f"wb.predict from {PREDICT_SAMPLES} CTAs")
        return device or "gpu"

    def key(self, cfg, shape, stage, device=None) -> str:
        where = self.where(stage, device)
        if stage == "simulated":
            where += sim_shape_tag(self.sim_shape, shape)      # "" at the small shape: the keys rows always had
        return row_key(f"{self.problem.source_hash}; {self.problem.identity}", cfg, shape, stage, self.versions,
                       where)

    def _put(self, cfg, shape, stage, out: dict, device_key=None) -> Row:
        row = Row(key=self.key(cfg, shape, stage, device_key), kernel=self.problem.name, config=cfg,
                  shape=list(shape), stage=stage, status=out["status"], reason=out.get("reason"),
                  file=out.get("file"), line=out.get("line"), diagnosis=out.get("diagnosis"),
                  metrics=out.get("metrics") or {}, device=out.get("device"), env=out.get("env") or {},
                  seconds=out.get("seconds") or 0.0, sweep=self.id, source_hash=self.problem.source_hash)
        self.store.put(row)
        return row

    # -- running ----------------------------------------------------------------------------------
    def run(self):
        try:
            self.store.begin_sweep(self.id, self.problem.name, dict(
                shapes=[list(s) for s in self.shapes], stages=list(self.stages), search=str(self.search),
                backend=self.backend, configs=len(self.space), versions=self.versions, target=self.target,
                gpu=self.gpu, sim_shape=self.sim_shape))
            ex = None
            cpu_stages = [s for s in self.stages if s != "measured"]
            try:
                for shape in self.shapes:
                    alive = list(self.space)
                    for stage in cpu_stages:
                        if ex is None:
                            from .executors import executor
                            ex = executor(self.backend, self.workers, self.address)
                        alive = self._cpu_stage(ex, stage, alive, shape)
                    if "measured" in self.stages:
                        self._measured(alive, shape)
            finally:
                if ex is not None:
                    ex.close()
            self.store.end_sweep(self.id)
        except BaseException as e:   # noqa: BLE001 - kept for the Exploration (a background sweep)
            self.error = e
            raise
        finally:
            self.done.set()

    def _cpu_stage(self, ex, stage, configs, shape):
        t0 = time.perf_counter()
        keys = [self.key(c, shape, stage) for c in configs]
        # an "error" row says the stage itself broke (not a verdict on the config): a re-run tries again
        known = self.store.has(keys, except_status=("error",))
        todo = [(c, k) for c, k in zip(configs, keys) if k not in known]
        self.reused[stage] += len(configs) - len(todo)
        opts = self._stage_options(stage, shape)
        calls = [(stage, self._travel, c, list(shape), opts(c)) for c, _ in todo]
        bar = _progress(len(calls), f"{self.problem.name} {stage} {list(shape)}", self.progress)
        try:
            for i, out in ex.map(calls):
                self._put(todo[i][0], shape, stage, out)
                self.ran[stage] += 1
                bar.update(1)
        finally:
            bar.close()
        self.stage_seconds[stage] += time.perf_counter() - t0
        if stage not in self.gate:
            return configs
        ok = []
        for c, k in zip(configs, keys):
            r = self.store.get(k)
            if r is not None and r.ok:
                ok.append(c)
        return ok

    def _stage_options(self, stage, shape):
        if stage == "static":
            return lambda c: dict(target=self.target)

        def sim(c):
            return dict(gpu=self.gpu, schedules=self.schedules, seed=self.seed, sim_shape=self.sim_shape)
        return sim

    def _measurer(self):
        m = self.measure_with
        if m is not None and not isinstance(m, str) and hasattr(m, "measure"):
            return m, False
        from . import measure as meas
        if isinstance(m, (str, os.PathLike)) and m not in ("gpu", "ray"):
            return meas.ReplayMeasurer(m, kernel=self.problem.name), True
        if m == "ray" or (m is None and self.backend == "ray"):
            return meas.RayGPUMeasurer(timeout=self.timeout, compile_timeout=self.compile_timeout), True
        return meas.GPUMeasurer(timeout=self.timeout, compile_timeout=self.compile_timeout), True

    def score(self, cfg, shape):
        """What model-guided search ranks a config by: its simulated time at ``shape``. The cost
        model does not see register pressure and ptxas does: a config whose static row says the
        wgmma pipeline is serialized or registers spill ranks after every config without (among
        themselves, by simulated time). None without a prediction."""
        return rank_score(self.store.get(self.key(cfg, shape, "simulated")),
                          self.store.get(self.key(cfg, shape, "static")))

    def _measured(self, configs, shape):
        from .search import strategy
        t0 = time.perf_counter()
        by_id = {config_id(c): c for c in configs}
        cands = [(config_id(c), self.score(c, shape)) for c in configs]
        try:
            measurer, own = self._measurer()
        except NoGPUError as e:
            # no GPU anywhere (a Ray cluster of CPU nodes): the sweep ends after its CPU stages, as on a
            # machine without a GPU, and says so
            import warnings
            warnings.warn(f"measured stage skipped: {e.message}", stacklevel=4)
            self.unmeasured.setdefault(shape, []).extend(cid for cid, _ in cands)
            return
        device_key = getattr(measurer, "device_key", None) or _device_key(measurer)
        measured: dict = {}
        order = self.measured_order.setdefault(shape, [])
        bar = _progress(None, f"{self.problem.name} measured {list(shape)}", self.progress)
        opts = dict(warmup=self.warmup, rep=self.rep, seed=self.seed)
        try:
            for batch in strategy(self.search, **self.search_options)(cands, measured):
                todo, ready = [], []
                for cid in batch:
                    k = self.key(by_id[cid], shape, "measured", device_key)
                    r = self.store.get(k)
                    (ready if r is not None and r.status != "error" else todo).append((cid, r))
                for cid, r in ready:
                    self.reused["measured"] += 1
                    measured[cid] = r.metrics.get("us") if r.ok else None
                    order.append(cid)
                # in chunks of one call per GPU, so a time budget stops between measurements
                chunk = max(1, len(getattr(measurer, "gpus", None) or getattr(measurer, "actors", None) or [0]))
                for start in range(0, len(todo), chunk):
                    if self.measure_seconds is not None and time.perf_counter() - t0 > self.measure_seconds:
                        self.unmeasured.setdefault(shape, []).extend(cid for cid, _ in todo[start:])
                        break
                    part = todo[start:start + chunk]
                    calls = [(self._travel, by_id[cid], list(shape), opts) for cid, _ in part]
                    for i, out in measurer.measure(calls):
                        cid = part[i][0]
                        d = dict(out.__dict__)
                        if out.status in ("hung", "crashed"):
                            d["diagnosis"] = self._diagnosis_for(by_id[cid], shape)
                        row = self._put(by_id[cid], shape, "measured", d, device_key)
                        self.ran["measured"] += 1
                        measured[cid] = row.metrics.get("us") if row.ok else None
                        order.append(cid)
                        bar.update(1)
                if self.unmeasured.get(shape):
                    break
        finally:
            bar.close()
            if own:
                measurer.close()
        self.stage_seconds["measured"] += time.perf_counter() - t0

    def _diagnosis_for(self, cfg, shape) -> str:
        """What the simulator says of a config that hung or crashed on the GPU."""
        from .stages import simulated
        r = self.store.get(self.key(cfg, shape, "simulated"))
        if r is None:
            out = simulated(self._travel, cfg, list(shape), gpu=self.gpu, schedules=self.schedules, seed=self.seed,
                            do_predict=False, sim_shape=self.sim_shape)
            r = self._put(cfg, shape, "simulated", dict(out.__dict__))
        if r.ok:
            proved = r.metrics.get("sim_shape")
            if proved is not None and tuple(proved) == tuple(shape):
                return (f"the simulator ran this config at the measured shape {list(shape)} (every CTA) without a "
                        f"deadlock or race: the hang depends on something the simulator does not model")
            return (f"the simulator ran this config at shape {proved} without a deadlock "
                    f"or race: the hang depends on something the small shape does not reach"
                    + ("" if self.sim_shape == "real" else " (explore(..., sim_shape=\"real\") proves it at the "
                       "measured shape)"))
        where = f" (line {r.line})" if r.line else ""
        return f"the simulator's diagnosis of the same config{where}: {r.reason}\n\n{r.diagnosis or ''}"


def _device_key(measurer) -> str:
    """The device a measurer measures on, for row keys: the GPU's name, or the replayed file."""
    from . import measure as meas
    if isinstance(measurer, meas.ReplayMeasurer):
        return f"replay:{os.path.basename(measurer.store.path)}"
    try:
        import torch
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "gpu"
    except Exception:   # noqa: BLE001
        return "gpu"


def explore(problem, space=None, shapes=None, *, stages=("static", "simulated", "measured"), search="exhaustive",
            search_options: dict | None = None, store=None, backend: str = "process", workers: int | None = None,
            address: str | None = None, measure=None, gate=("static", "simulated"), target: str = "H200",
            gpu: str = "H200", schedules: int = 1, seed: int = 0, timeout: float = 20.0,
            compile_timeout: float = 600.0, warmup: int = 25, rep: int = 100, progress: bool = True,
            background: bool = False, measure_seconds: float | None = None, sim_shape="small"):
    """Explore a kernel's configs: static, simulated and measured stages, cheapest first.

    ``problem``: a :class:`Problem` or a library kernel's name ("gemm_ws", "attention").
    ``space``: a :class:`Space`, a list of configs / ``triton.Config``s, a dict knob -> values,
    or an autotuned kernel (its configs); default the library's space of that kernel.
    ``shapes``: the problem shapes. ``stages``: any of "static", "simulated", "measured" (the
    last is left out when no GPU is visible and ``measure`` is not given). ``gate``: the stages
    whose verdict drops a config. ``search``: "exhaustive", "random" or "model" (rank by simulated
    time, measure the top k, widen until the best stops moving), options in ``search_options``.
    ``store``: a :class:`Store` or a path (default: one file per user, see
    :func:`default_store_path`); rows already there are not run again. ``backend``: "process"
    (a local pool), "ray" (Ray tasks and one GPU actor per GPU; ``address`` of an existing
    cluster) or "serial". ``measure``: None (this host's GPUs), "ray", or a store path/``Store``
    to replay measured rows from. ``measure_seconds``: stop starting GPU measurements after that
    long (the rest is listed in ``Exploration.sweep.unmeasured``). ``background=True`` returns at
    once; the Exploration fills as rows arrive. ``sim_shape``: where the simulated stage proves each
    config's protocol and output: "small" (the problem's small shape, the default), "real" (the
    shape itself, every CTA of the launch: a bug that needs the real trip counts is caught, at the
    cost of simulating the whole launch) or an explicit shape; the rows record the shape proved
    (``sim_shape``) and are kept apart in the store by it. The predicted time is the same either way.

    >>> ex = explore("gemm_ws", shapes=[(4096, 4096, 4096)], stages=("static", "simulated"))  # doctest: +SKIP
    >>> ex.best(), ex.dropped()[:1]                                                            # doctest: +SKIP
    """
    from .exploration import Exploration
    problem = as_problem(problem)
    if space is None:
        from . import library
        space = library.space(problem.name.replace("_bf16", "").replace("_causal", ""))
    space = Space.of(space)
    if not shapes:
        raise TLXWorkbenchError("explore() needs at least one problem shape", hint="pass shapes=[(M, N, K), ...]")
    stages = tuple(stages)
    sim_shape = sim_shape_option(sim_shape, shapes)
    unknown = [s for s in stages if s not in STAGE_ORDER]
    if unknown:
        raise TLXWorkbenchError(f"unknown stage {unknown[0]!r}", hint=f"stages are {STAGE_ORDER}")
    if "measured" in stages and measure is None and backend != "ray":
        from ..target import has_gpu
        if not has_gpu():
            stages = tuple(s for s in stages if s != "measured")
    st = store if isinstance(store, Store) else Store(store or default_store_path())
    sweep = Sweep(problem, space, shapes, stages=stages, search=search, search_options=search_options, store=st,
                  backend=backend, workers=workers, address=address, measure=measure, gate=gate, target=target,
                  gpu=gpu, schedules=schedules, seed=seed, timeout=timeout, compile_timeout=compile_timeout,
                  warmup=warmup, rep=rep, progress=progress, measure_seconds=measure_seconds, sim_shape=sim_shape)
    ex = Exploration(st, problem, space, sweep.shapes, sweep=sweep)
    if background:
        threading.Thread(target=_quiet(sweep.run), daemon=True, name="tlx-explore").start()
    else:
        sweep.run()
    return ex


def _quiet(fn):
    def run():
        try:
            fn()
        except BaseException:   # noqa: BLE001 - kept on the sweep; Exploration.wait() raises it
            pass
    return run
