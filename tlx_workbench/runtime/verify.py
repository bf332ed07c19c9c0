"""Is a kernel's output right? Poison outputs first, compare in float64, map the wrong tiles.

Poisoning (NaN for floats, a 0x5A.. byte pattern for integers) makes an output
element that the kernel never wrote fail loudly, instead of passing because the
buffer happened to hold the right value from an earlier run.

>>> import torch
>>> out = poison_(torch.empty(8, 8))
>>> out[:4] = 1.0                      # the kernel wrote only the top half
>>> c = compare(out, torch.ones(8, 8), tile=(4, 4))
>>> c.ok, c.bad_tiles
(False, [(1, 0), (1, 1)])
"""
from __future__ import annotations

import dataclasses
import html
import math
from typing import Any, Sequence

# relative error ‖out−ref‖/‖ref‖ allowed per output dtype: a few units of the
# dtype's rounding error, so a correct kernel that accumulates in fp32 passes.
_RTOL = {
    "float64": 1e-10,
    "float32": 1e-4,
    "float16": 2e-3,
    "bfloat16": 1.6e-2,
    "float8_e4m3fn": 1.25e-1,
    "float8_e4m3fnuz": 1.25e-1,
    "float8_e5m2": 2.5e-1,
    "float8_e5m2fnuz": 2.5e-1,
}
# an element the kernel never wrote keeps this byte pattern (integers)
_SENTINEL_BYTE = 0x5A


def default_tolerance(dtype) -> float:
    """The relative-error tolerance for an output of ``dtype`` (0.0: integers must be exact).

    >>> import torch; default_tolerance(torch.bfloat16)
    0.016
    """
    name = str(dtype).replace("torch.", "")
    if name in _RTOL:
        return _RTOL[name]
    return 0.0


