"""Clusters on the simulator: the wheel's 2-CTA and CLC tutorials unchanged, multicast TMA, remote stores,
cluster barriers, and seeded 2-CTA protocol bugs diagnosed with their lines."""
import dataclasses
import pathlib
import sys

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

from tlx_workbench.sim import simulate
from tlx_workbench.target import GPU_MODELS

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import sim_cluster_kernels as ck  # noqa: E402

SRC = pathlib.Path(ck.__file__).read_text().splitlines()


def line_of(text):
    return next(i + 1 for i, l in enumerate(SRC) if text in l)


def _close(c, a, b):
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)


def test_gemm_2cta_tutorial_over_10_schedules(tutorial):
    mod = tutorial("blackwell_gemm_2cta")
    a = torch.randn(512, 256, dtype=torch.float16)          # ctas_per_cga=(4, 2, 1): one cluster of 8 CTAs
    b = torch.randn(256, 256, dtype=torch.float16)
    res = simulate(mod.matmul, a, b, gpu="B200", schedules=10)
    _close(res.value, a, b)
    assert res.ok, res
    assert res.cluster_dims == (4, 2, 1) and len(res.ctas) == 8
    tr = res.trace
    assert {l[0] for l in tr.lanes()} == set(range(8))       # a lane per CTA of the cluster
    # odd ranks arrive on their leader's barrier; the leader's MMA commit arrives on both CTAs' dot_bars
    remote = [s for s in tr.spans if s.name == "barrier_arrive" and "cta" in s.args]
    assert remote and all(s.args["cta_rank"] % 2 == 0 and s.args["cta"] != s.cta for s in remote)
    assert all(s.args["two_ctas"] for s in tr.spans if s.kind == "mma")
    peer_arrivals = [e for e in tr.barrier_events if e.kind == "arrive" and e.barrier == "dot_bars" and e.cta % 2]
    assert peer_arrivals and all(e.line for e in peer_arrivals)


def test_gemm_ws_two_cta_config(tutorial):
    mod = tutorial("blackwell_gemm_ws")
    a = torch.randn(512, 192, dtype=torch.float16)
    b = torch.randn(192, 256, dtype=torch.float16)
    cfg = dict(BLOCK_SIZE_M=256, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMEM_BUFFERS=2,
               NUM_TMEM_BUFFERS=1, NUM_MMA_GROUPS=2, EPILOGUE_SUBTILE=2, NUM_CTAS=2, SPLIT_K=1,
               INTERLEAVE_EPILOGUE=0, ctas_per_cga=(2, 1, 1))
    res = simulate(mod.matmul, a, b, cfg, gpu="B200", schedules=3)
    _close(res.value, a, b)
    assert res.ok, res


def test_gemm_clc_tutorial_steals_tiles_dynamically(tutorial):
    mod = tutorial("blackwell_gemm_clc")
    a = torch.randn(512, 128, dtype=torch.float16)
    b = torch.randn(128, 512, dtype=torch.float16)             # 16 tiles of 128 x 128
    # two CTAs resident; every other CTA's tile is taken through clc_try_cancel, then "none left" (-1)
    res = simulate(mod.matmul, a, b, gpu="B200", schedules=10, config=0, resident=2)
    _close(res.value, a, b)
    assert res.ok, res
    assert sorted(res.ctas) == [0, 1]
    stolen = [v for _, v in res.clc_steals if v is not None]
    assert sorted(stolen) == list(range(2, 16))
    assert [v for _, v in res.clc_steals[-2:]] == [None, None]
    # CTAs that run in step take turns: CTA 0 takes 2, 4, ..., CTA 1 takes 3, 5, ...
    assert {s for s, v in res.clc_steals if v is not None} == {0, 1}
    assert all(v % 2 == s for s, v in res.clc_steals if v is not None)


def test_gemm_clc_tutorial_starts_what_fits_and_steals_the_rest(tutorial):
    mod = tutorial("blackwell_gemm_clc")
    a = torch.randn(512, 64, dtype=torch.float16)
    b = torch.randn(64, 512, dtype=torch.float16)              # 16 tiles
    # a B200 holds all 16 CTAs at once: each finds nothing left to take
    res = simulate(mod.matmul, a, b, gpu="B200", config=0)
    _close(res.value, a, b)
    assert sorted(res.ctas) == list(range(16)) and all(v is None for _, v in res.clc_steals)
    # on 6 SMs, 6 CTAs start and take the other 10 by turns; each CTA's answers are its own under every
    # interleaving, so the CTAs run in waves (two classes: four CTAs walk 3 tiles, two walk 2)
    six = dataclasses.replace(GPU_MODELS["B200"], sm_count=6)
    for seed in range(2):
        res = simulate(mod.matmul, a, b, gpu=six, config=0, seed=seed)
        _close(res.value, a, b)
        assert res.ok, res
        assert sorted(res.ctas) == list(range(6))
        taken = {s: sorted(v for c, v in res.clc_steals if c == s and v is not None) for s in range(6)}
        assert taken == {s: [t for t in range(6, 16) if t % 6 == s] for s in range(6)}, taken
        assert "waves" not in res.trace.meta and res.trace.meta["wave_leaders"] == 2


