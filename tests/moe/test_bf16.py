"""bf16 packing of PuzzleMoE pairs (spec moe.md B2.3, B2.4, B3, B4, B8): pack_bf16, unpack_bf16, packed_matvec.

Oracles: the NumPy transcription of the spec's formulas (tests/moe/_bf16_reference.py) on every one of the 65,536
words; the bijection between words and their parts; ml_dtypes' and torch's bf16 casts (bit for bit, ties
included); the float64 product of the decoded matrix with the float32 summation bound of the spec; exact
identities (a batch is its rows, the product with the identity is the transposed matrix, the decode-fused loop
is the plain bf16 loop on the decoded words).
"""

import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal

from numtk.moe import _moe_ext, pack_bf16, packed_matvec, puzzle_merge, unpack_bf16
from numtk.moe._bf16 import _bf16_matvec, _round_bf16

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bf16_reference as ref  # noqa: E402

ALL_WORDS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
MODES = ("saturate", "exponent", "zero")
ISAS = (0, 1)  # the baseline build and the fastest variant of the mat-vec loop (the same one without AVX2)


def random_words(rng, shape):
    return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)


def random_bits(rng, shape, lo=112, hi=143):
    """bf16 bits of positive magnitudes with exponents in [lo, hi] and random mantissas."""
    e = rng.integers(lo, hi + 1, size=shape, dtype=np.uint32)
    return ((e << 7) | rng.integers(0, 128, size=shape, dtype=np.uint32)).astype(np.uint16)


def flags(rng, shape, k=4):
    return [rng.random(shape) < 0.5 for _ in range(k)]


# --------------------------------------------------------------------------------------------------
# decode, unpack and the bijection (exhaustive)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pos", [0, 1])
def test_every_word_decodes_as_the_spec_formula(pos):
    bits = unpack_bf16(ALL_WORDS, pos)
    assert bits.dtype == np.uint16 and bits.shape == ALL_WORDS.shape
    assert_array_equal(bits, ref.decode(ALL_WORDS, pos))
    values = unpack_bf16(ALL_WORDS, pos, as_float=True)
    assert values.dtype == np.float32
    assert_array_equal(values.view(np.uint32), ref.to_float(ref.decode(ALL_WORDS, pos)).view(np.uint32))
    # the float64 instance of the kernel (bit-exact widening)
    wide = _moe_ext.bf16_unpack_expert(ALL_WORDS, pos, 2, 1)
    assert wide.dtype == np.float64
    assert_array_equal(wide, values.astype(np.float64))


def test_every_word_unpacks_into_the_spec_components():
    res = unpack_bf16(ALL_WORDS)
    expected = ref.unpack(ALL_WORDS)
    for name, want in zip(("magnitude", "mask_i", "mask_j", "sign_i", "sign_j"), expected):
        got = getattr(res, name)
        assert got.dtype == want.dtype, name
        assert_array_equal(got, want, err_msg=name)
    e = (res.magnitude >> 7) & 0xFF
    assert e.min() == 112 and e.max() == 143 and not (res.magnitude >> 15).any()
    floats = unpack_bf16(ALL_WORDS, as_float=True).magnitude
    assert_array_equal(floats, ref.to_float(res.magnitude))


@pytest.mark.parametrize("underflow", MODES)
def test_pack_of_unpack_is_every_word_again(underflow):
    parts = unpack_bf16(ALL_WORDS)
    packed, clamped = pack_bf16(parts.magnitude, parts.mask_i, parts.mask_j, parts.sign_i, parts.sign_j,
                                underflow=underflow, return_clamped=True)
    assert packed.dtype == np.uint16 and clamped == 0
    assert_array_equal(packed, ALL_WORDS)
    # the same through float32 magnitudes (bf16 values are exact in float32) and float64
    for dtype in (np.float32, np.float64):
        mags = ref.to_float(parts.magnitude).astype(dtype)
        assert_array_equal(pack_bf16(mags, parts.mask_i, parts.mask_j, parts.sign_i, parts.sign_j,
                                     underflow=underflow), ALL_WORDS)


