"""What a compiled kernel's resources allow on a GPU: CTAs per SM, and the spills ptxas reports.

>>> occupancy(report.resources, gpu_model("H200"))           # doctest: +SKIP
1
"""
from __future__ import annotations

import re


def occupancy(res, model) -> int:
    """CTAs of this kernel one SM holds at once (SMEM, registers, threads, and the 32-CTA cap)."""
    threads = res.num_warps * 32
    limits = [32, 2048 // max(threads, 1)]
    if res.smem_bytes:
        limits.append(model.smem_per_sm // res.smem_bytes)
    if res.registers:
        # registers are allocated per warp in units of 256 (8 per thread)
        per_warp = -(-res.registers * 32 // 256) * 256
        limits.append(model.regs_per_sm // (per_warp * res.num_warps))
    return max(0, min(limits))


# ptxas advisories that say the wgmma pipeline runs serialized (C7510-C7515: registers, calls, an ill-formed
# wait, ...): each wgmma instruction then waits for the one before
SERIALIZING = {"C7510", "C7511", "C7512", "C7513", "C7514", "C7515"}


def serializes_wgmma(advisories) -> bool:
    """Whether ptxas said it serialized the kernel's wgmma pipeline."""
    return any((a.get("code") if isinstance(a, dict) else getattr(a, "code", None)) in SERIALIZING
               for a in advisories or ())


def spill_loads(advisories) -> int:
    """Bytes per thread of ptxas's spill loads (the reloads a warp group waits for), from a report's
    ``ptxas_advisories`` or the explorer's stored advisories (dicts with "code" and "text")."""
    return _spilled(advisories, "loads")


def spill_stores(advisories) -> int:
    """Bytes per thread of ptxas's spill stores (registers written out to local memory), as :func:`spill_loads`."""
    return _spilled(advisories, "stores")


def _spilled(advisories, what: str) -> int:
    total = 0
    for a in advisories or ():
        code = a.get("code") if isinstance(a, dict) else getattr(a, "code", None)
        text = a.get("text") if isinstance(a, dict) else str(getattr(a, "message", "") or a)
        if code == "spills":
            total = max([total] + [int(x) for x in re.findall(rf"(\d+) bytes spill {what}", text or "")])
    return total
