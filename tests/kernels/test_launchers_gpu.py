"""Every public launcher on a GPU, as callers use it: its planned launch (bound to the compiled kernel's launcher)
gives what Triton's JIT dispatch gives, and what a float64 (or vendor) reference gives; captured in a CUDA graph it
gives the eager output; called from a ``torch.compile``d function (an opaque custom op) it runs and matches.

Explicit configs (each module's default, ``CONFIGS[0]`` / ``DEFAULTS``), so no test tunes; fresh random inputs."""
import pytest
import torch

from tlx_workbench.kernels import (attention, attention_bwd, gemm_cluster, gemm_fp8, gemm_pingpong, gemm_pipelined,
                                   gemm_streamk, gemm_ws, host)
from tlx_workbench.runtime.triton_launch import through_dispatch

pytestmark = pytest.mark.gpu

GEMMS = [gemm_ws, gemm_pipelined, gemm_pingpong, gemm_streamk, gemm_cluster]
ATTN_SHAPE = (2, 4, 384, 128)        # 3 query tiles a head; 8 heads


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def _gemm_inputs(M=1000, N=1032, K=528, dtype=torch.float16):
    return torch.randn(M, K, device="cuda", dtype=dtype), torch.randn(K, N, device="cuda", dtype=dtype)


def _fp8_inputs(shape=(768, 1024, 640)):
    return gemm_fp8.make_inputs(shape, "float8_e4m3fn", "cuda", rowwise=True)


def _fp8_ref(a, b, sa, sb):
    return (a.double() @ b.double()) * sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)


def _attn_inputs(shape=ATTN_SHAPE, dtype=torch.float16):
    return tuple(torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))


