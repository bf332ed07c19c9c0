"""A seeded-bug suite for the ranking of diagnoses: is the first line a person reads the
line to change?

Each bug is one line of a real kernel changed by text substitution, in a copy written at test time
(TLX's tutorials from the installed wheel and our own ``kernels/gemm_ws.py``; nothing seeded is ever
committed). A bug names the line that must change (every line of its statement counts) and the lines
it may be paired with (the ``alloc_barriers`` of a wrong count, the arrive a wrong count meets).

Run as a script for the table and the figure::

    .venv/bin/python tests/diagnosis/seeded_bugs.py            # simulator and checker
    .venv/bin/python tests/diagnosis/seeded_bugs.py --sim-only # the simulator's first line only
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import pathlib
import sys
import tempfile

import torch

import tlx_workbench as wb

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"
OURS = pathlib.Path(wb.__file__).parent / "kernels"


@dataclasses.dataclass(frozen=True)
class Bug:
    id: str
    kernel: str            # a key of KERNELS
    anchor: str            # a unique piece of the line to seed (``nth`` picks among several)
    old: str               # replaced by ``new`` within that line
    new: str
    pair: tuple = ()       # anchors of lines the fix may be made at instead (the other side of a count)
    nth: int = 0
    what: str = ""
    move_after: str = ""   # a move: the anchor's statement (a wait) goes after the first line holding this below it
    cls: str = ""          # the class of mistake (the table's rows)


@dataclasses.dataclass
class Subject:
    path: pathlib.Path
    package: str | None    # the package a copy is imported into (relative imports), None for a tutorial
    run: object            # run(module, simulate_kwargs) -> SimResult;  check(module) -> CheckResult
    check: object


def _gemm_inputs(m=256, n=256, k=128):
    torch.manual_seed(0)
    return torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)


def _tut_gemm_inputs():
    # one 128 x 128 tile, 8 k-steps: the 3-deep ring wraps, so a slot is released and reused
    return _gemm_inputs(128, 128, 512)


def _fa_inputs():
    # 512 keys: each CTA's K/V ring wraps
    torch.manual_seed(0)
    return tuple(torch.randn(1, 1, 512, 128, dtype=torch.float16) for _ in range(3))


def _tut_gemm_run(mod, **kw):
    a, b = _tut_gemm_inputs()
    res = wb.simulate(mod.matmul, a, b, gpu="H200", on_deadlock="return", **_with_reference(kw, a.float() @ b.float()))
    return res, (res.value, a.float() @ b.float()) if res.deadlock is None else None


def _tut_gemm_check(mod):
    return wb.check(mod.matmul, *_tut_gemm_inputs())


def _fa_ref(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.5)


def _tut_fa_run(mod, **kw):
    q, k, v = _fa_inputs()
    res = wb.simulate(mod.attention, q, k, v, 0.5, on_deadlock="return", **_with_reference(kw, _fa_ref(q, k, v)))
    return res, (res.value, _fa_ref(q, k, v)) if res.deadlock is None else None


def _tut_fa_check(mod):
    return wb.check(mod.attention, *_fa_inputs(), 0.5)


def _ours_host(mod, cfg):
    def host(a, b):
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype)
        return mod.launch(a, b, c, cfg, num_sms=4)
    return host


def _ours_cfg(mod, warp_barrier=False):
    return dict(mod.SIM_CONFIGS["tiny"], WARP_BARRIER=warp_barrier)


def _ours_run(mod, warp_barrier=False, **kw):
    a, b = _gemm_inputs()
    res = wb.simulate(_ours_host(mod, _ours_cfg(mod, warp_barrier)), a, b, gpu="H200", on_deadlock="return",
                      **_with_reference(kw, a.float() @ b.float()))
    return res, (res.value, a.float() @ b.float()) if res.deadlock is None else None


def _ours_check(mod, warp_barrier=False):
    return wb.check(_ours_host(mod, _ours_cfg(mod, warp_barrier)), *_gemm_inputs())


def _persistent_gemm_run(mod, **kw):
    a, b = _gemm_inputs(256, 256, 256)
    res = wb.simulate(mod.matmul_tlx_ws_persistent, a, b, gpu="H200", on_deadlock="return",
                      **_with_reference(kw, a.float() @ b.float()))
    return res, (res.value, a.float() @ b.float()) if res.deadlock is None else None


def _persistent_gemm_check(mod):
    return wb.check(mod.matmul_tlx_ws_persistent, *_gemm_inputs(256, 256, 256))


def _with_reference(kw, ref):
    """The run's reference for the repair search (candidates must reproduce it), unless the caller says otherwise."""
    from tlx_workbench.sim.diagnosis.repair import matches
    return {"repair": matches(ref), **kw}


