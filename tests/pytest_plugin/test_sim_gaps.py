"""Simulator gaps that TLX's own GPU tests showed, each with its test."""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from tlx_workbench import simulate
from tlx_workbench.errors import SimulationError


@triton.jit
def whole_barrier_array_load(in_desc, out_ptr, BM: tl.constexpr, BK: tl.constexpr, NBARS: tl.constexpr):
    buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bars = tlx.alloc_barriers(num_barriers=NBARS, arrive_count=1)
    tlx.barrier_expect_bytes(bars[0], BM * BK * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bars)      # the whole allocation, as newer TLX allows
    tlx.barrier_wait(bars[0], 0)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BK)
    tl.store(out_ptr + rows[:, None] * BK + cols[None, :], tlx.local_load(buf[0]))


def _inputs():
    x = torch.randn(64, 64, dtype=torch.float16)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[64, 1], block_shape=[64, 64])
    return x, torch.zeros_like(x), desc


def test_one_slot_allocation_passed_whole_is_its_slot_and_said():
    # before: SimulationError "'MBarrierArray' object has no attribute 'array'"
    x, out, desc = _inputs()
    with pytest.warns(UserWarning, match=r"simulated as bars\[0\], as newer TLX reads it"):
        res = simulate(whole_barrier_array_load, desc, out, BM=64, BK=64, NBARS=1, grid=(1,))
    assert res.ok
    assert torch.equal(out, x)


def test_a_several_slot_allocation_passed_whole_names_the_fix():
    x, out, desc = _inputs()
    with pytest.raises(SimulationError, match=r"bars \(2 barriers\) passed where one barrier is expected") as e:
        simulate(whole_barrier_array_load, desc, out, BM=64, BK=64, NBARS=2, grid=(1,))
    assert "bars[i]" in str(e.value)


# -- nothing a launch patches outlives it ------------------------------------------------------------------------

@triton.jit
def _clamp_scalar(x, lo):
    return tl.where(x < lo, lo, x)


@triton.jit
def clamp_by_map_elementwise(x_ptr, out_ptr, lo, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.map_elementwise(_clamp_scalar, tl.load(x_ptr + offs), lo))


def _namespaces():
    import triton.language.math as tl_math
    from tlx_workbench.sim.ops.tlx_ops import _tlx_modules
    spaces = [tl, tl.core, tl_math, tl.tensor, tl.core.tensor_descriptor_base] + _tlx_modules()
    return {id(ns): (ns, dict(vars(ns))) for ns in spaces}


def test_a_launch_leaves_triton_and_tlx_as_it_found_them():
    # before: tl.map_elementwise stayed the interpreter's wrapper after every launch (the map_elementwise patch was
    # undone after the interpreter's scope, restoring the wrapper), so the next compile of a kernel calling it
    # failed with "'InterpreterBuilder' object has no attribute 'new_block'" (two Blackwell attention tutorials)
    builtin = tl.map_elementwise
    before = _namespaces()
    x = torch.randn(64)
    out = torch.empty_like(x)
    simulate(clamp_by_map_elementwise, x, out, 0.25, N=64, grid=(1,))
    torch.testing.assert_close(out, x.clamp(min=0.25))
    assert tl.map_elementwise is builtin and tl.core.map_elementwise is builtin
    for ns, attrs in before.values():
        now = dict(vars(ns))
        changed = sorted(k for k in set(attrs) | set(now) if attrs.get(k) is not now.get(k))
        assert not changed, f"{getattr(ns, '__name__', ns)}: {changed} left patched"


# -- patching does not depend on how TLX's modules were imported ------------------------------------------------

def test_tlx_ops_patched_however_tlx_modules_were_imported():
    # before: after this import the alias loader runs mem_ops/types a second time and tlx.types names the copy, so
    # storage_alias_spec.set_buffer_overlap (a method of the first copy's class) stayed unpatched: "Did you forget
    # to add @triton.jit?"; and a builtin imported by name into the kernel's module was never patched at all
    import importlib
    importlib.import_module("triton.language.extra.tlx.mem_ops")
    x = torch.randn(64)
    out = torch.zeros_like(x)
    res = simulate(alias_through_named_imports, x, out, N=64, grid=(1,))
    assert res.ok
    assert torch.equal(out, x)        # a and b share their storage: b reads what a was given


from triton.language.extra.tlx.mem_ops import local_alloc, storage_alias_spec  # noqa: E402 - the case under test


@triton.jit
def alias_through_named_imports(x_ptr, out_ptr, N: tl.constexpr):
    spec = storage_alias_spec(storage=tlx.storage_kind.smem)
    a = local_alloc((N,), tl.float32, 1, reuse=spec)
    b = tlx.local_alloc((N,), tl.float32, 1, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(a, b, group_type=tlx.reuse_group_type.shared))
    offs = tl.arange(0, N)
    tlx.local_store(a[0], tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(b[0]))


# -- an autotuned launch runs the hooks a GPU's autotuner runs ----------------------------------------------------

def test_autotuned_split_k_gemm_is_reduced_as_on_a_gpu():
    # before: the simulated autotuner picked the first pruned config (SPLIT_K=2 at this shape) and never ran the
    # autotuner's post_hook, where TLX's split-K GEMM reduces its workspace into C: C was left unwritten (NaN)
    import tlx.tutorials.blackwell_gemm_ws as gemm
    from tlx_workbench.sim.api import Simulation
    a = torch.randn(512, 512, dtype=torch.float16)
    b = torch.randn(512, 256, dtype=torch.float16)
    with Simulation(gpu="B200") as sim:
        c = gemm.matmul(a, b)
    assert gemm.matmul_kernel_tma_ws_blackwell.best_config.kwargs["SPLIT_K"] > 1
    assert [r.kernel for r in sim.results] == ["matmul_kernel_tma_ws_blackwell", "_reduce_k_kernel"]
    # fp16 partial sums, each rounded once, then added in fp32 and rounded again
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.15, rtol=0.01)
