"""Host-side code the library kernels share: autotuning, the per-shape cache of tuned configs,
the GEMM entry point, TMA descriptors, offline compiles and the KernelSpec of a GEMM.

Each kernel module keeps what is its own: its ``@triton.jit`` kernel, its configs and its
``launch`` (grid, ``num_warps``, ``num_stages=0`` for hand-pipelined loops, persistent CTA
count). Everything here takes that launch as a callable, so a kernel always runs the way its
own module launches it.

>>> from tlx_workbench.kernels.host import tuned_config
>>> cache = {}
>>> tuned_config(cache, "key", lambda: [({"BM": 64}, 0.5), ({"BM": 128}, 0.7)])
{'BM': 64}
"""
from __future__ import annotations

import warnings
from typing import Callable

import triton
from triton.runtime.errors import OutOfResources
from triton.tools.tensor_descriptor import TensorDescriptor

from ..errors import TLXWorkbenchError
from ._common import KernelSpec, check_gemm_operands, gemm_flops, gemm_inputs, gemm_reference


def fastest_first(configs, run: Callable) -> list:
    """Time ``run(cfg)`` for every config with ``do_bench``; returns [(config, ms), ...] fastest first.

    A config the GPU cannot run (``OutOfResources``: more SMEM or registers than a CTA may have, which the
    modules' estimates are meant to rule out before this) is left out of the list with a warning naming it;
    when none runs, the error names them all.

    >>> fastest_first(CONFIGS, lambda cfg: launch(a, b, c, cfg))[0]    # doctest: +SKIP
    ({'BM': 128, ...}, 0.61)
    """
    results, refused = [], []
    for cfg in configs:
        try:
            results.append((cfg, triton.testing.do_bench(lambda: run(cfg), warmup=25, rep=100)))
        except OutOfResources as e:
            refused.append((cfg, e))
            warnings.warn(f"autotune: left out {cfg}: {e}", stacklevel=2)
    if not results:
        raise TLXWorkbenchError("autotune: no config runs on this GPU:" +
                                "".join(f"\n  {cfg}: {e}" for cfg, e in refused),
                                hint="pass config= with smaller blocks (BN, NUM_BUFS) or fewer buffers")
    return sorted(results, key=lambda r: r[1])


def tuned_config(cache: dict, key, tune: Callable):
    """The fastest config of ``tune()`` (a ``fastest_first`` list) for ``key``; tunes only the
    first time a key is seen, as a full tune costs seconds.

    >>> tuned_config({}, (4096, 4096, 4096), lambda: [({"BM": 128}, 0.6)])
    {'BM': 128}
    """
    if key not in cache:
        cache[key] = tune()[0][0]
    return cache[key]


def _gemm_output(a, b):
    """An uninitialised C for A @ B."""
    import torch
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def gemm_entry_points(module: str, kernel, launch: Callable, kernel_call: Callable, configs, what: str):
    """``matmul``, ``tune`` and ``compile_offline`` of a library GEMM module, built around what
    the module owns: its ``launch(a, b, c, cfg)`` (grid, CTA count) and ``kernel_call(a, b, c,
    cfg)``, the kernel's positional arguments and launch options (``num_warps``,
    ``num_stages=0``, constexprs) that ``compile_offline`` compiles with. ``module`` is the
    module's ``__name__``: errors and ``help()`` name its file, not this one.

    >>> matmul, tune, compile_offline = gemm_entry_points(                 # doctest: +SKIP
    ...     __name__, gemm_ws_coop_kernel, launch, _kernel_call, CONFIGS, "the cooperative kernel")
    """
    import sys
    kernel_file = sys.modules[module].__file__
    tuned: dict = {}

    def matmul(a, b, config=None):
        check_gemm_operands(kernel_file, a, b, need_tma=True)
        c = _gemm_output(a, b)
        if config is None:
            config = tuned_config(tuned, (a.shape[0], b.shape[1], a.shape[1], a.dtype), lambda: tune(a, b))
        return launch(a, b, c, config)

    def tune(a, b, configs=configs):
        c = _gemm_output(a, b)
        return fastest_first(configs, lambda cfg: launch(a, b, c, cfg))

    def compile_offline(cfg, target="sm_90", dtype="float16", shape=(512, 512, 512)):
        import torch
        from ..target import offline
        M, N, K = shape
        dt = getattr(torch, dtype)
        with offline(target):
            a, b, c = torch.empty(M, K, dtype=dt), torch.empty(K, N, dtype=dt), torch.empty(M, N, dtype=dt)
            args, options = kernel_call(a, b, c, cfg)
            return kernel.warmup(*args, grid=(1,), **options)

    matmul.__doc__ = f"""C = A @ B with {what}: fp16/bf16, row-major, K and N multiples of 8.

    ``config``: one dict of ``CONFIGS``; by default the fastest config for this (M, N, K,
    dtype) is found once with ``tune`` and remembered (in ``matmul.tuned``).

    >>> c = matmul(a, b)     # a: (M, K), b: (K, N) on a Hopper GPU
    """
    matmul.tuned = tuned
    tune.__doc__ = "Time every config on (a, b) with do_bench; returns [(config, ms), ...] fastest first."
    compile_offline.__doc__ = f"""Compile (no launch) for ``target`` on any machine, on empty operands of
    ``shape`` = (M, N, K); returns Triton's CompiledKernel.

    >>> from {module} import SIM_CONFIGS, compile_offline
    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0
    True
    """
    for fn in (matmul, tune, compile_offline):
        fn.__module__, fn.__qualname__ = module, fn.__name__
    return matmul, tune, compile_offline


def gemm_descriptors(a, b, c, a_block, b_block, c_block) -> tuple:
    """Host TMA descriptors of row-major A (M, K), B (K, N) and C (M, N), with the block
    shapes the kernel loads (A, B) and stores (C).

    >>> a_d, b_d, c_d = gemm_descriptors(a, b, c, [64, 64], [64, 256], [64, 64])   # doctest: +SKIP
    """
    M, K = a.shape
    N = b.shape[1]
    return (TensorDescriptor(a, [M, K], [K, 1], a_block),
            TensorDescriptor(b, [K, N], [N, 1], b_block),
            TensorDescriptor(c, [M, N], [N, 1], c_block))


def tma_gemm_call(descriptors, cfg, num_sms=132):
    """Positional arguments and launch options of a warp-specialized library GEMM kernel
    (``a_desc, b_desc, c_desc, M, N, K``): NUM_SMS is the persistent tile stride (132, an
    H100/H200's SM count, for offline compiles), 4 warps per warp group, and num_stages=0, as
    the kernel pipelines its loops by hand.

    >>> args, options = tma_gemm_call(make_descriptors(a, b, c, cfg), cfg)     # doctest: +SKIP
    """
    a_d, b_d, c_d = descriptors
    M, K = a_d.shape
    N = b_d.shape[1]
    return (a_d, b_d, c_d, M, N, K), dict(NUM_SMS=num_sms, num_warps=4, num_stages=0, **cfg)


def gemm_spec(name: str, kernel, matmul: Callable, configs, sim_configs, doc: str) -> KernelSpec:
    """The :class:`KernelSpec` of a library GEMM: float64 reference, random (a, b), 2 M N K flops.

    >>> gemm_spec("gemm_ws", gemm_ws_coop_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)   # doctest: +SKIP
    """
    return KernelSpec(name=name, kernel=kernel, launch=matmul, reference=gemm_reference, configs=configs,
                      sim_configs=sim_configs, make_inputs=gemm_inputs, flops=gemm_flops, doc=doc)
