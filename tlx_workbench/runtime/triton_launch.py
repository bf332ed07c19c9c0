"""Every touch of Triton's non-public launcher and CompiledKernel internals, in one place
(tests/runtime/test_triton_launch.py fails loudly when Triton changes them; pinned to triton 3.8).

What it is for: a kernel compiled as *one* CTA, launched in clusters of ``n`` CTAs
(``kernels/gemm_cluster.py``: uTLX cannot arrive at a peer CTA's barrier, and compiling with
``num_ctas=2`` splits every layout over the pair). Triton's CUDA launcher already launches
clusters: it starts ``gridX * num_ctas`` CTAs in clusters of ``num_ctas`` (``driver.c``) and
sizes the per-CTA scratch by it. A ``CompiledKernel`` holds that number in three places, all
private, and all three must agree:

* ``metadata.num_ctas`` (a namedtuple field): what its launcher is made from;
* ``packed_metadata``: ``backend.pack_metadata(metadata)``, handed to every launch;
* ``_run``: the launcher, made from ``metadata`` by ``_init_handles`` on first load (so a
  kernel already loaded needs a new one).

It sits in ``runtime/`` beside the GPU launch it changes (the interpreter's internals are
``sim/interp_adapter.py``'s, the ptxas step's ``compiler/triton_ptxas.py``'s): one adapter
per Triton subsystem, each in the package that uses it.

>>> k = launch_in_clusters(kernel.warmup(*args, grid=(g,), **opts), 2)   # doctest: +SKIP
>>> kernel[(g,)](*args, **opts)                     # 2 * g CTAs, in clusters of 2
"""
from __future__ import annotations


def cluster_size(compiled) -> int:
    """CTAs per cluster that ``compiled`` (a CompiledKernel) launches with."""
    return int(getattr(compiled.metadata, "num_ctas", 1))


def launch_in_clusters(compiled, num_ctas: int):
    """Make Triton launch ``compiled`` (a CompiledKernel compiled as one CTA) in clusters of
    ``num_ctas``: a launch over ``grid`` then starts ``num_ctas * grid[0]`` CTAs. The kernel
    must be written for it (it finds its peer through ``%cluster_ctarank``); nothing here checks
    that. Returns ``compiled``, changed in place (Triton's JIT cache serves this same object to
    later launches)."""
    from triton.compiler.compiler import make_backend

    compiled.metadata = compiled.metadata._replace(num_ctas=num_ctas)
    compiled.packed_metadata = make_backend(compiled.metadata.target).pack_metadata(compiled.metadata)
    if compiled.module is not None:      # already loaded: its launcher was made for the old count
        import triton
        compiled._run = triton.runtime.driver.active.launcher_cls(compiled.src, compiled.metadata)
    return compiled
