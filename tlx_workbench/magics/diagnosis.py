"""The diagnosis of a ``%%tlx`` cell, said once: error boxes, the wait-for graph, findings.

Each error is one block: what kind, where ("cell [3], line 11", as the editor numbers it),
the message with its line breaks, the offending line, and what to do. A deadlock adds a
small picture of who waits for whom (:func:`waitfor_svg`); the SimResult and the checker
findings that would repeat it are shown without it.
"""
from __future__ import annotations

import html
import linecache

from .cells import relabel, where

BOX = "border-left:4px solid {c};padding:4px 8px;margin:4px 0"
RED, AMBER, GREEN, BLUE = "#c0392b", "#d68910", "#27ae60", "#2e86c1"
PRE = "margin:4px 0;white-space:pre-wrap;font-family:monospace;font-size:12px"


def _e(text) -> str:
    return html.escape(str(text), quote=False)


def source_line(file: str | None, line: int | None) -> str | None:
    if not file or not line:
        return None
    text = linecache.getline(file, line).rstrip("\n")
    return text if text.strip() else None


def error_parts(err) -> dict:
    """The pieces every view of an error uses: kind, where, message, source line, hint."""
    msg = relabel(getattr(err, "message", None) or str(err))
    return {"kind": type(err).__name__, "where": where(getattr(err, "file", None), getattr(err, "line", None)),
            "message": msg, "source": source_line(getattr(err, "file", None), getattr(err, "line", None)),
            "line": getattr(err, "line", None), "hint": relabel(getattr(err, "hint", None) or ""),
            "caret": getattr(err, "caret", None)}


def error_text(err) -> str:
    """An error as plain text, located as the user sees it.

    >>> from tlx_workbench.errors import TLXWorkbenchError
    >>> print(error_text(TLXWorkbenchError("too big", hint="use fewer stages")))
    TLXWorkbenchError: too big
      what to do: use fewer stages
    """
    p = error_parts(err)
    head = f"{p['kind']}: " + (f"{p['where']}: " if p["where"] else "") + p["message"]
    out = [head]
    if p["source"] is not None:
        out.append(f"  {p['line']:>5} | {p['source']}")
    if p["hint"]:
        out.append(f"  what to do: {p['hint']}")
    return "\n".join(out)


def error_html(err) -> str:
    """One error as one block, line breaks kept; a deadlock with its wait-for graph."""
    p = error_parts(err)
    report = getattr(err, "report", None)
    is_deadlock = type(err).__name__ == "DeadlockError" and hasattr(report, "blocked")
    message = p["message"]
    if is_deadlock and p["hint"]:
        # the report repeats its hint as the root cause's "why:" line: say it once, as what to do
        message = "\n".join(ln for ln in message.splitlines() if ln.strip() != f"why: {p['hint']}")
    head, _, rest = message.partition("\n")
    out = [f"<div class='tlxwb-error' style='{BOX.format(c=RED)}'>",
           f"<div><b>{_e(p['kind'])}</b>" + (f" <span style='color:#666'>{_e(p['where'])}</span>" if p["where"]
                                              else "") + "</div>",
           f"<div class='tlxwb-error-message' style='white-space:pre-wrap'>{_e(head)}</div>"]
    if p["source"] is not None:
        src = f"{p['line']:>5} | {p['source'].strip()}"
        indent = len(p["source"]) - len(p["source"].lstrip())
        if p["caret"] and p["caret"] > indent:
            src += "\n" + " " * (8 + p["caret"] - 1 - indent) + "^"
        out.append(f"<pre class='tlxwb-error-line' style='{PRE};background:#fbeeee'>{_e(src)}</pre>")
    if is_deadlock:
        out.append(waitfor_svg(report))
    if rest.strip():
        out.append(f"<pre class='tlxwb-error-detail' style='{PRE}'>{_e(rest)}</pre>")
    if p["hint"]:
        out.append(f"<div><i>what to do:</i> {_e(p['hint'])}</div>")
    out.append("</div>")
    return "".join(out)


