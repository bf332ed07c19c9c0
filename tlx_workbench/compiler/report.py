"""The CompileReport: what the TLX compiler made of one kernel, for one target.

Plain data (dataclasses). The compiler package fills it; views (memory map, IR
explorer, HTML report) and the checker read it. Field names here are a contract
between those parts: add fields freely, rename none.
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class SourceInfo:
    """The kernel's Python source."""
    file: str
    first_line: int                 # line number of the `def` in `file`
    text: str                       # the whole function's source (decorators included)

    def line_text(self, line: int) -> str:
        """Text of absolute line `line` of `file` (empty if outside the function)."""
        idx = line - self.first_line
        lines = self.text.splitlines()
        return lines[idx] if 0 <= idx < len(lines) else ""


@dataclasses.dataclass
class SourceMap:
    """Kernel source line <-> lines of each IR stage (1-based line numbers everywhere).

    `forward[stage][src_line]` = sorted stage lines produced by that source line;
    `backward[stage][stage_line]` = the source line a stage line came from.
    Stages: "ttir", "ttgir", "llir", "ptx", "sass".
    """
    file: str
    forward: dict[str, dict[int, list[int]]] = dataclasses.field(default_factory=dict)
    backward: dict[str, dict[int, int]] = dataclasses.field(default_factory=dict)

    def lines_for(self, stage: str, src_line: int) -> list[int]:
        return self.forward.get(stage, {}).get(src_line, [])

    def source_line(self, stage: str, stage_line: int) -> int | None:
        return self.backward.get(stage, {}).get(stage_line)


@dataclasses.dataclass
class Resources:
    smem_bytes: int                 # the compiled kernel's metadata.shared
    smem_limit: int                 # the target's opt-in max per CTA
    registers: int | None           # per thread, from the cubin
    spills: int                     # spill stores + loads, bytes (from ptxas/SASS info)
    num_warps: int                  # total warps of the CTA, all tasks
    num_ctas: int = 1               # CTAs per cluster
    tmem_columns: int = 0           # sm_100: columns allocated
    tmem_limit: int = 0             # sm_100: 512
    local_bytes: int = 0            # stack / local memory per thread


@dataclasses.dataclass
class TaskInfo:
    """One async task (or its replica) of a warp-specialized kernel."""
    name: str                       # "default" or "task1", ...
    replica: int
    num_warps: int
    warp_start: int                 # first warp id of this task in the CTA
    registers: int | None           # setmaxnreg budget, if any
    line: int | None = None         # source line of the `with tlx.async_task(...)`


@dataclasses.dataclass
class Allocation:
    """One SMEM/TMEM buffer array or barrier array, where the compiler placed it."""
    name: str                       # the Python variable name in the kernel
    line: int | None
    storage: str                    # "smem" | "tmem"
    kind: str                       # "buffer" | "barrier" | "scratch"
    shape: tuple[int, ...]          # per buffer
    dtype: str                      # "f16", "bf16", "f32", "i64" (barriers), ...
    num_buffers: int
    offset: int                     # bytes (SMEM) or first column (TMEM), from the compiler's allocation
    size: int                       # bytes (SMEM) or columns (TMEM), all buffers together
    alias_group: int | None = None  # allocations sharing a group reuse the same space

    @property
    def buffer_size(self) -> int:
        return self.size // max(self.num_buffers, 1)


@dataclasses.dataclass
class BarrierSite:
    op: str                         # "wait" | "arrive" | "expect" | "tma_load" (signals it) | "mma_commit" | ...
    task: str | None                # task name, None outside async_tasks
    line: int | None
    args: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. {"bytes": 16384}, {"count": 1}


@dataclasses.dataclass
class BarrierInfo:
    name: str
    line: int | None
    kind: str                       # "mbarrier" | "warp" | "named"
    count: int | None               # initial arrive count (per thread for warp barriers); named: num_threads
    slots: int
    sites: list[BarrierSite] = dataclasses.field(default_factory=list)
    # warp barriers: the (num_warps, num_arrivals) they were declared with
    warp_args: dict[str, int] | None = None
