"""Launch plans (kernels/host.py ``LaunchPlans``): a launcher checks its operands in full and works its launch out on
the first call with an operand signature, and a later call with the same signature takes the plan; a changed
shape, stride, dtype or alignment misses it and gets the full checks, so a bad input still gets the friendly error.

On the CPU the simulator runs every launch (real kernels, fresh inputs, float64 references). The bound GPU launch
(runtime/triton_launch.BoundLaunch) is exercised here with the CUDA driver's two C entry points, which need a GPU,
replaced by recorders (``fake_cuda``): what reaches them is what Triton's own launcher would have been handed."""
import math
import types

import pytest
import torch
import triton

import tlx_workbench as wb
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import (attention, attention_bwd, gemm_fp8, gemm_pingpong, gemm_pipelined, gemm_streamk,
                                   gemm_ws, host)
from tlx_workbench.runtime import triton_launch


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref.double()).norm() / ref.double().norm())


@pytest.fixture
def fresh_plans():
    """Every launcher's plans and tuned configs emptied before and after."""
    caches = [gemm_ws.matmul.tuned, gemm_ws.launch.plans, gemm_fp8.matmul_fp8.tuned, gemm_fp8.launch.plans,
              attention.attention.tuned, attention.launch.plans, attention_bwd.attention_backward.tuned,
              attention_bwd.launch.plans, gemm_pipelined.matmul.tuned, gemm_pipelined.launch.plans,
              gemm_pingpong.launch.plans, gemm_streamk.launch.plans]
    for c in caches:
        c.clear()
    yield
    for c in caches:
        c.clear()


# -- the plan cache on the simulator --------------------------------------------------------------------------------

def test_a_second_call_takes_the_plan_and_a_changed_signature_misses_it(fresh_plans):
    torch.manual_seed(0)
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    plans = gemm_ws.matmul.plans
    a, b = torch.randn(200, 72, dtype=torch.float16), torch.randn(72, 136, dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0) as sim:
        c1 = gemm_ws.matmul(a, b, cfg)
        assert (plans.misses, plans.hits, len(plans)) == (1, 0, 1)
        a2, b2 = torch.randn_like(a), torch.randn_like(b)            # same signature, other data
        c2 = gemm_ws.matmul(a2, b2, cfg)
        assert (plans.misses, plans.hits) == (1, 1)
        c3 = gemm_ws.matmul(a.bfloat16(), b.bfloat16(), cfg)          # another dtype: planned anew
        assert (plans.misses, plans.hits, len(plans)) == (2, 1, 2)
        a4 = torch.randn(136, 72, dtype=torch.float16)               # another shape
        c4 = gemm_ws.matmul(a4, b, cfg)
        assert (plans.misses, len(plans)) == (3, 3)
    assert len(sim.results) == 4 and all(r.ok for r in sim.results)
    for c, (x, y) in ((c1, (a, b)), (c2, (a2, b2)), (c3, (a, b)), (c4, (a4, b))):
        assert _rel(c, x.double() @ y.double()) < 1e-2
    # another stride (a transposed view, same shape and dtype): a miss, and the full check's error
    bt = torch.randn(136, 72, dtype=torch.float16).t()
    with pytest.raises(TLXWorkbenchError, match="row-major contiguous"):
        gemm_ws.matmul(a, bt, cfg)
    assert plans.misses == 4 and len(plans) == 3


def test_an_unaligned_view_of_a_planned_signature_gets_the_friendly_error(fresh_plans):
    """Same shape, strides, dtype and device as a planned call, at an address that is not 16-byte aligned: Triton
    compiled the planned kernel for aligned addresses (and TMA needs them), so the plan must not take it."""
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0):
        gemm_ws.matmul(a, b, cfg)
    flat = torch.randn(128 * 64 + 1, dtype=torch.float16)
    odd = flat[1:].view(128, 64)
    assert odd.shape == a.shape and odd.stride() == a.stride() and odd.dtype == a.dtype
    with pytest.raises(TLXWorkbenchError, match="not 16-byte aligned") as e:
        gemm_ws.matmul(odd, b, cfg)
    assert e.value.file.endswith("gemm_ws.py") and "clone" in e.value.hint
    assert gemm_ws.matmul.plans.misses == 2 and len(gemm_ws.matmul.plans) == 1


def test_operands_on_two_devices_get_the_friendly_error(fresh_plans):
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(TLXWorkbenchError, match="one device") as e:
        gemm_ws.matmul(a, torch.empty(64, 64, dtype=torch.float16, device="meta"))
    assert "a on cpu, b on meta" in str(e.value)


