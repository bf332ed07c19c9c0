import os
import sys
import pathlib

import pytest

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"

# Test folders keep their helper modules (kernels, fixtures data) beside the tests and
# import them by name; under --import-mode=importlib that needs the folders on sys.path.
for _d in sorted(pathlib.Path(__file__).parent.iterdir()):
    if _d.is_dir() and not _d.name.startswith(("_", ".")) and str(_d) not in sys.path:
        sys.path.insert(0, str(_d))


def _gpu_reason():
    try:
        import torch
        if torch.cuda.is_available():
            return None
        return "no CUDA GPU on this machine (torch.cuda.is_available() is False)"
    except Exception as e:  # pragma: no cover
        return f"torch cannot query CUDA: {e}"


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tutorials_dir():
    return TUTORIALS
