"""Bulk copies that are not plain TMA tile loads/stores: TMA store-reduce, ``tlx.async_store`` and
``tlx.async_load(..., bulk=True)``.

What each one is on the GPU (TLX's lowering, ``third_party/nvidia/lib/TritonNVIDIAGPUToLLVM``):

* ``async_descriptor_store(desc, buf, offs, store_reduce=k)`` is ``cp.reduce.async.bulk.tensor.<n>d.global.
  shared::cta.<k>.bulk_group``: the box is combined element-wise into global memory (out-of-bounds elements are
  dropped, as for a store), then a bulk commit group; ``async_descriptor_store_wait(n)`` waits for it like a
  store. The element types each kind accepts are the compiler's (``AsyncTMAReduceOp::isSupportedReduceKind``),
  checked here with the same words, so a kernel the compiler refuses is refused here too.
* ``async_store(ptr, buf, size)`` is ``cp.async.bulk.global.shared::cta.bulk_group``: ``size`` bytes from the
  start of ``buf`` to ``ptr``, then a bulk commit group (same wait).
* ``async_load(ptr, buf, bulk=True, bulk_size=n, barrier=bar)`` is ``cp.async.bulk.shared::cta.global.mbarrier::
  complete_tx::bytes``: ``n`` bytes from ``ptr`` (a tensor of pointers: its first element) into the start of
  ``buf``; the bytes land on ``bar`` as transaction bytes, like a TMA load (the kernel announces them with
  ``barrier_expect_bytes``). Both bulk copies need 16-byte aligned addresses and a size a multiple of 16.

Global memory changes at issue (the simulator's TMA store does the same); SMEM of a bulk load when its bytes
land. Each copy takes its place in the CTA's TMA queue (``tma_free``), so timelines show them as TMA work.
Cost model: TMA load / store rates and latency (``cost.tma_transfer`` / ``tma_store_transfer``), assumed the
same for the non-tensor bulk copies (one TMA engine moves both) and for a store-reduce (its read-modify-write
happens in L2, assumed at the store rate: no calibration measures it).
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from .. import interp_adapter as ia
from ..hardware.memory import SmemView
from ..diagnosis.races import Access
from ..schedule.scheduler import AsyncOp

# (kind -> element types the compiler accepts), as AsyncTMAReduceOp::isSupportedReduceKind says
_REDUCE_TYPES = {
    "add": ("int32", "uint32", "uint64", "fp32", "fp16", "bf16"),
    "min": ("int32", "uint32", "int64", "uint64", "fp16", "bf16"),
    "max": ("int32", "uint32", "int64", "uint64", "fp16", "bf16"),
    "and": ("int32", "uint32", "int64", "uint64"),
    "or": ("int32", "uint32", "int64", "uint64"),
    "xor": ("int32", "uint32", "int64", "uint64"),
}


def reduce_kind_name(kind) -> str:
    """'add', 'min', ... from the frontend's ``ir.DESCRIPTOR_REDUCE_KIND`` value (or a string)."""
    return (kind if isinstance(kind, str) else kind.name).lower()


def combine(kind: str, old: np.ndarray, new: np.ndarray, elem) -> np.ndarray:
    """``old <kind> new`` element-wise, as the TMA unit does it in global memory, in the element type.
    bf16 (stored as bits) and fp16 add in float32, then round to nearest even: the sum of two 16-bit
    floats is exact in float32, so that is the correctly rounded sum. Float min/max return the other
    operand when one is NaN (PTX min/max without .NaN); integer add wraps."""
    name = str(elem)
    if name == "bf16":
        a, b = ia.bf16_bits_to_f32(old), ia.bf16_bits_to_f32(new)
        out = a + b if kind == "add" else (np.fmin(a, b) if kind == "min" else np.fmax(a, b))
        return ia.f32_to_bf16_bits(out)
    with np.errstate(over="ignore", invalid="ignore"):
        if kind == "add":
            if name == "fp16":
                return (old.astype(np.float32) + new.astype(np.float32)).astype(np.float16)
            return old + new
        if kind in ("min", "max"):
            f = {"min": (np.fmin, np.minimum), "max": (np.fmax, np.maximum)}[kind]
            return (f[0] if name == "fp16" else f[1])(old, new)
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind](old, new)


