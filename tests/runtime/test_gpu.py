"""The runtime on a real GPU: verified runs, a hung kernel killed, benchmarks, measured timelines."""
import importlib.util

import pytest
import torch

import tlx_workbench as wb
from tlx_workbench.runtime import KernelTimeoutError, cublas_matmul, torch_sdpa

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def kernels():
    import gpu_kernels
    return gpu_kernels


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=dtype)


def test_run_ws_add_verifies_and_maps_wrong_tiles(kernels):
    n = 100_000
    x, y, a, b = (_rand(n, seed=i) for i in range(4))
    z, c = torch.zeros(n, device="cuda"), torch.zeros(n, device="cuda")
    grid = (triton_cdiv(n, 1024),)
    r = wb.run(kernels.ws_add, x, y, z, a, b, c, n, grid=grid, BLOCK=1024, outputs=("z_ptr", "c_ptr"),
               reference=lambda x, y, z, a, b, c, n: (x + y, a + b))
    assert r.ok, r
    torch.testing.assert_close(z, x + y)
    bad = wb.run(kernels.ws_add, x, y, z, a, b, c, n, grid=grid, BLOCK=1024, outputs=("z_ptr", "c_ptr"),
                 reference=lambda x, y, z, a, b, c, n: (x + y, a - b))
    assert not bad.ok and bad.comparisons[0].ok and not bad.comparisons[1].ok
    assert len(bad.comparisons[1].bad_tiles) == grid[0]


def test_run_host_function_poisons_its_allocations(kernels):
    x, y, a, b = (_rand(5000, seed=10 + i) for i in range(4))
    r = wb.run(kernels.ws_add_host, x, y, a, b, reference=lambda x, y, a, b: (x + y, a + b))
    assert r.ok and len(r.outputs) == 2
    torch.testing.assert_close(r.outputs[1], a + b)


def test_hung_kernel_is_killed_and_the_process_lives_on(kernels):
    out = torch.zeros(1, device="cuda")
    keep = _rand(1000, seed=3)
    with pytest.raises(KernelTimeoutError) as ei:
        wb.run(kernels.handshake, out, grid=(1,), ARRIVE_COUNT=2, timeout=5)
    assert "--sim" in ei.value.hint and "intact" in ei.value.message
    # this process, its CUDA context and its tensors are fine; the next launch works
    assert torch.isfinite(keep.sum()).item()
    ok = wb.run(kernels.handshake, out, grid=(1,), ARRIVE_COUNT=1, reference=lambda out: torch.ones(1), timeout=60)
    assert ok.ok, ok


def test_bench_gemm_ws_against_cublas():
    from tlx_workbench.kernels import gemm_ws
    M = N = K = 4096
    a, b = _rand(M, K, dtype=torch.float16, seed=1), _rand(K, N, dtype=torch.float16, seed=2)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    cfg = gemm_ws.CONFIGS[0]
    r = wb.run(gemm_ws.launch, a, b, c, cfg, outputs=("c",), reference=lambda a, b, c, cfg: a @ b)
    assert r.ok, r
    res = wb.bench(gemm_ws.launch, a, b, c, cfg, flops=2 * M * N * K, baselines={"cuBLAS": cublas_matmul(a, b)})
    assert [row.name for row in res.rows] == ["launch", "cuBLAS"]
    assert all(row.tflops > 0 and row.flops_share > 0 for row in res.rows)
    assert res.plot_png()[:4] == b"\x89PNG"
    print(res)


def test_profile_gemm_ws_gives_a_measured_trace():
    from tlx_workbench.kernels import gemm_ws
    M = N = K = 2048
    a, b = _rand(M, K, dtype=torch.float16, seed=4), _rand(K, N, dtype=torch.float16, seed=5)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float16)
    tr = wb.profile(gemm_ws.launch, a, b, c, gemm_ws.CONFIGS[0], kernel="gemm_ws_coop_kernel")
    assert tr.source == "gpu" and tr.time_unit == "ns"          # %globaltimer: one axis for every CTA
    tasks = {lane[1] for lane in tr.lanes()}
    assert len(tasks) >= 2, tr.lanes()
    kinds = {s.kind for s in tr.spans}
    assert {"wait", "tma", "mma"} <= kinds, kinds
    assert all(s.end >= s.start for s in tr.spans)
    # the instrumented kernel still computes the product
    torch.testing.assert_close(c.float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-1)


