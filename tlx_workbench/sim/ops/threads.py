"""Values that differ between the threads of a task: ``tlx.thread_id`` and what depends on it.

The simulator runs a task's threads together, one Python value per op. ``tlx.thread_id(0)`` is the one value
that differs per thread; it is a *per-thread scalar*: a scalar ``tl.tensor`` whose handle holds one element per
thread of the task (the task's threads in order). Scalar arithmetic on it stays per-thread (numpy broadcasting);
what it may reach is modelled as the compiler lowers it for sm_90 (read off its PTX):

* ids are CTA-wide: the default task has threads ``0..32*num_warps-1``; the other partitions follow, placed by
  the compiler's warp-group allocation (largest first, in declaration order among equals: ``warpGroupStartIds``);
* a kernel ``if`` whose condition differs between the task's threads runs its body under a *thread mask*
  (``rewrite.py`` turns the statement into a call of :func:`branch` and the masked form);
* under a mask, or with a per-thread pointer/value, a *scalar* ``tl.store`` or atomic is done by the first thread
  of the task only (the lowering predicates it on that thread: ``if tid == 40:`` around one stores nothing); a
  *block* store or atomic stores the elements that active threads hold, over Triton's default blocked layout
  (``warp_vote.default_blocked``; no more elements than threads: element e belongs to thread e, the lowest
  holder when several threads hold it, which is the one the lowering keeps);
* an arrive on a warp barrier (counted per thread) counts the active threads.

What is not faithful is refused with a ``SimulationError`` naming the line: a block with more elements than
threads stored under a mask (the compiler's coalesced layout, not the default one, decides who holds what), a
per-thread value broadcast into a block (the same), any other TLX op under a mask, ``return``/``break``/
``continue`` in such a branch, and a name assigned inside such a branch and read after it.
"""
from __future__ import annotations

import functools

import numpy as np
import triton.language as tl

from ...errors import SimulationError
from .. import interp_adapter as ia
from ..schedule.launch_state import _state
from ..diagnosis.source_lines import kernel_frame_line
from .warp_vote import _owners

# TLX builtins that may run under a per-thread condition: views, ids and hints change no state; barrier_arrive
# is checked where it counts (warp barriers count the active threads, others are refused there)
ALLOWED_UNDER_MASK = frozenset({
    "thread_id", "local_view", "async_task_replica_id", "cluster_cta_rank", "cluster_size_1d", "clock64",
    "async_descriptor_prefetch_tensor", "barrier_arrive", "dtype_of", "subslice", "local_slice",
    "_buffered_tensor_getitem",
})


def _task():
    cta = _state.cta
    return cta.sched.current if cta is not None else None


def _error(msg, hint, line=None):
    file, here = kernel_frame_line()
    return SimulationError(msg, file=file, line=line or here, hint=hint)


def is_per_thread(x) -> bool:
    """A scalar ``tl.tensor`` holding one value per thread."""
    return isinstance(x, tl.tensor) and not x.type.is_block() and np.asarray(x.handle.data).size > 1


def active(task) -> np.ndarray | None:
    """The task's threads that run the current statement (bool per thread), or None: all of them."""
    return task.lanes[-1] if task is not None and task.lanes else None


def thread_ids(task) -> np.ndarray:
    return (task.thread0 + np.arange(task.threads)).astype(np.int32)


# -- the rewritten `if` -------------------------------------------------------------------------------------
def branch(c, line):
    """0: run the else branch, 1: the body, 2: both, each under its threads (the condition differs between the
    threads that run this statement). What a rewritten kernel ``if`` calls first."""
    if type(c) is tl.tensor and not c.type.is_block():
        d = np.asarray(c.handle.data)
        if d.size > 1:
            t = _task()
            on = active(t)
            v = d.reshape(-1) != 0
            sel = v if on is None else v[on]
            if sel.all():
                return 1
            if not sel.any():
                return 0
            return 2
    return 1 if c else 0


