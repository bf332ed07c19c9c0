"""Every touch of Triton's non-public launcher and CompiledKernel internals, in one place
(tests/runtime/test_triton_launch.py fails loudly when Triton changes them; pinned to triton 3.8).

What it is for: (1) the library launchers' bound launches (``BoundLaunch``, below): a compiled kernel launched
through its own CUDA launcher, without Triton's JIT dispatch, once a launch plan has worked the launch out;
(2) a kernel compiled as *one* CTA, launched in clusters of ``n`` CTAs
(``kernels/gemm_cluster.py``: uTLX cannot arrive at a peer CTA's barrier, and compiling with
``num_ctas=2`` splits every layout over the pair). Triton's CUDA launcher already launches
clusters: it starts ``gridX * num_ctas`` CTAs in clusters of ``num_ctas`` (``driver.c``) and
sizes the per-CTA scratch by it. A ``CompiledKernel`` holds that number in three places, all
private, and all three must agree:

* ``metadata.num_ctas`` (a namedtuple field): what its launcher is made from;
* ``packed_metadata``: ``backend.pack_metadata(metadata)``, handed to every launch;
* ``_run``: the launcher, made from ``metadata`` by ``_init_handles`` on first load (so a
  kernel already loaded needs a new one).

It sits in ``runtime/`` beside the GPU launch it changes (the interpreter's internals are
``sim/interp_adapter.py``'s, the ptxas step's ``compiler/triton_ptxas.py``'s): one adapter
per Triton subsystem, each in the package that uses it.

>>> k = launch_in_clusters(kernel.warmup(*args, grid=(g,), **opts), 2)   # doctest: +SKIP
>>> kernel[(g,)](*args, **opts)                     # 2 * g CTAs, in clusters of 2
"""
from __future__ import annotations

from triton import knobs as _knobs
from triton.runtime.jit import JITFunction as _JITFunction


def cluster_size(compiled) -> int:
    """CTAs per cluster that ``compiled`` (a CompiledKernel) launches with."""
    return int(getattr(compiled.metadata, "num_ctas", 1))


def launch_in_clusters(compiled, num_ctas: int):
    """Make Triton launch ``compiled`` (a CompiledKernel compiled as one CTA) in clusters of
    ``num_ctas``: a launch over ``grid`` then starts ``num_ctas * grid[0]`` CTAs. The kernel
    must be written for it (it finds its peer through ``%cluster_ctarank``); nothing here checks
    that. Returns ``compiled``, changed in place (Triton's JIT cache serves this same object to
    later launches)."""
    from triton.compiler.compiler import make_backend

    compiled.metadata = compiled.metadata._replace(num_ctas=num_ctas)
    compiled.packed_metadata = make_backend(compiled.metadata.target).pack_metadata(compiled.metadata)
    if compiled.module is not None:      # already loaded: its launcher was made for the old count
        import triton
        compiled._run = triton.runtime.driver.active.launcher_cls(compiled.src, compiled.metadata)
    return compiled


# -- the bound launch: a compiled kernel launched without Triton's JIT dispatch ------------------------------------
#
# ``kernel[grid](*args, **options)`` costs tens of microseconds of Python before the GPU sees anything:
# ``JITFunction.run`` binds and specializes every argument, hashes the key, looks the kernel up, builds the launch
# metadata, and the CUDA launcher then encodes every TMA descriptor (``cuTensorMapEncodeTiled``) again. A library
# launcher called with the same shapes, strides and dtypes again gets the same compiled kernel, grid, constexprs
# and descriptor geometry every time; only the operands' addresses change. ``BoundLaunch`` keeps all of that and
# hands Triton's C launch function (what ``CudaLauncher`` ends in) the argument list Triton itself would have
# made, with the addresses and the tensor maps of this call put in. The list is made once, at bind time, by
# Triton's own ``wrap_handle_tensordesc`` (so its layout is Triton's); tensor maps come from Triton's own
# ``make_tensordesc_arg`` and are kept per (descriptor, address).

_TRITON_RUN = [None]       # Triton's own JITFunction.run, once seen


# whose JITFunction.run launches as Triton does: Triton's own, and uTLX's, which only turns a ``ctas_per_cga``
# option into ``num_ctas`` and hands over to Triton's (utlx_plugin/_ctas_per_cga.py; a bound launch refuses that
# option, so what reaches Triton is the same)
_DISPATCHERS = {("triton.runtime.jit", "JITFunction.run"), ("utlx_plugin._ctas_per_cga", "install.<locals>._run")}


def _is_tritons(run) -> bool:
    """Whether ``run`` is Triton's own ``JITFunction.run`` (or uTLX's wrapper of it), not the simulator's or a
    recorder's, which replace it on the class for a while: what was in place when this module was imported need
    not be Triton's."""
    if (getattr(run, "__module__", None), getattr(run, "__qualname__", None)) in _DISPATCHERS:
        _TRITON_RUN[0] = run
        return True
    return False


