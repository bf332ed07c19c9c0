"""Hopper stream-K GEMM: the cooperative warp-specialized kernel of ``gemm_ws`` with its last,
partial wave of tiles spread evenly over every SM. C = A @ B (fp16 / bf16 in, same out).

Work split, for G persistent CTAs (one per SM) and ``tiles`` output tiles of ``k_steps`` k-slices:

* data-parallel (DP) part: the first ``(tiles // G) * G`` tiles (every tile when G divides the
  count), walked like ``gemm_ws``: CTA c takes tiles c, c + G, ...
* stream-K (SK) part: the remaining ``tiles % G`` tiles, linearised into T = sk_tiles * k_steps
  (tile, k-step) iterations; CTA c then does iterations [c*T/G, (c+1)*T/G), as segments
  (tile, k0, k1) that each lie in one tile. At 4096^3 on 132 SMs: 3 DP waves, then 116 tiles
  shared out as ~56 k-steps per CTA instead of one 4th wave on 116 SMs.

Fix-up (deterministic, no atomics on data): a segment with k0 > 0 started mid-tile (it is the
CTA's first SK segment); it writes its fp32 partial accumulator to a workspace slot of its own,
``ws[c, wg]`` (each consumer warp group its BM/2 rows), syncs its warp group and raises flag
``flags[c, wg]`` with a release. The segment with k0 == 0 and k1 < k_steps owns the tile: it is
the last segment of its CTA, so the contributors (CTAs c+1, c+2, ... whose ranges start inside
the tile) did theirs first thing; it waits for each flag (acquire), adds the partials in CTA
order, lowers the flag again (the next launch needs no memset) and stores the tile. A CTA waits
only on later CTAs' first SK segments, which never wait: no cycles, as long as all G CTAs are
resident at once (G <= #SMs; one CTA per SM).

Loader and consumers walk the same segment sequence; the SMEM ring counter runs on across
segments. The workspace and flags are allocated once per (device, G, BM, BN) by :func:`launch`.

Measured on the H200 (benchmarks/RESULTS.md, GEMM, levers measured): level with ``gemm_ws`` at 8192^3
(1.01-1.02x cuBLAS) but 6-8 % slower at 4096^3 (0.92-0.94x), the case it was built for; use
``gemm_ws`` by default. Suspects: DP waves of G tiles no longer match the GROUP_M bands, the SK
segments drain and refill the ring, the fp32 partials go through the epilogue strips.

>>> from tlx_workbench.kernels.gemm_streamk import matmul       # on a Hopper GPU
>>> c = matmul(a, b)                                            # a: (M, K), b: (K, N)
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

from ..errors import TLXWorkbenchError
from ._common import grouped_tile, sm_count, torch_alloc
from .gemm_ws import (CONFIGS as _WS_CONFIGS, _config, _load_steps, _load_tiles, _mma_steps, _mma_tiles,
                      _ring_barriers, _store_strips, _strips, _ws_buffers, make_descriptors)
from .host import gemm_entry_points, gemm_spec, tma_gemm_call

# named barrier ids of the two consumer warp groups' workspace sync (Triton keeps 0 for the CTA)
_WS_BAR = tl.constexpr(12)


@triton.jit
def _sk_split(tiles, k_steps, NUM_SMS: tl.constexpr):
    """(DP tiles, SK tiles, SK iterations T): the SK region is the last partial wave."""
    sk_tiles = tiles % NUM_SMS
    dp_tiles = tiles - sk_tiles
    return dp_tiles, sk_tiles, sk_tiles * k_steps


@triton.jit
def _sk_segment(it, end, k_steps):
    """The segment that starts at SK iteration ``it`` of a range ending at ``end``: (SK tile, k0, k1)."""
    tile = it // k_steps
    k0 = it - tile * k_steps
    k1 = tl.minimum(k_steps, k0 + (end - it))
    return tile, k0, k1


@triton.jit
def _ws_strip(ws_ptr, slot, j, HALF_M: tl.constexpr, BN: tl.constexpr, EPI_N: tl.constexpr):
    """Pointers to columns [j*EPI_N, (j+1)*EPI_N) of workspace slot ``slot`` (= CTA * 2 + warp group),
    a HALF_M x BN fp32 row-major block."""
    rows = tl.arange(0, HALF_M)
    cols = j * EPI_N + tl.arange(0, EPI_N)
    return ws_ptr + slot.to(tl.int64) * (HALF_M * BN) + rows[:, None] * BN + cols[None, :]


@triton.jit
def _strip_out(p, stage, ws_ptr, slot, j, BAR, HALF_M: tl.constexpr, BN: tl.constexpr, EPI_N: tl.constexpr):
    """Contributor: fp32 strip ``p`` (accumulator layout) to the workspace. It goes registers -> SMEM ->
    registers in a layout of plain coalesced stores: converting the accumulator for tl.store would make
    the compiler add a 64 KB scratch buffer, which does not fit next to the ring."""
    tlx.async_descriptor_store_wait(0)      # stage aliases the epilogue strips: their TMA stores read them
    tlx.local_store(stage, p)
    tlx.named_barrier_wait(BAR, 128)
    tl.store(_ws_strip(ws_ptr, slot, j, HALF_M, BN, EPI_N), tlx.local_load(stage))
    tlx.named_barrier_wait(BAR, 128)        # all reads of stage done before the next strip overwrites it


@triton.jit
def _strip_in(p, stage, ws_ptr, wg, j, d0, d1, sk_iters, BAR, NUM_SMS: tl.constexpr, HALF_M: tl.constexpr,
              BN: tl.constexpr, EPI_N: tl.constexpr):
    """Owner: ``p`` + strip j of the partials of CTAs d0..d1-1 (those with an empty range wrote
    nothing and are skipped), added in CTA order; back through SMEM into ``p``'s layout."""
    part = tl.load(_ws_strip(ws_ptr, d0 * 2 + wg, j, HALF_M, BN, EPI_N), cache_modifier=".cg")
    for d in range(d0 + 1, d1):
        nonempty = (d + 1) * sk_iters // NUM_SMS > d * sk_iters // NUM_SMS
        part += tl.load(_ws_strip(ws_ptr, d * 2 + wg, j, HALF_M, BN, EPI_N), mask=nonempty, other=0.0,
                        cache_modifier=".cg")
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(stage, part)
    tlx.named_barrier_wait(BAR, 128)
    p = p + tlx.local_load(stage)
    tlx.named_barrier_wait(BAR, 128)
    return p


