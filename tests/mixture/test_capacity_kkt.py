"""The capacity-KKT law (Dai & Zheng): the inner allocation against its KKT conditions, a scalar root-finder
and cvxpy's power-cone solve; predictions against the formula; the Jacobian and the mixture gradient against
finite differences; zeros in mixtures; planted recovery of (b, c, A, a, E, H) from runs with tokens."""

import numpy as np
import pytest
from scipy.optimize import brentq

from numtk._lib import spawn_rngs
from numtk.mixture import _capacity_kkt as kk

K = 3
PLANTED = dict(b=np.array([0.3, 0.5, 0.4]), c=np.array([5.0, 8.0, 6.0]), A=np.array([1.0, 0.6, 1.5]),
               a=np.array([0.3, 0.45, 0.25]), E=np.array([1.5, 1.2, 1.8]), H=15.0)


def _random_problem(seed, R=12, K=4, zeros=True):
    rng = np.random.default_rng(seed)
    h = rng.dirichlet(np.full(K, 0.5), R)
    if zeros:
        h[0, 1] = 0.0
        h[1, :2] = 0.0
        h /= h.sum(axis=1, keepdims=True)
    N = rng.uniform(50, 1000, R)                 # millions
    b = rng.uniform(0.1, 0.8, K)
    c = rng.uniform(1, 10, K)
    return h, N, b, c, 20.0


def _reference_allocation(h, N, b, c, H):
    """x* by a scalar root-finder on lambda (brentq on log lambda), row by row."""
    R, K = h.shape
    out = np.empty((R, K))
    for r in range(R):
        S = N[r] + (K - 1) * H
        pos = h[r] > 0
        coef = np.zeros(K)
        coef[pos] = b[pos] * c[pos] * h[r, pos]

        def alloc(log_lam):
            y = np.zeros(K)
            y[pos] = (coef[pos] / np.exp(log_lam)) ** (1 / (1 + b[pos]))
            return np.maximum(H, y)

        lo, hi = -200.0, 200.0
        root = brentq(lambda m: alloc(m).sum() - S, lo, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
        out[r] = alloc(root)
    return out


def _floored(h):
    f = np.maximum(h, 1e-4)
    return f / f.sum(axis=1, keepdims=True)


def _reference_predict(P, N, D, h):
    """The law written out from its definition (sizes in millions, tokens in billions)."""
    ht = _floored(np.atleast_2d(h))
    x = _reference_allocation(ht, np.asarray(N, float) / 1e6, P["b"], P["c"], P["H"])
    return P["c"] * x ** -P["b"] + P["A"] * ((np.asarray(D, float) / 1e9)[:, None] * ht) ** -P["a"] + P["E"]


def _planted_runs(seed=1, noise=0.0):
    rng = np.random.default_rng(seed)
    sizes = np.array([60e6, 150e6, 400e6, 1e9])
    tokens = np.array([2e9, 8e9, 30e9])
    mixtures = np.vstack([rng.dirichlet(np.ones(K), 6), [[0.9, 0.1, 0.0], [0.0, 0.05, 0.95]]])
    NN, DD, MM = np.meshgrid(sizes, tokens, np.arange(len(mixtures)), indexing="ij")
    N, D, h = NN.ravel(), DD.ravel(), mixtures[MM.ravel()]
    L = _reference_predict(PLANTED, N, D, h)
    if noise:
        L = L * np.exp(noise * rng.standard_normal(L.shape))
    return N, D, h, L


# ---------------------------------------------------------------------------------------------------
# the inner allocation
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inner_meets_the_kkt_conditions(seed):
    h, N, b, c, H = _random_problem(seed)
    x = kk.kkt_inner(h, N, b, c, H)
    K_ = h.shape[1]
    np.testing.assert_allclose(x.sum(axis=1), N + (K_ - 1) * H, rtol=1e-13)
    assert np.all(x >= H)
    # stationarity and complementary slackness: the marginal value h_i b_i c_i x_i^(-b_i-1) equals the
    # multiplier on the free set (x_i > H) and is at most it where x_i = H (nu_i = lambda - marginal >= 0)
    marginal = h * b * c * x ** (-b - 1)
    free = x > H * (1 + 1e-12)
    assert np.any(~free) and np.all(free.any(axis=1))
    for r in range(h.shape[0]):
        lam = marginal[r, free[r]]
        np.testing.assert_allclose(lam, lam.mean(), rtol=1e-10)
        assert np.all(marginal[r, ~free[r]] <= lam.mean() * (1 + 1e-10))
    # zero weights sit at the floor
    assert x[0, 1] == H and np.all(x[1, :2] == H)


@pytest.mark.parametrize("seed", [0, 3])
def test_inner_matches_a_scalar_root_finder(seed):
    h, N, b, c, H = _random_problem(seed, R=20)
    np.testing.assert_allclose(kk.kkt_inner(h, N, b, c, H), _reference_allocation(h, N, b, c, H), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_inner_matches_cvxpy_power_cone():
    cp = pytest.importorskip("cvxpy")
    h, N, b, c, H = _random_problem(4, R=6)
    x = kk.kkt_inner(h, N, b, c, H)
    K_ = h.shape[1]
    for r in range(h.shape[0]):
        S = N[r] + (K_ - 1) * H
        # scaled: y = x / S on the simplex, weights normalised to a largest of 1; exact power cones
        y = cp.Variable(K_)
        wts = h[r] * c * S ** (-b)
        wts = wts / wts.max()
        pos = [i for i in range(K_) if h[r, i] > 0]
        prob = cp.Problem(cp.Minimize(sum(wts[i] * cp.power(y[i], -b[i], approx=False) for i in pos)),
                          [cp.sum(y) == 1, y >= H / S])
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-14, tol_gap_rel=1e-14, tol_feas=1e-14, max_iter=500)
        assert prob.status in ("optimal", "optimal_inaccurate")
        ours = sum(wts[i] * (x[r, i] / S) ** -b[i] for i in pos)
        # the same optimal value to 1e-8, and ours is never worse than the conic solver's
        assert ours == pytest.approx(prob.value, rel=1e-8)
        assert ours <= prob.value * (1 + 1e-12)
        # the allocation itself agrees to the conic solver's own accuracy (about 1e-6 of the total where a
        # small weight leaves the objective flat; the scalar root-finder above checks it to 1e-12)
        np.testing.assert_allclose(y.value * S, x[r], rtol=0, atol=2e-5 * S)


def test_inner_without_feasible_allocation_sits_at_the_floor():
    # N <= H: sum x = N + (K-1)H < K H cannot hold with x >= H; every domain gets H
    h = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]])
    x = kk.kkt_inner(h, np.array([10.0, 20.0]), np.array([0.3, 0.4, 0.5]), np.ones(3), 20.0)
    np.testing.assert_array_equal(x, 20.0)