def test_random_round_trips_are_bit_exact():
    rng = np.random.default_rng(0)
    shape = (37, 53)
    mag = random_bits(rng, shape)
    mi, mj, si, sj = flags(rng, shape)
    packed = pack_bf16(mag, mi, mj, si, sj)
    assert packed.shape == shape and packed.flags.c_contiguous
    words, clamped, invalid = ref.pack(mag, mi, mj, si, sj)
    assert clamped == 0 and not invalid.any()
    assert_array_equal(packed, words)
    res = unpack_bf16(packed)
    for got, want in zip((res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j), (mag, mi, mj, si, sj)):
        assert_array_equal(got, want)
    for pos, (m, s) in enumerate(((mi, si), (mj, sj))):
        expected = np.where(m, np.where(s, -1.0, 1.0) * ref.to_float(mag), 0.0).astype(np.float32)
        assert_array_equal(unpack_bf16(packed, pos, as_float=True), expected)
    # integer 0/1 masks and signs, and any integer dtype for the words, give the same
    ints = [a.astype(np.int64) for a in (mi, mj, si, sj)]
    assert_array_equal(pack_bf16(mag, *ints), packed)
    assert_array_equal(unpack_bf16(packed.astype(np.int32), 1), unpack_bf16(packed, 1))


def test_any_shape_and_non_contiguous_views():
    rng = np.random.default_rng(1)
    mag = random_bits(rng, (6, 8, 10))
    fl = flags(rng, mag.shape)
    packed = pack_bf16(mag, *fl)
    view = (slice(None), slice(None, None, 2), slice(1, None, 3))
    got = pack_bf16(mag[view], *(f[view] for f in fl))
    assert got.flags.c_contiguous
    assert_array_equal(got, packed[view])
    assert_array_equal(pack_bf16(mag.T, *(f.T for f in fl)), packed.T)
    assert_array_equal(unpack_bf16(packed[view], 0), unpack_bf16(packed, 0)[view])
    assert_array_equal(unpack_bf16(packed[view]).sign_j, fl[3][view])
    # a 0-d pair, one element, empty arrays
    scalar = pack_bf16(np.float32(1.0), True, False, False, True)
    assert scalar.shape == () and int(scalar) == 0x4000 | 0x2000 | (15 << 7)  # S_j, M_i, e - 112 = 15
    one = pack_bf16(np.array([2.0 ** -15]), [1], [1], [0], [0])
    assert one.tolist() == [0x3000]
    for shape in [(0,), (0, 3), (4, 0)]:
        empty = pack_bf16(np.zeros(shape, np.float32), *(np.zeros(shape, bool) for _ in range(4)),
                          return_clamped=True)
        assert empty[0].shape == shape and empty[0].dtype == np.uint16 and empty[1] == 0
        assert unpack_bf16(empty[0]).mask_i.shape == shape and unpack_bf16(empty[0], 1).shape == shape


def test_packed_merge_decodes_to_its_reconstruction():
    # spec B4: unpack(pack(merge), expert) as float equals the merge's reconstruction wherever the shared
    # magnitude is representable (>= 2^-15); below, the underflow rule applies
    rng = np.random.default_rng(11)
    W_i, W_j = rng.normal(0, 0.02, (2, 64, 96)).astype(np.float32)
    W_j[:4] = -W_i[:4]  # equal magnitudes, opposite signs
    W_i[5, :8] = W_j[5, :8] = 0.0  # pruned in both: magnitude 0, clamped
    W_i[6, :8], W_j[6, :8] = 1e-6, -2e-6  # below 2^-15
    res = puzzle_merge(W_i, W_j)
    packed, clamped = pack_bf16(res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j, return_clamped=True)
    fits = res.magnitude >= 2.0 ** -15
    assert clamped == np.count_nonzero(~fits) > 0
    for pos in (0, 1):
        decoded = unpack_bf16(packed, pos, as_float=True)
        assert_array_equal(decoded[fits], res.reconstruction[pos][fits])
        assert np.abs(decoded - res.reconstruction[pos]).max() <= 2.0 ** -15


# --------------------------------------------------------------------------------------------------
# rounding float -> bf16
# --------------------------------------------------------------------------------------------------
def float32_cases():
    """Random float32 bit patterns (every class), exact ties (odd and even), their neighbours, and the edges."""
    rng = np.random.default_rng(2)
    rand = rng.integers(0, 1 << 32, size=400_000, dtype=np.uint64).astype(np.uint32)
    hi = rng.integers(0, 1 << 16, size=50_000, dtype=np.uint64).astype(np.uint32) << 16
    ties = np.concatenate([hi | 0x8000, hi | 0x7FFF, hi | 0x8001, hi | 0xFFFF, hi])
    edges = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 1, 0x00008000,
                      0x00018000, 0x007FFFFF, 0x00800000, 0x3F808000, 0x3F818000], dtype=np.uint32)
    return np.concatenate([rand, ties, edges]).view(np.float32)


