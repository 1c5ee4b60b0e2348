"""numtk.counterfactual.validity / transport_cost / distortion_ratios against independent oracles.

Oracles: closed forms (the logit threshold, Euclidean norms), brute-force double loops over pairs in
plain Python/NumPy (exact coordinate differences, no Gram trick), singular-value bounds of affine
maps, and invariances (translation is an isometry, pair order, input layout).
"""

import math

import numpy as np
import pytest

from numtk._lib import Result
from numtk.counterfactual import distortion_ratios, transport_cost, validity


# --- oracles ---------------------------------------------------------------------------------

def brute_ratios(X, Y, pairs=None, eps=0.0):
    """(min ratio, max ratio, n kept, n excluded) by a double loop with exact differences."""
    X = np.asarray(X, dtype=float)
    Y = np.asarray(Y, dtype=float)
    n = len(X)
    if pairs is None:
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    ratios, excluded = [], 0
    for i, j in pairs:
        dx = math.sqrt(sum((float(a) - float(b)) ** 2 for a, b in zip(X[i], X[j])))
        dy = math.sqrt(sum((float(a) - float(b)) ** 2 for a, b in zip(Y[i], Y[j])))
        if dx > eps:
            ratios.append(dy / dx)
        else:
            excluded += 1
    if not ratios:
        return math.nan, math.nan, 0, excluded
    return min(ratios), max(ratios), len(ratios), excluded


def brute_median(X):
    n = len(X)
    return float(np.median([np.linalg.norm(X[i] - X[j]) for i in range(n) for j in range(i + 1, n)]))


def check_against_brute(res, X, Y, pairs=None, eps=0.0, rtol=1e-12):
    lo, hi, kept, excl = brute_ratios(X, Y, pairs, eps)
    assert isinstance(res, Result)
    assert res.n_pairs == kept and res.n_excluded == excl
    np.testing.assert_allclose(res.min_ratio, lo, rtol=rtol)
    np.testing.assert_allclose(res.max_ratio, hi, rtol=rtol)
    np.testing.assert_allclose(res.distortion, 1 - min(lo, 1 / hi), rtol=rtol, atol=1e-15)


# --- validity --------------------------------------------------------------------------------

def test_validity_closed_form(rng):
    X = rng.normal(size=(500, 4))
    w = rng.normal(size=4)
    b = 0.3
    s = X @ w + b
    tau = math.log(0.8 / 0.2)
    assert validity(X, w, b) == np.mean(s >= tau)
    assert validity(X, w, b, 0.9) == np.mean(s >= math.log(9))
    assert validity(X, w, b, target=0) == np.mean(-s >= tau)
    assert validity(X, w, b, margin=0.0) == np.mean(s >= 0)
    assert validity(X, w, b, margin=-1.0, target=0) == np.mean(-s >= -1.0)
    assert validity(X, w, b, tol=0.5) == np.mean(s >= tau - 0.5)
    # coef_-shaped w, array b
    assert validity(X, w[None, :], np.array([b])) == np.mean(s >= tau)


def test_validity_threshold_is_inclusive():
    tau = math.log(0.8) - math.log1p(-0.8)
    X = np.array([[tau], [np.nextafter(tau, -np.inf)]])
    assert validity(X, [1.0], 0.0) == 0.5
    assert validity(X, [1.0], 0.0, tol=1e-12) == 1.0
    assert validity(np.array([[1.0]]), [1.0], 0.0, margin=1.0) == 1.0


def test_validity_matches_logistic_probability():
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    clf = LogisticRegression().fit(X, y)
    p = clf.predict_proba(X)[:, 1]
    # away from the threshold the score test and the probability test agree
    far = (np.abs(p - 0.7) > 1e-9) & (np.abs((1 - p) - 0.7) > 1e-9)
    assert validity(X[far], clf.coef_, clf.intercept_, 0.7) == np.mean(p[far] >= 0.7)
    assert validity(X[far], clf.coef_, clf.intercept_, 0.7, target=0) == np.mean(1 - p[far] >= 0.7)


