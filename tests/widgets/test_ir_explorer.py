"""IRExplorer: source | TTGIR | PTX | SASS, linked both ways; static and in Chromium."""
import pytest

from tlx_workbench.widgets import IRExplorer, ir_html
from tlx_workbench.widgets.ir_explorer import ir_data

from widget_reports import fake_report, line_of


def test_panes_and_maps_follow_the_report():
    r = fake_report()
    d = ir_data(r)
    assert [p["stage"] for p in d["panes"]] == ["source", "ttgir", "ptx", "sass"]
    assert d["panes"][0]["first"] == r.source.first_line
    n = line_of("b_smem =")
    assert d["forward"]["ptx"][str(n)] == r.source_map.lines_for("ptx", n)
    w = IRExplorer(r, stages=("ptx",))
    assert [p["stage"] for p in w._panes] == ["source", "ptx"] and w.lines_for("ptx", n) == r.source_map.lines_for("ptx", n)


def test_static_fallback_lists_the_mapping():
    r = fake_report()
    html = IRExplorer(r)._repr_mimebundle_()[0]["text/html"]
    assert "<script" not in html and html.count("<details class='tlxwb-ir-stage'") == 3
    n = line_of("full =")
    lines = r.source_map.lines_for("sass", n)
    assert f"<td>{lines[0]}-{lines[-1]}</td>" in html          # source line -> its SASS lines
    assert ir_html(r).count("<tr>") == len(r.source.text.splitlines()) + 1


@pytest.mark.browser
def test_in_chromium_linked_highlighting_both_ways(show):
    r = fake_report()
    page = show(IRExplorer(r))
    n = line_of("c_smem =")
    page.click(f".tlxwb-ir-pane[data-stage='source'] .tlxwb-ir-line[data-line='{n}']")
    lit = lambda stage: page.evaluate(f"""() => Array.from(document.querySelectorAll(
        ".tlxwb-ir-pane[data-stage='{stage}'] .tlxwb-hl, .tlxwb-ir-pane[data-stage='{stage}'] .tlxwb-hl-main"))
        .map(e => +e.dataset.line)""")
    for stage in ("ttgir", "ptx", "sass"):
        assert lit(stage) == r.source_map.lines_for(stage, n)
    assert page.evaluate("() => tlxwbViews[0].model.get('selected_line')") == n
    # and back: a SASS line lights its source line and the PTX lines of that source line
    m = line_of("tlx.async_dot")
    j = r.source_map.lines_for("sass", m)[1]
    page.click(f".tlxwb-ir-pane[data-stage='sass'] .tlxwb-ir-line[data-line='{j}']")
    assert lit("source") == [m] and lit("ptx") == r.source_map.lines_for("ptx", m)
    assert page.evaluate("() => tlxwbViews[0].model.get('selected_line')") == m
    assert f"line {m}" in page.inner_text(".tlxwb-status")
    # the SASS pane scrolled itself, the page did not
    assert page.evaluate("() => window.scrollY") == 0


@pytest.mark.browser
def test_static_fallback_renders_in_chromium(show_static):
    page = show_static(IRExplorer(fake_report()).static_html())
    assert page.locator("table.tlxwb-ir-source tr").count() == 17
    page.click("details[data-stage='ptx'] summary")
    assert "ptx_op_" in page.inner_text("details[data-stage='ptx'] pre")
