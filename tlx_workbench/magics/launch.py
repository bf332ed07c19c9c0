"""A cell's launch: finding it in the cell, evaluating its parts, and what it launches.

The last statement of a ``%%tlx`` cell, when it is a call, is the *launch*:
``kernel[grid](...)`` or ``host_fn(...)``; :func:`split_cell` finds it and
:func:`parse_launch` evaluates its callee, grid and arguments without calling it.
"""
from __future__ import annotations

import ast
import dataclasses
from typing import Any

from .errors import CellError


@dataclasses.dataclass
class Launch:
    """A launch expression, evaluated: ``fn[grid](*args, **kwargs)`` or ``fn(*args, **kwargs)``."""
    text: str
    fn: Any
    args: tuple
    kwargs: dict
    grid: Any = None
    is_kernel: bool = False
    arg_texts: tuple = ()        # the source text of each positional argument ("z", "c_desc", ...)
    file: str | None = None      # where the launch is written (the cell), and its line
    line: int | None = None

    def unbound(self) -> list[str]:
        """The kernel's parameters (constexprs included) that this launch gives no value, in order.

        Only for a plain @triton.jit kernel: an autotuner's configs or a host function may supply them.
        """
        from triton.runtime.jit import JITFunction
        if not isinstance(self.fn, JITFunction):
            return []
        import inspect
        params = inspect.signature(self.fn.fn).parameters
        given = set(list(params)[:len(self.args)]) | set(self.kwargs)
        return [n for n, p in params.items() if n not in given and p.default is p.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    def output_positions(self, outputs):
        """``outputs`` names as the launch writes them (``z``) or as the kernel calls them (``z_ptr``)."""
        if outputs is None:
            return None
        return [self.arg_texts.index(o) if isinstance(o, str) and o in self.arg_texts else o for o in outputs]

    def parameters(self) -> list[str] | None:
        """The names the callee's positional parameters have, in order (None: unknown)."""
        names = getattr(self.fn, "arg_names", None)
        if names is not None:
            return list(names)
        import inspect
        try:
            params = inspect.signature(self.fn).parameters.values()
        except (TypeError, ValueError):
            return None
        return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    def value_of(self, name: str, default=None):
        """What the launch passes for parameter ``name``, by name or by position (else ``default``)."""
        if name in self.kwargs:
            return self.kwargs[name]
        names = self.parameters() or []
        i = names.index(name) if name in names else -1
        return self.args[i] if 0 <= i < len(self.args) else default

    def with_values(self, values: dict) -> "Launch":
        """This launch with ``values`` for some of its parameters, however the launch passes them.

        A parameter the launch passes by position gets its new value in that position (a keyword
        as well would be "multiple values for argument"); any other goes by name.

        >>> def f(x, n, BLOCK=4): ...
        >>> l = Launch("f(x, n)", f, (1, 2), {})
        >>> moved = l.with_values({"n": 5, "BLOCK": 8})
        >>> moved.args, moved.kwargs
        ((1, 5), {'BLOCK': 8})
        """
        args, kwargs = list(self.args), dict(self.kwargs)
        names = self.parameters() or []
        for k, v in values.items():
            i = names.index(k) if k in names else -1
            if 0 <= i < len(args):
                args[i] = v
            else:
                kwargs[k] = v
        return dataclasses.replace(self, args=tuple(args), kwargs=kwargs)

    @property
    def name(self) -> str:
        from ..runtime.launch import launch_name
        return launch_name(self.fn)


def parse_launch(expr: "str | ast.expr", ns: dict, *, filename: str = "<launch>") -> Launch:
    """Evaluate the parts of a call expression in ``ns`` (without making the call)."""
    node = ast.parse(expr, mode="eval").body if isinstance(expr, str) else expr
    text = expr if isinstance(expr, str) else ast.unparse(expr)
    if not isinstance(node, ast.Call):
        raise CellError(f"`{text}` is not a call; the launch must look like kernel[grid](...) or fn(...)",
                        hint="end the cell with the launch, e.g. add_kernel[grid](x, y, out, n, BLOCK=1024)")

    def ev(n):
        return eval(compile(ast.Expression(body=n), filename, "eval"), ns)
    grid = None
    func = node.func
    from ..runtime.launch import is_kernel
    if isinstance(func, ast.Subscript):
        target = ev(func.value)
        if is_kernel(target):
            grid = ev(func.slice)
            fn = target
        else:
            fn = ev(func)
    else:
        fn = ev(func)
    args: list = []
    texts: list = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            more = list(ev(a.value))
            args.extend(more)
            texts.extend(f"{ast.unparse(a.value)}[{i}]" for i in range(len(more)))
        else:
            args.append(ev(a))
            texts.append(ast.unparse(a))
    kwargs: dict = {}
    for k in node.keywords:
        if k.arg is None:
            kwargs.update(ev(k.value))
        else:
            kwargs[k.arg] = ev(k.value)
    return Launch(text, fn, tuple(args), kwargs, grid, is_kernel(fn), tuple(texts),
                  file=filename if filename != "<launch>" else None, line=getattr(node, "lineno", None))


def split_cell(cell: str) -> tuple[str, "ast.Expr | None"]:
    """(the cell's source before its launch, the launch statement or None); a SyntaxError propagates.

    >>> body, node = split_cell("x = 1\\nf(x)\\n")
    >>> body, ast.unparse(node)
    ('x = 1\\n', 'f(x)')
    """
    tree = ast.parse(cell)
    if tree.body and isinstance(tree.body[-1], ast.Expr) and isinstance(tree.body[-1].value, ast.Call):
        launch_node = tree.body[-1]
        lines = cell.splitlines(keepends=True)
        return "".join(lines[:launch_node.lineno - 1]), launch_node
    return cell, None


def outputs_of(launch: Launch, outputs, value):
    """The tensors a launch wrote: the kernel's output arguments, or what a host function returned."""
    from ..runtime.launch import _tensor_of, output_positions
    if launch.is_kernel:
        return [_tensor_of(launch.args[i]) for i in output_positions(launch.fn, launch.args, outputs)]
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def capture_kernel_launch(launch: Launch, kwargs: dict):
    """(kernel, args, kwargs) of the first kernel a host function launches, without running it.

    Used to compile what a host function would launch (for --report / --memory / --ir).
    """
    if launch.is_kernel:
        return launch.fn, launch.args, kwargs
    from ..runtime.profiling import _kernels_named_by
    kernels = _kernels_named_by(launch.fn)
    if not kernels:
        raise CellError(f"{launch.name} names no @triton.jit kernel to compile",
                        hint="end the cell with the kernel launch itself: kernel[grid](...)")
    from ..compiler.launches import catch_launches
    # the first launch of a kernel the function names ends the call: nothing runs
    with catch_launches(kernels=[k for _, k in kernels], stop=True) as caught:
        launch.fn(*launch.args, **kwargs)
    captured = [(la.jit, la.args, la.kwargs) for la in caught.launches]
    if not captured:
        raise CellError(f"{launch.name} launched no kernel", hint="call the kernel inside the function")
    return captured[0]



def _is_descriptor(a) -> bool:
    return type(a).__name__ == "TensorDescriptor" and hasattr(a, "block_shape")


def descriptor_origin(launch: Launch, kernel_file: str | None, kernel_line: int | None):
    """(line, name) of the cell's host statement that made the descriptor the kernel line copies with, or None.

    The kernel line's TMA call names a kernel parameter (``in_desc``); the launch passes a variable
    there (``desc``); the cell's last top-level assignment to it is the line that set its block_shape.
    """
    import linecache
    import textwrap
    if launch.file is None or not launch.is_kernel:
        return None
    descs = [i for i, a in enumerate(launch.args) if _is_descriptor(a)]
    names = launch.parameters() or []
    chosen = None
    source = linecache.getline(kernel_file, kernel_line).strip() if kernel_file and kernel_line else ""
    try:
        call = ast.parse(textwrap.dedent(source)).body[0]
        firsts = [c.args[0].id for c in ast.walk(call) if isinstance(c, ast.Call) and c.args
                  and isinstance(c.args[0], ast.Name)]
    except (SyntaxError, IndexError):
        firsts = []
    for name in firsts:
        if name in names and names.index(name) in descs:
            chosen = names.index(name)
            break
    if chosen is None and len(descs) == 1:
        chosen = descs[0]
    if chosen is None or chosen >= len(launch.arg_texts):
        return None
    var = launch.arg_texts[chosen]
    try:
        tree = ast.parse("".join(linecache.getlines(launch.file)))
    except SyntaxError:
        return None
    found = None
    for node in tree.body:                 # the host code: top-level statements, not the @jit functions
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == var for t in targets for n in ast.walk(t)):
                found = node.lineno
    if found is None and launch.line is not None and not var.isidentifier():
        found = launch.line                # made inside the launch itself: TensorDescriptor(...) as an argument
    return (found, var) if found is not None else None


