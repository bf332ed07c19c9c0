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
  loaded while this one finishes, and the O store is not waited for. 2-3 % faster than the plain
  grid at D=128 fp16, a tie in bf16.
* non-causal default, ``SPLIT_TAIL`` (persistent): a last wave of at most half the SMs (4096 tiles on
  132 SMs leave 4) is not a wave of its own: those tiles are split over K/V across the SMs and merged
  by two small Triton kernels (``tail_plan``): 1.003-1.022x the persistent kernel in fp16 at D=128,
  N=4096/8192, a tie in bf16 (2026-12-02, benchmarks/RESULTS.md).
* causal default, ``ZIGZAG`` (persistent): each CTA walks pairs of query tiles, the heaviest and
  the lightest causal block of one head, so every pair has the same work and a wave's K/V stays
  within a few heads (the earlier heavy-first order spanned every head and lost 12 %):
  1.08-1.10x SDPA at D=128 vs 1.03-1.05x for the plain grid.
* D=64 default: three consumer groups (``GROUPS=3``, BM=192, 160 registers each) take the GEMM
  turn in a ring, so each group's softmax hides behind two other groups' GEMMs: 1.04-1.11x SDPA
  vs 0.92-0.95x with two groups. ``configs_for(64)`` lists it first; it would spill
  registers at D=128.
* causal D=64 default: the zig-zag persistent kernel with two groups and the softmax pinned under
  the P V wgmma (``PIN_SOFTMAX`` + ``P_LATE``, below): 1.00x SDPA in fp16 vs 0.96-0.97x for three
  groups; in bf16 the three-group zig-zag is faster (0.96x vs 0.91x), and ``attention()`` autotunes
  over both.
* the levers measured slower or level on the H200 and H100 are not in the kernel (benchmarks/RESULTS.md,
  attention forward, levers measured, names the commit each was measured at); ``PIN_SOFTMAX`` and ``P_LATE``
  stay because the causal D=64 default uses them (at D=128 they lost 2-7 %).
* the epilogue normalises O with one reciprocal per row and a multiply per element, not a division per element
  (``_normalised``: 169 SASS instructions per group and tile at D=128 instead of 601; +0.5 to +1 % non-causal).
* what ptxas overlaps: in SASS the wait for the P V wgmma sits *above* the softmax written under it
  (ptxas moves a wait that has no inputs; ``report.wgmma_overlap`` shows it: 0 of 66 exp2 per step
  run under P V). ``PIN_SOFTMAX`` keeps them there with a store that never happens and needs all of
  them. Slower at D=128 all the same: the other group's GEMMs already hide the softmax (ping-pong).

Shapes: q, k, v (Z, H, N, D), D in {64, 128}, fp16 or bf16, any N.

In parts: this module is the host side (checks, descriptors, launch, tuning, reference, offline
compile) and the public face (every name below is importable from here);
``attention_configs.py`` holds the configs and the switches' meaning; ``attention_kernel.py`` the
device code, both kernels and their tasks' device functions in one file (the compile report maps
lines within the kernel's file).

