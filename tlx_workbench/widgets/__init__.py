"""Notebook views of the workbench's results, live (anywidget) and static (SVG/HTML).

Live widgets (their static rendering rides along in the mime bundle):
    TimelineWidget(trace), BarrierPhaseWidget(trace), MemoryMapWidget(report), IRExplorer(report)
Static renderers, for reports and reprs:
    timeline_svg(trace), timeline_html(trace), barrier_svg(trace), memory_map_svg(report), ir_html(report)
For display() in a notebook that may open untrusted: Picture(svg), untrusted_safe(html)

>>> from tlx_workbench.widgets import TimelineWidget
>>> TimelineWidget(trace)        # doctest: +SKIP
"""
from ._base import KIND_COLORS, View, standalone_html
from .timeline import TimelineWidget, timeline_html, timeline_svg
from .barriers import BarrierPhaseWidget, barrier_svg
from .memory_map import MemoryMapWidget, memory_map_svg, memory_map_table
from .ir_explorer import IRExplorer, ir_html
from .untrusted import Picture, svg_html, untrusted_safe
from .explorer import ExplorerWidget, exploration_html, heatmap_png, pareto_png, roofline_png  # noqa: F401

__all__ = ["KIND_COLORS", "View", "standalone_html", "TimelineWidget", "timeline_svg", "timeline_html",
           "BarrierPhaseWidget", "barrier_svg",
           "MemoryMapWidget", "memory_map_svg", "memory_map_table",
           "IRExplorer", "ir_html", "Picture", "svg_html", "untrusted_safe"]
