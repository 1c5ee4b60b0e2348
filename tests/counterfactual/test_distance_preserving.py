"""distance_preserving_counterfactuals: the bi-Lipschitz per-point baseline (a non-convex QCQP).

Oracles (spec counterfactual.md section 8, items 4, 12 and 13): every pair constraint holds to 1e-7
relative; the cost never exceeds a feasible start's cost; lower_bound <= cost; on n = 3, d = 2 a
brute-force multi-start (10^3 SLSQP starts) finds the same global optimum; n = 1 and large K give
Wachter's point; an already valid group is left alone.
"""

import importlib.util
import sys
import types

import numpy as np
import pytest
from scipy.optimize import minimize

from numtk._lib._warnings import NumtkWarning
from numtk.counterfactual._baselines import wachter_counterfactuals
from numtk.counterfactual._common import InfeasibleRecourseError
from numtk.counterfactual._distance_preserving import distance_preserving_counterfactuals

TAU = float(np.log(4.0))


def _pairs_all(n):
    i, j = np.triu_indices(n, 1)
    return np.column_stack([i, j])


def _check_pairs(X, Y, K, pairs, rel=1e-7):
    """D/K^2 (1 - rel) <= |y_i - y_j|^2 <= K^2 D (1 + rel) for every pair (D > 0)."""
    i, j = np.asarray(pairs).T
    D = np.sum((X[i] - X[j]) ** 2, axis=1)
    Q = np.sum((Y[i] - Y[j]) ** 2, axis=1)
    assert np.all(Q <= K * K * D * (1 + rel)), np.max(Q / (K * K * D))
    assert np.all(Q >= D / (K * K) * (1 - rel)), np.min(Q * K * K / D)


def _check_result(res, X, w, b, K, pairs, tau=TAU, wachter_cost=None):
    assert res.problem_class == "QCQP"
    _check_pairs(X, res.x_cf, K, pairs)
    assert res.max_violation <= 1e-8
    assert np.all(res.x_cf @ w + b >= tau) and res.valid.all()
    assert res.cost == pytest.approx(np.sum((res.x_cf - X) ** 2), rel=1e-12)
    assert res.lower_bound <= res.cost
    if wachter_cost is not None:
        assert res.lower_bound >= wachter_cost * (1 - 1e-12)
    for name, c in res.start_costs.items():
        assert res.cost <= c * (1 + 1e-12), (name, c, res.cost)
    gap = (res.cost - res.lower_bound) / res.cost if res.cost > 0 else 0.0
    assert res.gap == pytest.approx(gap, abs=1e-15)


@pytest.mark.parametrize("K", [1.5, 3.0])
def test_pair_constraints_cost_and_bounds(K):
    rng = np.random.default_rng(int(10 * K))
    X = rng.normal(size=(15, 3))
    w, b = rng.normal(size=3), -1.0
    res = distance_preserving_counterfactuals(X, w, b, distortion=K, rng=0)
    wc = wachter_counterfactuals(X, w, b).cost
    _check_result(res, X, w, b, K, _pairs_all(15), wachter_cost=wc)
    assert res.status in ("optimal", "local_optimum", "feasible")
    assert res.lower_bound == pytest.approx(wc)
    # the affine starts are there and feasible; the local solve improved on them
    assert {"translation", "diagonal"} <= set(res.start_costs)
    assert res.cost < min(res.start_costs["translation"], res.start_costs["diagonal"])


def test_immutables_bounds_and_explicit_pairs():
    rng = np.random.default_rng(3)
    X = np.clip(rng.normal(size=(12, 4)), -1.8, 1.8)
    w, b, K = rng.normal(size=4), -0.5, 1.5
    lo, hi = np.full(4, -2.0), np.full(4, 2.0)
    pairs = np.array([[0, 1], [2, 5], [7, 3], [4, 11], [8, 9], [10, 6], [1, 2]], dtype=np.int32)
    res = distance_preserving_counterfactuals(X, w, b, distortion=K, immutable=[2], bounds=(lo, hi),
                                              pairs=pairs)
    _check_result(res, X, w, b, K, pairs,
                  wachter_cost=wachter_counterfactuals(X, w, b, immutable=[2], bounds=(lo, hi)).cost)
    np.testing.assert_array_equal(res.x_cf[:, 2], X[:, 2])
    assert np.all(res.x_cf >= lo) and np.all(res.x_cf <= hi)
    assert res.n_pairs == 7
    # int64 pairs (reversed order, repeated) describe the same constraint set
    res64 = distance_preserving_counterfactuals(X, w, b, distortion=K, immutable=[2], bounds=(lo, hi),
                                                pairs=np.r_[pairs[:, ::-1], pairs].astype(np.int64))
    assert res64.n_pairs == 7
    assert res64.cost == pytest.approx(res.cost, rel=1e-6)


