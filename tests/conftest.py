import os
import pathlib

import pytest

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"


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