>>> from tlx_workbench.kernels.attention import attention      # on a Hopper GPU
>>> o = attention(q, k, v, causal=True)
"""
from __future__ import annotations

import math

import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from ..errors import TLXWorkbenchError
from ._common import KernelSpec, check_aligned, check_same_device, persistent_ctas, sm_count, torch_alloc
from .attention_configs import (CONFIGS, DEFAULTS, SIM_CONFIGS, TAIL_BN, _PERSISTENT, _PERSISTENT_TAIL,  # noqa: F401
                                _THREE_GROUPS, _ZIGZAG, _ZIGZAG_PINNED, _config, configs_for, persistent_schedule,
                                smem_bytes, suits, tail_plan)
from .attention_kernel import (LOG2E, TURN_0, TURN_1, TURN_2, _attend, _kv_step, _online_softmax,  # noqa: F401
                               _pass_turn, _persistent_consumer, _persistent_loader, _tile_at, _tile_coords,
                               _wait_turn, _walk, attention_fwd_kernel, attention_fwd_persistent_kernel,
                               attention_tail_merge_kernel, attention_tail_split_kernel)
from .host import (LaunchPlans, TunedConfigs, config_key, fastest_first, kept_key, kernel_plan, operand_key,
                   tuned_config)


def _descriptors(q, k, v, o, cfg):
    Z, H, N, D = q.shape
    rows = Z * H * N
    half = cfg["BM"] // cfg.get("GROUPS", 2)
    return (TensorDescriptor(q, [rows, D], [D, 1], [half, D]),
            TensorDescriptor(k, [rows, D], [D, 1], [cfg["BN"], D]),
            TensorDescriptor(v, [rows, D], [D, 1], [cfg["BN"], D]),
            TensorDescriptor(o, [o.numel() // D, D], [D, 1], [half, D]))    # o: all rows, or SPLIT_TAIL's first


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
    check_same_device(__file__, "attention", q=q, k=k, v=v)
    check_aligned(__file__, "attention", q=q, k=k, v=v)


def _kernel_call(q, k, v, o, causal, sm_scale, cfg, num_sms, lse=None, main_tiles=None):
    """The kernel a config runs, its positional arguments and its constexprs + launch options
    (the persistent form also takes NUM_SMS; num_stages=0: the loops are pipelined by hand).
    ``lse``: an fp32 (Z, H, N) tensor the kernel stores each row's log-sum-exp in (STORE_LSE, for the
    backward pass); without it the kernel is compiled exactly as before (PTX unchanged)."""
    Z, H, N, D = q.shape
    dq, dk, dv, do = _descriptors(q, k, v, o, cfg)
    # a causal launch drops SPLIT_TAIL (below: launch plans no tail)
    kw = {key: val for key, val in cfg.items() if key not in ("PERSISTENT", "SPLIT_TAIL")}
    kernel = attention_fwd_kernel
    if cfg.get("PERSISTENT"):
        kernel, kw = attention_fwd_persistent_kernel, dict(kw, NUM_SMS=num_sms)
    if main_tiles is not None:      # SPLIT_TAIL with a tail to split (else the plain persistent kernel)
        kw = dict(kw, SPLIT_TAIL=True, main_tiles=main_tiles)
    if lse is not None:
        kw = dict(kw, STORE_LSE=True, lse_ptr=lse)
    return kernel, (sm_scale, Z, H, N, dq, dk, dv, do, o), dict(
        HEAD_DIM=D, CAUSAL=causal, EVEN_M=(N % cfg["BM"] == 0), num_warps=4, num_stages=0, **kw)


def _schedule(q, causal, cfg, num_sms=None):
    """How one config runs on q's shape: (grid, NUM_SMS, tail) with tail = SPLIT_TAIL's (main tiles, leftover
    tiles, splits, chunk, first leftover row) or None."""
    Z, H, N, D = q.shape
    tiles_m = triton.cdiv(N, cfg["BM"])
    if not cfg.get("PERSISTENT"):
        return (tiles_m, Z * H), num_sms, None
    num_sms = num_sms or sm_count()
    pairs = -(-tiles_m * Z * H // 2)
    if cfg.get("ZIGZAG") and pairs > num_sms:
        # the fewest CTAs for as many waves; NUM_SMS, the walk's stride, is then the grid (within one wave it
        # stays the SM count, so every small problem shares one compiled kernel), as for the GEMMs
        num_sms = persistent_ctas(pairs, num_sms)
    grid = (min(num_sms, tiles_m * Z * H),)
    if cfg.get("SPLIT_TAIL") and not causal:
        main_tiles, left, splits, chunk = tail_plan(tiles_m * Z * H, grid[0], N)
        if left:
            # the leftover tiles are the last ones, so their rows are the last rows of (Z*H*N, D): the persistent
            # kernel gets the rows before them, the merge the rest (each launch writes the whole of what it is given)
            row0 = (main_tiles // tiles_m) * N + (main_tiles % tiles_m) * cfg["BM"]
            return grid, num_sms, (main_tiles, left, splits, chunk, row0)
    return grid, num_sms, None


def _scratch(q, cfg, tail):
    """SPLIT_TAIL's per-launch fp32 partials (part_o, part_ml) for ``tail``, or (None, None)."""
    import torch
    if tail is None:
        return None, None
    _, left, splits, _, _ = tail
    BM, D = cfg["BM"], q.shape[-1]
    return (torch.empty((left * splits, BM, D), dtype=torch.float32, device=q.device),
            torch.empty((left * splits, 2, BM), dtype=torch.float32, device=q.device))


