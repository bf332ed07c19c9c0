"""Every library kernel compiles for sm_90 on this CPU-only machine: each SIM config and
the first (default) autotune config. The PTX is also checked for the properties the
kernels are built around (wgmma kept in flight, register split, named barriers)."""
import pytest

from tlx_workbench.kernels import attention, gemm_pingpong, gemm_pipelined, gemm_ws

SMEM_LIMIT = 232448   # H100/H200 opt-in SMEM per CTA
GEMMS = [gemm_ws, gemm_pingpong, gemm_pipelined]


def _cases():
    for mod in GEMMS:
        for name, cfg in mod.SIM_CONFIGS.items():
            yield pytest.param(mod, cfg, "float16", id=f"{mod.__name__.rsplit('.', 1)[1]}-{name}")
        yield pytest.param(mod, mod.CONFIGS[0], "bfloat16", id=f"{mod.__name__.rsplit('.', 1)[1]}-default")


@pytest.mark.parametrize("mod,cfg,dtype", list(_cases()))
def test_gemm_compiles_for_sm90(mod, cfg, dtype):
    k = mod.compile_offline(cfg, dtype=dtype)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= SMEM_LIMIT
    assert "wgmma.mma_async" in ptx
    # one wgmma group stays in flight across k-steps: Triton must not have added a full drain
    # (unless the config drains every step on purpose: two consumer groups then take turns)
    if cfg.get("DOT_WAIT0"):
        assert "wgmma.wait_group.sync.aligned 1" not in ptx
    else:
        assert "wgmma.wait_group.sync.aligned 1" in ptx
    if mod is not gemm_pipelined:
        if cfg["MMA_REGS"] is None:
            assert "setmaxnreg" not in ptx      # the launch's even register share, no re-split
        else:
            assert f"setmaxnreg.inc.sync.aligned.u32 \t{cfg['MMA_REGS']}" in ptx
            assert f"setmaxnreg.dec.sync.aligned.u32 \t{cfg['LOADER_REGS']}" in ptx
        assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx   # TMA store epilogue
    else:
        assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    if cfg.get("SPLIT_FULL"):
        # A halves and B signal their own barriers: 3 expect-tx arrivals per stage
        assert ptx.count("mbarrier.arrive.expect_tx") == 3
    if mod is gemm_pingpong:
        assert "bar.sync \t14, 256" in ptx and "bar.arrive \t15, 256" in ptx


@pytest.mark.parametrize("name,cfg,causal,shape", [
    ("tiny", attention.SIM_CONFIGS["tiny"], True, (1, 1, 200, 64)),
    ("blocks_of_32", attention.SIM_CONFIGS["blocks_of_32"], False, (1, 2, 256, 64)),
    ("default", attention.CONFIGS[0], False, (1, 2, 256, 128)),
    ("bm256_d64", next(c for c in attention.CONFIGS if c["BM"] == 256), True, (1, 2, 512, 64)),
    # persistent, two Q sets: the largest SMEM user (Q x2, K/V ring, O buffers) must still fit
    ("persistent_q2", next(c for c in attention.CONFIGS if c.get("Q_BUFS") == 2 and c["BN"] == 128), False, (1, 2, 256, 128)),
    # D=64's default: three consumer groups in a turn ring (TURN_2 = named barrier 13)
    ("three_groups_d64", attention.configs_for(64)[0], False, (1, 2, 512, 64)),
    # persistent causal with the zig-zag pair schedule
    ("persistent_zigzag_causal", attention._config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True), True,
     (1, 2, 256, 128)),
])
def test_attention_compiles_for_sm90(name, cfg, causal, shape):
    k = attention.compile_offline(cfg, shape=shape, causal=causal)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= SMEM_LIMIT
    assert ptx.count("wgmma.wait_group.sync.aligned 1") >= 2    # S_j waited while P V runs
    assert "bar.sync \t14, 256" in ptx and "bar.arrive \t15, 256" in ptx
    if cfg.get("GROUPS") == 3:
        assert "bar.sync \t13, 256" in ptx and "bar.arrive \t13, 256" in ptx


