"""The views in a real JupyterLab 4: a server on localhost, a notebook that shows each widget,
Debian's Chromium driven by Playwright, and assertions on what a person sees; a click on
the timeline reaches the kernel's on_select callback."""
import json
import os
import pathlib
import queue
import socket
import subprocess
import sys
import threading

import nbformat
import pytest

from tlx_workbench.widgets import TimelineWidget
from tlx_workbench.widgets.sample import sample_trace

pytestmark = [pytest.mark.browser, pytest.mark.slow]
HERE = pathlib.Path(__file__).parent
SEED = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("lab")
    cells = [
        "import sys; sys.path.insert(0, %r)\n" % str(HERE)
        + "from tlx_workbench.widgets import *\nfrom tlx_workbench.widgets.sample import sample_trace\n"
        + f"tr = sample_trace(iters=8, ctas=1, seed={SEED})\nclicked = []\n"
        + "tl = TimelineWidget(tr)\ntl.on_select(lambda span: clicked.append(span.line))\ntl",
        "BarrierPhaseWidget(tr)",
        "from widget_reports import fake_report\nMemoryMapWidget(fake_report())",
        "IRExplorer(fake_report())",
        "print('CLICKED', clicked, tl.selected_line)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(root / "views.ipynb"))
    # start the notebook's kernel without asking: Lab's "Select Kernel" dialog, popping up mid
    # run, otherwise blocks the cells after the first one now and then
    settings = root / ".cfg" / "lab" / "user-settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"autoStartDefaultKernel": True}))
    port, token = _free_port(), "tlxwb-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".cfg"), JUPYTER_RUNTIME_DIR=str(root / ".rt"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.workspaces_dir={root / '.ws'}", "--LabApp.news_url=", "--ServerApp.port_retries=0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr], daemon=True).start()
    log = []
    try:
        while True:                      # the server says when it listens; give up after 60 s of silence
            line = lines.get(timeout=60)
            log.append(line)
            if f"127.0.0.1:{port}/lab" in line:
                break
    except queue.Empty:
        proc.kill()
        pytest.fail("JupyterLab did not start:\n" + "".join(log[-30:]))
    yield f"http://127.0.0.1:{port}/lab/tree/views.ipynb?token={token}"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _wait_dismissing_dialogs(page, selector, total_ms=90_000, step_ms=5_000):
    """Wait for `selector`; accept a dialog Lab may raise meanwhile (kernel choice), which would
    otherwise stop the remaining cells from running."""
    for _ in range(total_ms // step_ms):
        try:
            page.wait_for_selector(selector, timeout=step_ms)
            return
        except Exception:
            accept = page.locator(".jp-Dialog .jp-mod-accept")
            if accept.count():
                accept.first.click()
                # the cells queued behind the dialog may have been dropped: run them all again
                page.click(".lm-MenuBar-itemLabel:text-is('Run')")
                page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
    page.wait_for_selector(selector, timeout=step_ms)


def test_notebook_shows_every_view_and_a_click_reaches_the_kernel(lab, page):
    page.set_default_timeout(90_000)
    page.goto(lab)
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    # the notebook's kernel is up when the server says its session's kernel is idle
    page.wait_for_function("""async () => { const r = await fetch('/api/sessions');
        const s = await r.json(); return s.length > 0 && s[0].kernel && s[0].kernel.execution_state === 'idle'; }""",
                           polling=500)
    # Run All; a Lab whose kernel connection is still settling can drop that request (and
    # may ask which kernel to start), so try again until the first cell shows it ran
    for attempt in range(3):
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.click(".jp-Dialog .jp-mod-accept", timeout=3_000)
        except Exception:
            pass
        try:
            page.wait_for_function("() => /\\[[0-9*]\\]/.test(document.querySelector('.jp-InputPrompt').textContent)",
                                   timeout=20_000)
            break
        except Exception:
            if attempt == 2:
                raise
    # every view renders live (the anywidget front end ran our ESM)
    for selector in (".tlxwb-timeline canvas", ".tlxwb-barriers canvas", ".tlxwb-memmap .tlxwb-alloc",
                     ".tlxwb-ir .tlxwb-ir-pane"):
        _wait_dismissing_dialogs(page, selector)
    assert page.locator(".tlxwb-ir .tlxwb-ir-pane").count() == 4
    # the SMEM buffers left to right in address order (c_smem reuses a_smem's space: same x)
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll('.tlxwb-memmap .tlxwb-alloc'))
        .map(g => [g.dataset.name, g.querySelector('rect').getBoundingClientRect().x])""")
    x = {name: bx for name, bx in boxes}
    assert x["a_smem"] == pytest.approx(x["c_smem"]) and x["a_smem"] < x["b_smem"] < x["full"] < x["empty"]
    assert "acc" in x                                                      # the TMEM bar (sm_100 report)
    # lanes drawn for each task: span pixels in every lane row
    tl = page.locator(".tlxwb-timeline").first
    tl.scroll_into_view_if_needed()
    geo = page.evaluate("() => { const v = document.querySelector('.tlxwb-timeline').parentElement.tlxwb;"
                        " return {ys: v.laneY, h: v.laneHeight}; }")
    tr = sample_trace(iters=8, ctas=1, seed=SEED)
    assert len(geo["ys"]) == len(tr.lanes()) == 3
    inked = page.evaluate("""([ys, h]) => { const cv = document.querySelector('.tlxwb-timeline canvas');
        const g = cv.getContext('2d'), r = devicePixelRatio || 1;
        return ys.map(y => { const d = g.getImageData(230 * r, (y + 5) * r, (cv.clientWidth - 240) * r, (h - 10) * r).data;
            let n = 0; for (let i = 0; i < d.length; i += 4) if (!(d[i] > 240 && d[i+1] > 240 && d[i+2] > 240)) n++; return n; }); }""",
                          [geo["ys"], geo["h"]])
    assert all(n > 200 for n in inked), inked
    # hover an MMA span: the tooltip names it and its source line; click it: the kernel hears
    w = TimelineWidget(tr)
    i, span = next((i, tr.spans[k]) for i, k in enumerate(w._order) if tr.spans[k].kind == "mma")
    pos = page.evaluate(f"() => document.querySelector('.tlxwb-timeline').parentElement.tlxwb.locate({i})")
    box = page.locator(".tlxwb-timeline canvas").bounding_box()
    page.mouse.move(box["x"] + pos["x"], box["y"] + pos["y"])
    tip = page.locator(".tlxwb-timeline .tlxwb-tooltip")
    tip.wait_for(state="visible")
    assert "async_dot" in tip.inner_text() and f"line {span.line}" in tip.inner_text()
    page.mouse.click(box["x"] + pos["x"], box["y"] + pos["y"])
    page.wait_for_function("() => document.querySelector('.tlxwb-timeline .tlxwb-status').textContent.includes('async_dot')")
    last = page.locator(".jp-Notebook .jp-Cell").nth(4)
    last.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    out = last.locator(".jp-OutputArea-output")
    out.wait_for()
    page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .jp-Cell')[4].innerText.includes('CLICKED [')")
    assert f"CLICKED [{span.line}] {span.line}" in out.inner_text()
