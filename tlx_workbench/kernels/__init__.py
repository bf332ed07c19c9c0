"""The workbench's own TLX kernels for Hopper (sm_90), written here.

| name | file | what |
|---|---|---|
| ``gemm_pipelined`` | gemm_pipelined.py | cp.async software pipeline, any shape |
| ``gemm_ws`` | gemm_ws.py | warp-specialized, TMA loader + 2 cooperative wgmma groups, persistent |
| ``gemm_pingpong`` | gemm_pingpong.py | warp-specialized, 2 wgmma groups alternating whole tiles |
| ``gemm_streamk`` | gemm_streamk.py | ``gemm_ws`` with its last partial wave split stream-K over every SM |
| ``gemm_cluster`` | gemm_cluster.py | ``gemm_ws`` in 2-CTA clusters, B (or A) multicast to both (inline PTX) |
| ``gemm_fp8`` | gemm_fp8.py | ``gemm_ws`` for fp8 (e4m3/e5m2): B read K-major, per-tensor or row-wise scales in the epilogue |
| ``attention`` | attention.py (host), attention_configs.py, attention_kernel.py (device) | flash-attention forward, warp-specialized ping-pong |
| ``attention_bwd`` | attention_bwd.py (host), attention_bwd_configs.py, attention_bwd_kernel.py (device) | flash-attention backward (dQ, dK, dV), warp-specialized |

Each module has ``matmul``/``attention``/``attention_backward`` (the launcher), ``launch`` (one explicit
config), ``CONFIGS`` (autotune space, default first), ``SIM_CONFIGS`` (small, for the
simulator), ``compile_offline`` and ``SPEC`` (a :class:`KernelSpec`). What they share on the
host (tuning and its per-shape cache, the GEMM ``matmul``/``tune``/``compile_offline``, TMA
descriptors, launch plans) lives once in ``host.py``; a module keeps its kernel, configs and launch.

Launchers plan: the first call with an operand signature (shapes, strides, dtypes, alignment, device, config) checks
in full, tunes and binds the compiled kernel to its GPU launcher; later calls check the signature and launch
(``matmul.plans``; docs/launch_plans.md). Under ``torch.compile`` each launcher is a ``torch.library`` custom op
(``torch_ops.py``).

>>> from tlx_workbench.kernels import spec
>>> spec("gemm_ws").configs[0]["BN"]
256
"""
from __future__ import annotations

import importlib

from ._common import KernelSpec

MODULES = {"gemm_pipelined": "gemm_pipelined", "gemm_ws": "gemm_ws", "gemm_pingpong": "gemm_pingpong",
           "gemm_streamk": "gemm_streamk", "gemm_cluster": "gemm_cluster", "attention": "attention",
           "gemm_fp8": "gemm_fp8", "attention_bwd": "attention_bwd"}


def spec(name: str) -> KernelSpec:
    """The :class:`KernelSpec` of library kernel ``name`` (see ``MODULES``)."""
    if name not in MODULES:
        from ..errors import TLXWorkbenchError
        raise TLXWorkbenchError(f"no library kernel named {name!r}", hint=f"use one of {sorted(MODULES)}")
    return importlib.import_module(f"{__name__}.{MODULES[name]}").SPEC


__all__ = ["KernelSpec", "spec", "MODULES"]
