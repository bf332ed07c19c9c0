"""The kernels a call runs through torch beside its TLX launches: a ``torch.zeros`` for the output, a cast, a
transpose made contiguous. On a GPU each is a kernel of its own in the same stream, inside any timer around the call;
the simulator runs them on the CPU, and :class:`TorchKernelRecorder` notes each one (aten level, where torch's own
decompositions have happened) with the bytes it reads and writes and the line of the caller's code that ran it.
``wb.predict`` charges each at the DRAM's bandwidth plus a launch (``sim/timing/prediction.py``).

What counts: an aten op that makes or changes data. Views, metadata, ``empty`` (an allocation, no kernel),
``lift_fresh`` and an op whose tensors are all 0-d (a Python scalar's tensor, host-side work) do not; nor does the
simulator's own work inside a launch (the recorder pauses there).

>>> with TorchKernelRecorder() as rec:                              # doctest: +SKIP
...     c = torch.zeros(1024, 1024, dtype=torch.float16)
>>> rec.kernels[0].op, rec.kernels[0].bytes_written                   # doctest: +SKIP
('aten.zeros', 2097152)
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

#: aten ops that allocate, alias or describe memory without a kernel (by overload packet name)
NO_KERNEL = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "lift_fresh",
    "detach", "alias", "_local_scalar_dense", "set_", "resize_", "resize_as_", "as_strided", "_reshape_alias",
    "is_same_size", "is_nonzero", "equal", "record_stream", "_has_compatible_shallow_copy_type", "size", "stride",
    "storage_offset", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "numel", "item",
})
#: in-place ops that overwrite their first argument without reading it
OVERWRITE = frozenset({"zero_", "fill_", "copy_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_",
                       "geometric_", "cauchy_", "log_normal_"})

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(_HERE) + os.sep


@dataclasses.dataclass(frozen=True)
class TorchKernel:
    """One kernel a call runs through torch: the aten op, the bytes it reads and writes, where the caller ran it
    (``file:line``), and how many TLX launches came before it in the call."""
    op: str
    bytes_read: int
    bytes_written: int
    where: str
    after_launches: int = 0

    @property
    def nbytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def __str__(self):
        return f"{self.op} ({self.nbytes / 2**20:.2f} MiB at {self.where})"


def _tensors(xs):
    import torch
    out = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            out.append(x)
        elif isinstance(x, (list, tuple)):
            out.extend(_tensors(x))
    return out


def _caller() -> str:
    """file:line of the innermost frame outside torch and this package: the caller's code that ran the op."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not (name.startswith(_PACKAGE) or f"{os.sep}torch{os.sep}" in name or name.startswith("<frozen")):
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back
    return "?"


def kernel_of(func, args, kwargs, out, after_launches=0) -> TorchKernel | None:
    """The TorchKernel an aten op ``func`` makes, or None where it runs none (see the module doc)."""
    name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
    if name in NO_KERNEL or getattr(func, "is_view", False):
        return None
    ins = list({id(t): t for t in _tensors(list(args) + list((kwargs or {}).values()))}.values())
    outs = _tensors(out if isinstance(out, (list, tuple)) else [out])
    if all(t.dim() == 0 for t in ins + outs):
        return None
    schema = getattr(func, "_schema", None)
    if schema is not None and schema.is_mutable:
        import torch
        written_ts = []
        for i, a in enumerate(schema.arguments):
            v = args[i] if i < len(args) else (kwargs or {}).get(a.name)
            if a.alias_info is not None and a.alias_info.is_write and isinstance(v, torch.Tensor):
                written_ts.append(v)
        written_ts = written_ts or ins[:1]
        skip = {id(t) for t in written_ts} if name in OVERWRITE else set()
        read = sum(t.nbytes for t in ins if id(t) not in skip and t.dim() > 0)
        written = sum(t.nbytes for t in written_ts)
    else:
        read = sum(t.nbytes for t in ins if t.dim() > 0)
        written = sum(t.nbytes for t in outs)
    if read + written == 0:
        return None
    return TorchKernel(f"aten.{name}", int(read), int(written), _caller(), after_launches)


class TorchKernelRecorder:
    """Notes the kernels torch runs while it is active (``kernels``), except inside :meth:`paused` (a simulated
    launch's own work). ``launches``: the caller's count of TLX launches so far, kept on each kernel."""

    def __init__(self):
        self.kernels: list[TorchKernel] = []
        self.launches = 0
        self._paused = 0
        self._mode = None

    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        rec = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if not rec._paused:
                    try:
                        k = kernel_of(func, args, kwargs, out, rec.launches)
                    except Exception:  # noqa: BLE001 - an op it cannot size (sparse, nested) is not noted
                        k = None
                    if k is not None:
                        rec.kernels.append(k)
                return out

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        if self._mode is not None:
            self._mode.__exit__(*exc)
            self._mode = None
        return False

    @contextlib.contextmanager
    def paused(self):
        """Nothing is noted inside (nor slowed: the mode steps aside while a launch is simulated)."""
        self._paused += 1
        try:
            if self._mode is not None:
                from torch.utils._python_dispatch import _pop_mode_temporarily, _get_current_dispatch_mode
                if _get_current_dispatch_mode() is self._mode:
                    with _pop_mode_temporarily():
                        yield
                    return
            yield
        finally:
            self._paused -= 1
