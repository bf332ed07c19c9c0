"""Assemble a CompileReport from a Triton CompiledKernel."""
from __future__ import annotations

import functools
from typing import Any

from . import artifacts, triton_ptxas
from .allocation import allocation_map
from .barriers import barrier_table
from .irtext import IRModule, WarpSpecializeHeaders
from .report import CompileReport, Resources, SourceInfo
from .tasks import task_layout

STAGES = ("ttir", "ttgir", "llir", "ptx")


def _plain(v: Any) -> Any:
    """Constexpr values as plain Python (dtypes and JIT functions by name)."""
    v = getattr(v, "value", v)
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    return getattr(v, "__name__", None) or str(v)


def build_report(compiled, jit, model, options, src, constexprs: dict, key: str, seconds: float,
                 ptxas=None, sass: str = "background") -> CompileReport:
    """`ptxas`: the :class:`triton_ptxas.Capture` of the compile (its ptxas -v log). `sass`:
    "background" starts nvdisasm now, "lazy" when SASS is first asked for (see ``compile``)."""
    from triton.backends.nvidia.compiler import get_ptx_version_from_options

    asm = compiled.asm
    stages = {s: asm[s] for s in STAGES if s in asm}
    cubin = asm.get("cubin", b"")
    # nvdisasm (~0.5 s, a process of its own) first, so that it overlaps all the rest
    sass_job = artifacts.SassJob(cubin, start=sass == "background") if cubin else None
    # everything else runs here, in order: the allocation passes hold the GIL, so a second
    # Python thread would only add switching delays (5 ms each) to the report
    meta = compiled.metadata._asdict()
    meta["target"] = f"sm_{model.arch}"

    source = SourceInfo(file=jit.file_name, first_line=jit.starting_line_number, text="".join(jit.raw_src),
                        def_line=jit.def_file_line_number)
    first, last = source.first_line, source.first_line + len(jit.raw_src) - 1
    ptx_version = get_ptx_version_from_options(options, model.arch)
    # the task layout needs only make_llir's warp-group allocation (warp starts, register
    # budgets) and the warp_specialize headers; the SMEM/TMEM allocation passes, the op-by-op
    # parse, the barrier table and the allocation map wait until one of stages["ttgir_alloc"],
    # allocations, barriers is first read (CompileReport._finish_analysis)
    warp_groups = artifacts.warp_group_ttgir(stages["ttgir"], model.arch)
    layout = task_layout(WarpSpecializeHeaders(stages["ttgir"]), WarpSpecializeHeaders(warp_groups), source.text,
                         source.first_line, options.num_warps,
                         {k: getattr(v, "value", v) for k, v in constexprs.items()})
    env = {k: getattr(v, "value", v) for k, v in constexprs.items()}
    analysis = functools.partial(_analysis, stages["ttgir"], warp_groups, model.arch, ptx_version, layout.label,
                                 source.file, first, last, env, meta.get("shared") or 0)

    # read from the cubin's ELF sections; cuobjdump (a ~4 ms process start) only for shapes
    # that reader does not take on
    usage = artifacts.resource_usage_from_cubin(cubin) if cubin else {}
    if usage is None:
        try:
            usage = artifacts.resource_usage(cubin)
        except Exception:   # a missing tool leaves registers unknown, not the report unmade
            usage = {}
    resources = Resources(
        smem_bytes=meta.get("shared") or 0,
        smem_limit=model.smem_per_block,
        registers=usage.get("REG"),
        # Triton's own n_spills is the function's local-memory size; cuobjdump's LOCAL is that number
        spills=usage.get("LOCAL", 0),
        num_warps=meta.get("num_warps") or options.num_warps,
        num_ctas=options.num_ctas,
        tmem_columns=meta.get("tmem_size") or 0,
        tmem_limit=model.tmem_columns,
        local_bytes=usage.get("STACK", 0),
    )
    # ptxas's own log: captured from this compile, or stored beside a cached cubin; failing
    # both, ptxas runs again on the PTX only when the advisories are first asked for
    ptxas_log = triton_ptxas.log_for(compiled, ptxas) if ptxas is not None else None
    ptxas_job = None
    if ptxas_log is None and stages.get("ptx"):
        ptxas_job = functools.partial(triton_ptxas.rerun, stages["ptx"], options, model.arch,
                                      triton_ptxas.stored_log_key(compiled))
    return CompileReport(
        kernel=jit.__name__,
        target=f"sm_{model.arch}",
        gpu=model.name,
        arch=model.arch,
        source=source,
        signature=dict(src.signature),
        constexprs={k: _plain(v) for k, v in constexprs.items()},
        options={k: _plain(v) for k, v in options.__dict__.items() if k not in ("extern_libs",)},
        stages=stages,
        cubin=cubin,
        metadata={k: _plain(v) for k, v in meta.items()},
        resources=resources,
        tasks=layout.tasks,
        allocations=None,
        barriers=None,
        compile_seconds=seconds,
        cache_key=key,
        _sass_job=sass_job,
        _ptxas_log=ptxas_log,
        _ptxas_job=ptxas_job,
        _analysis_job=analysis,
    )


def _analysis(ttgir: str, warp_groups: str, arch: int, ptx_version: int, label, file: str, first: int,
              last: int, env: dict, shared: int):
    """(stages["ttgir_alloc"], allocations, barriers): the report's deferred part."""
    # the allocation passes go on from the warp-group pass's output (same passes, same order,
    # each run once: the text is the one make_llir's allocation sees)
    post_text = artifacts.post_allocation_ttgir(warp_groups, arch, ptx_version, after_warp_groups=True)
    pre = IRModule(ttgir)
    post = IRModule(post_text)
    barriers, barrier_allocs = barrier_table(pre, label, file, first, last, env)
    # barrier allocations are named the same in the post-allocation module (same printer)
    allocations = allocation_map(post, pre, barrier_allocs, file, first, last, shared)
    return post_text, allocations, barriers