def _knob_state():
    """The knobs that change what JITFunction.run compiles or calls around a launch: a bound launch stands in
    for it only while they are as they were at bind time (debug, instrumentation, a pass-pipeline hook) or unset
    (launch hooks: the watchdog's, a profiler's)."""
    return (bool(_knobs.runtime.debug), _knobs.compilation.instrumentation_mode,
            _knobs.runtime.add_stages_inspection_hook)


def _hooks_idle() -> bool:
    knobs = _knobs
    for hook in (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


_DISPATCH_ONLY = [0]       # > 0 inside ``through_dispatch()``


def dispatch_is_triton(jit) -> bool:
    """True when ``jit[grid](...)`` would reach Triton's own ``JITFunction.run``: nothing (the simulator, a
    launch recorder, the notebook's launch capture) has put another ``run`` in place, on the class or on this
    kernel, and no launch hook is set. Only then may a :class:`BoundLaunch` launch in its place (and not inside
    ``through_dispatch()``)."""
    run = _JITFunction.__dict__.get("run")
    return (not _DISPATCH_ONLY[0] and (run is _TRITON_RUN[0] or _is_tritons(run)) and "run" not in jit.__dict__
            and _hooks_idle())


class through_dispatch:
    """Within this block every launch goes through ``kernel[grid](...)`` (Triton's JIT dispatch), none through a
    bound launch: to compare the two, or to time what the dispatch costs.

    >>> with through_dispatch():                 # doctest: +SKIP
    ...     c = gemm_ws.matmul(a, b)
    """

    def __enter__(self):
        _DISPATCH_ONLY[0] += 1
        return self

    def __exit__(self, *exc):
        _DISPATCH_ONLY[0] -= 1
        return False


class _Address:
    """What ``make_tensordesc_arg`` reads a descriptor's base through: ``base.data_ptr()``."""
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class _DescriptorSlot:
    """One TMA descriptor argument: its geometry fixed, its tensor map made once per base address."""
    __slots__ = ("pos", "proto", "meta", "maps")
    MAX_MAPS = 16          # addresses remembered per descriptor (the allocator hands out a few, in turn)

    def __init__(self, pos, desc, meta):
        from types import SimpleNamespace
        self.pos = pos
        self.meta = meta
        self.proto = SimpleNamespace(base=None, shape=list(desc.shape), strides=list(desc.strides),
                                     padding=desc.padding, round_f32_to_tf32=desc.round_f32_to_tf32,
                                     block_shape=list(desc.block_shape))
        self.maps = {}

    def tensor_map(self, ptr):
        from triton.backends.nvidia.driver import make_tensordesc_arg
        if len(self.maps) >= self.MAX_MAPS:
            self.maps.clear()
        self.proto.base = _Address(ptr)
        try:
            m = make_tensordesc_arg(self.proto, self.meta, None)[0]
        finally:
            self.proto.base = None
        self.maps[ptr] = m
        return m


class BoundLaunch:
    """``kernel[grid](*args, **options)`` made once and kept: calling it with the addresses of this call's
    operands (ints, one per *slot*: each ``TensorDescriptor`` and each tensor argument of ``args``, in order)
    launches the same compiled kernel on the current stream of the current device, through Triton's C launch
    function. Everything else (grid, scalars, constexprs, the descriptors' shapes, strides and blocks) is what
    it was at bind time, so the caller keys its bound launches by exactly those (shapes, strides, dtypes,
    alignment, device, config). Tensor maps are made by Triton's ``make_tensordesc_arg`` once per (slot,
    address) and reused: a map holds only the address and the geometry, and goes to the kernel by value.

    Use :func:`bind`, which returns None where this cannot stand in for Triton's launch.

    >>> run = bind(kernel, (ctas,), args, options)          # doctest: +SKIP
    >>> run(a.data_ptr(), b.data_ptr(), c.data_ptr())       # doctest: +SKIP
    """

    def __init__(self, jit, grid, args, options):
        import inspect

        import torch
        import triton
        from triton.backends.nvidia import driver as nv
        from triton.tools.tensor_descriptor import TensorDescriptor

        self.jit = jit
        self.knobs = _knob_state()
        if options.get("ctas_per_cga") not in (None, (1, 1, 1)):
            raise NotImplementedError("ctas_per_cga (uTLX's grid convention for clusters)")
        compiled = jit.warmup(*args, grid=grid, **options)
        if compiled is None:
            raise NotImplementedError("Triton compiled nothing to bind (an asynchronous compile)")
        launcher = compiled.run                       # loads the module and makes its CudaLauncher
        md = compiled.metadata
        if (getattr(md, "global_scratch_size", 0) or getattr(md, "profile_scratch_size", 0)
                or getattr(launcher, "gsan_enabled", False)):
            raise NotImplementedError("the kernel needs per-launch scratch memory or instrumentation")
        params = inspect.signature(jit.fn).parameters
        bound = inspect.signature(jit.fn).bind(*args, **{k: v for k, v in options.items() if k in params})
        bound.apply_defaults()
        values = list(bound.arguments.values())
        if any(isinstance(v, (tuple, list)) for v in values):
            raise NotImplementedError("tuple arguments")
        # Triton's own flattening of the argument list (descriptors expanded to map, shape, strides)
        made = []
        signature = {i: v for i, v in enumerate(compiled.src.signature.values())}
        flatten = nv.wrap_handle_tensordesc(lambda *a: made.append(a[-1]), signature,
                                            getattr(md, "tensordesc_meta", None))
        flatten(values)
        flat = list(made[0])
        metas = list(getattr(md, "tensordesc_meta", None) or [])
        descs = [v for v in values if isinstance(v, TensorDescriptor)]
        if len(metas) != len(descs) or any(m.get("is_im2col") for m in metas):
            raise NotImplementedError("descriptors without metadata (lowered to pointers), or im2col ones")
        slots, d = [], 0
        for v in values:
            if isinstance(v, TensorDescriptor):
                slots.append(("desc", v, metas[d]))
                d += 1
            elif isinstance(v, torch.Tensor):
                slots.append(("ptr", v, None))
        # each slot's position in the flat list: a descriptor's map (shape and strides follow it), a tensor's
        self.slots = []
        self.bind_ptrs = []               # each slot's address at bind time (what a plan checks its roles by)
        tensor_positions = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
        map_positions = [i for i, x in enumerate(flat) if type(x).__name__ == "PyCUtensorMap"]
        if len(map_positions) != len(descs) or len(tensor_positions) != sum(k == "ptr" for k, _, _ in slots):
            raise NotImplementedError("Triton's flattened arguments do not hold one map per descriptor")
        maps, ptrs = iter(map_positions), iter(tensor_positions)
        for kind, v, meta in slots:
            if kind == "desc":
                pos = next(maps)
                slot = _DescriptorSlot(pos, v, meta)
                slot.maps[v.base.data_ptr()] = flat[pos]
                self.slots.append(slot)
                self.bind_ptrs.append(v.base.data_ptr())
                flat[pos] = None
            else:
                pos = next(ptrs)
                self.slots.append(pos)
                self.bind_ptrs.append(v.data_ptr())
                flat[pos] = 0             # no reference to the bind-time tensor is kept
        self.flat = flat
        self.nslots = len(self.slots)
        g = tuple(grid) + (1, 1)
        self.grid = (int(g[0]), int(g[1]), int(g[2]))
        active = triton.runtime.driver.active
        self.device = active.get_current_device()
        self._device = active.get_current_device
        self._stream = active.get_current_stream
        self._launch = active.utils.launch
        self._fixed = (compiled.function, bool(launcher.launch_cooperative_grid), bool(launcher.launch_pdl),
                       compiled.packed_metadata, launcher.arg_annotations, launcher.kernel_signature)
        self.compiled = compiled

    def ready(self) -> bool:
        """Whether this may launch in place of ``kernel[grid](...)`` now (see :func:`dispatch_is_triton`): same
        device, same knobs, Triton's own dispatch."""
        return (dispatch_is_triton(self.jit) and self._device() == self.device and _knob_state() == self.knobs)

    def __call__(self, *ptrs):
        args = self.flat.copy()
        for slot, p in zip(self.slots, ptrs):
            if type(slot) is int:
                args[slot] = p
            else:
                m = slot.maps.get(p)
                args[slot.pos] = m if m is not None else slot.tensor_map(p)
        function, coop, pdl, packed, annotations, signature = self._fixed
        gx, gy, gz = self.grid
        self._launch(gx, gy, gz, self._stream(self.device), function, coop, pdl, packed, None, None, None,
                     None, None, annotations, signature, args)


def bind(jit, grid, args, options):
    """A :class:`BoundLaunch` of ``jit[grid](*args, **options)``, or None where one cannot stand in for it:
    no GPU launch here (CPU tensors, the simulator or a launch recorder in place, a launch hook set), a kernel
    that needs per-launch scratch memory, or Triton launching in a way this adapter does not know. None means:
    launch through ``jit[grid]`` as usual, which is always right."""
    import torch
    if not dispatch_is_triton(jit) or not torch.cuda.is_available():
        return None
    if not any(getattr(getattr(a, "base", a), "is_cuda", False) for a in args):
        return None
    from triton.runtime.errors import OutOfResources
    try:
        return BoundLaunch(jit, grid, args, options)
    except NotImplementedError:
        return None
    except OutOfResources:
        raise           # the launch itself would raise it too: the autotuner leaves such a config out
    except Exception as e:      # an adapter out of step with Triton must not stop the launch: dispatch it
        import warnings
        warnings.warn(f"{getattr(jit, '__name__', jit)}: no bound launch ({type(e).__name__}: {e}); launching "
                      "through Triton's dispatch (runtime/triton_launch.py may need updating for this Triton)",
                      stacklevel=3)
        return None
