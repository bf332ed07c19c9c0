"""What a notebook shows before it is trusted: every picture also as plain positioned HTML.

A freshly cloned notebook opens untrusted. JupyterLab then renders no widget, no ``image/svg+xml``
and no script; it renders ``text/html`` after sanitizing it, and its sanitizer drops ``<svg>`` and
``<style>`` (keeping an SVG's text, so a timeline reads as a wall of words) but keeps ``<div>`` and
``<span>`` with inline ``position``/``left``/``top``/``width``/``height``/``background`` styles and
``title`` attributes. :func:`svg_html` redraws our SVG pictures (rects, axis lines, text, circles,
simple paths, tooltips) in that vocabulary; :func:`untrusted_safe` puts that copy beside every
``<svg>`` of an HTML fallback, with a scoped ``<style>`` that shows the SVG and hides the copy
wherever the output is trusted (the style, and the id it is scoped to, do not survive the sanitizer).
:class:`Picture` is an SVG for ``display()`` that shows in both.

>>> display(Picture(barrier_svg(trace)))          # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import html
import math
import re
import xml.etree.ElementTree as ET

_SVG_RE = re.compile(r"<svg\b.*?</svg>", re.S)
_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_MAX_DOTS = 80          # a slanted line or curve is drawn as dots; at most this many per segment


def _num(v, default=0.0) -> float:
    if v is None:
        return default
    m = _NUM.match(str(v).strip())
    return float(m.group(0)) if m else default


def _colour(v, fallback="transparent") -> str:
    if v is None or v == "none":
        return fallback
    if v.startswith("url("):             # a pattern (hatching): its gist, a light grey
        return "#c8c8c8"
    return v


class _Drawer:
    def __init__(self, sx: float, sy: float):
        self.sx, self.sy = sx, sy
        self.out: list[str] = []

    def box(self, x, y, w, h, style: str, tip: str | None, inner: str = "") -> None:
        t = f" title='{html.escape(tip, quote=True)}'" if tip else ""
        self.out.append(f"<div{t} style='position:absolute;left:{x * self.sx:.1f}px;top:{y * self.sy:.1f}px;"
                        f"width:{max(w * self.sx, 0.0):.1f}px;height:{max(h * self.sy, 0.0):.1f}px;{style}'>"
                        f"{inner}</div>")

    def segment(self, x1, y1, x2, y2, colour: str, width: float, tip, opacity: float = 1.0) -> None:
        op = f"opacity:{opacity:g};" if opacity < 1 else ""
        w = max(width, 1.0)
        if abs(y1 - y2) < 0.5:
            self.box(min(x1, x2), y1 - w / 2, abs(x2 - x1) or w, w, f"background:{colour};{op}", tip)
        elif abs(x1 - x2) < 0.5:
            self.box(x1 - w / 2, min(y1, y2), w, abs(y2 - y1), f"background:{colour};{op}", tip)
        else:
            # no CSS transform survives the sanitizer: a slanted line is a row of dots
            n = min(_MAX_DOTS, max(2, int(math.hypot(x2 - x1, y2 - y1) / 3)))
            for k in range(n + 1):
                f = k / n
                self.box(x1 + (x2 - x1) * f - w / 2, y1 + (y2 - y1) * f - w / 2, w, w,
                         f"background:{colour};{op}", tip)


def _path_points(d: str) -> list[list[tuple[float, float]]]:
    """The polylines of a path's M/L/H/V/C/Q/Z commands (curves through their end points)."""
    polys: list[list[tuple[float, float]]] = []
    toks = re.findall(r"[MLHVCQZmlhvcqz]|-?\d+(?:\.\d+)?(?:e-?\d+)?", d or "")
    i, cmd, x, y = 0, "M", 0.0, 0.0
    start = (0.0, 0.0)
    while i < len(toks):
        if toks[i].isalpha():
            cmd = toks[i]
            i += 1
            if cmd in "Zz":
                if polys:
                    polys[-1].append(start)
                    x, y = start
                continue
        need = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "Q": 4}.get(cmd.upper(), 2)
        if i + need > len(toks) or any(t.isalpha() for t in toks[i:i + need]):
            break
        vals = [float(t) for t in toks[i:i + need]]
        i += need
        rel = cmd.islower()
        if cmd.upper() == "H":
            x = vals[0] + (x if rel else 0)
        elif cmd.upper() == "V":
            y = vals[0] + (y if rel else 0)
        else:
            nx, ny = vals[-2], vals[-1]
            x, y = (x + nx, y + ny) if rel else (nx, ny)
        if cmd.upper() == "M":
            polys.append([(x, y)])
            start = (x, y)
            cmd = "l" if rel else "L"          # further pairs after M are lines
        else:
            if not polys:
                polys.append([(0.0, 0.0)])
            polys[-1].append((x, y))
    return polys


