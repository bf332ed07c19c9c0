"""Registers and stack read from the cubin's ELF sections agree with ``cuobjdump -res-usage``
(the tool the reader saves a process start on), with and without spills."""
import pytest

import tlx_workbench as wb
from tlx_workbench.compiler import artifacts

from spill_kernel import many_live_values

SIG = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"}


@pytest.mark.parametrize("maxnreg", [None, 32])
def test_elf_reader_matches_cuobjdump(maxnreg):
    r = wb.compile(many_live_values, signature=SIG, BLOCK=1024, num_warps=1, target="sm_90",
                   config={"maxnreg": maxnreg} if maxnreg else None)
    tool = artifacts.resource_usage(r.cubin)
    read = artifacts.resource_usage_from_cubin(r.cubin)
    assert read == {k: tool[k] for k in ("REG", "STACK", "LOCAL", "SHARED")}
    assert (r.resources.registers, r.resources.local_bytes, r.resources.spills) == (
        tool["REG"], tool["STACK"], tool["LOCAL"])
    if maxnreg:
        assert tool["REG"] <= maxnreg and tool["STACK"] > 0   # it did spill: the case worth checking


def test_unfamiliar_cubin_is_left_to_cuobjdump():
    assert artifacts.resource_usage_from_cubin(b"not an ELF file") is None
    assert artifacts.resource_usage_from_cubin(b"\x7fELF\x02\x01" + b"\0" * 10) is None