def test_landmark_pairs():
    rng = np.random.default_rng(5)
    n = 20
    X = rng.normal(size=(n, 2))
    w, b = np.array([1.0, 0.5]), -1.5
    res = distance_preserving_counterfactuals(X, w, b, distortion=1.5, pairs="landmarks", rng=1)
    m = int(np.ceil(np.sqrt(n)))
    assert res.n_pairs == m * (n - m) + m * (m - 1) // 2
    again = distance_preserving_counterfactuals(X, w, b, distortion=1.5, pairs="landmarks", rng=1)
    np.testing.assert_array_equal(again.x_cf, res.x_cf)
    assert res.max_violation <= 1e-8
    res3 = distance_preserving_counterfactuals(X, w, b, distortion=1.5, pairs="landmarks", n_landmarks=3,
                                               rng=1)
    assert res3.n_pairs == 3 * (n - 3) + 3


# --------------------------------------------------------------------------------------------
# global optimum of tiny instances by brute force
# --------------------------------------------------------------------------------------------

def _brute_force(X, w, b, tau, K, starts=1000, seed=0):
    """Best feasible local optimum of SLSQP from ``starts`` random points (n = 3, d = 2)."""
    n, d = X.shape
    i, j = np.triu_indices(n, 1)
    D = np.sum((X[i] - X[j]) ** 2, axis=1)
    m = i.size

    def f(z):
        return np.sum((z.reshape(n, d) - X) ** 2)

    def fg(z):
        return 2 * (z - X.ravel())

    def c(z):
        Z = z.reshape(n, d)
        q = np.sum((Z[i] - Z[j]) ** 2, axis=1)
        return np.concatenate([Z @ w + b - tau, K * K * D - q, q - D / (K * K)])

    def cj(z):
        Z = z.reshape(n, d)
        J = np.zeros((n + 2 * m, n, d))
        J[np.arange(n), np.arange(n)] = w
        dl = 2 * (Z[i] - Z[j])
        r = n + np.arange(m)
        J[r, i], J[r, j] = -dl, dl
        J[r + m, i], J[r + m, j] = dl, -dl
        return J.reshape(n + 2 * m, n * d)

    rng = np.random.default_rng(seed)
    spread = np.abs(X).max() + abs(tau - b) / np.linalg.norm(w) + 1.0
    best = np.inf
    for _ in range(starts):
        z0 = (X + rng.normal(scale=spread, size=X.shape)).ravel()
        r = minimize(f, z0, jac=fg, method="SLSQP", constraints=[{"type": "ineq", "fun": c, "jac": cj}],
                     options=dict(maxiter=300, ftol=1e-14))
        if r.success and c(r.x).min() >= -1e-9 and r.fun < best:
            best = r.fun
    return best


@pytest.mark.parametrize("seed,K", [(9, 1.2), pytest.param(14, 1.5, marks=pytest.mark.slow),
                                    pytest.param(16, 1.0, marks=pytest.mark.slow)])
def test_tiny_instance_matches_brute_force(seed, K):
    # seed 9 has a global optimum that a continuous deformation of the affine starts cannot reach
    # (the triangle must change orientation): the random isometry starts find it.
    rng = np.random.default_rng(1)
    for _ in range(seed + 1):
        X = rng.normal(size=(3, 2))
        w = rng.normal(size=2)
    b = -1.0
    res = distance_preserving_counterfactuals(X, w, b, distortion=K, rng=0)
    best = _brute_force(X, w, b, TAU, K)
    assert np.isfinite(best)
    _check_result(res, X, w, b, K, _pairs_all(3))
    assert res.cost == pytest.approx(best, rel=1e-6)


