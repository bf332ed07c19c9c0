"""The FP8 GEMM (kernels/gemm_fp8.py) on the CPU simulator at small ragged shapes, against the float64
reference; its launcher's checks; its sm_90 compile (the wgmma must be an fp8 one).

Tolerance: the products of two fp8 values are exact in fp32 and these K are small, so the only error
left is the final rounding to the output type: at most half an ulp, a relative 2^-8 (bf16) or 2^-11
(fp16) of |ref|; near zero an absolute floor of 1e-3 * max|ref| covers the fp32 sum's own rounding."""
import re

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.errors import TLXWorkbenchError
from tlx_workbench.kernels import gemm_fp8

HALF_ULP = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}


def _check(c, a, b, sa, sb):
    assert torch.isfinite(c.float()).all(), "some output elements were never written (NaN-poisoned)"
    ref = gemm_fp8.reference(a, b, sa, sb, torch.float64)
    err = (c.double() - ref).abs() / (ref.abs() + 1e-3 * ref.abs().max())
    assert float(err.max()) <= 1.05 * HALF_ULP[c.dtype], float(err.max())


def _simulate(shape, cfg, *, rowwise, a_dtype="float8_e4m3fn", b_dtype=None, out=torch.bfloat16, num_sms=2,
              schedules=2):
    M, N, K = shape
    a, b, sa, sb = gemm_fp8.make_inputs(shape, a_dtype, rowwise=rowwise, b_dtype=b_dtype)
    c = torch.full((M, N), float("nan"), dtype=out)
    with wb.simulate(gpu="H200", seed=0, schedules=schedules) as sim:
        gemm_fp8.launch(a, gemm_fp8.k_major_b(b), c, sa, sb, cfg, num_sms=num_sms)
    assert sim.result.ok, sim.result
    return c, a, b, sa, sb


@pytest.mark.parametrize("name", list(gemm_fp8.SIM_CONFIGS))
@pytest.mark.parametrize("rowwise", [False, True], ids=["per_tensor", "rowwise"])
def test_fp8_gemm_on_simulator(name, rowwise):
    torch.manual_seed(11)
    # ragged in M, N and K (K=80: a partial last k-slice for BK=64 and BK=32); 2 CTAs walk 4+ tiles each
    c, *ops = _simulate((200, 136, 80), gemm_fp8.SIM_CONFIGS[name], rowwise=rowwise)
    _check(c, *ops)


@pytest.mark.parametrize("a_dtype,b_dtype", [("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn"),
                                             ("float8_e5m2", "float8_e5m2")])
@pytest.mark.parametrize("out", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_fp8_formats_and_output_dtypes(a_dtype, b_dtype, out):
    torch.manual_seed(12)
    c, *ops = _simulate((136, 72, 48), gemm_fp8.SIM_CONFIGS["tiny"], rowwise=True, a_dtype=a_dtype,
                        b_dtype=b_dtype, out=out, schedules=1)
    _check(c, *ops)


@pytest.mark.parametrize("shape", [(64, 8, 16), (129, 200, 16), (250, 64, 208), (128, 64, 64)])
def test_fp8_ragged_shapes(shape):
    """A tile bigger than the problem, one row past a tile, K of one partial slice or several, an exact fit."""
    torch.manual_seed(13)
    c, *ops = _simulate(shape, gemm_fp8.SIM_CONFIGS["two_strips_wait0"], rowwise=shape[0] % 2 == 1,
                        out=torch.float16, num_sms=3, schedules=1)
    _check(c, *ops)


def test_matmul_fp8_takes_b_as_scaled_mm_does():
    """b column-major (b.t() contiguous) is read in place; a row-major b gives the same result via a copy."""
    torch.manual_seed(14)
    a, b, sa, sb = gemm_fp8.make_inputs((130, 64, 32), rowwise=False)
    assert b.t().is_contiguous() and gemm_fp8.k_major_b(b).data_ptr() == b.data_ptr()
    b_rows = b.contiguous()
    assert gemm_fp8.k_major_b(b_rows).data_ptr() != b_rows.data_ptr()
    cfg = gemm_fp8.SIM_CONFIGS["tiny"]
    with wb.simulate(gpu="H200", seed=0) as sim:
        c1 = gemm_fp8.matmul_fp8(a, b, sa, sb, config=cfg)
        c2 = gemm_fp8.matmul_fp8(a, b_rows, sa, sb, out_dtype=torch.float16, config=cfg)
    assert all(r.ok for r in sim.results)
    assert c1.dtype == torch.bfloat16 and c2.dtype == torch.float16
    _check(c1, a, b, sa, sb)
    _check(c2, a, b, sa, sb)


@pytest.mark.parametrize("bad,words", [
    (lambda a, b, sa, sb: (a.half(), b, sa, sb), "float8_e4m3fn or float8_e5m2"),
    (lambda a, b, sa, sb: (a, b, sa, sb.reshape(1, 1, 1).expand(2, 1, 32)), "(1, 64)"),
    (lambda a, b, sa, sb: (a, b, sa.double(), sb), "float32"),
    (lambda a, b, sa, sb: (a, b, torch.ones(3, 1), sb), "(64, 1)"),
    (lambda a, b, sa, sb: (a[:, :24].contiguous(), b[:24], sa, sb), "multiple of 16"),
])
def test_launcher_errors_say_what_to_do(bad, words):
    a, b, sa, sb = gemm_fp8.make_inputs((64, 64, 32))
    with pytest.raises(TLXWorkbenchError) as e:
        gemm_fp8.matmul_fp8(*bad(a, b, sa, sb), config=gemm_fp8.SIM_CONFIGS["tiny"])
    assert words in str(e.value) and e.value.hint


@pytest.mark.parametrize("cfg,kw", [
    (gemm_fp8.SIM_CONFIGS["tiny"], dict(a_dtype="float8_e4m3fn", b_dtype="float8_e4m3fn")),
    (gemm_fp8.CONFIGS[0], dict(a_dtype="float8_e4m3fn", b_dtype="float8_e5m2", rowwise=True)),
    (next(c for c in gemm_fp8.CONFIGS if c.get("PINGPONG")), dict(a_dtype="float8_e4m3fn", b_dtype="float8_e4m3fn",
                                                                  rowwise=True)),
], ids=["tiny-e4m3", "default-e4m3xe5m2-rowwise", "pingpong-rowwise"])
def test_fp8_gemm_compiles_for_sm90(cfg, kw):
    k = gemm_fp8.compile_offline(cfg, **kw)
    ptx = k.asm["ptx"]
    assert k.metadata.shared <= gemm_fp8.SMEM_LIMIT
    assert k.metadata.shared <= gemm_fp8.smem_bytes(cfg)      # the pruning estimate never undercounts
    b_fmt = "e5m2" if kw["b_dtype"] == "float8_e5m2" else "e4m3"
    mmas = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k\d+)\.f32\.(\w+)\.(\w+)", ptx))
    assert mmas == {(f"m64n{cfg['BN']}k32", "e4m3", b_fmt)}, mmas
    assert "wgmma.wait_group.sync.aligned 1" in ptx            # one wgmma kept in flight across k-steps
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{cfg['MMA_REGS']}" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx   # TMA store epilogue
    if cfg.get("PINGPONG"):     # the two turns of the tensor core: named barriers 14 and 15
        assert "bar.sync \t14, 256" in ptx and "bar.arrive \t15, 256" in ptx


