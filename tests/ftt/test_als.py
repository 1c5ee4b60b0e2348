"""FunctionalTT.fit (ALS with rank adaptation): exact recovery of known-rank functions, noise, options."""

import numpy as np
import pytest

from numtk.ftt import FunctionalTT

EXACT = dict(regularization=1e-14, rank_tol=1e-10)


def _rel(f, X, y):
    return np.linalg.norm(f.predict(X) - y) / np.linalg.norm(y)


def test_sum_of_univariates_is_rank_two_from_rank_one():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (1500, 4))
    y = X[:, 0] ** 3 - X[:, 1] + 2 * X[:, 2] ** 2 + np.sin(0.3 * X[:, 3])
    f = FunctionalTT(degree=[3, 3, 3, 9], ranks=1, rng=0, sweeps=40, **EXACT).fit(X, y)
    assert f.ranks_ == (1, 2, 2, 2, 1)
    assert max(max(h["ranks"]) for h in f.history_) <= 3
    assert _rel(f, X, y) < 1e-8
    Xt = rng.uniform(-1, 1, (200, 4))
    yt = Xt[:, 0] ** 3 - Xt[:, 1] + 2 * Xt[:, 2] ** 2 + np.sin(0.3 * Xt[:, 3])
    assert _rel(f, Xt, yt) < 1e-8


def test_rank_four_matrix_function_from_rank_one():
    # sum of four products of independent cubics: matrix rank 4, exactly in the cubic B-spline space.
    # The residual-driven enrichment adds one useful rank per sweep; with random directions 12 sweeps
    # ended at 5e-4 (measured)
    rng = np.random.default_rng(0)

    def fn(X):
        a, b = X[:, 0], X[:, 1]
        P = [np.ones_like(a), a, a ** 2 - 0.3, a ** 3 - 0.5 * a]
        Q = [b ** 3, 1.0 + b, b ** 2, b - 0.7 * b ** 3]
        return sum(p * q for p, q in zip(P, Q))

    X = rng.uniform(-1, 1, size=(4000, 2))
    f = FunctionalTT("bspline", degree=7, ranks=1, domain=[[-1, 1]] * 2, sweeps=12, rng=0, regularization=1e-12,
                     rank_tol=1e-10).fit(X, fn(X))
    assert f.ranks_ == (1, 4, 1)
    Xt = rng.uniform(-1, 1, (2000, 2))
    assert np.max(np.abs(f.predict(Xt) - fn(Xt))) < 1e-7


def test_product_is_rank_one():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (800, 3))
    y = (1.5 + X[:, 0]) * (2 - X[:, 1] ** 2) * (X[:, 2] + 3)
    f = FunctionalTT(degree=2, ranks=1, rng=0, sweeps=30, **EXACT).fit(X, y)
    assert f.ranks_ == (1, 1, 1, 1)
    assert _rel(f, X, y) < 1e-9


def test_funnel_log_density_is_rank_two():
    # a(x0) + b(x0) sum_{i>=1} x_i^2 with a = -x0^2 / 18, b = -exp(-x0) / 2 (funnel-like, x0 first)
    rng = np.random.default_rng(2)
    d = 4
    X = rng.uniform(-1, 1, (2500, d))
    y = -X[:, 0] ** 2 / 18 - 0.5 * np.exp(-X[:, 0]) * np.sum(X[:, 1:] ** 2, axis=1)
    f = FunctionalTT(degree=[16, 2, 2, 2], ranks=1, rng=0, sweeps=40, **EXACT).fit(X, y)
    assert f.ranks_ == (1, 2, 2, 2, 1)
    Xt = rng.uniform(-1, 1, (300, d))
    yt = -Xt[:, 0] ** 2 / 18 - 0.5 * np.exp(-Xt[:, 0]) * np.sum(Xt[:, 1:] ** 2, axis=1)
    assert _rel(f, Xt, yt) < 1e-8
    # its gradient and Laplacian in closed form
    g = f.gradient(Xt)
    s = np.sum(Xt[:, 1:] ** 2, axis=1)
    np.testing.assert_allclose(g[:, 0], -Xt[:, 0] / 9 + 0.5 * np.exp(-Xt[:, 0]) * s, atol=1e-6)
    np.testing.assert_allclose(g[:, 1:], -np.exp(-Xt[:, :1]) * Xt[:, 1:], atol=1e-6)
    lap = -1 / 9 - 0.5 * np.exp(-Xt[:, 0]) * s - np.exp(-Xt[:, 0]) * (d - 1)
    np.testing.assert_allclose(f.laplacian(Xt), lap, atol=1e-5)


