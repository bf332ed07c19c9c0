"""The CompileReport: what the TLX compiler made of one kernel, for one target.

Plain data (dataclasses). The compiler package fills it; views (memory map, IR
explorer, HTML report) and the checker read it. Field names here are a contract
between those parts: add fields freely, rename none.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any

# the source types are their own module, below both this one and sourcemap.py (which fills a SourceMap)
from .source import SourceInfo, SourceMap  # noqa: F401 - part of the report's contract

# guards the lazily built source map (a widget may ask from another thread); re-entrant
# because finishing the SASS part goes through the same lock
_LAZY_LOCK = threading.RLock()


@dataclasses.dataclass
class Resources:
    smem_bytes: int                 # the compiled kernel's metadata.shared
    smem_limit: int                 # the target's opt-in max per CTA
    registers: int | None           # per thread, from the cubin
    spills: int                     # spill stores + loads, bytes (from ptxas/SASS info)
    num_warps: int                  # total warps of the CTA, all tasks
    num_ctas: int = 1               # CTAs per cluster
    tmem_columns: int = 0           # sm_100: columns allocated
    tmem_limit: int = 0             # sm_100: 512
    local_bytes: int = 0            # stack / local memory per thread


@dataclasses.dataclass
class TaskInfo:
    """One async task (or its replica) of a warp-specialized kernel."""
    name: str                       # "default" or "task1", ...
    replica: int
    num_warps: int
    warp_start: int                 # first warp id of this task in the CTA
    registers: int | None           # setmaxnreg budget, if any
    line: int | None = None         # source line of the `with tlx.async_task(...)`
    partition: int | None = None    # index of the TTGIR `partitionN` region; None for default
    label: str = ""                 # how sites name the task: "default", "task1", "task2[0]" (replicas)

    def __post_init__(self):
        if not self.label:
            self.label = self.name


@dataclasses.dataclass
class Allocation:
    """One SMEM/TMEM buffer array or barrier array, where the compiler placed it."""
    name: str                       # the Python variable name in the kernel
    line: int | None
    storage: str                    # "smem" | "tmem"
    kind: str                       # "buffer" | "barrier" | "scratch"
    shape: tuple[int, ...]          # per buffer
    dtype: str                      # "f16", "bf16", "f32", "i64" (barriers), ...
    num_buffers: int
    offset: int                     # bytes (SMEM) or first column (TMEM), from the compiler's allocation
    size: int                       # bytes (SMEM) or columns (TMEM), all buffers together
    alias_group: int | None = None  # allocations sharing a group reuse the same space
    row_offset: int = 0             # TMEM: first lane (row) of the allocation
    size_is_bound: bool = False     # scratch: the IR gives only the start, size is an upper bound

    @property
    def buffer_size(self) -> int:
        return self.size // max(self.num_buffers, 1)


@dataclasses.dataclass
class BarrierSite:
    op: str                         # "wait" | "arrive" | "expect" | "tma_load" (signals it) | "mma_commit" | ...
    task: str | None                # task name, None outside async_tasks
    line: int | None
    args: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. {"bytes": 16384}, {"count": 1}
    ir_line: int | None = None      # the site's line in the final TTGIR


@dataclasses.dataclass
class BarrierInfo:
    name: str
    line: int | None
    kind: str                       # "mbarrier" | "warp" | "named"
    count: int | None               # initial arrive count (per thread for warp barriers); named: num_threads
    slots: int
    sites: list[BarrierSite] = dataclasses.field(default_factory=list)
    # warp barriers: the (num_warps, num_arrivals) they were declared with
    warp_args: dict[str, int] | None = None
    slot_counts: list[int | None] = dataclasses.field(default_factory=list)  # init count of each slot
    named_id: int | None = None     # named barriers: the hardware barrier id (0..15)


_STAGE_ORDER = ("ttir", "ttgir", "ttgir_alloc", "llir", "ptx", "sass")


class _Analyzed:
    """A CompileReport field that the report's deferred analysis finishes on first read.

    ``stages`` (its ``"ttgir_alloc"``), ``allocations`` and ``barriers`` need the SMEM/TMEM
    allocation passes re-run and the TTGIR parsed op by op, which most readers of a report
    (a sweep's static stage: resources, metadata, ptxas advisories, tasks) never look at. The
    value lives in the instance's ``__dict__`` under the field's own name, so pickling and
    ``dataclasses.fields`` see a plain field; no class-level default (``__get__`` on the class
    raises AttributeError, which dataclasses reads as "no default")."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.name)
        if obj.__dict__.get("_analysis_job") is not None:
            obj._finish_analysis()
        return obj.__dict__[self.name]

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


@dataclasses.dataclass(eq=False, repr=False)
class CompileReport:
    """What the TLX compiler made of one kernel for one target.

    Stages (``ir("ttir" | "ttgir" | "ttgir_alloc" | "llir" | "ptx" | "sass")``), the cubin,
    resources, task layout, SMEM/TMEM allocation map, barrier table and a source map.

    >>> r = tlx_workbench.compile(kernel, *args, target="sm_90", BM=128)      # doctest: +SKIP
    >>> r.resources.smem_bytes, [a.name for a in r.allocations]               # doctest: +SKIP
    >>> print(r.ir("ptx", line=r.barriers[0].sites[0].line))                  # doctest: +SKIP
    """
    kernel: str                       # the kernel function's name
    target: str                       # "sm_90" | "sm_100"
    gpu: str                          # the GPU model the limits come from: "H100", "B200", ...
    arch: int                         # 90 | 100
    source: SourceInfo
    signature: dict[str, str]         # parameter -> Triton type ("*fp16", "i32", "tensordesc<...>", "constexpr")
    constexprs: dict[str, Any]        # constexpr parameter -> value
    options: dict[str, Any]           # the compile options: num_warps, num_stages, num_ctas, maxnreg, ...
    stages: dict[str, str] = _Analyzed()   # "ttir", "ttgir", "ttgir_alloc" (after SMEM/TMEM allocation), "llir", "ptx"
    cubin: bytes
    metadata: dict[str, Any]          # the compiled kernel's metadata (shared, num_warps, tmem_size, ...)
    resources: Resources
    tasks: list[TaskInfo]
    allocations: list[Allocation] = _Analyzed()
    barriers: list[BarrierInfo] = _Analyzed()
    compile_seconds: float            # wall time of triton.compile (0 on an in-memory cache hit: same object)
    cache_key: str
    _smap: SourceMap | None = dataclasses.field(default=None, repr=False)   # built on first use
    _sass_job: Any = dataclasses.field(default=None, repr=False)
    _sass: str | None = dataclasses.field(default=None, repr=False)
    # ptxas's -v log: captured at compile time, or a job that runs ptxas again when first asked
    _ptxas_log: str | None = dataclasses.field(default=None, repr=False)
    _ptxas_job: Any = dataclasses.field(default=None, repr=False)
    _ptxas_parsed: Any = dataclasses.field(default=None, repr=False)
    _wgmma_overlap: Any = dataclasses.field(default=None, repr=False)
    _spill_placement: Any = dataclasses.field(default=None, repr=False)
    # finishes stages["ttgir_alloc"], allocations and barriers when one of them is first read:
    # a callable returning (ttgir_alloc text, allocations, barriers); None once done
    _analysis_job: Any = dataclasses.field(default=None, repr=False)

    # ---- lazily finished pieces --------------------------------------------------------
    def _finish_analysis(self) -> None:
        with _LAZY_LOCK:
            job = self.__dict__.get("_analysis_job")
            if job is None:
                return
            post_text, allocations, barriers = job()
            self.__dict__["stages"]["ttgir_alloc"] = post_text
            self.__dict__["allocations"] = allocations
            self.__dict__["barriers"] = barriers
            self._analysis_job = None

    def _raw_stage(self, stage: str) -> str | None:
        """A stage's text without finishing the deferred analysis (all but "ttgir_alloc")."""
        if stage == "ttgir_alloc":
            return self.stages.get(stage)
        return self.__dict__["stages"].get(stage)

    def _stages_map(self, stages) -> SourceMap:
        """The source map with (at least) `stages` read in: each stage's locations are read
        once, when a reader first needs that stage (ptxas advisories need only the PTX's and
        the TTGIR's, not the LLVM IR's, the slowest to read)."""
        from .sourcemap import add_stage
        with _LAZY_LOCK:
            if self._smap is None:
                self._smap = SourceMap(file=self.source.file)
            for st in stages:
                if st not in self._smap.forward:
                    text = self._raw_stage(st)
                    if isinstance(text, str):
                        add_stage(self._smap, st, text, self.source.first_line, self.last_line)
            return self._smap

    def _stage_map(self) -> SourceMap:
        """The source map over every IR stage, read from their texts on first use: most
        reports are looked at for their tables, and reading every stage's locations is
        most of the fixed cost of a small kernel's report."""
        with _LAZY_LOCK:
            smap = self._stages_map([st for st in self.stages if st != "sass"])
            # stage order as the stages dict has it (then SASS), however the stages came in
            order = [st for st in self.stages if st in smap.forward] + [st for st in smap.forward
                                                                        if st not in self.stages]
            if list(smap.forward) != order:
                smap.forward = {st: smap.forward[st] for st in order}
                smap.backward = {st: smap.backward[st] for st in order}
            return smap

    @property
    def sass(self) -> str:
        """SASS with source-line annotations (nvdisasm runs in the background from compile on,
        or, after ``compile(..., sass="lazy")``, from the first read of this on)."""
        if self._sass is None:
            with _LAZY_LOCK:
                if self._sass is None:
                    job = self._sass_job
                    if job is not None and hasattr(job, "start"):
                        job.start()     # a lazy job: nvdisasm runs while the IR stages are read
                    # the IR stages' part of the map first: it is built while nvdisasm runs
                    smap = self._stage_map()
                    if job is None:
                        sass = ""
                    else:
                        try:
                            sass = job.result()
                        except Exception as e:  # a missing/failed nvdisasm must not sink the report
                            sass = f"// SASS unavailable: {e}"
                    from .sourcemap import add_stage
                    add_stage(smap, "sass", sass, self.source.first_line, self.last_line)
                    self._sass_job = None
                    self._sass = sass
        return self._sass

    @property
    def ptxas_log(self) -> str:
        """ptxas's own ``-v`` output for this kernel (advisories, registers, spills, barriers).

        Kept from the compile; for a cubin from Triton's disk cache, read from beside it, or
        (a cache entry made outside the workbench) ptxas runs again on the PTX, once, now.
        """
        if self._ptxas_log is None:
            with _LAZY_LOCK:
                if self._ptxas_log is None:
                    log = ""
                    if self._ptxas_job is not None:
                        try:
                            log = self._ptxas_job()
                        except Exception as e:  # a missing/failed ptxas must not sink the report
                            log = f"// ptxas log unavailable: {e}"
                    self._ptxas_job = None
                    self._ptxas_log = log
        return self._ptxas_log

    def _ptxas(self):
        if self._ptxas_parsed is None:
            log = self.ptxas_log
            with _LAZY_LOCK:
                if self._ptxas_parsed is None:
                    from .ptxas_log import locate, parse
                    parsed = parse(log)
                    if parsed.advisories:
                        # the stage map only: pointing at lines must not wait for the SASS (nor
                        # for the stages and analyses the advisories do not point into)
                        stages = {st: self._raw_stage(st) for st in ("ttgir", "ptx") if self._raw_stage(st)}
                        parsed.advisories = locate(parsed.advisories, stages,
                                                   lambda st, i: self._stages_map([st]).source_line(st, i))
                    self._ptxas_parsed = parsed
        return self._ptxas_parsed

    @property
    def ptxas_advisories(self) -> list:
        """ptxas's performance advisories and warnings (``PtxasAdvisory``: code, severity,
        message, explanation, hint), e.g. C7513 "wgmma.mma_async instructions are serialized".
        Known codes say why and what to do; unknown ones are kept verbatim.

        >>> [a.code for a in report.ptxas_advisories]          # doctest: +SKIP
        ['C7513']
        """
        return list(self._ptxas().advisories)

    @property
    def ptxas_functions(self) -> list:
        """Per-function numbers from ptxas (``PtxasFunctionStats``: registers, barriers, stack,
        spill stores / loads)."""
        return list(self._ptxas().functions)

    @property
    def spill_placement(self):
        """Where the kernel's local loads and stores (ptxas's spills) run: their bytes per thread in the whole code
        and in its wgmma loop, per iteration (``sass_loops.SpillPlacement``; read off the SASS); None when the SASS
        cannot be read.

        >>> str(report.spill_placement)     # doctest: +SKIP
        '748 + 744 B in the wgmma loop, per iteration'
        """
        if self._spill_placement is None:
            sass = self.sass
            if not sass or sass.startswith("// SASS unavailable"):
                return None
            from .sass_loops import spill_placement
            self._spill_placement = spill_placement(sass)
        return self._spill_placement

    @property
    def wgmma_overlap(self):
        """What ptxas runs under each in-flight wgmma (Hopper): one ``WgmmaGroup`` per
        ``tlx.async_dot`` in SASS order, with its A operand, the wait that retires it, the MUFU /
        FP / other instructions in between, and the work written under it that ptxas moved behind
        the wait (explained, with what to do). Empty for other targets or kernels without wgmma.

        >>> [(g.line, g.a_operand, g.mufu, g.moved) for g in report.wgmma_overlap]   # doctest: +SKIP
        [(194, 'smem', 0, 0), (151, 'smem', 0, 0), (152, 'registers', 0, 232), ...]
        """
        if self._wgmma_overlap is None:
            if self.arch == 90 and "wgmma.mma_async" in (self._raw_stage("ptx") or ""):
                self.sass  # noqa: B018  (finished outside the lock's critical section below)
            with _LAZY_LOCK:
                if self._wgmma_overlap is None:
                    from .wgmma_overlap import analyze
                    self._wgmma_overlap = analyze(self)
        return self._wgmma_overlap

    @property
    def source_map(self) -> SourceMap:
        """Kernel line <-> TTIR/TTGIR/LLIR/PTX/SASS lines."""
        self.sass  # noqa: B018  (completes the SASS part of the map)
        return self._stage_map()

    @property
    def last_line(self) -> int:
        return self.source.first_line + len(self.source.text.splitlines()) - 1

    # ---- convenience ---------------------------------------------------------------------
    def ir(self, stage: str = "ttgir", line: int | None = None, context: int = 0) -> str:
        """The text of `stage`; with `line`, only the stage lines kernel line `line` produced
        (each prefixed with its line number; `context` adds neighbours).

        >>> print(report.ir("ptx", line=183))          # doctest: +SKIP
        """
        stage = stage.lower()
        text = self.sass if stage == "sass" else self._raw_stage(stage)
        if text is None:
            raise KeyError(f"no stage {stage!r}; stages: {', '.join(s for s in _STAGE_ORDER)}")
        if line is None:
            return text
        want = self.source_map.lines_for(stage, line)
        lines = text.splitlines()
        keep = sorted({j for i in want for j in range(i - context, i + context + 1) if 1 <= j <= len(lines)})
        out, prev = [], None
        for j in keep:
            if prev is not None and j != prev + 1:
                out.append("     ...")
            out.append(f"{j:>6} | {lines[j - 1]}")
            prev = j
        return "\n".join(out)

    def sass_for(self, line: int, context: int = 0) -> str:
        """The SASS instructions kernel line `line` produced."""
        return self.ir("sass", line=line, context=context)

    def lines_for(self, stage: str, line: int) -> list[int]:
        return self.source_map.lines_for(stage, line)

    def source_line(self, stage: str, stage_line: int) -> int | None:
        """The kernel line a line of `stage` came from."""
        return self.source_map.source_line(stage, stage_line)

    def allocation(self, name: str) -> Allocation:
        for a in self.allocations:
            if a.name == name:
                return a
        raise KeyError(f"no allocation {name!r}; allocations: {', '.join(a.name for a in self.allocations)}")

    def barrier(self, name: str) -> BarrierInfo:
        for b in self.barriers:
            if b.name == name:
                return b
        raise KeyError(f"no barrier {name!r}; barriers: {', '.join(b.name for b in self.barriers)}")

    def task(self, label: str) -> TaskInfo:
        for t in self.tasks:
            if t.label == label or t.name == label:
                return t
        raise KeyError(f"no task {label!r}; tasks: {', '.join(t.label for t in self.tasks)}")

    def to_dict(self, stages: bool = False) -> dict[str, Any]:
        """Plain JSON-able data for views (widgets): everything but the cubin; stage texts
        (and SASS) only with ``stages=True``. The source map's keys become strings."""
        def conv(x):
            if dataclasses.is_dataclass(x):
                return {f.name: conv(getattr(x, f.name)) for f in dataclasses.fields(x)
                        if not f.name.startswith("_")}
            if isinstance(x, dict):
                return {str(k): conv(v) for k, v in x.items()}
            if isinstance(x, (list, tuple)):
                return [conv(v) for v in x]
            return x
        out = {k: conv(getattr(self, k)) for k in ("kernel", "target", "gpu", "arch", "source", "signature",
                                                  "constexprs", "options", "metadata", "resources", "tasks",
                                                  "allocations", "barriers", "compile_seconds", "cache_key")}
        out["source_map"] = conv(self.source_map)
        out["ptxas_advisories"] = conv(self.ptxas_advisories)
        if stages:
            out["stages"] = dict(self.stages, sass=self.sass)
        return out

    def __getstate__(self):
        # the background disassembly cannot be pickled: finish it first
        self.sass  # noqa: B018
        self.ptxas_log  # noqa: B018
        self._finish_analysis()
        state = dict(self.__dict__)
        state["_sass_job"] = None
        state["_ptxas_job"] = None
        state["_analysis_job"] = None
        return state

    # ---- reprs ---------------------------------------------------------------------------
    def summary(self) -> str:
        """A plain-text report: resources, tasks, memory map, barriers."""
        from .text import render_text
        return render_text(self)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        # drawn by widgets/compile_report.py, registered in tlx_workbench.views (a result never imports a view)
        from .. import views
        return views.html_or_text(self)
