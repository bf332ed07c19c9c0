"""Measured timelines without Proton: rewrite a TLX kernel to record ``clock64`` around its ops.

Proton's instrumentation scopes inside a warp-specialized TLX kernel fail to
compile with triton 3.8 + triton-utlx (``benchmarks/proton_repro/``). This module
does what those scopes would: it rewrites the kernel's source so that every TLX
operation of interest (barrier waits and arrives, TMA loads and stores,
``async_dot`` and its wait, stores) is bracketed by SM cycle-counter reads, and
each warp group (task replica) of each selected CTA writes ``(op id, start, end)``
records into one global int64 buffer, laid out by :class:`Layout`::

    [0:8]          G (grid CTAs), capacity (records per lane; 0: count only), circular, lanes, slots
    [8:8+G]        per CTA id: its slot + 1 (0: not recorded)
    per slot, lane (lane = task index * 8 + replica):
                   header [events, pid + 1, %smid, globaltimer start, end, clock64 start, end, 0]
                   capacity x (event id + 1, t0, t1)

Capacity, circularity and the CTA selection are launch data, not constants: one
compiled kernel runs a *counting* pass (capacity 0, every CTA: each lane's event
count, SM, start and end) and then the *recording* pass with buffers sized from
those counts, so every event of every selected CTA is kept (:func:`sizes_from_counts`).
A circular buffer (``circular=True``) keeps each lane's last ``capacity`` events and
the Trace says how many early ones were dropped. :func:`decode` turns the buffer
into a :class:`~tlx_workbench.trace.Trace` in ns on one axis for all CTAs: each
CTA's cycles are converted with the SM clock it ran at (clock64 and %globaltimer
read at the start and end of every lane), anchored at its globaltimer start.

Calls into ``@triton.jit`` helpers are timed too: inside an async task, a
statement that calls a helper (a name, or ``module.name``, of the kernel's or the
helper's module) whose body (or a helper it calls, up to ``MAX_HELPER_DEPTH``
deep) holds TLX ops of interest calls an instrumented copy ``_wb_<name>``
instead, which takes the record state as leading arguments and returns the
advanced record count next to its own value::

    x = f(a)          ->  x, _wb_n = _wb_f(_wb_prof, _wb_base, _wb_n, _wb_lim, a)
    a, b = f(a)       ->  (a, b), _wb_n = _wb_f(...)    (the copy returns ``(a, b), _wb_n``)
    f(a)              ->  _wb_n = _wb_f(...)      (a helper that returns nothing)

Its ops' event sites carry the helper's own file and source line. A helper call
inside a larger expression (``y = f(a) + 1``, ``use += f(a)``, ``return f(a)``,
an argument of another call) stays as it is and is not timed; so does an op
that is not a statement of its own. Each copy runs in a namespace of its own
module's globals, so helpers imported from another module compile with the
names they see there. ``mode="proton"`` (Proton scopes) times the kernel's own
statements only.

The rewrite itself (source to source: which ops, their event sites, the helper copies) is
``compiler/instrument_rewrite.py``; this module compiles it, lays out and decodes the buffer.

>>> inst = instrument(my_kernel)                  # doctest: +SKIP
>>> inst.kernel[grid](buf, *args, **constexprs)   # doctest: +SKIP
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import os

from ..compiler.instrument_rewrite import MAX_REPLICAS, EventSite, _rewrite, op_set
from ..errors import GPUError


HEADER = 8                    # int64 words of the buffer's own header, and of each lane's
_LANE_HDR = ("events", "pid", "smid", "gt0", "gt1", "clk0", "clk1")


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where things are in a record buffer: ``grid`` CTAs, ``slots`` recorded CTAs, ``lanes`` per CTA."""
    grid: int
    slots: int
    lanes: int
    capacity: int
    circular: bool = False

    @property
    def lane_words(self) -> int:
        return HEADER + 3 * self.capacity

    @property
    def records_at(self) -> int:
        return HEADER + self.grid

    @property
    def words(self) -> int:
        return self.records_at + self.slots * self.lanes * self.lane_words

    @property
    def nbytes(self) -> int:
        return 8 * self.words

    @classmethod
    def read(cls, buf) -> "Layout":
        g, cap, circ, lanes, slots = (int(x) for x in buf[:5])
        return cls(g, slots, lanes, cap, bool(circ))

    def lanes_view(self, buf):
        """(slots, lanes, lane_words) int64 view of the per-lane regions."""
        return buf[self.records_at:self.words].reshape(self.slots, self.lanes, self.lane_words)


