"""``tlx_workbench.simulate``: run TLX kernels, unchanged, on the CPU."""
from __future__ import annotations

import contextlib

from ..errors import DeadlockError, SimulationError
from ..target import offline
from .schedule.engine import raise_deadlock, run_launch
from .schedule.scheduler import ORDERS
from .hardware.hostmem import AddressTaken
from .diagnosis.races import rank_findings
from .timing.recorder import check_name as check_recorder

DEFAULT_MAX_STEPS = 2_000_000
_active: list["Simulation"] = []


def active_simulation() -> "Simulation | None":
    """The innermost :func:`simulate` running now (a launch made inside runs on the CPU), or None."""
    return _active[-1] if _active else None


class SimResult:
    """What one simulated launch produced.

    ``trace`` (a :class:`~tlx_workbench.trace.Trace` in cycles), ``deadlock`` (a
    DeadlockReport or None), ``findings`` (races, arrivals past a count, named-barrier
    count mismatches, schedule divergences), ``stats`` per (task, replica), and the
    outputs, already written back into the caller's tensors.
    """

    def __init__(self, run, schedules=None):
        self.kernel = run.name
        self.file = run.file
        self.gpu = run.gpu.name
        self.seed = run.seed
        self.grid = run.grid
        self.ctas = run.ctas_run
        self.partial = run.partial
        self.trace = run.trace
        self.deadlock = run.deadlock
        # the line to change first: a race a cause explains leads with that line (sim/diagnosis/races.py)
        run.findings[:] = rank_findings([f for f in run.findings if not getattr(f, "cause", False)], run.trace,
                                        run.file) + [f for f in run.findings if getattr(f, "cause", False)]
        self.findings = _errors_first(run.findings)
        self.atomic_ordering: list[str] = []      # outputs that differ between schedules only as atomics order
        self.stats = run.stats
        #: CTA id -> the cycle its last span ends (each simulated CTA starts at cycle 0)
        self.cta_cycles = run.cta_end
        self.kernel_bytes = getattr(run, "kernel_bytes", 0)
        self.numerics = getattr(run, "numerics", True)
        #: (JITFunction, args, kwargs) of the launch, as the host code made it
        self.launch = getattr(run, "launch", None)
        self.schedules = schedules or [run.seed]
        self.cluster_dims = run.cluster_dims
        #: CLC work stealing: (CTA that issued try_cancel, first CTA of the cluster it took, or None: none left)
        self.clc_steals = list(run.clc_log)
        self.value = None
        self._launches: list = [None]         # None: this result (a list holding it would be a cycle)
        #: the verified repair the diagnosis leads with (sim/diagnosis/repair.py: Repair; ``fix.diff()``, ``fix.apply()``)
        self.fix = None
        #: what the repair search tried (sim/diagnosis/repair.py: RepairSearch), None when the launch ran clean
        self.repair_search = None

    @property
    def launches(self) -> list:
        """Every launch of the ``simulate`` call that made this result, this one last (itself alone for one)."""
        return [self if r is None else r for r in self._launches]

    @launches.setter
    def launches(self, results):
        # kept without itself: a result in its own list is a cycle, which kept the result's trace alive after the
        # caller dropped it, until the cyclic collector ran (often inside a later launch, walking all its records)
        self._launches = [None if r is self else r for r in results]

    @property
    def races(self):
        return [f for f in self.findings if f.kind == "race"]

    @property
    def errors(self):
        """Findings that break the kernel's protocol (races, counts): ``raise_for_errors`` raises on them."""
        return [f for f in self.findings if getattr(f, "severity", "error") == "error"]

    @property
    def warnings(self):
        """Findings about the outputs (``unwritten-output``, ``nonfinite-output``: sim/diagnosis/outputs.py): no clean bill,
        but nothing raises (a GPU would return as well)."""
        return [f for f in self.findings if getattr(f, "severity", "error") != "error"]

    @property
    def ok(self) -> bool:
        """A clean bill: no deadlock and no finding, warnings included."""
        return self.deadlock is None and not self.findings

    @property
    def cycles(self) -> float:
        return self.trace.duration

    def raise_for_errors(self) -> "SimResult":
        """Raise DeadlockError / SimulationError when the run found a problem; else return self."""
        if self.deadlock is not None:
            d = self.deadlock
            err = DeadlockError(d.message, file=self.file, line=d.line, hint=d.hint, detail=d.text())
            err.report = d
            err.result = self
            err.fix = self.fix
            raise err
        errors = self.errors
        if errors:
            f = errors[0]
            more = f" (and {len(errors) - 1} more finding(s))" if len(errors) > 1 else ""
            hint = f.hint or ("see result.findings; announce with barrier_expect_bytes the bytes of every TMA load that "
                    "signals the barrier" if f.kind == "tx-overflow" else
                    "see result.findings; order the accesses through a barrier")
            if self.fix is not None:
                # the verified repair leads: its line, then the finding it removes
                err = SimulationError(f"{self.fix.headline}\n  the fix (verified by simulation; %tlx_fix applies "
                                      f"it in a notebook):\n{self.fix.diff()}\n{f.kind}: {f.message}{more}",
                                      file=self.file,
                                      line=self.fix.line, hint=f"make the change shown ({self.fix.what}) — {hint}")
                err.fix = self.fix
                err.result = self
                raise err
            raise SimulationError(f"{f.kind}: {f.message}{more}", file=self.file, line=f.line, hint=hint)
        return self

    def _lines(self):
        out = [f"SimResult({self.kernel} on {self.gpu}, grid={self.grid}, {len(self.ctas)} CTA(s) simulated"
               + (" — PARTIAL: other CTAs not computed" if self.partial else "")
               + (f", clusters of {self.cluster_dims}" if self.cluster_dims != (1, 1, 1) else "")
               + (f", {sum(1 for _, v in self.clc_steals if v is not None)} cluster(s) taken by CLC"
                  if self.clc_steals else "")
               + f", seed={self.seed}, schedules={len(self.schedules)}, {self.cycles:.0f} cycles)"]
        if self.deadlock is not None:
            out.append("  DEADLOCK: " + self.deadlock.text().replace("\n", "\n  "))
        elif self.fix is not None:
            out.append(f"  FIX: {self.fix.headline}\n{self.fix.diff()}")
        elif self.repair_search is not None and not self.ok:
            out.append(f"  ({self.repair_search.summary()})")
        for f in self.findings:
            out.append(f"  {f!r}")
        for (task, rep), st in sorted(self.stats.items()):
            busy = st["busy"] / max(st["ctas"], 1)
            wait = st["waiting"] / max(st["ctas"], 1)
            out.append(f"  {task}[{rep}]: {st['ops']} ops, busy {busy:.0f} / waiting {wait:.0f} cycles per CTA, "
                       f"mma {st['mma'] / max(st['ctas'], 1):.0f}")
        if self.ok:
            out.append("  no deadlock, no races")
        elif self.deadlock is None and not self.errors:
            out.append(f"  no deadlock, no races; {len(self.warnings)} warning(s) about the outputs")
        return out

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        # drawn by widgets/sim_result.py, registered in tlx_workbench.views (a result never imports a view)
        from .. import views
        body = views.html_or_text(self)
        # the verified fix, as a diff of the kernel's own lines, above the result's own view
        return (self.fix._repr_html_() + body) if self.fix is not None else body


