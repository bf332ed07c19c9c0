"""IRExplorer and ir_html: kernel source beside its TTGIR / PTX / SASS, linked both ways."""
from __future__ import annotations

import html

import traitlets

from ._base import View, esm_source

DEFAULT_STAGES = ("ttgir", "ptx", "sass")
STATIC_MAX_LINES = 1500


def _stage_text(report, stage: str) -> str | None:
    if stage == "sass":
        try:
            # the real CompileReport disassembles SASS lazily (report.sass); others may carry it in stages
            text = getattr(report, "sass", None)
        except Exception:  # a missing disassembler leaves the pane out, not the view
            text = None
        if isinstance(text, str) and text:
            return text
    return (getattr(report, "stages", None) or {}).get(stage)


def ir_data(report, stages=DEFAULT_STAGES) -> dict:
    """Panes (source first, then each stage present) and the line maps between them."""
    src = report.source
    panes = [{"stage": "source", "title": "source", "first": src.first_line, "lines": src.text.splitlines()}]
    smap = report.source_map
    fwd, back = {}, {}
    for st in stages:
        text = _stage_text(report, st)
        if text is None:
            continue
        panes.append({"stage": st, "title": st.upper() if st != "ttgir" else "TTGIR", "first": 1,
                      "lines": text.splitlines()})
        fwd[st] = {str(k): list(v) for k, v in (smap.forward.get(st) or {}).items()}
        back[st] = {str(k): v for k, v in (smap.backward.get(st) or {}).items()}
    return {"panes": panes, "forward": fwd, "backward": back}


class IRExplorer(View):
    """Kernel source | TTGIR | PTX | SASS side by side. Click a source line to light up the
    IR lines it became (each pane scrolls to them); click an IR line to light up its source
    line and its sibling lines in the other stages. ``selected_line`` follows the source line.

    >>> IRExplorer(report, stages=("ttgir", "ptx", "sass"))      # doctest: +SKIP
    """

    _esm = esm_source("ir_explorer")
    _panes = traitlets.List().tag(sync=True)
    _forward = traitlets.Dict().tag(sync=True)
    _backward = traitlets.Dict().tag(sync=True)
    selected_line = traitlets.Int(None, allow_none=True).tag(sync=True)

    def __init__(self, report, *, stages=DEFAULT_STAGES, title: str | None = None, **kwargs):
        self.report = report
        d = ir_data(report, stages)
        name = getattr(report, "kernel", None) or getattr(report, "kernel_name", "kernel")
        super().__init__(title=title or f"{name}: source and IR", _panes=d["panes"], _forward=d["forward"],
                         _backward=d["backward"], **kwargs)

    def lines_for(self, stage: str, line: int) -> list[int]:
        """The lines of ``stage`` that source line ``line`` became."""
        return list(self._forward.get(stage, {}).get(str(line), []))

    def static_html(self, svg: str | None = None) -> str:
        return ir_html(self.report, title=self.title, data={"panes": self._panes, "forward": self._forward,
                                                             "backward": self._backward})

    @classmethod
    def static(cls, report, *, stages=DEFAULT_STAGES, title: str | None = None) -> str:
        """What ``IRExplorer(report, ...)`` draws as its static fallback, with no widget made."""
        name = getattr(report, "kernel", None) or getattr(report, "kernel_name", "kernel")
        return ir_html(report, title=title or f"{name}: source and IR", stages=stages)

    def __repr__(self) -> str:
        return f"IRExplorer({self.title}, stages={[p['stage'] for p in self._panes[1:]]})"


def _ranges(nums: list[int]) -> str:
    out, start, prev = [], None, None
    for n in sorted(nums):
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


def ir_html(report, title: str | None = None, stages=DEFAULT_STAGES, data: dict | None = None) -> str:
    """Static HTML (no script): the source with, per line, the IR lines it became, and each
    stage (up to 1500 lines) with the source line of each of its lines.

    >>> html = ir_html(report)           # doctest: +SKIP
    """
    esc = html.escape
    d = data or ir_data(report, stages)
    src, irs = d["panes"][0], d["panes"][1:]
    head = "".join(f"<th>{esc(p['title'])}</th>" for p in irs)
    rows = []
    for i, text in enumerate(src["lines"]):
        n = src["first"] + i
        cells = "".join(f"<td>{_ranges(d['forward'][p['stage']].get(str(n), []))}</td>" for p in irs)
        rows.append(f"<tr><td class='tlxwb-ir-no'>{n}</td><td style='white-space:pre'>{esc(text)}</td>{cells}</tr>")
    parts = [f"<div class='tlxwb-static tlxwb-ir-static'><div style='font:600 12px sans-serif'>{esc(title or 'source and IR')}</div>",
             "<table class='tlxwb-ir-source' style='font:11px monospace;border-collapse:collapse'>"
             f"<tr><th></th><th style='text-align:left'>source</th>{head}</tr>{''.join(rows)}</table>"]
    for p in irs:
        back = d["backward"][p["stage"]]
        shown = p["lines"][:STATIC_MAX_LINES]
        body = "\n".join(f"{j:>6} {('<' + str(back[str(j)])) if str(j) in back else '':>6}  {esc(t)}"
                         for j, t in enumerate(shown, 1))
        more = (f"\n... {len(p['lines']) - STATIC_MAX_LINES} more lines" if len(p["lines"]) > STATIC_MAX_LINES else "")
        parts.append(f"<details class='tlxwb-ir-stage' data-stage='{p['stage']}'><summary>{esc(p['title'])} "
                     f"({len(p['lines'])} lines; the second column is the source line)</summary>"
                     f"<pre style='font-size:11px;max-height:480px;overflow:auto'>{body}{more}</pre></details>")
    parts.append("</div>")
    return "".join(parts)
