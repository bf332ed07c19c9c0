"""mma_accumulate gives the bits of the plain per-slice loop (``_reference_mma_accumulate``, numpy's float64
products slice by slice) on fresh random inputs: fp16, bf16, fp8 (e4m3, e5m2), tf32 and full fp32 values, wide
magnitudes, fp16 subnormals, zeros of both signs, infinities and NaN (NaN payloads aside), K not a multiple of
the slice, leading batch dimensions with broadcasting, through the compiled path and the numpy one."""
import numpy as np
import pytest
import torch

from tlx_workbench.sim.ops import mma_numerics as mn
from tlx_workbench.sim.ops.mma_numerics import k_slice, mma_accumulate

# the reference's float64 sums of infinities and NaN warn; the bits are what is compared
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _reference_mma_accumulate(acc, a, b, operand_bits):
    # the implementation mma_accumulate must match bit for bit: per slice of K, numpy's float64 product added
    # into the float32 accumulator with one rounding
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    k = a.shape[-1]
    step = k_slice(operand_bits)
    out = (np.zeros(a.shape[:-1] + b.shape[-1:], np.float32) if acc is None
           else np.asarray(acc, dtype=np.float32))
    for k0 in range(0, k, step):
        out = (out + a[..., k0:k0 + step] @ b[..., k0:k0 + step, :]).astype(np.float32)
    return out


_RNG = np.random.default_rng()
_BITS = {"fp16": 16, "bf16": 16, "fp8e4m3": 8, "fp8e5m2": 8, "tf32": 32, "fp32": 32}


def _values(kind, shape, wide=False):
    """float32 values of operand type ``kind``: normal(0, 1), or log-uniform over 2^-30..2^30 with random signs
    (``wide``), converted through torch (tf32: fp32 with its low 13 significand bits cleared)."""
    x = _RNG.standard_normal(shape)
    if wide:
        x = np.sign(x) * np.exp2(_RNG.uniform(-30, 30, shape))
    t = torch.from_numpy(x)
    if kind == "fp16":
        t = t.half()
    elif kind == "bf16":
        t = t.bfloat16()
    elif kind == "fp8e4m3":
        t = t.to(torch.float8_e4m3fn)
    elif kind == "fp8e5m2":
        t = t.to(torch.float8_e5m2)
    out = t.float().numpy()
    if kind == "tf32":
        out = (out.view(np.int32) & np.int32(~0x1FFF)).view(np.float32)
    return np.ascontiguousarray(out)


def _sprinkle(x, fraction, values):
    x = x.copy()
    hit = _RNG.random(x.shape) < fraction
    x[hit] = _RNG.choice(np.asarray(values, np.float32), size=int(hit.sum()))
    return x


def _same_bits(got, want):
    assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape, want.shape)
    g, w = got.view(np.uint32), want.view(np.uint32)
    differ = (g != w) & ~(np.isnan(got) & np.isnan(want))
    assert not differ.any(), f"{int(differ.sum())} of {got.size} elements differ, first at {np.argwhere(differ)[0]}"


@pytest.fixture(params=["compiled", "numpy"])
def path(request, monkeypatch):
    if request.param == "compiled":
        if mn._compiled() is None:
            pytest.skip("numba is not installed")
    else:
        monkeypatch.setattr(mn, "_KERNEL", [None])
    return request.param


def _check(acc, a, b, bits):
    _same_bits(mma_accumulate(acc, a, b, bits), _reference_mma_accumulate(acc, a, b, bits))


@pytest.mark.parametrize("kind", list(_BITS))
@pytest.mark.parametrize("m,k,n", [(64, 64, 128), (64, 40, 16), (7, 19, 5), (1, 48, 33), (65, 16, 1)])
def test_2d_matches_the_reference(path, kind, m, k, n):
    bits = _BITS[kind]
    for wide in (False, True):
        a, b = _values(kind, (m, k), wide), _values(kind, (k, n), wide)
        _check(None, a, b, bits)
        _check(_values("fp32", (m, n)) * 4, a, b, bits)


