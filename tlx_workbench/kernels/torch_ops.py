"""The library's launchers as ``torch.library`` custom ops, so ``torch.compile`` treats each as one opaque op.

Under ``torch.compile`` (``torch.compiler.is_compiling()``) a public launcher (``gemm_*.matmul``, ``matmul_fp8``,
``attention``, ``attention_backward``; ``attention_with_grad`` calls the last two) calls its op here instead of
launching: Dynamo records the op in the graph, with the output shapes and dtypes its fake implementation gives,
and the compiled graph calls the op, which runs the launcher itself. Eager calls never come through here (a
custom op's dispatch costs more host time than the launcher's planned launch).

An op takes what its launcher takes, with two changes the op schema asks for: ``config`` (a dict) travels as its
JSON text, ``torch.compiler.assume_constant_result`` making that text a constant while Dynamo traces; and
``attention(..., return_lse=True)`` is its own op (``attention_lse``), as an op returns one fixed set of tensors.

>>> import torch, tlx_workbench.kernels.gemm_ws as g                       # doctest: +SKIP
>>> f = torch.compile(lambda a, b: g.matmul(a, b) * 2, fullgraph=True)    # doctest: +SKIP
>>> torch.ops.tlx_workbench.gemm_ws_matmul                                 # doctest: +SKIP
"""
from __future__ import annotations

import importlib
import json
from typing import Optional

import torch
from torch import Tensor

GEMM_MODULES = ("gemm_pipelined", "gemm_ws", "gemm_pingpong", "gemm_streamk", "gemm_cluster")


@torch.compiler.assume_constant_result
def config_text(config) -> Optional[str]:
    """A launcher's ``config`` dict as the JSON text its op takes (None: the tuned config)."""
    return None if config is None else json.dumps(config, sort_keys=True)


def _config(text):
    return None if text is None else json.loads(text)


def _module(name):
    return importlib.import_module(f"{__package__}.{name}")


def _gemm_op(name):
    @torch.library.custom_op(f"tlx_workbench::{name}_matmul", mutates_args=())
    def op(a: Tensor, b: Tensor, config: Optional[str] = None) -> Tensor:
        return _module(name).matmul(a, b, _config(config))

    @op.register_fake
    def _(a, b, config=None):
        from ._common import check_gemm_operands
        check_gemm_operands(_module(name).__file__, a, b, need_tma=True)
        return a.new_empty((a.shape[0], b.shape[1]))
    return op


GEMM_OPS = {name: _gemm_op(name) for name in GEMM_MODULES}


def gemm_op(name):
    """The custom op of library GEMM ``name``'s ``matmul``, called as ``matmul`` is: ``op(a, b, config)``."""
    op = GEMM_OPS[name]

    def call(a, b, config=None):
        return op(a, b, config_text(config))
    return call


@torch.library.custom_op("tlx_workbench::matmul_fp8", mutates_args=())
def _matmul_fp8(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: Optional[torch.dtype] = None,
                config: Optional[str] = None) -> Tensor:
    return _module("gemm_fp8").matmul_fp8(a, b, scale_a, scale_b, out_dtype, _config(config))


@_matmul_fp8.register_fake
def _(a, b, scale_a, scale_b, out_dtype=None, config=None):
    out_dtype = out_dtype or torch.bfloat16
    _module("gemm_fp8").check_operands(a, b, scale_a, scale_b, out_dtype)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def matmul_fp8_op(a, b, scale_a, scale_b, out_dtype=None, config=None):
    """``gemm_fp8.matmul_fp8`` through its custom op."""
    return _matmul_fp8(a, b, scale_a, scale_b, out_dtype, config_text(config))


@torch.library.custom_op("tlx_workbench::attention", mutates_args=())
def _attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, sm_scale: Optional[float] = None,
               config: Optional[str] = None) -> Tensor:
    return _module("attention").attention(q, k, v, causal, sm_scale, _config(config))


@_attention.register_fake
def _(q, k, v, causal=False, sm_scale=None, config=None):
    _module("attention")._check(q, k, v)
    return torch.empty_like(q)


@torch.library.custom_op("tlx_workbench::attention_lse", mutates_args=())
def _attention_lse(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, sm_scale: Optional[float] = None,
                   config: Optional[str] = None) -> tuple[Tensor, Tensor]:
    return _module("attention").attention(q, k, v, causal, sm_scale, _config(config), return_lse=True)


@_attention_lse.register_fake
def _(q, k, v, causal=False, sm_scale=None, config=None):
    _module("attention")._check(q, k, v)
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def attention_op(q, k, v, causal=False, sm_scale=None, config=None, return_lse=False):
    """``attention.attention`` through its custom op (``attention_lse`` with ``return_lse``)."""
    op = _attention_lse if return_lse else _attention
    return op(q, k, v, bool(causal), None if sm_scale is None else float(sm_scale), config_text(config))


@torch.library.custom_op("tlx_workbench::attention_backward", mutates_args=())
def _attention_backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, do: Tensor, lse: Tensor, causal: bool = False,
                        sm_scale: Optional[float] = None, config: Optional[str] = None
                        ) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(_module("attention_bwd").attention_backward(q, k, v, o, do, lse, causal, sm_scale, _config(config)))


@_attention_backward.register_fake
def _(q, k, v, o, do, lse, causal=False, sm_scale=None, config=None):
    _module("attention_bwd")._check(q, k, v, o, do, lse)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def attention_backward_op(q, k, v, o, do, lse, causal=False, sm_scale=None, config=None):
    """``attention_bwd.attention_backward`` through its custom op."""
    return _attention_backward(q, k, v, o, do, lse, bool(causal), None if sm_scale is None else float(sm_scale),
                               config_text(config))


OPS = {**{f"{name}.matmul": op for name, op in GEMM_OPS.items()}, "gemm_fp8.matmul_fp8": _matmul_fp8,
       "attention.attention": _attention, "attention.attention(return_lse=True)": _attention_lse,
       "attention_bwd.attention_backward": _attention_backward}
