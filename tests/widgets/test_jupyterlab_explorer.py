"""ExplorerWidget in a real JupyterLab: the lab server and browser of test_jupyterlab.py, a
notebook that loads a store file this test made (a real static+simulated sweep of gemm_ws)
and shows the widget; every config that was not dropped is a point, and a click on one
brings its compile report from the kernel into the widget's panel."""

import pytest

import tlx_workbench.explore as tx

from test_explorer import SHAPE, small_exploration
from deadlines import HANG_MS
from lab_pages import open_notebook, put_notebook, run_all, wait_cells_done, wait_views
from test_jupyterlab import lab  # noqa: F401 - the fixture, reused

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return small_exploration(tmp_path_factory.mktemp("explore-lab") / "store.sqlite")


def test_explorer_in_jupyterlab_draws_every_config_and_a_click_opens_its_report(lab, page, sweep):  # noqa: F811
    url = put_notebook(lab, "explorer.ipynb", [
        "import tlx_workbench.explore as tx\nfrom tlx_workbench.widgets import ExplorerWidget\n"
        f"ex = tx.Exploration.load({sweep.store.path!r}, 'gemm_ws')\nw = ExplorerWidget(ex)\nw",
    ])
    open_notebook(page, url, "explorer.ipynb")
    run_all(page, "explorer.ipynb")
    wait_cells_done(page, "explorer.ipynb")
    wait_views(page, "explorer.ipynb", {0: ".tlxwb-explorer"})
    alive = [e for e in sweep.entries() if e["status"] not in ("dropped", "hung", "crashed", "error")]
    dropped = sweep.dropped()
    assert len(alive) == 2 and len(dropped) == 2
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-pt").count() == len(alive)
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-drop").count() == len(dropped)
    assert page.locator(".tlxwb-ex-table tr.tlxwb-ex-row").count() == len(alive) + len(dropped)
    # the sweep table is no wider than the notebook: it scrolls inside its box
    right, edge = page.evaluate("""() => { const t = document.querySelector('.tlxwb-ex-tablebox');
        return [t.getBoundingClientRect().right, t.closest('.jp-OutputArea-output').getBoundingClientRect().right]; }""")
    assert right <= edge + 1, (right, edge)
    # a click on a point: the kernel compiles that config and its report fills the widget's panel
    best = tx.config_id(sweep.best(SHAPE, by="predicted_us"))
    point = page.locator(f".tlxwb-ex-scatter .tlxwb-ex-pt[data-config-id='{best}']")
    point.scroll_into_view_if_needed()
    point.click()
    report = page.locator(".tlxwb-ex-detail .tlxwb-ex-part-report")
    report.wait_for(timeout=HANG_MS)            # the kernel compiles it: as long as that takes
    assert "gemm_ws_coop_kernel" in report.inner_text()
    assert page.locator(".tlxwb-ex-detail .tlxwb-ex-part-timeline svg").count() >= 1
    assert best in page.locator(".tlxwb-ex-detail .tlxwb-ex-detail-head").inner_text()
