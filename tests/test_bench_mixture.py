"""bench/'s numtk.mixture anchors (``bench/benchmarks/_mixture.py``): the objectives they minimise are the ones
numtk minimises, checked against SciPy's own Huber function and log-sum-exp, and their solvers reach known
optima (planted laws, a one-dimensional root)."""

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import brentq, least_squares
from scipy.special import huber, logsumexp

BENCH = Path(__file__).resolve().parents[1] / "bench"

pytestmark = pytest.mark.skipif(not (BENCH / "benchmarks" / "_mixture.py").is_file(),
                                reason="bench/ is not in this checkout")


@pytest.fixture(scope="module")
def mx():
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("benchmarks._mixture")
    finally:
        sys.path[:] = [p for p in sys.path if p != str(BENCH)]
        for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
            del sys.modules[name]


def test_replication_grid_is_the_4500_starts(mx):
    grid = mx.replication_grid()
    assert grid.shape == (4500, 5)
    assert len({tuple(r) for r in grid}) == 4500
    ab, e, ex = {0.0, 5.0, 10.0, 15.0, 20.0, 25.0}, {-1.0, -0.5, 0.0, 0.5, 1.0}, {0.0, 0.5, 1.0, 1.5, 2.0}
    for col, values in zip(grid.T, (ab, ab, e, ex, ex)):
        assert set(col) == values


def test_chinchilla_objective_is_huber_of_the_log_sum_exp_law(mx):
    N, D, L = mx.chinchilla_rows(40, noise=0.02, rng=1)
    x = np.array([6.1, 7.5, 0.6, 0.34, 0.37])
    pred = logsumexp(np.stack([x[0] - x[3] * np.log(N), x[1] - x[4] * np.log(D), np.full(N.size, x[2])]), axis=0)
    expected = huber(1e-3, pred - np.log(L)).sum()
    assert mx.chinchilla_objective(x, np.log(N), np.log(D), np.log(L)) == pytest.approx(expected, rel=1e-12)
    # noise-free rows of the planted law: the planted parameters are a zero of the objective
    N, D, L = mx.chinchilla_rows(40, noise=0.0)
    p = mx.CHINCHILLA_LAW
    truth = [np.log(p["A"]), np.log(p["B"]), np.log(p["E"]), p["alpha"], p["beta"]]
    assert mx.chinchilla_objective(truth, np.log(N), np.log(D), np.log(L)) < 1e-25


def test_replication_recipe_recovers_the_planted_law(mx):
    N, D, L = mx.chinchilla_rows(60, noise=0.0)
    p = mx.CHINCHILLA_LAW
    # 30 of the grid's starts, BLAS on one thread (its threads slow the tiny L-BFGS-B steps on busy cores)
    x, f, n_ok = mx._one_thread(lambda: mx.scipy_chinchilla(N, D, L, mx.replication_grid()[::150]))()
    assert f < 1e-9 and n_ok > 0
    assert x[3] == pytest.approx(p["alpha"], rel=1e-3) and x[4] == pytest.approx(p["beta"], rel=1e-3)
    assert np.exp(x[2]) == pytest.approx(p["E"], rel=1e-3)


def test_camel_objective_and_least_squares_huber_agree(mx):
    law, X, y = mx.mixture_problem(3, 2, 3, 8, noise=0.0)
    N, R, Y = X[:, 0], X[:, 1:], y
    ell = np.log(N / law.reference_size_)
    P = law.params_
    for i in range(2):
        truth = np.concatenate([[P["E"][i]], P["theta"][i], np.log(P["alpha"][i])])
        assert mx.camel_objective(truth, R, ell, np.log(Y[:, i])) < 1e-25
    # SciPy's Huber loss with f_scale = delta is the objective numtk minimises: least_squares' cost equals it
    x = truth + 0.05
    logy = np.log(Y[:, 1])
    res = least_squares(mx._camel_residuals, x, loss="huber", f_scale=1e-3, args=(R, ell, logy), max_nfev=1)
    pred = x[0] + np.exp(R @ x[1:4] - ell * (R @ np.exp(x[4:])))
    assert mx.camel_objective(x, R, ell, logy) == pytest.approx(huber(1e-3, np.log(pred) - logy).sum(), rel=1e-12)
    assert mx.camel_objective(res.x, R, ell, logy) == pytest.approx(res.cost, rel=1e-9)


def test_scipy_camel_fit_recovers_a_planted_law(mx):
    law, X, y = mx.mixture_problem(3, 2, 4, 10, noise=0.0)
    total, P, N0 = mx.scipy_camel_fit(X, y, n_starts=4)
    assert N0 == pytest.approx(np.exp(np.mean(np.log(np.unique(X[:, 0])))))  # the geometric mean of the sizes
    assert total < 1e-12
    pred = mx.numpy_predict(P, N0, np.array([1.2e9]), np.full((1, 3), 1 / 3))
    truth = mx.numpy_predict(law.params_, law.reference_size_, np.array([1.2e9]), np.full((1, 3), 1 / 3))
    np.testing.assert_allclose(pred, truth, rtol=1e-5)


def test_numpy_predict_is_the_camel_formula(mx):
    law, _, _ = mx.mixture_problem(4, 3)
    g = np.random.default_rng(0)
    N, R = np.exp(g.uniform(15, 22, 7)), g.dirichlet(np.ones(4), 7)
    P, N0 = law.params_, law.reference_size_
    loop = np.array([[P["E"][i] + np.exp(sum(R[n, j] * (P["theta"][i, j] - np.log(N[n] / N0) * P["alpha"][i, j])
                                             for j in range(4))) for i in range(3)] for n in range(7)])
    np.testing.assert_allclose(mx.numpy_predict(P, N0, N, R), loop, rtol=1e-13)


def test_scipy_optimal_mixture_matches_the_root_for_two_domains(mx):
    law, _, _ = mx.mixture_problem(2, 2)
    P, N0 = law.params_, law.reference_size_
    B = P["theta"] - np.log(1.2e9 / N0) * P["alpha"]

    def dF(r1):  # derivative of the mean loss along r = (r1, 1 - r1)
        e = np.exp(B @ np.array([r1, 1 - r1]))
        return float(np.mean(e * (B[:, 0] - B[:, 1])))

    assert dF(0.0) < 0 < dF(1.0)  # the planted two-domain law has an interior optimum at this size
    root = brentq(dF, 0.0, 1.0, xtol=1e-14)
    r, value = mx.scipy_optimal_mixture(P, N0, 1.2e9)
    assert r[0] == pytest.approx(root, abs=1e-5)
    assert value == pytest.approx(np.mean(P["E"] + np.exp(B @ np.array([root, 1 - root]))), rel=1e-10)


def test_sdp_anchor_of_allocate_budget_is_the_c_optimal_design(mx):
    # the anchor's SDP and numtk's Elfving LP solve the same c-optimal design problem on the same candidates
    # (the optimum is unique in value); and the default reserve, a constraint on the design, never beats it
    pytest.importorskip("cvxpy")
    from numtk.mixture import allocate_budget

    kw = mx.allocation_problem(5, 25)
    assert kw["reserve"] == 0.0
    res = allocate_budget(**kw)
    s = mx.sdp_allocation(kw, res.mixtures)
    assert s == pytest.approx(res.std_design, rel=1e-5)
    assert allocate_budget(**dict(kw, reserve=0.2)).std_design >= s * (1 - 1e-5)