def test_float32_rounding_equals_the_spec_formula_and_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = float32_cases()
    got = _round_bf16(x)
    assert_array_equal(got, ref.round_bf16(x))
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflowing casts are part of the cases
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert_array_equal(got, want)


def test_float32_rounding_equals_torch():
    torch = pytest.importorskip("torch")
    x = float32_cases()
    x = x[~np.isnan(x)]  # torch's NaN payload is its own
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert_array_equal(_round_bf16(x), want)


def test_ties_go_to_even():
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even -> 1); 1 + 3 * 2^-8 between 1 + 2^-7 and 1 + 2^-6 (even -> up)
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20], dtype=np.float32)
    assert _round_bf16(x).tolist() == [0x3F80, 0x3F82, 0x3F81]


def float64_cases():
    rng = np.random.default_rng(3)
    u = rng.integers(0, 1 << 63, size=200_000, dtype=np.uint64) | (rng.integers(0, 2, 200_000, dtype=np.uint64) << 63)
    # exact ties at the bf16 rounding position (bit 44 set, bits below clear) and double-rounding traps
    top = u[:20_000] & ~np.uint64((1 << 45) - 1)
    ties = np.concatenate([top | np.uint64(1 << 44), top | np.uint64((1 << 44) + 1), top | np.uint64((1 << 44) - 1)])
    scale = rng.uniform(-140.0, -100.0, 20_000)  # around the bf16 subnormals
    small = np.ldexp(rng.uniform(1.0, 2.0, 20_000), np.floor(scale).astype(int))
    small_ties = np.ldexp(np.arange(256) + 0.5, -133)  # halfway between bf16 subnormals (and up to 2^-125)
    x = np.concatenate([u.view(np.float64), ties.view(np.float64), small, -small, small_ties,
                        [1 + 2.0 ** -8 + 2.0 ** -30, 2.0 ** -134, 2.0 ** -134 * 1.5, 2.0 ** -135, 3.4e38, 3.5e38,
                         1e308, -0.0, 0.0, np.inf, -np.inf]])
    return x[~np.isnan(x)]


def test_float64_rounding_is_direct():
    x = float64_cases()
    got = _round_bf16(x)
    assert_array_equal(got, ref.round_bf16_nearest(x))
    # the double-rounding case of the docstring: torch (through float32) and direct rounding differ
    assert _round_bf16(np.array([1 + 2.0 ** -8 + 2.0 ** -30])).tolist() == [0x3F81]
    assert _round_bf16(np.array([1 + 2.0 ** -8 + 2.0 ** -30], dtype=np.float32)).tolist() == [0x3F80]


def test_float64_rounding_equals_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")  # 0.7 or later: earlier versions cast through float32
    x = float64_cases()
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert_array_equal(_round_bf16(x), want)


def test_pack_rounds_floats_before_packing():
    rng = np.random.default_rng(4)
    x = np.abs(rng.normal(0.0, 0.02, size=(64, 65))).astype(np.float32)
    x[0, :4] = [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 0.0, 2.0 ** -16]  # ties and clamps
    fl = flags(rng, x.shape)
    for underflow in MODES:
        words, clamped, invalid = ref.pack(ref.round_bf16(x), *fl, underflow=underflow)
        got, n = pack_bf16(x, *fl, underflow=underflow, return_clamped=True)
        assert_array_equal(got, words)
        assert n == clamped >= 2 and not invalid.any()
        assert_array_equal(pack_bf16(x.astype(np.float64), *fl, underflow=underflow), words)  # exact floats
        assert_array_equal(pack_bf16(ref.round_bf16(x), *fl, underflow=underflow), words)   # as bits


# --------------------------------------------------------------------------------------------------
# clamping and refused magnitudes
# --------------------------------------------------------------------------------------------------
CRAFTED = np.array([0.0, 2.0 ** -20, 2.0 ** -16, 1.5 * 2.0 ** -16, 1.5 * 2.0 ** -15, 2.0 ** -15], dtype=np.float32)
# the value expert i decodes to (masks 1, signs 0) under each rule
EXPECTED = {
    "saturate": [2.0 ** -15, 2.0 ** -15, 2.0 ** -15, 2.0 ** -15, 1.5 * 2.0 ** -15, 2.0 ** -15],
    "exponent": [2.0 ** -15, 2.0 ** -15, 2.0 ** -15, 1.5 * 2.0 ** -15, 1.5 * 2.0 ** -15, 2.0 ** -15],
    "zero": [0.0, 0.0, 2.0 ** -15, 2.0 ** -15, 1.5 * 2.0 ** -15, 2.0 ** -15],
}
BOUND = {"saturate": 2.0 ** -15, "exponent": 2.0 ** -14, "zero": 2.0 ** -16}


