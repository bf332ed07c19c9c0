"""The attention kernels' configs: the autotune space, the defaults per (head dim, causal), the
simulator's small configs, and what each constexpr switch does (``_config``'s docstring).

Plain data and arithmetic on it (no Triton): the explorer, the benchmarks and the tests read these
without compiling anything. ``attention.py`` re-exports every name.
"""
from __future__ import annotations

from ..target import GPU_MODELS


def _config(BN, NUM_BUFS, BM=128, LOADER_REGS=24, MMA_REGS=240, PERSISTENT=False, Q_BUFS=1, P_LATE=False, GROUPS=2,
            ZIGZAG=False, PIN_SOFTMAX=False, SPLIT_TAIL=False):
    """A config dict; a switch appears in it only when it is not at its default, so each config names
    what it changes. The switches:

    - PERSISTENT: attention_fwd_persistent_kernel (one CTA per SM; with ZIGZAG, ``_common.persistent_ctas``),
      with Q_BUFS sets of Q buffers;
    - P_LATE: P is converted to fp16/bf16 after the P V wgmma retired, outside the GEMM turn;
    - GROUPS: consumer groups of 64 query rows each take GEMM turns in a ring (BM = 64 * GROUPS);
    - PIN_SOFTMAX: the softmax is pinned above the P V wgmma's wait (a never-taken store that needs it), so
      it overlaps P V in the SASS too; spills 7 registers at D=128 unless P_LATE;
    - ZIGZAG (persistent only): each CTA takes pairs of tiles (heaviest + lightest query block of one
      head), a causal schedule with equal work per pair (1.08-1.10x SDPA at D=128).
    - SPLIT_TAIL (persistent, non-causal): when the tiles leave a last wave of at most half the CTAs
      (4096 tiles on 132 SMs: 31 waves and 4 tiles), the persistent kernel walks the whole waves only and
      the leftover tiles are split over their K/V blocks across the SMs (``tail_plan``), their partial
      softmax sums merged by a second small kernel: the last wave costs a fraction of a tile, not a tile.
    """
    cfg = dict(BM=BM, BN=BN, NUM_BUFS=NUM_BUFS, LOADER_REGS=LOADER_REGS, MMA_REGS=MMA_REGS)
    if PERSISTENT:
        cfg.update(PERSISTENT=True, Q_BUFS=Q_BUFS)
    for name, value, default in (("P_LATE", P_LATE, False), ("GROUPS", GROUPS, 2), ("PIN_SOFTMAX", PIN_SOFTMAX, False),
                                 ("ZIGZAG", ZIGZAG, False), ("SPLIT_TAIL", SPLIT_TAIL, False)):
        if value != default:
            cfg[name] = value
    return cfg