# ---------------------------------------------------------------------------------------------------
# the law and its derivatives
# ---------------------------------------------------------------------------------------------------
def _random_law(seed, K_=4):
    rng = np.random.default_rng(seed)
    return dict(b=rng.uniform(0.1, 0.8, K_), c=rng.uniform(1, 10, K_), A=rng.uniform(0.5, 2, K_),
                a=rng.uniform(0.1, 0.5, K_), E=rng.uniform(1, 2, K_), H=20.0)


def test_predict_matches_the_formula_with_zeros_floored():
    P = _random_law(0)
    h, Nm, _, _, _ = _random_problem(0)
    rng = np.random.default_rng(9)
    N, D = Nm * 1e6, rng.uniform(1, 50, h.shape[0]) * 1e9
    pred = kk.kkt_predict(P, N, D, h)
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred, _reference_predict(P, N, D, h), rtol=1e-12)
    # zeros behave as weights of 1e-4 (then renormalised)
    np.testing.assert_allclose(pred, kk.kkt_predict(P, N, D, np.maximum(h, 1e-4)), rtol=1e-14)
    # scalars broadcast
    np.testing.assert_allclose(kk.kkt_predict(P, N[0], D[0], h[:3]),
                               _reference_predict(P, np.full(3, N[0]), np.full(3, D[0]), h[:3]), rtol=1e-12)


def _flat(P):
    return np.concatenate([P[k] for k in kk.COEF_ORDER[:-1]] + [[P["H"]]])


def _unflat(v, K_):
    return {k: v[i * K_:(i + 1) * K_] for i, k in enumerate(kk.COEF_ORDER[:-1])} | {"H": v[5 * K_]}


