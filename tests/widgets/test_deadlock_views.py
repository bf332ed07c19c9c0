"""A run that deadlocks draws where each task stopped: the timeline and barrier views (static and
live) put a "stuck here" marker on every blocked task, at its barrier and phase, with what is
missing, even when the deadlock comes at the kernel's first instruction."""
import importlib.util
import re

import pytest
import torch

import tlx_workbench as wb
from magic_cells import CROSSED, HANDSHAKE, line_of
from tlx_workbench.widgets import BarrierPhaseWidget, TimelineWidget, barrier_svg, timeline_svg
from tlx_workbench.widgets.timeline import stuck_waits


def _kernel(tmp_path, source: str, name: str):
    path = tmp_path / f"{name}_kernel.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"{name}_kernel_{tmp_path.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


@pytest.fixture(scope="module")
def crossed(tmp_path_factory):
    """Each task first waits for the other: nothing runs before the deadlock."""
    fn = _kernel(tmp_path_factory.mktemp("crossed"), CROSSED, "crossed")
    return wb.simulate(fn, torch.zeros(4), grid=(1,), on_deadlock="return")


@pytest.fixture(scope="module")
def handshake(tmp_path_factory):
    """Two arrivals expected, one comes: the producer finishes, the consumer is stuck."""
    fn = _kernel(tmp_path_factory.mktemp("handshake"), HANDSHAKE, "handshake")
    return wb.simulate(fn, torch.zeros(4), grid=(1,), ARRIVE_COUNT=2, on_deadlock="return")


def test_a_deadlock_at_once_marks_every_task_where_it_stopped(crossed):
    assert crossed.deadlock is not None and not crossed.trace.spans       # nothing ran
    stuck = {s["lane"]: s for s in stuck_waits(crossed.trace)}
    assert set(stuck) == {(0, "default", 0), (0, "task1", 0)}
    assert (stuck[(0, "default", 0)]["barrier"], stuck[(0, "default", 0)]["phase"]) == ("pong", 0)
    assert stuck[(0, "default", 0)]["line"] == line_of(CROSSED, "wait(tlx.local_view(pong", magic_line=False)
    assert stuck[(0, "task1", 0)]["barrier"] == "ping" and stuck[(0, "task1", 0)]["missing"] == "1 arrival(s)"
    # the report says the same as the trace
    assert {s["lane"]: (s["barrier"], s["slot"], s["phase"], s["line"]) for s in stuck_waits(crossed.trace,
                                                                                          crossed.deadlock)} == \
        {k: (s["barrier"], s["slot"], s["phase"], s["line"]) for k, s in stuck.items()}
    for svg in (timeline_svg(crossed.trace), barrier_svg(crossed.trace, deadlock=crossed.deadlock)):
        marks = re.findall(r"<g class='tlxwb-stuck'[^>]*><title>([^<]*)</title>", svg)
        assert len(marks) == 2, svg
        assert any("default[0]" in m and "pong[0] parity 0" in m for m in marks)
        assert any("task1[0]" in m and "ping[0] parity 0" in m for m in marks)


def test_only_the_blocked_task_is_marked_and_the_report_names_the_missing_arrival(handshake):
    rep = handshake.deadlock
    assert rep is not None
    stuck = stuck_waits(handshake.trace, rep)
    assert [s["lane"] for s in stuck] == [(0, "default", 0)]
    assert stuck[0]["missing"] == "1 arrival(s)" and stuck[0]["barrier"] == "bars"
    w = TimelineWidget(handshake.trace, deadlock=rep)
    assert [s["lane"] for s in w._stuck] == [handshake.trace.lanes().index((0, "default", 0))]
    html = w._repr_mimebundle_()[0]["text/html"]
    assert html.count("class='tlxwb-stuck'") == 1 and "missing 1 arrival(s)" in html
    b = BarrierPhaseWidget(handshake.trace, deadlock=rep)
    assert len(b._stuck) == 1 and "default[0]" in b._stuck[0][3]


def test_a_run_that_ends_has_no_stuck_marker(tmp_path):
    fn = _kernel(tmp_path, HANDSHAKE, "handshake")
    sim = wb.simulate(fn, torch.zeros(4), grid=(1,), ARRIVE_COUNT=1)
    assert sim.deadlock is None and stuck_waits(sim.trace) == []
    assert "tlxwb-stuck" not in timeline_svg(sim.trace) + barrier_svg(sim.trace)


@pytest.mark.browser
def test_in_chromium_each_blocked_task_has_its_marker_drawn(show, crossed):
    page = show(TimelineWidget(crossed.trace, deadlock=crossed.deadlock),
                BarrierPhaseWidget(crossed.trace, deadlock=crossed.deadlock))
    for k, view in enumerate(("timeline", "barriers")):
        root = page.locator(".tlxwb-view").nth(k)
        texts = root.locator(".tlxwb-stuck").all_inner_texts()
        assert len(texts) == 2 and any("default[0]" in t and "pong[0] parity 0" in t for t in texts), texts
        marks = page.evaluate(f"() => tlxwbViews[{k}].el.tlxwb.stuck()")
        assert len(marks) == 2
        # the marker is drawn on the canvas: red outline / pink fill pixels where each one sits
        for m in marks:
            n = page.evaluate("""([k, x, y]) => {
                const cv = document.querySelectorAll('canvas')[k], g = cv.getContext('2d'), r = devicePixelRatio || 1;
                const d = g.getImageData((x + 2) * r, (y - 4) * r, 60 * r, 8 * r).data;
                let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 200 && d[i + 2] < 200) n++;
                return n; }""", [k, m["x"], m["y"]])
            assert n > 20, (view, m, n)


def test_a_task_that_stops_last_still_gets_a_bar_to_see():
    # a producer works until t=1000, then waits on a slot no one frees: its wait is the trace's last event
    from tlx_workbench.trace import BarrierEvent, Span, Trace
    tr = Trace(meta={"kernel": "late"})
    for k in range(10):
        tr.add_span(Span(cta=0, task="producer", replica=0, kind="tma", start=100 * k, end=100 * k + 60, name="load"))
        tr.add_span(Span(cta=0, task="consumer", replica=0, kind="compute", start=100 * k + 40, end=100 * k + 95))
    tr.add_barrier_event(BarrierEvent(cta=0, time=0, barrier="empty", slot=0, kind="init", task="producer",
                                      replica=0, count=1, pending_arrivals=1))
    tr.add_barrier_event(BarrierEvent(cta=0, time=1000, barrier="empty", slot=0, kind="wait_begin", task="producer",
                                      replica=0, phase=1, line=7, pending_arrivals=1))
    (st,) = stuck_waits(tr)
    assert (st["lane"], st["since"], st["phase"]) == ((0, "producer", 0), 1000.0, 1)
    for svg in (timeline_svg(tr), barrier_svg(tr)):
        bar = re.search(r"<g class='tlxwb-stuck'[^>]*><title>[^<]*</title><rect x='([\d.]+)' y='[\d.]+' "
                        r"width='([\d.]+)'", svg)
        assert float(bar.group(2)) > 30, bar.group(0)      # a bar one can see, not a sliver at the right edge


def test_a_view_wanted_as_html_makes_no_widget(handshake):
    # a widget made and never shown still leaves its state (ESM, CSS, data) in the saved notebook:
    # the %%tlx cell's HTML draws the views it does not show live without making one
    from ipywidgets.widgets.widget import _instances
    from tlx_workbench.magics.render import view_html
    from tlx_workbench.widgets import MemoryMapWidget, untrusted_safe
    from widget_reports import fake_report
    opts = dict(deadlock=handshake.deadlock)
    for cls in (TimelineWidget, BarrierPhaseWidget):
        before = set(_instances)
        html = view_html(cls.__name__, handshake.trace, cls.__name__, **opts)
        assert set(_instances) == before, cls
        w = cls(handshake.trace, **opts)
        # the bundle's HTML is the same drawing, with its plain-HTML copy for an untrusted notebook
        assert html == w.static_html() and untrusted_safe(html) == w._repr_mimebundle_()[0]["text/html"]
        assert "stuck" in html                             # the deadlock is drawn
        w.close()
    rep = fake_report("sm_90")
    before = set(_instances)
    html = view_html("MemoryMapWidget", rep, "memory map")
    assert set(_instances) == before and html == MemoryMapWidget(rep).static_html()
