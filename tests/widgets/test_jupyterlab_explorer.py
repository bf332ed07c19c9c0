"""ExplorerWidget in a real JupyterLab: the lab server and browser of test_jupyterlab.py, a
notebook that loads a store file this test made (a real static+simulated sweep of gemm_ws)
and shows the widget; every config that was not dropped is a point, and a click on one
brings its compile report from the kernel into the widget's panel."""
import json
import urllib.parse
import urllib.request

import nbformat
import pytest

import tlx_workbench.explore as tx

from test_explorer import SHAPE, small_exploration
from test_jupyterlab import _wait_dismissing_dialogs, lab  # noqa: F401 - the fixture, reused

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    return small_exploration(tmp_path_factory.mktemp("explore-lab") / "store.sqlite")


def _put_notebook(lab_url: str, name: str, cells) -> str:
    """Write a notebook into the lab's root through its contents API; its URL."""
    u = urllib.parse.urlsplit(lab_url)
    token = urllib.parse.parse_qs(u.query)["token"][0]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    req = urllib.request.Request(f"{u.scheme}://{u.netloc}/api/contents/{name}?token={token}", method="PUT",
                                 data=json.dumps({"type": "notebook", "format": "json", "content": nb}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()
    return f"{u.scheme}://{u.netloc}/lab/tree/{name}?token={token}"


def test_explorer_in_jupyterlab_draws_every_config_and_a_click_opens_its_report(lab, page, sweep):  # noqa: F811
    url = _put_notebook(lab, "explorer.ipynb", [
        "import tlx_workbench.explore as tx\nfrom tlx_workbench.widgets import ExplorerWidget\n"
        f"ex = tx.Exploration.load({sweep.store.path!r}, 'gemm_ws')\nw = ExplorerWidget(ex)\nw",
    ])
    page.set_default_timeout(90_000)
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.wait_for_function("""async () => { const r = await fetch('/api/sessions');
        const s = await r.json(); return s.some(x => x.path.endsWith('explorer.ipynb') && x.kernel
                                                && x.kernel.execution_state === 'idle'); }""", polling=500)
    for attempt in range(3):      # Lab may drop a Run All sent while its kernel connection settles
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function("() => /\\[[0-9*]\\]/.test(document.querySelector('.jp-InputPrompt').textContent)",
                                   timeout=20_000)
            break
        except Exception:
            if attempt == 2:
                raise
    _wait_dismissing_dialogs(page, ".tlxwb-explorer .tlxwb-ex-scatter svg")
    alive = [e for e in sweep.entries() if e["status"] not in ("dropped", "hung", "crashed", "error")]
    dropped = sweep.dropped()
    assert len(alive) == 2 and len(dropped) == 2
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-pt").count() == len(alive)
    assert page.locator(".tlxwb-ex-scatter .tlxwb-ex-drop").count() == len(dropped)
    assert page.locator(".tlxwb-ex-table tr.tlxwb-ex-row").count() == len(alive) + len(dropped)
    # a click on a point: the kernel compiles that config and its report fills the widget's panel
    best = tx.config_id(sweep.best(SHAPE, by="predicted_us"))
    point = page.locator(f".tlxwb-ex-scatter .tlxwb-ex-pt[data-config-id='{best}']")
    point.scroll_into_view_if_needed()
    point.click()
    report = page.locator(".tlxwb-ex-detail .tlxwb-ex-part-report")
    report.wait_for(timeout=180_000)
    assert "gemm_ws_coop_kernel" in report.inner_text()
    assert page.locator(".tlxwb-ex-detail .tlxwb-ex-part-timeline svg").count() >= 1
    assert best in page.locator(".tlxwb-ex-detail .tlxwb-ex-detail-head").inner_text()