def _launch_name_of(err, launch: Launch):
    """An error about a kernel argument (``err.argument``, the parameter) also says what the launch passes
    there (``out`` for ``y_ptr``), when that is not the parameter's own name."""
    param = getattr(err, "argument", None)
    names = launch.parameters() or []
    if param is None or param not in names or names.index(param) >= len(launch.arg_texts):
        return err
    text = launch.arg_texts[names.index(param)]
    if text == param or f"`{text}`" in err.message:
        return err
    new = type(err)(err.message.replace(f" through {param}:", f" through {param} (`{text}` in the launch):", 1),
                    file=err.file, line=err.line, hint=err.hint, detail=err.detail)
    new.__dict__.update({k: v for k, v in err.__dict__.items() if k not in new.__dict__})
    return new


def blame_host_line(err, launch: Launch | None):
    """An error whose fix is a descriptor's block_shape, moved to the cell's line that made the descriptor
    (the kernel line that failed is named in the message); an error about a kernel argument, with the
    launch's name for it; any other error as it is."""
    if launch is not None and getattr(err, "argument", None) is not None:
        return _launch_name_of(err, launch)
    facts = getattr(err, "block_shape_mismatch", None)
    if facts is None or launch is None:
        return err
    origin = descriptor_origin(launch, err.file, err.line)
    if origin is None or origin[0] == err.line and err.file == launch.file:
        return err
    line, var = origin
    from .cells import where
    block = facts.get("block_shape") or next((list(a.block_shape) for a in launch.args if _is_descriptor(a)), "")
    copy = f"the TMA copy at {where(err.file, err.line)}"
    if "buffer_shape" in facts:
        what = (f"{var}'s block_shape {block} (set here) is not the shape of {facts['buffer']}, "
                f"{facts['buffer_shape']}, which {copy} loads it into")
    else:
        what = (f"{var}'s block_shape {block} (set here) gives {facts['block']} elements per copy, but {copy} "
                f"loads them into a buffer of {facts['buffer']} elements")
    new = type(err)(what, file=launch.file, line=line, hint=err.hint, detail=err.detail or err.message)
    new.__dict__.update({k: v for k, v in err.__dict__.items() if k not in new.__dict__})
    new.kernel_line = (err.file, err.line)
    return new
