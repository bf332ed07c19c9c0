"""``Exploration``: what a sweep found, read from its store.

It never asks the sweep: every figure comes from store rows, so an Exploration of a sweep
still running (or of one another process runs, or of a store file from another machine)
shows what is there now. One entry per config x shape merges that config's stage rows.

>>> ex = Exploration.load("explore.sqlite", "gemm_ws")      # doctest: +SKIP
>>> ex.best((4096, 4096, 4096)), ex.dropped()[:2], ex.search_costs((4096, 4096, 4096))   # doctest: +SKIP
"""
from __future__ import annotations

import json
import statistics
import time

from .. import views
from .space import Space, config_id
from .store import STAGES, Store

_STAGE_RANK = {s: i for i, s in enumerate(STAGES)}


class Exploration:
    def __init__(self, store: Store, problem, space: Space | None, shapes, *, sweep=None):
        self.store = store
        self.problem = problem
        self.kernel = problem.name if hasattr(problem, "name") else str(problem)
        self.space = space
        self.shapes = [tuple(s) for s in shapes] if shapes else None
        self.sweep = sweep

    @classmethod
    def load(cls, path, kernel: str, shapes=None) -> "Exploration":
        """The Exploration of every row of ``kernel`` in the store file at ``path`` (read-only)."""
        return cls(Store(path, readonly=True), kernel, None, shapes)

    # -- rows ----------------------------------------------------------------------------------
    def rows(self, stage: str | None = None):
        """This exploration's store rows (its kernel; its space and shapes when it has them)."""
        rows = self.store.rows(kernel=self.kernel, stage=stage)
        if self.space is not None:
            ids = {config_id(c) for c in self.space}
            rows = [r for r in rows if r.config_id in ids]
        if self.shapes is not None:
            shapes = {tuple(s) for s in self.shapes}
            rows = [r for r in rows if tuple(r.shape) in shapes]
        if self.sweep is not None:
            # the same config measured under an older compiler or source is another row: keep this sweep's
            rows = [r for r in rows if r.source_hash == self.sweep.problem.source_hash]
            # and the simulated rows of its own simulator options: one proved at the real shape
            # (sim_shape="real") is not this sweep's when it proved the small shape, nor the reverse
            key = getattr(self.sweep, "key", None)
            if key is not None:
                rows = [r for r in rows if r.stage != "simulated" or r.key == key(r.config, r.shape, r.stage)]
        return rows

    def entries(self, shape=None) -> list[dict]:
        """One flat dict per config x shape: its latest row per stage merged, and where it stands
        (``status``: measured | simulated | static | dropped | hung | crashed | error, ``stage``:
        the last stage it reached, ``reason``/``line`` of a drop)."""
        by: dict = {}
        for r in self.rows():
            if shape is not None and tuple(r.shape) != tuple(shape):
                continue
            by.setdefault((r.config_id, tuple(r.shape)), {})[r.stage] = r
        out = []
        for (cid, shp), stages in by.items():
            any_row = next(iter(stages.values()))
            e = dict(config_id=cid, config=any_row.config, shape=list(shp), status="pending", stage=None,
                     reason=None, file=None, line=None, diagnosis=None, device=None)
            for st in STAGES:
                r = stages.get(st)
                if r is None:
                    continue
                m = r.metrics
                if st == "static":
                    for k in ("smem_bytes", "registers", "spills", "ctas_per_sm", "num_warps", "tmem_columns", "ctas",
                  "spill_bytes", "wgmma_serialized"):
                        e[k] = m.get(k)
                    e["advisories"] = len(m.get("advisories") or [])
                elif st == "simulated":
                    for k in ("predicted_us", "sim_cycles", "verdict", "sim_shape"):
                        e[k] = m.get(k)
                    e["sim_rel_err"] = m.get("max_rel_err")
                else:
                    for k in ("us", "tflops", "gbps", "roofline", "max_rel_err"):
                        e[k] = m.get(k)
                    e["device"] = r.device
                e["stage"] = st
                # a later stage's row after a drop: the config was forced past that stage's gate
                # (gate=...), and the later row says where it stands now
                if r.ok:
                    e.update(status=st, reason=None, file=None, line=None, diagnosis=None, dropped_at=None)
                else:
                    e.update(status=r.status, reason=r.reason, file=r.file, line=r.line, diagnosis=r.diagnosis,
                             dropped_at=st)
            out.append(e)
        return out

    # -- what it found -------------------------------------------------------------------------
    def _all_shapes(self) -> list[tuple]:
        return [tuple(s) for s in self.shapes] if self.shapes else sorted({tuple(r.shape) for r in self.rows()})

    def _shape(self, shape):
        if shape is not None:
            return tuple(shape)
        shapes = self.shapes or sorted({tuple(r.shape) for r in self.rows()})
        return tuple(shapes[0]) if shapes else None

    def best(self, shape=None, by: str = "us", n: int = 1):
        """The fastest config at ``shape`` by measured µs (``by="predicted_us"``: simulated time);
        ``n > 1``: the n fastest, fastest first. None if nothing got that far."""
        shape = self._shape(shape)
        ranked = sorted((e for e in self.entries(shape) if e.get(by) is not None and e["status"] in
                         ("measured", "simulated", "static")), key=lambda e: e[by])
        if n == 1:
            return ranked[0]["config"] if ranked else None
        return [e["config"] for e in ranked[:n]]

    def entry(self, cfg_or_id, shape=None) -> dict | None:
        cid = cfg_or_id if isinstance(cfg_or_id, str) else config_id(cfg_or_id)
        shape = self._shape(shape)
        return next((e for e in self.entries(shape) if e["config_id"] == cid), None)

    def dropped(self, shape=None) -> list[dict]:
        """Configs a stage dropped (or that hung / crashed / failed): config, stage, reason, line."""
        return [e for e in self.entries(shape) if e["status"] in ("dropped", "hung", "crashed", "error")]

    def pareto(self, resource: str = "smem_bytes", shape=None, by: str | None = None) -> list[dict]:
        """Entries no other entry beats in both time and ``resource`` (lower is better in both),
        ordered by the resource. Time is measured µs, or the simulated prediction without it."""
        es = [e for e in self.entries(shape) if e["status"] in ("measured", "simulated", "static")]
        by = by or ("us" if any(e.get("us") is not None for e in es) else "predicted_us")
        def value(e):
            v = e.get(resource)
            return e["config"].get(resource) if v is None else v      # a resource, or a knob
        pts = sorted((e for e in es if e.get(by) is not None and isinstance(value(e), (int, float))),
                     key=lambda e: (value(e), e[by]))
        front, best = [], float("inf")
        for e in pts:
            if e[by] < best:
                front.append(e)
                best = e[by]
        return front

    def counts(self) -> dict:
        """Rows per stage and status, e.g. {"static": {"ok": 98, "dropped": 10}, ...}."""
        out: dict = {}
        for r in self.rows():
            out.setdefault(r.stage, {}).setdefault(r.status, 0)
            out[r.stage][r.status] += 1
        return out

    def rates(self) -> dict:
        """Configs per minute of each stage this sweep ran (its wall time; workers in parallel)."""
        if self.sweep is None:
            return {}
        out = {}
        for st in STAGES:
            n, s = self.sweep.ran[st], self.sweep.stage_seconds[st]
            if n and s:
                out[st] = dict(configs=n, seconds=round(s, 2), per_minute=round(60 * n / s, 1))
        return out

    def search_costs(self, shape=None, *, within: float = 0.02, seeds=range(20), k: int = 4) -> dict:
        """GPU measurements each search needs to reach the best measured config (or one within
        ``within`` of it: single measurements move by a few %), replayed over the measured rows
        (no GPU): exhaustive measures everything; random's figure is the median over ``seeds``
        orders; model-guided ranks by simulated time and widens by ``k`` until a batch finds
        nothing faster (``model`` is None when it stopped before reaching the target; then
        ``model_measured`` and ``model_reached`` say where it stopped)."""
        from .search import rank_score, replay
        shape = self._shape(shape)
        es = [e for e in self.entries(shape) if e.get("stage") == "measured"]
        times = {e["config_id"]: e.get("us") for e in es}
        rows = {(r.config_id, r.stage): r for r in self.rows() if tuple(r.shape) == tuple(shape)}
        ok = {c: t for c, t in times.items() if t is not None}
        if not ok:
            return {}
        best = min(ok, key=ok.get)
        target = ok[best] * (1 + within)
        cands = [(e["config_id"], rank_score(rows.get((e["config_id"], "simulated")),
                                             rows.get((e["config_id"], "static")))) for e in es]

        def cost(order):
            return next((i + 1 for i, c in enumerate(order) if ok.get(c, float("inf")) <= target), None)

        rnd = [cost(replay("random", cands, times, seed=s)) for s in seeds]
        model_order = replay("model", cands, times, k=k)
        reached = min((ok[c] for c in model_order if c in ok), default=None)
        ranked = sorted((c for c in cands if c[1] is not None), key=lambda c: c[1])
        rank_of_best = next((i + 1 for i, c in enumerate(ranked) if ok.get(c[0], float("inf")) <= target), None)
        return dict(best=best, best_us=ok[best], within=within, configs=len(cands), exhaustive=len(cands),
                    random_median=statistics.median([r for r in rnd if r is not None]), model=cost(model_order),
                    model_measured=len(model_order), model_reached=(reached / ok[best]) if reached else None,
                    model_rank_of_target=rank_of_best)

    # -- export ---------------------------------------------------------------------------------
    def to_configs(self, n: int = 1):
        """The best ``n`` configs of each shape as ``triton.Config``s: {shape: [Config, ...]}."""
        import triton
        opts = ("num_warps", "num_stages", "num_ctas", "maxnreg")
        out = {}
        for shape in self._all_shapes():
            best = self.best(shape, n=max(n, 2))
            best = best if isinstance(best, list) else [best]
            out[tuple(shape)] = [triton.Config({k: v for k, v in c.items() if k not in opts},
                                               **{k: v for k, v in c.items() if k in opts})
                                 for c in best[:n] if c is not None]
        return out

    def snippet(self, n: int = 1) -> str:
        """The best configs per shape as Python source to paste into a kernel module."""
        lines = [f"# best configs of {self.kernel} found by tlx_workbench.explore "
                 f"({time.strftime('%Y-%m-%d')}; measured where a GPU ran, else simulated)",
                 f"BEST_CONFIGS = {{"]
        for shape in self._all_shapes():
            best = self.best(shape) or self.best(shape, by="predicted_us")
            if best is not None:
                lines.append(f"    {tuple(shape)!r}: {json.dumps(best)},".replace("true", "True")
                             .replace("false", "False").replace("null", "None"))
        lines.append("}")
        return "\n".join(lines)

    # -- one config, opened --------------------------------------------------------------------
    def _cfg(self, cfg_or_id):
        if isinstance(cfg_or_id, str):       # a config id: found at any shape
            r = next((r for r in self.rows() if r.config_id == cfg_or_id), None)
            e = {"config": r.config} if r is not None else None
        else:
            e = {"config": cfg_or_id}
        if e is None:
            from ..errors import TLXWorkbenchError
            raise TLXWorkbenchError(f"no config {cfg_or_id!r} in this exploration", hint="use an entry's config_id")
        return e["config"]

    def _problem(self):
        from .problem import Problem
        if isinstance(self.problem, Problem):
            return self.problem
        from . import library
        name, causal, dtype = self.kernel, False, "float16"
        for suffix, dt in (("_bf16", "bfloat16"),):
            if name.endswith(suffix):
                name, dtype = name[: -len(suffix)], dt
        if name.endswith("_causal"):
            name, causal = name[: -len("_causal")], True
        return library.problem(name, dtype=dtype, causal=causal)

    def report(self, cfg_or_id, shape=None, target: str = "H200"):
        """The CompileReport of one config at ``shape`` (compiled again offline; cached)."""
        import tlx_workbench as wb
        from .stages import capture
        p, cfg = self._problem(), self._cfg(cfg_or_id)
        jit, grid, args, kwargs = capture(p, cfg, self._shape(shape), target)[0]
        return wb.compile(jit, *args, target=target, **kwargs)

    def simulation(self, cfg_or_id, gpu: str = "H200", seed: int = 0, sim_shape="small", shape=None):
        """The SimResult of one config at the problem's small shape (its timeline is ``.trace``);
        ``sim_shape="real"``: at the exploration's shape (``shape``, default its first), every CTA."""
        import tlx_workbench as wb
        from .stages import inputs_for, proof_shape
        p, cfg = self._problem(), self._cfg(cfg_or_id)
        inputs = inputs_for(p, proof_shape(p, cfg, self._shape(shape), sim_shape), "cpu", fresh=True, seed=seed)
        return wb.simulate(p.call, inputs, cfg, gpu=gpu, seed=seed, on_deadlock="return")

    def diff(self, cfg_or_id, against=None, shape=None) -> dict:
        """What differs between one config and another (default: the best): knobs, resources and
        the number of lines of each IR stage."""
        a = self._cfg(cfg_or_id)
        b = self._cfg(against) if against is not None else (self.best(shape) or self.best(shape, by="predicted_us"))
        ra, rb = self.report(a, shape), self.report(b, shape)
        knobs = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
        res = {f: (getattr(ra.resources, f), getattr(rb.resources, f)) for f in
               ("smem_bytes", "registers", "spills", "num_warps", "tmem_columns")
               if getattr(ra.resources, f) != getattr(rb.resources, f)}
        ir = {s: (len(ra.stages[s].splitlines()), len(rb.stages[s].splitlines())) for s in ("ttgir", "ptx")
              if s in ra.stages and s in rb.stages}
        return dict(config=config_id(a), against=config_id(b), knobs=knobs, resources=res, ir_lines=ir)

    # -- waiting for a background sweep --------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.sweep is not None and not self.sweep.done.is_set()

    def wait(self, timeout: float | None = None) -> "Exploration":
        """Block until a background sweep has finished (re-raises its error)."""
        if self.sweep is not None:
            self.sweep.done.wait(timeout)
            if self.sweep.error is not None:
                raise self.sweep.error
        return self

    # -- reprs ------------------------------------------------------------------------------------
    def summary_lines(self) -> list[str]:
        n = len(self.space) if self.space is not None else len({r.config_id for r in self.rows()})
        lines = [f"Exploration of {self.kernel}: {n} configs, "
                 f"shapes {[list(s) for s in self.shapes] if self.shapes else '(all in store)'}"
                 + (" — running" if self.running else "")]
        for st, by in sorted(self.counts().items(), key=lambda kv: _STAGE_RANK[kv[0]]):
            lines.append(f"  {st:<9} " + ", ".join(f"{n} {s}" for s, n in sorted(by.items())))
        for shape in self._all_shapes():
            b = self.best(shape)
            bp = self.best(shape, by="predicted_us")
            if b is not None:
                e = self.entry(b, shape)
                lines.append(f"  best at {list(shape)}: {e['us']:.1f} µs measured"
                             + (f", {e['tflops']:.0f} TFLOP/s" if e.get("tflops") else "") + f"  {b}")
            elif bp is not None:
                e = self.entry(bp, shape)
                lines.append(f"  best predicted at {list(shape)}: {e['predicted_us']:.1f} µs (simulated)  {bp}")
        d = self.dropped()
        if d:
            lines.append(f"  dropped: {len(d)}")
            everyone = [e["config"] for e in self.entries()]
            for e in d[:5]:
                where = f" (line {e['line']})" if e.get("line") else ""
                lines.append(f"    [{e['dropped_at']}] {_distinct(e['config'], everyone)} ({e['config_id']}): "
                             f"{(e['reason'] or '')[:140]}{where}")
            if len(d) > 5:
                lines.append(f"    ... and {len(d) - 5} more (.dropped())")
        return lines

    def __repr__(self):
        return "\n".join(self.summary_lines())

    def _repr_html_(self):
        h = views.html(self)
        if h is not None:
            return h
        import html
        return f"<pre>{html.escape(repr(self))}</pre>"


def _distinct(cfg: dict, configs: list[dict]) -> str:
    """``cfg`` by the knobs where it differs from what most configs have (all of it if none differ).

    >>> _distinct({"BM": 128, "STAGES": 1}, [{"BM": 128, "STAGES": 3}, {"BM": 128, "STAGES": 4}] * 2)
    'STAGES=1'
    """
    import collections
    out = []
    for k, v in cfg.items():
        common = collections.Counter(json.dumps(c.get(k)) for c in configs).most_common(1)
        if not common or common[0][0] != json.dumps(v):
            out.append(f"{k}={v}")
    return " ".join(out) or " ".join(f"{k}={v}" for k, v in cfg.items())
