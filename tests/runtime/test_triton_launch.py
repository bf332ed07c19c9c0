"""runtime/triton_launch.py: what it relies on in Triton's CompiledKernel and CUDA launcher still
holds (these fail, naming the thing that moved, when Triton changes it), and what it does to a real
compiled kernel, on the CPU (the cluster launch itself is tests/kernels/test_gemm_cluster.py's, on a GPU)."""
import inspect

import pytest

from tlx_workbench.runtime import triton_launch


def _source(obj) -> str:
    return inspect.getsource(obj)


# -- what Triton must keep ----------------------------------------------------------------------------------
def test_compiled_kernel_packs_its_metadata_through_the_backend():
    from triton.compiler.compiler import CompiledKernel
    init = _source(CompiledKernel.__init__)
    assert "self.packed_metadata = backend.pack_metadata(self.metadata)" in init, \
        "CompiledKernel no longer keeps backend.pack_metadata(metadata) as packed_metadata"
    assert "namedtuple" in init, "CompiledKernel.metadata is no longer a namedtuple (launch_in_clusters uses _replace)"
    assert "self._run = None" in init and "self.module = None" in init


def test_compiled_kernel_makes_its_launcher_from_metadata_on_first_load():
    from triton.compiler.compiler import CompiledKernel
    init_handles = _source(CompiledKernel._init_handles)
    assert "if self.module is not None:" in init_handles, "_init_handles no longer returns early once loaded"
    assert "self._run = driver.active.launcher_cls(self.src, self.metadata)" in init_handles, \
        "the launcher is no longer made from (src, metadata) by _init_handles"
    assert isinstance(inspect.getattr_static(CompiledKernel, "run"), property)
    assert "self._run" in _source(CompiledKernel.run.fget)
    # every launch hands packed_metadata to the launcher
    assert "self.packed_metadata" in _source(CompiledKernel.__getitem__)


def test_cuda_backend_packs_num_ctas():
    from triton.backends.nvidia.compiler import CUDABackend
    src = _source(CUDABackend.pack_metadata)
    assert "metadata.num_ctas" in src, "CUDABackend.pack_metadata no longer carries num_ctas"


def test_cuda_launcher_launches_num_ctas_per_cluster():
    from triton.backends.nvidia import driver
    launcher = driver.CudaLauncher
    params = list(inspect.signature(launcher.__init__).parameters)
    assert params[:3] == ["self", "src", "metadata"], f"CudaLauncher(src, metadata) changed: {params}"
    assert 'getattr(metadata, "num_ctas", 1)' in _source(launcher.__init__), \
        "CudaLauncher no longer reads num_ctas from the kernel's metadata"
    c_src = (inspect.getfile(driver).rsplit("/", 1)[0]) + "/driver.c"
    text = open(c_src).read()
    assert "gridX * num_ctas" in text and "clusterDim.x = num_ctas" in text, \
        "Triton's CUDA launch no longer starts gridX * num_ctas CTAs in clusters of num_ctas"


# -- what the adapter does ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled():
    from tlx_workbench.kernels import gemm_ws
    return gemm_ws.compile_offline(gemm_ws.SIM_CONFIGS["tiny"])


def test_launch_in_clusters_sets_every_copy_of_the_count(compiled):
    from triton.compiler.compiler import make_backend
    assert triton_launch.cluster_size(compiled) == 1
    before = compiled.packed_metadata
    assert before == make_backend(compiled.metadata.target).pack_metadata(compiled.metadata)
    try:
        assert triton_launch.launch_in_clusters(compiled, 2) is compiled
        assert triton_launch.cluster_size(compiled) == 2 and compiled.metadata.num_ctas == 2
        # what the hand-written tuple used to be: (num_warps, num_ctas, shared)
        assert compiled.packed_metadata == (compiled.metadata.num_warps, 2, compiled.metadata.shared)
        assert compiled._run is None        # not loaded: _init_handles makes the launcher from metadata later
    finally:
        triton_launch.launch_in_clusters(compiled, 1)
    assert compiled.packed_metadata == before


def test_a_loaded_kernel_gets_a_new_launcher(compiled, monkeypatch):
    import triton

    made = []

    class Driver:
        @staticmethod
        def launcher_cls(src, metadata):
            made.append((src, metadata))
            return "launcher"

    monkeypatch.setattr(compiled, "module", object())
    monkeypatch.setattr(triton.runtime.driver, "_active", Driver())     # DriverConfig.active returns it
    try:
        triton_launch.launch_in_clusters(compiled, 2)
        assert made and made[0][0] is compiled.src and made[0][1].num_ctas == 2
        assert compiled._run == "launcher"
    finally:
        monkeypatch.setattr(compiled, "_run", None)
        monkeypatch.setattr(compiled, "module", None)
        triton_launch.launch_in_clusters(compiled, 1)
