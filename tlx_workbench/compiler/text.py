"""The plain-text rendering of a CompileReport (``repr``, terminals, logs)."""
from __future__ import annotations


def _kb(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


def _table(headers: list[str], rows: list[list]) -> list[str]:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = ["  " + fmt.format(*headers), "  " + "  ".join("-" * w for w in widths)]
    out += ["  " + fmt.format(*r) for r in cells]
    return out


def site_summary(sites) -> str:
    parts = []
    for s in sites:
        arg = ",".join(f"{k}={v}" for k, v in s.args.items() if k != "slot")
        parts.append(f"{s.op}@{s.task or '-'}:L{s.line}" + (f"({arg})" if arg else ""))
    return " ".join(parts)


def advisory_lines(advisories) -> list[str]:
    """ptxas's advisories as text lines: warnings marked "!", each with why and what to do."""
    if not advisories:
        return []
    out = ["ptxas advisories:"]
    for a in advisories:
        mark = "!" if a.severity in ("warning", "error") else "-"
        code = f"[{a.code}] " if a.code else ""
        where = f" (line {a.line})" if a.line else ""
        out.append(f"  {mark} {code}{a.message}{where}")
        if a.explanation:
            out.append(f"      why: {a.explanation}")
        if a.hint:
            out.append(f"      what to do: {a.hint}")
    return out


def overlap_lines(r) -> list[str]:
    """What ptxas did not overlap with a wgmma, as text (the whole table: ``report.wgmma_overlap``)."""
    rows = r.wgmma_overlap.findings
    if not rows:
        return []
    out = ["wgmma overlap (SASS; the whole table: report.wgmma_overlap):"]
    for g in rows:
        out += [f"  ! async_dot at line {g.line}: {g.finding}", f"      why: {g.explanation}",
                f"      what to do: {g.hint}"]
    return out


def spills_text(r) -> str:
    """The report's local-memory bytes and, where ptxas spilled, its spill code and the part a loop around the
    wgmmas runs once per iteration (``CompileReport.spill_placement``)."""
    text = f"{r.resources.spills} B"
    if not any(f.spill_store_bytes or f.spill_load_bytes for f in r.ptxas_functions):
        return text
    p = r.spill_placement
    if p is None:
        return text
    return text + (f" (spill code {p.loads} B loaded + {p.stores} B stored"
                   + (f"; {p}" if p.loops else "") + ")")


def render_text(r) -> str:
    res = r.resources
    lines = [f"CompileReport {r.kernel} for {r.target} ({r.gpu}), {r.source.file}:{r.source.first_line}"]
    smem_pct = 100 * res.smem_bytes / res.smem_limit if res.smem_limit else 0
    lines.append(f"  SMEM {res.smem_bytes} B of {res.smem_limit} B ({smem_pct:.0f}%)"
                 + (f" | TMEM {res.tmem_columns}/{res.tmem_limit} columns" if res.tmem_limit else "")
                 + f" | {res.registers} regs/thread | spills {spills_text(r)} | {res.num_warps} warps"
                 + (f" | {res.num_ctas} CTAs/cluster" if res.num_ctas > 1 else ""))
    lines += advisory_lines(r.ptxas_advisories)
    lines += overlap_lines(r)
    lines.append("tasks:")
    lines += _table(["task", "warps", "first warp", "registers", "line"],
                    [[t.label, t.num_warps, t.warp_start, t.registers if t.registers is not None else "-",
                      t.line or "-"] for t in r.tasks])
    if r.allocations:
        lines.append("memory:")
        lines += _table(["name", "storage", "kind", "buffers", "shape", "dtype", "offset", "size", "alias", "line"],
                        [[a.name, a.storage, a.kind, a.num_buffers, "x".join(map(str, a.shape)) or "-", a.dtype,
                          a.offset, (f"<={a.size}" if a.size_is_bound else a.size)
                          if a.storage == "smem" else f"{a.size} cols",
                          a.alias_group if a.alias_group is not None else "-", a.line or "-"]
                         for a in r.allocations])
    if r.barriers:
        lines.append("barriers:")
        lines += _table(["name", "kind", "count", "slots", "line", "sites"],
                        [[b.name, b.kind, b.count if b.count is not None else "mixed", b.slots, b.line or "-",
                          site_summary(b.sites)] for b in r.barriers])
    return "\n".join(lines)
