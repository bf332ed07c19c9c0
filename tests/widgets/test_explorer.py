"""ExplorerWidget and the exploration's static views, on a real small sweep of gemm_ws
(static + simulated stages on the CPU: one config dropped at the static stage for SMEM, one
at the simulated stage for a deadlock). The measured path runs on rows this file writes
itself, marked as such: no GPU here."""
import base64
import io
import json
import re
import threading
import types

import pytest

import tlx_workbench.explore as tx
from tlx_workbench.kernels import gemm_ws
from tlx_workbench.target import gpu_model
from tlx_workbench.widgets import ExplorerWidget, TimelineWidget
from tlx_workbench.widgets.explorer import (exploration_html, heatmap_cells, heatmap_png, pareto_front, pareto_png,
                                            roofline_png, view_entries)

SHAPE = (4096, 4096, 4096)
PNG = b"\x89PNG\r\n\x1a\n"


def small_space():
    """Two good configs, one over the H200's SMEM (STAGES=5) and one that deadlocks (STAGES=1)."""
    c0, c1, c2 = (gemm_ws.CONFIGS[i] for i in range(3))
    return tx.Space([c0, c2, dict(c0, STAGES=5), dict(c1, STAGES=1)])


def small_exploration(path):
    """The real sweep the explorer tests (and the JupyterLab test) look at; rows in ``path``."""
    return tx.explore("gemm_ws", small_space(), shapes=[SHAPE], stages=("static", "simulated"), store=str(path),
                      backend="serial", progress=False)


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    return small_exploration(tmp_path_factory.mktemp("explore") / "store.sqlite")


def _copy_store(ex, path) -> tx.Store:
    st = tx.Store(path)
    for r in ex.store.rows():
        st.put(r)
    return st


@pytest.fixture
def measured(ex, tmp_path):
    """NOT A GPU RUN: a copy of the sweep's store plus measured rows this fixture makes up
    (µs = 0.9 x the prediction, TFLOP/s from the shape), to exercise the views' measured path
    until the H200's rows arrive."""
    st = _copy_store(ex, tmp_path / "measured.sqlite")
    made = {}
    for e in ex.entries():
        if e["status"] != "simulated":
            continue
        us = 0.9 * e["predicted_us"]
        tflops = 2.0 * SHAPE[0] * SHAPE[1] * SHAPE[2] / (us * 1e-6) / 1e12
        st.put(tx.Row(key=f"test-fixture-measured-{e['config_id']}", kernel="gemm_ws", config=e["config"],
                      shape=list(SHAPE), stage="measured", status="ok", metrics={"us": us, "tflops": tflops},
                      device="made up by tests/widgets/test_explorer.py", source_hash=ex.sweep.problem.source_hash))
        made[e["config_id"]] = (us, tflops)
    return tx.Exploration.load(st.path, "gemm_ws"), made


def _send(w, content):
    """A message from the view's JavaScript (model.send(content)), as the kernel's comm hands it over."""
    w._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def _rows(html_text):
    return re.findall(r"<tr class='(tlxwb-ex-row[^']*)' data-config-id='([0-9a-f]+)' data-status='(\w+)'", html_text)


# -- the sweep itself (what the views are drawn from) ------------------------------------------------
def test_the_sweep_drops_one_config_per_cpu_stage(ex):
    dropped = {e["dropped_at"]: e for e in ex.dropped()}
    assert set(dropped) == {"static", "simulated"}
    assert "shared memory" in dropped["static"]["reason"]
    assert "deadlock" in dropped["simulated"]["reason"]
    assert sum(e["status"] == "simulated" for e in ex.entries()) == 2


