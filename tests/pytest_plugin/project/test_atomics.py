"""Outputs that depend on the order of concurrent work: atomics (either order is right) and plain stores (a race)."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx


@triton.jit
def take_ticket(counter_ptr, out_ptr):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid * 2, tl.atomic_add(counter_ptr, 1, sem="relaxed"))
    tl.store(out_ptr + pid * 2 + 1, tlx.cluster_cta_rank())


@triton.jit
def last_store_wins(out_ptr, ROUNDS: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(ROUNDS):
                tl.load(out_ptr + 1, volatile=True)
                tl.store(out_ptr, i)
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tl.load(out_ptr + 1, volatile=True)
                tl.store(out_ptr, 100 + i)


def test_tickets_in_either_order():
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((4,), -1, dtype=torch.int32, device="cuda")
    take_ticket[(2,)](counter, out, ctas_per_cga=(2, 1, 1))
    assert counter.item() == 2 and sorted(out[0::2].tolist()) == [0, 1] and sorted(out[1::2].tolist()) == [0, 1]


def test_racing_stores():
    out = torch.zeros(2, dtype=torch.int32, device="cuda")
    last_store_wins[(1,)](out, ROUNDS=8)
    assert out[0].item() in (7, 107)
