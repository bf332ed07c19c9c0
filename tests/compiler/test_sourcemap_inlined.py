"""SASS of code inlined from @triton.jit helpers maps to the helper's own line (nvdisasm -gi
prints one ``//##`` line per inlined frame; the innermost frame in the kernel's file counts)."""
import pathlib
import re

import pytest
from spill_kernel import many_live_values

import tlx_workbench as wb
from tlx_workbench.kernels import attention as A

ATTN = pathlib.Path(A.attention_fwd_kernel.fn.__code__.co_filename)   # attention_kernel.py: the device code
ATTN_LINES = ATTN.read_text().splitlines()


def _line(pattern: str, start: int = 1) -> int:
    """First line (1-based, at or after `start`) of the attention kernels' file matching `pattern`."""
    return next(i for i, t in enumerate(ATTN_LINES, 1) if i >= start and re.search(pattern, t))


def _body(def_pattern: str) -> range:
    """The lines of the @triton.jit helper whose def matches `def_pattern`."""
    first = _line(def_pattern)
    end = next((i for i, t in enumerate(ATTN_LINES, 1) if i > first and t.startswith("@")), len(ATTN_LINES))
    return range(first, end)


@pytest.fixture(scope="module")
def attn():
    return A.compile_report(A.CONFIGS[0], shape=(1, 2, 1024, 128))


@pytest.fixture(scope="module")
def plain():
    return wb.compile(many_live_values, signature={"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"},
                      BLOCK=1024, num_warps=1, target="sm_90")


def test_exp2_of_online_softmax_maps_to_its_line(attn):
    body = _body(r"^def _online_softmax\(")
    exp2 = _line(r"^\s*p = tl\.math\.exp2\(", body.start)
    assert exp2 in body
    assert "MUFU.EX2" in attn.sass_for(exp2)
    # and back: some MUFU.EX2 has that helper line as its kernel line (innermost frame)
    sass = attn.sass.splitlines()
    assert any(attn.source_line("sass", i) == exp2 for i, t in enumerate(sass, 1) if "MUFU.EX2" in t)


def test_async_dots_of_kv_step_map_to_their_wgmmas(attn):
    body = _body(r"^def _kv_step\(")
    dots = [i for i in body if "tlx.async_dot(" in ATTN_LINES[i - 1]]
    assert len(dots) == 2
    qk, pv = dots
    # ptxas tags the Q K^T group's HGMMAs with the next statement's line; its fence and
    # descriptor set-up keep the async_dot's own line
    assert "WARPGROUP.ARRIVE" in attn.sass_for(qk)
    assert "HGMMA" in attn.sass_for(pv)


def test_outermost_call_line_no_longer_takes_every_instruction(attn):
    calls = [i for i, t in enumerate(ATTN_LINES, 1) if re.search(r"^\s+_persistent_consumer\(", t)]
    assert calls
    back = attn.source_map.backward["sass"]
    on_calls = sum(1 for v in back.values() if v in calls)
    assert len(back) > 1000
    assert on_calls < len(back) // 20, (on_calls, len(back))
    # the helpers' lines each get their own instructions, across several helpers
    helpers = {name: _body(rf"^def {name}\(") for name in ("_online_softmax", "_kv_step", "_attend")}
    for name, body in helpers.items():
        assert sum(1 for v in back.values() if v in body) > 20, name
    # forward keeps the whole chain (as TTGIR/LLIR do): the call line also shows its helpers' code
    assert any("MUFU.EX2" in attn.sass_for(c) for c in calls)


def test_kernel_without_own_helpers_keeps_its_mapping(plain):
    lines = range(plain.source.first_line, plain.last_line + 1)
    text = {i: plain.source.line_text(i) for i in lines}
    load = next(i for i in lines if "tl.load(" in text[i])
    store = next(i for i in lines if "tl.store(" in text[i])
    cumsum = next(i for i in lines if "tl.cumsum(" in text[i])
    assert "LDG" in plain.sass_for(load)
    assert "STG" in plain.sass_for(store)
    # tl.cumsum is a helper in triton's standard.py: its code stays on the kernel's cumsum line
    assert "SHFL.UP" in plain.sass_for(cumsum)
    assert set(plain.source_map.forward["sass"]) <= set(lines)
    assert set(plain.source_map.backward["sass"].values()) <= set(lines)
