"""Fingerprints of the library kernels' machine code, for refactors that must not change it.

Compiles every config of every library kernel for sm_90 on this machine (no GPU), strips what
moves with the source text (debug sections, ``.loc`` lines, comments, label numbers) from the
PTX and prints one hash per (kernel, config, variant). Run it before and after a refactor of a
kernel's Python: identical hashes mean identical PTX code, so the GPU measurements still hold.

    python benchmarks/ptx_fingerprint.py > /tmp/before.txt      # on the old code
    python benchmarks/ptx_fingerprint.py > /tmp/after.txt       # on the new code
    diff /tmp/before.txt /tmp/after.txt && echo "same code"
    python benchmarks/ptx_fingerprint.py --only attention        # one kernel
    python benchmarks/ptx_fingerprint.py --only attention_bwd

Rows: the attention forward's CONFIGS; the backward's main kernel at every config it names (CONFIGS,
VARIANT_CONFIGS, SIM_CONFIGS; a non-causal SPLIT_TAIL config in its parts form); every GEMM's CONFIGS and
SIM_CONFIGS (the FP8 GEMM at per-tensor scales into bf16 and row-wise scales into fp16).
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


def code_of(ptx: str) -> str:
    """The PTX without what the source text moves: debug sections, .loc, comments, debug labels, label numbers."""
    ptx = ptx[:ptx.find(".section")] if ".section" in ptx else ptx
    ptx = re.sub(r"^\s*\.loc.*$|^\s*//.*$|^\s*\.file.*$", "", ptx, flags=re.M)
    # debug labels (one per inlined call boundary): an extra @jit helper level adds some, no code
    ptx = re.sub(r"^\$L__tmp\d+:\s*$", "", ptx, flags=re.M)
    ptx = re.sub(r"\$L__tmp\d+", "L", ptx)
    ptx = re.sub(r"\$L__BB[0-9_]+", "BB", ptx)
    return re.sub(r"\n\s*\n+", "\n", ptx)


def _digest(compiled) -> str:
    return hashlib.md5(code_of(compiled.asm["ptx"]).encode()).hexdigest()[:16]


def _attention_rows(mod, name, keyed):
    """Rows of an attention kernel module: each (key, config) at D=64 and 128, causal or not, where it suits."""
    for key, cfg in keyed:
        for causal in (False, True):
            for d in (64, 128):
                if mod.suits(cfg, d, causal):
                    yield (f"{name}{key} D={d} causal={causal}", cfg,
                           lambda cfg=cfg, d=d, causal=causal: mod.compile_offline(cfg, shape=(1, 2, 1000, d),
                                                                                 causal=causal))


def attention_rows():
    from tlx_workbench.kernels import attention as A
    return _attention_rows(A, "attention", [(f" cfg{i}", cfg) for i, cfg in enumerate(A.CONFIGS)])


def attention_bwd_rows():
    from tlx_workbench.kernels import attention_bwd as B
    named = [*B.CONFIGS, *B.VARIANT_CONFIGS.values(), *B.SIM_CONFIGS.values()]
    return _attention_rows(B, "attention_bwd", [("", c) for i, c in enumerate(named) if c not in named[:i]])


def gemm_fp8_rows():
    from tlx_workbench.kernels import gemm_fp8 as F
    for kind, table in (("cfg", dict(enumerate(F.CONFIGS))), ("sim", F.SIM_CONFIGS)):
        for key, cfg in table.items():
            for out, rowwise in (("bfloat16", False), ("float16", True)):
                yield (f"gemm_fp8 {kind}{key} {out} rowwise={rowwise}", cfg,
                       lambda cfg=cfg, out=out, rowwise=rowwise: F.compile_offline(
                           cfg, shape=(1000, 1032, 512), out_dtype=out, rowwise=rowwise))


def gemm_rows():
    import torch
    from tlx_workbench.kernels import gemm_cluster, gemm_pingpong, gemm_pipelined, gemm_streamk, gemm_ws
    from tlx_workbench.target import offline
    kernels = [(gemm_ws, gemm_ws.gemm_ws_coop_kernel), (gemm_pingpong, gemm_pingpong.gemm_pingpong_kernel),
               (gemm_streamk, gemm_streamk.gemm_streamk_kernel), (gemm_pipelined, gemm_pipelined.gemm_pipelined_kernel),
               (gemm_cluster, gemm_cluster.gemm_cluster_kernel)]

    def build(mod, kernel, cfg, dt):
        # gemm_cluster's compiled form takes its SMEM offsets as constexprs (_offline_call adds them)
        kernel_call = getattr(mod, "_offline_call", mod._kernel_call)
        with offline("sm_90"):
            a, b = torch.empty(1000, 520, dtype=dt), torch.empty(520, 1032, dtype=dt)
            c = torch.empty(1000, 1032, dtype=dt)
            args, options = kernel_call(a, b, c, cfg)
            return kernel.warmup(*args, grid=(1,), **options)

    for mod, kernel in kernels:
        name = mod.__name__.rsplit(".", 1)[1]
        for key, cfg in [(f"cfg{i}", c) for i, c in enumerate(mod.CONFIGS)] + \
                [(f"sim_{k}", c) for k, c in mod.SIM_CONFIGS.items()]:
            for dt in (torch.float16, torch.bfloat16):
                yield (f"{name} {key} {str(dt)[6:]}", cfg, lambda mod=mod, kernel=kernel, cfg=cfg, dt=dt:
                       build(mod, kernel, cfg, dt))


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    for label, cfg, make in [*attention_rows(), *attention_bwd_rows(), *gemm_rows(), *gemm_fp8_rows()]:
        if only and label.split()[0] != only:
            continue
        try:
            digest = _digest(make())
        except Exception as e:      # a config that no longer compiles is a difference too
            digest = f"error: {type(e).__name__}"
        print(f"{digest}  {label}  {json.dumps(cfg, sort_keys=True)}", flush=True)


if __name__ == "__main__":
    main()
