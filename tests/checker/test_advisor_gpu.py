"""The advisor's A/B on the GPU: both forms verified with wb.run and timed with wb.bench, the autotune
config pinned to the one the advice was made for. The pinning is checked here on the CPU; the A/B itself
needs a GPU."""
import pytest
import torch

from tlx_workbench.checker import advise_warp_barriers
from tlx_workbench.checker.advisor import _pinned

from check_helpers import load_tutorial
CFG = {"BM": 128, "BN": 128, "BK": 64, "GROUP_SIZE_M": 8, "NUM_STAGES": 3, "NUM_MMA_WARPS": 8,
       "NUM_MMA_GROUPS": 2, "EPILOGUE_SUBTILE": False, "NUM_CTAS": 1, "USE_WARP_BARRIER": False}


def test_the_ab_pins_the_autotuner_to_the_advised_config():
    gemm = load_tutorial("hopper_gemm_ws")
    tuner = gemm.matmul_kernel_tlx_ws
    before = list(tuner.configs)
    assert len(before) > 1 and any(c.kwargs["USE_WARP_BARRIER"] for c in before)
    with _pinned([vars(gemm)], "matmul_kernel_tlx_ws", CFG):
        (c,) = tuner.configs
        assert all(c.all_kwargs()[k] == v for k, v in CFG.items()) and c.num_warps == 4
    assert tuner.configs == before
    with _pinned([vars(gemm)], "matmul_kernel_tlx_ws", None):
        assert tuner.configs == before[:1]
    assert tuner.configs == before


@pytest.mark.gpu
def test_ab_on_the_gpu_verifies_and_times_both_forms():
    gemm = load_tutorial("hopper_gemm_ws")
    a = torch.randn(256, 256, dtype=torch.float16)     # CPU tensors: the advice comes from the simulator
    b = torch.randn(256, 256, dtype=torch.float16)
    adv = advise_warp_barriers(gemm.matmul, a, b, config=CFG, reference=lambda a, b: a.float() @ b.float())
    assert {x.barrier: (x.num_warps, x.num_arrivals) for x in adv.safe} == {"bars_empty_a": (4, 1),
                                                                             "bars_empty_b": (4, 2)}, adv
    assert [r.form for r in adv.ab] == ["ordinary (original)", "warp barriers (converted)"]
    for r in adv.ab:
        assert r.correct is True and r.ms > 0 and r.cycles is None and r.detail.startswith("GPU ("), adv.ab
    for name in ("bars_empty_a", "bars_empty_b"):
        p, ok, ev = adv[name].checks[-1]
        assert ok is True and "A/B on the GPU" in ev and "ms" in ev
    assert "not wired" not in repr(adv) and "<table>" in adv._repr_html_()
