import contextlib
import importlib.util
import pathlib

import pytest

import tlx_workbench as wb

TUTORIALS = pathlib.Path(__import__("tlx").__file__).parent / "tutorials"
_loaded = {}


def load_tutorial(name, any_cluster_shape=False):
    """Import a TLX wheel tutorial, unchanged, by path (its module-level code asks the driver for the GPU).
    ``any_cluster_shape``: let its configs declare clusters uTLX refuses, e.g. (1, 2, 1) (simulator only)."""
    if name not in _loaded:
        from tlx_workbench.sim.hardware.cluster_shapes import any_cluster_shape as lenient
        with wb.offline("H100"), (lenient() if any_cluster_shape else contextlib.nullcontext()):
            spec = importlib.util.spec_from_file_location("tlxtut_" + name.replace("-", "_"), TUTORIALS / f"{name}.py")
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        _loaded[name] = mod
    return _loaded[name]


@pytest.fixture
def tutorial():
    return load_tutorial
