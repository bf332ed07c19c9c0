"""The workbench's results as JSON, in one versioned schema: what ``tlx-workbench <verb> --json`` writes.

Every document is an object with ``schema`` (``"tlx-workbench/1"``: bumped when a field changes meaning or
goes away; new fields may appear within a version), ``verb``, ``ok``, ``exit_code``, ``gpu`` and the verb's
results, each serialized from the object the Python API returns:

========== ====================================== ==========================================
verb       key                                    from
========== ====================================== ==========================================
run        ``launches`` (one per launch)          ``intercept.LaunchRecord`` (+ its SimResult,
                                                  Prediction)
check      ``checks`` (one per launch checked)    ``wb.check`` -> ``CheckResult``
compile    ``reports``                            ``wb.compile`` -> ``CompileReport``
predict    ``predictions``                        ``wb.predict`` -> ``Prediction``
explore    ``exploration``                        ``wb.explore`` -> ``Exploration``
========== ====================================== ==========================================

:data:`SCHEMA` is the JSON Schema (draft 2020-12) of a document; ``tlx-workbench schema`` prints it.
Results never import this module: data flows one way, from the result objects to their JSON.

>>> doc = document("run", gpu="H200", exit_code=0, launches=[])
>>> doc["schema"], doc["ok"]
('tlx-workbench/1', True)
"""
from __future__ import annotations

import dataclasses
import enum
import math

SCHEMA_VERSION = 1
SCHEMA_ID = f"tlx-workbench/{SCHEMA_VERSION}"
VERBS = ("run", "check", "compile", "predict", "explore")


def jsonable(x):
    """Plain JSON data from results' fields: dataclasses, tuples, numpy scalars, dtypes (as text)."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: jsonable(getattr(x, f.name)) for f in dataclasses.fields(x) if not f.name.startswith("_")}
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in x]
    if isinstance(x, enum.Enum):
        return jsonable(x.value)
    if isinstance(x, bytes):
        return None
    item = getattr(x, "item", None)          # numpy / torch scalars
    if callable(item) and getattr(x, "ndim", 0) == 0:
        try:
            return jsonable(item())
        except (TypeError, ValueError):
            pass
    return str(x)


def document(verb: str, *, gpu: str | None, exit_code: int, **body) -> dict:
    """The envelope every verb writes; ``body`` holds the verb's results (already JSON data)."""
    if verb not in VERBS:
        raise ValueError(f"verb {verb!r} is not one of {VERBS}")
    from ._version import __version__
    return {"schema": SCHEMA_ID, "verb": verb, "workbench": __version__, "gpu": gpu, "ok": exit_code == 0,
            "exit_code": int(exit_code), **body}


# -- the simulator ------------------------------------------------------------------------------
def sim_finding(f) -> dict:
    """A simulator finding (``SimResult.findings``): a race, a count past its barrier, an output warning."""
    return {"kind": f.kind, "severity": getattr(f, "severity", "error"), "message": f.message,
            "file": getattr(f, "file", None), "line": f.line, "other_line": getattr(f, "other_line", None),
            "hint": getattr(f, "hint", "") or ""}


def _lane(lane) -> dict:
    cta, task, replica = (tuple(lane) + (None, None, None))[:3]
    return {"cta": jsonable(cta), "task": task, "replica": jsonable(replica)}


def deadlock(d) -> dict:
    """A DeadlockReport: the line to change first (``line``, ``cause``), and the wait-for graph (``blocked``: each
    waiting lane, the barrier and phase it waits on, what is missing, who was expected to arrive)."""
    cause = getattr(d, "cause", None)
    blocked = []
    for b in d.blocked:
        blocked.append({
            "lane": _lane(b.lane), "kind": b.kind, "line": b.line, "barrier": b.barrier, "phase": b.phase,
            "completed_phases": b.completed, "missing_arrivals": b.missing_arrivals,
            "missing_bytes": b.missing_bytes, "tma_in_flight": b.inflight_tma, "reason": b.reason or "",
            "expected": [{"cta": jsonable(cta), "task": task, "replica": jsonable(rep),
                          "arrive_lines": sorted(jsonable(lines)), "where": where}
                         for task, rep, lines, where, cta in b.expected]})
    return {"message": d.message, "file": d.file, "line": d.line, "hint": d.hint or "", "cta": jsonable(d.cta),
            "ctas": jsonable(list(getattr(d, "ctas", []) or [d.cta])),
            "cause": None if cause is None else {"line": cause.line, "text": cause.text, "fix": cause.fix,
                                                 "rule": cause.rule, "other_line": cause.other_line},
            "fix": repair(getattr(d, "fix", None)),
            "blocked": blocked,
            "edges": [{"from": _lane(w), "barrier": bar, "to": _lane(e)} for w, bar, e in d.edges],
            "text": d.text()}