def svg_html(svg: str) -> str:
    """One of our SVG pictures as positioned ``<div>`` s that an untrusted notebook renders.

    Rects, axis-parallel and slanted lines, circles, simple paths, text and each element's
    ``<title>`` (as a tooltip) come over; an SVG that does not parse comes back as a note.

    >>> "position:absolute" in svg_html("<svg width='20' height='10'><rect x='1' y='1' width='5' height='5' "
    ...                                 "fill='red'><title>a span</title></rect></svg>")
    True
    """
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return "<div><i>(a picture: trust the notebook or run the cell to see it)</i></div>"
    width, height = _num(root.get("width"), 600), _num(root.get("height"), 200)
    vb = [float(v) for v in _NUM.findall(root.get("viewBox") or "")]
    sx = width / vb[2] if len(vb) == 4 and vb[2] else 1.0
    sy = height / vb[3] if len(vb) == 4 and vb[3] else 1.0
    ox, oy = (vb[0], vb[1]) if len(vb) == 4 else (0.0, 0.0)
    d = _Drawer(sx, sy)
    base = {"fill": "#000", "font-size": root.get("font-size") or "11",
            "font-family": root.get("font-family") or "sans-serif"}

    def tag(el) -> str:
        return el.tag.rsplit("}", 1)[-1]

    def title_of(el) -> str | None:
        for c in el:
            if tag(c) == "title":
                return "".join(c.itertext()).strip() or None
        return None

    def walk(el, inherited: dict, dx: float, dy: float, tip: str | None) -> None:
        attrs = {**inherited, **{k: v for k, v in el.attrib.items()
                                 if k in ("fill", "stroke", "stroke-width", "font-size", "font-weight",
                                          "font-family", "text-anchor", "opacity", "fill-opacity",
                                          "stroke-opacity")}}
        tip = title_of(el) or tip
        t = tag(el)
        m = re.match(r"translate\(\s*([-\d.e]+)[ ,]*([-\d.e]*)\s*\)", el.get("transform") or "")
        if m:
            dx, dy = dx + float(m.group(1)), dy + (float(m.group(2)) if m.group(2) else 0.0)
        opacity = _num(attrs.get("opacity"), 1.0)
        if t in ("svg", "g", "a"):
            for c in el:
                walk(c, attrs, dx, dy, tip)
        elif t == "rect":
            fill = _colour(attrs.get("fill"), "transparent")
            style = f"background:{fill};"
            op = opacity * _num(attrs.get("fill-opacity"), 1.0)
            if op < 1:
                style += f"opacity:{op:g};"
            if attrs.get("stroke") not in (None, "none"):
                style += f"box-sizing:border-box;border:{max(_num(attrs.get('stroke-width'), 1), 1):g}px solid " \
                         f"{attrs['stroke']};"
            if el.get("rx"):
                style += f"border-radius:{_num(el.get('rx')):g}px;"
            d.box(_num(el.get("x")) + dx - ox, _num(el.get("y")) + dy - oy, _num(el.get("width")),
                  _num(el.get("height")), style, tip)
        elif t == "line":
            d.segment(_num(el.get("x1")) + dx - ox, _num(el.get("y1")) + dy - oy, _num(el.get("x2")) + dx - ox,
                      _num(el.get("y2")) + dy - oy, _colour(attrs.get("stroke"), "#000"),
                      _num(attrs.get("stroke-width"), 1.0), tip,
                      opacity * _num(attrs.get("stroke-opacity"), 1.0))
        elif t == "path":
            colour = _colour(attrs.get("stroke"), "") or _colour(attrs.get("fill"), "#000")
            polys = _path_points(el.get("d"))
            pts = [p for poly in polys for p in poly]
            fill = _colour(attrs.get("fill"), "") if "fill" in attrs else "#000"
            if pts and fill and fill != "transparent":
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                if max(xs) - min(xs) <= 16 and max(ys) - min(ys) <= 16:
                    # a marker (a diamond, an arrow head): its filled box
                    d.box(min(xs) + dx - ox, min(ys) + dy - oy, max(xs) - min(xs), max(ys) - min(ys),
                          f"background:{fill};border-radius:2px;", tip)
                    return
            for poly in polys:
                for (x1, y1), (x2, y2) in zip(poly, poly[1:]):
                    d.segment(x1 + dx - ox, y1 + dy - oy, x2 + dx - ox, y2 + dy - oy, colour,
                              _num(attrs.get("stroke-width"), 1.0), tip, opacity)
        elif t == "circle":
            r = _num(el.get("r"))
            d.box(_num(el.get("cx")) + dx - ox - r, _num(el.get("cy")) + dy - oy - r, 2 * r, 2 * r,
                  f"background:{_colour(attrs.get('fill'), '#000')};border-radius:50%;", tip)
        elif t == "text":
            words = "".join(s for c in [el] for s in _text_of(c)).strip("\n")
            if not words:
                return
            fs = _num(attrs.get("font-size"), 11.0)
            anchor = attrs.get("text-anchor", "start")
            x, y = _num(el.get("x")) + dx - ox, _num(el.get("y")) + dy - oy
            span = 2000.0
            left = {"middle": x - span / 2, "end": x - span}.get(anchor, x)
            align = {"middle": "center", "end": "right"}.get(anchor, "left")
            style = (f"font-size:{fs * sy:g}px;line-height:{fs * 1.2 * sy:g}px;color:{_colour(attrs.get('fill'), '#000')};"
                     f"text-align:{align};white-space:pre;overflow:visible;")
            if attrs.get("font-weight"):
                style += f"font-weight:{attrs['font-weight']};"
            # the box sits on the baseline: its top a font size above it; text-anchor picks the edge it hangs from
            d.box(left, y - fs * 0.95, span, fs * 1.2, style, tip,
                  inner=f"<span>{html.escape(words)}</span>" if anchor == "start" else html.escape(words))
    walk(root, base, 0.0, 0.0, None)
    return (f"<div class='tlxwb-untrusted-picture' style='position:relative;width:{width:g}px;height:{height:g}px;"
            f"overflow:hidden;background:#fff;font-family:{html.escape(base['font-family'])}'>"
            + "".join(d.out) + "</div>")


