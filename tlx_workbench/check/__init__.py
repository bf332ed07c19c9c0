"""The barrier-protocol checker and the warp-barrier conversion advisor.

>>> import tlx_workbench as wb
>>> res = wb.check(mod.matmul, a, b)             # doctest: +SKIP
>>> for f in res: print(f.rule_id, f.line, f.fix)  # doctest: +SKIP
"""
from .api import check
from .findings import CheckResult, Finding
from .rules import RULES

__all__ = ["check", "Finding", "CheckResult", "RULES"]
