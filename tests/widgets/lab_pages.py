"""What the JupyterLab browser tests do to a Lab page: put a notebook in, open it and wait for its kernel,
Run All, wait until the kernel has run the cells and the views have drawn.

Every wait here ends on an event the page shows (the notebook's kernel idle in its toolbar, a cell's
execution count, a view's own ``data-rendered`` mark), never after a fixed time that a busy machine may not
meet. Deadlines (deadlines.py) only stop a test whose event never comes: ``HANG_MS`` for the kernel's work,
``paint_ms()`` (scaled by the machine's load) for what the page draws. A wait that fails says what it waited
for and what the notebook showed: its kernel, any dialog, each cell's prompt and outputs.

The predicates are plain (not async) functions: Playwright's ``wait_for_function`` takes a returned Promise
as a truthy value at once, so an ``async`` predicate never waits.
"""
import json
import urllib.parse
import urllib.request

import nbformat
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from deadlines import HANG_MS, load_factor, paint_ms

# the notebook's panel is the one its tab (labelled with the file name) points to: other notebooks a workspace
# restored stay in the page, hidden
_JS = """
const panelOf = name => { const tab = [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')]
    .find(t => { const l = t.querySelector('.lm-TabBar-tabLabel'); return l && l.textContent === name; });
    return tab ? document.getElementById(tab.dataset.id) : null; };
// the page's own view of the notebook's kernel (not the server's): until the page has connected to the
// kernel it started, Run All starts another kernel or asks which one to start
const kernelOf = p => {
    const n = p.querySelector('.jp-Toolbar-kernelName'), s = p.querySelector('.jp-Notebook-ExecutionIndicator');
    return { name: n ? n.textContent.trim() : '', status: s ? s.dataset.status : '' }; };
const kernelIdle = p => { const k = kernelOf(p); return k.status === 'idle' && k.name !== '' && k.name !== 'No Kernel'; };
const dialog = () => { const d = document.querySelector('.jp-Dialog');
    return d ? 'a dialog is open: ' + d.innerText.replace(/\\s+/g, ' ').slice(0, 200) : null; };
const promptOf = c => { const p = c.querySelector('.jp-InputPrompt'); return p ? p.textContent.trim() : ''; };
const codeCells = p => [...p.querySelectorAll('.jp-Notebook .jp-CodeCell')];
"""

_STATE = "(name) => {" + _JS + """
    const p = panelOf(name);
    if (!p) return 'no notebook tab named ' + name + '; tabs: '
        + [...document.querySelectorAll('.lm-TabBar-tabLabel')].map(l => l.textContent).join(', ');
    const k = kernelOf(p), lines = ['kernel: ' + (k.name || '?') + ' (' + (k.status || '?') + ')'];
    const d = dialog(); if (d) lines.push(d);
    p.querySelectorAll('.jp-Notebook .jp-Cell').forEach((c, i) => {
        const outs = [...c.querySelectorAll('.jp-OutputArea-output')].map(o => {
            const views = o.querySelectorAll('.tlxwb').length, drawn = o.querySelectorAll('.tlxwb[data-rendered]').length;
            const text = o.innerText.replace(/\\s+/g, ' ').trim().slice(0, 160);
            return (views ? `[${drawn} of ${views} views drawn] ` : '') + (text || '(no text)'); });
        lines.push(`cell ${i} ${promptOf(c) || '(markdown)'} ` + (outs.length ? outs.join(' | ') : '(no output)'));
    });
    return lines.join('\\n'); }"""


def notebook_state(page, name: str) -> str:
    """What the page shows of notebook ``name``: its kernel, an open dialog, each cell's prompt and outputs."""
    try:
        return page.evaluate(_STATE, name)
    except Exception as e:                      # the page itself is gone: say so rather than hide the first error
        return f"(the page could not be read: {e})"


