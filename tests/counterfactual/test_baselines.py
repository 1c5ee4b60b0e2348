"""Per-point baselines: Wachter (closed form and knapsack kernel) and the Lipschitz SOCP.

Oracles (spec counterfactual.md section 8, items 1 and 11): the closed-form projection, cvxpy with
Clarabel at tightened tolerances as the independent reference for bounds and immutables, the KKT
conditions of the knapsack multiplier, a pure-NumPy bisection reference of the compiled kernel, the
shortcut theorem of the Lipschitz baseline and a constructed counter-example with immutables.
"""

import numpy as np
import pytest

from numtk._lib._warnings import NumtkWarning
from numtk.counterfactual._baselines import lipschitz_counterfactuals, wachter_counterfactuals
from numtk.counterfactual._common import InfeasibleRecourseError
from numtk.counterfactual._counterfactual_ext import quadratic_knapsack

TIGHT = dict(tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
TAU = float(np.log(4.0))  # confidence 0.8


def _instance(rng, n, d, shift=-1.0):
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    return X, w, float(shift)


# --------------------------------------------------------------------------------------------
# the compiled knapsack kernel against a pure-NumPy reference
# --------------------------------------------------------------------------------------------

def _knapsack_ref(w, M, lo, hi):
    """min |c|^2 s.t. w.c >= M, lo <= c <= hi by bisection on the multiplier mu of c = clip(mu w)."""
    w, lo, hi = (np.asarray(a, dtype=np.float64) for a in (w, lo, hi))
    c0 = np.clip(0.0, lo, hi)
    if w @ c0 >= M:
        return c0, 0.0, 1
    with np.errstate(invalid="ignore"):
        gmax = np.sum(np.where(w > 0, w * hi, 0.0) + np.where(w < 0, w * lo, 0.0))
    if not gmax >= M - 1e-12 * max(1.0, abs(M)):
        return c0, 0.0, 2

    def g(mu):
        return w @ np.clip(mu * w, lo, hi)

    a, b = 0.0, 1.0
    while g(b) < M and b < 1e300:
        a, b = b, 2.0 * b
    for _ in range(2000):
        mid = 0.5 * (a + b)
        if mid <= a or mid >= b:
            break
        if g(mid) >= M:
            b = mid
        else:
            a = mid
    return np.clip(b * w, lo, hi), b, 0


def _random_knapsack(rng, n, d, *, zeros=False, infinite=False, infeasible=False):
    w = rng.normal(size=d)
    if zeros:
        w[rng.random(d) < 0.4] = 0.0
    lo = -rng.uniform(0.0, 2.0, size=(n, d))
    hi = rng.uniform(0.0, 2.0, size=(n, d))
    # some boxes exclude 0 (points outside the bounds)
    shift = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.2)
    lo, hi = lo + shift, hi + shift
    if infinite:
        lo[rng.random((n, d)) < 0.3] = -np.inf
        hi[rng.random((n, d)) < 0.3] = np.inf
    with np.errstate(invalid="ignore"):
        gmax = np.sum(np.where(w > 0, w * hi, 0.0) + np.where(w < 0, w * lo, 0.0), axis=1)
    M = rng.normal(size=n) * 2.0
    if infeasible:
        fin = np.isfinite(gmax)
        M[fin] = gmax[fin] + rng.uniform(0.1, 1.0, size=fin.sum())
    else:
        fin = np.isfinite(gmax)
        M[fin] = np.minimum(M[fin], gmax[fin] - 0.05)
    return w, M, lo, hi


@pytest.mark.parametrize("d", [1, 2, 7, 50])
@pytest.mark.parametrize("kind", ["plain", "zeros", "infinite", "infeasible"])
def test_knapsack_kernel_matches_bisection(d, kind):
    rng = np.random.default_rng(1000 * d + len(kind))
    n = 25
    w, M, lo, hi = _random_knapsack(rng, n, d, zeros=kind == "zeros", infinite=kind == "infinite",
                                    infeasible=kind == "infeasible")
    c, mu, status = quadratic_knapsack(w, M, lo, hi)
    assert c.shape == (n, d) and mu.shape == (n,) and status.dtype == np.int8
    for i in range(n):
        c_ref, mu_ref, st_ref = _knapsack_ref(w, M[i], lo[i], hi[i])
        assert status[i] == st_ref, (i, status[i], st_ref)
        if st_ref == 2:
            continue
        scale = max(1.0, np.max(np.abs(c_ref)))
        np.testing.assert_allclose(c[i], c_ref, rtol=0, atol=1e-9 * scale)
        if st_ref == 0:
            assert abs(mu[i] - mu_ref) <= 1e-9 * max(1.0, mu_ref)
            assert w @ c[i] >= M[i] - 1e-12 * max(1.0, abs(M[i]))
        assert np.all(c[i] >= lo[i]) and np.all(c[i] <= hi[i])
    if kind == "infeasible":
        assert np.any(status == 2)


