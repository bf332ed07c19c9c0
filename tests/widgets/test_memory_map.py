"""MemoryMapWidget: SMEM/TMEM address bars from a CompileReport; static and in Chromium."""
import re

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
    assert "shares space with a_smem" in svg
    # 3 stages -> 2 dividers each for a_smem and b_smem, 1 for acc (2 stages)
    assert svg.count("stroke='#fff' stroke-width='1.5'") == 5


def _labels(svg: str) -> list[str]:
    return re.findall(r"class='tlxwb-alloc-label'[^>]*>([^<]*)<", svg)


def test_the_map_reads_without_hovering_scaled_to_what_is_used():
    rep = fake_report("sm_90")
    svg = memory_map_svg(rep, width=960)
    # every buffer is named on the bar with its stages and size, each stage numbered
    assert _labels(svg) == ["a_smem ×3 · 48.0 KiB", "c_smem · 32.0 KiB", "b_smem ×3 · 48.0 KiB"]
    assert re.findall(r"class='tlxwb-stage'[^>]*>([^<]*)<", svg) == [f"stage {k}" for k in range(3)] * 2
    # the barriers (24 B each) are too narrow for a label: named under the bar, with a leader line
    callouts = re.findall(r"<g class='tlxwb-callout'>.*?<text[^>]*>([^<]*)</text></g>", svg)
    assert callouts == ["full ×3 · 24 B", "empty ×3 · 24 B"]
    # scaled to the 97 KiB used, not to the 227 KiB limit: the used space spans the bar
    assert "used 97.0 KiB of 227.0 KiB (43%)" in svg and "scaled to the 97.0 KiB used" in svg
    bar = re.search(r"<rect x='60' y='(\d+)' width='(\d+)' height='\d+' fill='#f7f7f7'", svg)
    a = re.search(r"data-name='a_smem'><title>[^<]*</title><rect x='([\d.]+)' y='\d+' width='([\d.]+)'", svg)
    b = re.search(r"data-name='b_smem'><title>[^<]*</title><rect x='([\d.]+)' y='\d+' width='([\d.]+)'", svg)
    plot_w = int(bar.group(2))
    assert float(a.group(2)) == pytest.approx(plot_w * 48 / 97, rel=0.01)
    assert float(b.group(1)) + float(b.group(2)) > 60 + 0.98 * plot_w
    # the limit is a gauge, not a line far right of an empty bar
    assert "class='tlxwb-memmap-gauge'" in svg and "class='tlxwb-used'" not in svg


def test_near_or_over_the_limit_the_bar_shows_it():
    rep = fake_report("sm_90")
    rep.resources.smem_bytes = 250 * 1024            # over the 227 KiB of an H100 block
    svg = memory_map_svg(rep)
    assert svg.count("class='tlxwb-limit'") == 2 and "class='tlxwb-used'" in svg
    assert "(110%)" in svg and "fill='#c0392b'" in svg


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
    assert widths["a_smem"] == pytest.approx(widths["b_smem"]) and widths["c_smem"] == pytest.approx(widths["a_smem"] * 2 / 3, abs=0.5)
    limit = page.locator(".tlxwb-memmap line.tlxwb-limit").first.bounding_box()
    assert limit["x"] > xs["empty"]                                 # the capacity gauge is right of every buffer
    # the labels fit inside their buffers (readable without hovering)
    for name in ("a_smem", "b_smem", "c_smem"):
        r = page.locator(f".tlxwb-alloc[data-name='{name}'] rect").bounding_box()
        t = page.locator(f".tlxwb-alloc[data-name='{name}'] .tlxwb-alloc-label").bounding_box()
        assert r["x"] <= t["x"] and t["x"] + t["width"] <= r["x"] + r["width"], name
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
