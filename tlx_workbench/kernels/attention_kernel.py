"""The device code of the attention kernels (``attention.py`` has the story and the host side,
``attention_configs.py`` the configs and what each switch does).

Both kernels (``attention_fwd_kernel``, a CTA per query tile; ``attention_fwd_persistent_kernel``, a CTA
per SM walking tiles) and every device function of their tasks are in this one file on purpose: the
compile report maps IR/PTX/SASS lines to lines of the kernel's own file (a helper from another file
shows as its call line), and the wgmma-overlap findings name the softmax's own lines.

In order: what the tasks share (the GEMM turn, a K/V block's load, the log-sum-exp store); the consumer groups' device
functions (the softmax of a block, a K/V step, one tile's pass); the plain kernel; the persistent
kernel's tile walk, its loader task and its consumer task; the persistent kernel; SPLIT_TAIL's two Triton kernels.

A kernel takes each constexpr switch by name (the configs name them) and hands its device functions the ones
they read (``P_LATE``, ``PIN_SOFTMAX``: what runs outside or under this group's wgmmas). The K/V ring travels
as one tuple: ``kv`` = (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty).
"""
from __future__ import annotations

import triton
import triton.language as tl
import triton.language.extra.tlx as tlx

TURN_0 = tl.constexpr(14)
TURN_1 = tl.constexpr(15)
TURN_2 = tl.constexpr(13)
LOG2E = tl.constexpr(1.4426950408889634)


