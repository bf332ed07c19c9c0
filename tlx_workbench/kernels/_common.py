"""Pieces every kernel of the library shares: the spec record, tile order, host helpers.

Kept free of any one kernel so that each kernel file reads top to bottom on its own.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ..errors import TLXWorkbenchError
from ..target import GPU_MODELS

# bytes of SMEM one CTA may opt into on an H100/H200 (227 KiB): what every Hopper config must fit
SMEM_LIMIT = GPU_MODELS["H200"].smem_per_block


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """What the workbench needs to know about one library kernel.

    ``kernel`` is the ``@triton.jit`` function (not autotuned), ``launch`` the
    user-facing launcher, ``reference`` a torch function computing the same thing,
    ``configs`` the autotune space (first entry = the default), ``sim_configs``
    small configs the CPU simulator can run quickly, ``make_inputs(shape, dtype,
    device)`` fresh random inputs for ``launch``/``reference``.

    >>> from tlx_workbench.kernels import spec
    >>> spec("gemm_ws").configs[0]["BM"]
    128
    """
    name: str
    kernel: Any
    launch: Callable
    reference: Callable
    configs: tuple
    sim_configs: dict
    make_inputs: Callable
    flops: Callable
    arch: int = 90
    doc: str = ""


@triton.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of ``tile_id`` when tiles are walked in column-major bands of
    GROUP_M rows: consecutive tiles then share A rows and B columns, so a wave of
    persistent CTAs keeps its working set in L2."""
    tiles_per_band = GROUP_M * num_pid_n
    band = tile_id // tiles_per_band
    band_first_m = band * GROUP_M
    band_rows = min(num_pid_m - band_first_m, GROUP_M)
    in_band = tile_id % tiles_per_band
    return band_first_m + in_band % band_rows, in_band // band_rows


