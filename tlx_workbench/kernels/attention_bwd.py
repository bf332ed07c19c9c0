"""Flash-attention backward for Hopper, warp-specialized: dQ, dK, dV of O = softmax(Q K^T * scale) V.

The inputs are the forward's (q, k, v, o of shape (Z, H, N, D), D in {64, 128}, fp16 or bf16, any N),
the output gradient ``do`` and the forward's log-sum-exp per query row, ``lse`` (Z, H, N) fp32 in
natural-log units (``attention(..., return_lse=True)`` stores it; torch SDPA's convention).

Three launches (the D=128 default, SPLIT_TAIL, adds two when the last wave is short: below):

1. ``attention_bwd_delta_kernel``: delta = rowsum(dO * O) per query row (fp32), the term dS needs, and
   lse in base 2 (and the fp32 dQ accumulator's rows zeroed: no fill launch); both into (Z*H, N padded to 4) arrays, so the main kernel's TMA tiles of them start
   16-byte aligned. The loader streams them into SMEM with Q_i and dO_i: loaded from global memory in
   the consumers, their pointers in the accumulator's column layout made ptxas spill 2.3 KB at D=128.
2. ``attention_bwd_kernel``: one CTA per block of BN = 128 K/V rows of one (batch, head), K/V-major
   (the FlashAttention-2/3 order): a TMA loader task brings K and V once and streams Q_i and dO_i of
   every query block through a ring; two consumer warp groups, 64 K/V rows each, recompute
   P^T = exp(K Q_i^T * scale - lse) and run the four wgmmas of dV, dP, dK in registers (dK, dV
   accumulate over the whole loop, so they are written once, with no atomics). Causal: the loop
   starts at the first query block that sees the K/V block (heaviest CTA first).
3. dQ: **atomics into an fp32 dQ**. Each group adds its partial dQ_i = dS_g K_g (64 x D) with
   ``tl.atomic_add`` (relaxed, already times ``sm_scale``) after every step; the host casts it. Chosen over
   a separate dQ pass (Q-major, as Triton's tutorial does) because that pass recomputes S and dP: two
   of the seven GEMMs again, ~30 % more tensor work; atomics cost L2 bandwidth instead (2 adds per
   dQ element per K/V block). ``DQ_SPLIT`` (D=128): each group instead computes 64 columns of dQ_i
   from both groups' dS (a named barrier per step, dS double-buffered): one add per element per K/V
   block, as FlashAttention-2 does. ``DQ_TMA`` = n (with DQ_SPLIT; the D=128 defaults): FlashAttention-3's
   way instead of the atomics: each (BM, 64) fp32 dQ tile goes to one of the group's n SMEM tiles and one
   TMA reduce-add (``cp.reduce.async.bulk.tensor``) adds it into dQ, so the adds leave the consumers'
   instruction stream (one bulk op per tile instead of 32 atomic instructions a thread); the tile is
   reused after ``async_descriptor_store_wait(n - 1)``.

``VARIANT_CONFIGS`` (D=128): the DQ_TMA form with fewer registers live across the exps (``DP_DELTA``, ``P_ROUND``:
its step loop about spill-free), with dS^T handed between the groups by arrive / wait pairs (``DQ_HANDOFF``), and
with group 1 staggered behind group 0 (``DQ_STAGGER``, a ping-pong); ``benchmarks/attention_bwd_variants_h200.py``
checks and times them. Two are the D=128 defaults (``default_for``): ``split_tail`` (below) non-causal, ``handoff``
causal.
``VARIANT_CONFIGS["split_tail"]`` (``SPLIT_TAIL``, non-causal): when the last wave is a small part of one, the plain
kernel runs all heads but the last few, whose K/V blocks a second launch splits over query blocks in one wave
(``tail_split``), the parts' dK, dV summed in fp32 (by TMA reduce-add through the DQ_TMA tiles) and cast by
``attention_bwd_tail_cast_kernel``.

>>> from tlx_workbench.kernels.attention_bwd import attention_with_grad     # on a Hopper GPU
>>> o, (dq, dk, dv) = attention_with_grad(q, k, v, do, causal=True)
"""
from __future__ import annotations

import math

