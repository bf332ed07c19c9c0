"""The device code of the attention backward pass (``attention_bwd.py`` has the story and the host side,
``attention_bwd_configs.py`` the configs).

Two kernels: ``attention_bwd_delta_kernel`` (delta = rowsum(dO * O) and lse in base 2, one program per
64 rows, no TLX) and ``attention_bwd_kernel`` (dK, dV of one K/V block per CTA, dQ added into fp32 with
atomics, already scaled by sm_scale). Everything a task of the main kernel runs is in this one
file, so the compile report maps each line (a helper from another file would show as its call line).

Notation, in a consumer group g (64 K/V rows, ``k_g``/``v_g``) at query block i (BM rows): every
product is computed transposed, K/V rows down the M side of the wgmma, so the accumulators the group
keeps across the whole loop (dK_g, dV_g: 64 x D each) and the per-step ones (S^T, dP^T: 64 x BM) are
all "64 rows of this group":

    S^T  = K_g Q_i^T            P^T = exp2(S^T * scale*log2e - lse2_i)       (masked)
    dV_g += P^T dO_i            dP^T = V_g dO_i^T
    dS^T = P^T * (dP^T - delta_i)
    dK_g += dS^T Q_i            dQ_i += (dS^T)^T K_g       (dS^T through SMEM; atomics)

With ``DQ_TMA`` (and ``DQ_SPLIT``) each (BM, 64) dQ tile goes to SMEM instead and one TMA reduce-add per tile
adds it into dQ (FlashAttention-3's way): the adds leave the consumers' instruction stream.

dQ is computed 64 columns of D at a time, from a second copy of K in 64-column tiles (D=128 only): a
64 x D fp32 dQ tile needs 32 KB of the compiler's layout-change scratch per group before its atomics,
and with K, V, the ring and dS that does not fit a CTA's SMEM at D=128 (the compile is refused); the
64-column tile also keeps dQ's accumulator at 32 registers next to dK and dV (64 each). With DQ_TMA the
second copy of K goes (its SMEM holds the fp32 dQ tiles) and dQ's B operand is a 64-column view of K.
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

LOG2E = tl.constexpr(1.4426950408889634)
DS_READY = tl.constexpr(14)     # DQ_SPLIT: named barrier of both consumer groups, every step
DS_HANDOFF = tl.constexpr(10)   # DQ_HANDOFF: 10 + 2 g + it % 2, "group g's dS^T of step it is in SMEM" (10..13)
STAGGER_BAR = tl.constexpr(9)   # DQ_STAGGER: group 1 starts once group 0's first P^T is done


@triton.jit
def attention_bwd_delta_kernel(o_ptr, do_ptr, lse_ptr, delta_ptr, lse2_ptr, dq_ptr, ROWS, N_CTX, N_PAD,
                               HEAD_DIM: tl.constexpr, BLOCK: tl.constexpr):
    """The row statistics the main kernel streams, for the ROWS = Z*H*N rows of the (rows, D) views:
    delta = sum_d dO * O (fp32) and lse in base 2 (lse * log2 e), both written to (Z*H, N_PAD)
    arrays whose rows start 16-byte aligned, as the main kernel's TMA tiles of them need; and the same
    rows of the fp32 dQ accumulator zeroed, so the call needs no fill of its own before the main kernel adds."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, HEAD_DIM)
    offs = rows[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
    keep = (rows < ROWS)[:, None]
    o = tl.load(o_ptr + offs, mask=keep, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offs, mask=keep, other=0.0).to(tl.float32)
    padded = (rows // N_CTX) * N_PAD + rows % N_CTX
    tl.store(delta_ptr + padded, tl.sum(o * do, 1), mask=rows < ROWS)
    lse = tl.load(lse_ptr + rows, mask=rows < ROWS, other=0.0)
    tl.store(lse2_ptr + padded, lse * LOG2E, mask=rows < ROWS)
    tl.store(dq_ptr + offs, tl.zeros([BLOCK, HEAD_DIM], tl.float32), mask=keep)


@triton.jit
def _kc(kc_tiles, h, c, KC: tl.constexpr, SLICED: tl.constexpr):
    """Columns 64c..64c+64 of group h's K tile, dQ's B operand: a tile of the second copy of K, or with
    SLICED (DQ_TMA: its fp32 dQ tiles take that copy's SMEM) a 64-column view of K itself (``kc_tiles`` is
    then ``k_tiles``; the NVMMA layout keeps each 128-byte column block a tile of its own). c may be the
    replica id, a runtime value: a slice's offsets must be constants, hence the branch (KC = 2)."""
    if SLICED:
        tl.static_assert(KC == 2, "DQ_TMA at D=128: two 64-column views of K")
        if c == 0:
            t = tlx.local_slice(kc_tiles[h], [0, 0], [64, 64])
        else:
            t = tlx.local_slice(kc_tiles[h], [0, 64], [64, 64])
    else:
        t = kc_tiles[h * KC + c]
    return t


@triton.jit
def _dq_reduce(dq, dq_tiles, desc_dq, g, n, row, col, DQ_TMA: tl.constexpr):
    """DQ_TMA: add this group's n-th (BM, 64) fp32 dQ tile into dQ at (row, col) with one TMA reduce-add
    (cp.reduce.async.bulk.tensor) from SMEM: the group's DQ_TMA tiles in turn, each free again once the
    reduce issued DQ_TMA - 1 tiles later has read it (``async_descriptor_store_wait`` counts bulk groups).
    Rows past this head's N hold exact zeros (P is masked there, so dS is 0): adding them into the next
    head's first rows changes nothing, and past the last head the TMA unit drops them."""
    buf = dq_tiles[g * DQ_TMA + n % DQ_TMA]
    tlx.async_descriptor_store_wait(DQ_TMA - 1)
    tlx.local_store(buf, dq)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(desc_dq, buf, [row, col], store_reduce="add")


@triton.jit
def _store_dkv(dk, dv, dk_ptr, dv_ptr, head_row, kv_rows, sm_scale, N_CTX, HEAD_DIM: tl.constexpr):
    """A group's dK (times sm_scale), dV rows, cast to the inputs' dtype; rows past N left out."""
    cols = tl.arange(0, HEAD_DIM)
    offs = (head_row + kv_rows)[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
    keep = (kv_rows < N_CTX)[:, None]
    tl.store(dk_ptr + offs, (dk * sm_scale).to(dk_ptr.dtype.element_ty), mask=keep)
    tl.store(dv_ptr + offs, dv.to(dv_ptr.dtype.element_ty), mask=keep)


@triton.jit
def attention_bwd_tail_cast_kernel(dkv_tail_ptr, dk_ptr, dv_ptr, N_CTX, main_ctas, left, row0,
                                   HEAD_DIM: tl.constexpr, BN: tl.constexpr, ROWS: tl.constexpr):
    """SPLIT_TAIL's last launch: the leftover K/V blocks' dK, dV, summed in fp32 by their parts, cast into
    ``dk_ptr``, ``dv_ptr`` (views of dK, dV from row ``row0`` of (Z*H*N, D) on: the leftover blocks are the
    last ones). Program (t, r): ROWS rows of leftover block t; rows past N (a ragged block) left out."""
    t = tl.program_id(0)
    blk = main_ctas + t
    n_kv = tl.cdiv(N_CTX, BN)
    local = tl.program_id(1) * ROWS + tl.arange(0, ROWS)          # rows of the block
    kv = (blk % n_kv) * BN + local
    out_rows = (blk // n_kv) * N_CTX + kv - row0
    cols = tl.arange(0, HEAD_DIM)
    src = (t * BN + local)[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
    dst = out_rows[:, None].to(tl.int64) * HEAD_DIM + cols[None, :]
    keep = (kv < N_CTX)[:, None]
    dk = tl.load(dkv_tail_ptr + src, mask=keep, other=0.0)
    dv = tl.load(dkv_tail_ptr + left * BN * HEAD_DIM + src, mask=keep, other=0.0)
    tl.store(dk_ptr + dst, dk.to(dk_ptr.dtype.element_ty), mask=keep)
    tl.store(dv_ptr + dst, dv.to(dv_ptr.dtype.element_ty), mask=keep)


@triton.jit
def _tail_reduce(x, dq_tiles, desc_part, g, n, row, DQ_TMA: tl.constexpr, HEAD_DIM: tl.constexpr):
    """SPLIT_TAIL (with DQ_TMA): add a group's 64 x D fp32 dK or dV share into the partials at ``row`` by TMA
    reduce-add, 64 columns at a time through the group's dQ tiles, the n-th tile of the epilogue first (the
    loop's reduces were all waited; consecutive reduces take the tiles in turn, as in the loop)."""
    if HEAD_DIM == 64:
        _dq_reduce(x, dq_tiles, desc_part, g, n, row, 0, DQ_TMA)
    else:
        tl.static_assert(HEAD_DIM == 128, "SPLIT_TAIL with DQ_TMA: D = 64 or 128")
        lo, hi = tl.split(tl.permute(tl.reshape(x, [64, 2, 64]), (0, 2, 1)))
        _dq_reduce(lo, dq_tiles, desc_part, g, n, row, 0, DQ_TMA)
        _dq_reduce(hi, dq_tiles, desc_part, g, n + 1, row, 64, DQ_TMA)


@triton.jit
def _bwd_step(i, it, g, k_g, v_g, ds_tiles, kc_tiles, q_tiles, do_tiles, lse_tiles, delta_tiles, q_full, q_empty,
              do_full, do_empty, dk, dv, dq_ptr, head_row, kv_rows, qk_scale, sm_scale, N_CTX,
              MASK: tl.constexpr, CAUSAL: tl.constexpr, BM: tl.constexpr, HEAD_DIM: tl.constexpr,
              NUM_BUFS: tl.constexpr, DTYPE: tl.constexpr, KC: tl.constexpr, GROUPS: tl.constexpr,
              DQ_SPLIT: tl.constexpr, dq_tiles=None, desc_dq=None, DQ_TMA: tl.constexpr = 0,
              LEAN: tl.constexpr = (False, False), HANDOFF: tl.constexpr = False,
              STAGGER: tl.constexpr = False):
    """Query block i (the it-th through the Q/dO ring) for consumer group g: the five products of
    the module docstring. Returns the new (dk, dv).

    ``LEAN`` = (DP_DELTA, P_ROUND), registers the exp/dS stretch holds (where dK, dV, S^T, dP^T and
    the row statistics are all live; the default form spills there at D=128). ``DP_DELTA``: dP^T's
    accumulator starts at -delta (the wgmma adds V dO^T to it), so delta's registers die before the exps
    and dS^T = P^T * dP^T. ``P_ROUND``: dS^T is computed from P^T rounded to the input dtype (dV's operand,
    16 registers instead of P^T's fp32 32 next to it; dS^T is rounded to it anyway) and dV's wgmma is issued
    before dP^T is waited. ``HANDOFF`` (DQ_SPLIT, two groups): the groups hand
    each other their dS^T by bar.arrive / bar.sync pairs instead of one bar.sync of both, and each
    group's dQ starts with its own dS^T's share, before it waits for the other's. ``STAGGER`` (with HANDOFF):
    group 0 tells group 1 to start once its first P^T is computed (the kernel holds group 1 back until then)."""
    DP_DELTA: tl.constexpr = LEAN[0]
    P_ROUND: tl.constexpr = LEAN[1]
    if DQ_SPLIT:
        ds_g = ds_tiles[(it % 2) * GROUPS + g]      # two sets: the other group may still read the last one
    else:
        ds_g = ds_tiles[g]
    slot = it % NUM_BUFS
    parity = (it // NUM_BUFS) & 1
    q_rows = i * BM + tl.arange(0, BM)
    q_tile = q_tiles[slot]
    do_tile = do_tiles[slot]
    tlx.barrier_wait(q_full[slot], parity)
    s_t = tlx.async_dot(k_g, tlx.local_trans(q_tile))
    tlx.barrier_wait(do_full[slot], parity)
    if DP_DELTA:
        # delta rides with dO_i: the accumulator starts at -delta, dP^T - delta comes out of the wgmma
        dp_t = tlx.async_dot(v_g, tlx.local_trans(do_tile),
                             tl.zeros([64, BM], tl.float32) - tlx.local_load(delta_tiles[slot]))
    else:
        dp_t = tlx.async_dot(v_g, tlx.local_trans(do_tile))
    s_t = tlx.async_dot_wait(1, s_t)
    # the row statistics came with Q_i and dO_i (TMA into SMEM): loaded from global memory here,
    # their pointers in the accumulator's column layout made ptxas spill at D=128
    lse2 = tlx.local_load(lse_tiles[slot])
    p_t = tl.math.exp2(s_t * qk_scale - lse2)
    if MASK:
        keep = (q_rows[None, :] < N_CTX) & (kv_rows[:, None] < N_CTX)
        if CAUSAL:
            keep = keep & (q_rows[None, :] >= kv_rows[:, None])
        p_t = tl.where(keep, p_t, 0.0)
    if STAGGER:
        if g == 0:
            if it == 0:
                tlx.named_barrier_arrive(STAGGER_BAR, 256)    # group 1's first S^T, dP^T go under these exps' tail
    if P_ROUND:
        p_lo = p_t.to(DTYPE)
        dv = tlx.async_dot(p_lo, do_tile, dv)       # queued behind dP^T, which is waited with dV left in flight
        p_t = p_lo.to(tl.float32)
        dp_t = tlx.async_dot_wait(1, dp_t)
    else:
        dp_t = tlx.async_dot_wait(0, dp_t)
    if DP_DELTA:
        if not P_ROUND:
            dv = tlx.async_dot(p_t.to(DTYPE), do_tile, dv)
        ds_t = (p_t * dp_t).to(DTYPE)
    else:
        delta = tlx.local_load(delta_tiles[slot])
        if not P_ROUND:
            dv = tlx.async_dot(p_t.to(DTYPE), do_tile, dv)
        ds_t = (p_t * (dp_t - delta)).to(DTYPE)
    # dS^T goes to SMEM once and feeds both products from there: dK as is, dQ read transposed (query
    # rows down M). Keeping it out of registers is what lets dK, dV and this step's dQ (3 x 64 x D
    # fp32) fit at D=128. The buffer is this group's alone; the previous step's reads retired (wait 0)
    tlx.local_store(ds_g, ds_t)
    tlx.fence("async_shared")
    if HANDOFF:
        # no bar.sync of both groups: this group's dS^T is announced now (bar.arrive), the other's awaited only
        # before the half of dQ that reads it (ids by step parity: a group's next arrival on one is two steps on,
        # after it waited for the other's, so a phase never takes two arrivals of one group)
        tl.static_assert(GROUPS == 2, "DQ_HANDOFF: two consumer groups")
        tlx.named_barrier_arrive(DS_HANDOFF + 2 * g + it % 2, 256)
    dk = tlx.async_dot(ds_g, q_tile, dk)
    dv = tlx.async_dot_wait(1, dv)           # P^T's registers free before dQ's accumulator is live
    cols = tl.arange(0, 64)
    if DQ_SPLIT:
        # dQ_i[:, 64g : 64g+64] = sum_h dS_h K_h[:, 64g : 64g+64]: this group's 64 columns from every
        # group's dS (the bar.sync: all of this step's dS^T are in SMEM), one atomic add per element
        if HANDOFF:
            # this group's own share first (its dS^T needs no barrier), queued while the other's is awaited
            dq = tlx.async_dot(tlx.local_trans(ds_g), _kc(kc_tiles, g, g, KC, DQ_TMA))
            tlx.named_barrier_wait(DS_HANDOFF + 2 * (1 - g) + it % 2, 256)
            dq = tlx.async_dot(tlx.local_trans(ds_tiles[(it % 2) * GROUPS + 1 - g]), _kc(kc_tiles, 1 - g, g, KC, DQ_TMA),
                               dq)
        else:
            tlx.named_barrier_wait(DS_READY, 128 * GROUPS)
            dq = tlx.async_dot(tlx.local_trans(ds_tiles[(it % 2) * GROUPS]), _kc(kc_tiles, 0, g, KC, DQ_TMA))
            for h in tl.static_range(1, GROUPS):
                dq = tlx.async_dot(tlx.local_trans(ds_tiles[(it % 2) * GROUPS + h]), _kc(kc_tiles, h, g, KC, DQ_TMA),
                                   dq)
        dq = tlx.async_dot_wait(0, dq)
        tlx.barrier_arrive(q_empty[slot])
        tlx.barrier_arrive(do_empty[slot])
        if DQ_TMA:
            _dq_reduce(dq * sm_scale, dq_tiles, desc_dq, g, it, head_row + i * BM, g * 64, DQ_TMA)
        else:
            ptrs = dq_ptr + (head_row + q_rows)[:, None].to(tl.int64) * HEAD_DIM + (g * 64 + cols)[None, :]
            tl.atomic_add(ptrs, dq * sm_scale, mask=(q_rows < N_CTX)[:, None], sem="relaxed")
    else:
        # dQ_i += dS_g K_g, 64 columns of D at a time (K_g's column tiles kc): a 64 x BM fp32 accumulator
        # instead of 64 x D keeps dK, dV and dQ within the register budget at D=128
        for c in tl.static_range(KC):
            if KC == 1:
                kc = k_g
            else:
                kc = _kc(kc_tiles, g, c, KC, DQ_TMA)
            dq = tlx.async_dot(tlx.local_trans(ds_g), kc)
            dq = tlx.async_dot_wait(0, dq)
            if c == KC - 1:
                # every wgmma that read Q_i and dO_i has retired: hand the slots back
                tlx.barrier_arrive(q_empty[slot])
                tlx.barrier_arrive(do_empty[slot])
            ptrs = dq_ptr + (head_row + q_rows)[:, None].to(tl.int64) * HEAD_DIM + (c * 64 + cols)[None, :]
            tl.atomic_add(ptrs, dq * sm_scale, mask=(q_rows < N_CTX)[:, None], sem="relaxed")
    dk = tlx.async_dot_wait(0, dk)
    return dk, dv


@triton.jit
def attention_bwd_kernel(sm_scale, Z, H, N_CTX, desc_q, desc_k, desc_v, desc_do, desc_kc, desc_lse, desc_delta,
                         dq_ptr, dk_ptr, dv_ptr, desc_dq,
                         HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr,
                         LOADER_REGS: tl.constexpr = 24, MMA_REGS: tl.constexpr = 240,
                         DQ_SPLIT: tl.constexpr = False, DQ_TMA: tl.constexpr = 0,
                         DP_DELTA: tl.constexpr = False, P_ROUND: tl.constexpr = False,
                         DQ_HANDOFF: tl.constexpr = False, DQ_STAGGER: tl.constexpr = False,
                         SPLIT_TAIL: tl.constexpr = False, dkv_tail_ptr=None, main_ctas=0, tail_splits=1,
                         tail_blocks=1):
    """dK, dV of one block of BN K/V rows of one (batch, head) per CTA, dQ added into fp32 ``dq_ptr``.

    A loader task brings K and V of the block once (a 64-row tile per consumer group), then Q_i and
    dO_i of each query block through a NUM_BUFS-deep ring (``*_full``: landed bytes; ``*_empty``:
    every group's wgmmas that read the slot retired). Causal: the loop starts at the first query
    block that sees this K/V block; the blocks across the diagonal and the ragged tail are masked.
    DQ_TMA = n > 0 (with DQ_SPLIT): dQ goes out by TMA reduce-add through n (BM, 64) fp32 SMEM tiles per group, on
    ``desc_dq`` (a (BM, 64) descriptor of the (Z*H*N, D) fp32 dQ); 0: atomics, ``desc_dq`` is None.
    DP_DELTA, P_ROUND: fewer registers live across the exps (``_bwd_step``'s ``LEAN``); DQ_HANDOFF (with
    DQ_SPLIT): dS^T handed between the groups by arrive / wait pairs (``_bwd_step``'s ``HANDOFF``); DQ_STAGGER (with
    DQ_HANDOFF): group 1 starts when group 0's first P^T is done and stays that far behind.

    ``SPLIT_TAIL`` (non-causal): this launch is the parts of the leftover K/V blocks (block ``main_ctas`` on, the
    last heads' blocks: the plain form of this kernel runs the blocks before them, its code untouched), a 1-D grid
    of leftover x ``tail_splits`` CTAs of ``tail_blocks`` query blocks each, which add their partial dK (scaled),
    dV into the fp32 partials ((2, leftover x BN, D): dK's rows, then dV's) by TMA reduce-add through the DQ_TMA
    tiles (``dkv_tail_ptr``: a (64, 64) descriptor of them); ``attention_bwd_tail_cast_kernel`` writes them out."""
    GROUPS: tl.constexpr = BN // 64
    HALF: tl.constexpr = 64
    dtype: tl.constexpr = tlx.dtype_of(desc_q)

    k_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS)
    v_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS)
    q_tiles = tlx.local_alloc((BM, HEAD_DIM), dtype, NUM_BUFS)
    do_tiles = tlx.local_alloc((BM, HEAD_DIM), dtype, NUM_BUFS)
    # (1, BM) tiles of the (Z*H, N_PAD) base-2 lse and delta (a 1-D TMA tile does not lower)
    lse_tiles = tlx.local_alloc((1, BM), tl.float32, NUM_BUFS)     # ride with Q_i
    delta_tiles = tlx.local_alloc((1, BM), tl.float32, NUM_BUFS)   # ride with dO_i
    tl.static_assert(DQ_SPLIT or not DQ_TMA, "DQ_TMA needs DQ_SPLIT")
    if DQ_SPLIT:
        tl.static_assert(HEAD_DIM // 64 == GROUPS, "DQ_SPLIT: one 64-column slice of dQ per consumer group")
        ds_tiles = tlx.local_alloc((HALF, BM), dtype, 2 * GROUPS)
    else:
        ds_tiles = tlx.local_alloc((HALF, BM), dtype, GROUPS)
    KC: tl.constexpr = HEAD_DIM // 64       # 64-column tiles of K (dQ's B operand; K itself when D=64)
    if KC > 1 and not DQ_TMA:
        kc_tiles = tlx.local_alloc((HALF, 64), dtype, GROUPS * KC)
    else:
        kc_tiles = k_tiles      # DQ_TMA: 64-column views of K (_kc), the SMEM goes to the dQ tiles
    if DQ_TMA:
        dq_tiles = tlx.local_alloc((BM, 64), tl.float32, GROUPS * DQ_TMA)
    else:
        dq_tiles = None
    kv_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    q_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    do_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)
    do_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)

    n_q = tl.cdiv(N_CTX, BM)
    if SPLIT_TAIL:
        tl.static_assert(not CAUSAL, "SPLIT_TAIL: non-causal only (a causal K/V block's work is not the same")
        # a part of a leftover K/V block: CTA p is part p % tail_splits of block main_ctas + p // tail_splits
        piece = tl.program_id(0)
        n_kv = tl.cdiv(N_CTX, BN)
        left_rows = (n_kv * Z * H - main_ctas) * BN       # rows of the leftover blocks (the partials' dK, then dV)
        blk = main_ctas + piece // tail_splits
        kv0 = (blk % n_kv) * BN
        bh = blk // n_kv
        is_part: tl.constexpr = True
        q_lo = (piece % tail_splits) * tail_blocks
        q_hi = tl.minimum(q_lo + tail_blocks, n_q)
    else:
        kv0 = tl.program_id(0) * BN          # first K/V row of this CTA (block 0, the heaviest causal one, first)
        bh = tl.program_id(1)
        is_part: tl.constexpr = False
        q_lo = 0
        q_hi = n_q
    head_row = bh * N_CTX
    if CAUSAL:
        i_start = kv0 // BM                              # earlier query blocks see none of these keys
        i_mid = tl.minimum(tl.cdiv(kv0 + BN, BM), n_q)   # blocks across the diagonal: masked
    else:
        i_start = q_lo
        i_mid = q_lo
    n_full = N_CTX // BM                                  # blocks inside N
    if SPLIT_TAIL:
        n_full = tl.minimum(n_full, q_hi)
    # a K/V block past N reads the next head's rows (the TMA views are (Z*H*N, D)): mask every step
    i_mid = tl.where(kv0 + BN > N_CTX, q_hi, i_mid)
    TILE_BYTES: tl.constexpr = HALF * HEAD_DIM * tlx.size_of(dtype)
    Q_BYTES: tl.constexpr = BM * HEAD_DIM * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            if KC > 1 and not DQ_TMA:
                tlx.barrier_expect_bytes(kv_full[0], 3 * GROUPS * TILE_BYTES)
            else:
                tlx.barrier_expect_bytes(kv_full[0], 2 * GROUPS * TILE_BYTES)
            for g in tl.static_range(GROUPS):
                tlx.async_descriptor_load(desc_k, k_tiles[g], [head_row + kv0 + g * HALF, 0], kv_full[0])
                tlx.async_descriptor_load(desc_v, v_tiles[g], [head_row + kv0 + g * HALF, 0], kv_full[0])
                if KC > 1 and not DQ_TMA:
                    for c in tl.static_range(KC):
                        tlx.async_descriptor_load(desc_kc, kc_tiles[g * KC + c], [head_row + kv0 + g * HALF, c * 64],
                                                  kv_full[0])
            for i in range(i_start, q_hi):
                it = i - i_start
                slot = it % NUM_BUFS
                parity = (it // NUM_BUFS) & 1
                tlx.barrier_wait(q_empty[slot], parity ^ 1)
                tlx.barrier_expect_bytes(q_full[slot], Q_BYTES + BM * 4)
                tlx.async_descriptor_load(desc_q, q_tiles[slot], [head_row + i * BM, 0], q_full[slot])
                tlx.async_descriptor_load(desc_lse, lse_tiles[slot], [bh, i * BM], q_full[slot])
                tlx.barrier_wait(do_empty[slot], parity ^ 1)
                tlx.barrier_expect_bytes(do_full[slot], Q_BYTES + BM * 4)
                tlx.async_descriptor_load(desc_do, do_tiles[slot], [head_row + i * BM, 0], do_full[slot])
                tlx.async_descriptor_load(desc_delta, delta_tiles[slot], [bh, i * BM], do_full[slot])

        with tlx.async_task(num_warps=4, replicate=GROUPS, num_regs=MMA_REGS):
            g = tlx.async_task_replica_id()
            qk_scale = sm_scale * LOG2E
            kv_rows = kv0 + g * HALF + tl.arange(0, HALF)
            k_g = k_tiles[g]
            v_g = v_tiles[g]
            dk = tl.zeros([HALF, HEAD_DIM], tl.float32)
            dv = tl.zeros([HALF, HEAD_DIM], tl.float32)
            tlx.barrier_wait(kv_full[0], 0)
            if DQ_STAGGER:
                # half a step behind group 0 from the start: with DQ_HANDOFF nothing pulls the groups back into
                # step, as the one bar.sync of both did (group 0 waits for group 1's dS^T, group 1 finds group 0's there)
                tl.static_assert(DQ_HANDOFF, "DQ_STAGGER needs DQ_HANDOFF")
                if g == 1:
                    if i_start < q_hi:
                        tlx.named_barrier_wait(STAGGER_BAR, 256)
            # across the diagonal (causal), then the plain blocks, then the ragged tail
            for i in range(i_start, i_mid):
                dk, dv = _bwd_step(i, i - i_start, g, k_g, v_g, ds_tiles, kc_tiles, q_tiles, do_tiles, lse_tiles,
                                   delta_tiles, q_full, q_empty, do_full, do_empty, dk, dv, dq_ptr,
                                   head_row, kv_rows, qk_scale, sm_scale, N_CTX,
                                   True, CAUSAL, BM, HEAD_DIM, NUM_BUFS, dtype, KC, GROUPS, DQ_SPLIT,
                                   dq_tiles, desc_dq, DQ_TMA, (DP_DELTA, P_ROUND), DQ_HANDOFF,
                                   DQ_STAGGER)
            for i in range(i_mid, n_full):
                dk, dv = _bwd_step(i, i - i_start, g, k_g, v_g, ds_tiles, kc_tiles, q_tiles, do_tiles, lse_tiles,
                                   delta_tiles, q_full, q_empty, do_full, do_empty, dk, dv, dq_ptr,
                                   head_row, kv_rows, qk_scale, sm_scale, N_CTX,
                                   False, CAUSAL, BM, HEAD_DIM, NUM_BUFS, dtype, KC, GROUPS, DQ_SPLIT,
                                   dq_tiles, desc_dq, DQ_TMA, (DP_DELTA, P_ROUND), DQ_HANDOFF,
                                   DQ_STAGGER)
            for i in range(tl.maximum(i_mid, n_full), q_hi):
                dk, dv = _bwd_step(i, i - i_start, g, k_g, v_g, ds_tiles, kc_tiles, q_tiles, do_tiles, lse_tiles,
                                   delta_tiles, q_full, q_empty, do_full, do_empty, dk, dv, dq_ptr,
                                   head_row, kv_rows, qk_scale, sm_scale, N_CTX,
                                   True, CAUSAL, BM, HEAD_DIM, NUM_BUFS, dtype, KC, GROUPS, DQ_SPLIT,
                                   dq_tiles, desc_dq, DQ_TMA, (DP_DELTA, P_ROUND), DQ_HANDOFF,
                                   DQ_STAGGER)
            if DQ_TMA:
                tlx.async_descriptor_store_wait(0)      # the last reduces have read their SMEM
            if is_part:
                # a part of a leftover block: its share of dK, dV into the fp32 partials (rows past N too:
                # exact zeros, P is masked there; the cast kernel leaves them out)
                prow0 = (blk - main_ctas) * BN + g * HALF
                # by TMA reduce-add through the group's dQ tiles (atomics' layout-change scratch would
                # not fit beside them at D=128), 64 columns a reduce
                tl.static_assert(DQ_TMA > 0, "SPLIT_TAIL needs DQ_TMA: the parts' dK, dV go out through its tiles")
                tl.static_assert(BM == HALF, "SPLIT_TAIL with DQ_TMA: the (BM, 64) dQ tiles take 64 rows")
                _tail_reduce(dk * sm_scale, dq_tiles, dkv_tail_ptr, g, 0, prow0, DQ_TMA, HEAD_DIM)
                _tail_reduce(dv, dq_tiles, dkv_tail_ptr, g, HEAD_DIM // 64, left_rows + prow0, DQ_TMA,
                             HEAD_DIM)
                tlx.async_descriptor_store_wait(0)
            else:
                _store_dkv(dk, dv, dk_ptr, dv_ptr, head_row, kv_rows, sm_scale, N_CTX, HEAD_DIM)
