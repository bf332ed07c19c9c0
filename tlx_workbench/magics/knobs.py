"""``--knobs``: controls (:func:`parse_knobs`) and the panel that re-runs the cell with them (:class:`KnobPanel`).

A knob sets a kernel constexpr of the launch, a name the cell's host code uses, or both: moving
it re-runs the cell's host code with the knob's value (a top-level ``BM = 128`` reads the knob
instead), so the descriptors, the grid and the inputs built from it are rebuilt, then the launch.
The re-run happens in a copy of the notebook's namespace: the notebook's variables stay those of
the cell's own run. Every run is kept; from two on, the panel compares them (:func:`compare_html`).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import html
import shlex

from typing import Any

from .errors import KnobError, cell_error
from .evaluate import evaluate, offline_context, resolve_mode
from .launch import Launch, parse_launch
from .result import CellResult
from .views import display_result


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



@dataclasses.dataclass
class CellCode:
    """What a knob run re-executes: the cell's code before its launch, the launch, where it ran."""
    body: str                    # as cached (line numbers are the editor's)
    launch: Any                  # the launch's ast expression
    filename: str
    ns: dict                     # the notebook namespace the cell ran in
    exprs: dict = dataclasses.field(default_factory=dict)   # evaluate() option -> expression (--ref, ...)

    def names(self) -> set[str]:
        """Every name the cell's host code and launch read or assign (not the names inside its @jit kernels)."""
        found = set()
        for node in ast.parse(self.body).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    "jit" in ast.unparse(d) for d in node.decorator_list):
                continue
            found |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return found | {n.id for n in ast.walk(self.launch) if isinstance(n, ast.Name)}

    def rerun(self, values: dict) -> tuple[Launch, dict]:
        """Run the cell's host code again with ``values`` for the knobs' names: (the launch it ends with,
        the options whose expressions (``--ref``, ``--flops``, ...) read the re-run's variables).

        A top-level statement that assigns a knob's name (``BM = 128``, ``N, BM = 4, 128``) is followed
        by ``BM = <the knob's value>``, so what the cell builds after it is built from the knob.
        """
        tree = ast.parse(self.body)
        body = []
        for node in tree.body:
            body.append(node)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                hit = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} & set(values)
                for name in sorted(hit):
                    body.append(ast.copy_location(ast.Assign(targets=[ast.Name(name, ast.Store())],
                                                             value=ast.Constant(values[name])), node))
        tree.body = body
        ast.fix_missing_locations(tree)
        ns = dict(self.ns)
        ns.update(values)          # names the cell reads but does not assign (set in an earlier cell)
        exec(compile(tree, self.filename, "exec"), ns)
        options = {k: eval(e, ns) for k, e in self.exprs.items() if e is not None}
        return parse_launch(self.launch, ns, filename=self.filename), options


def _kernel_params(launch: Launch) -> set[str] | None:
    names = getattr(launch.fn, "arg_names", None)
    return set(names) if names is not None else None