def _snapshot(args, kwargs):
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    out = []

    def add(v):
        if isinstance(v, torch.Tensor):
            out.append((v, v.clone()))
        elif isinstance(v, TensorDescriptor):
            add(v.base)
        elif isinstance(v, (list, tuple)):
            for x in v:
                add(x)
    for v in list(args) + list(kwargs.values()):
        add(v)
    return out


class Simulation:
    """The context of :func:`simulate`: launches inside it run on the CPU simulator."""

    def __init__(self, gpu="H200", seed=0, schedules=1, ctas=None, max_steps=DEFAULT_MAX_STEPS, config=None,
                 on_deadlock="raise", resident=None, occupancy=1, in_flight=None, numerics=True,
                 spills=0, serialized_wgmma=False, recorder=None, waves=None, repair=None, order="seeded",
                 torch_kernels=False):
        if on_deadlock not in ("raise", "return"):
            raise SimulationError(f"on_deadlock={on_deadlock!r}", hint="use 'raise' or 'return'")
        if order not in ORDERS:
            raise SimulationError(f"order={order!r} is not a scheduling order", hint=f"use one of {', '.join(ORDERS)}")
        self.order = order
        self.gpu = gpu
        self.seed = int(seed)
        self.schedules = max(1, int(schedules))
        self.ctas = ctas
        self.max_steps = max_steps
        self.config = config
        self.on_deadlock = on_deadlock
        self.resident = resident
        self.occupancy = occupancy
        self.in_flight = in_flight
        self.numerics = numerics
        self.waves = waves
        self.spills = spills
        self.serialized_wgmma = serialized_wgmma
        self.recorder = check_recorder(recorder)
        from .diagnosis.repair import enabled_default
        #: search a verified repair when a launch fails: True, False, a check ``ok(args, kwargs) -> bool`` of a
        #: candidate's outputs (the launch's arguments after it ran), or the expected outputs (sim/repair.matches)
        self.repair = enabled_default() if repair is None else repair
        self.results: list[SimResult] = []
        #: the kernels the host code runs through torch (``torch_kernels=True``; else None): sim/torch_kernels.py
        self.torch_kernels = [] if torch_kernels else None
        self._torch_rec = None
        self._offline = None
        self._catch = None
        self._taken = None

    @property
    def result(self) -> SimResult | None:
        """The last launch's SimResult."""
        return self.results[-1] if self.results else None

    # -- entering / leaving -----------------------------------------------------------
    def __enter__(self):
        from ..compiler.launches import catch_launches
        self._offline = offline(self.gpu).enable()
        self._taken = AddressTaken().enable()
        # every launch inside runs here (a warmup compiles nothing); an autotuned one picks its config first
        self._catch = catch_launches(self._caught, on_autotuned=self.launch_autotuned).__enter__()
        if self.torch_kernels is not None:
            from .torch_kernels import TorchKernelRecorder
            self._torch_rec = TorchKernelRecorder().__enter__()
        _active.append(self)
        return self

    def _host_paused(self):
        """The torch kernel recorder steps aside while a launch (its hooks, compile and simulation) runs."""
        return self._torch_rec.paused() if self._torch_rec is not None else contextlib.nullcontext()

    def _caught(self, launch):
        __tracebackhide__ = True
        if launch.warmup:
            return None
        with self._host_paused():
            out = self.launch(launch.jit, launch.grid, launch.args, launch.kwargs)
        if self._torch_rec is not None:
            self._torch_rec.launches += 1
        return out

    def __exit__(self, *exc):
        if self._torch_rec is not None:
            self._torch_rec.__exit__(*exc)
            self.torch_kernels = list(self._torch_rec.kernels)
            self._torch_rec = None
        if self._catch is not None:
            self._catch.__exit__(*exc)
            self._catch = None
        if self in _active:
            _active.remove(self)
        if self._taken is not None:
            self._taken.disable()
            self._taken = None
        if self._offline is not None:
            self._offline.disable()
            self._offline = None
        return False

    # -- launches --------------------------------------------------------------------------
    def launch_autotuned(self, tuner, args, kwargs):
        """An autotuned launch as Triton's ``Autotuner.run`` makes it, with one simulated launch standing for
        both the benchmark runs and the final one. On a GPU the first call with a new key benchmarks every
        pruned config (pre-hook, reset_to_zero, kernel, post-hook each time), then runs the best one without the
        post-hook; what the user sees afterwards is the post-hook's work on the benchmark runs plus the final
        run (TLX's split-K GEMM reduces its workspace into C only in its post-hook). So a first call runs the
        user's post-hook after the launch; a later call with the same key, cached as Triton caches it, does not
        (on a GPU, neither)."""
        __tracebackhide__ = True
        with self._host_paused():       # its hooks' torch work (a reset_to_zero) is the tuning's, not the call's
            return self._launch_autotuned(tuner, args, kwargs)

    def _launch_autotuned(self, tuner, args, kwargs):
        __tracebackhide__ = True
        nargs = dict(zip(tuner.arg_names, args))
        tuner.nargs = nargs
        key = _tuning_key(tuner, nargs, kwargs)
        cache = tuner.__dict__.setdefault("_tlxwb_configs", {})
        ckey = (key, repr(self.config))
        benchmarked = False
        config = cache.get(ckey) if key is not None else None
        if config is None:
            config, benchmarked = self._pick_config(tuner, kwargs)
            if key is not None:
                cache[ckey] = config
        tuner.best_config = config
        full = {**nargs, **kwargs, **config.all_kwargs()}
        if benchmarked:
            tuner.pre_hook(full, reset_only=True)       # reset_to_zero, as after the benchmark
        if config.pre_hook is not None:
            config.pre_hook(full)
        try:
            ret = tuner.fn.run(*args, **kwargs, **config.all_kwargs())
        finally:
            tuner.nargs = None
        if benchmarked and getattr(tuner, "user_defined_post_hook", False):
            tuner.post_hook(full, exception=None)
        return ret

    def _pick_config(self, tuner, kwargs):
        """(the config, whether Triton would have benchmarked to choose it: more than one left after pruning)."""
        import triton
        want = self.config
        try:
            configs = tuner.prune_configs(kwargs)
        except Exception:  # noqa: BLE001 - a pruning hook that needs a GPU: fall back to the declared list
            configs = tuner.configs
        bench = len(tuner.configs) > 1 and len(configs) > 1
        if isinstance(want, triton.Config):
            return want, bench
        if want is None:
            return configs[0], bench
        if isinstance(want, int):
            return configs[want], bench
        # a dict: the pruned configs first (a pruning hook may also fill in heuristic values), then the rest (by
        # identity: Config equality compares every kwarg, and a tuner declares ~100 configs)
        pruned = {id(c) for c in configs}
        for c in list(configs) + [c for c in tuner.configs if id(c) not in pruned]:
            allk = c.all_kwargs()
            if all(allk.get(k) == v for k, v in dict(want).items()):
                return c, bench
        raise SimulationError(f"no autotune config of {tuner.base_fn.__name__} matches config={want!r}",
                              hint=f"pick one of the {len(tuner.configs)} configs, e.g. "
                                   f"{tuner.configs[0].all_kwargs()}")

    def pick_from(self, configs, tuner: str = "autotune"):
        """The config a library launcher's own tuner (``kernels.host.fastest_first``) runs under this simulation,
        which cannot time configs on the CPU: ``config`` picks as it does for a Triton autotuner (an index, or the
        values a config holds), else the first, the launcher's default."""
        configs = list(configs)
        want = self.config
        if want is None:
            return configs[0]
        if isinstance(want, int) and not isinstance(want, bool):
            if -len(configs) <= want < len(configs):
                return configs[want]
            raise SimulationError(f"simulate(config={want}): {tuner} has {len(configs)} configs",
                                  hint=f"pass an index below {len(configs)}, or config= to the launcher itself")
        if isinstance(want, dict):
            for c in configs:
                if all(dict(c).get(k) == v for k, v in want.items()):
                    return c
            raise SimulationError(f"no config of {tuner} matches simulate(config={want!r})",
                                  hint=f"pick one of its {len(configs)} configs, e.g. {dict(configs[0])}, or pass "
                                       "config= to the launcher itself")
        return configs[0]

    def launch(self, jitfn, grid, args, kwargs):
        taken = self._taken.values() if self._taken is not None else []
        snap = _snapshot([*args, *taken], kwargs) if self.schedules > 1 else []
        first = None
        outputs0 = None
        divergent = []
        ordering = []           # outputs that differ only as atomics' free ordering makes them differ
        seeds = [self.seed + i for i in range(self.schedules)]
        for i, seed in enumerate(seeds):
            if i > 0:
                for t, saved in snap:
                    t.copy_(saved)
            run = run_launch(jitfn, grid, args, kwargs, gpu=self.gpu, seed=seed, ctas=self.ctas,
                             order=self.order if i == 0 else "seeded",
                             max_steps=self.max_steps, resident=self.resident, memory=taken,
                             occupancy=self.occupancy, in_flight=self.in_flight,
                             numerics=self.numerics, spills=self.spills,
                             serialized_wgmma=self.serialized_wgmma, track_writes=len(seeds) > 1,
                             recorder=self.recorder, waves=self.waves)
            if i == 0:
                first = run
                outputs0 = [t.clone() for t, _ in snap]
            else:
                if run.deadlock is not None and first.deadlock is None:
                    first.deadlock = run.deadlock
                for f in run.findings:
                    if not any(f.kind == g.kind and f.line == g.line and f.other_line == g.other_line
                               for g in first.findings):
                        first.findings.append(f)
                for (t, _), o in zip(snap, outputs0):
                    if not _same(t, o):
                        kind, why = explain_divergence(t, o, [first.writes, run.writes])
                        if kind == "race":
                            divergent.append(seed)
                            break
                        ordering.append((seed, tuple(t.shape), str(t.dtype).removeprefix("torch."), why))
            if run.deadlock is not None:
                break
        if snap and len(seeds) > 1:
            for (t, _), o in zip(snap, outputs0):
                t.copy_(o)
        for seed in divergent:
            first.finding("schedule-divergence", f"the outputs under schedule seed {seed} differ from seed "
                                                 f"{self.seed}: the result depends on the interleaving (a race)")
        res = SimResult(first, seeds[:len(seeds)])
        res.findings = _errors_first(first.findings)
        # not findings: a GPU orders atomics freely too; said, so that a test comparing bits knows why
        res.atomic_ordering = [f"under schedule seed {seed} a {dt} output of shape {list(shape)} differs from seed "
                               f"{self.seed}: {why}" for seed, shape, dt, why in ordering]
        if self.repair and (res.deadlock is not None or res.errors):
            from .diagnosis import repair
            check = repair.as_check(self.repair)
            opts = dict(gpu=self.gpu, seed=self.seed, ctas=self.ctas, max_steps=self.max_steps,
                        resident=self.resident, memory=taken, occupancy=self.occupancy, in_flight=self.in_flight,
                        spills=self.spills, serialized_wgmma=self.serialized_wgmma, recorder=self.recorder,
                        waves=self.waves)
            repair.diagnose(res, repair.Launch(jitfn, first.grid, args, kwargs, opts, check))
        self.results.append(res)
        if res.deadlock is not None and self.on_deadlock == "raise":
            raise_deadlock(first, res)
        return None


