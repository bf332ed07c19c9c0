"""What every view shares: the ESM/CSS from static/, the static fallback in the mime
bundle, and a standalone HTML page that runs the same ESM without Jupyter."""
from __future__ import annotations

import base64
import html
import json
import pathlib

import anywidget
import traitlets

STATIC = pathlib.Path(__file__).parent / "static"

# span kind -> colour, shared by the canvas views, the SVG fallbacks and the legend
KIND_COLORS = {
    "compute": "#2e86de", "mma": "#8e44ad", "tma": "#16a085", "load": "#27ae60", "store": "#1abc9c",
    "wait": "#e74c3c", "arrive": "#f39c12", "sync": "#d35400", "other": "#95a5a6",
}


def esm_source(view: str) -> str:
    """The ESM of one view: the shared helpers followed by the view's own file."""
    return (STATIC / "common.js").read_text() + "\n" + (STATIC / f"{view}.js").read_text()


def css_source() -> str:
    return (STATIC / "widgets.css").read_text()


class View(anywidget.AnyWidget):
    """Base of the workbench's widgets: a live anywidget view whose mime bundle also
    carries a self-contained static rendering (``text/html``, and the picture alone as
    ``image/svg+xml`` for a view that draws one), so the output still shows after nbconvert,
    in nbval and on GitHub, where no kernel runs the widget. JupyterLab ranks the widget's
    mime type first, so a live frontend draws the view once: the widget."""

    _css = css_source()
    title = traitlets.Unicode("").tag(sync=True)

    def static_html(self, svg: str | None = None) -> str:  # pragma: no cover - each view overrides
        """The static fallback as HTML; ``svg``: :meth:`static_svg` when the caller already drew it."""
        raise NotImplementedError

    def static_svg(self) -> str | None:
        """The view's picture alone, one self-contained SVG (the bundle's ``image/svg+xml``: what
        GitHub and exports show), or None for a view that draws no SVG."""
        return None

    @classmethod
    def static(cls, obj, **options) -> str:  # pragma: no cover - each view overrides
        """The static rendering of ``cls(obj, **options)`` without making the widget.

        A widget opens a comm when it is made, and a notebook stores the state (ESM, CSS, data) of
        every comm opened, shown or not; a view wanted only as HTML must not pay that.
        """
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs):
        # ipywidgets' bundle (text/plain + the widget view), extended: a frontend picks the
        # richest type it can render, so the live view wins wherever widgets run and the
        # static forms are what nbconvert, nbval and GitHub keep
        bundle = super()._repr_mimebundle_(**kwargs)
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {})
        svg = self.static_svg()
        from .untrusted import untrusted_safe
        # the HTML carries a plain-HTML copy of its pictures: an untrusted notebook renders no SVG
        if svg:
            data["image/svg+xml"] = svg
            data["text/html"] = untrusted_safe(self.static_html(svg))          # the SVG drawn once for both
        else:
            data["text/html"] = untrusted_safe(self.static_html())
        return data, meta

    def _repr_html_(self) -> str:
        from .untrusted import untrusted_safe
        return untrusted_safe(self.static_html())

    # -- the same view in a plain page (no Jupyter) --------------------------------------
    def _data_state(self) -> dict:
        skip = set(anywidget.AnyWidget.class_trait_names(sync=True)) | {"_esm", "_css", "_anywidget_id"}
        state = {}
        for name in self.trait_names(sync=True):
            if name in skip:
                continue
            v = getattr(self, name)
            if isinstance(v, (bytes, bytearray, memoryview)):
                v = {"__b64__": base64.b64encode(bytes(v)).decode("ascii")}
            state[name] = v
        return state

    def to_html(self, title: str | None = None) -> str:
        """A standalone interactive HTML page showing this view (the same ESM, run against a
        small stand-in for the notebook's widget model). Opens offline in any browser.

        >>> TimelineWidget(trace).save_html("timeline.html")    # doctest: +SKIP
        """
        return standalone_html([self], title=title or self.title or type(self).__name__)

    def save_html(self, path: str) -> str:
        pathlib.Path(path).write_text(self.to_html())
        return str(path)


def _script_safe(text: str) -> str:
    # text inside <script> ends at the first "</script"; JSON and our JS never need "</"
    return text.replace("</", "<\\/")


def standalone_html(views: "list[View]", title: str = "TLX Workbench") -> str:
    """One page with several views, each live (the page carries their ESM, CSS and data).

    >>> pathlib.Path("views.html").write_text(standalone_html([tl, mm]))   # doctest: +SKIP
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>body{{margin:12px;font-family:sans-serif}}</style><style>{css_source()}</style></head><body>"]
    for k, v in enumerate(views):
        esm = getattr(v, "_esm")
        if "</script" in esm:
            raise ValueError("an ESM must not contain '</script'")
        parts.append(f"<div class='tlxwb-view' id='tlxwb-view-{k}' data-view='{type(v).__name__}'></div>")
        parts.append(f"<script type='application/json' id='tlxwb-state-{k}'>{_script_safe(json.dumps(v._data_state()))}</script>")
        parts.append(f"<script type='text/plain' id='tlxwb-esm-{k}'>{esm}</script>")
    parts.append("<script type='module'>\n" + (STATIC / "harness.js").read_text() + "\n"
                 f"await tlxwbMountAll({len(views)});\n</script></body></html>")
    return "".join(parts)
