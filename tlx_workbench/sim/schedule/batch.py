"""Run the CTAs of a launch together: one CTA is simulated, the others replay its data flow at once.

A launch's CTAs run the same code. Where their control flow is the same — the same ops, in the same order, with
the same scalar arguments to every TLX op (buffer index, phase, count) and the same bytes through every global
access — they make the same scheduling choices under one seed, so their clocks, barrier phases, trace and
findings are the same up to the CTA id, and only their *data* differs. So a launch runs in *waves*:

1. **The leader** (the first CTA not yet run, in launch order) runs on the full simulator: scheduler, barriers,
   races, cost model, trace. While it runs, a :class:`Tape` records its data flow: every op whose inputs depend
   on the CTA (``tl.program_id``, what was loaded through a CTA-dependent address, shared memory) with where its
   inputs come from, in the order the leader's interleaving ran them. Ops on values every CTA shares (constants,
   kernel arguments, index arithmetic on them) are not recorded: the leader's result is every CTA's.
2. **Guards.** Wherever such a CTA-dependent value becomes a Python value that steers the simulation — a kernel
   ``if``/``while``/``range`` on it, a TLX op's buffer index, phase or predicate, the bytes a masked access moves
   (its cost) — the tape keeps the leader's value.
3. **The others replay** the tape together (:func:`replay`): each value carries a leading CTA axis, so one numpy
   op does the work of every CTA (batched matmuls for the MMAs, one elementwise op for a whole wave); shared
   memory is one array per allocation with the CTA axis in front. A CTA whose value at a guard differs from the
   leader's has diverged: its global stores so far are undone and it waits for a later wave, where it may lead.
   The CTAs that pass every guard get the leader's trace, stats and write-log entries under their own id.

What this keeps exact: a replaying CTA computes every value with the same numpy code the leader's op ran (the
builder's own method, per CTA where no batched form is known), and it only skips what the guards proved the same.
Anything the tape does not model (clusters, atomics and spin-waits, aliased buffers,
inline assembly or libdevice on CTA-dependent values) raises :class:`Unsupported`, and the launch runs again one
CTA at a time (``engine.run_launch`` restores the memory it wrote first). A leader that deadlocks, races or
reports any finding does the same, so diagnoses come from the one-CTA-at-a-time path.

A seed (``simulate(seed=...)``) picks one interleaving of the tasks, the same for every CTA of the launch: the
scheduler of every CTA (or cluster) starts from the same seeded stream. That is what lets CTAs share a leader.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import triton.language as tl

from .. import interp_adapter as ia
from .blas_threads import on_every_core
from ..ops.mma_numerics import mma_accumulate
from .launch_state import _state
from ..diagnosis.source_lines import kernel_frame_line

#: a wave replays at most this many CTAs at once (memory: each holds its shared memory and live values)
MAX_WAVE = 1024


class Unsupported(Exception):
    """The launch uses something a wave cannot replay: it runs one CTA at a time instead."""


# -- which handles depend on the CTA ----------------------------------------------------------------------------
def node_of(h):
    """The tape node of a handle (or of a tl.tensor's handle) whose value depends on the CTA, else None."""
    if isinstance(h, tl.tensor):
        h = h.handle
    d = getattr(h, "__dict__", None)
    return None if d is None else d.get("_bn")


def refuse_variant(what, *values):
    """Raise Unsupported when recording and one of ``values`` (handles or tl.tensors) depends on the CTA."""
    if _state.rec is not None and any(node_of(v) is not None for v in values):
        raise Unsupported(what)


def _rank() -> int:
    """The cluster rank of the CTA whose task runs (0 outside clusters)."""
    return getattr(_state.cta, "rank", 0)


def _task_key():
    cta = _state.cta
    t = cta.sched.current if cta is not None else None
    return id(t)


# -- the record -------------------------------------------------------------------------------------------------
class Tape:
    """The leader's data flow: ops on CTA-dependent values in the order they ran, and the guards."""

    def __init__(self, run, leader_pids):
        self.run = run
        self.leaders = list(leader_pids)   # the leading cluster's CTAs, by rank (one CTA: a cluster of one)
        self.leader = self.leaders[0]
        self.ops: list = []
        self.n = 0                     # nodes so far
        self.depth: dict = {}          # task -> nesting of recorded ops (ops inside an op are not recorded)
        self.bytes: list | None = None # the global bytes charged inside the op being recorded
        self.pending_loads: dict = {}  # id(array) -> [array, node, landings left] of a TMA load's data
        self.guards = 0

    # nodes
    def new(self, h) -> int:
        n = self.n
        self.n += 1
        if isinstance(h, ia.TensorHandle):
            h._bn = n
        return n

    def spec(self, x):
        """Where an op's argument comes from: ("n", node, dtype) for a CTA-dependent handle, nested lists and
        tuples as such, anything else as the constant it is."""
        if isinstance(x, ia.TensorHandle):
            n = x.__dict__.get("_bn")
            if n is not None:
                return ("n", n, x.dtype, x.attr)
            return ("c", x)
        if isinstance(x, tl.tensor):
            n = node_of(x)
            if n is not None:
                return ("t", n, x.handle.dtype, x.type)
            return ("c", x)
        if isinstance(x, (list, tuple)):
            inner = [self.spec(v) for v in x]
            if any(s[0] != "c" for s in inner):
                return ("l" if isinstance(x, list) else "u", inner)
            return ("c", x)
        if isinstance(x, ia.TensorDescHandle) and x.__dict__.get("_bn") is not None:
            return ("o", x._bn)
        return ("c", x)

    def out_spec(self, out):
        if isinstance(out, ia.TensorHandle):
            return ("h", self.new(out), out.dtype)
        if isinstance(out, tl.tensor):
            return ("t", self.new(out.handle), out.handle.dtype, out.type)
        if isinstance(out, (list, tuple)):
            return ("l" if isinstance(out, list) else "u", [self.out_spec(o) for o in out])
        if out is None:
            return None
        n = self.n
        self.n += 1
        try:
            out._bn = n
        except AttributeError:
            raise Unsupported(f"an op returned a {type(out).__name__} from CTA-dependent values") from None
        return ("o", n)

    def where(self):
        """(kernel frame, line) and the lane the op ran in: (CTA rank in the cluster, task, replica)."""
        cta = _state.cta
        t = cta.sched.current if cta is not None else None
        lane = (_rank(), t.name, t.replica) if t is not None else (_rank(), "default", 0)
        return kernel_frame_line(), lane

    def add(self, op):
        self.ops.append(op)

    # guards
    def guard(self, h, value):
        n = node_of(h)
        if n is None:
            return
        self.guards += 1
        self.ops.append(("g", n, value, kernel_frame_line()[1]))


def variant_args(args, kwargs) -> bool:
    for a in args:
        if isinstance(a, ia.TensorHandle):
            if "_bn" in a.__dict__:
                return True
        elif isinstance(a, tl.tensor):
            if "_bn" in a.handle.__dict__:
                return True
        elif isinstance(a, (list, tuple)):
            if variant_args(a, ()):
                return True
        elif isinstance(a, ia.TensorDescHandle) and "_bn" in a.__dict__:
            return True
    return bool(kwargs) and variant_args(list(kwargs.values()), ())


# builder ops: how a wave replays them
ELEMENTWISE = frozenset(ia.ALU_WEIGHTS) | frozenset({
    "binary_op", "unary_op", "ternary_op", "create_fma", "cast_impl", "create_fp_to_fp", "create_bitcast",
    "create_int_cast", "create_fp_ext", "create_fp_trunc", "create_si_to_fp", "create_ui_to_fp", "create_fp_to_si",
    "create_fp_to_ui", "create_int_to_ptr", "create_ptr_to_int", "create_addptr", "create_fcmpUEQ", "create_fcmpULT",
    "create_fcmpUGT", "create_fcmpULE", "create_fcmpUGE", "create_frem", "create_precise_divf", "create_mulhiui",
    "create_clampf", "create_erf", "create_idiv", "create_umulhi"})
STORES = frozenset({"create_masked_store", "create_descriptor_store"})
LOADS = frozenset({"create_masked_load", "create_descriptor_load"})
REFUSED = frozenset({"create_atomic_rmw", "create_atomic_cas", "create_inline_asm", "create_extern_elementwise",
                     "create_descriptor_gather", "create_descriptor_scatter", "create_dot_scaled",
                     "create_histogram"})
SOURCES = frozenset({"create_get_program_id"})


def wrap_builder(b, names):
    """Record the builder's ops ``names`` on the tape while a leader runs; returns the undo."""
    attrs = {}
    for name in names:
        orig = getattr(b, name, None)
        if orig is None or not callable(orig):
            continue
        attrs[name] = _recording(name, orig)
    return ia._patch_instance(b, attrs)


def _recording(name, orig):
    refused = name in REFUSED
    source = name in SOURCES
    is_load = name in LOADS or name in STORES

    def op(*args, **kwargs):
        rec = _state.rec
        if rec is None:
            return orig(*args, **kwargs)
        key = _task_key()
        if rec.depth.get(key):
            return orig(*args, **kwargs)
        if not source and not variant_args(args, kwargs):
            if refused and name != "create_histogram":
                raise Unsupported(name)
            return orig(*args, **kwargs)
        if refused:
            raise Unsupported(name)
        if name == "create_masked_load" and len(args) >= 6 and args[5]:
            raise Unsupported("volatile load")
        where = rec.where()
        rec.depth[key] = 1
        saved, rec.bytes = rec.bytes, ([] if is_load else None)
        try:
            out = orig(*args, **kwargs)
        finally:
            rec.depth[key] = 0
            charged, rec.bytes = rec.bytes, saved
        if source:
            rec.add(("pid", int(args[0]), rec.out_spec(out), _rank()))
            return out
        rec.add(("op", name, orig, rec.spec(list(args)), kwargs, rec.out_spec(out), where, charged))
        return out
    return op


def clc_answer(resp, out):
    """A CLC query's answer ``out`` (a scalar handle) read from response ``resp``: while a leader records, a source
    like ``tl.program_id``: each CTA of a wave reads its own try_cancel's answer (sim/hardware/clc.py)."""
    rec = _state.rec
    if rec is None or rec.depth.get(_task_key()):
        return out
    if resp.steal is None:
        raise Unsupported("a CLC answer to a cluster that started late")
    rec.add(("clc", resp.steal, rec.out_spec(out)))
    return out


def recorded_call(what, fn, args, out_fn=None):
    """Run ``fn(*args)`` (a TLX op's inner builder call, or a reduction) and record it as one op when an argument
    depends on the CTA; nested builder calls are not recorded."""
    rec = _state.rec
    if rec is None or not variant_args(args, {}):
        return fn(*args)
    key = _task_key()
    if rec.depth.get(key):
        return fn(*args)
    where = rec.where()
    rec.depth[key] = 1
    saved, rec.bytes = rec.bytes, []
    try:
        out = fn(*args)
    finally:
        rec.depth[key] = 0
        charged, rec.bytes = rec.bytes, saved
    rec.add(("op", what, fn, rec.spec(list(args)), {}, rec.out_spec(out), where, charged))
    return out


def quiet(fn, *args):
    """``fn(*args)`` with nothing inside it recorded (a TLX op's own builder call, recorded by the op itself)."""
    rec = _state.rec
    if rec is None:
        return fn(*args)
    key = _task_key()
    depth = rec.depth.get(key, 0)
    rec.depth[key] = depth + 1
    try:
        return fn(*args)
    finally:
        rec.depth[key] = depth


#: TLX builder ops a wave does not replay: a launch that runs one while a leader records runs one CTA at a time
REFUSED_TLX = frozenset({
    "create_tcgen05_mma_scaled", "create_tmem_copy", "utlx_local_alias",
    "utlx_storage_alias_spec", "utlx_storage_alias_local_alloc", "utlx_reuse_group", "utlx_set_buffer_overlap",
    "utlx_remote_shmem_store", "utlx_async_remote_shmem_store", "create_async_TMA_reduce", "create_async_tma_reduce",
    "create_async_store", "utlx_async_store", "_bulk_load", "_tma_reduce", "create_cvt_rs",
    "utlx_fp_to_fp_with_rbits", "create_global_scratch_alloc", "utlx_global_scratch_alloc"})


def refuse_tlx(b):
    """Make the TLX builder ops of :data:`REFUSED_TLX` raise Unsupported while a leader records; returns the undo."""
    attrs = {}
    for name in REFUSED_TLX:
        orig = getattr(b, name, None)
        if orig is None:
            continue

        def op(*args, _orig=orig, _name=name, **kwargs):
            if _state.rec is not None:
                raise Unsupported(_name)
            return _orig(*args, **kwargs)
        attrs[name] = op
    return ia._patch_instance(b, attrs)


def reads_stored(written: bool):
    """A load of a wave (leader or replay) read bytes the launch already stored: CTAs may be talking through
    global memory, in an order a wave does not keep (or a CTA rereads its own output): one CTA at a time."""
    if written and (_state.rec is not None or _state.replay is not None):
        raise Unsupported("a CTA reads global memory the launch stored")


def note_bytes(nbytes):
    """A global access's bytes, charged to the op being recorded or summed for the CTA being replayed."""
    rec = _state.rec
    if rec is not None and rec.bytes is not None:
        rec.bytes.append(int(nbytes))
    elif _state.replay is not None:
        _state.replay.bytes.append(int(nbytes))


# -- TLX data ops (called from tlx_ops / memory_ops while a leader runs) -------------------------------------------
def _check_view(view):
    a = view.alloc
    if not isinstance(a.data, np.ndarray) or a.buf_cols is not None:
        raise Unsupported(f"{a.storage} buffer {a.name} (a storage_alias_spec layout)")
    if a.storage == "tmem":
        if a.col0 is None and a.root is not a:
            raise Unsupported(f"tensor memory buffer {a.name} (aliased, not in TMEM columns)")
    elif a.root is not a or a.byte_keys:
        raise Unsupported(f"shared memory buffer {a.name} (aliased)")


def smem_read(view, handle):
    rec = _state.rec
    if rec is None:
        return
    _check_view(view)
    rec.add(("sr", view, rec.out_spec(handle)))


def smem_write(view, value):
    """``value``: the handle (or the numpy array of a TMA load / cp.async, looked up) stored into ``view``."""
    rec = _state.rec
    if rec is None:
        return
    _check_view(view)
    if isinstance(value, np.ndarray):
        got = rec.pending_loads.get(id(value))
        if got is not None and got[0] is value:
            got[2] -= 1                              # a multicast load lands in each target CTA's buffer
            if got[2] <= 0:
                del rec.pending_loads[id(value)]
            src = ("n", got[1], None, {})
        else:
            src = ("a", value.copy())
    else:
        src = rec.spec(value)
        if src[0] == "c":
            src = ("a", np.asarray(value.data).copy())
    rec.add(("sw", view, src))


def tma_data(array, handle):
    """The data a TMA load read at issue (``handle``: what the descriptor load returned), until it lands."""
    rec = _state.rec
    if rec is None or not isinstance(array, np.ndarray):
        return
    n = node_of(handle)
    if n is not None:
        rec.pending_loads[id(array)] = [array, n, 1]


def tma_fanout(array, targets: int):
    """A TMA load's data lands in ``targets`` buffers (a multicast's CTAs)."""
    rec = _state.rec
    got = rec.pending_loads.get(id(array)) if rec is not None else None
    if got is not None and got[0] is array:
        got[2] = int(targets)


def tmem_mma(a_view, b_view, acc_view, use_acc, into, product):
    """A tcgen05 MMA into TMEM: ``acc = product(A, B[, acc])`` (``into``), ``acc += product(A, B)`` (``use_acc``)
    or ``acc = product(A, B)``. A 2-CTA MMA's ``b_view`` is the pair's two halves (B is them side by side)."""
    rec = _state.rec
    if rec is None:
        return
    for v in (a_view, *(b_view if isinstance(b_view, tuple) else (b_view,)), acc_view):
        _check_view(v)
    rec.add(("mma5", a_view, b_view, acc_view, bool(use_acc), bool(into), product))


def tma_store(desc, offsets, view, np_dt):
    rec = _state.rec
    if rec is None:
        return
    _check_view(view)
    rec.add(("ds", desc, rec.spec(list(offsets)), view, np_dt, rec.where()))


def mma(a, b_view, acc, out, fn):
    """A wgmma's product ``out = fn(a, b, acc)``: ``a`` an SMEM view or a register handle, ``b`` a view."""
    rec = _state.rec
    if rec is None:
        return
    _check_view(b_view)
    if not isinstance(a, ia.TensorHandle):
        _check_view(a)
    rec.add(("mma", a if not isinstance(a, ia.TensorHandle) else rec.spec(a), b_view, rec.spec(acc), fn,
             rec.out_spec(out)))


# -- loops over CTA-dependent bounds: ``for tile in range(tl.program_id(0), n, NUM_SMS)`` -------------------------
# Such a loop variable is a Python int on the one-CTA path, and its arithmetic with other Python ints is Python's
# (free, exact). In a wave it must stay CTA-dependent, so it is a *Python-like* scalar: a tl.tensor marked ``_py``
# whose arithmetic with Python ints and other Python-like scalars is computed as Python computes it (no cost
# charged, as on the one-CTA path) and recorded; where it meets a real tensor, or is assigned, it becomes the
# tensor ``to_tensor`` makes of a Python int (int32 below 2**31), CTA-dependent. The loop itself is guarded on its
# trip count, not on its bounds, so CTAs with the same number of tiles share a wave.
import builtins as _builtins
import operator as _op


def is_py(x) -> bool:
    return type(x) is tl.tensor and "_py" in x.handle.__dict__


def _py_value(x):
    if isinstance(x, tl.tensor):
        return np.asarray(x.handle.data).reshape(-1)[0].item()
    if isinstance(x, tl.constexpr):
        return x.value
    return x


def _py_tensor(rec, value, op):
    """A Python-like scalar of ``value`` whose per-CTA values ``op`` (a tape op without its output) computes; its
    type is the one ``to_tensor`` gives the value (int32 below 2**31), the members' values guarded to have it."""
    ty = ia.interpreter_semantic.to_tensor_type(value)
    h = ia.TensorHandle(np.array([value], dtype=ia.np_dtype(ty)), ty)
    h._py = True
    rec.add(op + (rec.new(h), ty))
    return tl.tensor(h, ty)


def wave_range(*args, _orig=_builtins.range, **kwargs):
    """``range`` in simulated kernel code: Python's, except while a wave leader records with a CTA-dependent bound,
    where it yields Python-like scalars and guards the trip count."""
    rec = _state.rec
    if rec is None or not any(node_of(a) is not None for a in args if isinstance(a, tl.tensor)):
        return _orig(*args, **kwargs)
    if len(args) == 1:
        bounds = (0, args[0], 1)
    else:
        bounds = (args[0], args[1], args[2] if len(args) > 2 else 1)
    vals = [_py_value(b) for b in bounds]
    if not all(isinstance(v, int) for v in vals):
        raise Unsupported("a range over non-integer bounds")
    r = _builtins.range(*vals)
    specs = [rec.spec(b) if isinstance(b, tl.tensor) else ("c", v) for b, v in zip(bounds, vals)]
    rec.add(("trip", specs, len(r), kernel_frame_line()[1]))

    def gen():
        for i, v in enumerate(r):
            yield _py_tensor(rec, v, ("rv", specs[0], specs[2], i))
    return gen()


def tl_range(orig):
    """``tl.range`` (the interpreter's) with :func:`wave_range`'s meaning for CTA-dependent bounds."""
    def rng(arg1, arg2=None, step=None, **kwargs):
        args = (arg1,) if arg2 is None else (arg1, arg2, 1 if step is None else step)
        if _state.rec is not None and any(node_of(a) is not None for a in args if isinstance(a, tl.tensor)):
            return wave_range(*args)
        return orig(arg1, arg2, step, **kwargs)
    rng._wave = True
    return rng


_PY_OPS = {"add": _op.add, "sub": _op.sub, "mul": _op.mul, "floordiv": _op.floordiv, "mod": _op.mod,
           "and_": _op.and_, "or_": _op.or_, "xor_": _op.xor, "shl": _op.lshift, "ashr": _op.rshift,
           "lshr": _op.rshift, "minimum": min, "maximum": max, "equal": _op.eq, "not_equal": _op.ne,
           "less_than": _op.lt, "less_equal": _op.le, "greater_than": _op.gt, "greater_equal": _op.ge}
_PY_UNARY = {"minus": _op.neg, "plus": _op.pos, "invert": _op.invert}
_NP_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide, "mod": np.mod,
           "and_": np.bitwise_and, "or_": np.bitwise_or, "xor_": np.bitwise_xor, "shl": np.left_shift,
           "ashr": np.right_shift, "lshr": np.right_shift, "minimum": np.minimum, "maximum": np.maximum,
           "equal": np.equal, "not_equal": np.not_equal, "less_than": np.less, "less_equal": np.less_equal,
           "greater_than": np.greater, "greater_equal": np.greater_equal, "minus": np.negative,
           "plus": np.positive, "invert": np.invert}