# ---- what the tasks share: the GEMM turn, a K/V block's load, the log-sum-exp store ---------------
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
def _load_kv(kv, desc_k, desc_v, slot, row, NUM_BUFS: tl.constexpr, TILE_BYTES: tl.constexpr):
    """The loader's K/V block number ``slot`` through the ring ``kv`` (buffer ``slot % NUM_BUFS``, that buffer's
    trip ``slot // NUM_BUFS``): wait until both buffers are handed back, then K and V by TMA from ``row`` of the
    2-D views."""
    k_tiles, v_tiles, k_full, k_empty, v_full, v_empty = kv
    b = slot % NUM_BUFS
    parity = (slot // NUM_BUFS) & 1
    tlx.barrier_wait(k_empty[b], parity ^ 1)
    tlx.barrier_expect_bytes(k_full[b], TILE_BYTES)
    tlx.async_descriptor_load(desc_k, k_tiles[b], [row, 0], k_full[b])
    tlx.barrier_wait(v_empty[b], parity ^ 1)
    tlx.barrier_expect_bytes(v_full[b], TILE_BYTES)
    tlx.async_descriptor_load(desc_v, v_tiles[b], [row, 0], v_full[b])


@triton.jit
def _store_lse(lse_ptr, head_row, rows, m_i, l_i, N_CTX):
    """STORE_LSE (for the backward pass): log-sum-exp of each query row's scaled scores, natural log
    (m_i is in base-2 units: lse = (m_i + log2 l_i) * ln 2)."""
    tl.store(lse_ptr + head_row + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453, mask=rows < N_CTX)


# ---- the consumer groups: a block's softmax, a K/V step, one tile's pass -------------------------

@triton.jit
def _online_softmax(qk, m_i, l_i, qk_scale, rows, col0, N_CTX,
                    MASK: tl.constexpr, CAUSAL: tl.constexpr, BN: tl.constexpr):
    """One block of the streaming softmax in base 2. Returns (p, m_new, l_new, alpha), p in fp32."""
    if MASK:
        cols = col0 + tl.arange(0, BN)
        keep = cols[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (cols[None, :] <= rows[:, None])
        qk = tl.where(keep, qk, float("-inf"))
    m_blk = tl.max(qk, 1) * qk_scale
    m_new = tl.maximum(m_i, m_blk)
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    l_new = l_i * alpha + tl.sum(p, 1)
    return p, m_new, l_new, alpha


@triton.jit
def _kv_step(q_tile, ring, j, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX, ring0, pin_ptr,
             MASK: tl.constexpr, CAUSAL: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr,
             DTYPE: tl.constexpr, GROUPS: tl.constexpr, P_LATE: tl.constexpr, PIN_SOFTMAX: tl.constexpr):
    """Step j >= 1: S_j = Q K_j^T and O += P_{j-1} V_{j-1} in this group's turn, softmax of S_j
    under the P V wgmma, then rescale O. Returns the new (p, m_i, l_i, acc).

    ``ring`` = (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty); ``ring0``: how many K/V blocks
    went through it before this tile's block 0 (a persistent CTA keeps one ring across its tiles).
    ``P_LATE``, ``PIN_SOFTMAX``: see ``_config``."""
    k_tiles, v_tiles, k_full, k_empty, v_full, v_empty = ring
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
    p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, rows, j * BN, N_CTX, MASK, CAUSAL, BN)
    if PIN_SOFTMAX:
        # a store that never happens (N_CTX < 0) but needs every exp2 of the softmax (through l_i):
        # ptxas may not move a store below the wgmma wait, so the softmax stays above it and runs
        # under the P V wgmma. Without it ptxas hoists the wait above the softmax (the wait has
        # no inputs, and the rescale after it looks urgent): none of the 64 exp2 of a step
        # overlapped P V in the measured kernel's SASS.
        tl.store(pin_ptr + rows, l_i.to(pin_ptr.dtype.element_ty), mask=N_CTX < 0)
    acc = tlx.async_dot_wait(0, acc)
    tlx.barrier_arrive(v_empty[vb])
    acc = acc * alpha[:, None]
    if P_LATE:
        # no wgmma of this group is in flight now: converting here keeps the conversion out of
        # the GEMM turn without ptxas serializing the wgmmas (C7513), as converting inside the softmax did
        p = p.to(DTYPE)
    return p, m_i, l_i, acc


@triton.jit
def _steps(q_tile, kv, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX, ring, n_plain, n_blocks, pin_ptr,
           CAUSAL: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr, DTYPE: tl.constexpr,
           GROUPS: tl.constexpr, P_LATE: tl.constexpr, PIN_SOFTMAX: tl.constexpr):
    """Steps 1 .. n_blocks-1 of one tile (``_kv_step``): the blocks before ``n_plain`` unmasked, the rest
    (the diagonal, the ragged end of N) masked. Returns the new (p, m_i, l_i, acc)."""
    for j in range(1, tl.maximum(n_plain, 1)):
        p, m_i, l_i, acc = _kv_step(q_tile, kv, j, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX, ring, pin_ptr,
                                    False, CAUSAL, BN, NUM_BUFS, DTYPE, GROUPS, P_LATE, PIN_SOFTMAX)
    for j in range(tl.maximum(n_plain, 1), n_blocks):
        p, m_i, l_i, acc = _kv_step(q_tile, kv, j, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX, ring, pin_ptr,
                                    True, CAUSAL, BN, NUM_BUFS, DTYPE, GROUPS, P_LATE, PIN_SOFTMAX)
    return p, m_i, l_i, acc


@triton.jit
def _attend(q_tile, kv, q_empty, qslot, wg, ring, rows, m_i, l_i, qk_scale, N_CTX, n_plain, n_blocks, pin_ptr,
            HEAD_DIM: tl.constexpr, HALF: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
            BN: tl.constexpr, NUM_BUFS: tl.constexpr, DTYPE: tl.constexpr, GROUPS: tl.constexpr,
            RELEASE_Q: tl.constexpr, P_LATE: tl.constexpr, PIN_SOFTMAX: tl.constexpr):
    """One consumer group's pass over the K/V blocks of one query tile: S_0 alone, the steps (unmasked
    blocks first), the last P V. ``kv``: the K/V ring (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty);
    ``ring``: K/V blocks through it before this tile's block 0. ``RELEASE_Q``: arrive on ``q_empty[qslot]`` once
    the tile's last Q K^T retired (persistent form).
    Returns (the unnormalised O, the row sums, the row maxima in base-2 units)."""
    k_tiles, v_tiles, k_full, k_empty, v_full, v_empty = kv
    # block 0: S_0 alone (nothing to multiply with V yet)
    b0 = ring % NUM_BUFS
    tlx.barrier_wait(k_full[b0], (ring // NUM_BUFS) & 1)
    _wait_turn(wg, GROUPS)
    qk = tlx.async_dot(q_tile, tlx.local_trans(k_tiles[b0]))
    _pass_turn(wg, GROUPS)
    qk = tlx.async_dot_wait(0, qk)
    tlx.barrier_arrive(k_empty[b0])
    p, m_i, l_i, alpha = _online_softmax(qk, m_i, l_i, qk_scale, rows, 0, N_CTX, CAUSAL or not EVEN_M, CAUSAL, BN)
    if P_LATE:
        p = p.to(DTYPE)     # block 0's P too: no P V wgmma is in flight yet
    acc = tl.zeros([HALF, HEAD_DIM], tl.float32)
    p, m_i, l_i, acc = _steps(q_tile, kv, wg, p, m_i, l_i, acc, qk_scale, rows, N_CTX, ring, n_plain, n_blocks,
                              pin_ptr, CAUSAL, BN, NUM_BUFS, DTYPE, GROUPS, P_LATE, PIN_SOFTMAX)
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
    return acc, l_i, m_i



@triton.jit
def _normalised(acc, l_i, DTYPE: tl.constexpr):
    """O = acc / l in the output dtype, as one reciprocal per row and a multiply per element: ``acc / l_i[:, None]``
    divides every element (``div.full.f32``, ~9 SASS instructions each: 601 for a group's 64 x 128 tile at D=128,
    against 169 with the reciprocal, the fp16 packing included), work the other group's GEMM turn waits for.
    Measured 2026-12-05 as the switch RECIP_NORM: +0.5 to +1.0 % non-causal, level to +1 % causal (RESULTS.md)."""
    return (acc * (1.0 / l_i)[:, None]).to(DTYPE)


# ---- the plain kernel: a CTA per query tile (its loader inline, its consumers through _attend) ---

@triton.jit
def attention_fwd_kernel(sm_scale, Z, H, N_CTX, desc_q, desc_k, desc_v, desc_o, o_ptr,
                         HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                         LOADER_REGS: tl.constexpr = 24, MMA_REGS: tl.constexpr = 240,
                         P_LATE: tl.constexpr = False, GROUPS: tl.constexpr = 2, PIN_SOFTMAX: tl.constexpr = False,
                         STORE_LSE: tl.constexpr = False, lse_ptr=None):
    HALF: tl.constexpr = BM // GROUPS      # query rows per consumer group (64)
    dtype: tl.constexpr = tlx.dtype_of(desc_q)

    q_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS)
    k_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    v_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    q_full = tlx.alloc_barriers(num_barriers=GROUPS, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)
    kv = (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty)

    # heavy (long causal) query blocks first, so the tail of the grid is short blocks
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    bh = tl.program_id(1)
    head_row = bh * N_CTX               # first row of this (batch, head) in the 2-D views
    n_plain, n_blocks = _tile_span(start_m, N_CTX, BM, BN, CAUSAL)
    TILE_BYTES: tl.constexpr = BN * HEAD_DIM * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            for h in tl.static_range(GROUPS):
                tlx.barrier_expect_bytes(q_full[h], HALF * HEAD_DIM * tlx.size_of(dtype))
                tlx.async_descriptor_load(desc_q, q_tiles[h], [head_row + start_m * BM + h * HALF, 0], q_full[h])
            for j in range(n_blocks):
                _load_kv(kv, desc_k, desc_v, j, head_row + j * BN, NUM_BUFS, TILE_BYTES)

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

            acc, l_i, m_i = _attend(q_tile, kv, None, 0, wg, 0, rows, m_i, l_i, qk_scale, N_CTX, n_plain, n_blocks, o_ptr,
                               HEAD_DIM, HALF, CAUSAL, EVEN_M, BN, NUM_BUFS, dtype, GROUPS, False,
                               P_LATE, PIN_SOFTMAX)
            if STORE_LSE:
                _store_lse(lse_ptr, head_row, rows, m_i, l_i, N_CTX)

            out = _normalised(acc, l_i, tlx.dtype_of(desc_o))
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



# ---- the persistent kernel: its tile walk, its loader task, its consumer task --------------------

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
def _tile_span(start_m, N_CTX, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    """(n_plain, n_blocks) of query block ``start_m``: the K/V blocks it needs (causal: up to the diagonal), and
    how many of the first need no mask (fully below the diagonal and inside N)."""
    if CAUSAL:
        kv_end = tl.minimum((start_m + 1) * BM, N_CTX)
        n_plain = tl.minimum(start_m * BM, N_CTX) // BN
    else:
        kv_end = N_CTX
        n_plain = N_CTX // BN
    return n_plain, tl.cdiv(kv_end, BN)


@triton.jit
def _persistent_loader(q_tiles, q_full, q_empty, kv, desc_q, desc_k, desc_v, N_CTX, num_tiles, num_m, ZH,
                       BM: tl.constexpr, BN: tl.constexpr, NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr,
                       NUM_SMS: tl.constexpr, Q_BUFS: tl.constexpr, HALF: tl.constexpr, TILE_BYTES: tl.constexpr,
                       Q_BYTES: tl.constexpr, GROUPS: tl.constexpr, ZIGZAG: tl.constexpr):
    """The loader of ``attention_fwd_persistent_kernel``: Q of each tile, then its K/V blocks
    through the ring ``kv`` = (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty)."""
    ring = 0
    it = 0
    k_first, k_end, k_step = _walk(tl.program_id(0), num_tiles, NUM_SMS, ZIGZAG)
    for k_tile in range(k_first, k_end, k_step):
        tile = _tile_at(k_tile, tl.program_id(0), NUM_SMS, ZIGZAG)
        start_m, bh = _tile_coords(tile, num_m, ZH, CAUSAL, ZIGZAG)
        head_row = bh * N_CTX
        n_plain, n_blocks = _tile_span(start_m, N_CTX, BM, BN, CAUSAL)
        qs = it % Q_BUFS
        qpar = (it // Q_BUFS) & 1
        for h in tl.static_range(GROUPS):
            tlx.barrier_wait(q_empty[GROUPS * qs + h], qpar ^ 1)
            tlx.barrier_expect_bytes(q_full[GROUPS * qs + h], Q_BYTES)
            tlx.async_descriptor_load(desc_q, q_tiles[GROUPS * qs + h],
                                      [head_row + start_m * BM + h * HALF, 0], q_full[GROUPS * qs + h])
        for j in range(n_blocks):
            _load_kv(kv, desc_k, desc_v, ring, head_row + j * BN, NUM_BUFS, TILE_BYTES)
            ring += 1
        it += 1


@triton.jit
def _tile_epilogue(acc, l_i, m_i, rows, head_row, start_m, wg, o_tiles, desc_o, o_ptr, lse_ptr, N_CTX,
                   HEAD_DIM: tl.constexpr, HALF: tl.constexpr, BM: tl.constexpr, EVEN_M: tl.constexpr,
                   STORE_LSE: tl.constexpr):
    """A persistent consumer group's end of one tile: O = acc / l out through its own SMEM buffer by TMA (not
    waited for: the next tile's wgmmas overlap it), or by a masked store at a ragged N; the log-sum-exp too
    under STORE_LSE."""
    if STORE_LSE:
        _store_lse(lse_ptr, head_row, rows, m_i, l_i, N_CTX)
    out = _normalised(acc, l_i, tlx.dtype_of(desc_o))
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


@triton.jit
def _persistent_consumer(wg, q_tiles, q_full, q_empty, kv, o_tiles, desc_o, o_ptr, sm_scale, N_CTX, num_tiles,
                         num_m, ZH, HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                         NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr, NUM_SMS: tl.constexpr,
                         Q_BUFS: tl.constexpr, HALF: tl.constexpr, dtype: tl.constexpr, GROUPS: tl.constexpr,
                         ZIGZAG: tl.constexpr, P_LATE: tl.constexpr, PIN_SOFTMAX: tl.constexpr,
                         STORE_LSE: tl.constexpr = False, lse_ptr=None):
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
        n_plain, n_blocks = _tile_span(start_m, N_CTX, BM, BN, CAUSAL)
        rows = start_m * BM + wg * HALF + tl.arange(0, HALF)
        m_i = tl.full([HALF], float("-inf"), tl.float32)
        l_i = tl.zeros([HALF], tl.float32)
        qslot = GROUPS * (it % Q_BUFS) + wg
        q_tile = q_tiles[qslot]
        tlx.barrier_wait(q_full[qslot], (it // Q_BUFS) & 1)

        acc, l_i, m_i = _attend(q_tile, kv, q_empty, qslot, wg, ring, rows, m_i, l_i, qk_scale, N_CTX, n_plain,
                                n_blocks, o_ptr, HEAD_DIM, HALF, CAUSAL, EVEN_M, BN, NUM_BUFS, dtype, GROUPS, True,
                                P_LATE, PIN_SOFTMAX)
        ring += n_blocks
        it += 1
        _tile_epilogue(acc, l_i, m_i, rows, head_row, start_m, wg, o_tiles, desc_o, o_ptr, lse_ptr, N_CTX,
                       HEAD_DIM, HALF, BM, EVEN_M, STORE_LSE)
    tlx.async_descriptor_store_wait(0)


@triton.jit
def attention_fwd_persistent_kernel(sm_scale, Z, H, N_CTX, desc_q, desc_k, desc_v, desc_o, o_ptr,
                                    HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                                    NUM_BUFS: tl.constexpr, CAUSAL: tl.constexpr, EVEN_M: tl.constexpr,
                                    NUM_SMS: tl.constexpr, Q_BUFS: tl.constexpr = 1,
                                    LOADER_REGS: tl.constexpr = 24, MMA_REGS: tl.constexpr = 240,
                                    P_LATE: tl.constexpr = False, GROUPS: tl.constexpr = 2,
                                    ZIGZAG: tl.constexpr = False, PIN_SOFTMAX: tl.constexpr = False,
                                    STORE_LSE: tl.constexpr = False, lse_ptr=None,
                                    SPLIT_TAIL: tl.constexpr = False, main_tiles=0):
    """The same computation as ``attention_fwd_kernel``, but NUM_SMS persistent CTAs walk query tiles
    ``pid, pid + NUM_SMS, ...``: the K/V ring, the turn order and the barriers run on across
    tiles, Q of the next tile is loaded while this one finishes (Q_BUFS sets of Q buffers, a set
    is handed back as soon as its last S = Q K^T retired), and the O store of a tile goes out
    through its own SMEM buffer without being waited for: the next tile's first wgmmas overlap it.
    ``SPLIT_TAIL``: only tiles 0 .. main_tiles-1 (whole waves); the split tail's kernels do the rest."""
    HALF: tl.constexpr = BM // GROUPS      # query rows per consumer group (64)
    dtype: tl.constexpr = tlx.dtype_of(desc_q)

    # Q set s of group h lives at GROUPS*s + h
    q_tiles = tlx.local_alloc((HALF, HEAD_DIM), dtype, GROUPS * Q_BUFS)
    k_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    v_tiles = tlx.local_alloc((BN, HEAD_DIM), dtype, NUM_BUFS)
    o_tiles = tlx.local_alloc((HALF, HEAD_DIM), tlx.dtype_of(desc_o), GROUPS)
    q_full = tlx.alloc_barriers(num_barriers=GROUPS * Q_BUFS, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=GROUPS * Q_BUFS, arrive_count=1)
    k_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    v_full = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=1)
    k_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)
    v_empty = tlx.alloc_barriers(num_barriers=NUM_BUFS, arrive_count=GROUPS)
    kv = (k_tiles, v_tiles, k_full, k_empty, v_full, v_empty)

    ZH = Z * H
    num_m = tl.cdiv(N_CTX, BM)
    num_tiles = num_m * ZH
    if SPLIT_TAIL:
        num_tiles = main_tiles
    TILE_BYTES: tl.constexpr = BN * HEAD_DIM * tlx.size_of(dtype)
    Q_BYTES: tl.constexpr = HALF * HEAD_DIM * tlx.size_of(dtype)

    with tlx.async_tasks():
        with tlx.async_task("default", num_regs=LOADER_REGS):
            _persistent_loader(q_tiles, q_full, q_empty, kv, desc_q, desc_k, desc_v, N_CTX, num_tiles, num_m, ZH,
                               BM, BN, NUM_BUFS, CAUSAL, NUM_SMS, Q_BUFS, HALF, TILE_BYTES, Q_BYTES, GROUPS,
                               ZIGZAG)
        with tlx.async_task(num_warps=4, replicate=GROUPS, num_regs=MMA_REGS):
            _persistent_consumer(tlx.async_task_replica_id(), q_tiles, q_full, q_empty, kv, o_tiles, desc_o,
                                 o_ptr, sm_scale, N_CTX, num_tiles, num_m, ZH, HEAD_DIM, BM, BN, NUM_BUFS,
                                 CAUSAL, EVEN_M, NUM_SMS, Q_BUFS, HALF, dtype, GROUPS, ZIGZAG, P_LATE, PIN_SOFTMAX,
                                 STORE_LSE, lse_ptr)


# ---- the split tail (SPLIT_TAIL): the leftover tiles of a persistent launch, split over K/V ------------

@triton.jit
def attention_tail_split_kernel(sm_scale, q, k, v, part_o, part_ml, N_CTX, num_m, first_tile, chunk,
                                HEAD_DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (t, s): leftover tile ``first_tile + t`` (the persistent walk's numbering: query block
    ``tile % num_m`` of head ``tile // num_m``) against K/V columns [s * chunk, (s + 1) * chunk). Writes the
    split's unnormalised O (fp32) and its row max (base 2, scaled) and row sum to slot t * splits + s."""
    t = tl.program_id(0)
    s = tl.program_id(1)
    tile = first_tile + t
    start_m = tile % num_m
    head_row = (tile // num_m).to(tl.int64) * N_CTX
    rows = start_m * BM + tl.arange(0, BM)
    d = tl.arange(0, HEAD_DIM)
    qv = tl.load(q + (head_row + rows)[:, None] * HEAD_DIM + d[None, :], mask=(rows < N_CTX)[:, None], other=0.0)
    qk_scale = sm_scale * LOG2E
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, HEAD_DIM], tl.float32)
    lo = s * chunk
    # chunk is a multiple of BN, so a block crosses no split's end but the last one's, N_CTX
    for n0 in range(lo, tl.minimum(lo + chunk, N_CTX), BN):
        cols = n0 + tl.arange(0, BN)
        live = cols < N_CTX
        kt = tl.load(k + (head_row + cols)[None, :] * HEAD_DIM + d[:, None], mask=live[None, :], other=0.0)
        vv = tl.load(v + (head_row + cols)[:, None] * HEAD_DIM + d[None, :], mask=live[:, None], other=0.0)
        p, m_i, l_i, alpha = _online_softmax(tl.dot(qv, kt), m_i, l_i, qk_scale, rows, n0, N_CTX, True, False, BN)
        acc = acc * alpha[:, None] + tl.dot(p.to(vv.dtype), vv)
    slot = (t * tl.num_programs(1) + s).to(tl.int64)
    r = tl.arange(0, BM)
    tl.store(part_o + (slot * BM + r)[:, None] * HEAD_DIM + d[None, :], acc)
    tl.store(part_ml + slot * 2 * BM + r, m_i)
    tl.store(part_ml + slot * 2 * BM + BM + r, l_i)


@triton.jit
def attention_tail_merge_kernel(o, part_o, part_ml, lse_ptr, N_CTX, num_m, first_tile, splits, row0,
                                HEAD_DIM: tl.constexpr, BM: tl.constexpr, ROWS: tl.constexpr, SPLITS: tl.constexpr,
                                STORE_LSE: tl.constexpr):
    """Program (t, b): rows b * ROWS .. of leftover tile ``first_tile + t``, its ``splits`` partial sums (SPLITS:
    the next power of two) loaded at once, each rescaled to the largest row max, summed, normalised and stored
    into ``o`` (and the log-sum-exp, natural log, into ``lse_ptr``): both start at row ``row0`` of the (Z*H*N)
    rows, the leftover tiles' first. Many small programs, every load in flight together: the merge moves
    splits x BM x D fp32 a tile, which one program a tile would read one split at a time."""
    t = tl.program_id(0)
    tile = first_tile + t
    start_m = tile % num_m
    head_row = (tile // num_m).to(tl.int64) * N_CTX - row0
    sp = tl.arange(0, SPLITS)
    live = sp < splits
    r = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    d = tl.arange(0, HEAD_DIM)
    slot = (t * splits + sp).to(tl.int64)
    ml = part_ml + slot[:, None] * 2 * BM + r[None, :]
    m_s = tl.load(ml, mask=live[:, None], other=float("-inf"))                          # (SPLITS, ROWS)
    l_s = tl.load(ml + BM, mask=live[:, None], other=0.0)
    m = tl.max(m_s, 0)
    w = tl.math.exp2(m_s - m[None, :])                                                 # 0 for the padding
    l_sum = tl.sum(l_s * w, 0)
    o_s = tl.load(part_o + ((slot[:, None] * BM + r[None, :]) * HEAD_DIM)[:, :, None] + d[None, None, :],
                  mask=live[:, None, None], other=0.0)                                 # (SPLITS, ROWS, D)
    acc = tl.sum(o_s * w[:, :, None], 0)
    rows = start_m * BM + r
    out = (acc / l_sum[:, None]).to(o.dtype.element_ty)
    tl.store(o + (head_row + rows)[:, None] * HEAD_DIM + d[None, :], out, mask=(rows < N_CTX)[:, None])
    if STORE_LSE:
        tl.store(lse_ptr + head_row + rows, (m + tl.math.log2(l_sum)) * 0.6931471805599453, mask=rows < N_CTX)
