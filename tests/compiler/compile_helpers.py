"""Helpers for the compiler tests: TLX tutorials loaded unchanged, descriptors."""
import pathlib

import torch

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"


def tutorial(name: str, target: str = "sm_90"):
    """Import a TLX tutorial file (unchanged, dashes in its name are fine) under an offline target."""
    from tlx_workbench.compiler import load_module
    return load_module(TUTORIALS / name, target=target)


def desc(t: torch.Tensor, block=(1, 1)):
    """A row-major TensorDescriptor over `t` (block shape set later by the config's pre_hook)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), [t.stride(i) for i in range(t.dim())], list(block))

