"""Waves (sim/schedule/batch.py) against one CTA at a time: the same launch on the same inputs, both paths; the output bits,
findings, deadlock reports, CTAs, stats and the whole trace must be identical (``_both`` runs, ``_same`` compares).

Covered, at small shapes with a few CTAs: the wheel's tutorials the simulator runs and the library kernels
(persistent kernels whose CTAs walk different tile counts and causal attention, so that waves split); launches that
must run one CTA at a time (clusters, CLC, stream-K with every CTA resident, atomics, a CTA with a finding) say why;
the seeded protocol bugs (sim_seeded_kernels.py, sim_cluster_kernels.py, diagnosis/seeded_bugs.py) on several CTAs;
small kernels whose control flow, data or bug differs between CTAs; several schedules. Inputs are fresh random each
run; the one-CTA-at-a-time run gets clones of them.
"""
import dataclasses
import gc
import math
import re
import weakref

import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

import seeded_bugs as sb
import sim_cluster_kernels as ck
import sim_seeded_kernels as sk
import tlx_workbench as wb
from tlx_workbench.kernels import (attention, attention_bwd, gemm_cluster, gemm_fp8, gemm_pingpong, gemm_pipelined,
                                   gemm_streamk, gemm_ws)
from tlx_workbench.sim import simulate
from tlx_workbench.target import GPU_MODELS
from test_blackwell import WS_BASE, _hstu_inputs, _hstu_reference


# -- the two paths --------------------------------------------------------------------------------------------------
def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, TensorDescriptor):
        return dataclasses.replace(x, base=x.base.clone())
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _both(fn, *args, **kw):
    """``simulate(fn, *args, **kw)`` in waves and one CTA at a time (on clones of the inputs); the two results, each
    with ``.inputs``: its arguments after the run (kernels write their outputs into them)."""
    twin = _clone(args)
    r_waves = simulate(fn, *args, waves=True, **kw)
    r_one = simulate(fn, *twin, waves=False, **kw)
    r_waves.inputs, r_one.inputs = args, twin
    return r_waves, r_one


