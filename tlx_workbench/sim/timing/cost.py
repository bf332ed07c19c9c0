"""Cycle costs of simulated ops, per GPU model.

Where a GPU has been measured (``tlx_workbench/calibration/<GPU>.json``, written on that GPU by
``python -m tlx_workbench.calibration.suite``: H200 and H100 today), every figure below comes from that file;
elsewhere (B200) they are the documented estimates written next to each field. Per-GPU
rates that are not measured (DRAM bandwidth, tensor-core flops, TMEM) come from
``tlx_workbench.target.GPU_MODELS``.

The model: per-CTA shared resources (its share of the TMA / L2 bandwidth, the tensor core) plus
fixed latencies. *Contention*: a CTA's TMA share is that of every CTA resident in its wave
(``for_launch(resident)``), so simulating CTA 0 alone predicts it as it runs among 131 others.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ...target import GPUModel, gpu_model


#: Hopper's unified L1 / shared memory per SM, and the shared-memory carveouts a launch can get (KiB; CUDA
#: programming guide, "Shared memory" of compute capability 9.0): what a kernel's SMEM leaves of L1 is the rest
L1_SMEM_BYTES = 256 * 1024
SMEM_CARVEOUTS_KIB = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)

#: the windows a launch's time is asked for: "do_bench" (the L2 flush between launches, as every measured kernel
#: time of the project), "sustained" (back to back for seconds), "single" (one launch after idle)
WINDOWS = ("do_bench", "sustained", "single")


class SpillsPerWgmma(float):
    """Register spills given per wgmma instruction (bytes per thread, at the L1 rate) rather than per iteration of
    a loop: what ``wb.predict`` reads off a compiled kernel's wgmma loop (``SpillPlacement.per_wgmma``), whatever
    ptxas unrolled. A number wherever ``spills`` is one (``simulate(spills=SpillsPerWgmma(b))``)."""
    per = "wgmma"       # the unit, as a prediction's JSON says it (a plain number: "iteration")

    def __repr__(self):
        return f"SpillsPerWgmma({float(self)!r})"


@dataclasses.dataclass(frozen=True)
class LaunchClock:
    """The SM clock a launch runs at, and why (``PowerModel.clock``)."""
    ghz: float
    regime: str             # "boost": under the board's power cap at its boost clock; "power cap": held below it
    demand: float           # the launch's draw at the boost clock, in units of the wgmma loop's (1 = every SM's
    #                         tensor core busy, nothing else)
    tensor_util: float      # the tensor cores' busy share of the launch's SM cycles
    duty: float             # the launch's share of its window (do_bench: the rest is the L2 flush)
    window: str

    def __str__(self):
        return (f"{self.ghz:.3f} GHz ({self.regime}: tensor cores {100 * self.tensor_util:.0f} % busy, demand "
                f"{self.demand:.2f} x the wgmma loop's, {100 * self.duty:.0f} % of a {self.window} window)")


@dataclasses.dataclass(frozen=True)
class PowerModel:
    """The clock the board holds for a launch's power draw and duration, from the calibration's measurements
    (``calibration.suite._power_figures``; every figure there says where it came from).

    Dynamic power goes as f V^2 and V with f over the DVFS range, so a launch of demand d (its draw at the boost
    clock, in units of the wgmma loop's) fits under the cap at f = boost * (cap_demand / d)^(1/3), and at the boost
    clock when d <= cap_demand; cap_demand = (capped / boost)^3 from the wgmma loop, which holds ``capped`` GHz.
    A kernel's demand is ``data_factor`` x its tensor-core utilisation (its data movement draws beside its wgmmas;
    measured on kernels run for seconds). Under do_bench the launch alternates with the L2 flush, which the
    controller averages in: the demand is the launch's and the flush's (``flush_demand``, measured by the power
    family where it ran), each by its share of the window. A single launch from idle keeps
    its top clock for ``boost_s``, then drops to its capped clock.

    A launch's top clock is boost, or lower where the board limits the tensor cores' draw at once, not its average
    over time (``burst_demand`` = (burst / boost)^3, the wgmma loop's clock on its first launches after idle,
    measured by the power family: an H100 holds that loop at 1.65-1.71 GHz from its first 2 ms launch on): a launch
    whose tensor-core utilisation u passes it runs at boost * (burst_demand / u)^(1/3) at any length
    (``regime="burst cap"``; :meth:`top`).

    >>> pm = PowerModel(boost_ghz=1.98, cap_demand=0.463, data_factor=1.23, flush_us=55.0, boost_s=0.017)
    >>> pm.clock(cycles=20_000, tensor_util=0.5).regime, round(pm.clock(cycles=3e6, tensor_util=0.85).ghz, 2)
    ('boost', 1.52)
    """
    boost_ghz: float
    cap_demand: float
    data_factor: float = 1.0
    flush_us: float = 0.0
    boost_s: float = 0.0
    flush_demand: float = 0.0       # the flush's own draw, same units (0 where not measured)
    burst_demand: float = 0.0       # the draw the board allows at once (0: not measured, no such limit)

    def _capped(self, demand: float, cap: float | None = None) -> float:
        cap = self.cap_demand if cap is None else cap
        if demand <= cap:
            return self.boost_ghz
        return self.boost_ghz * (cap / demand) ** (1.0 / 3.0)

    def top(self, tensor_util: float) -> float:
        """The clock a launch whose tensor cores are busy ``tensor_util`` of its cycles runs at before any average
        counts: the burst limit counts the tensor cores' activity alone (the wgmma loop with a TMA stream beside it
        started at the loop's own clock, 1.722 against 1.714 GHz on an H100), where the power cap's average counts
        a kernel's data movement too (``data_factor``)."""
        return self._capped(tensor_util, self.burst_demand) if self.burst_demand > 0 else self.boost_ghz

    def clock(self, cycles: float, tensor_util: float, window: str = "do_bench") -> LaunchClock:
        """The clock of a launch of ``cycles`` SM cycles whose tensor cores are busy ``tensor_util`` of them."""
        if window not in WINDOWS:
            raise ValueError(f"window {window!r}: use one of {WINDOWS}")
        u = min(1.0, max(0.0, float(tensor_util)))
        full = self.data_factor * u
        top = self.top(u)
        f, duty = top, 1.0
        if window == "do_bench":
            for _ in range(30):             # the launch's length depends on the clock, its duty on its length
                t_us = cycles / (f * 1e3)
                duty = t_us / (t_us + self.flush_us) if t_us > 0 else 0.0
                f_new = min(top, self._capped(full * duty + self.flush_demand * (1.0 - duty)))
                if abs(f_new - f) < 1e-6:
                    break
                f = f_new
        elif window == "sustained":
            f = min(top, self._capped(full))
        else:
            capped = min(top, self._capped(full))
            if cycles / (top * 1e9) > self.boost_s:       # its top clock for boost_s, the rest at the capped clock
                rest = cycles - self.boost_s * top * 1e9
                f = cycles / (self.boost_s * 1e9 + rest / capped) / 1e9
        demand = full * duty + (self.flush_demand * (1.0 - duty) if window == "do_bench" else 0.0)
        regime = ("boost" if f >= self.boost_ghz - 1e-9 else "burst cap" if f >= top - 1e-9 else "power cap")
        return LaunchClock(ghz=f, regime=regime, demand=demand, tensor_util=u, duty=duty, window=window)


