"""Every Hopper TLX tutorial in the installed wheel (and blackwell_gemm_ws for sm_100)
compiles unchanged through compile(); general facts of every report, then per-kernel ones."""
import linecache
import re

import pytest

import tlx_workbench as wb
from tlx_workbench.compiler import artifacts
from tlx_workbench.compiler.irtext import IRModule

from tutorial_cases import HOPPER, case

_REPORTS = {}


def report_for(name):
    if name not in _REPORTS:   # one compile per kernel per test session
        kernel, args, kw, target = case(name)
        _REPORTS[name] = wb.compile(kernel, *args, target=target, **kw)
    return _REPORTS[name]


ALL = HOPPER + ["blackwell_gemm_ws"]


@pytest.mark.parametrize("name", ALL)
def test_compiles_and_report_is_consistent(name):
    r = report_for(name)
    assert r.target == ("sm_100" if name.startswith("blackwell") else "sm_90")
    # resources: the compiled kernel's own numbers
    assert r.resources.smem_bytes == r.metadata["shared"]
    assert IRModule(r.stages["ttgir_alloc"]).module_int_attr("ttg.shared") == r.metadata["shared"]
    assert r.resources.num_warps == r.metadata["num_warps"]
    assert r.resources.tmem_columns == (r.metadata.get("tmem_size") or 0)
    # registers/stack (read from the cubin's ELF sections) are what cuobjdump says
    tool = artifacts.resource_usage(r.cubin)
    assert (r.resources.registers, r.resources.local_bytes, r.resources.spills) == (
        tool["REG"], tool["STACK"], tool["LOCAL"])
    # tasks tile the CTA's warps exactly
    warps = sorted((t.warp_start, t.warp_start + t.num_warps) for t in r.tasks)
    assert warps[0][0] == 0 and warps[-1][1] == r.resources.num_warps
    assert all(a[1] == b[0] for a, b in zip(warps, warps[1:])), warps
    # allocations: inside the total, overlapping only within an alias group
    for storage, total in (("smem", r.resources.smem_bytes), ("tmem", r.resources.tmem_columns)):
        items = [a for a in r.allocations if a.storage == storage]
        for a in items:
            assert 0 <= a.offset and a.offset + a.size <= total, a
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                    assert a.alias_group is not None and a.alias_group == b.alias_group, (a, b)
    # barriers: count and slots are what the IR initializes
    names = sorted((b.name for b in r.barriers if b.kind != "named"), key=len, reverse=True)
    inits = {}
    for val, count in re.findall(r"ttng\.init_barrier %([\w.]+), (\d+)", r.stages["ttgir"]):
        owner = next(n for n in names if val == n or re.fullmatch(re.escape(n) + r"_\d+", val))
        inits.setdefault(owner, []).append(int(count))
    for b in r.barriers:
        if b.kind == "named":
            continue
        assert len(inits[b.name]) == b.slots and set(inits[b.name]) == {b.count}, b.name
        for s in b.sites:   # every site names a real line of the kernel's file and a task
            assert s.line and linecache.getline(r.source.file, s.line).strip(), s
            assert s.task is not None, s
    assert r.sass.count("\n") > 10 and r.source_map.forward["ptx"] and r.source_map.forward["sass"]


def test_pingpong_named_barriers():
    r = report_for("hopper-persistent-gemm-ws-pingpong")
    named = {b.named_id: b for b in r.barriers if b.kind == "named"}
    assert set(named) == {9, 10} and all(b.count == 256 for b in named.values())
    for b in named.values():
        assert {s.op for s in b.sites} == {"wait", "arrive"}
        assert {s.task for s in b.sites} == {"task1[0]", "task1[1]"}
        assert all("named_barrier" in linecache.getline(r.source.file, s.line) for s in b.sites)


def test_cooperative_register_budgets():
    r = report_for("hopper-persistent-gemm-ws-cooperative")
    assert [(t.label, t.registers) for t in r.tasks] == [("default", 40), ("task1[0]", 232), ("task1[1]", 232)]
    assert "setmaxnreg.inc.sync.aligned.u32 \t232" in r.stages["ptx"]


def test_fa_replicas_from_constexpr_expression():
    r = report_for("hopper_fa_ws")   # replicate=NUM_MMA_GROUPS, num_warps=NUM_MMA_WARPS // NUM_MMA_GROUPS
    assert r.constexprs["NUM_MMA_GROUPS"] == 2
    assert [t.label for t in r.tasks] == ["default", "task1[0]", "task1[1]"]
    q = r.allocation("q_tiles")
    assert (q.num_buffers, q.shape, q.dtype) == (2, (64, 128), "f16")


def test_vector_add2_two_tasks_no_barriers():
    r = report_for("vector-add2")
    assert [(t.label, t.num_warps) for t in r.tasks] == [("default", 4), ("task1", 4)]
    assert r.barriers == []


def test_pipelined_gemm_without_warp_specialization():
    r = report_for("hopper_gemm_pipelined")
    assert [(t.label, t.num_warps) for t in r.tasks] == [("default", 8)]
    a = r.allocation("buffers_A")
    assert (a.num_buffers, a.shape) == (3, (128, 64))


def test_blackwell_tmem_and_padding_task():
    r = report_for("blackwell_gemm_ws")
    assert r.resources.tmem_limit == 512 and r.resources.tmem_columns == r.metadata["tmem_size"] > 0
    tm = r.allocation("tmem_buffers")
    assert tm.storage == "tmem" and tm.dtype == "f32" and tm.size <= r.resources.tmem_columns
    by = {t.label: t for t in r.tasks}
    assert by["task1"].num_warps == by["task2"].num_warps == 1
    assert by["task1"].registers == by["task2"].registers == 24       # async_task(num_regs=24)
    assert "tcgen05.mma" in r.stages["ptx"]
    full = r.barrier("A_smem_full_bars")
    assert {s.task for s in full.sites if s.op == "expect"} == {"task2"}
    assert {s.task for s in full.sites if s.op == "wait"} == {"task1"}


def test_same_kernel_two_targets_in_one_process_without_touching_its_jit_cache():
    kernel, args, kw, _ = case("vector-add2")
    r90 = wb.compile(kernel, *args, target="sm_90", **kw)
    r100 = wb.compile(kernel, *args, target="sm_100", **kw)
    assert ".target sm_90a" in r90.stages["ptx"] and ".target sm_100a" in r100.stages["ptx"]
    assert r90 is not r100 and r90.cache_key != r100.cache_key
    assert all(not cache for cache, *_ in kernel.device_caches.values())
