"""``%load_ext tlx_magic``: the ``%%tlx`` cell magic and its line magics.

Every magic is a thin shell over the Python API (``compile``, ``simulate``,
``run``, ``bench``, ``profile``, ``check``): :func:`evaluate` does the work and
returns a :class:`CellResult`; the magics parse options, call it and show it.

    %%tlx --check --ref "lambda x, y, out, n: x + y" --bench --bytes "3 * x.numel() * 4" -o r
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ...
    add_kernel[(n // 1024,)](x, y, out, n, BLOCK=1024)      # the last line is the launch

The cell's definitions run in the notebook namespace like a normal cell's; the
last statement, when it is a call, is the *launch* the options act on.

Line magics: ``%tlx_bench expr``, ``%tlx_profile expr``, ``%tlx_show obj``,
``%tlx_config`` (session defaults: ``%tlx_config --target sm_100 --timeout 30``).

The code lives in :mod:`tlx_workbench.magics`, one small module per concern; this
module keeps the names that ``tlx_magic``, tests and notebooks import from here.
"""
from __future__ import annotations

from .magics import (DEFAULTS, CellCode, CellError, CellFailed, CellResult, Knob, KnobError, KnobPanel, Launch, TLXMagics,  # noqa: F401
                     capture_kernel_launch, cell_error, display_result, evaluate, has_gpu,
                     load_ipython_extension, offline_context, parse_knobs, parse_launch, resolve_mode,
                     show_object, show_widgets, split_cell, unload_ipython_extension)
from .magics import __all__  # noqa: F401
