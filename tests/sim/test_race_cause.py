"""The line a race report leads with: not a wait that did retire the wgmma.

A warp barrier counting one group's arrivals (num_arrivals=1 with two consumer groups) lets the
loader refill a slot as soon as the first group releases it, while the other group's wgmma still
reads it. Each group waits for its own wgmma with async_dot_wait(0) before it releases: that wait is
not the line to change, and the report must not lead with it."""
import importlib.util
import linecache
import pathlib

import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb

KERNEL = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "warpbar_gemm.py"


def _kernel():
    spec = importlib.util.spec_from_file_location("warpbar_gemm_race_cause", KERNEL)
    mod = importlib.util.module_from_spec(spec)
    with wb.offline("H100"):
        spec.loader.exec_module(mod)
    return mod.ws_matmul_wb


def test_a_miscounted_warp_barrier_race_does_not_blame_a_wait_that_retired_the_wgmma():
    M, N, K, BM, BN, BK = 128, 64, 256, 128, 64, 32
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    a_desc = TensorDescriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM // 2, BK])
    b_desc = TensorDescriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c = torch.empty(M, N, dtype=torch.float16)
    res = wb.simulate(_kernel(), a_desc, b_desc, c, M, N, K, BM=BM, BN=BN, BK=BK, STAGES=2, WARP_BAR=True,
                      ARRIVALS=1, grid=(1, 1), on_deadlock="return")
    assert res.races, res
    lead = res.findings[0]
    text = linecache.getline(str(KERNEL), lead.line)
    assert "async_dot_wait(0" not in text, (lead.line, text, lead.message)
