"""Cycle costs of simulated ops, per GPU model.

Every figure is an estimate for a Hopper SM (B200 shares them unless noted), with where it comes from;
per-GPU rates (DRAM bandwidth, tensor-core flops, TMEM) come from ``tlx_workbench.target.GPU_MODELS``. The model is
deliberately simple — per-CTA shared resources (the TMA engine's bandwidth share and
the tensor cores) plus fixed latencies — so a trace shows the *shape* of a pipeline
(who waits on whom, where the tensor cores idle), not exact cycle counts.
"""
from __future__ import annotations

import dataclasses

from ..target import GPUModel, gpu_model


@dataclasses.dataclass(frozen=True)
class CostModel:
    gpu: GPUModel
    # DRAM -> SMEM latency of a TMA load (L2 miss). "Demystifying the NVIDIA Hopper
    # architecture" (Luo et al., 2024) measures ~480 cycles global-memory latency on H800.
    tma_latency: float = 500.0
    # issuing a TMA op / a wgmma / an mbarrier op from one thread: a few instructions
    issue: float = 8.0
    # mbarrier arrive and a satisfied try_wait: tens of cycles (same paper, ~20-30 cycles)
    barrier_op: float = 20.0
    # wake-up after a phase flip (try_wait loop re-polls) — same order as a barrier op
    wake: float = 20.0
    # named barrier bar.sync / bar.arrive: ~20 cycles (CUDA __syncthreads microbenchmarks)
    named_barrier: float = 20.0
    # fixed wgmma pipeline latency on top of the throughput term
    mma_latency: float = 32.0
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

    @property
    def dram_bytes_per_cycle_per_sm(self) -> float:
        """DRAM bandwidth share of one SM when every SM streams: GB/s / GHz / SMs."""
        return self.gpu.dram_gbps / self.gpu.clock_ghz / self.gpu.sm_count

    @property
    def mma_flops_per_cycle(self) -> float:
        """Dense fp16 tensor-core flops per cycle per SM: spec TFLOP/s / (SMs x clock). H100: ~3800 (4096 at boost)."""
        return self.gpu.dense_fp16_tflops * 1e12 / (self.gpu.sm_count * self.gpu.clock_ghz * 1e9)

    def tma_transfer(self, nbytes: int) -> float:
        return nbytes / self.dram_bytes_per_cycle_per_sm

    def mma_cycles(self, m: int, n: int, k: int, in_bits: int) -> float:
        # fp8 runs at 2x fp16, tf32 at 1/2 (H100 datasheet)
        rate = self.mma_flops_per_cycle * {8: 2.0, 16: 1.0, 32: 0.5}.get(in_bits, 1.0)
        return 2.0 * m * n * k / rate

    def smem_cycles(self, nbytes: int) -> float:
        return nbytes / self.smem_bytes_per_cycle

    def tmem_cycles(self, nbytes: int) -> float:
        return nbytes / self.tmem_bytes_per_cycle


def cost_model(gpu) -> CostModel:
    return CostModel(gpu_model(gpu))
