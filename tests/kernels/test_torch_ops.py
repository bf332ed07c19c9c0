"""The launchers as torch.library custom ops (kernels/torch_ops.py), on the CPU: each op passes
``torch.library.opcheck`` (schema, fake implementation, autograd registration, AOT dispatch), its fake gives the
shapes and dtypes the launcher returns and refuses what the launcher refuses, and a ``torch.compile``d function
(``fullgraph=True``) that calls a launcher traces it as one op and, run on the simulator, matches float64."""
import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import tlx_workbench as wb
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import attention, attention_bwd, gemm_fp8, gemm_pipelined, gemm_ws, torch_ops

ops = torch.ops.tlx_workbench


def _rel(out, ref):
    assert torch.isfinite(out).all()
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def test_every_launcher_has_its_op():
    names = {"gemm_pipelined_matmul", "gemm_ws_matmul", "gemm_pingpong_matmul", "gemm_streamk_matmul",
             "gemm_cluster_matmul", "matmul_fp8", "attention", "attention_lse", "attention_backward"}
    assert all(hasattr(ops, n) for n in names)
    assert len(torch_ops.OPS) == len(names)


def test_fake_shapes_and_dtypes():
    with FakeTensorMode():
        a, b = torch.empty(300, 72, dtype=torch.bfloat16), torch.empty(72, 136, dtype=torch.bfloat16)
        for name in torch_ops.GEMM_MODULES:
            c = getattr(ops, f"{name}_matmul")(a, b)
            assert c.shape == (300, 136) and c.dtype == torch.bfloat16
        fa = torch.empty(300, 128, dtype=torch.float8_e4m3fn)
        fb = torch.empty(136, 128, dtype=torch.float8_e4m3fn).t()
        s = torch.ones(1)
        assert ops.matmul_fp8(fa, fb, s, s).dtype == torch.bfloat16
        c = ops.matmul_fp8(fa, fb, s, s, torch.float16)
        assert c.shape == (300, 136) and c.dtype == torch.float16
        q = torch.empty(2, 3, 200, 64, dtype=torch.float16)
        o = ops.attention(q, q, q, True)
        assert o.shape == q.shape and o.dtype == q.dtype
        o, lse = ops.attention_lse(q, q, q)
        assert lse.shape == (2, 3, 200) and lse.dtype == torch.float32
        dq, dk, dv = ops.attention_backward(q, q, q, o, o, lse)
        assert dq.shape == dk.shape == dv.shape == q.shape and dq.dtype == torch.float16


def test_fakes_refuse_what_the_launchers_refuse():
    with FakeTensorMode():
        with pytest.raises(TLXWorkbenchError, match="inner dimensions"):
            ops.gemm_ws_matmul(torch.empty(8, 16, dtype=torch.float16), torch.empty(8, 16, dtype=torch.float16))
        with pytest.raises(TLXWorkbenchError, match="head dim 96"):
            q = torch.empty(1, 1, 64, 96, dtype=torch.float16)
            ops.attention(q, q, q)
        with pytest.raises(TLXWorkbenchError, match="float8"):
            ops.matmul_fp8(torch.empty(16, 16), torch.empty(16, 16), torch.ones(1), torch.ones(1))


@pytest.mark.parametrize("op,args", [
    ("gemm_ws_matmul", lambda: (torch.randn(200, 72, dtype=torch.float16), torch.randn(72, 136, dtype=torch.float16),
                                torch_ops.config_text(gemm_ws.SIM_CONFIGS["tiny"]))),
    ("gemm_pipelined_matmul", lambda: (torch.randn(100, 40, dtype=torch.float16),
                                       torch.randn(40, 72, dtype=torch.float16),
                                       torch_ops.config_text(gemm_pipelined.SIM_CONFIGS["tiny"]))),
    ("attention_lse", lambda: tuple(torch.randn(1, 2, 130, 64, dtype=torch.float16) for _ in range(3))
     + (True, None, torch_ops.config_text(attention.SIM_CONFIGS["tiny"]))),
], ids=["gemm_ws", "gemm_pipelined", "attention_lse"])
def test_opcheck_on_the_simulator(op, args):
    torch.manual_seed(0)
    with wb.simulate(gpu="H200", seed=0):
        torch.library.opcheck(getattr(ops, op).default, args())


def test_opcheck_fp8_and_backward_on_the_simulator():
    torch.manual_seed(1)
    a, b, sa, sb = gemm_fp8.make_inputs((128, 64, 64), "float8_e4m3fn", "cpu")
    q, k, v, do = attention_bwd.make_inputs((1, 1, 130, 64), torch.float16, "cpu")
    o, lse, *_ = attention_bwd.reference64(q, k, v, do)
    with wb.simulate(gpu="H200", seed=0):
        # not test_schema: it multiplies the inputs, which torch's CPU build cannot do in fp8
        torch.library.opcheck(ops.matmul_fp8.default, (a, b, sa, sb, torch.bfloat16,
                                                       torch_ops.config_text(gemm_fp8.SIM_CONFIGS["tiny"])),
                              test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))
        torch.library.opcheck(ops.attention_backward.default,
                              (q, k, v, o.half(), do, lse.float(), False, None,
                               torch_ops.config_text(attention_bwd.SIM_CONFIGS["tiny"])))


