"""``device="cuda"`` on the CPU (tlx_workbench._torch_cpu): the torch side of a GPU test, as a GPU computes it."""
import pytest
import torch

from tlx_workbench._torch_cpu import CudaOnCpu
from tlx_workbench.sim.api import Simulation
from tlx_workbench.sim.ops.mma_numerics import mma_accumulate
from tlx_workbench.target import gpu_model


def _values(t):
    return t.float().numpy()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_float_matmuls_are_the_tensor_cores_sums(dtype):
    # as cuBLAS's tensor-core kernels add them, and as the simulator's MMA does (sim/ops/mma_numerics.py); torch's own
    # CPU fp16 kernel rounds ~20 of these elements differently, and takes minutes at 2048^3
    with CudaOnCpu(gpu_model("H200")):
        a = torch.randn(192, 320, device="cuda", dtype=dtype)
        b = torch.randn(320, 96, device="cuda", dtype=dtype)
        w = torch.randn(96, 320, device="cuda", dtype=dtype)
        bias = torch.randn(96, device="cuda", dtype=dtype)
        outs = {"matmul": torch.matmul(a, b), "@": a @ b, "mm": a.mm(b), "bmm": torch.bmm(a[None], b[None])[0],
                "linear": torch.nn.functional.linear(a, w)}
        with_bias = torch.nn.functional.linear(a, w, bias)
    want = torch.from_numpy(mma_accumulate(None, _values(a), _values(b), 16)).to(dtype)
    want_w = torch.from_numpy(mma_accumulate(None, _values(a), _values(w.t()), 16))
    for name, out in outs.items():
        assert out.dtype == dtype and out.device.type == "cpu", name
        assert torch.equal(out, want_w.to(dtype) if name == "linear" else want), name
    assert torch.equal(with_bias, (want_w + bias.float()).to(dtype))
    exact = (a.double() @ b.double()).to(dtype)
    torch.testing.assert_close(outs["matmul"], exact, rtol=2 ** -7 if dtype == torch.bfloat16 else 2 ** -10,
                               atol=1e-5)


def test_a_tlx_gemm_summing_k_in_order_matches_its_torch_reference_to_the_bit():
    # what a GPU shows and TLX's own suite relies on (a GEMM against cuBLAS at fp16's tolerance): the same MMA
    # instructions, K in the same order, the same bits. The pipelined GEMM: 4 x 6 tiles, 16 k-steps of 32.
    from tlx_workbench.kernels import gemm_pipelined
    torch.manual_seed(int(torch.randint(0, 2 ** 31, ()).item()))
    with CudaOnCpu(gpu_model("H200")):
        a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
        b = torch.randn(512, 384, device="cuda", dtype=torch.float16)
        ref = torch.matmul(a, b)
        with Simulation(gpu="H200"):
            out = gemm_pipelined.launch(a, b, torch.empty_like(ref), gemm_pipelined.SIM_CONFIGS["tiny"])
    assert torch.equal(out, ref), int((out != ref).sum())


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
