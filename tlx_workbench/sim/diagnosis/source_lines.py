"""Where in the kernel source a simulated operation is: the kernel line that runs it, and the name it is assigned to.

The simulator reports every finding and trace span by kernel file and line; allocations take the name of the
variable they are assigned to (``bars = tlx.alloc_barriers(...)`` is "bars" in the trace).
"""
from __future__ import annotations

import re
import sys

from ..schedule.launch_state import _state

_ASSIGN_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=")

#: files of every rewritten kernel function (rewrite.py adds them): frames there are "kernel code".
#: Kept here, not in rewrite.py, so that line lookup needs nothing above it (rewrite imports libdevice,
#: which reports errors at kernel lines)
kernel_files: set[str] = set()


#: (code object, instruction offset) -> its line: a frame's f_lineno decodes the code's line table from the start
#: each time, and a rewritten kernel's code is long (most of the leader's lookups' time at 1024^3)
_LINES: dict = {}
_LINES_MAX = 1 << 16


def kernel_frame_line() -> tuple[str | None, int | None]:
    """(file, line) of the innermost frame that runs kernel code (a rewritten kernel or helper); while a wave
    replays a recorded op (sim/schedule/batch.py), the op's own."""
    if _state.replay_where is not None:
        return _state.replay_where
    f = sys._getframe(1)
    files = kernel_files
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        if fn in files:
            key = (code, f.f_lasti)
            line = _LINES.get(key)
            if line is None:
                if len(_LINES) >= _LINES_MAX:
                    _LINES.clear()
                line = _LINES[key] = f.f_lineno
            return fn, line
        f = f.f_back
    return None, None



def name_from_line(file, line, default):
    """The variable assigned on kernel ``line`` of ``file`` (``bars = ...`` -> "bars"), else ``default``."""
    if file and line:
        import linecache
        m = _ASSIGN_RE.match(linecache.getline(file, line))
        if m:
            return m.group(1)
    return default