def enter(c, sense, line) -> bool:
    """Narrow the thread mask to the threads where ``c`` is ``sense``; False (and no mask) when none is left."""
    t = _task()
    v = (np.asarray(c.handle.data).reshape(-1) != 0) == bool(sense)
    on = active(t)
    m = v if on is None else (v & on)
    if not m.any():
        return False
    t.lanes.append(m)
    return True


def leave():
    _task().lanes.pop()


def refuse_jump(line, what):
    raise _error(f"`{what}` inside an `if` whose condition differs between the threads of the task (line {line}): "
                 f"the simulator runs a task's threads together and cannot let some of them {what}",
                 "make the condition the same in every thread (e.g. a value that does not depend on "
                 "tlx.thread_id), or move the jump out of the branch", line)


class Diverged(tl.tensor):
    """What a name holds after a branch that only some threads took and that assigned it: each thread may hold
    a different value, which the simulator does not model. Any use is a clear error."""

    def __init__(self, name, line):  # noqa: D107 - no tl.tensor state on purpose
        object.__setattr__(self, "_wb", (name, line))

    def _refuse(self):
        name, line = object.__getattribute__(self, "_wb")
        raise _error(f"`{name}` is assigned inside the `if` at line {line}, whose condition differs between the "
                     f"threads of the task, and read after it: its value differs per thread, which the simulator "
                     f"does not model",
                     f"compute `{name}` outside the branch (e.g. with tl.where), or keep its use inside the branch")

    handle = property(lambda self: self._refuse())
    type = property(lambda self: self._refuse())
    dtype = property(lambda self: self._refuse())
    shape = property(lambda self: self._refuse())

    def __bool__(self):
        self._refuse()

    def __repr__(self):
        name, line = object.__getattribute__(self, "_wb")
        return f"<{name}: differs per thread after line {line}>"


def diverged(name, line):
    return Diverged(name, line)


# -- ops: splat, stores, atomics, arrivals -----------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _holder(shape: tuple, num_warps: int) -> np.ndarray:
    """For each element of a block (flat), the task-relative thread that stores it (the lowest holder)."""
    held = _owners(list(shape), num_warps)                   # (warps, lanes, elements)
    return held.reshape(num_warps * 32, -1).argmax(axis=0)


def _owned(shape, task, on) -> np.ndarray:
    n = int(np.prod(shape))
    if n > task.threads:
        raise _error(f"a block of {n} elements is stored under an `if` whose condition differs between threads, "
                     f"in a task of {task.threads} threads: which thread holds which element is the compiler's "
                     f"layout choice, which the simulator does not know",
                     "store the block outside the branch with a mask (e.g. mask=offs < k), or store a block of at "
                     "most as many elements as the task has threads")
    return on[_holder(tuple(int(s) for s in shape), task.num_warps)].reshape(shape)


def splat(ret_ty, arg, orig):
    d = np.asarray(arg.data)
    if d.size > 1 and not isinstance(arg.dtype, tl.block_type):
        flat = d.reshape(-1)
        if (flat == flat[0]).all():
            return orig(ret_ty, ia.TensorHandle(flat[:1], arg.dtype))
        raise _error("a value that differs between the threads of the task (from tlx.thread_id) is used in a block "
                     "operation: which thread holds which element is the compiler's layout choice, which the "
                     "simulator does not know",
                     "use the per-thread value in scalar code (a condition, a scalar store) or build the block "
                     "from tl.arange instead")
    return orig(ret_ty, arg)


def _first(x):
    if is_per_thread(x):
        h = x.handle
        return tl.tensor(ia.TensorHandle(np.asarray(h.data).reshape(-1)[:1].copy(), h.dtype), x.type)
    return x


def _block_mask(mask, shape, owned):
    if mask is None:
        m = owned
    elif is_per_thread(mask):
        raise _error("a block store's mask differs between threads (it comes from tlx.thread_id)",
                     "build the mask from tl.arange instead")
    else:
        m = np.broadcast_to(np.asarray(mask.handle.data, dtype=bool), shape) & owned
    return tl.tensor(ia.TensorHandle(np.ascontiguousarray(m), tl.int1), tl.block_type(tl.int1, list(shape)))