def _concrete(rec, x):
    """The tensor ``to_tensor`` makes of a Python-like scalar's value (CTA-dependent; its dtype guarded)."""
    if not is_py(x):
        return x
    v = _py_value(x)
    ty = ia.interpreter_semantic.to_tensor_type(v)
    h = ia.TensorHandle(np.array([v], dtype=ia.np_dtype(ty)), ty)
    rec.add(("pyconv", rec.spec(x), ty, rec.new(h)))
    return tl.tensor(h, ty)


def patch_semantic(sem):
    """Give Python-like scalars their meaning in the semantic ``sem``'s ops; returns the undo."""
    attrs = {}
    import inspect
    names = [n for n in dir(type(sem)) if not n.startswith("_") and inspect.isfunction(getattr(type(sem), n, None))]
    for name in names:
        orig = getattr(sem, name)
        if name in _PY_OPS or name in _PY_UNARY:
            attrs[name] = _py_op(name, orig)
        elif name in ("to_tensor",):
            attrs[name] = _py_assign(orig)
        elif name not in ("to_tensor_type",):
            attrs[name] = _py_concretize(orig)
    return ia._patch_instance(sem, attrs)


def _any_py(args, kwargs):
    for a in args:
        if type(a) is tl.tensor and "_py" in a.handle.__dict__:
            return True
    return bool(kwargs) and any(is_py(v) for v in kwargs.values())


