"""The source rewrite behind the GPU profiler's clock recorder: which TLX ops of a kernel are timed (:data:`OPS`), the
event sites they become, and the kernel's (and its ``@triton.jit`` helpers') source with every such op bracketed
by records (``mode="clock"``) or Proton scopes (``mode="proton"``).

Source to source, AST only, nothing compiled: ``runtime/instrument.py`` compiles what this writes and decodes what
it records (its docstring gives the record buffer's layout and the helper-call rules); the simulator's recorder
(``sim/timing/recorder.py``) reads the same sites to charge the recorder's cost where the GPU pays it.

>>> new_source, sites, tasks = instrument_source(kernel_source, first_line=10)     # doctest: +SKIP
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import textwrap

MAX_REPLICAS = 8
PARAM = "_wb_prof"
MAX_HELPER_DEPTH = 4          # helper calls nested deeper than this are not timed
_STATE = (PARAM, "_wb_base", "_wb_n", "_wb_lim")     # the leading parameters of an instrumented helper

# op name -> (span kind, shown name)
OPS = {
    "barrier_wait": "wait",
    "named_barrier_wait": "sync",
    "barrier_arrive": "arrive",
    "named_barrier_arrive": "arrive",
    "barrier_expect_bytes": "other",
    "async_descriptor_load": "tma",
    "async_descriptor_store": "store",
    "async_load": "load",
    "async_dot": "mma",
    "async_dot_wait": "wait",
    "async_descriptor_store_wait": "wait",
    "async_load_wait_group": "wait",
    "async_dot_scaled": "mma",
    "tcgen05_commit": "mma",
    "store": "store",
    "load": "load",
    "dot": "mma",
    "descriptor_load": "load",
    "descriptor_store": "store",
    "fence_async_shared": "sync",
}
#: the ops ``instrument(ops="waits")`` times: a task stopped until something else happens
WAIT_OPS = tuple(op for op, kind in OPS.items() if kind in ("wait", "sync") and op != "fence_async_shared")


def op_set(ops) -> frozenset:
    """The op names ``ops`` names: None (every op of :data:`OPS`), ``"waits"`` (:data:`WAIT_OPS`), or names.

    >>> sorted(op_set("waits"))
    ['async_descriptor_store_wait', 'async_dot_wait', 'async_load_wait_group', 'barrier_wait', 'named_barrier_wait']
    """
    if ops is None or ops == "all":
        return frozenset(OPS)
    if ops == "waits":
        return frozenset(WAIT_OPS)
    names = frozenset([ops] if isinstance(ops, str) else ops)
    unknown = names - set(OPS)
    if unknown:
        raise ValueError(f"ops {sorted(unknown)} are not ops the recorder times: choose among {sorted(OPS)}, "
                         f"or 'waits'")
    return names


@dataclasses.dataclass
class EventSite:
    id: int
    op: str
    kind: str
    line: int
    lane_task: str
    barrier: str | None = None
    file: str | None = None        # the helper's file (None: the kernel's)
    func: str | None = None        # the @jit helper the op is in (None: the kernel itself)


@dataclasses.dataclass
class HelperCopy:
    """The instrumented copy of one ``@triton.jit`` helper for the calls of one task."""
    name: str                      # _wb_<helper>
    helper: str                    # the helper's own name
    source: str                    # the rewritten ``def`` (no decorator)
    file: str
    first_line: int
    globals: dict = dataclasses.field(repr=False)   # its module's globals: the copy runs among its names
    returns: bool = False          # returns a value: call sites assign ``value, _wb_n``


def _call_op(node, ops=None) -> str | None:
    """'barrier_wait' for ``tlx.barrier_wait(...)`` / ``tl.store(...)`` calls of interest (among ``ops``)."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("tlx", "tl") \
            and f.attr in (OPS if ops is None else ops):
        return f.attr
    return None


def _stmt_op(stmt, ops=None) -> tuple[str, ast.Call] | None:
    call = None
    if isinstance(stmt, ast.Expr):
        call = stmt.value
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
        call = stmt.value
    op = _call_op(call, ops)
    return (op, call) if op else None


def _is_async_task(item) -> ast.Call | None:
    e = item.context_expr
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "async_task":
        return e
    return None


def _is_async_tasks(item) -> bool:
    e = item.context_expr
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "async_tasks"


