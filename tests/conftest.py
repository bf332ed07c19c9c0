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


@pytest.hookimpl(tryfirst=True)          # before `-m` deselects: the marks it reads are added here
def pytest_collection_modifyitems(config, items):
    # a test that drives Chromium is a browser test, marked or not: `make test` runs them on their own after the
    # parallel run (a JupyterLab page misses its timeouts when another worker holds the other core)
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()) and "browser" not in item.keywords:
            item.add_marker(pytest.mark.browser)
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
