"""The attention backward kernel's configs: the autotune space, the simulator's small configs and
what each parameter means (``_config``'s docstring).

Plain data and arithmetic (no Triton): the explorer, the benchmarks and the tests read these
without compiling anything. ``attention_bwd.py`` re-exports every name.
"""
from __future__ import annotations

from .attention_configs import SMEM_LIMIT


def _config(BM, BN=128, NUM_BUFS=2, LOADER_REGS=24, MMA_REGS=240, DQ_SPLIT=False, DQ_TMA=0,
            DP_DELTA=False, P_ROUND=False, DQ_HANDOFF=False, DQ_STAGGER=False, SPLIT_TAIL=False):
    """A config dict of ``attention_bwd_kernel``:

    - BM: query rows per step of the loop (the N side of S^T = K Q^T, the K side of dV, dK);
    - BN: K/V rows per CTA, 64 per consumer warp group (BN=128: two groups);
    - NUM_BUFS: depth of the Q/dO ring;
    - LOADER_REGS / MMA_REGS: registers per thread of the loader task and of each consumer group;
    - DQ_SPLIT (D = 64 x groups, i.e. D=128 with BN=128): each group computes 64 columns of dQ_i from both
      groups' dS (a named barrier per step, dS double-buffered), so each dQ element gets one atomic add
      per K/V block instead of one per group. Off: each group adds its own keys' share of all of dQ_i.
    - DQ_TMA = n > 0 (with DQ_SPLIT): dQ's adds by TMA reduce-add (one ``cp.reduce.async.bulk.tensor`` per (BM, 64)
      fp32 tile, from n SMEM tiles per group used in turn) instead of ``tl.atomic_add``; 0: the atomics.
    - DP_DELTA, P_ROUND (register pressure of the exp/dS stretch, where the default spills at D=128): dP^T's
      accumulator starts at -delta; dS^T from P^T rounded to the input dtype (dV's operand), dV's wgmma issued
      before dP^T is waited.
    - DQ_HANDOFF (with DQ_SPLIT, two groups): each group announces its dS^T with a bar.arrive right after storing it
      and waits (bar.sync) for the other's only before the half of its dQ that reads it, its own half issued first;
      instead of one bar.sync of both groups before dQ (barriers 10..13: per group and step parity).
    - DQ_STAGGER (with DQ_HANDOFF): group 1 starts its first step once group 0's first P^T is computed (barrier 9),
      and nothing pulls it back into step: group 1's S^T, dP^T wgmmas run under group 0's exps, a ping-pong.
    - SPLIT_TAIL (with DQ_TMA and BM=64; non-causal, ignored when causal): when the last wave is a small part of one,
      the last heads' K/V blocks are left to a second launch that splits each over query blocks across the SMs, the
      parts' dK, dV summed in fp32 by TMA reduce-add through the dQ tiles (``tail_split``); the plain kernel runs the other heads, its code unchanged (a one-launch form,
      every CTA choosing main or part at run time, measured 4-6 % slower on the same work: ptxas scheduled it worse).
    """
    cfg = dict(BM=BM, BN=BN, NUM_BUFS=NUM_BUFS, LOADER_REGS=LOADER_REGS, MMA_REGS=MMA_REGS)
    if DQ_SPLIT:
        cfg["DQ_SPLIT"] = True
    if DQ_TMA:
        cfg["DQ_TMA"] = DQ_TMA
    for name, on in (("DP_DELTA", DP_DELTA), ("P_ROUND", P_ROUND), ("DQ_HANDOFF", DQ_HANDOFF),
                     ("DQ_STAGGER", DQ_STAGGER), ("SPLIT_TAIL", SPLIT_TAIL)):
        if on:
            cfg[name] = True
    return cfg