def test_validity_empty_is_nan():
    assert math.isnan(validity(np.empty((0, 3)), np.ones(3), 0.0))


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(threshold=1.0), ValueError, "threshold"),
    (dict(threshold=0.0), ValueError, "threshold"),
    (dict(threshold="0.8"), TypeError, "threshold"),
    (dict(target=2), ValueError, "target"),
    (dict(tol=-1.0), ValueError, "tol"),
    (dict(margin=np.nan), ValueError, "margin"),
])
def test_validity_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        validity(np.zeros((2, 2)), [1.0, 0.0], 0.0, **kwargs)


def test_validity_bad_arrays():
    with pytest.raises(ValueError, match="`w` has 3 coefficients"):
        validity(np.zeros((2, 2)), np.ones(3), 0.0)
    with pytest.raises(ValueError, match="X_cf"):
        validity(np.array([[np.nan, 0.0]]), np.ones(2), 0.0)
    with pytest.raises(ValueError, match="X_cf"):
        validity(np.zeros(3), np.ones(3), 0.0)
    with pytest.raises(ValueError, match="`w` must be finite"):
        validity(np.zeros((1, 2)), [np.inf, 0.0], 0.0)
    with pytest.raises(ValueError, match="`b`"):
        validity(np.zeros((1, 2)), np.ones(2), [0.0, 1.0])
    with pytest.raises(ValueError, match="`b`"):
        validity(np.zeros((1, 2)), np.ones(2), np.nan)


# --- transport_cost --------------------------------------------------------------------------

def test_transport_cost_closed_forms(rng):
    X = rng.normal(size=(40, 3))
    Y = X + rng.normal(size=(40, 3))
    norms = np.array([np.sqrt(sum((a - b) ** 2 for a, b in zip(x, y))) for x, y in zip(X, Y)])
    np.testing.assert_allclose(transport_cost(X, Y), norms.mean(), rtol=1e-14)
    np.testing.assert_allclose(transport_cost(X, Y, reduce="sum"), norms.sum(), rtol=1e-14)
    np.testing.assert_allclose(transport_cost(X, Y, squared=True), (norms**2).mean(), rtol=1e-14)
    np.testing.assert_allclose(transport_cost(X, Y, squared=True, reduce="sum"), (norms**2).sum(),
                               rtol=1e-14)
    # a translation by c costs |c| per point
    c = np.array([3.0, 4.0, 0.0])
    assert transport_cost(X, X + c) == pytest.approx(5.0, rel=1e-14)
    assert transport_cost(X, X) == 0.0


def test_transport_cost_empty_and_errors():
    assert math.isnan(transport_cost(np.empty((0, 2)), np.empty((0, 2))))
    assert transport_cost(np.empty((0, 2)), np.empty((0, 2)), reduce="sum") == 0.0
    with pytest.raises(ValueError, match="same shape"):
        transport_cost(np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="reduce"):
        transport_cost(np.zeros((3, 2)), np.zeros((3, 2)), reduce="max")
    with pytest.raises(TypeError, match="squared"):
        transport_cost(np.zeros((3, 2)), np.zeros((3, 2)), squared=1)
    with pytest.raises(ValueError, match="X_cf"):
        transport_cost(np.zeros((1, 2)), [[0.0, np.inf]])


# --- distortion_ratios: against brute force --------------------------------------------------

@pytest.mark.parametrize("n, d", [(2, 1), (3, 2), (17, 5), (60, 10)])
def test_ratios_all_pairs_brute_force(rng, n, d):
    X = rng.normal(size=(n, d))
    Y = np.tanh(X) @ rng.normal(size=(d, d)) + 0.1 * rng.normal(size=(n, d))  # non-affine
    res = distortion_ratios(X, Y)
    eps = 1e-9 * brute_median(X)
    check_against_brute(res, X, Y, eps=eps)


def test_ratios_affine_map_within_singular_values(rng):
    X = rng.normal(size=(150, 6))
    A = rng.normal(size=(6, 6))
    sv = np.linalg.svd(A, compute_uv=False)
    Y = X @ A.T + rng.normal(size=6)
    res = distortion_ratios(X, Y)
    assert sv.min() * (1 - 1e-12) <= res.min_ratio <= res.max_ratio <= sv.max() * (1 + 1e-12)
    check_against_brute(res, X, Y, eps=1e-9 * brute_median(X))