def test_random_tt_recovered():
    rng = np.random.default_rng(3)
    d, n, r = 4, 4, 2
    ranks = [1] + [r] * (d - 1) + [1]
    cores = [rng.normal(size=(ranks[k], n, ranks[k + 1])) for k in range(d)]
    truth = FunctionalTT.from_cores(cores, "legendre", n - 1, domain=[[-1, 1]] * d)
    P = sum(c.size for c in cores)
    X = rng.uniform(-1, 1, (60 * P, d))
    y = truth.predict(X)
    f = FunctionalTT(degree=n - 1, ranks=r, domain=[[-1, 1]] * d, rng=1, sweeps=60, tol=0.0, rank_adaptive=False,
                     **EXACT).fit(X, y)
    assert _rel(f, X, y) < 1e-8
    Xt = rng.uniform(-1, 1, (200, d))
    assert _rel(f, Xt, truth.predict(Xt)) < 1e-8


def test_noise_level_recovered():
    rng = np.random.default_rng(4)
    sigma = 0.05
    X = rng.uniform(-1, 1, (4000, 3))
    clean = np.cos(X[:, 0]) + X[:, 1] * X[:, 2]
    y = clean + sigma * rng.normal(size=len(X))
    f = FunctionalTT(degree=5, ranks=2, rng=0, sweeps=8).fit(X, y)
    best_val = min(h["val_rmse"] for h in f.history_)
    assert abs(best_val - sigma) < 0.05 * sigma + 3 * sigma / np.sqrt(400)
    assert np.sqrt(np.mean((f.predict(X) - clean) ** 2)) < 0.3 * sigma


def test_sample_weight_ignores_zero_weight_rows():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (600, 2))
    y = X[:, 0] * X[:, 1] + X[:, 0]
    bad = y.copy()
    bad[:100] += 10.0
    w = np.ones(600)
    w[:100] = 0.0
    f = FunctionalTT(degree=2, ranks=1, rng=0, sweeps=20, **EXACT).fit(X, bad, sample_weight=w)
    assert _rel(f, X[100:], y[100:]) < 1e-8


def test_bspline_fit_smooth_function():
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (1500, 3))
    y = np.tanh(X[:, 0]) + 0.5 * X[:, 1] * X[:, 2]
    f = FunctionalTT("bspline", degree=10, ranks=2, rng=0, sweeps=6, max_rank=4).fit(X, y)
    assert np.sqrt(np.mean((f.predict(X) - y) ** 2)) < 2e-3
    assert f.domain_.shape == (3, 2) and np.all(np.isfinite(f.domain_))


def test_hermite_fit_recovers_polynomial():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(1500, 3))
    y = X[:, 0] ** 3 / 6 - X[:, 0] + 0.5 * X[:, 1] * X[:, 2] ** 2
    f = FunctionalTT("hermite", degree=4, ranks=1, loc=0.1, scale=1.2, rng=0, sweeps=30, **EXACT).fit(X, y)
    assert f.ranks_ == (1, 2, 2, 1)
    assert _rel(f, X, y) < 1e-8
    assert np.all(np.isinf(f.domain_))


def test_options_warm_start_callback_history_progress():
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, (500, 3))
    y = X[:, 0] ** 2 + X[:, 1] * X[:, 2]
    calls = []

    def cb(intermediate_result):
        res = intermediate_result
        calls.append(res.n_iter)
        assert res.ranks == tuple([1] + [c.shape[2] for c in res.cores])
        assert np.isfinite(res.train_rmse) and np.isfinite(res.val_rmse)
        if res.n_iter == 2:
            raise StopIteration

    f = FunctionalTT(degree=3, ranks=2, rng=0, sweeps=10, callback=cb, progress=True).fit(X, y)
    assert f.n_iter_ == 2 and calls == [1, 2]
    assert f.status_ == "callback" and "callback" in f.message_
    assert [h["direction"] for h in f.history_] == ["left-to-right", "right-to-left"] * 2
    assert set(f.history_[0]) == {"sweep", "direction", "train_rmse", "val_rmse", "ranks"}
    g = FunctionalTT(degree=3, ranks=2, rng=0, sweeps=3, init=f).fit(X, y)
    assert g.history_[0]["val_rmse"] <= 1.01 * min(h["val_rmse"] for h in f.history_)
    np.testing.assert_array_equal(g.domain_, f.domain_)
    # the same rng gives the same fit
    def stop_at_two(res):
        if res.n_iter == 2:
            raise StopIteration

    f2 = FunctionalTT(degree=3, ranks=2, rng=0, sweeps=10, callback=stop_at_two).fit(X, y)
    np.testing.assert_array_equal(f2.predict(X), f.predict(X))
    # a fit refitted with an int rng is the same fit; the callback's return value is ignored
    f3 = FunctionalTT(degree=3, ranks=2, rng=0, sweeps=2, callback=lambda res: True).fit(X, y)
    assert f3.n_iter_ == 2 and f3.status_ == "max_iterations"
    np.testing.assert_array_equal(f3.predict(X), f.predict(X))
    np.testing.assert_array_equal(f3.fit(X, y).predict(X), f.predict(X))


