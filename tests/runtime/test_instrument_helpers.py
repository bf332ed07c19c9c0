"""wb.profile's clock64 recorder times the TLX ops inside the @triton.jit helpers a kernel calls:
the rewrite of helper calls (one value, a tuple, nothing, nested helpers; calls inside expressions
stay untimed), the library kernels' helper sites, offline sm_90 compiles, and instrumented kernels
run on the CPU simulator with their records decoded."""
import importlib.util
import inspect
import itertools
import linecache
import re
import sys
import textwrap

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

import tlx_workbench as wb
from tlx_workbench.compiler import instrument_rewrite
from tlx_workbench.kernels import attention, gemm_streamk, gemm_ws
from tlx_workbench.runtime import instrument
from tlx_workbench.target import offline


@triton.jit
def _h_one(bars, i):
    tlx.barrier_wait(bars[0], i & 1)
    return i + 1


@triton.jit
def _h_pair(x_ptr, i):
    v = tl.load(x_ptr + i)
    tl.store(x_ptr + i, v + 1)
    return v, i


@triton.jit
def _h_none(x_ptr, i):
    tl.store(x_ptr + i, i)


@triton.jit
def _h_early(x_ptr, i, FLAG: tl.constexpr):
    if FLAG:
        tl.store(x_ptr, i)
        return
    tl.store(x_ptr + 1, i)


@triton.jit
def _h_outer(x_ptr, bars, i):
    j = _h_one(bars, i)
    _h_none(x_ptr, j)
    return j


@triton.jit
def _h_plain(i):
    return i * 2


KERNEL = '''
@triton.jit
def k(x_ptr, bars, N: tl.constexpr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N):
                j = _h_one(bars, i)
                a, b = _h_pair(x_ptr, j)
                _h_none(x_ptr, i)
                _h_early(x_ptr, i, True)
                _h_one(bars, i)
                y = _h_one(bars, i) + 1
                z = _h_plain(i)
        with tlx.async_task(num_warps=4, replicate=2):
            j = _h_outer(x_ptr, bars, 0)
'''


def _lines_of(jit_fn):
    lines, first = inspect.getsourcelines(jit_fn.fn)
    return range(first, first + len(lines))


def test_helper_calls_are_rewritten_to_instrumented_copies():
    new, sites, tasks = instrument_rewrite.instrument_source(KERNEL, first_line=1, scope=globals(), file="k.py")
    assert tasks == ["default", "task1"]
    state = "_wb_prof, _wb_base, _wb_n, _wb_lim"
    # one value, a tuple, nothing: the record count comes back next to the helper's own value
    assert f"j, _wb_n = _wb__h_one({state}, bars, i)" in new
    assert f"(a, b), _wb_n = _wb__h_pair({state}, x_ptr, j)" in new
    assert f"_wb_n = _wb__h_none({state}, x_ptr, i)" in new
    assert f"_wb_n = _wb__h_early({state}, x_ptr, i, True)" in new
    assert f"_wb_drop0, _wb_n = _wb__h_one({state}, bars, i)" in new      # its value is dropped
    # a call inside an expression, and a helper without ops, stay as they are
    assert "y = _h_one(bars, i) + 1" in new and "z = _h_plain(i)" in new and "_wb__h_plain" not in new
    defs = {d.split("(")[0]: d for d in re.split(r"^def ", new, flags=re.MULTILINE) if d}
    one, pair, none, early = (defs[n] for n in ("_wb__h_one", "_wb__h_pair", "_wb__h_none", "_wb__h_early"))
    assert one.startswith(f"_wb__h_one({state}, bars, i):") and "return (i + 1, _wb_n)" in one
    assert "return ((v, i), _wb_n)" in pair
    assert none.rstrip().endswith("return _wb_n")
    assert early.count("return _wb_n") == 2      # the early bare return and the fall-through
    assert new.rstrip().split("\n\n")[-1].startswith("def k(_wb_prof, x_ptr, bars, N")
    # nested: task1's _h_outer calls its own copy of _h_one (records land in task1's lanes)
    assert f"j, _wb_n = _wb__h_one_2({state}, bars, i)" in defs["_wb__h_outer"]
    assert f"_wb_n = _wb__h_none_2({state}, x_ptr, j)" in defs["_wb__h_outer"]
    assert f"j, _wb_n = _wb__h_outer({state}, x_ptr, bars, 0)" in new
    # sites inside helpers carry the helper's own file and line
    helper_sites = [s for s in sites if s.func]
    assert {(s.func, s.lane_task) for s in helper_sites} == {
        ("_h_one", "default"), ("_h_pair", "default"), ("_h_none", "default"), ("_h_early", "default"),
        ("_h_one", "task1"), ("_h_none", "task1")}
    for s in helper_sites:
        assert s.file == __file__ and s.line in _lines_of(globals()[s.func])
        assert s.op in linecache.getline(s.file, s.line)
    assert not [s for s in sites if not s.func]   # the kernel itself has no op statements here