class _Helpers:
    """Finds the ``@triton.jit`` helpers a kernel calls and makes their instrumented copies (clock mode)."""

    def __init__(self, ops=None):
        self.ops = ops                   # the op names timed (None: every one of OPS)
        self.copies: list[HelperCopy] = []
        self._info: dict = {}            # id(function) -> (fdef, first_line, file) or None
        self._has_ops: dict = {}         # (id(function), depth left) -> bool
        self._copy: dict = {}            # (id(function), task) -> HelperCopy or None
        self._names: set = set()
        self.dropped = 0                 # values of helper calls made as statements: _wb_drop<k>, one per site

    @staticmethod
    def resolve(func_node, scope: dict):
        """The Python function of the @jit helper that ``func_node`` (``f`` or ``mod.f``) names in ``scope``."""
        from triton.runtime.jit import JITFunction
        obj = None
        if isinstance(func_node, ast.Name):
            obj = scope.get(func_node.id)
        elif isinstance(func_node, ast.Attribute) and isinstance(func_node.value, ast.Name):
            mod = scope.get(func_node.value.id)
            if inspect.ismodule(mod):
                obj = getattr(mod, func_node.attr, None)
        if not isinstance(obj, JITFunction):
            return None
        fn = obj.fn
        return fn if inspect.isfunction(fn) else None

    def info(self, fn):
        if id(fn) not in self._info:
            try:
                lines, first = inspect.getsourcelines(fn)
                tree = ast.parse(textwrap.dedent("".join(lines)))
                fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
                self._info[id(fn)] = (fdef, first, fn.__code__.co_filename)
            except (OSError, TypeError, SyntaxError, StopIteration):
                self._info[id(fn)] = None
        return self._info[id(fn)]

    def has_ops(self, fn, depth: int) -> bool:
        """Whether ``fn``'s statements (or those of helpers it calls, ``depth`` levels more) hold ops to time."""
        key = (id(fn), depth)
        if key not in self._has_ops:
            self._has_ops[key] = False          # a helper that calls itself: no ops through that call
            info = self.info(fn)
            found = False
            if info is not None:
                for stmt in _simple_stmts(info[0].body):
                    if _stmt_op(stmt, self.ops):
                        found = True
                    elif depth > 0:
                        call = _stmt_call(stmt)
                        callee = self.resolve(call.func, fn.__globals__) if call is not None else None
                        found = callee is not None and self.has_ops(callee, depth - 1)
                    if found:
                        break
            self._has_ops[key] = found
        return self._has_ops[key]

    def copy_for(self, fn, task: str, depth: int, sites: list) -> HelperCopy | None:
        """The instrumented copy of ``fn`` for calls from ``task`` (None: its calls stay untimed)."""
        key = (id(fn), task)
        if key in self._copy:
            return self._copy[key]
        self._copy[key] = None                   # recursion: the inner call stays untimed
        fdef, first, file = self.info(fn)
        returns = _return_shape(fdef)
        if returns is None:
            return None
        fdef = copy.deepcopy(fdef)
        fdef.decorator_list = []
        name = f"_wb_{fn.__name__}"
        i = 1
        while name in self._names:
            i += 1
            name = f"_wb_{fn.__name__}_{i}"
        self._names.add(name)
        fdef.name = name
        fdef.args.args[:0] = [ast.arg(arg=a) for a in _STATE]
        rw = _Rewriter(first, "clock", file=file, func=fn.__name__, scope=fn.__globals__, helpers=self,
                       sites=sites, depth=depth + 1)
        fdef.body = rw.stmts(fdef.body, task)
        fdef.body = _ReturnState().visit_body(fdef.body)
        if not returns and not _terminates(fdef.body):
            fdef.body.append(ast.parse("return _wb_n").body[0])
        ast.fix_missing_locations(fdef)
        cp = HelperCopy(name, fn.__name__, ast.unparse(fdef), file, first, fn.__globals__, returns)
        self.copies.append(cp)
        self._copy[key] = cp
        return cp


def _stmt_call(stmt) -> ast.Call | None:
    """The call of a statement ``f(...)`` or ``target = f(...)`` (one target), else None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def _simple_stmts(body: list):
    """The statements the rewriter looks at: through with/for/while/if bodies, not into other defs."""
    for stmt in body:
        if isinstance(stmt, (ast.With, ast.For, ast.While)):
            yield from _simple_stmts(stmt.body)
        elif isinstance(stmt, ast.If):
            yield from _simple_stmts(stmt.body)
            yield from _simple_stmts(stmt.orelse)
        else:
            yield stmt


def _returns(node):
    """The return statements of a function body (not those of nested defs)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Return):
            yield child
        elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _returns(child)


def _return_shape(fdef) -> bool | None:
    """True: every return gives a value; False: none does (bare returns, falling off the end); None: mixed."""
    valued = [r.value is not None and not (isinstance(r.value, ast.Constant) and r.value.value is None)
              for r in _returns(fdef)]
    if not valued:
        return False
    if all(valued):
        return True if _terminates(fdef.body) else None
    return False if not any(valued) else None


