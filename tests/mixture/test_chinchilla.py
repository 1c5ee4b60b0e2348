"""chinchilla_fit: planted recovery, the two starts against each other, the gradient and the variable
projection against independent references, the compute-optimal frontier by brute force, the delta-method
covariance against refits over noise draws, SciPy's curve_fit and a finite-difference sandwich, the
bootstrap against the delta method, validation, and the opt-in reproduction of the Chinchilla replication
(user-supplied data, never shipped)."""

import csv
import itertools
import os
import warnings

import numpy as np
import pytest
from scipy.optimize import curve_fit, minimize_scalar, nnls

from numtk._lib import NumtkWarning
from numtk.mixture import chinchilla_fit
from numtk.mixture import _chinchilla as ch

PLANTED = dict(E=2.1, A=300.0, B=1500.0, alpha=0.31, beta=0.38)


def _grid(n_sizes=8, n_tokens=8):
    N, D = np.meshgrid(np.logspace(7, 10, n_sizes), np.logspace(9, 12, n_tokens))
    return N.ravel(), D.ravel()


def _law(N, D, E, A, B, alpha, beta):
    return E + A * N**-alpha + B * D**-beta


def _huber(r, delta):
    # written out independently of numtk.mixture._huber
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def _objective(p, N, D, L, delta):
    """The objective written in the law's own terms (no log-sum-exp)."""
    a, b, e, alpha, beta = p
    pred = np.exp(e) + np.exp(a) * N**-alpha + np.exp(b) * D**-beta
    r = np.log(pred) - np.log(L)
    return float(np.sum(_huber(r, delta) if delta is not None else 0.5 * r * r))


def _noisy(seed=0, sigma=0.01, n_sizes=8, n_tokens=6):
    N, D = _grid(n_sizes, n_tokens)
    rng = np.random.default_rng(seed)
    L = _law(N, D, **PLANTED) * np.exp(sigma * rng.standard_normal(N.size))
    return N, D, L


@pytest.mark.parametrize("loss", ["huber", "l2"])
def test_planted_recovery_noise_free(loss):
    N, D = _grid()
    res = chinchilla_fit(N, D, _law(N, D, **PLANTED), loss=loss)
    got = np.array([res.log_E, res.log_A, res.log_B, res.alpha, res.beta])
    want = np.array([np.log(PLANTED["E"]), np.log(PLANTED["A"]), np.log(PLANTED["B"]), PLANTED["alpha"],
                     PLANTED["beta"]])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert res.value < 1e-15
    assert res.success and res.n_starts == 5
    np.testing.assert_allclose([res.E, res.A, res.B], [PLANTED["E"], PLANTED["A"], PLANTED["B"]], rtol=1e-6)


def test_frontier_matches_brute_force():
    N, D = _grid()
    res = chinchilla_fit(N, D, _law(N, D, **PLANTED))
    p = PLANTED
    assert res.n_opt_exponent == pytest.approx(p["beta"] / (p["alpha"] + p["beta"]), abs=1e-7)
    assert res.d_opt_exponent == pytest.approx(p["alpha"] / (p["alpha"] + p["beta"]), abs=1e-7)
    for C in (1e20, 1e23):
        # minimise the planted loss at fixed compute C = 6 N D over log N
        f = lambda ln: _law(np.exp(ln), C / (6 * np.exp(ln)), **p)  # noqa: E731
        opt = minimize_scalar(f, bounds=(np.log(1e5), np.log(C / 6 / 1e3)), method="bounded",
                              options={"xatol": 1e-12})
        n_opt = res.G * (C / 6) ** res.n_opt_exponent
        d_opt = (C / 6) ** res.d_opt_exponent / res.G
        assert np.log(n_opt) == pytest.approx(opt.x, abs=1e-5)
        assert n_opt * d_opt == pytest.approx(C / 6, rel=1e-9)


