"""Choosing what to show: the live widgets of a :class:`CellResult`, the best view of any result object."""
from __future__ import annotations

from .result import CellResult


def show_widgets(result: CellResult) -> list:
    """The live widgets for ``result`` (shown under its HTML), those that exist."""
    out = []
    try:
        from .. import widgets
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



def show_object(obj, *, barriers: bool = False):
    """The best view of ``obj`` for display (a widget when one exists, else the object)."""
    from ..trace import Trace
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



def display(obj) -> None:
    """IPython's display (imported late: the plain-Python core must not need IPython)."""
    from IPython.display import display as ipython_display
    ipython_display(obj)



def display_result(res: CellResult) -> None:
    """Display ``res`` (its HTML), then the live widgets its ``show`` asks for."""
    display(res)
    for w in show_widgets(res):
        display(w)