def test_flash_attention_tutorial_unchanged_against_sdpa(tutorials_dir):
    spec = importlib.util.spec_from_file_location("hopper_fa_ws_tut", tutorials_dir / "hopper_fa_ws.py")
    fa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fa)
    Z, H, S, D = 4, 16, 2048, 128
    q, k, v = (_rand(Z, H, S, D, dtype=torch.float16, seed=20 + i) for i in range(3))
    scale = D ** -0.5
    ref = lambda q, k, v, s: torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=s)  # noqa: E731
    r = wb.run(fa.attention, q, k, v, scale, reference=ref)
    assert r.ok, r
    flops = 4 * Z * H * S * S * D
    res = wb.bench(fa.attention, q, k, v, scale, flops=flops, baselines={"SDPA": torch_sdpa(q, k, v, scale=scale)})
    assert res.rows[1].name == "SDPA" and res.rows[0].tflops > 0
    print(res)


def test_magic_on_gpu_check_bench_profile():
    from IPython.core.interactiveshell import InteractiveShell
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tlx_magic")
    M = N = K = 2048
    sh.user_ns.update(a=_rand(M, K, dtype=torch.float16, seed=7), b=_rand(K, N, dtype=torch.float16, seed=8),
                      c=torch.empty(M, N, device="cuda", dtype=torch.float16), M=M, N=N, K=K)
    cell = ("from tlx_workbench.kernels.gemm_ws import launch, CONFIGS\n"
            "launch(a, b, c, CONFIGS[0])\n")
    sh.run_cell_magic("tlx", '--gpu --check --outputs c --ref "lambda a, b, c, cfg: a @ b" --bench '
                             '--flops "2*M*N*K" --baseline "cuBLAS=a @ b" --profile --timeline -o r', cell)
    r = sh.user_ns["r"]
    assert not r.errors, r.errors
    assert r.run.ok and r.bench.rows[1].name == "cuBLAS" and r.trace.source == "gpu"


def triton_cdiv(a, b):
    return -(-a // b)


def test_magic_hung_kernel_is_stopped_and_diagnosed_by_the_simulator():
    from IPython.core.interactiveshell import InteractiveShell
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "tlx_magic")
    sh.user_ns.update(out=torch.zeros(1, device="cuda"), survivor=torch.arange(10, device="cuda"))
    cell = ('import triton\nimport triton.language as tl\nimport triton.language.extra.tlx as tlx\n\n'
            '@triton.jit\ndef nb_handshake(out_ptr, ARRIVE_COUNT: tl.constexpr):\n'
            '    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=ARRIVE_COUNT)\n'
            '    with tlx.async_tasks():\n'
            '        with tlx.async_task("default"):\n'
            '            tlx.barrier_wait(tlx.local_view(bars, 0), 0)\n'
            '            tl.store(out_ptr, 1.0)\n'
            '        with tlx.async_task(num_warps=4):\n'
            '            tlx.barrier_arrive(tlx.local_view(bars, 0))\n'
            'nb_handshake[(1,)](out, ARRIVE_COUNT=2)\n')
    # a hung launch fails the cell (after its diagnosis), and -o still hands over the result
    from tlx_workbench.magics.errors import CellFailed
    with pytest.raises(CellFailed, match="KernelTimeoutError"):
        sh.run_cell_magic("tlx", "--gpu --timeout 5 -o h", cell)
    r = sh.user_ns["h"]
    assert type(r.errors[0]).__name__ == "KernelTimeoutError"
    assert r.sim is not None and r.sim.deadlock is not None      # the simulator's wait-for graph
    assert int(sh.user_ns["survivor"].sum()) == 45               # the notebook's GPU state lives on


def test_profile_plain_kernel_prefers_proton(kernels):
    n = 1 << 20
    x, y = _rand(n, seed=30), _rand(n, seed=31)
    z = torch.zeros(n, device="cuda")
    tr = wb.profile(kernels.plain_add, x, y, z, n, grid=(n // 1024,), BLOCK=1024)
    print("plain_add recorder:", tr.meta)
    assert tr.meta["recorder"] in ("proton", "clock64")
    if tr.meta["recorder"] == "clock64":
        assert "proton_error" in tr.meta          # auto fell back, and says why
    assert {"load", "store"} <= {s.kind for s in tr.spans}
    torch.testing.assert_close(z, x + y)
