"""The barrier-protocol checker and the warp-barrier conversion advisor.

>>> import tlx_workbench as wb
>>> res = wb.check(mod.matmul, a, b)             # doctest: +SKIP
>>> for f in res: print(f.rule_id, f.line, f.fix)  # doctest: +SKIP

Importing this package sets the attribute ``tlx_workbench.check`` to the package itself
(Python binds a subpackage on its parent), which would hide the function of the same
name; so the package is made callable and ``wb.check(...)`` works either way.
"""
import sys as _sys
import types as _types

from .api import check
from .findings import CheckResult, Finding
from .rules import RULES

__all__ = ["check", "Finding", "CheckResult", "RULES", "advise_warp_barriers", "Advice", "AdviceResult"]


def __getattr__(name):
    if name in ("advise_warp_barriers", "Advice", "AdviceResult"):
        from . import advisor
        return getattr(advisor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return check(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage
