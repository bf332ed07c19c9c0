"""Problems and spaces of the library's own kernels (``tlx_workbench.kernels``).

A problem takes what its kernel's :class:`~tlx_workbench.kernels.KernelSpec` says (reference, fresh inputs,
flops, default config) and adds what only the explorer asks: a launch of one explicit config, the bytes moved
and the small shapes the simulator proves and times a config at.

>>> p = problem("gemm_ws"); s = space("gemm_ws")
>>> len(s) >= 100
True
"""
from __future__ import annotations

import math

from ..errors import TLXWorkbenchError
from .problem import Problem
from .space import Space

GEMMS = ("gemm_ws", "gemm_pingpong", "gemm_streamk", "gemm_pipelined")
#: attention scores (Z * H * N * N) above which a float64 reference on the CPU goes one head at a time
#: (every head's scores at once would not fit in memory) and attention_bwd's CPU inputs are placeholders
CPU_SCORES = 1 << 24


def _gemm_module(name):
    import importlib
    return importlib.import_module(f"tlx_workbench.kernels.{name}")


def _spec(name):
    from ..kernels import spec
    return spec(name)


def _shape_flops(name, **variant):
    """``flops(shape)`` of library kernel ``name``: its spec's ``flops(*shape, **variant)``."""
    def flops(shape):
        return _spec(name).flops(*shape, **variant)
    return flops


def gemm_launch(name):
    """``launch(a, b, cfg)`` of library GEMM ``name``: C allocated here, the module's own launch."""
    mod = _gemm_module(name)

    def launch(a, b, cfg):
        import torch
        c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
        return mod.launch(a, b, c, cfg)

    launch.__qualname__ = launch.__name__ = f"{name}_launch"
    return launch


def _gemm_sim_shape(cfg):
    # two CTAs of one tile each; two trips round the ring and one step more, so slot 0 is used in
    # phases 0, 1 and 0 again (a phase that aliases an old one is caught)
    stages = max(1, cfg.get("STAGES", 2))
    return (cfg["BM"], 2 * cfg["BN"], (2 * stages + 1) * cfg["BK"])


def _gemm_bytes(shape, elem=2):
    M, N, K = shape
    return float(elem * (M * K + K * N + M * N))


def _attention_parts(causal):
    from ..kernels import attention as att

    def launch(q, k, v, cfg):
        import torch
        o = torch.empty_like(q)
        return att.launch(q, k, v, o, causal, 1.0 / math.sqrt(q.shape[-1]), cfg)

    def reference(q, k, v):
        Z, H, N, _ = q.shape
        if Z * H * N * N <= CPU_SCORES:
            return att.reference(q, k, v, causal=causal)
        import torch        # a large shape (the simulated stage at sim_shape="real"): one head at a time
        return torch.cat([torch.cat([att.reference(q[z:z + 1, h:h + 1], k[z:z + 1, h:h + 1], v[z:z + 1, h:h + 1],
                                                   causal=causal) for h in range(H)], dim=1) for z in range(Z)])

    def make_inputs(shape, dtype, device):
        import torch
        return att.make_inputs(shape, getattr(torch, dtype) if isinstance(dtype, str) else dtype, device)

    def flops(shape):
        return att.flops(*shape, causal=causal)

    def nbytes(shape, elem=2):
        Z, H, N, D = shape
        return float(4 * elem * Z * H * N * D)

    def sim_shape(cfg, shape=None):
        # two query tiles of one head and two of another, at the real shape's head dim
        return (1, 2, 2 * cfg["BM"], shape[-1] if shape else 128)

    def verify_shape(shape, cfg):
        # checked against float64 at four query tiles of four heads, as ragged as the timed N (a ragged
        # N compiles another specialization, EVEN_M=False, which needs more SMEM: measured on the H200)
        Z, H, N, D = shape
        return (1, 4, min(N, 4 * cfg["BM"] + N % cfg["BM"]), D)

    return launch, reference, make_inputs, flops, nbytes, sim_shape, verify_shape


# -- attention_bwd: dQ, dK, dV of attention (kernels/attention_bwd.py); the inputs carry the forward's
# output and log-sum-exp and the row statistics (delta, lse in base 2) computed with torch, so the launch
# is the main kernel alone (the static stage reads the first launch; the delta kernel is ~1 % of the
# time and has no config); the output is the three gradients stacked, (3, Z, H, N, D)
ATTENTION_BWD = "attention_bwd"


