"""Small pictures the notebooks draw that the workbench's views do not (yet): the deadlock wait-for graph.

>>> from nbpictures import wait_for_svg
>>> display(SVG(wait_for_svg(result.deadlock)))      # doctest: +SKIP
"""
from __future__ import annotations

import html
import math


def wait_for_svg(deadlock, width: int = 640) -> str:
    """The wait-for graph of a DeadlockReport as SVG: a node per task, an arrow from each blocked task
    to each task it waits for, labelled with the barrier, the parity and what is missing."""
    lanes = []
    for b in deadlock.blocked:
        lanes.append((b.lane[1], b.lane[2]))
        for e in b.expected:              # (task, replica, lines, where, ...): more fields may follow
            lanes.append((e[0], e[1]))
    nodes = list(dict.fromkeys(lanes))
    blocked = {(b.lane[1], b.lane[2]) for b in deadlock.blocked}
    h = 200 if len(nodes) <= 2 else 280
    cx, cy, r = width / 2, h / 2 + 6, min(width, h) / 2 - 50
    pos = {}
    for i, n in enumerate(nodes):
        a = math.pi + 2 * math.pi * i / max(len(nodes), 1)
        pos[n] = (cx + 1.6 * r * math.cos(a), cy + r * math.sin(a)) if len(nodes) > 1 else (cx, cy)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{h}' font-family='sans-serif' "
           f"font-size='11'><rect width='{width}' height='{h}' fill='#fff'/>",
           "<defs><marker id='arr' viewBox='0 0 10 10' refX='10' refY='5' markerWidth='7' markerHeight='7' "
           "orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='#c0392b'/></marker></defs>",
           f"<text x='8' y='16' font-weight='bold'>wait-for graph, CTA {deadlock.cta}</text>"]
    for b in deadlock.blocked:
        src = pos[(b.lane[1], b.lane[2])]
        for e in b.expected:
            dst = pos[(e[0], e[1])]
            if dst == src:
                continue
            dx, dy = dst[0] - src[0], dst[1] - src[1]
            d = math.hypot(dx, dy) or 1
            # leave room for the node boxes; bend a little so two opposite arrows do not overlap
            x1, y1 = src[0] + dx / d * 60, src[1] + dy / d * 18
            x2, y2 = dst[0] - dx / d * 60, dst[1] - dy / d * 18
            mx, my = (x1 + x2) / 2 - dy / d * 22, (y1 + y2) / 2 + dx / d * 22
            label = f"{b.barrier} parity {b.phase}: missing {b.missing_arrivals} arr."
            if b.missing_bytes:
                label += f", {b.missing_bytes} B"
            out.append(f"<path d='M{x1:.0f},{y1:.0f} Q{mx:.0f},{my:.0f} {x2:.0f},{y2:.0f}' fill='none' "
                       f"stroke='#c0392b' stroke-width='1.6' marker-end='url(#arr)'/>")
            out.append(f"<text x='{mx:.0f}' y='{my:.0f}' text-anchor='middle' fill='#c0392b'>"
                       f"{html.escape(label)}</text>")
        if not b.expected:
            out.append(f"<text x='{src[0]:.0f}' y='{src[1] + 34:.0f}' text-anchor='middle' fill='#c0392b'>"
                       f"{html.escape(str(b.barrier))}: nobody left to arrive</text>")
    for n, (x, y) in pos.items():
        fill = "#fdecea" if n in blocked else "#eef4fb"
        stroke = "#c0392b" if n in blocked else "#2980b9"
        out.append(f"<rect x='{x - 56:.0f}' y='{y - 15:.0f}' width='112' height='30' rx='6' fill='{fill}' "
                   f"stroke='{stroke}'/><text x='{x:.0f}' y='{y + 4:.0f}' text-anchor='middle'>"
                   f"{html.escape(n[0])}[{n[1]}]{' (blocked)' if n in blocked else ''}</text>")
    out.append("</svg>")
    return "".join(out)
