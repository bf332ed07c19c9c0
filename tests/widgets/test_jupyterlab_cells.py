"""%%tlx cells as a person sees them in a real JupyterLab 4: the lab server and browser of
test_jupyterlab.py, one notebook built here and run with Run All. A --timeline cell draws one timeline
(the live widget, no static copy beside it); a deadlock is one error box with one wait-for graph, its
lines kept apart; a cell with a syntax error shows the line, numbered as the editor numbers it, and
fails, so Run All stops there: the cell after it never runs."""
import re

import pytest

from magic_cells import HANDSHAKE, TMA_REF, TMA_RELU
from test_jupyterlab import lab  # noqa: F401 - the fixture, reused
from lab_pages import attach_every_cell, open_notebook, put_notebook, run_all, wait_cells_done, wait_views

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "%load_ext tlx_magic\nimport torch\nz = torch.zeros(4)",
    f"%%tlx --sim --timeline {TMA_REF}\n" + TMA_RELU,
    "%%tlx --sim --no-raise\n" + HANDSHAKE + "handshake[(1,)](z, ARRIVE_COUNT=2)\n",
    "%%tlx --sim\nkeep = 1\ndef broken(:\n    pass\n",
    "print('ran after', 6 * 7)",
]
GOOD, DEAD, BROKEN, AFTER = 1, 2, 3, 4


def test_tlx_cells_in_jupyterlab_fail_like_cells_and_draw_each_thing_once(lab, page):  # noqa: F811
    attach_every_cell(lab)
    url = put_notebook(lab, "cells.ipynb", CELLS)
    cells = open_notebook(page, url, "cells.ipynb").locator(".jp-Cell")
    run_all(page, "cells.ipynb")
    # Run All ran until the failing cell: the kernel is done with everything it was given
    wait_cells_done(page, "cells.ipynb")
    wait_views(page, "cells.ipynb", {GOOD: ".tlxwb-timeline"})

    # Run All stopped at the failing cell: the next one has no execution count and no output
    broken = cells.nth(BROKEN)
    assert "CellFailed" in broken.locator(".jp-OutputArea").inner_text()
    after = cells.nth(AFTER)
    assert re.search(r"\[\s*\]", after.locator(".jp-InputPrompt").inner_text())
    assert after.locator(".jp-OutputArea-output").count() == 0
    assert "ran after 42" not in page.locator(".jp-Notebook").inner_text()

    # the syntax error: one box naming the line as the editor numbers it (the %%tlx line is line 1), the line shown
    n = re.search(r"\[(\d+)\]", broken.locator(".jp-InputPrompt").inner_text()).group(1)
    box = broken.locator(".tlxwb-error")
    assert box.count() == 1
    assert f"cell [{n}], line 3" in box.inner_text()
    assert "def broken(:" in box.locator(".tlxwb-error-line").inner_text()
    assert "&lt;" not in box.inner_text() and "ipykernel" not in box.inner_text()

    # the deadlock: one box, one wait-for graph, and its facts on lines of their own (not one wall of text)
    dead = cells.nth(DEAD)
    assert dead.locator(".tlxwb-error").count() == 1
    assert dead.locator("svg.tlxwb-waitfor").count() == 1
    detail = dead.locator(".tlxwb-error-detail").inner_text()
    assert detail.count("\n") >= 3 and "expected arriver task1[0]" in detail
    assert dead.locator(".tlxwb-stuck").count() >= 1          # a stuck-here marker on the graph
    assert "CellFailed" not in dead.inner_text()               # --no-raise: shown, and Run All went on

    # --timeline: one timeline, the live widget; no static drawing beside it
    good = cells.nth(GOOD)
    assert good.locator(".tlxwb-timeline").count() == 1
    assert good.locator(".tlxwb-timeline canvas").count() >= 1
    assert good.locator("svg.tlxwb-timeline-svg").count() == 0
    # the widget's bundle carries the picture as image/svg+xml too (for GitHub); JupyterLab draws the widget
    assert good.locator(".jp-RenderedSVG, .jp-RenderedImage").count() == 0
    assert good.locator(".tlxwb-error").count() == 0
