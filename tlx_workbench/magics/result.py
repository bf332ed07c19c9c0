""":class:`CellResult`: what one ``%%tlx`` launch produced, with its text and HTML forms."""
from __future__ import annotations

import dataclasses
import html
from typing import Any

from .cells import relabel
from .render import html_of, view_html

# the views a cell can ask for: option -> (widget class, what it shows, the result part it draws)
VIEWS = {"report": (None, "compile report", "report"), "memory": ("MemoryMapWidget", "memory map", "report"),
         "ir": ("IRExplorer", "IR", "report"), "timeline": ("TimelineWidget", "timeline", "trace"),
         "barriers": ("BarrierPhaseWidget", "barrier phases", "trace")}


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
    knobs: dict = dataclasses.field(default_factory=dict)     # a --knobs run: the controls' values

    def add_error(self, err) -> None:
        """Keep ``err``, unless the same error is kept already (the checker's own simulator run and
        the cell's run meet the same out-of-bounds store: it is said once)."""
        key = (type(err), getattr(err, "message", str(err)), getattr(err, "file", None), getattr(err, "line", None))
        if not any((type(e), getattr(e, "message", str(e)), getattr(e, "file", None), getattr(e, "line", None)) == key
                   for e in self.errors):
            self.errors.append(err)

    @property
    def ok(self) -> bool:
        if self.errors:
            return False
        parts = [p.ok for p in (self.sim, self.run, self.findings) if p is not None and hasattr(p, "ok")]
        parts += [c.ok for c in (self.check or [])]
        return all(parts)

    def failure(self) -> str | None:
        """Why the cell failed (an error, a race, a wrong output, a checker error), or None.

        Checker warnings do not fail a cell; they are shown.
        """
        if self.errors:
            from .diagnosis import error_text
            return error_text(self.errors[0]).splitlines()[0]
        # the simulator's warnings (outputs left unwritten, NaN/Inf) are shown, as the checker's: they fail no cell
        errs = getattr(self.sim, "errors", None) if self.sim is not None else None
        if self.sim is not None and not self.sim.ok and (errs is None or errs or self.sim.deadlock is not None):
            found = self.sim.findings if errs is None else errs
            kinds = sorted({f.kind for f in found})
            return f"the simulator found {len(found)} problem(s): {', '.join(kinds)}"
        if self.run is not None and hasattr(self.run, "ok") and not self.run.ok:
            return "the GPU run's output is wrong: " + "; ".join(
                c.summary().splitlines()[0] for c in getattr(self.run, "comparisons", []) if not c.ok)
        bad = [c for c in (self.check or []) if not c.ok]
        if bad:
            return "the output is wrong: " + "; ".join(c.summary().splitlines()[0] for c in bad)
        errs = [f for f in (self.findings or []) if getattr(f, "severity", "") == "error"]
        if errs:
            return f"the barrier-protocol checker found {len(errs)} error(s): {errs[0].rule_id}"
        return None

    @property
    def _deadlock_shown(self) -> bool:
        return any(type(e).__name__ == "DeadlockError" for e in self.errors)

    def __repr__(self) -> str:
        from .diagnosis import error_text
        lines = [f"%%tlx {self.mode} ({self.target}): {self.launch or '(definitions only)'}"]
        if self.constexprs:
            lines.append("  constexprs: " + ", ".join(f"{k}={v}" for k, v in self.constexprs.items()))
        lines += ["  error: " + error_text(e).replace("\n", "\n  ") for e in self.errors]
        for part in (self.report, self.sim, self.run, self.bench, self.trace):
            if part is None:
                continue
            if part is self.sim and self._deadlock_shown:
                text = "\n".join(ln for ln in part._lines() if not ln.startswith("  DEADLOCK:"))
            else:
                # the compile report names the kernel's file: a cell's cached file is "cell [n]"
                text = relabel(repr(part)) if part is self.report else repr(part)
            lines.append("  " + text.replace("\n", "\n  "))
        for c in self.check or []:
            lines.append("  " + c.summary().replace("\n", "\n  "))
        if self.findings is not None:
            fs = [f for f in self.findings if not (self._deadlock_shown and getattr(f, "rule_id", "") == "deadlock")]
            head = self.findings._head() if hasattr(self.findings, "_head") else repr(self.findings)
            lines.append(f"  check: {head}")
            lines += ["    " + f.text().replace("\n", "\n    ") for f in fs if hasattr(f, "text")]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def views(self) -> list[str]:
        """The views this result draws: those asked for that have something to draw."""
        shown = [k for k in VIEWS if k in self.show and getattr(self, VIEWS[k][2]) is not None]
        if not self.show and self.trace is not None:
            shown = ["timeline"]           # a plain cell shows its timeline
        return shown

    def view_options(self, key: str) -> dict:
        """What a view needs beside its part: the trace views get the simulator's deadlock report,
        so they mark where each task stopped (named barriers and joins too)."""
        deadlock = getattr(self.sim, "deadlock", None)
        return {"deadlock": deadlock} if key in ("timeline", "barriers") and deadlock is not None else {}

    def _repr_html_(self) -> str:
        return self.html()

    def html(self, skip_views=()) -> str:
        """The result as HTML; ``skip_views`` are drawn elsewhere (as live widgets) and left out here."""
        from .diagnosis import error_html, findings_html, sim_html
        out = [f"<div class='tlxwb-cell'><small>%%tlx &middot; {html.escape(self.mode)} &middot; "
               f"{html.escape(self.target)} &middot; <code>{html.escape(self.launch or 'definitions only')}</code>"]
        if self.constexprs:
            out.append(" &middot; " + html.escape(", ".join(f"{k}={v}" for k, v in self.constexprs.items())))
        out.append("</small>")
        for e in self.errors:
            out.append(error_html(e))
        for n in self.notes:
            out.append(f"<div><i>{html.escape(n)}</i></div>")
        if self.sim is not None:
            out.append(sim_html(self.sim, deadlock_shown=self._deadlock_shown))
        for part in (self.run, self.bench):
            if part is not None:
                out.append(html_of(part))
        for c in self.check or []:
            out.append(html_of(c))
        if self.findings is not None:
            out.append(findings_html(self.findings, deadlock_shown=self._deadlock_shown))
        for key in self.views():
            if key in skip_views:
                continue
            widget, what, part = VIEWS[key]
            obj = getattr(self, part)
            if widget is None:
                out.append(relabel(html_of(obj), escaped=True))   # the report names the kernel's file: "cell [n]"
            else:
                out.append(view_html(widget, obj, what, **self.view_options(key)))
        out.append("</div>")
        return "".join(out)