def test_fixed_ranks_max_rank_and_h2():
    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, (800, 4))
    y = np.sin(X.sum(axis=1))  # rank 2 exactly, but start at 3 with adaptation off
    f = FunctionalTT(degree=4, ranks=3, rng=0, sweeps=2, rank_adaptive=False).fit(X, y)
    assert f.ranks_ == (1, 3, 3, 3, 1)
    g = FunctionalTT(degree=4, ranks=1, rng=0, sweeps=6, max_rank=1).fit(X, y)
    assert g.ranks_ == (1, 1, 1, 1, 1)
    h = FunctionalTT(degree=8, ranks=2, rng=0, sweeps=4, regularization={"ridge": 1e-8, "h2": 1e-3}).fit(
        X, y + 0.1 * rng.normal(size=len(y)))
    assert np.sqrt(np.mean((h.predict(X) - y) ** 2)) < 0.1


def test_one_dimension_and_tiny_samples():
    rng = np.random.default_rng(9)
    x = rng.uniform(-2, 3, (50, 1))
    y = 1 - 2 * x[:, 0] + 0.5 * x[:, 0] ** 3
    f = FunctionalTT(degree=3, rng=0, **EXACT).fit(x, y)
    assert f.ranks_ == (1, 1) and _rel(f, x, y) < 1e-10
    X = rng.uniform(-1, 1, (8, 2))  # fewer than 20 rows: no validation split
    g = FunctionalTT(degree=1, ranks=1, rng=0, **EXACT).fit(X, X[:, 0] + 1.0)
    assert np.allclose(g.predict(X), X[:, 0] + 1.0)


@pytest.mark.parametrize("basis", ["legendre", "bspline"])
def test_directional_rows_recover_the_function(basis):
    """fit(directional=V) solves f(x) + V . grad f(x) = y: data built by the dense reference from a known
    train are inverted exactly (the linearised implicit BSDE step is this problem)."""
    from reference.ftt import evaluate

    rng = np.random.default_rng(5)
    d, n, r = 3, 5, 2
    ranks = [1] + [r] * (d - 1) + [1]
    cores = [rng.normal(size=(ranks[k], n, ranks[k + 1])) for k in range(d)]
    bases = [(basis, -1.0, 1.0)] * d
    P = sum(c.size for c in cores)
    X = rng.uniform(-1, 1, (80 * P, d))
    V = 0.2 * rng.normal(size=X.shape)
    f, grad, _ = evaluate(X, cores, bases)
    y = f + np.sum(V * grad, axis=1)
    model = FunctionalTT(basis, degree=n - 1, ranks=r, domain=[[-1, 1]] * d, rng=1, sweeps=60, tol=0.0,
                         rank_adaptive=False, **EXACT)
    model.fit(X, y, directional=V)
    Xt = rng.uniform(-1, 1, (200, d))
    ft, gt, _ = evaluate(Xt, cores, bases)
    np.testing.assert_allclose(model.predict(Xt), ft, atol=1e-7 * np.abs(ft).max())
    np.testing.assert_allclose(model.gradient(Xt), gt, atol=1e-6 * np.abs(gt).max())
    # the plain fit of the same data is a different (wrong) function: the rows really carry V . grad f
    plain = FunctionalTT(basis, degree=n - 1, ranks=r, domain=[[-1, 1]] * d, rng=1, sweeps=10).fit(X, y)
    assert np.max(np.abs(plain.predict(Xt) - ft)) > 1e-3


def test_directional_validation():
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match="directional"):
        FunctionalTT().fit(X, X[:, 0], directional=np.zeros((50, 3)))
    with pytest.raises(ValueError, match="directional"):
        FunctionalTT().fit(X, X[:, 0], directional=np.full((50, 2), np.nan))


