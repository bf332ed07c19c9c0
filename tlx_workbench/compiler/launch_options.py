"""A captured launch's keywords as ``tlx_workbench.compile`` takes them.

>>> compile_kwargs({"BM": 128, "num_warps": 4, "num_ctas": 1, "stream": 0})
{'BM': 128, 'num_warps': 4}
"""
from __future__ import annotations

# launch options a launch may carry at their defaults (a triton.Config's all_kwargs() lists them all)
DEFAULT_OPTIONS = {"num_ctas": 1, "maxnreg": None, "ctas_per_cga": None, "num_buffers_warp_spec": 0,
                   "num_consumer_groups": 0, "reg_dec_producer": 0, "reg_inc_consumer": 0, "enable_fp_fusion": True,
                   "launch_cooperative_grid": False, "launch_pdl": False, "warmup": False}


def compile_kwargs(kwargs: dict) -> dict:
    """Launch options left at their defaults dropped, the stream dropped; num_ctas=N as TLX's
    ctas_per_cga=(N, 1, 1)."""
    out = {k: v for k, v in kwargs.items() if not (k in DEFAULT_OPTIONS and v == DEFAULT_OPTIONS[k])}
    out.pop("stream", None)
    if "num_ctas" in out and "ctas_per_cga" not in out:
        out["ctas_per_cga"] = (out.pop("num_ctas"), 1, 1)
    elif "num_ctas" in out:
        out.pop("num_ctas")
    return out