@pytest.mark.parametrize("seed", [0, 1])
def test_jacobian_matches_finite_differences(seed):
    P = _random_law(seed)
    h, Nm, _, _, _ = _random_problem(seed + 10, R=10)
    rng = np.random.default_rng(seed)
    N, D = Nm * 1e6, rng.uniform(1, 50, h.shape[0]) * 1e9
    # keep rows whose active set does not change within the difference steps
    x = kk.kkt_inner(_floored(h), Nm, P["b"], P["c"], P["H"])
    lam = np.max(_floored(h) * P["b"] * P["c"] * x ** (-P["b"] - 1), axis=1)
    unconstrained = (P["b"] * P["c"] * _floored(h) / lam[:, None]) ** (1 / (1 + P["b"]))
    keep = np.all(np.abs(unconstrained / P["H"] - 1) > 1e-3, axis=1)
    assert keep.sum() >= 6 and np.any(x[keep] == P["H"])
    h, N, D = h[keep], N[keep], D[keep]
    J = kk.kkt_jacobian(P, N, D, h)
    K_ = len(P["b"])
    assert J.shape == (len(N), K_, 5 * K_ + 1)
    v = _flat(P)
    fd = np.empty_like(J)
    for j in range(v.size):
        step = 1e-6 * abs(v[j])
        e = np.zeros_like(v)
        e[j] = step
        fd[:, :, j] = (_reference_predict(_unflat(v + e, K_), N, D, h)
                       - _reference_predict(_unflat(v - e, K_), N, D, h)) / (2 * step)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-8 * np.abs(fd).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixture_gradient_matches_finite_differences(seed):
    P = _random_law(seed)
    rng = np.random.default_rng(seed)
    h = rng.dirichlet(np.full(4, 0.7))
    h = np.maximum(h, 0.01)
    h /= h.sum()
    N, D = 300e6, 20e9
    values, grad = kk.kkt_mixture_gradient(P, N, D, h)
    np.testing.assert_allclose(values, _reference_predict(P, [N], [D], h[None])[0], rtol=1e-12)
    fd = np.empty((4, 4))
    for j in range(4):
        step = 1e-6 * h[j]
        e = np.zeros(4)
        e[j] = step
        fd[:, j] = (_reference_predict(P, [N], [D], (h + e)[None])[0]
                    - _reference_predict(P, [N], [D], (h - e)[None])[0]) / (2 * step)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9 * np.abs(fd).max())
    # along the simplex (sum of the change 0) the renormalisation leaves the directional derivative alone
    d = np.array([1.0, -1.0, 0.5, -0.5])
    t = 1e-6
    dirfd = (_reference_predict(P, [N], [D], (h + t * d)[None])[0]
             - _reference_predict(P, [N], [D], (h - t * d)[None])[0]) / (2 * t)
    np.testing.assert_allclose(grad @ d, dirfd, rtol=1e-6)


def test_mixture_gradient_with_zero_weights():
    P = _random_law(3)
    h = np.array([0.6, 0.0, 0.4, 0.0])
    values, grad = kk.kkt_mixture_gradient(P, 300e6, 20e9, h)
    assert np.all(np.isfinite(values)) and np.all(np.isfinite(grad))
    np.testing.assert_allclose(values, _reference_predict(P, [300e6], [20e9], h[None])[0], rtol=1e-12)
    # below the floor a weight has no effect: its column is zero
    np.testing.assert_array_equal(grad[:, [1, 3]], 0.0)
    # the other columns match differences
    for j in (0, 2):
        e = np.zeros(4)
        e[j] = 1e-7
        fd = (_reference_predict(P, [300e6], [20e9], (h + e)[None])[0]
              - _reference_predict(P, [300e6], [20e9], (h - e)[None])[0]) / 2e-7
        np.testing.assert_allclose(grad[:, j], fd, rtol=1e-6)


