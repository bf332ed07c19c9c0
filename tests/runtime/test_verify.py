"""Output verification on CPU tensors: poisoning, float64 comparison, NaN, tile maps."""
import math

import pytest
import torch

from tlx_workbench.runtime.verify import compare, default_tolerance, is_poison, poison_, sentinel


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn])
def test_poison_floats_is_nan(dtype):
    t = poison_(torch.zeros(5, 3, dtype=dtype))
    assert is_poison(t).all()
    assert torch.isnan(t.float()).all()


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8, torch.int16])
def test_poison_ints_is_sentinel(dtype):
    t = poison_(torch.zeros(7, dtype=dtype))
    assert (t == sentinel(dtype)).all() and is_poison(t).all()
    assert sentinel(dtype) != 0


def test_correct_result_passes_with_fp16_rounding():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(128, 64, generator=g)
    b = torch.randn(64, 96, generator=g)
    ref = a.double() @ b.double()
    out = (a.half().float() @ b.half().float()).half()   # what an fp16 kernel produces
    c = compare(out, ref)
    assert c.ok, c.summary()
    assert 0 < c.rel_error < default_tolerance(torch.float16)


def test_single_wrong_tile_is_located():
    g = torch.Generator().manual_seed(2)
    ref = torch.randn(256, 192, generator=g)
    out = ref.clone()
    out[128:192, 64:128] += 1.0                      # tile (2, 1) of 64x64 is wrong
    c = compare(out, ref, tile=(64, 64))
    assert not c.ok
    assert c.bad_tiles == [(2, 1)]
    assert c.tile_grid == (4, 3)
    assert "x" in c.tile_map_text().splitlines()[2]
    assert "(2, 1)" in c.summary()


def test_unwritten_tile_is_reported_as_never_written():
    ref = torch.randn(64, 64, generator=torch.Generator().manual_seed(3))
    out = poison_(torch.empty(64, 64))
    out[:, :32] = ref[:, :32]                        # the kernel forgot the right half
    c = compare(out, ref, tile=(32, 32))
    assert not c.ok and c.rel_error == math.inf
    assert c.unwritten_tiles == [(0, 1), (1, 1)]
    assert c.unwritten == 64 * 32
    assert "?" in c.tile_map_text()
    assert "never written" in c._repr_html_() or "grey" in c._repr_html_()


def test_nan_never_passes_even_with_huge_tolerance():
    ref = torch.ones(1000)
    out = torch.ones(1000)
    out[17] = float("nan")
    c = compare(out, ref, tol=1e9)
    assert not c.ok and c.nan_count == 1
    assert c.bad_tiles == [(0,)]
    both = compare(torch.tensor([float("nan")]), torch.tensor([float("nan")]))
    assert not both.ok and "NaN never passes" in both.summary()


def test_integers_must_be_exact():
    ref = torch.arange(100, dtype=torch.int32)
    out = ref.clone()
    assert compare(out, ref).ok
    out[50] += 1
    c = compare(out, ref, tile=(10,))
    assert not c.ok and c.bad_tiles == [(5,)]


def test_batched_output_tiles_over_last_two_dims():
    ref = torch.randn(2, 3, 128, 64, generator=torch.Generator().manual_seed(4))   # (B, H, N, D)
    out = ref.clone()
    out[1, 2, 64:, :] = 0
    c = compare(out, ref, tile=(64, 64))
    assert not c.ok
    assert c.tile_grid == (6, 2, 1)
    assert c.bad_tiles == [(5, 1, 0)]


def test_shape_mismatch_is_a_clear_failure():
    c = compare(torch.zeros(3, 4), torch.zeros(5))
    assert not c.ok and "reference has [5]" in c.summary()
