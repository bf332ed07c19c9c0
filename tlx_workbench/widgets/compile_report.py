"""The HTML rendering of a CompileReport: self-contained (inline CSS and SVG, no
scripts, no network), so it survives nbconvert, nbval and GitHub's notebook view.

Registered in :mod:`tlx_workbench.views`: ``CompileReport._repr_html_`` draws it without
importing a view."""
from __future__ import annotations

import html
import re

from .. import views
from ..compiler.text import spills_text

_CSS = """
.tlxwb-report{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:13px;color:#222;max-width:1100px}
.tlxwb-report h3{margin:10px 0 4px;font-size:15px}
.tlxwb-report h4{margin:10px 0 4px;font-size:13px;color:#444}
.tlxwb-report table{border-collapse:collapse;margin:2px 0 8px}
.tlxwb-report th,.tlxwb-report td{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
.tlxwb-report th{background:#f3f3f3}
.tlxwb-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.tlxwb-report code,.tlxwb-report pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.tlxwb-report pre{background:#f8f8f8;border:1px solid #eee;padding:6px;overflow:auto;max-height:320px;margin:2px 0}
.tlxwb-report .bar-ok{color:#27ae60}.tlxwb-report .bar-over{color:#c0392b}
.tlxwb-report .site{display:inline-block;margin:1px 3px 1px 0;padding:0 4px;border-radius:3px;background:#eef}
.tlxwb-report .site.wait{background:#fde2e2}.tlxwb-report .site.arrive{background:#e2f5e9}
.tlxwb-report .site.expect{background:#fff3d6}.tlxwb-report .site.tma_load{background:#e3ecfb}
.tlxwb-report .advisory{border-left:4px solid #e67e22;background:#fff8ef;padding:3px 8px;margin:3px 0}
.tlxwb-report .advisory.info{border-left-color:#7f8c8d;background:#f6f6f6}
.tlxwb-report .advisory .why{color:#444}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _pct(n, d) -> str:
    return f"{100 * n / d:.0f}%" if d else "-"


def _table(headers, rows, num_cols=()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(
            f'<td class="num">{c}</td>' if i in num_cols else f"<td>{c}</td>" for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _sites(b) -> str:
    parts = []
    for s in b.sites:
        arg = ", ".join(f"{k}={v}" for k, v in s.args.items())
        parts.append(f'<span class="site {_e(s.op)}" title="{_e(arg)}">{_e(s.op)} '
                     f'<b>{_e(s.task or "-")}</b> L{_e(s.line or "?")}{(" " + _e(arg)) if arg else ""}</span>')
    return "".join(parts)


_KEY_INSTR = re.compile(r"wgmma|tcgen05|mbarrier|cp\.async|HGMMA|UTC\w*MMA|SYNCS|UTMA\w*|tc_gen5|warp_group_dot|"
                        r"barrier|tma|setmaxnreg|bar\.sync", re.I)


def _excerpt(r, line: int, stages=("ttgir", "ptx", "sass"), limit: int = 14) -> str:
    """Each stage's lines for source `line`; when there are many, the ones that say most
    (MMAs, barriers, TMA) come first."""
    out = []
    for st in stages:
        try:
            text = r.ir(st, line=line)
        except KeyError:
            continue
        rows = [ln for ln in text.splitlines() if not ln.strip().startswith("...")]
        if not rows:
            continue
        if len(rows) > limit:
            key = [i for i, ln in enumerate(rows) if _KEY_INSTR.search(ln)][:limit]
            rest = [i for i in range(len(rows)) if i not in key][:max(0, limit - len(key))]
            keep = sorted(key + rest)
        else:
            keep = list(range(len(rows)))
        shown, prev = [], None
        for i in keep:
            if prev is not None and i != prev + 1:
                shown.append("     ...")
            shown.append(rows[i])
            prev = i
        more = f"\n     ... {len(rows) - len(keep)} more lines" if len(rows) > len(keep) else ""
        out.append(f"<h4>{_e(st.upper())}</h4><pre>{_e(chr(10).join(shown) + more)}</pre>")
    return "".join(out)


def interesting_lines(r, n: int = 3) -> list[int]:
    """Source lines worth showing IR for: an MMA, a TMA load and a barrier wait, taken from the
    barrier table (so lines inside inlined @jit helpers count), else found by keyword."""
    picks: list[int] = []
    sites = [s for b in r.barriers for s in b.sites if s.line]
    for op in ("mma_commit", "tma_load", "wait"):
        line = next((s.line for s in sites if s.op == op), None)
        if line and line not in picks:
            picks.append(line)
    for key in ("async_dot(", "async_descriptor_load(", "barrier_wait("):
        if len(picks) >= n:
            break
        for i in range(r.source.first_line, r.last_line + 1):
            if key in r.source.line_text(i) and i not in picks:
                picks.append(i)
                break
    return picks[:n]


def advisories_html(advisories) -> str:
    """ptxas's advisories as boxes: the code and ptxas's words, then why and what to do."""
    if not advisories:
        return ""
    out = ["<h4>ptxas advisories</h4>"]
    for a in advisories:
        cls = "advisory" if a.severity in ("warning", "error") else "advisory info"
        where = f" <i>(line {a.line})</i>" if a.line else ""
        out.append(f'<div class="{cls}"><b>{_e(a.code or a.severity)}</b> {_e(a.message)}{where}')
        if a.explanation:
            out.append(f'<div class="why"><i>why:</i> {_e(a.explanation)}</div>')
        if a.hint:
            out.append(f"<div><i>what to do:</i> {_e(a.hint)}</div>")
        out.append("</div>")
    return "".join(out)


def overlap_html(r) -> str:
    """What ptxas did not overlap, as advisory boxes (the whole table: ``report.wgmma_overlap``)."""
    rows = r.wgmma_overlap.findings
    if not rows:
        return ""
    out = ["<h4>wgmma overlap <small>(SASS; the whole table: <code>report.wgmma_overlap</code>)</small></h4>"]
    for g in rows:
        out.append(f'<div class="advisory"><b>async_dot at line {_e(g.line)}</b> {_e(g.finding)}'
                   f'<div class="why"><i>why:</i> {_e(g.explanation)}</div>'
                   f"<div><i>what to do:</i> {_e(g.hint)}</div></div>")
    return "".join(out)


def _ptxas_numbers(r) -> str:
    fn = next((f for f in r.ptxas_functions if f.name == r.metadata.get("name", r.kernel)), None)
    if fn is None:
        fn = next(iter(r.ptxas_functions), None)
    if fn is None:
        return "-"
    return (f"{_e(fn.registers)} registers, {_e(fn.barriers)} named barriers, {fn.stack_bytes} B stack, "
            f"{fn.spill_store_bytes} B spill stores, {fn.spill_load_bytes} B spill loads")


def render_html(r, excerpts: bool = True, title: str | None = None) -> str:
    """The report as one self-contained HTML fragment."""
    res = r.resources
    over = res.smem_bytes > res.smem_limit
    parts = [f'<div class="tlxwb-report"><style>{_CSS}</style>',
             f"<h3>{_e(title or r.kernel)} <small>for {_e(r.target)} ({_e(r.gpu)})</small></h3>",
             f"<div><code>{_e(r.kernel)}</code> in <code>{_e(r.source.file)}:{r.source.first_line}</code></div>"]
    rows = [["shared memory", f'<span class="{"bar-over" if over else "bar-ok"}">{res.smem_bytes} B</span> of '
                              f"{res.smem_limit} B ({_pct(res.smem_bytes, res.smem_limit)})"]]
    if res.tmem_limit:
        rows.append(["tensor memory", f"{res.tmem_columns} of {res.tmem_limit} columns "
                                      f"({_pct(res.tmem_columns, res.tmem_limit)})"])
    rows += [["registers / thread", _e(res.registers)], ["spills (local bytes)", _e(spills_text(r))],
             ["warps (all tasks)", _e(res.num_warps)], ["CTAs per cluster", _e(res.num_ctas)],
             ["options", _e(", ".join(f"{k}={r.options.get(k)}" for k in ("num_warps", "num_stages", "num_ctas",
                                                                         "maxnreg")))],
             ["constexprs", _e(", ".join(f"{k}={v}" for k, v in r.constexprs.items()))],
             ["ptxas", _ptxas_numbers(r)],
             ["compile time", f"{r.compile_seconds:.2f} s"]]
    parts.append(advisories_html(r.ptxas_advisories))
    parts.append(overlap_html(r))
    parts.append("<h4>Resources</h4>" + _table(["", ""], rows))
    parts.append("<h4>Tasks</h4>" + _table(
        ["task", "warps", "first warp", "registers (setmaxnreg)", "line"],
        [[_e(t.label), t.num_warps, t.warp_start, _e(t.registers if t.registers is not None else "-"),
          _e(t.line or "-")] for t in r.tasks], num_cols=(1, 2)))
    if r.allocations:
        from .memory_map import memory_map_svg
        parts.append("<h4>Shared memory map</h4>" + memory_map_svg(r, width=1000, storage="smem", titles=False))
        if any(a.storage == "tmem" for a in r.allocations):
            parts.append("<h4>Tensor memory map</h4>" + memory_map_svg(r, width=1000, storage="tmem", titles=False))
        parts.append(_table(
            ["name", "storage", "kind", "buffers", "shape", "dtype", "offset", "size", "alias group", "line"],
            [[f"<code>{_e(a.name)}</code>", a.storage, a.kind, a.num_buffers, "×".join(map(str, a.shape)) or "-",
              a.dtype, a.offset, (f"≤{a.size}" if a.size_is_bound else a.size) if a.storage == "smem"
              else f"{a.size} cols", _e(a.alias_group if a.alias_group is not None else "-"), _e(a.line or "-")]
             for a in r.allocations], num_cols=(3, 6, 7)))
    if r.barriers:
        parts.append("<h4>Barriers</h4>" + _table(
            ["name", "kind", "count", "slots", "line", "sites (op, task, line)"],
            [[f"<code>{_e(b.name)}</code>", b.kind, _e(b.count if b.count is not None else "mixed"), b.slots,
              _e(b.line or "-"), _sites(b)] for b in r.barriers], num_cols=(2, 3)))
    if excerpts:
        import linecache
        for line in interesting_lines(r):
            parts.append(f"<details><summary>IR for line {line}: <code>"
                         f"{_e(linecache.getline(r.source.file, line).strip())}</code></summary>"
                         f"{_excerpt(r, line)}</details>")
    if r.ptxas_log.strip():
        parts.append(f"<details><summary>ptxas log</summary><pre>{_e(r.ptxas_log.strip())}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


views.register("CompileReport", render_html)
