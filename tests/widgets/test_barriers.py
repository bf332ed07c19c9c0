"""BarrierPhaseWidget: rows per barrier slot, events, waits, release arrows; static and in Chromium."""
import re

import numpy as np
import pytest

from tlx_workbench.widgets import BarrierPhaseWidget, barrier_svg
from tlx_workbench.widgets.barriers import EV_KINDS, encode_barriers
from tlx_workbench.widgets.sample import sample_trace


@pytest.fixture(scope="module")
def trace():
    return sample_trace(iters=9, ctas=1, consumers=2, stages=3, seed=11)


def test_rows_waiters_and_arrows(trace):
    enc = encode_barriers(trace)
    rows = [(r["cta"], r["barrier"], r["slot"]) for r in enc["rows"]]
    assert rows == trace.barrier_slots() and len(rows) == 6
    by = {(r["barrier"], r["slot"]): r for r in enc["rows"]}
    assert by[("full_bars", 0)]["waiters"] == ["consumer[0]", "consumer[1]"]
    assert by[("empty_bars", 0)]["waiters"] == ["producer[0]"]
    assert by[("empty_bars", 0)]["info"].startswith("count 2")
    fl = np.frombuffer(enc["fl"], dtype=np.float64).reshape(-1, 5)
    assert len(fl) == len(trace.flows())
    who = enc["who"]
    for r, k, t, td, w in fl:
        row = enc["rows"][int(r)]
        if row["barrier"] == "empty_bars":
            assert who[int(w)].startswith("consumer") and row["waiters"][int(k)] == "producer[0]"
        else:
            assert w == -1                                     # TMA bytes completed it
        assert td >= t
    ev_i = np.frombuffer(enc["ev_i"], dtype=np.int32).reshape(9, -1)
    assert sum(1 for k in ev_i[1] if EV_KINDS[k] == "flip") == \
        sum(1 for e in trace.barrier_events if e.kind == "flip")


def test_static_fallback_svg(trace):
    w = BarrierPhaseWidget(trace)
    data, _ = w._repr_mimebundle_()
    html = data["text/html"]
    assert "<script" not in html and html.count("class='tlxwb-bar-row'") == 6
    assert html.count("class='tlxwb-flip'") == sum(1 for e in trace.barrier_events if e.kind == "flip")
    assert html.count("class='tlxwb-release'") == len(trace.flows())
    big = barrier_svg(sample_trace(iters=1500, ctas=2))
    assert len(big) < 3_000_000


@pytest.mark.browser
def test_in_chromium_rows_tooltips_and_click(show, trace):
    w = BarrierPhaseWidget(trace)
    page = show(w)
    geo = page.evaluate("() => { const v = tlxwbViews[0].el.tlxwb; return {rowY: v.rowY, band: v.band}; }")
    # every row has a phase flip drawn (near-black pixels in its band)
    dark = page.evaluate("""([ys, band]) => {
        const cv = document.querySelector('canvas'), g = cv.getContext('2d'), r = devicePixelRatio || 1;
        return ys.map(y => { const d = g.getImageData(240 * r, y * r, (cv.clientWidth - 240) * r, (band - 4) * r).data;
            let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 40 && d[i+1] < 40 && d[i+2] < 40) n++; return n; }); }""",
        [geo["rowY"], geo["band"]])
    assert all(n > 20 for n in dark), dark
    box = page.locator("canvas").bounding_box()
    tip = page.locator(".tlxwb-tooltip")
    # hover the flip of full_bars[1], phase 0: completed by TMA bytes
    i, flip = next((i, e) for i, e in enumerate(w.events) if e.kind == "flip" and e.barrier == "full_bars" and e.slot == 1)
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.event({i})")
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "CTA 0 full_bars[1]" in text and f"phase {flip.phase} completed" in text
    # hover the producer's wait on a free slot: released by the consumer that arrived last
    j, wait = next((j, s) for j, s in enumerate(w.waits) if s.task == "producer" and s.duration > 20)
    f = next(f for f in trace.flows() if f.dst == wait.lane and f.dst_time == wait.end)
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.wait({j})")
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    page.wait_for_function("() => document.querySelector('.tlxwb-tooltip').innerText.includes('released by')")
    text = tip.inner_text()
    assert f"producer[0] on empty_bars[{wait.slot}]" in text and f"released by consumer[{f.src[2]}]" in text
    assert f"parity {wait.phase}" in text
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    assert page.evaluate("() => tlxwbViews[0].model.get('selected_line')") == wait.line
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    page.mouse.wheel(0, -500)
    page.wait_for_function("() => tlxwbViews[0].model.get('view_range').length === 2")
    vr = page.evaluate("() => tlxwbViews[0].model.get('view_range')")
    assert vr[1] - vr[0] < 0.7 * trace.duration


@pytest.mark.browser
def test_static_fallback_renders_in_chromium(show_static, trace):
    page = show_static(BarrierPhaseWidget(trace).static_html())
    assert page.locator("svg.tlxwb-barrier-svg text.tlxwb-bar-row").count() == 6
    assert page.locator("svg .tlxwb-release").count() == len(trace.flows())
    assert page.locator("svg.tlxwb-barrier-svg").bounding_box()["height"] > 200


def test_the_legend_is_in_the_markers_colours(trace):
    from tlx_workbench.widgets.barriers import legend_items
    enc = encode_barriers(trace)
    legend = dict(legend_items(enc))
    arrivers = {f"{e.task}[{e.replica or 0}]" for e in trace.barrier_events if e.kind == "arrive" and e.task}
    assert {k for k in legend if k.startswith("arrive")} == {f"arrive: {a}" for a in arrivers}
    svg = barrier_svg(trace)
    fills = set(re.findall(r"class='tlxwb-arrive' d='[^']*' fill='(#[0-9a-f]+)'", svg))
    assert fills and fills <= {legend[f"arrive: {a}"] for a in arrivers}
    assert len(fills) == len(arrivers)          # each arriver its own colour
    for label, colour in legend.items():
        assert f"fill='{colour}'/><text x='" in svg and f">{label}</text>" in svg


@pytest.mark.browser
def test_in_chromium_each_arrival_is_drawn_in_its_legend_colour(show, trace):
    w = BarrierPhaseWidget(trace)
    page = show(w)
    legend = {k: v for k, v in w._legend}
    items = page.locator(".tlxwb-legend-item").all_inner_texts()
    assert [k for k, _ in w._legend] == [t.strip() for t in items]
    found: dict = {}
    for i, e in enumerate(w.events):
        if e.kind != "arrive":
            continue
        want = legend[f"arrive: {e.task}[{e.replica or 0}]"]
        pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.event({i})")
        n = page.evaluate("""([x, y, c]) => { const cv = document.querySelector('canvas'), r = devicePixelRatio || 1;
            const d = cv.getContext('2d').getImageData((x - 4) * r, (y - 9) * r, 8 * r, 8 * r).data;
            const want = [1, 3, 5].map(k => parseInt(c.slice(k, k + 2), 16));
            let n = 0; for (let i = 0; i < d.length; i += 4)
                if (Math.abs(d[i] - want[0]) + Math.abs(d[i + 1] - want[1]) + Math.abs(d[i + 2] - want[2]) < 6) n++;
            return n; }""", [pos["x"], pos["y"], want])
        found[e.lane] = max(found.get(e.lane, 0), n)
    # every arriver's triangles are drawn in its legend colour (neighbours may overlap some)
    assert len(found) >= 2 and all(n >= 8 for n in found.values()), found
