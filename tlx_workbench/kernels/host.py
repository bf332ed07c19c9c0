"""Host-side code the library kernels share: autotuning, the per-shape cache of tuned configs,
the GEMM entry point, TMA descriptors, offline compiles and the KernelSpec of a GEMM.

Each kernel module keeps what is its own: its ``@triton.jit`` kernel, its configs and its
``launch`` (grid, ``num_warps``, ``num_stages=0`` for hand-pipelined loops, persistent CTA
count). Everything here takes that launch as a callable, so a kernel always runs the way its
own module launches it.

>>> from tlx_workbench.kernels.host import tuned_config
>>> cache = {}
>>> tuned_config(cache, "key", lambda: [({"BM": 64}, 0.5), ({"BM": 128}, 0.7)])
{'BM': 64}
"""
from __future__ import annotations

import warnings
from typing import Callable

from triton.runtime.errors import OutOfResources
from triton.tools.tensor_descriptor import TensorDescriptor

from ..errors import TLXWorkbenchError
from ._common import KernelSpec, check_gemm_operands, gemm_flops, gemm_inputs, gemm_reference, raw_data_ptr


def fastest_first(configs, run: Callable, name: str | None = None) -> list:
    """Time ``run(cfg)`` for every config with the timing runner (``runtime.timing.time_call``: do_bench median,
    25 ms warm-up, 100 ms measured, L2 flushed); returns [(config, ms), ...] fastest first.

    A config the GPU cannot run (``OutOfResources``: more SMEM or registers than a CTA may have, which the
    modules' estimates are meant to rule out before this) is left out of the list with a warning naming it;
    when none runs, the error names them all.

    Under :func:`tlx_workbench.simulate` nothing can be timed: the list is the one config the simulation picks
    (``Simulation.pick_from``: its ``config=``, else the first, the launcher's default), its time NaN. ``name``:
    the launcher, for that pick's errors (default: the module ``run`` comes from).

    >>> fastest_first(CONFIGS, lambda cfg: launch(a, b, c, cfg))[0]    # doctest: +SKIP
    ({'BM': 128, ...}, 0.61)
    """
    from ..sim.api import active_simulation
    sim = active_simulation()
    if sim is not None:
        name = name or (getattr(run, "__module__", "") or "").rsplit(".", 1)[-1]
        return [(sim.pick_from(configs, name or "the launcher's tuner"), float("nan"))]
    from ..runtime.timing import time_call
    results, refused = [], []
    for cfg in configs:
        try:
            results.append((cfg, time_call(lambda: run(cfg), warmup=25, rep=100).median_ms))
        except OutOfResources as e:
            refused.append((cfg, e))
            warnings.warn(f"autotune: left out {cfg}: {e}", stacklevel=2)
    if not results:
        raise TLXWorkbenchError("autotune: no config runs on this GPU:" +
                                "".join(f"\n  {cfg}: {e}" for cfg, e in refused),
                                hint="pass config= with smaller blocks (BN, NUM_BUFS) or fewer buffers")
    return sorted(results, key=lambda r: r[1])


def kept_key(key, config):
    """The key an entry point keeps its plan under: None (nothing kept) where no config was given and a simulation
    picked one (``tuned_config``), as another ``simulate(config=...)`` picks another."""
    from ..sim.api import active_simulation
    return None if config is None and active_simulation() is not None else key


class TunedConfigs(dict):
    """A launcher's tuned configs by problem key (``tuned_config``'s cache), whose ``clear()`` also clears the
    launch plans made from them (``plans``), so the next call tunes again."""

    def __init__(self, *plans):
        super().__init__()
        self.plans = list(plans)

    def clear(self):
        super().clear()
        for p in self.plans:
            p.clear()


def tuned_config(cache: dict, key, tune: Callable):
    """The fastest config of ``tune()`` (a ``fastest_first`` list) for ``key``; tunes only the
    first time a key is seen, as a full tune costs seconds. Under a simulation the pick is the simulation's and
    is not kept (a later call on the GPU tunes).

    >>> tuned_config({}, (4096, 4096, 4096), lambda: [({"BM": 128}, 0.6)])
    {'BM': 128}
    """
    from ..sim.api import active_simulation
    if active_simulation() is not None:     # a simulated launch picks without timing: nothing to keep for the GPU
        return tune()[0][0]
    if key not in cache:
        cache[key] = tune()[0][0]
    return cache[key]


