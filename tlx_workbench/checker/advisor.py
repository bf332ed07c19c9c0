"""The warp-barrier conversion advisor: which ordinary barriers may become warp barriers
(``tlx.alloc_warp_barrier``), with the reference's seven-point checklist walked on the
evidence, the converted kernel written out (the allocation changed, nothing else) and
compiled, and an A/B of both forms (wb.run + wb.bench on the GPU when there is one, else
the simulator's cycles).
"""
from __future__ import annotations

import ast
import dataclasses
import html
import os
import re
import tempfile

from ..compiler.launch_options import compile_kwargs
from ..errors import TLXWorkbenchError
from .api import _is_kernel, record_launch
from .facts import lane_label, slot_facts
from .rules import Context, _assignments, _kernel_def, _root, live, roles
from .source import source_file, with_kwargs

CHECKLIST = (
    "protected buffer, software-only arrivals",
    "every task replica, warp, predicate and arrival site per phase",
    "count arithmetic: num_warps*32*num_arrivals",
    "every counted lane arrives after its last access (prologue, tail, persistent iterations)",
    "indices, phases and wait sites unchanged",
    "full/TMA barriers stay ordinary",
    "correctness and benchmark of both forms",
)


@dataclasses.dataclass
class Advice:
    """The verdict on one barrier array."""
    barrier: str
    line: int | None
    role: str                                   # "TMA full" | "software empty/reuse" | "MMA" | "remote" | ...
    checks: list = dataclasses.field(default_factory=list)   # [(point, ok | None, evidence)]
    safe: bool = False
    num_warps: int | None = None
    num_arrivals: int | None = None
    replacement: str | None = None              # the new allocation call

    @property
    def reason(self) -> str:
        bad = [f"{p}: {e}" for p, ok, e in self.checks if ok is False]
        return "; ".join(bad) if bad else "all checks pass"


@dataclasses.dataclass
class ABRow:
    form: str
    correct: bool | None
    cycles: float | None = None
    ms: float | None = None
    detail: str = ""


class AdviceResult:
    """Per-barrier advice, the converted kernel (path, source, CompileReport) and the A/B table."""

    def __init__(self, kernel, advice, converted_path=None, converted_report=None, ab=(), notes=()):
        self.kernel = kernel
        self.advice = list(advice)
        self.converted_path = converted_path
        self.converted_report = converted_report
        self.ab = list(ab)
        self.notes = list(notes)

    def __getitem__(self, name) -> Advice:
        for a in self.advice:
            if a.barrier == name:
                return a
        raise KeyError(name)

    @property
    def safe(self) -> list[Advice]:
        return [a for a in self.advice if a.safe]

    def __repr__(self):
        out = [f"AdviceResult({self.kernel}: {len(self.safe)} of {len(self.advice)} barrier(s) safe to convert)"]
        for a in self.advice:
            verdict = (f"SAFE -> {' '.join((a.replacement or '').split())}" if a.safe else
                       f"keep ordinary ({a.reason})")
            out.append(f"  {a.barrier} ({_where(a)}): {verdict}")
            for p, ok, e in a.checks:
                mark = {True: "ok", False: "NO", None: "--"}[ok]
                out.append(f"     [{mark}] {p}: {e}")
        if self.converted_path:
            out.append(f"  converted kernel: {self.converted_path}")
        if self.ab:
            out.append("  A/B: form | correct | cycles (sim) | ms (GPU) | detail")
            for r in self.ab:
                out.append(f"       {r.form} | {r.correct} | {r.cycles if r.cycles is None else round(r.cycles)} | "
                           f"{r.ms} | {r.detail}")
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)

    def _repr_html_(self):
        rows = []
        for a in self.advice:
            colour = "#27ae60" if a.safe else "#7f8c8d"
            checks = "".join(f"<li>{'✔' if ok else ('✘' if ok is False else '–')} <b>{html.escape(p)}</b>: "
                             f"{html.escape(e)}</li>" for p, ok, e in a.checks)
            verdict = (f"safe → <code>{html.escape(a.replacement or '')}</code>" if a.safe else
                       "keep ordinary")
            rows.append(f"<details style='border-left:4px solid {colour};padding-left:6px'><summary>"
                        f"<b>{html.escape(a.barrier)}</b> ({html.escape(_where(a))}): {verdict}"
                        f"</summary><ul>{checks}</ul></details>")
        ab = ""
        if self.ab:
            ab = ("<table><tr><th>form</th><th>correct</th><th>cycles (sim)</th><th>ms (GPU)</th><th>detail</th></tr>"
                  + "".join(f"<tr><td>{html.escape(r.form)}</td><td>{r.correct}</td><td>"
                            f"{'' if r.cycles is None else round(r.cycles)}</td><td>{'' if r.ms is None else r.ms}"
                            f"</td><td>{html.escape(r.detail)}</td></tr>" for r in self.ab) + "</table>")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div class='tlxwb-advice'><b>{html.escape(repr(self).splitlines()[0])}</b>{''.join(rows)}{ab}"
                f"{'<ul>' + notes + '</ul>' if notes else ''}</div>")


