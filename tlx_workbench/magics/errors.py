"""The errors the magics raise, and turning any exception from a cell into one."""
from __future__ import annotations

import traceback

from ..errors import TLXWorkbenchError


class CellError(TLXWorkbenchError):
    """The cell itself failed (a syntax error, or an exception in its code)."""


class KnobError(TLXWorkbenchError):
    """A ``--knobs`` specification that cannot be read."""


def cell_error(e: BaseException, filename: str, kind: str = "the cell raised") -> TLXWorkbenchError:
    """``e`` as a :class:`TLXWorkbenchError` pointing at the line of ``filename`` (the cell) that raised.

    >>> cell_error(ZeroDivisionError("division by zero"), "<tlx cell>").hint  # doctest: +ELLIPSIS
    'fix the cell and run it again; ...'
    """
    if isinstance(e, TLXWorkbenchError):
        return e
    if isinstance(e, SyntaxError):
        return CellError(f"syntax error in the cell: {e.msg}", file=filename, line=e.lineno,
                         hint="fix the line shown; nothing was run and your variables are unchanged")
    line = None
    for frame, lineno in traceback.walk_tb(e.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    err = CellError(f"{kind} {type(e).__name__}: {e}", file=filename, line=line,
                    hint="fix the cell and run it again; variables defined before the error are kept",
                    detail="".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return err

