"""allocate_budget: the c-optimal design with costs against closed forms, cvxpy's SDP, brute force and
simulation (spec section 9.6)."""

import math

import numpy as np
import pytest

from numtk.mixture import LossToBenchmarkLaw, MixtureLaw, allocate_budget, mixture_features, optimal_mixture


# ---------------------------------------------------------------------------------------------------------
# tiny laws with the protocol allocate_budget reads
# ---------------------------------------------------------------------------------------------------------
class PolyLaw:
    """y = sum_d theta_d u^d with u = N - 2 (sizes in [1, 3] give u in [-1, 1], and every size stays > 0).

    The c-optimal design is invariant under the affine map from N to u. At the default pilot theta = (1, 0, ...)
    every prediction is 1, so the noise sigma_log * y is the same for every run: the textbook setting of the
    closed forms. One training domain (the mixture column is 1).
    """

    n_domains_ = 1
    n_outputs_ = 1
    uses_tokens_ = False

    def __init__(self, theta=(1.0, 0.0), residual_std=1.0):
        self.theta = np.asarray(theta, dtype=float)
        self.residual_std_ = residual_std

    def _basis(self, X):
        u = np.asarray(X)[:, 0] - 2.0
        return u[:, None] ** np.arange(self.theta.size)

    def predict(self, X):
        return self._basis(X) @ self.theta

    def jacobian(self, X):
        return self._basis(X)[:, None, :]


class TokenLaw(PolyLaw):
    """PolyLaw that reads a tokens column (column 1) and checks it holds 20 tokens per parameter."""

    uses_tokens_ = True

    def _basis(self, X):
        X = np.asarray(X)
        assert X.shape[1] == 3 and np.allclose(X[:, 1], 20.0 * X[:, 0])
        return super()._basis(X)


def _camel(V=1, M=2, seed=0):
    g = np.random.default_rng(seed)
    return MixtureLaw.from_params("camel", {"E": g.uniform(1.6, 2.0, V), "theta": g.normal(0.2, 0.3, (V, M)),
                                            "alpha": g.uniform(0.2, 0.45, (V, M))}, reference_size=5e7)


ONE = np.ones((1, 1))
LIN_SIZES = np.linspace(1.0, 3.0, 21)          # u = -1, -0.9, ..., 1


def _lin(budget=1000.0, costs=None, **kw):
    costs = np.ones(21) if costs is None else costs
    kw = {"target_size": 5.0, "target_mixture": [1.0], "mixtures": ONE, "reserve": 0.0, **kw}
    return allocate_budget(budget, LIN_SIZES, costs, kw.pop("law", PolyLaw()), **kw)


# ---------------------------------------------------------------------------------------------------------
# an independent linearisation and SDP (cvxpy), in the law's own coordinates
# ---------------------------------------------------------------------------------------------------------
def _rows(law, sizes, mixtures, noise, weights=None, multi=False, target=None):
    """f_k / sigma_k per run (K, B, p), size-major, and the target gradient g (p,), straight from the law."""
    S, m = len(sizes), len(mixtures)
    X = mixture_features(np.repeat(sizes, m), np.tile(mixtures, (S, 1)))
    V = law.n_outputs_
    w = np.full(V, 1.0 / V) if weights is None else np.asarray(weights, float)
    P = np.asarray(law.predict(X)).reshape(len(X), V)
    J = np.asarray(law.jacobian(X))
    if multi:
        F = J / (noise * P)[:, :, None]
    else:
        F = (np.einsum("kvp,v->kp", J, w) / (noise * (P @ w))[:, None])[:, None, :]
    Jt = np.asarray(law.jacobian(mixture_features(target[0], np.asarray(target[1])[None])))[0]
    return F, Jt.T @ w


def _whiten(F, g, costs_k):
    """Cost-scaled rows and gradient in coordinates where one run of every candidate has information I: the
    parameters that no candidate moves (a zero singular value) are dropped, which changes no variance of an
    estimable target. The Schur-complement SDP is ill-posed in the law's raw coordinates when M is singular
    (a single response of several outputs identifies only the weighted sum of the E_i)."""
    Ft = (F / np.sqrt(costs_k)[:, None, None]).reshape(-1, g.size)
    U, s, Vt = np.linalg.svd(Ft, full_matrices=False)
    keep = s > 1e-12 * s[0]
    assert np.linalg.norm(g - Vt[keep].T @ (Vt[keep] @ g)) <= 1e-9 * np.linalg.norm(g)  # estimable
    return U[:, keep].reshape(F.shape[0], F.shape[1], -1), (Vt[keep] @ g) / s[keep]


