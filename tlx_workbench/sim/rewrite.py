"""Turn a kernel's Python source into something the simulator can schedule.

Triton's interpreter runs a kernel function directly, so a ``with tlx.async_task(...)``
block would run inline, one after another — a producer/consumer pipeline would then
wait forever. This module rewrites (once per function) the kernel's AST:

* every ``with tlx.async_tasks():`` block has each ``with tlx.async_task(...):`` body
  turned into a closure, and the block ends with one call that hands all of them
  (with their ``async_task`` objects, which carry ``replicate`` / ``num_warps``) to
  the simulator, which runs them as concurrent tasks;
* the interpreter's own assignment pass (Python numbers become Triton scalars) is
  applied, as Triton's interpreter does.

A task body gets its own copy of the outer variables it assigns (each warp group
has its own registers), and shares read-only access to the rest. Line numbers are
kept, so every op reports the kernel's real source line.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ..errors import SimulationError
from . import interp_adapter, libdevice
from .source_lines import kernel_files

RUN_TASKS = "__tlxwb_run_tasks"
CONSTEXPR = "__tlxwb_constexpr"
_cache: dict = {}


def _call_name(node) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Attribute):
            return f.attr
        if isinstance(f, ast.Name):
            return f.id
    return None


class _Stores(ast.NodeVisitor):
    def __init__(self):
        self.names: set[str] = set()

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)

    def visit_FunctionDef(self, node):  # nested defs have their own scope
        self.names.add(node.name)


class _TaskRewriter(ast.NodeTransformer):
    def __init__(self):
        self.counter = 0

    def visit_With(self, node: ast.With):
        self.generic_visit(node)
        if len(node.items) != 1 or _call_name(node.items[0].context_expr) != "async_tasks":
            return node
        new_body: list[ast.stmt] = []
        specs = []
        env = f"__tlxwb_env{self.counter}"
        self.counter += 1
        new_body.append(ast.Assign(targets=[ast.Name(id=env, ctx=ast.Store())],
                                   value=ast.Call(func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[]),
                                   lineno=node.lineno))
        for stmt in node.body:
            if (isinstance(stmt, ast.With) and len(stmt.items) == 1
                    and _call_name(stmt.items[0].context_expr) == "async_task"):
                fname = f"__tlxwb_task{self.counter}_{len(specs)}"
                stores = _Stores()
                for s in stmt.body:
                    stores.visit(s)
                prologue = []
                for name in sorted(stores.names):
                    # copy the outer value in (if any): each task has its own registers
                    prologue.append(ast.parse(
                        f"if {name!r} in {env}: {name} = {env}[{name!r}]").body[0])
                for p in prologue:
                    ast.copy_location(p, stmt)
                    for n in ast.walk(p):
                        ast.copy_location(n, stmt)
                fdef = ast.FunctionDef(name=fname, args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                                                                      kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                                      defaults=[]),
                                       body=prologue + stmt.body, decorator_list=[], returns=None,
                                       type_params=[], lineno=stmt.lineno)
                new_body.append(fdef)
                ctx = stmt.items[0].context_expr
                if ctx.args and isinstance(ctx.args[0], ast.Constant) and ctx.args[0].value == "default":
                    # the compiler wraps literals in constexpr before async_task sees them; so do we
                    ctx.args[0] = ast.Call(func=ast.Name(id=CONSTEXPR, ctx=ast.Load()), args=[ctx.args[0]],
                                           keywords=[])
                specs.append(ast.Tuple(elts=[ctx, ast.Name(id=fname, ctx=ast.Load()),
                                             ast.Constant(stmt.lineno)], ctx=ast.Load()))
            else:
                new_body.append(stmt)
        call = ast.Expr(ast.Call(func=ast.Name(id=RUN_TASKS, ctx=ast.Load()),
                                 args=[ast.List(elts=specs, ctx=ast.Load())], keywords=[]))
        new_body.append(call)
        node.body = new_body
        for n in new_body:
            for m in ast.walk(n):
                if not hasattr(m, "lineno"):
                    ast.copy_location(m, node)
        return node


def _tl_min(*args, **kw):
    import triton.language as tl
    if len(args) == 2 and not kw and any(isinstance(a, tl.tensor) for a in args):
        return tl.minimum(*args)
    return min(*args, **kw)


def _tl_max(*args, **kw):
    import triton.language as tl
    if len(args) == 2 and not kw and any(isinstance(a, tl.tensor) for a in args):
        return tl.maximum(*args)
    return max(*args, **kw)


def rewrite(fn, run_tasks):
    """The simulator's version of the Python function ``fn`` (a kernel or a @triton.jit helper)."""
    cached = _cache.get(fn)
    if cached is not None:
        return cached
    try:
        lines, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError) as e:
        raise SimulationError(
            f"cannot read the source of kernel {getattr(fn, '__name__', fn)!r}: {e}",
            hint="define the kernel in a file or a notebook cell (the simulator re-reads its source)") from None
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    fdef.decorator_list = []
    tree.body = [fdef]
    tree = interp_adapter.wrap_assignments(tree)
    tree = _TaskRewriter().visit(tree)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, start - 1)
    code = compile(tree, filename=filename, mode="exec")
    glb = dict(fn.__globals__)
    glb.update(libdevice.replacements(glb))
    from .tlx_ops import late_bound_builtins
    glb.update(late_bound_builtins(glb))
    glb.update(interp_adapter.interpreter_globals())
    glb[RUN_TASKS] = run_tasks
    import triton.language as tl
    glb[CONSTEXPR] = tl.constexpr
    # as Triton's code generator does: min/max of tensors are tl.minimum/tl.maximum
    glb.setdefault("min", _tl_min)
    glb.setdefault("max", _tl_max)
    if fn.__closure__:
        # a kernel defined inside a function: its free variables become globals of the copy
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                glb[name] = cell.cell_contents
            except ValueError:
                pass
    ns: dict = {}
    exec(code, glb, ns)
    out = ns[fdef.name]
    kernel_files.add(filename)
    _cache[fn] = out
    return out
