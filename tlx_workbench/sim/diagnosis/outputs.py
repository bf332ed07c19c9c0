"""After a launch: outputs left partly unwritten, or written with NaN/Inf the inputs do not hold.

A GPU leaves whatever memory held where no CTA stored, and a NaN the kernel computed looks like any other value:
both passed the simulator with a clean bill (TLX's split-K GEMM through its autotuner returned NaN). Read off the
launch's write log (``sim/diagnosis/writes.py``: which line wrote each byte), per region a tensor argument (its own view:
shape, strides, offset) or a descriptor (its shape and strides over its base) spans:

* a region the kernel stored into, some but not all of it: ``unwritten-output``, naming the argument, how many
  elements, their bounding box and first index, and the lines that wrote the rest;
* NaN or Inf in elements the kernel wrote, while the regions it only read hold none: ``nonfinite-output``, with
  the counts, the first index and the line that stored it.

Both are warnings (``Finding.severity``): the run is not a clean bill, but nothing raises. Only write-only outputs
are checked for unwritten elements: a region the kernel also reads (a plain or descriptor load, an atomic) is a
workspace, a flag array, an in-place update or an accumulator, which may legitimately keep parts it never needs;
an element a store addressed with its mask off is meant to stay, and so is the same tail of every row under 16
bytes (the padding that aligns rows for TMA).
"""
from __future__ import annotations

import numpy as np

HINT_UNWRITTEN = ("no CTA stored there, so a GPU leaves whatever the memory held: a grid too small (the tile count "
                  "rounded down instead of cdiv?), a loop that skips the tail tile, or offsets that miss it (elements "
                  "a masked store addressed with its mask off count as meant: padding); if the kernel is meant to "
                  "write only part of the tensor, pass it the view it writes")
HINT_NONFINITE = ("a division by zero, log or sqrt of 0 or a negative, exp overflow, or a masked load's `other` "
                  "(-inf) reaching a stored value")


