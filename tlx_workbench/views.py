"""How results find their views without importing them.

Results (CompileReport, SimResult, Trace, Exploration, ...) sit below the views in the
package: a result module never imports a view. A view module registers a renderer for a
result class by name, under a view name ("html" by default, e.g. "timeline_svg"); a
result's ``_repr_html_`` asks :func:`html` (a producer that wants another picture of a
result asks :func:`render`), which imports the view modules named in ``PROVIDERS`` on first
use (by name, so the dependency points one way: views -> results). No renderer: the caller
falls back to its own plain text (:func:`html_or_text` does both).

>>> register("Thing", lambda obj: "<b>thing</b>")
>>> class Thing: pass
>>> html(Thing())
'<b>thing</b>'
"""
from __future__ import annotations

import html as _html
import importlib
from typing import Callable

#: view modules that register renderers when imported
PROVIDERS = ["tlx_workbench.widgets.timeline", "tlx_workbench.widgets.barriers",
             "tlx_workbench.widgets.compile_report", "tlx_workbench.widgets.sim_result",
             "tlx_workbench.widgets.explorer", "tlx_workbench.widgets.trace_compare"]

_VIEWS: dict[tuple[str, str], Callable] = {}
_loaded = False


def register(cls_name: str, fn: Callable, view: str = "html") -> None:
    """Render instances of the class named ``cls_name`` with ``fn(obj) -> str`` as ``view``."""
    _VIEWS[(cls_name, view)] = fn


def _load():
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in PROVIDERS:
        try:
            importlib.import_module(mod)
        except ImportError:     # a view that cannot load (no matplotlib): results still print
            pass


def renderer(obj, view: str = "html") -> Callable | None:
    """The function registered to draw ``obj`` as ``view`` (searched along its class's MRO), or None."""
    _load()
    for cls in type(obj).__mro__:
        fn = _VIEWS.get((cls.__name__, view))
        if fn is not None:
            return fn
    return None


def render(obj, view: str = "html", **kwargs) -> str | None:
    """``obj`` drawn by its registered ``view`` renderer, or None.

    >>> render(trace, "timeline_svg")        # doctest: +SKIP
    '<svg ...'
    """
    fn = renderer(obj, view)
    return fn(obj, **kwargs) if fn is not None else None


def html(obj) -> str | None:
    """``obj`` as HTML by its registered view, or None."""
    return render(obj, "html")


def html_or_text(obj) -> str:
    """``obj`` as HTML by its registered view, else its ``repr`` as preformatted text.

    >>> html_or_text(object()).startswith("<pre>")
    True
    """
    h = html(obj)
    return h if h is not None else f"<pre>{_html.escape(repr(obj))}</pre>"