KERNELS = {
    "hopper_gemm_ws": Subject(TUTORIALS / "hopper_gemm_ws.py", None, _tut_gemm_run, _tut_gemm_check),
    "hopper_fa_ws_pipelined_pingpong": Subject(TUTORIALS / "hopper_fa_ws_pipelined_pingpong.py", None,
                                               _tut_fa_run, _tut_fa_check),
    "gemm_ws": Subject(OURS / "gemm_ws.py", "tlx_workbench.kernels", _ours_run, _ours_check),
    "gemm_ws[warp_barrier]": Subject(OURS / "gemm_ws.py", "tlx_workbench.kernels",
                                     lambda m, **kw: _ours_run(m, True, **kw), lambda m: _ours_check(m, True)),
    # kernels the suite grew into: two more FA tutorials (K and V rings), the cooperative persistent GEMM tutorial (an A/B
    # barrier pair), our ping-pong GEMM (named barriers TURN_0 / TURN_1)
    "hopper_fa_ws": Subject(TUTORIALS / "hopper_fa_ws.py", None, _tut_fa_run, _tut_fa_check),
    "hopper_fa_ws_pipelined": Subject(TUTORIALS / "hopper_fa_ws_pipelined.py", None, _tut_fa_run, _tut_fa_check),
    "gemm_coop": Subject(TUTORIALS / "hopper-persistent-gemm-ws-cooperative.py", None, _persistent_gemm_run,
                         _persistent_gemm_check),
    "gemm_pingpong": Subject(OURS / "gemm_pingpong.py", "tlx_workbench.kernels", _ours_run, _ours_check),
}

G, FA, OW, OWB = "hopper_gemm_ws", "hopper_fa_ws_pipelined_pingpong", "gemm_ws", "gemm_ws[warp_barrier]"
FW, FP, GC, OP = "hopper_fa_ws", "hopper_fa_ws_pipelined", "gemm_coop", "gemm_pingpong"
EXTRA, PAIR_PHASE, EARLY_READ, NAMED_ID, REUSED_FULL = (
    "extra barrier_arrive", "phase not flipped on one barrier of a pair", "read moved before its full-barrier wait",
    "named-barrier id used by two different pairs", "full barrier reused for the other operand's load")