def _masked(orig, ptr, val, mask, rest, skipped):
    """Run a store or atomic ``orig(ptr, val, mask, *rest)`` as the active threads do."""
    t = _task()
    if t is None:
        return orig(ptr, val, mask, *rest)
    on = active(t)
    if isinstance(ptr, tl.tensor) and ptr.type.is_block():
        if on is None:
            return orig(ptr, val, mask, *rest)
        shape = [int(s) for s in ptr.type.shape]
        return orig(ptr, val, _block_mask(mask, shape, _owned(shape, t, on)), *rest)
    if on is None and not (is_per_thread(ptr) or is_per_thread(val) or is_per_thread(mask)):
        return orig(ptr, val, mask, *rest)
    if on is not None and not on[0]:
        return skipped(val)            # the first thread of the task did not take the branch: nobody does it
    return orig(_first(ptr), _first(val), _first(mask), *rest)


def _nothing(val):
    return None


def _zero_like(val):
    ty = val.type if isinstance(val, tl.tensor) else tl.int32
    return tl.tensor(ia.TensorHandle(np.zeros(1, dtype=ia.np_dtype(ty)), ty), ty)


def _store(orig, ptr, val, mask, *rest):
    return _masked(orig, ptr, val, mask, rest, _nothing)


def _atomic(orig, ptr, val, mask, *rest):
    return _masked(orig, ptr, val, mask, rest, _zero_like)


def _atomic_cas(orig, ptr, cmp, val, *rest):
    t = _task()
    on = active(t)
    if t is None or (on is None and not any(map(is_per_thread, (ptr, cmp, val)))):
        return orig(ptr, cmp, val, *rest)
    if isinstance(ptr, tl.tensor) and ptr.type.is_block():
        if on is None:
            return orig(ptr, cmp, val, *rest)
        raise _error("a block atomic_cas under an `if` whose condition differs between threads: atomic_cas has no "
                     "mask, so the simulator cannot leave out the threads that skip it",
                     "do the compare-and-swap outside the branch, or as a scalar (the first thread does it)")
    if on is not None and not on[0]:
        return _zero_like(val)
    return orig(_first(ptr), _first(cmp), _first(val), *rest)


SEMANTIC_OPS = {"store": _store, "atomic_cas": _atomic_cas,
                **{f"atomic_{op}": _atomic for op in ("add", "max", "min", "and", "or", "xor", "xchg")}}


def install():
    """Give per-thread values their meaning for one launch; returns a function undoing it."""
    return ia.install_per_thread(splat, SEMANTIC_OPS)


def check_tlx_op(task, name):
    """Refuse TLX builtin ``name`` under a per-thread condition unless it is modelled there."""
    if task is not None and task.lanes and name not in ALLOWED_UNDER_MASK:
        raise _error(f"tlx.{name} inside an `if` whose condition differs between the threads of the task: "
                     f"the simulator runs the op for the whole task and cannot model only some threads issuing it",
                     "issue it outside the branch (TLX ops that one thread must do, such as TMA copies and mbarrier "
                     "arrives, already elect that thread), or make the condition the same in every thread")


def arrive_count(task, count: int, per_thread: bool) -> int:
    """Arrivals one ``barrier_arrive`` makes: warp barriers count the threads that run it."""
    on = active(task)
    if not per_thread:
        if on is not None:
            raise _error("tlx.barrier_arrive on an mbarrier inside an `if` whose condition differs between the "
                         "threads of the task: whether the lowering's one arriving thread is among them is not "
                         "modelled",
                         "arrive outside the branch (the arrive is already done by one thread), or use a warp "
                         "barrier (alloc_warp_barrier), whose arrivals count per thread")
        return count
    return count * (task.threads if on is None else int(on.sum()))
