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


# -- what the bound launch (BoundLaunch) relies on ------------------------------------------------------------------
def test_jit_dispatch_ends_in_the_compiled_kernels_launcher():
    from triton.runtime.jit import JITFunction
    run = _source(JITFunction)          # the class's own text: uTLX wraps JITFunction.run on the class
    assert "kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata, launch_metadata," in run
    assert "knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook, *bound_args.values())" in run, \
        "JITFunction.run no longer hands the launcher every bound argument after the hooks"
    assert "stream = driver.active.get_current_stream(device)" in run


def test_cuda_launcher_calls_the_c_launch_with_the_flattened_arguments():
    from triton.backends.nvidia import driver
    init, call = _source(driver.CudaLauncher.__init__), _source(driver.CudaLauncher.__call__)
    assert "launcher = triton.runtime.driver.active.utils.launch" in init
    assert "self.launch = wrap_handle_tensordesc(launcher, signature, tensordesc_meta)" in init
    for attr in ("self.arg_annotations", "self.kernel_signature", "self.launch_cooperative_grid", "self.launch_pdl",
                 "self.global_scratch_size", "self.profile_scratch_size", "self.gsan_enabled"):
        assert attr in init, f"CudaLauncher no longer sets {attr}"
    assert ("self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,"
            in " ".join(call.split())), "CudaLauncher calls its launch with other leading arguments"
    assert ("kernel_metadata, launch_metadata, launch_enter_hook, launch_exit_hook, global_scratch, profile_scratch, "
            "self.arg_annotations, self.kernel_signature, kernel_args)" in " ".join(call.split()))
    text = open(inspect.getfile(driver).rsplit("/", 1)[0] + "/driver.c").read()
    assert 'PyArg_ParseTuple(args, "iiiKKpp(iii)OOOOOOy*O"' in text, "the C launch's argument list changed"
    assert "if (hook != Py_None)" in text, "the C launch no longer skips a None hook"
    assert "if (PyLong_Check(obj)) {\n    *dev_ptr = PyLong_AsUnsignedLongLong(obj);" in text, \
        "a pointer argument may no longer be passed as an int"
    assert '.tp_name = "triton.backends.nvidia.PyCUtensorMap"' in text


def test_tensor_maps_are_made_from_the_descriptors_fields():
    from triton.backends.nvidia import driver
    from triton.tools.tensor_descriptor import TensorDescriptor
    assert list(inspect.signature(driver.make_tensordesc_arg).parameters) == ["arg", "metadata", "_"]
    assert list(inspect.signature(driver.wrap_handle_tensordesc).parameters) == [
        "launcher", "signature", "tensordesc_meta"]
    src = _source(driver.make_tensordesc_arg)
    for use in ("arg.shape", "arg.strides", "arg.padding", "arg.round_f32_to_tf32", "arg.base.data_ptr()",
                "return [cu_tensor_map, *shape, *strides]"):
        assert use in src, f"make_tensordesc_arg no longer reads/returns {use}"
    fields = {f.name for f in __import__("dataclasses").fields(TensorDescriptor)}
    assert {"base", "shape", "strides", "block_shape", "padding", "round_f32_to_tf32"} <= fields


def test_triton_flattens_a_descriptor_in_place_into_map_shape_and_strides(compiled):
    """The layout BoundLaunch finds its slots in: each descriptor argument becomes its map, shape and strides where
    it stood; every other argument (constexprs too) stays, in order."""
    from triton.backends.driver import expand_signature, wrap_handle_tensordesc_impl
    made = []
    sig = dict(enumerate(compiled.src.signature.values()))
    flatten = wrap_handle_tensordesc_impl(lambda *a: made.append(a[-1]), sig, compiled.metadata.tensordesc_meta,
                                          lambda arg, meta, _: [("map", arg), ("shape", arg), ("strides", arg)])
    values = ["A", "B", "C", 1, 2, 3] + [None] * (len(sig) - 6)
    flatten(values)
    flat = list(made[0])
    assert flat[:9] == [("map", "A"), ("shape", "A"), ("strides", "A"), ("map", "B"), ("shape", "B"),
                        ("strides", "B"), ("map", "C"), ("shape", "C"), ("strides", "C")]
    assert flat[9:12] == [1, 2, 3] and len(flat) == len(sig) + 6
    assert len(expand_signature(sig.values(), compiled.metadata.tensordesc_meta, "nvTmaDesc")) == len(sig) + 12


def test_the_installed_dispatch_is_one_a_bound_launch_may_stand_in_for():
    """Triton's JITFunction.run, or uTLX's wrapper of it (utlx_plugin/_ctas_per_cga.py): if either is renamed or
    something else wraps the dispatch, launches stop binding (slower, never wrong) and this says so."""
    from triton.runtime.jit import JITFunction
    from tlx_workbench.kernels.gemm_ws import gemm_ws_coop_kernel
    run = JITFunction.__dict__["run"]
    assert triton_launch._is_tritons(run), f"JITFunction.run is {run.__module__}.{run.__qualname__}"
    # a launch hook (the watchdog's, which an in-process profile run installs for good) sends launches through
    # Triton's dispatch, where the hook is called: the bound launch steps aside then
    assert triton_launch.dispatch_is_triton(gemm_ws_coop_kernel) == triton_launch._hooks_idle()
    if run.__module__.startswith("utlx_plugin"):
        src = _source(run)
        assert 'kwargs.pop("ctas_per_cga", None)' in src and "return _orig_run(self, *args, grid=grid" in src