@pytest.mark.parametrize("underflow", MODES)
def test_underflow_rules_on_the_crafted_inputs(underflow):
    n = CRAFTED.size
    ones, zeros = np.ones(n, bool), np.zeros(n, bool)
    packed, clamped = pack_bf16(CRAFTED, ones, ones, zeros, ones, underflow=underflow, return_clamped=True)
    assert clamped == 4  # 0, 2^-20, 2^-16, 1.5 2^-16: exponents below 112
    got_i = unpack_bf16(packed, 0, as_float=True)
    got_j = unpack_bf16(packed, 1, as_float=True)
    assert_array_equal(got_i, np.array(EXPECTED[underflow], dtype=np.float32))
    assert_array_equal(got_j, -got_i)
    err = np.abs(got_i.astype(np.float64) - CRAFTED)
    assert err.max() <= BOUND[underflow]
    if underflow == "exponent":  # strict: the kept value lies in [2^-15, 2^-14)
        assert err.max() < BOUND[underflow]
    assert_array_equal(err[4:], 0.0)  # representable magnitudes are exact
    parts = unpack_bf16(packed)
    cleared = np.array(EXPECTED[underflow]) == 0.0
    assert_array_equal(parts.mask_i, ~cleared)
    assert_array_equal(parts.mask_j, ~cleared)
    assert_array_equal(parts.sign_j, ones)  # signs are kept even where the masks were cleared
    words, count, _ = ref.pack(ref.round_bf16(CRAFTED), ones, ones, zeros, ones, underflow)
    assert_array_equal(packed, words)
    assert count == clamped
    assert isinstance(pack_bf16(CRAFTED, ones, ones, zeros, ones, underflow=underflow), np.ndarray)


def test_clamped_count_of_merged_gaussian_magnitudes():
    # spec B2.3: merged magnitudes of N(0, 0.02) experts have ~3e-6 entries below 2^-15 and none above 2^17
    rng = np.random.default_rng(5)
    a, b = np.abs(rng.normal(0, 0.02, (2, 1000, 1000))).astype(np.float32)
    m = np.where(np.abs(a - b) <= 0.4 * (a + b), (a + b) / 2, np.maximum(a, b)).astype(np.float32)
    fl = flags(rng, m.shape)
    _, clamped = pack_bf16(m, *fl, return_clamped=True)
    assert clamped == int(np.count_nonzero(ref.round_bf16(m) < (112 << 7)))
    assert clamped < 50


@pytest.mark.parametrize("bad, what", [
    (np.nan, "nan"), (np.inf, "inf"), (-1.0, "negative"), (-0.0, "negative"), (2.0 ** 17, "2**17"),
    (131000.0, "2**17"), (130816.0, "2**17"), (-np.inf, "negative"),
])
def test_refused_magnitudes_name_the_count_and_the_first(bad, what):
    mag = np.full((3, 4), 0.5, dtype=np.float32)
    mag[1, 2] = bad
    mag[2, 3] = bad
    fl = [np.ones(mag.shape, bool)] * 4
    for dtype in (np.float32, np.float64):
        with pytest.raises(ValueError, match=r"`magnitude` holds 2 entries .* index \(1, 2\): .*" + re.escape(what)):
            pack_bf16(mag.astype(dtype), *fl)


def test_largest_magnitudes_are_accepted():
    top = 130560.0  # (2 - 2^-7) 2^16: exponent 143, mantissa 0x7F
    packed = pack_bf16(np.array([top, 130815.0]), [1, 1], [1, 1], [0, 0], [0, 0])
    assert_array_equal(unpack_bf16(packed, 0, as_float=True), [top, top])


def test_refused_bf16_bits():
    for bits, what in [(0x8000, "negative"), (0xBF80, "negative"), (0x7F80, "NaN or infinite"),
                       (0x7FC0, "NaN or infinite"), (0x4800, "exponent 144"), (0x47FF, None)]:
        mag = np.array([0x3F80, bits], dtype=np.uint16)
        if what is None:  # exponent 143: the largest that fits
            pack_bf16(mag, [1, 1], [1, 1], [0, 0], [0, 0])
            continue
        with pytest.raises(ValueError, match=r"holds 1 entry .* index \(1,\): bf16 bits .*" + what):
            pack_bf16(mag, [1, 1], [1, 1], [0, 0], [0, 0])


