"""TimelineWidget: data it sends, its static fallback, and what a person sees in Chromium."""
import re

import numpy as np
import pytest

from tlx_workbench.trace import Span, Trace
from tlx_workbench.widgets import TimelineWidget, timeline_svg, untrusted_safe
from tlx_workbench.widgets.sample import sample_trace
from tlx_workbench.widgets.timeline import encode_spans

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def trace():
    return sample_trace(iters=10, ctas=2, consumers=2, stages=3, seed=5)


def test_spans_go_over_as_compact_sorted_columns(trace):
    enc = encode_spans(trace)
    n = enc["n"]
    assert n == len(trace.spans)
    times = np.frombuffer(enc["times"], dtype=np.float64)
    ints = np.frombuffer(enc["ints"], dtype=np.int32).reshape(7, n)
    lanes = trace.lanes()
    for i, k in enumerate(enc["order"]):
        s = trace.spans[k]
        assert (times[i], times[n + i]) == (s.start, s.end)
        assert lanes[ints[0, i]] == s.lane and enc["kinds"][ints[1, i]] == s.kind
        assert enc["strings"][ints[3, i]] == s.name
        assert (ints[4, i] >= 0) == (s.barrier is not None)
        if s.line is not None:
            src = enc["sources"][ints[2, i]]
            assert src["line"] == s.line and src["text"].strip().startswith("#")   # sample points at its own comments
    # sorted by lane then start, which the canvas relies on for its binary search
    key = list(zip(ints[0], times[:n]))
    assert key == sorted(key)
    flows = np.frombuffer(enc["flows"], dtype=np.float64).reshape(-1, 4)
    assert len(flows) == len(trace.flows())


def test_mime_bundle_has_live_view_and_static_fallback(trace):
    w = TimelineWidget(trace)
    data, _ = w._repr_mimebundle_()
    assert WIDGET_MIME in data and "text/html" in data
    html = data["text/html"]
    assert "<svg" in html and "<script" not in html
    for lane in ("producer[0]", "consumer[0]", "consumer[1]"):
        assert html.count(f">{lane}</text>") == 2           # one per CTA
    assert "CTA 1 consumer[1]" in html                      # the summary table


def test_bundle_carries_the_picture_as_svg_for_github(trace):
    """The static picture rides in the widget's own bundle as ``image/svg+xml`` (what GitHub and
    exports show), the same SVG as in the HTML fallback and drawn with the widget's filters, so a
    notebook needs no second cell to show it; a view that draws no SVG adds none."""
    from widget_reports import fake_report
    from tlx_workbench.widgets import BarrierPhaseWidget, IRExplorer, MemoryMapWidget
    views = [TimelineWidget(trace), TimelineWidget(trace, hide_waits=True), BarrierPhaseWidget(trace),
             MemoryMapWidget(fake_report("sm_90"))]
    svgs = []
    for w in views:
        data, _ = w._repr_mimebundle_()
        assert WIDGET_MIME in data and "text/plain" in data, w
        svg = data["image/svg+xml"]
        assert svg.startswith("<svg xmlns='http://www.w3.org/2000/svg'") and svg.endswith("</svg>")
        # the HTML also draws the picture in plain HTML, for an untrusted notebook (widgets.untrusted)
        assert svg in data["text/html"] and data["text/html"] == untrusted_safe(w.static_html()), w
        svgs.append(svg)
        w.close()
    assert svgs[0] == timeline_svg(trace) and svgs[1] == timeline_svg(trace, hide_waits=True) != svgs[0]
    data, _ = IRExplorer(fake_report("sm_90"))._repr_mimebundle_()
    assert "image/svg+xml" not in data and "text/html" in data


def test_on_select_gets_the_clicked_span(trace):
    w = TimelineWidget(trace)
    got = []
    w.on_select(got.append)
    i = next(i for i, k in enumerate(w._order) if trace.spans[k].kind == "mma")
    w.selected_index = i                     # what the front end does on a click
    assert got == [trace.spans[w._order[i]]] and w.selected.kind == "mma"


def test_static_svg_of_100k_spans_stays_small():
    big = sample_trace(iters=1400, ctas=8, seed=1)
    assert len(big.spans) > 95_000
    svg = timeline_svg(big)
    assert len(svg) < 2_000_000 and svg.count("<rect class='tlxwb-span") < 30_000


# -- in a real browser --------------------------------------------------------------------
def _pixels(page, color, x0, y0, x1, y1):
    """How many canvas pixels in a CSS-pixel box have `color` (hex)."""
    return page.evaluate("""([c, x0, y0, x1, y1]) => {
        const cv = document.querySelector('canvas'), g = cv.getContext('2d'), r = devicePixelRatio || 1;
        const d = g.getImageData(x0 * r, y0 * r, (x1 - x0) * r, (y1 - y0) * r).data;
        const want = [1, 3, 5].map(k => parseInt(c.slice(k, k + 2), 16));
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - want[0]) + Math.abs(d[i+1] - want[1]) + Math.abs(d[i+2] - want[2]) < 6) n++;
        return n; }""", [color, x0, y0, x1, y1])


