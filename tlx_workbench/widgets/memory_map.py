"""MemoryMapWidget and memory_map_svg: where a kernel's SMEM (and TMEM) buffers sit."""
from __future__ import annotations

import html

import traitlets

from ._base import View, esm_source

BUFFER_COLORS = ["#5dade2", "#58d68d", "#af7ac5", "#f5b041", "#48c9b0", "#ec7063", "#85929e", "#f4d03f"]
BARRIER_COLOR = "#d35400"
SCRATCH_COLOR = "#bdc3c7"


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{int(n)} B"


def _gpu_name(report) -> str:
    g = getattr(report, "gpu", None)
    if g:
        return str(g)
    t = getattr(report, "target", None)
    return getattr(t, "name", None) or str(t or "")


def memory_map_data(report) -> list[dict]:
    """One entry per storage ("smem", then "tmem" when used): capacity, used, and the
    allocations in address order, each with its track (overlapping = aliased space)."""
    res = report.resources
    allocs = list(getattr(report, "allocations", []) or [])
    src = getattr(report, "source", None)
    out = []
    for storage in ("smem", "tmem"):
        items = sorted((a for a in allocs if a.storage == storage), key=lambda a: (a.offset, -a.size, a.name))
        if storage == "smem":
            cap = res.smem_limit or getattr(getattr(report, "target", None), "smem_per_block", 0) or 0
            used, unit = res.smem_bytes, "bytes"
        else:
            if not items and not getattr(res, "tmem_columns", 0):
                continue
            cap, used, unit = getattr(res, "tmem_limit", 0) or 512, getattr(res, "tmem_columns", 0), "columns"
        tracks_end: list[int] = []
        entries = []
        for a in items:
            for t, end in enumerate(tracks_end):
                if a.offset >= end:
                    tracks_end[t] = a.offset + a.size
                    break
            else:
                t = len(tracks_end)
                tracks_end.append(a.offset + a.size)
            text = src.line_text(a.line) if (src is not None and a.line) else ""
            entries.append({"name": a.name, "kind": a.kind, "storage": a.storage, "shape": list(a.shape),
                            "dtype": a.dtype, "stages": a.num_buffers, "offset": a.offset, "size": a.size,
                            "stage_size": a.buffer_size, "alias_group": a.alias_group, "line": a.line,
                            "text": text.strip(), "track": t})
        groups: dict = {}
        for e in entries:
            if e["alias_group"] is not None:
                groups.setdefault(e["alias_group"], []).append(e["name"])
        for e in entries:
            e["aliases"] = [n for n in groups.get(e["alias_group"], []) if n != e["name"]]
        out.append({"storage": storage, "capacity": cap, "used": used, "unit": unit,
                    "tracks": max(len(tracks_end), 1), "allocations": entries,
                    "end": max([e["offset"] + e["size"] for e in entries] + [0])})
    return out