def _where(a: Advice) -> str:
    """"line 12, TMA full"; just the role when the line is unknown (never "line None")."""
    return f"line {a.line}, {a.role}" if a.line else a.role


# ---- the checklist -------------------------------------------------------------------------
def _role(b) -> str:
    r = roles(b)
    if "tma" in r:
        return "TMA full"
    if "mma" in r:
        return "MMA"
    if "remote" in r:
        return "remote"
    if "software" in r:
        return "software empty/reuse"
    return "unused"


def _protected_buffer(sf, fn, assigns, bar_name, names) -> tuple[str | None, int | None]:
    """The buffer written right after a wait on `bar_name`: (buffer array, line of the write)."""
    for c in sf.calls:
        if c.name != "barrier_wait" or not (fn.lineno <= c.line <= fn.end_lineno) or not live(sf, c.node, names):
            continue
        bar = c.node.args[0] if c.node.args else next((k.value for k in c.node.keywords if k.arg == "bar"), None)
        if _root(bar, assigns) != bar_name:
            continue
        st = sf.statement_of(c.node)
        if st is None:
            continue
        seq, i = st
        for stmt in seq[i + 1:]:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in (
                        "async_descriptor_load", "local_store", "async_load") and live(sf, node, names):
                    dst = node.args[1] if len(node.args) > 1 else None
                    root = _root(dst, assigns)
                    if root:
                        return root, node.lineno
    return None, None


def _after_last_access(sf, call) -> tuple[bool, str]:
    """Does the arrive follow the completion of every async read before it in its block?"""
    st = sf.statement_of(call.node)
    if st is None:
        return True, "no enclosing block"
    seq, i = st
    last_dot = last_wait = None
    for stmt in seq[:i]:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None)
                if name == "async_dot":
                    last_dot = node.lineno
                elif name == "async_dot_wait":
                    last_wait = node.lineno
    if last_dot is not None and (last_wait is None or last_wait < last_dot):
        return False, f"the async_dot at line {last_dot} may still read the buffer at the arrive (line {call.line})"
    if last_dot is not None:
        return True, f"arrive at line {call.line} follows async_dot_wait at line {last_wait} (the MMA read is done)"
    return True, f"arrive at line {call.line} follows the synchronous reads of its block"