def smem_bytes(cfg, head_dim, elem=2) -> int:
    """SMEM a config asks for, roughly: K, V (and K's 64-column tiles when D > 64, not with DQ_TMA), the Q/dO ring, the
    dS^T tiles (two sets with DQ_SPLIT) and the compiler's fp32 scratch for dQ's layout change before
    the atomics (64 x BM per group), or with DQ_TMA = n, n (BM, 64) fp32 dQ tiles per group and the
    epilogue's scratch instead."""
    groups = cfg["BN"] // 64
    k_copies = 3 if head_dim > 64 and not cfg.get("DQ_TMA") else 2      # DQ_TMA: dQ's B operand is a view of K
    ds_sets = 2 if cfg.get("DQ_SPLIT") else 1
    kv = k_copies * cfg["BN"] * head_dim * elem
    ring = 2 * cfg["NUM_BUFS"] * cfg["BM"] * head_dim * elem
    ds = ds_sets * groups * 64 * cfg["BM"] * elem
    if cfg.get("DQ_TMA"):
        # the dQ tiles, and the compiler's 16 KB scratch for the epilogue's layout change of dK/dV (which the
        # atomics' scratch held before), measured at D=64 and 128 (sm_90 compile, 2026-12-02)
        scratch = groups * cfg["DQ_TMA"] * cfg["BM"] * 64 * 4 + 16384
    else:
        scratch = groups * 64 * cfg["BM"] * 4
    return kv + ring + ds + scratch + 1024


def suits(cfg, head_dim, causal=False) -> bool:
    """Whether ``cfg`` fits a CTA (227 KiB of SMEM; 64 x BM fp32 S^T and dP^T plus 64 x D dK and dV
    per thread group: BM=128 at D=128 needs 256 accumulator registers a thread, past 240)."""
    if cfg["BN"] % 64 or cfg["BN"] // 64 not in (1, 2, 3):
        return False
    if head_dim > 64 and cfg["BM"] > 64:
        return False
    if cfg.get("DQ_SPLIT") and head_dim // 64 != cfg["BN"] // 64:
        return False
    if cfg.get("DQ_TMA") and not cfg.get("DQ_SPLIT"):
        return False
    if cfg.get("DQ_HANDOFF") and not (cfg.get("DQ_SPLIT") and cfg["BN"] == 128):
        return False
    if cfg.get("DQ_STAGGER") and not cfg.get("DQ_HANDOFF"):
        return False
    if cfg.get("SPLIT_TAIL") and not (cfg.get("DQ_TMA") and cfg["BM"] == 64):
        return False        # the parts' dK, dV go out through the (BM, 64) dQ tiles as 64-row tiles
    return smem_bytes(cfg, head_dim) <= SMEM_LIMIT


CONFIGS = (
    _config(64),
    # D=128 only: lean + dS^T hand-over + stagger (VARIANT_CONFIGS' lean_pingpong), the default (below); then the
    # hand-over alone (the fastest causal form on the H200), lean + hand-over, and the forms before them
    _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True, DQ_HANDOFF=True, DQ_STAGGER=True),
    _config(64, DQ_SPLIT=True, DQ_TMA=1, DQ_HANDOFF=True),
    _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True, DQ_HANDOFF=True),
    _config(64, DQ_SPLIT=True, DQ_TMA=1),   # D=128 only
    _config(64, DQ_SPLIT=True),         # D=128 only
    _config(64, NUM_BUFS=3),
    _config(64, BN=64),
    _config(128),                       # D=64 only
    _config(128, NUM_BUFS=3),           # D=64 only
)

# DQ_TMA: dQ by TMA reduce-add from (BM, 64) fp32 SMEM tiles; at D=128 dQ's B operand is a view of K (no second
# copy). With DQ_SPLIT one tile per group (two pass 227 KiB): it is written again a whole step later, so its reduce
# has the step's five wgmmas to read it. Without DQ_SPLIT (each group reducing all D columns) it measured 0.94-1.02x
# the atomics and is gone (benchmarks/RESULTS.md, attention backward, levers measured).