def _py_op(name, orig):
    binary = name in _PY_OPS

    def op(*args, **kwargs):
        rec = _state.rec
        if rec is None or not _any_py(args, kwargs):
            return orig(*args, **kwargs)
        operands = args[:2] if binary else args[:1]
        if all(is_py(a) or (not isinstance(a, tl.tensor) and type(_py_value(a)) in (int, bool)) for a in operands):
            vals = [_py_value(a) for a in operands]
            f = _PY_OPS[name] if binary else _PY_UNARY[name]
            try:
                out = f(*vals)
            except ZeroDivisionError:
                raise Unsupported("a division by zero in a loop variable's arithmetic") from None
            return _py_tensor(rec, out, ("py", name, [rec.spec(a) if is_py(a) else ("c", v)
                                                      for a, v in zip(operands, vals)]))
        return orig(*[_concrete(rec, a) for a in args], **{k: _concrete(rec, v) for k, v in kwargs.items()})
    return op


def _py_assign(orig):
    def to_tensor(x, *args, **kwargs):
        rec = _state.rec
        if rec is not None and is_py(x):
            return _concrete(rec, x)
        return orig(x, *args, **kwargs)
    return to_tensor


def _py_concretize(orig):
    def op(*args, **kwargs):
        rec = _state.rec
        if rec is None or not _any_py(args, kwargs):
            return orig(*args, **kwargs)
        return orig(*[_concrete(rec, a) for a in args], **{k: _concrete(rec, v) for k, v in kwargs.items()})
    return op


