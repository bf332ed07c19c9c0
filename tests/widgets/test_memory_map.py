"""MemoryMapWidget: SMEM/TMEM address bars from a CompileReport; static and in Chromium."""
import pytest

from tlx_workbench.widgets import MemoryMapWidget, memory_map_svg
from tlx_workbench.widgets.memory_map import memory_map_data

from widget_reports import fake_report, line_of


def test_layout_tracks_aliases_and_capacity():
    smem, tmem = memory_map_data(fake_report("sm_100"))
    assert [a["name"] for a in smem["allocations"]] == ["a_smem", "c_smem", "b_smem", "full", "empty"]
    track = {a["name"]: a["track"] for a in smem["allocations"]}
    assert track["c_smem"] != track["a_smem"] and track["b_smem"] == track["a_smem"]   # reuse on its own track
    assert {a["name"]: a["aliases"] for a in smem["allocations"]}["c_smem"] == ["a_smem"]
    assert smem["capacity"] == 232448 and smem["used"] == 96 * 1024 + 48 + 1024
    assert tmem["capacity"] == 512 and tmem["allocations"][0]["name"] == "acc"
    assert [d["storage"] for d in memory_map_data(fake_report("sm_90"))] == ["smem"]     # no TMEM on Hopper


def test_static_svg_has_every_buffer_stage_and_the_limit():
    svg = memory_map_svg(fake_report("sm_100"))
    assert svg.count("class='tlxwb-alloc'") == 6 and "limit 227.0 KiB" in svg and "limit 512 cols" in svg
    assert "a_smem x3" in svg and "shares space with a_smem" in svg
    # 3 stages -> 2 dividers each for a_smem and b_smem, 1 for acc (2 stages)
    assert svg.count("stroke='#fff' stroke-width='1.5'") == 5


@pytest.mark.browser
def test_in_chromium_buffers_in_address_order_hover_and_click(show):
    w = MemoryMapWidget(fake_report("sm_100"))
    page = show(w)
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll('.tlxwb-memmap .tlxwb-alloc')).map(g => {
        const r = g.querySelector('rect').getBoundingClientRect(); return [g.dataset.name, r.x, r.y, r.width]; })""")
    smem = [b for b in boxes if b[0] != "acc"]
    xs = {name: x for name, x, _, _ in smem}
    assert xs["a_smem"] == pytest.approx(xs["c_smem"]) and xs["a_smem"] < xs["b_smem"] < xs["full"] < xs["empty"]
    widths = {name: wd for name, _, _, wd in boxes}
    assert widths["a_smem"] == pytest.approx(widths["b_smem"]) and widths["c_smem"] == pytest.approx(widths["a_smem"] * 2 / 3)
    limit = page.locator(".tlxwb-memmap line.tlxwb-limit").first.bounding_box()
    assert limit["x"] > xs["empty"]                                 # the capacity line is right of every buffer
    page.hover(".tlxwb-alloc[data-name='c_smem'] rect")
    tip = page.locator(".tlxwb-tooltip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "c_smem (buffer, smem)" in text and "1 x 128x128 f16" in text and "shares space with a_smem" in text
    assert f"line {line_of('c_smem =')}: c_smem = tlx.local_alloc" in text
    assert page.locator(".tlxwb-alloc.tlxwb-hl").count() == 2        # itself and the buffer it reuses
    page.click(".tlxwb-alloc[data-name='b_smem'] rect")
    assert page.evaluate("() => tlxwbViews[0].model.get('selected_line')") == line_of("b_smem =")
    assert page.evaluate("() => tlxwbViews[0].model.get('selected_name')") == "b_smem"


@pytest.mark.browser
def test_static_fallback_renders_in_chromium(show_static):
    page = show_static(MemoryMapWidget(fake_report("sm_90"))._repr_mimebundle_()[0]["text/html"])
    assert page.locator("svg.tlxwb-memmap-svg .tlxwb-alloc").count() == 5
    assert page.locator("table.tlxwb-memmap-table tr").count() == 6
    assert page.locator("svg.tlxwb-memmap-svg").bounding_box()["width"] > 800