def _attention_bwd_problem(causal: bool, dtype: str, suffix: str, ref) -> Problem:
    from ..kernels import attention_bwd as bwd
    spec = _spec(ATTENTION_BWD)

    def launch(q, k, v, o, do, lse, delta, lse2, cfg):
        import torch
        return torch.stack(bwd.launch(q, k, v, o, do, lse, causal, 1.0 / math.sqrt(q.shape[-1]), cfg,
                                      stats=(delta, lse2)))

    def make_inputs(shape, dtype, device):
        import torch
        Z, H, N, D = shape
        if not str(device).startswith("cuda") and Z * H * N * N > CPU_SCORES:
            # a CPU input this large is only compiled (static stage) or timed without numerics: any forward
            # statistics (a float64 forward would need Z*H*N*N doubles; the reference gives None at this size)
            dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
            q, k, v, do = bwd.make_inputs(shape, dt, device)
            o, lse = torch.randn_like(q), torch.zeros((Z, H, N))
        else:
            q, k, v, o, do, lse = spec.make_inputs(shape, dtype, device, causal=causal)
        return (q, k, v, o, do, lse) + bwd.row_statistics(o, do, lse)

    def reference(q, k, v, o, do, lse, delta, lse2):
        import torch
        Z, H, N, _ = q.shape
        if Z * H * N * N > CPU_SCORES:
            return None         # no reference: a CPU input this large has placeholder forward statistics
        return torch.stack(spec.reference(q, k, v, o, do, lse, causal=causal))

    def nbytes(shape, elem=2):
        Z, H, N, D = shape
        return float((8 * elem + 8) * Z * H * N * D)     # q k v o dO read, dq dk dv written, fp32 dQ twice

    def verify_shape(shape, cfg):
        # four K/V blocks of four heads, as ragged as the timed N
        Z, H, N, D = shape
        return (1, 4, min(N, 4 * cfg["BN"] + N % cfg["BN"]), D)

    return Problem(name=("attention_bwd_causal" if causal else "attention_bwd") + suffix, launch=launch,
                   make_inputs=make_inputs, reference=reference, flops=_shape_flops(ATTENTION_BWD, causal=causal),
                   bytes=nbytes,
                   # two K/V blocks of two heads (ragged by 40 rows), at the real shape's head dim
                   sim_shape=lambda cfg, shape=None: (1, 2, 2 * cfg["BN"] - 40, shape[-1] if shape else 128),
                   verify_shape=verify_shape, dtype=dtype, ref=ref,
                   default=dict(bwd.default_for(128, causal)))


