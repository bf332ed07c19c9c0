"""What each TLX op *means* on the CPU: the builder the TLX builtins run on while simulating.

TLX ops are Triton builtins: ``tlx.barrier_wait(bar, p)`` is declared once in the
``tlx`` package and calls ``_semantic.builder.create_barrier_wait(...)``. Triton's
interpreter is "just another builder" for ``tl.*``; this module is another builder
for TLX: :class:`SimBuilder` extends the interpreter's numpy builder with the
``create_*`` methods TLX's frontend calls, each delegating to the current
:class:`~tlx_workbench.sim.hardware.cta.CTA`. The TLX builtins themselves are not
re-declared: :func:`patch_tlx` rebinds each one, for the duration of a simulation,
to call the original with ``_semantic`` = a semantic over :class:`SimBuilder`.
"""
from __future__ import annotations

import sys
import threading
import types

import numpy as np
import triton.language as tl

from ...errors import SimulationError, TLXWorkbenchError
from ..schedule import batch
from .. import interp_adapter as ia
from . import warp_vote
from . import threads
from ..hardware.barriers import MBarrierArray
from .bulk_copy_ops import BulkCopyBuilderOps
from .cluster_ops import RemoteSlot
from .desc_scratch import DescScratchOps, reinterpret_tensor_descriptor
from ..hardware.memory import SmemAlloc, SmemView
from .mma_numerics import mma_accumulate
from .scaled_mma_ops import format_name, mx_product, operand_bits
from ..schedule.scheduler import Abort, StepLimit
from .stoch_round import StochRoundBuilderOps

from ..schedule.launch_state import _state  # noqa: E402,F401 - re-exported: the builder ops' shared launch state
# the TLX builtins being called, innermost last, per task (each task runs in its own thread)
_calls = threading.local()


def _call_stack() -> list:
    cta = _state.cta
    task = cta.sched.current if cta is not None else None
    if task is not None:
        return task.call_stack
    st = getattr(_calls, "stack", None)
    if st is None:
        st = _calls.stack = []
    return st


def _call_kw(op: str, key: str, default=None):
    """A keyword the kernel passed to TLX builtin ``op`` that the frontend does not hand to the builder
    (``multicast_targets``, ``two_ctas``, ``force_async``): read from the innermost such call."""
    for name, kw in reversed(_call_stack()):
        if name == op:
            v = kw.get(key, default)
            return v.value if isinstance(v, tl.constexpr) else v
    return default


def current_cta():
    return _state.cta



class _Shape:
    """A TMA block that is never read (timing-only runs): its size, for the checks, and no data."""

    def __init__(self, shape):
        self.shape = shape
        self.size = int(np.prod(shape))

class _Handle(ia.TensorHandle):
    """A value handle the uTLX frontend can check (``checked_handle`` calls ``.id()``)."""

    def id(self):
        return 1


def _scalar(value, dtype=tl.int32):
    return _Handle(np.array([value], dtype=ia.np_dtype(dtype)), dtype)


def _int(h) -> int:
    if isinstance(h, ia.TensorHandle):
        v = int(np.asarray(h.data).reshape(-1)[0])
        if _state.rec is not None:
            _state.rec.guard(h, v)      # a buffer index, phase or count: the same in every CTA of a wave
        return v
    if isinstance(h, tl.constexpr):
        return int(h.value)
    return int(h)


def _pred(h) -> bool:
    if h is None:
        return True
    v = bool(np.asarray(h.data).reshape(-1)[0])
    if _state.rec is not None:
        _state.rec.guard(h, v)
    return v


def _view(h, op):
    if isinstance(h, SmemAlloc):
        return SmemView(h)
    if isinstance(h, SmemView):
        return h
    raise TypeError(f"{op} expects an SMEM buffer (from tlx.local_alloc / local_view), got {type(h).__name__}")


