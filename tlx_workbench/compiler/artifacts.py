"""What the compiler leaves behind, beyond Triton's own stages: the TTGIR after
shared/tensor-memory allocation, the SASS, and the cubin's resource usage.

All tools come from the triton wheel (``triton/backends/nvidia/bin``), so this
works on a machine without CUDA.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import struct
import subprocess
import tempfile
import threading

# SASS is disassembled in the background, one at a time (one core at most)
_SASS_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tlxwb-sass")


# An MLIR context with Triton's dialects loaded costs ~2 ms to make, as much as the allocation
# passes on a small kernel; contexts are not thread-safe, so each thread keeps its own, and
# starts a fresh one now and then because a context keeps every type and location it has seen.
_CONTEXTS = threading.local()
_CONTEXT_USES = 64


def _mlir_context(arch: int):
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    cached = getattr(_CONTEXTS, "by_arch", None)
    if cached is None:
        cached = _CONTEXTS.by_arch = {}
    entry = cached.get(arch)
    if entry is None or entry[1] >= _CONTEXT_USES:
        ctx = ir.context()
        ir.load_dialects(ctx)
        make_backend(GPUTarget("cuda", arch, 32)).load_dialects(ctx)
        entry = [ctx, 0]
        cached[arch] = entry
    entry[1] += 1
    return entry[0]


def _parse(ttgir: str, ctx):
    from triton._C.libtriton import ir
    with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
        f.write(ttgir)
        path = f.name
    try:
        mod = ir.parse_mlir_module(path, ctx)
    finally:
        os.unlink(path)
    mod.context = ctx
    return mod


def _warp_group_passes(pm) -> None:
    from triton._C.libtriton import passes
    plugin = getattr(passes, "plugin", None)
    # uTLX lowers its storage aliases before allocation (custom_stages.make_llir_wrapper)
    if plugin is not None and hasattr(plugin, "utlx_storage_alias_lowering"):
        plugin.utlx_storage_alias_lowering(pm, [])
        plugin.utlx_rewrite_local_alias(pm, [])
    # the head of CUDABackend.make_llir, up to and including warp-group allocation
    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)


def _allocation_passes(pm, arch: int, ptx_version: int) -> None:
    from triton._C.libtriton import passes, nvidia
    # the rest of make_llir's head, up to and including tensor-memory allocation
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, arch, ptx_version)
    nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)


def warp_group_ttgir(ttgir: str, arch: int) -> str:
    """The TTGIR after ``make_llir``'s warp-group allocation only: the ``ttg.warp_specialize``
    ops carry ``warpGroupStartIds`` and the register budgets, which is all the task layout
    needs (~2.5x cheaper than :func:`post_allocation_ttgir`, whose SMEM allocation passes are
    most of the cost). Feed the result to ``post_allocation_ttgir(..., after_warp_groups=True)``
    to finish the allocation without running these passes twice."""
    from triton._C.libtriton import ir
    ctx = _mlir_context(arch)
    mod = _parse(ttgir, ctx)
    pm = ir.pass_manager(ctx)
    _warp_group_passes(pm)
    pm.run(mod, "tlx_workbench_warp_groups")
    return str(mod)


def post_allocation_ttgir(ttgir: str, arch: int, ptx_version: int | None = None,
                          after_warp_groups: bool = False) -> str:
    """The TTGIR as ``make_llir`` sees it right after SMEM/TMEM allocation.

    ``make_llir`` runs allocation and LLVM lowering in one pass manager, so the
    annotated module never reaches Python. Running the same passes, in the same
    order, on the final TTGIR gives the same ``allocation.offset`` /
    ``tensor_memory_col_offset`` attributes and ``ttg.shared`` total; the caller
    checks ``ttg.shared`` against the compiled kernel's metadata. With
    ``after_warp_groups``, `ttgir` is :func:`warp_group_ttgir`'s output and only the
    passes after warp-group allocation run.
    """
    from triton._C.libtriton import ir
    from triton.backends.nvidia.compiler import get_ptx_version_from_options, CUDAOptions

    if ptx_version is None:
        ptx_version = get_ptx_version_from_options(CUDAOptions(), arch)
    ctx = _mlir_context(arch)
    mod = _parse(ttgir, ctx)
    pm = ir.pass_manager(ctx)
    if not after_warp_groups:
        _warp_group_passes(pm)
    _allocation_passes(pm, arch, ptx_version)
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


def _sections(cubin: bytes) -> dict[str, tuple]:
    """Section name -> ELF section header of a 64-bit little-endian cubin ({} if it is not one)."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        return {}
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]

    def name(h) -> str:
        start = names_at + h[0]
        return cubin[start:cubin.index(b"\0", start)].decode()

    return {name(h): h for h in headers}


