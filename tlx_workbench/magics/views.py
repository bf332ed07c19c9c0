"""Choosing what to show: each view once (the live widget, whose bundle carries the static
fallback for exports; or the static view when no widget exists), the best view of any result."""
from __future__ import annotations

from .result import VIEWS, CellResult


def show_widgets(result: CellResult) -> list:
    """The live widgets for ``result``'s views, those that exist (the rest stay static in its HTML)."""
    out = []
    try:
        from .. import widgets
    except ImportError:
        return out
    for key in result.views():
        name, _, part = VIEWS[key]
        if key not in result.show or name is None or not hasattr(widgets, name):
            continue
        try:
            w = getattr(widgets, name)(getattr(result, part), **result.view_options(key))
            w._tlxwb_view = key
            out.append(w)
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


def safe_html(fragment: str) -> str:
    """``fragment`` as it should be stored: its pictures also drawn in plain HTML, for the notebook that
    opens untrusted (tlx_workbench.widgets.untrusted)."""
    try:
        from ..widgets.untrusted import untrusted_safe
    except ImportError:
        return fragment
    return untrusted_safe(fragment)


def display(obj, **kwargs) -> None:
    """IPython's display (imported late: the plain-Python core must not need IPython)."""
    from IPython.display import display as ipython_display
    ipython_display(obj, **kwargs)


def display_result(res: CellResult) -> list:
    """Display ``res``: its HTML without the views drawn as live widgets, then those widgets.

    Returns the widgets shown.
    """
    widgets = show_widgets(res)
    skip = {w._tlxwb_view for w in widgets}
    display({"text/plain": repr(res), "text/html": safe_html(res.html(skip_views=skip))}, raw=True)
    for w in widgets:
        display(w)
    return widgets
