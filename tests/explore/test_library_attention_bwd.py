"""The explorer over the attention backward, the library kernel described by its KernelSpec: the static stage
compiles each config, the simulated stage proves it at a small ragged shape on fresh random inputs and checks its
(dQ, dK, dV) against float64 torch autograd, then predicts its time."""
import pytest
import torch

from tlx_workbench.explore import Store, explore, library
from tlx_workbench.kernels import attention_bwd, spec

SHAPE = (1, 2, 256, 64)


@pytest.fixture(scope="module")
def explored():
    cfgs = [attention_bwd.SIM_CONFIGS["tiny"], attention_bwd.SIM_CONFIGS["one_group"]]
    return explore(library.problem("attention_bwd", causal=True), cfgs, shapes=[SHAPE],
                   stages=("static", "simulated"), store=Store(":memory:"), backend="serial", progress=False)


def test_the_explorer_proves_each_config_of_the_backward_against_torch_autograd(explored):
    entries = explored.entries()
    assert len(entries) == 2
    for e in entries:
        assert e["status"] == "simulated", e
        assert 0 < e["sim_rel_err"] < 1e-2, e          # fp16 gradients against float64 autograd
        assert e["predicted_us"] > 0


def test_the_backward_problem_takes_its_kernel_spec():
    p, s = library.problem("attention_bwd", causal=True), spec("attention_bwd")
    assert p.default == attention_bwd.default_for(128, causal=True)
    assert p.flops((2, 4, 256, 64)) == s.flops(2, 4, 256, 64, causal=True) == attention_bwd.flops(2, 4, 256, 64) / 2
    torch.manual_seed(0)
    q, k, v, o, do, lse, delta, lse2 = p.make_inputs((1, 2, 40, 64), "float16", "cpu")
    # the forward's statistics: o and lse as torch's causal attention gives them
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    o64 = torch.nn.functional.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
    torch.testing.assert_close(o.double(), o64.detach(), atol=2e-3, rtol=0)
    scores = (qd @ kd.transpose(-1, -2)) / 8.0
    scores = scores.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1).detach(), atol=1e-5, rtol=0)
    # the reference: torch autograd of the same attention
    grads = torch.autograd.grad(o64, (qd, kd, vd), do.double())
    torch.testing.assert_close(p.reference(q, k, v, o, do, lse, delta, lse2).double(), torch.stack(grads),
                               atol=2e-3, rtol=1e-3)
