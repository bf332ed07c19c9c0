"""``device="cuda"`` on the CPU (tlx_workbench._torch_cpu): the torch side of a GPU test, as a GPU computes it."""
import pytest
import torch

from tlx_workbench._torch_cpu import CudaOnCpu
from tlx_workbench.target import gpu_model


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_float_matmuls_accumulate_in_fp32(dtype):
    # as cuBLAS computes them: exact products, fp32 accumulation, one rounding to the output type (torch's own
    # CPU fp16 kernel rounds ~20 of these elements differently, and takes minutes at 2048^3)
    with CudaOnCpu(gpu_model("H200")):
        a = torch.randn(192, 320, device="cuda", dtype=dtype)
        b = torch.randn(320, 96, device="cuda", dtype=dtype)
        w = torch.randn(96, 320, device="cuda", dtype=dtype)
        outs = {"matmul": torch.matmul(a, b), "@": a @ b, "mm": a.mm(b),
                "bmm": torch.bmm(a[None], b[None])[0], "linear": torch.nn.functional.linear(a, w)}
    for name, out in outs.items():
        want = (a.float() @ (w.t() if name == "linear" else b).float()).to(dtype)
        assert out.dtype == dtype and out.device.type == "cpu", name
        assert torch.equal(out, want), name
    exact = (a.double() @ b.double()).to(dtype)
    torch.testing.assert_close(outs["matmul"], exact, rtol=2 ** -7 if dtype == torch.bfloat16 else 2 ** -10,
                               atol=1e-5)


def test_the_fp32_path_keeps_autograd_and_leaves_other_calls_alone():
    with CudaOnCpu(gpu_model("H200")):
        a = torch.randn(64, 32, device="cuda", dtype=torch.float16, requires_grad=True)
        b = torch.randn(32, 16, device="cuda", dtype=torch.float16)
        (a @ b).float().sum().backward()
        assert a.grad is not None and a.grad.dtype == torch.float16
        torch.testing.assert_close(a.grad.float(), b.float().sum(1).expand(64, 32), rtol=1e-3, atol=1e-3)
        out = torch.empty(64, 16, dtype=torch.float16)
        torch.matmul(a.detach(), b, out=out)                     # out= goes to torch's own kernel
        mixed = torch.randn(64, 32, device="cuda") @ b.float()   # fp32 is untouched
        assert mixed.dtype == torch.float32