@pytest.mark.parametrize("kind", ["fp16", "bf16", "fp8e5m2"])
def test_specials_match_the_reference(path, kind):
    # zeros of both signs, fp16 subnormals, the largest fp16, infinities and NaN, an accumulator of -0
    bits = _BITS[kind]
    specials = [0.0, -0.0, 2.0 ** -24, -3 * 2.0 ** -24, 2.0 ** -14, 65504.0, -65504.0]
    for c in range(3):
        a = _sprinkle(_values(kind, (3, 64, 48)), 0.2, specials)
        b = _sprinkle(_values(kind, (3, 48, 40)), 0.2, specials)
        if c:
            a = _sprinkle(a, 0.01, [np.inf, -np.inf, np.nan])
            b = _sprinkle(b, 0.01 * (c - 1), [np.inf, -np.inf, np.nan])
        acc = _sprinkle(np.zeros((3, 64, 40), np.float32), 0.5, [-0.0])
        _check(None, a, b, bits)
        _check(acc, a, b, bits)
    # a column of zeros against negative values: every product -0, added into -0
    a = -np.abs(_values(kind, (8, 32)))
    b = np.zeros((32, 8), np.float32)
    _check(np.full((8, 8), -0.0, np.float32), a, b, bits)


def test_sums_that_round_take_numpy_order(path):
    # 2^60 + x - 2^60 in one slice: its float64 sum depends on the order; these elements must come out as
    # numpy's, whatever its BLAS does
    a = _values("fp32", (4, 16, 32))
    b = _values("fp32", (4, 32, 24))
    a[1, 3, :3] = [2.0 ** 60, 1.0, -(2.0 ** 60)]
    b[1, :3, :] = 1.0
    a[3, :, 5] = 2.0 ** 40
    _check(None, a, b, 16)
    _check(None, a[1], b[1], 16)


@pytest.mark.parametrize("kind", ["bf16", "fp16"])
def test_attention_probabilities_against_values(path, kind):
    # softmax rows (tiny probabilities next to ~1) times values: sums that round in float64
    p = torch.softmax(torch.randn(16, 64, 64, dtype=torch.float64) * 5, -1)
    p = (p.bfloat16() if kind == "bf16" else p.half()).float().numpy()
    v = _values(kind, (16, 64, 48))
    _check(None, p, v, 16)
    _check(_values("fp32", (16, 64, 48)), p, v, 16)


@pytest.mark.parametrize("a_shape,b_shape,acc_shape", [
    ((132, 64, 64), (132, 64, 128), None),
    ((24, 128, 64), (24, 64, 128), (24, 128, 128)),
    ((5, 64, 32), (32, 48), (5, 64, 48)),              # one B for every CTA
    ((64, 32), (6, 32, 16), (6, 64, 16)),              # one A for every CTA
    ((3, 1, 16, 32), (1, 4, 32, 8), (3, 4, 16, 8)),     # two batch dimensions, both broadcast
    ((4, 16, 32), (4, 32, 8), (16, 8)),                # one accumulator for every CTA
    ((4, 16, 32), (4, 32, 8), (8,)),                   # a bias row
    ((2, 16, 32), (2, 32, 8), (3, 2, 16, 8)),          # the accumulator has more batch than the operands
])
@pytest.mark.parametrize("kind", ["fp16", "bf16", "fp8e4m3", "tf32"])
def test_batched_and_broadcast_shapes(path, kind, a_shape, b_shape, acc_shape):
    bits = _BITS[kind]
    a, b = _values(kind, a_shape), _values(kind, b_shape)
    acc = None if acc_shape is None else _values("fp32", acc_shape)
    got = mma_accumulate(acc, a, b, bits)
    _same_bits(got, _reference_mma_accumulate(acc, a, b, bits))


