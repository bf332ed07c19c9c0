"""The errors the magics raise, and turning any exception from a cell into one."""
from __future__ import annotations

import traceback

from ..errors import TLXWorkbenchError


class CellError(TLXWorkbenchError):
    """The cell itself failed (a syntax error, or an exception in its code)."""


class KnobError(TLXWorkbenchError):
    """A ``--knobs`` specification that cannot be read."""


class CellFailed(CellError):
    """Raised by ``%%tlx`` after it displayed a failed cell's diagnosis, so that "Run All" and nbval stop.

    ``result`` is the cell's :class:`CellResult` (None when the cell did not get to a launch), ``error``
    the first error. Its traceback is one short paragraph: the diagnosis is in the output above it.
    """

    def __init__(self, reason: str, *, result=None, error=None, where: str = "the cell"):
        self.result, self.error, self.where = result, error, where
        self.reason = reason
        super().__init__(f"{where} failed: {_kind_of(reason, error)} (the diagnosis is shown above)",
                         hint="fix the cell, or add --no-raise to a cell that fails on purpose "
                              "(%tlx_config --raise no for the whole notebook)")

    def _render_traceback_(self) -> list[str]:
        # IPython prints this instead of a Python traceback through the magic's frames
        return [f"\x1b[0;31mCellFailed\x1b[0m: {self.message}", f"  what to do: {self.hint}"]


def _kind_of(reason: str, error) -> str:
    """What failed, in a few words, never the diagnosis itself (it is in the output above, once):
    ``DeadlockError at line 16``, ``the output is wrong``.

    >>> _kind_of("the output is wrong: out: 3 of 64 elements differ", None)
    'the output is wrong'
    """
    if error is not None:
        line = getattr(error, "line", None)
        return type(error).__name__ + (f" at line {line}" if line else "")
    return reason.split(": ")[0]


def cell_error(e: BaseException, filename: str, kind: str = "the cell raised") -> TLXWorkbenchError:
    """``e`` as a :class:`TLXWorkbenchError` pointing at the line of ``filename`` (the cell) that raised.

    >>> cell_error(ZeroDivisionError("division by zero"), "<tlx cell>").hint  # doctest: +ELLIPSIS
    'fix the cell and run it again; ...'
    """
    if isinstance(e, TLXWorkbenchError):
        return e
    if isinstance(e, SyntaxError):
        what = e.msg[:1].upper() + e.msg[1:] if e.msg else "Invalid syntax"
        err = CellError(f"syntax error in the cell: {what}.", file=filename, line=e.lineno,
                        hint="fix the line shown; nothing in the cell was run and your variables are unchanged")
        err.caret = e.offset if e.offset and e.text else None
        return err
    line = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    err = CellError(f"{kind} {type(e).__name__}: {e}", file=filename, line=line,
                    hint="fix the cell and run it again; variables defined before the error are kept",
                    detail="".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return err