def _gemm_output(a, b):
    """An uninitialised C for A @ B."""
    import torch
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


# -- launch plans: what a launcher works out once per operand signature ---------------------------------------------



_DATA_PTR = None


def operand_key(*tensors) -> tuple:
    """What a launch plan depends on, per tensor: shape, strides, dtype, device and whether its address is 16-byte
    aligned (Triton specializes a kernel on it; TMA needs it). Raises AttributeError for a non-tensor, which sends
    the call to the full checks.

    >>> import torch
    >>> operand_key(torch.empty(4, 8))[0][:3]
    (torch.Size([4, 8]), (8, 1), torch.float32)
    """
    global _DATA_PTR
    if _DATA_PTR is None:
        _DATA_PTR = raw_data_ptr()
    return tuple((t.shape, t.stride(), t.dtype, t.device, not _DATA_PTR(t) & 15) for t in tensors)


def config_key(config) -> tuple | None:
    """A config dict as a hashable key part (None for "the tuned one"), in its own order: two equal dicts
    written in different orders are two keys, two plans of one launch (unsorted: sorting costs a call's time)."""
    return None if config is None else tuple(config.items())


class LaunchPlans:
    """A launcher's plans by key (``operand_key`` + what else the launch depends on): a plan is what one call
    works out before it can launch (full operand checks, the tuned config, the output's shape, the grid, the
    compiled kernel bound to its launcher), made on the first call with a key and reused by later ones, which
    then check no more than the key itself. ``hits`` and ``misses`` count lookups; past ``max_plans`` the
    oldest plan is dropped.

    >>> plans = LaunchPlans("demo")
    >>> plans.lookup(("k",)) is None, plans.add(("k",), "plan"), plans.lookup(("k",))
    (True, 'plan', 'plan')
    >>> plans.hits, plans.misses
    (1, 1)
    """

    def __init__(self, name: str, max_plans: int = 256):
        self.name = name
        self.max_plans = max_plans
        self.plans: dict = {}
        self.hits = 0
        self.misses = 0

    def lookup(self, key):
        plan = self.plans.get(key)
        if plan is None:
            self.misses += 1
        else:
            self.hits += 1
        return plan

    def add(self, key, plan):
        """Keep ``plan`` under ``key`` (unless it asks to be made again, ``plan.retry``); returns it."""
        if key is not None and not getattr(plan, "retry", False):
            if len(self.plans) >= self.max_plans:
                self.plans.pop(next(iter(self.plans)))
            self.plans[key] = plan
        return plan

    def clear(self):
        self.plans.clear()
        self.hits = self.misses = 0

    def __len__(self):
        return len(self.plans)

    def __repr__(self):
        fast = sum(getattr(p, "bound", None) is not None for p in self.plans.values())
        return (f"LaunchPlans({self.name}: {len(self)} plans, {fast} bound to their GPU launcher; "
                f"{self.hits} hits, {self.misses} misses)")

    def _repr_html_(self):
        import html
        rows = "".join(f"<tr><td><code>{html.escape(_key_text(k))}</code></td>"
                       f"<td>{'bound' if getattr(p, 'bound', None) is not None else 'Triton dispatch'}</td></tr>"
                       for k, p in list(self.plans.items())[:50])
        return (f"<div><b>{html.escape(self.name)}</b>: {len(self)} launch plans, {self.hits} hits, "
                f"{self.misses} misses<table><tr><th>key</th><th>launch</th></tr>{rows}</table></div>")


def _key_text(key) -> str:
    def part(x):
        if isinstance(x, tuple) and len(x) == 5 and hasattr(x[0], "numel"):
            shape, stride, dtype, device, aligned = x
            where = f"{device}{'' if aligned else ' unaligned'}"
            return f"{tuple(shape)}/{stride} {str(dtype).removeprefix('torch.')} {where}"
        if isinstance(x, tuple):
            return "(" + ", ".join(part(y) for y in x) + ")"
        return repr(x)
    return part(key)


