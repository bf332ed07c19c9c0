"""``check``: run the barrier-protocol rules on a kernel, a launch or a CompileReport."""
from __future__ import annotations

from ..compiler.launch_options import compile_kwargs
from ..errors import CompileError, TLXWorkbenchError
from .facts import slot_facts
from .findings import CheckResult
from .rules import ALL_RULES, Context, cta_source_rules, shape_finding_from_error, sim_findings, \
    two_ctas_source_rule


def _is_hopper(target) -> bool:
    """Whether ``target`` names a Hopper GPU (sm_90, hopper, H100, H200, ...): what the simulator runs."""
    from ..target import gpu_model
    try:
        return gpu_model(target).arch == 90
    except TLXWorkbenchError:
        return False


def _is_kernel(obj) -> bool:
    from triton.runtime.jit import KernelInterface
    return isinstance(obj, KernelInterface)


def _is_report(obj) -> bool:
    from ..compiler.report import CompileReport
    return isinstance(obj, CompileReport)


def record_launch(fn, args, kwargs, *, run: bool, gpu="H200", seed=0, config=None, ctas=None):
    """(jitfn, args, kwargs, SimResult | None) of the first kernel the host function `fn` launches.

    With ``run`` the launch is simulated (outputs written back, trace kept); without, it is only
    captured (nothing runs).
    """
    from ..compiler.launches import catch_launches
    from ..sim.api import Simulation

    sim = Simulation(gpu=gpu, seed=seed, config=config, ctas=ctas, on_deadlock="return")
    value = None
    with sim:
        # inside the simulator's catcher (which picks an autotuned launch's config): with ``run`` each launch
        # goes on to the simulator, without it the call stops at the first
        with catch_launches((lambda la: la.proceed()) if run else None, warmups=False, stop=not run) as caught:
            value = fn(*args, **kwargs)
    first = caught.first
    if first is None:
        raise TLXWorkbenchError(f"{getattr(fn, '__name__', fn)} launched no kernel",
                                hint="pass a host function that launches a TLX kernel, or the kernel itself")
    res = sim.results[0] if (run and sim.results) else None
    if res is not None:
        res.value = value
    return first.jit, first.args, first.kwargs, res


def check(kernel_or_launch, *args, target: str = "sm_90", simulate: bool = True, grid=None, config=None,
          gpu: str = "H200", seed: int = 0, ctas=None, sim_result=None, **constexprs) -> CheckResult:
    """Check a TLX kernel's barrier protocol; findings carry the exact line and the exact fix.

    Pass a kernel with example arguments (as for ``compile``; ``grid=`` for the simulator run,
    default one program), a host function with its arguments (its first kernel launch is
    compiled and simulated), or a CompileReport (static rules only). Per-phase rules read
    a short simulator run (Hopper targets, ``simulate=True``); ``sim_result``: the SimResult of this same launch
    when the caller has simulated it already (``%%tlx --sim --check``): the rules read it, nothing is simulated
    again.

    >>> import tlx_workbench as wb
    >>> res = wb.check(mod.matmul, a, b)                      # doctest: +SKIP
    >>> res.ok, [(f.rule_id, f.line, f.fix) for f in res]     # doctest: +SKIP
    """
    notes = []
    sim_res = None
    obj = kernel_or_launch
    if _is_report(obj):
        report = obj
        notes.append("static rules only: pass the kernel or launch (not its CompileReport) for per-phase facts")
    else:
        can_sim = simulate and _is_hopper(target)
        if simulate and not can_sim:
            notes.append(f"the simulator runs Hopper kernels only: {target} is checked statically")
        def simulated():
            if sim_result is not None:
                return sim_result
            from ..sim import simulate as _simulate
            return _simulate(obj, *args, grid=grid or (1,), gpu=gpu, seed=seed, ctas=ctas, config=config,
                             on_deadlock="return", **constexprs)

        try:
            if _is_kernel(obj):
                report = _compile(obj, args, target, config, constexprs)
                if can_sim:
                    sim_res = simulated()
            else:
                jitfn, largs, lkwargs, sim_res = record_launch(obj, args, constexprs,
                                                               run=can_sim and sim_result is None, gpu=gpu,
                                                               seed=seed, config=config, ctas=ctas)
                if can_sim and sim_result is not None:
                    sim_res = sim_result
                report = _compile(jitfn, largs, target, None, compile_kwargs(lkwargs))
        except _ShapeRejected as e:
            return CheckResult([e.finding], kernel=getattr(obj, "__name__", str(obj)),
                               notes=["the compiler rejected the kernel; fix this first"])
        except CompileError as e:
            # uTLX cannot build every cluster kernel yet (remote arrivals on Hopper): the source rules still
            # apply, and the simulator (which runs TLX's cluster ops) still finds deadlocks and races
            jit = _jit_of(obj)
            n = _num_ctas(constexprs, config)
            if jit is None or n < 2:
                raise
            names = {**_config_kwargs(config), **constexprs}
            file, name = jit.fn.__code__.co_filename, jit.fn.__name__
            found = list(cta_source_rules(file, name, names, n)) + list(two_ctas_source_rule(file, name, names))
            if can_sim and sim_res is None and _is_kernel(obj):
                sim_res = simulated()
            found = rank(found + sim_findings(file, sim_res), sim_res)
            where = f" (line {e.line})" if e.line else ""
            rules = "source rules and the simulator's diagnoses" if sim_res is not None else "static source rules"
            return CheckResult(found, kernel=jit.fn.__name__, sim=sim_res,
                               notes=[f"{rules} only: the compiler could not build the kernel{where}: "
                                      f"{e.message.splitlines()[0][:200]}; the per-phase rules need its IR"])
    stopped = sim_res is not None and (sim_res.deadlock is not None or bool(sim_res.races))
    ctx = Context(report, slot_facts(sim_res.trace) if sim_res is not None else None, stopped=stopped)
    findings = []
    for rule in ALL_RULES:
        findings.extend(rule(ctx))
    names = dict(report.constexprs)
    findings.extend(cta_source_rules(report.source.file, report.kernel, names, ctx.num_ctas))
    findings.extend(sim_findings(report.source.file, sim_res))
    if sim_res is not None and sim_res.partial:
        notes.append(f"simulated CTA(s) {list(sim_res.ctas)} only")
    return CheckResult(rank(findings, sim_res), kernel=report.kernel, notes=notes, report=report, sim=sim_res)


