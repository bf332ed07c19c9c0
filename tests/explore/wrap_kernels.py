"""An explorer problem whose seeded bug needs the real shape's trip counts: a TMA ring copy (one loader,
one consumer warp group, ``STAGES`` slots; each CTA copies its own column strip, tile by tile) in which
``PHASE_MOD=3`` keeps the ring's trip count modulo 3 where the phase needs it modulo 2. Trips 0, 1 and 2
get the right parity (0, 1, 0); trip 3 gets 0 again, so both sides wait on a phase that completed two
trips before and go on at once. The problem's small shape has two trips round the ring and one step more
(as the library GEMMs' small shapes do), which never reaches trip 3; a real shape of many trips does."""
import torch
import triton
import triton.language as tl
import triton.language.extra.tlx as tlx
from triton.tools.tensor_descriptor import TensorDescriptor

from explore_kernels import make_inputs, nbytes, reference    # a copy's inputs, reference and bytes, as there
from tlx_workbench.explore import Problem


@triton.jit
def ring_copy(in_desc, out_ptr, N_TILES, N_COLS, BM: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr,
              PHASE_MOD: tl.constexpr):
    bufs = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    col = tl.program_id(0) * BK
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for i in range(N_TILES):
                s = i % STAGES
                p = ((i // STAGES) % PHASE_MOD) & 1       # PHASE_MOD=3 is the bug: trip 3 repeats parity 0
                tlx.barrier_wait(empty[s], p ^ 1)
                tlx.barrier_expect_bytes(full[s], BM * BK * 2)
                tlx.async_descriptor_load(in_desc, bufs[s], [i * BM, col], full[s])
        with tlx.async_task(num_warps=4):
            rows = tl.arange(0, BM)
            cols = tl.arange(0, BK)
            for i in range(N_TILES):
                s = i % STAGES
                p = ((i // STAGES) % PHASE_MOD) & 1
                tlx.barrier_wait(full[s], p)
                x = tlx.local_load(bufs[s])
                tlx.barrier_arrive(empty[s])
                tl.store(out_ptr + (i * BM + rows)[:, None] * N_COLS + col + cols[None, :], x)


def launch(x, cfg):
    bm, bk = cfg["BM"], cfg["BK"]
    out = torch.empty_like(x)
    desc = TensorDescriptor(x, list(x.shape), [x.shape[1], 1], [bm, bk])
    ring_copy[(x.shape[1] // bk,)](desc, out, x.shape[0] // bm, x.shape[1], BM=bm, BK=bk, STAGES=cfg["STAGES"],
                                   PHASE_MOD=cfg["PHASE_MOD"])
    return out


def sim_shape(cfg):
    # two CTAs; two trips round the ring and one step more
    return ((2 * cfg["STAGES"] + 1) * cfg["BM"], 2 * cfg["BK"])


def problem():
    return Problem(name="ring_copy", launch=launch, make_inputs=make_inputs, reference=reference, bytes=nbytes,
                   sim_shape=sim_shape)
