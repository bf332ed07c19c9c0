"""Send a kernel (or a host function) to the GPU worker process.

A kernel defined in a notebook cell lives in ``__main__``; a spawned process cannot
import it. So a callable travels as one of:

- ``("pickle", obj)``: importable objects (``torch.matmul``, a function in a module);
- ``("file", path, qualname)``: defined in a ``.py`` file not importable by name
  (a tutorial loaded from its path): the worker loads that file;
- ``("source", source, qualname, origin)``: defined in notebook cells: the worker
  executes the cells' *definitions* (imports, ``def``/``class``, constant
  assignments; not the launch code or data set-up) from a real file, so Triton can
  read the kernel's source.

>>> spec = callable_spec(len); resolve(spec) is len
True
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import linecache
import os
import pickle
import sys
import tempfile
import types

_CACHE_DIR = os.path.join(tempfile.gettempdir(), f"tlxwb-cells-{os.getuid() if hasattr(os, 'getuid') else 0}")
_namespaces: dict[str, dict] = {}       # worker side: source hash -> executed namespace


def _underlying_function(obj):
    """The Python function behind a Triton JITFunction / Autotuner / Heuristics, or obj."""
    seen = 0
    while hasattr(obj, "fn") and seen < 5 and not inspect.isfunction(obj):
        obj = obj.fn
        seen += 1
    return obj if inspect.isfunction(obj) else None


def _is_real_module_file(filename: str) -> bool:
    return bool(filename) and os.path.isfile(filename) and not _is_notebook_file(filename)


def _is_notebook_file(filename: str) -> bool:
    # ipykernel writes cells to /tmp/ipykernel_<pid>/<hash>.py; plain IPython uses <ipython-input-..>
    return (filename.startswith("<ipython-input") or "ipykernel_" in filename
            or filename.startswith("<cell") or filename.startswith("<tlx"))


def definitions_only(source: str) -> str:
    """The statements of ``source`` that define things: imports, defs, classes, constant assignments.

    Launch code and data set-up (``x = torch.randn(...)``, ``kernel[grid](...)``) are left out:
    the worker gets its tensors from the notebook, not by re-running the cell.

    >>> print(definitions_only("import math\\nN = 4\\nx = make()\\ndef f():\\n    return N"), end="")
    import math
    N = 4
    def f():
        return N
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    keep = []
    lines = source.splitlines()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            keep.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _is_constant_expr(node.value):
            keep.append(node)
    out = []
    for node in keep:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        out.append("\n".join(lines[start - 1:node.end_lineno]))
    return "\n".join(out) + ("\n" if out else "")


_SAFE_CALLS = {"constexpr", "get_active_torch_device", "cdiv", "next_power_of_2", "dtype", "int", "float"}


def _is_constant_expr(node) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, (ast.Name, ast.Attribute, ast.Constant)):
        return True
    if isinstance(node, ast.BinOp):
        return _is_constant_expr(node.left) and _is_constant_expr(node.right)
    if isinstance(node, ast.UnaryOp):
        return _is_constant_expr(node.operand)
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        return name in _SAFE_CALLS and all(_is_constant_expr(a) for a in node.args)
    return False


def _cell_files_for(fn, seen: set | None = None) -> list[str]:
    """Notebook cell files holding ``fn`` and the notebook-defined things its code names."""
    seen = set() if seen is None else seen
    func = _underlying_function(fn)
    if func is None:
        return []
    files = []
    filename = func.__code__.co_filename
    if _is_notebook_file(filename) and filename not in seen:
        seen.add(filename)
        files.append(filename)
    names = set(func.__code__.co_names)
    for const in func.__code__.co_consts:
        if isinstance(const, types.CodeType):
            names |= set(const.co_names)
    for name in names:
        val = func.__globals__.get(name)
        sub = _underlying_function(val) if val is not None else None
        if sub is not None and _is_notebook_file(sub.__code__.co_filename) and sub.__code__.co_filename not in seen:
            files = _cell_files_for(val, seen) + files
    return files


