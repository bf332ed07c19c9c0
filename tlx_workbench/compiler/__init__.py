"""The offline TLX compiler and its CompileReport.

>>> import tlx_workbench as wb
>>> mod = wb.load_module("my_kernels.py", target="sm_90")                # doctest: +SKIP
>>> report = wb.compile(mod.kernel, a_desc, b_desc, M, N, target="sm_90", BM=128)  # doctest: +SKIP
"""
from .compile import compile, load_module, clear_cache
from .report import (Allocation, BarrierInfo, BarrierSite, CompileReport, Resources, SourceInfo, SourceMap,
                     TaskInfo)

__all__ = ["compile", "load_module", "clear_cache", "CompileReport", "SourceInfo", "SourceMap", "Resources",
           "TaskInfo", "Allocation", "BarrierInfo", "BarrierSite"]