def persistent_schedule(num_tiles: int, num_ctas: int, zigzag: bool = False) -> list[list[int]]:
    """The tiles each persistent CTA walks, in order (the kernel's ``_walk``/``_tile_at``).

    >>> persistent_schedule(5, 2, zigzag=True)
    [[0, 1, 4], [2, 3]]
    """
    if not zigzag:
        return [list(range(c, num_tiles, num_ctas)) for c in range(num_ctas)]
    pairs = -(-num_tiles // 2)
    return [[t for p in range(c, pairs, num_ctas) for t in (2 * p, 2 * p + 1) if t < num_tiles]
            for c in range(num_ctas)]


TAIL_BN = 64      # K/V columns per step of the split tail's kernel


def tail_plan(num_tiles: int, num_ctas: int, n_ctx: int, unit: int = TAIL_BN) -> tuple[int, int, int, int]:
    """(tiles the whole waves take, leftover tiles, splits per leftover tile, columns per split) for the forward's
    ``SPLIT_TAIL``: its leftover query tiles split over K/V columns (``unit``: the length a split is a whole
    multiple of, ``TAIL_BN``). The leftover is split only when it is at most half a wave (else the last wave is
    full enough), into as many splits as keep leftover x splits within one wave, every split non-empty. (The
    backward plans its own split, ``attention_bwd.tail_split``: whole heads, since its main launch keeps the plain
    kernel's grid.)

    >>> tail_plan(4096, 132, 4096)        # 4 x 32 heads of N=4096, BM=128, on an H200: 31 whole waves
    (4092, 4, 32, 128)
    >>> tail_plan(4096, 128, 4096)        # whole waves: nothing to split
    (4096, 0, 0, 0)
    >>> tail_plan(4096, 132, 8192, unit=64)   # 4096 tiles of N=8192, splits in 64-column multiples
    (4092, 4, 32, 256)
    """
    left = num_tiles % num_ctas if num_tiles > num_ctas else 0
    if left == 0 or left > num_ctas // 2:
        return num_tiles, 0, 0, 0
    blocks = -(-n_ctx // unit)
    per_split = -(-blocks // max(1, min(num_ctas // left, blocks)))
    splits = -(-blocks // per_split)
    return num_tiles - left, left, splits, per_split * unit


SMEM_LIMIT = GPU_MODELS["H200"].smem_per_block     # bytes of SMEM one CTA may have on an H100/H200 (227 KiB)


def smem_bytes(cfg, head_dim, elem=2, even_m=True) -> int:
    """SMEM a config asks for, from above: Q, the K/V ring, and the O store's buffers. With ``even_m`` (N a
    multiple of BM) O leaves by TMA (the persistent form's O buffers; the plain kernel reuses Q's); a ragged N
    stores O with a masked ``tl.store``, whose layout conversion takes BM x D / 2 elements of scratch in both
    forms and the persistent form allocates no O buffers (offline sm_90 compiles at D=128, N=1000 vs 1024:
    plain, three K/V buffers 245912 vs 229704 bytes)."""
    q_sets = cfg.get("Q_BUFS", 1)
    tile = cfg["BM"] * head_dim * elem
    o = (tile if cfg.get("PERSISTENT") else 0) if even_m else tile // 2
    return (q_sets * cfg["BM"] * head_dim + 2 * cfg["NUM_BUFS"] * cfg["BN"] * head_dim) * elem + o + 1024


# the default per (head dim <= 64, causal), each measured fastest there on the H200 (benchmarks/
# RESULTS.md, attention forward); ``configs_for`` puts it first, then the rest of CONFIGS in order
# D=128, non-causal: persistent, two Q sets
_PERSISTENT = _config(128, 2, PERSISTENT=True, Q_BUFS=2)
# D=64: three consumer groups take GEMM turns, so each group's softmax hides behind two other
# groups' GEMMs (1.04-1.11x SDPA vs 0.92-0.95x with two groups); 160 registers per
# consumer thread would spill at D=128
_THREE_GROUPS = _config(128, 2, BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2)
# causal: persistent with zig-zag pairs of query tiles (1.08-1.10x SDPA at D=128 vs 1.03-1.05x for
# the plain grid)
_ZIGZAG = _config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)
# D=128, non-causal: the same, its last partial wave split over K/V across the SMs (SPLIT_TAIL)
_PERSISTENT_TAIL = _config(128, 2, PERSISTENT=True, Q_BUFS=2, SPLIT_TAIL=True)
# causal D=64: zig-zag pairs, two groups, the softmax pinned under P V (PIN_SOFTMAX + P_LATE):
# 1.00x SDPA vs 0.97x for the three-group zig-zag; at D=128 the same switches lost 2-7 %
_ZIGZAG_PINNED = _config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True, PIN_SOFTMAX=True, P_LATE=True)

# the autotune space (``suits`` picks what fits a head dim and masking)
CONFIGS = (
    _PERSISTENT,
    _PERSISTENT_TAIL,
    _config(128, 2),
    _config(128, 3),
    _config(128, 2, PERSISTENT=True, Q_BUFS=1),
    _config(64, 3),
    _config(128, 2, LOADER_REGS=40, MMA_REGS=232),
    # D=64 only: 128 query rows per consumer group, so each K/V block feeds twice the MMA work
    # (at D=128 the 128x128 fp32 accumulator + S spill past 240 registers)
    _config(64, 2, BM=256),
    _THREE_GROUPS,
    _ZIGZAG,
    _config(128, 2, BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True),
    _ZIGZAG_PINNED,
)

DEFAULTS = {(False, False): _PERSISTENT_TAIL, (False, True): _ZIGZAG,
            (True, False): _THREE_GROUPS, (True, True): _ZIGZAG_PINNED}


def suits(cfg, head_dim, causal=False, n_ctx=None) -> bool:
    """Whether ``cfg`` is meant for this head dim (BM=256 spills registers at D=128; every
    config must fit the 227 KiB of SMEM a CTA may have, at ``n_ctx`` when given: a ragged N needs
    more, ``smem_bytes``) and masking: the persistent form walks
    its tiles in a fixed stride, heavy blocks of every head first, which lost to the plain grid
    in causal runs (0.91x SDPA vs 1.04x: L2 reuse), so causal runs take the persistent
    form only with the zig-zag pair schedule (1.08-1.10x), and only they take that."""
    if causal and cfg.get("PERSISTENT") and not cfg.get("ZIGZAG"):
        return False
    if cfg.get("ZIGZAG") and not causal:
        return False        # measured for causal runs only
    if cfg.get("SPLIT_TAIL") and (causal or not cfg.get("PERSISTENT")):
        return False        # the tail's splits are of the non-causal walk
    even_m = n_ctx is None or n_ctx % cfg["BM"] == 0
    return (cfg["BM"] <= 128 or head_dim <= 64) and smem_bytes(cfg, head_dim, even_m=even_m) <= SMEM_LIMIT


def configs_for(head_dim, causal=False, n_ctx=None):
    """The autotune space for one head dim, masking and (when given) sequence length, the default first
    (``DEFAULTS``: three groups for D <= 64, zig-zag persistent for causal runs, the pinned softmax for causal
    D <= 64), then every other config that ``suits`` it in CONFIGS order (at a ragged ``n_ctx`` the plain kernel
    with three K/V buffers of 128 columns does not fit)."""
    first = DEFAULTS[(head_dim <= 64, bool(causal))]
    return (first,) + tuple(c for c in CONFIGS if c != first and suits(c, head_dim, causal, n_ctx))


SIM_CONFIGS = {
    "tiny": _config(64, 2),
    "blocks_of_32": _config(32, 2),
    # persistent, 2 CTAs for 8+ tiles: ring, turns and Q sets carry across tiles
    "persistent": _config(64, 2, PERSISTENT=True, Q_BUFS=2),
    "persistent_q1": _config(32, 3, PERSISTENT=True, Q_BUFS=1),
    # P converted after the P V wgmma retired
    "persistent_plate": _config(64, 2, PERSISTENT=True, Q_BUFS=2, P_LATE=True),
    # three consumer groups in a turn ring (BM=192: ragged query tiles at N=200)
    "three_groups": _config(64, 2, BM=192, GROUPS=3, MMA_REGS=160),
    "three_groups_persistent": _config(32, 3, BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2),
    # persistent, zig-zag pairs of query tiles (a causal schedule)
    "persistent_zigzag": _config(64, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True),
    # the last partial wave split over K/V (run on 3 CTAs: 4 tiles leave one to split)
    "persistent_split_tail": _config(64, 2, PERSISTENT=True, Q_BUFS=2, SPLIT_TAIL=True),
    "plain_plate": _config(32, 3, P_LATE=True),
    # the softmax pinned above the P V wait by a never-taken store (with and without P_LATE)
    "persistent_pin_plate": _config(64, 2, PERSISTENT=True, Q_BUFS=2, PIN_SOFTMAX=True, P_LATE=True),
    "plain_pin": _config(32, 2, PIN_SOFTMAX=True),
}