def repair(fix) -> dict | None:
    """A repair of the kernel's source the simulator tried (``DeadlockReport.fix``): the edits as data (1-based
    inclusive line ranges of ``file`` and their new lines), the diff, and whether simulation verified it."""
    if fix is None:
        return None
    return {"file": fix.file, "line": fix.line, "kind": fix.kind, "what": fix.what, "verified": bool(fix.verified),
            "schedules": int(fix.schedules), "values": bool(fix.values),
            "edits": [{"start": int(e.start), "end": int(e.end), "new": [str(x).rstrip("\n") for x in e.new]}
                      for e in fix.edits],
            "diff": fix.diff()}


def sim_result(r) -> dict:
    """A SimResult: the launch simulated, its verdict's evidence (deadlock, findings) and its cycles."""
    return {"kernel": r.kernel, "file": r.file, "gpu": r.gpu, "grid": jsonable(list(r.grid)),
            "ctas_simulated": len(r.ctas), "partial": bool(r.partial), "cycles": jsonable(float(r.cycles)),
            "seed": r.seed, "schedules": len(r.schedules), "cluster_dims": jsonable(list(r.cluster_dims)),
            "ok": bool(r.ok), "deadlock": None if r.deadlock is None else deadlock(r.deadlock),
            "findings": [sim_finding(f) for f in r.findings],
            "atomic_ordering": list(getattr(r, "atomic_ordering", []) or [])}


def _spills_per(spill_bytes) -> str:
    """The unit of a prediction's spill charge: a ``SpillsPerWgmma`` says "wgmma", a plain number is per iteration."""
    return getattr(spill_bytes, "per", "iteration")


def prediction(p) -> dict:
    """A Prediction: the launch's time on the GPU and what it rests on. A CallPrediction (a call of several
    launches, or a launch and the kernels its call runs through torch): its longest launch's fields, the call's
    time (``us``: the launches' and the torch kernels' sum), every launch (``launches``) and every torch kernel
    (``torch_kernels``: the aten op, bytes read and written, the caller's line, its time)."""
    if hasattr(p, "parts"):
        torch_kernels = [{"op": k.op, "bytes_read": int(k.bytes_read), "bytes_written": int(k.bytes_written),
                          "where": k.where, "after_launches": int(k.after_launches),
                          "us": jsonable(p.torch_kernel_us(k))} for k in p.torch_kernels]
        return dict(prediction(p.main), kernel=p.kernel, us=jsonable(p.us), launch_us=jsonable(p.launch_us),
                    sim_seconds=jsonable(p.sim_seconds), launches=[prediction(x) for x in p.parts],
                    torch_kernels=torch_kernels)
    return {"kernel": p.kernel, "gpu": p.gpu, "grid": jsonable(list(p.grid)), "us": jsonable(p.us),
            "cycles": jsonable(p.cycles), "clock_ghz": jsonable(p.clock_ghz), "launch_us": jsonable(p.launch_us),
            "bound": p.bound, "cta_cycles": jsonable(p.cta_cycles), "hbm_floor_cycles": jsonable(p.hbm_floor_cycles),
            "kernel_bytes": int(p.kernel_bytes), "slots": int(p.slots), "waves": jsonable(p.waves),
            "ctas_simulated": len(p.sampled), "occupancy": int(p.occupancy),
            # spill bytes per thread charged at the L1 rate, per wgmma instruction (read off the compiled loop) or
            # per iteration of the loop (given as a plain number)
            "spill_bytes": jsonable(float(p.spill_bytes)), "spills_per": _spills_per(p.spill_bytes),
            "compiled": p.compiled, "calibration": p.calibration, "sim_seconds": jsonable(p.sim_seconds)}