@triton.jit
def _owner_strip(p, j, stage, c_desc, c_strips, buf_base, row, col, ws_ptr, wg, d0, d1, sk_iters, BAR,
                 NUM_SMS: tl.constexpr, HALF_M: tl.constexpr, BN: tl.constexpr, EPI_N: tl.constexpr,
                 EPI_BUFS: tl.constexpr):
    """Owner: strip j plus the partials, then out through SMEM + TMA store as ``_store_strips`` does."""
    p = _strip_in(p, stage, ws_ptr, wg, j, d0, d1, sk_iters, BAR, NUM_SMS, HALF_M, BN, EPI_N)
    buf = buf_base + (j % EPI_BUFS)
    tlx.local_store(c_strips[buf], p.to(tlx.dtype_of(c_desc)))
    tlx.fence("async_shared")
    tlx.async_descriptor_store(c_desc, c_strips[buf], [row, col + j * EPI_N])


@triton.jit
def _fixup_strip(s, j, stage, c_desc, c_strips, buf_base, row, col, ws_ptr, pid, wg, d0, d1, sk_iters,
                 OWNER: tl.constexpr, BAR, NUM_SMS: tl.constexpr, HALF_M: tl.constexpr, BN: tl.constexpr,
                 EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr):
    """Strip j (EPI_N columns) of the fix-up: the owner's store, or a contributor's partial."""
    if OWNER:
        _owner_strip(s, j, stage, c_desc, c_strips, buf_base, row, col, ws_ptr, wg, d0, d1, sk_iters, BAR,
                     NUM_SMS, HALF_M, BN, EPI_N, EPI_BUFS)
    else:
        _strip_out(s, stage, ws_ptr, pid * 2 + wg, j, BAR, HALF_M, BN, EPI_N)


@triton.jit
def _fixup(acc, stage, c_desc, c_strips, buf_base, row, col, ws_ptr, pid, wg, d0, d1, sk_iters,
           OWNER: tl.constexpr, BAR, NUM_SMS: tl.constexpr, HALF_M: tl.constexpr, BN: tl.constexpr,
           EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr):
    """Strip by strip (EPI_N columns; 1, 2 or 4 strips): OWNER adds the partials of CTAs d0..d1-1 and
    stores the tile's rows to C at (row, col); otherwise ``acc`` goes to workspace slot (pid, wg)."""
    STRIPS: tl.constexpr = BN // EPI_N
    strips = _strips(acc, STRIPS)
    for j in tl.static_range(STRIPS):
        _fixup_strip(strips[j], j, stage, c_desc, c_strips, buf_base, row, col, ws_ptr, pid, wg, d0, d1, sk_iters,
                     OWNER, BAR, NUM_SMS, HALF_M, BN, EPI_N, EPI_BUFS)