def test_additive_start_fits_a_sum_of_quartic_wells():
    """init='additive': the least-squares additive model is an exact rank-2 train, and ALS keeps it."""
    rng = np.random.default_rng(0)
    X = np.clip(rng.normal(size=(4000, 4)) * 1.5, -4.5, 4.5)

    def g(x):
        return -x ** 4 + 6 * x ** 2 + 0.5 * x

    y = g(X[:, 0]) + g(X[:, 2]) - 0.5 * X[:, 1] ** 2
    for basis, degree in (("legendre", 8), ("bspline", 31)):
        f = FunctionalTT(basis, degree=degree, ranks=2, domain=[[-4.5, 4.5]] * 4, sweeps=5, rng=0, init="additive",
                         regularization=1e-10)
        f.fit(X, y)
        assert np.sqrt(np.mean((f.predict(X) - y) ** 2)) / np.std(y) < 1e-4, basis
        assert max(f.ranks_) == 2
    with pytest.raises(ValueError, match="init"):
        FunctionalTT(init="zeros").fit(X, y)


def test_qr_core_solve_matches_dense_least_squares():
    from numtk.ftt._als import normal_equations, penalty_matrix, solve_qr, solve_spd

    rng = np.random.default_rng(1)
    M, ra, n, rb = 300, 2, 5, 3
    L, Phi, R = rng.normal(size=(M, ra)), rng.normal(size=(M, n)), rng.normal(size=(M, rb))
    w, y = rng.uniform(0.5, 2, M), rng.normal(size=M)
    pen = penalty_matrix(ra, n, rb, 1e-3, 0.0, None)
    A = np.einsum("ma,mi,mc->maic", L, Phi, R).reshape(M, -1)   # dense reference rows
    ref = np.linalg.solve(A.T @ (w[:, None] * A) / w.sum() + pen, A.T @ (w * y) / w.sum())
    np.testing.assert_allclose(solve_qr(L, None, Phi, None, R, None, w, y, M, pen), ref, rtol=1e-9, atol=1e-12)
    G, b = normal_equations(L, Phi, R, w, y, M, pen)
    np.testing.assert_allclose(solve_spd(G, b), ref, rtol=1e-9, atol=1e-12)
    # a numerically singular system is handed to the QR path
    assert solve_spd(np.array([[1.0, 1.0], [1.0, 1.0 + 1e-13]]), np.ones(2), rcond_min=1e-11) is None


def test_a_good_start_is_never_made_worse():
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (500, 3))
    y = np.sin(X).sum(1)
    f = FunctionalTT("legendre", degree=9, ranks=2, domain=[[-1, 1]] * 3, rng=0, **EXACT).fit(X, y)
    g = FunctionalTT("legendre", degree=9, ranks=2, domain=[[-1, 1]] * 3, rng=1, sweeps=1, init=f, **EXACT)
    g.fit(X, y)
    assert np.sqrt(np.mean((g.predict(X) - y) ** 2)) <= np.sqrt(np.mean((f.predict(X) - y) ** 2)) * (1 + 1e-6)


def test_bspline_on_wide_boxes_in_many_dimensions():
    # the B-spline Gram is taken under the uniform probability on the box: under Lebesgue measure a
    # train orthonormal on boxes of width 12 has interface values ~ 12 ** (-(d - 1) / 2) (1e-15 at
    # d = 28), the absolute ridge swamped the normal equations and ALS returned the zero function
    rng = np.random.default_rng(7)
    d = 28
    coef = rng.uniform(0.5, 1.5, d)

    def fn(X, shift):
        return np.sum(np.sin(0.5 * X + shift) * coef, axis=1) + 10.0

    X, Xt = rng.uniform(-6, 6, (3000, d)), rng.uniform(-6, 6, (300, d))
    model = FunctionalTT("bspline", degree=8, ranks=2, domain=[[-6, 6]] * d, rng=0, max_rank=3)
    f = model.set_params(init="additive", sweeps=2).fit(X, fn(X, 0.0))
    assert _rel(f, Xt, fn(Xt, 0.0)) < 2e-3
    # a warm-started refit to a shifted function must move (it collapsed to zero before)
    g = FunctionalTT("bspline", degree=8, ranks=2, domain=[[-6, 6]] * d, rng=0, max_rank=3, init=f, sweeps=8)
    g.fit(X, fn(X, 0.3))
    assert _rel(g, Xt, fn(Xt, 0.3)) < 3e-3  # 0.098 (the start, unmoved) before