def make_buffer(layout: Layout, ctas, device="cpu"):
    """A zeroed record buffer with ``layout`` and the CTA ids ``ctas`` (one slot each, in order) selected."""
    import torch
    ctas = list(ctas)
    if len(ctas) != layout.slots:
        raise ValueError(f"{len(ctas)} CTAs for {layout.slots} slots")
    buf = torch.zeros(layout.words, dtype=torch.int64)
    buf[:5] = torch.tensor([layout.grid, layout.capacity, int(layout.circular), layout.lanes, layout.slots])
    for slot, pid in enumerate(ctas):
        if not 0 <= pid < layout.grid:
            raise ValueError(f"CTA {pid} is outside the grid of {layout.grid}")
        buf[HEADER + pid] = slot + 1
    return buf.to(device)


@dataclasses.dataclass
class Instrumented:
    """An instrumented kernel: launch ``kernel[grid](buffer, *args, **kw)`` with a buffer from :meth:`buffer`."""
    kernel: object
    source: str
    sites: list[EventSite]
    tasks: list[str]           # task names by task index
    capacity: int              # defaults for :meth:`buffer`
    max_ctas: int
    file: str
    helpers: tuple = ()        # names of the @jit helpers whose ops are timed too
    totals: bool = False       # per-site totals (decode_totals), not per-event records (decode)

    @property
    def lanes(self) -> int:
        return max(1, len(self.tasks)) * MAX_REPLICAS

    def layout(self, grid: int, slots: int, capacity: int, circular: bool = False) -> Layout:
        return Layout(grid, slots, self.lanes, capacity, circular)

    def buffer(self, device="cuda", *, grid: int | None = None, ctas=None, capacity: int | None = None,
               circular: bool = False):
        """A record buffer: CTAs ``ctas`` (ids; default: the first ``max_ctas``) of a grid of ``grid`` CTAs
        (default: just those), ``capacity`` records per lane (0: count events only).

        >>> buf = inst.buffer("cuda", grid=128, ctas=[0, 1, 126, 127], capacity=900)   # doctest: +SKIP
        """
        ctas = list(range(self.max_ctas)) if ctas is None else list(ctas)
        grid = (max(ctas) + 1 if ctas else 1) if grid is None else grid
        cap = self.capacity if capacity is None else capacity
        return make_buffer(self.layout(grid, len(ctas), cap, circular), ctas, device)


def counts_of(buf) -> dict:
    """Per recorded CTA id: {"events": [per lane count], "smid", "gt0", "gt1"} of a (counting) launch's buffer."""
    import numpy as np
    buf = np.asarray(buf, dtype=np.int64)
    lay = Layout.read(buf)
    v = lay.lanes_view(buf)
    out = {}
    for slot in range(lay.slots):
        hdr = v[slot, :, :len(_LANE_HDR)]
        ran = hdr[:, 1] > 0
        if not ran.any():
            continue
        pid = int(hdr[ran, 1][0]) - 1
        out[pid] = {"events": [int(x) for x in hdr[:, 0]], "smid": int(hdr[ran, 2][0]),
                    "gt0": int(hdr[ran, 3].min()), "gt1": int(hdr[ran, 4].max())}
    return out


def select_ctas(spec, grid: int, counts: dict | None = None) -> list[int]:
    """The CTA ids that ``spec`` names in a grid of ``grid`` CTAs, in order, each once.

    ``spec``: an int N (the first N), ``"all"``, a list of ids, or a dict of ``first=N``,
    ``last=N`` (the last N ids: the hardware starts CTAs in id order, so these run in the last
    wave), ``last_wave=N`` (the N CTAs that started last in the counting launch whose
    :func:`counts_of` is ``counts``, by %globaltimer) and ``sms=[...]`` (the CTAs that ran on those
    SMs in that launch). A CTA's SM and start can differ between launches; the Trace records the
    SM each recorded CTA really ran on.

    >>> select_ctas({"first": 2, "last": 2}, 128)
    [0, 1, 126, 127]
    """
    if spec == "all":
        return list(range(grid))
    if isinstance(spec, int):
        return list(range(min(spec, grid)))
    if isinstance(spec, dict):
        unknown = set(spec) - {"first", "last", "last_wave", "sms"}
        if unknown:
            raise ValueError(f"unknown CTA selection keys {sorted(unknown)}: use first=, last=, last_wave=, sms=")
        if counts is None and (spec.get("sms") is not None or spec.get("last_wave")):
            raise ValueError("selecting CTAs by SM or by start time needs a counting launch's counts")
        out = list(range(min(spec.get("first", 0), grid)))
        out += list(range(max(0, grid - spec.get("last", 0)), grid))
        if spec.get("last_wave"):
            late = sorted(counts, key=lambda p: (counts[p]["gt0"], p))[-int(spec["last_wave"]):]
            out += sorted(late)
        if spec.get("sms") is not None:
            sms = set(spec["sms"])
            out += sorted(p for p, c in counts.items() if c["smid"] in sms)
        return list(dict.fromkeys(out))
    ids = [int(p) for p in spec]
    bad = [p for p in ids if not 0 <= p < grid]
    if bad:
        raise ValueError(f"CTA ids {bad} are outside the grid of {grid} CTAs")
    return list(dict.fromkeys(ids))