def test_bad_arguments_of_pack_and_unpack():
    m = np.full((2, 3), 0.5, dtype=np.float32)
    t = np.ones((2, 3), bool)
    with pytest.raises(ValueError, match="`mask_j` must have the shape of `magnitude`"):
        pack_bf16(m, t, t[:, :2], t, t)
    with pytest.raises(ValueError, match="`sign_i` must hold booleans or the integers 0 and 1"):
        pack_bf16(m, t, t, np.full((2, 3), 2), t)
    with pytest.raises(ValueError, match="`mask_i` must hold booleans"):
        pack_bf16(m, -t.astype(int), t, t, t)
    with pytest.raises(TypeError, match="`sign_j`"):
        pack_bf16(m, t, t, t, np.ones((2, 3)))
    with pytest.raises(TypeError, match="`magnitude` must hold float magnitudes"):
        pack_bf16(np.ones((2, 3), np.int64), t, t, t, t)
    with pytest.raises(TypeError, match="`magnitude`"):
        pack_bf16(np.ones((2, 3), complex), t, t, t, t)
    with pytest.raises(ValueError, match="`underflow` must be one of"):
        pack_bf16(m, t, t, t, t, underflow="clamp")
    with pytest.raises(TypeError, match="`return_clamped`"):
        pack_bf16(m, t, t, t, t, return_clamped=1)
    with pytest.raises(ValueError, match="`workers`"):
        pack_bf16(m, t, t, t, t, workers=0)
    with pytest.raises(ValueError, match=r"`packed` must hold 16-bit words"):
        unpack_bf16([0, 70000])
    with pytest.raises(ValueError, match="`packed` must hold 16-bit words"):
        unpack_bf16([-1])
    with pytest.raises(TypeError, match="`packed`"):
        unpack_bf16(np.ones(3))
    with pytest.raises(ValueError, match="`expert` must be 0"):
        unpack_bf16([1, 2], 2)
    with pytest.raises(TypeError, match="`expert`"):
        unpack_bf16([1, 2], "i")
    with pytest.raises(TypeError, match="`as_float`"):
        unpack_bf16([1, 2], 0, as_float="yes")


# --------------------------------------------------------------------------------------------------
# packed_matvec
# --------------------------------------------------------------------------------------------------
def check_bound(y, words, x, pos):
    exact, size = ref.matvec64(words, x, pos)
    d_in = words.shape[1]
    bound = d_in * 2.0 ** -23 * size
    assert (np.abs(y.astype(np.float64) - exact) <= bound).all()


@pytest.mark.parametrize("d_out, d_in", [(1, 1), (3, 15), (5, 16), (7, 17), (4, 33), (9, 100), (2, 515),
                                         (31, 1024)])
@pytest.mark.parametrize("batch", [None, 1, 3, 4, 5, 8, 9])
def test_matvec_within_the_float32_bound_and_rows_of_a_batch(d_out, d_in, batch):
    rng = np.random.default_rng(d_out * 1000 + d_in)
    words = pack_bf16(random_bits(rng, (d_out, d_in), 100, 130), *flags(rng, (d_out, d_in)))
    x = rng.normal(size=(d_in,) if batch is None else (batch, d_in)).astype(np.float32)
    for pos in (0, 1):
        y = packed_matvec(words, x, pos)
        assert y.dtype == np.float32 and y.shape == ((d_out,) if batch is None else (batch, d_out))
        check_bound(y, words, x, pos)
        if batch is not None:  # a batch is exactly its rows, one by one
            for k in range(batch):
                assert_array_equal(y[k], packed_matvec(words, x[k], pos))


@pytest.mark.parametrize("isa", ISAS)
def test_matvec_is_the_plain_bf16_loop_on_the_decoded_words(isa):
    rng = np.random.default_rng(6)
    words = random_words(rng, (40, 301))
    x = rng.normal(size=(6, 301)).astype(np.float32)
    for pos in (0, 1):
        bits = unpack_bf16(words, pos)
        y = np.empty((6, 40), np.float32)
        _moe_ext.bf16_matvec(words, x, y, 1 + pos, 1, isa)
        assert_array_equal(y, _bf16_matvec(bits, x, isa=isa))
        check_bound(y, words, x, pos)
        # the float64 instance of the loop, within the float64 bound
        y64 = np.empty((6, 40))
        _moe_ext.bf16_matvec(words, x.astype(np.float64), y64, 1 + pos, 1, isa)
        exact, size = ref.matvec64(words, x, pos)
        assert (np.abs(y64 - exact) <= 301 * 2.0 ** -52 * size).all()


