"""The IPython side: the :class:`TLXMagics` class (thin shells over :func:`evaluate`) and the extension hooks."""
from __future__ import annotations

from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import magic_arguments

from ..errors import TLXWorkbenchError
from . import explore as explore_magic
from . import options as opts
from .cells import cache_cell, cell_number
from .diagnosis import error_html, error_text
from .errors import CellError, CellFailed, cell_error
from .evaluate import evaluate, offline_context, resolve_mode
from .knobs import CellCode, Knob, KnobPanel, parse_knobs
from .launch import Launch, parse_launch, split_cell
from .options import DEFAULTS, print_help
from .result import CellResult
from .views import display, display_result, safe_html, show_object


@magics_class
class TLXMagics(Magics):
    """``%%tlx``, ``%tlx_bench``, ``%tlx_profile``, ``%tlx_show``, ``%tlx_explore``, ``%tlx_config``."""

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

    def _fail(self, e: BaseException, filename: str = "<tlx>", *, raise_: bool = False,
              where: str = "the cell") -> None:
        """Show ``e`` as one error box; with ``raise_``, then fail the cell (CellFailed)."""
        if isinstance(e, CellFailed):
            raise e               # already shown: the cell fails once, as it said
        err = cell_error(e, filename)
        self.last_error = err
        display({"text/plain": error_text(err), "text/html": safe_html(error_html(err))}, raw=True)
        if raise_:
            raise CellFailed(error_text(err).splitlines()[0], error=err, where=where) from None
        return None

    def _raises(self, line: str) -> bool:
        """Whether a failure of this magic's cell fails the cell: the session's ``--raise``, unless the line
        says ``--no-raise`` (read from the raw line, so a line that does not parse still honours it)."""
        return self.settings["raise"] and "--no-raise" not in line.split()

    def _where(self) -> str:
        return f"cell [{cell_number(self.shell)}]"

    def _line(self, magic, line: str, work):
        """What every line magic does around its work: ``--help`` prints its options; otherwise
        ``work(args, raise_, where)`` runs on the parsed line, and a failure (the parse's too) is shown as one error
        box and fails the cell unless the line says ``--no-raise``."""
        if print_help(magic, line):
            return None
        raise_, where = self._raises(line), self._where()
        try:
            return work(opts.parse(magic, line), raise_, where)
        except BaseException as e:  # noqa: BLE001
            return self._fail(e, raise_=raise_, where=where)

    def _mode(self, args) -> str:
        if getattr(args, "sim", False):
            return "sim"
        if getattr(args, "gpu", False):
            return "gpu"
        return self.settings["mode"]

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
    @opts.cell_usage
    @magic_arguments()
    @opts.declare(opts.TLX_OPTIONS)
    @line_cell_magic
    def tlx(self, line, cell=None):
        """Define TLX kernel(s) and act on the launch in the cell's last line.

        The cell runs in the notebook namespace like a normal cell; if its last
        statement is a call (``kernel[grid](...)`` or ``host_fn(...)``), that call is
        the launch: it is simulated (``--sim``) or run on the GPU (``--gpu``), checked,
        benchmarked, profiled and shown as the options ask. A cell that fails (a syntax
        error, an exception, a compile error, a deadlock, a race, a wrong output) shows
        its diagnosis and then fails, so "Run All" stops there; ``--no-raise`` keeps going.
        """
        if print_help(self.tlx, line, opts.magics_list(type(self), skip="tlx")):
            return None
        n = cell_number(self.shell)
        if cell is None:
            # the line form exists for "%tlx --help" alone: a kernel needs a cell
            return self._fail(CellError("%tlx is the line form of a cell magic: it only answers --help",
                                        hint="write %%tlx (two %) as the first line of a cell, the kernel and its "
                                             "launch below it"),
                              raise_=self._raises(line), where=f"cell [{n}]")
        try:
            args = opts.parse(self.tlx, line)
        except CellError as e:
            return self._fail(e, raise_=self.settings["raise"] and "--no-raise" not in line.split(),
                              where=f"cell [{n}]")
        raise_ = self.settings["raise"] and not args.no_raise
        where = f"cell [{n}]"
        target = args.target or self.settings["target"]
        mode = self._mode(args)
        show = tuple(k for k in ("report", "memory", "ir", "timeline", "barriers") if getattr(args, k))
        # cached with the %%tlx line counted: every line number reported is the editor's
        filename, text = cache_cell(self.shell, cell)
        try:
            body, launch_node = split_cell(text)
        except SyntaxError as e:
            return self._fail(e, filename, raise_=raise_, where=where)
        with offline_context(mode, target):
            try:
                exec(compile(body, filename, "exec"), self._ns())
            except BaseException as e:  # noqa: BLE001 - a bad cell must not kill the notebook
                return self._fail(e, filename, raise_=raise_, where=where)
            if launch_node is None:
                res = CellResult(mode=resolve_mode(mode), target=target, show=show)
                res.notes.append("definitions only: end the cell with a launch to simulate, run or benchmark it")
                return self._finish(res, args, raise_=raise_, where=where)
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
                    cellcode = CellCode(body=body, launch=launch_node.value, filename=filename, ns=self._ns(),
                                        exprs={"reference": args.ref, "flops": args.flops, "nbytes": args.bytes})
                    return self._knob_panel(launch, knobs, options, args, cellcode, raise_=raise_, where=where)
                res = evaluate(launch, **options)
            except BaseException as e:  # noqa: BLE001
                return self._fail(e, filename, raise_=raise_, where=where)
        return self._finish(res, args, raise_=raise_, where=where)

    def _finish(self, res: CellResult, args, *, raise_: bool = False, where: str = "the cell"):
        self._store(res, args)
        display_result(res)
        reason = res.failure()
        if raise_ and reason:
            raise CellFailed(reason, result=res, error=res.errors[0] if res.errors else None, where=where)
        return None

    def _knob_panel(self, launch: Launch, knobs: list[Knob], options: dict, args, cellcode=None, *,
                    raise_: bool = False, where: str = "the cell"):
        panel = KnobPanel(launch, knobs, options, on_result=lambda r: self._store(r, args), cell=cellcode)
        self.panels.append(panel)
        display(panel.widget)
        # the first run is the cell's own: when it fails, the cell fails (the panel stays, to try other values)
        reason = panel.result.failure() if panel.result is not None else None
        if raise_ and reason:
            raise CellFailed(reason, result=panel.result, where=where,
                             error=panel.result.errors[0] if panel.result.errors else None)
        return None

    def _store(self, res, args):
        self.last_result = res
        if getattr(args, "output", None):
            self._ns()[args.output] = res

    # ---- %tlx_bench
    @magic_arguments()
    @opts.declare(opts.BENCH_OPTIONS)
    @line_magic
    def tlx_bench(self, line):
        """Benchmark one launch expression on the GPU: ``%tlx_bench matmul(a, b) --flops 2*M*N*K``."""
        return self._line(self.tlx_bench, line, self._bench)

    def _bench(self, args, raise_, where):
        launch = parse_launch(" ".join(args.expr), self._ns())
        import tlx_workbench as wb
        res = wb.bench(launch.fn, *launch.args, grid=launch.grid, flops=self._eval(args.flops, "--flops"),
                       bytes=self._eval(args.bytes, "--bytes"), baselines=self._baselines(args.baseline),
                       timeout=args.timeout or self.settings["timeout"], isolate=self.settings["isolate"],
                       **launch.kwargs)
        if args.output:
            self._ns()[args.output] = res
        display(res)
        return None

    # ---- %tlx_profile
    @magic_arguments()
    @opts.declare(opts.PROFILE_OPTIONS)
    @line_magic
    def tlx_profile(self, line):
        """A timeline of one launch: measured on the GPU, simulated without one (or with --sim)."""
        return self._line(self.tlx_profile, line, self._profile)

    def _profile(self, args, raise_, where):
        mode = "sim" if args.sim else self.settings["mode"]
        with offline_context(mode, self.settings["target"]):
            launch = parse_launch(" ".join(args.expr), self._ns())
            res = evaluate(launch, mode=mode, target=self.settings["target"], profile=True, show=("timeline",),
                           timeout=args.timeout or self.settings["timeout"], seed=self.settings["seed"],
                           isolate=self.settings["isolate"])
        if args.output:
            self._ns()[args.output] = res.trace
        # a deadlock or a race is shown once, with its views, as %%tlx shows it; then the cell fails (CellFailed
        # passes through _line's error box: it was shown)
        display_result(res)
        reason = res.failure()
        if raise_ and reason:
            raise CellFailed(reason, result=res, error=res.errors[0] if res.errors else None, where=where)
        return None

    # ---- %tlx_show
    @magic_arguments()
    @opts.declare(opts.SHOW_OPTIONS)
    @line_magic
    def tlx_show(self, line):
        """Show a result object with its best view: ``%tlx_show trace``."""
        return self._line(self.tlx_show, line, self._show)

    def _show(self, args, raise_, where):
        shown = show_object(self._eval(args.obj, "the object"), barriers=args.barriers)
        if isinstance(shown, CellResult):
            display_result(shown)
        else:
            display(shown)
        return None

    # ---- %tlx_explore
    @magic_arguments()
    @opts.declare(explore_magic.EXPLORE_OPTIONS)
    @line_magic
    def tlx_explore(self, line):
        """Sweep a kernel's configs, cheapest stage first: ``%tlx_explore gemm_ws --shapes 4096x4096x4096``.

        A thin shell over ``tlx_workbench.explore.explore``: ``--problem VAR --space VAR`` name your own
        Problem and Space; the Exploration is shown (``--widget``: the live ExplorerWidget) and kept under
        ``-o``. A bad option or shape shows what to do and fails the cell (``--no-raise`` keeps going).
        """
        if print_help(self.tlx_explore, line):
            return None
        return explore_magic.run(self, line)

    # ---- %tlx_config
    @magic_arguments()
    @opts.declare(opts.CONFIG_OPTIONS)
    @line_magic
    def tlx_config(self, line):
        """Session defaults for the TLX magics; with no option, show them."""
        if print_help(self.tlx_config, line):
            return None
        # "%tlx_config --raise no --target sm_99" already means: do not fail this cell either
        tokens = line.replace("=", " ").split()
        said_no = any(t == "--raise" and nxt.strip("'\"") == "no" for t, nxt in zip(tokens, tokens[1:]))
        raise_ = self._raises(line) and not said_no
        where = self._where()
        try:
            args = opts.parse(self.tlx_config, line)
        except BaseException as e:  # noqa: BLE001
            return self._fail(e, raise_=raise_, where=where)
        if args.reset:
            self.settings = dict(DEFAULTS)
        for key in ("target", "mode", "timeout", "seed", "schedules"):
            v = getattr(args, key)
            if v is not None:
                if key == "target":
                    from ..target import gpu_model
                    try:
                        gpu_model(v)
                    except TLXWorkbenchError as e:
                        return self._fail(e, raise_=raise_, where=where)
                self.settings[key] = v
        if args.isolate is not None:
            self.settings["isolate"] = args.isolate == "yes"
        if args.raise_ is not None:
            self.settings["raise"] = args.raise_ == "yes"
        return dict(self.settings)