# -- guards on conversions ------------------------------------------------------------------------------------
def patch_conversions():
    """Guard ``tl.tensor.__index__`` / ``__bool__`` (a kernel ``if``, ``while`` or ``range`` on a value) and
    refuse ``.T`` on CTA-dependent values; put on after each ``_patch_lang`` of the launch (restored by its scope)."""
    cls = tl.tensor
    index, boolean, trans = cls.__index__, cls.__bool__, cls.__dict__.get("T")
    if getattr(index, "_batch_guard", False):
        return

    def __index__(self):
        v = index(self)
        rec = _state.rec
        if rec is not None and node_of(self) is not None:
            rec.guard(self, v)
        return v

    def __bool__(self):
        v = boolean(self)
        rec = _state.rec
        if rec is not None and node_of(self) is not None:
            if np.asarray(self.handle.data).size != 1:
                raise Unsupported("the truth of a CTA-dependent block")
            rec.guard(self, v)
        return v

    __index__._batch_guard = __bool__._batch_guard = True
    cls.__index__, cls.__bool__ = __index__, __bool__
    if not getattr(tl.range, "_wave", False):
        tl.range = tl_range(tl.range)
    if isinstance(trans, property):
        def _t(self):
            refuse_variant(".T", self)
            return trans.fget(self)
        cls.T = property(_t)


def patch_reductions():
    """Record reductions and scans on CTA-dependent values as one op each; returns the undo."""
    import copy
    saved = []
    for cls in (ia.ReduceOps, ia.ScanOps):
        orig = cls.apply
        saved.append((cls, cls.__dict__.get("apply")))

        def apply(self, input, _orig=orig):
            tensors = input if isinstance(input, tuple) else (input,)
            rec = _state.rec
            if rec is None or not variant_args(tensors, {}):
                return _orig(self, input)
            as_tuple = isinstance(input, tuple)

            def one(*ts):
                return _orig(self, tuple(ts) if as_tuple else ts[0])

            def batched(*ts):
                # the same reduction one axis further in, over tensors with the CTA axis in front
                if self.axis is None:
                    raise _NoBatch()
                wide = copy.copy(self)
                wide.axis = self.axis + 1
                with ia.wave_shapes():
                    return _orig(wide, tuple(ts) if as_tuple else ts[0])
            one.batched = batched
            return recorded_call("reduce", one, tuple(tensors))
        cls.apply = apply

    def undo():
        for cls, v in saved:
            if v is None:
                del cls.apply
            else:
                cls.apply = v
    return undo


# -- the replay -------------------------------------------------------------------------------------------------
class _ReplayState:
    def __init__(self):
        self.bytes: list = []


class Wave:
    """The outcome of one replay: which members passed, what failed where."""

    def __init__(self, members):
        self.members = list(members)
        self.passed: list = []
        self.failed: dict = {}       # pid -> (guard line, value) or error text


def _last_uses(ops):
    last = {}

    def walk(s, i):
        if s is None:
            return
        k = s[0]
        if k in ("n", "t", "o"):
            last[s[1]] = i
        elif k in ("l", "u"):
            for x in s[1]:
                walk(x, i)
    for i, op in enumerate(ops):
        k = op[0]
        if k == "op":
            walk(op[3], i)
        elif k == "sw":
            walk(op[2], i)
        elif k == "ds":
            walk(op[2], i)
        elif k == "mma":
            if isinstance(op[1], tuple):
                walk(op[1], i)
            walk(op[3], i)
        elif k == "g":
            last[op[1]] = i
        elif k == "trip":
            for x in op[1]:
                walk(x, i)
        elif k == "rv":
            walk(op[1], i)
            walk(op[2], i)
        elif k in ("py",):
            for x in op[2]:
                walk(x, i)
        elif k == "pyconv":
            walk(op[1], i)
    return last


def replay(tape: Tape, members, builder) -> Wave:
    """Replay ``tape`` for ``members`` (clusters like the leader's, each [(grid index, pid, rank), ...] by rank;
    none of them the leader) at once. Global memory is written as each member would; a member that fails a guard
    (or an access check) has its stores undone and is listed in ``wave.failed`` (by its first CTA)."""
    return _Replay(tape, members, builder).run()


