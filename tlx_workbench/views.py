"""How results find their views without importing them.

Results (CompileReport, SimResult, Trace, Exploration, ...) sit below the views in the
package: a result module never imports a view. A view module registers a renderer for a
result class by name; a result's ``_repr_html_`` asks :func:`html`, which imports the view
modules named in ``PROVIDERS`` on first use (by name, so the dependency points one way:
views -> results). No renderer: the caller falls back to its own plain text.

>>> register("Thing", lambda obj: "<b>thing</b>")
>>> class Thing: pass
>>> html(Thing())
'<b>thing</b>'
"""
from __future__ import annotations

import importlib
from typing import Callable

#: view modules that register renderers when imported
PROVIDERS = ["tlx_workbench.widgets.explorer"]

_HTML: dict[str, Callable] = {}
_loaded = False


def register(cls_name: str, fn: Callable) -> None:
    """Render instances of the class named ``cls_name`` as HTML with ``fn(obj) -> str``."""
    _HTML[cls_name] = fn


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


def renderer(obj) -> Callable | None:
    _load()
    for cls in type(obj).__mro__:
        fn = _HTML.get(cls.__name__)
        if fn is not None:
            return fn
    return None


def html(obj) -> str | None:
    """``obj`` as HTML by its registered view, or None."""
    fn = renderer(obj)
    return fn(obj) if fn is not None else None