def test_identity_gives_the_decoded_matrix_and_experts_differ_where_masks_or_signs_do():
    rng = np.random.default_rng(7)
    d_out, d_in = 23, 37
    mag = random_bits(rng, (d_out, d_in))
    mi, mj, si, sj = flags(rng, (d_out, d_in))
    words = pack_bf16(mag, mi, mj, si, sj)
    eye = np.eye(d_in, dtype=np.float32)
    y0, y1 = packed_matvec(words, eye, 0), packed_matvec(words, eye, 1)
    assert_array_equal(y0, unpack_bf16(words, 0, as_float=True).T)
    assert_array_equal(y1, unpack_bf16(words, 1, as_float=True).T)
    differ = (mi != mj) | (mi & mj & (si != sj))
    assert_array_equal(y0 != y1, differ.T)
    assert differ.any() and not differ.all()


def test_matvec_does_not_depend_on_workers_and_writes_out():
    rng = np.random.default_rng(8)
    words = random_words(rng, (301, 1037))
    x = rng.normal(size=(5, 1037)).astype(np.float32)
    first = packed_matvec(words, x, 1)
    for workers in (2, 3, 7, -1):
        assert_array_equal(packed_matvec(words, x, 1, workers=workers), first)
        assert_array_equal(_bf16_matvec(words, x, workers=workers), _bf16_matvec(words, x))
    out = np.full((5, 301), np.nan, np.float32)
    assert packed_matvec(words, x, 1, out=out, workers=2) is out
    assert_array_equal(out, first)
    one = np.empty(301, np.float32)
    assert packed_matvec(words, x[2], 1, out=one) is one
    assert_array_equal(one, first[2])
    # pack and unpack over threads (above the per-thread threshold)
    mag = random_bits(rng, (1 << 20,), 105, 143)
    fl = flags(rng, mag.shape)
    packed, clamped = pack_bf16(mag, *fl, return_clamped=True)
    for workers in (2, 3, -1):
        again, again_clamped = pack_bf16(mag, *fl, workers=workers, return_clamped=True)
        assert_array_equal(again, packed)
        assert again_clamped == clamped > 0
        assert_array_equal(unpack_bf16(packed, 1, workers=workers), unpack_bf16(packed, 1))
        assert_array_equal(unpack_bf16(packed, workers=workers).magnitude, unpack_bf16(packed).magnitude)
    bad = ref.to_float(mag).copy()
    bad[[700_000, 900_000]] = -1.0
    with pytest.raises(ValueError, match=r"holds 2 entries .* index \(700000,\)"):
        pack_bf16(bad, *fl, workers=3)


@settings(max_examples=40, deadline=None)
@given(d_out=st.integers(0, 40), d_in=st.integers(0, 70), batch=st.integers(0, 11), workers=st.integers(1, 5),
       pos=st.integers(0, 1), seed=st.integers(0, 2**32 - 1))
def test_matvec_on_random_shapes(d_out, d_in, batch, workers, pos, seed):
    rng = np.random.default_rng(seed)
    words = random_words(rng, (d_out, d_in))
    x = rng.normal(size=(batch, d_in)).astype(np.float32)
    y = packed_matvec(words, x, pos, workers=workers)
    assert y.shape == (batch, d_out)
    check_bound(y, words, x, pos)
    assert_array_equal(y, packed_matvec(words, x, pos))
    assert_array_equal(y, _bf16_matvec(unpack_bf16(words, pos), x, workers=workers))
    if batch:
        assert_array_equal(y[-1], packed_matvec(words, x[-1], pos, workers=workers))