def sentinel(dtype) -> int:
    """The integer every element of a poisoned integer tensor of ``dtype`` holds."""
    import torch
    bits = torch.iinfo(dtype).bits
    value = int.from_bytes(bytes([_SENTINEL_BYTE]) * (bits // 8), "little")
    if torch.iinfo(dtype).min < 0 and value >= 2 ** (bits - 1):
        value -= 2 ** bits
    return value


def poison_(t):
    """Fill ``t`` in place with NaN (floats) or :func:`sentinel` (integers); returns ``t``.

    >>> import torch; poison_(torch.empty(2, dtype=torch.int32)).tolist()
    [1515870810, 1515870810]
    """
    import torch
    if t.dtype == torch.bool:
        return t          # no value of a bool is "impossible"; nothing to poison with
    if t.is_floating_point() or t.is_complex():
        t.fill_(float("nan"))
    else:
        t.fill_(sentinel(t.dtype))
    return t


def is_poison(t):
    """Boolean mask of the elements of ``t`` that still hold the poison value."""
    import torch
    if t.dtype == torch.bool:
        return torch.zeros_like(t, dtype=torch.bool)
    if t.is_floating_point() or t.is_complex():
        return torch.isnan(t)
    return t == sentinel(t.dtype)


@dataclasses.dataclass
class Comparison:
    """One output against its reference: the error, the verdict, and which tiles are wrong."""
    name: str
    ok: bool
    rel_error: float                  # ‖out−ref‖/‖ref‖ in float64 (inf when NaN is present)
    tolerance: float
    shape: tuple[int, ...]
    dtype: str
    nan_count: int = 0                # NaN (or inf where the reference is finite) in the output
    unwritten: int = 0                # elements still holding the poison value
    max_abs_error: float = 0.0
    tile: tuple[int, ...] = ()        # tile shape over the last dims
    tile_grid: tuple[int, ...] = ()   # tiles per dim: (batch?, rows, cols)
    bad_tiles: list[tuple[int, ...]] = dataclasses.field(default_factory=list)
    unwritten_tiles: list[tuple[int, ...]] = dataclasses.field(default_factory=list)
    tile_errors: Any = None           # numpy array of per-tile relative errors, shape tile_grid
    message: str = ""

    def summary(self) -> str:
        verdict = "OK" if self.ok else "WRONG"
        s = (f"{self.name}: {verdict}  rel error {self.rel_error:.3g} (tolerance {self.tolerance:.3g}), "
             f"{self.dtype}{list(self.shape)}")
        if self.nan_count:
            s += f", {self.nan_count} NaN/inf"
        if self.unwritten:
            s += f", {self.unwritten} elements never written"
        if self.message:
            s += f"; {self.message}"
        if not self.ok and self.bad_tiles:
            n_tiles = math.prod(self.tile_grid) if self.tile_grid else 0
            shown = ", ".join(str(t) for t in self.bad_tiles[:8])
            more = f" and {len(self.bad_tiles) - 8} more" if len(self.bad_tiles) > 8 else ""
            s += (f"\n  wrong tiles ({len(self.bad_tiles)} of {n_tiles}, tile {self.tile}): {shown}{more}")
            if self.unwritten_tiles:
                s += f"\n  never written: {', '.join(str(t) for t in self.unwritten_tiles[:8])}"
        return s

    def tile_map_text(self, max_cols: int = 64) -> str:
        """The tile map as text: '.' right, 'x' wrong, '?' never written (batch dims merged)."""
        grid = self._grid2d()
        if grid is None:
            return ""
        bad, unwritten = grid
        rows = []
        for i in range(bad.shape[0]):
            rows.append("".join("?" if unwritten[i, j] else ("x" if bad[i, j] else ".")
                                for j in range(min(bad.shape[1], max_cols))))
        return "\n".join(rows)

    def _grid2d(self):
        import numpy as np
        if not self.tile_grid:
            return None
        grid = self.tile_grid if len(self.tile_grid) >= 2 else (1, *self.tile_grid)
        bad = np.zeros(grid, dtype=bool)
        unwritten = np.zeros(grid, dtype=bool)
        for t in self.bad_tiles:
            bad[(0, *t) if len(self.tile_grid) == 1 else t] = True
        for t in self.unwritten_tiles:
            unwritten[(0, *t) if len(self.tile_grid) == 1 else t] = True
        while bad.ndim > 2:           # a tile is wrong if it is wrong in any batch entry
            bad, unwritten = bad.any(0), unwritten.any(0)
        return bad, unwritten

    def tile_map_html(self, max_cells: int = 64) -> str:
        grid = self._grid2d()
        if grid is None:
            return ""
        bad, unwritten = grid
        cell = max(4, min(14, 320 // max(bad.shape[1], 1)))
        rows = []
        for i in range(min(bad.shape[0], max_cells)):
            tds = []
            for j in range(min(bad.shape[1], max_cells)):
                colour = "#7f8c8d" if unwritten[i, j] else ("#c0392b" if bad[i, j] else "#27ae60")
                tds.append(f"<td title='tile ({i}, {j})' style='width:{cell}px;height:{cell}px;"
                           f"padding:0;background:{colour}'></td>")
            rows.append("<tr>" + "".join(tds) + "</tr>")
        return ("<table style='border-collapse:separate;border-spacing:1px;margin:4px 0'>" + "".join(rows)
                + "</table><small>green: right, red: wrong, grey: never written; "
                f"tile {self.tile}</small>")

    def _repr_html_(self) -> str:
        colour = "#27ae60" if self.ok else "#c0392b"
        head = html.escape(self.summary().split("\n")[0])
        body = f"<div style='border-left:4px solid {colour};padding:2px 8px'><code>{head}</code>"
        if not self.ok and self.tile_grid:
            body += self.tile_map_html()
        return body + "</div>"

    def __repr__(self) -> str:
        return self.summary()


def _as_tensor(x):
    import torch
    if isinstance(x, torch.Tensor):
        return x
    import numpy as np
    return torch.as_tensor(np.asarray(x))


def compare(out, ref, *, tol: float | None = None, tile: Sequence[int] | None = None,
            name: str = "out") -> Comparison:
    """Compare ``out`` with ``ref`` in float64; say which ``tile``-shaped blocks differ.

    The verdict is the relative error ‖out−ref‖/‖ref‖ against ``tol`` (default by
    ``out``'s dtype, see :func:`default_tolerance`). NaN in the output never passes.
    ``tile`` covers the last one or two dims (leading dims are batches), default
    the whole tensor as one tile per 64x64 block.

    >>> import torch
    >>> compare(torch.ones(4), torch.ones(4)).ok
    True
    """
    import torch
    out, ref = _as_tensor(out), _as_tensor(ref)
    dtype = str(out.dtype).replace("torch.", "")
    tol = default_tolerance(out.dtype) if tol is None else float(tol)
    shape = tuple(out.shape)
    if tuple(ref.shape) != shape:
        if ref.numel() == out.numel():
            ref = ref.reshape(shape)
        else:
            return Comparison(name, False, math.inf, tol, shape, dtype,
                              message=f"shape {list(shape)} but the reference has {list(ref.shape)}")
    unwritten_mask = is_poison(out)
    o = out.detach().to(torch.float64) if not out.is_complex() else out.detach().to(torch.complex128)
    r = ref.detach().to(device=o.device, dtype=o.dtype)
    nonfinite = ~torch.isfinite(o) & torch.isfinite(r)
    nan_count = int((torch.isnan(o) | nonfinite).sum())
    diff = torch.where(torch.isfinite(o), o - r, torch.full_like(o, math.inf))
    diff = torch.where(torch.isfinite(r) | ~torch.isfinite(o), diff, torch.full_like(o, math.inf))
    if not torch.isfinite(r).all():
        # a non-finite reference cannot be compared against: only exact equality counts
        same = (o == r) | (torch.isnan(o) & torch.isnan(r))
        diff = torch.where(same & ~torch.isfinite(r), torch.zeros_like(o), diff)
    finite_ref = torch.where(torch.isfinite(r), r, torch.zeros_like(r))
    ref_norm = float(torch.linalg.vector_norm(finite_ref))
    diff_norm = float(torch.linalg.vector_norm(diff)) if diff.numel() else 0.0
    rel = diff_norm / ref_norm if ref_norm > 0 else diff_norm
    max_abs = float(diff.abs().max()) if diff.numel() else 0.0
    has_nan = bool(torch.isnan(o).any())
    ok = (not has_nan) and nan_count == 0 and math.isfinite(rel) and rel <= tol
    if tol == 0.0:
        ok = ok and max_abs == 0.0
    c = Comparison(name, ok, rel if math.isfinite(rel) else math.inf, tol, shape, dtype,
                   nan_count=nan_count, unwritten=int(unwritten_mask.sum()), max_abs_error=max_abs)
    if has_nan and bool(torch.isnan(r).any()):
        c.message = "the output has NaN where the reference has NaN too; NaN never passes"
    if out.numel():
        _tile_map(c, diff, finite_ref, unwritten_mask, tile, tol)
    return c


def _tile_map(c: Comparison, diff, ref, unwritten, tile, tol) -> None:
    """Fill c.tile/tile_grid/bad_tiles/unwritten_tiles/tile_errors."""
    import torch
    shape = tuple(diff.shape)
    if len(shape) == 0:
        diff, ref, unwritten, shape = diff.reshape(1), ref.reshape(1), unwritten.reshape(1), (1,)
    if tile is None:
        tile = (1024,) if len(shape) == 1 else (64, 64)
    tile = tuple(int(t) for t in tile)[-min(len(shape), 2):]
    nd = len(tile)
    lead = shape[:-nd]
    batch = math.prod(lead) if lead else 1
    last = shape[-nd:]
    tile = tuple(max(1, min(t, s)) for t, s in zip(tile, last))
    grid_last = tuple(-(-s // t) for s, t in zip(last, tile))
    padded = tuple(g * t for g, t in zip(grid_last, tile))

    def blocks(x, fill):
        x = x.reshape(batch, *last)
        pad = []
        for s, p in reversed(list(zip(last, padded))):
            pad += [0, p - s]
        x = torch.nn.functional.pad(x.to(torch.float64), pad, value=fill)
        if nd == 1:
            return x.reshape(batch, grid_last[0], tile[0])
        x = x.reshape(batch, grid_last[0], tile[0], grid_last[1], tile[1]).permute(0, 1, 3, 2, 4)
        return x.reshape(batch, grid_last[0], grid_last[1], tile[0] * tile[1])

    d = blocks(diff.abs(), 0.0)
    d = torch.where(torch.isfinite(d), d, torch.full_like(d, 1e300))
    n_el = math.prod(shape)
    rms = float(torch.linalg.vector_norm(ref)) / math.sqrt(n_el) if n_el else 0.0
    scale = rms if rms > 0 else 1.0
    n_tile = math.prod(tile)
    # a tile's error relative to what a tile of the reference's typical size holds, so
    # tiles of near-zero reference values do not flag on rounding noise
    tile_err = torch.linalg.vector_norm(d, dim=-1) / (scale * math.sqrt(n_tile))
    bad = tile_err > (tol if tol > 0 else 0.0)
    unw = blocks(unwritten.to(torch.float64), 0.0).amax(-1) > 0
    grid = (batch, *grid_last) if lead else grid_last
    tile_err = tile_err.reshape(grid).cpu().numpy()
    bad = bad.reshape(grid).cpu().numpy()
    unw = unw.reshape(grid).cpu().numpy()
    import numpy as np
    c.tile, c.tile_grid, c.tile_errors = tile, tuple(grid), tile_err
    c.bad_tiles = [tuple(int(i) for i in idx) for idx in np.argwhere(bad | unw)]
    c.unwritten_tiles = [tuple(int(i) for i in idx) for idx in np.argwhere(unw)]