# -- the static fallback -----------------------------------------------------------------------
def test_static_html_has_a_row_per_config_and_the_dropped_ones_with_their_reason(ex):
    h = exploration_html(ex)
    rows = _rows(h)
    assert sorted(cid for _, cid, _ in rows) == sorted(e["config_id"] for e in ex.entries())
    dropped = {e["config_id"]: e for e in ex.dropped()}
    assert {cid for cls, cid, _ in rows if "tlxwb-ex-dropped" in cls} == set(dropped)
    import html as _html
    for cid, e in dropped.items():
        row = re.search(rf"<tr [^>]*data-config-id='{cid}'.*?</tr>", h, re.S).group(0)
        assert _html.escape(e["reason"]) in row and f"line {e['line']}" in row
    # the fastest config comes first, the dropped last
    assert rows[0][1] == tx.config_id(ex.best(SHAPE, by="predicted_us"))
    assert all("tlxwb-ex-dropped" in cls for cls, _, _ in rows[-2:])
    assert "simulated µs (predicted)" in h and "<script" not in h
    pngs = re.findall(r"src='data:image/png;base64,([^']+)'", h)
    assert len(pngs) == 3 and all(base64.b64decode(p).startswith(PNG) for p in pngs)


def test_the_exploration_repr_is_the_registered_view(ex):
    # Exploration._repr_html_ finds the view through tlx_workbench.views, by class name
    assert _rows(ex._repr_html_()) == _rows(exploration_html(ex))


@pytest.mark.parametrize("resource", ["smem_bytes", "registers"])
def test_the_pareto_front_is_the_explorations(ex, resource):
    ours = [e["config_id"] for e in pareto_front(ex.entries(SHAPE), resource)]
    assert ours == [e["config_id"] for e in ex.pareto(resource, SHAPE)]
    assert ours, "the two good configs have a front"


def test_the_pareto_front_over_a_knob(ex):
    es = [e for e in ex.entries(SHAPE) if e["status"] == "simulated"]
    front = pareto_front(es, "STAGES")
    best = min(es, key=lambda e: e["predicted_us"])
    assert best in front and front == sorted(front, key=lambda e: e["config"]["STAGES"])
    times = [e["predicted_us"] for e in front]
    assert times == sorted(times, reverse=True)          # each step right is faster


def _png_size(data):
    import matplotlib.image
    assert data.startswith(PNG)
    return matplotlib.image.imread(io.BytesIO(data), format="png").shape


def test_pngs_are_valid(ex):
    for data in (pareto_png(ex, "smem_bytes"), pareto_png(ex, "STAGES", SHAPE), heatmap_png(ex, "STAGES", "DOT_WAIT0"),
                 heatmap_png(ex), roofline_png(ex)):
        h, w, _ = _png_size(data)
        assert h > 100 and w > 100


def test_heatmap_cells_hold_the_best_of_each_cell(ex):
    es = view_entries(ex, SHAPE)
    xs, ys, cells = heatmap_cells(es, "STAGES", "DOT_WAIT0")
    assert xs == sorted({e["config"]["STAGES"] for e in es})
    for j, y in enumerate(ys):
        for i, x in enumerate(xs):
            alive = [e for e in es if e["config"]["STAGES"] == x and e["config"]["DOT_WAIT0"] == y
                     and e["status"] == "simulated"]
            got = cells[j][i]
            assert (got["config_id"] if got else None) == (min(alive, key=lambda e: e["predicted_us"])["config_id"]
                                                           if alive else None)


# -- the live widget ------------------------------------------------------------------------------
def test_widget_state_holds_the_entries(ex):
    w = ExplorerWidget(ex)
    assert sorted(e["config_id"] for e in w._entries) == sorted(e["config_id"] for e in ex.entries())
    json.dumps(w._entries)                                  # what goes over the wire
    flops = 2.0 * SHAPE[0] * SHAPE[1] * SHAPE[2]
    for e in w._entries:
        if e["status"] == "simulated":                      # no GPU: simulated time, TFLOP/s from it
            assert e["time_by"] == "predicted_us" and e["time"] == e["predicted_us"]
            assert e["tflops_eff"] == pytest.approx(flops / (e["time"] * 1e-6) / 1e12)
            assert e["intensity"] == pytest.approx(flops / (2.0 * 3 * SHAPE[0] * SHAPE[1]))
        else:
            assert e["status"] == "dropped" and e["reason"] and e["time"] is None
    h200 = gpu_model("H200")
    assert w._ceilings == {"gpu": "H200", "peak_tflops": h200.dense_fp16_tflops, "dram_gbps": h200.dram_gbps}
    assert w._shapes == [list(SHAPE)] and {"smem_bytes", "registers", "ctas_per_sm", "STAGES"} <= set(w._resources)
    assert {w.heat_x, w.heat_y} <= set(w._knobs) and w.heat_x != w.heat_y
    assert not w.running and w._thread is None              # the sweep is over: nothing to follow
    assert _rows(w._repr_mimebundle_()[0]["text/html"])     # the static view rides in the bundle
    # the view's own controls still reach Python (the widget keeps ipywidgets' message handler)
    w._handle_msg({"content": {"data": {"method": "update", "state": {"resource": "STAGES"}}}, "buffers": []})
    assert w.resource == "STAGES"


