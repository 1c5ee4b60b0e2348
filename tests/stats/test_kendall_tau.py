"""numtk.stats.kendall_tau against SciPy (bitwise), brute force, the exact null distribution and
closed-form relations."""

import itertools
import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_equal
from reference.kendall import pair_counts, tau_b

from numtk.stats import SmallSampleWarning, kendall_tau
from numtk.stats import _stats_ext


def assert_same_as_scipy(x, y, **kw):
    """Statistic and p-value identical (==, NaN == NaN) to scipy.stats.kendalltau."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = kendall_tau(x, y, **kw)
        ref = scipy.stats.kendalltau(x, y, **{k: v for k, v in kw.items() if k != "workers"})
    assert_equal(float(ours.statistic), float(ref.statistic))
    assert_equal(float(ours.pvalue), float(ref.pvalue))
    return ours


# Values printed by SciPy 1.17.1 (scipy.stats.kendalltau with the same arguments); exact equality.
PUBLISHED = [
    ([12, 2, 1, 12, 2], [1, 4, 7, 1, 0], {}, -0.4714045207910316, 0.28274545993277467),
    ([12, 2, 1, 12, 2], [1, 4, 7, 1, 0], {"variant": "c"}, -0.48, 0.28274545993277467),
    ([1, 2, 2, 3, 3, 3, 4, 5], [2, 1, 3, 3, 4, 2, 5, 5], {}, 0.6940220937885673, 0.0257222972696842),
    ([1, 2, 2, 3, 3, 3, 4, 5], [2, 1, 3, 3, 4, 2, 5, 5], {"variant": "c"}, 0.6640625, 0.0257222972696842),
    ([1, 2, 2, 3, 3, 3, 4, 5], [2, 1, 3, 3, 4, 2, 5, 5], {"alternative": "greater"},
     0.6940220937885673, 0.0128611486348421),
    ([1, 2, 2, 3, 3, 3, 4, 5], [2, 1, 3, 3, 4, 2, 5, 5], {"alternative": "less"},
     0.6940220937885673, 0.9871388513651579),
    ([0, 0, 1, 1, 2, 2, 3, 3, 4, 4], [1, 0, 1, 2, 2, 2, 4, 3, 4, 4], {}, 0.8977310580745098,
     0.0009646226188569392),
    ([3.1, -0.0, 0.0, 2.5, np.inf, 7.0], [1, 2, 3, 4, 5, 6], {}, 0.41403933560541256, 0.2511180012744736),
    (np.arange(10), np.arange(10)[::-1], {"alternative": "less"}, -0.9999999999999999, 2.755731922398589e-07),
    (np.arange(12.0), [1, 0, 2, 3, 4, 5, 7, 6, 8, 9, 11, 10], {"method": "exact"}, 0.909090909090909,
     1.4655483405483405e-06),
    (np.arange(12.0), [1, 0, 2, 3, 4, 5, 7, 6, 8, 9, 11, 10], {"method": "asymptotic"}, 0.909090909090909,
     3.882670788364893e-05),
    (np.arange(50), [1, 0, *range(2, 50)], {}, 0.9983673469387755, 3.287949416633158e-63),
    (np.arange(50), [1, 0, *range(2, 50)], {"method": "asymptotic"}, 0.9983673469387755,
     1.4518759796721249e-24),
    ([1, 2, 3], [1, 2, 3], {}, 1.0, 0.3333333333333333),
    (np.arange(5), np.arange(5), {}, 0.9999999999999999, 0.016666666666666666),
    (np.array([2**60, 2**60 + 1, 2**60 + 2], dtype=np.int64), [3, 2, 1], {}, -1.0, 0.3333333333333333),
]


@pytest.mark.parametrize("x, y, kw, statistic, pvalue", PUBLISHED)
def test_published_values(x, y, kw, statistic, pvalue):
    res = kendall_tau(x, y, **kw)
    assert_equal(float(res.statistic), statistic)
    assert_equal(float(res.pvalue), pvalue)
    assert_equal(float(res.correlation), statistic)
    tau, p = res  # SciPy-style unpacking
    assert_equal((float(tau), float(p)), (statistic, pvalue))


def test_int64_beyond_2_53_is_ranked_exactly():
    x = np.array([2**60, 2**60 + 1, 2**60 + 2], dtype=np.int64)
    assert_equal(float(kendall_tau(x, [3, 2, 1]).statistic), -1.0)
    # The same values as float64 collapse to one value: a constant input gives NaN (as SciPy).
    assert math.isnan(kendall_tau(x.astype(np.float64), [3, 2, 1]).statistic)


def test_constant_input_gives_nan_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = kendall_tau([1, 1, 1], [1, 2, 3])
    assert math.isnan(res.statistic) and math.isnan(res.pvalue)


@pytest.mark.parametrize("x, y", [([1], [2]), ([], [])])
def test_too_small_warns_and_gives_nan(x, y):
    with pytest.warns(SmallSampleWarning, match="too small"):
        res = kendall_tau(x, y)
    assert math.isnan(res.statistic) and math.isnan(res.pvalue)


def test_negative_zero_ties_with_zero():
    c = _stats_ext.kendall_counts(np.array([-0.0, 0.0, 1.0]), np.array([1.0, 2.0, 3.0]), 1)
    assert c[1] == 1  # one pair tied in x


# ------------------------------------------------------------------------------------------------
# Brute force counts and live SciPy comparison over generated data

dtypes = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64,
                          np.float32, np.float64, np.bool_])


@st.composite
def paired_arrays(draw, max_n=60, nan=False):
    n = draw(st.integers(0, max_n))
    out = []
    for _ in range(2):
        dt = np.dtype(draw(dtypes))
        if dt.kind == "f":
            elements = st.floats(-3, 3, width=8 * dt.itemsize) | st.sampled_from([0.0, -0.0, 1.5])
            if nan:
                elements = elements | st.just(float("nan"))
            if draw(st.booleans()):
                elements = elements | st.sampled_from([np.inf, -np.inf])
        elif dt.kind == "b":
            elements = st.booleans()
        elif dt.kind == "u":
            elements = st.integers(0, 4) | st.sampled_from([int(np.iinfo(dt).max)])
        else:
            elements = st.integers(-3, 3) | st.sampled_from([int(np.iinfo(dt).min), int(np.iinfo(dt).max)])
        out.append(draw(hnp.arrays(dt, n, elements=elements)))
    return out


@given(paired_arrays())
def test_counts_match_brute_force(xy):
    x, y = xy
    c, d, xt, yt, nt = pair_counts(x, y)
    got = _stats_ext.kendall_counts(x, y, 1)
    assert got[:4] == (d, xt, yt, nt)
    assert got[4] == len(np.unique(x)) or len(x) == 0
    assert got[5] == len(np.unique(y)) or len(y) == 0
    # tie groups: sizes > 1 in ascending value order
    vals, counts = np.unique(x, return_counts=True)
    assert_equal(got[6], counts[counts > 1])


@given(paired_arrays(max_n=40, nan=True), st.sampled_from(["propagate", "omit"]),
       st.sampled_from(["b", "c"]), st.sampled_from(["two-sided", "less", "greater"]),
       st.sampled_from(["auto", "asymptotic"]))
def test_matches_scipy_on_generated_data(xy, nan_policy, variant, alternative, method):
    x, y = xy
    assert_same_as_scipy(x, y, nan_policy=nan_policy, variant=variant, alternative=alternative, method=method)


@given(st.permutations(list(range(12))), st.sampled_from(["two-sided", "less", "greater"]))
def test_exact_pvalues_match_scipy(perm, alternative):
    assert_same_as_scipy(np.arange(12), np.array(perm), alternative=alternative, method="exact")


@pytest.mark.parametrize("kind", ["continuous", "ties", "heavy ties", "mixed"])
@pytest.mark.parametrize("n", [2, 3, 33, 34, 500, 2000])
def test_brute_force_and_scipy_up_to_2000(kind, n):
    rng = np.random.default_rng(n)
    if kind == "continuous":
        x, y = rng.standard_normal(n), rng.standard_normal(n)
    elif kind == "ties":
        x, y = rng.integers(0, 20, n), rng.integers(0, 20, n)
    elif kind == "heavy ties":
        x, y = rng.integers(0, 3, n), rng.integers(0, 2, n).astype(np.float32)
    else:
        x, y = rng.integers(0, 20, n).astype(np.int32), rng.standard_normal(n)
    res = assert_same_as_scipy(x, y)
    assert_allclose(float(res.statistic), tau_b(x, y), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("n", [70_000, 300_000])
def test_large_inputs_match_scipy_bitwise(n):
    # Above the threshold of the threaded and multi-level radix paths.
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n)
    assert_same_as_scipy(x, x + rng.standard_normal(n))
    assert_same_as_scipy(rng.integers(0, 100, n), rng.integers(0, 100, n), workers=2)
    assert_same_as_scipy(rng.integers(0, 10_000, n), x, workers=3)
    assert_same_as_scipy(x.astype(np.float32), rng.integers(0, 50_000, n))


@pytest.mark.parametrize("workers", [1, 2, 4, -1])
def test_workers_do_not_change_the_result(workers):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(200_000)
    y = np.round(x + rng.standard_normal(200_000), 2)
    ref = kendall_tau(x, y)
    res = kendall_tau(x, y, workers=workers)
    assert_equal((res.statistic, res.pvalue), (ref.statistic, ref.pvalue))


def test_strided_and_mixed_inputs_are_read_in_place():
    rng = np.random.default_rng(4)
    base = rng.integers(0, 50, (3, 4000))
    x = base[0, ::2]             # non-contiguous int64
    y = rng.standard_normal(8000)[::-4][:2000]  # negative stride float64
    assert not x.flags.c_contiguous
    assert_same_as_scipy(x, y)
    assert_same_as_scipy(x.astype(np.int32), y.astype(np.float32))
    big_endian = y.astype(">f8")
    assert_same_as_scipy(x, big_endian)


def test_concurrent_calls_from_a_thread_pool():
    # The kernel releases the GIL and keeps no shared state: concurrent calls agree with serial ones.
    rng = np.random.default_rng(5)
    data = [(rng.standard_normal(50_000), rng.integers(0, 30, 50_000)) for _ in range(8)]
    serial = [kendall_tau(x, y) for x, y in data]
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda xy: kendall_tau(*xy), data))
    for a, b in zip(serial, parallel):
        assert_equal((a.statistic, a.pvalue), (b.statistic, b.pvalue))


# ------------------------------------------------------------------------------------------------
# The exact null distribution, enumerated

@pytest.mark.parametrize("n", [3, 4, 5, 6, 7])
def test_exact_pvalues_against_enumeration(n):
    # Under independence every permutation is equally likely; the statistic S = C - D.
    x = np.arange(n)
    perms = list(itertools.permutations(range(n)))
    stats = np.array([pair_counts(x, p)[0] - pair_counts(x, p)[1] for p in perms])
    if n == 4:  # Mahonian numbers: permutations of 4 by inversions
        inv = (n * (n - 1) // 2 - stats) // 2
        assert_equal(np.bincount(inv), [1, 3, 5, 6, 5, 3, 1])
    for p in perms[:: max(1, len(perms) // 60)]:
        s = pair_counts(x, p)[0] - pair_counts(x, p)[1]
        greater = np.mean(stats >= s)
        less = np.mean(stats <= s)
        two = min(1.0, 2 * min(greater, less))
        for alt, expected in [("greater", greater), ("less", less), ("two-sided", two)]:
            got = float(kendall_tau(x, np.array(p), method="exact", alternative=alt).pvalue)
            assert_allclose(got, expected, rtol=1e-12)


def test_null_variance_of_tau_a():
    # Var(tau_a) = 2 (2n + 5) / (9 n (n - 1)) under independence (Kendall 1938); n = 7 enumerated.
    n = 7
    x = np.arange(n)
    taus = [(lambda c: (c[0] - c[1]) / (n * (n - 1) / 2))(pair_counts(x, p))
            for p in itertools.permutations(range(n))]
    assert_allclose(np.var(taus), 2 * (2 * n + 5) / (9 * n * (n - 1)), rtol=1e-12)


# ------------------------------------------------------------------------------------------------
# Relations that hold exactly or in distribution

def test_invariance_under_monotone_maps_and_sign_flip():
    rng = np.random.default_rng(8)
    x = rng.standard_normal(3000)
    y = x + rng.standard_normal(3000)
    ref = kendall_tau(x, y)
    moved = kendall_tau(np.exp(x), y**3 + 1)
    assert_equal(float(moved.statistic), float(ref.statistic))
    assert_allclose(float(kendall_tau(-x, y).statistic), -float(ref.statistic), rtol=1e-15)


def test_daniels_inequality_and_greiner_relation():
    rng = np.random.default_rng(9)
    rho = 0.6
    cov = [[1, rho], [rho, 1]]
    xy = rng.multivariate_normal([0, 0], cov, size=200_000)
    tau = float(kendall_tau(xy[:, 0], xy[:, 1]).statistic)
    # Greiner: tau = (2 / pi) arcsin(rho) for the bivariate normal; sd of tau at this n ~ 1.3e-3
    assert abs(tau - 2 / np.pi * np.arcsin(rho)) < 6e-3
    small = xy[:300]
    t = float(kendall_tau(small[:, 0], small[:, 1]).statistic)
    r = scipy.stats.spearmanr(small[:, 0], small[:, 1]).statistic
    assert -1 <= 3 * t - 2 * r <= 1


# ------------------------------------------------------------------------------------------------
# NaN policies and bad input

def test_nan_policies():
    x = np.array([1.0, np.nan, 3.0, 4.0, 5.0])
    y = np.array([1.0, 2.0, 3.0, 5.0, 4.0])
    res = kendall_tau(x, y)
    assert math.isnan(res.statistic) and math.isnan(res.pvalue)
    omitted = kendall_tau(x, y, nan_policy="omit")
    expected = kendall_tau(np.delete(x, 1), np.delete(y, 1))
    assert_equal((omitted.statistic, omitted.pvalue), (expected.statistic, expected.pvalue))
    with pytest.raises(ValueError, match="nan values.*`x`"):
        kendall_tau(x, y, nan_policy="raise")
    with pytest.raises(ValueError, match="nan values.*`y`"):
        kendall_tau(y, x, nan_policy="raise")
    with pytest.warns(SmallSampleWarning):
        kendall_tau([np.nan, 1.0], [1.0, 2.0], nan_policy="omit")


@pytest.mark.parametrize("kwargs, match", [
    ({"variant": "a"}, "`variant` must be one of 'b', 'c'; got 'a'"),
    ({"alternative": "bigger"}, "`alternative` must be one of"),
    ({"method": "permutation"}, "`method` must be one of 'auto', 'exact', 'asymptotic'"),
    ({"nan_policy": "ignore"}, "`nan_policy` must be one of"),
    ({"workers": 0}, "`workers` must be a positive int or -1"),
])
def test_bad_options_are_refused_before_any_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kendall_tau([1, 2, 3], [3, 1, 2], **kwargs)


def test_bad_arrays():
    with pytest.raises(ValueError, match=r"`x` and `y` must have the same length; `x` has 3, `y` has 2"):
        kendall_tau([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"`x` must be 1-D; got an array of shape \(2, 2\)"):
        kendall_tau([[1, 2], [3, 4]], [1, 2, 3, 4])
    with pytest.raises(ValueError, match=r"`y` must be 1-D"):
        kendall_tau([1, 2], 3.0)
    with pytest.raises(TypeError, match=r"`x` must have a numeric .* dtype; got dtype <U1"):
        kendall_tau(["a", "b"], [1, 2])
    with pytest.raises(TypeError, match=r"`y` must have a numeric .* dtype; got dtype complex128"):
        kendall_tau([1, 2], [1j, 2j])
    with pytest.raises(TypeError, match=r"`x` must have a numeric .* dtype; got dtype object"):
        kendall_tau([None, 1], [1, 2])
    with pytest.raises(TypeError, match="`workers` must be an int here"):
        kendall_tau([1, 2], [1, 2], workers=map)
    with pytest.raises(ValueError, match="Ties found"):
        kendall_tau([1, 1, 2], [1, 2, 3], method="exact")


def test_infinite_values_are_ordinary_ranks():
    # Kendall's tau uses only the order: +-inf rank as the largest/smallest values (as in SciPy).
    assert_same_as_scipy([-np.inf, 0.0, np.inf, 2.0], [1, 2, 4, 3])


def test_binding_refuses_what_python_would_have_caught():
    # Defence in depth: the extension itself never reads out of bounds on malformed input.
    with pytest.raises(ValueError, match="same length"):
        _stats_ext.kendall_counts(np.zeros(3), np.zeros(2), 1)
    with pytest.raises(ValueError, match="1-D"):
        _stats_ext.kendall_counts(np.zeros((2, 2)), np.zeros(4), 1)
    with pytest.raises(ValueError, match="dtype"):
        _stats_ext.kendall_counts(np.zeros(3, dtype=complex), np.zeros(3), 1)
    with pytest.raises(ValueError, match="threads"):
        _stats_ext.kendall_counts(np.zeros(3), np.zeros(3), 0)


def test_extended_precision_is_ranked_exactly():
    ld = np.longdouble
    if np.finfo(ld).eps >= np.finfo(np.float64).eps:
        pytest.skip("np.longdouble is float64 on this platform")  # nothing extra to test there
    one = ld(1)
    x = np.array([one, one + np.finfo(ld).eps, one + 2 * np.finfo(ld).eps], dtype=ld)
    assert np.unique(x.astype(np.float64)).size == 1  # float64 would merge them
    assert_equal(float(kendall_tau(x, [3, 2, 1]).statistic), -1.0)
    assert_equal(float(kendall_tau(np.float16([1, 2, 3]), [1, 3, 2]).statistic),
                 float(scipy.stats.kendalltau([1, 2, 3], [1, 3, 2]).statistic))


def _adversarial(kind, n, rng):
    """Inputs that stress the radix sort's digit selection and recursion."""
    if kind == "powers of two":
        return np.ldexp(1.0, rng.integers(-1000, 1000, n)) * rng.choice([-1, 1], n)
    if kind == "low bits only":
        return (np.int64(2**62) + rng.integers(0, 4, n)).astype(np.int64)
    if kind == "uint64 extremes":
        top = np.iinfo(np.uint64).max
        return rng.choice(np.array([0, 1, top - 1, top, 2**63, 2**63 - 1], dtype=np.uint64), n)
    if kind == "int64 extremes":
        info = np.iinfo(np.int64)
        return rng.choice(np.array([info.min, info.min + 1, -1, 0, 1, info.max], dtype=np.int64), n)
    if kind == "subnormals":
        return rng.integers(-50, 50, n) * np.finfo(np.float64).smallest_subnormal
    if kind == "two clusters":
        return np.where(rng.random(n) < 0.5, 1e300, -1e-300) * (1 + rng.integers(0, 3000, n) * 1e-15)
    if kind == "one huge tie":
        x = rng.standard_normal(n)
        x[rng.random(n) < 0.9] = 0.5
        return x
    raise ValueError(kind)