def _sdpa(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


# -- the planned launch is bound, and gives what Triton's dispatch gives ------------------------------------------

@pytest.mark.parametrize("mod", GEMMS, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_gemm_planned_launch_is_bound_and_matches_dispatch(mod):
    a, b = _gemm_inputs()
    cfg = mod.CONFIGS[0]
    mod.matmul.plans.clear()
    first = mod.matmul(a, b, cfg)                       # plans: checks, compiles, binds
    again = mod.matmul(a, b, cfg)                       # the plan's bound launch
    assert mod.matmul.plans.hits == 1 and mod.matmul.plans.misses == 1
    assert all(p.bound is not None for p in mod.matmul.plans.plans.values()), "the plan fell back to dispatch"
    with through_dispatch():
        dispatched = mod.matmul(a, b, cfg)
    torch.testing.assert_close(again, dispatched, rtol=0, atol=0)
    torch.testing.assert_close(first, dispatched, rtol=0, atol=0)
    assert _rel(again, a.double() @ b.double()) < 2e-3
    # new operands of the same signature (other addresses): the same plan, their own result
    a2, b2 = _gemm_inputs()
    assert _rel(mod.matmul(a2, b2, cfg), a2.double() @ b2.double()) < 2e-3
    assert mod.matmul.plans.hits == 3


def test_matmul_fp8_planned_launch_is_bound_and_matches_dispatch():
    for layout in ("column_major_b", "row_major_b"):
        a, b, sa, sb = _fp8_inputs()
        if layout == "row_major_b":
            b = b.contiguous()
        first = gemm_fp8.matmul_fp8(a, b, sa, sb, config=gemm_fp8.CONFIGS[0])
        again = gemm_fp8.matmul_fp8(a, b, sa, sb, config=gemm_fp8.CONFIGS[0])
        with through_dispatch():
            dispatched = gemm_fp8.matmul_fp8(a, b, sa, sb, config=gemm_fp8.CONFIGS[0])
        torch.testing.assert_close(again, dispatched, rtol=0, atol=0)
        torch.testing.assert_close(first, dispatched, rtol=0, atol=0)
        ref = _fp8_ref(a, b, sa, sb)
        assert float((again.double() - ref).abs().max() / ref.abs().max()) < 1e-2
    assert all(p.bound is not None for p in gemm_fp8.matmul_fp8.plans.plans.values())


@pytest.mark.parametrize("causal", [False, True])
def test_attention_planned_launch_is_bound_and_matches_dispatch(causal):
    q, k, v, _ = _attn_inputs()
    cfg = attention.DEFAULTS[(False, causal)]
    o1, lse1 = attention.attention(q, k, v, causal=causal, config=cfg, return_lse=True)
    o2, lse2 = attention.attention(q, k, v, causal=causal, config=cfg, return_lse=True)
    with through_dispatch():
        o3, lse3 = attention.attention(q, k, v, causal=causal, config=cfg, return_lse=True)
    torch.testing.assert_close(o2, o3, rtol=0, atol=0)
    torch.testing.assert_close(lse2, lse3, rtol=0, atol=0)
    torch.testing.assert_close(o1, o3, rtol=0, atol=0)
    assert _rel(o2, _sdpa(q, k, v, causal)) < 1e-2
    assert all(p.bound is not None for p in attention.attention.plans.plans.values())


@pytest.mark.parametrize("causal", [False, True])
def test_attention_backward_planned_launch_is_bound_and_matches(causal):
    q, k, v, do = _attn_inputs()
    o, lse = attention.attention(q, k, v, causal=causal, return_lse=True, config=attention.DEFAULTS[(False, causal)])
    cfg = attention_bwd.default_for(128, causal)
    got = attention_bwd.attention_backward(q, k, v, o, do, lse, causal=causal, config=cfg)
    again = attention_bwd.attention_backward(q, k, v, o, do, lse, causal=causal, config=cfg)
    with through_dispatch():
        dispatched = attention_bwd.attention_backward(q, k, v, o, do, lse, causal=causal, config=cfg)
    _, _, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal, device="cuda")
    for g, a2, d, r in zip(got, again, dispatched, (dq_r, dk_r, dv_r)):
        assert _rel(g, r) < 2e-2 and _rel(a2, r) < 2e-2 and _rel(d, r) < 2e-2   # dQ by atomics: order varies
    assert all(p.bound is not None for p in attention_bwd.launch.plans.plans.values())


# -- CUDA graphs ---------------------------------------------------------------------------------------------------

def _captured(fn):
    """``fn`` warmed up eagerly, then captured in a CUDA graph; returns (graph, outputs of the captured call)."""
    fn()
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def _launcher_calls():
    """(name, callable of no arguments, its eager result) for every public launcher, on fresh inputs."""
    calls = []
    a, b = _gemm_inputs(512, 768, 384)
    for mod in GEMMS:
        calls.append((f"{mod.__name__.rsplit('.', 1)[1]}.matmul", lambda mod=mod: mod.matmul(a, b, mod.CONFIGS[0])))
    fa, fb, sa, sb = _fp8_inputs()
    calls.append(("matmul_fp8", lambda: gemm_fp8.matmul_fp8(fa, fb, sa, sb, config=gemm_fp8.CONFIGS[0])))
    q, k, v, do = _attn_inputs()
    fwd = attention.DEFAULTS[(False, False)]
    bwd = attention_bwd.default_for(128, False)
    calls.append(("attention", lambda: attention.attention(q, k, v, config=fwd)))
    o, lse = attention.attention(q, k, v, config=fwd, return_lse=True)
    calls.append(("attention_backward", lambda: attention_bwd.attention_backward(q, k, v, o, do, lse, config=bwd)))
    calls.append(("attention_with_grad", lambda: attention_bwd.attention_with_grad(q, k, v, do, config=bwd,
                                                                                   fwd_config=fwd)))
    return calls


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _flat(y)]
    return [x]


NAMES = ["gemm_ws.matmul", "gemm_pipelined.matmul", "gemm_pingpong.matmul", "gemm_streamk.matmul",
         "gemm_cluster.matmul", "matmul_fp8", "attention", "attention_backward", "attention_with_grad"]


@pytest.mark.parametrize("name", NAMES)
def test_launcher_in_a_cuda_graph_gives_the_eager_output(name):
    fn = dict(_launcher_calls())[name]
    eager = _flat(fn())
    g, captured = _captured(fn)
    for t in _flat(captured):
        t.fill_(float("nan")) if t.is_floating_point() else None
    g.replay()
    torch.cuda.synchronize()
    exact = name not in ("attention_backward", "attention_with_grad")       # dQ by atomics: order varies
    for e, c in zip(eager, _flat(captured)):
        if exact:
            torch.testing.assert_close(c, e, rtol=0, atol=0)
        else:
            assert _rel(c, e) < 1e-3


