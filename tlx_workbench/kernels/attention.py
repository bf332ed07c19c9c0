"""Flash-attention forward for Hopper, warp-specialized, ping-pong: O = softmax(Q K^T * scale) V.

One CTA owns BM = 128 query rows of one (batch, head) (192 with three consumer groups):

* a loader warp group brings Q once (two 64-row halves) and then streams K_j, V_j
  with TMA through a NUM_BUFS-deep ring (``*_full`` count landed bytes, ``*_empty``
  need both consumer groups).
* two consumer warp groups own 64 query rows each. Inside a group, the two GEMMs
  of a step are issued together: S_j = Q K_j^T and O += P_{j-1} V_{j-1}; the
  softmax of S_j (row max, exp2, row sum) then runs while the P V wgmma is still in
  flight, and O is rescaled only after it retires.
* between the groups, two named barriers pass a "GEMM turn" back and forth: a
  group issues its two wgmmas only in its turn, so while group 0 does softmax on
  the CUDA cores, group 1's GEMMs own the tensor core, and the other way round.
* causal: the KV loop stops at the diagonal; only the last BM/BN blocks (and the
  ragged tail of N) pay for the mask.
* persistent form (``attention_fwd_persistent_kernel``, configs with PERSISTENT): one CTA per
  SM walks query tiles; the ring and the turns carry on across tiles, the next tile's Q is
  loaded while this one finishes, and the O store is not waited for. The default for
  non-causal runs (2-3 % faster than the plain grid at D=128 fp16, a tie in bf16; round 3).
* causal default, ``ZIGZAG`` (persistent): each CTA walks pairs of query tiles, the heaviest and
  the lightest causal block of one head, so every pair has the same work and a wave's K/V stays
  within a few heads (the earlier heavy-first order spanned every head and lost 12 %, round 3):
  1.08-1.10x SDPA at D=128 vs 1.03-1.05x for the plain grid (round 4).
* D=64 default: three consumer groups (``GROUPS=3``, BM=192, 160 registers each) take the GEMM
  turn in a ring, so each group's softmax hides behind two other groups' GEMMs: 1.04-1.11x SDPA
  vs 0.92-0.95x with two groups (round 4). ``configs_for(64)`` lists it first; it would spill
  registers at D=128.
* causal D=64 default: the zig-zag persistent kernel with two groups and the softmax pinned under
  the P V wgmma (``PIN_SOFTMAX`` + ``P_LATE``, below): 1.00x SDPA in fp16 vs 0.96-0.97x for three
  groups; in bf16 the three-group zig-zag is faster (0.96x vs 0.91x), and ``attention()`` autotunes
  over both (round 5).
* switches, all off by default and each measured slower or level on the H200 (benchmarks/RESULTS.md,
  attention rounds 4 and 5), kept so the experiments can be re-run: ``P_EARLY`` (P converted in the
  softmax: ptxas then serializes the wgmmas, C7513, -27 % in fp16), ``P_LATE`` (converted after
  the P V wgmma retired), ``WARP_BAR`` (warp-barrier releases), ``EX2_F16`` (packed fp16 exp2),
  ``LAZY`` (O rescaled only when a row max grew by > 2^8), ``WARP1_LOADER`` (a one-warp loader, as
  in FlashAttention-3: level), ``Q_REGS`` (Q in registers as the operand of Q K^T, with ``P_LATE``:
  level), ``PIN_SOFTMAX`` (see below: -2 to -7 % at D=128).
* what ptxas overlaps: in SASS the wait for the P V wgmma sits *above* the softmax written under it
  (ptxas moves a wait that has no inputs; ``report.wgmma_overlap`` shows it: 0 of 66 exp2 per step
  run under P V). ``PIN_SOFTMAX`` keeps them there with a store that never happens and needs all of
  them. Slower at D=128 all the same: the other group's GEMMs already hide the softmax (ping-pong).

Shapes: q, k, v (Z, H, N, D), D in {64, 128}, fp16 or bf16, any N.

>>> from tlx_workbench.kernels.attention import attention      # on a Hopper GPU
>>> o = attention(q, k, v, causal=True)
"""
from __future__ import annotations

import math

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from ..errors import TLXWorkbenchError
from ._common import KernelSpec, sm_count, torch_alloc
from .host import fastest_first, tuned_config

TURN_0 = tl.constexpr(14)
TURN_1 = tl.constexpr(15)
TURN_2 = tl.constexpr(13)
LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _wait_turn(wg, GROUPS: tl.constexpr = 2):
    """Wait for this group's GEMM turn (named barrier TURN_wg: this group + the one before it)."""
    if wg == 0:
        tlx.named_barrier_wait(TURN_0, 256)
    elif wg == 1 or GROUPS == 2:
        tlx.named_barrier_wait(TURN_1, 256)
    else:
        tlx.named_barrier_wait(TURN_2, 256)


@triton.jit
def _pass_turn(wg, GROUPS: tl.constexpr = 2):
    """Hand the GEMM turn to the next group (0 -> 1 -> ... -> GROUPS-1 -> 0)."""
    if wg == GROUPS - 1:
        tlx.named_barrier_arrive(TURN_0, 256)
    elif wg == 0:
        tlx.named_barrier_arrive(TURN_1, 256)
    else:
        tlx.named_barrier_arrive(TURN_2, 256)


@triton.jit
def _release_barriers(n: tl.constexpr, groups: tl.constexpr, WARP_BAR: tl.constexpr):
    """Barriers that consumer groups arrive on to hand a buffer back. ``WARP_BAR``: every thread
    of a group arrives (warp barriers), instead of one thread after a group-wide ``bar.sync``."""
    if WARP_BAR:
        return tlx.alloc_warp_barrier(num_barriers=n, num_warps=4, num_arrivals=groups)
    else:
        return tlx.alloc_barriers(num_barriers=n, arrive_count=groups)