def _advise(ctx: Context, b, fn, assigns) -> Advice:
    sf = ctx.sf
    adv = Advice(b.name, ctx.bar_line(b), _role(b))
    r = roles(b)
    call = ctx.alloc_call(b)
    arrive_sites = [s for s in b.sites if s.op == "arrive"]
    soft_only = r == {"software"}
    buf, buf_line = _protected_buffer(sf, fn, assigns, b.name, ctx.names)
    ev1 = (f"arrivals only from barrier_arrive at line(s) {sorted({s.line for s in arrive_sites})}"
           if soft_only else f"signalled by {', '.join(sorted(r - {'software'}))} (not software-only)")
    if buf:
        ev1 += f"; protects {buf} (written at line {buf_line} after the wait)"
    adv.checks.append((CHECKLIST[0], soft_only, ev1))
    slots = [s for (name, _), lst in ctx.facts.items() if name == b.name for s in lst if s.rounds]
    if not soft_only:
        adv.checks.append((CHECKLIST[5], False, f"{adv.role} barrier: completed by hardware (TMA bytes / MMA / "
                                                f"remote CTA), so it must stay ordinary"))
        return adv
    if not slots:
        adv.checks.append((CHECKLIST[1], None, "no simulator facts: the arrivals per phase are unknown"))
        return adv
    # 2. who arrives per phase
    per_slot = []
    predicated = []
    for s in arrive_sites:
        c = sf.call_at(s.line, "barrier_arrive")
        if c is not None:
            for test, body in sf.enclosing_ifs(c.node):
                from .source import evaluate
                if evaluate(test, ctx.names) is None and "replica" not in test:
                    predicated.append((s.line, test))
    lanes_all = set()
    for sfct in slots:
        lanes = {l: sfct.per_round(a) for l, a in sfct.arrivals.items()}
        lanes_all |= set(lanes)
        per_slot.append((sfct.slot, lanes, sfct.rounds, {l: a.events for l, a in sfct.arrivals.items()}))
    warps = {ctx.warps_of(lane_label(l, ctx.tasks)) for l in lanes_all}
    lane_txt = ", ".join(f"{lane_label(l, ctx.tasks)} ({ctx.warps_of(lane_label(l, ctx.tasks))} warps)"
                         for l in sorted(lanes_all, key=str))
    ok2 = not predicated and len(warps) == 1
    ev2 = f"arriving per phase: {lane_txt}; sites: {sorted({s.line for s in arrive_sites})}"
    if predicated:
        ev2 += "; predicated arrivals: " + ", ".join(f"line {l} under `if {t}`" for l, t in predicated)
    if len(warps) != 1:
        ev2 += "; the arriving tasks differ in warp count"
    adv.checks.append((CHECKLIST[1], ok2, ev2))
    # 3. count arithmetic
    per_round = {sum(lanes.values()) for _, lanes, _, _ in per_slot}
    nw = warps.pop() if len(warps) == 1 else None
    ok3 = len(per_round) == 1 and nw is not None and b.count == next(iter(per_round))
    na = next(iter(per_round)) if len(per_round) == 1 else None
    if ok3:
        ev3 = (f"{na} warp-group arrival(s) per phase (arrive_count={b.count}) -> num_warps={nw}, num_arrivals={na}: "
               f"{nw} x 32 x {na} = {nw * 32 * na} per-thread arrivals")
    else:
        ev3 = f"arrivals per phase by slot: {sorted(per_round)}, arrive_count={b.count}, warps {nw}"
    adv.checks.append((CHECKLIST[2], ok3, ev3))
    # 4. every counted lane arrives in every round, after its last access
    missing = [(slot, lane_label(l, ctx.tasks), ev, rounds) for slot, lanes, rounds, evs in per_slot
               for l, ev in evs.items() if ev != rounds * lanes[l]]
    orders = [_after_last_access(sf, c) for c in (sf.call_at(s.line, "barrier_arrive") for s in arrive_sites) if c]
    ok4 = not missing and all(o for o, _ in orders)
    ev4 = (f"every arriving lane arrives once per round on every slot ({sum(r for _, _, r, _ in per_slot)} slot-rounds "
           f"simulated, persistent tiles included)" if not missing else
           "lanes that skip a round: " + ", ".join(f"{l} on slot {s}: {e} of {r}" for s, l, e, r in missing))
    ev4 += "; " + "; ".join(sorted({e for _, e in orders}))
    adv.checks.append((CHECKLIST[3], ok4, ev4))
    adv.checks.append((CHECKLIST[5], True, "software-arrived barrier: no TMA bytes, no MMA commit, no remote CTA"))
    adv.safe = ok2 and ok3 and ok4
    if adv.safe and call is not None:
        adv.num_warps, adv.num_arrivals = nw, na
        num = call.kwarg("num_barriers", 0)
        adv.replacement = with_kwargs(sf, call, new_name="alloc_warp_barrier",
                                      set_kw={"num_warps": nw, "num_arrivals": na}, drop_kw=("arrive_count",))
        if len(call.node.args) > 1:   # positional arrive_count
            adv.replacement = adv.replacement.replace(f"{num}, {ast.get_source_segment(sf.text, call.node.args[1])}",
                                                      num, 1)
    return adv