def test_a_non_tensor_operand_is_refused_by_the_full_checks(fresh_plans):
    with pytest.raises(AttributeError):
        gemm_ws.matmul([[1.0]], torch.randn(8, 8))           # no plan key: straight to the checks
    assert len(gemm_ws.matmul.plans) == 0


def test_clearing_the_tuned_configs_drops_the_plans_made_from_them(fresh_plans):
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0):
        gemm_ws.matmul(a, b, cfg)
    assert len(gemm_ws.matmul.plans) == 1
    gemm_ws.matmul.tuned.clear()
    assert len(gemm_ws.matmul.plans) == 0 and gemm_ws.matmul.plans.hits == 0


def test_attention_plans_per_signature_and_return_lse(fresh_plans):
    torch.manual_seed(1)
    cfg = attention.SIM_CONFIGS["tiny"]
    q, k, v = (torch.randn(1, 2, 200, 64, dtype=torch.float16) for _ in range(3))
    plans = attention.attention.plans
    with wb.simulate(gpu="H200", seed=0) as sim:
        o1 = attention.attention(q, k, v, causal=True, config=cfg)
        o2 = attention.attention(q, k, v, causal=True, config=cfg)
        o3, lse = attention.attention(q, k, v, causal=True, config=cfg, return_lse=True)
        o4 = attention.attention(q, k, v, causal=False, config=cfg)
    assert (plans.misses, plans.hits, len(plans)) == (3, 1, 3)
    assert all(r.ok for r in sim.results)
    ref = attention.reference(q.double(), k.double(), v.double(), causal=True)
    for o in (o1, o2, o3):
        assert _rel(o, ref) < 3e-3
    assert _rel(o4, attention.reference(q.double(), k.double(), v.double())) < 3e-3
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(64)
    s = s.masked_fill(torch.ones(200, 200, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(s, -1), atol=2e-3, rtol=1e-3)


def test_matmul_fp8_plans_column_and_row_major_b(fresh_plans):
    torch.manual_seed(2)
    cfg = gemm_fp8.SIM_CONFIGS["tiny"]
    a, b, sa, sb = gemm_fp8.make_inputs((200, 136, 128), "float8_e4m3fn", "cpu", rowwise=True)
    plans = gemm_fp8.matmul_fp8.plans
    with wb.simulate(gpu="H200", seed=0) as sim:
        outs = [gemm_fp8.matmul_fp8(a, bb, sa, sb, config=cfg) for bb in (b, b, b.contiguous(), b.contiguous())]
    assert (plans.misses, plans.hits, len(plans)) == (2, 2, 2)
    assert [p.b_as_is for p in plans.plans.values()] == [True, False]
    assert all(r.ok for r in sim.results)
    ref = gemm_fp8.reference(a, b, sa, sb)
    for c in outs:
        assert float((c.double() - ref.double()).abs().max() / ref.double().abs().max()) < 1e-2


def test_attention_backward_plans(fresh_plans):
    torch.manual_seed(3)
    shape, causal = (1, 2, 130, 64), True
    q, k, v, do = attention_bwd.make_inputs(shape, torch.float16, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)
    cfg = attention_bwd.SIM_CONFIGS["ring_of_1"]
    with wb.simulate(gpu="H200", seed=0) as sim:
        for _ in range(2):
            got = attention_bwd.attention_backward(q, k, v, o.half(), do, lse.float(), causal=causal, config=cfg)
            for g, r in zip(got, (dq_r, dk_r, dv_r)):
                assert _rel(g, r) < 2e-2
    plans = attention_bwd.attention_backward.plans
    assert (plans.misses, plans.hits) == (1, 1) and attention_bwd.launch.plans.hits == 1
    assert all(r.ok for r in sim.results)


def test_plans_show_what_they_hold(fresh_plans):
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0):
        gemm_ws.matmul(a, b, cfg)
        gemm_ws.matmul(a, b, cfg)
    plans = gemm_ws.matmul.plans
    assert repr(plans) == ("LaunchPlans(gemm_ws.matmul: 1 plans, 0 bound to their GPU launcher; 1 hits, 1 misses)")
    page = plans._repr_html_()
    assert "(128, 64)/(64, 1) float16 cpu" in page and "Triton dispatch" in page


# -- the bound launch, with the CUDA driver's C entry points recorded ----------------------------------------------

class PyCUtensorMap:
    """Stands for the driver's tensor map (BoundLaunch finds maps in Triton's flattened arguments by this name)."""

    def __init__(self, ptr, block, shape, strides):
        self.ptr, self.block, self.shape, self.strides = ptr, list(block), list(shape), list(strides)