class Graphs:
    """A torch.compile backend that keeps each traced graph and runs it as traced."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self):
        return [str(n.target) for g in self.graphs for n in g.graph.nodes if n.op == "call_function"]


def test_compiled_function_traces_the_launchers_as_ops_and_matches():
    torch._dynamo.reset()
    torch.manual_seed(2)
    gcfg, acfg = gemm_ws.SIM_CONFIGS["tiny"], attention.SIM_CONFIGS["tiny"]

    def f(a, b, q, k, v):
        c = torch.relu(gemm_ws.matmul(a, b, gcfg)) * 2
        o, lse = attention.attention(q, k, v, causal=True, config=acfg, return_lse=True)
        return c, o + 1, lse

    backend = Graphs()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    a, b = torch.randn(200, 72, dtype=torch.float16), torch.randn(72, 136, dtype=torch.float16)
    q, k, v = (torch.randn(1, 2, 130, 64, dtype=torch.float16) for _ in range(3))
    with wb.simulate(gpu="H200", seed=0) as sim:
        c, o, lse = compiled(a, b, q, k, v)
    assert len(backend.graphs) == 1
    assert {"tlx_workbench.gemm_ws_matmul.default", "tlx_workbench.attention_lse.default"} <= set(backend.targets())
    assert [r.kernel for r in sim.results] == ["gemm_ws_coop_kernel", "attention_fwd_kernel"]
    assert _rel(c, torch.relu(a.double() @ b.double()) * 2) < 2e-3
    assert _rel(o - 1, attention.reference(q.double(), k.double(), v.double(), causal=True)) < 3e-3
    assert lse.shape == (1, 2, 130) and lse.dtype == torch.float32


def test_compiled_backward_and_with_grad_trace_as_ops():
    torch._dynamo.reset()
    torch.manual_seed(3)
    fcfg, bcfg = attention.SIM_CONFIGS["tiny"], attention_bwd.SIM_CONFIGS["tiny"]

    def f(q, k, v, do):
        o, (dq, dk, dv) = attention_bwd.attention_with_grad(q, k, v, do, config=bcfg, fwd_config=fcfg)
        return o, dq, dk, dv

    backend = Graphs()
    shape = (1, 1, 130, 64)
    q, k, v, do = attention_bwd.make_inputs(shape, torch.float16, "cpu")
    with wb.simulate(gpu="H200", seed=0):
        got = torch.compile(f, backend=backend, fullgraph=True)(q, k, v, do)
    assert set(backend.targets()) >= {"tlx_workbench.attention_lse.default", "tlx_workbench.attention_backward.default"}
    o_r, _, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do)
    for g, r in zip(got, (o_r, dq_r, dk_r, dv_r)):
        assert _rel(g, r) < 2e-2


def test_matmul_fp8_compiled_with_a_scale_from_the_graph():
    torch._dynamo.reset()
    torch.manual_seed(4)
    cfg = gemm_fp8.SIM_CONFIGS["tiny"]

    def f(a, b, sa, sb):
        return gemm_fp8.matmul_fp8(a, b, sa * 2, sb, torch.float16, config=cfg)

    a, b, sa, sb = gemm_fp8.make_inputs((128, 64, 64), "float8_e4m3fn", "cpu")
    backend = Graphs()
    with wb.simulate(gpu="H200", seed=0):
        c = torch.compile(f, backend=backend, fullgraph=True)(a, b, sa, sb)
    assert "tlx_workbench.matmul_fp8.default" in backend.targets() and c.dtype == torch.float16
    ref = gemm_fp8.reference(a, b, sa * 2, sb, torch.float16)
    assert float((c.double() - ref.double()).abs().max() / ref.double().abs().max()) < 1e-2


def test_eager_calls_do_not_go_through_the_op(monkeypatch):
    """Outside torch.compile a launcher launches itself (a custom op's dispatch costs host time)."""
    called = []
    monkeypatch.setattr(torch_ops, "config_text", lambda cfg: called.append(cfg) or None)
    a, b = torch.randn(128, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)
    with wb.simulate(gpu="H200", seed=0) as sim:
        c = gemm_ws.matmul(a, b, gemm_ws.SIM_CONFIGS["tiny"])
    assert not called and len(sim.results) == 1
    assert _rel(c, a.double() @ b.double()) < 2e-3
    assert math.isfinite(float(c.float().sum()))
