"""The attention backward kernel (and the forward's log-sum-exp output it takes) on the CPU simulator at
small shapes, ragged ones included, against float64 torch autograd; and its sm_90 offline compile."""
import json
import math

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import attention, attention_bwd

SMEM_LIMIT = 232448


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


@pytest.mark.parametrize("name,shape,causal,dtype", [
    # N not a multiple of the K/V block (128) nor of the query block (64): masked tails on both sides,
    # and the last K/V block's TMA tiles reach into the next head's rows
    ("tiny", (1, 2, 200, 64), True, torch.float16),
    ("tiny", (1, 2, 200, 64), False, torch.bfloat16),
    # one consumer group per CTA (BN=64), a 3-deep ring
    ("one_group", (1, 2, 136, 64), True, torch.bfloat16),
    # a one-slot ring (every step waits for its own load); N % 4 != 0 (padded statistics rows)
    ("ring_of_1", (1, 2, 130, 64), True, torch.float16),
    # D=128: dQ in two 64-column halves from K's column tiles
    ("tiny", (1, 2, 136, 128), True, torch.bfloat16),
    # D=128 with dQ's columns split between the groups (a named barrier per step, dS double-buffered)
    ("dq_split", (2, 1, 200, 128), False, torch.float16),
], ids=lambda x: str(x).replace("torch.", "").replace(" ", ""))
def test_backward_on_simulator(name, shape, causal, dtype):
    q, k, v, do = attention_bwd.make_inputs(shape, dtype, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)
    # two interleavings, each against float64 on its own: dQ's fp32 atomics add in schedule order, so
    # its last bits differ between schedules and the simulator's bitwise schedule comparison
    # (schedules=2) would call that a race
    for seed in (0, 1):
        with wb.simulate(gpu="H200", seed=seed, schedules=1) as sim:
            dq, dk, dv = attention_bwd.launch(q, k, v, o.to(dtype), do, lse.float(), causal,
                                              1 / math.sqrt(shape[-1]), attention_bwd.SIM_CONFIGS[name])
        assert sim.result.ok, sim.result
        for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
            assert got.dtype == dtype and got.shape == ref.shape
            assert _rel(got, ref) < TOL[dtype]


