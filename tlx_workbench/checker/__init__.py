"""The barrier-protocol checker and the warp-barrier conversion advisor.

>>> import tlx_workbench as wb
>>> res = wb.check(mod.matmul, a, b)             # doctest: +SKIP
>>> for f in res: print(f.rule_id, f.line, f.fix)  # doctest: +SKIP
"""
from .api import check
from .findings import CheckResult, Finding
from .rules import RULES

__all__ = ["check", "Finding", "CheckResult", "RULES", "advise_warp_barriers", "Advice", "AdviceResult"]


def __getattr__(name):
    if name in ("advise_warp_barriers", "Advice", "AdviceResult"):
        from . import advisor
        return getattr(advisor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