@pytest.mark.parametrize("P", [1, 5, 64, 65, 200])
def test_mirror_upper_matches_the_symmetric_completion(P):
    from numtk.ftt._als import _mirror_upper

    U = np.triu(np.random.default_rng(P).standard_normal((P, P)))
    G = U.copy()
    _mirror_upper(G)
    np.testing.assert_array_equal(G, U + np.triu(U, 1).T)


def test_solve_spd_large_system_with_blas_threads():
    from numtk.ftt._als import solve_spd

    rng = np.random.default_rng(0)
    A = rng.standard_normal((1200, 1030))
    G = A.T @ A + np.eye(1030)
    b = rng.standard_normal(1030)
    ref = np.linalg.solve(G, b)
    np.testing.assert_allclose(solve_spd(G.copy(), b, threads=2), ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(solve_spd(G.copy(), b, threads=1), ref, rtol=1e-8, atol=1e-12)


def _sklearn_regression_check_data():
    # the data of scikit-learn's check_regressors_train (sklearn.utils.estimator_checks._regression_dataset,
    # then y scaled): 200 points in 10 dimensions, one informative feature, noise
    from sklearn.datasets import make_regression
    from sklearn.preprocessing import StandardScaler, scale

    X, y = make_regression(n_samples=200, n_features=10, n_informative=1, bias=5.0, noise=20, random_state=42)
    return StandardScaler().fit_transform(X), scale(y)


@pytest.mark.parametrize("seed", range(5))
def test_regression_check_data_is_fitted_as_well_as_the_linear_model(seed):
    # a degree-2 train contains every linear model; from a near-constant start ALS lost the constant function
    # from its interfaces on this zero-mean target and returned the constant (R^2 = 0 for these five seeds)
    from sklearn.linear_model import LinearRegression

    X, y = _sklearn_regression_check_data()
    linear = LinearRegression().fit(X, y).score(X, y)  # 0.81
    f = FunctionalTT(degree=2, rng=seed).fit(X, y)
    assert f.score(X, y) > linear - 0.02


def test_a_term_in_the_last_coordinate_of_a_zero_mean_target_is_found():
    # y = x_9 exactly: the left interfaces must keep the constant function for x_9 to be representable
    X = np.random.default_rng(0).standard_normal((200, 10))
    for j in (0, 5, 9):
        f = FunctionalTT(degree=2, rng=0).fit(X, X[:, j])
        Xt = np.random.default_rng(1).standard_normal((50, 10))
        np.testing.assert_allclose(f.predict(Xt), Xt[:, j], atol=1e-8)


def test_additive_start_respects_the_rank_caps():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (600, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    fixed = FunctionalTT(degree=4, ranks=1, rank_adaptive=False, rng=0, sweeps=3).fit(X, y)
    assert fixed.ranks_ == (1, 1, 1, 1)
    capped = FunctionalTT(degree=4, ranks=3, max_rank=2, rng=0, sweeps=3).fit(X, y)
    assert max(capped.ranks_) <= 2
    # the rank-1 truncation of the additive start of a function of one coordinate is exact
    one = FunctionalTT(degree=4, ranks=1, rank_adaptive=False, rng=0, sweeps=1).fit(X, X[:, 1] ** 3 - X[:, 1])
    np.testing.assert_allclose(one.predict(X), X[:, 1] ** 3 - X[:, 1], atol=1e-9)


def test_additive_start_by_lsqr_beyond_the_dense_limit(monkeypatch):
    # above _ADDITIVE_DENSE_MAX unknowns the additive start is solved by LSQR on the design's chunks: the
    # same start as the dense normal equations
    from numtk.ftt import _functional_tt

    rng = np.random.default_rng(4)
    X = rng.uniform(-1, 1, (3000, 5))
    y = X[:, 0] ** 2 - 2 * X[:, 3] + np.cos(2 * X[:, 4])
    dense = FunctionalTT(degree=8, rng=0, sweeps=1).fit(X, y)
    monkeypatch.setattr(_functional_tt, "_ADDITIVE_DENSE_MAX", 10)
    monkeypatch.setattr(_functional_tt, "_ADDITIVE_CHUNK_ENTRIES", 4500)  # chunks of 100 rows
    by_lsqr = FunctionalTT(degree=8, rng=0, sweeps=1).fit(X, y)
    np.testing.assert_allclose(by_lsqr.predict(X), dense.predict(X), atol=1e-6)
    np.testing.assert_allclose(by_lsqr.predict(X), y, atol=1e-3)