@pytest.mark.browser
def test_draws_a_lane_per_task_with_its_kinds(show, trace):
    w = TimelineWidget(trace)
    page = show(w)
    info = page.evaluate("() => { const v = tlxwbViews[0].el.tlxwb; return {ys: v.laneY, h: v.laneHeight}; }")
    width = page.evaluate("() => document.querySelector('canvas').clientWidth")
    colors = w._colors
    for lane, y in zip(trace.lanes(), info["ys"]):
        box = (225, y, width, y + info["h"])
        if lane[1] == "producer":
            assert _pixels(page, colors["tma"], *box) > 20 and _pixels(page, colors["mma"], *box) == 0
        else:
            assert _pixels(page, colors["mma"], *box) > 500 and _pixels(page, colors["tma"], *box) == 0
    legend = page.inner_text(".tlxwb-legend")
    assert all(k in legend for k in ("mma", "tma", "wait", "arrive"))


@pytest.mark.browser
def test_hover_shows_a_tooltip_with_op_barrier_phase_and_line(show, trace):
    w = TimelineWidget(trace)
    # a consumer's blocking wait on full_bars in CTA 1
    i, span = next((i, trace.spans[k]) for i, k in enumerate(w._order)
                   if trace.spans[k].kind == "wait" and trace.spans[k].cta == 1
                   and trace.spans[k].task == "consumer" and trace.spans[k].duration > 60)
    page = show(w)
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.locate({i})")
    box = page.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    tip = page.locator(".tlxwb-tooltip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "barrier_wait" in text and "(wait)" in text
    assert f"full_bars[{span.slot}]" in text and f"parity {span.phase}" in text
    assert f"CTA 1 consumer[{span.replica}]" in text
    assert re.search(rf"line {span.line}: #?\s*tlx.barrier_wait\(full_bars\[s\], phase\)", text)
    assert f"duration {round(span.duration)} cycles" in text
    page.mouse.move(box["x"] + 5, box["y"] + 5)                     # off the spans: it goes away
    tip.wait_for(state="hidden")
    # a consumer's arrive on empty_bars: the phase it counts toward, numbered from 0 as the barrier view's flips
    flip_at = {(e.slot, e.time): e.phase for e in trace.barrier_events
               if e.kind == "flip" and e.cta == 1 and e.barrier == "empty_bars"}
    i, arrive = max(((i, trace.spans[k]) for i, k in enumerate(w._order) if trace.spans[k].kind == "arrive"
                     and trace.spans[k].barrier == "empty_bars" and trace.spans[k].cta == 1
                     and (trace.spans[k].slot, trace.spans[k].end) in flip_at and trace.spans[k].phase >= 1),
                    key=lambda p: p[1].duration)
    flips = {flip_at[(arrive.slot, arrive.end)]}                   # the phase its arrival completed
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.locate({i})")
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    tip.wait_for(state="visible")
    text = tip.inner_text()
    assert "barrier_arrive" in text and f"phase {arrive.phase}" in text and "parity" not in text, text
    assert flips == {arrive.phase}                                  # the barrier view's flip says the same


@pytest.mark.browser
def test_wheel_zooms_and_drag_pans_and_python_hears_the_range(show, trace):
    page = show(TimelineWidget(trace))
    canvas = page.locator("canvas")
    box = canvas.bounding_box()
    rng = lambda: [float(canvas.get_attribute("data-t0")), float(canvas.get_attribute("data-t1"))]
    full = rng()
    x = box["x"] + 600
    page.mouse.move(x, box["y"] + 80)
    page.mouse.wheel(0, -600)                                       # zoom in around x
    page.wait_for_function("() => tlxwbViews[0].model.get('view_range').length === 2")
    zoomed = rng()
    assert zoomed[1] - zoomed[0] < 0.6 * (full[1] - full[0])
    assert full[0] < zoomed[0] < zoomed[1] < full[1]
    assert page.evaluate("() => tlxwbViews[0].model.get('view_range')") == pytest.approx(zoomed)
    page.mouse.down()
    page.mouse.move(x + 200, box["y"] + 80, steps=5)                # drag right: earlier times come in
    page.mouse.up()
    panned = rng()
    assert panned[0] < zoomed[0] and panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0])
    page.dblclick("canvas", position={"x": 600, "y": 80})
    assert rng() == pytest.approx(full)


