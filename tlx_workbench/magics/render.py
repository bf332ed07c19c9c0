"""HTML for result parts and their views (the static fallback of the widgets)."""
from __future__ import annotations

import html


def html_of(obj) -> str:
    if hasattr(obj, "_repr_html_"):
        try:
            h = obj._repr_html_()
            if h:
                return h
        except Exception:  # a view that cannot render must not hide the rest
            pass
    if isinstance(obj, (list, tuple)):
        return "".join(html_of(o) for o in obj) or "<div>(no findings)</div>"
    return f"<pre>{html.escape(repr(obj))}</pre>"


def view_html(widget: str, obj, what: str, **options) -> str:
    """The static HTML of a widget view (``options``: the widget's own), or a note saying the view is not there yet."""
    try:
        from .. import widgets
        cls = getattr(widgets, widget, None)
        if cls is None:
            raise ImportError(widget)
        if hasattr(cls, "static"):
            # drawn without making the widget: a widget made and never shown would still leave its
            # state (ESM, CSS, data: ~25 KB) in the saved notebook
            return cls.static(obj, **options)
        view = cls(obj, **options)
        bundle = view._repr_mimebundle_() if hasattr(view, "_repr_mimebundle_") else None
        if isinstance(bundle, tuple):
            bundle = bundle[0]
        if isinstance(bundle, dict) and "text/html" in bundle:
            return bundle["text/html"]
        return html_of(view)
    except ImportError:
        if what == "IR" and hasattr(obj, "ir"):
            return f"<details><summary>TTGIR</summary><pre>{html.escape(obj.ir('ttgir'))}</pre></details>"
        if what == "timeline":
            try:
                from ..widgets import timeline_html
                return timeline_html(obj)
            except ImportError:
                pass
        return f"<div><i>{html.escape(what)} view: tlx_workbench.widgets.{widget} is not available</i></div>"