class KernelPlan:
    """One kernel launch worked out for an operand signature and bound to its GPU launcher (``bound``; None:
    launch through ``kernel[grid]`` each time, e.g. on the CPU simulator). ``slots``: per tensor argument of the
    kernel (descriptor or pointer, in argument order), (i, offset): the address of the call's ``i``-th operand plus
    ``offset`` bytes, or (-1, address): a tensor the module keeps (a workspace), at its bind-time address.
    ``retry``: not bound for now only (GPU operands while the simulator, a launch recorder or ``through_dispatch()``
    holds the launch): such a plan is not kept, so a later call binds."""
    __slots__ = ("bound", "slots", "retry")

    def __init__(self, bound, slots=(), retry=False):
        self.bound = bound
        self.slots = tuple(slots)
        self.retry = retry

    def ready(self) -> bool:
        return self.bound is not None and self.bound.ready()

    def launch(self, *ptrs):
        """Launch on the operands at these addresses (in the order the plan was made with)."""
        self.bound(*[ptrs[i] + off if i >= 0 else off for i, off in self.slots])


def bound_launch(kernel, grid, args, options):
    """The GPU launch of ``kernel[grid](*args, **options)`` made once (``runtime.triton_launch.bind``), or None
    where it must go through Triton's dispatch each time (no GPU, the simulator, a launch recorder or hook)."""
    from ..runtime.triton_launch import bind
    return bind(kernel, grid, args, options)


def kernel_plan(kernel, grid, args, options, operands, roles=None) -> KernelPlan:
    """A :class:`KernelPlan` of ``kernel[grid](*args, **options)``, a launch on ``operands`` (the call's tensors,
    in the order later calls pass their addresses; None for one this launch lacks). ``roles``: per tensor slot of
    the kernel, in argument order, (operand index, byte offset) or None for a tensor the module keeps; by default
    the first slots are the operands, in order, and the rest kept. The roles are checked against the bind-time
    addresses: where they disagree the plan launches through Triton's dispatch, with a warning (a module's roles
    out of step with its kernel's arguments)."""
    bound = bound_launch(kernel, grid, args, options)
    if bound is None:
        from ..runtime.triton_launch import dispatch_is_triton
        on_gpu = any(getattr(t, "is_cuda", False) for t in operands)
        return KernelPlan(None, retry=on_gpu and not dispatch_is_triton(kernel))
    ptrs = [0 if t is None else t.data_ptr() for t in operands]
    if roles is None:
        roles = [(i, 0) for i in range(len(operands))] + [None] * (bound.nslots - len(operands))
    slots = []
    for role, at_bind in zip(roles, bound.bind_ptrs):
        if role is None:
            slots.append((-1, at_bind))
        elif ptrs[role[0]] + role[1] == at_bind:
            slots.append(role)
        else:
            break
    if len(slots) != bound.nslots or len(roles) != bound.nslots:
        import warnings
        warnings.warn(f"{kernel.fn.__name__}: the launch plan's operand roles do not match the kernel's tensor "
                      f"arguments ({len(roles)} roles, {bound.nslots} slots); launching through Triton's dispatch",
                      stacklevel=3)
        return KernelPlan(None)
    return KernelPlan(bound, slots)


def planned_gemm_launch(plans: LaunchPlans, launch_call: Callable, a, b, c, cfg, launch_kw: tuple):
    """``launch(a, b, c, cfg, **launch_kw)`` of a library GEMM through its plan: the first call with this key
    works out ``launch_call(a, b, c, cfg, **launch_kw)`` = (kernel, grid, args, options) and binds it; later
    calls with the same key launch the bound kernel at once. Without a bound launch (the CPU simulator, a launch
    recorder), every call launches ``kernel[grid](*args, **options)`` as worked out for it."""
    try:
        key = (operand_key(a, b, c), config_key(cfg), launch_kw)
    except (AttributeError, TypeError):
        key = None
    plan = plans.lookup(key) if key is not None else None
    if plan is None:
        kernel, grid, args, options = launch_call(a, b, c, cfg, **dict(launch_kw))
        plan = plans.add(key, kernel_plan(kernel, grid, args, options, (a, b, c)))
        if plan.bound is None:
            kernel[grid](*args, **options)
            return c
    if plan.bound is not None and plan.bound.ready():
        plan.launch(a.data_ptr(), b.data_ptr(), c.data_ptr())
        return c
    kernel, grid, args, options = launch_call(a, b, c, cfg, **dict(launch_kw))
    kernel[grid](*args, **options)
    return c


