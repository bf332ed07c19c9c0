"""``%load_ext tlx_magic``: the ``%%tlx`` cell magic and its line magics.

Every magic is a thin shell over the Python API (``compile``, ``simulate``,
``run``, ``bench``, ``profile``, ``check``): :func:`evaluate` does the work and
returns a :class:`CellResult`; the magics parse options, call it and show it.

    %%tlx --check --ref "lambda x, y, out, n: x + y" --bench --bytes "3 * x.numel() * 4" -o r
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...
    add_kernel[(n // 1024,)](x, y, out, n, BLOCK=1024)      # the last line is the launch

The cell's definitions run in the notebook namespace like a normal cell's; the
last statement, when it is a call, is the *launch* the options act on.

Line magics: ``%tlx_bench expr``, ``%tlx_profile expr``, ``%tlx_show obj``,
``%tlx_config`` (session defaults: ``%tlx_config --target sm_100 --timeout 30``).
"""
from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import shlex
import sys
import traceback
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .errors import TLXWorkbenchError


class CellError(TLXWorkbenchError):
    """The cell itself failed (a syntax error, or an exception in its code)."""


class KnobError(TLXWorkbenchError):
    """A ``--knobs`` specification that cannot be read."""


# -- session defaults (%tlx_config) ------------------------------------------------------
DEFAULTS: dict[str, Any] = {"target": "sm_90", "mode": "auto", "timeout": 20.0, "seed": 0, "schedules": 1,
                            "isolate": True}


# -- the launch ----------------------------------------------------------------------------
@dataclasses.dataclass
class Launch:
    """A launch expression, evaluated: ``fn[grid](*args, **kwargs)`` or ``fn(*args, **kwargs)``."""
    text: str
    fn: Any
    args: tuple
    kwargs: dict
    grid: Any = None
    is_kernel: bool = False
    arg_texts: tuple = ()        # the source text of each positional argument ("z", "c_desc", ...)

    def output_positions(self, outputs):
        """``outputs`` names as the launch writes them (``z``) or as the kernel calls them (``z_ptr``)."""
        if outputs is None:
            return None
        return [self.arg_texts.index(o) if isinstance(o, str) and o in self.arg_texts else o for o in outputs]

    @property
    def name(self) -> str:
        from .runtime.launch import launch_name
        return launch_name(self.fn)


def parse_launch(expr: "str | ast.expr", ns: dict, *, filename: str = "<launch>") -> Launch:
    """Evaluate the parts of a call expression in ``ns`` (without making the call)."""
    node = ast.parse(expr, mode="eval").body if isinstance(expr, str) else expr
    text = expr if isinstance(expr, str) else ast.unparse(expr)
    if not isinstance(node, ast.Call):
        raise CellError(f"`{text}` is not a call; the launch must look like kernel[grid](...) or fn(...)",
                        hint="end the cell with the launch, e.g. add_kernel[grid](x, y, out, n, BLOCK=1024)")

    def ev(n):
        return eval(compile(ast.Expression(body=n), filename, "eval"), ns)
    grid = None
    func = node.func
    from .runtime.launch import is_kernel
    if isinstance(func, ast.Subscript):
        target = ev(func.value)
        if is_kernel(target):
            grid = ev(func.slice)
            fn = target
        else:
            fn = ev(func)
    else:
        fn = ev(func)
    args: list = []
    texts: list = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            more = list(ev(a.value))
            args.extend(more)
            texts.extend(f"{ast.unparse(a.value)}[{i}]" for i in range(len(more)))
        else:
            args.append(ev(a))
            texts.append(ast.unparse(a))
    kwargs: dict = {}
    for k in node.keywords:
        if k.arg is None:
            kwargs.update(ev(k.value))
        else:
            kwargs[k.arg] = ev(k.value)
    return Launch(text, fn, tuple(args), kwargs, grid, is_kernel(fn), tuple(texts))


# -- knobs ------------------------------------------------------------------------------------
@dataclasses.dataclass
class Knob:
    name: str
    kind: str                  # "choice" | "range" | "flag"
    values: list

    def widget(self, value=None):
        import ipywidgets as w
        if self.kind == "flag":
            return w.Checkbox(value=bool(value) if value is not None else False, description=self.name)
        if self.kind == "range":
            lo, hi = self.values
            v = value if isinstance(value, int) and lo <= value <= hi else lo
            return w.IntSlider(value=v, min=lo, max=hi, step=1, description=self.name, continuous_update=False)
        v = value if value in self.values else self.values[0]
        return w.Dropdown(options=self.values, value=v, description=self.name)


