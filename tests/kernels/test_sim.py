"""Every library kernel, with each of its SIM_CONFIGS, on the CPU simulator at small ragged
shapes: the output matches float64, every element is written (NaN-poisoned first), and
several schedules find no race, deadlock or schedule-dependent result."""
import math

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.kernels import attention, gemm_pingpong, gemm_pipelined, gemm_ws


def _rel(out, ref):
    assert torch.isfinite(out).all(), "some output elements were never written"
    return float((out.double() - ref).norm() / ref.norm())


@pytest.mark.parametrize("mod,name", [(m, n) for m in (gemm_ws, gemm_pingpong, gemm_pipelined)
                                      for n in m.SIM_CONFIGS],
                         ids=lambda x: x if isinstance(x, str) else x.__name__.rsplit(".", 1)[1])
def test_gemm_on_simulator(mod, name):
    torch.manual_seed(1)
    M, N, K = 200, 136, 72          # partial tiles in M, N and K; 2 persistent CTAs walk 4+ tiles
    a = torch.randn(M, K, dtype=torch.float16)
    b = torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    kw = {} if mod is gemm_pipelined else {"num_sms": 2}
    with wb.simulate(gpu="H200", seed=0, schedules=3) as sim:
        mod.launch(a, b, c, mod.SIM_CONFIGS[name], **kw)
    res = sim.result
    assert res.ok, res
    assert res.cycles > 0
    assert _rel(c, a.double() @ b.double()) < 2e-3


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", list(attention.SIM_CONFIGS))
def test_attention_on_simulator(name, causal):
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 200, 64, dtype=torch.float16) for _ in range(3))   # N not a tile multiple
    o = torch.full_like(q, float("nan"))
    cfg = attention.SIM_CONFIGS[name]
    # persistent: one CTA walks all 4 query tiles, so the K/V ring, the turns and both Q sets wrap
    kw = {"num_sms": 1} if cfg.get("PERSISTENT") else {}
    with wb.simulate(gpu="H200", seed=0, schedules=2) as sim:
        attention.launch(q, k, v, o, causal, 1 / math.sqrt(64), cfg, **kw)
    assert sim.result.ok, sim.result
    ref = attention.reference(q.double(), k.double(), v.double(), causal=causal)
    assert _rel(o, ref) < 3e-3


def test_gemm_ws_balanced_cta_count_on_simulator():
    # 6 tiles on 4 "SMs": 2 waves either way, so 3 CTAs of 2 tiles each (tile stride 3)
    torch.manual_seed(3)
    M, N, K = 200, 136, 72
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    assert gemm_ws.persistent_ctas(6, 4) == 3
    with wb.simulate(gpu="H200", seed=0, schedules=2) as sim:
        gemm_ws.launch(a, b, c, gemm_ws.SIM_CONFIGS["tiny"], num_sms=4)
    assert sim.result.ok, sim.result
    assert _rel(c, a.double() @ b.double()) < 2e-3


@pytest.mark.parametrize("tiles,ctas", [(1, 132), (4, 1), (5, 2), (7, 3), (4096, 132), (4095, 132), (263, 132)])
def test_persistent_schedules_cover_every_tile_once(tiles, ctas):
    for zigzag in (False, True):
        walk = attention.persistent_schedule(tiles, ctas, zigzag)
        assert sorted(t for w in walk for t in w) == list(range(tiles))
    if tiles % 2 == 0 and tiles >= 2 * ctas:
        # zig-zag: each CTA walks whole pairs (2p, 2p+1)
        assert all(len(w) % 2 == 0 and all(w[i] + 1 == w[i + 1] for i in range(0, len(w), 2))
                   for w in attention.persistent_schedule(tiles, ctas, True))


