"""What a sweep's static stage reads (resources, metadata, ptxas advisories, tasks) is right
without the parts it does not read: no nvdisasm with ``sass="lazy"``, no SMEM/TMEM allocation
re-run, no barrier table. Those come, unchanged, when first asked for."""
import pickle

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.compiler import artifacts
from tlx_workbench.compiler.irtext import IRModule
from tlx_workbench.compiler.tasks import task_layout
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.target import offline


@pytest.fixture
def disassembled(monkeypatch):
    """The cubins nvdisasm was started on (artifacts.disassemble, wherever it runs)."""
    calls = []
    real = artifacts.disassemble

    def counting(cubin):
        calls.append(len(cubin))
        return real(cubin)

    monkeypatch.setattr(artifacts, "disassemble", counting)
    return calls


def _tiny(**kw):
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    M = N = K = 256
    with offline("sm_90"):
        a, b, c = torch.empty(M, K).half(), torch.empty(K, N).half(), torch.empty(M, N).half()
        args, options = gemm_ws._kernel_call(a, b, c, cfg)
    wb.compiler.clear_cache()
    return wb.compile(gemm_ws.gemm_ws_coop_kernel, *args, target="sm_90", **options, **kw)


def test_static_fields_without_sass_or_allocation_passes(disassembled):
    r = _tiny(sass="lazy")
    res, meta = r.resources, r.metadata
    assert res.smem_bytes == meta["shared"] > 0 and res.smem_limit == 232448
    assert res.num_warps == meta["num_warps"] == sum(t.num_warps for t in r.tasks)
    assert res.tmem_columns == (meta.get("tmem_size") or 0) == 0
    assert res.registers == r.ptxas_functions[0].registers > 0 and res.spills == 0
    assert isinstance(r.ptxas_advisories, list)
    labels = [t.label for t in r.tasks]
    assert labels[0] == "default" and len(labels) >= 2
    assert [t.warp_start for t in r.tasks] == sorted(t.warp_start for t in r.tasks) and r.tasks[1].warp_start >= 4
    # none of that started nvdisasm or finished the deferred analysis
    assert disassembled == [] and not r._sass_job.started and r._sass is None
    assert r._analysis_job is not None and "ttgir_alloc" not in r.__dict__["stages"]
    assert r.ir("ptx").startswith("//") and r._analysis_job is not None

    # the tasks are the ones the op-by-op parse of the post-allocation module gives
    ttgir_alloc = r.stages["ttgir_alloc"]
    assert r._analysis_job is None and disassembled == []
    assert IRModule(ttgir_alloc).module_int_attr("ttg.shared") == meta["shared"]
    full = task_layout(IRModule(r.stages["ttgir"]), IRModule(ttgir_alloc), r.source.text, r.source.first_line,
                       r.options["num_warps"], r.constexprs)
    assert full.tasks == r.tasks
    assert {"a_ring", "b_ring"} <= {a.name for a in r.allocations} and r.barriers

    # SASS on first read, once
    assert "HGMMA" in r.sass and len(disassembled) == 1
    assert r.source_map.forward["sass"] and list(r.source_map.forward)[-1] == "sass" and len(disassembled) == 1


def test_background_mode_starts_nvdisasm_and_a_cache_hit_starts_a_lazy_one(disassembled):
    r = _tiny()
    assert r._sass_job is None or r._sass_job.started
    wb.compiler.clear_cache()
    lazy = _tiny(sass="lazy")
    assert not lazy._sass_job.started
    cfg = gemm_ws.SIM_CONFIGS["tiny"]
    with offline("sm_90"):
        a, b, c = torch.empty(256, 256).half(), torch.empty(256, 256).half(), torch.empty(256, 256).half()
        args, options = gemm_ws._kernel_call(a, b, c, cfg)
    again = wb.compile(gemm_ws.gemm_ws_coop_kernel, *args, target="sm_90", **options)
    assert again is lazy and lazy._sass_job.started
    assert "HGMMA" in lazy.sass


def test_unknown_sass_mode_is_refused():
    with pytest.raises(wb.CompileError, match="sass="):
        _tiny(sass="eager")


def test_pickle_finishes_the_deferred_parts():
    r = _tiny(sass="lazy")
    back = pickle.loads(pickle.dumps(r))
    assert back.allocations == r.allocations and back.barriers == r.barriers
    assert back.stages["ttgir_alloc"] == r.stages["ttgir_alloc"] and back.sass == r.sass


def test_nvdisasm_skips_dataflow_only_where_it_adds_nothing():
    r = _tiny(sass="lazy")
    assert not artifacts._dataflow_needed(r.cubin)
    assert "-ndf" in artifacts.nvdisasm_args(r.cubin)
    with_dataflow = artifacts._run_on_cubin([artifacts._tool("nvdisasm"), "-c", "-gi"], r.cubin)
    assert r.sass == with_dataflow
    assert artifacts._dataflow_needed(b"not an ELF file")


def test_nvdisasm_keeps_dataflow_for_indirect_branches():
    from tutorial_cases import case
    kernel, args, kw, target = case("blackwell_gemm_ws")
    r = wb.compile(kernel, *args, target=target, sass="lazy", **kw)
    assert artifacts._dataflow_needed(r.cubin) and "-ndf" not in artifacts.nvdisasm_args(r.cubin)
    assert "BRANCH_TARGETS" in r.sass
