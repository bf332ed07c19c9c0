"""CompileReport.wgmma_overlap: what ptxas runs under each in-flight wgmma, read off real SASS.

The case it was built for: in attention's ``_kv_step`` the softmax is written between the P V
``tlx.async_dot`` and its ``tlx.async_dot_wait(0)``, yet ptxas hoists that wait above it, so no
exp2 runs under P V; ``PIN_SOFTMAX`` keeps all of them there."""
import inspect
import pickle

import pytest
import torch
from spill_kernel import many_live_values
from wgmma_kernels import SIGNATURE, chained_dots

import tlx_workbench as wb
from tlx_workbench.kernels import attention as A
from tlx_workbench.kernels import gemm_ws

SHAPE = (1, 2, 1024, 128)
SPILL_SIG = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"}


def _line(fn, text: str, after: int = 0) -> int:
    """The file line of the first line of `fn` (after line `after`) that contains `text`."""
    src, first = inspect.getsourcelines(getattr(fn, "fn", fn))    # a JITFunction wraps it
    return first + next(i for i, ln in enumerate(src) if text in ln and first + i > after)


QK = _line(A._kv_step, "qk = tlx.async_dot(q_tile")
PV = _line(A._kv_step, "acc = tlx.async_dot(p.to(DTYPE)")
QK_WAIT = _line(A._kv_step, "qk = tlx.async_dot_wait(1, qk)")
PV_WAIT = _line(A._kv_step, "acc = tlx.async_dot_wait(0, acc)")
SOFTMAX = _line(A._kv_step, "_online_softmax(")
EXP2 = _line(A._online_softmax, "p = tl.math.exp2(qk * qk_scale")


@pytest.fixture(scope="module")
def default():
    return A.compile_report(A.CONFIGS[0], shape=SHAPE).wgmma_overlap


@pytest.fixture(scope="module")
def pinned():
    cfg = A._config(128, 2, PERSISTENT=True, Q_BUFS=2, PIN_SOFTMAX=True, P_LATE=True)
    return A.compile_report(cfg, shape=SHAPE).wgmma_overlap


@pytest.fixture(scope="module")
def gemm():
    a, b, c = (torch.empty(512, 512, dtype=torch.float16) for _ in range(3))
    args, options = gemm_ws._kernel_call(a, b, c, gemm_ws.SIM_CONFIGS["tiny"])
    return wb.compile(gemm_ws.gemm_ws_coop_kernel, *args, target="sm_90", **options).wgmma_overlap


def _groups(ov, line):
    out = [g for g in ov if g.line == line]
    assert out, f"no wgmma group at line {line}: {ov}"
    return out


def test_default_softmax_is_moved_behind_the_pv_wait(default):
    for g in _groups(default, PV):
        assert (g.a_operand, g.ends_at, g.wait_line, g.wait_pending) == ("registers", "wait", PV_WAIT, 0)
        assert g.mufu == 0                          # no exp2 under P V ...
        assert g.moved_mufu >= 64 and g.moved > g.written_in_shadow   # ... all of them after its wait
        assert g.moved_from == (SOFTMAX,) and EXP2 in dict(g.moved_lines)
        assert f"line {PV}" in g.explanation and f"line {PV_WAIT}" in g.explanation
        assert "PIN_SOFTMAX" in g.hint and f"line {PV_WAIT}" in g.hint
    assert default.explained == [g for g in default if g.line == PV]


def test_qk_groups_retire_at_the_first_wait_with_pv_in_their_shadow(default):
    for g in _groups(default, QK):
        assert (g.ends_at, g.wait_line, g.wait_pending) == ("wait", QK_WAIT, 1)
        assert g.wgmma == g.num_hgmma == 8          # the P V HGMMAs issue under S = Q K^T
        assert not g.explanation


def test_pin_softmax_keeps_every_exp2_under_pv(pinned):
    for g in _groups(pinned, PV):
        assert (g.a_operand, g.wait_line) == ("registers", PV_WAIT)
        assert g.mufu >= 64 and g.moved_mufu == 0 and not g.explanation
        assert EXP2 in dict(g.shadow_lines)
    assert not pinned.explained


