"""Cluster shapes other than ``(N, 1, 1)``: what TLX means by them, for the simulator.

TLX (Meta's fork) launches any ``ctas_per_cga=(x, y, z)``; uTLX on upstream Triton can express only
``(N, 1, 1)`` and refuses the rest when a ``triton.Config`` is built, i.e. when a module that declares
such configs is imported (the wheel's multi-CTA layernorm declares ``(1, n, 1)``). The simulator runs
any cluster shape (the grid counts CTAs; ranks are x-fastest). Import such a module inside
:func:`any_cluster_shape` to simulate it; on a GPU with uTLX it still cannot launch.

>>> with any_cluster_shape(), wb.offline("B200"):          # doctest: +SKIP
...     mod = wb.load_module("blackwell-multi-cta-layernorm_test.py")
"""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def any_cluster_shape():
    """While active, ``triton.Config(..., ctas_per_cga=(x, y, z))`` accepts any shape (uTLX: only (N, 1, 1))."""
    try:
        from utlx_plugin import _ctas_per_cga as mod
    except ImportError:          # Meta's TLX: every shape is accepted already
        yield
        return
    orig = mod._cluster_size

    def cluster_size(ctas_per_cga):
        dims = tuple(int(d) for d in ctas_per_cga)
        if len(dims) != 3:
            return orig(ctas_per_cga)
        return dims[0] * dims[1] * dims[2]
    mod._cluster_size = cluster_size
    try:
        yield
    finally:
        mod._cluster_size = orig