@pytest.fixture
def fake_cuda(monkeypatch, fresh_plans):
    """An offline sm_90 target whose driver records launches instead of making them: ``fill_tma_descriptor_tiled``
    and ``launch`` (driver.c) are recorders, a compiled kernel "loads" into a launcher made of its signature, and
    the launchers bind (as on a GPU). Yields (launches, fills)."""
    from triton.compiler.compiler import CompiledKernel

    from tlx_workbench.target import offline
    launches, fills, loaded = [], [], []

    def init_handles(self):
        if self.module is None:
            self._run = types.SimpleNamespace(arg_annotations=("annotations", self.name), kernel_signature=b"sig",
                                              launch_cooperative_grid=False, launch_pdl=False, gsan_enabled=False)
            self.module, self.function = "loaded", hash(self.name) & 0xFFFF
            loaded.append(self)

    def fill(ptr, swizzle, elem_size, elem_type, block, shape, strides, padding):
        fills.append(ptr)
        return PyCUtensorMap(ptr, block, shape, strides)

    monkeypatch.setattr(CompiledKernel, "_init_handles", init_handles)
    monkeypatch.setattr(host, "bound_launch", lambda k, g, a, o: triton_launch.BoundLaunch(k, g, a, o))
    with offline("sm_90"):
        triton.runtime.driver.active.utils = types.SimpleNamespace(
            fill_tma_descriptor_tiled=fill, launch=lambda *a: launches.append(a), unload_module=lambda m: None)
        yield launches, fills
    for k in loaded:
        k.module = k._run = k.function = None


def _maps(launch):
    return [x for x in launch[15] if isinstance(x, PyCUtensorMap)]


def test_a_bound_gemm_launch_hands_the_launcher_what_triton_would(fake_cuda):
    from triton.backends.driver import expand_signature
    launches, fills = fake_cuda
    a, b = torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 192, dtype=torch.float16)
    c1, c2 = torch.empty(256, 192, dtype=torch.float16), torch.empty(256, 192, dtype=torch.float16)
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    gemm_ws.launch(a, b, c1, cfg, num_sms=4)
    gemm_ws.launch(a, b, c2, cfg, num_sms=4)
    gemm_ws.launch(a, b, c1, cfg, num_sms=4)
    assert len(launches) == 3 and gemm_ws.launch.plans.hits == 2
    plan = next(iter(gemm_ws.launch.plans.plans.values()))
    assert plan.bound is not None and plan.slots == ((0, 0), (1, 0), (2, 0))
    kernel, grid, args, options = gemm_ws._launch_call(a, b, c1, cfg, num_sms=4)
    compiled = kernel.warmup(*args, grid=grid, **options)
    for launch, c in zip(launches, (c1, c2, c1)):
        gx, gy, gz, stream, function, coop, pdl, packed, md, enter, leave, scratch, pscratch, ann, sig, flat = launch
        assert (gx, gy, gz) == (grid[0], 1, 1) and function == compiled.function and packed == compiled.packed_metadata
        assert (md, enter, leave, scratch, pscratch) == (None,) * 5 and ann == ("annotations", compiled.name)
        # Triton's layout: a descriptor is its map, its shape and its strides; then M, N, K; then the constexprs
        assert len(flat) == len(expand_signature(compiled.src.signature.values(), compiled.metadata.tensordesc_meta,
                                                 "nvTmaDesc"))
        assert [m.ptr for m in _maps(launch)] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
        assert [m.block for m in _maps(launch)] == [[64, 32], [32, 64], [64, 64]]
        assert flat[1:5] == [256, 128, 128, 1] and flat[15:18] == [256, 192, 128]
    # one tensor map per (descriptor, address): a, b and c1 at bind time, c2 on the second call, none after
    assert sorted(fills) == sorted([a.data_ptr(), b.data_ptr(), c1.data_ptr(), c2.data_ptr()])
    assert _maps(launches[2])[2] is _maps(launches[0])[2]


@pytest.mark.parametrize("mod", [gemm_pipelined, gemm_streamk, gemm_pingpong], ids=lambda m: m.__name__)
def test_every_gemm_binds_and_launches_on_the_call_operands(fake_cuda, mod):
    launches, _ = fake_cuda
    a, b = torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 192, dtype=torch.float16)
    kw = {} if mod is gemm_pipelined else {"num_sms": 4}
    for _ in range(2):
        c = torch.empty(256, 192, dtype=torch.float16)
        mod.launch(a, b, c, mod.SIM_CONFIGS["tiny"], **kw)
        flat = launches[-1][15]
        if mod is gemm_pipelined:
            assert flat[:3] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]           # pointers, as ints
        else:
            assert [m.ptr for m in _maps(launches[-1])] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    if mod is gemm_streamk:          # its workspace and flags: the module's own, at their addresses
        ws, flags = gemm_streamk.workspace(a.device, 4, mod.SIM_CONFIGS["tiny"])
        assert ws.data_ptr() in flat and flags.data_ptr() in flat
    assert len(launches) == 2 and mod.launch.plans.hits == 1