# Register pressure and the consumers' dS^T hand-over at D=128: the default (DQ_SPLIT + DQ_TMA=1) with
# DP_DELTA + P_ROUND ("lean"; its hot loop about spill-free at sm_90, benchmarks/RESULTS.md), with DQ_HANDOFF, with
# both, and lean + DQ_HANDOFF + DQ_STAGGER (group 1 half a step behind: a ping-pong).
# benchmarks/attention_bwd_variants_h200.py checks and times them against the default.
VARIANT_CONFIGS = {
    "lean": _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True),
    "handoff": _config(64, DQ_SPLIT=True, DQ_TMA=1, DQ_HANDOFF=True),
    "lean_handoff": _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True, DQ_HANDOFF=True),
    "lean_pingpong": _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True, DQ_HANDOFF=True,
                             DQ_STAGGER=True),
    # lean_pingpong, the last heads' K/V blocks split over query blocks in a second launch (non-causal; causal:
    # lean_pingpong)
    "split_tail": _config(64, DQ_SPLIT=True, DQ_TMA=1, DP_DELTA=True, P_ROUND=True, DQ_HANDOFF=True,
                          DQ_STAGGER=True, SPLIT_TAIL=True),
}

# D=128: DQ_SPLIT, 1.27-1.30x the plain form on the H200 (2026-12-02, every D=128 cell); with DQ_TMA=1 (dQ by TMA
# reduce-add) 1.05-1.14x DQ_SPLIT's atomics, every D=128 cell (2026-12-02 06:33 UTC; benchmarks/RESULTS.md). Since
# 2026-12-02 13:19 UTC (benchmarks/attention_bwd_variants_h200.py, one run, interleaved rounds): lean_pingpong,
# 0.990-1.00x SDPA's backward in the four D=128 cells (never below 0.99x; the DQ_TMA form 0.909-1.00x), 0.997-1.09x
# the DQ_TMA form. Since 2026-12-03 (two-launch SPLIT_TAIL): split_tail, which is lean_pingpong when causal; faster
# than lean_pingpong non-causal in 11 of 12 side-by-side timings over two machine starts (1-4 %), 1.001-1.010x
# SDPA in the four cells over three runs on the second (benchmarks/RESULTS.md). Causal D=128 since 2026-12-04:
# handoff, faster than lean_pingpong in 5 of 6 side-by-side runs on 2026-12-03 (medians of three runs 1.025x /
# 1.030x SDPA at N=4096 / 8192 vs 1.018x / 1.011x) and in 7 of 12 of the tuner's one-shot timings before; as the
# default, 1.017-1.028x SDPA over three runs on each of two machine starts, faster than lean_pingpong in all 12 runs
DEFAULTS = {(64, False): _config(64), (64, True): _config(64),
            (128, False): dict(VARIANT_CONFIGS["split_tail"]), (128, True): dict(VARIANT_CONFIGS["handoff"])}


def default_for(head_dim, causal=False):
    """The default config for one head dim and masking (``DEFAULTS``), or None for a head dim the kernel has none for.

    >>> default_for(128, causal=True) == VARIANT_CONFIGS["handoff"]
    True
    """
    return DEFAULTS.get((head_dim, bool(causal)))


def configs_for(head_dim, causal=False):
    """The autotune space for one head dim (CONFIGS that ``suits`` it), the default (``default_for``) first;
    causal: without SPLIT_TAIL (it changes nothing there), so no config is timed twice."""
    def form(c):
        return {key: val for key, val in c.items() if key != "SPLIT_TAIL"} if causal and c is not None else c
    out = []
    for c in (form(default_for(head_dim, causal)), *map(form, CONFIGS)):
        if c is not None and suits(c, head_dim, causal) and c not in out:
            out.append(c)
    return tuple(out)

SIM_CONFIGS = {
    "tiny": _config(64),
    "one_group": _config(64, BN=64, NUM_BUFS=3),
    "ring_of_1": _config(64, NUM_BUFS=1),
    # D=128: dQ's columns split between the groups (named barrier per step, dS double-buffered)
    "dq_split": _config(64, DQ_SPLIT=True),
    # dQ by TMA reduce-add (DQ_TMA): D=128 split, one tile per group
    "dq_tma": _config(64, DQ_SPLIT=True, DQ_TMA=1),
    # VARIANT_CONFIGS (D=128): fewer registers across the exp/dS stretch (lean), dS^T handed between the groups by
    # arrive / wait pairs (handoff), both (lean_handoff), group 1 staggered (lean_pingpong), the split tail
    # (split_tail); the two register switches at D=64 (atomics)
    **VARIANT_CONFIGS,
    "lean_d64": _config(64, DP_DELTA=True, P_ROUND=True),
}