class KnobPanel:
    """ipywidgets controls; a change re-runs the cell's host code and the launch, and compares the runs.

    ``results`` holds every run, in order; ``best()`` the fastest correct one; the "keep the fastest"
    button hands it to the ``-o`` variable.
    """

    def __init__(self, launch: Launch, knobs: list[Knob], options: dict, on_result=None, cell: CellCode | None = None):
        import ipywidgets as w
        self.launch, self.knobs, self.options = launch, knobs, dict(options)
        self.on_result = on_result
        self.cell = cell
        host_names = cell.names() if cell is not None else set()
        params = _kernel_params(launch)
        self.constexpr_knobs = set()
        for k in knobs:
            as_constexpr = k.name in launch.kwargs or (launch.is_kernel and (params is None or k.name in params))
            if as_constexpr:
                self.constexpr_knobs.add(k.name)
            elif k.name not in host_names:
                known = sorted((params or set()) | set(launch.kwargs) | host_names)
                close = difflib.get_close_matches(k.name, known, n=1, cutoff=0.6)
                hint = (f"did you mean {close[0]}? (--knobs \"{close[0]}=...\")" if close else
                        f"name a constexpr of the kernel, or use {k.name} in the cell's host code "
                        f"(e.g. {k.name} = ... and a grid or descriptor built from it)")
                raise KnobError(f"knob {k.name!r} is neither a constexpr of {launch.name} nor a name the cell uses",
                                file=cell.filename if cell is not None else None,
                                line=1 if cell is not None else None, hint=hint)   # the %%tlx line
        self.host_knobs = {k.name for k in knobs} & host_names
        # the cell's own values first: what the launch passes (by name or position), else the notebook's variable
        start = {k.name: launch.value_of(k.name, cell.ns.get(k.name) if cell is not None else None) for k in knobs}
        self._own = {k: v for k, v in start.items()}
        self.controls = {k.name: k.widget(start[k.name]) for k in knobs}
        self.output = w.Output()
        self.compare = w.HTML()
        self.status = w.HTML()
        self.keep_button = w.Button(description="keep the fastest", tooltip="hand the fastest correct run to -o")
        self.keep_button.on_click(lambda _: self.keep())
        self.results: list[CellResult] = []
        self.shown: CellResult | None = None
        self._setting = False              # the controls moved by keep(), not by a person: no re-run
        for c in self.controls.values():
            c.observe(self._changed, names="value")
        self.widget = w.VBox([w.HBox(list(self.controls.values()) + [self.keep_button]), self.status, self.output,
                              self.compare])
        self.update()

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    def _changed(self, change) -> None:
        if not self._setting:
            self.update()

    def _show(self, res: CellResult) -> None:
        """``res`` in the panel's output: the run its controls now say."""
        self.shown = res
        self.output.clear_output(wait=True)
        with self.output:
            display_result(res)

    def _launch_for(self, values: dict) -> tuple[Launch, dict]:
        if self.cell is None or not self.host_knobs or all(values[k] == self._own.get(k) for k in self.host_knobs):
            return self.launch, {}
        return self.cell.rerun({k: values[k] for k in self.host_knobs})

    def update(self) -> CellResult | None:
        """Re-run with the controls' values (host code, then the launch); show the result and the comparison."""
        values = self.values()
        self.status.value = "<i>running with " + html.escape(", ".join(f"{k}={v}" for k, v in values.items())) + \
                            "…</i>"
        try:
            ctx = offline_context(self.options.get("mode", "auto"), self.options.get("target", "sm_90"))
            with ctx:
                launch, redone = self._launch_for(values)
                res = evaluate(launch, constexprs={k: v for k, v in values.items() if k in self.constexpr_knobs},
                               **{**self.options, **redone})
        except BaseException as e:  # noqa: BLE001 - a bad combination must not break the panel
            res = CellResult(mode=resolve_mode(self.options.get("mode", "auto")),
                             target=self.options.get("target", ""), launch=self.launch.text)
            res.errors.append(cell_error(e, self.cell.filename if self.cell else "<knobs>", "this combination raised"))
        res.knobs = values
        self.results.append(res)
        self._show(res)
        self.compare.value = compare_html(self.results)
        self.status.value = ""
        if self.on_result is not None:
            self.on_result(res)
        return res

    @property
    def result(self) -> CellResult | None:
        return self.results[-1] if self.results else None

    def best(self) -> CellResult | None:
        """The fastest run that did not fail (GPU median when benchmarked, else simulated cycles)."""
        good = [r for r in self.results if r.failure() is None and _cost(r) is not None]
        return min(good, key=_cost) if good else None

    def keep(self) -> CellResult | None:
        """Hand the fastest correct run to ``-o`` (and say which knob values to write into the cell)."""
        best = self.best()
        if best is None:
            self.status.value = "<i>no run finished without failing yet</i>"
            return None
        if self.on_result is not None:
            self.on_result(best)
        # the controls and the output say the kept run (a run already made: nothing is re-run)
        self._setting = True
        try:
            for name, v in best.knobs.items():
                if name in self.controls:
                    self.controls[name].value = v
        finally:
            self._setting = False
        self._show(best)
        vals = ", ".join(f"{k}={v}" for k, v in best.knobs.items())
        self.status.value = (f"<b>kept</b> the fastest run: {html.escape(vals)} ({_cost_text(best)}); "
                             "write these values into the cell to make them its own")
        return best