def test_without_scope_and_in_proton_mode_helpers_stay_untimed():
    for kw in ({}, {"scope": globals(), "mode": "proton"}):
        new, sites, _ = instrument_rewrite.instrument_source(KERNEL, **kw)
        assert "_wb__h_" not in new and sites == []


def test_library_kernels_time_their_helpers():
    att = instrument.instrument(attention.attention_fwd_persistent_kernel, capacity=8, max_ctas=1)
    kv = [s for s in att.sites if s.func == "_kv_step"]
    assert {"wait", "mma", "arrive"} <= {s.kind for s in kv}
    assert all(s.line in _lines_of(attention._kv_step) and s.file == attention._kv_step.fn.__code__.co_filename for s in kv)
    assert {"_kv_step", "_wait_turn", "_pass_turn"} <= set(att.helpers)

    ws = instrument.instrument(gemm_ws.gemm_ws_coop_kernel, capacity=8, max_ctas=1)
    strips = [s for s in ws.sites if s.func == "_store_strips"]
    assert strips and all(s.line in _lines_of(gemm_ws._store_strips) for s in strips)
    # the strip's TMA store, and the wait for the buffer it reuses (a wait on the task's own work)
    assert {(s.op, s.kind) for s in strips} == {("async_descriptor_store", "store"),
                                                ("async_descriptor_store_wait", "wait")}
    # gemm_ws's k-loops are helpers too: the mainloop is timed through them
    assert {"wait", "tma"} <= {s.kind for s in ws.sites if s.func == "_load_steps"}
    assert {"mma", "arrive"} <= {s.kind for s in ws.sites if s.func == "_mma_steps"}

    sk = instrument.instrument(gemm_streamk.gemm_streamk_kernel, capacity=8, max_ctas=1)
    by = {f: [s for s in sk.sites if s.func == f] for f in ("_load_steps", "_mma_steps", "_store_strips")}
    assert {"wait", "tma"} <= {s.kind for s in by["_load_steps"]}
    assert {s.lane_task for s in by["_load_steps"]} == {"default"}
    assert {"mma", "arrive"} <= {s.kind for s in by["_mma_steps"]}
    for f, mod in (("_load_steps", gemm_ws), ("_mma_steps", gemm_ws), ("_store_strips", gemm_ws)):
        assert all(s.line in _lines_of(getattr(mod, f)) and s.file == mod.__file__ for s in by[f]), f
    # _store_strips comes from gemm_ws: its copy runs among gemm_ws's names
    cp = next(c for c in instrument_rewrite._rewrite(*_src(gemm_streamk.gemm_streamk_kernel), "clock",
                                               gemm_streamk.__dict__, gemm_streamk.__file__)[3]
              if c.helper == "_store_strips")
    assert cp.globals is gemm_ws.__dict__


def _src(kernel):
    lines, first = inspect.getsourcelines(kernel.fn)
    return "".join(lines), first


def _gemm_compile(mod, kernel, cfg):
    inst = instrument.instrument(kernel, capacity=16, max_ctas=2)
    with offline("sm_90"):
        a, b, c = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
        args, options = mod._kernel_call(a, b, c, cfg)
        return inst.kernel.warmup(inst.buffer("cpu"), *args, grid=(1,), **options)


@pytest.mark.parametrize("mod,kernel", [(gemm_ws, "gemm_ws_coop_kernel"), (gemm_streamk, "gemm_streamk_kernel")],
                         ids=["gemm_ws", "gemm_streamk"])
def test_instrumented_gemms_compile_offline_for_hopper(mod, kernel):
    for cfg in mod.SIM_CONFIGS.values():
        ptx = _gemm_compile(mod, getattr(mod, kernel), cfg).asm["ptx"]
        assert "clock64" in ptx and "wgmma" in ptx and "%globaltimer" in ptx and "%smid" in ptx