@triton.jit
def _online_softmax(qk, m_i, l_i, qk_scale, rows, col0, N_CTX,
                    MASK: tl.constexpr, CAUSAL: tl.constexpr, BN: tl.constexpr,
                    DTYPE: tl.constexpr = tl.float32, P_EARLY: tl.constexpr = False,
                    EX2_F16: tl.constexpr = False, LAZY: tl.constexpr = False):
    """One block of the streaming softmax in base 2. Returns (p, m_new, l_new, alpha).

    ``P_EARLY``: p comes back already in the MMA operand dtype, so the conversion runs here,
    under the other group's GEMMs, not inside this group's GEMM turn. ``EX2_F16`` (fp16 only):
    the exponent is rounded to fp16 and exp2 runs on packed pairs (half the MUFU work)."""
    if MASK:
        cols = col0 + tl.arange(0, BN)
        keep = cols[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        qk = tl.where(keep, qk, float("-inf"))
    m_blk = tl.max(qk, 1) * qk_scale
    if LAZY:
        # move a row's reference max only when it grew by more than 2^8: otherwise alpha is
        # exactly 1 and p <= 256, and the caller may skip rescaling O (the result is the same)
        m_new = tl.where(m_blk > m_i + 8.0, m_blk, m_i)
    else:
        m_new = tl.maximum(m_i, m_blk)
    alpha = tl.math.exp2(m_i - m_new)
    if EX2_F16:
        # exponent rounded to fp16, two exp2 per MUFU instruction; P is fp16 anyway
        x = (qk * qk_scale - m_new[:, None]).to(tl.float16)
        p = tl.inline_asm_elementwise("ex2.approx.f16x2 $0, $1;", "=r,r", [x], dtype=tl.float16,
                                      is_pure=True, pack=2)
        l_new = l_i * alpha + tl.sum(p.to(tl.float32), 1)
    else:
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        l_new = l_i * alpha + tl.sum(p, 1)
        if P_EARLY:
            p = p.to(DTYPE)
    return p, m_new, l_new, alpha


@triton.jit
def _kv_step(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty, j, wg,
             p, m_i, l_i, acc, qk_scale, rows, N_CTX,
             MASK: tl.constexpr, CAUSAL: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr,
             DTYPE: tl.constexpr, ring0=0, P_EARLY: tl.constexpr = False, EX2_F16: tl.constexpr = False,
             LAZY: tl.constexpr = False, P_LATE: tl.constexpr = False, GROUPS: tl.constexpr = 2,
             PIN_SOFTMAX: tl.constexpr = False, pin_ptr=None):
    """Step j >= 1: S_j = Q K_j^T and O += P_{j-1} V_{j-1} in this group's turn, softmax of S_j
    under the P V wgmma, then rescale O. Returns the new (p, m_i, l_i, acc).

    ``ring0``: how many K/V blocks went through the ring before this tile's block 0 (a
    persistent CTA keeps one ring across its tiles)."""
    kb = (ring0 + j) % NUM_BUFS
    vb = (ring0 + j - 1) % NUM_BUFS
    tlx.barrier_wait(k_full[kb], ((ring0 + j) // NUM_BUFS) & 1)
    tlx.barrier_wait(v_full[vb], ((ring0 + j - 1) // NUM_BUFS) & 1)
    _wait_turn(wg, GROUPS)
    qk = tlx.async_dot(q_tile, tlx.local_trans(k_tiles[kb]))
    acc = tlx.async_dot(p.to(DTYPE), v_tiles[vb], acc)
    _pass_turn(wg, GROUPS)
    qk = tlx.async_dot_wait(1, qk)          # S_j ready (P V may still run)
    tlx.barrier_arrive(k_empty[kb])
    p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, rows, j * BN, N_CTX, MASK, CAUSAL, BN,
                                         DTYPE, P_EARLY, EX2_F16, LAZY)
    if PIN_SOFTMAX:
        # a store that never happens (N_CTX < 0) but needs every exp2 of the softmax (through l_i):
        # ptxas may not move a store below the wgmma wait, so the softmax stays above it and runs
        # under the P V wgmma. Without it ptxas hoists the wait above the softmax (the wait has
        # no inputs, and the rescale after it looks urgent): none of the 64 exp2 of a step
        # overlapped P V in round 4's SASS.
        tl.store(pin_ptr + rows, l_i.to(pin_ptr.dtype.element_ty), mask=N_CTX < 0)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empty[vb])
    if LAZY:
        if tl.min(alpha, 0) < 1.0:      # some row's reference max moved (rare after the first blocks)
            acc = acc * alpha[:, None]
    else:
        acc = acc * alpha[:, None]
    if P_LATE:
        # no wgmma of this group is in flight now: converting here keeps the conversion out of
        # the GEMM turn without ptxas serializing the wgmmas (C7513), as P_EARLY did
        p = p.to(DTYPE)
    return p, m_i, l_i, acc


@triton.jit
def _attend(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty, q_empty, qslot, wg, ring, rows, m_i, l_i,
            qk_scale, N_CTX, n_plain, n_blocks, HEAD_DIM: tl.constexpr, HALF: tl.constexpr,
            CAUSAL: tl.constexpr, EVEN_M: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr,
            DTYPE: tl.constexpr, P_EARLY: tl.constexpr, EX2_F16: tl.constexpr, LAZY: tl.constexpr,
            P_LATE: tl.constexpr, GROUPS: tl.constexpr, RELEASE_Q: tl.constexpr,
            PIN_SOFTMAX: tl.constexpr = False, pin_ptr=None, Q_REGS: tl.constexpr = False):
    """One consumer group's pass over the K/V blocks of one query tile: S_0 alone, the steps (unmasked
    blocks first), the last P V. ``ring``: K/V blocks through the ring before this tile's block 0.
    ``RELEASE_Q``: arrive on ``q_empty[qslot]`` once the tile's last Q K^T retired (persistent form).
    Returns (the unnormalised O, the row sums)."""
    if Q_REGS:
        # Q as the register operand of every S = Q K^T wgmma (read from SMEM once per tile,
        # not once per step); fits 240 registers only with P_LATE
        q_tile = tlx.local_load(q_tile)
    # block 0: S_0 alone (nothing to multiply with V yet)
    b0 = ring % NUM_BUFS
    tlx.barrier_wait(k_full[b0], (ring // NUM_BUFS) & 1)
    _wait_turn(wg, GROUPS)
    qk = tlx.async_dot(q_tile, tlx.local_trans(k_tiles[b0]))
    _pass_turn(wg, GROUPS)
    qk = tlx.async_dot_wait(0, qk)
    tlx.barrier_arrive(k_empty[b0])
    p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, rows, 0, N_CTX,
                                         CAUSAL or not EVEN_M, CAUSAL, BN, DTYPE, P_EARLY or P_LATE, EX2_F16, LAZY)
    acc = tl.zeros([HALF, HEAD_DIM], tl.float32)
    for j in range(1, tl.maximum(n_plain, 1)):
        p, m_i, l_i, acc = _kv_step(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty,
                                    j, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX,
                                    False, CAUSAL, BN, NUM_BUFS, DTYPE, ring, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS,
                                    PIN_SOFTMAX, pin_ptr)
    for j in range(tl.maximum(n_plain, 1), n_blocks):
        p, m_i, l_i, acc = _kv_step(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty,
                                    j, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX,
                                    True, CAUSAL, BN, NUM_BUFS, DTYPE, ring, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS,
                                    PIN_SOFTMAX, pin_ptr)
    if RELEASE_Q:
        # every S = Q K^T of this tile has retired: the loader may refill this Q slot
        tlx.barrier_arrive(q_empty[qslot])

    # last P V
    last = ring + n_blocks - 1
    vb = last % NUM_BUFS
    tlx.barrier_wait(v_full[vb], (last // NUM_BUFS) & 1)
    acc = tlx.async_dot(p.to(DTYPE), v_tiles[vb], acc)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empty[vb])
    return acc, l_i


@triton.jit
def attention_fwd_kernel(sm_scale, Z, H, N_CTX, desc_q, desc_k, desc_v, desc_o, o_ptr,
                         HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                         LOADER_REGS: tl.constexpr = 24, MMA_REGS: tl.constexpr = 240,
                         P_EARLY: tl.constexpr = False, WARP_BAR: tl.constexpr = False,
                         EX2_F16: tl.constexpr = False, LAZY: tl.constexpr = False,
                         P_LATE: tl.constexpr = False, GROUPS: tl.constexpr = 2,
                         ZIGZAG: tl.constexpr = False, PIN_SOFTMAX: tl.constexpr = False,
                         Q_REGS: tl.constexpr = False):
    HALF: tl.constexpr = BM // GROUPS      # query rows per consumer group (64)
    dtype: tl.constexpr = tlx.dtype_of(desc_q)

    q_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS)
    k_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    v_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    q_full = tlx.alloc_barriers(num_barriers=GROUPS, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    k_empty = _release_barriers(NUM_BUFS, GROUPS, WARP_BAR)
    v_empty = _release_barriers(NUM_BUFS, GROUPS, WARP_BAR)

    # heavy (long causal) query blocks first, so the tail of the grid is short blocks
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    bh = tl.program_id(1)
    head_row = bh * N_CTX               # first row of this (batch, head) in the 2-D views
    if CAUSAL:
        kv_end = tl.minimum((start_m + 1) * BM, N_CTX)
    else:
        kv_end = N_CTX
    n_blocks = tl.cdiv(kv_end, BN)
    # blocks before n_plain need no mask (fully below the diagonal and inside N)
    if CAUSAL:
        n_plain = tl.minimum(start_m * BM, N_CTX) // BN
    else:
        n_plain = N_CTX // BN
    TILE_BYTES: tl.constexpr = BN * HEAD_DIM * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            for h in tl.static_range(GROUPS):
                tlx.barrier_expect_bytes(q_full[h], HALF * HEAD_DIM * tlx.size_of(dtype))
                tlx.async_descriptor_load(desc_q, q_tiles[h], [head_row + start_m * BM + h * HALF, 0], q_full[h])
            for j in range(n_blocks):
                b = j % NUM_BUFS
                parity = (j // NUM_BUFS) & 1
                tlx.barrier_wait(k_empty[b], parity ^ 1)
                tlx.barrier_expect_bytes(k_full[b], TILE_BYTES)
                tlx.async_descriptor_load(desc_k, k_tiles[b], [head_row + j * BN, 0], k_full[b])
                tlx.barrier_wait(v_empty[b], parity ^ 1)
                tlx.barrier_expect_bytes(v_full[b], TILE_BYTES)
                tlx.async_descriptor_load(desc_v, v_tiles[b], [head_row + j * BN, 0], v_full[b])

        with tlx.async_task(num_warps=4, replicate=GROUPS, num_regs=MMA_REGS):
            wg = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            rows = start_m * BM + wg * HALF + tl.arange(0, HALF)
            m_i = tl.full([HALF], float("-inf"), tl.float32)
            l_i = tl.zeros([HALF], tl.float32)
            q_tile = q_tiles[wg]
            if wg == GROUPS - 1:
                tlx.named_barrier_arrive(TURN_0, 256)   # group 0 takes the first turn
            tlx.barrier_wait(q_full[wg], 0)

            acc, l_i = _attend(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty, None, 0, wg, 0,
                               rows, m_i, l_i, qk_scale, N_CTX, n_plain, n_blocks, HEAD_DIM, HALF, CAUSAL, EVEN_M,
                               BN, NUM_BUFS, dtype, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS, False, PIN_SOFTMAX, o_ptr, Q_REGS)

            out = (acc / l_i[:, None]).to(tlx.dtype_of(desc_o))
            if EVEN_M:
                # Q's tile is dead now (its last wgmma retired): reuse it as the store buffer
                tlx.local_store(q_tile, out)
                tlx.fence("async_shared")
                tlx.async_descriptor_store(desc_o, q_tile, [head_row + start_m * BM + wg * HALF, 0])
                tlx.async_descriptor_store_wait(0)
            else:
                cols = tl.arange(0, HEAD_DIM)
                ptrs = o_ptr + (head_row + rows)[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
                tl.store(ptrs, out, mask=(rows < N_CTX)[:, None])



@triton.jit
def _tile_coords(tile, num_m, ZH, CAUSAL: tl.constexpr, ZIGZAG: tl.constexpr = False):
    """(start_m, bh) of persistent tile ``tile``. Non-causal: the query blocks of one head are
    consecutive, so the CTAs of a wave share K/V in L2. Causal: the heaviest query blocks of
    every head first (long KV loops early, short ones fill the tail). ``ZIGZAG`` (causal): per
    head, heaviest, lightest, next heaviest, ... so that tiles 2p and 2p+1 have equal work
    together and share one head's K/V."""
    if ZIGZAG:
        j = tile % num_m
        if j % 2 == 0:
            return num_m - 1 - j // 2, tile // num_m
        else:
            return j // 2, tile // num_m
    elif CAUSAL:
        return num_m - 1 - tile // ZH, tile % ZH
    else:
        return tile % num_m, tile // num_m


@triton.jit
def _walk(pid, num_tiles, NUM_SMS: tl.constexpr, ZIGZAG: tl.constexpr):
    """(first, end, step) of a persistent CTA's loop counter k; its tile is ``_tile_at(k, ...)``.
    Plain: tiles pid, pid + NUM_SMS, ... ZIGZAG: pairs of tiles (2p, 2p+1) for p = pid,
    pid + NUM_SMS, ... (the last pair is one tile when the count is odd)."""
    if ZIGZAG:
        num_pairs = tl.cdiv(num_tiles, 2)
        n = 2 * tl.cdiv(num_pairs - pid, NUM_SMS)
        n -= ((num_tiles % 2 == 1) & ((num_pairs - 1) % NUM_SMS == pid)).to(tl.int32)
        return 0, n, 1
    else:
        return pid, num_tiles, NUM_SMS


@triton.jit
def _tile_at(k, pid, NUM_SMS: tl.constexpr, ZIGZAG: tl.constexpr):
    if ZIGZAG:
        return 2 * (pid + (k // 2) * NUM_SMS) + k % 2
    else:
        return k


@triton.jit
def _persistent_loader(q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full, k_empty, v_empty,
                       desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX, num_tiles, num_m, ZH, HEAD_DIM:
                       tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr, CAUSAL:
                       tl.constexpr, EVEN_M: tl.constexpr, NUM_SMS: tl.constexpr, Q_BUFS: tl.constexpr, HALF:
                       tl.constexpr, TILE_BYTES: tl.constexpr, Q_BYTES: tl.constexpr, dtype: tl.constexpr,
                       P_EARLY: tl.constexpr, EX2_F16: tl.constexpr, LAZY: tl.constexpr, P_LATE: tl.constexpr,
                       GROUPS: tl.constexpr, ZIGZAG: tl.constexpr):
    """The loader of ``attention_fwd_persistent_kernel``: Q of each tile, then its K/V blocks."""
    ring = 0
    it = 0
    k_first, k_end, k_step = _walk(tl.program_id(0), num_tiles, NUM_SMS, ZIGZAG)
    for k_tile in range(k_first, k_end, k_step):
        tile = _tile_at(k_tile, tl.program_id(0), NUM_SMS, ZIGZAG)
        start_m, bh = _tile_coords(tile, num_m, ZH, CAUSAL, ZIGZAG)
        head_row = bh * N_CTX
        if CAUSAL:
            n_blocks = tl.cdiv(tl.minimum((start_m + 1) * BM, N_CTX), BN)
        else:
            n_blocks = tl.cdiv(N_CTX, BN)
        qs = it % Q_BUFS
        qpar = (it // Q_BUFS) & 1
        for h in tl.static_range(GROUPS):
            tlx.barrier_wait(q_empty[GROUPS * qs + h], qpar ^ 1)
            tlx.barrier_expect_bytes(q_full[GROUPS * qs + h], Q_BYTES)
            tlx.async_descriptor_load(desc_q, q_tiles[GROUPS * qs + h],
                                      [head_row + start_m * BM + h * HALF, 0], q_full[GROUPS * qs + h])
        for j in range(n_blocks):
            b = ring % NUM_BUFS
            parity = (ring // NUM_BUFS) & 1
            tlx.barrier_wait(k_empty[b], parity ^ 1)
            tlx.barrier_expect_bytes(k_full[b], TILE_BYTES)
            tlx.async_descriptor_load(desc_k, k_tiles[b], [head_row + j * BN, 0], k_full[b])
            tlx.barrier_wait(v_empty[b], parity ^ 1)
            tlx.barrier_expect_bytes(v_full[b], TILE_BYTES)
            tlx.async_descriptor_load(desc_v, v_tiles[b], [head_row + j * BN, 0], v_full[b])
            ring += 1
        it += 1


@triton.jit
def _persistent_consumer(wg, q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full, k_empty,
                         v_empty, desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX, num_tiles, num_m, ZH,
                         HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr,
                         CAUSAL: tl.constexpr, EVEN_M: tl.constexpr, NUM_SMS: tl.constexpr, Q_BUFS:
                         tl.constexpr, HALF: tl.constexpr, TILE_BYTES: tl.constexpr, Q_BYTES: tl.constexpr,
                         dtype: tl.constexpr, P_EARLY: tl.constexpr, EX2_F16: tl.constexpr, LAZY: tl.constexpr,
                         P_LATE: tl.constexpr, GROUPS: tl.constexpr, ZIGZAG: tl.constexpr,
                         PIN_SOFTMAX: tl.constexpr = False, Q_REGS: tl.constexpr = False):
    """Consumer group ``wg`` of ``attention_fwd_persistent_kernel``: its 64 query rows of each tile."""
    qk_scale = sm_scale * LOG2E
    if wg == GROUPS - 1:
        tlx.named_barrier_arrive(TURN_0, 256)   # group 0 takes the first turn, once
    ring = 0
    it = 0
    k_first, k_end, k_step = _walk(tl.program_id(0), num_tiles, NUM_SMS, ZIGZAG)
    for k_tile in range(k_first, k_end, k_step):
        tile = _tile_at(k_tile, tl.program_id(0), NUM_SMS, ZIGZAG)
        start_m, bh = _tile_coords(tile, num_m, ZH, CAUSAL, ZIGZAG)
        head_row = bh * N_CTX
        if CAUSAL:
            kv_end = tl.minimum((start_m + 1) * BM, N_CTX)
            n_plain = tl.minimum(start_m * BM, N_CTX) // BN
        else:
            kv_end = N_CTX
            n_plain = N_CTX // BN
        n_blocks = tl.cdiv(kv_end, BN)
        rows = start_m * BM + wg * HALF + tl.arange(0, HALF)
        m_i = tl.full([HALF], float("-inf"), tl.float32)
        l_i = tl.zeros([HALF], tl.float32)
        qslot = GROUPS * (it % Q_BUFS) + wg
        q_tile = q_tiles[qslot]
        tlx.barrier_wait(q_full[qslot], (it // Q_BUFS) & 1)

        acc, l_i = _attend(q_tile, k_tiles, v_tiles, k_full, k_empty, v_full, v_empty, q_empty, qslot, wg, ring,
                           rows, m_i, l_i, qk_scale, N_CTX, n_plain, n_blocks, HEAD_DIM, HALF, CAUSAL, EVEN_M,
                           BN, NUM_BUFS, dtype, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS, True, PIN_SOFTMAX, o_ptr, Q_REGS)
        ring += n_blocks
        it += 1

        out = (acc / l_i[:, None]).to(tlx.dtype_of(desc_o))
        if EVEN_M:
            # the previous tile's store has had a whole tile to drain out of this buffer
            tlx.async_descriptor_store_wait(0)
            tlx.local_store(o_tiles[wg], out)
            tlx.fence("async_shared")
            tlx.async_descriptor_store(desc_o, o_tiles[wg], [head_row + start_m * BM + wg * HALF, 0])
        else:
            cols = tl.arange(0, HEAD_DIM)
            ptrs = o_ptr + (head_row + rows)[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
            tl.store(ptrs, out, mask=(rows < N_CTX)[:, None])
    tlx.async_descriptor_store_wait(0)


@triton.jit
def attention_fwd_persistent_kernel(sm_scale, Z, H, N_CTX, desc_q, desc_k, desc_v, desc_o, o_ptr,
                                    HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                                    NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                                    NUM_SMS: tl.constexpr, Q_BUFS: tl.constexpr = 1,
                                    LOADER_REGS: tl.constexpr = 24, MMA_REGS: tl.constexpr = 240,
                         P_EARLY: tl.constexpr = False, WARP_BAR: tl.constexpr = False,
                         EX2_F16: tl.constexpr = False, LAZY: tl.constexpr = False,
                         P_LATE: tl.constexpr = False, GROUPS: tl.constexpr = 2,
                         ZIGZAG: tl.constexpr = False, WARP1_LOADER: tl.constexpr = False,
                         PIN_SOFTMAX: tl.constexpr = False, Q_REGS: tl.constexpr = False):
    """The same computation as ``attention_fwd_kernel``, but one CTA per SM walks query tiles
    ``pid, pid + NUM_SMS, ...``: the K/V ring, the turn order and the barriers run on across
    tiles, Q of the next tile is loaded while this one finishes (Q_BUFS sets of Q buffers, a set
    is handed back as soon as its last S = Q K^T retired), and the O store of a tile goes out
    through its own SMEM buffer without being waited for: the next tile's first wgmmas overlap it."""
    HALF: tl.constexpr = BM // GROUPS      # query rows per consumer group (64)
    dtype: tl.constexpr = tlx.dtype_of(desc_q)

    # Q set s of group h lives at GROUPS*s + h
    q_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS * Q_BUFS)
    k_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    v_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    o_tiles = tlx.local_alloc((HALF, HEAD_DIM), tlx.dtype_of(desc_o), GROUPS)
    q_full = tlx.alloc_barriers(num_barriers=GROUPS * Q_BUFS, arrive_count=1)
    q_empty = _release_barriers(GROUPS * Q_BUFS, 1, WARP_BAR)
    k_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    k_empty = _release_barriers(NUM_BUFS, GROUPS, WARP_BAR)
    v_empty = _release_barriers(NUM_BUFS, GROUPS, WARP_BAR)

    ZH = Z * H
    num_m = tl.cdiv(N_CTX, BM)
    num_tiles = num_m * ZH
    TILE_BYTES: tl.constexpr = BN * HEAD_DIM * tlx.size_of(dtype)
    Q_BYTES: tl.constexpr = HALF * HEAD_DIM * tlx.size_of(dtype)

    if WARP1_LOADER:
        # one loader warp (its warp group's other three warps stay idle instead of spinning on the
        # ring's barriers); the consumer groups are the default task and one 4-warp task
        tl.static_assert(GROUPS == 2, "WARP1_LOADER is for two consumer groups")
        with tlx.async_tasks():
            with tlx.async_task("default", num_regs=MMA_REGS):
                _persistent_consumer(0, q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full,
                                     k_empty, v_empty, desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX,
                                     num_tiles, num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS, CAUSAL, EVEN_M, NUM_SMS,
                                     Q_BUFS, HALF, TILE_BYTES, Q_BYTES, dtype, P_EARLY, EX2_F16, LAZY, P_LATE,
                                     GROUPS, ZIGZAG, PIN_SOFTMAX, Q_REGS)
            with tlx.async_task(num_warps=4, num_regs=MMA_REGS):
                _persistent_consumer(1, q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full,
                                     k_empty, v_empty, desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX,
                                     num_tiles, num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS, CAUSAL, EVEN_M, NUM_SMS,
                                     Q_BUFS, HALF, TILE_BYTES, Q_BYTES, dtype, P_EARLY, EX2_F16, LAZY, P_LATE,
                                     GROUPS, ZIGZAG, PIN_SOFTMAX, Q_REGS)
            with tlx.async_task(num_warps=1, num_regs=LOADER_REGS):
                _persistent_loader(q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full, k_empty,
                                   v_empty, desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX, num_tiles,
                                   num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS, CAUSAL, EVEN_M, NUM_SMS, Q_BUFS, HALF,
                                   TILE_BYTES, Q_BYTES, dtype, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS, ZIGZAG)
    else:
        with tlx.async_tasks():
            with tlx.async_task("default", num_regs=LOADER_REGS):
                _persistent_loader(q_tiles, k_tiles, v_tiles, o_tiles, q_full, q_empty, k_full, v_full, k_empty,
                                   v_empty, desc_q, desc_k, desc_v, desc_o, o_ptr, sm_scale, N_CTX, num_tiles,
                                   num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS, CAUSAL, EVEN_M, NUM_SMS, Q_BUFS, HALF,
                                   TILE_BYTES, Q_BYTES, dtype, P_EARLY, EX2_F16, LAZY, P_LATE, GROUPS, ZIGZAG)
            with tlx.async_task(num_warps=4, replicate=GROUPS, num_regs=MMA_REGS):
                _persistent_consumer(tlx.async_task_replica_id(), q_tiles, k_tiles, v_tiles, o_tiles, q_full,
                                     q_empty, k_full, v_full, k_empty, v_empty, desc_q, desc_k, desc_v, desc_o,
                                     o_ptr, sm_scale, N_CTX, num_tiles, num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS,
                                     CAUSAL, EVEN_M, NUM_SMS, Q_BUFS, HALF, TILE_BYTES, Q_BYTES, dtype, P_EARLY,
                                     EX2_F16, LAZY, P_LATE, GROUPS, ZIGZAG, PIN_SOFTMAX, Q_REGS)


def _config(BN, NUM_BUFS, BM=128, LOADER_REGS=24, MMA_REGS=240, PERSISTENT=False, Q_BUFS=1,
            P_EARLY=False, WARP_BAR=False, EX2_F16=False, LAZY=False, P_LATE=False, GROUPS=2, ZIGZAG=False,
            WARP1_LOADER=False, PIN_SOFTMAX=False, Q_REGS=False):
    """A config dict; a switch appears in it only when it is not at its default, so each config names
    what it changes. The switches:

    - PERSISTENT: attention_fwd_persistent_kernel (one CTA per SM), with Q_BUFS sets of Q buffers;
    - P_EARLY: P is converted to fp16/bf16 in the softmax, outside the GEMM turn;
    - WARP_BAR: the K/V/Q release barriers are warp barriers (no group-wide bar.sync per release);
    - EX2_F16 (fp16 only): exp2 on packed fp16 pairs;
    - LAZY: O is rescaled only when a row max grew by more than 2^8 (skipped for the whole group otherwise);
    - P_LATE: P is converted after the P V wgmma retired;
    - GROUPS: consumer groups of 64 query rows each take GEMM turns in a ring (BM = 64 * GROUPS);
    - WARP1_LOADER (persistent only): the loader is one warp, not a spinning warp group; level with the
      four-warp loader on the H200 (round 5);
    - PIN_SOFTMAX: the softmax is pinned above the P V wgmma's wait (a never-taken store that needs it), so
      it overlaps P V in the SASS too; spills 7 registers at D=128 unless P_LATE;
    - Q_REGS: Q is loaded into registers once per tile and is the register operand of S = Q K^T (the
      wgmmas then read only K from SMEM); spills at D=128 unless P_LATE;
    - ZIGZAG (persistent only): each CTA takes pairs of tiles (heaviest + lightest query block of one
      head), a causal schedule with equal work per pair (1.08-1.10x SDPA at D=128, round 4).
    """
    cfg = dict(BM=BM, BN=BN, NUM_BUFS=NUM_BUFS, LOADER_REGS=LOADER_REGS, MMA_REGS=MMA_REGS)
    if PERSISTENT:
        cfg.update(PERSISTENT=True, Q_BUFS=Q_BUFS)
    for name, value, default in (("P_EARLY", P_EARLY, False), ("WARP_BAR", WARP_BAR, False),
                                 ("EX2_F16", EX2_F16, False), ("LAZY", LAZY, False), ("P_LATE", P_LATE, False),
                                 ("GROUPS", GROUPS, 2), ("WARP1_LOADER", WARP1_LOADER, False),
                                 ("PIN_SOFTMAX", PIN_SOFTMAX, False), ("Q_REGS", Q_REGS, False),
                                 ("ZIGZAG", ZIGZAG, False)):
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


def smem_bytes(cfg, head_dim, elem=2) -> int:
    """SMEM a config asks for (Q, K/V ring, and the persistent form's O buffers), roughly."""
    q_sets = cfg.get("Q_BUFS", 1)
    o = cfg["BM"] * head_dim * elem if cfg.get("PERSISTENT") else 0
    return (q_sets * cfg["BM"] * head_dim + 2 * cfg["NUM_BUFS"] * cfg["BN"] * head_dim) * elem + o + 1024


# the default per (head dim <= 64, causal), each measured fastest there on the H200 (benchmarks/
# RESULTS.md, rounds 3-5); ``configs_for`` puts it first, then the rest of CONFIGS in order
# D=128, non-causal: persistent, two Q sets (round 3)
_PERSISTENT = _config(128, 2, PERSISTENT=True, Q_BUFS=2)
# D=64: three consumer groups take GEMM turns, so each group's softmax hides behind two other
# groups' GEMMs (1.04-1.11x SDPA vs 0.92-0.95x with two groups, round 4); 160 registers per
# consumer thread would spill at D=128
_THREE_GROUPS = _config(128, 2, BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2)
# causal: persistent with zig-zag pairs of query tiles (1.08-1.10x SDPA at D=128 vs 1.03-1.05x for
# the plain grid, round 4)
_ZIGZAG = _config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True)
# causal D=64: zig-zag pairs, two groups, the softmax pinned under P V (PIN_SOFTMAX + P_LATE):
# 1.00x SDPA vs 0.97x for the three-group zig-zag (round 5); at D=128 the same switches lost 2-7 %
_ZIGZAG_PINNED = _config(128, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True, PIN_SOFTMAX=True, P_LATE=True)

# the autotune space (``suits`` picks what fits a head dim and masking)
CONFIGS = (
    _PERSISTENT,
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

DEFAULTS = {(False, False): _PERSISTENT, (False, True): _ZIGZAG,
            (True, False): _THREE_GROUPS, (True, True): _ZIGZAG_PINNED}


def suits(cfg, head_dim, causal=False) -> bool:
    """Whether ``cfg`` is meant for this head dim (BM=256 spills registers at D=128; every
    config must fit the 227 KiB of SMEM a CTA may have) and masking: the persistent form walks
    its tiles in a fixed stride, heavy blocks of every head first, which lost to the plain grid
    in causal runs (0.91x SDPA vs 1.04x, round 3: L2 reuse), so causal runs take the persistent
    form only with the zig-zag pair schedule (1.08-1.10x, round 4), and only they take that."""
    if causal and cfg.get("PERSISTENT") and not cfg.get("ZIGZAG"):
        return False
    if cfg.get("ZIGZAG") and not causal:
        return False        # measured for causal runs only
    return (cfg["BM"] <= 128 or head_dim <= 64) and smem_bytes(cfg, head_dim) <= 232448


def configs_for(head_dim, causal=False):
    """The autotune space for one head dim and masking, the default first (``DEFAULTS``: three
    groups for D <= 64, zig-zag persistent for causal runs, the pinned softmax for causal D <= 64),
    then every other config that ``suits`` it in CONFIGS order."""
    first = DEFAULTS[(head_dim <= 64, bool(causal))]
    return (first,) + tuple(c for c in CONFIGS if c != first and suits(c, head_dim, causal))


SIM_CONFIGS = {
    "tiny": _config(64, 2),
    "blocks_of_32": _config(32, 2),
    # persistent, 2 CTAs for 8+ tiles: ring, turns and Q sets carry across tiles
    "persistent": _config(64, 2, PERSISTENT=True, Q_BUFS=2),
    "persistent_q1": _config(32, 3, PERSISTENT=True, Q_BUFS=1),
    # P converted outside the GEMM turn, warp-barrier releases (each thread arrives)
    "persistent_pe_wb": _config(64, 2, PERSISTENT=True, Q_BUFS=2, P_EARLY=True, WARP_BAR=True),
    "plain_pe_wb": _config(64, 2, P_EARLY=True, WARP_BAR=True),
    "persistent_ex2h": _config(64, 2, PERSISTENT=True, Q_BUFS=2, WARP_BAR=True, EX2_F16=True),
    "persistent_lazy": _config(64, 2, PERSISTENT=True, Q_BUFS=2, LAZY=True),
    "blocks_of_32_lazy": _config(32, 2, LAZY=True),
    "persistent_plate": _config(64, 2, PERSISTENT=True, Q_BUFS=2, P_LATE=True),
    # three consumer groups in a turn ring (BM=192: ragged query tiles at N=200)
    "three_groups": _config(64, 2, BM=192, GROUPS=3, MMA_REGS=160),
    "three_groups_persistent": _config(32, 3, BM=192, GROUPS=3, MMA_REGS=160, PERSISTENT=True, Q_BUFS=2),
    # persistent, zig-zag pairs of query tiles (a causal schedule)
    "persistent_zigzag": _config(64, 2, PERSISTENT=True, Q_BUFS=2, ZIGZAG=True),
    "persistent_warp1_loader": _config(64, 2, PERSISTENT=True, Q_BUFS=2, WARP1_LOADER=True),
    "plain_plate": _config(32, 3, P_LATE=True),
    # the softmax pinned above the P V wait by a never-taken store (with and without P_LATE)
    "persistent_pin_plate": _config(64, 2, PERSISTENT=True, Q_BUFS=2, PIN_SOFTMAX=True, P_LATE=True),
    "plain_pin": _config(32, 2, PIN_SOFTMAX=True),
    # Q in registers as the S = Q K^T operand (with P_LATE), persistent and plain
    "persistent_qregs": _config(64, 2, PERSISTENT=True, Q_BUFS=2, Q_REGS=True, P_LATE=True),
    "plain_qregs": _config(32, 3, Q_REGS=True, P_LATE=True),
}


def _descriptors(q, k, v, o, cfg):
    Z, H, N, D = q.shape
    rows = Z * H * N
    half = cfg["BM"] // cfg.get("GROUPS", 2)
    return (TensorDescriptor(q, [rows, D], [D, 1], [half, D]),
            TensorDescriptor(k, [rows, D], [D, 1], [cfg["BN"], D]),
            TensorDescriptor(v, [rows, D], [D, 1], [cfg["BN"], D]),
            TensorDescriptor(o, [rows, D], [D, 1], [half, D]))


def _check(q, k, v):
    import torch
    if not (q.shape == k.shape == v.shape) or q.ndim != 4:
        raise TLXWorkbenchError(f"attention needs q, k, v of one shape (Z, H, N, D); got "
                                f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}", file=__file__,
                                hint="self-attention only: give q, k and v the same shape")
    if q.shape[-1] not in (64, 128):
        raise TLXWorkbenchError(f"head dim {q.shape[-1]} is not supported", file=__file__,
                                hint="use D = 64 or 128")
    if q.dtype not in (torch.float16, torch.bfloat16) or not (q.dtype == k.dtype == v.dtype):
        raise TLXWorkbenchError(f"attention needs fp16 or bf16 q, k, v of one dtype; got {q.dtype}",
                                file=__file__, hint="cast with .half() or .bfloat16()")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise TLXWorkbenchError("attention needs contiguous q, k, v", file=__file__,
                                hint="call .contiguous() first (e.g. after a transpose)")


def _kernel_call(q, k, v, o, causal, sm_scale, cfg, num_sms):
    """The kernel a config runs, its positional arguments and its constexprs + launch options
    (the persistent form also takes NUM_SMS; num_stages=0: the loops are pipelined by hand)."""
    Z, H, N, D = q.shape
    dq, dk, dv, do = _descriptors(q, k, v, o, cfg)
    kw = {key: val for key, val in cfg.items() if key != "PERSISTENT"}
    kernel = attention_fwd_kernel
    if cfg.get("PERSISTENT"):
        kernel, kw = attention_fwd_persistent_kernel, dict(kw, NUM_SMS=num_sms)
    return kernel, (sm_scale, Z, H, N, dq, dk, dv, do, o), dict(
        HEAD_DIM=D, CAUSAL=causal, EVEN_M=(N % cfg["BM"] == 0), num_warps=4, num_stages=0, **kw)


def launch(q, k, v, o, causal, sm_scale, cfg, num_sms=None):
    """Run once with one explicit config; writes and returns ``o``. ``num_sms``: how many
    persistent CTAs a PERSISTENT config starts (default: one per SM)."""
    Z, H, N, D = q.shape
    triton.set_allocator(torch_alloc)
    tiles_m = triton.cdiv(N, cfg["BM"])
    if cfg.get("PERSISTENT"):
        num_sms = num_sms or sm_count()
        grid = (min(num_sms, tiles_m * Z * H),)
    else:
        grid = (tiles_m, Z * H)
    kernel, args, options = _kernel_call(q, k, v, o, causal, sm_scale, cfg, num_sms)
    kernel[grid](*args, **options)
    return o


_TUNED: dict = {}


def attention(q, k, v, causal=False, sm_scale=None, config=None):
    """softmax(q k^T * sm_scale [+ causal mask]) v for q, k, v of shape (Z, H, N, D).

    >>> o = attention(q, k, v, causal=True)        # fp16/bf16 on a Hopper GPU, D in {64, 128}
    """
    import torch
    _check(q, k, v)
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
    o = torch.empty_like(q)
    if config is None:
        config = tuned_config(_TUNED, (tuple(q.shape), q.dtype, bool(causal)),
                              lambda: tune(q, k, v, causal, sm_scale, configs_for(q.shape[-1], causal)))
    return launch(q, k, v, o, causal, sm_scale, config)


def tune(q, k, v, causal, sm_scale, configs=CONFIGS):
    """Time every config; returns [(config, ms), ...] fastest first."""
    import torch
    o = torch.empty_like(q)
    return fastest_first(configs, lambda c: launch(q, k, v, o, causal, sm_scale, c))


def reference(q, k, v, causal=False, sm_scale=None):
    """The same function in float64 on the CPU, cast back to q's dtype."""
    import torch
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    qd, kd, vd = (t.detach().double().cpu() for t in (q, k, v))
    s = (qd @ kd.transpose(-1, -2)) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ vd).to(q.dtype).to(q.device)


def make_inputs(shape, dtype, device):
    """Fresh random (q, k, v) of ``shape`` = (Z, H, N, D)."""
    import torch
    return tuple(torch.randn(shape, dtype=dtype, device=device) for _ in range(3))


def flops(Z, H, N, D, causal=False):
    """Forward FLOPs (two GEMMs); half of it when causal."""
    f = 4.0 * Z * H * N * N * D
    return f / 2 if causal else f


def compile_offline(cfg, target="sm_90", dtype="float16", shape=(1, 2, 256, 128), causal=False):
    """Compile (no launch) for ``target`` on any machine; returns Triton's CompiledKernel.

    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0
    True
    """
    import torch
    from ..target import offline
    dt = getattr(torch, dtype)
    with offline(target):
        q, k, v, o = (torch.empty(shape, dtype=dt) for _ in range(4))
        kernel, args, options = _kernel_call(q, k, v, o, causal, 0.1, cfg, 132)
        return kernel.warmup(*args, grid=(1,), **options)


def compile_report(cfg, target="sm_90", dtype="float16", shape=(1, 2, 256, 128), causal=False):
    """The workbench's CompileReport of one config, compiled offline on any machine: SMEM map,
    registers per task, IR/PTX/SASS by source line, barrier table, ptxas advisories.

    >>> r = compile_report(_config(128, 2, PERSISTENT=True, Q_BUFS=2, P_EARLY=True))  # doctest: +SKIP
    >>> [a.code for a in r.ptxas_advisories]                                          # doctest: +SKIP
    ['C7513']
    """
    import torch
    from ..compiler import compile as wb_compile
    dt = getattr(torch, dtype)
    q, k, v, o = (torch.empty(shape, dtype=dt) for _ in range(4))
    kernel, args, options = _kernel_call(q, k, v, o, causal, 1 / math.sqrt(shape[-1]), cfg, 132)
    return wb_compile(kernel, *args, target=target, **options)


SPEC = KernelSpec(name="attention", kernel=attention_fwd_kernel, launch=attention, reference=reference,
                  configs=CONFIGS, sim_configs=SIM_CONFIGS, make_inputs=make_inputs, flops=flops, doc=__doc__)