@pytest.mark.parametrize("name,shape,causal,dtype", [
    # DQ_SPLIT, one fp32 tile per group; ragged N: the last query block's tile reaches into the next head's
    # rows (zeros added there) and, for the last head, past the tensor (rows the TMA unit drops)
    ("dq_tma", (1, 2, 200, 128), False, torch.float16),
    ("dq_tma", (1, 2, 130, 128), True, torch.bfloat16),
], ids=lambda x: str(x).replace("torch.", "").replace(" ", ""))
def test_backward_dq_by_tma_reduce_on_simulator(name, shape, causal, dtype):
    """DQ_TMA: dQ goes out by TMA reduce-add (no atomics), each schedule alone against float64 (the
    reduces add in schedule order, as the atomics do)."""
    cfg = attention_bwd.SIM_CONFIGS[name]
    assert attention_bwd.suits(cfg, shape[-1])
    q, k, v, do = attention_bwd.make_inputs(shape, dtype, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)
    for seed in (0, 1):
        with wb.simulate(gpu="H200", seed=seed, schedules=1) as sim:
            dq, dk, dv = attention_bwd.launch(q, k, v, o.to(dtype), do, lse.float(), causal,
                                              1 / math.sqrt(shape[-1]), cfg)
        assert sim.result.ok, sim.result
        for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
            assert got.dtype == dtype and got.shape == ref.shape
            assert _rel(got, ref) < TOL[dtype]
    reduces = [s for s in sim.result.trace.spans if (s.args or {}).get("reduce") == "add"]
    # one reduce per (BM, 64) tile and step: a group adds its 64 columns (DQ_SPLIT) or all D of them
    N, BM, BN = shape[2], cfg["BM"], cfg["BN"]
    per_step = (BN // 64) * (1 if cfg.get("DQ_SPLIT") else shape[-1] // 64)
    steps = sum(-(-N // BM) - (kv0 // BM if causal else 0) for kv0 in range(0, N, BN))
    assert len(reduces) == shape[0] * shape[1] * steps * per_step


@pytest.mark.parametrize("name,shape,causal,dtype", [
    # the D=128 default with DP_DELTA + P_ROUND: ragged N (the last tile's rows past N), causal and not
    ("lean", (1, 2, 200, 128), False, torch.float16),
    ("lean", (1, 2, 130, 128), True, torch.bfloat16),
    # D=64, the atomics (no DQ_SPLIT), both switches
    ("lean_d64", (1, 2, 200, 64), True, torch.float16),
    ("lean_d64", (1, 2, 136, 64), False, torch.bfloat16),
    # DQ_HANDOFF: dS^T handed between the groups by arrive / wait pairs (barriers by step parity), alone and with lean
    ("handoff", (1, 2, 200, 128), True, torch.float16),
    ("handoff", (2, 1, 136, 128), False, torch.bfloat16),
    ("lean_handoff", (1, 2, 130, 128), True, torch.bfloat16),
    ("lean_handoff", (1, 2, 200, 128), False, torch.float16),
    # DQ_STAGGER: group 1 held back until group 0's first P^T (a ping-pong); ragged N, causal and not
    ("lean_pingpong", (1, 2, 200, 128), True, torch.float16),
    ("lean_pingpong", (2, 1, 136, 128), False, torch.bfloat16),
], ids=lambda x: str(x).replace("torch.", "").replace(" ", ""))
def test_backward_variants_on_simulator(name, shape, causal, dtype):
    """VARIANT_CONFIGS and lean_d64: DP_DELTA (dP^T's accumulator starts at -delta), P_ROUND (dS^T from the rounded
    P^T, dV's wgmma before dP^T's wait), DQ_HANDOFF: each schedule
    alone against float64, no deadlock or race; DQ_STAGGER."""
    cfg = attention_bwd.SIM_CONFIGS[name]
    assert attention_bwd.suits(cfg, shape[-1], causal)
    q, k, v, do = attention_bwd.make_inputs(shape, dtype, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)
    for seed in (0, 1):
        with wb.simulate(gpu="H200", seed=seed, schedules=1) as sim:
            dq, dk, dv = attention_bwd.launch(q, k, v, o.to(dtype), do, lse.float(), causal,
                                              1 / math.sqrt(shape[-1]), cfg)
        assert sim.result.ok, sim.result
        for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
            assert got.dtype == dtype and got.shape == ref.shape
            assert _rel(got, ref) < TOL[dtype]


@pytest.mark.parametrize("name,causal", [("tiny", True), ("persistent", False), ("persistent_zigzag", True)])
def test_forward_stores_the_log_sum_exp_on_simulator(name, causal):
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 200, 64, dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((1, 2, 200), float("nan"))
    cfg = attention.SIM_CONFIGS[name]
    kw = {"num_sms": 1} if cfg.get("PERSISTENT") else {}
    with wb.simulate(gpu="H200", seed=0, schedules=1) as sim:
        attention.launch(q, k, v, o, causal, 1 / 8, cfg, lse=lse, **kw)
    assert sim.result.ok, sim.result
    o_r, lse_r, *_ = attention_bwd.reference64(q, k, v, q, causal, 1 / 8)
    assert _rel(o, o_r) < 3e-3
    assert torch.isfinite(lse).all()
    assert float((lse.double() - lse_r).abs().max()) < 1e-3


def test_forward_then_backward_on_simulator():
    """The library's own forward output and log-sum-exp feed its backward (what attention_with_grad runs)."""
    torch.manual_seed(6)
    shape = (1, 2, 176, 64)
    q, k, v, do = attention_bwd.make_inputs(shape, torch.float16, "cpu")
    o = torch.empty_like(q)
    lse = torch.empty(shape[:3])
    with wb.simulate(gpu="H200", seed=1, schedules=1) as sim:
        attention.launch(q, k, v, o, True, 1 / 8, attention.SIM_CONFIGS["tiny"], lse=lse)
        dq, dk, dv = attention_bwd.launch(q, k, v, o, do, lse, True, 1 / 8, attention_bwd.SIM_CONFIGS["tiny"])
    assert sim.result.ok, sim.result
    _, _, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, True, 1 / 8)
    assert max(_rel(dq, dq_r), _rel(dk, dk_r), _rel(dv, dv_r)) < 2e-3


def test_backward_rejects_an_lse_of_the_wrong_shape():
    q, k, v, do = attention_bwd.make_inputs((1, 2, 64, 64), torch.float16, "cpu")
    with pytest.raises(TLXWorkbenchError, match="return_lse=True"):
        attention_bwd.attention_backward(q, k, v, q, do, torch.zeros(1, 2, 64, 64))


def test_backward_compiles_for_sm90():
    """D=128 causal bf16, the atomics' form (DQ_SPLIT): fits the SMEM of a CTA, keeps the register split, streams
    Q/dO with TMA, adds dQ with fp32 reductions and has wgmma kept in flight (S^T waited while dP^T runs)."""
    cfg = dict(attention_bwd.SIM_CONFIGS["dq_split"])
    assert cfg in attention_bwd.CONFIGS
    k = attention_bwd.compile_offline(cfg, dtype="bfloat16", shape=(1, 2, 256, 128), causal=True)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= SMEM_LIMIT
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{cfg['MMA_REGS']}" in ptx
    assert f"setmaxnreg.dec.sync.aligned.u32 \t{cfg['LOADER_REGS']}" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in ptx
    assert "atom.global.gpu.relaxed.add.v4.f32" in ptx      # dQ: relaxed fp32 adds, 4 a thread at once
    assert "wgmma.wait_group.sync.aligned 1" in ptx


def test_dq_tma_compiles_for_sm90_without_the_atomics():
    """DQ_TMA at D=128 (DQ_SPLIT, one tile per group): TMA reduce-adds and no atomics, within a CTA's SMEM
    (the second copy of K gone: dQ's B operand is a view of K) and spilling no more than the atomics' default."""
    cfg = attention_bwd.SIM_CONFIGS["dq_tma"]
    r = attention_bwd.compile_report(cfg, dtype="float16", shape=(1, 2, 256, 128), causal=True)
    ptx = r.stages["ptx"]
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add" in ptx
    assert "atom.global" not in ptx
    assert r.resources.smem_bytes <= attention_bwd.smem_bytes(cfg, 128) + 1024 <= SMEM_LIMIT
    assert cfg in attention_bwd.CONFIGS                 # in the autotune space since it was measured (RESULTS.md)
    atomics = {k: v for k, v in cfg.items() if k != "DQ_TMA"}
    base = attention_bwd.compile_report(atomics, dtype="float16", shape=(1, 2, 256, 128), causal=True)
    assert r.resources.registers == base.resources.registers
    spills = lambda rep: max(f.spill_store_bytes for f in rep.ptxas_functions)  # noqa: E731
    assert spills(r) <= spills(base)


@pytest.mark.parametrize("n", [130, 128])
def test_uninitialised_memory_does_not_reach_the_gradients(monkeypatch, n):
    """Every buffer the launcher allocates may hold anything (memory reused from an earlier tensor): with
    torch.empty handing out NaN-filled memory, the gradients are still right (a ragged N, whose padded
    statistics columns the last query block's TMA loads read; N a multiple of 4, whose statistics have no pad
    columns and are not zeroed first)."""
    shape, dtype, causal = (1, 2, n, 64), torch.float16, True
    q, k, v, do = attention_bwd.make_inputs(shape, dtype, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, causal)
    real_empty = torch.empty

    def poisoned(*a, **kw):
        t = real_empty(*a, **kw)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", poisoned)
    with wb.simulate(gpu="H200", seed=0) as sim:
        dq, dk, dv = attention_bwd.launch(q, k, v, o.to(dtype), do, lse.float(), causal, 1 / math.sqrt(64),
                                          attention_bwd.SIM_CONFIGS["ring_of_1"])
    monkeypatch.setattr(torch, "empty", real_empty)
    assert sim.result.ok, sim.result
    for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
        assert _rel(got, ref) < TOL[dtype]


def _variants_script():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "attention_bwd_variants_h200.py"
    spec = importlib.util.spec_from_file_location("attention_bwd_variants_h200", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_variants_script_jobs_and_loop_counts():
    """benchmarks/attention_bwd_variants_h200.py without a GPU: it checks the default, every variant and the rest of
    attention_backward()'s D=128 autotune space (a tuned pick may be any), causal and not (ragged N, fp16 and bf16),
    before timing the default and the variants in the four D=128 cells, times only what passed, and reads the
    step loops' spills out of SASS (innermost loops with wgmma)."""
    S = _variants_script()
    names = {causal: ["default", *(n for n, c in attention_bwd.VARIANT_CONFIGS.items()
                                   if c != attention_bwd.default_for(128, causal) and not (causal and "SPLIT_TAIL" in c))]
             for causal in (False, True)}
    assert "handoff" in names[False] and "handoff" not in names[True]       # the causal default since 2026-12-04
    checks = list(S.check_jobs())
    checked = {(json.dumps(j["cfg"], sort_keys=True), j["causal"]) for j in checks}
    for causal in (False, True):
        space = attention_bwd.configs_for(128, causal)
        assert {(json.dumps(c, sort_keys=True), causal) for c in space} <= checked
    assert {(n, c) for c in (False, True) for n in names[c]} <= {(j["name"], j["causal"]) for j in checks}
    assert len(checked) == len(checks)                      # each config once (the default is a variant too)
    shapes = next(j["shapes"] for j in checks if j["name"] == "lean")        # the usual four
    assert any(s[2] % 64 for s in shapes) and any(s[2] % 4 for s in shapes)
    assert {s[-1] for s in shapes} == {"float16", "bfloat16"}
    cells = list(S.time_jobs(3))
    assert len(cells) == 4 and all(list(j["cfgs"]) == names[j["causal"]] for j in cells)
    assert all(j["cfgs"]["default"] == attention_bwd.default_for(128, j["causal"]) for j in cells)
    assert all(len(j["cfgs"]) <= 6 for j in cells)       # the default and at most five variants (~4 minutes)
    # SPLIT_TAIL is also checked where 132 SMs leave a last wave to split; --configs checks only what it names
    # (the non-causal default has SPLIT_TAIL since 2026-12-03; a causal launch drops it)
    tail = [j for j in checks if j["cfg"].get("SPLIT_TAIL")]
    assert {(j["name"], j["causal"]) for j in tail} == {("default", False)}
    assert all(len(j["shapes"]) == len(S.CHECK_SHAPES) + len(S.TAIL_CHECK_SHAPES) for j in tail)
    assert all(len(j["shapes"]) == len(S.CHECK_SHAPES) for j in checks if not j["cfg"].get("SPLIT_TAIL"))
    for zhn, _ in S.TAIL_CHECK_SHAPES:
        assert attention_bwd.tail_split(*zhn, attention_bwd.default_for(128), False, 132) is not None
    assert {j["name"] for j in S.check_jobs({"default", "lean_pingpong"})} == {"default", "lean_pingpong"}
    rows = [dict(name="lean", causal=True, ok=True)] * len(shapes) + [dict(name="default", causal=True, ok=False)]
    assert S.passed_set(rows, checks) == {("lean", True)}
    assert [list(j["cfgs"]) for j in S.time_jobs(3, {("lean", True)})] == [[], ["lean"], [], ["lean"]]
    sass = "\n".join([".L_x_1:", "/*0010*/ HGMMA.64x64x16.F32 R0, gdesc[UR4], RZ ;", "/*0020*/ STL [R1], R2 ;",
                      ".L_x_2:", "/*0030*/ LDL R2, [R1] ;", "/*0040*/ @P0 BRA `(.L_x_2) ;",
                      "/*0050*/ @P1 BRA `(.L_x_1) ;", ".L_x_3:", "/*0060*/ HGMMA.64x64x16.F32 R0, gdesc[UR4], RZ ;",
                      "/*0070*/ LDL R2, [R1] ;", "/*0080*/ @P0 BRA `(.L_x_3) ;"])
    # the outer loop (L_x_1) holds another; the innermost without wgmma (L_x_2) is not a step loop
    assert S.step_loops(sass) == [dict(instructions=3, hgmma=1, stl=0, ldl=1)]


def test_lean_handoff_compiles_for_sm90_without_spills_in_the_plain_loop():
    """lean_handoff (DP_DELTA + P_ROUND + DQ_HANDOFF) at D=128 non-causal fp16, sm_90: within a CTA's SMEM, and the
    unmasked step loop of each consumer replica holds at most 2 spill stores (the default: 15 and 21; its whole-kernel
    spills 312 B stored, benchmarks/RESULTS.md), the arrive / wait pairs on barriers 10..13 and no bar.sync of both."""
    S = _variants_script()
    row = S.static_row("lean_handoff", attention_bwd.VARIANT_CONFIGS["lean_handoff"], False)
    assert row["smem"] <= SMEM_LIMIT
    assert len(row["loops"]) == 6 and max(row["plain_loop_stl"]) <= 2
    assert row["spill_store"] < 312
    cfg = attention_bwd.VARIANT_CONFIGS["lean_handoff"]
    ptx = attention_bwd.compile_offline(cfg, dtype="float16", shape=(1, 2, 256, 128), causal=False).asm["ptx"]
    assert "bar.arrive" in ptx and "bar.sync \t14, 256" not in ptx


@pytest.mark.parametrize("name,shape,sms,plan,dtype", [
    # 9 K/V blocks on 7 "SMs" (2 waves): the first 2 heads plainly (1 wave), the last head's 3 blocks (a ragged one of
    # 44 rows) in 2 parts of 3 and 2 query blocks
    ("split_tail", (1, 3, 300, 128), 7, (6, 3, 2, 3), torch.float16),
    ("split_tail", (1, 3, 300, 128), 7, (6, 3, 2, 3), torch.bfloat16),
], ids=lambda x: str(x).replace("torch.", "").replace(" ", ""))
def test_split_tail_on_simulator_matches_float64(name, shape, sms, plan, dtype):
    """SPLIT_TAIL: the plain kernel on the first heads, the last heads' K/V blocks each split over query blocks into
    parts whose dK, dV add into fp32 partials, cast by a third launch: dQ, dK, dV match float64, every element
    written (each launch gets only the rows it writes), every launch clean, in two schedules."""
    cfg = attention_bwd.SIM_CONFIGS[name]
    Z, H, N, D = shape
    assert attention_bwd.tail_split(Z, H, N, cfg, False, sms) == plan
    assert attention_bwd.tail_split(Z, H, N, cfg, True, sms) is None          # causal: the plain kernel
    q, k, v, do = attention_bwd.make_inputs(shape, dtype, "cpu")
    o, lse, dq_r, dk_r, dv_r = attention_bwd.reference64(q, k, v, do, False)
    for seed in (0, 1):
        dk = torch.full_like(k, float("nan"))
        dv = torch.full_like(v, float("nan"))
        with wb.simulate(gpu="H200", seed=seed, schedules=1) as sim:
            dq, dk, dv = attention_bwd.launch(q, k, v, o.to(dtype), do, lse.float(), False, 1 / math.sqrt(D), cfg,
                                              dk=dk, dv=dv, num_sms=sms)
        assert [r.kernel for r in sim.results][-3:] == ["attention_bwd_kernel"] * 2 + ["attention_bwd_tail_cast_kernel"]
        # the main launch is the plain kernel (the same constexprs as the config without SPLIT_TAIL: its code and
        # schedule untouched) on the first heads' 2-D grid; only the parts launch is the SPLIT_TAIL specialisation
        main, parts = sim.results[-3], sim.results[-2]
        plain = {key: val for key, val in cfg.items() if key != "SPLIT_TAIL"}
        assert not main.launch[2].get("SPLIT_TAIL") and all(main.launch[2][key] == val for key, val in plain.items())
        assert tuple(main.grid)[:2] == (-(-N // cfg["BN"]), plan[0] // -(-N // cfg["BN"]))
        assert parts.launch[2]["SPLIT_TAIL"] is True and tuple(parts.grid)[0] == plan[1] * plan[2]
        assert all(r.ok for r in sim.results), [r for r in sim.results if not r.ok]
        for got, ref in ((dq, dq_r), (dk, dk_r), (dv, dv_r)):
            assert got.dtype == dtype and got.shape == ref.shape
            assert _rel(got, ref) < TOL[dtype]

