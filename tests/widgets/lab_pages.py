"""What the JupyterLab browser tests do to a Lab page: put a notebook in, wait for its kernel, Run All,
wait until the kernel has run the cells.

Every wait here ends on an event (the kernel up, a cell queued, the kernel done with the cells it was
given), never after a fixed time that a busy machine may not meet; ``HANG_MS`` only stops a test whose
event never comes.
"""
import json
import time
import urllib.parse
import urllib.request

import nbformat

HANG_MS = 30 * 60_000


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


_IDLE = """async (name) => { const r = await fetch('/api/sessions'); const s = await r.json();
    return s.some(x => x.path.endsWith(name) && x.kernel && x.kernel.execution_state === 'idle'); }"""

# the kernel has run what Run All gave it: no prompt shows [*] (queued or running), every code cell has run or
# Run All stopped at a cell that failed (an error output; the cells after it unrun), and the kernel is idle.
# (Lab sends the cells one after another: between two of them no prompt shows [*], so that alone is not done.)
_DONE = """async (name) => {
    const prompt = c => c.querySelector('.jp-InputPrompt').textContent;
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
    if (!cells.length || cells.some(c => prompt(c).includes('*'))) return false;
    const ran = cells.map(c => /\\[[0-9]+\\]/.test(prompt(c)));
    const k = ran.indexOf(false);
    if (k === 0) return false;
    if (k > 0) {
        const failed = cells[k - 1].querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
        if (!failed || ran.slice(k).some(x => x)) return false;
    }
    const r = await fetch('/api/sessions'); const s = await r.json();
    return s.some(x => x.path.endsWith(name) && x.kernel && x.kernel.execution_state === 'idle'); }"""


def wait_idle(page, name):
    """Until the kernel of notebook ``name`` is up and idle (however long a busy machine takes to start it)."""
    page.wait_for_function(_IDLE, arg=name, polling=500, timeout=HANG_MS)


def _accept_dialog(page) -> bool:
    """Accept a dialog Lab raises (which kernel to start); True when there was one."""
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    if accept.count():
        accept.first.click()
        return True
    return False


def run_all(page):
    """Run All Cells, until a cell shows it is queued or ran (Lab may drop a Run All sent while its kernel
    connection settles, or ask which kernel to start: then it is sent again)."""
    for attempt in range(5):
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            # the prompt changes in the page as soon as the cell is queued: no kernel time in this wait
            page.wait_for_function("() => [...document.querySelectorAll('.jp-InputPrompt')]"
                                   ".some(p => /\\[[0-9*]+\\]/.test(p.textContent))", timeout=30_000)
            return
        except Exception:
            _accept_dialog(page)
            if attempt == 4:
                raise


def wait_cells_done(page, name):
    """Until the kernel of notebook ``name`` has run every cell Run All gave it (a failing cell stops Run All:
    the cells after it stay unrun). A kernel-choice dialog raised meanwhile is accepted and Run All sent again."""
    deadline = time.monotonic() + HANG_MS / 1000
    while True:
        try:
            page.wait_for_function(_DONE, arg=name, polling=500, timeout=15_000)
            return
        except Exception:
            if _accept_dialog(page):
                run_all(page)
            if time.monotonic() > deadline:
                raise


def run_cell(page, index: int):
    """Run the notebook's cell ``index`` (Shift+Enter) and wait until the kernel has run it: its prompt
    shows a new execution count."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    before = cell.locator(".jp-InputPrompt").inner_text()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("""([i, before]) => { const c = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];
        const p = c.querySelector('.jp-InputPrompt').textContent;
        return p !== before && /\\[[0-9]+\\]/.test(p); }""", arg=[index, before], polling=250, timeout=HANG_MS)
    return cell


def put_stored_notebook(lab_url: str, name: str, path) -> str:
    """Copy a notebook file as stored (outputs and all, never trusted here) into the lab; its URL.

    What a fresh clone is: the server signs no notebook whose outputs it has not seen run, so it opens
    untrusted."""
    u, token = _lab(lab_url)
    nb = json.loads(open(path).read())
    req = urllib.request.Request(f"{u.scheme}://{u.netloc}/api/contents/{name}?token={token}", method="PUT",
                                 data=json.dumps({"type": "notebook", "format": "json", "content": nb}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).close()
    return f"{u.scheme}://{u.netloc}/lab/tree/{name}?token={token}"
