"""The side-by-side view of a :class:`~tlx_workbench.trace_compare.TraceComparison`: simulated and
measured timelines of each task on one ns axis (each CTA from its first span), and the per-task
table of busy/wait shares, extents and their errors. Static SVG/HTML (reports, nbconvert, GitHub).

>>> html = trace_compare_html(compare(sim_trace, measured_trace))     # doctest: +SKIP
"""
from __future__ import annotations

import html as _html

from .. import views
from ..trace_compare import TraceComparison
from ._base import KIND_COLORS
from .timeline import _fmt, _nice_step

_SIDES = (("sim", "#f4f6fb"), ("measured", "#fdf7ee"))


def _rows(cmp: TraceComparison) -> list[tuple[str, str, str, list, float]]:
    """(task, side, label, spans as (start, end, kind) from the CTA's first span, ns per unit) per drawn row."""
    s_ns = 1.0 / cmp.sim_clock_ghz if cmp.sim.time_unit != "ns" and cmp.sim_clock_ghz else 1.0
    m_ns = 1.0
    if cmp.measured.time_unit != "ns" and cmp.measured.meta.get("sm_clock_ghz"):
        m_ns = 1.0 / cmp.measured.meta["sm_clock_ghz"]
    m_cta = cmp.measured_ctas[0]
    out = []
    origin = {}
    for side, tr, cta, k in (("sim", cmp.sim, cmp.sim_cta, s_ns), ("measured", cmp.measured, m_cta, m_ns)):
        spans = list(tr.spans_of(cta=cta))
        origin[side] = (min(s.start for s in spans) if spans else 0.0, k, tr, cta)
    for t in cmp.tasks:
        for side, _ in _SIDES:
            t0, k, tr, cta = origin[side]
            for rep in sorted({s.replica for s in tr.spans_of(cta=cta, task=t.task)}):
                spans = sorted(((s.start - t0) * k, (s.end - t0) * k, s.kind)
                               for s in tr.spans_of(cta=cta, task=t.task, replica=rep))
                out.append((t.task, side, f"{side} CTA {cta} {t.task}[{rep}]", spans, k))
    return out


def _merged(spans, px: float):
    """Spans of one row merged where the same kind continues within a pixel (a 20k-span row stays small)."""
    cur = None
    for a, b, kind in spans:
        if cur is not None and kind == cur[2] and a - cur[1] <= px:
            cur[1] = max(cur[1], b)
            continue
        if cur is not None:
            yield cur
        cur = [a, b, kind]
    if cur is not None:
        yield cur


def trace_compare_svg(cmp: TraceComparison, width: int = 960, lane_height: int = 14, gutter: int = 230) -> str:
    """Both timelines, task under task (simulated row(s) above measured ones), on one ns axis."""
    esc = _html.escape
    rows = _rows(cmp)
    t_end = max([b for *_, sp, _k in rows for _a, b, _ in sp] + [1.0])
    plot_w = width - gutter - 10
    sx = plot_w / t_end
    axis_h, gap = 20, 6
    y = axis_h
    ys, last_task = [], None
    for task, *_ in rows:
        if task != last_task and last_task is not None:
            y += gap
        last_task = task
        ys.append(y)
        y += lane_height
    height = y + 26
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-compare-svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11'>",
           f"<rect width='{width}' height='{height}' fill='#fff'/>"]
    step = _nice_step(t_end / 8)
    tick = 0.0
    while tick <= t_end + 1e-9:
        x = gutter + tick * sx
        out.append(f"<line x1='{x:.1f}' y1='{axis_h - 4}' x2='{x:.1f}' y2='{y}' stroke='#eee'/>"
                   f"<text x='{x:.1f}' y='{axis_h - 7}' text-anchor='middle' fill='#555'>{_fmt(tick)}</text>")
        tick += step
    out.append(f"<text x='4' y='{axis_h - 7}' fill='#555'>ns from each CTA's first span</text>")
    bg = dict(_SIDES)
    for (task, side, label, spans, _k), ly in zip(rows, ys):
        out.append(f"<rect x='0' y='{ly}' width='{width}' height='{lane_height}' fill='{bg[side]}'/>"
                   f"<text x='4' y='{ly + lane_height - 3}' fill='#333'>{esc(label)}</text>")
        for a, b, kind in _merged(spans, 1.0 / sx):
            w = max((b - a) * sx, 0.6)
            out.append(f"<rect x='{gutter + a * sx:.2f}' y='{ly + 2}' width='{w:.2f}' height='{lane_height - 4}' "
                       f"fill='{KIND_COLORS.get(kind, '#95a5a6')}'/>")
    lx = 4
    kinds = [k for k in KIND_COLORS if any(kind == k for *_, sp, _k in rows for _a, _b, kind in sp)]
    for k in kinds:
        out.append(f"<rect x='{lx}' y='{y + 8}' width='10' height='10' fill='{KIND_COLORS[k]}'/>"
                   f"<text x='{lx + 13}' y='{y + 17}' fill='#333'>{k}</text>")
        lx += 20 + 7 * len(k)
    out.append("</svg>")
    return "".join(out)


def _err_style(points: float, limit: float = 10.0) -> str:
    return "color:#c0392b;font-weight:bold" if abs(points) > limit else "color:#2d7d46"


def trace_compare_html(cmp: TraceComparison) -> str:
    """The comparison's table (shares, extents, errors; errors past 10 points in red) above both timelines."""
    esc = _html.escape
    head = esc(str(cmp).splitlines()[0])
    th = ("<tr><th style='text-align:left'>task</th><th>busy sim</th><th>measured</th><th>error</th>"
          "<th>wait sim</th><th>measured</th><th>error</th><th>extent sim</th><th>measured</th><th>error</th></tr>")
    body = []
    for t in cmp.tasks:
        te = t.time_error
        body.append(
            f"<tr><td style='text-align:left'>{esc(t.task)} (x{t.replicas})</td>"
            f"<td>{t.sim_busy:.0%}</td><td>{t.measured_busy:.0%}</td>"
            f"<td style='{_err_style(t.busy_error)}'>{t.busy_error:+.1f} pts</td>"
            f"<td>{t.sim_wait:.0%}</td><td>{t.measured_wait:.0%}</td>"
            f"<td style='{_err_style(t.wait_error)}'>{t.wait_error:+.1f} pts</td>"
            f"<td>{t.sim_ns / 1e3:.1f} us</td><td>{t.measured_ns / 1e3:.1f} us</td>"
            f"<td style='{_err_style(100 * te if te is not None else 0, 20)}'>"
            f"{'-' if te is None else f'{te:+.1%}'}</td></tr>")
    notes = "".join(f"<div style='color:#777'>{esc(n)}</div>" for n in cmp.notes)
    return (f"<div class='tlxwb-compare'><style>.tlxwb-compare td,.tlxwb-compare th{{padding:1px 8px;"
            f"text-align:right}}</style><div style='font-family:sans-serif;font-size:12px;margin-bottom:4px'>"
            f"<b>{head}</b></div>"
            f"<table style='font-family:monospace;font-size:12px;border-collapse:collapse'>{th}{''.join(body)}</table>"
            f"{notes}{trace_compare_svg(cmp)}</div>")


views.register("TraceComparison", trace_compare_html)
views.register("TraceComparison", trace_compare_svg, view="svg")