def help_alone(lines: list[str]) -> list[str]:
    """``%%tlx --help`` alone in a cell, as the line magic ``%tlx --help``: IPython refuses a cell magic
    with an empty body before the magic sees it (an input transformer, run before IPython's own).

    >>> help_alone(["%%tlx --help\n", "\n"])
    ['%tlx --help\n']
    """
    if not lines or not lines[0].lstrip().startswith("%%tlx") or any(ln.strip() for ln in lines[1:]):
        return lines
    head = lines[0].strip()
    if head.split()[0] != "%%tlx" or not {"--help", "-h"} & set(head.split()[1:]):
        return lines
    return [head[1:] + "\n"]


def _untrusted_html_formatter(html_formatter):
    """IPython's text/html formatter, but the HTML of a workbench object (a CompileReport, a SimResult, a
    puzzle's grade, ...) also carries a plain-HTML copy of its pictures, and an ``IPython.display.SVG`` gets
    HTML of its own: a notebook that stores them opens untrusted on a fresh clone, and then renders no SVG
    (tlx_workbench.widgets.untrusted)."""
    base = type(html_formatter)

    from IPython.display import SVG

    class UntrustedSafeHTMLFormatter(base):
        def __call__(self, obj):
            out = super().__call__(obj)
            if isinstance(out, str) and "<svg" in out and type(obj).__module__.startswith("tlx_workbench"):
                out = safe_html(out)
            elif out is None and isinstance(obj, SVG) and obj.data:
                # display(SVG(timeline_svg(trace))): the habit works too (an SVG alone is no output untrusted)
                out = safe_html(obj.data)
            return out

    new = UntrustedSafeHTMLFormatter(parent=html_formatter.parent)
    new.singleton_printers = html_formatter.singleton_printers
    new.type_printers = html_formatter.type_printers
    new.deferred_printers = html_formatter.deferred_printers
    new.enabled = html_formatter.enabled
    new.tlxwb_replaced = html_formatter
    return new


def load_ipython_extension(ipython) -> None:
    """``%load_ext tlx_magic``."""
    ipython.register_magics(TLXMagics)
    from .fix import register as register_fix     # %tlx_fix (magics/fix.py)
    register_fix(ipython)
    if help_alone not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(help_alone)
    formatters = ipython.display_formatter.formatters
    if not hasattr(formatters["text/html"], "tlxwb_replaced"):
        formatters["text/html"] = _untrusted_html_formatter(formatters["text/html"])


def unload_ipython_extension(ipython) -> None:
    # IPython has no unregister; drop our names so a reload starts clean
    mm = ipython.magics_manager
    line_names = ["tlx", "tlx_bench", "tlx_profile", "tlx_show", "tlx_explore", "tlx_config", "tlx_fix"]
    for kind, names in (("cell", ["tlx"]), ("line", line_names)):
        for n in names:
            mm.magics[kind].pop(n, None)
    mm.registry.pop("TLXMagics", None)
    if help_alone in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(help_alone)
    formatters = ipython.display_formatter.formatters
    if hasattr(formatters["text/html"], "tlxwb_replaced"):
        formatters["text/html"] = formatters["text/html"].tlxwb_replaced