@triton.jit
def ring_slot(counter, DEPTH: tl.constexpr):
    """Slot index and mbarrier parity of the ``counter``-th use of a DEPTH-deep ring."""
    return counter % DEPTH, (counter // DEPTH) & 1


@triton.jit
def load_tiles(a_desc, b_desc, a_ring, b_ring, full, empty, num_tiles, num_pid_m, num_pid_n, k_steps,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, STAGES: tl.constexpr,
               NUM_SMS: tl.constexpr, STAGE_BYTES: tl.constexpr, B_K_MAJOR: tl.constexpr):
    """The loader task of a persistent GEMM whose consumer groups take whole tiles (ping-pong): every k-step of
    each tile this CTA walks (grouped order), A's (BM, BK) box and B's (BK, BN) box into the next ring slot once
    its readers released it; ``B_K_MAJOR``: B is given as B^T and its box is (BN, BK)."""
    use = 0
    for tile in range(tl.program_id(0), num_tiles, NUM_SMS):
        pid_m, pid_n = grouped_tile(tile, num_pid_m, num_pid_n, GROUP_M)
        for k in range(k_steps):
            s, parity = ring_slot(use, STAGES)
            tlx.barrier_wait(empty[s], parity ^ 1)
            tlx.barrier_expect_bytes(full[s], STAGE_BYTES)
            tlx.async_descriptor_load(a_desc, a_ring[s], [pid_m * BM, k * BK], full[s])
            if B_K_MAJOR:
                tlx.async_descriptor_load(b_desc, b_ring[s], [pid_n * BN, k * BK], full[s])
            else:
                tlx.async_descriptor_load(b_desc, b_ring[s], [k * BK, pid_n * BN], full[s])
            use += 1


def torch_alloc(size: int, align: int, stream):
    """Scratch allocator Triton asks for (device-side descriptors, profiling)."""
    import torch
    return torch.empty(size, dtype=torch.int8, device=_device())


def _device():
    return triton.runtime.driver.active.get_active_torch_device()


def persistent_ctas(units: int, num_sms: int) -> int:
    """How many persistent CTAs to start for ``units`` equal units of work (a GEMM's output tiles, the causal
    attention's zig-zag pairs) on ``num_sms`` SMs: the fewest that keep the same number of waves, so every CTA's
    walk ends in the same wave. One wave or less: one CTA per unit. Measured on the H200 (benchmarks/RESULTS.md):
    512 GEMM tiles at 4096^3 are 4 waves either way, on 128 CTAs +1 % (fp16) and +3 % (bf16); 2048
    attention pairs (4x32x4096, 2x32x8192 causal) are 16 waves, on 128 CTAs 0.2-2.5 % faster in all 8 cells,
    2026-12-04.

    >>> persistent_ctas(512, 132), persistent_ctas(2048, 132), persistent_ctas(100, 132)
    (128, 128, 100)
    """
    if units <= num_sms:
        return units
    waves = -(-units // num_sms)
    return -(-units // waves)


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
    import torch
    return torch.cuda.get_device_properties(0).multi_processor_count


TORCH_TO_NAME = {"float16": "fp16", "bfloat16": "bf16"}


def check_gemm_operands(kernel_file: str, a, b, *, need_tma: bool):
    """Shape/dtype/layout checks for ``matmul(a, b)``, as workbench errors."""
    import torch
    line = None
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise TLXWorkbenchError(
            f"matmul needs a (M, K) and b (K, N); got {tuple(a.shape)} and {tuple(b.shape)}",
            file=kernel_file, line=line, hint="pass 2-D tensors whose inner dimensions agree")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16):
        raise TLXWorkbenchError(
            f"matmul supports float16 and bfloat16 operands of one dtype; got {a.dtype} and {b.dtype}",
            file=kernel_file, line=line, hint="cast both operands with .half() or .bfloat16()")
    if not (a.is_contiguous() and b.is_contiguous()):
        raise TLXWorkbenchError(
            "matmul needs row-major contiguous operands", file=kernel_file, line=line,
            hint="call .contiguous() on the operands first")
    check_same_device(kernel_file, "matmul", a=a, b=b)
    check_aligned(kernel_file, "matmul", a=a, b=b)
    if need_tma and (a.shape[1] % 8 or b.shape[1] % 8):
        raise TLXWorkbenchError(
            f"TMA and cp.async need rows 16-byte aligned: K={a.shape[1]} and N={b.shape[1]} must be multiples of 8",
            file=kernel_file, line=line,
            hint="pad K and N to a multiple of 8 (or use torch.matmul for such shapes)")


def check_same_device(kernel_file: str, what: str, **tensors):
    """All ``tensors`` (by name) on one device, as workbench errors: a launch reads every operand from the
    device it runs on, and a CPU tensor's address handed to a GPU kernel faults it."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        raise TLXWorkbenchError(
            f"{what} needs every operand on one device; got " + ", ".join(f"{n} on {d}" for n, d in devices.items()),
            file=kernel_file, hint="move them to one GPU first, e.g. .to(a.device)")


def raw_data_ptr():
    """torch's own ``Tensor.data_ptr`` (the method, looked up once by a caller on a hot path)."""
    import torch
    return torch._C.TensorBase.data_ptr


def address(t) -> int:
    """``t.data_ptr()`` as torch itself answers it: looking at an address on the host is not handing it to a
    kernel, so the simulator's record of addresses the host took (``sim/hostmem.AddressTaken``) is left out."""
    return raw_data_ptr()(t)


def check_aligned(kernel_file: str, what: str, **tensors):
    """Every tensor's first element 16-byte aligned, as workbench errors: TMA and cp.async copy 16-byte units
    and Triton compiles a kernel for aligned pointers (a view at an odd offset, ``x[1:]``, is not)."""
    for name, t in tensors.items():
        if type(t).__name__ in ("FakeTensor", "FunctionalTensor") or t.device.type == "meta":
            continue            # traced (torch.compile): no address yet
        if address(t) % 16:
            raise TLXWorkbenchError(
                f"{what}: {name} starts at an address that is not 16-byte aligned (a view at an offset, "
                f"storage offset {t.storage_offset()})", file=kernel_file,
                hint=f"pass {name}.clone() (a fresh, aligned copy) instead of the view")


def gemm_flops(M, N, K) -> float:
    return 2.0 * M * N * K


def gemm_inputs(shape, dtype, device):
    """Fresh random (a, b) for a GEMM of ``shape`` = (M, N, K); ``dtype`` a torch dtype or its name."""
    import torch
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    M, N, K = shape
    a = torch.randn((M, K), dtype=dtype, device=device)
    b = torch.randn((K, N), dtype=dtype, device=device)
    return a, b


def gemm_reference(a, b):
    """C = A @ B in float64 on the CPU, cast to A's dtype: the yardstick for every GEMM."""
    return (a.double().cpu() @ b.double().cpu()).to(a.dtype).to(a.device)