def test_hopper_gemm_ws_multicast_between_two_ctas(tutorial):
    mod = tutorial("hopper_gemm_ws")
    a = torch.randn(512, 128, dtype=torch.float16)
    b = torch.randn(128, 256, dtype=torch.float16)
    cfg = {"NUM_CTAS": 2, "BM": 128, "BN": 128, "GROUP_SIZE_M": 8, "USE_WARP_BARRIER": False,
           "EPILOGUE_SUBTILE": False}
    res = simulate(mod.matmul, a, b, gpu="H100", schedules=3, config=cfg)
    _close(res.value, a, b)
    assert res.ok, res
    mc = [s for s in res.trace.spans if s.name == "async_descriptor_load" and "multicast" in s.args]
    assert mc and all(len(s.args["multicast"]) == 2 for s in mc)


@pytest.mark.parametrize("use_async", [False, True], ids=["remote_shmem_store", "async_remote_shmem_store"])
def test_cluster_allgather_through_remote_smem(use_async):
    x = torch.randn(8 * 32)
    out = torch.zeros(8 * 4 * 32)
    res = simulate(ck.cluster_allgather, x, out, BLOCK=32, NUM_CTAS=4, ASYNC=use_async, grid=(8,),
                   ctas_per_cga=(4, 1, 1), gpu="B200", schedules=3)
    ref = x.view(2, 4, 32).unsqueeze(1).expand(2, 4, 4, 32).reshape(-1)
    torch.testing.assert_close(out, ref)
    assert res.ok, res
    assert any(s.name == "cluster_barrier" for s in res.trace.spans)


