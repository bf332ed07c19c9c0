"""Outputs that differ between schedules: a race, or atomics' free ordering."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from tlx_workbench import simulate


@triton.jit
def take_tickets(counter_ptr, out_ptr, ROUNDS: tl.constexpr):
    # each task takes ROUNDS tickets; which task gets which number depends on who comes first, on a GPU too
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(ROUNDS):
                tl.store(out_ptr + i, tl.atomic_add(counter_ptr, 1))
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tl.store(out_ptr + ROUNDS + i, tl.atomic_add(counter_ptr, 1))


@triton.jit
def add_rows_atomically(x_ptr, acc_ptr, N: tl.constexpr, ROUNDS: tl.constexpr):
    # two tasks add rows of x into one fp32 row (as our attention backward adds dQ): last bits follow the order
    offs = tl.arange(0, N)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(ROUNDS):
                tl.atomic_add(acc_ptr + offs, tl.load(x_ptr + i * N + offs))
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tl.atomic_add(acc_ptr + offs, tl.load(x_ptr + (ROUNDS + i) * N + offs))


@triton.jit
def last_writer_wins(out_ptr, ROUNDS: tl.constexpr):
    # a real race: both tasks store to out[0] with nothing ordering them (the volatile load of out[1] is only a
    # point where the scheduler may switch tasks)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(ROUNDS):
                tl.load(out_ptr + 1, volatile=True)
                tl.store(out_ptr, i)
        with tlx.async_task(num_warps=4):
            for i in range(ROUNDS):
                tl.load(out_ptr + 1, volatile=True)
                tl.store(out_ptr, 100 + i)


def test_values_returned_by_atomics_may_differ_between_schedules():
    # before: a schedule-divergence finding ("a race")
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.zeros(16, dtype=torch.int32)
    res = simulate(take_tickets, counter, out, ROUNDS=8, grid=(1,), schedules=4)
    assert res.findings == []
    assert res.atomic_ordering and all("atomics ran in a different order" in s for s in res.atomic_ordering)
    assert sorted(out.tolist()) == list(range(16)) and counter.item() == 16


def test_fp32_atomics_may_differ_in_their_last_bits():
    x = torch.randn(16 * 64)
    acc = torch.zeros(64)
    res = simulate(add_rows_atomically, x, acc, N=64, ROUNDS=8, grid=(1,), schedules=4)
    assert res.findings == []
    assert res.atomic_ordering and all("agree within rounding" in s for s in res.atomic_ordering)
    torch.testing.assert_close(acc.double(), x.double().view(16, 64).sum(0), rtol=1e-5, atol=1e-5)


def test_plain_stores_racing_are_still_a_race():
    out = torch.zeros(2, dtype=torch.int32)
    res = simulate(last_writer_wins, out, ROUNDS=8, grid=(1,), schedules=4)
    assert [f.kind for f in res.findings] and {f.kind for f in res.findings} == {"schedule-divergence"}
    assert res.atomic_ordering == []


@triton.jit
def ticket_per_cta(counter_ptr, out_ptr):
    # each CTA of a 2-CTA cluster takes a ticket and stores it with its rank: either CTA may come first
    pid = tl.program_id(0)
    ticket = tl.atomic_add(counter_ptr, 1, sem="relaxed")
    tl.store(out_ptr + pid * 2, ticket)
    tl.store(out_ptr + pid * 2 + 1, tlx.cluster_cta_rank())


def test_tickets_taken_across_a_cluster_in_either_order_are_not_a_race():
    # before: the atomics' order was logged when a task reached the atomic, not when it ran, and by lane numbers
    # given in order of arrival; two orders looked alike and the outputs that followed them read as a race
    counter = torch.zeros(1, dtype=torch.int32)
    out = torch.full((4,), -1, dtype=torch.int32)
    res = simulate(ticket_per_cta, counter, out, grid=(2,), ctas_per_cga=(2, 1, 1), schedules=6)
    assert res.findings == [], res
    assert res.atomic_ordering and all("atomics ran in a different order" in s for s in res.atomic_ordering)
    assert counter.item() == 2 and sorted(out[0::2].tolist()) == [0, 1] and sorted(out[1::2].tolist()) == [0, 1]
