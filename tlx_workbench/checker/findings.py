"""Finding and CheckResult: what the barrier-protocol checker reports.

A Finding names the rule it breaks, the exact source line(s) and the exact fix.
CheckResult is a list of findings with a text and an HTML view.
"""
from __future__ import annotations

import dataclasses
import html
import linecache

SEVERITIES = ("error", "warning", "info")


def at_line(line: int | None, barrier: str | None = None) -> str:
    """"at line 12"; without a line (the IR lost it) "where `bar` is allocated", else "".

    Fix and message texts use it so that they never read "at line None".

    >>> at_line(12), at_line(None, "empty"), at_line(None)
    ('at line 12', 'where `empty` is allocated', '')
    """
    if line:
        return f"at line {line}"
    return f"where `{barrier}` is allocated" if barrier else ""


@dataclasses.dataclass
class Finding:
    """One broken rule: ``rule_id``, ``severity``, ``message``, ``lines`` [(file, line)], ``fix``.

    >>> Finding("release-count", "error", "2 arrivals per phase, count 1", [("k.py", 12)],
    ...         "arrive_count=2 at line 12")                                    # doctest: +SKIP
    """
    rule_id: str
    severity: str
    message: str
    lines: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    fix: str = ""
    barrier: str | None = None        # the barrier the finding is about, if any

    @property
    def line(self) -> int | None:
        """The first (main) line of the finding."""
        return self.lines[0][1] if self.lines else None

    @property
    def file(self) -> str | None:
        return self.lines[0][0] if self.lines else None

    def text(self) -> str:
        where = ", ".join(f"{_short(f)}:{n}" for f, n in self.lines) or "(no line)"
        out = [f"[{self.severity}] {self.rule_id} at {where}: {self.message}"]
        for f, n in self.lines[:3]:
            src = linecache.getline(f, n).strip() if f else ""
            if src:
                out.append(f"    {n:>5} | {src}")
        if self.fix:
            out.append(f"    fix: {self.fix}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return _finding_html(self)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1] if path else "?"


_COLOURS = {"error": "#c0392b", "warning": "#d68910", "info": "#2e86c1"}


def _finding_html(f: Finding) -> str:
    colour = _COLOURS.get(f.severity, "#555")
    where = ", ".join(f"{html.escape(_short(p))}:{n}" for p, n in f.lines)
    rows = [f"<div style='border-left:4px solid {colour};padding:2px 8px;margin:4px 0'>"
            f"<b style='color:{colour}'>{html.escape(f.severity)}</b> <code>{html.escape(f.rule_id)}</code> "
            f"<span style='color:#666'>{where}</span><br>{html.escape(f.message)}"]
    for p, n in f.lines[:3]:
        src = linecache.getline(p, n).rstrip() if p else ""
        if src:
            rows.append(f"<pre style='margin:2px 0'>{n:>5} | {html.escape(src.strip())}</pre>")
    if f.fix:
        rows.append(f"<i>fix:</i> {html.escape(f.fix)}")
    rows.append("</div>")
    return "".join(rows)


class CheckResult(list):
    """The findings of :func:`check` (a list of :class:`Finding`), with notes on what ran.

    >>> res = check(kernel, *args, BM=128)           # doctest: +SKIP
    >>> res.ok, [f.rule_id for f in res]              # doctest: +SKIP
    """

    def __init__(self, findings=(), *, kernel: str = "", notes=(), report=None, sim=None):
        super().__init__(findings)
        self.kernel = kernel
        self.notes = list(notes)
        self.report = report          # the CompileReport the static rules read
        self.sim = sim                # the SimResult the per-phase rules read (None: static only)

    @property
    def ok(self) -> bool:
        """No errors and no warnings (info findings do not count)."""
        return not any(f.severity in ("error", "warning") for f in self)

    def by_rule(self, rule_id: str) -> list[Finding]:
        return [f for f in self if f.rule_id == rule_id]

    def _head(self) -> str:
        n_err = sum(f.severity == "error" for f in self)
        n_warn = sum(f.severity == "warning" for f in self)
        mode = "static + simulated" if self.sim is not None else "static only"
        verdict = "no findings" if not self else f"{n_err} error(s), {n_warn} warning(s), {len(self)} finding(s)"
        return f"CheckResult({self.kernel}: {verdict}; {mode})"

    def __repr__(self) -> str:
        out = [self._head()]
        out += ["  " + f.text().replace("\n", "\n  ") for f in self]
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        colour = "#27ae60" if self.ok else "#c0392b"
        body = [f"<div class='tlxwb-check' style='border-left:4px solid {colour};padding:4px 8px'>"
                f"<b>{html.escape(self._head())}</b>"]
        body += [_finding_html(f) for f in self]
        if self.notes:
            body.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in self.notes) + "</ul>")
        body.append("</div>")
        return "".join(body)