def test_a_click_opens_the_report_the_timeline_and_the_diff(ex):
    w = ExplorerWidget(ex)
    opened = []
    w.on_open(lambda entry, parts: opened.append((entry["config_id"], sorted(parts))))
    other = next(e for e in ex.entries() if e["status"] == "simulated"
                 and e["config"] != ex.best(SHAPE, by="predicted_us"))
    _send(w, {"type": "select", "config_id": other["config_id"], "shape": list(SHAPE)})
    assert w.selected == other["config_id"]
    assert ex.report(other["config"], SHAPE)._repr_html_() in w.detail
    assert "tlxwb-timeline-svg" in w.detail and "tlxwb-ex-diff" in w.detail
    assert isinstance(w.timeline, TimelineWidget) and w.timeline.trace.spans
    knobs = w.opened["diff"]["knobs"]
    assert knobs and all(a == other["config"][k] for k, (a, _) in knobs.items())
    assert opened == [(other["config_id"], ["diff", "report", "simulation"])]


def test_a_click_on_a_dropped_config_says_why_in_the_panel(ex):
    w = ExplorerWidget(ex)
    smem = next(e for e in ex.dropped() if e["dropped_at"] == "static")
    _send(w, {"type": "select", "config_id": smem["config_id"]})
    assert "dropped at static" in w.detail and "does not compile" in w.detail and "shared memory" in w.detail
    assert "report" not in w.opened
    dead = next(e for e in ex.dropped() if e["dropped_at"] == "simulated")
    _send(w, {"type": "select", "config_id": dead["config_id"]})
    assert "deadlock" in w.detail and w.opened["simulation"].deadlock is not None


@pytest.mark.parametrize("msg", [{"type": "select", "config_id": "0123456789ab"}, {"type": "select"},
                                 {"type": "select", "config_id": 7}, {"type": "zoom"}, ["select"], None])
def test_bad_input_gives_a_message_not_an_exception(ex, msg):
    w = ExplorerWidget(ex)
    _send(w, msg)
    assert "tlxwb-ex-error" in w.detail
    if isinstance(msg, dict) and msg.get("config_id") == "0123456789ab":
        assert "no config '0123456789ab'" in w.detail.replace("&#x27;", "'")


def test_a_failing_report_is_a_message_in_the_panel(ex, monkeypatch):
    w = ExplorerWidget(ex)

    def broken(*a, **k):
        raise RuntimeError("the compiler fell over")
    monkeypatch.setattr(ex, "report", broken)
    cid = tx.config_id(ex.best(SHAPE, by="predicted_us"))
    w.open_config(cid)
    assert "the compiler fell over" in w.detail and "tlxwb-timeline-svg" in w.detail


# -- measured rows (made up by a fixture: no GPU here) ------------------------------------------------
def test_measured_time_takes_over_where_there_is_one(measured):
    mex, made = measured
    es = view_entries(mex, SHAPE)
    for e in es:
        if e["config_id"] in made:
            us, tflops = made[e["config_id"]]
            assert e["time_by"] == "us" and e["time"] == pytest.approx(us) and e["tflops_eff"] == pytest.approx(tflops)
    assert [e["config_id"] for e in pareto_front(mex.entries(SHAPE), "smem_bytes")] == \
        [e["config_id"] for e in mex.pareto("smem_bytes", SHAPE)]
    h = exploration_html(mex)
    assert "time = measured µs" in h and len(_rows(h)) == len(es)
    assert _png_size(pareto_png(mex)) and _png_size(heatmap_png(mex, "STAGES", "DOT_WAIT0"))