@pytest.mark.browser
def test_click_on_a_span_sends_its_source_line(show, trace):
    w = TimelineWidget(trace)
    i, span = next((i, trace.spans[k]) for i, k in enumerate(w._order) if trace.spans[k].kind == "mma"
                   and trace.spans[k].cta == 0 and trace.spans[k].replica == 1)
    page = show(w)
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.locate({i})")
    page.locator("canvas").click(position=pos)
    saved = page.evaluate("() => tlxwbViews[0].model.log.saved.at(-1)")
    assert saved["selected_line"] == span.line and saved["selected_index"] == i
    assert saved["selected_file"] == span.file
    assert f"async_dot at line {span.line}" in page.inner_text(".tlxwb-status")
    # the line itself, in the view's source pane: highlighted, scrolled into the pane's view
    sel = page.locator(".tlxwb-source .tlxwb-src-sel")
    assert sel.count() == 1 and "tlx.async_dot" in sel.inner_text() and str(span.line) in sel.inner_text()
    pane, line = page.locator(".tlxwb-source").bounding_box(), sel.bounding_box()
    assert pane["y"] <= line["y"] and line["y"] + line["height"] <= pane["y"] + pane["height"] + 1
    assert page.locator(".tlxwb-source .tlxwb-src-line").count() > 5          # with the lines around it
    # what the kernel gets back: the same span, through on_select
    got = []
    w.on_select(got.append)
    w.selected_index = saved["selected_index"]
    assert got[0] is span


@pytest.mark.browser
def test_static_fallback_renders(show_static, trace):
    data, _ = TimelineWidget(trace)._repr_mimebundle_()
    page = show_static(data["text/html"])
    svg = page.locator("svg.tlxwb-timeline-svg")
    assert svg.bounding_box()["width"] > 800
    assert page.locator("svg text.tlxwb-lane").count() == len(trace.lanes())
    assert page.locator("rect.tlxwb-mma").count() > 10
    assert "CTA 0 producer[0]" in page.inner_text("table.tlxwb-summary")


@pytest.mark.browser
def test_empty_and_proton_traces_render_without_errors(show):
    """An empty trace and an imported Proton trace (ns, no barriers) both show; the page
    fixture fails the test on any JavaScript error."""
    import pathlib
    from tlx_workbench.widgets import BarrierPhaseWidget
    proton = Trace.from_chrome(str(pathlib.Path(__file__).parent / "data" / "proton_instrumentation.json"))
    assert "<svg" in TimelineWidget(Trace()).static_html() and "<svg" in BarrierPhaseWidget(Trace()).static_html()
    page = show(TimelineWidget(Trace()), BarrierPhaseWidget(Trace()), TimelineWidget(proton))
    assert page.locator("canvas").count() == 3
    labels = page.evaluate("() => tlxwbViews[2].model.get('_lanes').map(l => l.label)")
    assert "warp 4 (line 1)[0]" in labels and page.evaluate("() => tlxwbViews[2].model.get('time_unit')") == "ns"


def test_filters_hide_waits_fold_ctas_and_lay_replicas_on_one_lane(trace):
    from tlx_workbench.widgets.timeline import display_lanes
    waits = sum(1 for s in trace.spans if s.kind == "wait")
    assert waits > 0
    full = timeline_svg(trace)
    assert "class='tlxwb-span tlxwb-wait'" in full
    hidden = timeline_svg(trace, hide_waits=True)
    assert "tlxwb-wait" not in hidden and "class='tlxwb-span tlxwb-mma'" in hidden and "waits hidden" in hidden
    lanes = trace.lanes()
    ctas = sorted({l[0] for l in lanes})
    assert len(ctas) == 2
    rows, where = display_lanes(trace, fold_ctas=True)
    assert len(rows) == len([l for l in lanes if l[0] == ctas[0]])           # one CTA's worth of lanes
    assert all(where[(c, t, r)] == where[(ctas[0], t, r)] for c, t, r in lanes)
    folded = timeline_svg(trace, fold_ctas=True)
    assert "CTAs 0-1 folded" in folded and ">CTA 1<" not in folded
    assert folded.count("class='tlxwb-lane'") == len(rows)
    rows, _ = display_lanes(trace, lane_per_task=True)
    assert [r["label"] for r in rows] == ["producer", "consumer ×2"] * 2
    # a merged lane's busy share is the mean of its lanes'
    summ = {(s.cta, s.task, s.replica): s.busy_share for s in trace.summary()}
    assert rows[1]["busy_share"] == pytest.approx((summ[(0, "consumer", 0)] + summ[(0, "consumer", 1)]) / 2)