@pytest.mark.parametrize("name", ["gemm_fp8", "gemm_fp8_rowwise"])
def test_explorer_problem_proves_and_drops_configs(name):
    """The explorer's fp8 problems: the default config passes the simulated stage against float64; a one-slot
    ring with a wgmma kept in flight deadlocks (the consumer holds slot 0 while it waits for step 1) and is
    dropped with a line of gemm_fp8.py."""
    from tlx_workbench.explore import library, stages
    p = library.problem(name, dtype="bfloat16")
    assert p.name == name + "_bf16" and len(library.space(name)) > 50
    ok = stages.simulated(p.travel(), dict(p.default), (4096, 4096, 4096), do_predict=False)
    assert ok.status == "ok" and ok.metrics["max_rel_err"] < 1e-2, ok
    bad = stages.simulated(p.travel(), dict(p.default, STAGES=1), (4096, 4096, 4096), do_predict=False)
    assert bad.status == "dropped" and bad.metrics["verdict"] == "deadlock", bad
    assert bad.file.endswith("gemm_fp8.py") and bad.line


def test_gpu_script_check_job_runs_on_the_simulator():
    """benchmarks/gemm_fp8_h200.py's correctness job, with CUDA mapped to the CPU and launches simulated:
    the same code the H200 runs (float64 reference, torch._scaled_mm on the same inputs)."""
    import importlib.util
    import pathlib
    from tlx_workbench._torch_cpu import CudaOnCpu
    from tlx_workbench.target import gpu_model, offline
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gemm_fp8_h200.py"
    spec = importlib.util.spec_from_file_location("bench_gemm_fp8_h200", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert {p for p, _, _ in bench.plan(["static", "check", "transpose", "time"], [0, 1])} == \
        {"static", "check", "transpose", "time"}
    with offline("sm_90"), CudaOnCpu(gpu_model("H200")), wb.simulate(gpu="H200") as sim:
        rows = bench.job_check(0, [(64, 264, 48)], [(False, "float8_e4m3fn", None, "bfloat16"),
                                                    (True, "float8_e4m3fn", "float8_e5m2", "float16")])
    assert all(r.ok for r in sim.results) and len(rows) == 2
    assert all(r["ok"] and r["max_rel"] < 5e-3 for r in rows), rows
    assert isinstance(rows[0]["scaled_mm_fast1"], dict)       # torch's FP8 GEMM ran on the same inputs


@pytest.mark.parametrize("ci", range(len(gemm_fp8.CONFIGS)))
def test_every_candidate_config_proves_its_protocol(ci):
    """Each config the H200 script times runs on the simulator at the explorer's shape for it (two CTAs, the
    ring wrapped twice and one step more), row-wise scales, against float64: no deadlock, race or wrong value."""
    from tlx_workbench.explore import library, stages
    p = library.problem("gemm_fp8_rowwise", dtype="bfloat16")
    o = stages.simulated(p.travel(), dict(gemm_fp8.CONFIGS[ci]), (4096, 4096, 4096), do_predict=False)
    assert o.status == "ok" and o.metrics["max_rel_err"] < 2e-3, o


def test_pingpong_refuses_switches_it_lacks_and_the_space_never_asks():
    a, b, sa, sb = gemm_fp8.make_inputs((64, 64, 32))
    cfg = dict(gemm_fp8.SIM_CONFIGS["pingpong"], DOT_WAIT0=True)
    with pytest.raises(TLXWorkbenchError) as e:
        gemm_fp8.matmul_fp8(a, b, sa, sb, config=cfg)
    assert "DOT_WAIT0" in str(e.value) and e.value.hint
    from tlx_workbench.explore import library
    configs = list(library.space("gemm_fp8"))
    assert any(c["PINGPONG"] for c in configs) and any(not c["PINGPONG"] for c in configs)
    assert not any(c["PINGPONG"] and (c["DOT_WAIT0"] or c["PROMOTE"]) for c in configs)
    assert all(gemm_fp8.smem_bytes(c) <= gemm_fp8.SMEM_LIMIT for c in configs)