def _launches(q, k, v, o, causal, sm_scale, cfg, num_sms=None, lse=None, part_o=None, part_ml=None):
    """Every kernel launch of one config, in order: [(kernel, grid, args, options, roles), ...]. ``roles``: per
    tensor argument, (index into (q, k, v, o, lse, part_o, part_ml), byte offset), what a launch plan rebinds."""
    Z, H, N, D = q.shape
    triton.set_allocator(torch_alloc)
    grid, num_sms, tail = _schedule(q, causal, cfg, num_sms)
    o_main, lse_main = o, lse
    if tail is not None:
        main_tiles, left, splits, chunk, row0 = tail
        o_main = o.view(-1, D)[:row0]
        lse_main = None if lse is None else lse.view(-1)[:row0]
    kernel, args, options = _kernel_call(q, k, v, o_main, causal, sm_scale, cfg, num_sms, lse_main,
                                         main_tiles if tail is not None else None)
    # desc_q, desc_k, desc_v, desc_o, o_ptr[, lse_ptr]
    roles = [(0, 0), (1, 0), (2, 0), (3, 0), (3, 0)] + ([(4, 0)] if lse is not None else [])
    out = [(kernel, grid, args, options, roles)]
    if tail is not None:
        tiles_m = triton.cdiv(N, cfg["BM"])
        out.append((attention_tail_split_kernel, (left, splits),
                    (sm_scale, q, k, v, part_o, part_ml, N, tiles_m, main_tiles, chunk),
                    dict(HEAD_DIM=D, BM=cfg["BM"], BN=TAIL_BN, num_warps=8),
                    [(0, 0), (1, 0), (2, 0), (5, 0), (6, 0)]))
        o_tail = o.view(-1, D)[row0:]
        lse_tail = None if lse is None else lse.view(-1)[row0:]
        rows = 2       # rows a merge program: (splits, 2, D) fp32 partials in flight at once, 256 programs at 4 x 32
        out.append((attention_tail_merge_kernel, (left, cfg["BM"] // rows),
                    (o_tail, part_o, part_ml, lse_tail, N, tiles_m, main_tiles, splits, row0),
                    dict(HEAD_DIM=D, BM=cfg["BM"], ROWS=rows, SPLITS=triton.next_power_of_2(splits),
                         STORE_LSE=lse is not None, num_warps=4),
                    [(3, row0 * D * o.element_size()), (5, 0), (6, 0)]
                    + ([(4, row0 * lse.element_size())] if lse is not None else [])))
    return out


class AttentionLaunchPlan:
    """One config's launches on an operand signature, each bound to its GPU launcher where it can be, and the
    shapes of SPLIT_TAIL's partials (allocated per call)."""
    __slots__ = ("kernels", "scratch", "bound", "retry")

    def __init__(self, kernels, scratch):
        self.kernels = kernels
        self.scratch = scratch
        self.bound = kernels[0].bound if all(kp.bound is not None for kp in kernels) else None
        self.retry = any(kp.retry for kp in kernels)

    def ready(self) -> bool:
        if self.bound is None:
            return False
        for kp in self.kernels:
            if not kp.bound.ready():
                return False
        return True

    def launch(self, q, k, v, o, lse):
        ptrs = [q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), 0 if lse is None else lse.data_ptr()]
        if self.scratch:        # SPLIT_TAIL's partials: allocated per call, alive until the launches are queued
            import torch
            parts = [torch.empty(shape, dtype=torch.float32, device=q.device) for shape in self.scratch]
            ptrs += [p.data_ptr() for p in parts]
        for kp in self.kernels:
            kp.launch(*ptrs)


_launch_plans = LaunchPlans("attention.launch")


def _launch_key(q, k, v, o, lse, causal, sm_scale, cfg, num_sms):
    return (operand_key(q, k, v, o) + (() if lse is None else operand_key(lse)), bool(causal), sm_scale,
            config_key(cfg), num_sms)


def launch(q, k, v, o, causal, sm_scale, cfg, num_sms=None, lse=None):
    """Run once with one explicit config; writes and returns ``o``. ``num_sms``: the SMs a PERSISTENT
    config's CTAs may take (default: all; one CTA per SM); a ZIGZAG walk starts the fewest that need no
    more waves (``persistent_ctas``). ``lse``: an fp32 (Z, H, N) tensor that also receives each query
    row's log-sum-exp (natural log), for the backward pass. Planned: the first call with these operand shapes,
    strides, dtypes and config works the launches out and binds them; later ones launch at once."""
    try:
        key = _launch_key(q, k, v, o, lse, causal, sm_scale, cfg, num_sms)
    except (AttributeError, TypeError):
        key = None
    plan = _launch_plans.lookup(key) if key is not None else None
    if plan is None:
        _, _, tail = _schedule(q, causal, cfg, num_sms)
        part_o, part_ml = _scratch(q, cfg, tail)
        steps = _launches(q, k, v, o, causal, sm_scale, cfg, num_sms, lse, part_o, part_ml)
        operands = (q, k, v, o, lse, part_o, part_ml)
        kernels = [kernel_plan(kern, grid, args, options, operands, roles)
                   for kern, grid, args, options, roles in steps]
        scratch = [] if part_o is None else [tuple(part_o.shape), tuple(part_ml.shape)]
        plan = _launch_plans.add(key, AttentionLaunchPlan(kernels, scratch))
        if plan.bound is None:
            for kern, grid, args, options, _ in steps:
                kern[grid](*args, **options)
            return o
    if plan.ready():
        plan.launch(q, k, v, o, lse)
        return o
    _, _, tail = _schedule(q, causal, cfg, num_sms)
    part_o, part_ml = _scratch(q, cfg, tail)
    for kern, grid, args, options, _ in _launches(q, k, v, o, causal, sm_scale, cfg, num_sms, lse, part_o, part_ml):
        kern[grid](*args, **options)
    return o


