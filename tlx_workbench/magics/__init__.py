"""``%load_ext tlx_magic``: the ``%%tlx`` cell magic and its line magics, in small modules.

Every magic is a thin shell over plain Python: :func:`evaluate` does the work of one
launch and returns a :class:`CellResult`; the magics parse options, call it and show it.

- ``options``: ``%tlx_config`` defaults and each magic's option declarations
- ``launch``: finding the launch in a cell and evaluating its parts (``parse_launch``)
- ``evaluate``: compile / simulate / run / check / bench / profile one launch
- ``result``, ``render``, ``views``, ``diagnosis``: the CellResult and how it is shown (each thing once)
- ``cells``: locations as the editor shows them ("cell [3], line 5")
- ``knobs``: ``--knobs`` controls and the :class:`KnobPanel`
- ``explore``: ``%tlx_explore``, reading its line into one ``tlx_workbench.explore.explore`` call
- ``ipython_magics``: the IPython ``Magics`` class and the extension hooks
"""
from .errors import CellError, CellFailed, KnobError, cell_error
from .evaluate import evaluate, has_gpu, offline_context, resolve_mode
from .ipython_magics import TLXMagics, load_ipython_extension, unload_ipython_extension
from .knobs import CellCode, Knob, KnobPanel, parse_knobs
from .launch import Launch, capture_kernel_launch, parse_launch, split_cell
from .options import DEFAULTS
from .result import CellResult
from .views import display_result, show_object, show_widgets

__all__ = ["CellCode", "CellError", "CellFailed", "CellResult", "DEFAULTS", "Knob", "KnobError", "KnobPanel", "Launch", "TLXMagics",
           "capture_kernel_launch", "cell_error", "display_result", "evaluate", "has_gpu", "load_ipython_extension",
           "offline_context", "parse_knobs", "parse_launch", "resolve_mode", "show_object", "show_widgets",
           "split_cell", "unload_ipython_extension"]
