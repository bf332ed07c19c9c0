"""A Hopper 2-CTA pair sharing B through multicast TMA (uTLX on Triton 3.8 cannot compile its remote
arrivals): the checker still runs the simulator and reports the two classic mistakes with their lines;
a runtime value where a constant is needed gets a compile error that says so."""
import pathlib

import pytest
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import tlx_workbench as wb

import multicast_kernels as mk

SRC = pathlib.Path(mk.__file__).read_text().splitlines()
M, N, K = 256, 256, 128


def bug_line(name):
    return next(i + 1 for i, l in enumerate(SRC) if l.rstrip().endswith(f"# BUG: {name}"))


def _check(bug):
    torch.manual_seed(7)
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.zeros(M, N, dtype=torch.float16)
    ad, bd = TensorDescriptor.from_tensor(a, [64, 32]), TensorDescriptor.from_tensor(b, [32, 64])
    res = wb.check(mk.pair_gemm, ad, bd, c, M, N, K, BM=64, BN=128, BK=32, STAGES=2, BUG=bug, grid=(8,),
                   ctas_per_cga=(2, 1, 1), gpu="H200")
    return res, c, a, b


def test_correct_pair_is_clean_and_simulated_although_utlx_cannot_build_it():
    res, c, a, b = _check("none")
    assert res.ok and res.sim is not None and res.sim.ok, res
    assert any("could not build" in n and f"line {bug_line('remote')}" in n for n in res.notes), res.notes
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=2e-2, rtol=1e-2)   # the simulated run wrote c


def test_release_to_our_loader_only_is_a_cross_cta_race():
    res, _, _, _ = _check("local_release")
    races = [f for f in res if f.rule_id == "race"]
    assert races and not res.ok, res
    f = races[0]
    assert {bug_line("multicast"), bug_line("read")} <= {ln for _, ln in f.lines}, f
    assert "multicast" in f.message and "remote_cta_rank=" in f.message, f.message
    assert "remote_cta_rank=peer" in f.fix and "arrive_count" in f.fix, f.fix


def test_cluster_barrier_outside_async_tasks_is_the_hang():
    res, _, _, _ = _check("sync_at_top")
    (d,) = [f for f in res if f.rule_id == "deadlock"]
    assert d.line == bug_line("sync_at_top")
    assert "every async_task" in d.fix


def test_runtime_offset_where_a_constant_is_needed_names_the_line():
    x = torch.randn(64, 128, dtype=torch.float16)
    with pytest.raises(wb.CompileError) as ei:
        wb.compile(mk.slice_at_rank, TensorDescriptor.from_tensor(x, [64, 128]), torch.empty(64, 64), BN=128)
    e = ei.value
    assert e.line == bug_line("runtime offset")
    assert "compile time" in e.hint and "if rank == 0" in e.hint