class GemmPlan:
    """What ``matmul(a, b)`` works out once per operand signature: the config and the output's shape, dtype and
    device (``c``), and the kernel plan of the launch."""
    __slots__ = ("config", "shape", "dtype", "device", "launch")

    def __init__(self, config, shape, dtype, device, launch):
        self.config, self.shape, self.dtype, self.device, self.launch = config, shape, dtype, device, launch

    @property
    def bound(self):
        return self.launch.bound if self.launch is not None else None


def gemm_entry_points(module: str, kernel, launch_call: Callable, kernel_call: Callable, configs, what: str,
                      op_name: str | None = None):
    """``launch``, ``matmul``, ``tune`` and ``compile_offline`` of a library GEMM module, built around what
    the module owns: its ``launch_call(a, b, c, cfg, **launch_kw)`` = (kernel, grid, args, options), the launch
    worked out (grid, CTA count), and ``kernel_call(a, b, c, cfg)``, the kernel's positional arguments and launch
    options (``num_warps``, ``num_stages=0``, constexprs) that ``compile_offline`` compiles with. ``module`` is the
    module's ``__name__``: errors and ``help()`` name its file, not this one.

    ``launch`` and ``matmul`` keep a plan per (operand shapes, strides, dtypes, alignment, device, config): the
    first call checks the operands in full, tunes, compiles and binds the kernel to its GPU launcher; a later call
    with the same key checks only the key and launches the bound kernel. ``op_name``: the ``torch.library``
    custom op ``matmul`` is under ``torch.compile`` (``kernels/torch_ops.py``).

    >>> launch, matmul, tune, compile_offline = gemm_entry_points(                 # doctest: +SKIP
    ...     __name__, gemm_ws_coop_kernel, _launch_call, _kernel_call, CONFIGS, "the cooperative kernel")
    """
    import sys
    kernel_file = sys.modules[module].__file__
    from .torch_ops import gemm_op
    compiled_op = gemm_op(op_name or module.rsplit(".", 1)[-1])
    launch_plans = LaunchPlans(f"{module.rsplit('.', 1)[-1]}.launch")
    matmul_plans = LaunchPlans(f"{module.rsplit('.', 1)[-1]}.matmul")
    tuned = TunedConfigs(matmul_plans)

    def launch(a, b, c, cfg, **launch_kw):
        return planned_gemm_launch(launch_plans, launch_call, a, b, c, cfg, tuple(sorted(launch_kw.items())))

    def matmul(a, b, config=None):
        import torch
        if torch.compiler.is_compiling():
            return compiled_op(a, b, config)
        try:
            key = (operand_key(a, b), config_key(config))
        except (AttributeError, TypeError):
            key = None
        plan = matmul_plans.lookup(key) if key is not None else None
        if plan is None:
            check_gemm_operands(kernel_file, a, b, need_tma=True)
            cfg = config
            if cfg is None:
                cfg = tuned_config(tuned, (a.shape[0], b.shape[1], a.shape[1], a.dtype), lambda: tune(a, b))
            c = _gemm_output(a, b)
            launch(a, b, c, cfg)
            key_c = (operand_key(a, b, c), config_key(cfg), ())
            plan = matmul_plans.add(kept_key(key, config),
                                    GemmPlan(cfg, c.shape, c.dtype, c.device, launch_plans.plans.get(key_c)))
            return c
        c = torch.empty(plan.shape, dtype=plan.dtype, device=plan.device)
        kp = plan.launch
        if kp is not None and kp.bound is not None and kp.bound.ready():
            kp.launch(a.data_ptr(), b.data_ptr(), c.data_ptr())
            return c
        launch(a, b, c, plan.config)
        if kp is None:          # planned when the launch could not be bound: take its plan now, if kept
            plan.launch = launch_plans.plans.get((operand_key(a, b, c), config_key(plan.config), ()))
        return c

    def tune(a, b, configs=configs):
        c = _gemm_output(a, b)
        return fastest_first(configs, lambda cfg: launch(a, b, c, cfg), module.rsplit(".", 1)[-1])

    def compile_offline(cfg, target="sm_90", dtype="float16", shape=(512, 512, 512)):
        import torch
        from ..target import offline
        M, N, K = shape
        dt = getattr(torch, dtype)
        with offline(target):
            a, b, c = torch.empty(M, K, dtype=dt), torch.empty(K, N, dtype=dt), torch.empty(M, N, dtype=dt)
            args, options = kernel_call(a, b, c, cfg)
            return kernel.warmup(*args, grid=(1,), **options)

    launch.__doc__ = f"""Run {what} once with one explicit config (no tuning) into ``c``; returns ``c``.
    Planned: the first call with these operand shapes, strides, dtypes and config works the launch out and binds
    it to the GPU launcher; later ones launch at once. Keyword arguments: those of the module's launch below.

    {launch_call.__doc__ or ""}"""
    matmul.__doc__ = f"""C = A @ B with {what}: fp16/bf16, row-major, K and N multiples of 8.

    ``config``: one dict of ``CONFIGS``; by default the fastest config for this (M, N, K,
    dtype) is found once with ``tune`` and remembered (in ``matmul.tuned``). The first call with an operand
    signature checks the operands in full and plans the launch (``matmul.plans``); a repeated call costs about
    what ``torch.matmul``'s host side does. Capturable in a CUDA graph once warm (tuned); under
    ``torch.compile`` it is an opaque custom op.

    >>> c = matmul(a, b)     # a: (M, K), b: (K, N) on a Hopper GPU
    """
    matmul.tuned = tuned
    matmul.plans = matmul_plans
    launch.plans = launch_plans
    tune.__doc__ = "Time every config on (a, b) (``fastest_first``); returns [(config, ms), ...] fastest first."
    compile_offline.__doc__ = f"""Compile (no launch) for ``target`` on any machine, on empty operands of
    ``shape`` = (M, N, K); returns Triton's CompiledKernel.

    >>> from {module} import SIM_CONFIGS, compile_offline
    >>> compile_offline(SIM_CONFIGS["tiny"]).metadata.shared > 0
    True
    """
    for fn in (launch, matmul, tune, compile_offline):
        fn.__module__, fn.__qualname__ = module, fn.__name__
    return launch, matmul, tune, compile_offline