# ---- the comparison of knob runs -------------------------------------------------------------
def _cost(r: CellResult):
    b = getattr(r, "bench", None)
    for attr in ("median_ms", "ms"):
        if b is not None and isinstance(getattr(b, attr, None), (int, float)):
            return float(getattr(b, attr))
    if r.sim is not None:
        return float(r.sim.cycles)
    return None


def _cost_unit(runs) -> str:
    return "ms" if any(getattr(r, "bench", None) is not None for r in runs) else "cycles"


def _cost_text(r) -> str:
    c = _cost(r)
    if c is None:
        return "no time"
    return f"{c:.3g} ms" if getattr(r, "bench", None) is not None else f"{c:.0f} cycles"


def _resources(r) -> dict:
    res = getattr(getattr(r, "report", None), "resources", None)
    if res is None:
        return {}
    return {k: getattr(res, k) for k in ("smem_bytes", "registers", "spills", "num_warps", "tmem_columns")
            if getattr(res, k, None) is not None}


def _verdict(r) -> str:
    reason = r.failure()
    return "ok" if reason is None else reason.splitlines()[0][:90]


def what_changed(a: CellResult, b: CellResult) -> list[str]:
    """From run ``a`` to run ``b``: the knobs moved, the time, the resources, the verdict."""
    out = []
    ka, kb = getattr(a, "knobs", {}), getattr(b, "knobs", {})
    moved = [f"{k} {ka.get(k)} -> {kb.get(k)}" for k in kb if ka.get(k) != kb.get(k)]
    out.append("knobs: " + (", ".join(moved) if moved else "the same"))
    ca, cb = _cost(a), _cost(b)
    if ca is not None and cb is not None and ca > 0:
        unit = _cost_unit([a, b])
        out.append(f"time: {ca:.4g} -> {cb:.4g} {unit} ({(cb - ca) / ca * 100:+.0f}%)")
    ra, rb = _resources(a), _resources(b)
    diff = [f"{k} {ra.get(k)} -> {rb.get(k)}" for k in sorted(set(ra) | set(rb)) if ra.get(k) != rb.get(k)]
    if ra or rb:
        out.append("resources: " + (", ".join(diff) if diff else "unchanged"))
    va, vb = _verdict(a), _verdict(b)
    if va != vb:
        out.append(f"verdict: {va} -> {vb}")
    return out