def test_knapsack_kernel_dtypes_layouts_and_edges():
    rng = np.random.default_rng(7)
    w, M, lo, hi = _random_knapsack(rng, 12, 6, infinite=True)
    ref = quadratic_knapsack(w, M, lo, hi)
    # float32 inputs are upcast (compare with the float64 run on the same rounded values)
    f32 = [a.astype(np.float32) for a in (w, M, lo, hi)]
    out32 = quadratic_knapsack(*f32)
    ref32 = quadratic_knapsack(*[a.astype(np.float64) for a in f32])
    for a, b in zip(out32, ref32):
        np.testing.assert_array_equal(a, b)
    # non-contiguous and Fortran-ordered inputs give identical results
    W = np.repeat(w, 2)[::2]
    Mnc = np.repeat(M, 3)[::3]
    lo_f, hi_f = np.asfortranarray(lo), np.asfortranarray(hi)
    big_lo = np.zeros((12, 12))
    big_lo[:, ::2] = lo
    out = quadratic_knapsack(W, Mnc, big_lo[:, ::2], hi_f)
    for a, b in zip(out, ref):
        np.testing.assert_array_equal(a, b)
    out = quadratic_knapsack(w, M, lo_f, hi)
    for a, b in zip(out, ref):
        np.testing.assert_array_equal(a, b)
    # empty problems
    c, mu, st = quadratic_knapsack(w, np.zeros(0), np.zeros((0, 6)), np.zeros((0, 6)))
    assert c.shape == (0, 6) and mu.shape == (0,) and st.shape == (0,)
    c, mu, st = quadratic_knapsack(np.zeros(0), np.array([1.0, -1.0]), np.zeros((2, 0)), np.zeros((2, 0)))
    assert st.tolist() == [2, 1]
    # M exactly the largest attainable score: feasible, every coordinate at its bound
    w1 = np.array([1.0, -2.0, 0.0])
    lo1, hi1 = np.array([[-1.0, -1.0, -1.0]]), np.array([[1.0, 1.0, 1.0]])
    c, mu, st = quadratic_knapsack(w1, np.array([3.0]), lo1, hi1)
    assert st[0] == 0
    np.testing.assert_allclose(c[0], [1.0, -1.0, 0.0])
    # d = 1 closed forms
    c, mu, st = quadratic_knapsack(np.array([2.0]), np.array([1.0, 5.0, -1.0]),
                                   np.full((3, 1), -np.inf), np.full((3, 1), 2.0))
    np.testing.assert_allclose(c[:, 0], [0.5, 0.0, 0.0])
    assert st.tolist() == [0, 2, 1]
    np.testing.assert_allclose(mu[0], 0.25)