def error(e: BaseException | None) -> dict | None:
    """An exception: its type, message, and (workbench errors) file, line and what to do."""
    if e is None:
        return None
    return {"type": type(e).__name__, "message": getattr(e, "message", None) or str(e),
            "file": getattr(e, "file", None), "line": getattr(e, "line", None), "hint": getattr(e, "hint", None)}


def launch(la) -> dict:
    """One launch ``run`` intercepted (an ``intercept.LaunchRecord``)."""
    grid = la.result.grid if la.result is not None else la.grid
    return {"kernel": la.kernel, "file": la.file, "line": la.line,
            "grid": jsonable(list(grid)) if isinstance(grid, (list, tuple)) else None,
            "verdict": la.verdict, "compiled": bool(la.compiled), "compiler_refused": la.refused,
            "seconds": round(la.seconds, 3),
            "simulation": None if la.result is None else sim_result(la.result),
            "prediction": None if la.prediction is None else prediction(la.prediction),
            "error": error(la.error)}


# -- the checker, the compiler, the explorer ------------------------------------------------------
def check_finding(f) -> dict:
    """A checker Finding: the rule it breaks, its lines and the fix."""
    return {"rule_id": f.rule_id, "severity": f.severity, "message": f.message,
            "lines": [{"file": p, "line": n} for p, n in f.lines], "fix": f.fix or "", "barrier": f.barrier}


def check_result(r) -> dict:
    """A CheckResult."""
    return {"kernel": r.kernel, "ok": bool(r.ok), "simulated": r.sim is not None,
            "findings": [check_finding(f) for f in r], "notes": list(r.notes),
            "simulation": None if r.sim is None else sim_result(r.sim)}


def compile_report(r) -> dict:
    """A CompileReport without its IR texts and binary: resources, tasks, memory map, barriers, ptxas's advice."""
    out = {k: jsonable(getattr(r, k)) for k in ("kernel", "target", "gpu", "arch", "signature", "constexprs",
                                                "options", "resources", "tasks", "allocations", "barriers",
                                                "compile_seconds")}
    out["source"] = {"file": r.source.file, "line": getattr(r.source, "line", None)}
    out["ptxas_advisories"] = jsonable(r.ptxas_advisories)
    return out


def exploration(ex, store_path: str | None = None) -> dict:
    """An Exploration: one entry per config x shape (where it stands, its figures), the best per shape."""
    shapes = [list(s) for s in (ex.shapes or [])]
    entries = ex.entries()
    return {"kernel": ex.kernel, "shapes": shapes, "store": store_path or getattr(ex.store, "path", None),
            "counts": jsonable(ex.counts()),
            "best": [{"shape": s, "measured": jsonable(ex.best(tuple(s))),
                      "predicted": jsonable(ex.best(tuple(s), by="predicted_us"))} for s in shapes],
            "entries": [jsonable({k: v for k, v in e.items() if k != "diagnosis"} | {"diagnosis": e.get("diagnosis")})
                        for e in entries]}


# -- the schema --------------------------------------------------------------------------------------
_NUM = {"type": ["number", "null"]}
_INT = {"type": ["integer", "null"]}
_STR = {"type": ["string", "null"]}
_GRID = {"type": ["array", "null"], "items": {"type": "integer"}}

_ERROR = {"type": ["object", "null"], "required": ["type", "message"],
          "properties": {"type": {"type": "string"}, "message": {"type": "string"}, "file": _STR, "line": _INT,
                         "hint": _STR}}
_LANE = {"type": "object", "required": ["cta", "task", "replica"],
         "properties": {"cta": _INT, "task": _STR, "replica": _INT}}
_SIM_FINDING = {"type": "object", "required": ["kind", "severity", "message", "line"],
                "properties": {"kind": {"type": "string"}, "severity": {"enum": ["error", "warning"]},
                               "message": {"type": "string"}, "file": _STR, "line": _INT, "other_line": _INT,
                               "hint": {"type": "string"}}}
_REPAIR = {"type": ["object", "null"], "required": ["file", "line", "what", "verified", "edits", "diff"],
           "properties": {"file": {"type": "string"}, "line": {"type": "integer"}, "kind": {"type": "string"},
                          "what": {"type": "string"}, "verified": {"type": "boolean"},
                          "schedules": {"type": "integer"}, "values": {"type": "boolean"},
                          "edits": {"type": "array", "items": {
                              "type": "object", "required": ["start", "end", "new"],
                              "properties": {"start": {"type": "integer"}, "end": {"type": "integer"},
                                             "new": {"type": "array", "items": {"type": "string"}}}}},
                          "diff": {"type": "string"}}}
