"""Simulate the *instrumented* kernel: the clock recorder's cost, charged where ``runtime/instrument.py`` records.

A measured trace (``wb.profile``) is a trace of the instrumented kernel, not of the plain one: after every
timed op its warp group reads the clock and writes a record (``_wb_rec``), which on the H200 costs about as
much as a satisfied barrier wait, several times per k-step of a GEMM (+26 % to +50 % on gemm_ws
4096^3). ``simulate(..., recorder="waits")`` predicts the kernel that was measured: the same op sites as
``instrument(kernel, ops=...)`` times (found by the same source rewrite, :func:`sites`: statements of their
own, in the kernel and in the ``@triton.jit`` helpers it calls as statements), each followed by the
recorder's measured cost per record (``cost.MEASURED_RECORD``) on that warp group's clock, as busy time
(no span: the measured trace has none either, and a lane's extent ends at its last timed op).

The recorders, as ``benchmarks/shares_h200.py`` names them (each is ``wb.profile``'s options):

* ``"waits"``: ``profile(ops="waits")``, a (site, t0, t1) record per wait;
* ``"totals"``: ``profile(ops="waits", totals=True)``, per wait three relaxed atomics (count, sum, max);
* ``"all"``: ``profile()``, a record per op of ``instrument_rewrite.OPS``.

>>> res = wb.simulate(gemm_ws.launch, a, b, c, cfg, ctas=[0], recorder="waits")   # doctest: +SKIP
>>> res.trace.meta["recorder"]["records"]                                        # doctest: +SKIP
{'default[0]': 256, 'task1[0]': 785, 'task1[1]': 785}
"""
from __future__ import annotations

import dataclasses
import inspect
import os

from ...errors import SimulationError

#: recorder name -> the ``instrument``/``profile`` options it stands for
RECORDERS = {"waits": {"ops": "waits", "totals": False},
             "totals": {"ops": "waits", "totals": True},
             "all": {"ops": None, "totals": False}}


def check_name(recorder) -> str | None:
    """``recorder`` if it names a recorder (or is None); else a SimulationError saying which ones there are."""
    if recorder is None or recorder in RECORDERS:
        return recorder
    raise SimulationError(f"recorder={recorder!r} is not one of the profiler's recorders",
                          hint=f"use one of {sorted(RECORDERS)} (as wb.profile records), or None for the plain kernel")


_sites_cache: dict = {}


def sites(fn, recorder: str) -> frozenset:
    """The (file, line, op) sites that ``instrument(fn, ops=...)`` records for ``recorder``: the same source
    rewrite (``compiler/instrument_rewrite.py``, AST only, nothing compiled). Files are real paths."""
    from ...compiler.instrument_rewrite import instrument_source
    ops = RECORDERS[recorder]["ops"]
    key = (fn, ops)
    hit = _sites_cache.get(key)
    if hit is not None:
        return hit
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise SimulationError(f"recorder={recorder!r}: cannot read the source of {fn.__name__}: {e}",
                              hint="define the kernel in a file or a notebook cell") from None
    file = fn.__code__.co_filename
    _, found, _ = instrument_source("".join(lines), first, "clock", fn.__globals__, file, ops)
    out = frozenset((os.path.realpath(s.file or file), s.line, s.op) for s in found)
    _sites_cache[key] = out
    return out


@dataclasses.dataclass
class Recording:
    """One launch's recorder: its sites, the cycles per record, and the records charged per lane."""
    name: str
    cycles: float
    sites: frozenset
    estimate: bool = False                      # the per-record cost was measured on another GPU
    records: dict = dataclasses.field(default_factory=dict)   # "task[replica]" -> records (summed over CTAs)
    _real: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def ops(self) -> frozenset:
        return frozenset(op for _, _, op in self.sites)

    def charge(self, op: str) -> None:
        """After a TLX op ``op`` returned: its record, when the instrumented kernel records that call."""
        from ..schedule.launch_state import _state
        from ..diagnosis.source_lines import kernel_frame_line
        cta = _state.cta
        t = cta.sched.current if cta is not None else None
        if t is None:
            return
        file, line = kernel_frame_line()
        if file is None:
            return
        real = self._real.get(file)
        if real is None:
            real = self._real[file] = os.path.realpath(file)
        if (real, line, op) not in self.sites:
            return
        t.clock += self.cycles
        t.stats["busy"] += self.cycles
        lane = f"{t.name}[{t.replica}]"
        self.records[lane] = self.records.get(lane, 0) + 1

    def meta(self) -> dict:
        return {"name": self.name, "cycles_per_record": self.cycles, "estimate": self.estimate,
                "sites": len(self.sites), "records": dict(sorted(self.records.items()))}


def install(rec: Recording) -> None:
    """Wrap the launch's TLX builtins that ``rec`` records (as ``tlx_ops.patch_tlx`` bound them) so that each
    call, when it is not inside another TLX builtin, is followed by ``rec.charge``. Call it right after
    ``patch_tlx``: its undo restores the frontend's own builtins, which also removes these wrappers."""
    from ..schedule.launch_state import _state
    from ..ops.tlx_ops import _call_stack, _tlx_modules
    wrapped = _state.wrapped
    ops = rec.ops
    made: dict = {}
    for mod in _tlx_modules():
        for name in ops:
            cur = vars(mod).get(name)
            member = getattr(cur, "__wrapped__", None)
            if member is None or wrapped.get(member) is not cur:
                continue            # not a builtin patch_tlx bound (its undo would not restore it)
            if member not in made:
                made[member] = _recording(cur, name, rec, _call_stack)
            setattr(mod, name, made[member])
    wrapped.update(made)        # late-bound builtins (``from ... import barrier_wait``) look here


def _recording(op, name, rec: Recording, call_stack):
    def recorded(*args, **kwargs):
        outer = not call_stack()
        out = op(*args, **kwargs)
        if outer:
            rec.charge(name)
        return out
    recorded.__name__ = name
    recorded.__wrapped__ = op.__wrapped__
    return recorded