def test_fit_objective_gradient_matches_finite_differences():
    N, D, h, L = _planted_runs(noise=0.02)
    cases = [("log", "huber", {}), ("linear", "l2", {"a": np.full(K, 0.3)}), ("log", "l2", {"b": PLANTED["b"]}),
             ("log", "huber", {"c": PLANTED["c"], "E": PLANTED["E"], "H": 15.0})]
    for space, loss, fixed in cases:
        prob = kk._Problem(N / 1e6, D / 1e9, _floored(h), L, np.linspace(0.5, 1.5, len(N)),
                           1e-3 if loss == "huber" else None, space, fixed, K)
        theta = prob.start(np.random.default_rng(0))
        value, grad = prob.objective(theta)
        # the value against the law written out and the Huber loss written out
        P = prob.raw(theta)
        for k, v in fixed.items():
            np.testing.assert_array_equal(P[k], v)
        pred = _reference_predict(P, N, D, h)
        r = np.log(pred) - np.log(L) if space == "log" else pred - L
        rho = (np.where(np.abs(r) <= 1e-3, 0.5 * r * r, 1e-3 * (np.abs(r) - 5e-4)) if loss == "huber"
               else 0.5 * r * r)
        assert value == pytest.approx(float((np.linspace(0.5, 1.5, len(N))[:, None] * rho).sum() / K), rel=1e-10)
        fd = np.array([(prob.objective(theta + 1e-6 * e)[0] - prob.objective(theta - 1e-6 * e)[0]) / 2e-6
                       for e in np.eye(theta.size)])
        # Huber's second derivative jumps at |r| = delta: differences across a kink are good to about 1e-5
        tol = 1e-5 if loss == "huber" else 1e-7
        np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=tol * np.abs(fd).max())


# ---------------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------------
def _check(params, rtol):
    for k in kk.COEF_ORDER:
        np.testing.assert_allclose(params[k], PLANTED[k], rtol=rtol, err_msg=k)


def test_planted_recovery_noise_free():
    N, D, h, L = _planted_runs()
    params, objective, starts, success, n_iter = kk.kkt_fit(N, D, h, L, n_starts=4, rngs=spawn_rngs(0, 4))
    _check(params, 1e-4)
    assert objective < 1e-12
    assert len(starts) == 4 and objective == min(s.objective for s in starts)
    assert n_iter > 0 and isinstance(success, bool)
    np.testing.assert_allclose(kk.kkt_predict(params, N, D, h), L, rtol=1e-6)


def test_planted_recovery_with_noise_and_fixed_parameters():
    N, D, h, L = _planted_runs(noise=1e-3)
    params, objective, starts, success, _ = kk.kkt_fit(N, D, h, L, n_starts=3, rngs=spawn_rngs(1, 3))
    _check(params, 0.02)
    # a fixed parameter is held exactly; the rest still recovers
    params, _, _, _, _ = kk.kkt_fit(N, D, h, L, n_starts=2, rngs=spawn_rngs(1, 2), fixed={"E": PLANTED["E"],
                                                                                            "H": 15.0})
    np.testing.assert_array_equal(params["E"], PLANTED["E"])
    assert params["H"] == 15.0
    np.testing.assert_allclose(params["b"], PLANTED["b"], rtol=0.02)


def test_zero_weight_runs_are_dropped_and_map_fn_is_used():
    N, D, h, L = _planted_runs(noise=1e-3)
    w = np.ones(len(N))
    w[::5] = 0.0
    calls = []

    def my_map(f, tasks):
        tasks = list(tasks)
        calls.append(len(tasks))
        return [f(t) for t in tasks]

    fit_w = kk.kkt_fit(N, D, h, L, n_starts=2, rngs=spawn_rngs(2, 2), sample_weight=w, map_fn=my_map)
    keep = w > 0
    fit_k = kk.kkt_fit(N[keep], D[keep], h[keep], L[keep], n_starts=2, rngs=spawn_rngs(2, 2))
    assert calls == [2]
    assert fit_w[1] == pytest.approx(fit_k[1], rel=1e-6)
    for k in kk.COEF_ORDER:
        np.testing.assert_allclose(fit_w[0][k], fit_k[0][k], rtol=1e-4, err_msg=k)


def test_fit_validation():
    N, D, h, L = _planted_runs()
    with pytest.raises(ValueError, match="`fixed`"):
        kk.kkt_fit(N, D, h, L, n_starts=1, fixed={"theta": 1.0})
    with pytest.raises(ValueError, match="`fixed"):
        kk.kkt_fit(N, D, h, L, n_starts=1, fixed={"b": [0.1, 0.2]})
    with pytest.raises(ValueError, match="`fixed"):
        kk.kkt_fit(N, D, h, L, n_starts=1, fixed={"H": -1.0})
    with pytest.raises(ValueError, match="`rngs`"):
        kk.kkt_fit(N, D, h, L, n_starts=3, rngs=spawn_rngs(0, 2))
    with pytest.raises(ValueError, match="`loss`"):
        kk.kkt_fit(N, D, h, L, n_starts=1, loss="l1")
    assert kk.coef_names(2) == ["b[0]", "b[1]", "c[0]", "c[1]", "A[0]", "A[1]", "a[0]", "a[1]", "E[0]", "E[1]", "H"]