def memory_map_svg(report, width: int = 960) -> str:
    """The SMEM (and TMEM) map as one self-contained SVG: an address bar per storage with
    each buffer's stages, barriers, aliased (reused) space on separate tracks, the used
    size and the target's capacity line. Each allocation is a ``<g class="tlxwb-alloc"
    data-index=...>`` with a ``<title>``, so it has hover details even without script.

    >>> svg = memory_map_svg(report)            # doctest: +SKIP
    """
    esc = html.escape
    data = memory_map_data(report)
    # gap: the header line, then a line for the used/limit labels, then the bar (they must not overlap)
    left, track_h, gap = 60, 30, 48
    height = 8 + sum(gap + d["tracks"] * track_h + 24 for d in data)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-memmap-svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='10'>",
           f"<rect width='{width}' height='{height}' fill='#fff'/>"]
    y = 8
    index = 0
    palette: dict = {}
    for d in data:
        top = max(d["capacity"], d["used"], d["end"], 1) * 1.03
        plot_w = width - left - 10
        X = lambda v: left + v / top * plot_w
        unit_b = d["unit"] == "bytes"
        fmt = _kib if unit_b else (lambda v: f"{int(v)} cols")
        label = "SMEM" if d["storage"] == "smem" else "TMEM"
        out.append(f"<text x='4' y='{y + 14}' font-weight='bold' font-size='12'>{label}</text>"
                   f"<text x='{left}' y='{y + 12}' fill='#444'>used {fmt(d['used'])} of {fmt(d['capacity'])} "
                   f"({d['used'] / d['capacity']:.0%}) on {esc(_gpu_name(report))}</text>" if d["capacity"] else "")
        bar_y = y + gap - 14
        bar_h = d["tracks"] * track_h
        out.append(f"<rect x='{left}' y='{bar_y}' width='{plot_w}' height='{bar_h}' fill='#f7f7f7' stroke='#ddd'/>")
        # ticks
        step = 16384 if unit_b else 64
        while top / step > 14:
            step *= 2
        v = 0
        while v <= top:
            out.append(f"<line x1='{X(v):.1f}' y1='{bar_y + bar_h}' x2='{X(v):.1f}' y2='{bar_y + bar_h + 4}' stroke='#999'/>"
                       f"<text x='{X(v) + 1:.1f}' y='{bar_y + bar_h + 13}' fill='#777' font-size='9'>"
                       f"{int(v // 1024) if unit_b else int(v)}{'K' if unit_b and v else ''}</text>")
            v += step
        # space the compiler uses beyond the named allocations (scratch, padding)
        if d["used"] > d["end"]:
            out.append(f"<rect class='tlxwb-other' x='{X(d['end']):.1f}' y='{bar_y + 2}' width='{X(d['used']) - X(d['end']):.1f}' "
                       f"height='{track_h - 4}' fill='url(#tlxwb-hatch)' stroke='#aaa'>"
                       f"<title>other (scratch, padding): {fmt(d['used'] - d['end'])}</title></rect>")
        for e in d["allocations"]:
            if e["kind"] == "barrier":
                color = BARRIER_COLOR
            elif e["kind"] == "scratch":
                color = SCRATCH_COLOR
            else:
                color = palette.setdefault(e["name"], BUFFER_COLORS[len(palette) % len(BUFFER_COLORS)])
            x0, x1 = X(e["offset"]), X(e["offset"] + e["size"])
            ty = bar_y + e["track"] * track_h + 2
            h = track_h - 4
            shape = "x".join(map(str, e["shape"]))
            title = (f"{e['name']} ({e['kind']}, {e['storage']}): {e['stages']} x {shape} {e['dtype']}, "
                     f"{fmt(e['stage_size'])} each, {fmt(e['size'])} at {e['offset']:#x}..{e['offset'] + e['size']:#x}"
                     + (f", shares space with {', '.join(e['aliases'])}" if e["aliases"] else "")
                     + (f", line {e['line']}" if e["line"] else ""))
            stroke = "#c0392b" if e["alias_group"] is not None else "#333"
            dash = " stroke-dasharray='4 2'" if e["alias_group"] is not None else ""
            out.append(f"<g class='tlxwb-alloc' data-index='{index}' data-name='{esc(e['name'])}'>"
                       f"<title>{esc(title)}</title><rect x='{x0:.1f}' y='{ty}' width='{max(x1 - x0, 4 if e['kind'] == 'barrier' else 1.5):.1f}' "
                       f"height='{h}' fill='{color}' stroke='{stroke}' stroke-width='1'{dash}/>")
            if e["stages"] > 1 and (x1 - x0) / e["stages"] > 3:
                for k in range(1, e["stages"]):
                    xs = X(e["offset"] + k * e["stage_size"])
                    out.append(f"<line x1='{xs:.1f}' y1='{ty}' x2='{xs:.1f}' y2='{ty + h}' stroke='#fff' stroke-width='1.5'/>")
            name = e["name"] + (f" x{e['stages']}" if e["stages"] > 1 else "")
            if x1 - x0 > 7 * len(name):
                out.append(f"<text x='{x0 + 3:.1f}' y='{ty + h / 2 + 4}' fill='#111' pointer-events='none'>{esc(name)}</text>")
            out.append("</g>")
            index += 1
        for v, lab, col in ((d["used"], f"used {fmt(d['used'])}", "#2c3e50"),
                            (d["capacity"], f"limit {fmt(d['capacity'])}", "#c0392b")):
            if v:
                out.append(f"<line class='tlxwb-{'limit' if col == '#c0392b' else 'used'}' x1='{X(v):.1f}' y1='{bar_y - 6}' "
                           f"x2='{X(v):.1f}' y2='{bar_y + bar_h + 2}' stroke='{col}' stroke-width='2' stroke-dasharray='5 3'/>"
                           f"<text x='{X(v) - 3:.1f}' y='{bar_y - 8}' fill='{col}' text-anchor='end'>{esc(lab)}</text>")
        y += gap + bar_h + 24
    out.insert(2, "<defs><pattern id='tlxwb-hatch' width='6' height='6' patternUnits='userSpaceOnUse' "
                  "patternTransform='rotate(45)'><rect width='6' height='6' fill='#eee'/>"
                  "<line x1='0' y1='0' x2='0' y2='6' stroke='#bbb' stroke-width='2'/></pattern></defs>")
    out.append("</svg>")
    return "".join(out)