@pytest.mark.parametrize("name", ["persistent_zigzag"])
@pytest.mark.parametrize("shape,ctas", [((1, 3, 200, 64), 2), ((1, 1, 300, 64), 2), ((2, 1, 384, 64), 3)])
def test_zigzag_causal_schedule_on_simulator(shape, ctas, name):
    """The zig-zag pair schedule (causal persistent) on several CTAs: odd tile counts (a CTA ends on
    a single tile), odd query-block counts (pairs straddle heads), a CTA with one pair; O and the log-sum-exp."""
    torch.manual_seed(3)
    q, k, v = (torch.randn(shape, dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full(shape[:3], float("nan"), dtype=torch.float32)
    cfg = attention.SIM_CONFIGS[name]
    scale = 1 / math.sqrt(64)
    with wb.simulate(gpu="H200", seed=1, schedules=2) as sim:
        attention.launch(q, k, v, o, True, scale, cfg, num_sms=ctas, lse=lse)
    assert sim.result.ok, sim.result
    ref = attention.reference(q.double(), k.double(), v.double(), causal=True)
    assert _rel(o, ref) < 3e-3
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    s = s.masked_fill(torch.ones(shape[2], shape[2], dtype=torch.bool).triu(1), float("-inf"))
    assert float((lse.double() - torch.logsumexp(s, -1)).abs().max()) < 1e-3


@pytest.mark.parametrize("name", ["persistent_split_tail"])
@pytest.mark.parametrize("shape,ctas", [((1, 2, 200, 64), 3), ((1, 4, 300, 64), 8)])
def test_split_tail_on_simulator_matches_float64_with_its_lse(shape, ctas, name):
    """SPLIT_TAIL: the persistent kernel walks the whole waves (4 tiles on 3 CTAs: 3; 12 on 8: 8) and the leftover
    tiles (1; 4: a head's ragged last block and the next head's three) are split over K/V (2 splits of 128 and 64
    columns; 2 of 192 and 108) and merged: O and the log-sum-exp the backward pass takes both match float64,
    every element written, and every launch (persistent, splits, merge) has a clean bill."""
    torch.manual_seed(4)
    q, k, v = (torch.randn(shape, dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full(shape[:3], float("nan"), dtype=torch.float32)
    cfg = attention.SIM_CONFIGS[name]
    tiles = -(-shape[2] // cfg["BM"]) * shape[0] * shape[1]
    main, left, splits, _ = attention.tail_plan(tiles, ctas, shape[2])
    assert main == ctas and left == tiles - ctas and splits == 2
    scale = 1 / math.sqrt(64)
    with wb.simulate(gpu="H200", seed=0, schedules=2) as sim:
        attention.launch(q, k, v, o, False, scale, cfg, num_sms=ctas, lse=lse)
    assert [r.kernel for r in sim.results] == ["attention_fwd_persistent_kernel", "attention_tail_split_kernel",
                                               "attention_tail_merge_kernel"]
    assert all(r.ok for r in sim.results), [r for r in sim.results if not r.ok]
    ref = attention.reference(q.double(), k.double(), v.double())
    assert _rel(o, ref) < 3e-3
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    assert torch.isfinite(lse).all()
    assert float((lse.double() - torch.logsumexp(s, -1)).abs().max()) < 1e-3


def test_the_tuned_entry_points_run_a_config_on_the_simulator_and_keep_no_tuning():
    """``matmul`` / ``attention`` without config= time their configs on a GPU; under the simulator nothing can be
    timed, so they run their first config (``simulate(config=i)`` picks another), match float64, and keep nothing
    in the tuned cache a later GPU call would reuse."""
    torch.manual_seed(3)
    a = torch.randn(192, 72, dtype=torch.float16)
    b = torch.randn(72, 136, dtype=torch.float16)
    gemm_ws.matmul.tuned.clear()
    for pick, want in ((None, gemm_ws.CONFIGS[0]), (1, gemm_ws.CONFIGS[1])):
        res = wb.simulate(lambda: gemm_ws.matmul(a, b), gpu="H200", config=pick)
        assert res.ok, res
        assert _rel(res.value, a.double() @ b.double()) < 2e-3
        kwargs = res.launch[2]
        assert all(kwargs[k] == v for k, v in want.items())
    assert not gemm_ws.matmul.tuned
    with pytest.raises(wb.SimulationError, match="gemm_ws has"):
        wb.simulate(lambda: gemm_ws.matmul(a, b), gpu="H200", config=len(gemm_ws.CONFIGS))
    q, k, v = (torch.randn(1, 2, 130, 64, dtype=torch.float16) for _ in range(3))
    attention._TUNED.clear()
    res = wb.simulate(lambda: attention.attention(q, k, v, causal=True), gpu="H200")
    ref = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    assert res.ok and _rel(res.value, ref) < 2e-3
    assert not attention._TUNED