def test_translation_is_isometry_far_from_origin(rng):
    X = 1e6 + rng.normal(size=(200, 4))
    res = distortion_ratios(X, X + np.array([5.0, -3.0, 0.5, 2.0]))
    assert abs(res.min_ratio - 1) < 1e-9 and abs(res.max_ratio - 1) < 1e-9
    assert res.distortion < 1e-9
    Z = rng.normal(size=(200, 4))
    res = distortion_ratios(Z, Z + 7.0)
    assert abs(res.min_ratio - 1) < 1e-12 and abs(res.max_ratio - 1) < 1e-12
    assert res.n_pairs == 200 * 199 // 2


def test_near_duplicates_where_the_gram_trick_cancels(rng):
    # points far from the origin, one pair 1e-7 apart: |a|^2 + |b|^2 - 2 a.b loses every digit of
    # its 1e-14 squared distance (round-off ~ 1e-16 * 1e12 = 1e-4); the ratio of that pair is 3.
    base = 1e6 + rng.normal(size=(50, 3))
    X = np.vstack([base, base[:1] + np.array([1e-7, 0.0, 0.0])])
    Y = X.copy()
    Y[-1] = Y[0] + np.array([3e-7, 0.0, 0.0])
    naive = X[0] @ X[0] + X[-1] @ X[-1] - 2 * X[0] @ X[-1]
    exact = float(np.sum((X[0] - X[-1]) ** 2))
    assert abs(naive - exact) > 0.5 * exact  # the trick really fails here
    res = distortion_ratios(X, Y)
    assert res.n_excluded == 0
    lo, hi, kept, _ = brute_ratios(X, Y)
    np.testing.assert_allclose(res.max_ratio, hi, rtol=1e-12)  # the ratio ~3 of the near pair
    assert hi == pytest.approx(3.0, rel=1e-2)  # 1e-7 steps at 1e6 are rounded to ~1e-10
    np.testing.assert_allclose(res.min_ratio, lo, rtol=1e-12)
    assert res.n_pairs == kept


def test_many_near_duplicates_brute_force(rng):
    # clusters of near-duplicates around a few centres, mapped by a fixed linear map
    centres = rng.normal(scale=100.0, size=(4, 3))
    X = np.repeat(centres, 10, axis=0) + 1e-5 * rng.normal(size=(40, 3))
    A = np.diag([1.5, 0.7, 1.0])
    check_against_brute(distortion_ratios(X, X @ A.T), X, X @ A.T, eps=1e-9 * brute_median(X),
                        rtol=1e-9)


def test_collapsing_map_gives_zero_min_ratio(rng):
    # projection onto a hyperplane (Wachter-like collapse): pairs along w map to one point
    X = rng.normal(size=(30, 2))
    X[1] = X[0] + np.array([1.0, 0.0])
    Y = X.copy()
    Y[:, 0] = 0.0
    res = distortion_ratios(X, Y)
    assert res.min_ratio == 0.0 and res.distortion == 1.0
    assert res.max_ratio <= 1.0 + 1e-15


def test_blocked_path_beyond_one_block(rng):
    # n > 1024: several blocks, off-diagonal ones included; compare with scipy.spatial pdist
    from scipy.spatial.distance import pdist

    X = rng.normal(size=(1500, 3))
    Y = X @ rng.normal(size=(3, 3)) + np.sin(X)
    res = distortion_ratios(X, Y)
    r = pdist(Y) / pdist(X)
    assert res.n_pairs == r.size and res.n_excluded == 0
    np.testing.assert_allclose([res.min_ratio, res.max_ratio], [r.min(), r.max()], rtol=1e-12)
    # duplicates across blocks are excluded
    X2 = np.vstack([X, X[:5]])
    Y2 = np.vstack([Y, Y[:5]])
    res2 = distortion_ratios(X2, Y2)
    assert res2.n_excluded == 5
    assert res2.n_pairs + res2.n_excluded == 1505 * 1504 // 2
    np.testing.assert_allclose([res2.min_ratio, res2.max_ratio], [r.min(), r.max()], rtol=1e-12)