def _sdp_variance(F_list, g_list, costs_k, *, fixed=None, rho=0.0):
    """min over designs pi of mean_s g_s^T (rho M_s(fixed) + (1 - rho) M_s(pi))^- g_s, per unit budget, as
    the SDP  min mean t_s  s.t.  [[M_s, g_s], [g_s^T, t_s]] PSD  (Schur complement)."""
    cp = pytest.importorskip("cvxpy")
    K = F_list[0].shape[0]
    pi = cp.Variable(K, nonneg=True)
    ts = cp.Variable(len(F_list))
    cons = [cp.sum(pi) == 1]
    for i, (F, g) in enumerate(zip(F_list, g_list)):
        Z, h = _whiten(F, g, costs_k)
        Gk = np.einsum("kbp,kbq->kpq", Z, Z)
        Mexp = sum(pi[k] * Gk[k] for k in range(K))
        if fixed is not None:
            Mexp = rho * np.einsum("k,kpq->pq", fixed, Gk) + (1 - rho) * Mexp
        cons.append(cp.bmat([[Mexp, h[:, None]], [h[None, :], cp.reshape(ts[i], (1, 1), order="C")]]) >> 0)
    prob = cp.Problem(cp.Minimize(cp.sum(ts) / len(F_list)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, max_iter=500)
    assert prob.status == "optimal", prob.status
    return float(prob.value)


def _design_variance(F, g, pi, costs_k):
    """g^T M(pi)^- g per unit budget (pi may be singular, with g in its range)."""
    Z, h = _whiten(F, g, costs_k)
    Zf = Z.reshape(-1, h.size)
    Mpi = Zf.T @ (np.repeat(pi, F.shape[1])[:, None] * Zf)
    return float(h @ np.linalg.lstsq(Mpi, h, rcond=1e-14)[0])


def _run_variance(F, g, n):
    """g^T (sum_k n_k f_k f_k^T / sigma_k^2)^- g; inf when g is outside the range."""
    Fr = F.reshape(-1, g.size)
    A = Fr.T @ (np.repeat(n, F.shape[1])[:, None] * Fr)
    x, *_ = np.linalg.lstsq(A, g, rcond=1e-12)
    if np.linalg.norm(A @ x - g) > 1e-7 * np.linalg.norm(g):
        return math.inf
    return float(g @ x)


def _reserve_design(sizes, m, count):
    """The documented reserve: equal budget on the `count` sizes nearest to a log-uniform grid, equal over
    the mixtures within a size."""
    logs = np.log(sizes)
    chosen = []
    for t in np.linspace(logs.min(), logs.max(), count):
        # nearest in log size; a tie (within round-off) goes to the smaller size
        key = [(round(abs(logs[i] - t), 9), sizes[i], i) for i in range(len(sizes))]
        chosen.append(next(i for _, _, i in sorted(key) if i not in chosen))
    pi = np.zeros((len(sizes), m))
    pi[chosen] = 1.0 / (count * m)
    return pi.ravel(), sorted(chosen)


# ---------------------------------------------------------------------------------------------------------
# (a), (b): closed forms
# ---------------------------------------------------------------------------------------------------------
def test_linear_law_equal_costs_puts_one_third_and_two_thirds_on_the_ends():
    # y = theta0 + theta1 u, u in [-1, 1], target u* = 3: weights (u* - 1) / (2u*) and (u* + 1) / (2u*)
    res = _lin(noise=0.5)
    assert res.support.tolist() == [[0, 0], [20, 0]]
    np.testing.assert_allclose(res.budget_fraction[[0, 20]], [1 / 3, 2 / 3], atol=1e-12)
    assert res.budget_fraction.sum() == pytest.approx(1.0)
    # variance per unit budget: g^T M^-1 g = 9 (sigma = 0.5 scales it by 0.25)
    assert res.std_design ** 2 * 1000.0 == pytest.approx(9.0 * 0.25, rel=1e-12)
    # the rounded design: 333 + 667 = 1000 runs (the greedy puts the leftover run where it helps most)
    assert res.runs[[0, 20], 0].tolist() == [333, 667] and res.cost == 1000.0
    F = np.array([[1.0, -1.0], [1.0, 1.0]]) / 0.5
    A = 333 * np.outer(F[0], F[0]) + 667 * np.outer(F[1], F[1])
    assert res.std ** 2 == pytest.approx(np.array([1.0, 3.0]) @ np.linalg.solve(A, [1.0, 3.0]), rel=1e-12)


def test_linear_law_rising_costs_matches_the_published_split():
    costs = np.linspace(1.0, 3.0, 21)
    res = _lin(costs=costs, noise=1.0)
    assert res.support.tolist() == [[0, 0], [20, 0]]
    np.testing.assert_allclose(res.budget_fraction[[0, 20]], [0.22401, 0.77599], atol=5e-6)
    assert res.std_design ** 2 * 1000.0 == pytest.approx(19.928203, abs=5e-7)
    # exact: fractions (1, 2 sqrt 3) / (1 + 2 sqrt 3), variance (1 + 2 sqrt 3)^2
    s3 = 2 * math.sqrt(3)
    np.testing.assert_allclose(res.budget_fraction[[0, 20]], [1 / (1 + s3), s3 / (1 + s3)], rtol=1e-12)
    assert res.std_design ** 2 * 1000.0 == pytest.approx((1 + s3) ** 2, rel=1e-12)
    # saturated closed form: with a' = J^-T g on the unscaled rows, the runs are proportional to |a'_k| / sqrt(c_k)
    J = np.array([[1.0, -1.0], [1.0, 1.0]])
    a = np.linalg.solve(J.T, [1.0, 3.0])
    runs = res.design[[0, 20], 0] * 1000.0 / costs[[0, 20]]
    expected = np.abs(a) / np.sqrt(costs[[0, 20]])
    np.testing.assert_allclose(runs / runs.sum(), expected / expected.sum(), rtol=1e-12)
    assert res.cost <= 1000.0 and res.runs.sum() == res.runs_per_size.sum()


def test_costs_as_a_callable_vectorised_or_not_equal_the_array():
    costs = np.linspace(1.0, 3.0, 21)
    ref = _lin(costs=costs)

    def scalar_only(N):                # math.* refuses arrays: called size by size
        return 1.0 + math.fabs(N - 1.0)

    for fn in (lambda N: 1.0 + (N - 1.0), scalar_only):
        res = allocate_budget(1000.0, LIN_SIZES, fn, PolyLaw(), target_size=5.0, target_mixture=[1.0],
                              mixtures=ONE, reserve=0.0)
        np.testing.assert_allclose(res.run_cost, costs, rtol=1e-15)
        np.testing.assert_array_equal(res.runs, ref.runs)


def test_noise_scales_std_not_the_design():
    a = _lin(noise=1.0)
    b = _lin(noise=0.01)
    c = _lin(law=PolyLaw(residual_std=0.01))            # default: the law's residual_std_
    np.testing.assert_array_equal(a.runs, b.runs)
    assert b.std == pytest.approx(0.01 * a.std, rel=1e-12) and c.std == b.std


# ---------------------------------------------------------------------------------------------------------
# (c): the LP equals cvxpy's SDP; the SOCP equals an SDP with several responses per run
# ---------------------------------------------------------------------------------------------------------
SIZES6 = np.geomspace(1e7, 2e8, 6)
MIX4 = np.array([[1.0, 0.0], [0.7, 0.3], [0.3, 0.7], [0.0, 1.0]])


@pytest.mark.parametrize("V", [1, 2])
def test_lp_design_equals_the_sdp(V):
    law = _camel(V=V, M=2, seed=V)
    costs = SIZES6 / 1e7
    res = allocate_budget(500.0, SIZES6, costs, law, target_size=1e9, target_mixture=[0.5, 0.5], mixtures=MIX4,
                          noise=0.01, reserve=0.0)
    F, g = _rows(law, SIZES6, MIX4, 0.01, target=(1e9, [0.5, 0.5]))
    ck = np.repeat(costs, 4)
    sdp = _sdp_variance([F], [g], ck)
    assert res.std_design ** 2 * 500.0 == pytest.approx(sdp, rel=1e-6)
    assert _design_variance(F, g, res.design.ravel(), ck) == pytest.approx(sdp, rel=1e-6)
    # Caratheodory: at most p points (here the rank of the single response's Jacobian)
    assert len(res.support) <= np.linalg.matrix_rank(F.reshape(len(F), -1))


def test_multiresponse_socp_equals_the_sdp():
    pytest.importorskip("cvxpy")
    law = _camel(V=3, M=2, seed=5)
    costs = SIZES6 / 1e7
    res = allocate_budget(500.0, SIZES6, costs, law, target_size=1e9, target_mixture=[0.4, 0.6], mixtures=MIX4,
                          noise=0.01, reserve=0.0, multiresponse=True)
    F, g = _rows(law, SIZES6, MIX4, 0.01, multi=True, target=(1e9, [0.4, 0.6]))
    ck = np.repeat(costs, 4)
    sdp = _sdp_variance([F], [g], ck)
    assert res.std_design ** 2 * 500.0 == pytest.approx(sdp, rel=1e-6)
    # observing every loss is worth more than observing their mean
    single = allocate_budget(500.0, SIZES6, costs, law, target_size=1e9, target_mixture=[0.4, 0.6],
                             mixtures=MIX4, noise=0.01, reserve=0.0)
    assert res.std_design < single.std_design
    # with one output the multi-response design is the single-response one
    law1 = _camel(V=1, M=2, seed=6)
    kw = dict(target_size=1e9, target_mixture=[0.4, 0.6], mixtures=MIX4, noise=0.01, reserve=0.0)
    a = allocate_budget(500.0, SIZES6, costs, law1, multiresponse=True, **kw)
    b = allocate_budget(500.0, SIZES6, costs, law1, **kw)
    np.testing.assert_array_equal(a.runs, b.runs)


def test_reserve_design_is_optimal_given_the_reserve():
    law = _camel(V=1, M=2, seed=3)
    costs = SIZES6 / 1e7
    res = allocate_budget(500.0, SIZES6, costs, law, target_size=1e9, target_mixture=[0.5, 0.5], mixtures=MIX4,
                          noise=0.01, reserve=0.3, min_sizes=3)
    fixed, chosen = _reserve_design(SIZES6, 4, 3)
    assert chosen[0] == 0 and chosen[-1] == 5
    F, g = _rows(law, SIZES6, MIX4, 0.01, target=(1e9, [0.5, 0.5]))
    ck = np.repeat(costs, 4)
    sdp = _sdp_variance([F], [g], ck, fixed=fixed, rho=0.3)
    assert res.std_design ** 2 * 500.0 == pytest.approx(sdp, rel=1e-6)
    # the design holds the reserve: at least 0.3 / 3 of the budget at each chosen size, 0.3 / 12 per point
    assert np.all(res.design.ravel() >= 0.3 * fixed - 1e-15)
    assert np.all(res.budget_fraction[chosen] >= 0.1 - 1e-12)
    assert res.success and res.n_iter >= 1


def test_robust_design_minimises_the_mean_variance_over_the_samples():
    samples = [PolyLaw((1.0, 0.0, 0.0)), PolyLaw((1.0, 0.2, 0.1)), PolyLaw((1.2, -0.1, 0.05))]
    sizes = np.linspace(1.0, 3.0, 9)
    costs = np.linspace(1.0, 2.0, 9)
    res = allocate_budget(300.0, sizes, costs, samples[0], target_size=4.0, target_mixture=[1.0], mixtures=ONE,
                          noise=0.1, theta_samples=samples, reserve=0.2, min_sizes=3)
    fixed, _ = _reserve_design(sizes, 1, 3)
    Fs, gs = zip(*[_rows(s, sizes, ONE, 0.1, target=(4.0, [1.0])) for s in samples])
    sdp = _sdp_variance(list(Fs), list(gs), costs, fixed=fixed, rho=0.2)
    mean_var = np.mean([_design_variance(F, g, res.design.ravel(), costs) for F, g in zip(Fs, gs)])
    assert mean_var == pytest.approx(sdp, rel=1e-6)
    np.testing.assert_allclose(res.std_samples ** 2, [_run_variance(F, g, res.runs.ravel()) for F, g in zip(Fs, gs)],
                               rtol=1e-8)
    # the reported std is the pilot law's
    assert res.std ** 2 == pytest.approx(_run_variance(Fs[0], gs[0], res.runs.ravel()), rel=1e-8)
    # one sample equal to the pilot: the plain design
    one = allocate_budget(300.0, sizes, costs, samples[1], target_size=4.0, target_mixture=[1.0], mixtures=ONE,
                          noise=0.1, theta_samples=[samples[1]], reserve=0.0)
    plain = allocate_budget(300.0, sizes, costs, samples[1], target_size=4.0, target_mixture=[1.0], mixtures=ONE,
                            noise=0.1, reserve=0.0)
    assert one.std_design == pytest.approx(plain.std_design, rel=1e-8)


# ---------------------------------------------------------------------------------------------------------
# the away-step Frank-Wolfe solver reaches the LP optimum when there is no reserve
# ---------------------------------------------------------------------------------------------------------
def _reduced(law, sizes, mixtures, costs, target):
    from numtk.mixture import _allocation as al

    S, m = len(sizes), len(mixtures)
    X = mixture_features(np.repeat(sizes, m), np.tile(mixtures, (S, 1)))
    Xt = mixture_features(target[0], np.asarray(target[1])[None])
    V = law.n_outputs_
    prob = al._Problem(law, X, Xt, np.full(V, 1.0 / V), np.full(S * m, 0.01), False, None)
    return al, prob, np.repeat(costs, m)


@pytest.mark.parametrize("newton", [False, True])
def test_frank_wolfe_from_uniform_reaches_the_lp_optimum(newton):
    law = PolyLaw((1.0, 0.3, 0.2))
    sizes = np.linspace(1.0, 3.0, 15)
    al, prob, ck = _reduced(law, sizes, ONE, np.linspace(1.0, 2.0, 15), (4.0, [1.0]))
    Zc, H = al._stack([prob], ck)
    _, lp = al._elfving_lp(Zc[0, :, 0, :], H[0])
    pi, obj, n_iter, ok = al._optimise(Zc, H, np.full(15, 1 / 15), tol=1e-10, max_iter=20_000, newton=newton)
    assert ok
    assert obj == pytest.approx(lp, rel=1e-8)
    assert al._variance(Zc[0], H[0], pi) == pytest.approx(lp, rel=1e-8)


def test_newton_accelerated_frank_wolfe_on_a_camel_law():
    law = _camel(V=2, M=3, seed=11)
    mix = np.random.default_rng(0).dirichlet(np.ones(3), 8)
    al, prob, ck = _reduced(law, SIZES6, mix, SIZES6 / 1e7, (1e9, np.full(3, 1 / 3)))
    Zc, H = al._stack([prob], ck)
    _, lp = al._elfving_lp(Zc[0, :, 0, :], H[0])
    pi, obj, n_iter, ok = al._optimise(Zc, H, np.full(48, 1 / 48), tol=1e-10, max_iter=5000)
    assert ok
    assert al._variance(Zc[0], H[0], pi) == pytest.approx(lp, rel=1e-7)


# ---------------------------------------------------------------------------------------------------------
# (d): rounding against brute force over every integer allocation of tiny budgets
# ---------------------------------------------------------------------------------------------------------
def _brute_force(F, g, costs, budgets):
    """The least variance over every integer allocation n with n @ costs <= budget, for each budget."""
    grids = np.meshgrid(*[np.arange(int(max(budgets) // c) + 1) for c in costs], indexing="ij")
    N = np.stack([x.ravel() for x in grids], axis=1)
    N = N[N @ costs <= max(budgets) + 1e-9]
    Fr = F[:, 0, :]
    A = np.einsum("nk,kp,kq->npq", N.astype(float), Fr, Fr)
    ok = np.linalg.matrix_rank(A, tol=1e-9) == g.size
    var = np.full(len(N), np.inf)
    var[ok] = np.einsum("np,np->n", np.linalg.solve(A[ok], np.broadcast_to(g, (ok.sum(), g.size))[..., None])[..., 0],
                        np.broadcast_to(g, (ok.sum(), g.size)))
    spent = N @ costs
    return [float(var[spent <= b + 1e-9].min()) for b in budgets]


@pytest.mark.parametrize("degree", [1, 2])
def test_rounding_against_brute_force(degree):
    # every integer allocation of budgets 5..23 over four sizes with costs 1, 1.5, 2, 3
    law = PolyLaw((1.0,) + (0.0,) * degree)
    sizes = np.array([1.0, 1.5, 2.2, 3.0])
    costs = np.array([1.0, 1.5, 2.0, 3.0])
    F, g = _rows(law, sizes, ONE, 1.0, target=(4.0, [1.0]))
    ratios, bounded = [], 0
    budgets = np.arange(5.0, 24.0, 1.0)
    best = _brute_force(F, g, costs, budgets)
    for budget, v_best in zip(budgets, best):
        res = allocate_budget(budget, sizes, costs, law, target_size=4.0, target_mixture=[1.0], mixtures=ONE,
                              noise=1.0, reserve=0.0)
        v_round = _run_variance(F, g, res.runs.ravel())
        assert v_round == pytest.approx(res.std ** 2, rel=1e-9)
        v_cont = res.std_design ** 2
        assert res.cost <= budget and math.isfinite(v_round)
        # the continuous design bounds every integer design from below (no reserve) ...
        assert v_cont <= v_best * (1 + 1e-9) and v_best <= v_round * (1 + 1e-9)
        # ... and the rounding keeps the bound of the Notes: V(n) <= V(pi) / (1 - eps) <= V* / (1 - eps)
        pi = res.design.ravel()
        eps = np.max(costs[pi > 0] / (pi[pi > 0] * budget))
        if eps < 1:
            bounded += 1
            assert v_round <= v_cont / (1 - eps) * (1 + 1e-9)
        ratios.append(v_round / v_best)
    ratios = np.array(ratios)
    assert bounded >= 5
    # in practice the greedy finds the best allocation on most budgets and stays within 7% on the others
    assert np.mean(ratios < 1 + 1e-9) >= 0.6 and ratios.max() < 1.07


@pytest.mark.parametrize("V,multi", [(1, False), (2, False), (2, True)])
def test_rounding_equals_a_plain_greedy(V, multi):
    # the incremental (Woodbury) greedy against the rule written out: floor, then the run with the largest
    # variance reduction per unit cost that fits, each variance solved afresh; costs spanning 600x leave
    # dozens of runs to add (past the 64-step refresh)
    law = _camel(V=V, M=2, seed=7)
    costs = np.array([1.0, 3.0, 10.0, 40.0, 150.0, 600.0])
    from numtk._lib import NumtkWarning

    with pytest.warns(NumtkWarning, match=r"reserve sizes \[200000000.0\] got no run"):   # 400 buys no 600 run
        res = allocate_budget(6000.0, SIZES6, costs, law, target_size=1e9, target_mixture=[0.5, 0.5],
                              mixtures=MIX4, noise=0.01, reserve=0.2, multiresponse=multi)
    F, g = _rows(law, SIZES6, MIX4, 0.01, multi=multi, target=(1e9, [0.5, 0.5]))
    ck = np.repeat(costs, 4)
    # the reserve per size (floor of its share, dealt round-robin over the mixtures), the rest floored per cell,
    # the leftover floored again over the design while that adds runs
    pi_res, chosen = _reserve_design(SIZES6, 4, 3)
    pi = res.design.ravel()
    base = np.zeros((6, 4), np.int64)
    for i in chosen:
        cnt = int(0.2 * 6000.0 / 3 // costs[i])
        base[i] = [cnt // 4 + (j < cnt % 4) for j in range(4)]
    n = base.ravel() + np.floor((pi - 0.2 * pi_res) * 6000.0 / ck).astype(np.int64)
    while (add := np.floor(pi * (6000.0 - math.fsum(n * ck)) / ck).astype(np.int64)).any():
        n += add
    steps = 0
    while True:
        fits = np.flatnonzero(ck <= 6000.0 - math.fsum(n * ck))
        if not fits.size:
            break
        v0 = _run_variance(F, g, n)
        gains = [(v0 - _run_variance(F, g, n + np.eye(len(n), dtype=np.int64)[k])) / ck[k] for k in fits]
        n[fits[int(np.argmax(gains))]] += 1
        steps += 1
    assert steps > 10
    np.testing.assert_array_equal(res.runs.ravel(), n)
    assert res.cost == pytest.approx(float(n @ ck))


# ---------------------------------------------------------------------------------------------------------
# safeguards, targets, defaults
# ---------------------------------------------------------------------------------------------------------
def test_reserve_spreads_over_min_sizes_sizes():
    law = _camel(V=1, M=2, seed=2)
    sizes = np.geomspace(1e7, 2e8, 9)
    for min_sizes in (3, 5):
        res = allocate_budget(2000.0, sizes, sizes / 1e7, law, target_size=1e9, target_mixture=[0.5, 0.5],
                              mixtures=MIX4, noise=0.01, reserve=0.25, min_sizes=min_sizes)
        covered = np.flatnonzero(res.budget_fraction >= 0.25 / min_sizes - 1e-12)
        assert covered.size >= min_sizes and covered[0] == 0 and covered[-1] == 8
        assert np.count_nonzero(res.runs_per_size) >= min_sizes
        # every candidate mixture is run at the reserve sizes
        _, chosen = _reserve_design(sizes, 4, min_sizes)
        assert np.all(res.design[chosen] >= 0.25 / (min_sizes * 4) - 1e-15)
        assert res.design.sum() == pytest.approx(1.0)
    plain = allocate_budget(2000.0, sizes, sizes / 1e7, law, target_size=1e9, target_mixture=[0.5, 0.5],
                            mixtures=MIX4, noise=0.01, reserve=0.0)
    assert plain.std_design <= res.std_design          # the safeguard costs precision, never gains it


def test_benchmark_target_scales_the_gradient_only():
    law = _camel(V=2, M=2, seed=4)
    bench = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=4.0, midpoint=2.2,
                                           loss_weights=[0.5, 0.5])
    kw = dict(target_size=1e9, target_mixture=[0.5, 0.5], mixtures=MIX4, noise=0.01, reserve=0.2)
    loss = allocate_budget(500.0, SIZES6, SIZES6 / 1e7, law, **kw)
    score = allocate_budget(500.0, SIZES6, SIZES6 / 1e7, law, benchmark=bench, **kw)
    Lt = law.predict(mixture_features(1e9, [0.5, 0.5]))
    slope = abs(float(bench.derivative(Lt)[0]))
    np.testing.assert_array_equal(score.runs, loss.runs)
    assert score.std == pytest.approx(slope * loss.std, rel=1e-9)
    assert score.target_value == pytest.approx(float(bench.predict(Lt)[0]), rel=1e-12)
    assert loss.target_value == pytest.approx(float(Lt.mean()), rel=1e-12)


def test_default_target_mixture_with_a_benchmark_is_the_benchmark_optimum():
    law = _camel(V=2, M=3, seed=8)
    bench = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=4.0, midpoint=2.2,
                                           loss_weights=[0.3, 0.7])
    # the runs observe the losses weighted as the benchmark reads them (else the score is not estimable)
    res = allocate_budget(300.0, SIZES6, SIZES6 / 1e7, law, target_size=1e9, n_mixtures=3, noise=0.01,
                          benchmark=bench, weights=[0.3, 0.7], rng=3)
    best = optimal_mixture(law, 1e9, benchmarks=bench, rng=0).mixture
    np.testing.assert_allclose(res.target_mixture, best, atol=1e-6)
    # a brute-force check that it is the benchmark optimum, not the mean-loss one
    g = np.random.default_rng(0).dirichlet(np.ones(3), 4000)
    scores = bench.predict(law.predict(mixture_features(1e9, g)))
    top = float(bench.predict(law.predict(mixture_features(1e9, res.target_mixture)))[0])
    assert top >= scores.max() - 1e-9


def test_default_mixtures_and_target_mixture():
    law = _camel(V=2, M=3, seed=8)
    res = allocate_budget(300.0, SIZES6, SIZES6 / 1e7, law, target_size=1e9, n_mixtures=5, noise=0.01, rng=3)
    best = optimal_mixture(law, 1e9).mixture
    np.testing.assert_allclose(res.target_mixture, best, atol=1e-8)
    assert res.mixtures.shape == (5, 3)
    np.testing.assert_allclose(res.mixtures[0], res.target_mixture)
    np.testing.assert_allclose(res.mixtures.sum(axis=1), 1.0)
    again = allocate_budget(300.0, SIZES6, SIZES6 / 1e7, law, target_size=1e9, n_mixtures=5, noise=0.01, rng=3)
    np.testing.assert_array_equal(again.mixtures, res.mixtures)
    np.testing.assert_array_equal(again.runs, res.runs)
    assert res.runs.shape == (6, 5) and res.runs.dtype == np.int64 and res.support.dtype == np.int64


def test_tokens_as_callable_or_array():
    sizes = np.linspace(1.0, 3.0, 7)
    kw = dict(target_size=4.0, target_mixture=[1.0], mixtures=ONE, noise=1.0, reserve=0.0)
    a = allocate_budget(50.0, sizes, np.ones(7), TokenLaw(), tokens=lambda N: 20.0 * N, **kw)
    b = allocate_budget(50.0, sizes, np.ones(7), TokenLaw(), tokens=20.0 * sizes, target_tokens=80.0, **kw)
    c = allocate_budget(50.0, sizes, np.ones(7), PolyLaw(), **kw)
    np.testing.assert_array_equal(a.runs, b.runs)
    np.testing.assert_array_equal(a.runs, c.runs)


def test_linear_simulation_matches_the_predicted_std():
    # a linear law: least squares on the recommended runs has exactly the predicted variance
    law = PolyLaw((1.0, 0.0, 0.0), residual_std=0.05)
    sizes = np.linspace(1.0, 3.0, 11)
    res = allocate_budget(60.0, sizes, np.linspace(1.0, 2.0, 11), law, target_size=4.0, target_mixture=[1.0],
                          mixtures=ONE, reserve=0.2)
    n = res.runs.ravel()
    u = np.repeat(sizes - 2.0, n)
    A = u[:, None] ** np.arange(3)
    coef = np.linalg.lstsq(A, np.random.default_rng(0).normal(0.0, 0.05, (len(u), 20000)), rcond=None)[0]
    pred = (2.0 ** np.arange(3)) @ coef
    assert np.var(pred) == pytest.approx(res.std ** 2, rel=0.05)


@pytest.mark.slow
def test_simulated_refits_match_the_predicted_variance():
    # (e) runs drawn from a planted camel law under the design, camel refitted (least squares on log losses,
    # the model of the noise), prediction at 20x the reference size: Var within 20% of std^2
    law = MixtureLaw.from_params("camel", {"E": [1.8], "theta": [[0.4, 0.0]], "alpha": [[0.25, 0.4]]},
                                 reference_size=5e7)
    sigma = 1e-3
    res = allocate_budget(200.0, SIZES6, lambda N: N / 1e7, law, target_size=1e9, target_mixture=[0.5, 0.5],
                          mixtures=MIX4, noise=sigma, rng=0)
    s, j = np.nonzero(res.runs)
    count = res.runs[s, j]
    X = mixture_features(np.repeat(SIZES6[s], count), np.repeat(MIX4[j], count, axis=0))
    truth = law.predict(X)
    Xt = mixture_features(1e9, [0.5, 0.5])
    gen = np.random.default_rng(3)
    preds = []
    for _ in range(500):
        y = truth * np.exp(sigma * gen.standard_normal(truth.shape))
        fit = MixtureLaw("camel", loss="l2", n_starts=2, reference_size=5e7, rng=0).fit(X, y)
        preds.append(fit.predict(Xt).item())
    ratio = np.var(preds, ddof=1) / res.std ** 2
    assert 0.8 <= ratio <= 1.2


# ---------------------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------------------
def _call(**over):
    kw = dict(budget=100.0, candidate_sizes=LIN_SIZES, cost_fn=np.ones(21), law=PolyLaw(), target_size=5.0,
              target_mixture=[1.0], mixtures=ONE, reserve=0.0)
    kw.update(over)
    return allocate_budget(kw.pop("budget"), kw.pop("candidate_sizes"), kw.pop("cost_fn"), kw.pop("law"), **kw)


@pytest.mark.parametrize("over,name,exc", [
    ({"budget": 0.0}, "budget", ValueError),
    ({"budget": 0.5}, "budget", ValueError),                       # buys no run
    ({"budget": 1e300}, "budget", ValueError),                     # more than 2**53 runs
    ({"candidate_sizes": [1.0, -2.0]}, "candidate_sizes", ValueError),
    ({"candidate_sizes": [1.0, 1.0, 2.0], "cost_fn": np.ones(3)}, "candidate_sizes", ValueError),
    ({"candidate_sizes": np.ones((2, 2))}, "candidate_sizes", ValueError),
    ({"cost_fn": np.ones(3)}, "cost_fn", ValueError),
    ({"cost_fn": -np.ones(21)}, "cost_fn", ValueError),
    ({"cost_fn": lambda N: 0.0 * N}, "cost_fn", ValueError),
    ({"cost_fn": 5}, "cost_fn", TypeError),
    ({"law": object()}, "law", TypeError),
    ({"target_size": -1.0}, "target_size", ValueError),
    ({"target_mixture": [0.5]}, "target_mixture", ValueError),
    ({"target_mixture": [1.0, 0.0]}, "target_mixture", ValueError),
    ({"mixtures": np.ones((2, 2)) / 2}, "mixtures", ValueError),
    ({"mixtures": [[0.7]]}, "mixtures", ValueError),
    ({"n_mixtures": 0, "mixtures": None}, "n_mixtures", ValueError),
    ({"weights": [1.0, 1.0]}, "weights", ValueError),
    ({"weights": [-1.0]}, "weights", ValueError),
    ({"noise": 0.0}, "noise", ValueError),
    ({"noise": np.ones(3)}, "noise", ValueError),
    ({"law": PolyLaw(residual_std=float("nan"))}, "noise", ValueError),
    ({"multiresponse": "yes"}, "multiresponse", TypeError),
    ({"theta_samples": []}, "theta_samples", ValueError),
    ({"theta_samples": [object()]}, "theta_samples", TypeError),
    ({"reserve": 1.0}, "reserve", ValueError),
    ({"reserve": -0.1}, "reserve", ValueError),
    ({"reserve": 0.2, "min_sizes": 0}, "min_sizes", ValueError),
    ({"reserve": 0.2, "min_sizes": 30}, "min_sizes", ValueError),
    ({"tokens": lambda N: N}, "tokens", ValueError),
    ({"target_tokens": 3.0}, "target_tokens", ValueError),
    ({"law": TokenLaw()}, "tokens", ValueError),
    ({"law": TokenLaw(), "tokens": 20 * LIN_SIZES}, "target_tokens", ValueError),
    ({"benchmark": object()}, "benchmark", TypeError),
    ({"options": {"bogus": 1}}, "options", ValueError),
    ({"options": {"tol": -1.0}}, "options\\['tol'\\]", ValueError),
    ({"options": {"max_iter": 0}}, "options\\['max_iter'\\]", ValueError),
    ({"options": {"max_rounding": 1.5}}, "options\\['max_rounding'\\]", TypeError),
    ({"rng": "x"}, "rng", TypeError),
    ({"target_size": 2.0, "law": PolyLaw((1.0, 0.0, 0.0)), "candidate_sizes": [1.0, 3.0], "cost_fn": [1.0, 1.0]},
     "candidate_sizes", ValueError),                               # two sizes cannot identify a quadratic
])
def test_validation_names_the_parameter(over, name, exc):
    with pytest.raises(exc, match=f"`{name}`"):
        _call(**over)


def test_a_budget_too_small_for_the_support_warns():
    from numtk._lib import NumtkWarning

    with pytest.warns(NumtkWarning, match="do not identify"):
        res = _call(budget=1.5, cost_fn=np.ones(21))
    assert math.isinf(res.std) and res.cost <= 1.5


# ---------------------------------------------------------------------------------------------------------
# the memory check counts the law's parameters
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("multi,n_mixtures", [(False, 60), (True, 30)])
def test_memory_estimate_bounds_the_traced_peak(monkeypatch, multi, n_mixtures):
    import tracemalloc

    import numtk.mixture._allocation as alloc
    from numtk._lib._optional import import_optional
    from numtk.mixture import planted_law

    import_optional("cvxpy", purpose="the test")           # imported before tracing: its import is not a run's
    law = planted_law(5, 5, rng=0)                          # p = 55 parameters
    seen = {}
    real = alloc.check_size

    def spy(count, per_item, name):
        seen["need"] = count * per_item
        return real(count, per_item, name)

    monkeypatch.setattr(alloc, "check_size", spy)
    sizes = np.geomspace(1e7, 2e8, 5)
    tracemalloc.start()
    try:
        allocate_budget(1e4, sizes, sizes / 1e7, law, target_size=1e9, noise=0.01, rng=0, n_mixtures=n_mixtures,
                        multiresponse=multi)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen["need"] >= peak


@pytest.mark.parametrize("by_count", [True, False])
def test_too_many_candidates_are_refused_naming_the_parameter(monkeypatch, by_count):
    import numtk._lib._validation as val
    from numtk.mixture import planted_law

    law = planted_law(5, 5, rng=0)
    sizes = np.geomspace(1e7, 2e8, 5)
    # 5 sizes x 400 mixtures at >= 8 * 2 * V * p = 4,400 bytes each is > 8 MB; the old estimate (2,848 bytes
    # per candidate, 5.7 MB) let it through
    monkeypatch.setattr(val, "available_memory", lambda: 8 * 2**20)
    kw = dict(n_mixtures=400) if by_count else dict(
        mixtures=np.random.default_rng(0).dirichlet(np.ones(5), 400), target_mixture=np.full(5, 0.2))
    with pytest.raises(ValueError, match="`n_mixtures`" if by_count else "`mixtures`"):
        allocate_budget(1e4, sizes, sizes / 1e7, law, target_size=1e9, noise=0.01, rng=0, **kw)


# ---------------------------------------------------------------------------------------------------------
# rounding: the reserve survives, the cap is reported, the cost is within the budget, order does not matter
# ---------------------------------------------------------------------------------------------------------
def test_every_reserve_size_keeps_a_run_when_its_share_buys_one():
    import warnings

    from numtk.mixture import planted_law

    law = planted_law(3, 2, rng=0)
    sizes = np.geomspace(1e7, 2e8, 6)
    costs = sizes / 1e7
    with warnings.catch_warnings():
        warnings.simplefilter("error")                         # no reserve size is left empty
        res = allocate_budget(200.0, sizes, costs, law, target_size=1e9, noise=0.01, rng=0)
    _, chosen = _reserve_design(sizes, 16, 3)
    share = 0.2 * 200.0 / 3
    for i in chosen:
        if share >= costs[i]:
            assert res.runs_per_size[i] >= share // costs[i] >= 1
    assert np.count_nonzero(res.runs_per_size) >= 3 and res.cost <= 200.0


def test_rounding_cap_is_reported():
    from numtk._lib import NumtkWarning

    kw = dict(target_size=5.0, target_mixture=[1.0], mixtures=ONE, noise=1.0, reserve=0.0)
    full = allocate_budget(1000.5, LIN_SIZES, np.linspace(1.0, 7.0, 21), PolyLaw(), **kw)
    assert full.success and "max_rounding" not in full.message
    with pytest.warns(NumtkWarning, match="max_rounding"):
        res = allocate_budget(1000.5, LIN_SIZES, np.linspace(1.0, 7.0, 21), PolyLaw(),
                              options={"max_rounding": 0}, **kw)
    assert not res.success and "max_rounding" in res.message
    assert res.cost <= full.cost and res.std >= full.std


def test_cost_never_exceeds_the_budget_by_round_off():
    # 0.1 + 0.1 + 0.1 = 0.30000000000000004 > 0.3: a third run does not fit
    for budget in [0.3, 0.7, 2.3, 0.6]:
        res = allocate_budget(budget, [1.0, 3.0], [0.1, 0.1], PolyLaw(), target_size=5.0, target_mixture=[1.0],
                              mixtures=ONE, noise=1.0, reserve=0.0)
        assert res.cost <= budget
        assert math.fsum([0.1] * int(res.runs.sum())) <= budget
        # and no run that fits exactly was left out
        assert math.fsum([0.1] * int(res.runs.sum() + 1)) > budget


@pytest.mark.parametrize("count", [6, 7])
def test_permuting_candidate_sizes_permutes_the_design(count):
    from numtk.mixture import planted_law

    law = planted_law(3, 2, rng=0)
    sizes = np.geomspace(1e7, 2e8, count)
    mix = np.random.default_rng(0).dirichlet(np.ones(3), 6)
    kw = dict(target_size=1e9, target_mixture=mix[0], mixtures=mix, noise=0.01)
    perm = np.random.default_rng(count).permutation(count)
    a = allocate_budget(500.0, sizes, sizes / 1e7, law, **kw)
    b = allocate_budget(500.0, sizes[perm], sizes[perm] / 1e7, law, **kw)
    np.testing.assert_array_equal(b.runs_per_size, a.runs_per_size[perm])
    assert b.std == pytest.approx(a.std, rel=1e-9)


def test_a_saturated_benchmark_is_named():
    law = _camel(V=2, M=2, seed=4)
    # a slope of 1e4 past the midpoint: expit underflows, the score is the floor and its derivative 0
    bench = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=1e4, midpoint=0.5,
                                           loss_weights=[0.5, 0.5])
    Lt = law.predict(mixture_features(1e9, [0.5, 0.5]))
    assert float(bench.derivative(Lt)[0]) == 0.0
    with pytest.raises(ValueError, match="`benchmark` is saturated"):
        allocate_budget(500.0, SIZES6, SIZES6 / 1e7, law, benchmark=bench, target_size=1e9,
                        target_mixture=[0.5, 0.5], mixtures=MIX4, noise=0.01)


@pytest.mark.parametrize("mode", ["fallback", "inaccurate"])
def test_socp_fallback_and_inaccurate_solves_warn(monkeypatch, mode):
    cp = pytest.importorskip("cvxpy")
    from numtk._lib import NumtkWarning

    real = cp.Problem.solve

    def solve(self, *args, **kwargs):
        if mode == "fallback" and kwargs.get("solver") == "CLARABEL":
            raise cp.error.SolverError("planted failure")
        out = real(self, *args, **kwargs)
        if mode == "inaccurate":
            self._status = cp.OPTIMAL_INACCURATE
        return out

    monkeypatch.setattr(cp.Problem, "solve", solve)
    law = _camel(V=3, M=2, seed=5)
    match = "SCS" if mode == "fallback" else "optimal_inaccurate"
    with pytest.warns(NumtkWarning, match=match):
        res = allocate_budget(500.0, SIZES6, SIZES6 / 1e7, law, target_size=1e9, target_mixture=[0.4, 0.6],
                              mixtures=MIX4, noise=0.01, reserve=0.0, multiresponse=True)
    assert res.cost <= 500.0


@pytest.mark.parametrize("M,V,m", [(3, 2, 10), (4, 3, 15)])
def test_lp_design_equals_the_sdp_on_a_badly_scaled_planted_law(M, V, m):
    # costs spanning 156x and parameters whose scales differ by decades: Elfving's LP must still reach the
    # SDP's optimum (whitening before the cost scaling left designs 1.4x and 8x the optimal variance here)
    from numtk.mixture import planted_law

    law = planted_law(M, V, rng=0)
    sizes = np.geomspace(1.2e7, 1.5e8, 5)
    costs = 120.0 * sizes ** 2
    Q = np.vstack([optimal_mixture(law, 1.2e9).mixture, np.random.default_rng(0).dirichlet(np.ones(M), m - 1)])
    budget = 40.0 * costs[-1]
    res = allocate_budget(budget, sizes, costs, law, target_size=1.2e9, target_mixture=Q[0], mixtures=Q,
                          noise=1e-3, reserve=0.0)
    cp = pytest.importorskip("cvxpy")
    F, g = _rows(law, sizes, Q, 1e-3, target=(1.2e9, Q[0]))
    F = F[:, 0, :] / np.sqrt(np.repeat(costs, m))[:, None]
    col = np.linalg.norm(F, axis=0)                              # unit columns (a reparametrisation)
    Z, h = _whiten((F / col)[:, None, :], g / col, np.ones(len(F)))
    Z, scale = Z[:, 0, :], np.linalg.norm(h)
    K, r = Z.shape
    pi = cp.Variable(K, nonneg=True)
    t = cp.Variable()
    Mexp = cp.reshape(np.einsum("kp,kq->kpq", Z, Z).reshape(K, r * r).T @ pi, (r, r), order="C")
    lmi = cp.bmat([[0.5 * (Mexp + Mexp.T), (h / scale)[:, None]], [(h / scale)[None, :], cp.reshape(t, (1, 1), order="C")]])
    prob = cp.Problem(cp.Minimize(t), [cp.sum(pi) == 1, lmi >> 0])
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    sdp = float(t.value) * scale ** 2
    assert res.std_design ** 2 * budget == pytest.approx(sdp, rel=1e-5)
