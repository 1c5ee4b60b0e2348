"""numtk.stats.kendall_tau_interval: closed-form ends, per-point counts, Monte Carlo coverage."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.testing import assert_allclose, assert_equal
from reference.kendall import pair_counts, pointwise

from numtk.stats import SmallSampleWarning, kendall_tau, kendall_tau_interval
from numtk.stats import _kendall_pointwise, _stats_ext
from numtk.stats._kendall_interval import _bernstein_ends, _hoeffding_halfwidth

# Ends for a given sample tau_a and n (two-sided, 95%), computed independently for the spec sheet.
REFERENCE_ENDS = [
    # tau_hat, n, hoeffding (low, high), bernstein (low, high)
    (0.0, 1000, (-0.121472, 0.121472), (-0.123339, 0.123339)),
    (0.5, 1000, (0.378528, 0.621472), (0.386446, 0.601095)),
    (0.99, 1000, (0.868528, 1.0), (0.953133, 0.999959)),
    (0.99, 10000, (0.951587, 1.0), (0.982928, 0.994532)),
    (0.9, 100, (0.515871, 1.0), (0.575139, 0.999584)),
]


@pytest.mark.parametrize("tau_hat, n, hoeffding, bernstein", REFERENCE_ENDS)
def test_reference_ends(tau_hat, n, hoeffding, bernstein):
    L = math.log(2 / 0.05)
    w = _hoeffding_halfwidth(n // 2, L)
    assert_allclose([max(-1, tau_hat - w), min(1, tau_hat + w)], hoeffding, atol=5e-7)
    lo, hi = _bernstein_ends(tau_hat, n // 2, L)
    assert_allclose([max(-1, lo), min(1, hi)], bernstein, atol=5e-7)


def test_bernstein_ends_solve_the_defining_inequality():
    # At each end the Bernstein condition k u^2 <= L (2 (1 - tau^2) + 2/3 b u) holds with equality.
    L, k = math.log(40), 37
    for t in [-0.8, -0.2, 0.0, 0.3, 0.95]:
        lo, hi = _bernstein_ends(t, k, L)
        for tau, b in [(lo, 1 - lo), (hi, 1 + hi)]:
            u = abs(t - tau)
            assert_allclose(k * u * u, L * (2 * (1 - tau * tau) + 2 / 3 * b * u), rtol=1e-12)


@given(st.data())
def test_pointwise_counts_match_brute_force(data):
    n = data.draw(st.integers(1, 60))
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.float64]))
    x = data.draw(hnp.arrays(dtype, n, elements=st.integers(-4, 4)))
    y = data.draw(hnp.arrays(np.float64, n, elements=st.integers(-4, 4) | st.floats(-2, 2)))
    perm, xr, yr = _stats_ext.kendall_lexsort(x, y, 1)
    assert_equal(np.sort(perm), np.arange(n))
    # lexicographic (x, y) order with dense ranks
    assert np.all(np.diff(x[perm]) >= 0)
    same_x = np.diff(x[perm]) == 0
    assert np.all(np.diff(y[perm])[same_x] >= 0)
    assert_equal(xr, np.unique(x, return_inverse=True)[1][perm])
    cd, xs, ys = _kendall_pointwise.pointwise_counts(xr, yr, int(yr.max()) + 1)
    ref_cd, ref_xs, ref_ys = pointwise(x, y)
    assert_equal(cd, ref_cd[perm])
    assert_equal(xs, ref_xs[perm])
    assert_equal(ys, ref_ys[perm])
    c, d, *_ = pair_counts(x, y)
    assert cd.sum() == 2 * (c - d)  # the mean of the projections is tau_a exactly


def test_pointwise_kernel_rejects_bad_ranks():
    with pytest.raises(ValueError, match="ranks in"):
        _kendall_pointwise.pointwise_counts(np.zeros(3, np.int64), np.array([0, 5, 1]), 2)
    with pytest.raises(ValueError, match="same length"):
        _kendall_pointwise.pointwise_counts(np.zeros(3, np.int64), np.zeros(2, np.int64), 1)


def test_statistics_reported():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 10, 300)
    y = x + rng.integers(0, 10, 300)
    c, d, xt, yt, _ = pair_counts(x, y)
    tau_a = (c - d) / (300 * 299 / 2)
    for method in ["hoeffding", "bernstein"]:
        res = kendall_tau_interval(x, y, method=method)
        assert_allclose(res.statistic, tau_a, rtol=1e-14)
        assert res.low < res.statistic < res.high
    res = kendall_tau_interval(x, y, method="asymptotic")
    assert_allclose(res.statistic, float(kendall_tau(x, y).statistic), rtol=1e-12)
    assert (res.confidence, res.method, res.alternative, res.n) == (0.95, "asymptotic", "two-sided", 300)


def test_untied_asymptotic_variance_is_the_u_statistic_formula():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(400)
    y = x + rng.standard_normal(400)
    n = 400
    cd, _, _ = pointwise(x, y)
    h1 = cd / (n - 1)
    tau = h1.mean()
    se = math.sqrt(4 / n * np.sum((h1 - tau) ** 2) / (n - 1))
    res = kendall_tau_interval(x, y, confidence=0.9, method="asymptotic")
    z = 1.6448536269514722
    assert_allclose([res.low, res.high], [tau - z * se, tau + z * se], rtol=1e-10)


def _bivariate_normal(rng, rho, n):
    z = rng.standard_normal((2, n))
    return z[0], rho * z[0] + math.sqrt(1 - rho * rho) * z[1]


@pytest.mark.parametrize("rho", [0.5, 0.99])
@pytest.mark.parametrize("n", [10, 50, 200])
def test_finite_sample_coverage_at_least_nominal(n, rho):
    # Bivariate normal: population tau = (2 / pi) arcsin(rho) (Greiner's relation).
    tau = 2 / math.pi * math.asin(rho)
    rng = np.random.default_rng(n)
    reps = 400
    hits = {"hoeffding": 0, "bernstein": 0}
    for _ in range(reps):
        x, y = _bivariate_normal(rng, rho, n)
        for method in hits:
            res = kendall_tau_interval(x, y, confidence=0.9, method=method)
            hits[method] += res.low <= tau <= res.high
    for method, h in hits.items():
        assert h / reps >= 0.9, (method, h / reps)


def test_finite_sample_coverage_with_ties_on_a_finite_population():
    # Population: 12 atoms with ties; its tau_a = E[sign(x - x') sign(y - y')] over independent
    # draws is computed exactly by summing over all ordered pairs of atoms (ties count 0).
    px = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4])
    py = np.array([0, 1, 0, 1, 2, 2, 3, 2, 3, 3, 4, 3])
    s = np.sign(px[:, None] - px[None, :]) * np.sign(py[:, None] - py[None, :])
    tau_a = s.mean()
    rng = np.random.default_rng(11)
    for method in ["hoeffding", "bernstein"]:
        for alternative in ["two-sided", "greater", "less"]:
            hits = 0
            for _ in range(300):
                idx = rng.integers(0, 12, 40)
                res = kendall_tau_interval(px[idx], py[idx], confidence=0.8, method=method,
                                           alternative=alternative)
                hits += res.low <= tau_a <= res.high
            assert hits / 300 >= 0.8, (method, alternative, hits / 300)


def test_asymptotic_coverage_within_binomial_error():
    rng = np.random.default_rng(12)
    tau = 1 / 3  # rho = 0.5
    reps, hits = 1000, 0
    for _ in range(reps):
        x, y = _bivariate_normal(rng, 0.5, 200)
        res = kendall_tau_interval(x, y, method="asymptotic")
        hits += res.low <= tau <= res.high
    # 0.95 +- 3 binomial standard errors
    assert abs(hits / reps - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / reps)


def test_asymptotic_coverage_with_ties():
    # Population tau_b of the 12-atom population above, covered at roughly the nominal rate.
    px = np.array([0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4, 4])
    py = np.array([0, 1, 0, 1, 2, 2, 3, 2, 3, 3, 4, 3])
    s = np.sign(px[:, None] - px[None, :]) * np.sign(py[:, None] - py[None, :])
    tx = (px[:, None] == px[None, :]).mean()
    ty = (py[:, None] == py[None, :]).mean()
    tau_b = s.mean() / math.sqrt((1 - tx) * (1 - ty))
    rng = np.random.default_rng(13)
    reps, hits = 400, 0
    for _ in range(reps):
        idx = rng.integers(0, 12, 300)
        res = kendall_tau_interval(px[idx], py[idx], confidence=0.9, method="asymptotic")
        hits += res.low <= tau_b <= res.high
    assert abs(hits / reps - 0.9) <= 4 * math.sqrt(0.9 * 0.1 / reps)


def test_one_sided_bounds():
    rng = np.random.default_rng(3)
    x, y = _bivariate_normal(rng, 0.7, 500)
    two = kendall_tau_interval(x, y, confidence=0.9)
    lower = kendall_tau_interval(x, y, confidence=0.9, alternative="greater")
    upper = kendall_tau_interval(x, y, confidence=0.9, alternative="less")
    assert lower.high == 1.0 and upper.low == -1.0
    assert two.low < lower.low < lower.statistic  # one-sided bound is tighter on its side
    assert upper.statistic < upper.high < two.high


def test_degenerate_inputs():
    res = kendall_tau_interval([1, 1, 1, 1], [1, 2, 3, 4], method="asymptotic")
    assert math.isnan(res.statistic) and math.isnan(res.low)
    perfect = kendall_tau_interval(np.arange(20), np.arange(20), method="asymptotic")
    assert perfect.low == perfect.high == pytest.approx(1.0)
    fs = kendall_tau_interval(np.arange(20), np.arange(20), method="bernstein")
    assert fs.high == 1.0 and 0 < fs.low < 1
    with pytest.warns(SmallSampleWarning):
        res = kendall_tau_interval([1.0], [2.0])
    assert math.isnan(res.low)
    res = kendall_tau_interval([1.0, np.nan, 2.0], [1.0, 2.0, 3.0])
    assert math.isnan(res.statistic)
    res = kendall_tau_interval([1.0, np.nan, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], nan_policy="omit")
    assert res.n == 3 and res.statistic == 1.0


@pytest.mark.parametrize("method", ["hoeffding", "bernstein", "asymptotic"])
def test_one_result_schema_whatever_the_method_or_input(method):
    fields = ["statistic", "low", "high", "confidence", "method", "alternative", "n"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(50)
    with pytest.warns(SmallSampleWarning):
        tiny = kendall_tau_interval([1.0], [2.0], method=method)
    for res in (kendall_tau_interval(x, x + rng.standard_normal(50), method=method), tiny,
                kendall_tau_interval([1.0, np.nan, 2.0], [1.0, 2.0, 3.0], method=method)):
        assert list(res.keys()) == fields and res.method == method


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"confidence": 1.0}, ValueError, r"`confidence` must lie in \(0.0, 1.0\); got 1.0"),
    ({"confidence": 0}, ValueError, r"`confidence` must lie in"),
    ({"confidence": "high"}, TypeError, r"`confidence` must be a real number"),
    ({"method": "wilson"}, ValueError, r"`method` must be one of 'hoeffding', 'bernstein', 'asymptotic'"),
    ({"alternative": "up"}, ValueError, r"`alternative` must be one of"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        kendall_tau_interval([1, 2, 3], [1, 3, 2], **kwargs)