@dataclasses.dataclass(frozen=True)
class CostModel:
    gpu: GPUModel
    # DRAM -> SMEM latency of a TMA load (L2 miss). "Demystifying the NVIDIA Hopper
    # architecture" (Luo et al., 2024) measures ~480 cycles global-memory latency on H800.
    tma_latency: float = 500.0
    # issuing a TMA op / a wgmma / an mbarrier op from one thread: a few instructions
    issue: float = 8.0
    # a warp group issuing an async_dot: cycles per wgmma instruction it holds (m/64 x k/k-per-instruction; the
    # descriptors, fences and commit included). 0 = the generic ``issue`` for the whole async_dot
    wgmma_issue: float = 0.0
    # a warp group issuing one TMA load (async_descriptor_load): None = the generic ``issue``
    tma_issue: float | None = None
    # mbarrier arrive and a satisfied try_wait: tens of cycles (same paper, ~20-30 cycles)
    barrier_op: float = 20.0
    # barrier_expect_bytes (mbarrier.arrive.expect_tx by one thread): None = ``barrier_op``
    expect_bytes: float | None = None
    # one integer scalar op of the kernel's own code (index, slot and phase arithmetic), on its warp group's clock
    # (CTA.charge_scalar); 0 = free
    scalar_op: float = 0.0
    # an arrive on a warp barrier (every thread arrives; no warp-group sync before it)
    barrier_arrive_warp: float = 20.0
    # a satisfied try_wait (the phase had completed before the wait)
    barrier_wait: float = 20.0
    # wake-up after a phase flip (try_wait loop re-polls) — same order as a barrier op
    wake: float = 20.0
    # named barrier bar.sync / bar.arrive: ~20 cycles (CUDA __syncthreads microbenchmarks)
    named_barrier: float = 20.0
    # fixed wgmma pipeline latency on top of the throughput term
    mma_latency: float = 32.0
    # a warp group alone cannot keep the tensor core busy: its next async_dot starts this many cycles
    # after its previous one ends at the earliest (0 = not modelled)
    mma_group_gap: float = 0.0
    # ld/st.shared of a tile by a warp group: 128 B/cycle SMEM bandwidth per SM (Hopper tuning guide)
    smem_bytes_per_cycle: float = 128.0
    # generic register-level work between TLX ops (tl.* arithmetic): per element, 4 warps x 32 lanes
    # retire about 128 simple ops per cycle per warp group
    elems_per_cycle: float = 128.0
    # extra latency of a DSMEM access (remote mbarrier arrive, st.shared::cluster, cluster barrier): the
    # SM-to-SM network costs about as much as an L2 hit, ~200 cycles (Luo et al. measure ~180 on H800)
    remote_extra: float = 200.0
    # tcgen05.ld/st between TMEM and registers: 128 lanes x 32 bit per cycle per warp group = 512 B/cycle
    # (Blackwell tuning guide: TMEM reads are 4x the SMEM bandwidth)
    tmem_bytes_per_cycle: float = 512.0
    # dense flop per cycle per SM by operand width (None: from the spec sheet, below)
    mma_rates: tuple | None = None
    # TMA bytes per cycle of one CTA (loads, stores): None = its share of DRAM bandwidth when every SM streams
    tma_load_rate: float | None = None
    tma_store_rate: float | None = None
    # a TMA load (async_descriptor_load, cp.async.bulk) in the CTA's TMA queue, where calibrated (for_launch;
    # calibration.suite._tma_queue): it holds the queue for bytes / tma_queue_rate, then lands tma_queue_latency +
    # tma_latency_per_load x (the CTA's loads in flight - 1) later. None: bytes / tma_load_rate and tma_latency,
    # whatever is in flight (stores, cp.async and charged tl.loads keep those)
    tma_queue_rate: float | None = None
    tma_queue_latency: float = 0.0
    tma_latency_per_load: float = 0.0
    # cycles a TMA store (async_descriptor_store) holds its CTA's load queue per byte, where measured
    # (calibration.suite._store_beside, Calibration.store_load_cpb_at); its own transfer then runs beside the loads at
    # tma_store_rate. None: the store holds the queue for its whole transfer
    tma_store_load_cpb: float | None = None
    # cp.async (tlx.async_load) bytes per cycle of one CTA, by the copied rows' width: None = the TMA load rate
    cp_async_rate: object = None              # callable(row_bytes) -> rate, set by for_launch where measured
    # the clock that turns cycles into time (the board's clock under load where measured)
    clock_ghz: float | None = None
    # register spills (ptxas: bytes of spill loads and stores per thread): what a warp group's loop stores and
    # reloads once per iteration, through the SM's L1, charged around its async_dots (spread over their lines);
    # or, where ``spill_per_wgmma``, the bytes per wgmma instruction, charged with each async_dot's instructions
    spill_bytes: float = 0.0
    spill_per_wgmma: bool = False
    # the SM's L1/SMEM data path: 128 B/cycle (Hopper tuning guide; one warp group's local_load measured 89)
    l1_bytes_per_cycle: float = 128.0
    # ptxas serialized the wgmma pipeline (C7510-C7515): each k-instruction of an async_dot waits for the one
    # before, at the calibrated cost of one m64nNk16 issued and waited for alone (mma_serial: N -> cycles)
    wgmma_serialized: bool = False
    mma_serial: tuple = ()
    # the clock the board holds for a launch (None: the fixed ``clock_ghz``, an estimate where not measured)
    power: PowerModel | None = None
    # the best rate a whole launch's tensor work sustains on every SM, over the wgmma loop's peak (<= 1): the roof no
    # launch passes; 1 = not measured
    tensor_sustained_share: float = 1.0
    # the tensor core's own rate while TMA streams into its SM, over the wgmma loop's peak (<= 1): what a pipeline's
    # copy load costs its wgmmas (the simulator runs them at the loop's peak); 1 = not measured
    tensor_copy_share: float = 1.0
    # DRAM bandwidth in GB/s sustained by every SM streaming (None: the spec sheet's)
    hbm_gbps: float | None = None
    #: how many CTAs share the bandwidth (for_launch); where the figures came from
    resident: int = 0
    calibration: object = None

    @property
    def dram_bytes_per_cycle_per_sm(self) -> float:
        """DRAM bandwidth share of one SM when every SM streams: GB/s / GHz / SMs."""
        return self.gpu.dram_gbps / self.gpu.clock_ghz / self.gpu.sm_count

    @property
    def mma_flops_per_cycle(self) -> float:
        """Dense fp16 tensor-core flops per cycle per SM: spec TFLOP/s / (SMs x clock). H100: ~3800 (4096 at boost)."""
        return self.gpu.dense_fp16_tflops * 1e12 / (self.gpu.sm_count * self.gpu.clock_ghz * 1e9)

    @property
    def time_clock_ghz(self) -> float:
        return self.clock_ghz or self.gpu.clock_ghz

    @property
    def tma_issue_cycles(self) -> float:
        """Cycles the issuing warp group spends on one TMA load before its next op."""
        return self.issue if self.tma_issue is None else self.tma_issue

    @property
    def expect_cycles(self) -> float:
        """Cycles of one barrier_expect_bytes."""
        return self.barrier_op if self.expect_bytes is None else self.expect_bytes

    def tma_transfer(self, nbytes: int) -> float:
        return nbytes / (self.tma_load_rate or self.dram_bytes_per_cycle_per_sm)

    def tma_load_transfer(self, nbytes: int) -> float:
        """Cycles a TMA load of ``nbytes`` holds its CTA's TMA queue (the next load starts after them)."""
        if self.tma_queue_rate is None:
            return self.tma_transfer(nbytes)
        return nbytes / self.tma_queue_rate

    def tma_load_latency(self, in_flight: int) -> float:
        """Cycles from a TMA load's transfer to its landing, with ``in_flight`` of the CTA's loads (this one
        included) not landed yet.

        >>> cm = CostModel(gpu_model("H200"), tma_queue_rate=53.0, tma_queue_latency=800.0, tma_latency_per_load=76.0)
        >>> cm.tma_load_latency(1), cm.tma_load_latency(4)
        (800.0, 1028.0)
        """
        if self.tma_queue_rate is None:
            return self.tma_latency
        return self.tma_queue_latency + self.tma_latency_per_load * max(0, in_flight - 1)

    @property
    def tma_loop_cycles(self) -> float:
        """What the simulator charges a load-wait loop per round trip besides the TMA queue: the load's issue, its
        barrier_expect_bytes and the wake after the wait (the calibration's latencies include them)."""
        return self.tma_issue_cycles + self.expect_cycles + self.wake

    def cp_async_transfer(self, nbytes: int, row_bytes: int = 128) -> float:
        rate = self.cp_async_rate(row_bytes) if self.cp_async_rate is not None else None
        return nbytes / (rate or self.tma_load_rate or self.dram_bytes_per_cycle_per_sm)

    def tma_store_transfer(self, nbytes: int) -> float:
        return nbytes / (self.tma_store_rate or self.tma_load_rate or self.dram_bytes_per_cycle_per_sm)

    def tma_store_queue_cycles(self, nbytes: int) -> float | None:
        """Cycles a TMA store of ``nbytes`` holds its CTA's load queue, where measured; None: its whole transfer."""
        return None if self.tma_store_load_cpb is None else nbytes * self.tma_store_load_cpb

    def mma_cycles(self, m: int, n: int, k: int, in_bits: int) -> float:
        if self.mma_rates is not None:
            rates = dict(self.mma_rates)
            # 4-bit operands (tcgen05 kind::mxf4) are not calibrated: twice the fp8 rate, as the datasheet has it
            rate = rates.get(in_bits) or (2.0 * rates[8] if in_bits == 4 else rates[16])
        else:
            # fp8 runs at 2x fp16, tf32 at 1/2 (H100 datasheet); mxfp4 x mxfp4 at 2x fp8 (B200 datasheet)
            rate = self.mma_flops_per_cycle * {4: 4.0, 8: 2.0, 16: 1.0, 32: 0.5}.get(in_bits, 1.0)
        return 2.0 * m * n * k / rate

    def wgmma_instructions(self, m: int, k: int, in_bits: int) -> int:
        """How many wgmma instructions a warp group's async_dot of (m x k) @ (k x n) is: one per 64 rows and
        per k-slice of one instruction (16 for 16-bit operands, 32 for fp8, 8 for tf32)."""
        k_instr = max(1, 256 // max(in_bits, 1))
        return max(1, m // 64) * max(1, k // k_instr)

    def wgmma_issue_cycles(self, m: int, k: int, in_bits: int) -> float:
        """Cycles the issuing warp group spends on an async_dot before it runs its next op."""
        if not self.wgmma_issue:
            return self.issue
        return max(self.issue, self.wgmma_issue * self.wgmma_instructions(m, k, in_bits))

    def serial_mma_cycles(self, m: int, n: int, k: int, in_bits: int) -> float:
        """An async_dot whose wgmma instructions run one after another (each waits for the previous):
        (m / 64) x (k / k-per-instruction) instructions, each at the measured cost for its N."""
        table = sorted(self.mma_serial)
        if not table:
            return self.mma_cycles(m, n, k, in_bits)
        each = float(np.interp(n, [x for x, _ in table], [c for _, c in table]))     # clamped at the measured N
        instr = self.wgmma_instructions(m, k, in_bits)
        return max(self.mma_cycles(m, n, k, in_bits), instr * each)

    def smem_cycles(self, nbytes: int) -> float:
        return nbytes / self.smem_bytes_per_cycle

    def tmem_cycles(self, nbytes: int) -> float:
        return nbytes / self.tmem_bytes_per_cycle

    def for_launch(self, resident: int) -> "CostModel":
        """The model for a launch with ``resident`` CTAs in flight at once: each CTA's TMA share is
        that of ``resident`` CTAs streaming together (measured where calibrated)."""
        cal = self.calibration
        if cal is None:
            return dataclasses.replace(self, resident=resident)
        latency = cal.bandwidth(cal.tma_latency_by_ctas, resident, extend=False) if cal.tma_latency_by_ctas \
            else self.tma_latency
        cp = (lambda row_bytes: cal.cp_async_rate(row_bytes, resident)) if cal.cp_async_bytes_per_cycle_per_sm \
            else None
        queue = cal.tma_queue_at(resident) or {}
        return dataclasses.replace(self, resident=resident, tma_latency=latency, cp_async_rate=cp,
                                   tma_store_load_cpb=cal.store_load_cpb_at(resident),
                                   tma_load_rate=cal.bandwidth(cal.l2_bytes_per_cycle_per_sm, resident),
                                   tma_store_rate=cal.bandwidth(cal.tma_store_bytes_per_cycle_per_sm, resident),
                                   **_queue_fields(queue, self.tma_loop_cycles))

    def launch_clock(self, cycles: float, tensor_util: float, window: str = "do_bench") -> LaunchClock:
        """The clock a launch of ``cycles`` runs at (``PowerModel.clock``); the fixed clock where none is measured."""
        if self.power is None:
            return LaunchClock(ghz=self.time_clock_ghz, regime="fixed", demand=0.0, tensor_util=tensor_util,
                               duty=1.0, window=window)
        return self.power.clock(cycles, tensor_util, window)

    def copy_load_stretch(self, tensor_cycles: float, cta_cycles: float) -> float:
        """How much longer CTAs run than simulated once their wgmmas run at the rate the tensor core keeps under a
        pipeline's copy load (``tensor_copy_share``): the tensor-busy share u of their cycles (``tensor_cycles`` at
        the wgmma loop's peak over ``cta_cycles``, both summed over CTAs) stretches by 1 / share, the rest (waits
        on loads, epilogue, issue) stays: 1 - u + u / share (1 for a launch without tensor work).

        >>> cm = CostModel(gpu_model("H200"), tensor_copy_share=0.98)
        >>> round(cm.copy_load_stretch(80.0, 100.0), 4), cm.copy_load_stretch(0.0, 100.0)
        (1.0163, 1.0)
        """
        if cta_cycles <= 0 or tensor_cycles <= 0:
            return 1.0
        u = min(1.0, tensor_cycles / cta_cycles)
        return 1.0 - u + u / self.tensor_copy_share

    def tensor_roof_cycles(self, tensor_cycles: float) -> float:
        """The fewest cycles a launch whose tensor cores are busy ``tensor_cycles`` (at the wgmma loop's peak, summed
        over its CTAs) can take: that work spread over every SM at the best rate a launch sustains
        (``tensor_sustained_share``)."""
        if tensor_cycles <= 0:
            return 0.0
        return tensor_cycles / (self.gpu.sm_count * self.tensor_sustained_share)

    def spill_rate_scale(self, smem_bytes: int, local_bytes: int, ctas_per_sm: int = 1, duty: float = 0.0) -> float:
        """How much dearer a register spill's reload is than through L1 (what ``spill_bytes`` is charged at): 1 when
        the spilled locals of the SM's CTAs (``local_bytes``, per CTA) fit in the L1 that their shared memory leaves
        of the SM's unified L1/SMEM; else they move at the rate the calibration's ``spill_loop`` family measured
        (``Calibration.spill_rate``: one CTA's rate, or the chip's share where this launch's resident CTAs, each
        spilling ``duty`` of its time, ask more than the L2 serves; ``duty`` 0: the rate alone), or where it has not,
        at the launch's L2 rate per CTA. Only where calibrated (the estimates' GPUs keep the L1 charge)."""
        cal = self.calibration
        if cal is None or not local_bytes:
            return 1.0
        smem = ctas_per_sm * smem_bytes
        carve = next((k * 1024 for k in SMEM_CARVEOUTS_KIB if k * 1024 >= smem), SMEM_CARVEOUTS_KIB[-1] * 1024)
        if ctas_per_sm * local_bytes <= L1_SMEM_BYTES - carve:
            return 1.0
        rate = cal.spill_rate(self.resident, duty) or self.tma_load_rate or self.dram_bytes_per_cycle_per_sm
        return max(1.0, self.l1_bytes_per_cycle / rate)

    def spill_duty(self, busy: float, cycles: float) -> float:
        """The share of its time a CTA spends spilling once its spills move at the rate its demand leaves them: a
        simulation charged at the rate alone spent ``busy`` of ``cycles`` on its spills' path; at a lower rate
        that time stretches (and the CTA with it: a spilling group waits for its spills), which raises the duty
        the rate is read at. The fixed point of the two, where the calibration measured the ``spill_loop``
        family; else ``busy / cycles``."""
        cal = self.calibration
        if busy <= 0 or cycles <= 0:
            return 0.0
        alone = cal.spill_rate(self.resident, 0.0) if cal is not None else None
        duty = min(1.0, busy / cycles)
        if not alone:
            return duty
        rate = alone
        for _ in range(60):
            stretched = busy * alone / rate
            duty = min(1.0, stretched / (cycles + stretched - busy))
            new = cal.spill_rate(self.resident, duty)
            if abs(new - rate) <= 1e-6 * rate:
                break
            rate = 0.5 * (rate + new)
        return duty

    def hbm_floor_us(self, nbytes: float) -> float:
        """Microseconds a launch needs at least to move ``nbytes`` through DRAM at the sustained bandwidth (bytes
        per second: the DRAM's clock is not the SMs')."""
        return nbytes / (self.dram_gbps * 1e3)

    @property
    def dram_gbps(self) -> float:
        """The DRAM's bandwidth, GB/s: the calibration's sustained figure, else the spec sheet's."""
        return self.hbm_gbps or self.gpu.dram_gbps

    def hbm_floor_cycles(self, nbytes: float) -> float:
        """Cycles the whole launch needs at least to move ``nbytes`` through DRAM (all SMs streaming)."""
        cal = self.calibration
        per_sm = cal.bandwidth(cal.hbm_bytes_per_cycle_per_sm, self.gpu.sm_count) if cal else \
            self.dram_bytes_per_cycle_per_sm
        return nbytes / (per_sm * self.gpu.sm_count)


#: a warp group issuing one wgmma instruction of an async_dot on the H200, cycles. No calibration family times it:
#: measured in gemm_ws 4096^3 CONFIGS[0] (64x256x64 async_dots, 4 m64n256k16 instructions each), 2026-12-02 05:44 UTC,
#: `benchmarks/shares_h200.py`, read by `benchmarks/shares_kstep.py`: the waits-only trace
#: (benchmarks/shares/gemm_ws_4096_waits.json.gz) has 231.5 cycles from the last barrier_wait to the async_dot_wait
#: (median, 8 lanes) less 114 between two adjacent waits (the recorder alone): 117.5; the every-op trace's
#: async_dot spans (not kept: 4 MB) 129 less ~6 of a span's own clock reads: 123. ~30 per instruction; measured at
#: N=256 only, taken as the same for every N
MEASURED_WGMMA_ISSUE = {"H200": 30.0}

#: the clock recorder (runtime/instrument.py) on the H200, cycles its warp group spends per recorded op, from the
#: op's end-clock read to the next op's start-clock read (the record's branches and stores, or atomics, and the
#: count); what simulate(recorder=...) charges after each recorded op (sim/timing/recorder.py). Measured in gemm_ws 4096^3
#: CONFIGS[0], 2026-12-02 05:44 UTC, `benchmarks/shares_h200.py` (traces in benchmarks/shares/), by recorder:
#: - "waits": 114, the median gap between the two barrier_waits of _wait_full (adjacent statements, nothing between
#:   them; 8 consumer lanes x 256, mean 115.1), `benchmarks/shares_kstep.py` on gemm_ws_4096_waits.json.gz;
#: - "all": 123, the same gap in the every-op trace (not kept, 4 MB; benchmarks/RESULTS.md, "Where a consumer's
#:   k-step goes");
#: - "totals": 263 = 114 + 149: the totals trace (gemm_ws_4096_totals.json, no spans) has the same records as the
#:   waits trace and 149 more busy cycles per record, loader (149.8) and consumers (148.7) alike: its three relaxed
#:   atomics per wait cost more than a record's three stores (`benchmarks/shares_recorder.py` derives it).
#: Other GPUs: the H200's figures, as estimates (the same instructions; not measured there)
MEASURED_RECORD = {"H200": {"waits": 114.0, "all": 123.0, "totals": 263.0}}

#: a TMA loader warp group's own work on the H200, cycles; no calibration family times it (the calibration loops'
#: figures are per loop, issue included), the gemm_ws 4096^3 CONFIGS[0] traces do. Derived, reproducibly, by
#: `.venv/bin/python benchmarks/loader_costs.py` (benchmarks/shares/loader_costs.json) from:
#: - "tma_issue": 47, one async_descriptor_load, the median span of the loader's 3 x 256 loads per lane (by site
#:   44 / 38.5 / 53: A half, B, A half) in the every-op trace benchmarks/timeline/gemm_ws_4096_timeline.json.gz
#:   (`profile()`, CTAs 0, 1, 126, 127, 2026-12-02 01:56 UTC, `benchmarks/timeline_h200.py`); the model had the
#:   generic issue slot, 8;
#: - "expect_bytes": 20, barrier_expect_bytes, the same trace's median (by site 24 / 17 / 20); the model had an
#:   ordinary arrive, ASSUMED_ARRIVE = 40;
#: - "scalar_op": 2.4, one integer scalar op of the kernel's code (CTA.charge_scalar; the index arithmetic was
#:   free): the waits trace (benchmarks/shares/gemm_ws_4096_waits.json.gz, the lightest recorder) has 351 cycles
#:   between two loader waits (median), less one record (114) and 3 x (47 + 20) leaves 36 for the loop's
#:   arithmetic, over the 15 scalar ops the simulator runs per loader k-step. The every-op trace's gaps hold ~160
#:   beyond its records: records between every two ops serialize what ptxas otherwise overlaps, so that trace is
#:   not used for it. Cross-check: a consumer k-step's 8 ops are 19 cycles, its measured arrive + loop back 69
#:   against the model's 40 + 19.
#: Spans include the recorder's two clock reads (a few cycles). GPUs of another SM (SAME_SM): not applied (generic
#: issue, arrive, free scalars), as for MEASURED_WGMMA_ISSUE
MEASURED_LOADER = {"H200": {"tma_issue": 47.0, "expect_bytes": 20.0, "scalar_op": 2.4}}

#: which MEASURED_LOADER figures the H200's model charges: all three. With them gemm_ws 4096^3's recorded shares are
#: within 7.6 points of every recorder's (every-op loader 12.9 -> 7.0), and the predict table's median |error| is
#: 10.35 % (9.95 % without; every cell 0-0.9 % slower, none past 35 %): benchmarks/RESULTS.md, "The loader's own
#: costs". A study of the model without them sets ``cost.APPLIED_LOADER = ()`` (read when a cost model is built)
APPLIED_LOADER: tuple = tuple(MEASURED_LOADER["H200"])

#: GPUs whose SM is another's: the H100 and the H200 are one chip (GH100, 132 SMs, the same clocks) with different
#: memory, so the SM-level instruction costs measured on the H200 (MEASURED_WGMMA_ISSUE, MEASURED_LOADER) are the
#: H100's too; its calibration file (memory, clock and power) is its own
SAME_SM = {"H100": "H200"}


def record_cycles(gpu: str, recorder: str) -> tuple[float, bool]:
    """(cycles the ``recorder`` costs per recorded op on ``gpu``, whether that is an estimate: another GPU's).

    >>> record_cycles("H200", "waits")
    (114.0, False)
    """
    name = gpu_model(gpu).name
    table = MEASURED_RECORD.get(name)
    estimate = table is None
    return float((table or MEASURED_RECORD["H200"])[recorder]), estimate

#: the arrive of an ordinary mbarrier, by assumption (the two calibration loops measure arrive + wake and
#: arrive + satisfied wait, not the split): the rest of each loop goes to the wake and to the wait
ASSUMED_ARRIVE = 40.0


def _queue_fields(queue: dict, loop_cycles: float) -> dict:
    """CostModel's TMA queue fields from a calibration's queue figures (``Calibration.tma_queue_at``); {} for
    none (the loads then take the L2 loop's rate and latency). ``loop_cycles``: what the simulator charges the
    calibration loop itself in a load's round trip (its issue, its expect_bytes, the wake after its wait), which
    the measured latency includes."""
    if not queue:
        return {}
    return dict(tma_queue_rate=queue["bytes_per_cycle"], tma_latency_per_load=queue["latency_per_load"],
                tma_queue_latency=max(0.0, queue["latency"] - loop_cycles))


def from_calibration(model: GPUModel, cal) -> CostModel:
    """The cost model of a measured GPU: every figure the calibration file has."""
    b = cal.barrier
    arrive = ASSUMED_ARRIVE
    # what the warp barrier saves per hand-over is the warp group's sync before the leader's arrive
    arrive_warp = arrive - (b["handover"] - b["handover_warp_barrier"])
    sm = SAME_SM.get(model.name, model.name)
    loader = {k: v for k, v in MEASURED_LOADER.get(sm, {}).items() if k in APPLIED_LOADER}
    cm = CostModel(
        model,
        tma_latency=(cal.bandwidth(cal.tma_latency_by_ctas, 1, extend=False) if cal.tma_latency_by_ctas
                     else cal.tma_latency_l2),
        barrier_op=arrive,
        barrier_arrive_warp=arrive_warp,
        barrier_wait=b["arrive_and_satisfied_wait"] - arrive,
        wake=b["handover"] - arrive,
        named_barrier=b["named_handover"],
        mma_group_gap=cal.single_group_gap(),
        wgmma_issue=MEASURED_WGMMA_ISSUE.get(sm, 0.0),
        tma_issue=loader.get("tma_issue"),
        expect_bytes=loader.get("expect_bytes"),
        scalar_op=loader.get("scalar_op", 0.0),
        smem_bytes_per_cycle=sum(cal.smem_bytes_per_cycle.values()) / len(cal.smem_bytes_per_cycle),
        mma_rates=tuple((bits, cal.mma_flops_per_cycle(bits)) for bits in (8, 16, 32)),
        tma_load_rate=cal.bandwidth(cal.l2_bytes_per_cycle_per_sm, 1),
        tma_store_rate=cal.bandwidth(cal.tma_store_bytes_per_cycle_per_sm, 1),
        tma_store_load_cpb=cal.store_load_cpb_at(1),
        clock_ghz=cal.clock_ghz,
        mma_serial=tuple((int(k), float(v)) for k, v in (cal.mma_serial_cycles or {}).items()),
        power=power_model(cal),
        tensor_sustained_share=min(1.0, (cal.power.get("tensor_sustained") or 0.0) / cal.mma_flops_per_cycle(16)
                                   or 1.0),
        tensor_copy_share=copy_share(model.name, cal),
        hbm_gbps=cal.power.get("hbm_gbps"),
        calibration=cal,
    )
    return dataclasses.replace(cm, **_queue_fields(cal.tma_queue_at(1) or {}, cm.tma_loop_cycles))


#: the tensor core's rate while TMA streams into its SM, over the wgmma loop's peak, on the H200, derived from the
#: calibration half (the ``mma_copy`` family's loop streams more than a GEMM does, so it is only the fallback): the simulator runs wgmmas at the loop's peak, so a kernel run for
#: seconds (calibration ``sustained_kernels``: flop per cycle per SM at its own clock, no launch gaps to speak of)
#: against its simulated cells (u: the CTAs' tensor-busy share; F_sim: its flop per cycle per SM) gives the share s
#: that makes 1 - u + u / s = F_sim / F_measured. `.venv/bin/python benchmarks/cost_model_validation.py
#: --derive-copy-share --reuse CELLS.json` (2026-12-07, on the cells simulated with the calibration of 2026-12-07
#: 13:06 UTC): the library's gemm_ws CONFIGS[0], the sustained runs' config, at 4096^3 / 8192^3, fp16 and bf16 (bf16
#: simulates as fp16): 0.955 / 0.957 / 0.993 / 0.981, median 0.969 (attention's sustained runs at Z=4 / Z=2 against
#: the Z=1 cells, a cross-check only: 0.931-0.971). The H100: the same derivation gives 1.098-1.117 (its simulated
#: gemm_ws is 8-11 % longer than the kernel sustained): nothing to read there, so its ``mma_copy`` loop's 0.927 stands
#: (``copy_share``). The derivation reads seeded-order simulations (docs/decisions.md, "Time order is an option").
MEASURED_COPY_SHARE = {"H200": 0.969}


def copy_share(gpu: str, cal) -> float:
    """The tensor core's rate under copy load over its peak: ``MEASURED_COPY_SHARE`` (the GPU's own GEMM run for
    seconds against its simulation), else the ``mma_copy`` family's loop (a TMA stream at the full L2 rate beside
    the wgmmas: more copy than a GEMM's, so a lower bound), else 1."""
    if gpu in MEASURED_COPY_SHARE:
        return min(1.0, MEASURED_COPY_SHARE[gpu])
    p = getattr(cal, "power", None) or {}
    if p.get("tensor_under_copy"):
        return min(1.0, float(p["tensor_under_copy"]) / cal.mma_flops_per_cycle(16))
    return 1.0


def power_model(cal) -> PowerModel | None:
    """The clock model of a calibration (None when it has no power figures)."""
    p = cal.power or {}
    if not p.get("boost_ghz") or not p.get("cap_demand"):
        return None
    return PowerModel(boost_ghz=float(p["boost_ghz"]), cap_demand=float(p["cap_demand"]),
                      data_factor=float(p.get("data_factor", 1.0)), flush_us=float(p.get("flush_us", 0.0)),
                      boost_s=float(p.get("boost_s", 0.0)), flush_demand=float(p.get("flush_demand", 0.0)),
                      burst_demand=float(p.get("burst_demand", 0.0)))


def cost_model(gpu) -> CostModel:
    from ...calibration import load
    model = gpu_model(gpu)
    cal = load(model.name)
    return from_calibration(model, cal) if cal is not None else CostModel(model)


@functools.lru_cache(maxsize=None)
def model_id(gpu) -> str:
    """What a simulated time depends on besides the kernel: this module's source and the GPU's calibration
    file, hashed (the explorer keys its simulated rows with it, so a re-calibration re-predicts). Read once
    per process: every row key asks for it."""
    import hashlib
    import pathlib
    from ...calibration import load
    h = hashlib.sha256(pathlib.Path(__file__).read_bytes())
    cal = load(gpu_model(gpu).name)
    if cal is not None:
        h.update(pathlib.Path(cal.path).read_bytes())
    return h.hexdigest()[:12]