# ---- converting and the A/B ------------------------------------------------------------------
def convert_source(file: str, advice: list[Advice]) -> str:
    """The kernel file's text with each safe barrier's allocation replaced, nothing else."""
    sf = source_file(file)
    edits = []
    for a in advice:
        if a.safe and a.replacement:
            call = sf.call_at(a.line, "alloc_barriers")
            # keep the line count: every later line (and so every finding and site) stays where it was
            pad = max(0, call.end_line - call.line - a.replacement.count("\n"))
            new = a.replacement[:-1] + "\n" * pad + ")"
            edits.append((sf.node_span(call.node), new))
    text = sf.text
    for (start, end), new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _load_variant(path: str, text: str, base_globals: dict, target: str | None):
    """Run the converted text as a module that starts from the original kernel's globals.

    A kernel defined in a notebook cell has its imports (triton, tl, tlx, helpers) in
    earlier cells, not in the cell's own text: the variant needs that namespace too.
    """
    import types

    from ..target import offline
    mod = types.ModuleType(os.path.splitext(os.path.basename(path))[0])
    mod.__dict__.update({k: v for k, v in base_globals.items() if not k.startswith("__")})
    mod.__file__ = path
    code = compile(text, path, "exec")
    if target is None:        # for the GPU: module-level DEVICE and driver queries see the real GPU
        exec(code, mod.__dict__)
        return mod
    with offline(target):
        exec(code, mod.__dict__)
    return mod


def _on(v, device=None):
    """A copy of a tensor or TensorDescriptor (on `device`, default where it is); other values as they are."""
    import copy

    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    if isinstance(v, torch.Tensor):
        return v.detach().to(device or v.device, copy=True)
    if isinstance(v, TensorDescriptor):
        c = copy.copy(v)
        c.base = v.base.detach().to(device or v.base.device, copy=True)
        c.block_shape = list(v.block_shape)
        return c
    return v


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _ab_sim(form, host, args, kwargs, reference, gpu, seed, config):
    import torch

    from ..sim import simulate
    cpu_args = [_on(a, "cpu") for a in args]
    # the two forms' cycles are compared: each runs in simulated-time order (a seeded interleaving times them apart)
    res = simulate(host, *cpu_args, gpu=gpu, seed=seed, config=config, on_deadlock="return", order="time", **kwargs)
    out = res.value
    correct = res.ok
    detail = "sim ok" if res.ok else ("deadlock" if res.deadlock is not None else f"{len(res.findings)} finding(s)")
    if reference is not None and out is not None and res.deadlock is None:
        ref = reference(*[_on(a, "cpu") for a in args], **kwargs)
        outs = _as_list(out)
        refs = _as_list(ref)
        err = max(float((o.double() - r.double()).abs().max() / (r.double().abs().max() + 1e-9))
                  for o, r in zip(outs, refs))
        close = all(torch.allclose(o.float(), r.float(), atol=2e-2, rtol=1e-2) for o, r in zip(outs, refs))
        correct = correct and close
        detail += f", max rel err {err:.2e} vs reference"
    return ABRow(form, correct, cycles=res.cycles, detail=detail), out


def _pick_config(tuner, config):
    """The autotune config the A/B runs: as the simulator picks it (a Config, an index, a dict of
    values to match, default the first)."""
    import triton
    if isinstance(config, triton.Config):
        return config
    if isinstance(config, int):
        return tuner.configs[config]
    if isinstance(config, dict):
        for c in tuner.configs:
            allk = c.all_kwargs()
            if all(allk.get(k) == v for k, v in config.items()):
                return c
        raise TLXWorkbenchError(f"no autotune config of {tuner.base_fn.__name__} matches config={config!r}",
                                hint="pass config= as for the simulator: a dict of values, an index or a triton.Config")
    return tuner.configs[0]


class _pinned:
    """Within the block, every autotuner of `kernel_name` in the given namespaces runs one config.

    Both forms must run the config the advice was made for: left alone, the autotuner would time
    every config, the tutorial's own USE_WARP_BARRIER ones included."""

    def __init__(self, namespaces, kernel_name: str, config):
        from triton.runtime.autotuner import Autotuner
        self.saved = []
        self.tuners = [v for ns in namespaces for v in list(ns.values())
                       if isinstance(v, Autotuner) and getattr(v.base_fn, "__name__", None) == kernel_name]
        self.config = config

    def __enter__(self):
        self.saved = []
        for t in self.tuners:
            self.saved.append((t, t.configs, dict(t.cache)))
            t.configs = [_pick_config(t, self.config)]
            t.cache.clear()
        return self

    def __exit__(self, *exc):
        for t, configs, cache in self.saved:
            t.configs = configs
            t.cache.clear()
            t.cache.update(cache)
        return False