def test_varpro_and_grid_reach_the_same_objective_on_noisy_data():
    N, D, L = _noisy()
    vp = chinchilla_fit(N, D, L)
    # every 9th start of the replication's 4,500 keeps the test fast; the full grid runs in the opt-in test
    starts = ch._replication_grid()[::9]
    gr = chinchilla_fit(N, D, L, init="grid", grid=starts)
    assert gr.n_starts == 500
    assert gr.value == pytest.approx(vp.value, rel=1e-8)
    np.testing.assert_allclose([gr.alpha, gr.beta, gr.log_E], [vp.alpha, vp.beta, vp.log_E], atol=2e-4)
    # and no start of the grid ends lower than the variable-projection fit
    assert vp.value <= gr.value * (1 + 1e-8)
    # with 1% noise the fit lands near the planted law (beta is the least determined: tokens span 3 decades
    # and B D^-beta is small beside E at the largest D)
    np.testing.assert_allclose([vp.alpha, vp.beta, vp.E], [PLANTED["alpha"], PLANTED["beta"], PLANTED["E"]],
                               rtol=0.3)


def test_replication_grid_is_the_4500_starts():
    g = ch._replication_grid()
    assert g.shape == (4500, 5)
    want = set(itertools.product(range(0, 30, 5), range(0, 30, 5), (-1, -0.5, 0, 0.5, 1), (0, 0.5, 1, 1.5, 2),
                                 (0, 0.5, 1, 1.5, 2)))
    assert {tuple(float(v) for v in row) for row in g} == {tuple(float(v) for v in w) for w in want}


@pytest.mark.parametrize("delta", [1e-3, 0.05, None])
def test_analytic_gradient_matches_finite_differences(delta):
    N, D, L = _noisy(1, sigma=0.05)
    rng = np.random.default_rng(3)
    logN, logD, logL = np.log(N), np.log(D), np.log(L)
    for _ in range(4):
        p = np.array([np.log(300.0), np.log(1500.0), np.log(2.1), 0.31, 0.38]) + 0.05 * rng.standard_normal(5)
        value, grad = ch._objective(p, logN, logD, logL, delta)
        assert value == pytest.approx(_objective(p, N, D, L, delta), rel=1e-12)
        h = 1e-6
        fd = np.array([(_objective(p + h * e, N, D, L, delta) - _objective(p - h * e, N, D, L, delta)) / (2 * h)
                       for e in np.eye(5)])
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9 * max(1.0, np.abs(fd).max()))


def test_vectorised_nnls_matches_scipy():
    N, D, L = _noisy(2, sigma=0.03)
    rng = np.random.default_rng(4)
    pairs = np.column_stack([rng.uniform(0.05, 1.5, 40), rng.uniform(0.05, 1.5, 40)])
    # include pairs where some coefficient is 0 at the NNLS optimum
    pairs = np.vstack([pairs, [[1.5, 0.05], [0.05, 1.5], [1.5, 1.5]]])
    for al, be in pairs:
        start = ch._varpro_starts(np.log(N), np.log(D), np.log(L), np.array([al]), np.array([be]), 1)[0]
        X = np.column_stack([1 / L, N**-al / L, D**-be / L])
        scale = np.abs(X).max(axis=0)
        coef, _ = nnls(X / scale, np.ones(L.size))
        coef = coef / scale
        mine = np.exp([start[2], start[0], start[1]])
        positive = coef > 0
        np.testing.assert_allclose(mine[positive], coef[positive], rtol=1e-6)
        # a zero of the NNLS solution becomes a small stand-in (a thousandth of the column's own fit)
        assert np.all(mine[~positive] < 1e-2 * np.max(mine[positive]))


def test_varpro_keeps_the_five_best_positive_pairs():
    N, D, L = _noisy(5, sigma=0.02)
    pairs = np.array(list(itertools.product(ch.VARPRO_GRID, ch.VARPRO_GRID)))
    resid = []
    for al, be in pairs:
        X = np.column_stack([1 / L, N**-al / L, D**-be / L])
        scale = np.abs(X).max(axis=0)
        coef, r = nnls(X / scale, np.ones(L.size))
        resid.append(r**2 if np.all(coef > 0) else np.inf)
    best = pairs[np.argsort(resid, kind="stable")[:5]]
    starts = ch._varpro_starts(np.log(N), np.log(D), np.log(L), pairs[:, 0], pairs[:, 1], 5)
    np.testing.assert_allclose(starts[:, 3:], best)