def gemm_descriptors(a, b, c, a_block, b_block, c_block) -> tuple:
    """Host TMA descriptors of row-major A (M, K), B (K, N) and C (M, N), with the block
    shapes the kernel loads (A, B) and stores (C).

    >>> a_d, b_d, c_d = gemm_descriptors(a, b, c, [64, 64], [64, 256], [64, 64])   # doctest: +SKIP
    """
    M, K = a.shape
    N = b.shape[1]
    return (TensorDescriptor(a, [M, K], [K, 1], a_block),
            TensorDescriptor(b, [K, N], [N, 1], b_block),
            TensorDescriptor(c, [M, N], [N, 1], c_block))


def tma_gemm_call(descriptors, cfg, num_sms=132):
    """Positional arguments and launch options of a warp-specialized library GEMM kernel
    (``a_desc, b_desc, c_desc, M, N, K``): NUM_SMS is the persistent tile stride (132, an
    H100/H200's SM count, for offline compiles), 4 warps per warp group, and num_stages=0, as
    the kernel pipelines its loops by hand.

    >>> args, options = tma_gemm_call(make_descriptors(a, b, c, cfg), cfg)     # doctest: +SKIP
    """
    a_d, b_d, c_d = descriptors
    M, K = a_d.shape
    N = b_d.shape[1]
    return (a_d, b_d, c_d, M, N, K), dict(NUM_SMS=num_sms, num_warps=4, num_stages=0, **cfg)


def gemm_spec(name: str, kernel, matmul: Callable, configs, sim_configs, doc: str) -> KernelSpec:
    """The :class:`KernelSpec` of a library GEMM: float64 reference, random (a, b), 2 M N K flops.

    >>> gemm_spec("gemm_ws", gemm_ws_coop_kernel, matmul, CONFIGS, SIM_CONFIGS, __doc__)   # doctest: +SKIP
    """
    return KernelSpec(name=name, kernel=kernel, launch=matmul, reference=gemm_reference, configs=configs,
                      sim_configs=sim_configs, make_inputs=gemm_inputs, flops=gemm_flops, doc=doc)