BUGS = [
    # --- TLX's hopper_gemm_ws -------------------------------------------------------------------------------
    Bug("g-empty-a-count", G, "arrive_count=1)", "arrive_count=1", "arrive_count=2",
        pair=("tlx.barrier_arrive(empty_a)",), what="bars_empty_a counts 2; each replica arrives on its own slot"),
    Bug("g-empty-b-count", G, "arrive_count=NUM_MMA_GROUPS)", "NUM_MMA_GROUPS", "1",
        pair=("tlx.barrier_arrive(empty_b)",), what="bars_empty_b counts 1; both replicas arrive"),
    Bug("g-full-a-count", G, "arrive_count=1)", "arrive_count=1", "arrive_count=2", nth=1,
        what="bars_full_a counts 2 arrivals; one barrier_expect_bytes arms it per phase"),
    Bug("g-empty-a-phase", G, "phase=p ^ 1)  # EmptyBar A1 wait", "p ^ 1", "p",
        what="the producer's first wait on a fresh empty barrier uses phase 0"),
    Bug("g-empty-b-phase", G, "tlx.barrier_wait(bar=empty_b, phase=p ^ 1)", "p ^ 1", "p",
        what="the producer's wait on bars_empty_b uses phase 0"),
    Bug("g-full-a-phase", G, "tlx.barrier_wait(bar=full_a, phase=p)", "phase=p)", "phase=p ^ 1)",
        what="the consumer waits on full_a with the flipped phase: it passes before the data landed"),
    Bug("g-full-b-phase", G, "tlx.barrier_wait(bar=full_b, phase=p)", "phase=p)", "phase=p ^ 1)",
        what="the consumer waits on full_b with the flipped phase"),
    Bug("g-drop-empty-a", G, "tlx.barrier_arrive(empty_a)  # EmptyBar A1 arrive", "tlx.barrier_arrive(empty_a)",
        "if k < 1: tlx.barrier_arrive(empty_a)",
        what="the release of empty_a runs in the first k-step only"),
    Bug("g-drop-empty-b", G, "tlx.barrier_arrive(empty_b)", "tlx.barrier_arrive(empty_b)", "pass",
        what="the release of empty_b is gone"),
    Bug("g-extra-empty-b", G, "tlx.barrier_arrive(empty_b)", "tlx.barrier_arrive(empty_b)",
        "tlx.barrier_arrive(empty_b, 2)", what="each consumer arrives twice on empty_b"),
    Bug("g-expect-a-bytes", G, "BLOCK_M_SPLIT * BK * tlx.size_of(tlx.dtype_of(a_desc)))", "BLOCK_M_SPLIT * BK",
        "BM * BK", what="barrier_expect_bytes of the first A half announces the whole A tile"),
    Bug("g-expect-b-bytes", G, "full_b, BN * BK * tlx.size_of", "BN * BK", "BN * BK // 2",
        what="barrier_expect_bytes of B announces half of B"),
    Bug("g-b-signals-full-a", G, "full_b)", "full_b)", "full_a_1st)",
        what="B's TMA load signals A's full barrier (a full barrier reused for the other operand)"),
    Bug("g-dot-wait-weak", G, "acc = tlx.async_dot_wait(tl.constexpr(0), acc)", "tl.constexpr(0)", "tl.constexpr(1)",
        what="the wgmma wait leaves one wgmma in flight, then the slot is released"),
    Bug("g-release-other-replica", G, "buf + NUM_STAGES * tlx.async_task_replica_id())  # noqa",
        "buf + NUM_STAGES * tlx.async_task_replica_id()", "buf + NUM_STAGES * (1 - tlx.async_task_replica_id())",
        nth=2,
        what="each replica releases the other replica's A slot (a release on a slot it never read)"),
    # --- TLX's hopper_fa_ws_pipelined_pingpong ----------------------------------------------------------------
    Bug("fa-q-phase", FA, "tlx.barrier_wait(q_fulls[cid], 0)", "0)", "1)",
        what="the consumer's wait on q_fulls uses phase 1: it passes before Q landed"),
    Bug("fa-k-empty-phase", FA, "tlx.barrier_wait(k_empties[buf_id], kv_phase)", "kv_phase)", "kv_phase ^ 1)",
        what="the producer's wait on k_empties uses the flipped phase"),
    Bug("fa-k-empty-count", FA, "arrive_count=NUM_MMA_GROUPS)", "NUM_MMA_GROUPS", "NUM_MMA_GROUPS + 1",
        pair=("tlx.barrier_arrive(k_empties[k_buf_id], 1)",), what="k_empties counts 3; two consumers arrive"),
    Bug("fa-drop-k-release-first", FA, "tlx.barrier_arrive(k_empties[k_buf_id], 1)",
        "tlx.barrier_arrive(k_empties[k_buf_id], 1)", "pass", nth=0,
        what="the release of the first K tile (before the loop) is gone"),
    Bug("fa-v-expect", FA, "2 * BLOCK_N * HEAD_DIM)  # float16", "2 * BLOCK_N", "4 * BLOCK_N", nth=1,
        what="barrier_expect_bytes of V announces twice V's bytes"),
    Bug("fa-v-dot-wait", FA, "acc = tlx.async_dot_wait(0, acc)", "async_dot_wait(0", "async_dot_wait(1", nth=0,
        what="the P V wgmma wait leaves one in flight before V's slot is released"),
    Bug("fa-drop-v-release", FA, "tlx.barrier_arrive(v_empties[v_buf_id], 1)",
        "tlx.barrier_arrive(v_empties[v_buf_id], 1)", "pass", nth=0, what="the loop's release of V is gone"),
    Bug("fa-named-id", FA, "tlx.named_barrier_arrive(10, 256)", "(10, 256)", "(9, 256)", nth=0,
        what="consumer 0 signals barrier 9 where consumer 1 waits on 10 (a named-barrier id collision)"),
    Bug("fa-named-threads", FA, "tlx.named_barrier_wait(9, 256)", "256)", "128)", nth=0,
        what="one side of named barrier 9 counts 128 threads"),
    # --- our gemm_ws (SIM_CONFIGS['tiny']) ---------------------------------------------------------------------
    Bug("o-empty-count", OW, "empty = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=2)", "arrive_count=2",
        "arrive_count=1", pair=("tlx.barrier_arrive(empty[prev])",), what="empty counts 1; both groups release"),
    Bug("o-empty-phase", OW, "tlx.barrier_wait(empty[s], parity ^ 1)", "parity ^ 1", "parity",
        what="the loader's first wait on a fresh empty barrier uses phase 0"),
    Bug("o-dot-wait-weak", OW, "acc = tlx.async_dot_wait(1, acc)", "(1, acc)", "(2, acc)",
        what="the in-loop wgmma wait leaves two in flight, then frees step k-1's slot"),
    Bug("o-release-wrong-slot", OW, "tlx.barrier_arrive(empty[prev])", "empty[prev]", "empty[s]", nth=0,
        what="the loop releases the slot of the wgmma still in flight"),
    Bug("o-expect-bytes", OW, "tlx.barrier_expect_bytes(full[s], STAGE_BYTES)", "STAGE_BYTES)",
        "STAGE_BYTES + 1024)", what="barrier_expect_bytes announces 1024 bytes more than the three loads bring"),
    Bug("o-drop-last-release", OW, "tlx.barrier_arrive(empty[prev])", "tlx.barrier_arrive(empty[prev])", "pass",
        nth=1, what="the release after the last k-step is gone"),
    Bug("o-warp-on-tma", OW, "full = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)",
        "tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)", "tlx.alloc_warp_barrier(num_barriers=STAGES, "
        "num_warps=1)", what="the TMA full barrier is a warp barrier"),
    Bug("o-warp-count", OWB, "num_warps=4, num_arrivals=2)", "num_arrivals=2", "num_arrivals=1",
        pair=("tlx.barrier_arrive(empty[prev])",), what="the warp barrier counts one group's threads; two arrive"),
    # --- the five classes an outside check found hardest, in kernels the suite did not use before ----------------
    Bug("fw-extra-k-release", FW, "tlx.barrier_arrive(k_empty, 1)", "tlx.barrier_arrive(k_empty, 1)",
        "tlx.barrier_arrive(k_empty, 1); tlx.barrier_arrive(k_empty, 1)", cls=EXTRA,
        what="the consumer releases K twice: k_empties completes before the other consumer is done"),
    Bug("gc-extra-empty-a", GC, "tlx.barrier_arrive(empty_b)", "tlx.barrier_arrive(empty_b)",
        "tlx.barrier_arrive(empty_b); tlx.barrier_arrive(empty_a)", nth=0, cls=EXTRA,
        pair=("tlx.barrier_arrive(empty_a)",),     # the round's other arrive on empty_a: either one goes
        what="the loop arrives on empty_a a second time, after empty_b"),
    Bug("op-extra-release", OP, "tlx.barrier_arrive(empty[prev])", "tlx.barrier_arrive(empty[prev])",
        "tlx.barrier_arrive(empty[prev]); tlx.barrier_arrive(empty[prev])", nth=0, cls=EXTRA,
        what="the loop's release of the previous slot arrives twice"),
    Bug("fw-v-empty-phase", FW, "tlx.barrier_wait(v_empty, kv_phase)", "kv_phase)", "kv_phase ^ 1)", cls=PAIR_PHASE,
        what="the producer's wait on v_empties has the flipped phase; k_empties' is right"),
    Bug("fw-v-full-phase", FW, "tlx.barrier_wait(v_full, kv_phase)", "kv_phase)", "kv_phase ^ 1)", cls=PAIR_PHASE,
        what="the consumer's wait on v_fulls has the flipped phase; k_fulls' is right"),
    Bug("fp-v-empty-phase", FP, "tlx.barrier_wait(v_empty, kv_phase)", "kv_phase)", "kv_phase ^ 1)",
        cls=PAIR_PHASE, what="the producer's V ring waits with the flipped phase"),
    Bug("gc-full-b-phase", GC, "tlx.barrier_wait(bar=full_b, phase=p)", "phase=p)", "phase=p ^ 1)", nth=1,
        cls=PAIR_PHASE, what="the loop's wait on full_b has the flipped phase; full_a's is right"),
    Bug("fw-v-read-early", FW, "tlx.barrier_wait(v_full, kv_phase)", "", "",
        move_after="acc = tlx.async_dot(p, v_tile, acc)", cls=EARLY_READ,
        what="the P V wgmma reads V before the wait on v_full"),
    Bug("gc-b-read-early", GC, "tlx.barrier_wait(bar=full_b, phase=p)", "", "", nth=1,
        move_after="acc = tlx.async_dot(data_a, data_b, acc)", cls=EARLY_READ,
        what="the loop's wgmma reads B before the wait on full_b"),
    Bug("op-read-early", OP, "tlx.barrier_wait(full[s], parity)", "", "", nth=1,
        move_after="acc = tlx.async_dot(a_ring[s], b_slot(b_ring, s, B_K_MAJOR), acc)", cls=EARLY_READ,
        what="the loop's wgmma reads the ring slot before the wait on full"),
    Bug("op-named-id", OP, "tlx.named_barrier_arrive(TURN_1, 256)", "TURN_1", "TURN_0", cls=NAMED_ID,
        what="the first group hands over on TURN_0, the id it waits on itself"),
    Bug("gc-b-signals-full-a", GC, "full_b)", "full_b)", "full_a_1st)", cls=REUSED_FULL,
        what="B's TMA load signals A's full barrier"),
    Bug("fw-v-signals-k-full", FW, "v_full)", "v_full)", "k_full)", cls=REUSED_FULL,
        what="V's TMA load signals K's full barrier"),
    Bug("fp-v-signals-k-full", FP, "v_full)", "v_full)", "k_full)", cls=REUSED_FULL,
        what="V's TMA load signals K's full barrier"),
]


