"""The SMEM/TMEM map, read from the compiler's own allocation.

Offsets are the ``allocation.offset`` (SMEM) and ``tensor_memory_col_offset``
(TMEM) attributes that Triton's allocation passes put on the post-allocation
TTGIR (see :func:`artifacts.post_allocation_ttgir`); nothing here re-plans memory.
Two allocations whose byte ranges overlap share an *alias group*: the compiler
placed them there because their lifetimes do not overlap (reuse), or because the
kernel asked for it (``tlx.local_alias`` / ``reuse=``).
"""
from __future__ import annotations

import math

from .irtext import IRModule, Op
from .report import Allocation

_ALLOC_OPS = ("ttg.local_alloc", "ttng.tmem_alloc")


def _var_name(op: Op) -> str | None:
    if op.loc.name:
        return op.loc.name
    if op.results:
        name = op.results[-1].lstrip("%")
        if not name[:1].isdigit():
            return name.rstrip("_0123456789") or name
    return None


def _line(op: Op, file: str, first: int, last: int) -> int | None:
    fr = op.loc.pick(file, first, last)
    return fr.line if fr is not None and fr.file == file else None


def tmem_columns(shape: tuple[int, ...], elem_bits: int, encoding: str) -> int:
    """Columns one TMEM buffer of `shape` (rows x cols) takes: 32-bit cells, rows up to 128 lanes."""
    if not shape:
        return 0
    cols = shape[-1]
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    unpacked = "unpacked = true" in encoding or elem_bits >= 32
    per_row = cols if unpacked else math.ceil(cols * elem_bits / 32)
    # rows beyond the 128 lanes fold over into more columns
    return per_row * max(1, math.ceil(rows / 128))


def allocation_map(post: IRModule, pre: IRModule | None, barrier_allocs: set[str], file: str, first: int,
                   last: int, total_smem: int) -> list[Allocation]:
    """Every buffer, barrier array and scratch region, ordered by storage then offset.

    `barrier_allocs`: result names of the allocations that ``init_barrier`` initializes.
    """
    out: list[Allocation] = []
    scratch: list[tuple[Op, int]] = []
    for op in post.ops:
        if op.name == "ttg.local_alloc":
            off = op.int_attr("allocation.offset")
            md = op.result_memdesc
            if off is None or md is None:
                continue
            explicit = not op.operands     # `local_alloc : () -> ...` is the kernel's own tlx.local_alloc
            is_barrier = bool(set(op.results) & barrier_allocs) or (md.dtype == "i64" and md.shape[-1:] == (1,) and explicit)
            if explicit and len(md.shape) >= 2:
                num, shape = md.shape[0], md.shape[1:]
            else:
                num, shape = 1, md.shape
            size = math.prod(md.shape) * md.elem_bits // 8
            name = _var_name(op) if explicit else None
            if name is None:
                users = [u.name for u in post.ops if u.line > op.line and op.results
                         and any(r in u.operands for r in op.results) and u.scope == op.scope][:1]
                what = "tma_store" if users and "local_to_global" in users[0] else "staging"
                ln = _line(op, file, first, last)
                name = f"{what}@L{ln}" if ln else f"{what}@ttgir{op.line}"
            out.append(Allocation(
                name=name, line=_line(op, file, first, last), storage="smem",
                kind="barrier" if is_barrier else ("buffer" if explicit else "scratch"),
                shape=tuple(shape), dtype=md.dtype, num_buffers=num, offset=off, size=size))
        elif op.name == "ttng.tmem_alloc":
            col = op.int_attr("tensor_memory_col_offset")
            md = op.result_memdesc
            if col is None or md is None:
                continue
            explicit = not op.operands
            if explicit and len(md.shape) >= 3:
                num, shape = md.shape[0], md.shape[1:]
            else:
                num, shape = 1, md.shape
            cols = num * tmem_columns(shape, md.elem_bits, md.encoding)
            a = Allocation(name=_var_name(op) or f"tmem@{op.line}", line=_line(op, file, first, last),
                           storage="tmem", kind="buffer", shape=tuple(shape), dtype=md.dtype, num_buffers=num,
                           offset=col, size=cols, row_offset=op.int_attr("tensor_memory_row_offset") or 0)
            out.append(a)
        elif op.name != "tt.func":   # a function's offset is the base of its frame, not an allocation
            off = op.int_attr("allocation.offset")
            if off is not None:
                scratch.append((op, off))
    # the ws op's offset is where its captured values live and, above them, its partitions'
    # own allocations: only when no partition allocation starts there is it a region of its own
    own_starts = {a.offset for a in out if a.storage == "smem"}
    scratch = [(op, off) for op, off in scratch if op.name != "ttg.warp_specialize" or off not in own_starts]
    # compiler scratch (layout conversions, reductions, ...): the IR records only where it
    # starts, so its size is bounded by the next allocation that starts above it
    starts = sorted({a.offset for a in out if a.storage == "smem"} | {o for _, o in scratch} | {total_smem})
    for op, off in scratch:
        nxt = next((s for s in starts if s > off), total_smem)
        label = "warp_specialize captures" if op.name == "ttg.warp_specialize" else op.name.split(".", 1)[-1]
        a = Allocation(name=label, line=_line(op, file, first, last), storage="smem",
                       kind="scratch", shape=(), dtype="i8", num_buffers=1, offset=off, size=max(nxt - off, 0),
                       size_is_bound=True)
        out.append(a)
    _alias_groups(out)
    out.sort(key=lambda a: (a.storage != "smem", a.offset, -a.size))
    return out


def _overlap(a: Allocation, b: Allocation) -> bool:
    if a.offset >= b.offset + b.size or b.offset >= a.offset + a.size:
        return False
    if a.storage == "tmem":   # TMEM is 2-D: columns overlap, but lanes (rows) may not
        rows = lambda x: min(128, x.shape[-2]) if len(x.shape) >= 2 else 128  # noqa: E731
        return a.row_offset < b.row_offset + rows(b) and b.row_offset < a.row_offset + rows(a)
    return True


def _alias_groups(allocs: list[Allocation]) -> None:
    """Connected groups of overlapping allocations (per storage), numbered from 1 (TMEM from 1001)."""
    for storage, base in (("smem", 0), ("tmem", 1000)):
        items = [a for a in allocs if a.storage == storage and a.size > 0]
        parent = list(range(len(items)))

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in range(len(items)):
            for j in range(i + 1, len(items)):
                if _overlap(items[i], items[j]):
                    parent[find(i)] = find(j)
        groups: dict[int, list[Allocation]] = {}
        for i, a in enumerate(items):
            groups.setdefault(find(i), []).append(a)
        n = 0
        for members in sorted(groups.values(), key=lambda g: min(a.offset for a in g)):
            if len(members) > 1:
                n += 1
                for a in members:
                    a.alias_group = base + n
