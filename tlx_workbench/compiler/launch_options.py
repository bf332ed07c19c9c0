"""A launch's options: which keywords of ``kernel[grid](...)`` are launch options, what the simulator reads from
them, and how ``tlx_workbench.compile`` takes them. The one mapping the checker, the simulator's engine, the
explorer, the predictor and the command line share.

>>> compile_kwargs({"BM": 128, "num_warps": 4, "num_ctas": 1, "stream": 0})
{'BM': 128, 'num_warps': 4}
>>> launch_options({"num_warps": 8, "ctas_per_cga": (2, 1)})
LaunchOptions(num_warps=8, num_ctas=1, cluster=(2, 1, 1))
"""
from __future__ import annotations

import dataclasses

# keywords a kernel call may carry besides its parameters (Triton's and uTLX's)
LAUNCH_OPTIONS = frozenset({
    "num_warps", "num_stages", "num_ctas", "ctas_per_cga", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
    "launch_pdl", "debug", "stream", "warmup", "device", "minRegAutoWS", "maxRegAutoWS", "pingpongAutoWS",
    "cluster_dims", "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer",
    "early_tma_store_lowering", "ir_override"})

# launch options a launch may carry at their defaults (a triton.Config's all_kwargs() lists them all)
DEFAULT_OPTIONS = {"num_ctas": 1, "maxnreg": None, "ctas_per_cga": None, "num_buffers_warp_spec": 0,
                   "num_consumer_groups": 0, "reg_dec_producer": 0, "reg_inc_consumer": 0, "enable_fp_fusion": True,
                   "launch_cooperative_grid": False, "launch_pdl": False, "warmup": False}

# what a launch may carry that is no option of a compile: where it runs, and a config's host hook
_NOT_COMPILED = ("stream", "device", "pre_hook")


def split_options(kwargs: dict, parameters=None) -> tuple[dict, dict]:
    """(the kernel's parameters, the launch options) among a launch's keywords. With ``parameters`` (the
    kernel's parameter names) anything that is not one is an option, as Triton binds a launch; without, the
    known option names decide.

    >>> split_options({"BLOCK": 64, "num_warps": 4}, ["x", "BLOCK"])
    ({'BLOCK': 64}, {'num_warps': 4})
    """
    if parameters is None:
        return ({k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS},
                {k: v for k, v in kwargs.items() if k in LAUNCH_OPTIONS})
    return ({k: v for k, v in kwargs.items() if k in parameters},
            {k: v for k, v in kwargs.items() if k not in parameters})


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """What the simulator reads from a launch's options: warps per CTA (Triton's default 4), the compiler's
    ``num_ctas`` split, and the TLX cluster (``ctas_per_cga`` or ``cluster_dims``, as three dimensions)."""
    num_warps: int = 4
    num_ctas: int = 1
    cluster: tuple | None = None

    @property
    def cluster_dims(self) -> tuple:
        """The cluster as three dimensions, (1, 1, 1) without one."""
        return self.cluster or (1, 1, 1)


def launch_options(options: dict) -> LaunchOptions:
    """A launch's options (or all its keywords) as the simulator reads them."""
    cga = options.get("ctas_per_cga") or options.get("cluster_dims")
    cluster = None
    if cga:
        cluster = tuple(int(x) for x in cga)
        cluster = cluster + (1,) * (3 - len(cluster))
    return LaunchOptions(num_warps=int(options.get("num_warps") or 4), num_ctas=int(options.get("num_ctas") or 1),
                         cluster=cluster)


def compile_kwargs(kwargs: dict) -> dict:
    """A launch's keywords as ``tlx_workbench.compile`` takes them: launch options left at their defaults
    dropped, and what is no compile option (the stream, the device, a config's pre_hook); num_ctas=N as TLX's
    ctas_per_cga=(N, 1, 1)."""
    out = {k: v for k, v in kwargs.items() if not (k in DEFAULT_OPTIONS and v == DEFAULT_OPTIONS[k])}
    for k in _NOT_COMPILED:
        out.pop(k, None)
    n = out.pop("num_ctas", None)
    if n and out.get("ctas_per_cga") is None:
        out["ctas_per_cga"] = (n, 1, 1)
    return out
