"""chinchilla_fit: planted recovery, the two starts against each other, the gradient and the variable
projection against independent references, the compute-optimal frontier by brute force, validation, and the
opt-in reproduction of the Chinchilla replication (user-supplied data, never shipped)."""

import csv
import itertools
import os

import numpy as np
import pytest
from scipy.optimize import minimize_scalar, nnls

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
