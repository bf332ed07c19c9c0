"""The package's import graph: data flows one way (producers -> results -> views), and no module
imports, directly or around a loop, one that imports it back.

Read from the source with ``ast``, not by importing. What counts as an import, and why:

* every ``import`` / ``from ... import`` of a ``tlx_workbench`` module, wherever it stands: at module
  level, inside a function (a lazy import is still a dependency; laziness only hides a loop until the
  function runs) and under ``if TYPE_CHECKING:`` (a reader sees the dependency all the same);
* ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``;
* the implicit import of a module's parent packages does not count (every module would then depend
  on ``tlx_workbench/__init__.py``), nor do imports by string (``importlib.import_module``, the
  registry in ``tlx_workbench.views``): that is how a result reaches its view without depending on it.
"""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "tlx_workbench"

#: packages and modules that make or hold results: none of them may import a view
PRODUCERS = ("tlx_workbench.compiler", "tlx_workbench.sim", "tlx_workbench.runtime", "tlx_workbench.explore",
             "tlx_workbench.trace", "tlx_workbench.checker", "tlx_workbench.puzzles")
VIEWS = "tlx_workbench.widgets"

#: loops known and owned elsewhere, each with who breaks it; test_known_loops_are_still_there keeps the list
#: honest (a loop broken must leave it)
KNOWN_LOOPS: dict[frozenset, str] = {}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: pathlib.Path, modules) -> dict[str, int]:
    """``{imported module: first line}`` for module ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def owner(dotted: str) -> str | None:        # the module a dotted name lives in
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [owner(a.name) for a in node.names if a.name.split(".")[0] == "tlx_workbench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] == "tlx_workbench":
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else owner(base) for a in node.names]
        for t in targets:
            if t and t != name:
                found.setdefault(t, node.lineno)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _loops(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _describe(loop, graph) -> str:
    members = set(loop)
    return "; ".join(f"{m} -> " + ", ".join(f"{t} (line {ln})" for t, ln in sorted(graph[m].items()) if t in members)
                     for m in loop)


def test_the_graph_is_read(graph):
    # a walker that finds nothing passes everything: pin a few edges that must be there
    assert "tlx_workbench.trace" in graph["tlx_workbench.widgets.timeline"]
    assert "tlx_workbench.compiler.source" in graph["tlx_workbench.compiler.sourcemap"]
    assert "tlx_workbench.views" in graph["tlx_workbench.trace"]          # a function-level import
    assert "tlx_workbench.sim.hardware.cta" in graph["tlx_workbench.sim.schedule.engine"]


def test_no_import_loops(graph):
    loops = [loop for loop in _loops(graph) if frozenset(loop) not in KNOWN_LOOPS]
    assert not loops, "import loops (move the shared piece down into a module both import):\n" + \
        "\n".join(_describe(loop, graph) for loop in loops)


def test_known_loops_are_still_there(graph):
    found = {frozenset(loop) for loop in _loops(graph)}
    gone = [sorted(k) for k in KNOWN_LOOPS if k not in found]
    assert not gone, f"these loops are broken now: take them out of KNOWN_LOOPS: {gone}"


def test_no_result_or_producer_imports_a_view(graph):
    def producer(m):
        return any(m == p or m.startswith(p + ".") for p in PRODUCERS)

    bad = [f"{m} imports {t} (line {ln})" for m, targets in sorted(graph.items()) if producer(m)
           for t, ln in sorted(targets.items()) if t == VIEWS or t.startswith(VIEWS + ".")]
    assert not bad, ("a result or producer imports a view; register the view in tlx_workbench.views "
                     "and ask views.html / views.render instead:\n" + "\n".join(bad))


def test_every_registering_view_module_is_a_provider():
    # a view that registers but is not in PROVIDERS is never imported by a result's repr
    from tlx_workbench import views
    registering = sorted(name for name, path in _modules().items()
                         if name.startswith(VIEWS) and "views.register(" in path.read_text())
    assert registering and set(registering) <= set(views.PROVIDERS), (registering, views.PROVIDERS)