class OutputCheck:
    """The regions of one launch's tensor arguments, taken before it runs; ``report(run)`` after it."""

    def __init__(self, bound: dict, memory=(), arg_ranges=()):
        self.regions: list = []           # (name, tensor view)
        seen = set()

        def add(name, v):
            import torch
            from triton.tools.tensor_descriptor import TensorDescriptor
            if isinstance(v, torch.Tensor):
                t = v
            elif isinstance(v, TensorDescriptor):
                try:
                    t = v.base.as_strided(tuple(int(n) for n in v.shape), tuple(int(s) for s in v.strides),
                                          v.base.storage_offset())
                except RuntimeError:
                    return
            elif isinstance(v, (list, tuple)):
                for i, x in enumerate(v):
                    add(f"{name}[{i}]", x)
                return
            else:
                return
            if t.device.type != "cpu" or t.numel() == 0:
                return
            key = (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
            if key not in seen:
                seen.add(key)
                self.regions.append((name, t))

        for name, v in bound.items():
            add(name, v)
        for i, t in enumerate(memory):
            add(f"a tensor whose address the host took (#{i})", t)

    def report(self, run) -> None:
        log = run.writes
        if log is None:
            return
        outputs, inputs = [], []
        for name, t in self.regions:
            span = log.span_written(t)
            if span is None:
                continue
            if not span:                    # nothing stored within its bytes (the per-element codes are all 0)
                inputs.append(t)
                continue
            codes = log.codes_of(t)
            if codes is None:
                continue
            written = codes > 0
            if written.any():
                outputs.append((name, t, codes, written))
            else:
                inputs.append(t)
        inputs_finite = None
        for name, t, codes, written in outputs:
            # only a write-only output: a region the kernel also reads (a workspace sized for the largest split,
            # flags it polls, an in-place update, an accumulator of atomics) may keep parts it never needs; and
            # an element a store masked off is meant to stay as it was (the padding of a padded row)
            if not written.all() and not log.was_read(t):
                missing = ~written & ~log.masked_of(t)
                if missing.any() and not _row_padding(missing, t.element_size()):
                    _unwritten(run, log, name, t, codes, written, missing)
            if t.dtype.is_floating_point:
                bad = ~_isfinite(t) & written
                if bad.any():
                    if inputs_finite is None:
                        inputs_finite = all(bool(_isfinite(x).all()) for x in inputs if x.dtype.is_floating_point)
                    if inputs_finite:
                        _nonfinite(run, log, name, t, codes, bad)


def _row_padding(missing: np.ndarray, itemsize: int) -> bool:
    """Whether ``missing`` is the same tail of the last dimension in every row, under 16 bytes: the padding that
    makes rows start 16-byte aligned (for TMA), which a kernel addressing logical rows never writes. A tile the
    grid missed is wider than that."""
    if missing.ndim < 2:
        return False
    rows = missing.reshape(-1, missing.shape[-1])
    tail = rows[0]
    if not tail[-1] or not (rows == tail).all():
        return False
    c = int(np.argmax(tail))
    return bool(tail[c:].all()) and (tail.size - c) * itemsize < 16


# tested on their bits (exponent, mantissa): bf16, which numpy has not; fp16, whose np.isfinite converts element by
# element (~15x slower than the bit test: ms for a 1024x1024 output, in every launch that computes one)
_EXPONENT = {"torch.bfloat16": ("int16", 0x7F80, 0x007F), "torch.float16": ("int16", 0x7C00, 0x03FF)}


def _values(t):
    """``t`` as a numpy array numpy can test (torch's CPU isfinite on fp16 took 30 ms for 512x512), or for bf16 and
    fp16 its bits."""
    if str(t.dtype) in _EXPONENT:
        import torch
        return t.view(getattr(torch, _EXPONENT[str(t.dtype)][0])).numpy()
    if t.element_size() == 1:           # fp8: numpy has none
        return t.float().numpy()
    return t.numpy()


def _isfinite(t) -> np.ndarray:
    v = _values(t)
    e = _EXPONENT.get(str(t.dtype))
    return (v & e[1]) != e[1] if e else np.isfinite(v)


def _isnan(t) -> np.ndarray:
    v = _values(t)
    e = _EXPONENT.get(str(t.dtype))
    return ((v & e[1]) == e[1]) & ((v & e[2]) != 0) if e else np.isnan(v)


def _describe(t, name) -> str:
    return f"{name} ({'x'.join(str(n) for n in t.shape)} {str(t.dtype).removeprefix('torch.')})"


def _box(mask: np.ndarray) -> tuple[str, bool]:
    """The bounding box of ``mask``'s True elements, as "rows a-b, cols c-d" (2-D) or index ranges, and whether
    the box is exactly the True elements."""
    parts = []
    size = 1
    for d in range(mask.ndim):
        hit = np.flatnonzero(mask.any(axis=tuple(i for i in range(mask.ndim) if i != d)))
        lo, hi = int(hit[0]), int(hit[-1])
        size *= hi - lo + 1
        parts.append((lo, hi))
    names = ["rows", "cols"] if mask.ndim == 2 else [f"dim {d}" for d in range(mask.ndim)]
    if mask.ndim == 1:
        names = ["elements"]
    text = ", ".join(f"{n} {lo}" + (f"-{hi}" if hi > lo else "") for n, (lo, hi) in zip(names, parts))
    return text, size == int(mask.sum())


def _lines(run, log, codes: np.ndarray) -> list:
    """The (file, line) sites of ``codes`` (nonzero write codes), most elements first."""
    counts = np.bincount(codes.reshape(-1), minlength=1)
    counts[0] = 0
    sites = log.sites
    used = [int(c) for c in np.flatnonzero(counts)]
    # most elements first, then by line: the same words under every schedule (which line came first differs)
    used.sort(key=lambda c: (-int(counts[c]), sites[c - 1][1] or 0 if 0 < c <= len(sites) else 0))
    out = []
    for c in used:
        out.append(log.sites[c - 1] if 0 < c <= len(log.sites) else (None, None))
    return out


def _say_lines(run, sites) -> str:
    words = []
    for file, line in sites[:4]:
        if line is None:
            words.append("(unknown line)")
        elif file in (None, run.file):
            words.append(str(line))
        else:
            words.append(f"{file.rsplit('/', 1)[-1]}:{line}")
    more = f" and {len(sites) - 4} more" if len(sites) > 4 else ""
    return ("line " if len(sites) == 1 else "lines ") + ", ".join(words) + more


def _first(mask: np.ndarray) -> list:
    return [int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape)]


def _unwritten(run, log, name, t, codes, written, missing) -> None:
    n, total = int(missing.sum()), missing.size
    box, exact = _box(missing)
    sites = _lines(run, log, codes[written])
    where = box if exact else f"within {box}, the first at {_first(missing)}"
    run.finding("unwritten-output",
                f"{_describe(t, name)}: {n} of {total} elements were written by no CTA ({where}); "
                f"the kernel stored the rest at {_say_lines(run, sites)}",
                line=sites[0][1] if sites and sites[0][0] in (None, run.file) else None,
                severity="warning", hint=HINT_UNWRITTEN)


def _nonfinite(run, log, name, t, codes, bad) -> None:
    nan = int((_isnan(t) & bad).sum())
    inf = int(bad.sum()) - nan
    first = _first(bad)
    sites = _lines(run, log, codes[bad])
    what = " and ".join(x for x in ([f"{nan} NaN"] if nan else []) + ([f"{inf} Inf"] if inf else []))
    run.finding("nonfinite-output",
                f"{_describe(t, name)}: the kernel stored {what} (the first at {first}, value "
                f"{float(t[tuple(first)])}) at {_say_lines(run, sites)}, while the tensors it only read hold "
                f"none", line=sites[0][1] if sites and sites[0][0] in (None, run.file) else None,
                severity="warning", hint=HINT_NONFINITE)