def memory_map_table(report) -> str:
    """The allocations in address order as an HTML table."""
    esc = html.escape
    rows = []
    for d in memory_map_data(report):
        fmt = _kib if d["unit"] == "bytes" else (lambda v: f"{int(v)} cols")
        for e in d["allocations"]:
            rows.append(f"<tr><td>{d['storage'].upper()}</td><td>{esc(e['name'])}</td><td>{esc(e['kind'])}</td>"
                        f"<td>{e['stages']} x {'x'.join(map(str, e['shape']))} {esc(e['dtype'])}</td>"
                        f"<td>{fmt(e['stage_size'])}</td><td>{e['offset']:#x}</td><td>{fmt(e['size'])}</td>"
                        f"<td>{esc(', '.join(e['aliases'])) or ''}</td><td>{e['line'] or ''}</td></tr>")
    return ("<table class='tlxwb-memmap-table' style='font:11px monospace'><tr><th>mem</th><th>name</th><th>kind</th>"
            "<th>buffers</th><th>each</th><th>offset</th><th>size</th><th>shares space with</th><th>line</th></tr>"
            + "".join(rows) + "</table>")


class MemoryMapWidget(View):
    """SMEM (and, on sm_100, TMEM) of a compiled kernel as an address bar: buffers with
    their stages, barriers, aliased space, the used size and the target's capacity.
    Hover for details (and to see what shares space), click to select the source line.

    >>> MemoryMapWidget(wb.compile(kernel, *args, target="sm_90"))     # doctest: +SKIP
    """

    _esm = esm_source("memory_map")
    _svg = traitlets.Unicode("").tag(sync=True)
    _table = traitlets.Unicode("").tag(sync=True)
    _allocs = traitlets.List().tag(sync=True)
    selected_name = traitlets.Unicode("").tag(sync=True)
    selected_line = traitlets.Int(None, allow_none=True).tag(sync=True)

    def __init__(self, report, *, title: str | None = None, **kwargs):
        self.report = report
        allocs = [dict(e, unit=d["unit"]) for d in memory_map_data(report) for e in d["allocations"]]
        name = getattr(report, "kernel", None) or getattr(report, "kernel_name", "kernel")
        super().__init__(title=title or f"{name} memory map ({_gpu_name(report)})",
                         _svg=memory_map_svg(report), _table=memory_map_table(report), _allocs=allocs, **kwargs)

    def static_html(self) -> str:
        return (f"<div class='tlxwb-static'><div style='font:600 12px sans-serif'>{html.escape(self.title)}</div>"
                f"{self._svg}{self._table}</div>")

    def __repr__(self) -> str:
        return f"MemoryMapWidget({self.title})"
