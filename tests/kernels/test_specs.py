"""Every library kernel in ``kernels.MODULES`` is described by a complete KernelSpec: its kernel, launcher, configs,
simulator configs and docs, and fresh random inputs whose reference agrees with torch's own op."""
import pytest
import torch
import triton

from tlx_workbench.kernels import MODULES, KernelSpec, spec

GEMM_SHAPE, ATTENTION_SHAPE = (64, 48, 32), (1, 2, 40, 64)


def _torch_result(name, inputs):
    """What the kernel computes, by torch's own ops in float64 (attention: SDPA and its autograd)."""
    if name == "gemm_fp8":
        a, b, sa, sb = inputs
        return (a.double() @ b.double()) * sa.double() * sb.double()
    if name.startswith("gemm"):
        a, b = inputs
        return a.double() @ b.double()
    q, k, v = (t.double().requires_grad_() for t in inputs[:3])
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    if name == "attention":
        return o.detach()
    return torch.stack(torch.autograd.grad(o, (q, k, v), inputs[4].double()))


def test_every_library_kernel_has_a_spec():
    assert set(MODULES) == {"gemm_pipelined", "gemm_ws", "gemm_pingpong", "gemm_streamk", "gemm_cluster", "gemm_fp8",
                            "attention", "attention_bwd"}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_spec_is_complete(name):
    s = spec(name)
    assert isinstance(s, KernelSpec) and s.name == name and s.arch == 90
    assert isinstance(s.kernel, triton.runtime.JITFunction)
    assert all(callable(f) for f in (s.launch, s.reference, s.make_inputs, s.flops))
    assert isinstance(s.configs, tuple) and s.configs and all(isinstance(c, dict) and c for c in s.configs)
    assert s.sim_configs and all(isinstance(c, dict) and c for c in s.sim_configs.values())
    assert s.doc and s.doc.strip()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_the_specs_reference_on_its_fresh_inputs_is_torchs_own_op(name):
    shape = GEMM_SHAPE if name.startswith("gemm") else ATTENTION_SHAPE
    s = spec(name)
    torch.manual_seed(len(name))
    inputs = s.make_inputs(shape, torch.float16, "cpu")
    again = s.make_inputs(shape, torch.float16, "cpu")
    assert not torch.equal(inputs[0].float(), again[0].float())        # fresh: new random values each call
    out = s.reference(*inputs)
    out = torch.stack(out) if isinstance(out, tuple) else out
    want = _torch_result(name, inputs)
    scale = want.abs().max()
    assert out.shape == want.shape and float((out.double() - want).abs().max() / scale) < 1e-2
    work = 2.0 * shape[0] * shape[1] * shape[2] if name.startswith("gemm") else \
        {"attention": 4.0, "attention_bwd": 10.0}[name] * shape[0] * shape[1] * shape[2] ** 2 * shape[3]
    assert s.flops(*shape) == work