def _ab_gpu(form, launch, args, kwargs, grid, refs, pin):
    """One form on the GPU: a verified launch (wb.run) and its timing (wb.bench).

    In this process (``isolate=False``): the watchdog's worker would import the kernel's module
    afresh, with its autotuner unpinned."""
    from ..runtime import bench, run
    gargs = [_on(a, "cuda") for a in args]
    grefs = [_on(r, "cuda") for r in refs] if refs is not None else None
    with pin:
        r = run(launch, *gargs, grid=grid, reference=grefs, isolate=False, **kwargs)
        b = bench(launch, *[_on(a) for a in gargs], grid=grid, isolate=False, with_ceilings=False, **kwargs)
    if r.comparisons:
        err = max(c.rel_error for c in r.comparisons)
        detail = f"GPU ({r.device}): rel err {err:.2e} vs reference" + ("" if r.ok else " (WRONG)")
    else:
        detail = f"GPU ({r.device}): ran (no reference)"
    return ABRow(form, r.ok, ms=b.median_ms, detail=detail), r.outputs


def advise_warp_barriers(fn, *args, target: str = "sm_90", reference=None, config=None, grid=None, gpu: str = "H200",
                         seed: int = 0, ab: bool = True, ab_on: str = "auto", **kwargs) -> AdviceResult:
    """Which barriers may become warp barriers, the converted kernel, and an A/B of both forms.

    `fn` is a host function (called with `args`/`kwargs`) or a kernel (then give ``grid=``).
    ``reference(*args)`` gives the expected output for the A/B; without it both forms are
    compared with each other. The A/B runs on the GPU when there is one (``wb.run`` checks
    each form against the reference, ``wb.bench`` times it, both with the autotune ``config``
    pinned), else on the simulator (its cycle estimate); ``ab_on="gpu"``/``"sim"`` chooses.
    The advice itself always comes from a simulator run (CPU copies of the arguments).

    >>> adv = advise_warp_barriers(mod.matmul, a, b, reference=lambda a, b: a @ b)   # doctest: +SKIP
    >>> adv["bars_empty_b"].num_warps, adv["bars_empty_b"].num_arrivals              # doctest: +SKIP
    (4, 2)
    """
    from ..compiler import compile as _compile_kernel
    host = fn
    if _is_kernel(fn):
        if grid is None:
            raise TLXWorkbenchError("advise_warp_barriers(kernel, ...) needs grid=", hint="pass grid=(n,) or a host "
                                                                                         "function that launches it")
        host = lambda *a, **k: fn[grid](*a, **k)  # noqa: E731
    jitfn, largs, lkwargs, sim = record_launch(host, [_on(a, "cpu") for a in args], kwargs, run=True, gpu=gpu,
                                               seed=seed, config=config)
    report = _compile_kernel(jitfn, *largs, target=target, **compile_kwargs(lkwargs))
    ctx = Context(report, slot_facts(sim.trace))
    sf = ctx.sf
    kfn = _kernel_def(sf, report.kernel)
    assigns = _assignments(kfn)
    advice = [_advise(ctx, b, kfn, assigns) for b in report.barriers if b.kind == "mbarrier"]
    notes = []
    result = AdviceResult(report.kernel, advice, notes=notes)
    if not result.safe:
        notes.append("no barrier is safe to convert: nothing to compare")
        return result
    # the converted variant: the allocation changed, nothing else
    text = convert_source(report.source.file, advice)
    # a path fixed by the content: Triton's on-disk cache is keyed by source text, so the same
    # text must always come from the same file, or cached IR would name another path
    import hashlib
    outdir = os.path.join(tempfile.gettempdir(), "tlxwb_warpbar", hashlib.sha1(text.encode()).hexdigest()[:12])
    os.makedirs(outdir, exist_ok=True)
    # a cell's "file" is named like <ipython-input-3-...>: keep a plain, importable name
    base = re.sub(r"\W", "_", os.path.splitext(os.path.basename(report.source.file))[0]).strip("_") or "kernel"
    path = os.path.join(outdir, f"{base}_warpbar.py")
    with open(path, "w") as f:
        f.write(text)
    result.converted_path = path
    mod = _load_variant(path, text, jitfn.fn.__globals__, target)
    from .api import _jit_of
    new_jit = _jit_of(getattr(mod, jitfn.fn.__name__))
    new_report = _compile_kernel(new_jit, *largs, target=target, **compile_kwargs(lkwargs))
    result.converted_report = new_report
    # 5. indices, phases and wait sites unchanged
    # compared by IR position, not source line: Triton's disk cache may hand back IR whose locs name
    # another file with the same kernel text
    def key(s):
        return (s.op, s.task, s.ir_line, s.args.get("slot"), s.args.get("phase"), s.args.get("bytes"))
    old_sites = {b.name: sorted(map(key, b.sites), key=str) for b in report.barriers}
    for a in result.safe:
        nb = new_report.barrier(a.barrier)
        new_sites = sorted(map(key, nb.sites), key=str)
        same = new_sites == old_sites[a.barrier] and nb.count == a.num_warps * 32 * a.num_arrivals
        a.checks.insert(4, (CHECKLIST[4], same,
                            f"converted kernel: {nb.kind} barrier, count {nb.count} per thread, the same "
                            f"{len(nb.sites)} wait/arrive sites (lines, tasks, slots)" if same else
                            "the converted kernel's sites differ from the original's"))
        a.safe = a.safe and same
    if not ab:
        return result
    # 7. A/B: both forms, correctness and time (on the GPU when there is one, else simulator cycles)
    new_host = host
    if not _is_kernel(fn):
        new_host = getattr(mod, fn.__name__, None)
    else:
        new_fn = getattr(mod, getattr(fn, "__name__", jitfn.fn.__name__), new_jit)
        new_host = lambda *a, **k: new_fn[grid](*a, **k)  # noqa: E731
    from ..target import has_gpu
    on_gpu = has_gpu() if ab_on == "auto" else ab_on == "gpu"
    if on_gpu:
        refs = None
        if reference is not None:
            refs = _as_list(reference(*[_on(a, "cpu") for a in args], **kwargs))
        # both forms from their text, run as modules on the real GPU: a module imported under
        # offline() (as the simulator needs) put its DEVICE on the CPU
        gpu_a = _load_variant(report.source.file, sf.text, jitfn.fn.__globals__, None)
        gpu_b = _load_variant(path, text, jitfn.fn.__globals__, None)
        name = jitfn.fn.__name__ if _is_kernel(fn) else fn.__name__
        launch_a, launch_b = getattr(gpu_a, name), getattr(gpu_b, name)
        pin = _pinned([gpu_a.__dict__, gpu_b.__dict__], jitfn.fn.__name__, config)
        row_a, out_a = _ab_gpu("ordinary (original)", launch_a, args, kwargs, grid, refs, pin)
        row_b, out_b = _ab_gpu("warp barriers (converted)", launch_b, args, kwargs, grid, refs, pin)
    else:
        row_a, out_a = _ab_sim("ordinary (original)", host, args, kwargs, reference, gpu, seed, config)
        row_b, out_b = _ab_sim("warp barriers (converted)", new_host, args, kwargs, reference, gpu, seed, config)
    if reference is None and out_a is not None and out_b is not None:
        import torch
        same = all(torch.equal(x, y) for x, y in zip(_as_list(out_a), _as_list(out_b)))
        row_b.correct = row_b.correct and same
        row_b.detail += ", outputs equal to the original's" if same else ", outputs DIFFER from the original's"
    result.ab = [row_a, row_b]
    ok7 = bool(row_a.correct and row_b.correct)
    if on_gpu:
        ev7 = (f"A/B on the GPU: original {row_a.detail}, {row_a.ms:.4f} ms; converted {row_b.detail}, "
               f"{row_b.ms:.4f} ms (median of wb.bench)")
    else:
        ev7 = (f"A/B on the simulator: original {row_a.detail}, {row_a.cycles:.0f} cycles; converted "
               f"{row_b.detail}, {row_b.cycles:.0f} cycles")
    for a in result.safe:
        a.checks.append((CHECKLIST[6], ok7, ev7))
    return result
