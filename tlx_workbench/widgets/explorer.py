"""ExplorerWidget and exploration_html: what a config sweep found, live and static.

The view reads an :class:`~tlx_workbench.explore.Exploration` (its store rows, never the
sweep): a sortable table, time against a resource or knob with the Pareto front, a heatmap of
the best time over two knobs, and a roofline with every config as a point. Dropped configs are
drawn apart, with their reason. Time is measured µs where a GPU measured the shape, else the
simulator's predicted µs. A click on a point or a row opens that config's CompileReport, its
simulated timeline and its diff against the best config below the plots.

Importing this module registers :func:`exploration_html` as the Exploration's HTML (see
``tlx_workbench.views``), so ``Exploration._repr_html_`` draws it without importing widgets.

>>> ExplorerWidget(ex)                       # doctest: +SKIP
>>> open("sweep.html", "w").write(exploration_html(ex))     # doctest: +SKIP
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
import threading
from typing import Callable

import traitlets

from .. import views
from ._base import STATIC, View, esm_source

#: statuses of an entry that reached (or may still reach) a time; the others failed
ALIVE = ("measured", "simulated", "static", "pending")
FAILED = ("dropped", "hung", "crashed", "error")
#: the entry fields a scatter can put on its x axis (besides every knob)
RESOURCES = ("smem_bytes", "registers", "ctas_per_sm", "spills", "num_warps", "tmem_columns", "advisories")
_RESOURCE_LABELS = {"smem_bytes": "SMEM per CTA (KiB)", "registers": "registers per thread",
                    "ctas_per_sm": "CTAs per SM", "spills": "spilled bytes", "num_warps": "warps",
                    "tmem_columns": "TMEM columns", "advisories": "ptxas advisories"}
_TIME_LABELS = {"us": "measured µs", "predicted_us": "simulated µs (predicted)"}
# the static table's resource columns
_TABLE_FIELDS = (("smem_bytes", "SMEM"), ("registers", "regs"), ("spills", "spills"), ("ctas_per_sm", "CTAs/SM"),
                 ("num_warps", "warps"))


# -- reading entries --------------------------------------------------------------------------
def value_of(entry: dict, key: str):
    """An entry's figure ``key``: a top-level field (smem_bytes, us, ...) or a knob of its config.

    >>> value_of({"smem_bytes": 1024, "config": {"STAGES": 3}}, "STAGES")
    3
    """
    if key != "config" and key in entry:
        return entry[key]
    return (entry.get("config") or {}).get(key)


def time_key(entries) -> str:
    """Which time ranks ``entries``: "us" when any was measured, else "predicted_us" (as
    ``Exploration.pareto`` decides)."""
    return "us" if any(e.get("us") is not None for e in entries if e.get("status") in ALIVE) else "predicted_us"


def knobs_of(ex, entries=None) -> list[str]:
    """The knob names of the exploration (its space's order; from the configs of a loaded one)."""
    space = getattr(ex, "space", None)
    if space is not None and getattr(space, "knobs", None):
        return list(space.knobs)
    out: list[str] = []
    for e in entries if entries is not None else ex.entries():
        for k in e.get("config") or {}:
            if k not in out:
                out.append(k)
    return out


def varying_knobs(entries, knobs) -> list[str]:
    """The knobs that take more than one value among ``entries`` (the ones worth plotting)."""
    out = []
    for k in knobs:
        vals = {json.dumps(value_of(e, k), sort_keys=True) for e in entries}
        if len(vals) > 1:
            out.append(k)
    return out


def pareto_front(entries, resource: str = "smem_bytes", by: str | None = None) -> list[dict]:
    """The entries no other beats in both time and ``resource`` (lower is better in both), in
    resource order: the rule of ``Exploration.pareto``, over any entry field or knob.

    >>> es = [dict(status="simulated", predicted_us=t, config={"S": s}) for s, t in ((1, 5.), (2, 4.), (3, 4.5))]
    >>> [e["config"]["S"] for e in pareto_front(es, "S")]
    [1, 2]
    """
    es = [e for e in entries if e.get("status") in ("measured", "simulated", "static")]
    by = by or time_key(es)
    pts = [e for e in es if e.get(by) is not None and _number(value_of(e, resource)) is not None]
    pts.sort(key=lambda e: (_number(value_of(e, resource)), e[by]))
    front, best = [], math.inf
    for e in pts:
        if e[by] < best:
            front.append(e)
            best = e[by]
    return front


def _number(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return v
    return None


def _problem_of(ex):
    """The exploration's Problem (a loaded one names its kernel only), or None."""
    try:
        return ex._problem()
    except Exception:   # noqa: BLE001 - a kernel the library does not know: no roofline, still a view
        return None


def work_of(ex, shape) -> tuple[float | None, float | None]:
    """(flops, bytes) of one problem shape, None where the problem does not say."""
    p = _problem_of(ex)
    out = []
    for fn in (getattr(p, "flops", None), getattr(p, "bytes", None)):
        try:
            v = fn(tuple(shape)) if callable(fn) else None
        except Exception:   # noqa: BLE001
            v = None
        out.append(float(v) if v else None)
    return out[0], out[1]


def ceilings(gpu: str = "H200") -> dict:
    """The roofline's ceilings of ``gpu``: dense fp16 TFLOP/s and DRAM GB/s."""
    from ..target import gpu_model
    m = gpu_model(gpu)
    return {"gpu": m.name, "peak_tflops": float(m.dense_fp16_tflops), "dram_gbps": float(m.dram_gbps)}


def _clean(v):
    # what JSON (and the front end) can take: finite floats, plain containers
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def view_entries(ex, shape=None) -> list[dict]:
    """The exploration's entries as the views draw them: JSON-safe, each with ``time`` (µs by
    :func:`time_key` of its shape, else the other time), ``time_by`` (which one), ``tflops_eff``
    (measured TFLOP/s, else flops / time), ``intensity`` (flops / bytes of its shape)."""
    entries = ex.entries(shape)
    by_shape: dict = {}
    for e in entries:
        by_shape.setdefault(tuple(e["shape"]), []).append(e)
    out = []
    for shp, es in by_shape.items():
        key = time_key(es)
        other = "predicted_us" if key == "us" else "us"
        flops, nbytes = work_of(ex, shp)
        for e in es:
            d = dict(e)
            t_by = key if e.get(key) is not None else (other if e.get(other) is not None else None)
            t = e.get(t_by) if t_by else None
            d["time"], d["time_by"] = t, t_by
            if e.get("tflops") is not None and t_by == "us":
                d["tflops_eff"] = e["tflops"]
            else:
                d["tflops_eff"] = flops / (t * 1e-6) / 1e12 if flops and t else None
            d["flops"], d["bytes"] = flops, nbytes
            d["intensity"] = flops / nbytes if flops and nbytes else None
            if d.get("diagnosis") and len(d["diagnosis"]) > 6000:
                d["diagnosis"] = d["diagnosis"][:6000] + "\n..."
            out.append(_clean(d))
    return out


def _shapes_of(ex, entries=None) -> list[tuple]:
    if ex.shapes:
        return [tuple(s) for s in ex.shapes]
    return sorted({tuple(e["shape"]) for e in (entries if entries is not None else ex.entries())})


def _rank(e) -> tuple:
    failed = e.get("status") in FAILED
    t = e.get("time")
    return (failed, t is None, t if t is not None else 0.0, e.get("config_id", ""))


# -- static pictures (matplotlib, no pyplot: no global figure state) ---------------------------------
def _figure(w=6.4, h=4.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _axis_value(e, key):
    v = _number(value_of(e, key))
    if v is not None and key == "smem_bytes":
        v = v / 1024
    return v


def _one_shape(ex, shape):
    shapes = _shapes_of(ex)
    shape = tuple(shape) if shape is not None else (shapes[0] if shapes else None)
    return shape, view_entries(ex, shape)


def pareto_png(ex, resource: str = "smem_bytes", shape=None) -> bytes:
    """Time against ``resource`` (an entry field such as smem_bytes, or a knob such as STAGES)
    at one shape, the Pareto front drawn through it, dropped configs as red crosses on top. PNG.

    >>> from IPython.display import Image; Image(pareto_png(ex, "registers"))     # doctest: +SKIP
    """
    shape, es = _one_shape(ex, shape)
    by = time_key(es)
    fig = _figure()
    ax = fig.add_subplot()
    alive = [e for e in es if e["status"] in ALIVE and e.get(by) is not None and _axis_value(e, resource) is not None]
    front = pareto_front(es, resource, by)
    front_ids = {e["config_id"] for e in front}
    xs = [_axis_value(e, resource) for e in alive]
    ax.scatter(xs, [e[by] for e in alive], s=28, c=["#e67e22" if e["config_id"] in front_ids else "#2e86de"
                                                    for e in alive], zorder=3, label="configs")
    if front:
        ax.step([_axis_value(e, resource) for e in front], [e[by] for e in front], where="post", color="#e67e22",
                lw=1.5, zorder=2, label="Pareto front")
    dropped = [e for e in es if e["status"] in FAILED and _axis_value(e, resource) is not None]
    if dropped:
        top = max([e[by] for e in alive], default=1.0)
        ax.scatter([_axis_value(e, resource) for e in dropped], [top * 1.04] * len(dropped), marker="x",
                   c="#c0392b", s=40, zorder=3, label=f"dropped ({len(dropped)})")
    ax.set_xlabel(_RESOURCE_LABELS.get(resource, resource))
    ax.set_ylabel(_TIME_LABELS[by])
    ax.set_title(f"{ex.kernel} {list(shape) if shape else ''}: time vs {resource}", fontsize=10)
    ax.grid(alpha=0.3)
    if alive or dropped:
        ax.legend(fontsize=8)
    return _png(fig)


def heatmap_cells(entries, x: str, y: str, by: str | None = None):
    """(x values, y values, cells): cells[j][i] is the fastest alive entry with knob ``x`` =
    xs[i] and ``y`` = ys[j] (None: no config there, or only dropped ones)."""
    by = by or time_key(entries)

    def key(v):
        return (0, v) if _number(v) is not None else (1, str(v))
    xs = sorted({value_of(e, x) for e in entries}, key=key)
    ys = sorted({value_of(e, y) for e in entries}, key=key)
    cells = [[None] * len(xs) for _ in ys]
    for e in entries:
        if e.get("status") not in ALIVE or e.get(by) is None:
            continue
        i, j = xs.index(value_of(e, x)), ys.index(value_of(e, y))
        c = cells[j][i]
        if c is None or e[by] < c[by]:
            cells[j][i] = e
    return xs, ys, cells


def _default_axes(ex, es, x=None, y=None):
    knobs = knobs_of(ex, es)
    vary = varying_knobs(es, knobs) or knobs
    x = x or (vary[0] if vary else None)
    y = y or next((k for k in vary if k != x), x)
    return x, y


def heatmap_png(ex, x: str | None = None, y: str | None = None, shape=None) -> bytes:
    """The best time per cell over knobs ``x`` and ``y`` (other knobs: their fastest config) at
    one shape. Default: the first two knobs that vary. PNG.

    >>> Image(heatmap_png(ex, "STAGES", "EPI_N"))     # doctest: +SKIP
    """
    shape, es = _one_shape(ex, shape)
    x, y = _default_axes(ex, es, x, y)
    by = time_key(es)
    xs, ys, cells = heatmap_cells(es, x, y, by)
    import numpy as np
    grid = np.array([[c[by] if c is not None else np.nan for c in row] for row in cells], dtype=float).reshape(
        len(ys), len(xs))
    fig = _figure(max(3.5, 1.0 + 0.9 * len(xs)), max(2.5, 1.0 + 0.55 * len(ys)))
    ax = fig.add_subplot()
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", aspect="auto", origin="lower")
    for j, row in enumerate(cells):
        for i, c in enumerate(row):
            if c is not None:
                ax.text(i, j, f"{c[by]:.4g}", ha="center", va="center", fontsize=8, color="white")
            else:
                gone = any(value_of(e, x) == xs[i] and value_of(e, y) == ys[j] for e in es)
                ax.text(i, j, "dropped" if gone else "", ha="center", va="center", fontsize=7, color="#c0392b")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(str(x))
    ax.set_ylabel(str(y))
    ax.set_title(f"best {_TIME_LABELS[by]} per cell", fontsize=10)
    if np.isfinite(grid).any():
        fig.colorbar(im, ax=ax, label="µs")
    return _png(fig)


def roofline_png(ex, shape=None, gpu: str = "H200") -> bytes:
    """Every alive config as a point: TFLOP/s against the arithmetic intensity (flops / bytes)
    of its shape, under ``gpu``'s compute and DRAM ceilings (log-log). PNG.

    >>> Image(roofline_png(ex))     # doctest: +SKIP
    """
    es = [e for e in view_entries(ex, shape) if e["status"] in ALIVE]
    c = ceilings(gpu)
    fig = _figure()
    ax = fig.add_subplot()
    pts = [e for e in es if e.get("intensity") and e.get("tflops_eff")]
    ais = [e["intensity"] for e in pts] or [100.0]
    lo, hi = min(ais) / 30, max(ais) * 30
    ridge = c["peak_tflops"] * 1e12 / (c["dram_gbps"] * 1e9)
    xs = sorted({lo, hi, ridge} | set(ais))
    ax.plot(xs, [min(c["peak_tflops"], a * c["dram_gbps"] / 1e3) for a in xs], color="#555", lw=1.5,
            label=f"{c['gpu']}: {c['peak_tflops']:.0f} TFLOP/s, {c['dram_gbps']:.0f} GB/s")
    if pts:
        ax.scatter(ais[:len(pts)], [e["tflops_eff"] for e in pts], s=24, zorder=3,
                   c=["#2e86de" if e["time_by"] == "us" else "#8e44ad" for e in pts],
                   label="configs (purple: simulated)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _png(fig)


def _img(png: bytes, alt: str) -> str:
    return (f"<img class='tlxwb-ex-png' style='max-width:49%;vertical-align:top' alt='{html.escape(alt)}' "
            f"src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'/>")


def _fmt(v, digits=4) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def entries_table(ex, entries, knobs=None) -> str:
    """The entries as an HTML table, fastest first, dropped last (their reason in the row)."""
    esc = html.escape
    knobs = knobs if knobs is not None else (varying_knobs(entries, knobs_of(ex, entries)) or knobs_of(ex, entries))
    head = (["config"] + list(knobs) + ["status"] + [lab for _, lab in _TABLE_FIELDS]
            + ["simulated µs", "measured µs", "TFLOP/s", "reason"])
    rows = []
    for e in sorted(entries, key=_rank):
        failed = e["status"] in FAILED
        cls = "tlxwb-ex-row" + (" tlxwb-ex-dropped" if failed else "")
        reason = e.get("reason") or ""
        where = f" (line {e['line']})" if failed and e.get("line") else ""
        cells = [f"<code>{esc(e['config_id'])}</code>"] + [esc(_fmt(value_of(e, k))) for k in knobs]
        status = e["status"] + (f" at {e.get('dropped_at')}" if failed and e.get("dropped_at") else "")
        cells.append(esc(status))
        for f, _ in _TABLE_FIELDS:
            v = e.get(f)
            cells.append(esc(f"{v / 1024:.1f} KiB" if f == "smem_bytes" and v is not None else _fmt(v)))
        cells += [esc(_fmt(e.get("predicted_us"))), esc(_fmt(e.get("us"))),
                  esc(_fmt(e.get("tflops_eff"), 3)) + ("" if e.get("time_by") == "us" or e.get("tflops_eff") is None
                                                       else " <span style='color:#888'>(sim)</span>"),
                  f"<span class='tlxwb-ex-reason'>{esc(reason + where)}</span>"]
        rows.append(f"<tr class='{cls}' data-config-id='{esc(e['config_id'])}' data-status='{esc(e['status'])}'"
                    f"{f' title={chr(39)}{esc(reason + where)}{chr(39)}' if failed else ''}>"
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    # in a box as wide as the notebook, which scrolls (an inline style: it survives an untrusted notebook's sanitizer)
    return ("<div class='tlxwb-ex-tablewrap' style='max-width:100%;overflow-x:auto'>"
            "<table class='tlxwb-ex-table'><thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>")


_STATIC_CSS = """<style>
.tlxwb-ex-static{font:12px/1.35 sans-serif;color:#222}
.tlxwb-ex-table{border-collapse:collapse;font:11px/1.3 ui-monospace,Menlo,Consolas,monospace;margin:4px 0}
.tlxwb-ex-table th,.tlxwb-ex-table td{border:1px solid #ddd;padding:1px 5px;text-align:right;white-space:nowrap}
.tlxwb-ex-table th{background:#f2f4f7}
.tlxwb-ex-table tr.tlxwb-ex-dropped td{color:#a93226;background:#fdf0ee}
.tlxwb-ex-table td:last-child{text-align:left;white-space:normal;max-width:520px}
.tlxwb-ex-png{max-width:49%;vertical-align:top}
</style>"""


def exploration_html(ex) -> str:
    """The exploration as one self-contained HTML fragment (no script): its summary, then per
    shape a table of every config and PNGs of time vs SMEM with the Pareto front, the heatmap
    of the first two varying knobs and the roofline. Survives nbconvert, nbval and GitHub.

    >>> pathlib.Path("sweep.html").write_text(exploration_html(ex))     # doctest: +SKIP
    """
    esc = html.escape
    parts = [_STATIC_CSS, "<div class='tlxwb-static tlxwb-ex-static'>",
             f"<pre class='tlxwb-ex-summary' style='white-space:pre-wrap'>{esc(chr(10).join(ex.summary_lines()))}"
             "</pre>"]
    entries = view_entries(ex)
    knobs = knobs_of(ex, entries)
    for shape in _shapes_of(ex, entries):
        es = [e for e in entries if tuple(e["shape"]) == tuple(shape)]
        if not es:
            continue
        by = time_key(es)
        parts.append(f"<div style='font-weight:600;margin-top:6px'>{esc(ex.kernel)} at {list(shape)}: "
                     f"{len(es)} configs, time = {_TIME_LABELS[by]}</div>")
        parts.append(entries_table(ex, es, varying_knobs(es, knobs) or knobs))
        pics = []
        for name, fn in (("time vs SMEM with the Pareto front", lambda: pareto_png(ex, "smem_bytes", shape)),
                         ("best time over two knobs", lambda: heatmap_png(ex, shape=shape)),
                         ("roofline", lambda: roofline_png(ex, shape))):
            try:
                pics.append(_img(fn(), name))
            except Exception as err:   # noqa: BLE001 - a picture that cannot draw leaves the table
                pics.append(f"<div class='tlxwb-ex-error'>{esc(name)}: {esc(type(err).__name__)}: {esc(str(err))}</div>")
        parts.append("<div>" + "".join(pics) + "</div>")
    parts.append("</div>")
    return "".join(parts)


views.register("Exploration", exploration_html)


# -- the live widget -----------------------------------------------------------------------------
def _error_html(what: str, err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return (f"<div class='tlxwb-ex-error'><b>{html.escape(what)}</b> "
            f"<pre>{html.escape(type(err).__name__ + ': ' + text)}</pre></div>")


def diff_html(d: dict) -> str:
    """``Exploration.diff``'s dict as a small table: knobs, resources, IR lines (this | best)."""
    esc = html.escape
    if d.get("config") == d.get("against"):
        return "<div>this is the best config</div>"
    rows = []
    for group in ("knobs", "resources", "ir_lines"):
        for k, (a, b) in (d.get(group) or {}).items():
            rows.append(f"<tr><td>{esc(group.replace('_', ' '))}</td><td>{esc(str(k))}</td>"
                        f"<td>{esc(_fmt(a))}</td><td>{esc(_fmt(b))}</td></tr>")
    if not rows:
        rows.append("<tr><td colspan='4'>no difference in knobs, resources or IR size</td></tr>")
    return (f"<table class='tlxwb-ex-table tlxwb-ex-diff'><thead><tr><th></th><th></th>"
            f"<th>this ({esc(str(d.get('config')))})</th><th>best ({esc(str(d.get('against')))})</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>")


class ExplorerWidget(View):
    """A sweep's results, live: a sortable table, time against a resource or knob with the
    Pareto front, the best time over two knobs, and a roofline (the H200's ceilings). Dropped
    configs are red crosses, their reason on hover. While the sweep runs the view re-reads the
    store every ``interval`` seconds. A click on a point or row opens that config's
    CompileReport, simulated timeline and diff against the best below the plots (also
    :meth:`open_config`; ``on_open`` callbacks get ``(entry, parts)``).

    >>> ex = tx.explore("gemm_ws", shapes=[(4096, 4096, 4096)], background=True)   # doctest: +SKIP
    >>> ExplorerWidget(ex)                                                          # doctest: +SKIP
    """

    # the view's own CSS rides in the ESM (a standalone page carries only the shared CSS)
    _esm = esm_source("explorer") + f"\nconst EXPLORER_CSS = {json.dumps((STATIC / 'explorer.css').read_text())};\n"
    _entries = traitlets.List().tag(sync=True)
    _shapes = traitlets.List().tag(sync=True)
    _knobs = traitlets.List().tag(sync=True)
    _resources = traitlets.List().tag(sync=True)
    _ceilings = traitlets.Dict().tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    running = traitlets.Bool(False).tag(sync=True)
    shape_index = traitlets.Int(0).tag(sync=True)
    resource = traitlets.Unicode("smem_bytes").tag(sync=True)
    heat_x = traitlets.Unicode("").tag(sync=True)
    heat_y = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)     # config id last opened
    detail = traitlets.Unicode("").tag(sync=True)       # the opened config's HTML

    def __init__(self, exploration, *, gpu: str = "H200", interval: float = 1.0, title: str | None = None,
                 **kwargs):
        self.exploration = exploration
        self.gpu = gpu
        self.interval = interval
        self.timeline = None            # a TimelineWidget of the config last opened
        self.opened: dict = {}          # that config's parts: report, simulation, diff (or the errors)
        self._callbacks: list[Callable] = []
        self._cache: dict = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: set after every refresh from the store (tests and scripts wait on it)
        self.refreshed = threading.Event()
        entries = view_entries(exploration)
        knobs = knobs_of(exploration, entries)
        vary = varying_knobs(entries, knobs) or knobs
        hx, hy = _default_axes(exploration, entries)
        super().__init__(title=title or f"{exploration.kernel} exploration", _entries=entries,
                         _shapes=[list(s) for s in _shapes_of(exploration, entries)], _knobs=knobs,
                         _resources=[r for r in RESOURCES] + [k for k in vary if k not in RESOURCES],
                         _ceilings=ceilings(gpu), summary="\n".join(exploration.summary_lines()),
                         running=bool(exploration.running), heat_x=hx or "", heat_y=hy or "", **kwargs)
        self.on_msg(self._on_custom_msg)
        if self.running:
            self._thread = threading.Thread(target=self._follow, daemon=True, name="tlxwb-explorer-follow")
            self._thread.start()

    # -- following a running sweep ---------------------------------------------------------------
    def refresh(self) -> bool:
        """Re-read the store; True when the entries changed (the view redraws)."""
        ex = self.exploration
        entries = view_entries(ex)
        changed = entries != self._entries
        with self.hold_sync():
            if changed:
                self._entries = entries
                self._shapes = [list(s) for s in _shapes_of(ex, entries)]
            self.summary = "\n".join(ex.summary_lines())
            self.running = bool(ex.running)
        self.refreshed.set()
        return changed

    def _follow(self):
        # every `interval` s while the sweep runs, then once more for its last rows
        while not self._stop.wait(self.interval):
            running = bool(self.exploration.running)
            try:
                self.refresh()
            except Exception as err:   # noqa: BLE001 - a store being written must not kill the view
                self.summary = f"could not read the store: {type(err).__name__}: {err}"
            if not running:
                break
        self.running = bool(self.exploration.running)

    def stop(self):
        """Stop following the sweep (the view keeps what it shows)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def close(self):
        self.stop()
        super().close()

    # -- opening one config ----------------------------------------------------------------------------
    def on_open(self, callback: Callable[[dict, dict], None]) -> None:
        """Call ``callback(entry, parts)`` after a config is opened (a click or :meth:`open_config`);
        ``parts`` holds its ``report``, ``simulation`` and ``diff`` (absent where they failed).

        >>> w.on_open(lambda entry, parts: print(entry["config_id"]))    # doctest: +SKIP
        """
        self._callbacks.append(callback)

    def _on_custom_msg(self, _widget, content, _buffers=None):
        # the front end's one message: {"type": "select", "config_id": ..., "shape": [...]}
        try:
            if not isinstance(content, dict) or content.get("type") != "select":
                raise ValueError(f"the explorer does not understand the message {content!r}")
            self.open_config(content.get("config_id"), content.get("shape"))
        except Exception as err:   # noqa: BLE001 - whatever the front end sends, the notebook lives on
            self.detail = _error_html("could not open that config:", err)

    def _entry(self, config_id, shape=None) -> dict:
        from ..errors import TLXWorkbenchError
        if not isinstance(config_id, str) or not config_id:
            raise TLXWorkbenchError(f"no config id given ({config_id!r})", hint="click a point or a table row")
        for e in self._entries:
            if e["config_id"] == config_id and (shape is None or list(e["shape"]) == list(shape)):
                return e
        raise TLXWorkbenchError(f"no config {config_id!r} in this exploration"
                                + (f" at shape {list(shape)}" if shape is not None else ""),
                                hint="use the config_id of one of its entries (ExplorerWidget(ex)._entries)")

    def open_config(self, config_id: str, shape=None) -> str:
        """Open one config below the plots: its CompileReport, simulated timeline and diff
        against the best config; each part that fails says why in its place. Returns the HTML.

        >>> w.open_config("31a63313adc0")     # doctest: +SKIP
        """
        esc = html.escape
        try:
            e = self._entry(config_id, shape)
        except Exception as err:   # noqa: BLE001
            self.detail = _error_html("could not open that config:", err)
            return self.detail
        self.selected = e["config_id"]
        self.detail = f"<div class='tlxwb-ex-opening'>opening {esc(e['config_id'])}: compiling and simulating…</div>"
        key = (e["config_id"], tuple(e["shape"]))
        if key not in self._cache:
            self._cache[key] = self._open_parts(e)
        parts, body = self._cache[key]
        self.opened = parts
        head = self._head_html(e)
        self.detail = head + body
        if parts.get("simulation") is not None:
            try:
                from .timeline import TimelineWidget
                self.timeline = TimelineWidget(parts["simulation"].trace)
            except Exception:   # noqa: BLE001 - the static timeline above still shows
                self.timeline = None
        for cb in list(self._callbacks):
            try:
                cb(e, parts)
            except Exception as err:   # noqa: BLE001
                self.detail += _error_html("an on_open callback failed:", err)
        return self.detail

    def _head_html(self, e) -> str:
        esc = html.escape
        knobs = ", ".join(f"{k}={v}" for k, v in (e.get("config") or {}).items())
        t = e.get("time")
        line = (f"<div class='tlxwb-ex-detail-head'><b>config {esc(e['config_id'])}</b> at {esc(str(e['shape']))}: "
                f"{esc(e['status'])}" + (f", {t:.4g} µs ({esc(_TIME_LABELS.get(e['time_by'], ''))})" if t else "")
                + f"<div class='tlxwb-ex-knobs'><code>{esc(knobs)}</code></div>")
        if e["status"] in FAILED:
            where = f" (line {e['line']})" if e.get("line") else ""
            line += (f"<div class='tlxwb-ex-reason'>dropped at {esc(str(e.get('dropped_at')))}: "
                     f"{esc(e.get('reason') or '')}{esc(where)}</div>")
            if e.get("diagnosis"):
                line += f"<details><summary>diagnosis</summary><pre>{esc(e['diagnosis'])}</pre></details>"
        return line + "</div>"

    def _open_parts(self, e) -> tuple[dict, str]:
        ex, cfg, shape = self.exploration, e["config"], e["shape"]
        parts: dict = {}
        out = []
        try:
            d = ex.diff(cfg, shape=shape)
            parts["diff"] = d
            out.append(f"<details open class='tlxwb-ex-part tlxwb-ex-part-diff'><summary>diff against the best config"
                       f"</summary>{diff_html(d)}</details>")
        except Exception as err:   # noqa: BLE001
            out.append(_error_html("diff against the best config: not available:", err))
        try:
            rep = ex.report(cfg, shape, target=self.gpu)
            parts["report"] = rep
            out.append(f"<details open class='tlxwb-ex-part tlxwb-ex-part-report'><summary>compile report</summary>"
                       f"{rep._repr_html_()}</details>")
        except Exception as err:   # noqa: BLE001
            out.append(_error_html("compile report: the config does not compile:", err))
        try:
            sim = ex.simulation(cfg, gpu=self.gpu)
            parts["simulation"] = sim
            from .timeline import timeline_html
            note = ""
            if getattr(sim, "deadlock", None) is not None:
                note = f"<pre class='tlxwb-ex-reason'>{html.escape(str(sim.deadlock))}</pre>"
            out.append(f"<details open class='tlxwb-ex-part tlxwb-ex-part-timeline'><summary>simulated timeline "
                       f"(.timeline is the live TimelineWidget)</summary>{note}{timeline_html(sim.trace)}</details>")
        except Exception as err:   # noqa: BLE001
            out.append(_error_html("simulated timeline: the simulation failed:", err))
        return parts, "".join(out)

    # -- static rendering --------------------------------------------------------------------------
    def static_html(self, svg: str | None = None) -> str:
        return exploration_html(self.exploration)

    def __repr__(self) -> str:
        return f"ExplorerWidget({self.exploration.kernel}, {len(self._entries)} entries)"
