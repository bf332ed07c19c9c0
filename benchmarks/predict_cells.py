"""The cells of the cost model's check: (kernel, config, shape) timed on the H200 and predicted on a CPU.

A cell is plain JSON (``kind``, ``kernel``, ``config`` name, ``shape``, ``causal``), so the GPU run's
rows and the CPU predictions meet by value. ``make_call(cell, device)`` gives a no-argument launch
on fresh random inputs: timed by do_bench on the GPU, simulated on the CPU.

The library's kernels run their default config (``CONFIGS[0]``, attention's ``configs_for`` first),
plus the warp-barrier A/B pair of ``gemm_ws``; the TLX tutorials run unchanged through their own
launchers (``hopper_gemm_ws`` with the config ``c0`` the ws_switches experiment used, ``hopper_gemm_pipelined``'s one config,
``hopper_fa_ws``'s first config), and every other Hopper tutorial of the wheel: the persistent cooperative and
ping-pong GEMMs (their autotuner held to its first config, ``c0``, on the GPU as in the simulator) and the pipelined
flash attentions (``hopper_fa_ws_pipelined``'s two configs, ``c0`` one consumer group and ``c1`` two; the ping-pong
and persistent ping-pong forms' one config).
"""
from __future__ import annotations

import math

SIZES = (1024, 2048, 4096, 8192)
ATTN_N = (1024, 2048, 4096, 8192)
#: GEMMs that are not cubes (M, N, K): tall, wide and a long K, for the library's warp-specialized and ping-pong
#: GEMMs and TLX's tutorial
NON_SQUARE = ((8192, 2048, 4096), (2048, 8192, 4096), (4096, 4096, 16384))
#: the library's attention backward (its default config per masking): a call of several launches, predicted launch
#: by launch (``wb.CallPrediction``)
ATTN_BWD_N = (4096, 8192)
#: the wheel's persistent GEMM tutorials: file stem -> its autotuned kernel (``make_call`` holds it to one config)
PERSISTENT_GEMMS = {"hopper-persistent-gemm-ws-cooperative": "matmul_kernel_tlx_ws_persistent",
                    "hopper-persistent-gemm-ws-pingpong": "matmul_kernel_tlx_ws_persistent"}
#: the wheel's pipelined flash-attention tutorials and the configs (by index) timed
PIPELINED_FAS = {"hopper_fa_ws_pipelined": ("c0", "c1"), "hopper_fa_ws_pipelined_pingpong": ("c0",),
                 "hopper_fa_ws_pipelined_pingpong_persistent": ("c0",)}


def _cells():
    out = []
    for k in ("gemm_ws", "gemm_pingpong", "gemm_pipelined"):
        for s in SIZES:
            out.append(dict(kind="gemm", kernel=k, config="default", shape=[s, s, s]))
    for s in (4096, 8192):       # the warp-barrier A/B: CONFIGS[1] and CONFIGS[6] differ in WARP_BARRIER only
        out.append(dict(kind="gemm", kernel="gemm_ws", config="plain", shape=[s, s, s]))
        out.append(dict(kind="gemm", kernel="gemm_ws", config="warp_barrier", shape=[s, s, s]))
    for causal in (False, True):
        for n in ATTN_N:
            out.append(dict(kind="attention", kernel="attention", config="default", shape=[1, 32, n, 128],
                            causal=causal))
        out.append(dict(kind="attention", kernel="attention", config="default", shape=[1, 32, 4096, 64],
                        causal=causal))
    for s in SIZES:
        out.append(dict(kind="gemm", kernel="tut:hopper_gemm_ws", config="c0", shape=[s, s, s]))
        out.append(dict(kind="gemm", kernel="tut:hopper_gemm_pipelined", config="only", shape=[s, s, s]))
    for n in ATTN_N:
        out.append(dict(kind="attention", kernel="tut:hopper_fa_ws", config="c0", shape=[1, 32, n, 128],
                        causal=False))
    for s in SIZES:
        for stem in PERSISTENT_GEMMS:
            out.append(dict(kind="gemm", kernel=f"tut:{stem}", config="c0", shape=[s, s, s]))
    for n in ATTN_N:
        for stem, configs in PIPELINED_FAS.items():
            for config in configs:
                out.append(dict(kind="attention", kernel=f"tut:{stem}", config=config, shape=[1, 32, n, 128],
                                causal=False))
    for shape in NON_SQUARE:
        for k, config in (("gemm_ws", "default"), ("gemm_pingpong", "default"), ("tut:hopper_gemm_ws", "c0")):
            out.append(dict(kind="gemm", kernel=k, config=config, shape=list(shape)))
    for causal in (False, True):
        for n in ATTN_BWD_N:
            out.append(dict(kind="attention_bwd", kernel="attention_bwd", config="default", shape=[1, 32, n, 128],
                            causal=causal))
    return out


CELLS = _cells()


