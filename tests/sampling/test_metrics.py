"""numtk.sampling metrics (sampling.md §3.5, §4.4): log_Z_error, w2, sinkhorn_distance, mmd, and the
compiled kernels (sinkhorn.hpp, mmd.hpp) against the NumPy references in tests/reference."""

import warnings

import numpy as np
import pytest
from reference import sampling_metrics as ref

from numtk._lib import NumtkWarning, Result
from numtk.sampling import _sampling_ext as ext
from numtk.sampling import log_Z_error, mmd, sinkhorn_distance, w2
from numtk.sampling._metrics import _median_cost


def _clouds(seed, n=12, m=9, d=2, shift=0.5):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(m, d)) + shift


# --------------------------------------------------------------------------------------------- log_Z_error

def test_log_Z_error():
    assert log_Z_error(1.25, 1.0) == 0.25
    assert log_Z_error(Result(value=-2.0), 1.0) == 3.0
    assert log_Z_error(np.float32(0.5), np.float64(0.5)) == 0.0
    assert log_Z_error(np.array(2.0), 1.0) == 1.0
    assert log_Z_error(-np.inf, 0.0) == np.inf
    with pytest.raises(TypeError, match="estimate"):
        log_Z_error("1.0", 1.0)
    with pytest.raises(ValueError, match="reference"):
        log_Z_error(1.0, np.nan)


# ------------------------------------------------------------------------------------------------------ w2

