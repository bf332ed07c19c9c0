"""%%tlx knobs and deadlocks as a person meets them in a real JupyterLab 4: the lab server and
browser of test_jupyterlab.py. Moving the BM knob of a TMA kernel whose host code builds the input, the
descriptor and the grid from BM re-runs the cell correctly, and the comparison shows both runs side by
side; a kernel that deadlocks at its first instruction draws a stuck-here marker for every task, in the
error's wait-for graph, the timeline and the barrier view, each view drawn once."""
import re

import pytest

from magic_cells import CROSSED, TMA_REF, TMA_RELU
from test_jupyterlab import lab  # noqa: F401 - the fixture, reused
from deadlines import HANG_MS
from lab_pages import (attach_every_cell, open_notebook, put_notebook, run_all, wait_cells_done, wait_idle,
                       wait_until, wait_views)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext tlx_magic\nimport torch\nz = torch.zeros(4)",
    f'%%tlx --sim --check {TMA_REF} --knobs "BM=32,16" --timeline -o r\n' + TMA_RELU,
    "%%tlx --sim --no-raise --timeline --barriers\n" + CROSSED + "crossed[(1,)](z)\n",
]
KNOBS, DEAD = 1, 2


def test_a_knob_reruns_a_tma_cell_and_a_deadlock_marks_every_task(lab, page):  # noqa: F811
    attach_every_cell(lab)
    url = put_notebook(lab, "knobs.ipynb", CELLS)
    cells = open_notebook(page, url, "knobs.ipynb").locator(".jp-Cell")
    run_all(page, "knobs.ipynb")
    knob_cell, dead = cells.nth(KNOBS), cells.nth(DEAD)
    wait_cells_done(page, "knobs.ipynb")
    wait_views(page, "knobs.ipynb", {KNOBS: ".tlxwb-timeline", DEAD: [".tlxwb-timeline", ".tlxwb-barriers"]})

    # --- the deadlock at once: a stuck-here marker per task, in each of the three pictures
    assert dead.locator(".tlxwb-error").count() == 1
    graph = dead.locator("svg.tlxwb-waitfor .tlxwb-stuck")
    assert sorted(graph.evaluate_all("gs => gs.map(g => g.dataset.lane)")) == ["default[0]", "task1[0]"]
    assert dead.locator(".tlxwb-timeline").count() == 1 and dead.locator(".tlxwb-barriers").count() == 1
    assert dead.locator("svg.tlxwb-timeline-svg, svg.tlxwb-barrier-svg").count() == 0   # the widgets alone
    for view in (".tlxwb-timeline", ".tlxwb-barriers"):
        texts = dead.locator(f"{view} .tlxwb-stuck").all_inner_texts()
        assert len(texts) == 2, (view, texts)
        assert any("default[0]" in t and "pong[0] parity 0" in t for t in texts), texts
        assert any("task1[0]" in t and "ping[0] parity 0" in t for t in texts), texts
    # and drawn on the timeline's canvas: hatched red where each task stopped, though nothing ran
    reds = page.evaluate(f"""() => {{
        const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{DEAD}].querySelector('.tlxwb-timeline');
        const v = c.parentElement.tlxwb, cv = c.querySelector('canvas'), g = cv.getContext('2d'), r = devicePixelRatio || 1;
        return v.stuck().map(m => {{ const d = g.getImageData((m.x + 2) * r, (m.y - 4) * r, 80 * r, 8 * r).data;
            let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 200 && d[i + 2] < 200) n++;
            return n; }}); }}""")
    assert len(reds) == 2 and all(n > 20 for n in reds), reds

    # --- the knob: BM 32 -> 16 rebuilds x, the descriptor and the grid, and the run is still right
    assert knob_cell.locator(".tlxwb-error").count() == 0
    select = knob_cell.locator(".widget-dropdown select")
    assert select.count() == 1
    select.select_option(label="16")
    compare = knob_cell.locator(".tlxwb-knob-compare")
    # the kernel re-runs the cell's host code and the launch: the comparison appears when it is done
    wait_until(page, "knobs.ipynb", f"""() => {{ const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[{KNOBS}];
        const k = c.querySelector('.tlxwb-knob-compare'); return k && k.innerText.includes('2 runs compared'); }}""",
               None, "the knob's re-run, compared with the first run", HANG_MS)
    # the kernel idle again: every output of the re-run is in the page; then its timeline marks itself drawn
    wait_idle(page, "knobs.ipynb")
    wait_views(page, "knobs.ipynb", {KNOBS: ".widget-output .tlxwb-timeline"})
    text = compare.inner_text()
    rows = compare.locator("table.tlxwb-knob-runs tr").all_inner_texts()[1:]
    assert [re.split(r"\s+", r.strip())[:2] for r in rows] == [["1", "32"], ["2", "16"]], rows
    assert all(r.rstrip().endswith("ok") for r in rows), rows          # both runs checked against torch
    assert "BM 32 -> 16" in text
    # both runs on one time axis, one timeline each
    assert compare.locator("svg.tlxwb-timeline-svg").count() == 2
    assert compare.locator(".tlxwb-knob-run").count() == 2              # one dot per run on the cycles plot
    # the re-run's own output: its timeline once (the live widget), no error
    out = knob_cell.locator(".widget-output")
    assert out.locator(".tlxwb-timeline").count() == 1 and out.locator(".tlxwb-error").count() == 0
    assert "BM=16" in out.inner_text()