# ---- copies ---------------------------------------------------------------------------------------------------
def _anchor_line(lines: list[str], anchor: str, nth: int) -> int:
    hits = [i for i, ln in enumerate(lines) if anchor in ln]
    if len(hits) <= nth:
        raise LookupError(f"{anchor!r} (#{nth}) not found")
    return hits[nth]


def _statement_lines(text: str, line: int) -> set[int]:
    """The lines of the innermost statement that spans ``line`` (1-based)."""
    best = None
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
            if not isinstance(node, (ast.FunctionDef, ast.For, ast.While, ast.If, ast.With)) or \
                    node.lineno == line:
                if best is None or (node.end_lineno - node.lineno) < (best.end_lineno - best.lineno):
                    best = node
    return set(range(best.lineno, best.end_lineno + 1)) if best is not None else {line}


@dataclasses.dataclass
class Seeded:
    bug: Bug
    module: object
    file: str
    line: int               # the seeded line (1-based)
    fix_lines: set          # lines whose change fixes it (the seeded statement and its pairs)


_dir = None
_copies: dict = {}


def seeded_copy(bug: Bug) -> Seeded:
    """The kernel of ``bug`` with its one line changed, written to a temporary file and imported."""
    global _dir
    if bug.id in _copies:
        return _copies[bug.id]
    subj = KERNELS[bug.kernel]
    text = subj.path.read_text()
    lines = text.splitlines(keepends=True)
    i = _anchor_line(lines, bug.anchor, bug.nth)
    fix = _statement_lines(text, i + 1)
    if bug.move_after:
        # a move: the anchor's statement (one line: a wait) goes below the read it should guard; the read, now
        # before its wait, is the seeded line
        j = next(j for j in range(i + 1, len(lines)) if bug.move_after in lines[j])
        moved = lines.pop(i)
        lines.insert(j, moved)
        # after the pop the read sits at j - 1 (0-based) and the wait right below it, at j
        fix = {j, j + 1}              # the read and the wait (1-based), where they are in the copy
        i = j - 1
    elif bug.old not in lines[i]:
        raise LookupError(f"{bug.id}: {bug.old!r} not in line {i + 1}: {lines[i]!r}")
    else:
        lines[i] = lines[i].replace(bug.old, bug.new, 1)
    new_text = "".join(lines)
    for a in bug.pair:
        for j, ln in enumerate(text.splitlines()):
            if a in ln:
                fix |= _statement_lines(text, j + 1)
    _dir = _dir or pathlib.Path(tempfile.mkdtemp(prefix="tlxwb_seeded_"))
    path = _dir / f"{subj.path.stem.replace('-', '_')}__{bug.id.replace('-', '_')}.py"
    path.write_text(new_text)
    _copies[bug.id] = Seeded(bug, _import(path, subj.package), str(path), i + 1, fix)
    return _copies[bug.id]