def gemm_config(kernel, name):
    import importlib
    mod = importlib.import_module(f"tlx_workbench.kernels.{kernel}")
    if name == "default":
        return dict(mod.CONFIGS[0])
    if name == "plain":
        return dict(mod.CONFIGS[1])
    if name == "warp_barrier":
        cfg = dict(mod.CONFIGS[1], WARP_BARRIER=True)
        assert cfg in [dict(c) for c in mod.CONFIGS]
        return cfg
    raise KeyError(name)


def attention_config(shape, causal):
    from tlx_workbench.kernels.attention_configs import configs_for
    return dict(configs_for(shape[-1], causal)[0])


def flops(cell) -> float:
    from tlx_workbench.kernels import spec
    if cell["kind"] == "attention_bwd":
        from tlx_workbench.kernels.attention_bwd import flops as bwd_flops
        return bwd_flops(*cell["shape"], causal=bool(cell.get("causal")))
    if cell["kind"] == "gemm":
        return spec("gemm_ws").flops(*cell["shape"])
    return spec("attention").flops(*cell["shape"], causal=bool(cell.get("causal")))


def _tutorial(stem):
    from _harness import load_tutorial
    return load_tutorial(stem)


def _hold_config(tuner, index):
    """Hold a tutorial's autotuner to its config ``index`` (of the configs it declares): the GPU then times that
    config, as the simulator runs it, rather than the one its benchmark would pick. Its cache is cleared, so a cell
    of another config of the same kernel does not reuse this one's pick."""
    declared = tuner.__dict__.setdefault("_declared_configs", list(tuner.configs))
    tuner.configs = [declared[index]]
    tuner.cache.clear()


def make_call(cell, device="cuda", seed=0):
    """(no-argument launch on fresh random inputs, flops) of ``cell``."""
    import torch
    g = torch.Generator(device="cpu").manual_seed(seed)
    kernel = cell["kernel"]
    if cell["kind"] == "gemm":
        M, N, K = cell["shape"]
        a = torch.randn(M, K, generator=g).to(torch.float16).to(device)
        b = torch.randn(K, N, generator=g).to(torch.float16).to(device)
        if kernel.startswith("tut:"):
            stem = kernel[4:]
            mod = _tutorial(stem)
            if stem in PERSISTENT_GEMMS:
                _hold_config(getattr(mod, PERSISTENT_GEMMS[stem]), int(cell["config"][1:]))
                return (lambda: mod.matmul_tlx_ws_persistent(a, b)), flops(cell)
            if cell["config"] == "c0":
                from suite import TUT_GEMM_WS_C0
                return (lambda: mod.matmul(a, b, config=dict(TUT_GEMM_WS_C0))), flops(cell)
            return (lambda: mod.matmul(a, b)), flops(cell)     # its autotuner holds one config
        import importlib
        mod = importlib.import_module(f"tlx_workbench.kernels.{kernel}")
        cfg = gemm_config(kernel, cell["config"])
        c = torch.empty(M, N, dtype=torch.float16, device=device)
        return (lambda: mod.launch(a, b, c, cfg)), flops(cell)
    if cell["kind"] == "attention_bwd":
        return _backward_call(cell, device, g), flops(cell)
    Z, H, N, D = cell["shape"]
    q, k, v = (torch.randn(Z, H, N, D, generator=g).to(torch.float16).to(device) for _ in range(3))
    scale = 1.0 / math.sqrt(D)
    if kernel.startswith("tut:"):
        mod = _tutorial(kernel[4:])
        cfg = dict(mod.configs[int(cell["config"][1:])].kwargs)
        return (lambda: mod.attention(q, k, v, scale, config=cfg)), flops(cell)
    from tlx_workbench.kernels import attention as att
    cfg = attention_config(cell["shape"], cell.get("causal", False))
    o = torch.empty_like(q)
    return (lambda: att.launch(q, k, v, o, cell.get("causal", False), scale, cfg)), flops(cell)


def _backward_call(cell, device, g):
    """The library's attention backward with the cell's config (``cfg``, as an earlier run timed it), else its default
    for the masking: on a GPU its inputs from the library's forward; on
    the CPU random o and lse of the right shapes (a timing-only simulation reads no values; the float64 forward at
    these shapes would take minutes)."""
    import torch
    from tlx_workbench.kernels import attention_bwd as ab
    from tlx_workbench.kernels.attention_bwd_configs import default_for
    Z, H, N, D = cell["shape"]
    causal = bool(cell.get("causal"))
    if str(device).startswith("cuda"):
        q, k, v, o, do, lse = ab.backward_inputs((Z, H, N, D), torch.float16, device, causal)
    else:
        q, k, v, o, do = (torch.randn(Z, H, N, D, generator=g).to(torch.float16) for _ in range(5))
        lse = torch.randn(Z, H, N, generator=g).float() + math.log(N)
    cfg = dict(cell.get("cfg") or default_for(D, causal))
    return lambda: ab.attention_backward(q, k, v, o, do, lse, causal=causal, config=cfg)
