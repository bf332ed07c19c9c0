"""What the compiler leaves behind, beyond Triton's own stages: the TTGIR after
shared/tensor-memory allocation, the SASS, and the cubin's resource usage.

All tools come from the triton wheel (``triton/backends/nvidia/bin``), so this
works on a machine without CUDA.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import tempfile

# two pools, so a quick tool run never queues behind disassemblies of earlier compiles
_SASS_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tlxwb-sass")  # one core at most
_QUICK_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="tlxwb-tools")


def post_allocation_ttgir(ttgir: str, arch: int, ptx_version: int | None = None) -> str:
    """The TTGIR as ``make_llir`` sees it right after SMEM/TMEM allocation.

    ``make_llir`` runs allocation and LLVM lowering in one pass manager, so the
    annotated module never reaches Python. Running the same passes, in the same
    order, on the final TTGIR gives the same ``allocation.offset`` /
    ``tensor_memory_col_offset`` attributes and ``ttg.shared`` total; the caller
    checks ``ttg.shared`` against the compiled kernel's metadata.
    """
    from triton._C.libtriton import ir, passes, nvidia
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.backends.nvidia.compiler import get_ptx_version_from_options, CUDAOptions

    backend = make_backend(GPUTarget("cuda", arch, 32))
    if ptx_version is None:
        ptx_version = get_ptx_version_from_options(CUDAOptions(), arch)
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
        f.write(ttgir)
        path = f.name
    try:
        mod = ir.parse_mlir_module(path, ctx)
    finally:
        os.unlink(path)
    mod.context = ctx
    pm = ir.pass_manager(ctx)
    plugin = getattr(passes, "plugin", None)
    # uTLX lowers its storage aliases before allocation (custom_stages.make_llir_wrapper)
    if plugin is not None and hasattr(plugin, "utlx_storage_alias_lowering"):
        plugin.utlx_storage_alias_lowering(pm, [])
        plugin.utlx_rewrite_local_alias(pm, [])
    # the head of CUDABackend.make_llir, up to and including tensor-memory allocation
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, arch, ptx_version)
    nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)
    pm.run(mod, "tlx_workbench_allocation")
    return str(mod)


def _tool(name: str) -> str:
    from triton import knobs
    return getattr(knobs.nvidia, name).path


def _run_on_cubin(args: list[str], cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(cubin)
        path = f.name
    try:
        out = subprocess.run(args + [path], capture_output=True, text=True, check=True)
        return out.stdout
    finally:
        os.unlink(path)


def disassemble(cubin: bytes) -> str:
    """SASS with source-line (and inlining) annotations: ``nvdisasm -c -gi``."""
    return _run_on_cubin([_tool("nvdisasm"), "-c", "-gi"], cubin)


def disassemble_async(cubin: bytes) -> "concurrent.futures.Future[str]":
    """Start :func:`disassemble` in the background (nvdisasm takes ~0.3 s, more than the
    rest of the report together); the report waits for it only when SASS is asked for."""
    return _SASS_POOL.submit(disassemble, cubin)


def resource_usage_async(cubin: bytes) -> "concurrent.futures.Future[dict[str, int]]":
    return _QUICK_POOL.submit(resource_usage, cubin)


def resource_usage(cubin: bytes) -> dict[str, int]:
    """``cuobjdump -res-usage``: REG, STACK, SHARED, LOCAL, ... for the kernel function."""
    text = _run_on_cubin([_tool("cuobjdump"), "-res-usage"], cubin)
    out: dict[str, int] = {}
    for line in text.splitlines():
        if "REG:" in line:
            for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line):
                out[k] = int(v)
    return out
