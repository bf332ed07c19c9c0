"""``%tlx_explore``: a config sweep from one line, a thin shell over :func:`tlx_workbench.explore.explore`.

Everything it does is one call of the Python API (``explore(problem, space, shapes, stages=..., ...)``);
the magic reads the option line, names the problem and space (a library kernel, or variables of the
notebook), checks shapes and stages before any work starts, then shows the :class:`Exploration` (its
static view, or the live ``ExplorerWidget`` with ``--widget``) and keeps it under ``-o``.

>>> parse_shapes("4096x4096x4096, 2048x2048x512")
[(4096, 4096, 4096), (2048, 2048, 512)]
>>> parse_stages("static,simulated")
('static', 'simulated')
"""
from __future__ import annotations

import difflib
import re

from IPython.core.magic_arguments import argument

from .errors import CellError

STAGES = ("static", "simulated", "measured")
SEARCHES = ("exhaustive", "random", "model")
BACKENDS = ("process", "ray", "serial")

EXPLORE_OPTIONS = (
    argument("kernel", nargs="?", default=None,
             help="a library kernel: gemm_ws, gemm_pingpong, gemm_streamk, gemm_pipelined or attention "
                  "(or name your own with --problem)"),
    argument("--problem", default=None, help="a variable of the notebook holding a tlx_workbench.explore.Problem"),
    argument("--space", default=None,
             help="a variable (or expression) of the notebook: a Space, a list of configs, a dict knob -> values, "
                  "or an autotuned kernel; default the library's space of the kernel"),
    argument("--shapes", default=None, help="problem shapes, numbers joined by x, comma-separated: "
                                            "4096x4096x4096,8192x8192x8192"),
    argument("--stages", default=None, help="comma-separated, cheapest first: static,simulated,measured "
                                            "(default all three; measured only where a GPU or --measure is)"),
    argument("--search", default=None, help="which configs the measured stage measures: exhaustive (default), "
                                            "random or model (rank by simulated time)"),
    argument("--measure", default=None, help="where measurements come from: a store file of an earlier GPU run "
                                             "to replay, or ray (default this host's GPUs)"),
    argument("--store", default=None, help="the SQLite results file (default one per user); rows already there "
                                           "are not run again"),
    argument("--backend", default=None, help="process (a local pool, default), ray or serial"),
    argument("--workers", type=int, default=None, help="CPU workers of the process pool or Ray"),
    argument("--address", default=None, help="address of an existing Ray cluster (--backend ray)"),
    argument("--gpu", default=None, help="the GPU the static stage compiles for and the cost model predicts "
                                         "(H100, H200, B200; default H200)"),
    argument("--seed", type=int, default=None, help="simulator schedule seed"),
    argument("--sim-shape", default=None, dest="sim_shape",
             help="where the simulated stage proves each config: small (the problem's small shape, default), "
                  "real (the explored shape itself, every CTA) or a shape such as 512x512x1024"),
    argument("--timeout", type=float, default=None, help="seconds before a GPU launch counts as hung"),
    argument("--background", action="store_true",
             help="return at once; the Exploration (and --widget) fills as rows arrive"),
    argument("--widget", action="store_true", help="show the live ExplorerWidget instead of the static view"),
    argument("--no-progress", action="store_true", dest="no_progress", help="no progress bars"),
    argument("--no-raise", action="store_true", dest="no_raise",
             help="show an error without failing the cell"),
    argument("-o", "--output", default=None, dest="output", help="keep the Exploration in this variable"),
)

_SHAPE = re.compile(r"^\d+(x\d+)*$")
_EXAMPLE = "--shapes 4096x4096x4096 (several: 4096x4096x4096,8192x8192x8192)"