def clean_copy(kernel: str):
    subj = KERNELS[kernel]
    return _import(subj.path, subj.package, fresh=True)


def _register_gemm_op(package, name):
    """Our GEMM modules look their torch custom op up by module name (kernels/torch_ops.py): a copy gets its own."""
    try:
        torch_ops = importlib.import_module(f"{package}.torch_ops")
    except ImportError:
        return
    ops = getattr(torch_ops, "GEMM_OPS", None)
    if ops is not None and name not in ops and hasattr(torch_ops, "_gemm_op"):
        ops[name] = torch_ops._gemm_op(name)


def _import(path: pathlib.Path, package: str | None, fresh=False):
    name = f"tlxwb_seeded_{path.stem}"
    if package:
        name = f"{package}._seeded_{path.stem}"
        _register_gemm_op(package, name.rsplit(".", 1)[1])
    with wb.offline("H100"):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


# ---- what a person reads first --------------------------------------------------------------------------------
@dataclasses.dataclass
class Outcome:
    bug: Bug
    detected: bool
    how: str                 # deadlock | finding kind | wrong output
    first_line: int | None   # the line the first message names
    first_text: str
    fix_lines: set
    seeded_line: int
    fix: object = None       # the verified repair offered (sim/diagnosis/repair.py: Repair), or None
    fix_passes: bool | None = None   # applied to the copy, the kernel's test passes (clean, equal to the reference)
    seconds: float = 0.0     # the simulation, repair search included
    search: tuple = ()       # (the repair search's seconds, the failing launch's seconds, candidates tried)

    @property
    def names_fix(self) -> bool:
        return self.first_line in self.fix_lines