def test_knapsack_kernel_rejects_bad_shapes():
    w = np.ones(3)
    with pytest.raises(ValueError, match="`w` must be 1-D"):
        quadratic_knapsack(np.ones((3, 1)), np.ones(2), np.zeros((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="`lo` and `hi`"):
        quadratic_knapsack(w, np.ones(2), np.zeros((2, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="`M` must be 1-D"):
        quadratic_knapsack(w, np.ones((2, 1)), np.zeros((2, 3)), np.ones((2, 3)))


# --------------------------------------------------------------------------------------------
# Wachter
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n,d", [(1, 1), (2, 2), (5, 10), (50, 2), (200, 50)])
def test_wachter_closed_form(n, d):
    rng = np.random.default_rng(n * 100 + d)
    X, w, b = _instance(rng, n, d)
    res = wachter_counterfactuals(X, w, b)
    m = TAU - (X @ w + b)
    expected = X + np.maximum(m, 0.0)[:, None] * w / (w @ w)
    np.testing.assert_allclose(res.x_cf, expected, rtol=0, atol=1e-12 * max(1.0, np.abs(expected).max()))
    assert res.valid.all() and np.all(res.x_cf @ w + b >= TAU)  # exact after the polish
    np.testing.assert_allclose(res.costs, np.maximum(m, 0.0) ** 2 / (w @ w), rtol=1e-10, atol=1e-14)
    assert res.cost == pytest.approx(res.costs.sum(), rel=1e-12)
    assert res.method == "closed_form" and res.problem_class == "QP"
    np.testing.assert_allclose(res.dual, 2 * np.maximum(m, 0.0) / (w @ w), rtol=1e-12, atol=1e-12)


def test_wachter_equals_cvxpy_per_point():
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(3)
    X, w, b = _instance(rng, 20, 4)
    res = wachter_counterfactuals(X, w, b)
    Y = cp.Variable(X.shape)
    prob = cp.Problem(cp.Minimize(cp.sum_squares(Y - X)), [Y @ w + b >= TAU])
    prob.solve(solver="CLARABEL", **TIGHT)
    assert res.cost == pytest.approx(prob.value, rel=1e-6)
    np.testing.assert_allclose(res.x_cf, Y.value, atol=1e-5)
    prob.solve(solver="OSQP", eps_abs=1e-10, eps_rel=1e-10, max_iter=200000, polishing=True)
    assert res.cost == pytest.approx(prob.value, rel=1e-6)


def _cvxpy_box_projection(X, w, b, tau, mask, lo, hi):
    import cvxpy as cp

    Y = cp.Variable(X.shape)
    cons = [Y @ w + b >= tau]
    for k in np.flatnonzero(~mask):
        cons.append(Y[:, k] == X[:, k])
    for k in np.flatnonzero(mask):
        if np.isfinite(lo[k]):
            cons.append(Y[:, k] >= lo[k])
        if np.isfinite(hi[k]):
            cons.append(Y[:, k] <= hi[k])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(Y - X)), cons)
    prob.solve(solver="CLARABEL", **TIGHT)
    assert prob.status == "optimal"
    return prob.value, Y.value


@pytest.mark.parametrize("case", ["bounds", "immutable", "both", "outside_box"])
def test_wachter_with_bounds_and_immutables_equals_cvxpy(case):
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng({"bounds": 1, "immutable": 2, "both": 3, "outside_box": 4}[case])
    n, d = 40, 6
    X, w, b = _instance(rng, n, d)
    mask = np.ones(d, bool)
    immutable = None
    bounds = None
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    if case in ("immutable", "both"):
        immutable = [0, 3]
        mask[immutable] = False
    if case in ("bounds", "both", "outside_box"):
        lo = np.array([-np.inf, -2.5, -1.0, -3.0, -np.inf, -2.0])
        hi = np.array([2.0, 1.2, np.inf, 3.0, 0.8, np.inf])
        if case != "outside_box":
            X = np.clip(X, lo + 0.01, hi - 0.01)
        bounds = (lo, hi)
    res = wachter_counterfactuals(X, w, b, immutable=immutable, bounds=bounds)
    value, Y = _cvxpy_box_projection(X, w, b, TAU, mask, lo, hi)
    assert res.cost == pytest.approx(value, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(res.x_cf, Y, atol=1e-5 * max(1.0, np.abs(Y).max()))
    assert res.valid.all() and np.all(res.x_cf @ w + b >= TAU)
    np.testing.assert_array_equal(res.x_cf[:, ~mask], X[:, ~mask])
    assert np.all(res.x_cf[:, mask] >= lo[mask]) and np.all(res.x_cf[:, mask] <= hi[mask])
    assert res.method == ("knapsack" if bounds is not None else "closed_form")


def test_wachter_knapsack_multiplier_satisfies_kkt():
    rng = np.random.default_rng(11)
    n, d = 60, 8
    X, w, b = _instance(rng, n, d, shift=-2.0)
    lo = np.full(d, -1.5)
    hi = np.full(d, 1.0)
    hi[2] = np.inf
    lo[5], hi[5] = -np.inf, np.inf
    imm = [5]
    res = wachter_counterfactuals(X, w, b, immutable=imm, bounds=(lo, hi))
    lam = res.dual
    assert np.all(lam >= 0)
    mask = np.ones(d, bool)
    mask[imm] = False
    C = res.x_cf - X
    # stationarity 2 c - lam w - nu_lo + nu_hi = 0 with nu >= 0 on the active bounds only
    resid = 2 * C - lam[:, None] * w
    at_lo = np.isclose(res.x_cf, lo, rtol=0, atol=1e-12)
    at_hi = np.isclose(res.x_cf, hi, rtol=0, atol=1e-12)
    free = mask & ~at_lo & ~at_hi
    scale = 1e-9 * max(1.0, np.abs(C).max())
    assert np.all(np.abs(resid[free]) <= scale)
    assert np.all(resid[mask & at_lo & ~at_hi] >= -scale)  # nu_lo = resid >= 0
    assert np.all(resid[mask & at_hi & ~at_lo] <= scale)   # nu_hi = -resid >= 0
    # complementarity: a positive multiplier means the validity row is active
    slack = res.x_cf @ w + b - TAU
    assert np.all(slack >= 0)
    assert np.all(lam * slack <= 1e-9 * (1 + lam))
    assert np.any(lam > 0) and np.any(at_lo | at_hi)


def test_wachter_infeasible_rows_are_named():
    X = np.array([[0.0, 0.0], [2.0, 0.0], [-5.0, 0.0], [1.0, 3.0]])
    w, b = np.array([1.0, 1.0]), 0.0
    with pytest.raises(InfeasibleRecourseError) as info:
        wachter_counterfactuals(X, w, b, margin=2.0, bounds=(None, [np.inf, 1.0]), immutable=[0])
    np.testing.assert_array_equal(info.value.rows, [0, 2])
    # no weight on a mutable feature
    with pytest.raises(InfeasibleRecourseError) as info:
        wachter_counterfactuals(X, [1.0, 0.0], b, margin=0.5, immutable=[0])
    np.testing.assert_array_equal(info.value.rows, [0, 2])
    # group wider than the box is fine per point: each point is clipped into the box
    res = wachter_counterfactuals(X, w, b, margin=2.0, bounds=(-1.0, 4.0))
    assert res.valid.all() and np.all(res.x_cf >= -1.0) and np.all(res.x_cf <= 4.0)


def test_wachter_target_sign_trivial_and_polish():
    rng = np.random.default_rng(5)
    X, w, b = _instance(rng, 30, 3)
    r1 = wachter_counterfactuals(X, w, b, target=1)
    r0 = wachter_counterfactuals(X, -w, -b, target=0)
    np.testing.assert_allclose(r0.x_cf, r1.x_cf, atol=1e-12)
    # a binary coef_ of shape (1, d) is accepted
    r2 = wachter_counterfactuals(X, w[None, :], b)
    np.testing.assert_array_equal(r2.x_cf, r1.x_cf)
    # already valid group: unchanged, status trivial
    res = wachter_counterfactuals(X, w, b, margin=float((X @ w + b).min()) - 1.0)
    assert res.status == "trivial" and res.cost == 0.0
    np.testing.assert_array_equal(res.x_cf, X)
    # validity holds on awkward scales, in float64 in any summation order and in exact arithmetic
    from fractions import Fraction

    tau = np.log(0.9) - np.log1p(-0.9)
    for scale in (1e-6, 1.0, 1e6):
        Xs, ws = X * scale, w / scale
        for bounds in (None, (-3.0 * scale, 3.0 * scale)):
            res = wachter_counterfactuals(Xs, ws, b, confidence=0.9, bounds=bounds)
            assert res.valid.all()
            assert np.all(res.x_cf @ ws + b >= tau)
            assert np.all(np.sum(res.x_cf[:, ::-1] * ws[::-1], axis=1) + b >= tau)
            for x in res.x_cf[:8]:
                exact = sum(Fraction(float(a)) * Fraction(float(c)) for a, c in zip(x, ws)) + Fraction(b)
                assert exact >= Fraction(float(tau))


def test_wachter_warns_on_immutable_bounds_violated_by_data():
    X = np.array([[5.0, 0.0], [0.0, 0.0]])
    with pytest.warns(NumtkWarning, match="immutable"):
        res = wachter_counterfactuals(X, [1.0, 1.0], 0.0, margin=1.0, immutable=[0], bounds=(-1.0, 1.0))
    assert res.x_cf[0, 0] == 5.0 and res.x_cf[1, 1] == pytest.approx(1.0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(X=[[np.nan, 0.0]]), "`X`"),
    (dict(X=[[1.0, 0.0, 2.0]]), "`X` has 3 features"),
    (dict(X=np.zeros((0, 2))), "`X`"),
    (dict(X=[1.0, 2.0]), "`X` must be 2-D"),
    (dict(w=[1.0, np.nan]), "`w`"),
    (dict(w=np.ones((2, 2))), "`w`"),
    (dict(b=np.nan), "`b`"),
    (dict(b=[1.0, 2.0]), "`b`"),
    (dict(target=2), "`target`"),
    (dict(confidence=1.0), "`confidence`"),
    (dict(confidence=0.0), "`confidence`"),
    (dict(immutable=[5]), "`immutable`"),
    (dict(bounds=(1.0, 0.0)), "`bounds`"),
    (dict(bounds=([0.0, 0.0, 0.0], 1.0)), "`bounds`"),
    (dict(bounds=(np.nan, 1.0)), "`bounds`"),
    (dict(bounds=(np.inf, np.inf)), "`bounds`"),
    (dict(bounds=(None, -np.inf)), "`bounds`"),
])
def test_wachter_input_validation(kwargs, match):
    args = dict(X=[[0.0, 0.0], [1.0, 1.0]], w=[1.0, 1.0], b=0.0)
    args.update(kwargs)
    X, w, b = args.pop("X"), args.pop("w"), args.pop("b")
    with pytest.raises((ValueError, TypeError), match=match):
        wachter_counterfactuals(X, w, b, **args)


# --------------------------------------------------------------------------------------------
# Lipschitz
# --------------------------------------------------------------------------------------------

def _check_lipschitz(res, X, L, pairs=None):
    n = X.shape[0]
    if pairs is None:
        i, j = np.triu_indices(n, 1)
    else:
        i, j = np.asarray(pairs).T
    dx = np.linalg.norm(X[i] - X[j], axis=1)
    dy = np.linalg.norm(res.x_cf[i] - res.x_cf[j], axis=1)
    assert np.all(dy <= L * dx * (1 + 1e-6) + 1e-9)


def test_lipschitz_single_point_is_wachter():
    x = np.array([[0.2, -0.4]])
    for L in (0.5, 2.0):
        res = lipschitz_counterfactuals(x, [1.0, 2.0], 0.0, lipschitz=L)
        np.testing.assert_array_equal(res.x_cf, wachter_counterfactuals(x, [1.0, 2.0], 0.0).x_cf)
        assert res.n_pairs == 0 and res.shortcut_used


def test_lipschitz_shortcut_returns_wachter():
    rng = np.random.default_rng(2)
    X, w, b = _instance(rng, 25, 3)
    wres = wachter_counterfactuals(X, w, b)
    for L in (1.0, 1.5, 10.0):
        res = lipschitz_counterfactuals(X, w, b, lipschitz=L)
        assert res.shortcut_used and res.problem_class == "SOCP"
        np.testing.assert_array_equal(res.x_cf, wres.x_cf)
        assert res.max_violation == 0.0
        _check_lipschitz(res, X, L)
    # immutable features with no weight keep the theorem
    res = lipschitz_counterfactuals(X, np.r_[w[:2], 0.0], b, immutable=[2])
    assert res.shortcut_used


@pytest.mark.parametrize("L,bounded", [(1.0, False), (1.5, False), (3.0, True)])
def test_lipschitz_forced_socp_equals_wachter(L, bounded):
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(int(L * 10))
    X, w, b = _instance(rng, 15, 3)
    bounds = (-2.0, 2.0) if bounded else None
    if bounded:
        X = np.clip(X, -1.9, 1.9)
    wres = wachter_counterfactuals(X, w, b, bounds=bounds)
    res = lipschitz_counterfactuals(X, w, b, lipschitz=L, bounds=bounds, shortcut=False,
                                    solver_options=TIGHT)
    assert not res.shortcut_used and res.status == "optimal"
    assert res.cost == pytest.approx(wres.cost, rel=1e-6)
    np.testing.assert_allclose(res.x_cf, wres.x_cf, atol=1e-5)
    assert res.valid.all()
    _check_lipschitz(res, X, L)


def test_lipschitz_counter_example_with_immutables():
    pytest.importorskip("cvxpy")
    # two points equal in the mutable coordinate, different immutable values, w_I != 0
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    w, b, tau, L = np.array([1.0, 1.0]), 0.0, 2.0, 1.01
    wres = wachter_counterfactuals(X, w, b, margin=tau, immutable=[0])
    np.testing.assert_allclose(wres.x_cf, [[0.0, 2.0], [1.0, 1.0]])
    res = lipschitz_counterfactuals(X, w, b, margin=tau, immutable=[0], lipschitz=L,
                                    solver_options=TIGHT)
    assert not res.shortcut_used  # Wachter violates the pair: the SOCP binds
    # closed form: z1 = 2, z2 = 2 - r with r = sqrt(L^2 |x1 - x2|^2 - |immutable difference|^2)
    r = np.sqrt(L**2 - 1.0)
    np.testing.assert_allclose(res.x_cf, [[0.0, 2.0], [1.0, 2.0 - r]], atol=1e-6)
    assert res.cost == pytest.approx(4.0 + (2.0 - r) ** 2, rel=1e-6)
    assert res.cost > wres.cost + 1.0
    _check_lipschitz(res, X, L)
    np.testing.assert_array_equal(res.x_cf[:, 0], X[:, 0])


@pytest.mark.parametrize("L,immutable", [(0.8, None), (1.05, [1])])
def test_lipschitz_socp_matches_unreduced_cvxpy(L, immutable):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(9)
    X, w, b = _instance(rng, 10, 3)
    res = lipschitz_counterfactuals(X, w, b, lipschitz=L, immutable=immutable, solver_options=TIGHT)
    assert not res.shortcut_used
    Y = cp.Variable(X.shape)
    i, j = np.triu_indices(10, 1)
    cons = [Y @ w + b >= TAU]
    if immutable:
        cons.append(Y[:, immutable[0]] == X[:, immutable[0]])
    cons += [cp.norm(Y[a] - Y[c]) <= L * np.linalg.norm(X[a] - X[c]) for a, c in zip(i, j)]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(Y - X)), cons)
    prob.solve(solver="CLARABEL", **TIGHT)
    assert res.cost == pytest.approx(prob.value, rel=1e-6)
    np.testing.assert_allclose(res.x_cf, Y.value, atol=1e-5)
    assert res.cost > wachter_counterfactuals(X, w, b, immutable=immutable).cost * (1 + 1e-6)
    _check_lipschitz(res, X, L)
    assert res.max_violation <= 1e-7


