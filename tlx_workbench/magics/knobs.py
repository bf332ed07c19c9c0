"""``--knobs``: constexpr controls (:func:`parse_knobs`) and the panel re-evaluating a launch (:class:`KnobPanel`)."""
from __future__ import annotations

import ast
import dataclasses
import html
import shlex

from .errors import KnobError, cell_error
from .evaluate import evaluate, offline_context, resolve_mode
from .launch import Launch
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
            ctx = offline_context(self.options.get("mode", "auto"), self.options.get("target", "sm_90"))
            with ctx:
                res = evaluate(self.launch, constexprs=values, **self.options)
        except BaseException as e:  # noqa: BLE001 - a bad combination must not break the panel
            res = CellResult(mode=resolve_mode(self.options.get("mode", "auto")),
                             target=self.options.get("target", ""), launch=self.launch.text, constexprs=values)
            res.errors.append(cell_error(e, "<knobs>", "this combination raised"))
        self.results.append(res)
        self.output.clear_output(wait=True)
        with self.output:
            display_result(res)
        self.status.value = ""
        if self.on_result is not None:
            self.on_result(res)
        return res

    @property
    def result(self) -> CellResult | None:
        return self.results[-1] if self.results else None