def _bits(t):
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def _same_values(a, b, what):
    if isinstance(a, TensorDescriptor):
        a, b = a.base, b.base
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, what
        if not torch.equal(_bits(a), _bits(b)):
            diff = (_bits(a) != _bits(b)).nonzero()
            first = int(diff[0]) // a.element_size()
            raise AssertionError(f"{what}: {len(diff)} byte(s) differ; first at flat element {first}: waves "
                                 f"{a.reshape(-1)[first].item()!r}, one CTA at a time {b.reshape(-1)[first].item()!r}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            _same_values(x, y, f"{what}[{i}]")
    else:
        assert a == b, f"{what}: {a!r} (waves) != {b!r} (one CTA at a time)"


def _finding(f):
    return dict(kind=f.kind, line=f.line, other_line=f.other_line, message=f.message, severity=f.severity)


def _same_records(a, b, what):
    """Trace records (spans, barrier events, counters), field by field, in order: the first that differs."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x.__dict__ != y.__dict__:
            fields = {k: (x.__dict__.get(k), y.__dict__.get(k)) for k in x.__dict__.keys() | y.__dict__.keys()
                      if x.__dict__.get(k) != y.__dict__.get(k)}
            raise AssertionError(f"{what}[{i}] is the first that differs, in {fields} (waves, one at a time):\n"
                                 f"  waves:          {x.__dict__}\n  one at a time:  {y.__dict__}")
    assert len(a) == len(b), f"{what}: {len(a)} in waves, {len(b)} one CTA at a time (the common ones are equal)"


def _same(r_waves, r_one):
    """The contract: the two paths agree on values (bits), findings, deadlock, CTAs, stats and the trace."""
    if all(r.deadlock is None for r in r_waves.launches + r_one.launches):
        # (a host function's torch.empty output holds whatever memory held where a deadlocked launch left it)
        _same_values(r_waves.value, r_one.value, "the host function's return value")
    _same_values(r_waves.inputs, r_one.inputs, "the arguments after the run")
    assert [r.kernel for r in r_waves.launches] == [r.kernel for r in r_one.launches]
    for i, (w, o) in enumerate(zip(r_waves.launches, r_one.launches)):
        at = f"launch {i} ({w.kernel}, grid {w.grid})"
        assert "waves" not in o.trace.meta, f"{at}: the one-CTA-at-a-time path says {o.trace.meta['waves']!r}"
        assert w.grid == o.grid and w.cluster_dims == o.cluster_dims, at
        assert w.ctas == o.ctas, f"{at}: CTAs {w.ctas} in waves, {o.ctas} one at a time"
        fw, fo = [_finding(f) for f in w.findings], [_finding(f) for f in o.findings]
        assert fw == fo, f"{at}: findings differ\n  waves:         {fw}\n  one at a time: {fo}"
        assert (w.deadlock is None) == (o.deadlock is None), \
            f"{at}: deadlock in waves: {w.deadlock is not None}, one at a time: {o.deadlock is not None}"
        if w.deadlock is not None:
            assert w.deadlock.text() == o.deadlock.text(), f"{at}: deadlock reports differ"
            assert (w.deadlock.line, w.deadlock.message) == (o.deadlock.line, o.deadlock.message), at
        assert w.schedules == o.schedules and w.clc_steals == o.clc_steals, at
        assert w.atomic_ordering == o.atomic_ordering, at
        assert w.stats == o.stats, f"{at}: stats differ\n  waves:         {w.stats}\n  one at a time: {o.stats}"
        assert getattr(w, "cta_cycles", None) == getattr(o, "cta_cycles", None), f"{at}: cta_cycles differ"
        _same_records(w.trace.spans, o.trace.spans, f"{at}: trace.spans")
        _same_records(w.trace.barrier_events, o.trace.barrier_events, f"{at}: trace.barrier_events")
        _same_records(w.trace.counters, o.trace.counters, f"{at}: trace.counters")


def _expect(res, expect):
    """``expect`` ("waves": ran in waves; "one": fell back to one CTA at a time and says why; None: either; or a dict
    of these by kernel name) holds for every launch of more than one CTA."""
    for r in res.launches:
        e = expect.get(r.kernel) if isinstance(expect, dict) else expect
        if len(r.ctas) <= 1 or e is None:
            continue
        why = r.trace.meta.get("waves")
        if e == "waves":
            assert why is None, f"{r.kernel} (grid {r.grid}) fell back: {why}"
        else:
            assert why, f"{r.kernel} (grid {r.grid}, clusters of {r.cluster_dims}, {len(r.ctas)} CTAs) did not run " \
                        f"in waves but res.trace.meta has no 'waves' reason: {r.trace.meta}"


# -- inputs and references ------------------------------------------------------------------------------------------
def _f16(*shape):
    return torch.randn(*shape, dtype=torch.float16)


def _mm(a, b):
    return a.float() @ b.float()


def _close(got, ref, atol=2e-2, rtol=1e-2):
    torch.testing.assert_close(got.float() if got.dtype != ref.dtype else got, ref, atol=atol, rtol=rtol)


def _sdpa(q, k, v, scale=0.5, causal=False):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=scale,
                                                           is_causal=causal)


def _sms(gpu, n):
    """``gpu`` with ``n`` SMs: a persistent kernel's grid is min(SMs, tiles), so its CTAs walk different tile counts."""
    return dataclasses.replace(GPU_MODELS[gpu], sm_count=n)


# -- the wheel's tutorials ------------------------------------------------------------------------------------------
# each case: (tutorial, make(mod) -> (fn, args, simulate kwargs, check(value, args) or None), expect)
# expect: "waves" (every multi-CTA launch ran in waves), "one" (it fell back and says why), None (either)
def _gemm_case(fn_name, m, n, k, *extra, gpu="H100", **kw):
    def make(mod):
        a, b = _f16(m, k), _f16(k, n)
        return getattr(mod, fn_name), (a, b, *extra), dict(gpu=gpu, **kw), lambda c, args: _close(c, _mm(*args[:2]))
    return make


def _fa_case(shape, *extra, gpu="H100", causal=False):
    def make(mod):
        q, k, v = (_f16(*shape) for _ in range(3))
        return (mod.attention, (q, k, v, 0.5, *extra), dict(gpu=gpu),
                lambda o, args: _close(o, _sdpa(*args[:3], causal=causal), atol=1e-2))
    return make


def _vector_add2(mod):
    def both(x, y, a, b):
        return mod.add2(x, y, a, b), mod.add2_warp_specialized(x, y, a, b)

    def check(value, args):
        x, y, a, b = args
        for o1, o2 in value:
            torch.testing.assert_close(o1, x + y)
            torch.testing.assert_close(o2, a + b)
    return both, tuple(torch.rand(3000) for _ in range(4)), {}, check


def _hstu(variant):
    def make(mod):
        lens_kv, lens_q = (200, 96), (40, 17)
        q, k, v, so, soq = _hstu_inputs(lens_kv, lens_q)
        alpha = 1.0 / 128 ** 0.5

        def check(o, args):
            ref = _hstu_reference(*args[2:7], alpha, max(lens_kv))
            torch.testing.assert_close(o.double(), ref, atol=2e-7, rtol=1e-2)
        return (mod.hstu_cross_mha, (max(lens_kv), alpha, q, k, v, so, soq, torch.tensor(1.0 / max(lens_kv)),
                                     variant), dict(gpu="B200", max_q_len=max(lens_q)), check)
    return make


def _gdpa(mod):
    lq, lk = [150, 70], [160, 160]
    qo, ko = (torch.tensor([0, *torch.tensor(x).cumsum(0).tolist()], dtype=torch.int32) for x in (lq, lk))
    q = (torch.rand(int(qo[-1]), 2, 128) - 0.5).to(torch.bfloat16)
    k, v = ((torch.rand(int(ko[-1]), 2, 128) - 0.5).to(torch.bfloat16) for _ in range(2))
    return mod.gdpa_forward_tlx, (q, k, v, qo, ko, max(lq), max(lk)), dict(gpu="B200", activation="fast_gelu"), None


def _grouped_gemm(cfg):
    def make(mod):
        sizes = [256, 128]
        A, B = [_f16(n, n) for n in sizes], [_f16(n, n) for n in sizes]

        def check(cs, args):
            for a, b, c in zip(*args, cs):
                _close(c, _mm(a, b))
        return mod.group_gemm_tlx_fn, (A, B), dict(gpu=_sms("B200", 4), config=cfg), check
    return make


def _layernorm(mod):
    x, w, b = _f16(2, 1024), _f16(1024), _f16(1024)

    def check(value, args):
        ref = torch.nn.functional.layer_norm(x.double(), (1024,), w.double(), b.double(), 1e-5)
        torch.testing.assert_close(value[0].double(), ref, atol=1e-2, rtol=1e-2)
    return mod.multi_cta_layernorm, (x, w, b, 1e-5), dict(gpu="B200"), check


def _tut(name, make, expect, id=None):
    return pytest.param(name, make, expect, id=id or name)


TUTORIALS = [
    # Hopper: in waves
    _tut("hopper_gemm_pipelined", _gemm_case("matmul", 256, 256, 128), "waves"),
    _tut("hopper_gemm_ws", _gemm_case("matmul", 256, 256, 128), "waves"),
    # clusters of 2 CTAs, A multicast to both: four clusters, the TMA data lands in each target CTA
    _tut("hopper_gemm_ws", _gemm_case("matmul", 512, 512, 128, config={
        "NUM_CTAS": 2, "BM": 128, "BN": 128, "GROUP_SIZE_M": 8, "USE_WARP_BARRIER": False,
        "EPILOGUE_SUBTILE": False}), "waves", id="hopper_gemm_ws-multicast"),
    # 6 tiles on 4 SMs: two persistent CTAs walk 2 tiles, two walk 1
    _tut("hopper-persistent-gemm-ws-cooperative",
         _gemm_case("matmul_tlx_ws_persistent", 384, 512, 128, gpu=_sms("H100", 4)), "waves"),
    _tut("hopper-persistent-gemm-ws-pingpong",
         _gemm_case("matmul_tlx_ws_persistent", 384, 256, 128, gpu=_sms("H100", 4)), "waves"),
    _tut("hopper_fa_ws", _fa_case((1, 2, 256, 128)), "waves"),
    _tut("hopper_fa_ws_pipelined", _fa_case((1, 2, 256, 128)), "waves"),
    _tut("hopper_fa_ws_pipelined_pingpong", _fa_case((1, 2, 256, 128)), "waves"),
    # 6 query tiles on 4 SMs
    _tut("hopper_fa_ws_pipelined_pingpong_persistent", _fa_case((1, 3, 256, 128), gpu=_sms("H100", 4)), "waves"),
    _tut("vector-add2", _vector_add2, "waves"),
    _tut("amd-gemm-pipelined_test", _gemm_case("matmul", 64, 64, 64, gpu="H200"), "waves"),
    # Blackwell (TMEM, tcgen05, inline PTX): in waves where the tape replays them, else one CTA at a time
    _tut("blackwell_gemm_pipelined", _gemm_case("matmul", 256, 256, 128, gpu="B200", config=0), None),
    _tut("blackwell_gemm_ws", _gemm_case("matmul", 256, 128, 128, WS_BASE, gpu="B200"), None),
    _tut("blackwell_fa_ws", _fa_case((1, 2, 256, 128), gpu="B200"), None),
    _tut("blackwell_fa_ws_pipelined", _fa_case((1, 2, 256, 128), True, gpu="B200", causal=True), None,
         id="blackwell_fa_ws_pipelined-causal"),
    _tut("blackwell_fa_ws_persistent", _fa_case((1, 2, 256, 128), True, gpu=_sms("B200", 3), causal=True), None,
         id="blackwell_fa_ws_persistent-causal"),
    _tut("blackwell_fa_ws_pipelined_persistent", _fa_case((1, 2, 256, 128), False, 64, 1, gpu="B200"), None),
    _tut("blackwell-cross-attention", _hstu("tlx_pipeline"), None, id="blackwell-cross-attention-tlx"),
    _tut("blackwell-cross-attention", _hstu("triton"), None, id="blackwell-cross-attention-triton"),
    _tut("blackwell-grouped-gemm_test", _grouped_gemm(0), None, id="blackwell-grouped-gemm-1cta"),
    # a race (its epilogue reads O without waiting), clusters, CLC: one CTA at a time, saying why
    _tut("blackwell-gdpa", _gdpa, "one"),
    _tut("blackwell-grouped-gemm_test", _grouped_gemm(dict(BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, NUM_SMEM_BUFFERS=3,
                                                           EPILOGUE_SUBTILE=4, NUM_CTAS=2)), "one",
         id="blackwell-grouped-gemm-2cta"),
    # clusters of (4, 2, 1) CTAs, MMA pairs: four clusters, one leads and three replay it
    _tut("blackwell_gemm_2cta", _gemm_case("matmul", 2048, 256, 128, gpu="B200"), "waves"),
    _tut("blackwell_gemm_clc", _gemm_case("matmul", 256, 512, 128, gpu="B200", config=0), "waves"),
    # more tiles than SMs: 16 tiles on 6 SMs, 6 CTAs start and their try_cancels take the other 10 (sim/hardware/clc.py);
    # four CTAs walk 3 tiles, two walk 2
    _tut("blackwell_gemm_clc", _gemm_case("matmul", 512, 512, 64, gpu=_sms("B200", 6), config=0), "waves",
         id="blackwell_gemm_clc-steals"),
    _tut("blackwell-multi-cta-layernorm_test", _layernorm, "one"),
]
# not here: blackwell_fa_ws_pipelined_persistent_mxfp8 (its inputs need torchao, not installed)
TUTORIAL_CASES = {p.id: p.values for p in TUTORIALS}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")       # blackwell-gdpa's racy schedule feeds NaNs to MMAs
@pytest.mark.parametrize("name,make,expect", TUTORIALS)
def test_tutorial(tutorial, name, make, expect):
    mod = tutorial(name, any_cluster_shape=name == "blackwell-multi-cta-layernorm_test")
    fn, args, kw, check = make(mod)
    r_waves, r_one = _both(fn, *args, **kw)
    _same(r_waves, r_one)
    if check is not None:
        check(r_waves.value, r_waves.inputs)
    assert any(len(r.ctas) > 1 for r in r_waves.launches), "pick a shape with more than one CTA"
    _expect(r_waves, expect)


# -- the library kernels --------------------------------------------------------------------------------------------
def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


def _lib_gemm(mod, cfg, m, n, k, **launch_kw):
    def host(a, b):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        mod.launch(a, b, c, mod.SIM_CONFIGS[cfg], **launch_kw)
        return c

    def check(c, args):
        assert _rel(c, args[0].double() @ args[1].double()) < 2e-3
    return host, (_f16(m, k), _f16(k, n)), {}, check


def _lib_fp8(cfg, m, n, k):
    a, b, sa, sb_ = gemm_fp8.make_inputs((m, n, k), "float8_e4m3fn", rowwise=True)

    def host(a, b, sa, sb_):
        c = torch.full((m, n), float("nan"), dtype=torch.bfloat16)
        gemm_fp8.launch(a, gemm_fp8.k_major_b(b), c, sa, sb_, gemm_fp8.SIM_CONFIGS[cfg], num_sms=2)
        return c

    def check(c, args):
        ref = gemm_fp8.reference(*args, torch.float64)
        assert float(((c.double() - ref).abs() / (ref.abs() + 1e-3 * ref.abs().max())).max()) <= 1.05 * 2 ** -8
    return host, (a, b, sa, sb_), {}, check


def _lib_attention(cfg, shape, causal, **launch_kw):
    def host(q, k, v):
        o = torch.full_like(q, float("nan"))
        attention.launch(q, k, v, o, causal, 1 / math.sqrt(shape[-1]), attention.SIM_CONFIGS[cfg], **launch_kw)
        return o

    def check(o, args):
        assert _rel(o, attention.reference(*(t.double() for t in args), causal=causal)) < 3e-3
    return host, tuple(_f16(*shape) for _ in range(3)), {}, check


def _lib_attention_bwd(cfg, shape, causal):
    q, k, v, do = attention_bwd.make_inputs(shape, torch.float16, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)

    def host(q, k, v, o, do, lse):
        return attention_bwd.launch(q, k, v, o, do, lse, causal, 1 / math.sqrt(shape[-1]),
                                    attention_bwd.SIM_CONFIGS[cfg])

    def check(grads, args):
        for got, ref in zip(grads, (dq_r, dk_r, dv_r)):
            assert _rel(got, ref) < 2e-3
    return host, (q, k, v, o.half(), do, lse.float()), {}, check


BWD = {"attention_bwd_delta_kernel": "waves", "attention_bwd_kernel": "one"}
LIBRARY = [
    # 6 tiles of 64 x 64, ragged in M, N and K: not persistent, the CTAs differ in their masks
    pytest.param(lambda: _lib_gemm(gemm_pipelined, "tiny", 136, 72, 72), "waves", id="gemm_pipelined"),
    # 9 tiles on 2 persistent CTAs: one walks 5, the other 4
    pytest.param(lambda: _lib_gemm(gemm_ws, "tiny", 300, 136, 72, num_sms=2), "waves", id="gemm_ws"),
    pytest.param(lambda: _lib_gemm(gemm_ws, "split_wait0", 300, 136, 72, num_sms=2), "waves", id="gemm_ws-split"),
    pytest.param(lambda: _lib_gemm(gemm_pingpong, "tiny", 200, 136, 72, num_sms=2), "waves", id="gemm_pingpong"),
    pytest.param(lambda: _lib_fp8("tiny", 200, 136, 80), "waves", id="gemm_fp8"),
    pytest.param(lambda: _lib_fp8("pingpong", 200, 136, 80), "waves", id="gemm_fp8-pingpong"),
    # causal: the CTAs of the lower query tiles see fewer K/V blocks
    pytest.param(lambda: _lib_attention("tiny", (1, 2, 200, 64), True), "waves", id="attention-causal"),
    pytest.param(lambda: _lib_attention("blocks_of_32", (1, 2, 200, 64), False), "waves", id="attention"),
    # 6 query tiles, zig-zag pairs over 2 persistent CTAs, causal
    pytest.param(lambda: _lib_attention("persistent_zigzag", (1, 3, 200, 64), True, num_sms=2), "waves",
                 id="attention-persistent-zigzag-causal"),
    # three launches: the persistent kernel, the split tail, the merge
    pytest.param(lambda: _lib_attention("persistent_split_tail", (1, 2, 200, 64), False, num_sms=3), None,
                 id="attention-split-tail"),
    # dQ by fp32 atomics, or by TMA reduce: one CTA at a time (the delta kernel before it runs in waves)
    pytest.param(lambda: _lib_attention_bwd("tiny", (1, 2, 136, 64), True), BWD, id="attention_bwd"),
    pytest.param(lambda: _lib_attention_bwd("dq_tma", (1, 2, 136, 128), False), BWD, id="attention_bwd-dq_tma"),
    # clusters of 2 CTAs
    pytest.param(lambda: _lib_gemm(gemm_cluster, "tiny", 200, 264, 72, num_sms=4), "waves", id="gemm_cluster"),
]


@pytest.mark.parametrize("make,expect", LIBRARY)
def test_library_kernel(make, expect):
    fn, args, kw, check = make()
    r_waves, r_one = _both(fn, *args, gpu="H200", **kw)
    _same(r_waves, r_one)
    check(r_waves.value, r_waves.inputs)
    _expect(r_waves, expect)


@pytest.mark.parametrize("name,shape,G", [("tiny", (300, 136, 200), 4), ("split_wait0", (200, 200, 104), 3)])
def test_streamk_with_every_cta_resident(name, shape, G):
    # resident=G: an owner waits for later CTAs' flags (spin-waits on atomics), so every CTA runs at once
    m, n, k = shape

    def host(a, b):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        gemm_streamk.launch(a, b, c, gemm_streamk.SIM_CONFIGS[name], num_sms=G)
        return c
    r_waves, r_one = _both(host, _f16(m, k), _f16(k, n), gpu="H200", resident=G)
    _same(r_waves, r_one)
    a, b = r_waves.inputs
    assert _rel(r_waves.value, a.double() @ b.double()) < 2e-3
    _expect(r_waves, "one")


# -- waves ran, and split -------------------------------------------------------------------------------------------
def _spans_per_cta(res):
    out = {}
    for s in res.trace.spans:
        out[s.cta] = out.get(s.cta, 0) + 1
    return out


@pytest.mark.parametrize("which", ["hopper_gemm_ws", "hopper_fa_ws", "gemm_ws"])
def test_waves_run_for_hopper_kernels(tutorial, which):
    if which == "gemm_ws":
        fn, args, kw, _ = _lib_gemm(gemm_ws, "tiny", 300, 136, 72, num_sms=2)
        kw = dict(kw, gpu="H200")
    else:
        _, make, _ = TUTORIAL_CASES[which]
        fn, args, kw, _ = make(tutorial(which))
    res = simulate(fn, *args, waves=True, **kw)
    assert len(res.ctas) > 1, res
    assert "waves" not in res.trace.meta, res.trace.meta["waves"]
    assert res.ok, res
    if which == "gemm_ws":
        # 5 tiles and 4 tiles: the CTAs' records differ, so they ran in two waves
        counts = _spans_per_cta(res)
        assert len(set(counts.values())) > 1, counts


def test_a_dropped_result_frees_its_trace_at_once(tutorial):
    # a launch's CTAs, barriers, buffers and tasks reference each other; cut from the result, its trace goes when the
    # result does, not at a later full collection (which walked all its records, often inside a later launch)
    _, make, _ = TUTORIAL_CASES["hopper_gemm_ws"]
    fn, args, kw, _ = make(tutorial("hopper_gemm_ws"))
    was = gc.isenabled()
    gc.disable()
    try:
        for waves, read in [(True, False), (True, True), (False, True)]:
            res = simulate(fn, *args, waves=waves, **kw)
            assert len(res.ctas) > 1 and res.ok, res
            if read:
                assert res.trace.spans
            trace = weakref.ref(res.trace)
            del res
            assert trace() is None, (waves, read)
    finally:
        if was:
            gc.enable()


# -- seeded bugs: the same diagnosis on both paths --------------------------------------------------------------------
BM, BK, STAGES, N_TILES = 64, 32, 2, 6


def _copy_pipeline(bug, schedules=1):
    x = torch.randn(N_TILES * BM, BK, dtype=torch.float16)
    desc = TensorDescriptor(x, shape=list(x.shape), strides=[BK, 1], block_shape=[BM, BK])
    return _both(sk.copy_pipeline, desc, torch.zeros_like(x), N_TILES, BM=BM, BK=BK, STAGES=STAGES, BUG=bug,
                 grid=(2,), on_deadlock="return", schedules=schedules)


@pytest.mark.parametrize("bug", ["", "arrive_count", "phase", "dropped_arrive", "expect_bytes", "expect_too_few",
                                 "early_release"])
def test_seeded_copy_pipeline(bug):
    r_waves, r_one = _copy_pipeline(bug)
    _same(r_waves, r_one)
    assert r_waves.ok == (bug == ""), r_waves
    if bug:
        _expect(r_waves, "one")
    else:
        _expect(r_waves, "waves")
        x, out = r_waves.inputs[0].base, r_waves.inputs[1]
        assert torch.equal(out, x)


@pytest.mark.parametrize("kernel,kw", [
    (sk.named_barrier_handoff, dict(BLOCK=128, COUNT=256)),
    (sk.named_barrier_handoff, dict(BLOCK=128, COUNT=128)),
    (sk.run_ahead, dict(BLOCK=64)),
], ids=["named-barrier", "named-barrier-count", "run-ahead"])
def test_seeded_small_kernels(kernel, kw):
    r_waves, r_one = _both(kernel, torch.zeros(kw["BLOCK"]), **kw, grid=(3,), on_deadlock="return", schedules=4)
    _same(r_waves, r_one)
    assert r_waves.ok == (kw.get("COUNT") == 256), r_waves


@pytest.mark.parametrize("bug", ["", "expect_one"])
def test_seeded_two_loads_one_barrier(bug):
    a, b = (torch.randn(BM, BK, dtype=torch.float16) for _ in range(2))
    descs = [TensorDescriptor(t, shape=[BM, BK], strides=[BK, 1], block_shape=[BM, BK]) for t in (a, b)]
    r_waves, r_one = _both(sk.two_loads_one_barrier, *descs, torch.zeros(BM, BK, dtype=torch.float16), BM=BM, BK=BK,
                           BUG=bug, grid=(2,), on_deadlock="return")
    _same(r_waves, r_one)
    assert r_waves.ok == (bug == ""), r_waves


@pytest.mark.parametrize("bug", ["", "expect_both", "count1", "peer_waits"])
def test_seeded_2cta_gemm(bug):
    a, b = _f16(512, 128), _f16(128, 128)                # two clusters of 2 CTAs
    ad = TensorDescriptor(a, list(a.shape), [128, 1], [128, 64])
    bd = TensorDescriptor(b, list(b.shape), [128, 1], [64, 64])
    r_waves, r_one = _both(ck.gemm_2cta, ad, bd, torch.zeros(512, 128), 128, BM=128, BN=128, BK=64, BUG=bug,
                           grid=(4,), ctas_per_cga=(2, 1, 1), gpu="B200", on_deadlock="return")
    _same(r_waves, r_one)
    _expect(r_waves, "waves" if bug == "" else "one")         # a finding: diagnosed one cluster at a time


# the diagnosis suite's seeded copies of TLX's hopper_gemm_ws, hopper_fa_ws_pipelined_pingpong and our gemm_ws,
# on inputs of several CTAs (the suite's own GEMM input is one tile)
def _diagnosis_inputs(kernel):
    if kernel == sb.G:
        return (_f16(128, 512), _f16(512, 256)), dict(gpu="H200")           # 2 tiles, the ring wraps
    if kernel in (sb.FA, sb.FW, sb.FP):
        return tuple(_f16(1, 1, 512, 128) for _ in range(3)) + (0.5,), dict(gpu="H200")
    if kernel == sb.GC:
        return (_f16(384, 256), _f16(256, 512)), dict(gpu=_sms("H200", 4))  # 6 tiles on 4 SMs
    return (_f16(256, 128), _f16(128, 256)), dict(gpu="H200")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("bug", sb.BUGS, ids=[b.id for b in sb.BUGS])
def test_seeded_diagnosis_suite(bug):
    s = sb.seeded_copy(bug)
    mod = s.module
    if bug.kernel == sb.G:
        fn = mod.matmul
    elif bug.kernel in (sb.FA, sb.FW, sb.FP):
        fn = mod.attention
    elif bug.kernel == sb.GC:
        fn = mod.matmul_tlx_ws_persistent
    else:
        fn = sb._ours_host(mod, sb._ours_cfg(mod, bug.kernel == sb.OWB))
    args, kw = _diagnosis_inputs(bug.kernel)
    r_waves, r_one = _both(fn, *args, on_deadlock="return", **kw)
    _same(r_waves, r_one)
    assert not r_waves.ok, (bug.id, r_waves)
    _expect(r_waves, "one")


# -- small kernels: control flow, data and bugs that differ between CTAs --------------------------------------------
@triton.jit
def _loop_by_data(n_ptr, x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    for _ in range(tl.load(n_ptr + pid)):              # a trip count each CTA loads
        acc = tl.exp(-acc * acc) + 0.5
    tl.store(out_ptr + pid * BLOCK + offs, acc)


@triton.jit
def _slot_by_data(i_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 2)
    i = tl.load(i_ptr + pid)                           # an SMEM slot each CTA loads
    tlx.local_store(buf[i], tl.arange(0, BLOCK).to(tl.float32) + pid)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tlx.local_load(buf[i]))


@triton.jit
def _mask_by_data(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x * 2, mask=x > 0)        # as many bytes in every CTA, other elements


def _signs(ctas, block):
    return torch.cat([torch.tensor([1.0, -1.0] * (block // 2))[torch.randperm(block)] for _ in range(ctas)])


@pytest.mark.parametrize("kernel,inputs", [
    (_loop_by_data, lambda: (torch.tensor([2, 3, 2, 1], dtype=torch.int32), torch.randn(32), torch.zeros(128))),
    (_slot_by_data, lambda: (torch.tensor([0, 1, 1, 0], dtype=torch.int32), torch.zeros(128))),
    (_mask_by_data, lambda: (_signs(4, 32) * torch.rand(128), torch.full((128,), float("nan")))),
], ids=["trip-count", "smem-slot", "mask"])
def test_control_flow_and_data_by_cta(kernel, inputs):
    r_waves, r_one = _both(kernel, *inputs(), BLOCK=32, grid=(4,))
    _same(r_waves, r_one)
    _expect(r_waves, "waves")


@triton.jit
def _one_cta_differs(out_ptr, BLOCK: tl.constexpr, BUG: tl.constexpr):
    """CTA 2 alone: arrive_count 2 with one arrival ("count"), no arrival ("no_arrive"), no wait ("no_wait")."""
    pid = tl.program_id(0)
    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)
    if BUG == "count":
        bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1 + (pid == 2).to(tl.int32))
    else:
        bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(buf[0], tl.arange(0, BLOCK).to(tl.float32) + pid)
            if BUG != "no_arrive" or pid != 2:
                tlx.barrier_arrive(bar[0])
        with tlx.async_task(num_warps=4):
            if BUG != "no_wait" or pid != 2:
                tlx.barrier_wait(bar[0], 0)
            tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tlx.local_load(buf[0]))


@pytest.mark.parametrize("bug", ["count", "no_arrive", "no_wait"])
def test_a_bug_in_one_cta_only(bug):
    # CTA 0 leads clean; CTA 2 leaves the wave at the guard, deadlocks or races when it leads: one CTA at a time
    r_waves, r_one = _both(_one_cta_differs, torch.zeros(4 * 32), BLOCK=32, BUG=bug, grid=(4,), on_deadlock="return")
    _same(r_waves, r_one)
    if bug == "no_wait":
        assert r_waves.races and r_waves.deadlock is None, r_waves
    else:
        assert r_waves.deadlock is not None and r_waves.deadlock.cta == 2, r_waves
    _expect(r_waves, "one")


@triton.jit
def _oob_in_cta_2(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + (pid == 2) * 100_000, tl.load(x_ptr + offs))


def test_an_out_of_bounds_store_in_one_cta_is_the_same_error():
    errors = []
    for waves in (True, False):
        with pytest.raises(wb.SimulationError) as ei:
            simulate(_oob_in_cta_2, torch.randn(128), torch.zeros(128), BLOCK=32, grid=(4,), waves=waves)
        errors.append((ei.value.line, re.sub(r"0x[0-9a-f]+", "ADDR", ei.value.message), ei.value.hint))
    assert errors[0] == errors[1], errors


@triton.jit
def _ragged_store(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)                          # in bounds in every CTA: the leader's bytes
    tl.store(y_ptr + offs, x, mask=offs < n)           # CTA 2 stores fewer bytes than its leader, CTA 3 none


def test_a_cta_that_stores_fewer_bytes_than_its_leader():
    # the wave's members 1, 2, 3 store together; member 2 fails its bytes guard in the middle of that store
    r_waves, r_one = _both(_ragged_store, torch.randn(128), torch.zeros(128), 80, BLOCK=32, grid=(4,))
    _same(r_waves, r_one)
    x, y, _ = r_waves.inputs
    assert torch.equal(y[:80], x[:80]) and not y[80:].any()


@triton.jit
def _odd_ctas_load_less(x_ptr, out_ptr, BLOCK: tl.constexpr, SHORT: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * BLOCK + offs, mask=offs < BLOCK - (pid % 2) * SHORT, other=0.0)
    tl.store(out_ptr + pid * BLOCK + offs, x)


def test_stats_add_up_in_launch_order():
    # CTAs 0 and 2 run one wave, CTAs 1 and 3 the next (their loads move fewer bytes, so other cycles): the stats
    # are float sums over CTAs, which must be added in launch order (0, 1, 2, 3) as one CTA at a time adds them
    for short in range(1, 40, 3):
        r_waves, r_one = _both(_odd_ctas_load_less, torch.randn(4 * 256), torch.zeros(4 * 256), BLOCK=256,
                               SHORT=short, grid=(4,))
        _same(r_waves, r_one)


@triton.jit
def _running_sum_over_ctas(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """out[p] = out[p - 1] + x[p]: each CTA reads the block the CTA before it stored (a race on a GPU, where CTAs
    run at once; one CTA at a time, in launch order, it is a running sum)."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    prev = tl.load(out_ptr + (pid - 1) * BLOCK + offs, mask=(offs < BLOCK) & (pid > 0), other=0.0)
    tl.store(out_ptr + pid * BLOCK + offs, prev + tl.load(x_ptr + pid * BLOCK + offs))


def test_a_cta_reading_what_another_cta_of_the_launch_stored():
    r_waves, r_one = _both(_running_sum_over_ctas, torch.randn(4 * 32), torch.zeros(4 * 32), BLOCK=32, grid=(4,))
    _same(r_waves, r_one)


@triton.jit
def _tiles_from_the_program_id(desc, out_ptr, n_tiles, BM: tl.constexpr, BK: tl.constexpr):
    buf = tlx.local_alloc((BM, BK), tl.float16, 1)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BK)
    phase = 0
    for i in range(tl.program_id(0), n_tiles, 2):      # a persistent loop: its variable depends on the CTA
        tlx.barrier_expect_bytes(bar[0], BM * BK * 2)
        tlx.async_descriptor_load(desc, buf[0], [i * BM, 0], bar[0])
        tlx.barrier_wait(bar[0], phase)
        phase = phase ^ 1
        tl.store(out_ptr + (i * BM + rows)[:, None] * BK + cols[None, :], tlx.local_load(buf[0]))


def test_a_loop_from_the_program_id_feeding_descriptor_offsets():
    x = torch.randn(5 * 64, 32, dtype=torch.float16)              # 5 tiles on 2 CTAs: 3 and 2
    desc = TensorDescriptor(x, list(x.shape), [32, 1], [64, 32])
    r_waves, r_one = _both(_tiles_from_the_program_id, desc, torch.zeros_like(x), 5, BM=64, BK=32, grid=(2,))
    _same(r_waves, r_one)
    assert torch.equal(r_waves.inputs[1], x)


# -- several schedules ------------------------------------------------------------------------------------------------
def test_three_schedules_clean_kernel(tutorial):
    mod = tutorial("hopper_gemm_ws")
    a, b = _f16(256, 128), _f16(128, 256)
    r_waves, r_one = _both(mod.matmul, a, b, gpu="H100", schedules=3)
    _same(r_waves, r_one)
    assert r_waves.ok and len(r_waves.schedules) == 3, r_waves
    _expect(r_waves, "waves")
    _close(r_waves.value, _mm(a, b))


def test_three_schedules_racy_kernel():
    r_waves, r_one = _copy_pipeline("early_release", schedules=3)
    _same(r_waves, r_one)
    assert r_waves.races and len(r_waves.schedules) == 3, r_waves
