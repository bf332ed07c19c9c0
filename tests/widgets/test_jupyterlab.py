"""The views in a real JupyterLab 4: a server on localhost, a notebook that shows each widget,
Debian's Chromium driven by Playwright, and assertions on what a person sees; a click on
the timeline reaches the kernel's on_select callback."""
import json
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from deadlines import HANG_MS
from lab_pages import open_notebook, run_all, run_cell, wait_cells_done, wait_until, wait_views
from tlx_workbench.widgets import TimelineWidget
from tlx_workbench.widgets.sample import sample_trace

pytestmark = [pytest.mark.browser, pytest.mark.slow]
HERE = pathlib.Path(__file__).parent
SEED = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_lab(root, env, token, log):
    """A JupyterLab server on a free port, once it answers HTTP: (process, port), or (None, port) when it exited
    first (its stderr in ``log``). It prints its URL before its event loop binds the port, so that line is not
    the event: a request it answers is. ``HANG_MS`` guards a server that neither answers nor exits."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.workspaces_dir={root / '.ws'}", "--LabApp.news_url=", "--ServerApp.port_retries=0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    threading.Thread(target=lambda: [log.append(line) for line in proc.stderr], daemon=True).start()
    deadline = time.monotonic() + HANG_MS / 1000
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=30).close()
            return proc, port
        except urllib.error.HTTPError:   # an answer all the same
            return proc, port
        except OSError:
            pass
        try:
            proc.wait(timeout=0.25)      # paces the requests; returns only when the server has exited
            return None, port
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("JupyterLab did not answer:\n" + "".join(log[-40:]))


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
    # and render every cell's output when it comes: Lab 4 defers the cells below the fold to idle time by default,
    # which a machine whose cores are busy may not give it for minutes
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"autoStartDefaultKernel": True,
                                                                      "windowingMode": "none"}))
    token = "tlxwb-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".cfg"), JUPYTER_RUNTIME_DIR=str(root / ".rt"))
    log: list = []
    for _ in range(3):                   # a port another process took meanwhile: the server exits, try another
        proc, port = _start_lab(root, env, token, log)
        if proc:
            break
    else:
        pytest.fail("JupyterLab did not start:\n" + "".join(log[-40:]))
    yield f"http://127.0.0.1:{port}/lab/tree/views.ipynb?token={token}"
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_notebook_shows_every_view_and_a_click_reaches_the_kernel(lab, page):
    open_notebook(page, lab, "views.ipynb")                # its kernel up and idle in the page
    run_all(page, "views.ipynb")
    # the kernel has run every cell (however long a busy machine takes), then each view marks itself drawn
    wait_cells_done(page, "views.ipynb")
    wait_views(page, "views.ipynb", {0: ".tlxwb-timeline", 1: ".tlxwb-barriers", 2: ".tlxwb-memmap", 3: ".tlxwb-ir"})
    assert page.locator(".tlxwb-ir .tlxwb-ir-pane").count() == 4
    # the SMEM buffers left to right in address order (c_smem reuses a_smem's space: same x)
    page.locator(".tlxwb-memmap").first.scroll_into_view_if_needed()
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
    # the clicked span's line, highlighted in the view's source pane
    assert "tlx.async_dot" in page.locator(".tlxwb-timeline .tlxwb-source .tlxwb-src-sel").inner_text()
    # the kernel handles the click's message before the next cell it is sent
    out = run_cell(page, "views.ipynb", 4).locator(".jp-OutputArea-output")
    assert f"CLICKED [{span.line}] {span.line}" in out.inner_text()


def test_a_wait_that_cannot_end_says_what_it_waited_for_and_what_the_notebook_shows(lab, page):
    open_notebook(page, lab, "views.ipynb")
    # a state the page reports (a dialog, a widget that failed): the wait ends at once, with the notebook's state
    with pytest.raises(AssertionError) as stuck:
        wait_until(page, "views.ipynb", "() => 'the page says no'", None, "a sign", HANG_MS)
    text = str(stuck.value)
    assert "while waiting for a sign: the page says no" in text
    # the kernel as the page shows it (idle, or busy with Lab's own requests after it connected)
    assert re.search(r"^kernel: Python 3 \(ipykernel\) \((idle|busy)\)$", text, re.M), text
    assert "cell 1 " in text and "cell 4 " in text and "BarrierPhaseWidget" not in text    # prompts, not sources
    # an event that never comes: the deadline ends it, naming the event and the load it scaled with
    with pytest.raises(AssertionError) as late:
        wait_until(page, "views.ipynb", "() => false", None, "an event that never comes", 1)
    assert "for an event that never comes; the notebook shows:\nkernel: " in str(late.value)
    assert "(load x" in str(late.value)
    # an async predicate would be taken as true at once: refused
    with pytest.raises(ValueError, match="plain function"):
        wait_until(page, "views.ipynb", "async () => false", None, "anything", HANG_MS)