def _gemm_2cta(bug, schedules=1):
    BM, BN, BK = 128, 128, 64
    a = torch.randn(256, 128, dtype=torch.float16)
    b = torch.randn(128, BN, dtype=torch.float16)
    c = torch.zeros(256, BN)
    ad = TensorDescriptor(a, list(a.shape), [128, 1], [BM, BK])
    bd = TensorDescriptor(b, list(b.shape), [BN, 1], [BK, BN // 2])
    res = simulate(ck.gemm_2cta, ad, bd, c, 128, BM=BM, BN=BN, BK=BK, BUG=bug, grid=(2,), ctas_per_cga=(2, 1, 1),
                   gpu="B200", schedules=schedules, on_deadlock="return")
    return res, a, b, c


def test_correct_2cta_protocol_is_clean():
    res, a, b, c = _gemm_2cta("", schedules=5)
    _close(c, a, b)
    assert res.ok, res


def test_bytes_expected_on_both_ctas_is_diagnosed_on_the_peer():
    res, *_ = _gemm_2cta("expect_both")
    d = res.deadlock
    assert d is not None and d.ctas == [0, 1]
    first = d.blocked[0]                        # the root cause is listed first
    assert first.lane[0] == 1 and first.barrier == "b_bar[0]"
    assert first.line == line_of("# BUG: waits for bytes that land in the leader")
    assert first.missing_bytes == 64 * (128 // 2) * 2      # the half of B it announced
    assert "LEADER" in first.reason and "two_ctas" in first.reason
    # the report leads with the line to change: the peer's expect_bytes (its wait is the other half)
    assert d.line == line_of("# BUG: the peer expects its bytes locally")
    assert d.cause.other_line == first.line


def test_arrive_count_1_where_both_ctas_arrive():
    res, *_ = _gemm_2cta("count1")
    f = [x for x in res.findings if x.kind == "cluster-arrive-count"]
    assert f and f[0].line == line_of("# BUG: both CTAs arrive on it")
    assert f[0].other_line == line_of("tlx.barrier_arrive(cta_bar[0], 1, remote_cta_rank=rank & ~1)")
    if res.deadlock is not None:                # the phases ran ahead of the leader's wait
        first = res.deadlock.blocked[0]
        assert first.barrier == "cta_bar[0]" and "arrive_count" in first.reason


def test_peer_waiting_on_its_own_copy_of_the_leaders_barrier():
    res, *_ = _gemm_2cta("peer_waits")
    d = res.deadlock
    first = d.blocked[0]
    assert first.lane[0] == 1 and first.line == line_of("# BUG: the arrivals went to the leader's cta_bar")
    assert "go to the copy in CTA 0" in first.reason
    leader = next(b for b in d.blocked if b.lane[0] == 0)
    assert "consequence" in leader.reason


def test_clc_multi_cta_clusters_take_whole_cluster_tiles():
    out = torch.zeros(16, dtype=torch.int32)             # 8 clusters of 2 CTAs
    res = simulate(ck.clc_pairs, out, NUM_CTAS=2, grid=(16,), ctas_per_cga=(2, 1, 1), gpu="B200", schedules=5,
                   resident=2)
    assert torch.equal(out, torch.ones(16, dtype=torch.int32)), out      # every CTA slot exactly once
    assert res.ok, res
    assert sorted(res.ctas) == [0, 1, 2, 3]              # two resident clusters did all the work
    # only rank 0 of a cluster asks; the answer (16 bytes) lands in both CTAs' responses
    stolen = sorted(v for _, v in res.clc_steals if v is not None)
    assert stolen == list(range(4, 16, 2))
    assert all(s in (0, 2) for s, _ in res.clc_steals)


def test_waiting_on_a_remote_barrier_is_a_clear_error():
    import tlx_workbench as wb
    with pytest.raises(wb.SimulationError) as ei:
        simulate(ck.wait_remote, torch.zeros(2, dtype=torch.int32), grid=(2,), ctas_per_cga=(2, 1, 1), gpu="B200")
    e = ei.value
    assert "remote_view" in e.message and "own shared memory" in e.message
    assert e.line == line_of("# BUG: waits on the leader's barrier from every CTA")
    assert "pred=" in e.hint


@pytest.mark.parametrize("m,n,cfg", [(2, 1024, None), (3, 1000, {"num_reduction_ctas": 4, "BLOCK_SIZE_M": 2})],
                         ids=["2ctas", "4ctas-masked"])
def test_multi_cta_layernorm_tutorial_over_a_1xn_cluster(tutorial, m, n, cfg):
    # its configs declare ctas_per_cga=(1, n, 1), which uTLX refuses at import: any_cluster_shape lets the
    # simulator run TLX's meaning (rows of the sum reduced across the cluster with async remote stores)
    mod = tutorial("blackwell-multi-cta-layernorm_test", any_cluster_shape=True)
    x = torch.randn(m, n, dtype=torch.float16)
    w, b = torch.randn(n, dtype=torch.float16), torch.randn(n, dtype=torch.float16)
    res = simulate(mod.multi_cta_layernorm, x, w, b, 1e-5, gpu="B200", schedules=3, config=cfg)
    out, mean, rstd = res.value
    ref = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(out.double(), ref, atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(mean.double(), x.double().mean(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rstd.double(), 1 / (x.double().var(1, unbiased=False) + 1e-5).sqrt(),
                               atol=1e-4, rtol=1e-4)
    assert res.ok, res
    ctas, bm = (2, 1) if cfg is None else (4, 2)
    assert res.cluster_dims == (1, ctas, 1) and res.grid == (-(-m // bm), ctas, 1)


def _ws_exchange(sync, schedules=1):
    x = torch.randn(4 * 32)                               # two clusters of 2 CTAs, a block of 32 per CTA
    out = torch.zeros(4 * 32)
    res = simulate(ck.ws_exchange, x, out, BLOCK=32, SYNC=sync, grid=(4,), ctas_per_cga=(2, 1, 1), gpu="H200",
                   schedules=schedules, on_deadlock="return")
    return res, x, out


def test_cluster_barrier_first_thing_in_every_async_task_is_clean():
    res, x, out = _ws_exchange("tasks", schedules=5)
    assert res.ok, res
    torch.testing.assert_close(out, x.view(2, 2, 32).flip(1).reshape(-1))   # each CTA got its peer's block
    assert sum(s.name == "cluster_barrier" for s in res.trace.spans) == 8    # 2 tasks x 4 CTAs


@pytest.mark.parametrize("sync,marker,todo", [("top", "# BUG: outside async_tasks, before it", "first thing"),
                                              ("after", "# BUG: outside async_tasks, after it", "last thing")],
                         ids=["before", "after"])
def test_cluster_barrier_outside_async_tasks_is_a_hang(sync, marker, todo):
    # on the GPU only the default task's warps run code outside async_tasks: the others never arrive
    res, *_ = _ws_exchange(sync)
    d = res.deadlock
    assert d is not None and d.ctas == [0, 1], res
    assert d.line == line_of(marker)
    assert all(b.kind == "cluster-ws" and b.line == d.line for b in d.blocked) and len(d.blocked) == 2
    assert "outside tlx.async_tasks()" in d.message and f"at line {d.line}" in d.message
    assert f"call tlx.cluster_barrier() {todo} in every async_task" in d.hint
    assert f"the async_tasks at line {line_of('with tlx.async_tasks():')}" in d.blocked[0].reason
    # the default: raised like every other hang, naming the line and what to do
    import tlx_workbench as wb
    with pytest.raises(wb.DeadlockError) as ei:
        simulate(ck.ws_exchange, torch.randn(64), torch.zeros(64), BLOCK=32, SYNC=sync, grid=(2,),
                 ctas_per_cga=(2, 1, 1), gpu="H200")
    assert ei.value.line == d.line and ei.value.hint == d.hint
