"""A small explorer problem over the simulator's seeded copy pipeline (tests/sim): its knob BUG
picks a deliberate protocol mistake, so one space holds a correct pipeline and wrong ones (an
early release that races, a wrong phase and a wrong arrive count that deadlock), each real TLX
code run by the simulator."""
import torch
from triton.tools.tensor_descriptor import TensorDescriptor

import sim_seeded_kernels as sk
from tlx_workbench.explore import Problem


def launch(x, cfg):
    bm, bk = cfg["BM"], x.shape[1]
    out = torch.empty_like(x)
    desc = TensorDescriptor(x, list(x.shape), [bk, 1], [bm, bk])
    sk.copy_pipeline[(1,)](desc, out, x.shape[0] // bm, BM=bm, BK=bk, STAGES=cfg["STAGES"], BUG=cfg["BUG"])
    return out


def make_inputs(shape, dtype, device):
    return (torch.randn(tuple(shape), dtype=getattr(torch, dtype), device=device),)


def reference(x):
    return x.clone()


def nbytes(shape):
    return 4.0 * shape[0] * shape[1]


def sim_shape(cfg):
    return (4 * cfg["STAGES"] * cfg["BM"], 64)


def problem():
    return Problem(name="copy_pipeline", launch=launch, make_inputs=make_inputs, reference=reference,
                   bytes=nbytes, sim_shape=sim_shape)
