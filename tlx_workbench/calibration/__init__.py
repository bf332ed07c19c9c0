"""Per-GPU calibration data: what the simulator's cost model charges, measured on the GPU.

``<GPU>.json`` beside this file is written by ``python -m tlx_workbench.calibration.suite`` on
that GPU (its ``date``, ``device`` and ``command`` say when, where and how); :func:`load` reads it.
A GPU without a file (B200 today) keeps the documented estimates in ``sim/timing/cost.py``.

>>> c = load("H200")
>>> c.device, c.mma_flops_per_cycle(16)
('NVIDIA H200', 4096.0)
"""
from __future__ import annotations

import dataclasses
import functools
import json
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).parent


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The figures of one calibration file, in SM cycles (``clock64``) unless named otherwise."""
    gpu: str
    device: str
    date: str
    command: str
    clock_ghz: float                      # SM clock under sustained tensor-core load
    mma: dict                             # dtype -> {"n<N>x<consumers>": flop per cycle per SM}
    tma_latency_l2: float                 # one TMA load, issue to landed, L2 hit (fitted to 0 bytes)
    tma_latency_hbm: float
    tma_latency_by_ctas: dict             # CTAs in flight (str) -> L2-hit latency under that load
    l2_bytes_per_cycle_per_sm: dict       # CTAs in flight (str) -> bytes per cycle per CTA, 4 loads in flight
    hbm_bytes_per_cycle_per_sm: dict
    tma_store_bytes_per_cycle_per_sm: dict
    cp_async_bytes_per_cycle_per_sm: dict    # row bytes (str) -> CTAs in flight (str) -> rate; {} until measured
    launch_us: float | None                  # do_bench's time of an empty launch (132 CTAs), None until measured
    mma_serial_cycles: dict                  # N (str) -> cycles of one m64nNk16 wgmma issued and waited for alone
    barrier: dict                         # see suite.derive
    smem_bytes_per_cycle: dict
    power: dict = dataclasses.field(default_factory=dict)   # what the clock model reads (suite._power_figures)
    # a CTA's TMA loads as a queue, L2 hits (suite._tma_queue): CTAs in flight (str) -> bytes_per_cycle, latency,
    # latency_per_load, loop_cycles; {} where not derived
    tma_queue: dict = dataclasses.field(default_factory=dict)
    # cycles a CTA's TMA loads lose per byte its TMA stores write (suite._store_beside): CTAs in flight (str) ->
    # cycles per byte; {} where not measured
    tma_store_load_cpb: dict = dataclasses.field(default_factory=dict)
    # bytes per cycle per SM a wgmma loop's register spills move (LDL / STL, locals beyond the L1) with CTAs
    # (str) in flight (suite._spill_figures); {} where not measured
    spill_bytes_per_cycle_per_sm: dict = dataclasses.field(default_factory=dict)
    spill_duty: dict = dataclasses.field(default_factory=dict)      # CTAs (str) -> the share of time they spilled
    path: str = ""

    def mma_flops_per_cycle(self, in_bits: int) -> float:
        """Peak dense flop per cycle per SM for operands of ``in_bits`` (two consumer groups, n=256)."""
        dtype = {8: "float8_e4m3fn", 16: "float16", 32: "float32"}.get(in_bits, "float16")
        rates = self.mma.get(dtype) or self.mma["float16"]
        return float(round(max(rates.values())))

    def single_group_gap(self) -> float:
        """Cycles a warp group alone loses per async_dot (issue and wait turnaround): from the fp16
        one-consumer loops, per call of 4 k16 instructions, the excess over the peak-rate time."""
        peak = self.mma_flops_per_cycle(16)
        gaps = []
        for key, rate in (self.mma.get("float16") or {}).items():
            n, cons = key[1:].split("x")
            if cons == "1":
                flops = 2.0 * 64 * int(n) * 64
                gaps.append(flops / rate - flops / peak)
        return sum(gaps) / len(gaps) if gaps else 0.0

    def cp_async_rate(self, row_bytes: int, ctas: int) -> float | None:
        """cp.async bytes per cycle per CTA for rows of ``row_bytes`` with ``ctas`` in flight: interpolated
        between the measured row widths (clamped to them), None when never measured."""
        tabs = sorted((int(k), self.bandwidth(v, ctas)) for k, v in self.cp_async_bytes_per_cycle_per_sm.items()
                      if any(v.values()))
        if not tabs:
            return None
        return float(np.interp(row_bytes, [w for w, _ in tabs], [r for _, r in tabs]))

    def tma_queue_at(self, ctas: int) -> dict | None:
        """The TMA queue's figures with ``ctas`` CTAs streaming, each interpolated between the measured counts
        (the bytes per cycle past the last count as :meth:`bandwidth` extends it); None where not derived."""
        if not self.tma_queue:
            return None
        names = next(iter(self.tma_queue.values())).keys()
        out = {}
        for name in names:
            table = {c: v[name] for c, v in self.tma_queue.items()}
            out[name] = self.bandwidth(table, ctas, extend=name == "bytes_per_cycle")
        return out

    def store_load_cpb_at(self, ctas: int) -> float | None:
        """Cycles a CTA's TMA loads lose per byte its TMA stores write with ``ctas`` CTAs in flight, interpolated
        between the measured counts (the last one's past it; a measured 0 counts); None where never measured."""
        pts = sorted((int(k), float(v)) for k, v in self.tma_store_load_cpb.items())
        if not pts:
            return None
        return float(np.interp(ctas, [c for c, _ in pts], [v for _, v in pts]))

    def spill_rate(self, ctas: int, duty: float) -> float | None:
        """Bytes per cycle per SM a wgmma loop's spills move at (locals beyond the L1) with ``ctas`` CTAs in flight,
        each spilling ``duty`` of its time: the rate one CTA alone measured, or the chip's share where the CTAs
        ask more of the L2 than it serves; that capacity is what every SM's spill loop got together (its rate x
        its CTAs x the share of time they spilled). None where the ``spill_loop`` family was never run.

        >>> cal = load("H100")
        >>> every_sm = cal.spill_duty["132"]         # the share of time the family's loop spilled on every SM
        >>> round(cal.spill_rate(1, 1.0), 1), round(cal.spill_rate(132, 0.3), 1), round(cal.spill_rate(132, every_sm), 1)
        (40.7, 40.7, 31.5)
        """
        pts = sorted((int(k), float(v)) for k, v in self.spill_bytes_per_cycle_per_sm.items() if v)
        if not pts:
            return None
        alone = pts[0][1]
        n, rate = pts[-1]
        capacity = rate * n * float(self.spill_duty.get(str(n), 1.0))
        if duty <= 0 or n == pts[0][0]:
            return alone
        return min(alone, capacity / (max(1, ctas) * duty))

    def bandwidth(self, table: dict, ctas: int, extend: bool = True) -> float:
        """Bytes per cycle per CTA with ``ctas`` CTAs streaming at once (interpolated in the table); past the
        table the aggregate stays that of the last point (``extend=False``: the last point's value)."""
        pts = sorted((int(k), v) for k, v in table.items() if v)
        if extend and ctas > pts[-1][0]:
            return pts[-1][1] * pts[-1][0] / ctas
        return float(np.interp(ctas, [c for c, _ in pts], [v for _, v in pts]))


@functools.lru_cache(maxsize=None)
def load(gpu: str) -> Calibration | None:
    """The calibration of GPU model ``gpu`` ("H200"), or None when it was never measured."""
    path = HERE / f"{gpu.upper()}.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    d = data["derived"]
    lat = d["tma"]["latency"]
    return Calibration(gpu=gpu.upper(), device=data["device"], date=data["date"], command=data["command"],
                       clock_ghz=float(d["clock_ghz"]), mma=d["mma_flops_per_cycle_per_sm"],
                       tma_latency_l2=float(lat["l2"]["latency_cycles"]),
                       tma_latency_hbm=float(lat["hbm"]["latency_cycles"]),
                       tma_latency_by_ctas=d["tma"].get("latency_by_ctas", {}).get("l2", {}),
                       l2_bytes_per_cycle_per_sm=d["tma"]["l2_bytes_per_cycle_per_sm"],
                       hbm_bytes_per_cycle_per_sm=d["tma"]["hbm_bytes_per_cycle_per_sm"],
                       tma_store_bytes_per_cycle_per_sm=d["tma_store_bytes_per_cycle_per_sm"],
                       cp_async_bytes_per_cycle_per_sm=d.get("cp_async") or {},
                       launch_us=d.get("launch_us"),
                       mma_serial_cycles=d.get("mma_serial_cycles") or {},
                       barrier=d["barrier"], smem_bytes_per_cycle=d["smem_bytes_per_cycle"],
                       power=d.get("power") or {}, tma_queue=(d["tma"].get("queue") or {}).get("l2") or {},
                       tma_store_load_cpb=d.get("tma_store_load_cycles_per_byte") or {},
                       spill_bytes_per_cycle_per_sm=(d.get("spill") or {}).get("bytes_per_cycle_per_sm") or {},
                       spill_duty=(d.get("spill") or {}).get("duty") or {},
                       path=str(path))