@pytest.mark.browser
def test_filter_checkboxes_redraw_the_view_and_reach_python(show, trace):
    w = TimelineWidget(trace)
    page = show(w)
    width = page.evaluate("() => document.querySelector('canvas').clientWidth")
    h = page.evaluate("() => document.querySelector('canvas').clientHeight")
    wait_px = _pixels(page, w._colors["wait"], 225, 20, width, h)
    assert wait_px > 100
    page.click(".tlxwb-opt-hide-waits input")
    page.wait_for_function("() => tlxwbViews[0].model.get('hide_waits') === true")
    assert _pixels(page, w._colors["wait"], 225, 20, width, h) < wait_px / 20   # the gutter's bars stay
    n_lanes = len(trace.lanes())
    page.click(".tlxwb-opt-fold-ctas input")
    rows = page.evaluate("() => tlxwbViews[0].el.tlxwb.rows()")
    assert len(rows) == n_lanes // 2 and rows[0]["head"] == "CTAs 0-1 folded"
    assert page.evaluate("() => tlxwbViews[0].model.get('fold_ctas')") is True
    page.click(".tlxwb-opt-lane-per-task input")
    rows = page.evaluate("() => tlxwbViews[0].el.tlxwb.rows()")
    assert [r["label"] for r in rows] == ["producer", "consumer ×2"]
    assert page.evaluate("() => document.querySelector('canvas').clientHeight") < h
    # every span of a merged lane is drawn on its row: an MMA of consumer[1] in CTA 1 is under the cursor there
    i = next(k for k, j in enumerate(w._order) if trace.spans[j].kind == "mma" and trace.spans[j].lane == (1, "consumer", 1))
    pos = page.evaluate(f"() => tlxwbViews[0].el.tlxwb.locate({i})")
    assert abs(pos["y"] - (rows[1]["y"] + 11)) < 1
    box = page.locator("canvas").bounding_box()
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    page.wait_for_selector(".tlxwb-tooltip", state="visible")
    assert "CTA" in page.inner_text(".tlxwb-tooltip")


def _overlapped_lane_trace():
    # an async MMA runs on while the lane waits: busy 80 % and waiting 70 % of the same 100 cycles
    spans = [Span(0, "consumer", 0, "mma", 0.0, 80.0, name="async_dot", line=3),
             Span(0, "consumer", 0, "wait", 30.0, 100.0, name="barrier_wait", line=4, barrier="full", slot=0, phase=0),
             Span(0, "producer", 0, "tma", 0.0, 100.0, name="async_descriptor_load", line=2)]
    return Trace(spans)


def test_busy_and_wait_bars_stay_clear_of_their_percentages_and_say_why_they_pass_100():
    from tlx_workbench.widgets.timeline import BAR_W, BAR_X
    tr = _overlapped_lane_trace()
    s = {x.task: x for x in tr.summary()}["consumer"]
    assert s.busy_share + s.wait_share > 1                                  # the case that overlapped
    svg = timeline_svg(tr)
    shares = re.findall(r"<g class='tlxwb-shares'>(.*?)</g>", svg)
    assert len(shares) == 2
    for g in shares:
        for x, w in re.findall(r"<rect x='([\d.]+)' y='[\d.]+' width='([\d.]+)'", g):
            assert float(x) >= BAR_X and float(x) + float(w) <= BAR_X + BAR_W + 1e-6     # inside the bar's box
        tx = float(re.search(r"<text x='([\d.]+)'", g).group(1))
        assert tx >= BAR_X + BAR_W                                            # the text starts after the bars
        assert "past 100 %" in g                                              # the tooltip says why
    assert "80%/70%" in svg


@pytest.mark.browser
def test_live_busy_and_wait_bars_leave_their_percentages_clear(show):
    page = show(TimelineWidget(_overlapped_lane_trace()))
    geo = page.evaluate("() => { const v = document.querySelector('.tlxwb-timeline').parentElement.tlxwb;"
                        " return {ys: v.laneY, h: v.laneHeight}; }")
    # the consumer's row: no bar colour right of the bar's box, where the percentages start
    inked = page.evaluate("""([ys, h]) => { const cv = document.querySelector('.tlxwb-timeline canvas');
        const g = cv.getContext('2d'), r = devicePixelRatio || 1;
        return ys.map(y => { const d = g.getImageData(161 * r, (y + 6) * r, 2 * r, 10 * r).data; let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i] > 200 && d[i + 1] < 120) n++; return n; }); }""",
                          [geo["ys"], geo["h"]])
    assert inked == [0] * len(geo["ys"]), inked
    box = page.locator(".tlxwb-timeline canvas").bounding_box()
    page.mouse.move(box["x"] + 135, box["y"] + geo["ys"][0] + geo["h"] / 2)
    tip = page.locator(".tlxwb-timeline .tlxwb-tooltip")
    tip.wait_for(state="visible")
    assert "why > 100 %" in tip.inner_text()