import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from ..errors import TLXWorkbenchError
from ._common import KernelSpec, sm_count, torch_alloc
from .attention_bwd_configs import (CONFIGS, DEFAULTS, SIM_CONFIGS, VARIANT_CONFIGS,  # noqa: F401
                                    _config, configs_for, default_for,
                                    smem_bytes, suits)
from .attention_bwd_kernel import attention_bwd_delta_kernel, attention_bwd_kernel, attention_bwd_tail_cast_kernel
from .attention_configs import tail_plan
from .host import (LaunchPlans, TunedConfigs, config_key, fastest_first, kept_key, kernel_plan, operand_key,
                   tuned_config)

DELTA_BLOCK = 64


def _check(q, k, v, o, do, lse):
    from .attention import _check as check_qkv
    check_qkv(q, k, v)
    if o.shape != q.shape or do.shape != q.shape or o.dtype != q.dtype or do.dtype != q.dtype:
        raise TLXWorkbenchError(f"attention_backward needs o and do shaped and typed like q {tuple(q.shape)} "
                                f"{q.dtype}; got o {tuple(o.shape)} {o.dtype}, do {tuple(do.shape)} {do.dtype}",
                                file=__file__, hint="pass the forward's output and its gradient")
    if not (o.is_contiguous() and do.is_contiguous()):
        raise TLXWorkbenchError("attention_backward needs contiguous o and do", file=__file__,
                                hint="call .contiguous() first")
    import torch
    if tuple(lse.shape) != tuple(q.shape[:3]) or lse.dtype != torch.float32 or not lse.is_contiguous():
        raise TLXWorkbenchError(f"lse must be the forward's log-sum-exp, fp32 of shape {tuple(q.shape[:3])}; got "
                                f"{lse.dtype} {tuple(lse.shape)}", file=__file__,
                                hint="get it from attention(q, k, v, return_lse=True)")
    from ._common import check_aligned, check_same_device
    check_same_device(__file__, "attention_backward", q=q, o=o, do=do, lse=lse)
    check_aligned(__file__, "attention_backward", o=o, do=do, lse=lse)