def cost_plot_svg(runs: list, knob: str, width: int = 360, height: int = 170) -> str:
    """Time (cycles or ms) against one knob's values, one dot per run (red: the run failed)."""
    pts = [(getattr(r, "knobs", {}).get(knob), _cost(r), r.failure() is None) for r in runs]
    pts = [p for p in pts if p[1] is not None]
    if not pts:
        return ""
    xs = []
    for x, _, _ in pts:
        if x not in xs:
            xs.append(x)
    try:
        xs.sort()
    except TypeError:
        pass
    top = max(c for _, c, _ in pts) or 1.0
    left, bottom, right = 50, height - 28, width - 12
    def px(x):
        return left + (xs.index(x) + 0.5) * (right - left) / len(xs)
    def py(c):
        return bottom - c / top * (bottom - 16)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-knob-plot' width='{width}' height='{height}' "
           f"font-family='sans-serif' font-size='10'><rect width='{width}' height='{height}' fill='#fff'/>",
           f"<line x1='{left}' y1='{bottom}' x2='{right}' y2='{bottom}' stroke='#999'/>",
           f"<line x1='{left}' y1='10' x2='{left}' y2='{bottom}' stroke='#999'/>",
           f"<text x='4' y='12' fill='#555'>{html.escape(_cost_unit(runs))}</text>",
           f"<text x='{left}' y='{bottom - 2 - (bottom - 16)}' fill='#555' text-anchor='end' dx='-3'>{top:.4g}</text>",
           f"<text x='{(left + right) / 2:.0f}' y='{height - 4}' fill='#555' text-anchor='middle'>"
           f"{html.escape(knob)}</text>"]
    for x in xs:
        out.append(f"<text x='{px(x):.0f}' y='{bottom + 12}' text-anchor='middle'>{html.escape(str(x))}</text>")
    for x, c, ok in pts:
        colour = "#2e86de" if ok else "#c0392b"
        out.append(f"<circle class='tlxwb-knob-run' cx='{px(x):.0f}' cy='{py(c):.0f}' r='4' fill='{colour}'>"
                   f"<title>{html.escape(knob)}={html.escape(str(x))}: {c:.4g}</title></circle>")
    out.append("</svg>")
    return "".join(out)


def compare_html(runs: list) -> str:
    """The comparison of knob runs: a table of every run, time against each knob moved, what changed
    from the run before to the last, and the two timelines on one time axis."""
    if len(runs) < 2:
        return ""
    unit = _cost_unit(runs)
    names = list(getattr(runs[-1], "knobs", {}))
    res_keys = sorted({k for r in runs for k in _resources(r)})
    head = "".join(f"<th>{html.escape(k)}</th>" for k in names + [unit] + res_keys + ["verdict"])
    rows = []
    for i, r in enumerate(runs):
        kv = getattr(r, "knobs", {})
        cost = _cost(r)
        cells = [str(kv.get(k)) for k in names] + [f"{cost:.4g}" if cost is not None else "-"]
        cells += [str(_resources(r).get(k, "-")) for k in res_keys] + [_verdict(r)]
        style = " style='background:#eef6fc'" if i == len(runs) - 1 else ""
        rows.append(f"<tr{style}><td>{i + 1}</td>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    out = ["<div class='tlxwb-knob-compare' style='border-left:4px solid #2e86de;padding:4px 8px;margin:6px 0'>",
           f"<b>{len(runs)} runs compared</b>",
           f"<table class='tlxwb-knob-runs'><tr><th>run</th>{head}</tr>{''.join(rows)}</table>"]
    moved = [k for k in names if len({str(getattr(r, 'knobs', {}).get(k)) for r in runs}) > 1]
    plots = "".join(cost_plot_svg(runs, k) for k in moved[:3])
    if plots:
        out.append(f"<div style='display:flex;gap:8px;flex-wrap:wrap'>{plots}</div>")
    a, b = runs[-2], runs[-1]
    out.append(f"<div class='tlxwb-knob-changed'><b>what changed</b> (run {len(runs) - 1} -> run {len(runs)}):"
               "<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in what_changed(a, b)) + "</ul></div>")
    if a.trace is not None and b.trace is not None:
        try:
            from ..widgets import timeline_svg
            t1 = max(a.trace.duration, b.trace.duration) or 1
            for i, r in ((len(runs) - 1, a), (len(runs), b)):
                kv = ", ".join(f"{k}={v}" for k, v in getattr(r, "knobs", {}).items())
                out.append(f"<div class='tlxwb-knob-timeline'><small>run {i}: {html.escape(kv)} "
                           f"({html.escape(_cost_text(r))})</small>{timeline_svg(r.trace, t0=0, t1=t1)}</div>")
        except ImportError:
            pass
    out.append("</div>")
    return "".join(out)