KINDS = ["powers of two", "low bits only", "uint64 extremes", "int64 extremes", "subnormals",
         "two clusters", "one huge tie"]


def _dense_ranks(a):
    return np.unique(a, return_inverse=True)[1]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [100, 20_000, 90_000])
def test_adversarial_keys(kind, n):
    # Oracle: SciPy on the dense ranks (order and ties preserved exactly, values small). SciPy on the
    # raw values is not one: scipy.stats.kendalltau 1.17 loses int64/uint64 values beyond 2**53
    # (see test_scipy_loses_large_integers).
    rng = np.random.default_rng(len(kind) * n)
    x = _adversarial(kind, n, rng)
    y = _adversarial(KINDS[(KINDS.index(kind) + 3) % len(KINDS)], n, rng)
    z = rng.standard_normal(n)
    for a, b in [(x, y), (y, z), (z, x)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = scipy.stats.kendalltau(_dense_ranks(a), _dense_ranks(b))
        for workers in (1, 2):
            res = kendall_tau(a, b, workers=workers)
            assert_equal((float(res.statistic), float(res.pvalue)), (float(ref.statistic), float(ref.pvalue)))
    if n == 100:
        assert_allclose(float(kendall_tau(x, y).statistic), tau_b(x, y), rtol=1e-12)


def test_scipy_loses_large_integers():
    # Documents why the test above ranks first: distinct int64 values 2**62 + {0..3} collapse in
    # SciPy 1.17 (a NaN for a non-constant input); numtk ranks them exactly, as brute force does.
    rng = np.random.default_rng(1)
    x = _adversarial("low bits only", 100, rng)
    y = rng.standard_normal(100)
    assert_allclose(float(kendall_tau(x, y).statistic), tau_b(x, y), rtol=1e-12)
    assert_allclose(float(kendall_tau(x, y).statistic),
                    float(scipy.stats.kendalltau(_dense_ranks(x), y).statistic), rtol=1e-15)