# -- following a sweep that is still running ---------------------------------------------------------
def test_the_widget_follows_a_running_sweep_and_stops_with_it(ex, tmp_path):
    st = _copy_store(ex, tmp_path / "live.sqlite")
    sweep = types.SimpleNamespace(done=threading.Event(), error=None, problem=ex.sweep.problem)
    live = tx.Exploration(st, "gemm_ws", None, [SHAPE], sweep=sweep)
    w = ExplorerWidget(live, interval=0.05)
    assert w.running and w._thread.is_alive()
    new = dict(gemm_ws.CONFIGS[0], GROUP_M=4)
    st.put(tx.Row(key="test-live-row", kernel="gemm_ws", config=new, shape=list(SHAPE), stage="static", status="ok",
                  metrics={"smem_bytes": 1024, "registers": 128}, source_hash=ex.sweep.problem.source_hash))
    for _ in range(200):                                   # each wait is one refresh of the thread
        w.refreshed.clear()
        assert w.refreshed.wait(10)
        if tx.config_id(new) in {e["config_id"] for e in w._entries}:
            break
    assert next(e for e in w._entries if e["config_id"] == tx.config_id(new))["status"] == "static"
    sweep.done.set()
    w._thread.join(10)
    assert not w._thread.is_alive() and not w.running


# -- the ESM in a page (the same module JupyterLab loads) ---------------------------------------------
@pytest.mark.browser
def test_the_view_draws_every_config_and_a_click_sends_it(ex, show):
    w = ExplorerWidget(ex)
    page = show(w)
    alive = [e for e in ex.entries() if e["status"] == "simulated"]
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-pt").count() == len(alive)
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-drop").count() == len(ex.dropped())
    assert page.locator(".tlxwb-ex-roofline .tlxwb-ex-rpt").count() == len(alive)
    front = page.evaluate("() => Array.from(document.querySelectorAll('.tlxwb-ex-scatter .tlxwb-ex-onfront'))"
                          ".map(c => c.dataset.configId)")
    assert sorted(front) == sorted(e["config_id"] for e in ex.pareto("smem_bytes", SHAPE))
    assert page.locator(".tlxwb-ex-table tr.tlxwb-ex-row").count() == len(ex.entries())
    # the dropped configs: a cross each, their reason on hover
    dead = next(e for e in ex.dropped() if e["dropped_at"] == "simulated")
    page.locator(f".tlxwb-ex-scatter .tlxwb-ex-drop[data-config-id='{dead['config_id']}']").hover()
    tip = page.locator(".tlxwb-explorer .tlxwb-tooltip")
    tip.wait_for(state="visible")
    assert "deadlock" in tip.inner_text()
    # sorting by a column, then a click on a row asks Python for that config
    page.locator(".tlxwb-ex-table th[data-key='registers']").click()
    assert "▲" in page.locator(".tlxwb-ex-table th[data-key='registers']").inner_text()
    best = tx.config_id(ex.best(SHAPE, by="predicted_us"))
    page.locator(f".tlxwb-ex-table tr[data-config-id='{best}']").click()
    sent = page.evaluate("() => window.tlxwbViews[0].model.log.sent")
    assert sent == [{"type": "select", "config_id": best, "shape": list(SHAPE)}]
    # what Python answers shows in the panel
    page.evaluate("() => window.tlxwbViews[0].model.set('detail', '<p class=\"answer\">the report</p>')")
    assert page.locator(".tlxwb-ex-detail .answer").inner_text() == "the report"


@pytest.mark.browser
def test_the_static_sweep_table_is_no_wider_than_the_page_it_is_in(ex, page, tmp_path):
    from tlx_workbench.widgets import exploration_html
    page.set_viewport_size({"width": 700, "height": 800})
    path = tmp_path / "sweep.html"
    # inside a column as wide as a notebook's output, and with the <style> gone, as an untrusted notebook has it
    fragment = re.sub(r"<style>.*?</style>", "", exploration_html(ex), flags=re.S)
    path.write_text(f"<!doctype html><meta charset='utf-8'><body style='margin:0'><div id='out' "
                    f"style='width:600px'>{fragment}</div>")
    page.goto(path.as_uri())
    right = page.evaluate("() => [...document.querySelectorAll('.tlxwb-ex-tablewrap')].map(t => "
                          "t.getBoundingClientRect().right)")
    assert right and max(right) <= 600 + 1
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 700
