"""Offline GPU targets: compile (and simulate) TLX kernels with no GPU.

Kernel modules, TLX's own tutorials among them, ask
``triton.runtime.driver.active`` for the target and the torch device at import
time; on a CPU-only machine that raises "0 active drivers". :func:`offline`
installs a driver that answers for a chosen GPU model (H100, H200, B200), so such
modules import and compile unchanged; torch tensors then live on the CPU.

>>> from tlx_workbench import offline
>>> with offline("sm_90"):
...     import my_kernels            # calls driver.active... at import: fine
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import types

from .errors import TLXWorkbenchError


@dataclasses.dataclass(frozen=True)
class GPUModel:
    """Facts of one GPU the workbench can target without having it."""
    name: str
    arch: int                    # compute capability as Triton writes it: 90, 100
    sm_count: int
    smem_per_block: int          # opt-in maximum dynamic SMEM per CTA, bytes
    smem_per_sm: int
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    tmem_columns: int = 0        # tensor memory columns per SM (sm_100: 512)
    clock_ghz: float = 1.98
    l2_bytes: int = 50 * 2**20
    dram_gbps: float = 3350.0
    dense_fp16_tflops: float = 989.0

    @property
    def target_name(self) -> str:
        return f"sm_{self.arch}"

    def gpu_target(self):
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cuda", self.arch, 32)


GPU_MODELS: dict[str, GPUModel] = {
    "H100": GPUModel("H100", 90, 132, 232448, 233472, clock_ghz=1.98, l2_bytes=50 * 2**20,
                     dram_gbps=3350.0, dense_fp16_tflops=989.0),
    "H200": GPUModel("H200", 90, 132, 232448, 233472, clock_ghz=1.98, l2_bytes=50 * 2**20,
                     dram_gbps=4800.0, dense_fp16_tflops=989.0),
    "B200": GPUModel("B200", 100, 148, 232448, 233472, tmem_columns=512, clock_ghz=1.965,
                     l2_bytes=126 * 2**20, dram_gbps=8000.0, dense_fp16_tflops=2250.0),
}
# the names people type for a target; an architecture stands for the model the workbench is calibrated on
# (H200 for Hopper: calibration/H200.json), so every verb, view and header names the same GPU
_ALIASES = {"sm_90": "H200", "sm90": "H200", "90": "H200", "hopper": "H200", "sm_90a": "H200",
            "sm_100": "B200", "sm100": "B200", "100": "B200", "blackwell": "B200", "sm_100a": "B200"}


def gpu_model(target: "str | int | GPUModel | None" = None) -> GPUModel:
    """The GPU model for ``target``: "sm_90", "sm_100", "H100", "H200", "B200", 90, 100 or a GPUModel.

    An architecture means its default model: H200 for sm_90 (the calibrated one), B200 for sm_100;
    ``None`` means the offline model in force, else the H200.

    >>> gpu_model("sm_90").name, gpu_model("H100").name
    ('H200', 'H100')
    """
    if target is None:
        return current_model() or GPU_MODELS["H200"]
    if isinstance(target, GPUModel):
        return target
    key = str(target).strip()
    if key.upper() in GPU_MODELS:
        return GPU_MODELS[key.upper()]
    if key.lower() in _ALIASES:
        return GPU_MODELS[_ALIASES[key.lower()]]
    raise TLXWorkbenchError(
        f"unknown target {target!r}",
        hint=f"use one of {sorted(GPU_MODELS)} or sm_90 / sm_100")


class _DeviceProperties(types.SimpleNamespace):
    pass


def device_properties(model: GPUModel) -> _DeviceProperties:
    """What ``torch.cuda.get_device_properties`` would say on ``model``."""
    return _DeviceProperties(
        name=f"NVIDIA {model.name} (offline, tlx_workbench)",
        major=model.arch // 10, minor=model.arch % 10,
        multi_processor_count=model.sm_count,
        total_memory=141 * 2**30 if model.name == "H200" else 80 * 2**30,
        shared_memory_per_block_optin=model.smem_per_block,
        shared_memory_per_multiprocessor=model.smem_per_sm,
        regs_per_multiprocessor=model.regs_per_sm,
        L2_cache_size=model.l2_bytes,
        warp_size=32,
        max_threads_per_multi_processor=2048,
        is_integrated=False,
        uuid="offline",
    )


class OfflineDriver:
    """A Triton driver for a GPU that is not here: it knows the target, launches nothing.

    ``triton.runtime.driver.set_active(OfflineDriver(gpu_model("H200")))`` is what
    :func:`offline` does; launches are served by the simulator when one is active.
    """

    def __init__(self, model: GPUModel):
        self.model = model
        self.get_current_device = lambda: 0
        self.set_current_device = lambda device: None
        self.get_current_stream = lambda device=None: 0
        self.get_device_capability = lambda device=None: (model.arch // 10, model.arch % 10)

    @staticmethod
    def is_active():
        # never picked by Triton's own discovery; only installed on purpose
        return False

    def get_current_target(self):
        return self.model.gpu_target()

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_device_interface(self):
        return _offline_cuda_interface(self.model)

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp
        return ty_to_cpp(ty)

    def get_benchmarker(self):
        def _no_bench(*args, **kwargs):
            raise TLXWorkbenchError(
                f"cannot time a kernel on the offline target {self.model.name}",
                hint="benchmark on a machine with a GPU, or read simulated cycles from tlx_workbench.simulate")
        return _no_bench

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(1, dtype=torch.int8)

    def clear_cache(self, cache):
        cache.zero_()

    def allocate_default_profile_scratch(self, size, alignment, stream):
        import torch
        return torch.zeros(size, dtype=torch.int8)

    def __repr__(self):
        return f"OfflineDriver({self.model.name}, sm_{self.model.arch})"


def _offline_cuda_interface(model: GPUModel):
    import torch
    ns = types.SimpleNamespace()
    ns.get_device_properties = lambda device=None: device_properties(model)
    ns.get_device_capability = lambda device=None: (model.arch // 10, model.arch % 10)
    ns.current_device = lambda: 0
    ns.device_count = lambda: 1
    ns.is_available = lambda: True
    ns.synchronize = lambda device=None: None
    ns.set_device = lambda device: None
    ns.current_stream = lambda device=None: types.SimpleNamespace(cuda_stream=0, synchronize=lambda: None)
    ns.default_stream = ns.current_stream
    ns.stream = lambda s: contextlib.nullcontext()
    ns.Event = torch.cuda.Event
    return ns


_lock = threading.RLock()
_stack: list[GPUModel] = []


def current_model() -> GPUModel | None:
    """The offline GPU model in force, or None when Triton talks to a real GPU."""
    return _stack[-1] if _stack else None


# torch.cuda queries that host code makes around a kernel launch
_TORCH_CUDA_PATCHES = ("get_device_properties", "get_device_capability", "current_device",
                       "device_count", "synchronize", "set_device", "current_stream", "default_stream")


class offline(contextlib.ContextDecorator):
    """Make Triton believe ``target`` is present, for a ``with`` block or for good.

    ``with offline("sm_100"): ...`` restores the previous driver on exit;
    ``offline("H200").enable()`` keeps it until ``.disable()``. Inside, TLX kernel
    modules import unchanged, ``torch.cuda.get_device_properties()`` answers for the
    model, and tensors that the host code puts on ``DEVICE`` live on the CPU.
    """

    def __init__(self, target: "str | int | GPUModel" = "sm_90", *, patch_torch: bool = True):
        self.model = gpu_model(target)
        self.patch_torch = patch_torch
        self._saved: list = []

    def enable(self) -> "offline":
        import torch
        from triton.runtime import driver
        with _lock:
            self._saved.append((driver._active, {n: getattr(torch.cuda, n) for n in _TORCH_CUDA_PATCHES}))
            drv = OfflineDriver(self.model)
            driver.set_active(drv)
            if self.patch_torch:
                iface = drv.get_device_interface()
                for n in _TORCH_CUDA_PATCHES:
                    setattr(torch.cuda, n, getattr(iface, n))
            _stack.append(self.model)
        return self

    def disable(self) -> None:
        import torch
        from triton.runtime import driver
        with _lock:
            if not self._saved:
                return
            active, saved_torch = self._saved.pop()
            driver._active = active
            for n, f in saved_torch.items():
                setattr(torch.cuda, n, f)
            if _stack:
                _stack.pop()

    __enter__ = enable

    def __exit__(self, *exc):
        self.disable()
        return False


def has_gpu() -> bool:
    """True when a CUDA GPU is usable by torch here."""
    try:
        import torch
        return bool(torch.cuda.is_available()) and torch.version.hip is None and current_model() is None
    except Exception:
        return False
