"""The package's import graph: data flows one way (producers -> results -> views), and no module
imports, directly or around a loop, one that imports it back.

Read from the source with ``ast``, not by importing. What counts as an import, and why:

* every ``import`` / ``from ... import`` of a ``tlx_workbench`` module, wherever it stands: at module
  level, inside a function (a lazy import is still a dependency; laziness only hides a loop until the
  function runs) and under ``if TYPE_CHECKING:`` (a reader sees the dependency all the same);
* ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``;
* the façade: ``import tlx_workbench as wb`` then ``wb.simulate`` counts as an import of the module that
  defines ``simulate`` (the package's eager imports and its ``_LAZY`` table say which), as does
  ``from tlx_workbench import simulate``; a use of the façade that names nothing it exports (``wb`` handed
  on as a whole) counts as an import of ``tlx_workbench`` itself, which sits above every layer;
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

#: the layers, lowest first: a module may import its own unit and the units of lower layers, never a unit of its
#: own layer from another package (peers stay independent: the simulator and the GPU runtime each stand alone) nor of a higher one. A
#: unit is a package or module under ``tlx_workbench`` (the longest that matches); ``tlx_workbench`` alone is the
#: façade (``__init__.py``), above everything.
LAYERS = (
    ("errors", "_version"),
    ("target", "views"),                 # views: the registry results reach their views through, by name
    ("trace",),
    ("trace_compare", "json_schema", "calibration"),   # calibration: the measured figures the cost model reads
    ("compiler",),
    ("sim", "runtime"),                  # the CPU simulator and the GPU runtime: peers
    ("_torch_cpu", "kernels", "calibration.kernels"),
    ("calibration.suite",),              # measures on a GPU: its loops, and the library's kernels run for seconds
    ("checker",),                        # static + simulated checks; the advisor measures its forms on a GPU
    ("intercept", "explore"),
    ("widgets",),
    ("demo", "puzzles", "magics", "pytest_plugin"),
    ("cli",),                            # the command line: its verbs include the demo page
    ("magic",),                          # ``%load_ext tlx_magic``'s shim over magics
)

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


def _facade(modules) -> dict[str, str]:
    """What ``tlx_workbench`` exports -> the module that defines it: its eager ``from .x import ...`` lines and
    its ``_LAZY`` table (name -> module), read from ``__init__.py``."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"tlx_workbench.{node.module}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if getattr(target, "id", None) == "_LAZY":
                for k, v in zip(node.value.keys, node.value.values):
                    out[k.value] = v.value
    return {name: mod for name, mod in out.items() if mod in modules}


def _imports(name: str, path: pathlib.Path, modules, facade=None) -> dict[str, int]:
    """``{imported module: first line}`` for module ``name``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    facade = facade if facade is not None else _facade(modules)

    def owner(dotted: str) -> str | None:        # the module a dotted name lives in
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found: dict[str, int] = {}
    tree = ast.parse(path.read_text(), str(path))
    aliases = set()                       # names bound to the façade: ``import tlx_workbench as wb``
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "tlx_workbench":
                    aliases.add(a.asname or a.name)
                elif a.name.split(".")[0] == "tlx_workbench":
                    targets.append(owner(a.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] == "tlx_workbench":
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        targets.append(f"{base}.{a.name}")
                    elif base == "tlx_workbench":
                        targets.append(facade.get(a.name, "tlx_workbench"))
                    else:
                        targets.append(owner(base))
        for t in targets:
            if t and t != name:
                found.setdefault(t, node.lineno)
    if aliases:
        uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                and n.value.id in aliases]
        for node in uses:
            t = facade.get(node.attr, "tlx_workbench")
            if t != name:
                found.setdefault(t, node.lineno)
        # a bare ``wb`` (handed on whole, not ``wb.x``) counts as the façade itself
        dotted = {id(n.value) for n in uses}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Name) and node.id in aliases and not isinstance(node.ctx, ast.Store)
                    and id(node) not in dotted and name != "tlx_workbench"):
                found.setdefault("tlx_workbench", node.lineno)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    facade = _facade(modules)
    return {name: _imports(name, path, modules, facade) for name, path in modules.items()}


def _layer(module: str) -> tuple[int, str] | None:
    """(layer index, unit) of a module; None for the façade itself."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    units = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    for n in range(len(parts), 0, -1):
        unit = ".".join(parts[:n])
        if unit in units:
            return units[unit], unit
    raise AssertionError(f"{module}: its package {parts[0]!r} is in no layer of LAYERS: add it where it belongs")


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


def test_the_facade_is_read(graph):
    # ``wb.simulate`` inside a function counts as an import of the simulator, not of the façade
    import_lines = graph["tlx_workbench.explore.stages"]
    assert "tlx_workbench.sim" in import_lines or any(t.startswith("tlx_workbench.sim.") for t in import_lines)
    assert "tlx_workbench" not in import_lines


def test_layers_are_kept(graph):
    bad = []
    for m, targets in sorted(graph.items()):
        src = _layer(m)
        if src is None:
            continue
        for t, ln in sorted(targets.items()):
            dst = _layer(t)
            if dst is None:
                bad.append(f"{m} (line {ln}) uses the façade tlx_workbench as a whole: import what it uses from "
                           "the module that defines it")
            elif dst[0] > src[0] or (dst[0] == src[0] and dst[1].split(".")[0] != src[1].split(".")[0]):
                kind = "a peer" if dst[0] == src[0] else "a higher layer"
                bad.append(f"{m} (line {ln}) imports {t}, {kind} ({LAYERS[dst[0]]} over {LAYERS[src[0]]})")
    assert not bad, ("layer order broken (tests/test_structure.py LAYERS, lowest first; move the shared piece "
                     "down into a module both may import):\n" + "\n".join(bad))


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