def sizes_from_counts(counts: dict, ctas) -> int:
    """The capacity that keeps every event of CTAs ``ctas``: their busiest lane's count (at least 1)."""
    return max([1] + [max(counts[p]["events"]) for p in ctas if p in counts])


# The SM's cycle counter, SM id and global ns timer are ``counters.py``'s (_wb_clock, _wb_smid, _wb_gtime in
# the instrumented module). The lane's base and limit come from the buffer's header: one compiled kernel counts
# (capacity 0) and records (capacity from the counts), for any CTAs; limit > 0 keeps the first events, < 0 the
# last (circular), 0: the CTA is not recorded.
_RECORD_SRC = '''
@triton.jit
def _wb_start(buf, pid, lane):
    grid = tl.load(buf)
    cap = tl.load(buf + 1)
    circ = tl.load(buf + 2)
    lanes = tl.load(buf + 3)
    slot = tl.load(buf + 8 + tl.minimum(pid, grid - 1)) - 1
    on = (slot >= 0) & (pid < grid)
    base = 8 + grid + (tl.maximum(slot, 0) * lanes + lane) * (8 + 3 * cap)
    lim = tl.where(on, tl.where(circ != 0, -cap, cap), 0).to(tl.int32)
    if on:
        p = buf + base
        tl.store(p + 1, pid.to(tl.int64) + 1)
        tl.store(p + 2, _wb_smid().to(tl.int64))
        tl.store(p + 3, _wb_gtime())
        tl.store(p + 5, _wb_clock())
    return base + 8, tl.where(on, lim, -2147483647 - 1)

@triton.jit
def _wb_finish(buf, base, lim, n):
    if lim != -2147483647 - 1:
        p = buf + base - 8
        tl.store(p + 6, _wb_clock())
        tl.store(p + 4, _wb_gtime())
        tl.store(p, n.to(tl.int64))

@triton.jit
def _wb_rec(buf, base, n, lim, ev: tl.constexpr, t0, t1):
    if lim > 0:
        if n < lim:
            p = buf + base + n * 3
            tl.store(p, ev + 1)          # a constant: the record does not depend on the clock's value
            tl.store(p + 1, t0)
            tl.store(p + 2, t1)
    elif lim < 0:
        if lim != -2147483647 - 1:
            p = buf + base + (n % (-lim)) * 3
            tl.store(p, ev + 1)
            tl.store(p + 1, t0)
            tl.store(p + 2, t1)
'''

# totals=True: no record per event; each op site's count, summed and longest duration (clock64 cycles) in
# the lane's record area, words 3 * site .. 3 * site + 2, by relaxed atomics (no address from the event
# count, no branch on it: a few instructions between the two clock reads' neighbours, not a record)
_TOTALS_REC_SRC = '''
@triton.jit
def _wb_rec(buf, base, n, lim, ev: tl.constexpr, t0, t1):
    if lim > 0:
        p = buf + base + ev * 3
        d = t1 - t0
        tl.atomic_add(p, 1, sem="relaxed")
        tl.atomic_add(p + 1, d, sem="relaxed")
        tl.atomic_max(p + 2, d, sem="relaxed")
'''