def _n_pad(N):
    return -(-N // 4) * 4          # rows of the (Z*H, N_PAD) statistics start 16-byte aligned


def _kernel_call(q, k, v, do, lse2, delta, dq32, dk, dv, causal, sm_scale, cfg, tail=None):
    """The main kernel's positional arguments and its constexprs + launch options. ``lse2``, ``delta``:
    (Z*H, N_PAD) fp32, what ``attention_bwd_delta_kernel`` writes. ``tail``: SPLIT_TAIL's (fp32 partials,
    main CTAs, splits, query blocks a split), when there is a tail to split; without it the kernel is the
    plain one (a config's SPLIT_TAIL switch is dropped)."""
    Z, H, N, D = q.shape
    NP = _n_pad(N)
    rows = Z * H * N
    descs = (TensorDescriptor(q, [rows, D], [D, 1], [cfg["BM"], D]),
             TensorDescriptor(k, [rows, D], [D, 1], [64, D]),
             TensorDescriptor(v, [rows, D], [D, 1], [64, D]),
             TensorDescriptor(do, [rows, D], [D, 1], [cfg["BM"], D]),
             TensorDescriptor(k, [rows, D], [D, 1], [64, 64]),        # K's 64-column tiles (dQ)
             TensorDescriptor(lse2, [Z * H, NP], [NP, 1], [1, cfg["BM"]]),
             TensorDescriptor(delta, [Z * H, NP], [NP, 1], [1, cfg["BM"]]))
    # DQ_TMA: dQ's (BM, 64) fp32 reduce tiles (rows 512 bytes apart, column starts 256 bytes: TMA's 16-byte
    # alignment holds); None otherwise, a constexpr, so the atomics' configs compile as before
    desc_dq = TensorDescriptor(dq32, [rows, D], [D, 1], [cfg["BM"], 64]) if cfg.get("DQ_TMA") else None
    kw = {key: val for key, val in cfg.items() if key != "SPLIT_TAIL"}
    if tail is not None:
        part, main_ctas, splits, blocks = tail
        # the partials by TMA reduce-add: (2 * leftover * BN, D) fp32 in (64, 64) tiles
        part = TensorDescriptor(part, [part.numel() // D, D], [D, 1], [64, 64])
        kw.update(SPLIT_TAIL=True, dkv_tail_ptr=part, main_ctas=main_ctas, tail_splits=splits, tail_blocks=blocks)
    return (sm_scale, Z, H, N, *descs, dq32, dk, dv, desc_dq), dict(
        HEAD_DIM=D, CAUSAL=bool(causal), num_warps=4, num_stages=0, **kw)


def row_statistics(o, do, lse):
    """(delta, lse2) as the main kernel reads them, computed with torch (what ``attention_bwd_delta_kernel``
    computes): delta = rowsum(dO * O) and lse * log2(e), fp32 arrays of (Z*H, N padded to 4) rows."""
    import torch
    Z, H, N, D = o.shape
    NP = _n_pad(N)
    delta = torch.zeros((Z * H, NP), dtype=torch.float32, device=o.device)
    lse2 = torch.zeros((Z * H, NP), dtype=torch.float32, device=o.device)
    delta[:, :N] = (o.float() * do.float()).sum(-1).reshape(Z * H, N)
    lse2[:, :N] = lse.float().reshape(Z * H, N) * 1.4426950408889634
    return delta, lse2


def tail_split(Z, H, N, cfg, causal, num_sms):
    """SPLIT_TAIL's plan for one launch: (main CTAs, leftover K/V blocks, splits per leftover block, query blocks
    a split), or None when the config has no SPLIT_TAIL, the launch is causal, or splitting saves under a quarter
    of a wave (the parts' own cost, K/V loads, ring fill and drain, the partials' reduce-adds, measured about a
    fifth of a wave on the H200). The leftover is the last heads' blocks: the plain kernel runs the heads before
    them on its own 2-D grid (main CTAs = main heads x blocks a head), then one wave of parts (leftover x splits
    <= num_sms) takes the rest; the heads left over are the count that, by whole waves of equal CTAs, ends soonest.

    >>> tail_split(4, 32, 4096, _config(64, SPLIT_TAIL=True), False, 132)    # 32 waves -> 31 + a quarter
    (4064, 32, 4, 16)
    >>> tail_split(2, 32, 8192, _config(64, SPLIT_TAIL=True), False, 132)    # 32 waves -> 31 + a half
    (4032, 64, 2, 64)
    >>> tail_split(4, 32, 4096, _config(64, SPLIT_TAIL=True), False, 128)    # whole waves: nothing to split
    """
    if not cfg.get("SPLIT_TAIL") or causal:
        return None
    heads, n_kv, n_q = Z * H, triton.cdiv(N, cfg["BN"]), triton.cdiv(N, cfg["BM"])
    best = None
    for left_heads in range(1, heads):
        left = left_heads * n_kv
        if left > num_sms:
            break
        per = triton.cdiv(n_q, min(num_sms // left, n_q))          # query blocks a part
        waves = triton.cdiv((heads - left_heads) * n_kv, num_sms) + per / n_q
        if best is None or waves < best[0]:
            best = (waves, left_heads, triton.cdiv(n_q, per), per)
    if best is None or best[0] > triton.cdiv(heads * n_kv, num_sms) - 0.25:
        return None
    _, left_heads, splits, per = best
    return (heads - left_heads) * n_kv, left_heads * n_kv, splits, per


def _buffers(q, cfg, plan, dq32=None, dk=None, dv=None, stats=None):
    """The launch's fp32 row statistics (delta, lse2), dQ accumulator, dK, dV and SPLIT_TAIL's partials: the
    caller's where given, new ones otherwise; ``dq32`` zeroed by the delta kernel (here when ``stats`` are given)."""
    import torch
    Z, H, N, D = q.shape
    if stats is None:
        NP = _n_pad(N)
        # zeros, not empty, where there are pad columns (N..NP): the TMA loads of the last query block read them,
        # and garbage there (NaN in reused memory) reaches dK/dQ through 0 * NaN; the delta kernel writes the rest.
        # One allocation for both (each half starts 16-byte aligned: NP is a multiple of 4)
        both = (torch.zeros if NP != N else torch.empty)((2, Z * H, NP), dtype=torch.float32, device=q.device)
        delta, lse2 = both[0], both[1]
    else:
        delta, lse2 = stats
    if stats is None:           # the delta kernel zeroes dQ's accumulator as it reads the rows: no fill launch here
        dq32 = torch.empty(q.shape, dtype=torch.float32, device=q.device) if dq32 is None else dq32
    else:
        dq32 = torch.zeros(q.shape, dtype=torch.float32, device=q.device) if dq32 is None else dq32.zero_()
    dk = torch.empty(q.shape, dtype=q.dtype, device=q.device) if dk is None else dk
    dv = torch.empty(q.shape, dtype=q.dtype, device=q.device) if dv is None else dv
    part = None
    if plan is not None:
        part = torch.zeros((2, plan[1] * cfg["BN"], D), dtype=torch.float32, device=q.device)
    return delta, lse2, dq32, dk, dv, part


def _launches(q, k, v, o, do, lse, causal, sm_scale, cfg, plan, delta, lse2, dq32, dk, dv, part, stats_given):
    """Every kernel launch of one config, in order: [(kernel, grid, args, options, roles), ...]. ``roles``: per
    tensor argument, (index into (q, k, v, o, do, lse, delta, lse2, dq32, dk, dv, part), byte offset)."""
    Z, H, N, D = q.shape
    triton.set_allocator(torch_alloc)
    out = []
    if not stats_given:
        rows = Z * H * N
        out.append((attention_bwd_delta_kernel, (triton.cdiv(rows, DELTA_BLOCK),),
                    (o, do, lse, delta, lse2, dq32, rows, N, _n_pad(N)), dict(HEAD_DIM=D, BLOCK=DELTA_BLOCK),
                    [(3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 0)]))
    # desc_q, desc_k, desc_v, desc_do, desc_kc (K), desc_lse (lse2), desc_delta, dq_ptr, dk_ptr, dv_ptr[, desc_dq]
    roles = [(0, 0), (1, 0), (2, 0), (4, 0), (1, 0), (7, 0), (6, 0), (8, 0), (9, 0), (10, 0)] + \
        ([(8, 0)] if cfg.get("DQ_TMA") else [])
    if plan is None:
        args, options = _kernel_call(q, k, v, do, lse2, delta, dq32, dk, dv, causal, sm_scale, cfg)
        out.append((attention_bwd_kernel, (triton.cdiv(N, cfg["BN"]), Z * H), args, options, roles))
        return out
    # the plain kernel on the first heads, then the leftover heads' parts, then their cast: each launch is
    # given only the rows of dK, dV it writes (the main kernel the first heads', the cast the rest)
    main, left, splits, blocks = plan
    n_kv = triton.cdiv(N, cfg["BN"])
    row0 = (main // n_kv) * N
    dk_flat, dv_flat = dk.view(-1, D), dv.view(-1, D)
    args, options = _kernel_call(q, k, v, do, lse2, delta, dq32, dk_flat[:row0], dv_flat[:row0], causal, sm_scale,
                                 cfg)
    out.append((attention_bwd_kernel, (n_kv, main // n_kv), args, options, roles))
    args, options = _kernel_call(q, k, v, do, lse2, delta, dq32, dk_flat[:0], dv_flat[:0], causal, sm_scale,
                                 cfg, tail=(part, main, splits, blocks))
    # dk_ptr, dv_ptr: empty views (address 0) the parts never store through, kept as they are
    parts_roles = roles[:8] + [None, None] + roles[10:] + [(11, 0)]
    out.append((attention_bwd_kernel, (left * splits,), args, options, parts_roles))
    rows = 32
    at = row0 * D * dk.element_size()
    out.append((attention_bwd_tail_cast_kernel, (left, cfg["BN"] // rows),
                (part, dk_flat[row0:], dv_flat[row0:], N, main, left, row0),
                dict(HEAD_DIM=D, BN=cfg["BN"], ROWS=rows), [(11, 0), (9, at), (10, at)]))
    return out


class BackwardLaunchPlan:
    """One config's launches on an operand signature, each bound to its GPU launcher where it can be."""
    __slots__ = ("kernels", "tail", "cfg", "bound", "retry")

    def __init__(self, kernels, tail, cfg):
        self.kernels, self.tail, self.cfg = kernels, tail, cfg
        self.bound = kernels[0].bound if all(kp.bound is not None for kp in kernels) else None
        self.retry = any(kp.retry for kp in kernels)

    def ready(self) -> bool:
        if self.bound is None:
            return False
        for kp in self.kernels:
            if not kp.bound.ready():
                return False
        return True

    def launch(self, q, k, v, o, do, lse, bufs):
        ptrs = [t.data_ptr() if t is not None else 0 for t in (q, k, v, o, do, lse, *bufs)]
        for kp in self.kernels:
            kp.launch(*ptrs)


_launch_plans = LaunchPlans("attention_bwd.launch")


def _launch_key(q, k, v, o, do, lse, causal, sm_scale, cfg, dq32=None, dk=None, dv=None, stats=None, num_sms=None):
    given = tuple(t for t in (dq32, dk, dv, *(stats or ())) if t is not None)
    return (operand_key(q, k, v, o, do, lse), (dq32 is None, dk is None, dv is None, stats is None),
            operand_key(*given), bool(causal), sm_scale, config_key(cfg), num_sms)


def launch(q, k, v, o, do, lse, causal, sm_scale, cfg, dq32=None, dk=None, dv=None, stats=None, num_sms=None):
    """Run once with one explicit config; returns (dq, dk, dv). ``dq32``: the fp32 dQ accumulator
    (zeroed here; pass one to reuse its memory); ``dk``, ``dv``: where to write those (default: new);
    ``stats``: (delta, lse2) already computed (``row_statistics``): the delta kernel is then skipped.
    ``num_sms``: the SMs a SPLIT_TAIL config plans its last wave for (default: the GPU's). Planned: the first call
    with these operand shapes, strides, dtypes and config works the launches out and binds them; later ones
    launch at once."""
    Z, H, N, D = q.shape
    try:
        key = _launch_key(q, k, v, o, do, lse, causal, sm_scale, cfg, dq32, dk, dv, stats, num_sms)
    except (AttributeError, TypeError):
        key = None
    plan = _launch_plans.lookup(key) if key is not None else None
    if plan is None:
        tail = tail_split(Z, H, N, cfg, causal, num_sms or sm_count()) if cfg.get("SPLIT_TAIL") else None
        bufs = _buffers(q, cfg, tail, dq32, dk, dv, stats)
        steps = _launches(q, k, v, o, do, lse, causal, sm_scale, cfg, tail, *bufs, stats is not None)
        operands = (q, k, v, o, do, lse, *bufs)
        kernels = [kernel_plan(kern, grid, args, options, operands, roles)
                   for kern, grid, args, options, roles in steps]
        plan = _launch_plans.add(key, BackwardLaunchPlan(kernels, tail, cfg))
        if plan.bound is None:
            for kern, grid, args, options, _ in steps:
                kern[grid](*args, **options)
        else:
            plan.launch(q, k, v, o, do, lse, bufs)
    else:
        bufs = _buffers(q, cfg, plan.tail, dq32, dk, dv, stats)
        if plan.ready():
            plan.launch(q, k, v, o, do, lse, bufs)
        else:
            for kern, grid, args, options, _ in _launches(q, k, v, o, do, lse, causal, sm_scale, cfg, plan.tail,
                                                          *bufs, stats is not None):
                kern[grid](*args, **options)
    _, _, dq32, dk, dv, _ = bufs
    return dq32.to(q.dtype), dk, dv      # the kernel adds dQ already scaled: one cast here


launch.plans = _launch_plans


class BackwardPlan:
    """What ``attention_backward`` works out once per operand signature: the softmax scale, the config and the
    launch plan."""
    __slots__ = ("sm_scale", "config", "launch")

    def __init__(self, sm_scale, config, launch):
        self.sm_scale, self.config, self.launch = sm_scale, config, launch

    @property
    def bound(self):
        return self.launch.bound if self.launch is not None else None


_PLANS = LaunchPlans("attention_bwd.attention_backward")
_TUNED = TunedConfigs(_PLANS)


def attention_backward(q, k, v, o, do, lse, causal=False, sm_scale=None, config=None):
    """(dq, dk, dv) of attention's output o = softmax(q k^T * sm_scale [+ causal mask]) v, given the
    output gradient ``do`` and the forward's ``lse`` ((Z, H, N) fp32, natural log). The first call with an
    operand signature checks in full, tunes and plans (``attention_backward.plans``); later ones launch at once.
    Capturable in a CUDA graph once warm; under ``torch.compile`` an opaque custom op.

    >>> o, lse = attention(q, k, v, causal=True, return_lse=True)     # on a Hopper GPU
    >>> dq, dk, dv = attention_backward(q, k, v, o, do, lse, causal=True)
    """
    import torch
    if torch.compiler.is_compiling():
        from .torch_ops import attention_backward_op
        return attention_backward_op(q, k, v, o, do, lse, causal, sm_scale, config)
    try:
        key = (operand_key(q, k, v, o, do, lse), bool(causal), sm_scale, config_key(config))
    except (AttributeError, TypeError):
        key = None
    plan = _PLANS.lookup(key) if key is not None else None
    if plan is None:
        _check(q, k, v, o, do, lse)
        scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
        cfg = config
        if cfg is None:
            cfg = tuned_config(_TUNED, (tuple(q.shape), q.dtype, bool(causal)),
                               lambda: tune(q, k, v, o, do, lse, causal, scale, configs_for(q.shape[-1], causal)))
        out = launch(q, k, v, o, do, lse, causal, scale, cfg)
        lp = _launch_plans.plans.get(_launch_key(q, k, v, o, do, lse, causal, scale, cfg))
        _PLANS.add(kept_key(key, config), BackwardPlan(scale, cfg, lp))
        return out
    lp = plan.launch
    if lp is not None and lp.ready():          # the launch plan at once: no second key
        bufs = _buffers(q, plan.config, lp.tail)
        lp.launch(q, k, v, o, do, lse, bufs)
        _, _, dq32, dk, dv, _ = bufs
        return dq32.to(q.dtype), dk, dv
    out = launch(q, k, v, o, do, lse, causal, plan.sm_scale, plan.config)
    if lp is None:              # planned when the launch could not be bound: take its plan now, if kept
        plan.launch = _launch_plans.plans.get(_launch_key(q, k, v, o, do, lse, causal, plan.sm_scale, plan.config))
    return out


attention_backward.tuned = _TUNED
attention_backward.plans = _PLANS


def attention_with_grad(q, k, v, do, causal=False, sm_scale=None, config=None, fwd_config=None):
    """The library's forward, then its backward: returns (o, (dq, dk, dv)). Both planned; under
    ``torch.compile`` two custom ops (``attention_lse``, ``attention_backward``).

    >>> o, (dq, dk, dv) = attention_with_grad(q, k, v, torch.randn_like(q))      # on a Hopper GPU
    """
    from .attention import attention
    o, lse = attention(q, k, v, causal=causal, sm_scale=sm_scale, config=fwd_config, return_lse=True)
    return o, attention_backward(q, k, v, o, do, lse, causal=causal, sm_scale=sm_scale, config=config)


def tune(q, k, v, o, do, lse, causal, sm_scale, configs=CONFIGS):
    """Time every config; returns [(config, ms), ...] fastest first."""
    return fastest_first(configs, lambda c: launch(q, k, v, o, do, lse, causal, sm_scale, c))


def reference(q, k, v, do, causal=False, sm_scale=None):
    """(o, lse, dq, dk, dv) in float64 on the CPU, by torch autograd of the plain formula; o, dq, dk, dv
    cast back to q's dtype and device, lse fp32 (natural log). ``reference64`` keeps float64."""
    o, lse, dq, dk, dv = reference64(q, k, v, do, causal, sm_scale)
    back = lambda t: t.to(q.dtype).to(q.device)  # noqa: E731
    return back(o), lse.float().to(q.device), back(dq), back(dk), back(dv)


def reference64(q, k, v, do, causal=False, sm_scale=None, device="cpu"):
    """(o, lse, dq, dk, dv), all float64 on ``device`` (the CPU unless told): softmax(q k^T * sm_scale
    [+ mask]) v and its gradients for output gradient ``do`` (torch autograd).

    >>> o, lse, dq, dk, dv = reference64(q, k, v, do, causal=True)
    """
    import torch
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    qd, kd, vd = (t.detach().to(device, torch.float64).requires_grad_() for t in (q, k, v))
    s = (qd @ kd.transpose(-1, -2)) * sm_scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.exp(s - lse[..., None]) @ vd
    dq, dk, dv = torch.autograd.grad(o, (qd, kd, vd), do.detach().to(device, torch.float64))
    return o.detach(), lse.detach(), dq, dk, dv


def make_inputs(shape, dtype, device):
    """Fresh random (q, k, v, do) of ``shape`` = (Z, H, N, D)."""
    import torch
    return tuple(torch.randn(shape, dtype=dtype, device=device) for _ in range(4))


def flops(Z, H, N, D, causal=False):
    """Backward FLOPs (five GEMMs of 2 N^2 D each per head); half of it when causal."""
    f = 10.0 * Z * H * N * N * D
    return f / 2 if causal else f


def backward_inputs(shape, dtype, device, causal=False):
    """Fresh random (q, k, v, o, do, lse) of ``shape`` = (Z, H, N, D), what ``attention_backward`` takes: o and lse
    the forward's, by the library's forward on a GPU (its default config for the head dim and masking), in float64
    by torch on the CPU."""
    import torch
    dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    q, k, v, do = make_inputs(shape, dt, device)
    if str(device).startswith("cuda"):
        from .attention import DEFAULTS as FORWARD_DEFAULTS, attention
        o, lse = attention(q, k, v, causal, config=FORWARD_DEFAULTS[(shape[-1] <= 64, bool(causal))],
                           return_lse=True)
    else:
        o, lse, *_ = reference64(q, k, v, do, causal)
        o, lse = o.to(dt), lse.float()
    return q, k, v, o, do, lse


def backward_reference(q, k, v, o, do, lse, causal=False, sm_scale=None):
    """(dq, dk, dv) as ``attention_backward(q, k, v, o, do, lse)`` returns them, in float64 on the CPU by torch
    autograd (o and lse are the forward's, recomputed there), cast back to q's dtype and device."""
    return reference(q, k, v, do, causal, sm_scale)[2:]


def _offline_tail(cfg, causal, shape):
    """A SPLIT_TAIL config compiles (offline) in its parts form, the launch only it has (the main launch is the plain
    kernel; the parts' epilogue adds dK, dV by TMA reduce-add): one leftover block (the last of ``shape``) in two
    parts."""
    import torch
    if not cfg.get("SPLIT_TAIL") or causal:
        return None
    part = torch.empty((2, cfg["BN"], shape[-1]), dtype=torch.float32)
    blocks = triton.cdiv(shape[2], cfg["BN"]) * shape[0] * shape[1]
    return (part, blocks - 1, 2, triton.cdiv(triton.cdiv(shape[2], cfg["BM"]), 2))


def compile_offline(cfg, target="sm_90", dtype="float16", shape=(1, 2, 256, 128), causal=False):
    """Compile the main kernel (no launch) for ``target`` on any machine; returns Triton's CompiledKernel
    (a non-causal SPLIT_TAIL config: its parts form).

    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0                   # doctest: +SKIP
    True
    """
    import torch
    from ..target import offline
    dt = getattr(torch, dtype)
    with offline(target):
        q, k, v, do, dk, dv = (torch.empty(shape, dtype=dt) for _ in range(6))
        lse, delta = (torch.empty((shape[0] * shape[1], _n_pad(shape[2])), dtype=torch.float32) for _ in range(2))
        dq32 = torch.empty(shape, dtype=torch.float32)
        args, options = _kernel_call(q, k, v, do, lse, delta, dq32, dk, dv, causal, 0.1, cfg,
                                     tail=_offline_tail(cfg, causal, shape))
        return attention_bwd_kernel.warmup(*args, grid=(1,), **options)


def compile_report(cfg, target="sm_90", dtype="float16", shape=(1, 2, 256, 128), causal=False):
    """The workbench's CompileReport of the main kernel for one config, compiled offline (a non-causal SPLIT_TAIL
    config: its parts form)."""
    import torch
    from ..compiler import compile as wb_compile
    dt = getattr(torch, dtype)
    q, k, v, do, dk, dv = (torch.empty(shape, dtype=dt) for _ in range(6))
    lse, delta = (torch.empty((shape[0] * shape[1], _n_pad(shape[2])), dtype=torch.float32) for _ in range(2))
    dq32 = torch.empty(shape, dtype=torch.float32)
    args, options = _kernel_call(q, k, v, do, lse, delta, dq32, dk, dv, causal, 1 / math.sqrt(shape[-1]), cfg,
                                 tail=_offline_tail(cfg, causal, shape))
    return wb_compile(attention_bwd_kernel, *args, target=target, **options)


SPEC = KernelSpec(name="attention_bwd", kernel=attention_bwd_kernel, launch=attention_backward,
                  reference=backward_reference, configs=CONFIGS, sim_configs=SIM_CONFIGS, make_inputs=backward_inputs,
                  flops=flops, doc=__doc__)