class _TLXBuilder(ia.InterpreterBuilder):
    """The interpreter's numpy builder plus the ``create_*`` ops of TLX's own frontend (``tlx`` package)."""

    def __init__(self, arch: str = "sm90", num_warps: int = 4):
        super().__init__()
        import dataclasses
        base = dataclasses.asdict(ia.InterpreterOptions())
        base.update(arch=arch, num_warps=num_warps)
        # overflow checks feed device_assert, a no-op without debug: skip computing them (interp_adapter)
        base["sanitize_overflow"] = bool(base.get("debug"))
        self.options = types.SimpleNamespace(**base)

    @property
    def cta(self):
        return _state.cta

    def get_bf16(self, value):
        # the interpreter has no bf16 constant (uTLX makes one as local_alloc's type carrier): bf16 is
        # stored as the upper 16 bits of the float32, rounded to nearest even
        return ia.TensorHandle(ia.f32_to_bf16_bits(np.array([value], dtype=np.float32)), tl.bfloat16)

    # -- layouts: the CPU has none; keep handles unchanged ----------------------------------
    def make_swizzled_shared_encoding_attr(self, *a):
        return None

    def make_nv_mma_shared_encoding_attr(self, *a):
        return None

    def make_nv_mma_encoding_attr(self, *a):
        return None

    def make_dot_operand_encoding_attr(self, *a):
        return None

    def make_tensor_memory_encoding_attr(self, *a):
        return None

    def create_require_layout(self, h, layout):
        return h

    def create_release_layout(self, h):
        return h

    # -- memory ------------------------------------------------------------------------------
    def create_local_alloc(self, full_shape, elem_ty, layout, alias=None, shared_buffer=None):
        num, *shape = [int(x) for x in full_shape]
        return self.cta.local_alloc(shape, elem_ty, ia.np_dtype(elem_ty), num, alias)

    def create_memdesc_subview(self, h, idx):
        i = _int(idx)
        if isinstance(h, SmemAlloc):
            return SmemView(h).subview(i)
        return h.subview(i)

    def create_memdesc_subslice(self, h, offsets, shape):
        return _view(h, "local_slice").subslice([_int(o) for o in offsets], [_int(s) for s in shape])

    def create_memdesc_trans(self, h, dims):
        return _view(h, "local_trans").transposed(dims)

    def create_memdesc_reinterpret(self, h, elem_ty, shape):
        return _view(h, "local_reinterpret").reinterpreted(ia.np_dtype(elem_ty), [int(s) for s in shape], elem_ty)

    def create_local_load(self, h, token=None):
        v = _view(h, "local_load")
        out = ia.TensorHandle(self.cta.smem_read(v), v.tl_dtype)
        batch.smem_read(v, out)
        return out

    def create_local_store(self, h, value):
        v = _view(h, "local_store")
        data = np.asarray(value.data).astype(v.array.dtype, copy=False)
        self.cta.smem_write(v, data)
        batch.smem_write(v, value)
        return None

    def create_fence_async_shared(self, cluster=False):
        return None

    def create_threadfence(self, *a):
        return None

    def create_cluster_barrier(self):
        self.cta.cluster_barrier()
        return None

    # -- mbarriers -------------------------------------------------------------------------------
    def create_alloc_barriers(self, num, arrive_count, layout):
        return self.cta.alloc_barriers(int(num), int(arrive_count))

    def create_barrier_expect(self, bar, size, pred):
        if _pred(pred):
            self.cta.expect(_one_slot(bar, "barrier_expect_bytes"), int(size))

    def create_barrier_wait(self, bar, phase, pred):
        if _pred(pred):
            self.cta.wait(_one_slot(bar, "barrier_wait"), _int(phase))

    def create_barrier_arrive(self, bar, count):
        self.cta.arrive(_one_slot(bar, "barrier_arrive"), int(count), per_thread=False)

    def create_warp_barrier_arrive(self, bar, count):
        self.cta.arrive(_one_slot(bar, "barrier_arrive"), int(count), per_thread=True)

    def create_named_barrier_wait(self, bar, count):
        self.cta.named_barrier(_int(bar), _int(count), wait=True)

    def create_named_barrier_arrive(self, bar, count):
        self.cta.named_barrier(_int(bar), _int(count), wait=False)

    # -- TMA ----------------------------------------------------------------------------------------
    def create_async_TMA_load(self, multicast, desc, offsets, bar, pred, result, cache, evict, is_volatile):
        if not _pred(pred):
            return
        targets = _call_kw("async_descriptor_load", "multicast_targets") or []
        two_ctas = bool(_call_kw("async_descriptor_load", "two_ctas", False))
        targets = [_int(r) for r in targets]
        view = _view(result, "async_descriptor_load")
        if self.cta.run.numerics:
            self.cta.in_async_op = True
            try:
                block = batch.recorded_call("create_descriptor_load", ia.interpreter_builder.create_descriptor_load,
                                            (desc, offsets, None, None))
            finally:
                self.cta.in_async_op = False
            data = np.asarray(block.data)
            batch.tma_data(data, block)
        else:
            data = _Shape(tuple(int(x) for x in desc.block_shape))      # timing only: no bytes are read
        nbytes = int(np.prod(desc.block_shape)) * (desc.base.dtype.element_ty.primitive_bitwidth // 8)
        bar = _one_slot(bar, "async_descriptor_load")
        self.cta.tma_load(view, data, bar, nbytes, two_ctas=two_ctas, multicast=targets)

    def create_async_TMA_prefetch(self, *a):
        return None

    def create_async_TMA_store(self, desc, offsets, source, evict):
        view = _view(source, "async_descriptor_store")
        np_dt = ia.np_dtype(desc.base.dtype.element_ty)

        def write(arr):
            if not self.cta.run.numerics:
                return                       # timing only: nothing is written
            if arr.size != int(np.prod(desc.block_shape)):
                raise ValueError(f"async_descriptor_store: buffer {list(arr.shape)} does not match the "
                                 f"descriptor block {list(desc.block_shape)}")
            val = ia.TensorHandle(arr.reshape(desc.block_shape).astype(np_dt, copy=False),
                                  desc.base.dtype.element_ty)
            self.cta.in_async_op = True
            try:
                batch.quiet(ia.interpreter_builder.create_descriptor_store, desc, val, offsets)
            finally:
                self.cta.in_async_op = False
            batch.tma_store(desc, offsets, view, np_dt)

        self.cta.tma_store(view, write)

    def create_async_TMA_store_wait(self, pendings):
        self.cta.tma_store_wait(int(pendings))

    # -- cp.async -------------------------------------------------------------------------------------
    def create_async_load(self, src, result, mask, other, cache, evict, is_volatile, bulk_size=None,
                          barrier=None, bulk=False):
        view = _view(result, "async_load")
        if mask is None:
            mask = ia.TensorHandle(np.ones(src.data.shape, dtype=bool), tl.int1)
        if other is None:
            other = ia.TensorHandle(np.zeros(src.data.shape, dtype=ia.np_dtype(src.dtype.element_ty)),
                                    src.dtype.element_ty)
        self.cta.in_async_op = True
        try:
            val = batch.recorded_call("create_masked_load", ia.interpreter_builder.create_masked_load,
                                      (src, mask, other, None, None, False))
        finally:
            self.cta.in_async_op = False
        data = np.asarray(val.data)
        batch.tma_data(data, val)
        self.cta.cp_async(view, data)
        return None

    def create_async_commit_group(self, handles):
        self.cta.cp_async_commit()
        return None

    def create_async_wait(self, handles, pendings):
        self.cta.cp_async_wait(int(pendings))
        return None

    # -- wgmma ------------------------------------------------------------------------------------------
    def create_warp_group_dot(self, a, b, acc, input_precision, max_num_imprecise_acc, is_async):
        bv = _view(b, "async_dot B")
        if isinstance(a, (SmemAlloc, SmemView)):
            av = _view(a, "async_dot A")
            a_fn = lambda: ia.TensorHandle(av.array, av.tl_dtype)  # noqa: E731 - read at once, not copied
            m, k = av.array.shape
            in_bits = av.tl_dtype.primitive_bitwidth
        else:
            av = a
            a_fn = lambda: a  # noqa: E731
            m, k = a.data.shape
            in_bits = a.get_element_ty().primitive_bitwidth
        n = bv.array.shape[1]

        def dot(x, y, z):
            return ia.interpreter_builder.create_dot(x, y, z, input_precision, max_num_imprecise_acc)
        dot.builder_dot = True      # the launch's own dot: a wave sums its tensor-core products itself (batch.py)

        def compute():
            if not self.cta.run.numerics:       # timing only: the accumulator stands for the product
                return acc if acc is not None else ia.TensorHandle(np.zeros((m, n), np.float32), tl.float32)
            bh = ia.TensorHandle(bv.array, bv.tl_dtype)
            out = batch.quiet(dot, a_fn(), bh, acc)
            batch.mma(av, bv, acc, out, dot)
            return out

        return self.cta.wgmma(av, bv, compute, m, n, k, in_bits)

    def create_warp_group_dot_wait(self, handles, pendings):
        self.cta.wgmma_wait(int(pendings))
        return list(handles)

    # -- ids, clock, cluster ------------------------------------------------------------------------------
    def create_thread_id(self, axis):
        # one value per thread of the task along x (sim/ops/threads.py); a CTA is 1-D, so y and z are 0
        if int(axis) != 0:
            return _scalar(0)
        return _Handle(threads.thread_ids(self.cta.task), tl.int32)

    def create_clock64(self):
        t = self.cta.task
        return _scalar(int(t.clock), tl.int64)

    def create_cluster_cta_rank(self):
        return _scalar(self.cta.rank)

    def create_cluster_size_1d(self):
        return _scalar(len(self.cta.cluster))

    # -- Blackwell: TMEM, tcgen05 -------------------------------------------------------------------
    def create_tmem_copy(self, src, dst):
        self.cta.tmem_copy(_view(src, "tmem_copy source"), _view(dst, "tmem_copy destination"))

    def create_tcgen05_commit(self, bar, pred, descs=None):
        if _pred(pred):
            self.cta.tcgen05_commit(bar, bool(_call_kw("tcgen05_commit", "two_ctas", False)))

    def _mma(self, a, b, acc, use_acc, pred, bars, two_ctas, what, product, in_bits, extra=()):
        if not _pred(pred):
            return
        sync = not bars and not _call_kw(what, "force_async", False)
        self.cta.tcgen05_mma(_view(a, f"{what} A"), _view(b, f"{what} B"), _view(acc, f"{what} acc"), _pred(use_acc),
                             list(bars), bool(two_ctas), sync, product, in_bits, what, extra)

    def create_tcgen05_mma(self, a, b, acc, use_acc, pred, bars, bar_preds=None, two_ctas=False, multicast=False):
        av, bv = _view(a, "async_dot A"), _view(b, "async_dot B")

        bits = av.tl_dtype.primitive_bitwidth

        def product(x, y, acc=None):
            # exact operands into the fp32 accumulator as the tensor cores add them (sim/ops/mma_numerics.py)
            return mma_accumulate(acc, ia.mma_operand_values(x, av.tl_dtype), ia.mma_operand_values(y, bv.tl_dtype),
                                  bits)
        product.accumulates = True
        self._mma(a, b, acc, use_acc, pred, bars, two_ctas, "async_dot", product, bits)

    def create_tcgen05_mma_scaled(self, a, b, acc, a_scale, b_scale, a_type, b_type, use_acc, pred, bars,
                                  bar_preds=None, two_ctas=False):
        av, bv = _view(a, "async_dot_scaled A"), _view(b, "async_dot_scaled B")
        asv, bsv = _view(a_scale, "A_scale"), _view(b_scale, "B_scale")

        fa, fb = format_name(a_type), format_name(b_type)

        def product(x, y):
            return mx_product(x, asv.array, fa, y, bsv.array, fb)
        product.k = av.array.shape[-1] * (2 if fa == "e2m1" else 1)
        self._mma(a, b, acc, use_acc, pred, bars, two_ctas, "async_dot_scaled", product, operand_bits(fa, fb),
                  (asv, bsv))

    # -- CLC ----------------------------------------------------------------------------------------------------
    def utlx_alloc_clc_responses(self, args):
        return self.cta.clc_alloc(_int(args[0]))

    def utlx_async_clc_try_cancel(self, args):
        self.cta.clc_try_cancel(args[0], args[1])
        return None

    def utlx_clc_query(self, args):
        return batch.clc_answer(args[0], _scalar(self.cta.clc_query(args[0])))


class UTLXBuilderOps:
    """The ``utlx_*`` builder calls of the uTLX plugin frontend (``triton.language.extra.tlx`` from
    ``triton-utlx``): every op takes one list of handles, constants as int32 handles."""

    def utlx_local_alloc(self, args):
        carrier, *dims, _target = args
        num, *shape = [_int(d) for d in dims]
        return self.cta.local_alloc(shape, carrier.dtype, ia.np_dtype(carrier.dtype), num, None)

    def utlx_local_alias(self, args):
        reuse, carrier, *rest = args
        # [reuse, type carrier, num, *shape, storage hint (1: TMEM)]
        num, *shape = [_int(d) for d in rest[:-1]]
        storage = "tmem" if rest and _int(rest[-1]) == 1 else "smem"
        return self.cta.local_alloc(shape, carrier.dtype, ia.np_dtype(carrier.dtype), num, reuse, storage)

    def utlx_local_view(self, args):
        return self.create_memdesc_subview(args[0], args[1])

    def utlx_memdesc_subslice(self, args):
        h, *vals = args
        n = len(vals) // 2
        return self.create_memdesc_subslice(h, vals[:n], vals[n:])

    def utlx_local_load(self, args):
        return self.create_local_load(args[0])

    def utlx_local_store(self, args):
        return self.create_local_store(args[0], args[1])

    def utlx_alloc_barriers(self, args):
        return self.cta.alloc_barriers(_int(args[0]), _int(args[1]))

    def utlx_barrier_expect(self, args):
        return self.create_barrier_expect(args[0], _int(args[1]), args[2])

    def utlx_barrier_wait(self, args):
        return self.create_barrier_wait(args[0], args[1], args[2])

    def utlx_barrier_arrive(self, args):
        return self.create_barrier_arrive(args[0], _int(args[1]))

    def utlx_warp_barrier_arrive(self, args):
        return self.create_warp_barrier_arrive(args[0], _int(args[1]))

    def utlx_named_barrier_wait(self, args):
        return self.create_named_barrier_wait(args[0], args[1])

    def utlx_named_barrier_arrive(self, args):
        return self.create_named_barrier_arrive(args[0], args[1])

    def utlx_match_tensor_desc_layout(self, args):
        return None

    def utlx_require_nv_mma_shared_layout(self, args):
        return args[0]

    def utlx_require_nv_mma_layout(self, args):
        return args[1]

    def utlx_require_dot_operand_layout(self, args):
        return args[0]

    def utlx_release_layout(self, args):
        return args[0]

    def utlx_require_with_layout_carrier(self, args):
        return args[0]

    def create_async_tma_copy_global_to_local(self, desc, offsets, bar, result, pred, multicast, *rest):
        return self.create_async_TMA_load([] if not multicast else [1], desc, offsets, bar, pred, result,
                                          None, None, False)

    def create_async_tma_copy_local_to_global(self, desc, offsets, source, *rest):
        return self.create_async_TMA_store(desc, offsets, source, None)

    def create_async_tma_store_wait(self, pendings, read_only=False):
        return self.create_async_TMA_store_wait(pendings)

    def utlx_async_tma_prefetch(self, args):
        return None

    def create_warpgroup_mma(self, a, b, acc, use_acc, precision, max_num_imprecise_acc, is_async):
        if use_acc is not None and not _pred(use_acc):
            acc = ia.TensorHandle(np.zeros_like(acc.data), acc.dtype)
        return self.create_warp_group_dot(a, b, acc, precision, max_num_imprecise_acc, is_async)

    def utlx_warp_group_dot_wait(self, args):
        self.cta.wgmma_wait(_int(args[1]))
        return args[0]

    def utlx_async_load(self, args):
        src, result, *rest = args
        mask = rest[0] if len(rest) >= 2 else None
        other = rest[1] if len(rest) >= 3 else None
        self.create_async_load(src, result, mask, other, None, None, False)
        return _scalar(0)

    def utlx_async_commit_group(self, handles):
        self.cta.cp_async_commit()
        return _scalar(0)

    def utlx_async_wait_group(self, args):
        self.cta.cp_async_wait(_int(args[0]))
        return _scalar(0)

    def utlx_fence(self, args):
        return None

    def utlx_thread_id(self, args):
        return self.create_thread_id(_int(args[0]))

    def utlx_clock64(self, args):
        return self.create_clock64()

    def utlx_cluster_cta_rank(self, args):
        return self.create_cluster_cta_rank()

    def utlx_cluster_size_1d(self, args):
        return self.create_cluster_size_1d()

    # -- TMEM -------------------------------------------------------------------------------------------------
    def utlx_local_alloc_tmem(self, args):
        carrier, *dims, _layout_hint = args
        num, *shape = [_int(d) for d in dims]
        return self.cta.local_alloc(shape, carrier.dtype, ia.np_dtype(carrier.dtype), num, None, storage="tmem")

    def utlx_tmem_load(self, args):
        return self.create_local_load(args[0])

    def utlx_tmem_store(self, args):
        return self.create_local_store(args[0], args[1])

    def utlx_tmem_subslice(self, args):
        v = _view(args[0], "subslice")
        rows = v.array.shape[0]
        return v.subslice([0, _int(args[1])], [rows, _int(args[2])])

    def utlx_require_tensor_memory_layout(self, args):
        return args[0]

    def utlx_require_tensor_memory_scales_layout(self, args):
        return args[0]

    def utlx_memdesc_reinterpret(self, args):
        src, null, *shape = args
        return self.create_memdesc_reinterpret(src, null.dtype, [_int(d) for d in shape])

    # -- storage_alias_spec / reuse_group -------------------------------------------------------------------------
    def utlx_storage_alias_spec(self, args):
        size = _int(args[1])
        return self.cta.alias_spec("tmem" if _int(args[0]) == 1 else "smem", None if size < 0 else size)

    def utlx_storage_alias_local_alloc(self, args):
        spec, carrier, *rest = args
        num, *shape = [_int(d) for d in rest[:-1]]
        storage = "tmem" if _int(rest[-1]) == 1 else "smem"
        return self.cta.local_alloc(shape, carrier.dtype, ia.np_dtype(carrier.dtype), num, spec, storage)

    def utlx_reuse_group(self, args):
        kind, size, *members = args
        return ("shared" if _int(kind) == 0 else "distinct", _int(size), list(members))

    def utlx_set_buffer_overlap(self, args):
        self.cta.set_buffer_overlap(args[0], args[1])
        return None

    # -- clusters ----------------------------------------------------------------------------------------------
    def utlx_map_to_remote_buffer(self, args):
        return RemoteSlot(args[0], _int(args[1]))

    def utlx_remote_shmem_store(self, args):
        src, dst, rank = args
        v = _view(dst, "remote_shmem_store")
        self.cta.remote_store(v, np.asarray(src.data).astype(v.array.dtype, copy=False), _int(rank))
        return None

    def utlx_async_remote_shmem_store(self, args):
        src, dst, rank, bar = args
        v = _view(dst, "async_remote_shmem_store")
        self.cta.remote_store(v, np.asarray(src.data).astype(v.array.dtype, copy=False), _int(rank), bar)
        return None


class SimBuilder(BulkCopyBuilderOps, StochRoundBuilderOps, DescScratchOps, UTLXBuilderOps, _TLXBuilder):
    """The interpreter's numpy builder plus TLX's builder ops (both TLX frontends), with CPU meanings."""

    # for the op mixins of other modules, which do not import this one
    view_of = staticmethod(_view)
    one_slot = staticmethod(lambda bar, op: _one_slot(bar, op))       # defined below
    scalar = staticmethod(_scalar)


# TLX builtins whose meaning is not a builder call: replaced while simulating
def _async_task_replica_id(_semantic=None):
    return tl.constexpr(_state.cta.task.replica)


def _remote_view(local_allocated_buffer, remote_cta_rank, _semantic=None):
    # uTLX's frontend refuses remote_view (upstream Triton has no mapa op), so the NUM_CTAS=2 kernels
    # cannot compile with it; the simulator gives it TLX's documented meaning: the same mbarrier in
    # CTA ``remote_cta_rank`` of the cluster.
    buf = local_allocated_buffer
    types_mod = sys.modules[type(buf).__module__]
    return type(buf)(RemoteSlot(buf.handle, _int(remote_cta_rank.value if isinstance(remote_cta_rank, tl.constexpr)
                                                 else remote_cta_rank.handle if isinstance(remote_cta_rank, tl.tensor)
                                                 else remote_cta_rank)),
                     0, buf.type.layout, types_mod.storage_kind.smemCluster,
                     is_warp_barrier=getattr(buf, "is_warp_barrier", False))


def _vote_ballot_sync(mask, pred, _semantic=None):
    return warp_vote.vote_ballot_sync(_state.cta, mask, pred)


OVERRIDES = {"async_task_replica_id": _async_task_replica_id, "remote_view": _remote_view,
             "vote_ballot_sync": _vote_ballot_sync,
             "reinterpret_tensor_descriptor": reinterpret_tensor_descriptor}

# ops the CPU simulator does not model yet (a call is a SimulationError naming the op and the line)
UNSUPPORTED: set = set()


def _frontends():
    """The TLX frontend packages installed: uTLX (``triton.language.extra.tlx``) and Meta's ``tlx``."""
    out = []
    for name in ("utlx_plugin", "tlx"):
        try:
            out.append(__import__(name))
        except ImportError:
            pass
    return out


# the module names TLX's frontends live under; one file may be loaded under two of them (after
# ``from triton.language.extra.tlx.mem_ops import x`` the alias loader runs mem_ops, types and utility a second
# time, and the package's ``types`` attribute then names the second copy while the ops return the first's classes)
_FRONTEND_NAMES = ("utlx_plugin", "tlx", "triton.language.extra.tlx")
_NOT_FRONTEND = ("tutorials", "compiler", "inductor")


def _is_frontend_module(name: str) -> bool:
    for root in _FRONTEND_NAMES:
        if name == root:
            return True
        if name.startswith(root + "."):
            return name[len(root) + 1:].split(".", 1)[0] not in _NOT_FRONTEND
    return False


def _tlx_modules():
    """Every loaded module of a TLX frontend, under whatever name (and in however many copies) it was imported."""
    # str.startswith first: a process holds a thousand modules and more, a few dozen of them the frontend's
    mods = {id(m): m for name, m in list(sys.modules.items())
            if name.startswith(_FRONTEND_NAMES) and isinstance(m, types.ModuleType) and _is_frontend_module(name)}
    return list(mods.values())


def _is_tlx_builtin(member) -> bool:
    return callable(member) and tl.core.is_builtin(member) and _is_frontend_module(getattr(member, "__module__", "") or "")


def late_bound_builtins(namespace: dict) -> dict:
    """Stand-ins for the TLX builtins a kernel's module imported by name (``from ...tlx.mem_ops import
    local_alloc``): the simulator's copy of the kernel keeps its globals, so patching modules does not reach
    them; each stand-in calls what the current launch made of that builtin."""
    return {name: _late(name, member) for name, member in namespace.items() if _is_tlx_builtin(member)}


def _late(name, member):
    def op(*args, **kwargs):
        wrapped = _state.wrapped
        if wrapped is None:                 # not simulating: the builtin's own refusal
            return member(*args, **kwargs)
        w = wrapped.get(member)
        if w is None:
            w = wrapped[member] = _wrap(name, member, _state.semantic)
        return w(*args, **kwargs)
    op.__name__ = name
    op.__wrapped__ = member
    return op


_ONE_SLOT_SAID: set = set()


def _one_slot(bar, op: str):
    """A whole ``alloc_barriers(1)`` result where one barrier is expected is its one slot, as newer TLX
    reads it (its tests pass ``bars`` to ``async_descriptor_load``); the installed compiler refuses it, so
    say so once per line. More than one slot is ambiguous: an error naming the fix."""
    if not isinstance(bar, MBarrierArray):
        return bar
    from ..diagnosis.source_lines import kernel_frame_line
    file, line = kernel_frame_line()
    if len(bar.slots) != 1:
        raise SimulationError(f"tlx.{op}: {bar.name} ({len(bar.slots)} barriers) passed where one barrier is expected",
                              file=file, line=line, hint=f"pass one of its barriers: {bar.name}[i]")
    if (file, line) not in _ONE_SLOT_SAID:
        _ONE_SLOT_SAID.add((file, line))
        import warnings
        warnings.warn_explicit(f"tlx.{op} got the whole one-barrier allocation {bar.name}; simulated as "
                               f"{bar.name}[0], as newer TLX reads it (the installed compiler refuses this form)",
                               UserWarning, file or "<kernel>", line or 0)
    return bar.slots[0]


def _cx(v):
    return tl.constexpr(v) if isinstance(v, (bool, int, float, str)) else v


def _wrap(name, member, semantic):
    # decided once per launch (patch_tlx wraps afresh), not at every call
    override = OVERRIDES.get(name)
    unsupported = name in UNSUPPORTED
    is_wait = name == "barrier_wait"

    def op(*args, **kwargs):
        # the code generator hands Python literals to builtins as constexprs; so do we
        if kwargs:
            kwargs.pop("_semantic", None)
            kwargs.pop("_builder", None)
            kwargs = {k: _cx(v) for k, v in kwargs.items()}
        args = tuple(map(_cx, args))
        stack = _call_stack()
        cta = _state.cta
        if cta is not None and cta.sched.current is not None and cta.sched.current.lanes:
            threads.check_tlx_op(cta.sched.current, name)
        stack.append((name, kwargs))
        try:
            if override is not None:
                return override(*args, **kwargs)
            if unsupported:
                raise NotImplementedError(name)
            if is_wait and args and isinstance(getattr(args[0], "handle", None), RemoteSlot):
                from ..diagnosis.source_lines import kernel_frame_line
                file, line = kernel_frame_line()
                raise SimulationError(
                    f"tlx.barrier_wait on remote_view(bar, {args[0].handle.rank}): a CTA waits only on mbarriers "
                    f"in its own shared memory", file=file, line=line,
                    hint="arrive remotely (barrier_arrive(bar, remote_cta_rank=r)) and wait on the local barrier "
                         "in the CTA that receives the arrivals (pred=cluster_cta_rank() == r)")
            return member(*args, _semantic=semantic, **kwargs)
        except (TLXWorkbenchError, Abort, StepLimit, batch.Unsupported):
            raise
        except NotImplementedError as e:
            from ..diagnosis.source_lines import kernel_frame_line
            file, line = kernel_frame_line()
            raise SimulationError(f"tlx.{name}: the CPU simulator does not model {e or name} yet",
                                  file=file, line=line,
                                  hint="simulate a Hopper kernel without it, or run on a GPU") from None
        except Exception as e:  # noqa: BLE001 - becomes one error naming the op and the kernel line
            from ..diagnosis.source_lines import kernel_frame_line
            file, line = kernel_frame_line()
            raise SimulationError(f"tlx.{name} failed: {type(e).__name__}: {e}", file=file, line=line,
                                  hint="check this op's arguments (shapes, dtypes, buffer indices)") from e
        finally:
            stack.pop()
    if name == "local_view":
        op = _memo_local_view(op)
    op.__name__ = name
    op.__wrapped__ = member
    return op


def _memo_local_view(op):
    # local_view(buffers, i) builds the same view every time the kernel asks for buffer i (a few times per
    # pipeline stage), through the frontend's type machinery; the views are immutable, so one per (buffers
    # object, index) serves every later call (cache per launch: patch_tlx wraps afresh)
    cache: dict = {}

    def local_view(*args, **kwargs):
        kwargs.pop("_semantic", None)
        kwargs.pop("_builder", None)
        if kwargs or len(args) != 2:
            return op(*args, **kwargs)
        bufs, idx = args
        key = ia.scalar_key(idx)
        if key is ia.NOT_SCALAR:
            return op(bufs, idx)
        key = (id(bufs), key)
        hit = cache.get(key)
        if hit is not None and hit[0] is bufs:
            return hit[1]
        out = op(bufs, idx)
        cache[key] = (bufs, out)
        return out
    return local_view


def patch_tlx(semantic):
    """Rebind every TLX builtin to run on ``semantic``; returns a function that undoes it."""
    changes = []
    wrapped: dict = {}
    _state.wrapped, _state.semantic = wrapped, semantic
    mods = _tlx_modules()
    for mod in mods:
        for name, member in list(vars(mod).items()):
            if not (callable(member) and tl.core.is_builtin(member)):
                continue
            if member not in wrapped:
                wrapped[member] = _wrap(name, member, semantic)
            changes.append((mod, name, member))
            setattr(mod, name, wrapped[member])

    # methods declared as builtins on TLX value classes (buffered_tensor.__getitem__, ...), of every copy
    classes = {c for m in mods for c in vars(m).values()
               if isinstance(c, type) and _is_frontend_module(getattr(c, "__module__", "") or "")}
    for cls in classes:
        for name, member in list(vars(cls).items()):
            if callable(member) and tl.core.is_builtin(member):
                if member not in wrapped:
                    wrapped[member] = _wrap(name, member, semantic)
                changes.append((cls, name, member))
                setattr(cls, name, wrapped[member])

    # helpers (not builtins) of the frontend that build MLIR-only values: the CPU needs none of them
    for mem_ops in mods:
        if "_create_tmem_compatible_tensor_layout" in vars(mem_ops):
            changes.append((mem_ops, "_create_tmem_compatible_tensor_layout",
                            mem_ops._create_tmem_compatible_tensor_layout))
            mem_ops._create_tmem_compatible_tensor_layout = lambda builder, tensor: None

    def undo():
        _state.wrapped = _state.semantic = None
        for mod, name, member in reversed(changes):
            setattr(mod, name, member)
    return undo


def builtin_names() -> list[str]:
    import triton.language.extra.tlx as tlx_mod
    return sorted(n for n, m in vars(tlx_mod).items() if callable(m) and tl.core.is_builtin(m))
