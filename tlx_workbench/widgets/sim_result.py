"""The static HTML of a SimResult: verdict, deadlock, findings and the per-task table.

Registered in :mod:`tlx_workbench.views`, so ``SimResult._repr_html_`` draws it without
importing a view.
"""
from __future__ import annotations

import html

from .. import views


def sim_result_html(res) -> str:
    """A SimResult as one self-contained HTML block (no script)."""
    head = html.escape(repr(res).splitlines()[0])
    colour = "#27ae60" if res.ok else "#c0392b"
    rows = "".join(f"<tr><td>{html.escape(t)}[{r}]</td><td>{st['ops']}</td><td>{st['busy'] / max(st['ctas'], 1):.0f}"
                   f"</td><td>{st['waiting'] / max(st['ctas'], 1):.0f}</td><td>{st['mma'] / max(st['ctas'], 1):.0f}"
                   f"</td></tr>" for (t, r), st in sorted(res.stats.items()))
    body = [f"<div class='tlxwb-simresult' style='border-left:4px solid {colour};padding:4px 8px'>",
            f"<b>{head}</b>"]
    if res.deadlock is not None:
        body.append(res.deadlock._repr_html_())
    if res.findings:
        body.append("<ul>" + "".join(f"<li>{html.escape(repr(f))}</li>" for f in res.findings) + "</ul>")
    body.append("<table><tr><th>task</th><th>ops</th><th>busy/CTA</th><th>waiting/CTA</th><th>mma/CTA</th></tr>"
                f"{rows}</table></div>")
    return "".join(body)


views.register("SimResult", sim_result_html)
