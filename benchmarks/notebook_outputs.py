"""How long the teaching notebooks' stored outputs are: bytes, and the text lines a reader sees.

    .venv/bin/python benchmarks/notebook_outputs.py [--before REV] [NOTEBOOK ...]

Per notebook: the bytes of the cells' stored outputs, the bytes of the stored widget state
(notebook metadata), how many outputs there are, and how many text lines a reader sees in a
live frontend. For that count each output shows one thing, as JupyterLab picks it: a widget
(when its state is stored) or a picture shows no text lines; HTML shows its visible text (tags
dropped, a line per block element, SVG left out); plain text and streams their lines. With
``--before REV`` the same figures are read from the notebooks as committed at REV, side by side.
"""
from __future__ import annotations

import argparse
import html.parser
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
WIDGET = "application/vnd.jupyter.widget-view+json"
PICTURES = ("image/svg+xml", "image/png", "image/jpeg")
_BLOCK = {"br", "p", "div", "tr", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table", "details",
          "summary", "ul", "ol", "hr", "caption"}


class _VisibleText(html.parser.HTMLParser):
    """The text of an HTML fragment as it reads on screen, a line per block element; SVG, style and script out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0
        self._pre = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("svg", "style", "script"):
            self._hidden += 1
        if tag == "pre":
            self._pre += 1
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("svg", "style", "script"):
            self._hidden = max(0, self._hidden - 1)
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if tag in _BLOCK:
            self.parts.append("\n")
        elif tag in ("td", "th"):
            self.parts.append(" ")

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data if self._pre else " ".join(data.split("\n")))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _lines(text: str) -> int:
    return sum(1 for ln in text.splitlines() if ln.strip())


def html_lines(fragment: str) -> int:
    """Non-empty text lines the fragment shows once rendered.

    >>> html_lines("<div><b>ok</b><table><tr><td>a</td></tr><tr><td>b</td></tr></table><svg><text>x</text></svg></div>")
    3
    """
    p = _VisibleText()
    p.feed(fragment)
    p.close()
    return _lines("".join(p.parts))


def output_lines(out: dict, widget_ids: set) -> int:
    """The text lines a reader sees for one stored output in a live frontend."""
    kind = out["output_type"]
    if kind == "stream":
        return _lines(_text(out.get("text", "")))
    if kind == "error":
        return len(out.get("traceback", []))
    data = out.get("data", {})
    if WIDGET in data and data[WIDGET].get("model_id") in widget_ids:
        return 0
    if any(m in data for m in PICTURES):
        return 0
    if "text/html" in data:
        return html_lines(_text(data["text/html"]))
    return _lines(_text(data.get("text/plain", "")))


def measure(nb: dict) -> dict:
    """Output bytes, widget-state bytes, outputs and visible text lines of one notebook's JSON."""
    widgets = nb.get("metadata", {}).get("widgets", {})
    state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    ids = set(state)
    outs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    return {"output_bytes": sum(len(json.dumps(o, indent=1, ensure_ascii=False)) for o in outs),
            "widget_bytes": len(json.dumps(widgets, indent=1, ensure_ascii=False)) if state else 0,
            "outputs": len(outs),
            "lines": sum(output_lines(o, ids) for o in outs)}


def _load(path: pathlib.Path, rev: str | None) -> dict | None:
    if rev is None:
        return json.loads(path.read_text())
    rel = path.resolve().relative_to(ROOT).as_posix()
    got = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True)
    return json.loads(got.stdout) if got.returncode == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a git revision to compare with")
    ap.add_argument("notebooks", nargs="*", type=pathlib.Path)
    opt = ap.parse_args()
    paths = opt.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    cols = ("output_bytes", "widget_bytes", "outputs", "lines")
    if opt.before:
        print("| notebook | output bytes then / now | widget state bytes then / now | outputs then / now "
              "| text lines then / now |")
        print("|---|---|---|---|---|")
    else:
        print("| notebook | output bytes | widget state bytes | outputs | text lines |")
        print("|---|---|---|---|---|")
    for p in paths:
        now = measure(_load(p, None))
        if opt.before:
            old_nb = _load(p, opt.before)
            old = measure(old_nb) if old_nb else None
            cells = [f"{old[c]:,} / {now[c]:,}" if old else f"(new) / {now[c]:,}" for c in cols]
        else:
            cells = [f"{now[c]:,}" for c in cols]
        print(f"| {p.stem} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