def _terminates(body: list) -> bool:
    """Every path through ``body`` ends in a return."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _terminates(last.body) and _terminates(last.orelse)
    return False


class _ReturnState(ast.NodeTransformer):
    """``return x`` -> ``return x, _wb_n``; bare ``return`` -> ``return _wb_n`` (not inside nested defs)."""

    def visit_body(self, body):
        return [self.visit(s) for s in body]

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Return(self, node):
        n = ast.Name(id="_wb_n", ctx=ast.Load())
        if node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None):
            node.value = n
        else:
            node.value = ast.Tuple(elts=[node.value, n], ctx=ast.Load())
        return node


class _Rewriter:
    def __init__(self, first_line: int, mode: str = "clock", *, file: str | None = None, func: str | None = None,
                 scope: dict | None = None, helpers: _Helpers | None = None, sites: list | None = None,
                 tasks: list | None = None, depth: int = 0, ops=None):
        self.first_line = first_line
        self.mode = mode            # "clock": cycle-counter records; "proton": Proton scopes
        self.file, self.func = file, func
        self.sites: list[EventSite] = [] if sites is None else sites
        self.tasks: list[str] = [] if tasks is None else tasks
        self.scope = scope          # names the code sees (helper calls resolve here); None: no helpers
        self.helpers = helpers if helpers is not None or mode != "clock" or scope is None else _Helpers(ops)
        self.ops = helpers.ops if helpers is not None else ops
        self.depth = depth

    def prologue(self, task_idx: int, replicated: bool) -> list[ast.stmt]:
        if self.mode == "proton":
            return []
        replica = "tlx.async_task_replica_id()" if replicated else "0"
        src = (f"_wb_pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0) + "
               f"tl.program_id(2) * tl.num_programs(0) * tl.num_programs(1)\n"
               f"_wb_base, _wb_lim = _wb_start({PARAM}, _wb_pid, {task_idx * MAX_REPLICAS} + {replica})\n"
               f"_wb_n = 0\n")
        return ast.parse(src).body

    def epilogue(self) -> list[ast.stmt]:
        if self.mode == "proton":
            return []
        return ast.parse(f"_wb_finish({PARAM}, _wb_base, _wb_lim, _wb_n)").body

    def helper_call(self, stmt, task: str) -> list | None:
        """``stmt`` calling the instrumented copy of a helper with ops to time, or None."""
        if self.helpers is None or self.depth >= MAX_HELPER_DEPTH:
            return None
        call = _stmt_call(stmt)
        fn = self.helpers.resolve(call.func, self.scope) if call is not None else None
        if fn is None or not self.helpers.has_ops(fn, MAX_HELPER_DEPTH - self.depth - 1):
            return None
        if isinstance(stmt, ast.Assign) and not _return_shape(self.helpers.info(fn)[0]):
            return None                 # assigns what a helper without a value returns: leave it alone
        cp = self.helpers.copy_for(fn, task, self.depth, self.sites)
        if cp is None:
            return None
        new_call = ast.Call(func=ast.Name(id=cp.name, ctx=ast.Load()),
                            args=[ast.Name(id=a, ctx=ast.Load()) for a in _STATE] + call.args,
                            keywords=call.keywords)
        n = ast.Name(id="_wb_n", ctx=ast.Store())
        if isinstance(stmt, ast.Assign):
            target = ast.Tuple(elts=[stmt.targets[0], n], ctx=ast.Store())
        elif cp.returns:
            # a name per call site: one shared name could become a loop-carried variable of two types
            drop = ast.Name(id=f"_wb_drop{self.helpers.dropped}", ctx=ast.Store())
            self.helpers.dropped += 1
            target = ast.Tuple(elts=[drop, n], ctx=ast.Store())
        else:
            target = n
        return [ast.copy_location(ast.Assign(targets=[target], value=new_call), stmt)]

    def stmts(self, body: list, task: str) -> list:
        out = []
        for stmt in body:
            found = _stmt_op(stmt, self.ops)
            if found and task is not None:
                op, call = found
                barrier = None
                if op in ("barrier_wait", "barrier_arrive", "barrier_expect_bytes") and (call.args or call.keywords):
                    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "bar"),
                                                              call.keywords[0].value)
                    barrier = ast.unparse(arg)
                site = EventSite(len(self.sites), op, OPS[op], self.first_line + stmt.lineno - 1, task, barrier,
                                 self.file, self.func)
                self.sites.append(site)
                if self.mode == "proton":
                    scope = proton_scope_name(site)
                    out += (ast.parse(f"pl.enter_scope({scope!r})").body + [stmt]
                            + ast.parse(f"pl.exit_scope({scope!r})").body)
                    continue
                pre = ast.parse("_wb_t0 = _wb_clock()").body
                post = ast.parse(f"_wb_t1 = _wb_clock()\n"
                                 f"_wb_rec({PARAM}, _wb_base, _wb_n, _wb_lim, {site.id}, _wb_t0, _wb_t1)\n"
                                 f"_wb_n = _wb_n + 1\n").body
                out += pre + [stmt] + post
                continue
            replaced = self.helper_call(stmt, task) if task is not None else None
            if replaced is not None:
                out += replaced
                continue
            if isinstance(stmt, ast.With):
                tasks_item = next((it for it in stmt.items if _is_async_tasks(it)), None)
                task_item = next((it for it in stmt.items if _is_async_task(it)), None)
                if task_item is not None:
                    call = _is_async_task(task_item)
                    name = (call.args[0].value if call.args and isinstance(call.args[0], ast.Constant)
                            else f"task{len(self.tasks)}")
                    replicated = any(k.arg == "replicate" for k in call.keywords)
                    idx = len(self.tasks)
                    self.tasks.append(name)
                    body = self.stmts(stmt.body, name)
                    tail = [] if body and isinstance(body[-1], ast.Return) else self.epilogue()
                    stmt.body = self.prologue(idx, replicated) + body + tail
                elif tasks_item is not None:
                    stmt.body = self.stmts(stmt.body, None)
                else:
                    stmt.body = self.stmts(stmt.body, task)
            elif isinstance(stmt, (ast.For, ast.While)):
                stmt.body = self.stmts(stmt.body, task)
            elif isinstance(stmt, ast.If):
                stmt.body = self.stmts(stmt.body, task)
                stmt.orelse = self.stmts(stmt.orelse, task)
            out.append(stmt)
        return out


def _before_returns(body: list, make) -> list:
    """``body`` with the statements ``make()`` gives inserted before each ``return`` (not in nested defs)."""
    out = []
    for stmt in body:
        if isinstance(stmt, ast.Return):
            out += make()
        elif isinstance(stmt, (ast.If, ast.For, ast.While, ast.With)):
            stmt.body = _before_returns(stmt.body, make)
            if getattr(stmt, "orelse", None):
                stmt.orelse = _before_returns(stmt.orelse, make)
        out.append(stmt)
    return out


def _uses_async_tasks(fdef) -> bool:
    return any(isinstance(n, ast.With) and any(_is_async_tasks(it) for it in n.items) for n in ast.walk(fdef))


def proton_scope_name(site: EventSite) -> str:
    """The Proton scope name of one op site: ``barrier_wait@120#3`` (op, source line, site id)."""
    return f"{site.op}@{site.line}#{site.id}"


