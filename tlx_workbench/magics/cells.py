"""Locations as the user sees them: "cell [3], line 5", counted from the ``%%tlx`` line.

A ``%%tlx`` cell's code is cached (for ``linecache``, so ``triton.jit`` can read the kernels'
source) under a file name the kernel invents (``/tmp/ipykernel_.../123.py`` or
``<ipython-input-3-...>``). :func:`cache_cell` stores it with one empty line in front: the
``%%tlx`` line, which the magic does not receive, so every line number the compiler, the
simulator or a traceback reports is the line number the editor shows. :func:`where` and
:func:`relabel` turn those file names back into "cell [n]", and so the file names of ordinary cells
(a kernel defined in one cell, launched from a ``%%tlx`` cell), whose numbers IPython keeps.
"""
from __future__ import annotations

import html
import re

# file name -> "cell [n]"; a few hundred entries in a long session, each a short string
_LABELS: dict[str, str] = {}


def cache_cell(shell, cell: str) -> tuple[str, str]:
    """Cache ``cell`` (the body of a ``%%tlx`` cell) for linecache; returns (file name, the cached text).

    The cached text is the cell with an empty first line standing for ``%%tlx ...``.
    """
    text = "\n" + cell
    n = cell_number(shell)
    filename = shell.compile.cache(text, n)
    _LABELS[filename] = f"cell [{n}]"
    return filename, text


def cell_number(shell) -> int:
    """The number the frontend shows for the running cell ("[3]").

    IPython 9 counts the cell up before running it, older ones after; the running cell's own
    ExecutionResult, which the displayhook holds meanwhile, has the right number either way.
    """
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    n = getattr(running, "execution_count", None)
    return n if n is not None else (getattr(shell, "execution_count", 0) or 0)


def _plain_cells() -> dict[str, str]:
    """File name -> "cell [n]" for the session's ordinary cells (a kernel defined in a plain cell, launched
    from a ``%%tlx`` cell), read from IPython's own record of the cells it compiled; empty outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the magics need IPython anyway
        return {}
    compiler = getattr(get_ipython(), "compile", None)
    # IPython's CachingCompiler keeps file name -> execution count for its format_code_name ("In[n]")
    numbers = getattr(compiler, "_filename_map", None) or {}
    return {file: f"cell [{n}]" for file, n in numbers.items() if isinstance(n, int) and n > 0}


def _cell_label(file: str) -> str | None:
    if file in _LABELS:
        return _LABELS[file]
    return _plain_cells().get(file)


def label(file: str | None) -> str | None:
    """``"cell [n]"`` for a cell's file (a ``%%tlx`` cell or an ordinary one); other files by their name.

    >>> label("/tmp/k.py")
    '/tmp/k.py'
    """
    if file is None:
        return None
    return _cell_label(file) or file


def where(file: str | None, line: int | None) -> str:
    """``"cell [3], line 5"`` for a cell, ``"k.py:12"`` for a file, ``""`` when nothing is known.

    >>> where("/tmp/k.py", 12)
    '/tmp/k.py:12'
    """
    if not file:
        return f"line {line}" if line else ""
    name = _cell_label(file)
    if name is not None:
        return f"{name}, line {line}" if line else name
    return f"{file}:{line}" if line else file


def relabel(text: str, *, escaped: bool = False) -> str:
    """Replace cells' file names inside a message (``<ipython-input-3-ab>:7`` -> ``cell [3], line 7``).

    ``escaped``: ``text`` is HTML, where such a name is written ``&lt;ipython-input-3-ab&gt;``.

    >>> relabel("no cell here: k.py:3")
    'no cell here: k.py:3'
    """
    if not text:
        return text
    for file, name in {**_plain_cells(), **_LABELS}.items():
        if escaped:
            file = html.escape(file)
        if file in text:
            pat = re.escape(file)
            text = re.sub(rf'"?{pat}"?:(\d+)(?::\d+)?', lambda m: f"{name}, line {m.group(1)}", text)
            text = text.replace(file, name)
    return text