def parse_shapes(text: str | None) -> list[tuple[int, ...]]:
    """``"4096x4096x4096,8192x8192x8192"`` as a list of tuples; a CellError that says how to write them.

    >>> parse_shapes("1x2x32x128")
    [(1, 2, 32, 128)]
    """
    if not text or not text.strip():
        raise CellError("%tlx_explore needs the problem shapes to explore", hint=f"add {_EXAMPLE}")
    out = []
    for part in re.split(r"[,\s;]+", text.strip().strip("[]()")):
        if not part:
            continue
        p = part.lower().replace("×", "x").strip("()[]")
        if not _SHAPE.match(p):
            raise CellError(f"--shapes: {part!r} is not a shape",
                            hint=f"write each shape as whole numbers joined by x, e.g. {_EXAMPLE}")
        dims = tuple(int(d) for d in p.split("x"))
        if any(d <= 0 for d in dims):
            raise CellError(f"--shapes: {part!r} has a dimension of 0", hint="every dimension is a positive number")
        out.append(dims)
    if len({len(s) for s in out}) > 1:
        raise CellError(f"--shapes: {text.strip()!r} mixes shapes of {sorted({len(s) for s in out})} dimensions",
                        hint="every shape of one problem has the same number of dimensions")
    return out


def _one_of(what: str, value: str, allowed, option: str | None = None) -> str:
    """``value`` if it is one of ``allowed``; else a CellError naming the closest one."""
    if value in allowed:
        return value
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.5)
    hint = (f"did you mean {close[0]}? " if close else "") + f"use one of {', '.join(allowed)}"
    raise CellError((f"{option}: " if option else "") + f"unknown {what} {value!r}", hint=hint)


def parse_stages(text: str | None) -> tuple[str, ...]:
    """``"static,simulated"`` as a tuple of stage names (each checked; did-you-mean for a misspelt one)."""
    if text is None:
        return STAGES
    names = [s.strip() for s in re.split(r"[,\s]+", text) if s.strip()]
    if not names:
        raise CellError("--stages is empty", hint="name one or more of static, simulated, measured")
    for s in names:
        _one_of("stage", s, STAGES, "--stages")
    return tuple(names)


def parse_sim_shape(text: str | None, shapes=()):
    """``--sim-shape``: "small", "real" or one shape (``512x512x1024``), of the explored shapes' rank.

    >>> parse_sim_shape("real"), parse_sim_shape("512x512x1024")
    ('real', (512, 512, 1024))
    """
    if text is None:
        return None
    t = text.strip()
    if t in ("small", "real"):
        return t
    if not re.match(r"^[\d\sx×,()\[\]]+$", t.lower()):
        _one_of("sim shape", t, ("small", "real"), "--sim-shape")
    try:
        got = parse_shapes(t)
    except CellError as e:
        raise CellError(f"--sim-shape: {t!r} is not a shape",
                        hint="small, real, or one shape as whole numbers joined by x, e.g. 512x512x1024") from e
    if len(got) != 1:
        raise CellError(f"--sim-shape: {t!r} names {len(got)} shapes",
                        hint="give one: small, real or e.g. 512x512x1024")
    if shapes and len(got[0]) != len(shapes[0]):
        raise CellError(f"--sim-shape: {t!r} has {len(got[0])} dimensions and the explored shapes {len(shapes[0])}",
                        hint="give a shape of the problem's rank, or small / real")
    return got[0]


def _lookup(ns: dict, expr: str, what: str):
    try:
        return eval(expr, ns)
    except NameError:
        raise CellError(f"{what}: the notebook has no variable `{expr}`",
                        hint=f"define `{expr}` in a cell above, or check its spelling") from None
    except Exception as e:   # noqa: BLE001 - the user's expression
        raise CellError(f"{what}: cannot evaluate `{expr}`: {type(e).__name__}: {e}",
                        hint=f"{what} is a variable or an expression over the notebook's variables") from None


