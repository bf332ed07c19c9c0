"""Spin-waits across CTAs on the simulator: global atomics and volatile loads are scheduling points, a poll
that keeps reading the same value blocks until some task writes global memory, and a spin nothing can
satisfy any more is a deadlock that names its line (and says to raise ``resident`` when a CTA that would
raise the flag has not started)."""
import pytest
import torch
import triton
import triton.language as tl

import tlx_workbench as wb
from tlx_workbench.errors import DeadlockError


@triton.jit
def handoff_kernel(flags, out, VOLATILE: tl.constexpr):
    # CTA 0 waits for CTA 1's value: CTA 1 starts after CTA 0 unless both are resident
    if tl.program_id(0) == 0:
        if VOLATILE:
            while tl.load(flags + 1, volatile=True) != 1:
                pass
        else:
            while tl.atomic_cas(flags + 1, 1, 0, sem="acquire", scope="gpu") != 1:
                pass
        tl.store(out, tl.load(out + 1, cache_modifier=".cg") + 1)
    else:
        tl.store(out + 1, 41)
        tl.atomic_xchg(flags + 1, 1, sem="release", scope="gpu")


@triton.jit
def never_raised_kernel(flags):
    while tl.atomic_add(flags, 0, sem="acquire", scope="gpu") == 0:
        pass


@triton.jit
def ticket_kernel(counter, out):
    tl.store(out + tl.program_id(0), tl.atomic_add(counter, 1))


@pytest.mark.parametrize("volatile", [False, True], ids=["atomic_cas", "volatile_load"])
def test_flag_handoff_between_resident_ctas(volatile):
    flags, out = torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
    res = wb.simulate(handoff_kernel, flags, out, volatile, grid=(2,), resident=2, schedules=4)
    assert res.ok, res
    assert out.tolist() == [42, 41]
    assert flags.tolist() == ([0, 1] if volatile else [0, 0])      # the CAS lowered the flag again


def test_spin_on_a_cta_not_yet_started_names_the_line_and_resident():
    flags, out = torch.zeros(2, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)
    with pytest.raises(DeadlockError) as e:
        wb.simulate(handoff_kernel, flags, out, False, grid=(2,))       # resident=1: CTA 1 never starts
    err = e.value
    assert "blocked on global memory" in err.message
    assert "atomic_cas" in err.source_line
    assert "resident=2" in err.hint


def test_spin_that_nothing_satisfies_is_a_deadlock():
    flags = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(DeadlockError) as e:
        wb.simulate(never_raised_kernel, flags, grid=(2,), resident=2)
    assert "atomic_add" in e.value.source_line
    assert "no task that is still running writes global memory" in e.value.hint


def test_atomics_that_change_memory_never_block():
    counter, out = torch.zeros(1, dtype=torch.int32), torch.full((4,), -1, dtype=torch.int32)
    res = wb.simulate(ticket_kernel, counter, out, grid=(4,), resident=4, schedules=3)
    assert res.deadlock is None
    assert sorted(out.tolist()) == [0, 1, 2, 3] and counter.item() == 4
    # each atomic is a scheduling point of its CTA: the tickets' order depends on the interleaving, which a GPU
    # leaves free too: said in atomic_ordering, not a finding that fails the run
    assert res.findings == [] and res.atomic_ordering
    assert all("atomics ran in a different order" in a for a in res.atomic_ordering)
