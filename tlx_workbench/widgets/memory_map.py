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


def _default_title(report) -> str:
    name = getattr(report, "kernel", None) or getattr(report, "kernel_name", "kernel")
    return f"{name} memory map ({_gpu_name(report)})"


def _static(title: str, svg: str, table: str) -> str:
    return f"<div class='tlxwb-static'><div style='font:600 12px sans-serif'>{html.escape(title)}</div>{svg}{table}</div>"


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


def _step(top: float, unit_b: bool) -> int:
    step = 256 if unit_b else 16
    while top / step > 10:
        step *= 2
    return step


def _tick(v: float, unit_b: bool) -> str:
    if not unit_b:
        return str(int(v))
    return f"{v / 1024:g}K" if v and v % 1024 == 0 else (f"{v / 1024:.1f}K" if v >= 1024 else str(int(v)))


def memory_map_svg(report, width: int = 960, storage: str | None = None, titles: bool = True) -> str:
    """The SMEM (and TMEM) map as one self-contained SVG, readable without hovering.

    The address bar of each storage is scaled to what the kernel uses (the target's capacity is a
    gauge beside the header, and a limit line on the bar only when the use comes near it or goes
    over). Every buffer is labelled with its name, stages and size, each stage with its index
    where it has room; a buffer too narrow for its label (a barrier, a small scratch) is named
    under the bar with a leader line. Aliased (reused) space sits on its own track, dashed.
    Each allocation is a ``<g class="tlxwb-alloc" data-index=...>`` with a ``<title>``, so the
    details are also there on hover, without script (``titles=False`` leaves them out, where a
    table beside the map lists them). ``storage`` ("smem" or "tmem") draws one alone.

    >>> svg = memory_map_svg(report)            # doctest: +SKIP
    """
    esc = html.escape
    data = [d for d in memory_map_data(report) if storage is None or d["storage"] == storage]
    left, right, track_h, head_h, label_h = 60, 10, 30, 34, 13
    plot_w = width - left - right
    out: list[str] = []
    y = 6
    index = 0
    palette: dict = {}
    for d in data:
        unit_b = d["unit"] == "bytes"
        fmt = _kib if unit_b else (lambda v: f"{int(v)} cols")
        label = "SMEM" if d["storage"] == "smem" else "TMEM"
        cap, used = d["capacity"], d["used"]
        extent = max(used, d["end"], 1)
        near = bool(cap) and extent >= 0.75 * cap
        top = max(extent, cap if near else 0)
        X = lambda v, top=top: left + v / top * plot_w
        # header: what is used, of what, and a gauge of the capacity
        gauge_w, gx = 160, width - right - 160
        share = used / cap if cap else 0
        said = (f"used {fmt(used)}" + (f" of {fmt(cap)} ({share:.0%})" if cap else "")
                + (f" on {_gpu_name(report)}" if _gpu_name(report) else ""))
        note = f"; the bar is scaled to the {fmt(top)} used" if cap and not near else ""
        if left + 6 * len(said + note) > gx - 80:
            note = ""
        out.append(f"<text x='4' y='{y + 14}' font-weight='bold' font-size='12'>{label}</text>"
                   f"<text class='tlxwb-memmap-used' x='{left}' y='{y + 14}' fill='#333' font-size='11'>"
                   f"{esc(said + note)}</text>")
        if cap:
            over = used > cap
            out.append(f"<g class='tlxwb-memmap-gauge'><title>{fmt(used)} of the {fmt(cap)} limit</title>"
                       f"<rect x='{gx}' y='{y + 5}' width='{gauge_w}' height='10' fill='#eee' stroke='#ccc'/>"
                       f"<rect x='{gx}' y='{y + 5}' width='{gauge_w * min(share, 1):.1f}' height='10' "
                       f"fill='{'#c0392b' if over else '#5d6d7e'}'/>"
                       f"<line class='tlxwb-limit' x1='{gx + gauge_w}' y1='{y + 2}' x2='{gx + gauge_w}' y2='{y + 18}' "
                       f"stroke='#c0392b' stroke-width='2'/>"
                       f"<text x='{gx - 4}' y='{y + 14}' fill='#c0392b' font-size='10' text-anchor='end'>"
                       f"limit {fmt(cap)}</text></g>")
        bar_y = y + head_h
        bar_h = d["tracks"] * track_h
        out.append(f"<rect x='{left}' y='{bar_y}' width='{plot_w}' height='{bar_h}' fill='#f7f7f7' stroke='#ddd'/>")
        step = _step(top, unit_b)
        ticks, v = [], 0
        while v <= top * 1.0001:
            ticks.append(v)
            v += step
        out.append("<path stroke='#999' d='" + "".join(f"M{X(v):.1f},{bar_y + bar_h}v4" for v in ticks) + "'/>"
                   "<g fill='#777' font-size='9'>" + "".join(
                       f"<text x='{X(v) + 1:.1f}' y='{bar_y + bar_h + 13}'"
                       + (" text-anchor='end'" if X(v) > width - right - 24 else "") + f">{_tick(v, unit_b)}</text>"
                       for v in ticks) + "</g>")
        # space the compiler uses beyond the named allocations (scratch, padding)
        if used > d["end"]:
            out.append(f"<rect class='tlxwb-other' x='{X(d['end']):.1f}' y='{bar_y + 2}' width='{X(used) - X(d['end']):.1f}' "
                       f"height='{track_h - 4}' fill='url(#tlxwb-hatch)' stroke='#aaa'>"
                       f"<title>other (scratch, padding): {fmt(used - d['end'])}</title></rect>")
        callouts = []          # (x, track y, label, colour) of the allocations too narrow for their label
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
            w = max(x1 - x0, 4 if e["kind"] == "barrier" else 1.5)
            out.append(f"<g class='tlxwb-alloc' data-index='{index}' data-name='{esc(e['name'])}'>"
                       + (f"<title>{esc(title)}</title>" if titles else "") + f"<rect x='{x0:.1f}' y='{ty}' width='{w:.1f}' "
                       f"height='{h}' fill='{color}' stroke='{stroke}' stroke-width='1'{dash}/>")
            per_stage = (x1 - x0) / max(e["stages"], 1)
            if e["stages"] > 1 and per_stage > 3:
                for k in range(1, e["stages"]):
                    xs = X(e["offset"] + k * e["stage_size"])
                    out.append(f"<line x1='{xs:.1f}' y1='{ty}' x2='{xs:.1f}' y2='{ty + h}' stroke='#fff' stroke-width='1.5'/>")
            name = e["name"] + (f" ×{e['stages']}" if e["stages"] > 1 else "")
            full = f"{name} · {fmt(e['size'])}"
            if x1 - x0 > 6.2 * len(full) + 6:
                text = full
            elif x1 - x0 > 6.2 * len(name) + 6:
                text = name
            else:
                text = None
            if text is not None:
                out.append(f"<text class='tlxwb-alloc-label' x='{x0 + 3:.1f}' y='{ty + 11}'>{esc(text)}</text>")
                if e["stages"] > 1 and per_stage > 18:
                    out.append("<g font-size='9' text-anchor='middle'>" + "".join(
                        f"<text class='tlxwb-stage' x='{x0 + (k + 0.5) * per_stage:.1f}' y='{ty + h - 3}'>"
                        f"{'stage ' if per_stage > 50 else 's'}{k}</text>" for k in range(e["stages"])) + "</g>")
            else:
                callouts.append(((x0 + x1) / 2, ty + h, f"{name} · {fmt(e['size'])}", color))
            out.append("</g>")
            index += 1
        # the narrow ones, named under the bar (rows of labels that do not overlap, a leader line each)
        rows_end: list[float] = []
        base = bar_y + bar_h + 18
        for cx, cy, text, color in sorted(callouts):
            w = 5.6 * len(text) + 8
            lx = min(max(cx - 4, left), width - right - w)
            row = next((r for r, end in enumerate(rows_end) if lx >= end), None)
            if row is None:
                row = len(rows_end)
                rows_end.append(0)
            rows_end[row] = lx + w
            ly = base + row * label_h + 9
            out.append(f"<g class='tlxwb-callout'><path d='M{cx:.1f},{cy}V{ly - 8}' stroke='#999'/>"
                       f"<rect x='{lx:.1f}' y='{ly - 8}' width='6' height='6' fill='{color}'/>"
                       f"<text x='{lx + 8:.1f}' y='{ly - 2}' font-size='9'>{esc(text)}</text></g>")
        if used and (near or used > cap):
            out.append(f"<line class='tlxwb-used' x1='{X(used):.1f}' y1='{bar_y - 4}' x2='{X(used):.1f}' "
                       f"y2='{bar_y + bar_h + 2}' stroke='#2c3e50' stroke-width='2' stroke-dasharray='5 3'/>")
            if cap:
                out.append(f"<line class='tlxwb-limit' x1='{X(cap):.1f}' y1='{bar_y - 4}' x2='{X(cap):.1f}' "
                           f"y2='{bar_y + bar_h + 2}' stroke='#c0392b' stroke-width='2' stroke-dasharray='5 3'/>")
        y = base + len(rows_end) * label_h + 8
    height = y
    head = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-memmap-svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='10'>",
            f"<rect width='{width}' height='{height}' fill='#fff'/>",
            "<defs><pattern id='tlxwb-hatch' width='6' height='6' patternUnits='userSpaceOnUse' "
            "patternTransform='rotate(45)'><rect width='6' height='6' fill='#eee'/>"
            "<line x1='0' y1='0' x2='0' y2='6' stroke='#bbb' stroke-width='2'/></pattern></defs>"]
    return "".join(head + out + ["</svg>"])


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
        super().__init__(title=title or _default_title(report),
                         _svg=memory_map_svg(report), _table=memory_map_table(report), _allocs=allocs, **kwargs)

    def static_svg(self) -> str:
        return self._svg

    def static_html(self, svg: str | None = None) -> str:
        return _static(self.title, self._svg, self._table)

    @classmethod
    def static(cls, report, *, title: str | None = None) -> str:
        """What ``MemoryMapWidget(report, ...)`` draws as its static fallback, with no widget made."""
        return _static(title or _default_title(report), memory_map_svg(report), memory_map_table(report))

    def __repr__(self) -> str:
        return f"MemoryMapWidget({self.title})"