def test_workers_and_success_only():
    N, D, L = _noisy(6)
    base = chinchilla_fit(N, D, L)
    mapped = chinchilla_fit(N, D, L, workers=lambda f, xs: list(map(f, xs)))
    assert mapped.value == base.value and mapped.alpha == base.alpha
    strict = chinchilla_fit(N, D, L, success_only=True)
    assert strict.success
    assert strict.value >= base.value


def test_user_pairs_for_varpro():
    N, D = _grid()
    L = _law(N, D, **PLANTED)
    res = chinchilla_fit(N, D, L, grid=[[0.3, 0.4], [1.0, 1.0]])
    assert res.n_starts == 2
    assert res.alpha == pytest.approx(PLANTED["alpha"], abs=1e-6)


def _theta(res):
    return np.array([res.log_A, res.log_B, res.log_E, res.alpha, res.beta])


def _log_law(theta, N, D):
    a, b, e, alpha, beta = theta
    return np.log(np.exp(e) + np.exp(a) * N**-alpha + np.exp(b) * D**-beta)


def test_delta_std_errors_match_refits_over_noise_draws():
    # the oracle: the spread of least-squares fits over 50 independent noise draws of the planted law
    N, D = _grid(8, 6)
    L0 = _law(N, D, **PLANTED)
    rng = np.random.default_rng(20)
    fits, ses = [], []
    for _ in range(50):
        res = chinchilla_fit(N, D, L0 * np.exp(0.01 * rng.standard_normal(N.size)), loss="l2")
        fits.append(_theta(res))
        ses.append(res.std_errors)
    empirical = np.std(fits, axis=0, ddof=1)
    np.testing.assert_allclose(np.median(ses, axis=0), empirical, rtol=0.25)