def _wrong(pair) -> bool:
    if pair is None:
        return False
    got, ref = pair
    got = got[0] if isinstance(got, tuple) else got
    return not torch.allclose(got.float(), ref, atol=5e-2, rtol=5e-2)


def simulated(bug: Bug, schedules: int = 2, apply_fix: bool = False) -> Outcome:
    """The simulator's first message: the DeadlockError, else the first finding (raise_for_errors); with
    ``apply_fix``, whether the verified fix it offers makes the kernel's test pass."""
    import time
    s = seeded_copy(bug)
    t0 = time.perf_counter()
    res, pair = KERNELS[bug.kernel].run(s.module, schedules=schedules)
    took = time.perf_counter() - t0
    wrong = _wrong(pair)
    try:
        res.raise_for_errors()
        err = None
    except wb.TLXWorkbenchError as e:
        err = e
    if err is not None:
        how = "deadlock" if res.deadlock is not None else res.findings[0].kind
        text = err.message.splitlines()[0]
        o = Outcome(bug, True, how, err.line, text, s.fix_lines, s.line, res.fix, seconds=took)
        if res.repair_search is not None:
            rs = res.repair_search
            o.search = (rs.ops, rs.baseline_ops, len(rs.tried), rs.seconds)
        if apply_fix and res.fix is not None:
            o.fix_passes = test_passes(bug, res.fix.apply())
        return o
    return Outcome(bug, wrong, "wrong output" if wrong else "", None, "", s.fix_lines, s.line, seconds=took)


