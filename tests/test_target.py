import importlib.util

import pytest
import torch
import triton

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