def wait_until(page, name: str, predicate: str, arg, what: str, timeout_ms: int):
    """Until ``predicate(arg)`` is true in the page. A string it returns is a state the wait cannot get out of
    (a dialog, a view that failed): the test fails at once with it. Either failure names ``what`` was awaited
    and what the notebook showed."""
    if predicate.lstrip().startswith("async"):
        raise ValueError(f"waiting for {what}: an async predicate's Promise counts as true at once; "
                         "write it as a plain function")
    try:
        value = page.wait_for_function(predicate, arg=arg, polling=250, timeout=timeout_ms).json_value()
    except PlaywrightTimeout:
        raise AssertionError(f"waited {timeout_ms / 1000:.0f} s (load x{load_factor():.1f}) for {what}; "
                             f"the notebook shows:\n{notebook_state(page, name)}") from None
    if isinstance(value, str):
        raise AssertionError(f"while waiting for {what}: {value}; the notebook shows:\n{notebook_state(page, name)}")
    return value


def _lab(lab_url: str):
    u = urllib.parse.urlsplit(lab_url)
    return u, urllib.parse.parse_qs(u.query)["token"][0]


def _put(lab_url: str, name: str, content: dict) -> str:
    u, token = _lab(lab_url)
    req = urllib.request.Request(f"{u.scheme}://{u.netloc}/api/contents/{name}?token={token}", method="PUT",
                                 data=json.dumps({"type": "notebook", "format": "json", "content": content}).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=paint_ms() / 1000).close()      # the server, however busy
    return f"{u.scheme}://{u.netloc}/lab/tree/{name}?token={token}"


def put_notebook(lab_url: str, name: str, cells) -> str:
    """Write a notebook into the lab's root through its contents API; its URL."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return _put(lab_url, name, nb)


def put_stored_notebook(lab_url: str, name: str, path) -> str:
    """Copy a notebook file as stored (outputs and all, never trusted here) into the lab; its URL.

    What a fresh clone is: the server signs no notebook whose outputs it has not seen run, so it opens
    untrusted."""
    return _put(lab_url, name, json.loads(open(path).read()))


def attach_every_cell(lab_url: str) -> None:
    """Lab 4 may leave cells out of the viewport unrendered; a test that reads them all turns that off."""
    u, token = _lab(lab_url)
    raw = json.dumps({"autoStartDefaultKernel": True, "windowingMode": "none"})
    req = urllib.request.Request(
        f"{u.scheme}://{u.netloc}/lab/api/settings/@jupyterlab/notebook-extension:tracker?token={token}",
        method="PUT", data=json.dumps({"raw": raw}).encode(), headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=paint_ms() / 1000).close()      # the server, however busy


def notebook(page, name: str):
    """The locator of notebook ``name``'s cells area (its panel only, not the other notebooks in the page)."""
    wait_until(page, name, "(name) => {" + _JS + "return !!panelOf(name); }", name,
               f"a notebook tab named {name}", paint_ms())
    pid = page.evaluate("(name) => {" + _JS + "return panelOf(name).id; }", name)
    return page.locator(f"[id='{pid}'] .jp-Notebook")


def wait_idle(page, name: str) -> None:
    """Until the page is connected to notebook ``name``'s kernel and shows it idle (however long a busy machine
    takes to start it). Before that, Run All starts a second kernel or asks which one to start."""
    wait_until(page, name, "(name) => {" + _JS + """const p = panelOf(name);
        if (!p) return false; const d = dialog(); if (d) return d; return kernelIdle(p); }""", name,
               f"the kernel of {name} to be started, connected and idle", HANG_MS)


def open_notebook(page, url: str, name: str):
    """Open the notebook at ``url`` (file ``name``) and wait until its cells are in the page and its kernel is
    idle; the notebook's locator."""
    page.goto(url)
    nb = notebook(page, name)
    wait_until(page, name, "(name) => {" + _JS + "const p = panelOf(name); return !!p && !!p.querySelector('.jp-Cell'); }",
               name, f"the cells of {name}", paint_ms())
    wait_idle(page, name)
    return nb