def _addr(h) -> int:
    """The address a pointer handle holds (a tensor of pointers: its first element, as the lowering takes it)."""
    return int(np.asarray(h.data).reshape(-1)[0])


def _byte_ptrs(addr: int, n: int):
    return ia.TensorHandle(np.uint64(addr) + np.arange(n, dtype=np.uint64), tl.pointer_type(tl.uint8))


def _int(h) -> int:
    if isinstance(h, ia.TensorHandle):
        return int(np.asarray(h.data).reshape(-1)[0])
    return int(tl._unwrap_if_constexpr(h))


class BulkCopyOps:
    """The bulk-copy methods of a CTA (mixed into :class:`~tlx_workbench.sim.hardware.cta.CTA`)."""

    def _bulk_checks(self, what, addr, nbytes, view, line):
        if nbytes % 16 or addr % 16:
            raise self.error(f"{what}: {nbytes} bytes at address {addr:#x}: a bulk copy needs a 16-byte aligned "
                             f"address and a size that is a multiple of 16", line,
                             hint="pad the copy to 16 bytes and align the pointer (cp.async.bulk)")
        if nbytes > view.nbytes:
            raise self.error(f"{what}: {nbytes} bytes do not fit {view.slot_name} ({view.nbytes} bytes)", line,
                             hint="copy at most the buffer's size")

    def bulk_load(self, view: SmemView, addr: int, nbytes: int, slot, read):
        """cp.async.bulk global -> SMEM: ``read()`` gives the ``nbytes`` bytes (uint8, read at issue, or None in a
        timing-only run); they land in the start of ``view`` and complete ``nbytes`` on ``slot``."""
        file, line = self.where()
        t = self.step(line)
        self._bulk_checks("async_load(bulk=True)", addr, nbytes, view, line)
        data = read() if self.run.numerics else None
        start = t.clock
        t.clock += self.cost.issue
        # the TMA engine moves it (cp.async.bulk shares the TMA unit): the TMA load rate and latency
        land_time = self._queue_tma_load(t.clock, nbytes)
        agent = ("tma", slot.array.id, slot.index)
        epoch = self.tma_agents.get(agent, 0) + 1
        self.tma_agents[agent] = epoch
        vc = dict(t.vc)
        vc[agent] = epoch
        self.races.write(view.slot, view.slot_name, vc,
                         Access(agent, epoch, line, t.lane, f"bulk async_load into {view.slot_name}"), start)
        issued = self._issue_bytes(slot, line, nbytes)
        if not hasattr(slot, "tma_last"):
            slot.tma_last = {}
        slot.tma_last[(t.lane, line)] = slot.completed
        owner = slot.array.cta or self
        dst = view.array

        def complete():
            if data is not None:
                dst.reshape(-1).view(np.uint8)[:nbytes] = data
            owner._land(slot, nbytes, land_time, vc, line, issued)

        self.sched.add_async(AsyncOp(complete, f"bulk async_load into {view.slot_name} (line {line})"))
        self.span(t, "tma", start, t.clock, "async_load (bulk)", line, barrier=slot.array.name, slot=slot.index,
                  args={"bytes": nbytes, "lands": land_time, "buffer": view.slot_name})

    def bulk_store(self, view: SmemView, addr: int, nbytes: int, write):
        """cp.async.bulk SMEM -> global: ``nbytes`` from the start of ``view`` to ``addr``, one bulk group."""
        file, line = self.where()
        self._bulk_checks("async_store", addr, nbytes, view, line)
        self.tma_store(view, write, what="async_store", nbytes=nbytes)