@pytest.mark.parametrize("name", ["persistent", "tiny"])
def test_instrumented_attention_compiles_offline_for_hopper(name):
    cfg = attention.SIM_CONFIGS[name]
    with offline("sm_90"):
        q, k, v, o = (torch.empty((1, 2, 256, 64), dtype=torch.float16) for _ in range(4))
        kernel, args, options = attention._kernel_call(q, k, v, o, name == "tiny", 0.125, cfg, 132)
        inst = instrument.instrument(kernel, capacity=16, max_ctas=2)
        assert "_kv_step" in inst.helpers
        ck = inst.kernel.warmup(inst.buffer("cpu"), *args, grid=(1,), **options)
    # every clock read of _kv_step's ops is in the code: more than the kernel's own ops alone give
    own = sum(1 for s in inst.sites if not s.func)
    assert ck.asm["ptx"].count("clock64") >= 2 * (own + 8)


# --- the CPU simulator --------------------------------------------------------------------------
# The simulator stores an inline-PTX result as the dtype the kernel asks for (int64 here), so the
# counter's meaning returns plain integer ticks.
_TICK_STEP = 10


@pytest.fixture
def clock64_on_simulator():
    from sim_clocks import sim_clocks
    with sim_clocks(_TICK_STEP):
        yield


def _check_lanes(tr):
    for lane in tr.lanes():
        spans = list(tr.spans_of(cta=lane[0], task=lane[1], replica=lane[2]))
        assert all(0 <= s.start <= s.end for s in spans)
        assert all(a.end <= b.start for a, b in itertools.pairwise(spans))      # one op after the other
        assert all(s.start % _TICK_STEP == 0 for s in spans)


def test_instrumented_gemm_ws_runs_on_simulator_and_decodes_helper_spans(clock64_on_simulator):
    torch.manual_seed(11)
    M, N, K = 200, 136, 72                  # ragged: 2x3 tiles, 3 k-steps
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    cfg = gemm_ws.SIM_CONFIGS["two_strips"]
    inst = instrument.instrument(gemm_ws.gemm_ws_coop_kernel, capacity=128, max_ctas=2)
    buf = inst.buffer("cpu")
    from tlx_workbench.kernels._common import torch_alloc
    triton.set_allocator(torch_alloc)
    args, options = gemm_ws._kernel_call(a, b, c, cfg, 2)
    res = wb.simulate(inst.kernel, buf, *args, grid=(2,), gpu="H200", **options)
    assert res.ok, res
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 2e-3      # the records leave the result alone
    tr = instrument.decode(buf.numpy(), inst.sites, inst.tasks, file=inst.file, unit="cycles")
    assert {lane[:2] for lane in tr.lanes()} == {(0, "default"), (0, "task1"), (1, "default"), (1, "task1")}
    _check_lanes(tr)
    strips = [s for s in tr.spans if s.args.get("helper") == "_store_strips" and s.kind == "store"]
    store_waits = [s for s in tr.spans if s.args.get("helper") == "_store_strips" and s.kind == "wait"]
    assert len(store_waits) == len(strips) and {s.name for s in store_waits} == {"async_descriptor_store_wait"}
    waits = [s for s in tr.spans if s.args.get("helper") == "_wait_full"]
    # each consumer group stores 2 strips per tile; CTA 0 and 1 walk 3 tiles each
    assert len(strips) == 2 * 2 * 2 * 3 and {s.replica for s in strips} == {0, 1}
    assert all(s.line in _lines_of(gemm_ws._store_strips) and s.file == gemm_ws.__file__ for s in strips)
    assert len(waits) == 2 * 2 * 3 * 3 and all(s.kind == "wait" for s in waits)
    assert "tlx.async_descriptor_store(" in linecache.getline(strips[0].file, strips[0].line)


def test_instrumented_attention_runs_on_simulator_with_kv_step_spans(clock64_on_simulator):
    torch.manual_seed(12)
    q, k, v = (torch.randn(1, 1, 192, 64, dtype=torch.float16) for _ in range(3))
    o = torch.full_like(q, float("nan"))
    cfg = attention.SIM_CONFIGS["persistent"]
    kernel, args, options = attention._kernel_call(q, k, v, o, False, 0.125, cfg, 1)
    inst = instrument.instrument(kernel, capacity=256, max_ctas=1)
    buf = inst.buffer("cpu")
    res = wb.simulate(inst.kernel, buf, *args, grid=(1,), gpu="H200", **options)
    assert res.ok, res
    ref = attention.reference(q.double(), k.double(), v.double(), sm_scale=0.125)
    assert float((o.double() - ref).norm() / ref.norm()) < 3e-3
    tr = instrument.decode(buf.numpy(), inst.sites, inst.tasks, unit="cycles")
    _check_lanes(tr)
    kv = [s for s in tr.spans if s.args.get("helper") == "_kv_step"]
    # 2 query tiles x 2 groups, each (192 / 64 - 1) = 2 steps of 8 timed ops
    assert len(kv) == 2 * 2 * 2 * 8
    assert all(s.line in _lines_of(attention._kv_step) for s in kv)
    assert {"wait", "mma", "arrive"} <= {s.kind for s in kv}
    assert any(s.args.get("helper") == "_wait_turn" for s in tr.spans)


