import importlib.util

import pytest
import torch
import triton
import triton.language as tl

import tlx_workbench as wb
from tlx_workbench.target import offline, gpu_model, current_model


def test_tutorial_module_imports_offline(tutorials_dir):
    # The tutorial asks driver.active for the torch device at import: fails without a GPU.
    spec = importlib.util.spec_from_file_location("_hgw", tutorials_dir / "hopper_gemm_ws.py")
    mod = importlib.util.module_from_spec(spec)
    with offline("sm_90"):
        spec.loader.exec_module(mod)
        assert mod.DEVICE == torch.device("cpu")
        assert triton.runtime.driver.active.get_current_target().arch == 90
        assert torch.cuda.get_device_properties("cuda").multi_processor_count == 132
    assert current_model() is None


def test_offline_nests_and_restores():
    with offline("sm_100"):
        assert triton.runtime.driver.active.get_current_target().arch == 100
        with offline("H200"):
            assert current_model().name == "H200"
        assert current_model().name == "B200"
    assert current_model() is None


def test_unknown_target_says_what_to_use():
    with pytest.raises(wb.TLXWorkbenchError, match="sm_90"):
        gpu_model("sm_75")


@triton.jit
def _scale(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)


def test_hopper_means_the_calibrated_h200_wherever_a_default_is_taken():
    # one GPU name throughout: the verbs say what %%tlx says, "sm_90 (H200)"
    for name in ("sm_90", "sm90", "90", 90, "hopper", "sm_90a", None):
        assert gpu_model(name).name == "H200", name
    with offline("sm_90"):
        assert current_model().name == "H200"
    x, out = torch.randn(16), torch.zeros(16)
    res = wb.simulate(_scale, x, out, BLOCK=16, grid=(1,))
    assert res.gpu == "H200" and res.trace.meta["calibration"]      # the measured figures, not estimates
    torch.testing.assert_close(out, x * 2)
    assert wb.compile(_scale, x, out, BLOCK=16, sass="lazy").gpu == "H200"


def test_h100_stays_available_by_name():
    x, out = torch.randn(16), torch.zeros(16)
    res = wb.simulate(_scale, x, out, BLOCK=16, grid=(1,), gpu="H100")
    # its own calibration, not the H200's; a GPU never measured keeps the estimates
    assert res.gpu == "H100" and res.trace.meta["calibration"] and \
        res.trace.meta["calibration"] != wb.simulate(_scale, x, out, BLOCK=16, grid=(1,)).trace.meta["calibration"]
    assert wb.compile(_scale, x, out, BLOCK=16, target="H100", sass="lazy").gpu == "H100"