@pytest.mark.parametrize("n", [1, 2, 5, 50, 301])
def test_w2_1d_is_sorted_difference(n):
    rng = np.random.default_rng(n)
    x, y = rng.normal(size=n), rng.standard_t(3, size=n)
    assert w2(x[:, None], y[:, None]) == pytest.approx(ref.w2_1d(x, y), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("d", [1, 2, 3])
def test_w2_matches_permutation_brute_force(n, d):
    X, Y = _clouds(10 * n + d, n, n, d)
    assert w2(X, Y) == pytest.approx(ref.w2_permutations(X, Y), rel=1e-12, abs=1e-15)


def test_w2_properties_and_validation():
    X, Y = _clouds(1, 20, 20, 3)
    assert w2(X, X) == 0.0
    assert w2(X, Y) == pytest.approx(w2(Y, X), rel=1e-13)
    assert w2(X.astype(np.float32), Y) == pytest.approx(w2(X.astype(np.float32).astype(float), Y), rel=1e-13)
    with pytest.raises(ValueError, match="same number of points"):
        w2(X, Y[:5])
    with pytest.raises(ValueError, match="sinkhorn_distance"):
        w2(np.zeros((5001, 1)), np.zeros((5001, 1)))


# ------------------------------------------------------------------------------------ compiled vs reference

def _fuzz_cases():
    rng = np.random.default_rng(7)
    cases = []
    for n, m, d in [(1, 1, 1), (1, 5, 2), (6, 1, 3), (7, 4, 1), (13, 11, 5), (40, 33, 2)]:
        X, Y = rng.normal(size=(n, d)), 1.5 * rng.normal(size=(m, d)) + 0.3
        cases.append((f"{n}x{m}x{d}", X, Y))
    base = rng.normal(size=(20, 6))
    cases.append(("noncontiguous", base[:, ::2], base[::2, 1::2]))  # strided views
    cases.append(("fortran", np.asfortranarray(rng.normal(size=(9, 3))), rng.normal(size=(8, 3))))
    cases.append(("float32", rng.normal(size=(10, 2)).astype(np.float32), rng.normal(size=(12, 2)).astype(np.float32)))
    return cases


CASES = _fuzz_cases()


@pytest.mark.parametrize("name,X,Y", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_sinkhorn_kernel_matches_dense_reference(name, X, Y, cost):
    rng = np.random.default_rng(len(X) + len(Y))
    a = rng.uniform(0.5, 1.5, len(X))
    b = rng.uniform(0.5, 1.5, len(Y))
    a, b = a / a.sum(), b / b.sum()
    C = ref.cost_matrix(X.astype(float), Y.astype(float), cost)
    eps = 0.3 * max(np.median(C), 1e-3)
    kind = ext.SQEUCLIDEAN if cost == "sqeuclidean" else ext.EUCLIDEAN
    for max_iter, tol in [(1, 0.0), (17, 0.0), (5000, 1e-11)]:
        want = ref.sinkhorn(C, a, b, eps, max_iter, tol)
        got = ext.sinkhorn_points(X, Y, a, b, eps, kind, max_iter, tol)
        dense = ext.sinkhorn_matrix(C, a, b, eps, max_iter, tol)
        for res in (got, dense):
            assert res["iterations"] == want["iterations"]
            np.testing.assert_allclose(res["f"], want["f"], rtol=1e-10, atol=1e-12 * (1 + np.abs(C).max()))
            np.testing.assert_allclose(res["g"], want["g"], rtol=1e-10, atol=1e-12 * (1 + np.abs(C).max()))
            for key in ("transport", "objective", "marginal_error"):
                assert res[key] == pytest.approx(want[key], rel=1e-9, abs=1e-13), key
    # the symmetric iteration on X alone
    Cxx = ref.cost_matrix(X.astype(float), X.astype(float), cost)
    want = ref.sinkhorn_symmetric(Cxx, a, eps, 2000, 1e-12)
    got = ext.sinkhorn_symmetric(X, a, eps, kind, 2000, 1e-12)
    np.testing.assert_allclose(got["f"], want["f"], rtol=1e-10, atol=1e-12 * (1 + Cxx.max()))
    assert got["objective"] == pytest.approx(want["objective"], rel=1e-10, abs=1e-14)
    assert got["transport"] == pytest.approx(want["transport"], rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("name,X,Y", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kernel", ["rbf", "imq"])
def test_kernel_sums_match_brute_force(name, X, Y, kernel):
    h = 0.7
    sxx, syy, sxy = ext.kernel_sums(X, Y, ext.RBF if kernel == "rbf" else ext.IMQ, h)
    Kxx = ref.kernel_matrix(X, X, kernel, h)
    Kyy = ref.kernel_matrix(Y, Y, kernel, h)
    assert sxx == pytest.approx(Kxx.sum() - np.trace(Kxx), rel=1e-12, abs=1e-12)
    assert syy == pytest.approx(Kyy.sum() - np.trace(Kyy), rel=1e-12, abs=1e-12)
    assert sxy == pytest.approx(ref.kernel_matrix(X, Y, kernel, h).sum(), rel=1e-12, abs=1e-12)


def test_kernels_do_not_depend_on_threads():
    rng = np.random.default_rng(3)
    X, Y = rng.normal(size=(1100, 3)), rng.normal(size=(700, 3))
    one = ext.kernel_sums(X, Y, ext.RBF, 1.1, 1)
    assert ext.kernel_sums(X, Y, ext.RBF, 1.1, 5) == one
    a, b = np.full(1100, 1 / 1100), np.full(700, 1 / 700)
    r1 = ext.sinkhorn_points(X, Y, a, b, 0.5, ext.SQEUCLIDEAN, 30, 0.0, 1)
    r4 = ext.sinkhorn_points(X, Y, a, b, 0.5, ext.SQEUCLIDEAN, 30, 0.0, 4)
    assert r1["transport"] == r4["transport"] and r1["objective"] == r4["objective"]
    np.testing.assert_array_equal(r1["f"], r4["f"])
    C = ref.cost_matrix(X, Y)
    np.testing.assert_array_equal(ext.sinkhorn_matrix(C, a, b, 0.5, 30, 0.0, 1)["g"],
                                  ext.sinkhorn_matrix(C, a, b, 0.5, 30, 0.0, 3)["g"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumtkWarning)
        assert sinkhorn_distance(X, Y, max_iter=20, workers=1) == sinkhorn_distance(X, Y, max_iter=20, workers=-1)
    assert mmd(X, Y, workers=1) == mmd(X, Y, workers=4)


def test_extension_refuses_bad_input():
    X = np.zeros((3, 2))
    a = np.full(3, 1 / 3)
    with pytest.raises(ValueError, match="finite"):
        ext.sinkhorn_points(np.array([[np.nan, 0.0]]), X, np.ones(1), a, 1.0, 0, 10, 0.0)
    with pytest.raises(ValueError, match="columns"):
        ext.sinkhorn_points(X, np.zeros((3, 3)), a, a, 1.0, 0, 10, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        ext.sinkhorn_points(X, X, a, a, 0.0, 0, 10, 0.0)
    with pytest.raises(ValueError, match="positive"):
        ext.sinkhorn_points(X, X, a, -a, 1.0, 0, 10, 0.0)
    with pytest.raises(ValueError, match="float32 or float64"):
        ext.kernel_sums(X.astype(int), X, 0, 1.0)
    with pytest.raises(ValueError, match="at least one row"):
        ext.kernel_sums(np.zeros((0, 2)), X, 0, 1.0)
    with pytest.raises(ValueError, match="bandwidth"):
        ext.kernel_sums(X, X, 0, -1.0)
    with pytest.raises(ValueError, match="2-D"):
        ext.sinkhorn_matrix(np.zeros(3), a, a, 1.0, 10, 0.0)


# ---------------------------------------------------------------------------------------- sinkhorn_distance

def test_sinkhorn_divergence_of_identical_samples_is_zero():
    X, _ = _clouds(2, 30, 1, 3)
    assert sinkhorn_distance(X, X) == 0.0
    assert sinkhorn_distance(X, X.copy(), cost="euclidean") == 0.0
    assert sinkhorn_distance(X.astype(np.float32), X.astype(np.float32)) == 0.0
    assert sinkhorn_distance(X, X, debiased=False, epsilon=0.5) > 0.0  # the biased cost is not


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_sinkhorn_divergence_nonnegative_and_symmetric(seed, cost):
    X, Y = _clouds(seed, 15, 11, 2, shift=0.05 * seed)
    s = sinkhorn_distance(X, Y, cost=cost, epsilon=0.5, max_iter=50000)
    assert s >= 0.0
    assert sinkhorn_distance(Y, X, cost=cost, epsilon=0.5, max_iter=50000) == pytest.approx(s, rel=1e-7, abs=1e-12)
    # the debiased value from the dense references (alternating iterations for all three terms)
    eps = 0.5 * np.median(ref.cost_matrix(X, Y, cost))
    a, b = np.full(15, 1 / 15), np.full(11, 1 / 11)
    ot = lambda P, Q, p, q: ref.sinkhorn(ref.cost_matrix(P, Q, cost), p, q, eps, 50000, 1e-11)["objective"]
    want = ot(X, Y, a, b) - 0.5 * ot(X, X, a, a) - 0.5 * ot(Y, Y, b, b)
    assert s == pytest.approx(max(want, 0.0), rel=1e-7, abs=1e-12)


@pytest.mark.filterwarnings("ignore::numtk._lib.NumtkWarning")  # small eps: tol=1e-9 is slow to reach
def test_sinkhorn_divergence_approaches_w2_squared():
    for seed in range(3):
        X, Y = _clouds(seed, 8, 8, 2, shift=1.0)
        target = w2(X, Y) ** 2
        errs = [abs(sinkhorn_distance(X, Y, epsilon=eps, max_iter=5000) / target - 1) for eps in (0.05, 0.005)]
        assert errs[0] < 0.05 and errs[1] < 0.005
        assert sinkhorn_distance(X, Y, epsilon=0.005, debiased=False, max_iter=5000) == pytest.approx(target, rel=0.005)


def test_relative_epsilon_and_weights():
    X, Y = _clouds(4, 14, 10, 2)
    med = _median_cost(X, Y, "sqeuclidean")
    assert med == pytest.approx(np.median(ref.cost_matrix(X, Y)), rel=1e-14)
    s = sinkhorn_distance(X, Y, epsilon=0.1)
    assert sinkhorn_distance(X, Y, epsilon=0.1 * med, relative_epsilon=False) == pytest.approx(s, rel=1e-13)
    # weights are normalised; a zero weight drops its point
    rng = np.random.default_rng(0)
    a, b = rng.uniform(size=14), rng.uniform(size=10)
    s1 = sinkhorn_distance(X, Y, a=a, b=b, relative_epsilon=False, epsilon=0.3)
    assert sinkhorn_distance(X, Y, a=3 * a, b=b / 7, relative_epsilon=False, epsilon=0.3) == pytest.approx(s1, rel=1e-12)
    a0 = a.copy()
    a0[3] = 0.0
    keep = np.arange(14) != 3
    assert sinkhorn_distance(X, Y, a=a0, b=b, relative_epsilon=False, epsilon=0.3) == pytest.approx(
        sinkhorn_distance(X[keep], Y, a=a[keep], b=b, relative_epsilon=False, epsilon=0.3), rel=1e-12)
    # all points equal: every cost is 0
    assert sinkhorn_distance(np.ones((3, 2)), np.ones((4, 2))) == 0.0


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_stored_and_on_the_fly_costs_agree(monkeypatch, cost):
    from numtk.sampling import _metrics

    X, Y = _clouds(9, 30, 25, 10)
    stored = sinkhorn_distance(X, Y, cost=cost, max_iter=5000)
    stored_biased = sinkhorn_distance(X, Y, cost=cost, debiased=False, max_iter=5000)
    monkeypatch.setattr(_metrics, "_DENSE_MAX_ENTRIES", 0)
    assert sinkhorn_distance(X, Y, cost=cost, max_iter=5000) == pytest.approx(stored, rel=1e-12)
    assert sinkhorn_distance(X, Y, cost=cost, debiased=False, max_iter=5000) == pytest.approx(stored_biased, rel=1e-12)


def test_sinkhorn_warns_when_not_converged():
    X, Y = _clouds(5, 40, 40, 2)
    with pytest.warns(NumtkWarning, match="max_iter"):
        sinkhorn_distance(X, Y, epsilon=1e-3, max_iter=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sinkhorn_distance(X, Y, epsilon=0.5, max_iter=100000)


def test_reproduces_sde_sampler():
    rng = np.random.default_rng(11)
    X, Y = rng.normal(size=(60, 2)), rng.normal(size=(50, 2)) * 1.2 + 0.3
    want, iters = ref.sde_sampler_sinkhorn(X, Y, eps=1e-3, max_iters=100)
    assert iters == 100  # their potential-change stop did not fire
    with pytest.warns(NumtkWarning):
        got = sinkhorn_distance(X, Y, cost="euclidean", epsilon=1e-3, relative_epsilon=False, max_iter=100,
                                debiased=False)
    assert got == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_sinkhorn_agrees_with_pot(cost):
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(40, 3)), rng.normal(size=(30, 3)) + 0.4
    a, b = rng.uniform(0.5, 1.5, 40), rng.uniform(0.5, 1.5, 30)
    a, b = a / a.sum(), b / b.sum()
    M = ot.dist(X, Y, metric=cost)
    eps = 0.3 * np.median(M)
    pot = ot.sinkhorn2(a, b, M, reg=eps, method="sinkhorn_log", numItermax=100000, stopThr=1e-13)
    ours = sinkhorn_distance(X, Y, a=a, b=b, epsilon=eps, relative_epsilon=False, cost=cost, debiased=False,
                             max_iter=100000, tol=1e-12)
    assert ours == pytest.approx(float(pot), rel=1e-6)
    # Sinkhorn divergence from POT's plans, each scored by the entropic objective
    def entropic(P, Q, p, q):
        Mpq = ot.dist(P, Q, metric=cost)
        G = ot.sinkhorn(p, q, Mpq, reg=eps, method="sinkhorn_log", numItermax=100000, stopThr=1e-13)
        return ref.entropic_objective(G, Mpq, p, q, eps)
    want = entropic(X, Y, a, b) - 0.5 * entropic(X, X, a, a) - 0.5 * entropic(Y, Y, b, b)
    got = sinkhorn_distance(X, Y, a=a, b=b, epsilon=eps, relative_epsilon=False, cost=cost, max_iter=100000,
                            tol=1e-12)
    assert got == pytest.approx(want, rel=1e-6)


def test_sinkhorn_agrees_with_pot_empirical():
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(6)
    X, Y = rng.normal(size=(50, 2)), rng.normal(size=(45, 2)) * 0.8
    eps = 0.2
    pot = ot.bregman.empirical_sinkhorn2(X, Y, reg=eps, numIterMax=100000, stopThr=1e-13)
    ours = sinkhorn_distance(X, Y, epsilon=eps, relative_epsilon=False, debiased=False, max_iter=100000, tol=1e-12)
    assert ours == pytest.approx(float(np.squeeze(pot)), rel=1e-6)


def test_sinkhorn_validation():
    X, Y = _clouds(0)
    bad = X.copy()
    bad[2, 1] = np.nan
    for kwargs, exc, match in [
        (dict(epsilon=0.0), ValueError, "epsilon"),
        (dict(epsilon=-1.0), ValueError, "epsilon"),
        (dict(cost="cityblock"), ValueError, "cost"),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(tol=-1.0), ValueError, "tol"),
        (dict(debiased=1), TypeError, "debiased"),
        (dict(a=np.ones(3)), ValueError, "`a`"),
        (dict(b=-np.ones(len(Y))), ValueError, "`b`"),
        (dict(a=np.zeros(len(X))), ValueError, "`a`"),
        (dict(a=np.full(len(X), np.nan)), ValueError, "`a`"),
        (dict(workers=0), ValueError, "workers"),
    ]:
        with pytest.raises(exc, match=match):
            sinkhorn_distance(X, Y, **kwargs)
    with pytest.raises(ValueError, match="`X`.*NaN"):
        sinkhorn_distance(bad, Y)
    with pytest.raises(ValueError, match="`Y`.*NaN"):
        sinkhorn_distance(X, bad)
    with pytest.raises(ValueError, match="`Y`.*infinite"):
        sinkhorn_distance(X, np.full((2, 2), np.inf))
    with pytest.raises(ValueError, match="`Y` must have the same number of columns"):
        sinkhorn_distance(X, Y[:, :1])
    with pytest.raises(ValueError, match="`X` must have at least one row"):
        sinkhorn_distance(np.zeros((0, 2)), Y)
    with pytest.raises(ValueError, match="`X` must be 2-D"):
        sinkhorn_distance(X[:, 0], Y)
    with pytest.raises(TypeError, match="`X`"):
        sinkhorn_distance(X.astype(complex), Y)


# ---------------------------------------------------------------------------------------------------- mmd

@pytest.mark.parametrize("kernel", ["rbf", "imq"])
@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("n,m,d", [(2, 2, 1), (5, 9, 2), (30, 17, 4), (64, 64, 1)])
def test_mmd_equals_brute_force(kernel, unbiased, n, m, d):
    X, Y = _clouds(n * m + d, n, m, d)
    h = ref.median_pooled_distance(X, Y)
    got = mmd(X, Y, kernel=kernel, unbiased=unbiased)
    assert got == pytest.approx(ref.mmd2(X, Y, kernel, h, unbiased), rel=1e-12, abs=1e-14)
    assert mmd(X, Y, kernel=kernel, bandwidth=0.4, unbiased=unbiased) == pytest.approx(
        ref.mmd2(X, Y, kernel, 0.4, unbiased), rel=1e-12, abs=1e-14)


def test_mmd_identical_symmetric_and_v_statistic():
    X, Y = _clouds(8, 25, 25, 3)
    # U-statistic of identical samples: slightly negative in general; exactly the brute-force value
    h = ref.median_pooled_distance(X, X)
    assert mmd(X, X) == pytest.approx(ref.mmd2(X, X, "rbf", h, True), rel=1e-12, abs=1e-14)
    assert abs(mmd(X, X, unbiased=False)) < 1e-14
    assert mmd(X, Y) == pytest.approx(mmd(Y, X), rel=1e-13)
    assert mmd(X, Y, unbiased=False) >= 0.0
    assert mmd(X.astype(np.float32), Y) == pytest.approx(mmd(X.astype(np.float32).astype(float), Y), rel=1e-13)
    assert mmd(X[:1], Y[:1], unbiased=False) == pytest.approx(ref.mmd2(X[:1], Y[:1], "rbf", 1.0 * np.linalg.norm(X[0] - Y[0]), False))


def test_mmd_validation():
    X, Y = _clouds(0)
    with pytest.raises(ValueError, match="at least 2"):
        mmd(X[:1], Y)
    with pytest.raises(ValueError, match="kernel"):
        mmd(X, Y, kernel="laplace")
    with pytest.raises(ValueError, match="bandwidth"):
        mmd(X, Y, bandwidth=0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        mmd(X, Y, bandwidth="scott")
    with pytest.raises(ValueError, match="`X`.*NaN"):
        mmd(np.array([[np.nan], [1.0]]), Y[:, :1])
    with pytest.raises(ValueError, match="`Y` must have the same number of columns"):
        mmd(X, Y[:, :1])
    with pytest.raises(ValueError, match="`Y` must have at least one row"):
        mmd(X, np.zeros((0, 2)))