# --- distortion_ratios: pairs, sampling, eps ---------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_explicit_pairs(rng, dtype):
    X = rng.normal(size=(25, 3))
    Y = X @ rng.normal(size=(3, 3))
    pairs = np.array([[0, 1], [5, 3], [24, 0], [7, 7], [2, 9]], dtype=dtype)
    res = distortion_ratios(X, Y, pairs=pairs)
    plist = [tuple(p) for p in pairs.tolist()]
    med = float(np.median([np.linalg.norm(X[i] - X[j]) for i, j in plist]))
    check_against_brute(res, X, Y, pairs=plist, eps=1e-9 * med)
    assert res.n_excluded == 1  # the pair (7, 7)
    # order within a pair does not matter
    res_swapped = distortion_ratios(X, Y, pairs=pairs[:, ::-1])
    assert res_swapped.min_ratio == res.min_ratio and res_swapped.max_ratio == res.max_ratio


def test_all_pairs_equal_explicit_all_pairs(rng):
    X = rng.normal(size=(40, 4))
    Y = X ** 3
    i, j = np.triu_indices(40, k=1)
    a = distortion_ratios(X, Y)
    b = distortion_ratios(X, Y, pairs=np.column_stack([i, j]))
    assert (a.n_pairs, a.n_excluded) == (b.n_pairs, b.n_excluded)
    np.testing.assert_allclose([a.min_ratio, a.max_ratio], [b.min_ratio, b.max_ratio], rtol=1e-12)


def test_max_pairs_sampling(rng):
    X = rng.normal(size=(80, 3))
    Y = X @ np.diag([2.0, 1.0, 0.25])
    full = distortion_ratios(X, Y)
    a = distortion_ratios(X, Y, max_pairs=300, rng=7)
    b = distortion_ratios(X, Y, max_pairs=300, rng=np.random.default_rng(7))
    assert a == b  # same seed, same pairs
    assert a.n_pairs == 300
    assert full.min_ratio <= a.min_ratio <= a.max_ratio <= full.max_ratio
    # max_pairs at least the number of pairs: all of them, rng unused
    assert distortion_ratios(X, Y, max_pairs=10**6) == full
    # explicit pairs subsampled
    i, j = np.triu_indices(80, k=1)
    sub = distortion_ratios(X, Y, pairs=np.column_stack([i, j]), max_pairs=50, rng=1)
    assert sub.n_pairs == 50


def test_sampled_pairs_are_uniform_and_distinct():
    # the unranking of linear pair indices covers every pair exactly once
    from numtk.counterfactual._metrics import _unrank_pairs

    for n in (2, 3, 7, 50):
        k = np.arange(n * (n - 1) // 2)
        i, j = _unrank_pairs(k, n)
        ti, tj = np.triu_indices(n, k=1)
        np.testing.assert_array_equal(i, ti)
        np.testing.assert_array_equal(j, tj)
    n = 100_000  # large n: float rounding of the closed form is repaired
    k = np.array([0, 1, n - 2, n - 1, n * (n - 1) // 2 - 1, 1234567890])
    i, j = _unrank_pairs(k, n)
    offset = i * (2 * n - i - 1) // 2
    assert np.all((0 <= i) & (i < j) & (j < n))
    np.testing.assert_array_equal(offset + (j - i - 1), k)


def test_eps_excludes_close_pairs(rng):
    X = rng.normal(size=(20, 2))
    Y = 2.0 * X
    i, j = np.triu_indices(20, k=1)
    dist = np.linalg.norm(X[i] - X[j], axis=1)
    srt = np.sort(dist)
    eps = float(0.5 * (srt[56] + srt[57]))  # between two distances: no pair sits on eps
    res = distortion_ratios(X, Y, eps=eps)
    assert res.n_excluded == int(np.sum(dist <= eps))
    assert res.n_pairs == int(np.sum(dist > eps))
    assert res.min_ratio == pytest.approx(2.0, rel=1e-14)
    # eps = 0 keeps every pair of distinct points
    assert distortion_ratios(X, Y, eps=0).n_pairs == 190


def test_duplicates_and_default_eps(rng):
    X = rng.normal(size=(10, 3))
    X = np.vstack([X, X[:3]])  # three exact duplicates
    Y = X + 1.0
    res = distortion_ratios(X, Y)
    assert res.n_excluded == 3 and res.n_pairs == 13 * 12 // 2 - 3
    # a median of zero (most pairs duplicates) gives eps = 0: duplicates still excluded
    Xd = np.vstack([np.zeros((10, 2)), [[1.0, 0.0]]])
    res = distortion_ratios(Xd, 3.0 * Xd)
    assert res.n_excluded == 45 and res.n_pairs == 10
    assert res.min_ratio == pytest.approx(3.0, rel=1e-14)
    assert res.max_ratio == pytest.approx(3.0, rel=1e-14)


# --- distortion_ratios: layouts, small inputs, errors ------------------------------------------

def test_non_contiguous_and_dtypes(rng):
    big = rng.normal(size=(60, 10))
    X = big[::2, ::3]  # strided view
    Y = np.asfortranarray(X @ np.diag([1.0, 2.0, 0.5, 1.5]))
    ref = distortion_ratios(np.ascontiguousarray(X), np.ascontiguousarray(Y))
    assert distortion_ratios(X, Y) == ref
    check_against_brute(ref, X, Y, eps=1e-9 * brute_median(X))
    r32 = distortion_ratios(X.astype(np.float32), Y.astype(np.float32))
    assert r32.n_pairs == ref.n_pairs
    np.testing.assert_allclose(r32.min_ratio, ref.min_ratio, rtol=1e-6)
    Xi = rng.integers(0, 50, size=(15, 2))
    check_against_brute(distortion_ratios(Xi, 2 * Xi + 1), Xi, 2 * Xi + 1,
                        eps=1e-9 * brute_median(Xi.astype(float)))


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_rows(n):
    res = distortion_ratios(np.ones((n, 3)), np.ones((n, 3)))
    assert res.n_pairs == 0 and res.n_excluded == 0
    assert math.isnan(res.min_ratio) and math.isnan(res.max_ratio) and math.isnan(res.distortion)


def test_no_pairs_or_all_excluded():
    X = np.arange(6.0).reshape(3, 2)
    res = distortion_ratios(X, X, pairs=np.empty((0, 2), dtype=np.int64))
    assert res.n_pairs == 0 and math.isnan(res.distortion)
    res = distortion_ratios(np.ones((4, 2)), np.ones((4, 2)))
    assert res.n_pairs == 0 and res.n_excluded == 6 and math.isnan(res.min_ratio)


def test_distortion_ratios_errors():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError, match="same shape"):
        distortion_ratios(X, np.zeros((4, 3)))
    with pytest.raises(ValueError, match="same shape"):
        distortion_ratios(X, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="`X` must not contain NaN"):
        distortion_ratios(np.full((4, 2), np.nan), X)
    with pytest.raises(ValueError, match="X_cf"):
        distortion_ratios(X, np.full((4, 2), np.inf))
    with pytest.raises(ValueError, match="pairs"):
        distortion_ratios(X, X, pairs=np.array([[0, 4]]))
    with pytest.raises(ValueError, match="pairs"):
        distortion_ratios(X, X, pairs=np.array([[-1, 2]]))
    with pytest.raises(ValueError, match="pairs"):
        distortion_ratios(X, X, pairs=np.array([[0, 1, 2]]))
    with pytest.raises(TypeError, match="pairs"):
        distortion_ratios(X, X, pairs=np.array([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="max_pairs"):
        distortion_ratios(X, X, max_pairs=0)
    with pytest.raises(TypeError, match="max_pairs"):
        distortion_ratios(X, X, max_pairs=2.5)
    with pytest.raises(ValueError, match="eps"):
        distortion_ratios(X, X, eps=-1.0)
    with pytest.raises(TypeError, match="rng"):
        distortion_ratios(X, X, max_pairs=2, rng="seed")
    with pytest.raises(TypeError, match="X"):
        distortion_ratios(np.array([["a", "b"]]), X[:1])


def test_all_pairs_speed():
    # spec target: n = 2000, d = 50, all pairs well under 0.5 s (generous bound for slow CI)
    import time

    g = np.random.default_rng(0)
    X = g.normal(size=(2000, 50))
    Y = X * g.uniform(0.5, 2.0, size=50) + 1.0
    distortion_ratios(X[:100], Y[:100])
    t = time.perf_counter()
    res = distortion_ratios(X, Y)
    elapsed = time.perf_counter() - t
    assert res.n_pairs == 1999000
    assert elapsed < 2.0, elapsed