def instrument(kernel, *, capacity: int = 512, max_ctas: int = 4, mode: str = "clock", ops=None,
               totals: bool = False) -> Instrumented:
    """An instrumented copy of ``kernel`` (a ``@triton.jit`` TLX kernel); see the module docstring.

    ``capacity`` and ``max_ctas`` are only the defaults of :meth:`Instrumented.buffer`: the compiled
    kernel reads both from the buffer it is launched with.

    ``ops``: which ops are timed: None (every op of :data:`OPS`), ``"waits"`` (the waits only: a kernel
    closer to the plain one, whose busy time is the rest), or op names. ``totals=True``: no record per
    event; each op site's count, summed and longest duration, by atomics into the lane's record area
    (capacity: at least the number of sites; :func:`decode_totals` reads it), so the loop body gains two
    clock reads and three fire-and-forget atomics per timed op, not a record's address arithmetic and stores.

    >>> inst = instrument(kernel, ops="waits", totals=True)           # doctest: +SKIP
    >>> buf = inst.buffer("cuda", grid=128, ctas=[0], capacity=len(inst.sites))   # doctest: +SKIP

    ``mode="proton"`` gives a copy with Proton scopes instead (launched without the buffer),
    around the kernel's own statements only (ops inside @jit helpers are not scoped).
    """
    import triton
    import triton.language as tl
    from .transport import _underlying_function
    func = _underlying_function(kernel)
    if func is None:
        raise GPUError(f"cannot instrument {kernel!r}: not a Triton kernel",
                       hint="pass the @triton.jit function itself")
    try:
        lines, first = inspect.getsourcelines(func)
    except OSError as e:
        raise GPUError(f"cannot read the source of {func.__name__}: {e}",
                       hint="define the kernel in a file or a notebook cell") from None
    file = func.__code__.co_filename
    if totals and mode != "clock":
        raise GPUError("totals=True needs the clock recorder", hint="instrument(kernel, totals=True)")
    new_src, sites, tasks, copies = _rewrite("".join(lines), first, mode, func.__globals__, file, op_set(ops))
    if not sites:
        raise GPUError(f"{func.__name__} has no TLX operation to time", file=file, line=first,
                       hint="profile records barrier waits/arrives, TMA loads/stores, async_dot and stores that "
                            "are statements of their own, in the kernel or in a @jit helper called as a statement "
                            "(`x = helper(...)`, `helper(...)`) inside an async task")
    helper_src = "".join(f"\n\n@triton.jit\n{c.source}\n" for c in copies)
    if mode == "proton":
        body = "\n\n@triton.jit\n" + new_src + "\n"
    else:
        rec = _RECORD_SRC.split("@triton.jit\ndef _wb_rec(")[0] + _TOTALS_REC_SRC if totals else _RECORD_SRC
        body = rec + helper_src + "\n\n@triton.jit\n" + new_src + "\n"
    digest = hashlib.sha1(body.encode()).hexdigest()[:16]
    from .transport import _CACHE_DIR
    os.makedirs(_CACHE_DIR, exist_ok=True)
    path = os.path.join(_CACHE_DIR, f"instrumented_{mode}_{func.__name__}_{digest}.py")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
    ns = dict(func.__globals__)
    import triton.language.extra.tlx as tlx
    from .counters import global_ns, sm_clock, sm_id
    modname = f"tlxwb_instrumented_{digest}"
    ns.update(triton=triton, tl=tl, tlx=tlx, __file__=path, __name__=modname, _wb_clock=sm_clock, _wb_gtime=global_ns,
              _wb_smid=sm_id)
    if mode == "proton":
        import triton.profiler.language as pl
        ns["pl"] = pl
    # every top-level statement runs in the kernel's namespace, except the copies of helpers
    # from other modules: each of those runs among its own module's names (one namespace per
    # module), so that it compiles with what its module imports
    spaces = {id(func.__globals__): ns}
    home = {}
    for c in copies:
        g = c.globals
        if id(g) not in spaces:
            spaces[id(g)] = dict(g, triton=triton, __file__=path, __name__=f"{modname}_{len(spaces)}")
        home[c.name] = spaces[id(g)]
    made = {}
    for node in compile(body, path, "exec", ast.PyCF_ONLY_AST).body:
        target = home.get(node.name, ns) if isinstance(node, ast.FunctionDef) else ns
        exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), target)
        if isinstance(node, ast.FunctionDef) and node.name in home:
            made[node.name] = target[node.name]
    for space in spaces.values():
        if space is not ns:
            space.update(_wb_clock=ns["_wb_clock"], _wb_rec=ns["_wb_rec"])
        space.update(made)
    return Instrumented(ns[func.__name__], body, sites, tasks, capacity, max_ctas, file,
                        tuple(dict.fromkeys(c.helper for c in copies)), totals)


