import pytest

import tlx_workbench as wb

from check_helpers import HERE


@pytest.fixture(scope="session")
def seeded():
    return wb.load_module(HERE / "seeded_kernels.py", target="sm_90")