def _cell_order(filename: str):
    # <ipython-input-12-...> and ipykernel files: keep the execution order where it shows
    digits = "".join(ch if ch.isdigit() else " " for ch in filename).split()
    return int(digits[0]) if filename.startswith("<ipython-input") and digits else 0


def callable_spec(obj, *, source: str | None = None, name: str | None = None):
    """How to send ``obj`` to the worker (see the module docstring).

    ``source``/``name`` override: the magic passes the cell it ran.
    """
    if source is not None:
        return ("source", definitions_only(source), name or getattr(obj, "__name__", ""), "<cell>")
    func = _underlying_function(obj)
    if func is not None:
        mod = sys.modules.get(func.__module__)
        filename = func.__code__.co_filename
        qualname = getattr(obj, "__qualname__", None) or func.__qualname__
        if mod is not None and func.__module__ != "__main__" and getattr(mod, "__spec__", None) is not None \
                and importlib.util.find_spec(func.__module__) is not None:
            # a worker started before this module's folder joined sys.path cannot import it by
            # name: the module spec carries the file too
            return ("module", func.__module__, qualname, getattr(mod, "__file__", None))
        if _is_real_module_file(filename) and func.__module__ != "__main__":
            return ("file", filename, qualname)
        files = sorted(_cell_files_for(obj), key=_cell_order)
        if files:
            src = "\n".join(definitions_only("".join(linecache.getlines(f))) for f in files)
            return ("source", src, qualname, files[-1])
        if _is_real_module_file(filename):
            return ("file", filename, qualname)
    try:
        pickle.dumps(obj)
        return ("pickle", obj)
    except Exception as e:
        from ..errors import GPUError
        raise GPUError(f"cannot send {obj!r} to the GPU worker process: {e}",
                       hint="define the function at the top level of a cell or a module "
                            "(lambdas and closures cannot travel), or pass isolate=False") from None


def _lookup(ns, qualname: str):
    obj = ns[qualname.split(".")[0]] if isinstance(ns, dict) else getattr(ns, qualname.split(".")[0])
    for part in qualname.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def resolve(spec):
    """Worker side: the callable that ``spec`` (from :func:`callable_spec`) names."""
    kind = spec[0]
    if kind == "pickle":
        return spec[1]
    if kind == "module":
        name, qualname, path = spec[1], spec[2], (spec[3] if len(spec) > 3 else None)
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            if not path:
                raise
            mspec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(mspec)
            sys.modules[name] = mod
            mspec.loader.exec_module(mod)
        return _lookup(mod, qualname)
    if kind == "file":
        path, qualname = spec[1], spec[2]
        key = "file:" + path
        if key not in _namespaces:
            modname = "tlxwb_file_" + hashlib.sha1(path.encode()).hexdigest()[:12]
            mspec = importlib.util.spec_from_file_location(modname, path)
            mod = importlib.util.module_from_spec(mspec)
            sys.modules[modname] = mod
            mspec.loader.exec_module(mod)
            _namespaces[key] = mod.__dict__
        return _lookup(_namespaces[key], qualname)
    if kind == "source":
        source, qualname = spec[1], spec[2]
        digest = hashlib.sha1(source.encode()).hexdigest()[:16]
        if digest not in _namespaces:
            _namespaces[digest] = _exec_source(source, digest)
        return _lookup(_namespaces[digest], qualname)
    raise ValueError(f"unknown callable spec {kind!r}")


def _exec_source(source: str, digest: str) -> dict:
    # a real file, so inspect.getsource (which Triton's JIT needs) finds the kernel's text
    os.makedirs(_CACHE_DIR, exist_ok=True)
    path = os.path.join(_CACHE_DIR, f"cell_{digest}.py")
    if not os.path.exists(path):
        tmp = path + f".{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    modname = f"tlxwb_cell_{digest}"
    mod = types.ModuleType(modname)
    mod.__file__ = path
    sys.modules[modname] = mod
    ns = mod.__dict__
    tree = ast.parse(source, path)
    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec")
        try:
            exec(code, ns)
        except Exception:
            # a definition that needs the notebook's runtime state; a def or import must work
            if not isinstance(node, (ast.Assign, ast.AnnAssign)):
                raise
    return ns