def test_bootstrap_std_errors_match_the_delta_method():
    N, D, L = _noisy(7)
    res = chinchilla_fit(N, D, L, loss="l2", n_resamples=200, rng=3)
    assert res.bootstrap.shape == (200, 5) and np.all(np.isfinite(res.bootstrap))
    np.testing.assert_allclose(res.bootstrap_std_errors, np.std(res.bootstrap, axis=0, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(res.bootstrap_std_errors, res.std_errors, rtol=0.35)
    # the bootstrap cloud is centred near the fit (a warm start does not stall at it)
    assert np.all(np.abs(np.median(res.bootstrap, axis=0) - _theta(res)) < res.std_errors)


def test_l2_covariance_matches_curve_fit():
    # SciPy's curve_fit on log L, from the fitted point: pcov = RSS/(n - p) (J^T J)^-1 with its own Jacobian
    N, D, L = _noisy(8)
    res = chinchilla_fit(N, D, L, loss="l2")
    popt, pcov = curve_fit(lambda x, *t: _log_law(t, N, D), None, np.log(L), p0=_theta(res),
                           xtol=1e-14, ftol=1e-14)
    np.testing.assert_allclose(popt, _theta(res), atol=1e-5)
    np.testing.assert_allclose(res.covariance, pcov, rtol=1e-3, atol=1e-6 * np.abs(pcov).max())
    np.testing.assert_allclose(res.std_errors, np.sqrt(np.diag(pcov)), rtol=1e-3)


def test_huber_covariance_is_the_sandwich():
    # the sandwich written out with a central-difference Jacobian of the law in its own terms
    N, D, L = _noisy(9, sigma=0.02)
    delta = 0.02
    res = chinchilla_fit(N, D, L, delta=delta)
    t = _theta(res)
    h = 1e-6
    J = np.column_stack([(_log_law(t + h * e, N, D) - _log_law(t - h * e, N, D)) / (2 * h) for e in np.eye(5)])
    r = _log_law(t, N, D) - np.log(L)
    inside = np.abs(r) <= delta
    assert 5 < inside.sum() < r.size          # both branches of Huber are exercised
    H = J[inside].T @ J[inside]
    S = J.T @ (np.clip(r, -delta, delta)[:, None] ** 2 * J)
    n = r.size
    want = n / (n - 5) * np.linalg.solve(H, np.linalg.solve(H, S).T)
    np.testing.assert_allclose(res.covariance, want, rtol=1e-4, atol=1e-8 * np.abs(want).max())


def test_unidentified_covariance_is_nan_with_a_warning():
    # two model sizes: E, A and alpha enter only through two numbers, so J^T J is singular
    N, D = _grid(8, 6)
    two = np.isin(N, np.unique(N)[[0, -1]])
    N, D = N[two], D[two]
    L = _law(N, D, **PLANTED) * np.exp(0.01 * np.random.default_rng(0).standard_normal(N.size))
    with pytest.warns(NumtkWarning, match="not identified"):
        res = chinchilla_fit(N, D, L, loss="l2")
    assert res.covariance.shape == (5, 5) and np.all(np.isnan(res.covariance))
    assert np.all(np.isnan(res.std_errors))
    assert res.bootstrap is None and res.bootstrap_std_errors is None
    # five runs leave no residual degrees of freedom
    N5, D5 = np.array([1e8, 1e8, 1e9, 1e9, 3e9]), np.array([2e9, 2e10, 2e10, 1e11, 6e10])
    with pytest.warns(NumtkWarning, match="degrees of freedom"):
        res = chinchilla_fit(N5, D5, _law(N5, D5, **PLANTED), loss="l2")
    assert np.all(np.isnan(res.std_errors))
    # the Huber sandwich needs 5 runs inside the threshold
    N, D, L = _noisy(10, sigma=0.05)
    with pytest.warns(NumtkWarning, match="inside the Huber threshold"):
        res = chinchilla_fit(N, D, L, delta=1e-6)
    assert np.all(np.isnan(res.covariance))


def test_bootstrap_schema_seeding_and_workers():
    N, D, L = _noisy(11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = chinchilla_fit(N, D, L)
    assert set(plain.keys()) >= {"covariance", "std_errors", "bootstrap", "bootstrap_std_errors"}
    assert plain.std_errors.shape == (5,) and np.all(np.isfinite(plain.std_errors))
    a = chinchilla_fit(N, D, L, n_resamples=20, rng=5)
    b = chinchilla_fit(N, D, L, n_resamples=20, rng=np.random.default_rng(5),
                       workers=lambda f, xs: list(map(f, xs)))
    assert sorted(a.keys()) == sorted(plain.keys())
    np.testing.assert_array_equal(a.bootstrap, b.bootstrap)
    assert a.bootstrap.shape == (20, 5) and a.bootstrap_std_errors.shape == (5,)
    # the point estimate and the covariance do not depend on the bootstrap
    assert a.value == plain.value
    np.testing.assert_array_equal(a.covariance, plain.covariance)
    c = chinchilla_fit(N, D, L, n_resamples=20, rng=6)
    assert not np.array_equal(a.bootstrap, c.bootstrap)


def test_validation():
    N, D = _grid(3, 3)
    L = _law(N, D, **PLANTED)
    with pytest.raises(ValueError, match="`model_sizes`"):
        chinchilla_fit(-N, D, L)
    with pytest.raises(ValueError, match="`tokens`"):
        chinchilla_fit(N, D * np.nan, L)
    with pytest.raises(ValueError, match="`losses`"):
        chinchilla_fit(N, D, np.zeros_like(L))
    with pytest.raises(ValueError, match="`tokens`"):
        chinchilla_fit(N, D[:-1], L)
    with pytest.raises(ValueError, match="`losses`"):
        chinchilla_fit(N[:4], D[:4], L[:4])
    with pytest.raises(ValueError, match="`model_sizes`"):
        chinchilla_fit(np.full_like(N, 1e8), D, L)
    with pytest.raises(ValueError, match="`model_sizes`"):
        chinchilla_fit(N[:, None], D, L)
    with pytest.raises(ValueError, match="`loss`"):
        chinchilla_fit(N, D, L, loss="l1")
    with pytest.raises(ValueError, match="`delta`"):
        chinchilla_fit(N, D, L, delta=0.0)
    with pytest.raises(ValueError, match="`init`"):
        chinchilla_fit(N, D, L, init="random")
    with pytest.raises(ValueError, match="`grid`"):
        chinchilla_fit(N, D, L, grid=np.ones((3, 5)))
    with pytest.raises(ValueError, match="`grid`"):
        chinchilla_fit(N, D, L, init="grid", grid=np.ones((3, 2)))
    with pytest.raises(TypeError, match="`success_only`"):
        chinchilla_fit(N, D, L, success_only="yes")
    with pytest.raises(ValueError, match="`workers`"):
        chinchilla_fit(N, D, L, workers=0)
    for bad, err in ((-1, ValueError), (1.5, TypeError), (True, TypeError), (10**12, ValueError)):
        with pytest.raises(err, match="`n_resamples`"):
            chinchilla_fit(N, D, L, n_resamples=bad)
    for bad, err in ((-1, ValueError), ("x", TypeError), (np.random.RandomState(0), TypeError)):
        with pytest.raises(err, match="`rng`"):
            chinchilla_fit(N, D, L, rng=bad)


# ---------------------------------------------------------------------------------------------------
# Opt-in: the replication's digitised Figure 4 points (no licence: the user supplies the CSV)
# ---------------------------------------------------------------------------------------------------
def _replication_data():
    path = os.environ.get("NUMTK_CHINCHILLA_CSV")
    if not path:
        pytest.skip("set NUMTK_CHINCHILLA_CSV to the replication's data/svg_extracted_data.csv to run")
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh)]
    N = np.array([float(r["Model Size"]) for r in rows])
    F = np.array([float(r["Training FLOP"]) for r in rows])
    L = np.array([float(r["loss"]) for r in rows])
    ok = np.isfinite(N) & np.isfinite(F) & np.isfinite(L)
    N, F, L = N[ok], F[ok], L[ok]
    assert N.size == 245
    keep = L < np.sort(L)[-5]          # the 5 largest losses are excluded
    assert keep.sum() == 240
    return N[keep], F[keep] / (6 * N[keep]), L[keep]


def _check_reference(res):
    assert res.value == pytest.approx(1.0182740e-3, rel=1e-6)
    assert res.alpha == pytest.approx(0.34731, rel=1e-3)
    assert res.beta == pytest.approx(0.36717, rel=1e-3)
    assert res.E == pytest.approx(1.8172, rel=1e-3)
    assert res.A == pytest.approx(477.8, rel=1e-2)
    assert res.B == pytest.approx(2143, rel=3e-2)
    assert res.n_opt_exponent == pytest.approx(0.5139, abs=1e-4)


def test_replication_varpro():
    N, D, L = _replication_data()
    res = chinchilla_fit(N, D, L)
    _check_reference(res)
    assert res.success


def test_replication_standard_errors():
    # context, not a reproduction: the replication's bootstrap SE of B (about 1,293) is for its
    # Huber-likelihood estimator; this fit's case bootstrap should be of that order
    N, D, L = _replication_data()
    res = chinchilla_fit(N, D, L, n_resamples=200, rng=0)
    _check_reference(res)
    assert np.all(np.isfinite(res.std_errors))
    se_B = np.std(np.exp(res.bootstrap[:, 1]), ddof=1)
    assert 1293 / 2 < se_B < 1293 * 2
    np.testing.assert_allclose(res.bootstrap_std_errors, res.std_errors, rtol=0.75)


@pytest.mark.slow
def test_replication_grid():
    N, D, L = _replication_data()
    vp = chinchilla_fit(N, D, L)
    gr = chinchilla_fit(N, D, L, init="grid")
    _check_reference(gr)
    assert gr.n_starts == 4500
    assert abs(gr.value - vp.value) <= 1e-10
    # the replication's rule (best among runs flagged successful) selects the same optimum
    strict = chinchilla_fit(N, D, L, init="grid", success_only=True, workers=2)
    assert strict.success and abs(strict.value - vp.value) <= 1e-10
