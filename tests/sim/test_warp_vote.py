"""``tlx.vote_ballot_sync`` on the simulator, against a torch reference of ``vote.sync.ballot.b32`` per warp.

The installed compiler crashes (segfault) compiling vote_ballot_sync for sm_90 and sm_100, so these kernels are
simulate-only here. A tensor predicate is spread over the threads as Triton's default blocked layout spreads it
(sim/ops/warp_vote.py says why and when that is the layout the op gets).
"""
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from tlx_workbench.sim import simulate
from tlx_workbench.sim.ops.warp_vote import ballot, default_blocked


@triton.jit
def _ballot_1d(x_ptr, out_ptr, thresh, N: tl.constexpr, MASK: tl.constexpr):
    offs = tl.arange(0, N)
    b = tlx.vote_ballot_sync(MASK, tl.load(x_ptr + offs) < thresh)
    tl.store(out_ptr + offs, b)


def _warp_ballots(pred_bits_per_warp, mask):
    """int32 ballot of each warp from its 32 lanes' predicates (torch, lane l -> bit l)."""
    weights = torch.tensor([1 << lane for lane in range(32)], dtype=torch.int64)
    return ((pred_bits_per_warp.to(torch.int64) * weights).sum(-1) & mask)


def _as_int32(v):
    return (v & 0xFFFFFFFF).to(torch.int64).apply_(lambda u: u - (1 << 32) if u >= 1 << 31 else u).to(torch.int32)


@pytest.mark.parametrize("mask", [0xFFFFFFFF, 0x0F0F00FF])
def test_ballot_of_a_tensor_predicate_is_each_warps_lanes_bits(mask):
    N, warps = 128, 4                        # default layout: element i in lane i % 32 of warp i // 32
    x = torch.randn(N)
    out = torch.zeros(N, dtype=torch.int32)
    res = simulate(_ballot_1d, x, out, 0.3, N=N, MASK=mask, grid=(1,), num_warps=warps, gpu="H200")
    assert res.ok, res
    per_warp = _warp_ballots((x < 0.3).reshape(warps, 32), mask)
    assert torch.equal(out, _as_int32(per_warp.repeat_interleave(32)))
    assert any(s.name == "vote_ballot_sync" for s in res.trace.spans)


def test_ballot_of_a_tensor_smaller_than_the_warps_replicates_it():
    N, warps = 64, 4                         # warps 0 and 2 hold elements 0..31, warps 1 and 3 hold 32..63
    x = torch.randn(N)
    out = torch.zeros(N, dtype=torch.int32)
    simulate(_ballot_1d, x, out, 0.0, N=N, MASK=0xFFFFFFFF, grid=(1,), num_warps=warps, gpu="H200")
    per_half = _warp_ballots((x < 0).reshape(2, 32), 0xFFFFFFFF)
    assert torch.equal(out, _as_int32(per_half.repeat_interleave(32)))


def test_default_layout_matches_tritons_split():
    assert default_blocked([128], 4) == ([32], [4])
    assert default_blocked([16, 16], 4) == ([2, 16], [4, 1])
    assert default_blocked([128, 1], 4) == ([32, 1], [4, 1])
    assert default_blocked([4, 64], 8) == ([1, 32], [4, 2])


def test_per_thread_scalar_predicate_votes_per_lane():
    # what a per-thread value (thread_id < 16 in each warp) gives: 0x0000FFFF in every lane of every warp
    tid = torch.arange(64).numpy()
    out = ballot(0xFFFFFFFF, (tid % 32) < 16, [], 2, per_thread=True)
    assert out.tolist() == [0x0000FFFF] * 64


@triton.jit
def _ballot_uniform(out_ptr, v, MASK: tl.constexpr):
    tl.store(out_ptr + tl.program_id(0), tlx.vote_ballot_sync(MASK, v > tl.program_id(0)))


def test_uniform_scalar_predicate_is_the_mask_or_zero():
    out = torch.zeros(4, dtype=torch.int32)
    simulate(_ballot_uniform, out, 2, MASK=0x00FF00FF, grid=(4,), gpu="H200")
    assert out.tolist() == [0x00FF00FF, 0x00FF00FF, 0, 0]


@triton.jit
def _ballot_thread_id(out_ptr):
    tid = tlx.thread_id(0)
    b = tlx.vote_ballot_sync(0xFFFFFFFF, tid < 16)
    if tid == 0:
        tl.store(out_ptr, b)


def test_ballot_of_thread_id_predicate_as_tlx_tests_it():
    out = torch.zeros(1, dtype=torch.int32)
    simulate(_ballot_thread_id, out, grid=(1,), num_warps=1, gpu="H200")
    assert out.item() == 0x0000FFFF