def test_default_configs_per_head_dim_and_masking():
    """What the H200 measured fastest is what a launch without a config tries first: three groups at
    D=64 (never at D=128: registers), zig-zag persistent for causal runs (only there), the persistent kernel with
    its last partial wave split over K/V at D=128 non-causal (only there; the persistent kernel without it next)."""
    d64 = attention.configs_for(64)[0]
    assert d64.get("GROUPS") == 3 and d64["BM"] == 192 and not d64.get("ZIGZAG")
    assert all(c.get("GROUPS", 2) == 2 for c in attention.configs_for(128) + attention.configs_for(128, True))
    assert attention.configs_for(128)[:2] == (attention._PERSISTENT_TAIL, attention._PERSISTENT)
    assert not any(c.get("SPLIT_TAIL") for c in attention.configs_for(128, True) + attention.configs_for(64, True))
    assert not any(c.get("ZIGZAG") for c in attention.configs_for(128) + attention.configs_for(64))
    c128 = attention.configs_for(128, causal=True)[0]
    assert c128.get("ZIGZAG") and c128.get("PERSISTENT") and c128.get("GROUPS", 2) == 2
    c64 = attention.configs_for(64, causal=True)[0]
    assert c64.get("ZIGZAG") and c64.get("GROUPS", 2) == 2 and c64.get("PIN_SOFTMAX") and c64.get("P_LATE")
    assert not any(c.get("PIN_SOFTMAX") for c in attention.configs_for(128) + attention.configs_for(64))
    assert attention.configs_for(128, causal=True)[1:].count(c64) == 1      # D=128: in the space, not first
    for (small, causal), cfg in attention.DEFAULTS.items():
        assert cfg in attention.CONFIGS and attention.suits(cfg, 64 if small else 128, causal)
    # persistent without zig-zag stays out of causal runs (-12 % measured)
    assert all(c.get("ZIGZAG") for c in attention.configs_for(128, True) if c.get("PERSISTENT"))


def test_every_autotune_config_fits_in_smem():
    assert all(gemm_ws.smem_bytes(c) <= SMEM_LIMIT for c in gemm_ws.CONFIGS)
    assert all(gemm_pingpong.smem_bytes(c) <= SMEM_LIMIT for c in gemm_pingpong.CONFIGS)


def test_specs_are_registered():
    from tlx_workbench.kernels import MODULES, spec
    for name in MODULES:
        s = spec(name)
        assert s.configs and s.sim_configs and callable(s.launch) and callable(s.reference)


def test_attention_default_compiles_without_ptxas_advisories():
    """The default attention config compiles without ptxas advisories (no C7513: ptxas keeps its wgmmas
    asynchronous; converting P inside the softmax serialized them and cost 27 % in fp16 on the H200,
    benchmarks/RESULTS.md, attention forward, levers measured)."""
    default = attention.compile_report(attention.CONFIGS[0])
    assert default.ptxas_advisories == []


@pytest.mark.parametrize("causal", [False, True], ids=["non-causal", "causal"])
@pytest.mark.parametrize("n_ctx", [1000, 1024], ids=["ragged", "even"])
def test_attention_defaults_divide_once_a_row_not_once_an_element(causal, n_ctx):
    """O = acc / l in the defaults' epilogue is one reciprocal per row and a multiply per element: a division per
    element (Triton's fp32 ``/`` is ``div.full.f32``, ~9 SASS instructions) was 601 instructions of a consumer
    thread's tile against 169, and the reciprocal ran 0.5-1 % faster non-causal on an H100 (benchmarks/RESULTS.md,
    attention forward, levers measured). A thread holds 2 rows of a 64 x 128 accumulator (64 elements): the whole PTX may divide only
    a few times (once per row and code path), never per element."""
    import re

    cfg = attention.configs_for(128, causal, n_ctx)[0]
    ptx = attention.compile_offline(cfg, shape=(1, 2, n_ctx, 128), causal=causal).asm["ptx"]
    divisions = len(re.findall(r"\bdiv\.(?:full|rn|approx)\.f32", ptx))
    assert 0 < divisions <= 8, divisions


@pytest.mark.parametrize("n_ctx", [1000, 1024], ids=["ragged", "even"])
def test_attention_smem_estimate_bounds_the_compile_near_the_limit(n_ctx):
    """The configs whose estimate is within 40 KB of the limit, compiled at D=128 for a ragged and an even
    N: the compile never needs more than the estimate, so a config ``configs_for`` offers fits (a ragged
    N once took a config 13 KB past the limit into the forward's tune on the H200)."""
    even = n_ctx % 128 == 0
    near = [c for c in attention.CONFIGS if c.get("BM") == 128 and
            attention.smem_bytes(c, 128, even_m=even) > SMEM_LIMIT - 40_000]
    assert len(near) >= 3
    for cfg in near:
        causal = bool(cfg.get("ZIGZAG"))
        shared = attention.compile_offline(cfg, shape=(1, 2, n_ctx, 128), causal=causal).metadata.shared
        assert shared <= attention.smem_bytes(cfg, 128, even_m=even), cfg
        assert (cfg in attention.configs_for(128, causal, n_ctx)) is (shared <= SMEM_LIMIT), cfg