def _scalar(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_knobs(spec: str) -> list[Knob]:
    """``"BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER"`` -> a dropdown, a slider, a checkbox.

    >>> [(k.name, k.kind, k.values) for k in parse_knobs("BM=64,128 S=2:5 FLAG")]
    [('BM', 'choice', [64, 128]), ('S', 'range', [2, 5]), ('FLAG', 'flag', [False, True])]
    """
    knobs = []
    for part in shlex.split(spec or ""):
        name, eq, vals = part.partition("=")
        if not name.isidentifier():
            raise KnobError(f"knob {part!r}: {name!r} is not a constexpr name",
                            hint='write --knobs "BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER"')
        if not eq:
            knobs.append(Knob(name, "flag", [False, True]))
        elif ":" in vals and "," not in vals:
            lo, _, hi = vals.partition(":")
            try:
                lo_i, hi_i = int(lo), int(hi)
            except ValueError:
                raise KnobError(f"knob {part!r}: a range needs two integers, lo:hi", hint="e.g. NUM_STAGES=2:5") \
                    from None
            if hi_i < lo_i:
                raise KnobError(f"knob {part!r}: the range is empty", hint="write lo:hi with lo <= hi")
            knobs.append(Knob(name, "range", [lo_i, hi_i]))
        else:
            values = [_scalar(v) for v in vals.split(",") if v != ""]
            if not values:
                raise KnobError(f"knob {part!r} has no values", hint="e.g. BM=64,128")
            knobs.append(Knob(name, "choice", values))
    return knobs


# -- the work (plain Python; the magics call it) -------------------------------------------
@dataclasses.dataclass
class CellResult:
    """What ``%%tlx`` produced for one launch: any of sim / run / bench / trace / report / findings."""
    mode: str
    target: str
    launch: str = ""
    constexprs: dict = dataclasses.field(default_factory=dict)
    value: Any = None
    sim: Any = None
    run: Any = None
    bench: Any = None
    trace: Any = None
    report: Any = None
    findings: Any = None
    check: Any = None            # output comparisons in simulator mode
    show: tuple = ()
    notes: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.errors:
            return False
        parts = [p.ok for p in (self.sim, self.run, self.findings) if p is not None and hasattr(p, "ok")]
        parts += [c.ok for c in (self.check or [])]
        return all(parts)

    def __repr__(self) -> str:
        lines = [f"%%tlx {self.mode} ({self.target}): {self.launch or '(definitions only)'}"]
        if self.constexprs:
            lines.append("  constexprs: " + ", ".join(f"{k}={v}" for k, v in self.constexprs.items()))
        for part in (self.report, self.sim, self.run, self.bench, self.trace):
            if part is not None:
                lines.append("  " + repr(part).replace("\n", "\n  "))
        for c in self.check or []:
            lines.append("  " + c.summary().replace("\n", "\n  "))
        if self.findings is not None:
            lines.append(f"  check: {self.findings!r}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        out = [f"<div class='tlxwb-cell'><small>%%tlx &middot; {html.escape(self.mode)} &middot; "
               f"{html.escape(self.target)} &middot; <code>{html.escape(self.launch or 'definitions only')}</code>"]
        if self.constexprs:
            out.append(" &middot; " + html.escape(", ".join(f"{k}={v}" for k, v in self.constexprs.items())))
        out.append("</small>")
        for e in self.errors:
            out.append(_html_of(e))
        for n in self.notes:
            out.append(f"<div><i>{html.escape(n)}</i></div>")
        for part in (self.sim, self.run, self.bench):
            if part is not None:
                out.append(_html_of(part))
        for c in self.check or []:
            out.append(_html_of(c))
        if self.findings is not None:
            out.append(_html_of(self.findings))
        if self.report is not None:
            if "report" in self.show:
                out.append(_html_of(self.report))
            if "memory" in self.show:
                out.append(_view_html("MemoryMapWidget", self.report, "memory map"))
            if "ir" in self.show:
                out.append(_view_html("IRExplorer", self.report, "IR"))
        if self.trace is not None:
            if "timeline" in self.show or not self.show:
                out.append(_view_html("TimelineWidget", self.trace, "timeline"))
            if "barriers" in self.show:
                out.append(_view_html("BarrierPhaseWidget", self.trace, "barrier phases"))
        out.append("</div>")
        return "".join(out)


def _html_of(obj) -> str:
    if hasattr(obj, "_repr_html_"):
        try:
            h = obj._repr_html_()
            if h:
                return h
        except Exception:  # a view that cannot render must not hide the rest
            pass
    if isinstance(obj, (list, tuple)):
        return "".join(_html_of(o) for o in obj) or "<div>(no findings)</div>"
    return f"<pre>{html.escape(repr(obj))}</pre>"


def _view_html(widget: str, obj, what: str) -> str:
    """The static HTML of a widget view, or a note saying the view is not there yet."""
    try:
        from . import widgets
        cls = getattr(widgets, widget, None)
        if cls is None:
            raise ImportError(widget)
        view = cls(obj)
        bundle = view._repr_mimebundle_() if hasattr(view, "_repr_mimebundle_") else None
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if isinstance(bundle, dict) and "text/html" in bundle:
            return bundle["text/html"]
        return _html_of(view)
    except ImportError:
        if what == "IR" and hasattr(obj, "ir"):
            return f"<details><summary>TTGIR</summary><pre>{html.escape(obj.ir('ttgir'))}</pre></details>"
        if what == "timeline":
            try:
                from .widgets import timeline_html
                return timeline_html(obj)
            except ImportError:
                pass
        return f"<div><i>{html.escape(what)} view: tlx_workbench.widgets.{widget} is not available</i></div>"


def show_widgets(result: CellResult) -> list:
    """The live widgets for ``result`` (shown under its HTML), those that exist."""
    out = []
    try:
        from . import widgets
    except ImportError:
        return out
    wanted = [("timeline", "TimelineWidget", result.trace), ("barriers", "BarrierPhaseWidget", result.trace),
              ("memory", "MemoryMapWidget", result.report), ("ir", "IRExplorer", result.report)]
    for key, name, obj in wanted:
        if key in result.show and obj is not None and hasattr(widgets, name):
            try:
                out.append(getattr(widgets, name)(obj))
            except Exception as e:  # pragma: no cover - a broken view must not break the cell
                result.notes.append(f"{name} failed: {e}")
    return out


def has_gpu() -> bool:
    from .target import has_gpu as _has
    return _has()


def resolve_mode(mode: str) -> str:
    if mode in ("sim", "gpu"):
        return mode
    return "gpu" if has_gpu() else "sim"


def _outputs_of(launch: Launch, outputs, value):
    from .runtime.launch import _tensor_of, output_positions
    if launch.is_kernel:
        return [_tensor_of(launch.args[i]) for i in output_positions(launch.fn, launch.args, outputs)]
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def capture_kernel_launch(launch: Launch, kwargs: dict):
    """(kernel, args, kwargs) of the first kernel a host function launches, without running it.

    Used to compile what a host function would launch (for --report / --memory / --ir).
    """
    if launch.is_kernel:
        return launch.fn, launch.args, kwargs
    from .runtime.profiling import _kernels_named_by
    kernels = _kernels_named_by(launch.fn)
    if not kernels:
        raise CellError(f"{launch.name} names no @triton.jit kernel to compile",
                        hint="end the cell with the kernel launch itself: kernel[grid](...)")
    captured = []

    class _Stop(Exception):
        pass

    def recorder(k):
        def run(*args, grid=None, warmup=False, **kw):
            captured.append((k, args, kw))
            raise _Stop
        return run
    saved = []
    for _, k in kernels:
        saved.append((k, k.__dict__.get("run")))
        k.run = recorder(k)
    try:
        launch.fn(*launch.args, **kwargs)
    except _Stop:
        pass
    finally:
        for k, old in saved:
            if old is None:
                del k.run
            else:
                k.run = old
    if not captured:
        raise CellError(f"{launch.name} launched no kernel", hint="call the kernel inside the function")
    return captured[0]


def evaluate(launch: Launch | None, *, mode: str = "auto", target: str = "sm_90", check: bool = False,
             reference=None, outputs=None, bench: bool = False, flops=None, nbytes=None, baselines=None,
             profile: bool = False, show: tuple = (), constexprs: dict | None = None, timeout: float = 20.0,
             seed: int = 0, schedules: int = 1, isolate: bool = True) -> CellResult:
    """Do what ``%%tlx`` options ask for one launch (the magic's engine; plain Python).

    >>> res = evaluate(parse_launch("add_kernel[(4,)](x, y, out, n, BLOCK=256)", ns), mode="sim",
    ...                check=True, reference=lambda x, y, out, n: x + y)          # doctest: +SKIP
    """
    import tlx_workbench as wb
    mode = resolve_mode(mode)
    if launch is not None:
        outputs = launch.output_positions(outputs)
    res = CellResult(mode=mode, target=target, launch=launch.text if launch else "", show=tuple(show))
    if launch is None:
        return res
    kwargs = dict(launch.kwargs)
    if constexprs:
        if not launch.is_kernel:
            params = inspect.signature(launch.fn).parameters
            missing = [k for k in constexprs if k not in params and not any(
                p.kind == p.VAR_KEYWORD for p in params.values())]
            if missing:
                raise KnobError(f"{launch.name} takes no keyword {missing[0]!r}, so the knob cannot set it",
                                hint="end the cell with the kernel launch itself (kernel[grid](...)), or give the "
                                     "host function that keyword")
        kwargs.update(constexprs)
    res.constexprs = {k: v for k, v in kwargs.items() if not hasattr(v, "shape")}
    from .target import gpu_model
    model = "H200" if gpu_model(target).arch == 90 else gpu_model(target).name
    if mode == "sim" and gpu_model(target).arch != 90:
        # the simulator models Hopper; a Blackwell target still compiles for sm_100 above
        res.notes.append(f"the simulator models Hopper: the run uses the H200 cost model, the compile {target}")
        model = "H200"

    # compile (offline) when a static view is wanted, or for the static checker on the GPU path
    checker = _has_checker() if check else False
    if {"report", "memory", "ir"} & set(show) or (checker and mode == "gpu"):
        try:
            k, cargs, ckw = capture_kernel_launch(launch, kwargs) if not launch.is_kernel else \
                (launch.fn, launch.args, kwargs)
            res.report = wb.compile(k, *cargs, target=target, **ckw)
        except ImportError as e:
            res.notes.append(f"compiler not available ({e}); --report/--memory/--ir skipped")
        except TLXWorkbenchError as e:
            res.errors.append(e)
            return res
    if checker:
        from .checker import check as _check
        try:
            if mode == "sim":
                # the checker's per-phase rules read its own short simulator run of this launch
                res.findings = _check(launch.fn, *launch.args, target=target, grid=launch.grid, gpu=model,
                                        seed=seed, **kwargs)
            elif res.report is not None:
                # GPU tensors do not go through the simulator: the static rules only
                res.findings = _check(res.report)
        except TLXWorkbenchError as e:
            res.errors.append(e)
        except Exception as e:  # a checker problem must not hide the run
            res.notes.append(f"barrier-protocol check could not run: {type(e).__name__}: {e}")
    elif check:
        res.notes.append("tlx_workbench.checker is not available: only the outputs are checked")

    if mode == "sim":
        _evaluate_sim(res, launch, kwargs, check=check, reference=reference, outputs=outputs, model=model,
                      seed=seed, schedules=schedules)
        if bench:
            res.notes.append("--bench needs a GPU: in simulator mode the simulated cycles are shown instead "
                             f"({res.sim.cycles:.0f} cycles)" if res.sim is not None else "--bench needs a GPU")
        return res

    # GPU
    from .runtime.launch import run as _run
    try:
        if check or not (bench or profile):
            res.run = _run(launch.fn, *launch.args, grid=launch.grid, reference=reference if check else None,
                           outputs=outputs, timeout=timeout, isolate=isolate, **kwargs)
            res.value = res.run.output if res.run.outputs else None
        if bench:
            res.bench = wb.bench(launch.fn, *launch.args, grid=launch.grid, flops=flops, bytes=nbytes,
                                 baselines=baselines, timeout=timeout, isolate=isolate, **kwargs)
        if profile:
            res.trace = wb.profile(launch.fn, *launch.args, grid=launch.grid, timeout=timeout, isolate=isolate,
                                   **kwargs)
    except TLXWorkbenchError as e:
        res.errors.append(e)
        from .runtime.watchdog import KernelTimeoutError
        if isinstance(e, KernelTimeoutError):
            res.notes.append("the simulator's diagnosis of the same launch follows (on CPU copies of the inputs)")
            try:
                _diagnose_hang(res, launch, kwargs, model=model, seed=seed)
            except Exception as d:  # the diagnosis is a bonus; the timeout error stands
                res.notes.append(f"simulator diagnosis unavailable: {d}")
    return res


def _has_checker() -> bool:
    try:
        from .checker import check  # noqa: F401
        return True
    except ImportError:
        return False


def _evaluate_sim(res, launch, kwargs, *, check, reference, outputs, model, seed, schedules):
    import tlx_workbench as wb
    from .runtime.launch import compute_reference, poisoned_allocations, _tensor_of, output_positions
    from .runtime.verify import compare, poison_
    from .runtime.launch import infer_tile
    refs = None
    if check and reference is not None:
        refs, _ = compute_reference(reference, launch.args)
    if launch.is_kernel:
        for i in output_positions(launch.fn, launch.args, outputs):
            poison_(_tensor_of(launch.args[i]))
    try:
        with poisoned_allocations():
            sim = wb.simulate(launch.fn, *launch.args, grid=launch.grid, gpu=model, seed=seed, schedules=schedules,
                              on_deadlock="return", **kwargs)
    except TLXWorkbenchError as e:
        res.errors.append(e)
        return
    res.sim, res.trace, res.value = sim, sim.trace, sim.value
    if sim.deadlock is not None:
        try:
            sim.raise_for_errors()
        except TLXWorkbenchError as e:
            res.errors.append(e)
        return
    if refs is not None:
        outs = _outputs_of(launch, outputs, sim.value)
        res.check = [compare(o, r, tile=infer_tile(kwargs, o.dim()), name=f"out{i}" if len(outs) > 1 else "out")
                     for i, (o, r) in enumerate(zip(outs, refs))]


def _diagnose_hang(res, launch, kwargs, *, model, seed):
    """After a GPU timeout: simulate the same launch on CPU copies and show the deadlock report."""
    import torch

    import tlx_workbench as wb
    from .target import offline

    def cpu(a):
        if isinstance(a, torch.Tensor):
            return a.detach().cpu().clone()
        base = getattr(a, "base", None)
        if isinstance(base, torch.Tensor):
            import copy
            d = copy.copy(a)
            d.base = base.detach().cpu().clone()
            return d
        return a
    with offline(model):
        sim = wb.simulate(launch.fn, *[cpu(a) for a in launch.args], grid=launch.grid, gpu=model, seed=seed,
                          on_deadlock="return", **{k: cpu(v) for k, v in kwargs.items()})
    res.sim, res.trace = sim, sim.trace


# -- the magics ----------------------------------------------------------------------------
def _cell_error(e: BaseException, filename: str, kind: str = "the cell raised") -> TLXWorkbenchError:
    if isinstance(e, TLXWorkbenchError):
        return e
    if isinstance(e, SyntaxError):
        return CellError(f"syntax error in the cell: {e.msg}", file=filename, line=e.lineno,
                         hint="fix the line shown; nothing was run and your variables are unchanged")
    line = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    err = CellError(f"{kind} {type(e).__name__}: {e}", file=filename, line=line,
                    hint="fix the cell and run it again; variables defined before the error are kept",
                    detail="".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return err


def _unquote(args):
    """IPython's magic_arguments keeps the quotes around an option's value; take them off."""
    for k, v in vars(args).items():
        if isinstance(v, str) and len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            setattr(args, k, v[1:-1])
        elif isinstance(v, list):
            setattr(args, k, [x[1:-1] if isinstance(x, str) and len(x) >= 2 and x[0] == x[-1] and x[0] in "'\""
                              else x for x in v])
    return args


def _help(magic, line: str) -> bool:
    """``--help`` / ``-h``: print the magic's usage (magic_arguments builds it into the docstring)."""
    tokens = line.split()
    if "--help" in tokens or "-h" in tokens:
        print(inspect.getdoc(magic) or "")
        return True
    return False


def _display(obj) -> None:
    from IPython.display import display
    display(obj)


@magics_class
class TLXMagics(Magics):
    """``%%tlx``, ``%tlx_bench``, ``%tlx_profile``, ``%tlx_show``, ``%tlx_config``."""

    def __init__(self, shell=None):
        super().__init__(shell)
        self.settings = dict(DEFAULTS)
        self.last_result: CellResult | None = None
        self.last_error: TLXWorkbenchError | None = None
        self.panels: list = []

    # ---- helpers
    def _ns(self) -> dict:
        return self.shell.user_ns

    def _eval(self, expr: str | None, what: str):
        if expr is None:
            return None
        try:
            return eval(expr, self._ns())
        except Exception as e:
            raise CellError(f"cannot evaluate {what} `{expr}`: {type(e).__name__}: {e}",
                            hint=f"{what} is a Python expression over the notebook's variables") from None

    def _fail(self, e: BaseException, filename: str = "<tlx>") -> None:
        err = _cell_error(e, filename)
        self.last_error = err
        _display(err)

    def _mode(self, args) -> str:
        if getattr(args, "sim", False):
            return "sim"
        if getattr(args, "gpu", False):
            return "gpu"
        return self.settings["mode"]

    def _offline_ctx(self, mode: str, target: str):
        """Without a GPU, run the cell under an offline target so TLX modules import and tensors live on CPU."""
        import contextlib
        if resolve_mode(mode) == "sim" and not has_gpu():
            from .target import current_model, offline
            if current_model() is None:
                return offline(target)
        return contextlib.nullcontext()

    def _baselines(self, items) -> dict:
        out = {}
        for item in items or []:
            name, eq, expr = item.partition("=")
            if not eq:
                raise CellError(f"--baseline {item!r}: write NAME=EXPR", hint='e.g. --baseline "cuBLAS=a @ b"')
            code = compile(expr, f"<baseline {name}>", "eval")
            ns = self._ns()
            out[name] = (lambda code=code, ns=ns: eval(code, ns))
        return out

    # ---- %%tlx
    @magic_arguments()
    @argument("--target", "-t", default=None, help="sm_90 (Hopper, default) or sm_100 (Blackwell)")
    @argument("--sim", action="store_true", help="run on the CPU simulator")
    @argument("--gpu", action="store_true", help="run on the GPU (default when one is present)")
    @argument("--check", action="store_true",
              help="verify outputs against --ref (and run the barrier-protocol checker when present)")
    @argument("--ref", default=None, help="reference: an expression giving a function of the launch's arguments, "
                                          "or the expected tensor(s)")
    @argument("--outputs", default=None, help="comma-separated names of the kernel arguments it writes")
    @argument("--bench", action="store_true", help="benchmark with do_bench (GPU)")
    @argument("--flops", default=None, help="expression: flops per call (for TFLOP/s)")
    @argument("--bytes", default=None, help="expression: bytes moved per call (for GB/s)")
    @argument("--baseline", action="append", default=None, help="NAME=EXPR timed alongside, e.g. cuBLAS=a @ b")
    @argument("--profile", action="store_true", help="measure a per-warp-group timeline (GPU)")
    @argument("--report", action="store_true", help="show the compile report")
    @argument("--memory", action="store_true", help="show the SMEM/TMEM memory map")
    @argument("--ir", action="store_true", help="show the IR explorer")
    @argument("--timeline", action="store_true", help="show the timeline (simulated or measured)")
    @argument("--barriers", action="store_true", help="show barrier phases")
    @argument("--knobs", default=None, help='constexpr controls, e.g. "BM=64,128 NUM_STAGES=2:5 USE_WARP_BARRIER"')
    @argument("--timeout", type=float, default=None, help="seconds before a GPU launch counts as hung")
    @argument("--seed", type=int, default=None, help="simulator schedule seed")
    @argument("-o", "--output", default=None, dest="output", help="keep the result object in this variable")
    @cell_magic
    def tlx(self, line, cell):
        """Define TLX kernel(s) and act on the launch in the cell's last line.

        The cell runs in the notebook namespace like a normal cell; if its last
        statement is a call (``kernel[grid](...)`` or ``host_fn(...)``), that call is
        the launch: it is simulated (``--sim``) or run on the GPU (``--gpu``), checked,
        benchmarked, profiled and shown as the options ask.
        """
        if _help(self.tlx, line):
            return None
        try:
            args = _unquote(parse_argstring(self.tlx, line))
        except Exception as e:  # argparse errors: show them, keep going
            self._fail(CellError(f"%%tlx options: {e}", hint="see %%tlx --help"))
            return None
        target = args.target or self.settings["target"]
        mode = self._mode(args)
        show = tuple(k for k in ("report", "memory", "ir", "timeline", "barriers") if getattr(args, k))
        filename = "<tlx cell>"
        try:
            tree = ast.parse(cell)
        except SyntaxError as e:
            self._fail(e, filename)
            return None
        launch_node = None
        body = cell
        if tree.body and isinstance(tree.body[-1], ast.Expr) and isinstance(tree.body[-1].value, ast.Call):
            launch_node = tree.body[-1]
            lines = cell.splitlines(keepends=True)
            body = "".join(lines[:launch_node.lineno - 1])
        with self._offline_ctx(mode, target):
            try:
                # a linecache-backed file name, so triton.jit can read the kernels' source
                filename = self.shell.compile.cache(body, self.shell.execution_count)
                exec(compile(body, filename, "exec"), self._ns())
            except BaseException as e:  # noqa: BLE001 - a bad cell must not kill the notebook
                self._fail(e, filename)
                return None
            if launch_node is None:
                res = CellResult(mode=resolve_mode(mode), target=target, show=show)
                res.notes.append("definitions only: end the cell with a launch to simulate, run or benchmark it")
                return self._finish(res, args)
            try:
                launch = parse_launch(launch_node.value, self._ns(), filename=filename)
                options = dict(
                    mode=mode, target=target, check=args.check, reference=self._eval(args.ref, "--ref"),
                    outputs=args.outputs.split(",") if args.outputs else None, bench=args.bench,
                    flops=self._eval(args.flops, "--flops"), nbytes=self._eval(args.bytes, "--bytes"),
                    baselines=self._baselines(args.baseline), profile=args.profile, show=show,
                    timeout=args.timeout or self.settings["timeout"],
                    seed=args.seed if args.seed is not None else self.settings["seed"],
                    schedules=self.settings["schedules"], isolate=self.settings["isolate"])
                knobs = parse_knobs(args.knobs) if args.knobs else []
                if knobs:
                    return self._knob_panel(launch, knobs, options, args)
                res = evaluate(launch, **options)
            except BaseException as e:  # noqa: BLE001
                self._fail(e, filename)
                return None
        return self._finish(res, args)

    def _finish(self, res: CellResult, args):
        self.last_result = res
        if getattr(args, "output", None):
            self._ns()[args.output] = res
        _display(res)
        for w in show_widgets(res):
            _display(w)
        return None

    def _knob_panel(self, launch: Launch, knobs: list[Knob], options: dict, args):
        panel = KnobPanel(launch, knobs, options, on_result=lambda r: self._store(r, args))
        self.panels.append(panel)
        _display(panel.widget)
        return None

    def _store(self, res, args):
        self.last_result = res
        if getattr(args, "output", None):
            self._ns()[args.output] = res

    # ---- %tlx_bench
    @magic_arguments()
    @argument("--flops", default=None, help="expression: flops per call")
    @argument("--bytes", default=None, help="expression: bytes per call")
    @argument("--baseline", action="append", default=None, help="NAME=EXPR timed alongside")
    @argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung")
    @argument("-o", "--output", default=None, dest="output", help="keep the BenchResult in this variable")
    @argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)")
    @line_magic
    def tlx_bench(self, line):
        """Benchmark one launch expression on the GPU: ``%tlx_bench matmul(a, b) --flops 2*M*N*K``."""
        if _help(self.tlx_bench, line):
            return None
        try:
            args = _unquote(parse_argstring(self.tlx_bench, line))
            launch = parse_launch(" ".join(args.expr), self._ns())
            import tlx_workbench as wb
            res = wb.bench(launch.fn, *launch.args, grid=launch.grid, flops=self._eval(args.flops, "--flops"),
                           bytes=self._eval(args.bytes, "--bytes"), baselines=self._baselines(args.baseline),
                           timeout=args.timeout or self.settings["timeout"], isolate=self.settings["isolate"],
                           **launch.kwargs)
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
            return None
        if args.output:
            self._ns()[args.output] = res
        _display(res)
        return None

    # ---- %tlx_profile
    @magic_arguments()
    @argument("--sim", action="store_true", help="the simulated timeline instead of a measured one")
    @argument("--timeout", type=float, default=None, help="seconds before a launch counts as hung")
    @argument("-o", "--output", default=None, dest="output", help="keep the Trace in this variable")
    @argument("expr", nargs="+", help="the launch: kernel[grid](...) or fn(...)")
    @line_magic
    def tlx_profile(self, line):
        """A timeline of one launch: measured on the GPU, simulated without one (or with --sim)."""
        if _help(self.tlx_profile, line):
            return None
        try:
            args = _unquote(parse_argstring(self.tlx_profile, line))
            mode = "sim" if args.sim else self.settings["mode"]
            with self._offline_ctx(mode, self.settings["target"]):
                launch = parse_launch(" ".join(args.expr), self._ns())
                res = evaluate(launch, mode=mode, target=self.settings["target"], profile=True, show=("timeline",),
                               timeout=args.timeout or self.settings["timeout"], seed=self.settings["seed"],
                               isolate=self.settings["isolate"])
            if res.errors:
                raise res.errors[0]
            trace = res.trace
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
            return None
        if args.output:
            self._ns()[args.output] = trace
        _display(res)
        for w in show_widgets(res):
            _display(w)
        return None

    # ---- %tlx_show
    @magic_arguments()
    @argument("--barriers", action="store_true", help="barrier phases instead of the timeline (traces)")
    @argument("obj", help="a variable: a Trace, CompileReport, SimResult, RunResult, BenchResult or %%tlx result")
    @line_magic
    def tlx_show(self, line):
        """Show a result object with its best view: ``%tlx_show trace``."""
        if _help(self.tlx_show, line):
            return None
        try:
            args = _unquote(parse_argstring(self.tlx_show, line))
            obj = self._eval(args.obj, "the object")
            _display(show_object(obj, barriers=args.barriers))
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
        return None

    # ---- %tlx_config
    @magic_arguments()
    @argument("--target", default=None, help="default target: sm_90 or sm_100")
    @argument("--mode", default=None, choices=["auto", "sim", "gpu"], help="default mode")
    @argument("--timeout", type=float, default=None, help="default GPU launch timeout, seconds")
    @argument("--seed", type=int, default=None, help="default simulator seed")
    @argument("--schedules", type=int, default=None, help="simulator schedules to explore")
    @argument("--isolate", default=None, choices=["yes", "no"],
              help="run GPU launches in the watchdog worker (yes, default) or in this process")
    @argument("--reset", action="store_true", help="back to the defaults")
    @line_magic
    def tlx_config(self, line):
        """Session defaults for the TLX magics; with no option, show them."""
        if _help(self.tlx_config, line):
            return None
        try:
            args = _unquote(parse_argstring(self.tlx_config, line))
        except BaseException as e:  # noqa: BLE001
            self._fail(e)
            return None
        if args.reset:
            self.settings = dict(DEFAULTS)
        for key in ("target", "mode", "timeout", "seed", "schedules"):
            v = getattr(args, key)
            if v is not None:
                if key == "target":
                    from .target import gpu_model
                    try:
                        gpu_model(v)
                    except TLXWorkbenchError as e:
                        self._fail(e)
                        return None
                self.settings[key] = v
        if args.isolate is not None:
            self.settings["isolate"] = args.isolate == "yes"
        return dict(self.settings)


def show_object(obj, *, barriers: bool = False):
    """The best view of ``obj`` for display (a widget when one exists, else the object)."""
    from .trace import Trace
    if isinstance(obj, Trace):
        res = CellResult(mode=obj.source, target="", trace=obj, show=("barriers",) if barriers else ("timeline",))
        return res
    if isinstance(obj, CellResult):
        return obj
    if type(obj).__name__ == "SimResult":
        return CellResult(mode="sim", target="", sim=obj, trace=obj.trace, show=("timeline",))
    if type(obj).__name__ == "CompileReport":
        return CellResult(mode="compile", target=getattr(obj, "target", ""), report=obj,
                          show=("report", "memory"))
    return obj


class KnobPanel:
    """ipywidgets controls for constexprs; a change re-evaluates the launch into one Output, in place."""

    def __init__(self, launch: Launch, knobs: list[Knob], options: dict, on_result=None):
        import ipywidgets as w
        self.launch, self.knobs, self.options = launch, knobs, dict(options)
        self.on_result = on_result
        self.controls = {k.name: k.widget(launch.kwargs.get(k.name)) for k in knobs}
        self.output = w.Output()
        self.status = w.HTML()
        self.results: list[CellResult] = []
        for c in self.controls.values():
            c.observe(self._changed, names="value")
        self.widget = w.VBox([w.HBox(list(self.controls.values())), self.status, self.output])
        self.update()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def _changed(self, change) -> None:
        self.update()

    def update(self) -> CellResult | None:
        """Re-run the launch with the controls' values; show the result in the Output."""
        values = self.values()
        self.status.value = "<i>running with " + html.escape(", ".join(f"{k}={v}" for k, v in values.items())) + \
                            "…</i>"
        try:
            ctx = _offline_for(self.options)
            with ctx:
                res = evaluate(self.launch, constexprs=values, **self.options)
        except BaseException as e:  # noqa: BLE001 - a bad combination must not break the panel
            res = CellResult(mode=resolve_mode(self.options.get("mode", "auto")),
                             target=self.options.get("target", ""), launch=self.launch.text, constexprs=values)
            res.errors.append(_cell_error(e, "<knobs>", "this combination raised"))
        self.results.append(res)
        self.output.clear_output(wait=True)
        with self.output:
            _display(res)
            for wdg in show_widgets(res):
                _display(wdg)
        self.status.value = ""
        if self.on_result is not None:
            self.on_result(res)
        return res

    @property
    def result(self) -> CellResult | None:
        return self.results[-1] if self.results else None


def _offline_for(options: dict):
    import contextlib
    if resolve_mode(options.get("mode", "auto")) == "sim" and not has_gpu():
        from .target import current_model, offline
        if current_model() is None:
            return offline(options.get("target", "sm_90"))
    return contextlib.nullcontext()


def load_ipython_extension(ipython) -> None:
    """``%load_ext tlx_magic``."""
    ipython.register_magics(TLXMagics)


def unload_ipython_extension(ipython) -> None:
    # IPython has no unregister; drop our names so a reload starts clean
    mm = ipython.magics_manager
    for kind, names in (("cell", ["tlx"]), ("line", ["tlx_bench", "tlx_profile", "tlx_show", "tlx_config"])):
        for n in names:
            mm.magics[kind].pop(n, None)
    mm.registry.pop("TLXMagics", None)