def test_gemm_groups_read_a_from_smem_and_cross_the_loop_edge(gemm):
    first = _line(gemm_ws._mma_steps, "acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s])")
    in_loop = _line(gemm_ws._mma_steps, "acc = tlx.async_dot(a_ring[2 * s + wg], b_ring[s], acc)")
    wait1 = _line(gemm_ws._mma_steps, "acc = tlx.async_dot_wait(1, acc)")
    assert gemm and all(g.a_operand == "smem" and g.a_registers == "" and g.num_hgmma >= 2 for g in gemm)
    assert {g.line for g in gemm} == {first, in_loop}
    for g in _groups(gemm, first):           # peeled k-step: retired by the loop's wait(1)
        assert (g.ends_at, g.wait_line, g.wait_pending) == ("wait", wait1, 1)
    for g in _groups(gemm, in_loop):         # retired by the next iteration's wait
        assert g.crosses_loop_edge and g.wait_line is None


def _chained(early: bool):
    return wb.compile(chained_dots, signature=SIGNATURE, ITERS=2, EARLY=early, BK=128, num_warps=4,
                      num_stages=0, target="sm_90")


def test_small_kernel_shows_the_hoisted_wait_too():
    s_dot, p_dot = _line(chained_dots, "s = tlx.async_dot("), _line(chained_dots, "acc = tlx.async_dot(p,")
    exp2 = _line(chained_dots, "e = tl.exp2(s)")
    wait0 = _line(chained_dots, "acc = tlx.async_dot_wait(0, acc)", after=exp2)
    ov = _chained(early=False).wgmma_overlap
    assert [(g.line, g.a_operand, g.serialized) for g in ov] == [(s_dot, "smem", False), (p_dot, "registers", False)]
    pv = ov[1]
    assert pv.wait_line == wait0 and pv.moved_from == (exp2,) and pv.moved_mufu > pv.mufu
    assert f"line {wait0}" in pv.hint


def test_serialized_wgmma_is_one_row_per_async_dot():
    """C7513: ptxas issues each HGMMA as its own group and waits for it at once."""
    r = _chained(early=True)
    ov = r.wgmma_overlap
    assert [(g.line, g.a_operand) for g in ov] == [(_line(chained_dots, "s = tlx.async_dot("), "smem"),
                                                   (_line(chained_dots, "acc = tlx.async_dot(p,"), "registers")]
    [c7513] = [a for a in r.ptxas_advisories if a.code == "C7513"]
    for g in ov:
        assert g.serialized and g.num_hgmma == 8 and g.wait_line is None
        assert "serialized" in g.explanation and g.hint == c7513.hint


def test_no_wgmma_gives_an_empty_result():
    r = wb.compile(many_live_values, signature=SPILL_SIG, BLOCK=1024, num_warps=1, target="sm_90")
    ov = r.wgmma_overlap
    assert list(ov) == [] and "no HGMMA" in repr(ov) and "no HGMMA" in ov._repr_html_()
    r100 = wb.compile(many_live_values, signature=SPILL_SIG, BLOCK=1024, num_warps=1, target="sm_100")
    assert list(r100.wgmma_overlap) == [] and "sm_90" in str(r100.wgmma_overlap)


def test_reprs_name_the_lines_and_survive_pickling(default):
    text, page = repr(default), default._repr_html_()
    for line in (QK, PV, QK_WAIT, PV_WAIT):
        assert f"line {line}" in text and f">{line}" in page
    assert "PIN_SOFTMAX" in text and "PIN_SOFTMAX" in page and "what to do" in page
    back = pickle.loads(pickle.dumps(default))
    assert list(back) == list(default) and back.kernel == default.kernel


def test_the_report_itself_shows_what_ptxas_did_not_overlap(default, pinned, gemm):
    """The compile report's text and HTML carry one finding per async_dot whose work moved behind its
    wait (the loop copies of the same line are one finding), and nothing when the SASS overlaps it."""
    pv_line = next(g.line for g in default if g.explanation and not g.serialized)
    report = A.compile_report(A.CONFIGS[0], shape=SHAPE)          # the fixtures' reports (cached)
    for text in (report.summary(), report._repr_html_()):
        assert "wgmma overlap" in text and text.count(f"async_dot at line {pv_line}") == 1
        assert "PIN_SOFTMAX" in text
    cfg = A._config(128, 2, PERSISTENT=True, Q_BUFS=2, PIN_SOFTMAX=True, P_LATE=True)
    a, b, c = (torch.empty(512, 512, dtype=torch.float16) for _ in range(3))
    args, options = gemm_ws._kernel_call(a, b, c, gemm_ws.SIM_CONFIGS["tiny"])
    for r in (A.compile_report(cfg, shape=SHAPE), wb.compile(gemm_ws.gemm_ws_coop_kernel, *args, target="sm_90",
                                                              **options)):
        assert "wgmma overlap" not in r.summary() and "wgmma overlap" not in r._repr_html_()