def _text_of(el):
    """A text element's words, without its <title>."""
    if el.text:
        yield el.text
    for c in el:
        if c.tag.rsplit("}", 1)[-1] != "title":
            yield from _text_of(c)
        if c.tail:
            yield c.tail


def untrusted_safe(fragment: str) -> str:
    """``fragment`` (HTML) with a plain-HTML copy of each ``<svg>`` beside it, shown only where the output
    is not trusted (where JupyterLab sanitizes it): trusted, the SVG shows and the copy is hidden.

    >>> out = untrusted_safe("<p>a</p><svg width='4' height='4'><rect width='4' height='4'/></svg>")
    >>> out.count("<svg"), "display:none" in out
    (1, True)
    """
    if "<svg" not in fragment:
        return fragment

    def both(m) -> str:
        svg = m.group(0)
        key = "tlxwb-p" + hashlib.sha1(svg.encode()).hexdigest()[:12]
        # the sanitizer drops <style> (and turns id into data-jupyter-id): untrusted, the inline styles rule
        return (f"<div id='{key}' class='tlxwb-picture'><style>#{key}>.tlxwb-svgbox{{display:block!important}}"
                f"#{key}>.tlxwb-htmlbox{{display:none!important}}</style>"
                f"<div class='tlxwb-htmlbox' style='overflow-x:auto;max-width:100%'>{svg_html(svg)}</div>"
                f"<div class='tlxwb-svgbox' style='display:none'>{svg}</div></div>")
    return _SVG_RE.sub(both, fragment)


class Picture:
    """An SVG picture for ``display()`` that shows in a trusted notebook (the SVG), an untrusted one (the
    same picture in plain HTML) and a text export (``text/plain``: what it is, not an object's address).

    >>> display(Picture(timeline_svg(trace), "the timeline"))      # doctest: +SKIP
    """

    def __init__(self, svg: str, what: str = "a picture"):
        self.svg, self.what = svg, what

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"image/svg+xml": self.svg, "text/html": untrusted_safe(self.svg),
                "text/plain": f"<{self.what}: an SVG; trust the notebook or run the cell to see it drawn>"}

    def __repr__(self) -> str:
        return f"Picture({self.what!r})"
