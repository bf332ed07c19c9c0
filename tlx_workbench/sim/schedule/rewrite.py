"""Turn a kernel's Python source into something the simulator can schedule.

Triton's interpreter runs a kernel function directly, so a ``with tlx.async_task(...)``
block would run inline, one after another — a producer/consumer pipeline would then
wait forever. This module rewrites (once per function) the kernel's AST:

* every ``with tlx.async_tasks():`` block has each ``with tlx.async_task(...):`` body
  turned into a closure, and the block ends with one call that hands all of them
  (with their ``async_task`` objects, which carry ``replicate`` / ``num_warps``) to
  the simulator, which runs them as concurrent tasks;
* the interpreter's own assignment pass (Python numbers become Triton scalars) is
  applied, as Triton's interpreter does;
* every ``if`` asks ``threads.branch`` which way to go, so a condition that differs between a
  task's threads (from ``tlx.thread_id``) runs each branch under those threads (``sim/ops/threads.py``).

A task body gets its own copy of the outer variables it assigns (each warp group
has its own registers), and shares read-only access to the rest. Line numbers are
kept, so every op reports the kernel's real source line.
"""
from __future__ import annotations

import ast
import inspect
import textwrap

from ...errors import SimulationError
from .. import interp_adapter
from ..ops import libdevice, threads
from ..diagnosis.source_lines import kernel_files

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


_BRANCH, _ENTER, _LEAVE = "__tlxwb_branch", "__tlxwb_enter", "__tlxwb_leave"
_JUMP, _DIVERGED = "__tlxwb_jump", "__tlxwb_diverged"
_IF_GLOBALS = {_BRANCH: threads.branch, _ENTER: threads.enter, _LEAVE: threads.leave, _JUMP: threads.refuse_jump,
               _DIVERGED: threads.diverged}


def _jump(stmts) -> str | None:
    """The first ``return``/``break``/``continue`` that would leave ``stmts`` (nested defs and loops aside)."""
    def walk(node, in_loop):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(node, ast.Return):
            return "return"
        if isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            return "break" if isinstance(node, ast.Break) else "continue"
        loop = in_loop or isinstance(node, (ast.For, ast.While))
        for child in ast.iter_child_nodes(node):
            w = walk(child, loop)
            if w:
                return w
        return None
    for s in stmts:
        w = walk(s, False)
        if w:
            return w
    return None


def _call(name, *args):
    return ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=list(args), keywords=[])


class _IfRewriter(ast.NodeTransformer):
    """``if c: A else: B`` -> ``k = branch(c, line)``; 1: A, 0: B, 2 (``c`` differs between the threads): A under
    the threads where it holds, B under the others, then every name they assign marks itself diverged."""

    def __init__(self):
        self.counter = 0

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        line = node.lineno
        k = f"__tlxwb_if{self.counter}"
        self.counter += 1
        # keep the condition's value (a tensor) in k for enter(); the branch taken is asked separately
        cond = ast.Assign(targets=[ast.Name(id=k, ctx=ast.Store())], value=node.test)
        way = _call(_BRANCH, ast.Name(id=k, ctx=ast.Load()), ast.Constant(line))
        ways = ast.Assign(targets=[ast.Name(id=k + "w", ctx=ast.Store())], value=way)

        def is_(v):
            return ast.Compare(left=ast.Name(id=k + "w", ctx=ast.Load()), ops=[ast.Eq()], comparators=[ast.Constant(v)])
        jump = _jump(node.body) or _jump(node.orelse)
        if jump:
            # diverged: refused (the threads cannot part ways); uniform: the branch as written
            out = [cond, ways, ast.If(test=is_(2), body=[ast.Expr(_call(_JUMP, ast.Constant(line), ast.Constant(jump)))],
                                      orelse=[ast.If(test=is_(1), body=node.body, orelse=node.orelse)])]
        else:
            # each branch once (an elif chain copied per level grew as 2^depth): it runs when the condition is
            # uniformly its way, or, when it differs between the threads, under the threads that take it
            out = [cond, ways]
            for sense, body in ((1, node.body), (0, node.orelse)):
                if not body:
                    continue
                masked = ast.BoolOp(op=ast.And(), values=[
                    is_(2), _call(_ENTER, ast.Name(id=k, ctx=ast.Load()), ast.Constant(bool(sense)), ast.Constant(line))])
                # no try/finally: the branch has no jump, and an error ends the launch (Python allows 20 nested
                # blocks, so a try per level would refuse an elif chain longer than that)
                leave = ast.If(test=is_(2), body=[ast.Expr(_call(_LEAVE))], orelse=[])
                out.append(ast.If(test=ast.BoolOp(op=ast.Or(), values=[is_(sense), masked]),
                                  body=body + [leave], orelse=[]))
            stores = _Stores()
            for st in node.body + node.orelse:
                stores.visit(st)
            # the kernel's own names (an inner if's condition and way are the rewriter's, used up by then)
            names = sorted(n for n in stores.names if not n.startswith("__tlxwb_if"))
            if names:
                out.append(ast.If(test=is_(2), body=[
                    ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                               value=_call(_DIVERGED, ast.Constant(name), ast.Constant(line)))
                    for name in names], orelse=[]))
        for stmt in out:
            for n in ast.walk(stmt):
                if not hasattr(n, "lineno"):
                    ast.copy_location(n, node)
        return out


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
    tree = _IfRewriter().visit(tree)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, start - 1)
    code = compile(tree, filename=filename, mode="exec")
    glb = dict(fn.__globals__)
    glb.update(libdevice.replacements(glb))
    from ..ops.tlx_ops import late_bound_builtins
    glb.update(late_bound_builtins(glb))
    glb.update(interp_adapter.interpreter_globals())
    glb[RUN_TASKS] = run_tasks
    import triton.language as tl
    glb[CONSTEXPR] = tl.constexpr
    glb.update(_IF_GLOBALS)
    # as Triton's code generator does: min/max of tensors are tl.minimum/tl.maximum
    glb.setdefault("min", _tl_min)
    glb.setdefault("max", _tl_max)
    # Python's range, except over CTA-dependent bounds while a wave records (sim/schedule/batch.py)
    from .batch import wave_range
    glb.setdefault("range", wave_range)
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