# -- torch.compile ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_gemm_under_torch_compile_runs_and_matches(backend):
    torch._dynamo.reset()
    a, b = _gemm_inputs(512, 768, 384)
    bias = torch.randn(768, device="cuda", dtype=torch.float16)

    def f(a, b, bias):
        return torch.relu(gemm_ws.matmul(a, b, gemm_ws.CONFIGS[0]) + bias)
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias), rtol=0, atol=0)
    a2, b2 = _gemm_inputs(512, 768, 384)
    torch.testing.assert_close(compiled(a2, b2, bias), f(a2, b2, bias), rtol=0, atol=0)


def test_every_launcher_under_torch_compile_runs_and_matches():
    torch._dynamo.reset()
    a, b = _gemm_inputs(512, 768, 384)
    fa, fb, sa, sb = _fp8_inputs()
    q, k, v, do = _attn_inputs()
    fwd = attention.DEFAULTS[(False, False)]
    bwd = attention_bwd.default_for(128, False)

    def f(a, b, fa, fb, sa, sb, q, k, v, do):
        outs = [mod.matmul(a, b, mod.CONFIGS[0]) * 2 for mod in GEMMS]
        outs.append(gemm_fp8.matmul_fp8(fa, fb, sa, sb, config=gemm_fp8.CONFIGS[0]) + 1)
        o, (dq, dk, dv) = attention_bwd.attention_with_grad(q, k, v, do, config=bwd, fwd_config=fwd)
        outs += [attention.attention(q, k, v, config=fwd) * 0.5, o, dq, dk, dv]
        return outs
    args = (a, b, fa, fb, sa, sb, q, k, v, do)
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    got, want = compiled(*args), f(*args)
    assert len(got) == len(want)
    for g, w in zip(got[:-3], want[:-3]):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    for g, w in zip(got[-3:], want[-3:]):
        assert _rel(g, w) < 1e-3


def test_reduce_overhead_compile_replays_the_launcher():
    """mode="reduce-overhead": torch.compile's own CUDA graphs around the op."""
    torch._dynamo.reset()
    q, k, v, _ = _attn_inputs()
    fwd = attention.DEFAULTS[(False, False)]

    def f(q, k, v):
        return attention.attention(q, k, v, config=fwd) + 1
    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        out = compiled(q, k, v)
    torch.testing.assert_close(out, f(q, k, v), rtol=0, atol=0)
    assert _rel(out - 1, _sdpa(q, k, v, False)) < 1e-2


def test_a_call_planned_while_dispatch_was_forced_binds_on_a_later_call():
    a, b = _gemm_inputs(384, 256, 128)
    cfg = gemm_ws.CONFIGS[0]
    with through_dispatch():
        first = gemm_ws.matmul(a, b, cfg)
    plan = gemm_ws.matmul.plans.plans[(host.operand_key(a, b), host.config_key(cfg))]
    assert plan.launch is None                   # the launch plan was not kept unbound
    again = gemm_ws.matmul(a, b, cfg)
    assert plan.launch is not None and plan.launch.bound is not None
    torch.testing.assert_close(again, first, rtol=0, atol=0)


def test_a_bad_input_on_a_planned_signature_gets_the_friendly_error():
    """A view at an odd offset with the shape, strides and dtype of a planned call: refused by name, not launched
    (TMA would fault, or Triton's kernel compiled for aligned addresses would read the wrong bytes)."""
    from tlx_workbench.errors import TLXWorkbenchError
    a, b = _gemm_inputs(256, 256, 256)
    gemm_ws.matmul(a, b, gemm_ws.CONFIGS[0])
    flat = torch.randn(256 * 256 + 1, device="cuda", dtype=torch.float16)
    odd = flat[1:].view(256, 256)
    with pytest.raises(TLXWorkbenchError, match="16-byte aligned"):
        gemm_ws.matmul(odd, b, gemm_ws.CONFIGS[0])
    with pytest.raises(TLXWorkbenchError, match="one device"):
        gemm_ws.matmul(a, b.cpu(), gemm_ws.CONFIGS[0])