launch.plans = _launch_plans


class AttentionPlan:
    """What ``attention(q, k, v)`` works out once per operand signature: the softmax scale, the config, the
    output's shape, dtype and device, and the launch plan."""
    __slots__ = ("sm_scale", "config", "shape", "dtype", "device", "launch")

    def __init__(self, sm_scale, config, shape, dtype, device, launch):
        self.sm_scale, self.config, self.shape, self.dtype, self.device = sm_scale, config, shape, dtype, device
        self.launch = launch

    @property
    def bound(self):
        return self.launch.bound if self.launch is not None else None


_PLANS = LaunchPlans("attention.attention")
_TUNED = TunedConfigs(_PLANS)


def attention(q, k, v, causal=False, sm_scale=None, config=None, return_lse=False):
    """softmax(q k^T * sm_scale [+ causal mask]) v for q, k, v of shape (Z, H, N, D).
    ``return_lse``: also return each query row's log-sum-exp of the scaled scores, (Z, H, N) fp32,
    natural log (what ``attention_bwd.attention_backward`` takes). The first call with an operand signature
    checks in full, tunes and plans the launch (``attention.plans``); a repeated call costs about what SDPA's
    host side does. Capturable in a CUDA graph once warm; under ``torch.compile`` an opaque custom op.

    >>> o = attention(q, k, v, causal=True)        # fp16/bf16 on a Hopper GPU, D in {64, 128}
    >>> o, lse = attention(q, k, v, return_lse=True)
    """
    import torch
    if torch.compiler.is_compiling():
        from .torch_ops import attention_op
        return attention_op(q, k, v, causal, sm_scale, config, return_lse)
    try:
        key = (operand_key(q, k, v), bool(causal), sm_scale, config_key(config), bool(return_lse))
    except (AttributeError, TypeError):
        key = None
    plan = _PLANS.lookup(key) if key is not None else None
    if plan is None:
        _check(q, k, v)
        scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)
        cfg = config
        if cfg is None:
            cfg = tuned_config(_TUNED, (tuple(q.shape), q.dtype, bool(causal)),
                               lambda: tune(q, k, v, causal, scale, configs_for(q.shape[-1], causal, q.shape[2])))
        o = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if return_lse else None
        launch(q, k, v, o, causal, scale, cfg, lse=lse)
        lp = _launch_plans.plans.get(_launch_key(q, k, v, o, lse, causal, scale, cfg, None))
        _PLANS.add(kept_key(key, config), AttentionPlan(scale, cfg, o.shape, o.dtype, o.device, lp))
        return (o, lse) if return_lse else o
    o = torch.empty(plan.shape, dtype=plan.dtype, device=plan.device)
    lse = torch.empty(plan.shape[:3], dtype=torch.float32, device=plan.device) if return_lse else None
    lp = plan.launch
    if lp is not None and lp.ready():
        lp.launch(q, k, v, o, lse)
    else:
        launch(q, k, v, o, causal, plan.sm_scale, plan.config, lse=lse)
        if lp is None:          # planned when the launch could not be bound: take its plan now, if kept
            lkey = _launch_key(q, k, v, o, lse, causal, plan.sm_scale, plan.config, None)
            plan.launch = _launch_plans.plans.get(lkey)
    return (o, lse) if return_lse else o


attention.tuned = _TUNED
attention.plans = _PLANS


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

    >>> r = compile_report(_PERSISTENT_TAIL)                   # doctest: +SKIP
    >>> [a.code for a in r.ptxas_advisories]                 # doctest: +SKIP
    []
    """
    import torch
    from ..compiler import compile as wb_compile
    dt = getattr(torch, dtype)
    q, k, v, o = (torch.empty(shape, dtype=dt) for _ in range(4))
    kernel, args, options = _kernel_call(q, k, v, o, causal, 1 / math.sqrt(shape[-1]), cfg, 132)
    return wb_compile(kernel, *args, target=target, **options)


SPEC = KernelSpec(name="attention", kernel=attention_fwd_kernel, launch=attention, reference=reference,
                  configs=CONFIGS, sim_configs=SIM_CONFIGS, make_inputs=make_inputs, flops=flops, doc=__doc__)
