"""CompileReport-like objects built from the report's own dataclasses, for view tests that
must not wait for a compile (one test also uses a real compiled tutorial)."""
import types

from tlx_workbench.compiler.report import Allocation, Resources, SourceInfo, SourceMap
from tlx_workbench.target import gpu_model

SOURCE = """@triton.jit
def kernel(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    a_smem = tlx.local_alloc((BM, BK), tl.float16, 3)
    b_smem = tlx.local_alloc((BK, BN), tl.float16, 3)
    c_smem = tlx.local_alloc((BM, BN), tl.float16, 1, reuse=a_smem)
    full = tlx.alloc_barriers(3, arrive_count=1)
    empty = tlx.alloc_barriers(3, arrive_count=2)
    acc = tlx.local_alloc((BM, BN), tl.float32, 2, tlx.storage_kind.tmem)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(empty[0], 0)
            tlx.async_descriptor_load(a_desc, a_smem[0], [0, 0], full[0])
        with tlx.async_task(num_warps=4):
            tlx.barrier_wait(full[0], 0)
            tlx.async_dot(a_smem[0], b_smem[0], acc[0])
            tlx.barrier_arrive(empty[0])
"""
FIRST = 100          # the `@triton.jit` line in the (pretend) kernel file


def line_of(needle: str) -> int:
    for i, text in enumerate(SOURCE.splitlines()):
        if needle in text:
            return FIRST + i
    raise KeyError(needle)


def fake_report(target="sm_100"):
    gpu = gpu_model(target)
    kb = 1024
    allocs = [
        Allocation("a_smem", line_of("a_smem ="), "smem", "buffer", (128, 64), "f16", 3, 0, 48 * kb, alias_group=1),
        Allocation("c_smem", line_of("c_smem ="), "smem", "buffer", (128, 128), "f16", 1, 0, 32 * kb, alias_group=1),
        Allocation("b_smem", line_of("b_smem ="), "smem", "buffer", (64, 128), "f16", 3, 48 * kb, 48 * kb),
        Allocation("full", line_of("full ="), "smem", "barrier", (1,), "i64", 3, 96 * kb, 24),
        Allocation("empty", line_of("empty ="), "smem", "barrier", (1,), "i64", 3, 96 * kb + 24, 24),
    ]
    if gpu.arch >= 100:
        allocs.append(Allocation("acc", line_of("acc ="), "tmem", "buffer", (128, 128), "f32", 2, 0, 256))
    res = Resources(smem_bytes=96 * kb + 48 + 1024, smem_limit=gpu.smem_per_block, registers=168, spills=0,
                    num_warps=8, tmem_columns=256 if gpu.arch >= 100 else 0,
                    tmem_limit=512 if gpu.arch >= 100 else 0)
    # IR stages and a source map: each kernel line from "a_smem =" on makes a few lines of each
    stages, fwd, back = {}, {}, {}
    body = [FIRST + i for i, t in enumerate(SOURCE.splitlines()) if t.strip() and not t.strip().startswith(("@", "def", "with"))]
    for stage, per in (("ttgir", 2), ("ptx", 3), ("sass", 4)):
        lines, f, b = [f"// {stage} of kernel"], {}, {}
        for src in body:
            for k in range(per):
                lines.append(f"{stage}_op_{src}_{k}  // from line {src}")
                f.setdefault(src, []).append(len(lines))
                b[len(lines)] = src
        lines.append(f"// end of {stage}")
        stages[stage] = "\n".join(lines)
        fwd[stage], back[stage] = f, b
    return types.SimpleNamespace(
        kernel="kernel", kernel_name="kernel", target=target, gpu=gpu.name, arch=gpu.arch,
        source=SourceInfo("/work/kernels/fake_kernel.py", FIRST, SOURCE), stages=stages,
        source_map=SourceMap("/work/kernels/fake_kernel.py", fwd, back), resources=res, tasks=[],
        allocations=allocs, barriers=[])