# --- helpers from another module ------------------------------------------------------------------
HELPER_MOD = '''
import triton
import triton.language as tl

SCALE = tl.constexpr(3)


@triton.jit
def scale_in_place(x_ptr, offs):
    """x *= SCALE (this module's SCALE); returns the old x."""
    v = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, v * SCALE)
    return v
'''

KERNEL_MOD = '''
import triton
import triton.language as tl
import {helpers} as hm
from {helpers} import scale_in_place

SCALE = tl.constexpr(5)            # not the helpers' SCALE


@triton.jit
def two_modules(x_ptr, y_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = scale_in_place(x_ptr, offs)
    w = hm.scale_in_place(z_ptr, offs)
    scale_in_place(z_ptr, offs)        # its value dropped
    tl.store(y_ptr + offs, v * SCALE + w)
'''


@pytest.fixture
def two_modules(tmp_path, monkeypatch):
    tag = f"wb_inst_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{tag}_helpers.py").write_text(HELPER_MOD)
    (tmp_path / f"{tag}_kernel.py").write_text(textwrap.dedent(KERNEL_MOD.format(helpers=f"{tag}_helpers")))
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location(f"{tag}_kernel", tmp_path / f"{tag}_kernel.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(f"{tag}_helpers", None)


def test_helpers_from_another_module_keep_their_own_names(two_modules, clock64_on_simulator):
    inst = instrument.instrument(two_modules.two_modules, capacity=8, max_ctas=1)
    assert inst.helpers == ("scale_in_place",)
    assert "v, _wb_n = _wb_scale_in_place(" in inst.source and "w, _wb_n = _wb_scale_in_place(" in inst.source
    assert "_wb_drop0, _wb_n = _wb_scale_in_place(" in inst.source
    helper_file = sys.modules[two_modules.__name__.replace("_kernel", "_helpers")].__file__
    assert [(s.op, s.func, s.file) for s in inst.sites] == [
        ("load", "scale_in_place", helper_file), ("store", "scale_in_place", helper_file),
        ("store", None, two_modules.__file__)]
    g = torch.Generator().manual_seed(13)
    x, z = torch.randn(64, generator=g), torch.randn(64, generator=g)
    x0, z0 = x.clone(), z.clone()
    y = torch.full_like(x, float("nan"))
    buf = inst.buffer("cpu")
    res = wb.simulate(inst.kernel, buf, x, y, z, BLOCK=64, grid=(1,))
    assert res.ok, res
    torch.testing.assert_close(x, x0 * 3)             # the helper multiplies by its module's SCALE
    torch.testing.assert_close(z, z0 * 9)
    torch.testing.assert_close(y, x0 * 5 + z0)        # the kernel by its own
    tr = instrument.decode(buf.numpy(), inst.sites, inst.tasks, file=inst.file, unit="cycles")
    assert [(s.name, s.file) for s in tr.spans] == [("load", helper_file), ("store", helper_file)] * 3 + [
        ("store", inst.file)]
    _check_lanes(tr)
    with offline("sm_90"):
        xs = [torch.empty(64) for _ in range(3)]
        ptx = inst.kernel.warmup(inst.buffer("cpu"), *xs, BLOCK=64, grid=(1,)).asm["ptx"]
    # a clock read before and after the three helper calls' ops and the kernel's store
    assert len(re.findall(r"mov\.u64\s+%rd\d+, %clock64;", ptx)) >= 2 * 7


def test_no_op_error_points_at_helper_calls_in_expressions():
    from tlx_workbench.errors import GPUError
    ns = dict(globals())
    src = textwrap.dedent('''
        @triton.jit
        def only_in_expr(x_ptr, bars):
            y = _h_pair(x_ptr, 0)[0] + 1
    ''')
    new, sites, _ = instrument_rewrite.instrument_source(src, scope=ns)
    assert sites == [] and "_wb__h_pair" not in new
    with pytest.raises(GPUError) as ei:
        instrument.instrument(attention._online_softmax)
    assert "statement" in ei.value.hint and "helper" in ei.value.hint