def _attention_bwd_space(seeds, head_dim: int, causal: bool) -> Space:
    """The backward's query block, K/V block (64 rows per consumer group), ring depth and register split,
    kept where ``attention_bwd_configs.suits`` (SMEM, and BM=128 only at D=64: registers); at D=128 also
    the library's DQ_SPLIT configs."""
    from ..kernels import attention_bwd as bwd
    # the default (BM=64, BN=128, two slots, 24/240 registers) first
    return Space({"BM": [64, 128], "BN": [128, 64], "NUM_BUFS": [2, 3, 1], "LOADER_REGS": [24, 40],
                  "MMA_REGS": [240, 232]},
                 constraints=[lambda c: bwd.suits(c, head_dim, causal),
                              # 128 threads per task: 512 registers a thread across the three tasks
                              lambda c: c["LOADER_REGS"] + (c["BN"] // 64) * c["MMA_REGS"] <= 512],
                 # D=128: dQ's columns split between the two groups (DQ_SPLIT), at the default's blocks
                 seeds=list(seeds) + [c for c in bwd.configs_for(head_dim, causal) if c.get("DQ_SPLIT")])


# -- gemm_fp8: e4m3 operands (b column-major, as torch._scaled_mm takes it), scales per tensor or per
# row/column; the problem's dtype is the output's (float16 or bfloat16)
FP8_GEMMS = ("gemm_fp8", "gemm_fp8_rowwise")
#: every library problem's name
NAMES = GEMMS + FP8_GEMMS + ("attention", ATTENTION_BWD)


def _fp8_problem(name: str, dtype: str, ref) -> Problem:
    from ..kernels import gemm_fp8 as g
    rowwise = name.endswith("_rowwise")

    def launch(a, b, sa, sb, cfg):
        import torch
        c = torch.empty((a.shape[0], b.shape[1]), dtype=getattr(torch, dtype), device=a.device)
        return g.launch(a, g.k_major_b(b), c, sa, sb, cfg)

    def make_inputs(shape, dt, device):
        return g.make_inputs(shape, "float8_e4m3fn", device, rowwise=rowwise)

    def reference(a, b, sa, sb):
        import torch
        return g.reference(a, b, sa, sb, getattr(torch, dtype))

    def nbytes(shape, elem=2):
        M, N, K = shape
        return float(M * K + K * N + elem * M * N)

    launch.__qualname__ = launch.__name__ = f"{name}_launch"
    suffix = "" if dtype == "float16" else "_" + {"bfloat16": "bf16"}.get(dtype, dtype)
    # tolerance: |out - ref| max over |ref| max; the output's rounding is 2^-9 of it (bf16) and the fp8
    # tensor cores' accumulation adds some at large K
    return Problem(name=name + suffix, launch=launch, make_inputs=make_inputs, reference=reference,
                   flops=_shape_flops("gemm_fp8"), bytes=nbytes, sim_shape=_gemm_sim_shape,
                   dtype=dtype, tolerance=1e-2, ref=ref,
                   default=dict(_spec("gemm_fp8").configs[0]))


def _fp8_space(seeds) -> Space:
    """gemm_fp8's tiles (BK of 64 or 128 fp8 elements), depth, epilogue strips, drain, promotion, early-scale
    and ping-pong switches; kept where a consumer group has >= 64 rows (wgmma), the strips divide the tile, its
    fp32 accumulators leave registers for the rest (64 x 256 a group at most, PROMOTE's two counted) and the SMEM
    estimate fits a CTA."""
    from ..kernels.gemm_fp8 import SMEM_LIMIT, smem_bytes

    def fits(c):
        strips = c["BN"] // c["EPI_N"]
        if c["PINGPONG"] and (c["DOT_WAIT0"] or c["PROMOTE"]):
            return False                        # the ping-pong kernel has neither form
        rows = c["BM"] if c["PINGPONG"] else c["BM"] // 2                 # a consumer group's tile rows
        acc = rows * c["BN"] * (2 if c["PROMOTE"] else 1)                # PROMOTE: a second accumulator
        return (rows >= 64 and strips in (1, 2, 4) and strips % c["EPI_BUFS"] == 0 and acc <= 64 * 256
                and smem_bytes(c) <= SMEM_LIMIT)

    return Space({"BM": [64, 128, 256], "BN": [128, 256], "BK": [64, 128], "STAGES": [2, 3, 4, 5, 6],
                  "EPI_N": [64, 128], "DOT_WAIT0": [False, True], "PROMOTE": [False, True],
                  "SCALES_EARLY": [False, True], "PINGPONG": [False, True]},
                 constraints=[fits], fixed={"GROUP_M": 8, "EPI_BUFS": 2, "MMA_REGS": 232, "LOADER_REGS": 40},
                 seeds=seeds)


def problem(name: str, *, dtype: str = "float16", causal: bool = False) -> Problem:
    """The :class:`Problem` of library kernel ``name`` (``NAMES``: the GEMMs, the FP8 GEMM per tensor or row-wise,
    attention and its backward)."""
    ref = ("tlx_workbench.explore.library:problem", (name,), {"dtype": dtype, "causal": causal})
    # the name says what decides the numbers besides the config: rows of a bf16 sweep are not an fp16 one's
    suffix = "" if dtype == "float16" else "_" + {"bfloat16": "bf16"}.get(dtype, dtype)
    if name in GEMMS:
        spec = _spec(name)
        return Problem(name=name + suffix, launch=gemm_launch(name), make_inputs=spec.make_inputs,
                       reference=spec.reference, flops=_shape_flops(name), bytes=_gemm_bytes,
                       sim_shape=_gemm_sim_shape, dtype=dtype, ref=ref,
                       default=dict(spec.configs[0]))
    if name in FP8_GEMMS:
        return _fp8_problem(name, dtype, ref)
    if name == ATTENTION_BWD:
        return _attention_bwd_problem(bool(causal), dtype, suffix, ref)
    if name == "attention":
        from ..kernels import attention as att
        launch, reference, make_inputs, flops, nbytes, sim_shape, verify = _attention_parts(causal)
        return Problem(name=("attention_causal" if causal else "attention") + suffix, launch=launch,
                       make_inputs=make_inputs,
                       reference=reference, flops=flops, bytes=nbytes, sim_shape=sim_shape, verify_shape=verify,
                       dtype=dtype, ref=ref, default=dict(att.DEFAULTS[(False, bool(causal))]))
    raise TLXWorkbenchError(f"no library problem named {name!r}", hint=f"use one of {NAMES}")


def space(name: str, *, seeds=(), head_dim: int = 128, causal: bool = False) -> Space:
    """The explorer's space of library kernel ``name``.

    ``gemm_ws``: tiles, depth, epilogue strips and the protocol switches of the cooperative kernel,
    kept where the epilogue strips divide the tile and the ring's SMEM estimate is within 10 % of a
    CTA's budget (the compiler drops the configs just over it, with its message). ``attention``: the
    library's configs that suit ``head_dim`` and ``causal``, and the ring depths and block widths
    around them."""
    if name == "gemm_ws":
        def epilogue_divides(c):
            return (c["BN"] // c["EPI_N"]) in (1, 2, 4) and (c["BN"] // c["EPI_N"]) % c["EPI_BUFS"] == 0

        from ..kernels._common import SMEM_LIMIT
        from ..kernels.gemm_ws import smem_bytes

        def smem_estimate_fits(c):
            return smem_bytes(c) <= SMEM_LIMIT

        return Space({"BM": [128, 256], "BN": [128, 256], "BK": [64], "STAGES": [2, 3, 4, 5, 6],
                      "EPI_N": [64, 128], "SPLIT_FULL": [False, True], "DOT_WAIT0": [False, True],
                      "WARP_BARRIER": [False, True]},
                     constraints=[epilogue_divides, smem_estimate_fits],
                     fixed={"GROUP_M": 8, "EPI_BUFS": 2, "MMA_REGS": 232, "LOADER_REGS": 40},
                     seeds=seeds)
    if name in GEMMS:
        return Space(_spec(name).configs, seeds=seeds)
    if name in FP8_GEMMS:
        return _fp8_space(seeds)
    if name == ATTENTION_BWD:
        return _attention_bwd_space(seeds, head_dim, causal)
    if name == "attention":
        from ..kernels import attention as att
        base = list(att.configs_for(head_dim, causal))
        extra = []
        for c in base:
            for bufs in (2, 3):
                for bn in (64, 128):
                    extra.append({**c, "NUM_BUFS": bufs, "BN": bn})
        return Space(base + extra, constraints=[lambda c: att.suits(c, head_dim, causal)], seeds=seeds)
    raise TLXWorkbenchError(f"no library space named {name!r}", hint=f"use one of {NAMES}")


def seeded(name: str) -> dict:
    """Configs of library kernel ``name`` that are wrong on purpose, to watch the explorer drop
    them: {"deadlock": [...], "over_budget": [...]}.

    gemm_ws with a one-slot ring and one wgmma kept in flight deadlocks: a consumer waits for
    k-step 1 to land before it releases the slot of step 0, and the loader needs that slot to
    load step 1 (on a GPU: a hang). attention with four consumer groups deadlocks on the GEMM
    turn's named barrier."""
    if name == "gemm_ws":
        from ..kernels.gemm_ws import CONFIGS
        base = dict(CONFIGS[1])
        return {"deadlock": [dict(base, STAGES=1), dict(base, STAGES=1, BN=128, EPI_N=64)],
                "over_budget": [dict(base, STAGES=5), dict(base, STAGES=4, BK=128)]}
    if name == "attention":
        from ..kernels.attention import DEFAULTS
        # four consumer groups in the GEMM-turn ring: the turn's named barrier is shared by groups
        # that never meet at it (BN=64 and 120 registers, so that ptxas builds it)
        base = dict(DEFAULTS[(False, False)])
        return {"deadlock": [dict(BM=256, BN=64, NUM_BUFS=2, LOADER_REGS=24, MMA_REGS=120, GROUPS=4)],
                "over_budget": [dict(base, NUM_BUFS=4, Q_BUFS=2)]}
    return {}