def test_sdp_relaxation_bound():
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(1)
    for _ in range(3):
        X = rng.normal(size=(3, 2))
        w = rng.normal(size=2)
    b, K = -1.0, 1.5
    loc = distance_preserving_counterfactuals(X, w, b, distortion=K, n_random_starts=0)
    sdp = distance_preserving_counterfactuals(X, w, b, distortion=K, method="sdp+local", n_random_starts=0,
                                              solver_options=dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10,
                                                                  tol_feas=1e-10))
    _check_result(sdp, X, w, b, K, _pairs_all(3))
    wc = wachter_counterfactuals(X, w, b).cost
    assert loc.lower_bound == pytest.approx(wc)
    assert wc <= sdp.lower_bound <= sdp.cost
    assert sdp.lower_bound > wc  # the Shor bound is tighter here
    assert sdp.cost == pytest.approx(loc.cost, rel=1e-6)
    # the size guard: a PSD cone of order n + d > 400 is not attempted
    Xb = rng.normal(size=(399, 2))
    pairs = np.array([[0, 1], [1, 2], [2, 3]])
    with pytest.warns(NumtkWarning, match="Shor relaxation is skipped"):
        res = distance_preserving_counterfactuals(Xb, [1.0, 1.0], -3.0, distortion=1.1, pairs=pairs,
                                                  method="sdp+local")
    assert res.lower_bound == pytest.approx(wachter_counterfactuals(Xb, [1.0, 1.0], -3.0).cost)


# --------------------------------------------------------------------------------------------
# special cases
# --------------------------------------------------------------------------------------------

def test_single_point_large_K_and_trivial_group():
    w, b = np.array([1.0, -1.0]), 0.0
    x = np.array([[0.3, 0.9]])
    res = distance_preserving_counterfactuals(x, w, b, distortion=1.5)
    np.testing.assert_allclose(res.x_cf, wachter_counterfactuals(x, w, b).x_cf)
    assert res.status == "optimal" and res.gap == 0.0 and res.start == "wachter"
    rng = np.random.default_rng(2)
    X = rng.normal(size=(20, 2))
    res = distance_preserving_counterfactuals(X, w, b, distortion=1e6)
    np.testing.assert_array_equal(res.x_cf, wachter_counterfactuals(X, w, b).x_cf)
    assert res.status == "optimal" and res.lower_bound == res.cost
    valid = X[X @ w + b >= TAU + 0.1]
    res = distance_preserving_counterfactuals(valid, w, b, distortion=1.01)
    assert res.status == "trivial" and res.cost == 0.0 and res.start == "identity"
    np.testing.assert_array_equal(res.x_cf, valid)


def test_duplicated_points_move_together():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 2))
    X = np.r_[X, X[[1, 1, 4]]]
    w, b, K = np.array([0.5, 1.0]), -1.0, 1.3
    res = distance_preserving_counterfactuals(X, w, b, distortion=K, n_random_starts=0)
    np.testing.assert_array_equal(res.x_cf[6], res.x_cf[1])
    np.testing.assert_array_equal(res.x_cf[7], res.x_cf[1])
    np.testing.assert_array_equal(res.x_cf[8], res.x_cf[4])
    pairs = _pairs_all(9)
    D = np.sum((X[pairs[:, 0]] - X[pairs[:, 1]]) ** 2, axis=1)
    _check_result(res, X, w, b, K, pairs[D > 0])


def test_infeasible_rows_and_progress():
    X = np.array([[0.0, 0.0], [1.0, 0.5], [4.0, 2.0]])
    with pytest.raises(InfeasibleRecourseError) as info:
        distance_preserving_counterfactuals(X, [1.0, 1.0], 0.0, margin=3.0, immutable=[0],
                                            bounds=(None, [np.inf, 1.0]))
    np.testing.assert_array_equal(info.value.rows, [0, 1])
    pytest.importorskip("tqdm")
    res = distance_preserving_counterfactuals(X, [1.0, 1.0], 0.0, margin=3.0, distortion=1.5,
                                              progress=True, n_random_starts=0)
    assert res.valid.all()


