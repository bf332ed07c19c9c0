"""No findings on the Hopper tutorials of the installed triton-utlx wheel, unchanged
(host functions at small shapes: compiled once, simulated once each)."""
import pytest
import torch

import tlx_workbench as wb

from check_helpers import load_tutorial

GEMMS = [("hopper_gemm_ws", "matmul"), ("hopper_gemm_pipelined", "matmul"),
         ("hopper-persistent-gemm-ws-cooperative", "matmul_tlx_ws_persistent"),
         ("hopper-persistent-gemm-ws-pingpong", "matmul_tlx_ws_persistent")]
FA = ["hopper_fa_ws", "hopper_fa_ws_pipelined", "hopper_fa_ws_pipelined_pingpong",
      "hopper_fa_ws_pipelined_pingpong_persistent"]


@pytest.mark.parametrize("name,fn", GEMMS, ids=[g[0] for g in GEMMS])
def test_gemm_tutorials_have_no_findings(name, fn):
    mod = load_tutorial(name)
    a, b = torch.randn(256, 256, dtype=torch.float16), torch.randn(256, 256, dtype=torch.float16)
    res = wb.check(getattr(mod, fn), a, b)
    assert res.sim is not None and res.report is not None
    assert len(res) == 0, res
    torch.testing.assert_close(res.sim.value.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("name", FA)
def test_attention_tutorials_have_no_findings(name):
    mod = load_tutorial(name)
    q, k, v = (torch.randn(1, 1, 256, 128, dtype=torch.float16) for _ in range(3))
    res = wb.check(mod.attention, q, k, v, 0.5)
    assert len(res) == 0, res
    assert res.sim is not None


def test_vector_add2_has_no_findings():
    mod = load_tutorial("vector-add2")
    x, y, a, b = (torch.rand(5000) for _ in range(4))
    for host in (mod.add2, mod.add2_warp_specialized):
        res = wb.check(host, x, y, a, b)
        assert len(res) == 0, res


def test_report_only_check_is_static_and_clean():
    mod = load_tutorial("hopper_gemm_ws")
    a, b = torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 256, dtype=torch.float16)
    full = wb.check(mod.matmul, a, b)
    res = wb.check(full.report)         # what %%tlx --check passes
    assert res.sim is None and len(res) == 0 and res.ok
    assert "static only" in repr(res)
