"""The shared host code (kernels/host.py) launches each GEMM the way its module says: the grid,
the persistent CTA count, NUM_SMS, num_warps and num_stages=0 that the H200 figures in
benchmarks/RESULTS.md were measured with; matmul tunes once per shape and keeps the fastest.
Kernel launches are recorded here, not run (no GPU)."""
import pytest
import torch
import triton
import triton.runtime.jit as jit

from tlx_workbench.kernels import attention, gemm_pingpong, gemm_pipelined, gemm_ws, host


@pytest.fixture
def launches(monkeypatch):
    """Every kernel launch as (kernel name, grid, positional args, keyword args); none runs."""
    calls = []

    def record(self, *args, grid, warmup, **kwargs):
        calls.append((self.fn.__name__, grid, args, kwargs))

    monkeypatch.setattr(jit.JITFunction, "run", record)
    monkeypatch.setattr(triton, "set_allocator", lambda alloc: None)
    for mod in (gemm_ws, gemm_pingpong, attention):
        monkeypatch.setattr(mod, "sm_count", lambda: 132)
    return calls


def _operands(M, N, K, dtype=torch.float16):
    return torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype), torch.empty(M, N, dtype=dtype)


def test_gemm_ws_launch_balances_persistent_ctas(launches):
    a, b, c = _operands(4096, 4096, 4096)
    cfg = gemm_ws.CONFIGS[0]
    assert gemm_ws.launch(a, b, c, cfg) is c
    gemm_ws.launch(a, b, c, cfg, balance=False)
    gemm_ws.launch(a, b, c, cfg, num_sms=1000)          # one wave: a CTA per tile, stride stays 1000
    (name, grid, args, kw), (_, grid_old, _, kw_old), (_, grid_one, _, kw_one) = launches
    assert name == "gemm_ws_coop_kernel"
    assert grid == (128,) and kw["NUM_SMS"] == 128          # 512 tiles: 4 waves of 128 CTAs
    assert grid_old == (132,) and kw_old["NUM_SMS"] == 132
    assert grid_one == (512,) and kw_one["NUM_SMS"] == 1000
    assert kw["num_stages"] == 0 and kw["num_warps"] == 4 and all(kw[k] == v for k, v in cfg.items())
    assert args[3:] == (4096, 4096, 4096)
    assert [list(d.block_shape) for d in args[:3]] == [[64, 64], [64, 256], [64, cfg["EPI_N"]]]   # BM/2 rows


def test_pingpong_and_pipelined_launches(launches):
    a, b, c = _operands(512, 384, 256)
    gemm_pingpong.launch(a, b, c, gemm_pingpong.CONFIGS[0], num_sms=4)
    cfg = gemm_pipelined.CONFIGS[0]
    gemm_pipelined.launch(a, b, c, cfg)
    (pp, grid_pp, args_pp, kw_pp), (pl, grid_pl, args_pl, kw_pl) = launches
    assert pp == "gemm_pingpong_kernel" and grid_pp == (4,) and kw_pp["NUM_SMS"] == 4
    assert kw_pp["num_stages"] == 0 and kw_pp["num_warps"] == 4
    assert [list(d.block_shape) for d in args_pp[:3]] == [[128, 64], [64, 128], [128, 64]]
    assert pl == "gemm_pipelined_kernel" and grid_pl == (4 * 2,)      # cdiv(512, 128) * cdiv(384, 256)
    assert kw_pl["num_stages"] == 0 and kw_pl["num_warps"] == cfg["num_warps"] and "num_warps" not in args_pl
    assert args_pl[3:] == (512, 384, 256, 256, 384, 384)


@pytest.mark.parametrize("mod", [gemm_ws, gemm_pingpong, gemm_pipelined], ids=lambda m: m.__name__)
def test_matmul_tunes_once_per_shape_and_keeps_the_fastest(mod, launches, monkeypatch):
    fastest = len(mod.CONFIGS) - 1
    timed = []

    def fake_bench(fn, warmup, rep, return_mode="mean"):
        assert (warmup, rep) == (25, 100)
        fn()
        timed.append(launches[-1][3])
        return 1.0 if len(timed) - 1 == fastest else 2.0 + len(timed)

    monkeypatch.setattr(triton.testing, "do_bench", fake_bench)
    mod.matmul.tuned.clear()
    a, b, _ = _operands(256, 128, 64)
    c = mod.matmul(a, b)
    assert c.shape == (256, 128) and c.dtype == a.dtype
    assert len(timed) == len(mod.CONFIGS)
    assert all(launches[-1][3][k] == v for k, v in mod.CONFIGS[fastest].items())
    mod.matmul(a, b)                                        # same shape and dtype: no second tune
    assert len(timed) == len(mod.CONFIGS)
    mod.matmul(a.bfloat16(), b.bfloat16())                  # another dtype is another key
    assert len(timed) == 2 * len(mod.CONFIGS) and len(mod.matmul.tuned) == 2
    ranked = mod.tune(a, b, mod.CONFIGS[:2])
    assert [ms for _, ms in ranked] == sorted(ms for _, ms in ranked)
    mod.matmul.tuned.clear()