def test_passes(bug: Bug, text: str, schedules: int = 3) -> bool:
    """The kernel's test on ``text`` (a repaired copy): clean over ``schedules`` schedules and equal to torch."""
    subj = KERNELS[bug.kernel]
    s = seeded_copy(bug)
    path = pathlib.Path(s.file)
    seeded = path.read_text()
    # the repaired text in the seeded copy's own file and module name (our kernels register themselves by it),
    # the seeded text put back afterwards
    path.write_text(text)
    try:
        mod = _import(path, subj.package)
        res, pair = subj.run(mod, schedules=schedules, repair=False)
        return res.ok and pair is not None and not _wrong(pair)
    finally:
        path.write_text(seeded)
        import linecache
        linecache.checkcache(str(path))
        _import(path, subj.package)


def checked(bug: Bug) -> Outcome:
    """``wb.check``'s first finding."""
    s = seeded_copy(bug)
    res = KERNELS[bug.kernel].check(s.module)
    bad = [f for f in res if f.severity in ("error", "warning")]
    if not bad:
        return Outcome(bug, False, "", None, "", s.fix_lines, s.line)
    f = bad[0]
    return Outcome(bug, True, f.rule_id, f.line, f.message.splitlines()[0], s.fix_lines, s.line)


def main(argv=None):
    import argparse
    import time
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim-only", action="store_true")
    ap.add_argument("--only", nargs="*", help="bug ids")
    ap.add_argument("--fixes", action="store_true",
                    help="the simulator's first line and its verified fix: offered, and whether applying it makes "
                         "the kernel's test pass; the clean kernels too; a table by class")
    ns = ap.parse_args(argv)
    bugs = [b for b in BUGS if not ns.only or b.id in ns.only]
    if ns.fixes:
        return fixes_table(bugs)
    stages = [("simulate", simulated)] + ([] if ns.sim_only else [("check", checked)])
    totals = {name: [0, 0] for name, _ in stages}
    for b in bugs:
        for name, fn in stages:
            try:
                o = fn(b)
            except Exception as e:  # noqa: BLE001 - a crash is a miss, shown
                print(f"{b.id:24} {name:8} CRASH {type(e).__name__}: {str(e)[:160]}")
                continue
            totals[name][0] += o.detected
            totals[name][1] += o.names_fix
            mark = "ok " if o.names_fix else ("-- " if o.detected else "!! ")
            print(f"{b.id:24} {name:8} {mark} seeded {o.seeded_line:>4} first {str(o.first_line):>4} "
                  f"[{o.how}] {o.first_text[:150]}")
    for name, (det, fix) in totals.items():
        print(f"{name}: detected {det}/{len(bugs)}, first line names the fix {fix}/{len(bugs)}")


