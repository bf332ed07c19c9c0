"""``device="cuda"`` on a machine without one: torch calls that name CUDA get the CPU.

Used by the pytest plugin (:mod:`tlx_workbench.pytest_plugin`), together with
:func:`tlx_workbench.target.offline` (which answers Triton's driver queries and
``torch.cuda.get_device_properties``/``get_device_capability``). Here: a
``TorchFunctionMode`` rewrites the device of factory calls, ``Tensor.to`` and
``Tensor.cuda``; ``torch.cuda`` streams, events, ``is_available`` and memory queries
get CPU stand-ins; fp16/bf16 matmuls are computed as the tensor cores add them (``_reduced_float_matmul``). Tensors really live on the CPU, so ``x.is_cuda`` is False.

>>> with CudaOnCpu(gpu_model("H200")):
...     x = torch.ones(4, device="cuda")      # a CPU tensor
"""
from __future__ import annotations

import contextlib
import types

from .errors import TLXWorkbenchError


def _is_cuda(dev) -> bool:
    import torch
    if isinstance(dev, torch.device):
        return dev.type == "cuda"
    if isinstance(dev, str):
        return dev.split(":")[0] == "cuda"
    return False


def _cpu(dev):
    return "cpu" if _is_cuda(dev) else dev


class _Stream:
    """torch.cuda.Stream on the CPU: work is synchronous, so waiting is a no-op."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority
        self.cuda_stream = 0

    def synchronize(self):
        return None

    def wait_stream(self, other):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        event = event or _Event()
        event.record(self)
        return event

    def query(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event:
    """torch.cuda.Event on the CPU; there is no GPU clock to time with."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing

    def record(self, stream=None):
        return None

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def query(self):
        return True

    def elapsed_time(self, end):
        raise TLXWorkbenchError("torch.cuda.Event.elapsed_time under --tlx-sim: no GPU ran, so there is no GPU time",
                                hint="time kernels on a GPU; the simulator's cycles are in the --tlx-sim report")


def _matmuls():
    import torch
    return frozenset({torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__,
                      torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm, torch.nn.functional.linear})



def _tensor_core_matmul(a, b):
    """``a @ b`` of fp16/bf16 tensors (2-D or batched) as :func:`tlx_workbench.sim.ops.mma_numerics.mma_accumulate`
    adds it (that function, outside autograd): float32, the same bits as the simulator's MMA of the same operands."""
    import torch
    from .sim.ops.mma_numerics import k_slice
    step = k_slice(16)
    k = a.shape[-1]
    shape = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (a.shape[-2], b.shape[-1])
    if k == 0:
        return torch.zeros(shape, dtype=torch.float32)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _tensor_core_matmul_autograd(a, b, step)
    with torch.no_grad():
        return _tensor_core_matmul_blocked(a, b, step, shape)


def _tensor_core_matmul_autograd(a, b, step):
    # the same sums through differentiable ops (whole matrices: slower, kept for tensors that need a gradient)
    a64, b64 = a.double(), b.double()
    out = None
    for k0 in range(0, a.shape[-1], step):
        part = a64[..., k0:k0 + step] @ b64[..., k0:k0 + step, :]
        out = part.float() if out is None else (out + part).float()
    return out


def _tensor_core_matmul_blocked(a, b, step, shape):
    # the simulator's own MMA (compiled, tile by tile over the cores; the same function, so the same bits)
    import torch
    from .sim.ops.mma_numerics import mma_accumulate
    out = mma_accumulate(None, a.float().numpy(), b.float().numpy(), 16)
    return torch.from_numpy(out).reshape(shape)


def _reduced_float_matmul(func, args, kwargs):
    """A fp16/bf16 matmul as the GPU computes it, or None when it is not one.

    On a GPU, torch's fp16/bf16 matmuls run on cuBLAS's tensor-core kernels: exact products, the same MMA
    instructions a TLX kernel issues, K summed in order into fp32, rounded once to the output type. So a GEMM
    kernel and its torch reference agree to the bit there, and GPU suites compare them at fp16's tolerance. The
    same product here is the simulator's MMA model (``sim/ops/mma_numerics.py``: per 16-element slice of K, the exact
    sum rounded into fp32). Torch's own CPU kernel would be neither: ~300x slower (2048^3: 75 s against 0.3 s in
    fp32 on this 2-core box) and rounded differently (1 ulp in ~0.3 % of a 1024^3 product's elements)."""
    import torch
    if kwargs.get("out") is not None or kwargs.get("input") is not None:
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.dtype not in (torch.float16, torch.bfloat16) for t in tensors):
        return None
    dtype = tensors[0].dtype
    if any(t.dtype != dtype for t in tensors) or len(args) < 2:
        return None
    if func is torch.Tensor.__rmatmul__:
        args = (args[1], args[0]) + tuple(args[2:])
    x, w = args[0], args[1]
    if not (isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor)) or x.dim() < 2 or w.dim() < 2:
        return None
    if func is torch.nn.functional.linear:
        bias = args[2] if len(args) > 2 else kwargs.get("bias")
        out = _tensor_core_matmul(x, w.t())
        if bias is not None:
            out = out + bias.float()
        return out.to(dtype)
    if kwargs:
        return None
    if func in (torch.bmm, torch.Tensor.bmm) and (x.dim() != 3 or w.dim() != 3):
        return None
    return _tensor_core_matmul(x, w).to(dtype)


def _mode_class():
    import torch
    from torch.overrides import TorchFunctionMode
    matmuls = _matmuls()

    class _CudaToCpuMode(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _cpu(kwargs["device"])
            if func is torch.Tensor.cuda:
                return args[0]
            if func is torch.Tensor.to and args:
                args = (args[0],) + tuple(_cpu(a) for a in args[1:])
            if func in matmuls:
                out = _reduced_float_matmul(func, args, kwargs)
                if out is not None:
                    return out
            return func(*args, **kwargs)

    return _CudaToCpuMode


# torch.cuda names replaced for the session (offline() already answers the device queries)
def _cuda_namespace(model):
    from .target import device_properties
    ns = types.SimpleNamespace()
    ns.is_available = lambda: True
    ns.device_count = lambda: 1
    ns.get_device_name = lambda device=None: device_properties(model).name
    ns.Stream = _Stream
    ns.Event = _Event
    ns.stream = lambda s=None: contextlib.nullcontext(s)
    ns.set_stream = lambda s: None
    ns.synchronize = lambda device=None: None
    ns.empty_cache = lambda: None
    ns.memory_allocated = lambda device=None: 0
    ns.max_memory_allocated = lambda device=None: 0
    ns.memory_reserved = lambda device=None: 0
    ns.reset_peak_memory_stats = lambda device=None: None
    ns.manual_seed = lambda seed: None
    ns.manual_seed_all = lambda seed: None
    return ns


class CudaOnCpu:
    """For a session (``enable``/``disable``) or a ``with`` block: CUDA names in torch mean the CPU."""

    def __init__(self, model):
        self.model = model
        self._mode = None
        self._saved: dict = {}

    def enable(self) -> "CudaOnCpu":
        import torch
        ns = _cuda_namespace(self.model)
        for name, value in vars(ns).items():
            self._saved[name] = getattr(torch.cuda, name, None)
            setattr(torch.cuda, name, value)
        self._mode = _mode_class()()
        self._mode.__enter__()
        return self

    def disable(self) -> None:
        import torch
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        for name, value in self._saved.items():
            if value is None:
                delattr(torch.cuda, name)
            else:
                setattr(torch.cuda, name, value)
        self._saved = {}

    __enter__ = enable

    def __exit__(self, *exc):
        self.disable()
        return False