class BulkCopyBuilderOps:
    """The builder calls of both TLX frontends for the bulk copies above (mixed into ``tlx_ops.SimBuilder``, which
    gives them ``view_of``, ``one_slot`` and ``scalar``)."""

    # -- TMA store-reduce --------------------------------------------------------------------------------
    def create_async_tma_reduce(self, kind, desc, offsets, source, *rest):       # uTLX (the gluon builder call)
        return self._tma_reduce(kind, desc, offsets, source)

    def create_async_TMA_reduce(self, kind, desc, offsets, source, evict=None):  # Meta's tlx frontend
        return self._tma_reduce(kind, desc, offsets, source)

    def _tma_reduce(self, kind, desc, offsets, source):
        view = self.view_of(source, "async_descriptor_store")
        kind = reduce_kind_name(kind)
        elem = desc.base.dtype.element_ty
        if str(elem) not in _REDUCE_TYPES.get(kind, ()):
            # the compiler's own verifier refuses these (checked on sm_90 and sm_100)
            raise ValueError(f"unsupported reduce kind {kind} for element type {elem} (TMA store-reduce {kind} "
                             f"takes {', '.join(_REDUCE_TYPES[kind])})")
        np_dt = ia.np_dtype(elem)
        cta = self.cta
        block = [int(b) for b in desc.block_shape]

        def write(arr):
            if not cta.run.numerics:
                return
            if arr.size != int(np.prod(block)):
                raise ValueError(f"async_descriptor_store: buffer {list(arr.shape)} does not match the descriptor "
                                 f"block {block}")
            new = arr.reshape(block).astype(np_dt, copy=False)
            cta.in_async_op = True
            try:
                # out-of-bounds elements read as 0 and are dropped by the store: only in-bounds ones change
                old = np.asarray(ia.interpreter_builder.create_descriptor_load(desc, offsets, None, None).data)
                out = combine(kind, old, new, elem).astype(np_dt, copy=False)
                ia.interpreter_builder.create_descriptor_store(desc, ia.TensorHandle(out, elem), offsets)
            finally:
                cta.in_async_op = False

        cta.tma_store(view, write, what=f"async_descriptor_store ({kind})", args={"reduce": kind})

    # -- async_store: cp.async.bulk SMEM -> global -----------------------------------------------------------
    def utlx_async_store(self, args):
        src, dst, size = args
        return self.create_async_store(src, dst, size)

    def create_async_store(self, src, dst, size):
        view = self.view_of(src, "async_store")
        addr, nbytes = _addr(dst), _int(size)
        cta = self.cta

        def write(arr):
            if not cta.run.numerics:
                return
            data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)[:nbytes]
            cta.in_async_op = True
            try:
                ia.masked_store(_byte_ptrs(addr, nbytes), ia.TensorHandle(data.copy(), tl.uint8),
                                np.ones(nbytes, dtype=bool))
            finally:
                cta.in_async_op = False

        cta.bulk_store(view, addr, nbytes, write)
        return None

    # -- async_load(bulk=True): cp.async.bulk global -> SMEM, completing on an mbarrier ------------------------
    def utlx_async_load(self, args):
        if _int(args[-1]) != 1:
            return super().utlx_async_load(args)
        src, result, size, bar = args[:4]
        self._bulk_load(src, result, size, bar)
        return self.scalar(0)               # the async token (the frontend checks it is a value)

    def create_async_load(self, src, result, mask, other, cache, evict, is_volatile, bulk_size=None, barrier=None,
                          bulk=False):
        if not bulk:
            return super().create_async_load(src, result, mask, other, cache, evict, is_volatile)
        self._bulk_load(src, result, bulk_size, barrier)
        return None

    def _bulk_load(self, src, result, size, bar):
        view = self.view_of(result, "async_load")
        addr, nbytes = _addr(src), _int(size)
        cta = self.cta

        def read():
            cta.in_async_op = True
            try:
                got = ia.masked_load(_byte_ptrs(addr, nbytes), np.ones(nbytes, dtype=bool),
                                     ia.TensorHandle(np.zeros(nbytes, dtype=np.uint8), tl.uint8))
            finally:
                cta.in_async_op = False
            return np.asarray(got.data, dtype=np.uint8)

        cta.bulk_load(view, addr, nbytes, self.one_slot(bar, "async_load"), read)