# ---- the wait-for graph -------------------------------------------------------------------
def _lane_name(lane, multi: bool) -> str:
    cta, task, rep = lane
    return f"CTA {cta} {task}[{rep}]" if multi else f"{task}[{rep}]"


def waitfor_svg(report) -> str:
    """The deadlock as a small graph: a row per blocked task, ``task -> barrier <- expected arrivers``.

    Each blocked task carries a "stuck here" marker with its line, the barrier and the phase it
    waits for, and what is missing; an arriver that is itself blocked is drawn red, one that
    finished grey. It draws even when nothing ran before the deadlock.
    """
    blocked = [b for b in report.blocked if b.kind != "join"] or list(report.blocked)
    multi = len(getattr(report, "ctas", []) or []) > 1
    blocked_lanes = {b.lane for b in report.blocked if b.kind != "join"}
    row_h, width = 58, 900
    rows = []
    for b in blocked:
        rows.append((b, list(b.expected)[:3]))
    height = 22 + row_h * len(rows)
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tlxwb-waitfor' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11'>",
           "<defs><marker id='tlxwb-arrow' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
           "orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='#555'/></marker></defs>",
           f"<text x='4' y='13' fill='#555'>wait-for graph: a blocked task &#8594; the barrier it waits on "
           f"&#8592; the tasks expected to arrive</text>"]
    for i, (b, expected) in enumerate(rows):
        y = 22 + i * row_h
        # the blocked task, with its stuck-here marker
        out.append(f"<g class='tlxwb-stuck' data-lane='{_e(_lane_name(b.lane, multi))}'>"
                   f"<rect x='4' y='{y + 4}' width='230' height='44' rx='4' fill='#fdecea' stroke='{RED}'/>"
                   f"<text x='12' y='{y + 20}' font-weight='bold'>&#9632; {_e(_lane_name(b.lane, multi))}</text>"
                   f"<text x='12' y='{y + 37}' fill='#333'>stuck here: line {_e(b.line or '?')}</text></g>")
        if b.kind in ("mbarrier", "named") and b.barrier:
            phase = f"parity {b.phase}" if b.phase is not None else ""
            missing = []
            if b.missing_arrivals:
                missing.append(f"{b.missing_arrivals} arrival(s)")
            if b.missing_bytes:
                missing.append(f"{b.missing_bytes} B")
            label2 = ("missing " + ", ".join(missing)) if missing else (b.reason[:48] if b.reason else "")
            out.append(f"<line x1='234' y1='{y + 26}' x2='330' y2='{y + 26}' stroke='#555' "
                       f"marker-end='url(#tlxwb-arrow)'/><text x='240' y='{y + 20}' fill='#555'>waits {_e(phase)}"
                       f"</text>"
                       f"<g class='tlxwb-barrier'><rect x='330' y='{y + 4}' width='230' height='44' rx='22' "
                       f"fill='#fff7e6' stroke='{AMBER}'/><text x='345' y='{y + 20}' font-weight='bold'>"
                       f"{_e(b.barrier)}</text><text x='345' y='{y + 37}' fill='#333'>{_e(label2)}</text></g>")
            for j, (task, rep, lines, where_, cta) in enumerate(expected):
                ly = y + 4 + j * (44 // max(len(expected), 1))
                h = 44 // max(len(expected), 1) - 2
                lane = (cta, task, rep)
                stuck = lane in blocked_lanes
                done = "finished" in where_
                colour = RED if stuck else ("#999" if done else GREEN)
                fill = "#fdecea" if stuck else ("#f2f2f2" if done else "#eafaf1")
                state = "blocked" if stuck else ("finished" if done else "running")
                arrives = ", ".join(map(str, sorted(lines)))
                out.append(f"<line x1='660' y1='{ly + h / 2:.0f}' x2='562' y2='{y + 26}' stroke='{colour}' "
                           f"stroke-dasharray='4 2' marker-end='url(#tlxwb-arrow)'/>"
                           f"<g class='tlxwb-arriver'><rect x='660' y='{ly}' width='236' height='{h}' rx='4' "
                           f"fill='{fill}' stroke='{colour}'/><text x='668' y='{ly + min(h, 24) / 2 + 4:.0f}'>"
                           f"{_e(_lane_name(lane, multi))} ({state}), arrives line {_e(arrives)}</text>"
                           f"<title>{_e(where_)}</title></g>")
            if not expected:
                out.append(f"<text x='580' y='{y + 30}' fill='{RED}'>no task has arrived on it yet</text>")
        elif b.reason:
            out.append(f"<text x='250' y='{y + 30}' fill='#333'>{_e(b.reason[:110])}</text>")
    out.append("</svg>")
    return "<div class='tlxwb-waitfor-graph' style='overflow-x:auto'>" + "".join(out) + "</div>"


# ---- parts that would repeat the diagnosis --------------------------------------------------
def sim_html(sim, *, deadlock_shown: bool) -> str:
    """A SimResult's headline and per-task table; its deadlock only when no error box shows it."""
    if not deadlock_shown:
        return sim._repr_html_()
    head = _e(sim._lines()[0])
    rows = "".join(f"<tr><td>{_e(t)}[{r}]</td><td>{st['ops']}</td><td>{st['busy'] / max(st['ctas'], 1):.0f}"
                   f"</td><td>{st['waiting'] / max(st['ctas'], 1):.0f}</td></tr>"
                   for (t, r), st in sorted(sim.stats.items()))
    findings = "".join(f"<li>{_e(relabel(repr(f)))}</li>" for f in sim.findings)
    return (f"<div class='tlxwb-simresult' style='{BOX.format(c=RED if not sim.ok else GREEN)}'><b>{head}</b>"
            + (f"<ul>{findings}</ul>" if findings else "")
            + "<table><tr><th>task</th><th>ops</th><th>busy/CTA</th><th>waiting/CTA</th></tr>"
            f"{rows}</table></div>")


def finding_html(f) -> str:
    colour = {"error": RED, "warning": AMBER, "info": BLUE}.get(f.severity, "#555")
    places = ", ".join(where(p, n) for p, n in f.lines)
    out = [f"<div class='tlxwb-finding' style='{BOX.format(c=colour)}'><div><b style='color:{colour}'>"
           f"{_e(f.severity)}</b> <code>{_e(f.rule_id)}</code> <span style='color:#666'>{_e(places)}</span></div>",
           f"<div style='white-space:pre-wrap'>{_e(relabel(f.message))}</div>"]
    for p, n in f.lines[:3]:
        src = source_line(p, n)
        if src is not None:
            out.append(f"<pre style='{PRE}'>{n:>5} | {_e(src)}</pre>")
    if f.fix:
        out.append(f"<div><i>fix:</i> {_e(relabel(f.fix))}</div>")
    out.append("</div>")
    return "".join(out)


def findings_html(findings, *, deadlock_shown: bool) -> str:
    """The checker's findings; its deadlock finding is left out when the error box above shows it."""
    if not hasattr(findings, "_head"):
        from .render import html_of
        return html_of(findings)
    shown = [f for f in findings if not (deadlock_shown and f.rule_id == "deadlock")]
    left = len(findings) - len(shown)
    colour = GREEN if findings.ok else RED
    head = findings._head()
    body = [f"<div class='tlxwb-check' style='{BOX.format(c=colour)}'><b>{_e(head)}</b>"]
    if left:
        body.append("<div style='color:#666'>(its deadlock finding is the deadlock shown above)</div>")
    body += [finding_html(f) for f in shown]
    if findings.notes:
        body.append("<ul>" + "".join(f"<li>{_e(relabel(n))}</li>" for n in findings.notes) + "</ul>")
    body.append("</div>")
    return "".join(body)
