"""Which kernel argument an out-of-bounds access ran past, for the simulator's out-of-bounds error.

The access check (sim/schedule/engine.py) knows the bad addresses and the memory ranges of the launch's tensors;
:func:`argument_ranges` names those ranges after the kernel's parameters, and :func:`out_of_bounds`
words the error: the tensor whose storage the bad address lies just past (an offset too large), or
before (a negative offset), is the one the pointer was made from.
"""
from __future__ import annotations

from ...errors import SimulationError


def argument_ranges(bound: dict) -> list[tuple[str, int, int]]:
    """(parameter name, first byte, one past the last byte) of each tensor a kernel argument reaches:
    a tensor's storage, a TensorDescriptor's base tensor, the tensors in a tuple or list argument.

    >>> import torch
    >>> [(n, b < e) for n, b, e in argument_ranges({"x_ptr": torch.zeros(4), "n": 4})]
    [('x_ptr', True)]
    """
    import torch
    out = []

    def add(name, v):
        if isinstance(v, torch.Tensor):
            st = v.untyped_storage()
            out.append((name, st.data_ptr(), st.data_ptr() + st.nbytes()))
        elif type(v).__name__ == "TensorDescriptor" and hasattr(v, "base"):
            add(name, v.base)
        elif isinstance(v, (tuple, list)):
            for i, x in enumerate(v):
                add(f"{name}[{i}]", x)
    for name, v in bound.items():
        add(name, v)
    return out


def nearest_argument(address: int, named: list[tuple[str, int, int]]) -> tuple[str, int, int] | None:
    """The (parameter, first byte, end byte) of the tensor ``address`` lies nearest to (just past its end, or
    just before its start); None without tensors, or when the nearest is further away than its own size: a
    pointer that ran past a tensor lands near it.

    >>> nearest_argument(110, [("x_ptr", 0, 64), ("y_ptr", 64, 96)])
    ('y_ptr', 64, 96)
    """
    def distance(r):
        _, lo, hi = r
        return address - hi + 1 if address >= hi else (lo - address if address < lo else 0)
    if not named:
        return None
    best = min(named, key=distance)
    # an address further from every tensor than its own size (an integer, or a wild offset) ran past none of them:
    # naming one would name whichever tensor the allocator happened to put near it
    return best if distance(best) <= best[2] - best[1] else None


def out_of_bounds(*, is_store: bool, bad: int, n_bad: int, n: int, itemsize: int,
                  named: list[tuple[str, int, int]], file, line) -> SimulationError:
    """The error for ``n_bad`` of ``n`` accessed elements outside every tensor; ``bad`` the first bad address.

    It names the argument the pointer ran past and the element it reached ("index 64 of y_ptr, which has
    64 elements"), so the fix (a mask, the offsets, a bigger tensor) is plain.
    """
    what = "store" if is_store else "load"
    near = nearest_argument(bad, named)
    if near is not None:
        name, lo, hi = near
        size, index = (hi - lo) // max(itemsize, 1), (bad - lo) // max(itemsize, 1)
        msg = (f"out-of-bounds {what} through {name}: {n_bad} of {n} accessed elements fall outside the tensors "
               f"passed to the kernel, the first at index {index} of {name}, which has {size} elements")
        hint = (f"mask the {what} (mask=offs < n, with n the number of elements of {name}) or fix the offsets; "
                f"or pass a larger tensor as {name}")
        err = SimulationError(msg, file=file, line=line, hint=hint)
        err.argument = name.split("[")[0]          # the launch's own name for it is the caller's to add
        return err
    else:
        msg = (f"out-of-bounds {what}: {n_bad} of {n} accessed elements fall outside every tensor passed to the "
               f"kernel (first bad address {bad:#x})")
        hint = ("mask the access (mask=offs < n) or fix the offsets; a pointer made from an integer must be the "
                "address of a CPU tensor the host took with tensor.data_ptr() inside simulate")
    return SimulationError(msg, file=file, line=line, hint=hint)