class _Replay:
    def __init__(self, tape, members, builder):
        self.tape = tape
        # a member is named by its first CTA: (pid, grid index); its CTAs by rank in ``ranks``
        self.members = [(cl[0][1], cl[0][0]) for cl in members]
        self.ranks = {cl[0][1]: [(pid, idx) for idx, pid, _ in cl] for cl in members}
        self.b = builder
        self.C = len(members)
        self.vals: dict = {}
        self.smem: dict = {}
        self.undo: list = [[] for _ in members]     # per member: (restore fn) in store order
        self.wave = Wave([p for p, _ in self.members])

    # values
    def _val(self, s):
        """The batched value of an argument spec (leading CTA axis) or the constant."""
        k = s[0]
        if k == "c":
            return s[1]
        if k == "a":
            return s[1]
        if k in ("n", "t", "o"):
            return self.vals[s[1]]
        raise AssertionError(k)

    def _arg(self, s, c):
        """Argument spec ``s`` for member ``c`` alone, as the op takes it."""
        k = s[0]
        if k == "c":
            return s[1]
        if k == "n":
            h = ia.TensorHandle(self.vals[s[1]][c], s[2])
            if s[3]:
                h.attr = dict(s[3])
            return h
        if k == "t":
            return tl.tensor(ia.TensorHandle(self.vals[s[1]][c], s[2]), s[3])
        if k == "o":
            return self.vals[s[1]][c]
        if k == "l":
            return [self._arg(x, c) for x in s[1]]
        if k == "u":
            return tuple(self._arg(x, c) for x in s[1])
        raise AssertionError(k)

    def _batched_arg(self, s, sl=None):
        """Argument spec ``s`` for every member at once (CTA axis in front; ``sl``: only those members)."""
        k = s[0]
        if k == "c":
            return s[1]
        if k == "n":
            v = self.vals[s[1]]
            h = ia.TensorHandle(v if sl is None else v[sl], s[2])
            if s[3]:
                h.attr = dict(s[3])
            return h
        if k == "t":
            v = self.vals[s[1]]
            v = v if sl is None else v[sl]
            ty = s[3]
            if not ty.is_block():
                raise _NoBatch()
            with ia.wave_shapes():
                return tl.tensor(ia.TensorHandle(v, s[2]), tl.block_type(ty.scalar, [v.shape[0], *ty.shape]))
        if k == "l":
            return [self._batched_arg(x, sl) for x in s[1]]
        if k == "u":
            return tuple(self._batched_arg(x, sl) for x in s[1])
        raise _NoBatch()

    def _set_out(self, spec, outs):
        """Store the per-member results ``outs`` (one op result per member) under ``spec``'s nodes."""
        if spec is None:
            return
        k = spec[0]
        if k == "h":
            self.vals[spec[1]] = np.stack([np.asarray(o.data) for o in outs])
        elif k == "t":
            self.vals[spec[1]] = np.stack([np.asarray(o.handle.data) for o in outs])
        elif k == "o":
            self.vals[spec[1]] = list(outs)
        else:
            for i, sub in enumerate(spec[1]):
                self._set_out(sub, [o[i] for o in outs])

    def _set_batched(self, spec, out):
        k = spec[0]
        if k == "h":
            self.vals[spec[1]] = np.asarray(out.data)
        elif k == "t":
            self.vals[spec[1]] = np.asarray(out.handle.data)
        elif k in ("l", "u"):
            for sub, o in zip(spec[1], out):
                self._set_batched(sub, o)
        else:
            raise AssertionError(k)

    # shared memory, batched
    def _bview(self, view):
        a = view.alloc
        if a.storage == "tmem" and a.col0 is not None:
            arr = self._tmem_alloc(a)
        else:
            arr = self.smem.get(a.id)
            if arr is None:
                arr = self.smem[a.id] = np.zeros((self.C,) + a.data.shape, dtype=a.data.dtype)
        if view.index is not None:
            arr = arr[:, view.index]
        for op in view.slices or ():
            if op[0] == "index":
                arr = arr[:, op[1]]
            elif op[0] == "slice":
                arr = arr[(slice(None),) + tuple(slice(o, o + s) for o, s in zip(op[1], op[2]))]
            elif op[0] == "perm":
                arr = arr.transpose((0,) + tuple(p + 1 for p in op[1]))
            elif op[0] == "reinterpret":
                arr = self._reinterpret(arr, op[1], tuple(op[2]), a.storage == "tmem")
        return arr

    def _tmem_alloc(self, a):
        """The allocation's buffers [C, num, m, n] as views of the members' tensor memory (as SmemAlloc lays
        them out in one CTA's: rows on lanes, each buffer a range of 32-bit columns; aliases share columns)."""
        key = ("tmem", getattr(a.cta, "rank", 0))
        tm = self.smem.get(key)
        if tm is None:
            cols = a.cta.tmem.shape[1] if getattr(a.cta, "tmem", None) is not None else 512
            tm = self.smem[key] = np.zeros((self.C, 128, cols), dtype=np.uint32)
        m, n = a.shape
        region = tm[:, :m, a.col0:a.col0 + a.num * a.cpb].view(a.np_dtype)
        return region.reshape(self.C, m, a.num, n).transpose(0, 2, 1, 3)

    def _reinterpret(self, arr, np_dtype, shape, tmem):
        if arr.flags.c_contiguous:
            return arr.view(np_dtype).reshape((self.C,) + shape)
        if tmem and arr.ndim == 3 and len(shape) == 2 and shape[0] == arr.shape[1] and arr.strides[-1] == arr.itemsize:
            nbytes = shape[1] * np.dtype(np_dtype).itemsize
            if nbytes % arr.itemsize == 0 and nbytes <= arr.shape[2] * arr.itemsize:
                return arr[:, :, :nbytes // arr.itemsize].view(np_dtype)
        raise Unsupported("local_reinterpret of a strided view")

    # the failing members
    def _fail(self, bad: np.ndarray, why):
        """Drop the members where ``bad`` (bool per current member) holds: undo their stores, compact the rest."""
        idx = np.flatnonzero(bad)
        for c in idx:
            for restore in reversed(self.undo[c]):
                restore()
            self.wave.failed[self.members[c][0]] = why
        keep = np.flatnonzero(~bad)
        self.members = [self.members[c] for c in keep]
        self.undo = [self.undo[c] for c in keep]
        self.C = len(keep)
        for n, v in list(self.vals.items()):
            if isinstance(v, np.ndarray):
                self.vals[n] = v[keep]
            elif isinstance(v, list):
                self.vals[n] = [v[c] for c in keep]
        for a, v in list(self.smem.items()):
            self.smem[a] = v[keep]

    def run(self) -> Wave:
        tape = self.tape
        last = _last_uses(tape.ops)
        saved = _state.replay, _state.cta
        _state.replay = _ReplayState()
        _state.cta = None
        try:
            for i, op in enumerate(tape.ops):
                if self.C == 0:
                    break
                getattr(self, "_" + op[0].replace("pid", "pid_"))(op)
                for n in [n for n, j in last.items() if j == i]:
                    self.vals.pop(n, None)
                    del last[n]
        finally:
            _state.replay, _state.cta = saved
            _state.replay_where = _state.replay_lane = None
        self.wave.passed = [p for p, _ in self.members]
        return self.wave

    # -- tape ops -----------------------------------------------------------------------------------------------
    def _pid_(self, op):
        _, axis, spec, rank = op
        self.vals[spec[1]] = np.array([[self.ranks[p][rank][1][axis]] for p, _ in self.members], dtype=np.int32)

    def _lane(self, c, lane):
        """The lane (CTA id, task, replica) of member ``c``'s CTA of the rank that ran the op in the leader."""
        rank, task, replica = lane
        return (self.ranks[self.members[c][0]][rank][0], task, replica)

    def _clc(self, op):
        _, k, spec = op
        queue = self.tape.run.clc
        self.vals[spec[1]] = np.array([[queue.value(queue.slot_of[p], k)] for p, _ in self.members], dtype=np.int32)

    def _g(self, op):
        _, n, value, line = op
        v = self.vals[n]
        flat = np.asarray(v).reshape(self.C, -1)[:, 0]
        if isinstance(value, bool):
            bad = (flat != 0) != value
        else:
            bad = flat != value
        if bad.any():
            self._fail(bad, ("guard", line, tuple(flat[bad].tolist())[:1]))

    def _spec_ints(self, s):
        """Per-member Python ints (int64, one per member) of a scalar argument spec."""
        if s[0] == "c":
            return np.full(self.C, int(_py_value(s[1])), np.int64)
        return np.asarray(self.vals[s[1]]).reshape(self.C, -1)[:, 0].astype(np.int64)

    def _trip(self, op):
        _, specs, n, line = op
        start, stop, step = (self._spec_ints(s) for s in specs)
        with np.errstate(all="ignore"):
            trips = np.where(step > 0, (stop - start + step - 1) // np.where(step == 0, 1, step),
                             (start - stop - step - 1) // np.where(step == 0, 1, -step))
        trips = np.maximum(trips, 0)
        bad = trips != n
        if bad.any():
            self._fail(bad, ("trips", line, (int(trips[bad][0]),)))

    def _rv(self, op):
        _, start, step, i, node, ty = op
        self._typed(node, ty, self._spec_ints(start) + i * self._spec_ints(step))

    def _py(self, op):
        _, name, specs, node, ty = op
        args = [self._spec_ints(s) if s[0] != "c" or not isinstance(s[1], bool) else np.full(self.C, s[1])
                for s in specs]
        with np.errstate(all="ignore"):
            out = _NP_OPS[name](*args)
        self._typed(node, ty, np.asarray(out).reshape(self.C))

    def _typed(self, node, ty, v):
        """Store Python-like values ``v`` (one per member) as ``ty``; members whose value needs another type
        (to_tensor's rule) leave the wave."""
        if ty == tl.int1:
            self.vals[node] = v.astype(np.bool_).reshape(self.C, 1)
            return
        to_type = ia.interpreter_semantic.to_tensor_type
        bad = np.array([to_type(int(x)) != ty for x in v], dtype=bool)
        if bad.any():
            v = v[~bad]
            self._fail(bad, ("dtype", None, ()))
        if self.C:
            self.vals[node] = v.astype(ia.np_dtype(ty)).reshape(self.C, 1)

    def _pyconv(self, op):
        _, spec, ty, node = op
        self._typed(node, ty, self._spec_ints(spec))

    def _sr(self, op):
        _, view, spec = op
        self.vals[spec[1]] = self._bview(view).copy()

    def _sw(self, op):
        _, view, src = op
        dst = self._bview(view)
        data = np.asarray(self._val(src))
        if src[0] == "a":
            data = data.astype(dst.dtype, copy=False)
            dst[...] = data.reshape(dst.shape[1:])
        else:
            dst[...] = data.astype(dst.dtype, copy=False).reshape(dst.shape)

    def _mma(self, op):
        _, a, b_view, acc_spec, fn, out = op
        bb = self._bview(b_view)
        if isinstance(a, tuple):
            aa, a_ty = self._val(a), a[2]
        else:
            aa, a_ty = self._bview(a), a.tl_dtype
        acc = self._batched_arg(acc_spec) if acc_spec[0] != "c" else acc_spec[1]
        batched_acc = acc is not None and np.ndim(acc.data) == np.ndim(bb)
        work = aa.shape[-2] * bb.shape[-1] * bb.shape[-2]
        ops = None
        if getattr(fn, "builder_dot", False) and batched_acc and acc.data.shape == aa.shape[:-1] + bb.shape[-1:]:
            ops = ia.tensor_core_operands(ia.TensorHandle(aa, a_ty), ia.TensorHandle(bb, b_view.tl_dtype), acc)
        if ops is not None:
            # the dot's own sum (mma_accumulate), its operands widened once here; each core writes its share of
            # the CTAs into one array (no concatenation after; torch, which widens fp16, is not called on the
            # pool's threads, where its own thread team fought them for the cores)
            av, bv, bits = ops
            accd = acc.data
            res = np.empty(accd.shape, np.float32)
            on_every_core(lambda sl: mma_accumulate(accd[sl], av[sl], bv[sl], bits, out=res[sl]), self.C, work)
            self._set_batched(out, ia.TensorHandle(res, acc.dtype))
            return

        def part(sl):
            z = acc if not batched_acc else ia.TensorHandle(acc.data[sl], acc.dtype)
            return fn(ia.TensorHandle(aa[sl], a_ty), ia.TensorHandle(bb[sl], b_view.tl_dtype), z)
        parts = on_every_core(part, self.C, work)
        res = parts[0] if len(parts) == 1 else ia.TensorHandle(np.concatenate([np.asarray(p.data) for p in parts]),
                                                                parts[0].dtype)
        self._set_batched(out, res)

    def _mma5(self, op):
        _, av, bv, cv, use_acc, into, product = op
        acc = self._bview(cv)
        a = self._bview(av)
        b = np.concatenate([self._bview(v) for v in bv], axis=-1) if isinstance(bv, tuple) else self._bview(bv)

        def part(sl):
            if into:
                acc[sl] = product(a[sl], b[sl], acc[sl])
            elif use_acc:
                acc[sl] = acc[sl] + np.asarray(product(a[sl], b[sl])).astype(acc.dtype, copy=False)
            else:
                acc[sl] = product(a[sl], b[sl])
        on_every_core(part, self.C, a.shape[-2] * b.shape[-1] * b.shape[-2])

    def _ds(self, op):
        _, desc, offs_spec, view, np_dt, (where, lane) = op
        src = self._bview(view)
        block = tuple(int(x) for x in desc.block_shape)
        bad = np.zeros(self.C, bool)
        for c in range(self.C):
            offs = self._arg(offs_spec, c)
            val = ia.TensorHandle(np.ascontiguousarray(src[c]).reshape(block).astype(np_dt, copy=False),
                                  desc.base.dtype.element_ty)
            bad[c] = not self._store(c, "create_descriptor_store", self.b.create_descriptor_store, (desc, val, offs),
                                     where, lane)
        if bad.any():
            self._fail(bad, ("store", where[1]))

    def _op(self, op):
        _, name, fn, argspec, kwargs, out, (where, lane), charged = op
        if name in STORES:
            bad = np.zeros(self.C, bool)
            for c in range(self.C):
                bad[c] = not self._store(c, name, fn, self._arg(argspec, c), where, lane, charged)
            if bad.any():
                self._fail(bad, ("store", where[1]))
            return
        if name == "create_descriptor_load" and self._desc_load(op):
            return
        if name == "create_masked_load" and self._masked_load(op):
            return
        if name in LOADS or charged:
            self._per_member(op, charged)
            return
        rule = _BATCHED.get(name)
        if rule is not None or name in ELEMENTWISE:
            try:
                if rule is None and out is not None and out[0] == "h":
                    # elementwise: big waves split over the cores (numpy's ufuncs release the GIL)
                    size = max((np.size(self.vals[s[1]]) for s in argspec[1] if s[0] == "n"), default=0) \
                        if argspec[0] == "l" else 0
                    parts = on_every_core(lambda sl: fn(*self._batched_arg(argspec, sl), **kwargs), self.C,
                                           size // max(self.C, 1))
                    res = parts[0] if len(parts) == 1 else ia.TensorHandle(
                        np.concatenate([np.asarray(p.data) for p in parts]), parts[0].dtype)
                else:
                    args = self._batched_arg(argspec)
                    res = rule(self, fn, args, kwargs) if rule is not None else fn(*args, **kwargs)
                self._set_batched(out, res)
                return
            except _NoBatch:
                pass
        self._per_member(op, None)

    def _desc_load(self, op) -> bool:
        """A descriptor load whose box lies inside the tensor for every member: numpy slices of global memory, no
        per-member call (the bytes are the whole box for each, as the leader's were). False: not applicable."""
        _, name, fn, argspec, kwargs, out, where, charged = op
        args = argspec[1] if argspec[0] == "l" else None
        mem = _state.hostmem
        if args is None or mem is None or args[0][0] != "c" or args[1][0] not in ("l", "u"):
            return False
        desc = args[0][1]
        offs = []
        for s in args[1][1]:
            if s[0] == "c":
                offs.append(np.full(self.C, int(np.asarray(s[1].data).reshape(-1)[0]), np.int64))
            elif s[0] == "n":
                offs.append(np.asarray(self.vals[s[1]]).reshape(self.C, -1)[:, 0].astype(np.int64))
            else:
                return False
        got = ia.descriptor_boxes(desc, offs, mem)
        if got is None:
            return False
        data, nbytes = got
        if charged is not None and charged != [nbytes]:
            return False
        self._set_batched(out, ia.TensorHandle(data, desc.base.dtype.element_ty))
        return True

    def _masked_load(self, op) -> bool:
        """A pointer load for every member in one call: the access check, the bytes a member charges (its leader's)
        and the write log's read spans per member, the load itself once. False: not applicable."""
        _, name, fn, argspec, kwargs, out, (where, lane), charged = op
        if argspec[0] != "l" or kwargs or _state.ranges is None or (charged is not None and len(charged) != 1):
            return False
        specs = argspec[1]
        if len(specs) != 6 or specs[5][0] != "c" or specs[5][1]:
            return False                                  # volatile: refused when recorded, but be sure
        ptrs = self._val(specs[0]) if specs[0][0] == "n" else None
        if ptrs is None or specs[3][0] != "c" or specs[4][0] != "c":
            return False
        C = self.C
        p = np.asarray(ptrs).reshape(C, -1)
        ptr_h = specs[0]
        ety = ptr_h[2].element_ty if hasattr(ptr_h[2], "element_ty") else None
        if ety is None:
            return False
        itemsize = max(1, ety.primitive_bitwidth // 8)
        mask = specs[1]
        if mask[0] == "c" and mask[1] is None:
            m = np.ones(p.shape, bool)
        elif mask[0] in ("c", "n"):
            mv = mask[1].data if mask[0] == "c" else self.vals[mask[1]]
            m = np.broadcast_to(np.asarray(mv, dtype=bool), np.shape(ptrs)).reshape(C, -1)
        else:
            return False
        lo, hi = _state.ranges
        # a member's addresses lie in one storage when its lowest and highest do (storages are intervals)
        full = bool(m.all())
        if full:
            p_min, p_max = p.min(axis=1).astype(np.int64), p.max(axis=1).astype(np.int64)
        else:
            p_min = np.where(m, p, np.iinfo(np.int64).max).min(axis=1).astype(np.int64)
            p_max = np.where(m, p, 0).max(axis=1).astype(np.int64)
        touches = m.any(axis=1) if not full else np.ones(C, bool)
        inside = ~touches
        for a, b in zip(lo.astype(np.int64), hi.astype(np.int64)):
            inside |= (p_min >= a) & (p_max + itemsize <= b)
        bad = ~inside
        if charged is not None:
            counts = (m.sum(axis=1) if not full else np.full(C, m.shape[1])) * itemsize
            bad |= counts != charged[0]
        run = _state.run
        if run is not None and run.writes is not None:
            good = touches & ~bad
            if good.any():
                sel = p if full and not bad.any() else p[m & good[:, None]]
                reads_stored(run.writes.written(sel, itemsize))
                for a, b in zip(p_min[good].tolist(), p_max[good].tolist()):
                    run.writes.reads.add((a, b + itemsize))      # what WriteLog.load adds for each member
        mm = m & ~bad[:, None] if bad.any() else m        # a failing member loads nothing (no wild address)
        args = [self._batched_arg(s) for s in specs]
        args[0] = ia.TensorHandle(np.asarray(ptrs), ptr_h[2])
        args[1] = ia.TensorHandle(mm.reshape(np.shape(ptrs)), tl.int1)
        other = args[2]
        if other is not None:
            args[2] = ia.TensorHandle(np.broadcast_to(np.asarray(other.data), np.shape(ptrs)).copy(), other.dtype)
        span = (int(p_min[~bad & touches].min()), int(p_max[~bad & touches].max()) + itemsize) \
            if (~bad & touches).any() else None
        res = _gather(np.asarray(ptrs), mm.reshape(np.shape(ptrs)), args[2], ety, itemsize, span)
        if res is None:
            res = type(self.b).create_masked_load(self.b, *args)
        self._set_batched(out, res)
        if bad.any():
            self._fail(bad, ("load", where[1]))
        return True

    def _per_member(self, op, charged):
        _, name, fn, argspec, kwargs, out, (where, lane), _ = op
        outs, bad = [], np.zeros(self.C, bool)
        st = _state.replay
        for c in range(self.C):
            st.bytes = []
            _state.replay_where, _state.replay_lane = where, self._lane(c, lane)
            try:
                outs.append(fn(*self._arg(argspec, c), **kwargs))
            except Exception:  # noqa: BLE001 - this CTA errs (out of bounds): it runs on its own later
                bad[c] = True
                outs.append(None)
                continue
            if charged is not None and st.bytes != charged:
                bad[c] = True
        _state.replay_where = _state.replay_lane = None
        if bad.any():
            good = [o for o, b in zip(outs, bad) if not b]
            self._fail(bad, ("op", where[1]))
            outs = good
        if self.C:
            self._set_out(out, outs)

    def _store(self, c, name, fn, args, where, lane, charged=None) -> bool:
        """Member ``c``'s store; False when it failed (out of bounds, other bytes than the leader's): the caller
        drops it from the wave (its stores, this one included, undone)."""
        st = _state.replay
        restore = _snapshot(self.b, name, args)
        st.bytes = []
        _state.replay_where, _state.replay_lane = where, self._lane(c, lane)
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - this CTA errs (out of bounds): it runs on its own later
            if restore is not None:
                restore()
            return False
        finally:
            _state.replay_where = _state.replay_lane = None
        if restore is not None:
            self.undo[c].append(restore)
        return charged is None or st.bytes == charged


def _gather(ptrs, mask, other, ety, itemsize, span):
    """A masked pointer load as one numpy gather from the storage every address lies in (the interpreter's own
    load reads element by element through raw addresses), or None when the addresses span storages or are not
    aligned to the element. ``span``: (lowest, highest + itemsize) of the addresses loaded."""
    mem = _state.hostmem
    full = bool(mask.all())
    if mem is None or span is None or ptrs.dtype != np.uint64:
        return None
    p_lo, p_hi = span
    for lo, hi in mem.ranges:
        if lo <= p_lo and p_hi <= hi:
            break
    else:
        return None
    # addresses a typed pointer plus offsets make are its base's residue mod the element size: one check
    if (p_lo - lo) % itemsize or (p_hi - itemsize - lo) % itemsize:
        return None
    dt = ia.np_dtype(ety)
    if dt.itemsize != itemsize:
        return None
    whole = mem.bytes_at(lo, (hi - lo) // itemsize * itemsize).view(dt)
    n = ptrs.shape[0]
    out = np.empty(ptrs.shape, dt)
    cols = ptrs.shape[-1]
    if full and ptrs.ndim >= 3 and cols > 1:
        # rows of consecutive elements (a tile addressed as base + row * stride + col): copy whole rows
        rows_of = np.lib.stride_tricks.as_strided(whole, (whole.size - cols + 1, cols), (itemsize, itemsize))

        def by_rows(sl):
            p = ptrs[sl]
            if not (np.diff(p, axis=-1) == np.uint64(itemsize)).all():
                return False
            start = (p[..., 0] - np.uint64(lo)) // np.uint64(itemsize)
            out[sl] = rows_of[start]
            return True
        if all(on_every_core(by_rows, n, ptrs.size // max(n, 1))):
            return ia.TensorHandle(out, ety)

    def part(sl):
        idx = ptrs[sl] - np.uint64(lo)               # unsigned: the pointers' own type, no copy to int64 first
        idx //= np.uint64(itemsize)
        if not full:
            idx[~mask[sl]] = 0
        np.take(whole, idx, out=out[sl])
        if other is not None:
            np.copyto(out[sl], np.broadcast_to(np.asarray(other.data), ptrs.shape)[sl], where=~mask[sl])
        elif not full:
            out[sl][~mask[sl]] = 0
    on_every_core(part, n, ptrs.size // max(n, 1))
    return ia.TensorHandle(out, ety)


class _NoBatch(Exception):
    pass


def _snapshot(b, name, args):
    """A function that puts back what the store ``name(*args)`` is about to overwrite (unhooked: no checks, costs
    or write log), or None when nothing can be overwritten."""
    cls = type(b)
    if name == "create_masked_store":
        ptrs, value, mask = args[0], args[1], args[2]
        m = mask if mask is not None else ia.TensorHandle(np.ones(np.shape(ptrs.data), bool), tl.int1)
        try:
            old = cls.create_masked_load(b, ptrs, m, None, None, None, False)
        except Exception:  # noqa: BLE001 - out of bounds: the store itself will fail and nothing is written
            return None
        return lambda: cls.create_masked_store(b, ptrs, old, m, None, None)
    if name == "create_descriptor_store":
        desc, value, offs = args
        region = ia.descriptor_region(desc, offs, _state.hostmem) if _state.hostmem is not None else None
        if region is not None:
            old = region.copy()

            def put_back():
                region[...] = old
            return put_back
        try:
            ptrs, in_bounds = ia.descriptor_pointers(desc, offs)
            ptrs = ia.TensorHandle(ptrs, tl.pointer_type(desc.base.dtype.element_ty))
            m = ia.TensorHandle(in_bounds, tl.int1)
            old = cls.create_masked_load(b, ptrs, m, None, None, None, False)
        except Exception:  # noqa: BLE001
            return None
        return lambda: cls.create_masked_store(b, ptrs, old, m, None, None)
    return None


# batched forms of the shape ops (the CTA axis in front); elementwise ops broadcast as they are
def _splat(r, fn, args, kwargs):
    ret_ty, arg = args
    shape = tuple(int(s) for s in ret_ty.shape)
    d = np.asarray(arg.data)
    if d.ndim != 2 or d.shape[1] != 1:
        raise _NoBatch()
    out = np.broadcast_to(d.reshape((r.C,) + (1,) * len(shape)), (r.C,) + shape)
    return ia.TensorHandle(np.array(out, dtype=ia.np_dtype(arg.dtype)), arg.dtype.scalar)


def _broadcast(r, fn, args, kwargs):
    arg, shape = args
    return ia.TensorHandle(np.broadcast_to(arg.data, (r.C,) + tuple(shape)), arg.dtype.scalar)


def _expand_dims(r, fn, args, kwargs):
    arg, axis = args
    axis = int(axis)
    return ia.TensorHandle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar)


def _reshape(r, fn, args, kwargs):
    arg, shape = args[0], args[1]
    return ia.TensorHandle(np.asarray(arg.data).reshape((r.C,) + tuple(shape)), arg.dtype.scalar)


def _trans(r, fn, args, kwargs):
    arg, perm = args
    return ia.TensorHandle(np.transpose(arg.data, (0,) + tuple(int(p) + 1 for p in perm)), arg.dtype.scalar)


def _dot(r, fn, args, kwargs):
    a, b, d = args[0], args[1], args[2]
    if not all(isinstance(x, ia.TensorHandle) for x in (a, b, d)):
        raise _NoBatch()
    return fn(*args, **kwargs)


def _reduce(r, fn, args, kwargs):
    batched = getattr(fn, "batched", None)
    if batched is None:
        raise _NoBatch()
    out = batched(*args)
    return out


def _split(r, fn, args, kwargs):
    (val,) = args
    return (ia.TensorHandle(val.data[..., 0], val.dtype.scalar), ia.TensorHandle(val.data[..., 1], val.dtype.scalar))


def _join(r, fn, args, kwargs):
    lhs, rhs = args
    if np.ndim(lhs.data) != np.ndim(rhs.data):
        raise _NoBatch()
    return ia.TensorHandle(np.stack([lhs.data, rhs.data], axis=-1), lhs.dtype.scalar)


_BATCHED = {"create_splat": _splat, "create_broadcast": _broadcast, "create_expand_dims": _expand_dims,
            "create_reshape": _reshape, "create_trans": _trans, "create_dot": _dot, "create_split": _split,
            "create_join": _join, "reduce": _reduce}


# -- the leader's trace, under the members' ids -------------------------------------------------------------------
#: span args that name CTAs (or say what a CLC try_cancel took)
_CTA_ARGS = frozenset({"cta", "leader_cta", "cluster_ctas", "multicast", "stole"})


class TracePlan:
    """Which records of the launch's trace each CTA gets: a leader its own (appended while it ran), a member a copy
    of its leader's under its own id. The copies are made, in launch order, when the trace is first read. A leader
    is a cluster (of one CTA, outside clusters): a member cluster's CTA of rank r gets the records of the leader's
    CTA of rank r, in the order the leader's cluster made them."""

    def __init__(self, trace):
        self.trace = trace
        self.runs: list = []        # (marks before, marks after, the leader's CTA ids by rank)
        self.source: dict = {}      # first CTA id of a cluster -> (index in runs, its CTA ids by rank)
        self.clc_value = None       # (pid, k) -> what the k-th CLC try_cancel of cluster pid took (sim/hardware/clc.py)

    @staticmethod
    def marks(trace):
        return (len(trace._spans), len(trace._barrier_events), len(trace._counters))

    def leader(self, pids, before) -> int:
        pids = tuple(pids)
        self.runs.append((before, self.marks(self.trace), pids))
        self.source[pids[0]] = (len(self.runs) - 1, pids)
        return len(self.runs) - 1

    def members(self, run_index, clusters):
        """``clusters``: each member's CTA ids by rank."""
        for pids in clusters:
            self.source[pids[0]] = (run_index, tuple(pids))

    def install(self, order: dict):
        # the plan lets go of the trace: the deferred fill holds the plan, and a plan holding the trace made a
        # cycle that kept an unread trace (and the launch's records) alive until a full collection
        trace, self.trace = self.trace, None
        trace.defer(lambda tr: self._fill(tr, order))

    def _fill(self, trace, order):
        # hundreds of thousands of new records, none in a cycle: the cyclic collector would walk the growing heap
        # again and again while they are made (most of the time it took)
        import gc
        was = gc.isenabled()
        gc.disable()
        try:
            self._copy(trace, order)
        finally:
            if was:
                gc.enable()

    def _copy(self, trace, order):
        raw = (trace._spans, trace._barrier_events, trace._counters)
        out = ([], [], [])
        new = object.__new__
        for first in sorted(self.source, key=lambda p: order.get(p, 1 << 40)):
            i, pids = self.source[first]
            before, after, leaders = self.runs[i]
            to = dict(zip(leaders, pids))
            one = len(pids) == 1
            pid = pids[0]
            for k in range(3):
                src = raw[k][before[k]:after[k]]
                dst = out[k]
                if pids == leaders:
                    dst.extend(src)
                    continue
                append = dst.append
                # a copy per record with the member's ids (a span's args dict is shared: records are read-only)
                asks = 0
                for r in src:
                    x = new(type(r))
                    d = r.__dict__
                    if one:
                        x.__dict__ = ({**d, "cta": pid, "src_cta": pid} if k == 1 and d["src_cta"] == leaders[0]
                                      else {**d, "cta": pid})
                    else:
                        x.__dict__ = ({**d, "cta": to[d["cta"]], "src_cta": to.get(d["src_cta"], d["src_cta"])}
                                      if k == 1 else {**d, "cta": to[d["cta"]]})
                    if k == 0 and d["args"] and not _CTA_ARGS.isdisjoint(d["args"]):
                        # CTA ids in a span's args (a remote arrive's, a 2-CTA MMA's, a CLC try_cancel's): the
                        # member's; a try_cancel's answer: what this cluster's own took
                        args = {a: ([to.get(c, c) for c in v] if isinstance(v, list) else to.get(v, v))
                                if a in _CTA_ARGS else v for a, v in d["args"].items()}
                        if "stole" in args:
                            args["stole"] = self.clc_value(pid, asks)
                            asks += 1
                        x.args = args
                    append(x)
        trace._spans, trace._barrier_events, trace._counters = out