def test_fp8_attention_and_backward_bind_every_launch(fake_cuda):
    launches, _ = fake_cuda
    a, b, sa, sb = gemm_fp8.make_inputs((256, 192, 128), "float8_e4m3fn", "cpu", rowwise=True)
    for _ in range(2):
        c = gemm_fp8.matmul_fp8(a, b, sa, sb, config=gemm_fp8.SIM_CONFIGS["tiny"])
    assert gemm_fp8.matmul_fp8.plans.hits == 1 and next(iter(gemm_fp8.matmul_fp8.plans.plans.values())).bound
    assert [m.ptr for m in _maps(launches[-1])] == [a.data_ptr(), b.data_ptr(), c.data_ptr()]
    assert sa.data_ptr() in launches[-1][15] and sb.data_ptr() in launches[-1][15]
    q, k, v, do = (torch.randn(1, 2, 200, 64, dtype=torch.float16) for _ in range(4))
    for name in ("tiny", "persistent_zigzag"):
        for _ in range(2):
            o, lse = attention.attention(q, k, v, causal=True, config=attention.SIM_CONFIGS[name], return_lse=True)
            assert [m.ptr for m in _maps(launches[-1])] == [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()]
            assert o.data_ptr() in launches[-1][15] and lse.data_ptr() in launches[-1][15]
    assert all(p.bound is not None for p in attention.launch.plans.plans.values())
    n = len(launches)
    for _ in range(2):
        dq, dk, dv = attention_bwd.attention_backward(q, k, v, o, do, lse, causal=True,
                                                      config=attention_bwd.SIM_CONFIGS["tiny"])
    assert len(launches) == n + 4                 # the delta kernel and the main kernel, twice
    assert all(p.bound is not None for p in attention_bwd.launch.plans.plans.values())
    assert dk.data_ptr() in launches[-1][15] and dv.data_ptr() in launches[-1][15]


@pytest.mark.parametrize("name,shape,sms", [("split_tail", (1, 3, 300, 128), 7)])
def test_the_backward_split_tail_binds_its_three_launches(fake_cuda, name, shape, sms):
    launches, _ = fake_cuda
    q, k, v, o, do = attention_bwd.make_inputs(shape, torch.float16, "cpu") + (torch.randn(shape).half(),)
    lse = torch.zeros(shape[:3])
    cfg = attention_bwd.SIM_CONFIGS[name]
    for _ in range(2):
        attention_bwd.launch(q, k, v, o, do, lse, False, 0.1, cfg, num_sms=sms)
    assert len(launches) == 8 and attention_bwd.launch.plans.hits == 1
    plan = next(iter(attention_bwd.launch.plans.plans.values()))
    assert plan.bound is not None and len(plan.kernels) == 4 and plan.tail is not None


def test_nothing_binds_where_triton_does_not_launch(fake_cuda):
    """The simulator, a launch recorder, a launch hook, ``through_dispatch()``: each takes the launch from a bound
    plan (no bound launch is made or used while they are in place)."""
    from tlx_workbench.explore.problem import captured_launches
    launches, _ = fake_cuda
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    c = torch.empty(128, 64, dtype=torch.float16)
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    gemm_ws.launch(a, b, c, cfg)
    assert len(launches) == 1
    kernel = gemm_ws.gemm_ws_coop_kernel
    assert triton_launch.dispatch_is_triton(kernel)
    with captured_launches() as cap:
        gemm_ws.launch(a, b, c, cfg)
        assert not triton_launch.dispatch_is_triton(kernel)
    assert len(cap.launches) == 1 and len(launches) == 1
    with triton_launch.through_dispatch():
        assert not triton_launch.dispatch_is_triton(kernel)
    hook = lambda metadata: None  # noqa: E731
    triton.knobs.runtime.launch_enter_hook.add(hook)
    try:
        assert not triton_launch.dispatch_is_triton(kernel)
    finally:
        triton.knobs.runtime.launch_enter_hook.remove(hook)
    assert triton_launch.dispatch_is_triton(kernel)
    with wb.simulate(gpu="H200", seed=0) as sim:
        assert not triton_launch.dispatch_is_triton(kernel)
    assert triton_launch.dispatch_is_triton(kernel) and not sim.results


def test_bind_declines_cpu_tensors():
    a, b, c = (torch.empty(128, 64, dtype=torch.float16) for _ in range(3))
    kernel, grid, args, options = gemm_ws._launch_call(a, b, c, gemm_ws.SIM_CONFIGS["tiny"], num_sms=4)
    assert triton_launch.bind(kernel, grid, args, options) is None