_DEADLOCK = {"type": ["object", "null"], "required": ["message", "line", "blocked", "edges", "text"],
             "properties": {
                 "message": {"type": "string"}, "file": _STR, "line": _INT, "hint": {"type": "string"},
                 "cta": _INT, "ctas": {"type": "array", "items": {"type": "integer"}},
                 "cause": {"type": ["object", "null"], "required": ["line", "text", "fix"],
                           "properties": {"line": _INT, "text": {"type": "string"}, "fix": {"type": "string"},
                                          "rule": {"type": "string"}, "other_line": _INT}},
                 "fix": _REPAIR,
                 "blocked": {"type": "array", "items": {
                     "type": "object", "required": ["lane", "kind", "line", "barrier", "phase", "expected"],
                     "properties": {"lane": _LANE, "kind": {"type": "string"}, "line": _INT, "barrier": _STR,
                                    "phase": _INT, "completed_phases": _INT, "missing_arrivals": _INT,
                                    "missing_bytes": _INT, "tma_in_flight": _INT, "reason": {"type": "string"},
                                    "expected": {"type": "array", "items": {
                                        "type": "object", "required": ["task", "replica", "arrive_lines"],
                                        "properties": {"cta": _INT, "task": _STR, "replica": _INT,
                                                       "arrive_lines": {"type": "array",
                                                                        "items": {"type": "integer"}},
                                                       "where": {"type": "string"}}}}}}},
                 "edges": {"type": "array", "items": {"type": "object", "required": ["from", "barrier", "to"],
                                                      "properties": {"from": _LANE, "barrier": _STR, "to": _LANE}}},
                 "text": {"type": "string"}}}
_SIM_RESULT = {"type": ["object", "null"],
               "required": ["kernel", "gpu", "grid", "cycles", "ok", "deadlock", "findings"],
               "properties": {"kernel": {"type": "string"}, "file": _STR, "gpu": {"type": "string"}, "grid": _GRID,
                              "ctas_simulated": {"type": "integer"}, "partial": {"type": "boolean"},
                              "cycles": _NUM, "seed": {"type": "integer"}, "schedules": {"type": "integer"},
                              "cluster_dims": _GRID, "ok": {"type": "boolean"}, "deadlock": _DEADLOCK,
                              "findings": {"type": "array", "items": _SIM_FINDING},
                              "atomic_ordering": {"type": "array", "items": {"type": "string"}}}}
_PREDICTION = {"type": ["object", "null"], "required": ["kernel", "gpu", "grid", "us", "cycles", "bound"],
               "properties": {"kernel": {"type": "string"}, "gpu": {"type": "string"}, "grid": _GRID,
                              "us": {"type": "number"}, "cycles": {"type": "number"}, "clock_ghz": _NUM,
                              "launch_us": _NUM, "bound": {"type": "string"}, "cta_cycles": _NUM,
                              "hbm_floor_cycles": _NUM, "kernel_bytes": {"type": "integer"},
                              "slots": {"type": "integer"}, "waves": _NUM, "ctas_simulated": {"type": "integer"},
                              "occupancy": {"type": "integer"}, "spill_bytes": {"type": "number"},
                              "spills_per": {"enum": ["wgmma", "iteration"]},
                              "compiled": {"type": "string"}, "calibration": _STR, "sim_seconds": _NUM,
                              "launches": {"type": "array", "items": {"type": "object"}},
                              "torch_kernels": {"type": "array", "items": {
                                  "type": "object", "required": ["op", "bytes_read", "bytes_written", "where", "us"],
                                  "properties": {"op": {"type": "string"}, "bytes_read": {"type": "integer"},
                                                 "bytes_written": {"type": "integer"}, "where": {"type": "string"},
                                                 "after_launches": {"type": "integer"}, "us": {"type": "number"}}}}}}
VERDICTS = ("clean", "warning", "deadlock", "race", "finding", "error", "not simulated")
_LAUNCH = {"type": "object", "required": ["kernel", "grid", "verdict", "compiled", "simulation", "prediction"],
           "properties": {"kernel": {"type": "string"}, "file": _STR, "line": _INT, "grid": _GRID,
                          "verdict": {"enum": list(VERDICTS)}, "compiled": {"type": "boolean"},
                          "compiler_refused": _STR, "seconds": {"type": "number"}, "simulation": _SIM_RESULT,
                          "prediction": _PREDICTION, "error": _ERROR}}
