""":class:`CellResult`: what one ``%%tlx`` launch produced, with its text and HTML forms."""
from __future__ import annotations

import dataclasses
import html
from typing import Any

from .render import html_of, view_html


@dataclasses.dataclass
class CellResult:
    """What ``%%tlx`` produced for one launch: any of sim / run / bench / trace / report / findings."""
    mode: str
    target: str
    launch: str = ""
    constexprs: dict = dataclasses.field(default_factory=dict)
    value: Any = None
    sim: Any = None
    run: Any = None
    bench: Any = None
    trace: Any = None
    report: Any = None
    findings: Any = None
    check: Any = None            # output comparisons in simulator mode
    show: tuple = ()
    notes: list = dataclasses.field(default_factory=list)
    errors: list = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.errors:
            return False
        parts = [p.ok for p in (self.sim, self.run, self.findings) if p is not None and hasattr(p, "ok")]
        parts += [c.ok for c in (self.check or [])]
        return all(parts)

    def __repr__(self) -> str:
        lines = [f"%%tlx {self.mode} ({self.target}): {self.launch or '(definitions only)'}"]
        if self.constexprs:
            lines.append("  constexprs: " + ", ".join(f"{k}={v}" for k, v in self.constexprs.items()))
        for part in (self.report, self.sim, self.run, self.bench, self.trace):
            if part is not None:
                lines.append("  " + repr(part).replace("\n", "\n  "))
        for c in self.check or []:
            lines.append("  " + c.summary().replace("\n", "\n  "))
        if self.findings is not None:
            lines.append(f"  check: {self.findings!r}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        out = [f"<div class='tlxwb-cell'><small>%%tlx &middot; {html.escape(self.mode)} &middot; "
               f"{html.escape(self.target)} &middot; <code>{html.escape(self.launch or 'definitions only')}</code>"]
        if self.constexprs:
            out.append(" &middot; " + html.escape(", ".join(f"{k}={v}" for k, v in self.constexprs.items())))
        out.append("</small>")
        for e in self.errors:
            out.append(html_of(e))
        for n in self.notes:
            out.append(f"<div><i>{html.escape(n)}</i></div>")
        for part in (self.sim, self.run, self.bench):
            if part is not None:
                out.append(html_of(part))
        for c in self.check or []:
            out.append(html_of(c))
        if self.findings is not None:
            out.append(html_of(self.findings))
        if self.report is not None:
            if "report" in self.show:
                out.append(html_of(self.report))
            if "memory" in self.show:
                out.append(view_html("MemoryMapWidget", self.report, "memory map"))
            if "ir" in self.show:
                out.append(view_html("IRExplorer", self.report, "IR"))
        if self.trace is not None:
            if "timeline" in self.show or not self.show:
                out.append(view_html("TimelineWidget", self.trace, "timeline"))
            if "barriers" in self.show:
                out.append(view_html("BarrierPhaseWidget", self.trace, "barrier phases"))
        out.append("</div>")
        return "".join(out)