def _a(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def problem_of(args, ns: dict):
    """The Problem the option line names: ``--problem VAR`` or a library kernel's name."""
    from ..explore import Problem
    from ..explore.library import GEMMS
    if args.problem is not None and args.kernel is not None:
        raise CellError(f"%tlx_explore: both a library kernel ({args.kernel}) and --problem {args.problem} given",
                        hint="name one: a library kernel, or your own Problem with --problem VAR")
    if args.problem is not None:
        p = _lookup(ns, args.problem, "--problem")
        if not isinstance(p, Problem):
            raise CellError(f"--problem: `{args.problem}` is not a Problem ({_a(type(p).__name__)})",
                            hint="build one with tlx_workbench.explore.Problem(name=..., launch=..., make_inputs=...)")
        return p
    names = GEMMS + ("attention",)
    if args.kernel is None:
        raise CellError("%tlx_explore needs a kernel to explore",
                        hint=f"name a library kernel ({', '.join(names)}) or your own Problem with --problem VAR")
    from ..explore import library
    if args.kernel == "attention_causal":
        return library.problem("attention", causal=True)
    return library.problem(_one_of("library kernel", args.kernel, names))


def check_shapes(problem, shapes) -> None:
    """A shape the problem cannot take fails here, before any stage runs (its work function reads it)."""
    fn = problem.flops or problem.bytes
    if fn is not None:
        for s in shapes:
            try:
                fn(s)
            except Exception as e:   # noqa: BLE001 - e.g. unpacking 3 dims into (Z, H, N, D)
                dims = "x".join(str(d) for d in s)
                raise CellError(f"--shapes: {problem.name} cannot take the shape {dims} ({e})",
                                hint=f"give {problem.name} shapes of the right rank: gemm kernels M x N x K "
                                     f"(4096x4096x4096), attention Z x H x N x D (4x32x4096x128)") from None


def explore_call(args, ns: dict) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` of the :func:`~tlx_workbench.explore.explore` call the option line asks for."""
    from ..target import gpu_model
    problem = problem_of(args, ns)
    shapes = parse_shapes(args.shapes)
    check_shapes(problem, shapes)
    kwargs: dict = {"stages": parse_stages(args.stages)}
    if args.search is not None:
        kwargs["search"] = _one_of("search", args.search, SEARCHES, "--search")
    if args.backend is not None:
        kwargs["backend"] = _one_of("backend", args.backend, BACKENDS, "--backend")
    if args.workers is not None:
        if args.workers < 1:
            raise CellError(f"--workers {args.workers}: at least one worker", hint="e.g. --workers 2")
        kwargs["workers"] = args.workers
    if args.gpu is not None:
        try:
            gpu_model(args.gpu)
        except Exception as e:   # noqa: BLE001 - TLXWorkbenchError with the list of GPUs
            raise CellError(f"--gpu: unknown GPU {args.gpu!r}", hint=getattr(e, "hint", None) or "e.g. --gpu H200") \
                from None
        kwargs["gpu"] = kwargs["target"] = args.gpu
    for key in ("store", "address", "measure", "seed", "timeout"):
        v = getattr(args, key)
        if v is not None:
            kwargs[key] = v
    sim_shape = parse_sim_shape(args.sim_shape, shapes)
    if sim_shape is not None:
        kwargs["sim_shape"] = sim_shape
    if args.background:
        kwargs["background"] = True
    # a background sweep's bars would draw into whichever cell runs next
    kwargs["progress"] = not (args.no_progress or args.background)
    space = _lookup(ns, args.space, "--space") if args.space is not None else None
    return (problem, space, shapes), kwargs


def run(magics, line: str):
    """The body of ``%tlx_explore`` (``magics``: the TLXMagics instance)."""
    from ..explore import explore
    from . import options as opts
    from .cells import cell_number
    from .views import display
    n = cell_number(magics.shell)
    where = f"cell [{n}]"
    raise_ = magics.settings["raise"] and "--no-raise" not in line.split()
    try:
        args = opts.parse(magics.tlx_explore, line)
        call, kwargs = explore_call(args, magics.shell.user_ns)
        ex = explore(*call, **kwargs)
    except BaseException as e:  # noqa: BLE001 - a bad line or a failed sweep must not kill the notebook
        if isinstance(e, KeyboardInterrupt):
            raise
        return magics._fail(e, raise_=raise_, where=where)
    if args.output:
        magics.shell.user_ns[args.output] = ex
    if args.widget:
        from ..widgets import ExplorerWidget
        display(ExplorerWidget(ex, gpu=kwargs.get("gpu", "H200")))
    else:
        display(ex)
    return None