def test_matvec_edge_shapes_and_dtypes():
    rng = np.random.default_rng(9)
    words = random_words(rng, (4, 3))
    assert packed_matvec(np.zeros((0, 3), np.uint16), np.ones(3), 0).shape == (0,)
    assert_array_equal(packed_matvec(np.zeros((4, 0), np.uint16), np.zeros(0), 1), np.zeros(4, np.float32))
    assert packed_matvec(words, np.zeros((0, 3)), 0).shape == (0, 4)
    # integer, bool and float64 vectors are converted to float32
    x = np.array([1, -2, 3])
    assert_array_equal(packed_matvec(words, x, 0), packed_matvec(words, x.astype(np.float32), 0))
    assert_array_equal(packed_matvec(words, x.astype(np.float64), 1), packed_matvec(words, x.astype(np.float32), 1))
    assert_array_equal(packed_matvec(words, np.array([True, False, True]), 1),
                       packed_matvec(words, np.array([1.0, 0.0, 1.0], np.float32), 1))
    # a Fortran-ordered batch is fine (x is small)
    X = np.asfortranarray(rng.normal(size=(5, 3)).astype(np.float32))
    assert_array_equal(packed_matvec(words, X, 0), packed_matvec(words, np.ascontiguousarray(X), 0))


def test_matvec_refuses_bad_arguments_naming_them():
    rng = np.random.default_rng(10)
    words = random_words(rng, (6, 8))
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match=r"`packed` must be C-contiguous.*numpy.ascontiguousarray\(packed\)"):
        packed_matvec(np.asfortranarray(words), x, 0)
    with pytest.raises(ValueError, match="`packed` must be C-contiguous"):
        packed_matvec(random_words(rng, (6, 16))[:, ::2], x, 0)
    with pytest.raises(TypeError, match="`packed` must have dtype uint16"):
        packed_matvec(words.astype(np.int32), x, 0)
    with pytest.raises(TypeError, match="`packed` must have dtype uint16"):
        packed_matvec(words.astype(">u2"), x, 0)
    with pytest.raises(TypeError, match="`packed` must be a numpy.ndarray"):
        packed_matvec(words.tolist(), x, 0)
    with pytest.raises(ValueError, match="`packed` must be 2-D"):
        packed_matvec(words.ravel(), x, 0)
    with pytest.raises(ValueError, match=r"`x` must have shape \(d_in,\) or \(batch, d_in\) with d_in = 8"):
        packed_matvec(words, np.ones(7), 0)
    with pytest.raises(ValueError, match="`x` must have shape"):
        packed_matvec(words, np.ones((2, 2, 8)), 0)
    for bad in (np.nan, np.inf, 1e300):
        with pytest.raises(ValueError, match="`x` must be finite"):
            packed_matvec(words, np.full(8, bad), 0)
    with pytest.raises(TypeError, match="`x`"):
        packed_matvec(words, np.ones(8, complex), 0)
    with pytest.raises(TypeError, match="`expert`"):
        packed_matvec(words, x, None)
    with pytest.raises(ValueError, match="`expert` must be 0"):
        packed_matvec(words, x, -1)
    with pytest.raises(TypeError, match="`out` must have dtype float32"):
        packed_matvec(words, x, 0, out=np.empty(6))
    with pytest.raises(ValueError, match=r"`out` must have shape \(6,\)"):
        packed_matvec(words, x, 0, out=np.empty((1, 6), np.float32))
    with pytest.raises(ValueError, match="`out` must be C-contiguous and writeable"):
        packed_matvec(words, np.ones((3, 8)), 0, out=np.empty((6, 3), np.float32).T)
    ro = np.empty(6, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="`out` must be C-contiguous and writeable"):
        packed_matvec(words, x, 0, out=ro)
    buf = np.zeros(14, np.float32)
    with pytest.raises(ValueError, match="`out` must not share memory"):
        packed_matvec(words, buf[:8], 0, out=buf[6:12])
    with pytest.raises(TypeError, match="`workers`"):
        packed_matvec(words, x, 0, workers=map)
    with pytest.raises(ValueError, match="`bits` must be C-contiguous"):
        _bf16_matvec(np.asfortranarray(words), x)


# --------------------------------------------------------------------------------------------------
# threads and alignment at the compiled boundary