def _errors_first(findings) -> list:
    # warnings (outputs unwritten or non-finite) after the protocol's errors: the first finding is the one to fix
    return sorted(findings, key=lambda f: getattr(f, "severity", "error") != "error")


def _tuning_key(tuner, nargs, kwargs):
    """The key Triton's autotuner caches its choice under (its ``keys`` values and the tensors' dtypes), or None
    for a tuner with one config (never benchmarked)."""
    if len(tuner.configs) <= 1:
        return None
    args = {k: v for k, v in {**nargs, **kwargs}.items() if k in tuner.arg_names}
    key = [args[k] for k in tuner.keys if k in args]
    key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
    try:
        hash(tuple(key))
    except TypeError:
        return None
    return tuple(key)


from .diagnosis.writes import explain_divergence  # noqa: E402


def _same(a, b) -> bool:
    import torch
    if a.dtype.is_floating_point and a.element_size() == 1:     # fp8: torch has no nan_to_num; compare bits
        return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
    if a.dtype.is_floating_point:
        return bool(torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)))
    return bool(torch.equal(a, b))


def simulate(fn=None, *args, grid=None, gpu="H200", seed=0, schedules=1, ctas=None, max_steps=DEFAULT_MAX_STEPS,
             config=None, on_deadlock="raise", resident=None, occupancy=1, in_flight=None, numerics=True,
             spills=0, serialized_wgmma=False, recorder=None, waves=None, repair=None, order="seeded",
             torch_kernels=False, **kwargs):
    """Run TLX kernels on the CPU simulator: a context manager, or a call.

    As a context manager, every launch inside runs simulated, on CPU tensors::

        with simulate(gpu="H200", seed=0) as sim:
            c = matmul(a, b)              # host code unchanged
        sim.result.raise_for_errors()

    As a call, on a kernel (needs ``grid``) or on a host function::

        res = simulate(add_kernel, x, y, out, n, BLOCK_SIZE=1024, grid=(4,))
        res = simulate(matmul, a, b, schedules=20)      # res.value is matmul's return value

    Options: ``gpu`` ("H200", the default: the calibrated Hopper model; "H100"; "B200"), ``seed``,
    ``schedules`` (run N interleavings; outputs that differ are reported), ``order`` ("seeded", the default: the
    seed picks which runnable task goes next, one interleaving the hardware may run; "time": the task earliest in
    simulated time goes next, so the TMA queue, ALUs and L1 are claimed in the GPU's order and the timeline is
    the same for every seed; with ``schedules`` > 1 the first schedule runs in time order, the others seeded),
    ``ctas`` (program ids to simulate: output is then partial), ``max_steps`` (guard against endless loops),
    ``config`` (the autotune config to use: a dict of values, an index, or a triton.Config; default the first),
    ``on_deadlock`` ("raise" a DeadlockError, or "return" the result), ``resident`` (how many
    clusters run at once under one scheduler, for CTAs that wait on each other; default 1. A kernel that
    steals work with CLC starts as many clusters as fit on the GPU, or ``resident``, and each
    ``clc_try_cancel`` takes its slot's next turn: sim/hardware/clc.py),
    ``occupancy`` (CTAs resident per SM on the GPU: with the grid, how many CTAs share the
    TMA/L2 bandwidth, so that simulating a few CTAs times them as they run among all the others),
    ``in_flight`` (that number given outright: a small shape timed as part of a large launch),
    ``numerics`` (False: timing only — TMA moves no data and wgmma computes nothing, so outputs are
    not the kernel's; the barrier protocol, races and every clock are kept; what ``wb.predict`` runs),
    ``spills`` (ptxas's spill loads and stores in bytes per thread, from the compile report: what a warp
    group's loop stores and reloads once per iteration, charged around its async_dots), ``serialized_wgmma`` (ptxas said it
    serialized the wgmma pipeline: each instruction waits for the one before, at the calibrated cost),
    ``recorder`` (None: the plain kernel; ``"waits"``, ``"totals"`` or ``"all"``: the kernel as ``wb.profile``
    instruments it — ``profile(ops="waits")``, ``profile(ops="waits", totals=True)``, ``profile()`` — each op it
    records followed by that recorder's measured cost per record, so that shares and times are those of the
    kernel a measured trace comes from; ``sim/timing/recorder.py``), ``waves`` (None or True: the CTAs of a launch run
    in waves — one simulated, the others replaying its data flow together, with the same values, findings and
    trace — wherever the launch allows it; False: one CTA at a time; ``sim/schedule/batch.py``; the environment variable
    ``TLXWB_SIM_WAVES=0`` makes False the default), ``repair`` (None or True: when a launch deadlocks or races,
    try the small source edits its evidence suggests, each re-run on the same launch, and lead the diagnosis with
    the first that runs clean — ``result.fix``, its ``diff()`` and ``apply()``; sim/diagnosis/repair.py; False: not;
    a function ``ok(args, kwargs) -> bool`` of the launch's arguments after a candidate ran, or the expected
    output tensor(s), also checks a candidate's values; ``TLXWB_SIM_REPAIR=0`` makes False the default),
    ``torch_kernels`` (True: note the kernels the host code runs through torch beside its launches, a
    ``torch.zeros``, a cast, in ``result.torch_kernels``; sim/torch_kernels.py; what ``wb.predict`` charges).

    Clusters (``ctas_per_cga=(n, 1, 1)`` at launch; the grid counts CTAs): the CTAs of a
    cluster run together under one scheduler, with remote arrivals, multicast TMA, 2-CTA
    MMA (``two_ctas=True``) and ``cluster_barrier``. Blackwell (``gpu="B200"``): TMEM,
    tcgen05 MMA whose completion arrives on mbarriers, ``tcgen05_commit``, CLC.
    """
    sim = Simulation(gpu=gpu, seed=seed, schedules=schedules, ctas=ctas, max_steps=max_steps, config=config,
                     on_deadlock=on_deadlock, resident=resident, occupancy=occupancy,
                     in_flight=in_flight, numerics=numerics, spills=spills,
                     serialized_wgmma=serialized_wgmma, recorder=recorder, waves=waves, repair=repair, order=order,
                     torch_kernels=torch_kernels)
    if fn is None:
        if args or kwargs or grid is not None:
            raise SimulationError("simulate(): arguments given without a kernel or function to run",
                                  hint="simulate(kernel, *args, grid=...) or `with simulate(...):`")
        return sim
    from triton.runtime.jit import KernelInterface
    with sim:
        if isinstance(fn, KernelInterface):
            if grid is None:
                raise SimulationError(f"simulate({getattr(fn, '__name__', fn)}): a kernel needs grid=",
                                      hint="pass grid=(n,) or a callable grid(meta)")
            fn[grid](*args, **kwargs)
            value = None
        else:
            value = fn(*args, **kwargs)
    if not sim.results:
        raise SimulationError(f"{getattr(fn, '__name__', fn)} launched no kernel",
                              hint="call a @triton.jit kernel inside the function")
    res = sim.result
    res.value = value
    res.launches = list(sim.results)
    res.torch_kernels = sim.torch_kernels or []
    return res
