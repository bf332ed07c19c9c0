"""A teaching notebook as a fresh clone opens it: untrusted, nothing run. JupyterLab then renders no widget,
no SVG and no script, only sanitized HTML; the stored views must still show as pictures (boxes where the
spans are, tooltips on them), not as a wall of words, and no picture as `<IPython.core.display.SVG object>`."""
import json
import pathlib

import pytest

from lab_pages import attach_every_cell, notebook, put_stored_notebook, wait_until
from deadlines import paint_ms
from test_jupyterlab import lab  # noqa: F401 - the fixture, reused

pytestmark = [pytest.mark.browser, pytest.mark.slow]
NOTEBOOKS = pathlib.Path(__file__).resolve().parents[2] / "notebooks"
NB = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"      # the notebook in view (others stay in the page)


def _stored_pictures(path) -> int:
    """How many outputs of the stored notebook hold a picture (a view's or a Picture's SVG)."""
    nb = json.loads(path.read_text())
    return sum(1 for c in nb["cells"] for o in c.get("outputs", [])
               if "image/svg+xml" in o.get("data", {}) or "<svg" in "".join(o.get("data", {}).get("text/html", "")))


@pytest.mark.parametrize("name", ["01_mbarriers_and_phases", "02_tma_pipeline"])
def test_a_fresh_clone_shows_its_stored_views_as_pictures(lab, page, name):  # noqa: F811
    path = NOTEBOOKS / f"{name}.ipynb"
    expected = _stored_pictures(path)
    assert expected >= 2, f"{name}: no stored pictures to look at"
    attach_every_cell(lab)
    url = put_stored_notebook(lab, f"clone_{name}.ipynb", path)
    page.goto(url)
    notebook(page, f"clone_{name}.ipynb")
    outputs = page.locator(f"{NB} .jp-OutputArea-output")
    # untrusted: JupyterLab sanitized the HTML (no <svg> left) and drew no widget
    pictures = page.locator(f"{NB} .jp-OutputArea-output .tlxwb-untrusted-picture")
    # the page renders the stored outputs (no kernel: nothing runs); wait until it has rendered them all
    wait_until(page, f"clone_{name}.ipynb", "([nb, n]) => document.querySelectorAll(nb + ' .jp-OutputArea-output "
               ".tlxwb-untrusted-picture').length >= n", [NB, expected], f"the {expected} stored pictures of {name}",
               paint_ms())
    assert page.locator(f"{NB} .jp-OutputArea-output svg").count() == 0
    assert page.locator(f"{NB} .jp-OutputArea-output :is(.tlxwb-timeline, .tlxwb-barriers)").count() == 0
    # every stored picture is there, drawn: a box of its size with many drawn boxes inside, some with tooltips
    assert pictures.count() == expected
    for k in range(expected):
        pic = pictures.nth(k)
        pic.scroll_into_view_if_needed()
        box = pic.bounding_box()
        assert box["width"] > 300 and box["height"] > 40, (k, box)
        drawn = pic.evaluate("""p => [...p.children].filter(d => { const r = d.getBoundingClientRect();
            return r.width > 0 && r.height > 0 && getComputedStyle(d).position === 'absolute'; }).length""")
        assert drawn > 20, (k, drawn)
        assert pic.locator("[title]").count() > 0
    text = page.locator(NB).inner_text()
    assert "IPython.core.display.SVG object" not in text
    # the spans' tooltips stay tooltips: none of them is printed out as text
    assert "barrier_wait (wait)" not in text and "(arrive)" not in text
    # a tooltip on hover: the first titled box of the last picture names what it is
    tip = pictures.last.locator("[title]").first.get_attribute("title")
    assert tip and len(tip) > 3
    assert outputs.count() >= expected