def rank(findings: list, sim) -> list:
    """The findings with the line to change first, as the simulator ranks it (the cause of its deadlock, or a
    race it traced to its cause): every view of a diagnosis leads with the same line. Stable otherwise."""
    lead = None
    fix = getattr(sim, "fix", None) if sim is not None else None
    if fix is not None:
        # a repair the simulator verified leads (sim/diagnosis/repair.py); said as a finding when none is at its line
        lead = fix.line
        if not any(f.line == lead for f in findings):
            from .findings import Finding
            findings = [Finding("verified-fix", "error", f"{fix.headline}\n{fix.diff()}", [(fix.file, fix.line)],
                                f"make the change shown at line {fix.line} ({fix.what}); %tlx_fix applies it in "
                                f"a notebook")] + list(findings)
    elif sim is not None:
        d = sim.deadlock
        if d is not None and getattr(d, "cause", None) is not None:
            lead = d.line
        else:
            lead = next((f.line for f in sim.findings if getattr(f, "cause", False)), None)
    if lead is None:
        return list(findings)
    return sorted(findings, key=lambda f: 0 if f.line == lead else 1)


def _jit_of(obj):
    from triton.runtime.jit import JITFunction
    for _ in range(8):
        if isinstance(obj, JITFunction):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def _config_kwargs(config) -> dict:
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    return dict(getattr(config, "kwargs", {}) or {})


def _num_ctas(kwargs: dict, config) -> int:
    cpc = kwargs.get("ctas_per_cga") or getattr(config, "ctas_per_cga", None) or \
        (config.get("ctas_per_cga") if isinstance(config, dict) else None)
    if cpc:
        return int(cpc[0])
    return int(kwargs.get("num_ctas") or _config_kwargs(config).get("NUM_CTAS") or 1)


class _ShapeRejected(Exception):
    def __init__(self, finding):
        self.finding = finding


def _compile(kernel, args, target, config, kwargs):
    from ..compiler import compile as _compile_kernel
    try:
        return _compile_kernel(kernel, *args, target=target, config=config, **kwargs)
    except CompileError as e:
        f = shape_finding_from_error(e, {**_config_kwargs(config), **kwargs})
        if f is not None:
            raise _ShapeRejected(f) from e
        raise
