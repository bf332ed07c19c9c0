"""The Hopper tutorials of the triton-utlx wheel, unchanged, on the CPU simulator, against torch."""
import dataclasses

import pytest
import torch

from tlx_workbench.sim import simulate
from tlx_workbench.target import GPU_MODELS

GEMMS = [
    ("hopper_gemm_pipelined", "matmul", {}),
    ("hopper_gemm_ws", "matmul", {}),
    ("hopper_gemm_ws", "matmul", {"config": {"USE_WARP_BARRIER": True, "NUM_CTAS": 1, "GROUP_SIZE_M": 8}}),
    ("hopper-persistent-gemm-ws-cooperative", "matmul_tlx_ws_persistent", {}),
    ("hopper-persistent-gemm-ws-pingpong", "matmul_tlx_ws_persistent", {}),
]


@pytest.mark.parametrize("name,fn,kw", GEMMS, ids=[g[0] + ("-warpbar" if g[2] else "") for g in GEMMS])
def test_gemm_tutorial_matches_torch_over_20_schedules(tutorial, name, fn, kw):
    mod = tutorial(name)
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 256, dtype=torch.float16)
    res = simulate(getattr(mod, fn), a, b, gpu="H200", schedules=20, **kw)
    c = res.value
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    assert res.ok, res
    assert len(res.schedules) == 20
    if "USE_WARP_BARRIER" in kw.get("config", {}):
        assert any(e.kind == "arrive" and e.count == 128 for e in res.trace.barrier_events)


FAS = [("hopper_fa_ws", 20), ("hopper_fa_ws_pipelined", 20), ("hopper_fa_ws_pipelined_pingpong", 20),
       ("hopper_fa_ws_pipelined_pingpong_persistent", 2)]


@pytest.mark.parametrize("name,schedules", FAS, ids=[f[0] for f in FAS])
def test_flash_attention_tutorial_matches_torch(tutorial, name, schedules):
    mod = tutorial(name)
    persistent = "persistent" in name
    # the persistent kernel's grid is min(SMs, tiles): on a one-SM H100 one CTA loops over all 4 tiles
    gpu = dataclasses.replace(GPU_MODELS["H100"], sm_count=1) if persistent else "H100"
    q, k, v = (torch.randn(1, 2 if persistent else 1, 256, 128, dtype=torch.float16) for _ in range(3))
    res = simulate(mod.attention, q, k, v, 0.5, gpu=gpu, schedules=schedules)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5)
    torch.testing.assert_close(res.value.float(), ref, atol=1e-2, rtol=1e-2)
    assert res.ok, res


def test_vector_add2_both_kernels(tutorial):
    mod = tutorial("vector-add2")
    x, y, a, b = (torch.rand(5000) for _ in range(4))
    for host in (mod.add2, mod.add2_warp_specialized):
        res = simulate(host, x, y, a, b, schedules=20)
        o1, o2 = res.value
        torch.testing.assert_close(o1, x + y)
        torch.testing.assert_close(o2, a + b)
        assert res.ok, res


def test_context_manager_and_kernel_fn_launch(tutorial):
    mod = tutorial("hopper_gemm_ws")
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, 256, dtype=torch.float16)
    cfg = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
           "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": False}
    with simulate(gpu="H100", seed=3) as sim:
        c = mod.matmul(a, b, config=cfg)          # kernel.fn[grid](...) path
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)
    r = sim.result
    assert r.kernel == "matmul_kernel_tlx_ws" and r.gpu == "H100" and r.grid == (4, 1, 1)
    assert {l[1] for l in r.trace.lanes()} == {"default", "task1"}
    assert "matmul_kernel_tlx_ws" in repr(r) and "<table>" in r._repr_html_()


def test_predict_refuses_a_launch_the_compiler_rejects(tutorial):
    """TLX's hopper_gemm_pipelined with N=5000 (not a multiple of 16: Triton cannot assume the rows of B 16-byte
    aligned, so its cp.async would move 2 bytes): the GPU would not compile the launch, so wb.predict gives no time
    for it and names the line, where a multiple of 16 predicts."""
    import tlx_workbench as wb
    from tlx_workbench.errors import CompileError
    mod = tutorial("hopper_gemm_pipelined")
    g = torch.Generator().manual_seed(torch.seed() % 2**31)
    a = torch.randn(256, 128, generator=g).half()
    with wb.offline("H200"):
        with pytest.raises(CompileError) as err:
            wb.predict(lambda: mod.matmul(a, torch.randn(128, 5000, generator=g).half()), gpu="H200")
        assert err.value.line is not None and "cp.async" in str(err.value)
        p = wb.predict(lambda: mod.matmul(a, torch.randn(128, 5008, generator=g).half()), gpu="H200")
    assert p.us > 0 and "registers" in p.compiled
