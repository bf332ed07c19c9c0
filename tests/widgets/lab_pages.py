"""What the JupyterLab browser tests do to a Lab page: put a notebook in, wait for its kernel, Run All."""
import json
import urllib.parse
import urllib.request

import nbformat


def _lab(lab_url: str):
    u = urllib.parse.urlsplit(lab_url)
    return u, urllib.parse.parse_qs(u.query)["token"][0]


def put_notebook(lab_url: str, name: str, cells) -> str:
    """Write a notebook into the lab's root through its contents API; its URL."""
    u, token = _lab(lab_url)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    req = urllib.request.Request(f"{u.scheme}://{u.netloc}/api/contents/{name}?token={token}", method="PUT",
                                 data=json.dumps({"type": "notebook", "format": "json", "content": nb}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()
    return f"{u.scheme}://{u.netloc}/lab/tree/{name}?token={token}"


def attach_every_cell(lab_url: str) -> None:
    """Lab 4 may leave cells out of the viewport unrendered; a test that reads them all turns that off."""
    u, token = _lab(lab_url)
    raw = json.dumps({"autoStartDefaultKernel": True, "windowingMode": "none"})
    req = urllib.request.Request(
        f"{u.scheme}://{u.netloc}/lab/api/settings/@jupyterlab/notebook-extension:tracker?token={token}",
        method="PUT", data=json.dumps({"raw": raw}).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()


def wait_idle(page, name):
    """Until the kernel of notebook ``name`` is idle."""
    page.wait_for_function(f"""async () => {{ const r = await fetch('/api/sessions'); const s = await r.json();
        return s.some(x => x.path.endsWith('{name}') && x.kernel && x.kernel.execution_state === 'idle'); }}""",
                           polling=500)


def run_all(page):
    """Run All Cells, until a cell shows it ran (Lab may drop a Run All sent while its kernel connection settles)."""
    for attempt in range(3):
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function("() => /\\[[0-9*]\\]/.test(document.querySelector('.jp-InputPrompt').textContent)",
                                   timeout=20_000)
            return
        except Exception:
            if attempt == 2:
                raise
