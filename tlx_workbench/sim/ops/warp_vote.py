"""``tlx.vote_ballot_sync(mask, pred)``: ``vote.sync.ballot.b32`` per warp, on the CPU.

On the GPU each lane of a warp contributes one predicate bit (bit ``l`` for lane ``l``); lanes outside ``mask``
contribute 0 and every lane gets the warp's 32-bit ballot. TLX's lowering (``VoteBallotSyncOpConversion``) gives a
*tensor* predicate the same meaning per thread: a thread ORs the predicate elements it holds, votes once, and every
element it holds becomes the ballot.

Which elements a thread holds is the tensor's layout, which the CPU does not have: the simulator takes Triton's
default blocked layout for the shape and the task's warps (one element per thread per repetition, lanes along the
last dimension first, then warps; ``BlockedEncodingAttr``'s defaults), which is what the op gets when nothing
upstream (a coalesced load, an MMA) imposed another. An element that several warps hold (a tensor smaller than
the CTA) reads the lowest such warp's ballot. A scalar predicate is the same in every lane unless it carries one
value per thread of the task (per-thread ``thread_id`` values), then each warp votes its lanes' values.

The cost is an issue slot (``cost.issue``): a warp vote is one instruction per warp.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from .. import interp_adapter as ia


def default_blocked(shape, num_warps: int, lanes: int = 32):
    """(threads per warp, warps per CTA) per dimension of Triton's default blocked layout of ``shape``
    (sizePerThread 1, order fastest-last), as ``BlockedEncodingAttr::get`` splits lanes and warps."""
    rank = len(shape)
    tpw, wpc = [1] * rank, [1] * rank
    left_lanes, left_warps, left_threads = lanes, num_warps, lanes * num_warps
    for d in reversed(range(rank)):
        per_cta = int(np.clip(left_threads, 1, max(1, shape[d])))
        tpw[d] = int(np.clip(per_cta, 1, left_lanes))
        wpc[d] = int(np.clip(per_cta // tpw[d], 1, left_warps))
        left_warps //= wpc[d]
        left_lanes //= tpw[d]
        left_threads //= per_cta
    # what is left goes to the slowest dimension (replication when the tensor is smaller than the CTA)
    tpw[0] *= max(1, left_lanes)
    wpc[0] *= max(1, left_warps)
    return tpw, wpc


def _owners(shape, num_warps: int, lanes: int = 32):
    """For each thread (warp, lane): the flat indices of the elements it holds under the default layout."""
    tpw, wpc = default_blocked(shape, num_warps, lanes)
    coords = np.indices(shape).reshape(len(shape), -1)            # (rank, elements)
    held = np.zeros((num_warps, lanes, coords.shape[1]), dtype=bool)
    for w in range(num_warps):
        for ln in range(lanes):
            ok = np.ones(coords.shape[1], dtype=bool)
            lrem, wrem = ln, w
            for d in reversed(range(len(shape))):
                ld, lrem = lrem % tpw[d], lrem // tpw[d]
                wd, wrem = wrem % wpc[d], wrem // wpc[d]
                pos, span = wd * tpw[d] + ld, tpw[d] * wpc[d]
                period = min(span, shape[d])
                ok &= coords[d] % period == pos % period
            held[w, ln] = ok
    return held


def ballot(mask: int, pred: np.ndarray, shape, num_warps: int, per_thread: bool) -> np.ndarray:
    """The int32 results of a ballot: ``pred`` per element of ``shape`` (a block), or one value per thread
    (``per_thread``), or a single uniform value."""
    lanes = 32
    weights = (np.uint64(1) << np.arange(lanes, dtype=np.uint64))
    m = np.uint64(mask & 0xFFFFFFFF)
    if per_thread:
        p = np.asarray(pred, dtype=bool).reshape(num_warps, lanes)
        b = (p.astype(np.uint64) * weights).sum(axis=1) & m                  # per warp
        return np.repeat(b, lanes).astype(np.uint32).view(np.int32)
    if not shape:
        b = m if bool(np.asarray(pred).reshape(-1)[0]) else np.uint64(0)
        return np.array([int(b)], dtype=np.uint32).view(np.int32)
    held = _owners(list(shape), num_warps, lanes)                            # (warps, lanes, elements)
    p = np.asarray(pred, dtype=bool).reshape(-1)
    votes = (held & p[None, None, :]).any(axis=2)                             # each thread's OR
    per_warp = (votes.astype(np.uint64) * weights[None, :]).sum(axis=1) & m
    first = held.any(axis=1).argmax(axis=0)                                   # the lowest warp holding each
    return per_warp[first].astype(np.uint32).view(np.int32).reshape(shape)


def vote_ballot_sync(cta, mask, pred):
    """The builtin's meaning on ``cta`` while simulating (``tlx_ops.OVERRIDES`` puts it in place of
    ``tlx.vote_ballot_sync``)."""
    mask = int(tl._unwrap_if_constexpr(mask))
    if not isinstance(pred, tl.tensor):
        pred = ia.interpreter_semantic.to_tensor(tl._unwrap_if_constexpr(pred))
    from ..schedule.batch import refuse_variant
    refuse_variant("vote_ballot_sync", pred)
    t = cta.task
    start = t.clock
    file, line = cta.where()
    cta.step(line)
    data = np.asarray(pred.handle.data)
    if pred.type.is_block():
        shape = [int(s) for s in pred.type.shape]
        out = ballot(mask, data != 0, shape, t.num_warps, False)
        ty = tl.block_type(tl.int32, shape)
    else:
        per_thread = data.size == t.threads and data.size > 1
        out = ballot(mask, data != 0, [], t.num_warps, per_thread)
        ty = tl.int32
    t.clock += cta.cost.issue
    cta.span(t, "other", start, t.clock, "vote_ballot_sync", line, args={"mask": f"{mask & 0xFFFFFFFF:#010x}"})
    return tl.tensor(ia.TensorHandle(out, tl.int32), ty)