_CHECK_FINDING = {"type": "object", "required": ["rule_id", "severity", "message", "lines", "fix"],
                  "properties": {"rule_id": {"type": "string"}, "severity": {"enum": ["error", "warning", "info"]},
                                 "message": {"type": "string"},
                                 "lines": {"type": "array", "items": {
                                     "type": "object", "required": ["file", "line"],
                                     "properties": {"file": _STR, "line": _INT}}},
                                 "fix": {"type": "string"}, "barrier": _STR}}
_CHECK = {"type": "object", "required": ["kernel", "ok", "simulated", "findings", "notes"],
          "properties": {"kernel": {"type": "string"}, "ok": {"type": "boolean"}, "simulated": {"type": "boolean"},
                         "findings": {"type": "array", "items": _CHECK_FINDING},
                         "notes": {"type": "array", "items": {"type": "string"}}, "simulation": _SIM_RESULT}}
_REPORT = {"type": "object", "required": ["kernel", "target", "gpu", "resources", "tasks", "allocations", "barriers",
                                          "ptxas_advisories"],
           "properties": {"kernel": {"type": "string"}, "target": {"type": "string"}, "gpu": {"type": "string"},
                          "arch": {"type": "integer"}, "source": {"type": "object"}, "signature": {"type": "object"},
                          "constexprs": {"type": "object"}, "options": {"type": "object"},
                          "resources": {"type": "object", "required": ["smem_bytes", "registers", "spills",
                                                                       "num_warps"]},
                          "tasks": {"type": "array", "items": {"type": "object"}},
                          "allocations": {"type": "array", "items": {"type": "object"}},
                          "barriers": {"type": "array", "items": {"type": "object"}},
                          "ptxas_advisories": {"type": "array", "items": {"type": "object"}},
                          "compile_seconds": _NUM}}
_EXPLORATION = {"type": "object", "required": ["kernel", "shapes", "store", "counts", "best", "entries"],
                "properties": {"kernel": {"type": "string"},
                               "shapes": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                               "store": _STR, "counts": {"type": "object"},
                               "best": {"type": "array", "items": {"type": "object",
                                                                   "required": ["shape", "measured", "predicted"]}},
                               "entries": {"type": "array", "items": {
                                   "type": "object", "required": ["config_id", "config", "shape", "status", "stage"],
                                   "properties": {"config_id": {"type": "string"}, "config": {"type": "object"},
                                                  "shape": {"type": "array"}, "status": {"type": "string"},
                                                  "stage": _STR, "reason": _STR, "line": _INT,
                                                  "predicted_us": _NUM, "us": _NUM}}}}}

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "tlx-workbench --json document",
    "type": "object",
    "required": ["schema", "verb", "workbench", "gpu", "ok", "exit_code"],
    "properties": {
        "schema": {"const": SCHEMA_ID}, "verb": {"enum": list(VERBS)}, "workbench": {"type": "string"},
        "gpu": _STR, "ok": {"type": "boolean"}, "exit_code": {"enum": [0, 1, 2]},
        # run
        "script": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}},
        "launches": {"type": "array", "items": _LAUNCH},
        "program_error": _ERROR,
        "program_exit_code": _INT,
        # check / compile / predict
        "target": {"type": "string"},
        "checks": {"type": "array", "items": _CHECK},
        "reports": {"type": "array", "items": _REPORT},
        "predictions": {"type": "array", "items": _PREDICTION},
        "exploration": _EXPLORATION,
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "allOf": [
        {"if": {"properties": {"verb": {"const": "run"}}},
         "then": {"required": ["script", "args", "launches", "program_error", "program_exit_code"]}},
        {"if": {"properties": {"verb": {"const": "check"}}}, "then": {"required": ["checks"]}},
        {"if": {"properties": {"verb": {"const": "compile"}}}, "then": {"required": ["reports", "target"]}},
        {"if": {"properties": {"verb": {"const": "predict"}}}, "then": {"required": ["predictions"]}},
        {"if": {"properties": {"verb": {"const": "explore"}}}, "then": {"required": ["exploration"]}},
    ],
}