@pytest.mark.parametrize("kwargs,match", [
    (dict(distortion=0.5), "`distortion`"),
    (dict(method="sdp"), "`method`"),
    (dict(local_solver="newton"), "`local_solver`"),
    (dict(max_iter=0), "`max_iter`"),
    (dict(tol=0.0), "`tol`"),
    (dict(pairs="nearest"), "`pairs`"),
    (dict(pairs=np.zeros((2, 3), dtype=int)), "`pairs`"),
    (dict(pairs=[[0, 0]]), "`pairs`"),
    (dict(pairs=[[0, 3]]), "`pairs`"),
    (dict(n_landmarks=0, pairs="landmarks"), "`n_landmarks`"),
    (dict(n_random_starts=-1), "`n_random_starts`"),
    (dict(rng=-1), "`rng`"),
    (dict(confidence=1.5), "`confidence`"),
    (dict(target=3), "`target`"),
])
def test_input_validation(kwargs, match):
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with pytest.raises((ValueError, TypeError), match=match):
        distance_preserving_counterfactuals(X, [1.0, 1.0], -2.0, **kwargs)
    with pytest.raises(ValueError, match="`X`"):
        distance_preserving_counterfactuals([[np.nan, 0.0]], [1.0, 1.0], 0.0)


def test_ipopt_route_through_a_scipy_stand_in(monkeypatch):
    """The cyipopt call (SciPy-style interface) is exercised with a stand-in backed by SLSQP."""
    try:
        import cyipopt  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="cyipopt"):
            distance_preserving_counterfactuals(np.array([[0.0, 0.0], [1.0, 0.0]]), [1.0, 1.0], -2.0,
                                                distortion=1.2, local_solver="ipopt")

    def minimize_ipopt(fun, x0, jac=None, bounds=None, constraints=(), tol=None, options=None):
        assert options["print_level"] == 0 and tol > 0
        return minimize(fun, x0, jac=jac, bounds=bounds, constraints=constraints, method="SLSQP",
                        options=dict(maxiter=500, ftol=1e-14))

    monkeypatch.setitem(sys.modules, "cyipopt", types.SimpleNamespace(minimize_ipopt=minimize_ipopt))
    rng = np.random.default_rng(8)
    X = rng.normal(size=(5, 2))
    w, b = np.array([1.0, 1.0]), -1.0
    res = distance_preserving_counterfactuals(X, w, b, distortion=1.3, local_solver="ipopt", immutable=[1],
                                              n_random_starts=2, rng=0)
    _check_result(res, X, w, b, 1.3, _pairs_all(5))
    ref = distance_preserving_counterfactuals(X, w, b, distortion=1.3, immutable=[1], n_random_starts=2,
                                              rng=0)
    assert res.cost == pytest.approx(ref.cost, rel=1e-5)


def test_one_result_schema_with_scipy_vocabulary():
    # every route (trivial, Wachter feasible, local solve, the Shor relaxation) has the same fields
    rng = np.random.default_rng(5)
    X = rng.normal(size=(4, 2))
    w, b = np.array([1.0, -0.5]), -1.0
    valid = np.array([[5.0, 0.0], [6.0, 1.0]])  # scores 4 and 4.5, above tau = log 4
    runs = [distance_preserving_counterfactuals(valid, w, b, distortion=1.5),
            distance_preserving_counterfactuals(X, w, b, distortion=1e6),
            distance_preserving_counterfactuals(X, w, b, distortion=1.2, n_random_starts=0)]
    if importlib.util.find_spec("cvxpy") is not None:
        runs.append(distance_preserving_counterfactuals(X, w, b, distortion=1.2, method="sdp+local",
                                                        n_random_starts=0))
    assert runs[0].status == "trivial" and runs[1].status == "optimal"
    assert runs[2].status in ("optimal", "local_optimum", "feasible") and runs[2].n_iter >= 1
    for res in runs:
        assert list(res.keys()) == list(runs[0].keys())
        assert res.success is (res.status != "infeasible")
        assert isinstance(res.message, str) and res.message
