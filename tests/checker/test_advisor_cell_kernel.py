"""The advisor on a kernel defined in a notebook cell, whose imports live in an earlier cell."""
import pathlib

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture
def shell():
    ip = InteractiveShell.instance()
    yield ip
    ip.reset()


def test_advisor_converts_a_cell_kernel(shell):
    text = (NOTEBOOKS / "warpbar_gemm.py").read_text()
    kernel_cell = text[text.index("@triton.jit"):]          # the cell holds the kernel only
    imports = ("import torch, triton\nimport triton.language as tl\nimport triton.language.extra.tlx as tlx\n"
               "from triton.tools.tensor_descriptor import TensorDescriptor\n"
               "from tlx_workbench.checker import advise_warp_barriers\n")
    assert shell.run_cell(imports).success
    assert shell.run_cell(kernel_cell).success
    M, N, K, BM, BN, BK = 128, 64, 128, 128, 64, 32
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    shell.user_ns.update(a=a, b=b, M=M, N=N, K=K, BM=BM, BN=BN, BK=BK)
    ok = shell.run_cell(
        "a_desc = TensorDescriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM // 2, BK])\n"
        "b_desc = TensorDescriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])\n"
        "adv = advise_warp_barriers(ws_matmul_wb, a_desc, b_desc, torch.empty(M, N, dtype=torch.float16),\n"
        "    M, N, K, grid=(1, 1), BM=BM, BN=BN, BK=BK, STAGES=2, WARP_BAR=False, ARRIVALS=2,\n"
        "    reference=lambda a_desc, b_desc, c, *rest: (a.float() @ b.float()).half())\n")
    ok.raise_error()
    adv = shell.user_ns["adv"]
    assert {x.barrier: (x.num_warps, x.num_arrivals) for x in adv.safe} == {"empty": (4, 2)}, adv
    assert [r.correct for r in adv.ab] == [True, True], adv.ab
    assert "<" not in adv.converted_path and adv.converted_path.endswith("_warpbar.py")