@triton.jit
def gemm_streamk_kernel(a_desc, b_desc, c_desc, M, N, K, ws_ptr, flags_ptr,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                        GROUP_M: tl.constexpr, STAGES: tl.constexpr,
                        EPI_N: tl.constexpr, EPI_BUFS: tl.constexpr,
                        NUM_SMS: tl.constexpr, WARP_BARRIER: tl.constexpr = False,
                        LOADER_REGS: tl.constexpr = 40, MMA_REGS: tl.constexpr = 232,
                        SPLIT_FULL: tl.constexpr = False, DOT_WAIT0: tl.constexpr = False):
    a_ring, b_ring, c_strips = _ws_buffers(a_desc, c_desc, BM, BN, BK, STAGES, EPI_N, EPI_BUFS)     # gemm_ws's SMEM
    HALF_M: tl.constexpr = BM // 2
    STRIPS: tl.constexpr = BN // EPI_N
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    # the fix-up's fp32 strip of each consumer group, over that group's EPI_BUFS epilogue strips
    tl.static_assert(EPI_BUFS == 2, "stream-K stages an fp32 strip in a group's 2 epilogue strip buffers")
    tl.static_assert(tlx.size_of(tlx.dtype_of(c_desc)) == 2, "C must be fp16 or bf16")
    stage = tlx.local_alloc((HALF_M, EPI_N), tl.float32, 2, reuse=c_strips)

    full, full_a, full_b, empty = _ring_barriers(STAGES, SPLIT_FULL, WARP_BARRIER)

    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    dp_tiles, sk_tiles, sk_iters = _sk_split(num_pid_m * num_pid_n, k_steps, NUM_SMS)
    pid = tl.program_id(0)
    sk_start = pid * sk_iters // NUM_SMS
    sk_end = (pid + 1) * sk_iters // NUM_SMS
    STAGE_BYTES: tl.constexpr = (BM * BK + BK * BN) * tlx.size_of(dtype)
    HALF_A_BYTES: tl.constexpr = HALF_M * BK * tlx.size_of(dtype)
    B_BYTES: tl.constexpr = BK * BN * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            # the data-parallel tiles as gemm_ws walks them, then this CTA's stream-K segments
            use = _load_tiles(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, dp_tiles, num_pid_m,
                              num_pid_n, k_steps, BM, BN, BK, GROUP_M, STAGES, NUM_SMS, SPLIT_FULL)
            it = sk_start
            while it < sk_end:
                sk_tile, k0, k1 = _sk_segment(it, sk_end, k_steps)
                pid_m, pid_n = grouped_tile(dp_tiles + sk_tile, num_pid_m, num_pid_n, GROUP_M)
                use = _load_steps(a_desc, b_desc, a_ring, b_ring, full, full_a, full_b, empty, pid_m * BM,
                                  pid_n * BN, k0, k1, use, HALF_M, BK, STAGES, STAGE_BYTES, HALF_A_BYTES,
                                  B_BYTES, SPLIT_FULL)
                it += k1 - k0

        with tlx.async_task(num_warps=4, replicate=2, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            use = _mma_tiles(a_ring, b_ring, full, full_a, full_b, empty, c_desc, c_strips, wg, dp_tiles, num_pid_m,
                             num_pid_n, k_steps, BM, BN, GROUP_M, STAGES, EPI_N, EPI_BUFS, NUM_SMS, SPLIT_FULL,
                             DOT_WAIT0)
            it = sk_start
            while it < sk_end:
                sk_tile, k0, k1 = _sk_segment(it, sk_end, k_steps)
                acc, use = _mma_steps(a_ring, b_ring, full, full_a, full_b, empty, wg, k0, k1, use,
                                      STAGES, SPLIT_FULL, DOT_WAIT0)
                pid_m, pid_n = grouped_tile(dp_tiles + sk_tile, num_pid_m, num_pid_n, GROUP_M)
                row = pid_m * BM + wg * HALF_M
                col = pid_n * BN
                if k0 > 0:
                    # contributor: partial sum to our slot; once all 128 threads' stores are done
                    # (bar.sync orders them before thread 0's release), raise our flag
                    _fixup(acc, stage[wg], c_desc, c_strips, wg * EPI_BUFS, row, col, ws_ptr, pid, wg, 0, 0,
                           sk_iters, False, _WS_BAR + wg, NUM_SMS, HALF_M, BN, EPI_N, EPI_BUFS)
                    tl.atomic_xchg(flags_ptr + pid * 2 + wg, 1, sem="release", scope="gpu")
                elif k1 < k_steps:
                    # owner: the CTAs d0..d1-1 after us start inside this tile (their first segment)
                    tile_end = (sk_tile + 1) * k_steps
                    d1 = pid + 1
                    while (d1 < NUM_SMS) & (d1 * sk_iters // NUM_SMS < tile_end):
                        if (d1 + 1) * sk_iters // NUM_SMS > d1 * sk_iters // NUM_SMS:
                            # wait for its flag and lower it again in one step (acquire)
                            while tl.atomic_cas(flags_ptr + d1 * 2 + wg, 1, 0, sem="acquire", scope="gpu") != 1:
                                pass
                        d1 += 1
                    _fixup(acc, stage[wg], c_desc, c_strips, wg * EPI_BUFS, row, col, ws_ptr, pid, wg, pid + 1, d1,
                           sk_iters, True, _WS_BAR + wg, NUM_SMS, HALF_M, BN, EPI_N, EPI_BUFS)
                else:
                    _store_strips(acc, c_desc, c_strips, wg * EPI_BUFS, row, col, STRIPS, EPI_BUFS, EPI_N)
                it += k1 - k0
            tlx.async_descriptor_store_wait(0)


# the default: gemm_ws's (per-half full barriers, drain-and-release every step)
CONFIGS = tuple(_WS_CONFIGS[:3])

# small tiles the CPU simulator gets through quickly (wgmma needs >= 64 rows per group)
SIM_CONFIGS = {
    "tiny": _config(128, 64, 32, 2, 32, GROUP_M=2),
    "split_wait0": _config(128, 64, 32, 2, 32, GROUP_M=1, SPLIT_FULL=True, DOT_WAIT0=True,
                           MMA_REGS=None, LOADER_REGS=None),
}


def sk_segments(tiles: int, k_steps: int, num_sms: int, cta: int) -> list:
    """What CTA ``cta`` of ``num_sms`` computes, as the kernel walks it: [("dp", tile, 0, k_steps), ...,
    ("sk", tile, k0, k1), ...] (tile ids in grouped order).

    >>> sk_segments(5, 4, 3, 0)     # 3 DP tiles, 2 SK tiles = 8 iterations over 3 CTAs: 2 + 3 + 3
    [('dp', 0, 0, 4), ('sk', 3, 0, 2)]
    """
    sk_tiles = tiles % num_sms
    dp_tiles = tiles - sk_tiles
    out = [("dp", t, 0, k_steps) for t in range(cta, dp_tiles, num_sms)]
    T = sk_tiles * k_steps
    it, end = cta * T // num_sms, (cta + 1) * T // num_sms
    while it < end:
        tile, k0 = divmod(it, k_steps)
        k1 = min(k_steps, k0 + end - it)
        out.append(("sk", dp_tiles + tile, k0, k1))
        it += k1 - k0
    return out


_WORKSPACES: dict = {}


def workspace(device, num_sms: int, cfg):
    """(fp32 partials [num_sms, 2, BM/2, BN], int32 flags [num_sms, 2]) for ``device``, made once per
    (device, num_sms, BM, BN) and reused: the kernel leaves every flag at 0 when it ends. Two launches
    that run at the same time (different streams) must not share one."""
    import torch
    key = (str(device), num_sms, cfg["BM"], cfg["BN"])
    if key not in _WORKSPACES:
        ws = torch.empty((num_sms, 2, cfg["BM"] // 2, cfg["BN"]), dtype=torch.float32, device=device)
        flags = torch.zeros((num_sms, 2), dtype=torch.int32, device=device)
        _WORKSPACES[key] = (ws, flags)
    return _WORKSPACES[key]


def _kernel_call(a, b, c, cfg, num_sms=132):
    """The kernel's arguments and launch options (``num_sms``: the CTA count G, a constexpr)."""
    args, options = tma_gemm_call(make_descriptors(a, b, c, cfg), cfg, num_sms)
    ws, flags = workspace(a.device, num_sms, cfg)
    return (*args, ws, flags), options


def _launch_call(a, b, c, cfg, num_sms=None):
    """The launch of one explicit config on ``num_sms`` CTAs (default: one per SM; never more than the GPU has
    SMs, as a CTA may wait for a later one): (kernel, grid, args, options)."""
    num_sms = num_sms or sm_count()
    if a.is_cuda and num_sms > sm_count():
        # an owner CTA spins until later CTAs raise their flags: a CTA that is never resident hangs the GPU
        raise TLXWorkbenchError(f"gemm_streamk: num_sms={num_sms} CTAs, but this GPU has {sm_count()} SMs",
                                file=__file__, line=gemm_streamk_kernel.starting_line_number,
                                hint="every CTA must be resident at once (one per SM): pass num_sms <= the SM count")
    triton.set_allocator(torch_alloc)
    args, options = _kernel_call(a, b, c, cfg, num_sms)
    return gemm_streamk_kernel, (num_sms,), args, options


launch, matmul, tune, compile_offline = gemm_entry_points(
    __name__, gemm_streamk_kernel, _launch_call, _kernel_call, CONFIGS, "the stream-K warp-specialized kernel")

SPEC = gemm_spec("gemm_streamk", gemm_streamk_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)