def test_lipschitz_infeasible_pairs_with_immutables():
    X = np.array([[0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(InfeasibleRecourseError, match="immutable") as info:
        lipschitz_counterfactuals(X, [1.0, 1.0], 0.0, margin=2.0, immutable=[0], lipschitz=0.5)
    np.testing.assert_array_equal(info.value.rows, [0, 1])


def test_lipschitz_pairs_options():
    pytest.importorskip("cvxpy")
    rng = np.random.default_rng(4)
    X, w, b = _instance(rng, 16, 2)
    res = lipschitz_counterfactuals(X, w, b, lipschitz=0.9, pairs="landmarks", rng=0)
    m = 4
    assert res.n_pairs == m * (16 - m) + m * (m - 1) // 2
    pairs = np.array([[0, 1], [3, 2], [5, 9]], dtype=np.int32)
    res = lipschitz_counterfactuals(X, w, b, lipschitz=0.5, pairs=pairs)
    assert res.n_pairs == 3
    _check_lipschitz(res, X, 0.5, pairs)
    with pytest.raises(ValueError, match="`pairs`"):
        lipschitz_counterfactuals(X, w, b, pairs=[[0, 0]])
    with pytest.raises(ValueError, match="`pairs`"):
        lipschitz_counterfactuals(X, w, b, pairs=[[0, 16]])
    with pytest.raises(ValueError, match="`pairs`"):
        lipschitz_counterfactuals(X, w, b, pairs="some")
    with pytest.raises(TypeError, match="`pairs`"):
        lipschitz_counterfactuals(X, w, b, pairs=[[0.0, 1.0]])
    with pytest.raises(ValueError, match="`lipschitz`"):
        lipschitz_counterfactuals(X, w, b, lipschitz=0.0)
    with pytest.raises(TypeError, match="`shortcut`"):
        lipschitz_counterfactuals(X, w, b, shortcut="yes")


def test_one_result_schema_for_every_route():
    # closed form and knapsack (Wachter); shortcut and SOCP (Lipschitz): the same fields
    rng = np.random.default_rng(7)
    X, w, b = _instance(rng, 8, 3)
    free = wachter_counterfactuals(X, w, b)
    boxed = wachter_counterfactuals(X, w, b, bounds=(-10.0, 10.0))
    assert (free.method, boxed.method) == ("closed_form", "knapsack")
    assert list(free.keys()) == list(boxed.keys())
    short = lipschitz_counterfactuals(X, w, b, lipschitz=1.5)
    assert short.shortcut_used and short.n_iter == 0 and short.success is True
    assert isinstance(short.message, str) and short.message
    pytest.importorskip("cvxpy")
    socp = lipschitz_counterfactuals(X, w, b, lipschitz=1.5, shortcut=False)
    assert not socp.shortcut_used and socp.success is True and socp.n_iter >= 1
    assert list(short.keys()) == list(socp.keys())
    assert socp.status in socp.message
