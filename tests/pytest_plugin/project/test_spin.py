"""Kernels that never finish: a spin nobody ends (a deadlock), and a host loop the deadline ends."""
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def spin_until_set(flag_ptr, out_ptr):
    seen = tl.load(flag_ptr)
    while seen == 0:
        seen = tl.load(flag_ptr, volatile=True)
    tl.store(out_ptr, seen)


def test_spin_forever():
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    spin_until_set[(1,)](flag, out)
    assert out.item() == 1


@pytest.mark.tlx_sim_deadline(1)
def test_endless_launches():
    # a host loop that never ends: the per-test deadline stops it
    x = torch.ones(64, device="cuda")
    while True:
        spin_until_set[(1,)](x.to(torch.int32), x)


@triton.jit
def sum_many_times(x_ptr, out_ptr, n_rounds):
    offs = tl.arange(0, 16)
    acc = tl.zeros([16], dtype=tl.float32)
    for _ in range(n_rounds):
        acc += tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, acc)


@pytest.mark.tlx_sim_deadline(2)
def test_one_endless_launch():
    # one launch that would run for hours on the CPU: the deadline stops it inside the kernel
    x = torch.ones(16, device="cuda")
    out = torch.zeros(16, device="cuda")
    sum_many_times[(1,)](x, out, 2**31 - 1)