def _nv_info_attributes(body: bytes) -> dict[int, list[bytes]]:
    """EIATTR code -> the values of a ``.nv.info*`` section (EIFMT_SVAL payloads; b"" otherwise)."""
    attrs: dict[int, list[bytes]] = {}
    i = 0
    while i + 4 <= len(body):
        fmt, attr, size = struct.unpack_from("<BBH", body, i)
        i += 4
        if fmt == _EIFMT_SVAL:
            attrs.setdefault(attr, []).append(body[i:i + size])
            i += size
        else:                   # NVAL / BVAL / HVAL: the value, if any, sits in the header
            attrs.setdefault(attr, []).append(b"")
    return attrs


_EIATTR_INDIRECT_BRANCH_TARGETS = 0x34


def _dataflow_needed(cubin: bytes) -> bool:
    """Whether nvdisasm's dataflow analysis can add anything to this cubin's SASS.

    The analysis (~0.2 s of nvdisasm's ~0.7 s) only annotates indirect branches (``BRX``) with
    their targets (``(*"BRANCH_TARGETS .L_x_1,..."*)``), and ptxas lists every such branch in
    the function's ``EIATTR_INDIRECT_BRANCH_TARGETS``. A single-function cubin without that
    attribute disassembles to the same text with ``-ndf``; anything else keeps the analysis."""
    try:
        sections = _sections(cubin)
        texts = [n for n in sections if n.startswith(".text.")]
        if len(texts) != 1:
            return True
        for n, h in sections.items():
            if n.startswith(".nv.info") and _EIATTR_INDIRECT_BRANCH_TARGETS in _nv_info_attributes(
                    cubin[h[4]:h[4] + h[5]]):
                return True
        return False
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return True


def nvdisasm_args(cubin: bytes) -> list[str]:
    """The nvdisasm command line (less the file) :func:`disassemble` runs for `cubin`."""
    return [_tool("nvdisasm"), "-c", "-gi"] + ([] if _dataflow_needed(cubin) else ["-ndf"])


def disassemble(cubin: bytes) -> str:
    """SASS with source-line (and inlining) annotations: ``nvdisasm -c -gi`` (``-ndf`` when the
    dataflow analysis has nothing to annotate, see :func:`_dataflow_needed`)."""
    return _run_on_cubin(nvdisasm_args(cubin), cubin)


def disassemble_async(cubin: bytes) -> "concurrent.futures.Future[str]":
    """Start :func:`disassemble` in the background (nvdisasm takes ~0.5 s, more than the
    rest of the report together); the report waits for it only when SASS is asked for."""
    return _SASS_POOL.submit(disassemble, cubin)


