"""TLX's own tutorial `hopper_gemm_ws` (from the installed wheel, unchanged) as an explorer problem:
an autotuned kernel whose own configs form the space; its launcher `matmul(a, b)` runs unchanged and
the explorer imposes each config on its Autotuner (pre_hook included)."""
import pathlib

import torch

import tlx
import tlx_workbench as wb
from tlx_workbench.explore import Problem

PATH = pathlib.Path(tlx.__file__).parent / "tutorials" / "hopper_gemm_ws.py"
_mod = None


def module():
    global _mod
    if _mod is None:
        _mod = wb.load_module(PATH, target="H200")
    return _mod


def launch(a, b):
    return module().matmul(a, b)


def make_inputs(shape, dtype, device):
    M, N, K = shape
    return (torch.randn(M, K, dtype=getattr(torch, dtype), device=device),
            torch.randn(K, N, dtype=getattr(torch, dtype), device=device))


def reference(a, b):
    return (a.double() @ b.double()).to(a.dtype)


def flops(shape):
    M, N, K = shape
    return 2.0 * M * N * K


def sim_shape(cfg):
    return (cfg["BM"], 2 * cfg["BN"], 2 * cfg["NUM_STAGES"] * cfg["BK"])


def problem():
    return Problem(name="tutorial_hopper_gemm_ws", launch=launch, make_inputs=make_inputs, reference=reference,
                   flops=flops, sim_shape=sim_shape, autotuned=True, ref=("tutorial_problem:problem", (), {}))


def configs(n=None):
    """The tutorial's own autotune configs for one CTA (GROUP_SIZE_M=8, as its pruning keeps for a square GEMM)."""
    cs = [c for c in module().matmul_kernel_tlx_ws.configs
          if c.kwargs["NUM_CTAS"] == 1 and c.kwargs["GROUP_SIZE_M"] == 8]
    return cs[:n] if n else cs