def fixes_table(bugs):
    import time
    t0 = time.perf_counter()
    rows: dict = {}
    ratios: list = []
    for b in bugs:
        o = simulated(b, apply_fix=True)
        cls = b.cls or "the suite's first 32"
        r = rows.setdefault(cls, [0, 0, 0, 0, 0])
        r[0] += 1
        r[1] += o.detected
        r[2] += o.names_fix
        r[3] += o.fix is not None
        r[4] += bool(o.fix_passes)
        mark = "ok " if o.names_fix else ("-- " if o.detected else "!! ")
        fx = ("fix passes" if o.fix_passes else "FIX FAILS") if o.fix is not None else "no fix"
        cost = ""
        if o.search:
            ratios.append((o.search[0] / max(o.search[1], 1), o.search[0], o.search[1], o.search[3]))
            cost = (f"search {o.search[0]:6} ops = {ratios[-1][0]:5.1f} x launch, {o.search[3]:4.2f} CPU s, "
                    f"{o.search[2]:2} tried")
        print(f"{b.id:24} {mark} seeded {o.seeded_line:>4} first {str(o.first_line):>4} {fx:10} {cost:38} "
              f"{o.first_text[:90]}", flush=True)
    clean = []
    for k in sorted({b.kernel for b in bugs}):
        res, pair = KERNELS[k].run(clean_copy(k), schedules=2)
        clean.append((k, res.ok and not _wrong(pair)))
    print()
    print("| class (bugs) | detected | first line is the seeded line (or its pair) | verified fix offered | "
          "applying it makes the test pass |")
    print("|---|---|---|---|---|")
    tot = [0] * 5
    for cls, r in rows.items():
        tot = [a + b for a, b in zip(tot, r)]
        print(f"| {cls} ({r[0]}) | {r[1]} | {r[2]} | {r[3]} | {r[4]} |")
    n = tot[0]
    print(f"| **all ({n})** | {tot[1]} | {tot[2]} ({100 * tot[2] / n:.0f} %) | {tot[3]} ({100 * tot[3] / n:.0f} %) | "
          f"{tot[4]} ({100 * tot[4] / n:.0f} %) |")
    if ratios:
        from tlx_workbench.sim.diagnosis.repair import BUDGET, FLOOR_OPS
        ratios.sort()
        big = [r for r in ratios if r[2] * BUDGET >= FLOOR_OPS]
        small = [r for r in ratios if r[2] * BUDGET < FLOOR_OPS]
        secs = sorted(r[3] for r in ratios)
        print(f"repair search / failing launch (simulated ops): median {ratios[len(ratios) // 2][0]:.1f} x; launches "
              f"whose budget is {BUDGET:.0f} x ({len(big)}): max {max((r[0] for r in big), default=0):.1f} x; launches "
              f"under {FLOOR_OPS // BUDGET:.0f} ops, whose budget is the {FLOOR_OPS} ops floor ({len(small)}): max "
              f"search {max((r[1] for r in small), default=0)} ops; search CPU time median {secs[len(secs) // 2]:.2f} s, "
              f"max {secs[-1]:.2f} s")
    print(f"clean kernels clean: {sum(ok for _, ok in clean)}/{len(clean)} "
          f"{[k for k, ok in clean if not ok] or ''}")
    print(f"time: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