def run_all(page, name: str) -> None:
    """Run All Cells of notebook ``name`` (its kernel idle first), until a cell shows it is queued or ran."""
    wait_idle(page, name)
    before = page.evaluate("(name) => {" + _JS + "return codeCells(panelOf(name)).map(promptOf); }", name)
    page.click(".lm-MenuBar-itemLabel:text-is('Run')")
    page.click(".lm-Menu-item:not(.lm-mod-disabled) .lm-Menu-itemLabel:text-is('Run All Cells')")
    # the prompt changes in the page as soon as a cell is queued: no kernel work in this wait
    wait_until(page, name, "([name, before]) => {" + _JS + """const p = panelOf(name); const d = dialog(); if (d) return d;
        return codeCells(p).some((c, i) => promptOf(c) !== before[i] && /\\[[0-9*]+\\]/.test(promptOf(c))); }""",
               [name, before], f"Run All to queue the cells of {name}", paint_ms())


# the kernel has run what Run All gave it: no prompt shows [*] (queued or running), every code cell has run or
# Run All stopped at a cell that failed (an error output; the cells after it unrun), and the kernel is idle.
# (Lab sends the cells one after another: between two of them no prompt shows [*], so that alone is not done.)
_DONE = "(name) => {" + _JS + """
    const p = panelOf(name); if (!p) return false;
    const d = dialog(); if (d) return d;
    const cells = codeCells(p);
    if (!cells.length || cells.some(c => promptOf(c).includes('*'))) return false;
    const ran = cells.map(c => /\\[[0-9]+\\]/.test(promptOf(c)));
    const k = ran.indexOf(false);
    if (k === 0) return false;
    if (k > 0) {
        const failed = cells[k - 1].querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
        if (!failed || ran.slice(k).some(x => x)) return false;
    }
    return kernelIdle(p); }"""


def wait_cells_done(page, name: str) -> None:
    """Until the kernel of notebook ``name`` has run every cell Run All gave it (a failing cell stops Run All:
    the cells after it stay unrun) and is idle, however long a busy machine takes."""
    wait_until(page, name, _DONE, name, f"the kernel to run the cells of {name}", HANG_MS)


def wait_views(page, name: str, views: dict) -> None:
    """Until each cell of notebook ``name`` in ``views`` ({cell index: root selector or list of them, e.g.
    {1: ".tlxwb-barriers"}}) shows those views drawn: their own ``data-rendered`` mark, set as render's last
    step. A widget output that says it cannot be displayed fails the wait at once. The kernel is done by
    then; the deadline is the page's (``paint_ms``)."""
    want = {int(i): [r] if isinstance(r, str) else list(r) for i, r in views.items()}
    wait_until(page, name, "([name, want]) => {" + _JS + """const p = panelOf(name); if (!p) return false;
        const bad = [...p.querySelectorAll('.jp-OutputArea-output')].find(o => /Error displaying widget/.test(o.textContent));
        if (bad) return 'a widget output says: ' + bad.textContent.trim().slice(0, 200);
        const cells = p.querySelectorAll('.jp-Notebook .jp-Cell');
        return Object.entries(want).every(([i, roots]) => cells[i] && roots.every(r => {
            const v = cells[i].querySelectorAll(r); return v.length > 0 && [...v].every(e => e.dataset.rendered === '1'); })); }""",
               [name, {str(i): r for i, r in want.items()}],
               "views drawn: " + "; ".join(f"cell {i}: {', '.join(r)}" for i, r in want.items()), paint_ms())


def run_cell(page, name: str, index: int):
    """Run cell ``index`` of notebook ``name`` (Shift+Enter) and wait until the kernel has run it: its prompt
    shows a new execution count and the kernel is idle again (its outputs are in). The cell's locator."""
    cell = notebook(page, name).locator(".jp-Cell").nth(index)
    before = cell.locator(".jp-InputPrompt").inner_text()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    wait_until(page, name, "([name, i, before]) => {" + _JS + """const p = panelOf(name); const d = dialog(); if (d) return d;
        const c = p.querySelectorAll('.jp-Notebook .jp-Cell')[i], now = promptOf(c);
        return now !== before.trim() && /\\[[0-9]+\\]/.test(now) && kernelIdle(p); }""",
               [name, index, before], f"the kernel to run cell {index} of {name}", HANG_MS)
    return cell
