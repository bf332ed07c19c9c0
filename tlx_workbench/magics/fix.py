"""``%tlx_fix``: put the verified repair of a failing simulation into the notebook, by the person's action only.

The simulator proves a repair before it offers one (``tlx_workbench/sim/diagnosis/repair.py``: the same launch re-run with
the edit, over several schedules). ``%tlx_fix`` takes the last one found (or the one of a result, error or check
named on its line) and:

- kernel defined in a notebook cell: the cell's source with the change made goes into a new cell below
  (IPython's ``set_next_input``); ``--replace`` puts it in place of the ``%tlx_fix`` cell instead; the person runs it;
- kernel in a ``.py`` file: the diff is shown, and ``--write`` writes the file.

Nothing is changed before the person asks: the magic runs only when they run it.
"""
from __future__ import annotations

import os

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..errors import TLXWorkbenchError


def repair_of(obj):
    """The verified repair a result carries: a Repair, a SimResult (``.fix``), an error (``.verified_fix``), a
    DeadlockReport, a CheckResult (its simulation's), a %%tlx CellResult (its simulation's); None when none."""
    from ..sim.diagnosis.repair import Repair
    if obj is None or isinstance(obj, Repair):
        return obj
    for name in ("verified_fix", "fix"):
        r = getattr(obj, name, None)
        if isinstance(r, Repair):
            return r
    for name in ("sim", "result", "report"):
        inner = getattr(obj, name, None)
        if inner is not None and inner is not obj:
            r = repair_of(inner)
            if r is not None:
                return r
    return None


def cell_source(shell, file: str) -> str | None:
    """The raw source of the notebook cell IPython compiled as ``file`` (None for a file on disk)."""
    import linecache
    if os.path.exists(file):
        return None
    text = "".join(linecache.getlines(file))
    n = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(file)
    hist = getattr(getattr(shell, "history_manager", None), "input_hist_raw", [])
    if n is not None and 0 <= n < len(hist):
        raw = hist[n]
        # the raw cell, where IPython's transformation kept its lines (it rewrites line magics in place)
        if len(raw.splitlines()) == len(text.splitlines()):
            return raw
    return text or None


def fixed_source(repair, shell=None) -> tuple[str, bool]:
    """(the kernel's source with ``repair`` made, whether that source is a notebook cell)."""
    cell = cell_source(shell, repair.file) if shell is not None else None
    if cell is not None:
        return repair.apply(cell), True
    if not os.path.exists(repair.file):
        return repair.apply(), True
    return repair.apply(), False


@magics_class
class FixMagics(Magics):
    """``%tlx_fix``: apply the simulator's verified repair (a new cell, the cell in place, or the file)."""

    @line_magic
    @magic_arguments()
    @argument("result", nargs="?", default=None,
              help="a SimResult, error, check result or %%tlx result (default: the last verified repair)")
    @argument("--replace", action="store_true", help="put the fixed cell in place of this cell, not below it")
    @argument("--write", action="store_true", help="a kernel in a .py file: write the fix into the file")
    def tlx_fix(self, line):
        """Apply the last verified repair: ``%tlx_fix`` (new cell below), ``%tlx_fix res --replace``."""
        from IPython.display import HTML, display

        from ..sim.diagnosis import repair as repair_mod
        args = parse_argstring(self.tlx_fix, line)
        if args.result:
            try:
                obj = eval(args.result, self.shell.user_ns)
            except Exception as e:  # noqa: BLE001 - said to the person, with what to do
                raise TLXWorkbenchError(f"%tlx_fix: cannot evaluate `{args.result}`: {type(e).__name__}: {e}",
                                        hint="name a SimResult, an error or a check result of the notebook") from None
            rep = repair_of(obj)
            if rep is None:
                raise TLXWorkbenchError(
                    f"%tlx_fix: `{args.result}` carries no verified repair",
                    hint="simulate the failing launch (wb.simulate or %%tlx --sim): a deadlock or race whose "
                         "repair the simulator verified carries it in .fix")
        else:
            rep = repair_mod.last
            if rep is None:
                raise TLXWorkbenchError("%tlx_fix: no verified repair yet",
                                        hint="simulate the failing launch first (wb.simulate or %%tlx --sim)")
        text, is_cell = fixed_source(rep, self.shell)
        display(HTML(rep._repr_html_()))
        if is_cell:
            self.shell.set_next_input(text, replace=args.replace)
            where = "this cell now holds" if args.replace else "a new cell below holds"
            print(f"{where} the kernel's cell with the fix at line {rep.line} ({rep.what}); run it to use it")
        elif args.write:
            with open(rep.file, "w") as f:
                f.write(text)
            print(f"wrote the fix into {rep.file} (line {rep.line}: {rep.what}); re-import the module to use it")
        else:
            print(f"the kernel lives in {rep.file}: `%tlx_fix --write` writes this change into it")
        return None


def register(ipython) -> None:
    """Register ``%tlx_fix`` (called by ``%load_ext tlx_magic``)."""
    ipython.register_magics(FixMagics)