def _rewrite(source: str, first_line: int, mode: str, scope: dict | None, file: str | None, ops=None):
    """(kernel ``def`` source, sites, task names, helper copies) of one kernel's source (timing ``ops``)."""
    tree = ast.parse(textwrap.dedent(source))
    fdef = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    fdef.decorator_list = []
    if mode == "clock":
        fdef.args.args.insert(0, ast.arg(arg=PARAM))
    rw = _Rewriter(first_line, mode, file=file, scope=scope if mode == "clock" else None, ops=ops)
    if _uses_async_tasks(fdef):
        fdef.body = rw.stmts(fdef.body, None)
    else:
        rw.tasks.append("default")
        body = _before_returns(rw.stmts(fdef.body, "default"), rw.epilogue)
        tail = [] if body and isinstance(body[-1], ast.Return) else rw.epilogue()
        fdef.body = rw.prologue(0, False) + body + tail
    ast.fix_missing_locations(tree)
    copies = rw.helpers.copies if rw.helpers is not None else []
    return ast.unparse(tree), rw.sites, rw.tasks, copies


def instrument_source(source: str, first_line: int = 1, mode: str = "clock", scope: dict | None = None,
                      file: str | None = None, ops=None) -> tuple[str, list[EventSite], list[str]]:
    """Rewrite one kernel's ``def`` source; returns (new source, event sites, task names).

    ``mode="clock"`` adds the record buffer parameter and cycle-counter records;
    ``mode="proton"`` brackets the same ops with ``pl.enter_scope``/``pl.exit_scope``.
    ``scope`` (clock mode): the names the kernel sees (its module's globals); calls of
    ``@triton.jit`` helpers found there are timed too, and the new source then starts
    with the helpers' instrumented copies (``def _wb_<name>(...)``), the kernel last. ``ops``: the
    op names to time (see :func:`op_set`; default every op of :data:`OPS`).
    """
    new_src, sites, tasks, copies = _rewrite(source, first_line, mode, scope, file, op_set(ops))
    return "\n\n".join([c.source for c in copies] + [new_src]), sites, tasks