class SassJob:
    """The SASS of one cubin, disassembled when first asked for, or in the background once
    :meth:`start` is called. ``compile(sass="lazy")`` makes one unstarted; the default starts it
    at once. ``started`` / ``done`` say where it stands (tests use them: the static stage of a
    sweep must not start nvdisasm).

    >>> job = SassJob(report.cubin); job.started             # doctest: +SKIP
    False
    >>> job.result()[:20]                                     # doctest: +SKIP
    '\t.headerflags\t@"EF_CU'
    """

    def __init__(self, cubin: bytes, start: bool = False):
        self._cubin = cubin
        self._future: "concurrent.futures.Future[str] | None" = None
        self._lock = threading.Lock()
        if start:
            self.start()

    @property
    def started(self) -> bool:
        return self._future is not None

    def done(self) -> bool:
        return self._future is not None and self._future.done()

    def start(self) -> "SassJob":
        """Start nvdisasm in the background (idempotent)."""
        with self._lock:
            if self._future is None:
                self._future = disassemble_async(self._cubin)
        return self

    def result(self) -> str:
        """The SASS: waits for the background run, or (never started) runs nvdisasm now, here."""
        with self._lock:
            if self._future is None:
                done: "concurrent.futures.Future[str]" = concurrent.futures.Future()
                try:
                    done.set_result(disassemble(self._cubin))
                except Exception as e:
                    done.set_exception(e)
                self._future = done
        return self._future.result()


def resource_usage(cubin: bytes) -> dict[str, int]:
    """``cuobjdump -res-usage``: REG, STACK, SHARED, LOCAL, ... for the kernel function."""
    text = _run_on_cubin([_tool("cuobjdump"), "-res-usage"], cubin)
    out: dict[str, int] = {}
    for line in text.splitlines():
        if "REG:" in line:
            for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line):
                out[k] = int(v)
    return out


# .nv.info attributes (EIATTR_*) that hold what -res-usage prints for one function
_EIATTR_FRAME_SIZE, _EIATTR_MIN_STACK_SIZE, _EIATTR_MAX_STACK_SIZE, _EIATTR_REGCOUNT = 0x11, 0x12, 0x23, 0x2F
_EIFMT_SVAL = 4


def resource_usage_from_cubin(cubin: bytes) -> dict[str, int] | None:
    """REG, STACK, LOCAL and SHARED of a single-function cubin, read from its ELF sections
    (no process start: ``cuobjdump`` costs ~4 ms, more than the rest of a small kernel's
    report). None when the cubin is not the simple shape read here (several functions,
    calls with their own stack, a ``.nv.local`` section): then ask :func:`resource_usage`.

    >>> resource_usage_from_cubin(report.cubin)        # doctest: +SKIP
    {'REG': 28, 'STACK': 0, 'LOCAL': 0, 'SHARED': 1024}
    """
    try:
        sections = _sections(cubin)
        if not sections:
            return None
        texts = [n for n in sections if n.startswith(".text.")]
        info = sections.get(".nv.info")
        if len(texts) != 1 or info is None or any(n.startswith(".nv.local") for n in sections):
            return None
        attrs: dict[int, list[tuple[int, int]]] = {}
        body = cubin[info[4]:info[4] + info[5]]
        i = 0
        while i + 4 <= len(body):
            fmt, attr, size = struct.unpack_from("<BBH", body, i)
            i += 4
            if fmt == _EIFMT_SVAL:
                if size == 8:       # (symbol index, value)
                    attrs.setdefault(attr, []).append(struct.unpack_from("<II", body, i))
                i += size
        regs = attrs.get(_EIATTR_REGCOUNT, [])
        frame = attrs.get(_EIATTR_FRAME_SIZE, [])
        stack = attrs.get(_EIATTR_MIN_STACK_SIZE, [])
        # a call graph with its own stack needs the tool's whole-program view
        if len(regs) != 1 or len(stack) != 1 or frame != stack or _EIATTR_MAX_STACK_SIZE in attrs:
            return None
        function = texts[0][len(".text."):]
        shared = sections.get(".nv.shared." + function)
        return {"REG": regs[0][1], "STACK": stack[0][1], "LOCAL": 0, "SHARED": shared[5] if shared else 0}
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None