_UNSET = -2147483648



def _recorded_slots(lay, v):
    """Each CTA slot that ran: (slot, its lanes' headers, the lanes that ran, their headers, its SM clock in
    GHz from globaltimer vs clock64, or None when no lane was timed)."""
    import numpy as np
    for slot in range(lay.slots):
        hdr = v[slot, :, :len(_LANE_HDR)]
        ran = np.nonzero(hdr[:, 1] > 0)[0]
        if len(ran) == 0:
            continue
        h = hdr[ran]
        timed = (h[:, 4] > h[:, 3]) & (h[:, 6] > h[:, 5]) & (h[:, 3] > 0)
        ghz = float((h[timed, 6] - h[timed, 5]).sum() / (h[timed, 4] - h[timed, 3]).sum()) if timed.any() else None
        yield slot, hdr, ran, h, ghz

def decode(buf, sites: list[EventSite], tasks: list[str], *, file: str | None = None, meta: dict | None = None,
           unit: str = "ns"):
    """The :class:`Trace` (source "gpu") that an instrumented launch's buffer holds.

    ``unit="ns"``: one time axis for every CTA, 0 at the first recorded CTA's start
    (%globaltimer), each CTA's cycles converted at the SM clock it ran at (its lanes'
    clock64 and globaltimer between start and end); ``meta["ctas"]`` holds per CTA its SM,
    start, end and clock. Without globaltimer readings (or ``unit="cycles"``) each CTA is in
    its own cycles from its start. ``meta["events"]`` counts the events recorded and those
    dropped: early ones (a circular buffer), late ones (a buffer too small).

    >>> tr = decode(buf.cpu().numpy(), inst.sites, inst.tasks, file=inst.file)    # doctest: +SKIP
    >>> tr.meta["events"]                                                          # doctest: +SKIP
    {'recorded': 20736, 'dropped_early': 0, 'dropped_late': 0}
    """
    import numpy as np

    from ..trace import Span, Trace
    a = np.asarray(buf, dtype=np.int64)
    lay = Layout.read(a)
    v = lay.lanes_view(a)
    ctas = []
    for slot, hdr, ran, h, ghz in _recorded_slots(lay, v):
        first = ran[int(np.argmin(h[:, 5]))]
        ctas.append(dict(slot=slot, pid=int(h[0, 1]) - 1, lanes=ran, smid=int(h[0, 2]), ghz=ghz,
                         clk0=int(hdr[first, 5]), gt0=int(hdr[first, 3]), gt1=int(h[:, 4].max()),
                         clk1=int(h[:, 6].max())))
    in_ns = unit == "ns" and bool(ctas) and all(c["ghz"] for c in ctas)
    t_zero = min(c["gt0"] for c in ctas) if in_ns else 0
    tr = Trace(time_unit="ns" if in_ns else "cycles", source="gpu",
               meta=dict(meta or {}, recorder="clock64", capacity=lay.capacity, circular=lay.circular))
    if unit == "ns" and not in_ns:
        tr.meta["clock"] = "no %globaltimer readings: each CTA in its own cycles from its start"
    recorded = dropped_early = dropped_late = truncated = unfinished = 0
    per_cta = []
    for c in ctas:
        n_cta = 0
        for lane in c["lanes"]:
            hdr = v[c["slot"], lane, :len(_LANE_HDR)]
            recs = v[c["slot"], lane, HEADER:].reshape(lay.capacity, 3)
            n_total = int(hdr[0])
            if hdr[4] == 0:             # the lane never reached its end (a hang, a return inside a task)
                unfinished += 1
                n_total = int((recs[:, 0] > 0).sum())
            if lay.circular and n_total > lay.capacity:
                start = n_total % lay.capacity
                order = np.concatenate([recs[start:], recs[:start]])
                dropped_early += n_total - lay.capacity
                truncated += 1
            else:
                keep = min(n_total, lay.capacity)
                order = recs[:keep]
                if n_total > keep:
                    dropped_late += n_total - keep
                    truncated += 1
            order = order[order[:, 0] > 0]
            recorded += len(order)
            n_cta += len(order)
            task = tasks[lane // MAX_REPLICAS] if lane // MAX_REPLICAS < len(tasks) else "?"
            replica = int(lane % MAX_REPLICAS)
            if in_ns:
                conv = (lambda t, c=c: (c["gt0"] - t_zero) + (t - c["clk0"]) / c["ghz"])
            else:
                conv = (lambda t, c=c: float(t - c["clk0"]))
            for ev, t0, t1 in order:
                site = sites[int(ev) - 1]
                tr.add_span(Span(cta=c["pid"], task=task, replica=replica, kind=site.kind, start=conv(int(t0)),
                                 end=conv(int(max(t1, t0))), name=site.op, line=site.line,
                                 file=site.file or file, barrier=site.barrier,
                                 args={"helper": site.func} if site.func else {}))
        end = (c["gt1"] - t_zero) if in_ns else float(c["clk1"] - c["clk0"])
        per_cta.append({"cta": c["pid"], "sm": c["smid"], "start": (c["gt0"] - t_zero) if in_ns else 0.0,
                        "end": end, "clock_ghz": c["ghz"], "events": n_cta})
    tr.meta["events"] = {"recorded": recorded, "dropped_early": dropped_early, "dropped_late": dropped_late}
    tr.meta["ctas"] = per_cta
    clocks = sorted(c["ghz"] for c in ctas if c["ghz"])
    if clocks:
        tr.meta["sm_clock_ghz"] = round(clocks[len(clocks) // 2], 4)
    if truncated:
        tr.meta["truncated_lanes"] = truncated
    if unfinished:
        tr.meta["unfinished_lanes"] = unfinished
    return tr


def decode_totals(buf, sites: list[EventSite], tasks: list[str]) -> dict:
    """What a ``totals=True`` launch's buffer holds: per recorded CTA, per warp group, per op site its
    count, summed and longest duration (cycles), next to the lane's life (clock64 from the task's first
    statement to its last) and event count (every timed op, as a counting launch counts them).

    ``{"ctas": [{"cta", "sm", "clock_ghz", "lanes": [{"task", "replica", "events", "cycles", "sites":
    [{"site", "op", "line", "barrier", "count", "cycles", "max"}]}]}]}``; a site count that differs from
    the events the lane counted (every thread adding, a lost add) is an error, not a share.

    >>> tot = decode_totals(buf.cpu().numpy(), inst.sites, inst.tasks)        # doctest: +SKIP
    >>> tot["ctas"][0]["lanes"][0]["sites"][0]["count"]                       # doctest: +SKIP
    256
    """
    import numpy as np
    a = np.asarray(buf, dtype=np.int64)
    lay = Layout.read(a)
    if lay.capacity < len(sites):
        raise GPUError(f"a totals buffer needs a word triple per op site: capacity {lay.capacity} < "
                       f"{len(sites)} sites", hint="inst.buffer(..., capacity=len(inst.sites))")
    v = lay.lanes_view(a)
    out = []
    for slot, hdr, ran, h, ghz in _recorded_slots(lay, v):
        lanes = []
        for lane in ran:
            recs = v[slot, lane, HEADER:HEADER + 3 * len(sites)].reshape(len(sites), 3)
            task = tasks[lane // MAX_REPLICAS] if lane // MAX_REPLICAS < len(tasks) else "?"
            hd = hdr[lane]
            per = [{"site": s.id, "op": s.op, "line": s.line, "barrier": s.barrier, "file": s.file,
                    "count": int(recs[s.id, 0]), "cycles": int(recs[s.id, 1]), "max": int(recs[s.id, 2])}
                   for s in sites if s.lane_task == task and recs[s.id, 0] > 0]
            events = int(hd[0])
            counted = sum(p["count"] for p in per)
            if hd[4] == 0:
                raise GPUError(f"CTA {int(hd[1]) - 1} {task}[{lane % MAX_REPLICAS}] never reached its end: "
                               "its totals are partial", hint="a return inside an async task skips the record's end")
            if counted != events:
                raise GPUError(f"CTA {int(hd[1]) - 1} {task}[{lane % MAX_REPLICAS}]: the per-site counts add up to "
                               f"{counted}, but the lane timed {events} ops",
                               hint="the atomics ran on more (or fewer) threads than one per warp group; "
                                    "check the PTX of _wb_rec (a scalar atomic should be one thread's)")
            lanes.append({"task": task, "replica": int(lane % MAX_REPLICAS), "events": events,
                          "cycles": int(hd[6] - hd[5]), "sites": per})
        out.append({"cta": int(h[0, 1]) - 1, "sm": int(h[0, 2]), "clock_ghz": ghz, "lanes": lanes})
    return {"ctas": out, "capacity": lay.capacity}
