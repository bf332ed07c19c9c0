"""GPU runtime: run and verify, benchmark, profile; every launch under a watchdog.

>>> import tlx_workbench as wb
>>> r = wb.run(add_kernel, x, y, out, n, grid=(n // 1024,), BLOCK_SIZE=1024,
...            reference=lambda x, y, out, n: x + y)            # doctest: +SKIP
>>> b = wb.bench(matmul, a, b, flops=2 * M * N * K,
...              baselines={"cuBLAS": wb.runtime.cublas_matmul(a, b)})   # doctest: +SKIP
>>> tr = wb.profile(matmul, a, b)                               # doctest: +SKIP
>>> wb.time_call(lambda: matmul(a, b), graph=True, host=True)   # doctest: +SKIP
Timing(call: do_bench median 612.3 us (...), graph 600.2 us, host 11.4 us/call: GPU-bound)
"""
from .benchmark import BenchResult, BenchRow, bench, ceilings, cublas_matmul, torch_sdpa
from .launch import RunResult, WrongResultError, require_gpu, run
from .profiling import load_proton_trace, profile
from .timing import Timing, time_call
from .verify import Comparison, compare, poison_
from .watchdog import KernelTimeoutError, WorkerCrashedError, WorkerError, shutdown

__all__ = ["run", "bench", "profile", "time_call", "Timing", "RunResult", "BenchResult", "BenchRow", "Comparison",
           "compare", "poison_", "ceilings", "cublas_matmul", "torch_sdpa", "load_proton_trace", "require_gpu",
           "shutdown", "KernelTimeoutError", "WorkerCrashedError", "WorkerError", "WrongResultError"]