def test_other_input_dtypes_and_layouts(path):
    a16 = _values("fp16", (2, 64, 48)).astype(np.float16)
    b = _values("fp16", (2, 40, 48)).transpose(0, 2, 1)           # a transposed view, as torch's w.t()
    _check(None, a16, b, 16)
    _check(np.zeros((2, 64, 40), np.float64), a16.astype(np.float64), b, 16)
    a64 = _RNG.standard_normal((32, 48))                           # float64 values that float32 can't hold
    _check(None, a64, _values("fp16", (48, 24)), 16)
    _check(None, a16[0].astype(np.int8), b[0].astype(np.int16), 8)


def test_degenerate_shapes_behave_as_before(path):
    acc = _values("fp32", (8, 4))
    assert mma_accumulate(acc, np.zeros((8, 0), np.float32), np.zeros((0, 4), np.float32), 16) is acc
    _check(None, np.zeros((0, 16), np.float32), _values("fp16", (16, 4)), 16)
    _check(None, _values("fp16", (16,)), _values("fp16", (16, 4)), 16)
    with pytest.raises(ValueError):
        mma_accumulate(None, np.zeros((4, 16)), np.zeros((8, 4)), 16)


@pytest.mark.parametrize("shape", [(6, 64, 48, 40), (1, 16, 17, 3), (3, 300, 260, 140)])
def test_a_product_written_into_a_given_array_keeps_the_bits(path, shape):
    # a wave's MMA: each core writes its share of the CTAs into one array; the large shape takes the tiled path
    c, m, k, n = shape
    a, b, acc = _values("fp16", (c, m, k)), _values("fp16", (c, k, n)), _values("fp32", (c, m, n))
    want = _reference_mma_accumulate(acc, a, b, 16)
    out = np.full((c, m, n), np.nan, np.float32)
    for sl in (slice(0, c // 2), slice(c // 2, c)):
        share = out[sl]
        assert mma_accumulate(acc[sl], a[sl], b[sl], 16, out=share) is share
    _same_bits(out, want)
    with pytest.raises(ValueError, match="out is"):
        mma_accumulate(acc, a, b, 16, out=np.empty((c, m, n + 1), np.float32))


def test_the_compiled_path_is_taken():
    if mn._compiled() is None:
        pytest.skip("numba is not installed")
    a, b = _values("fp16", (8, 64, 32)), _values("fp16", (8, 32, 16))
    out = np.empty((8, 64, 16), np.float32)
    ok = np.zeros(8, np.bool_)
    idx = np.arange(8)
    acc, i_acc = np.zeros((1, 64, 16), np.float32), np.zeros(8, np.int64)
    assert mn._compiled()(out, acc, a, b, i_acc, idx, idx, 16, ok) == 0 and ok.all()
    _same_bits(out, _reference_mma_accumulate(None, a, b, 16))


@pytest.mark.parametrize("shape,bits", [((300, 520, 260), 16), ((2, 140, 300, 200), 8), ((129, 264, 384), 32)])
def test_a_large_product_tile_by_tile_keeps_the_bits(shape, bits):
    # above a tile (128) in M or N and 2**24 multiply-adds, the product runs as a batch of tiles, K chunk after K
    # chunk, the row tiles over the cores: every element still adds the same slices in the same order
    *batch, m, k, n = shape
    rng = np.random.default_rng()
    a = rng.standard_normal((*batch, m, k)).astype(np.float16).astype(np.float32)
    b = rng.standard_normal((*batch, k, n)).astype(np.float16).astype(np.float32)
    acc = rng.standard_normal((*batch, m, n)).astype(np.float32)
    old_big = mn._BIG
    mn._BIG = 1 << 16          # these test shapes take the tiled path
    try:
        got = mn.mma_accumulate(acc, a, b, bits)
    finally:
        mn._BIG = old_big
    want = _reference_mma_accumulate(acc, a, b, bits)
    assert got.view(np.uint32).tobytes() == want.view(np.uint32).tobytes()
