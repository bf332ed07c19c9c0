"""Assemble a CompileReport from a Triton CompiledKernel."""
from __future__ import annotations

import functools
from typing import Any

from . import artifacts, triton_ptxas
from .allocation import allocation_map
from .barriers import barrier_table
from .irtext import IRModule
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
                 ptxas=None) -> CompileReport:
    """`ptxas`: the :class:`triton_ptxas.Capture` of the compile (its ptxas -v log)."""
    from triton.backends.nvidia.compiler import get_ptx_version_from_options

    asm = compiled.asm
    stages = {s: asm[s] for s in STAGES if s in asm}
    cubin = asm.get("cubin", b"")
    # everything runs here, in order: the allocation passes hold the GIL, so a second
    # Python thread would only add switching delays (5 ms each) to the report
    meta = compiled.metadata._asdict()
    meta["target"] = f"sm_{model.arch}"

    source = SourceInfo(file=jit.file_name, first_line=jit.starting_line_number, text="".join(jit.raw_src),
                        def_line=jit.def_file_line_number)
    first, last = source.first_line, source.first_line + len(jit.raw_src) - 1
    ptx_version = get_ptx_version_from_options(options, model.arch)
    post_text = artifacts.post_allocation_ttgir(stages["ttgir"], model.arch, ptx_version)
    stages["ttgir_alloc"] = post_text
    pre = IRModule(stages["ttgir"])
    post = IRModule(post_text)
    # the source map is read from the stage texts when first asked for (CompileReport.source_map)

    layout = task_layout(pre, post, source.text, source.first_line, options.num_warps,
                         {k: getattr(v, "value", v) for k, v in constexprs.items()})
    env = {k: getattr(v, "value", v) for k, v in constexprs.items()}
    barriers, barrier_allocs = barrier_table(pre, layout.label, source.file, first, last, env)
    # barrier allocations are named the same in the post-allocation module (same printer)
    allocations = allocation_map(post, pre, barrier_allocs, source.file, first, last, meta.get("shared") or 0)

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
    # the slowest piece (nvdisasm, ~0.3 s) runs in the background once the rest is done; the
    # report waits for it only when SASS is asked for
    sass_job = artifacts.disassemble_async(cubin) if cubin else None
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
        allocations=allocations,
        barriers=barriers,
        compile_seconds=seconds,
        cache_key=key,
        _sass_job=sass_job,
        _ptxas_log=ptxas_log,
        _ptxas_job=ptxas_job,
    )