def test_kernel_threads_are_capped_by_size_and_by_the_per_thread_arrays():
    # pack sums per-thread counts from an array of kMaxThreads = 1024 entries: asking for more threads on an
    # array large enough for them (1100 * 2**18 entries) must run 1024, not read entries no thread wrote
    threads = _moe_ext.bf16_kernel_threads
    assert threads(1100, 1100 * 2**18) == 1024
    assert threads(2**31 - 1, 2**40) == 1024
    assert threads(1024, 2**40) == 1024
    assert threads(1023, 2**40) == 1023
    # one thread per 2**18 entries, at least one
    assert threads(1100, 100) == 1
    assert threads(8, 3 * 2**18 + 5) == 3
    assert threads(0, 2**30) == threads(-7, 2**30) == 1
    # every elementwise kernel with far more threads than the cap: exact words and counts
    rng = np.random.default_rng(21)
    mag = random_bits(rng, (3 * 2**18 + 11,), 100, 150)
    fl = [f.view(np.uint8) for f in flags(rng, mag.shape)]
    for mode in range(3):
        words, clamped, invalid, first = _moe_ext.bf16_pack(mag, *fl, mode, 5000)
        expected = _moe_ext.bf16_pack(mag, *fl, mode, 1)
        assert_array_equal(words, expected[0])
        assert (clamped, invalid, first) == expected[1:]
        e = mag >> 7
        assert clamped == np.count_nonzero(e < 112) and invalid == np.count_nonzero(e > 143)
        assert first == np.flatnonzero(e > 143)[0]
    parts = _moe_ext.bf16_unpack(words, 5000)
    assert_array_equal(parts[0], _moe_ext.bf16_unpack(words, 1)[0])
    assert_array_equal(_moe_ext.bf16_unpack_expert(words, 1, 1, 5000), _moe_ext.bf16_unpack_expert(words, 1, 1, 1))


def misaligned(dtype, shape):
    """A C-contiguous view of ``dtype`` one byte past an aligned buffer (so not aligned for it)."""
    dtype = np.dtype(dtype)
    buf = np.zeros(int(np.prod(shape)) * dtype.itemsize + 1, np.uint8)
    arr = buf[1:].view(dtype).reshape(shape)
    assert arr.flags.c_contiguous and not arr.flags.aligned
    return arr


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16])
def test_misaligned_inputs_are_copied_where_small_and_give_the_aligned_results(dtype):
    rng = np.random.default_rng(22)
    bits = random_bits(rng, (5, 37), 108, 143)
    mag = bits if dtype == np.uint16 else ref.to_float(bits).astype(dtype)
    odd = misaligned(dtype, mag.shape)
    odd[...] = mag
    fl = flags(rng, mag.shape)
    odd_fl = []
    for f in fl:  # int16 0 / 1 flags, misaligned too
        g = misaligned(np.int16, f.shape)
        g[...] = f
        odd_fl.append(g)
    packed = pack_bf16(mag, *fl)
    assert_array_equal(pack_bf16(odd, *odd_fl), packed)
    odd_words = misaligned(np.uint16, packed.shape)
    odd_words[...] = packed
    assert_array_equal(unpack_bf16(odd_words, 1, as_float=True), unpack_bf16(packed, 1, as_float=True))
    assert_array_equal(unpack_bf16(odd_words).sign_j, unpack_bf16(packed).sign_j)
    if dtype != np.uint16:
        assert_array_equal(_round_bf16(odd), _round_bf16(mag))
    # the mat-vec copies a misaligned x (small), but refuses a misaligned matrix or out (never copied)
    x = rng.normal(size=(3, 37)).astype(np.float32)
    odd_x = misaligned(np.float32, x.shape)
    odd_x[...] = x
    assert_array_equal(packed_matvec(packed, odd_x, 0), packed_matvec(packed, x, 0))
    with pytest.raises(ValueError, match=r"`packed` must be aligned .*numpy.require\(packed, requirements='CA'\)"):
        packed_matvec(odd_words, x, 0)
    with pytest.raises(ValueError, match="`bits` must be aligned"):
        _bf16_matvec(odd_words, x)
    with pytest.raises(ValueError, match="`out` must be C-contiguous and writeable, and aligned"):
        packed_matvec(packed, x, 0, out=misaligned(np.float32, (3, 5)))
    # the compiled functions refuse them too, naming the argument
    with pytest.raises(ValueError, match="`magnitude` must be aligned"):
        _moe_ext.bf16_pack(odd, *[f.view(np.uint8) for f in fl], 0, 1)
    with pytest.raises(ValueError, match="`packed` must be aligned"):
        _moe_ext.bf16_unpack(odd_words, 1)
    with pytest.raises(ValueError, match="`packed` must be aligned"):
        _moe_ext.bf16_unpack_expert(odd_words, 0, 1, 1)
    with pytest.raises(ValueError, match="`x` must be aligned"):
        _moe_ext.bf16_matvec(packed, odd_x, np.empty((3, 5), np.float32), 1, 1, 1)
    with pytest.raises(ValueError, match="`out` must be aligned"):
        _moe_ext.bf16_matvec(packed, x, misaligned(np.float32, (3, 5)), 1, 1, 1)