def test_attention_tunes_over_the_configs_for_its_head_dim(launches, monkeypatch):
    timed = []

    def fake_bench(fn, warmup, rep, return_mode="mean"):
        fn()
        timed.append(1)
        return 100.0 - len(timed)          # each config faster than the one before

    monkeypatch.setattr(triton.testing, "do_bench", fake_bench)
    attention._TUNED.clear()
    q = torch.empty(1, 2, 256, 128, dtype=torch.float16)
    attention.attention(q, q, q, causal=True)
    attention.attention(q, q, q, causal=True)
    want = attention.configs_for(128, causal=True)
    assert len(timed) == len(want)                           # tuned once, over the causal space only
    assert not any(c.get("PERSISTENT") and not c.get("ZIGZAG") for c in want)
    name, grid, _, kw = launches[-1]                         # the last timed was the fastest here
    persistent = want[-1].get("PERSISTENT", False)
    assert name == ("attention_fwd_persistent_kernel" if persistent else "attention_fwd_kernel")
    assert kw["num_stages"] == 0 and (persistent or grid == (2, 2))
    assert all(kw[k] == v for k, v in want[-1].items() if k != "PERSISTENT")
    attention._TUNED.clear()


def test_tuned_config_tunes_only_for_a_new_key():
    cache, tunes = {}, []

    def tune():
        tunes.append(1)
        return [({"BM": 64}, 0.5), ({"BM": 128}, 0.7)]

    assert host.tuned_config(cache, "k", tune) == {"BM": 64}
    assert host.tuned_config(cache, "k", tune) == {"BM": 64} and len(tunes) == 1
    host.tuned_config(cache, "other", tune)
    assert len(tunes) == 2


def test_entry_points_belong_to_their_module():
    for mod in (gemm_ws, gemm_pingpong, gemm_pipelined):
        for fn in (mod.matmul, mod.tune, mod.compile_offline):
            assert fn.__module__ == mod.__name__ and fn.__doc__
        assert mod.SPEC.launch is mod.matmul and mod.SPEC.configs is mod.CONFIGS


def test_a_config_the_gpu_refuses_is_left_out_of_the_tune(monkeypatch):
    """A launch that raises OutOfResources (what Triton raises when a compiled kernel's SMEM is past the
    GPU's limit) drops that config with a warning naming it; the others are still ranked."""
    from triton.runtime.errors import OutOfResources

    from tlx_workbench.errors import TLXWorkbenchError
    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, warmup, rep, return_mode="mean": (fn(), 1.0)[1])
    configs = [{"BN": 64}, {"BN": 128, "NUM_BUFS": 3}, {"BN": 128}]

    def run(cfg):
        if cfg.get("NUM_BUFS") == 3:
            raise OutOfResources(245912, 232448, "shared memory")

    with pytest.warns(UserWarning, match=r"left out \{'BN': 128, 'NUM_BUFS': 3\}.*245912"):
        ranked = host.fastest_first(configs, run)
    assert [c for c, _ in ranked] == [{"BN": 64}, {"BN": 128}]

    def refuse(cfg):
        raise OutOfResources(300000, 232448, "shared memory")

    with pytest.warns(UserWarning), pytest.raises(TLXWorkbenchError, match="no config runs") as e:
        host.fastest_first(configs, refuse)
    assert "smaller blocks" in str(e.value) and str(e.value).count("300000") == 3


def test_attention_tunes_a_ragged_length_over_configs_that_fit(launches, monkeypatch):
    """At a ragged N the plain kernel's masked O store takes scratch SMEM, so its three-buffer config
    (245912 bytes compiled at N=1000, D=128) is out of the space there and in it at N=1024."""
    tuned = []
    monkeypatch.setattr(attention, "tune", lambda q, k, v, causal, s, configs: tuned.append(configs) or
                        [(configs[0], 1.0)])
    attention._TUNED.clear()
    three = attention._config(128, 3)
    for n, fits in ((1000, False), (1024, True)):
        q = torch.empty(1, 2, n, 128, dtype=torch.float16)
        attention.attention(q, q, q)
        assert (three in tuned[-1]) is fits
        assert tuned[-1] == attention.configs_for(128, False, n)
    attention._TUNED.clear()


@pytest.mark.parametrize("shape,causal,ctas,stride", [((4, 32, 4096, 128), True, 128, 128),
                                                      ((2, 32, 8192, 128), True, 128, 128),
                                                      ((1, 33, 4096, 128), True, 132, 132),
                                                      ((1, 2, 1000, 128), True, 16, 132),
                                                      ((4, 32, 4096, 128), False, 132, 132)])
def test_the_zigzag_walk_starts_the_fewest_ctas_for_its_waves(launches, shape, causal, ctas, stride):
    """Causal (zig-zag pairs), 2048 pairs on 132 SMs take 16 waves on 128 CTAs as on 132, so 128 start and each walks
    16 whole pairs, the kernel's NUM_SMS (its stride) the grid; 528 pairs (1x33 heads) are exactly 4 waves of 132;
    within one wave (8 pairs of 16 tiles) a CTA a tile and the stride stays the SM count (one compile for every small
    problem), as for the GEMMs. Non-causal, the persistent default keeps one CTA per SM."""
    q = torch.empty(shape, dtype=torch.float16)
    attention.launch(q, q, q, torch.empty_like(q), causal, 0.1, attention.DEFAULTS[(False, causal)])
    name, grid, _, kw = launches[0]
    assert name == "attention_fwd_persistent_kernel" and grid == (ctas,) and kw["NUM_SMS"] == stride
    if causal and stride == ctas:
        walks = attention.persistent_schedule(shape[0] * shape[1] * shape[2] // 128, ctas, zigzag=True)
        assert len({len(w) for w in walks}) == 1             # every CTA the same number of tiles
