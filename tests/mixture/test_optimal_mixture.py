"""optimal_mixture against independent oracles (spec §9.4): the KKT conditions written out in NumPy,
brute force over 1e5 Dirichlet samples and simplex grids (the law evaluated in NumPy from its formula),
brentq on dF/dr1 for two domains, cvxpy's exponential-cone solve under caps and linear constraints, and the
P3 drift condition of the camel law."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import LinearConstraint, brentq

from numtk._lib import NumtkWarning
from numtk.mixture import LossToBenchmarkLaw, MixtureLaw, mixture_features, optimal_mixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import camel as camel_loop  # noqa: E402

N0 = 1e8


def random_camel(M, V, seed):
    rng = np.random.default_rng(seed)
    return {"E": rng.uniform(1.0, 2.0, V), "theta": rng.normal(0.0, 0.5, (V, M)),
            "alpha": rng.uniform(0.05, 0.5, (V, M))}


def camel_np(P, N, R):
    """Losses (n, V) of the camel law at one size N and mixtures R (n, M), vectorised NumPy."""
    ell = np.log(N / N0)
    A = P["theta"] - ell * P["alpha"]                   # exponent slopes a_ij = theta_ij - ell alpha_ij
    return P["E"] + np.exp(np.atleast_2d(R) @ A.T)


def objective_np(P, N, R, w=None):
    L = camel_np(P, N, R)
    w = np.full(L.shape[1], 1.0 / L.shape[1]) if w is None else w
    return L @ w


def grad_np(P, N, r, w):
    ell = np.log(N / N0)
    A = P["theta"] - ell * P["alpha"]
    return (w * np.exp(A @ r)) @ A


def kkt_np(g, r, lo, hi, tol=1e-9):
    """The spec's KKT residual, written out independently."""
    at_lo, at_hi = r <= lo + tol, r >= hi - tol
    free = ~(at_lo | at_hi)
    nu = np.median(g[free]) if free.any() else 0.5 * (np.max(g[at_hi], initial=-np.inf) + np.min(g[at_lo], initial=np.inf))
    return max(np.max(np.abs(g[free] - nu), initial=0.0), np.max(nu - g[at_lo], initial=0.0),
               np.max(g[at_hi] - nu, initial=0.0))


def law_of(P):
    return MixtureLaw.from_params("camel", P, reference_size=N0)


CASES = [(3, 2, 0, 1e9), (4, 3, 1, 2e7), (5, 5, 2, 1e10), (6, 4, 3, 3e8), (5, 3, 4, 1e12)]


def test_reference_agrees_with_the_vectorised_oracle():
    P = random_camel(4, 3, 0)
    R = np.random.default_rng(0).dirichlet(np.ones(4), 5)
    np.testing.assert_allclose(camel_np(P, 3e9, R), camel_loop(P, [3e9] * 5, R, N0), rtol=1e-13)


@pytest.mark.parametrize(("M", "V", "seed", "N"), CASES)
def test_convex_optimum_kkt_and_no_better_dirichlet_sample(M, V, seed, N):
    P = random_camel(M, V, seed)
    res = optimal_mixture(law_of(P), N)
    r = res.mixture
    assert r.shape == (M,) and np.all(r >= 0) and abs(r.sum() - 1) <= 1e-14
    assert res.success and res.kkt_residual <= 1e-8
    w = np.full(V, 1.0 / V)
    assert kkt_np(grad_np(P, N, r, w), r, np.zeros(M), np.ones(M)) <= 1e-8
    assert res.value == pytest.approx(objective_np(P, N, r)[0], rel=1e-14)
    np.testing.assert_allclose(res.losses, camel_np(P, N, r)[0], rtol=1e-14)
    samples = np.random.default_rng(100 + seed).dirichlet(np.ones(M), 100_000)
    assert objective_np(P, N, samples).min() >= res.value - 1e-12
    # the pure domains too (the vertices, where V = 1 optima sit)
    assert objective_np(P, N, np.eye(M)).min() >= res.value - 1e-12


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grid_on_the_simplex_for_three_domains(seed):
    P = random_camel(3, 3, 10 + seed)
    N = 5e9
    res = optimal_mixture(law_of(P), N)
    k = 300
    i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
    keep = i + j <= k
    grid = np.c_[i[keep], j[keep], k - i[keep] - j[keep]] / k
    assert objective_np(P, N, grid).min() >= res.value - 1e-12


@pytest.mark.parametrize("N", [1e6, 1e7, 1e8, 1e9, 1e10])
def test_two_domains_against_brentq_on_the_derivative(N):
    # an interior optimum: each validation set is helped by a different domain (up to N ~ 3e10, where the
    # optimum reaches the vertex r = (1, 0))
    P = {"E": np.array([1.2, 0.9]), "theta": np.array([[0.0, 1.5], [1.2, 0.0]]),
         "alpha": np.array([[0.1, 0.15], [0.2, 0.1]])}
    w = np.array([0.5, 0.5])

    def dF(r1):  # d/dr1 of F(r1, 1 - r1)
        g = grad_np(P, N, np.array([r1, 1 - r1]), w)
        return g[0] - g[1]

    assert dF(0.0) < 0 < dF(1.0)
    r1 = brentq(dF, 0.0, 1.0, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    res = optimal_mixture(law_of(P), N)
    assert res.mixture[0] == pytest.approx(r1, abs=1e-10)
    assert res.kkt_residual <= 1e-10 and res.active.tolist() == [0, 0]


def test_one_validation_set_gives_a_vertex_and_warns():
    P = random_camel(5, 1, 7)
    law = MixtureLaw.from_params("camel", {k: v[0] for k, v in P.items()}, reference_size=N0)
    N = 2e9
    with pytest.warns(NumtkWarning, match="vertex"):
        res = optimal_mixture(law, N)
    best = int(np.argmin(objective_np(P, N, np.eye(5))))
    np.testing.assert_array_equal(res.mixture, np.eye(5)[best])
    assert res.kkt_residual == 0.0
    # with caps the optimum leaves the vertex, and there is no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        capped = optimal_mixture(law, N, dict(upper=0.4))
    np.testing.assert_allclose(np.sort(capped.mixture)[-3:], [0.2, 0.4, 0.4], atol=1e-15)


def test_caps_are_respected_and_no_capped_sample_is_better():
    P = random_camel(5, 3, 5)
    N = 3e9
    free = optimal_mixture(law_of(P), N).mixture
    j = int(np.argmax(free))
    upper = np.ones(5)
    upper[j] = 0.5 * free[j]                      # a cap that binds
    lower = np.zeros(5)
    lower[(j + 1) % 5] = 0.1
    res = optimal_mixture(law_of(P), N, dict(lower=lower, upper=upper))
    r = res.mixture
    assert np.all(r <= upper) and np.all(r >= lower) and abs(r.sum() - 1) < 1e-14
    assert r[j] == upper[j] and res.active[j] == 1
    w = np.full(3, 1 / 3)
    assert kkt_np(grad_np(P, N, r, w), r, lower, upper) <= 1e-8 and res.kkt_residual <= 1e-8
    samples = np.random.default_rng(1).dirichlet(np.ones(5), 200_000)
    ok = np.all(samples <= upper, axis=1) & np.all(samples >= lower, axis=1)
    assert ok.sum() > 1000
    assert objective_np(P, N, samples[ok]).min() >= res.value - 1e-12


def test_cvxpy_exponential_cone_under_caps_and_a_linear_constraint():
    cp = pytest.importorskip("cvxpy")
    P = random_camel(6, 4, 8)
    N = 1e9
    upper = np.array([0.5, 0.3, 1.0, 1.0, 0.25, 1.0])
    A = np.array([[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]])    # r0 + r2 <= 0.45
    res = optimal_mixture(law_of(P), N, [dict(upper=upper), LinearConstraint(A, -np.inf, 0.45)])
    ell = np.log(N / N0)
    Aexp = P["theta"] - ell * P["alpha"]
    r = cp.Variable(6)
    F = cp.sum(P["E"]) / 4 + cp.sum(cp.exp(Aexp @ r)) / 4
    prob = cp.Problem(cp.Minimize(F), [cp.sum(r) == 1, r >= 0, r <= upper, A @ r <= 0.45])
    prob.solve()
    assert res.value <= prob.value + 1e-7
    np.testing.assert_allclose(res.mixture, r.value, atol=1e-4)
    assert (A @ res.mixture)[0] <= 0.45 + 1e-12 and np.all(res.mixture <= upper)
    assert res.kkt_residual <= 1e-8


def test_linear_constraint_active_and_brute_force():
    P = random_camel(4, 3, 9)
    N = 1e9
    free = optimal_mixture(law_of(P), N).mixture
    order = np.argsort(-free)
    a = np.zeros(4)
    a[order[:2]] = 1.0                             # cap the two largest weights together
    cap = 0.7 * (free[order[0]] + free[order[1]])
    res = optimal_mixture(law_of(P), N, LinearConstraint(a, -np.inf, cap))
    assert a @ res.mixture == pytest.approx(cap, abs=1e-9)
    assert res.active_rows.tolist() == [0] and res.kkt_residual <= 1e-8
    samples = np.random.default_rng(2).dirichlet(np.ones(4), 100_000)
    ok = samples @ a <= cap
    assert objective_np(P, N, samples[ok]).min() >= res.value - 1e-12


def test_permuting_domains_permutes_the_optimum():
    P = random_camel(5, 4, 11)
    perm = np.array([3, 0, 4, 1, 2])
    Pp = {"E": P["E"], "theta": P["theta"][:, perm], "alpha": P["alpha"][:, perm]}
    a = optimal_mixture(law_of(P), 4e9, dict(upper=[0.6, 1, 1, 0.3, 1]))
    b = optimal_mixture(law_of(Pp), 4e9, dict(upper=np.array([0.6, 1, 1, 0.3, 1])[perm]))
    np.testing.assert_allclose(b.mixture, a.mixture[perm], atol=1e-9)
    assert b.value == pytest.approx(a.value, rel=1e-13)


def test_weights_aggregate_the_validation_sets():
    P = random_camel(4, 3, 12)
    w = np.array([0.7, 0.1, 0.2])
    res = optimal_mixture(law_of(P), 1e9, weights=w)
    assert res.value == pytest.approx(objective_np(P, 1e9, res.mixture, w)[0], rel=1e-14)
    assert kkt_np(grad_np(P, 1e9, res.mixture, w), res.mixture, np.zeros(4), np.ones(4)) <= 1e-8
    samples = np.random.default_rng(3).dirichlet(np.ones(4), 50_000)
    assert objective_np(P, 1e9, samples, w).min() >= res.value - 1e-12


def test_mixture_drift_with_size():
    # domain 0 helps more at the reference size, domain 1 has the larger size exponents: as N grows the
    # optimum moves towards domain 1 (spec P3), continuously and monotonically
    P = {"E": np.array([1.0, 1.0, 1.0]), "theta": np.array([[0.0, 0.6, 0.3], [0.8, 0.0, 0.5], [0.4, 0.5, 0.0]]),
         "alpha": np.array([[0.10, 0.30, 0.15], [0.10, 0.30, 0.15], [0.10, 0.30, 0.15]])}
    sizes = np.geomspace(1e7, 1e12, 11)
    mixes = np.array([optimal_mixture(law_of(P), N).mixture for N in sizes])
    assert np.all(np.diff(mixes[:, 1]) >= -1e-12) and np.all(np.diff(mixes[:, 0]) <= 1e-12)
    assert mixes[-1, 1] - mixes[0, 1] > 0.2
    # P3: at an interior optimum the exponent-weighted slopes are equal over the used domains
    w = np.full(3, 1 / 3)
    for N, r in zip(sizes, mixes):
        g = grad_np(P, N, r, w)
        used = r > 1e-9
        assert np.ptp(g[used]) <= 1e-9
        assert np.all(g[~used] >= g[used].max() - 1e-9)


def test_planted_law_optimum_moves_with_size():
    from numtk.mixture import planted_law

    law = planted_law(4, 3, rng=0)
    small, large = optimal_mixture(law, 1e7), optimal_mixture(law, 1e11)
    assert small.kkt_residual <= 1e-8 and large.kkt_residual <= 1e-8
    assert np.abs(small.mixture - large.mixture).max() > 1e-3


def test_benchmark_objective_against_brute_force():
    P = random_camel(4, 3, 13)
    N = 1e9
    law = law_of(P)
    b1 = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.8, slope=6.0, midpoint=2.4,
                                        loss_weights=[0.6, 0.2, 0.2])
    b2 = LossToBenchmarkLaw.from_params("sigmoid", floor=0.0, ceiling=0.6, slope=3.0, midpoint=2.2,
                                        loss_weights=[0.0, 0.0, 1.0])
    v = np.array([0.3, 0.7])
    res = optimal_mixture(law, N, benchmarks=[b1, b2], benchmark_weights=v, rng=0)

    def neg_score(R):
        L = camel_np(P, N, R)
        s1 = 0.25 + 0.55 / (1 + np.exp(6.0 * (L @ [0.6, 0.2, 0.2] - 2.4)))
        s2 = 0.0 + 0.6 / (1 + np.exp(3.0 * (L[:, 2] - 2.2)))
        return -(0.3 * s1 + 0.7 * s2)

    assert res.value == pytest.approx(neg_score(res.mixture)[0], rel=1e-13)
    assert res.scores.shape == (2,) and res.value == pytest.approx(-(v @ res.scores), rel=1e-14)
    samples = np.random.default_rng(4).dirichlet(np.ones(4), 100_000)
    assert neg_score(samples).min() >= res.value - 1e-12
    assert res.kkt_residual <= 1e-8


def test_benchmark_law_with_fitted_loss_weights():
    # a benchmark law whose loss weights were learned (loss_weights='fit') on losses of the law itself
    P = random_camel(4, 3, 13)
    N = 1e9
    law = law_of(P)
    rng = np.random.default_rng(5)
    R = rng.dirichlet(np.ones(4), 60)
    L = camel_loop(P, N * rng.uniform(0.1, 10.0, 60), R, N0)
    u_true = np.array([0.6, 0.3, 0.1])
    bench = LossToBenchmarkLaw(floor=0.25, loss_weights="fit").fit(
        L, 0.25 + 0.55 / (1 + np.exp(6.0 * (L @ u_true - np.median(L @ u_true)))))
    u = bench.loss_weights_
    assert u.shape == (3,) and u.sum() == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(u, u_true, atol=1e-6)
    res = optimal_mixture(law, N, benchmarks=[bench], rng=0)
    f, c, k, x0 = bench.floor_, bench.ceiling_, bench.slope_, bench.midpoint_

    def neg_score(R):
        return -(f + (c - f) / (1 + np.exp(k * (camel_np(P, N, R) @ u - x0))))

    assert res.value == pytest.approx(neg_score(res.mixture)[0], rel=1e-13)
    samples = np.random.default_rng(6).dirichlet(np.ones(4), 100_000)
    assert neg_score(samples).min() >= res.value - 1e-12
    assert res.kkt_residual <= 1e-8


class LinearLaw:
    """A stand-in law with the mixture_gradient protocol: L_i(r) = c_i + b_i . r + 0.5 r' Q_i r."""

    n_domains_, n_outputs_ = 3, 2

    def __init__(self):
        self.b = np.array([[0.0, 0.4, 0.8], [0.9, 0.3, 0.0]])
        self.Q = np.stack([np.diag([1.0, 2.0, 3.0]), np.diag([2.0, 1.0, 1.0])])

    def mixture_gradient(self, model_size, mixture):
        r = np.asarray(mixture)
        vals = 1.0 + self.b @ r + 0.5 * np.einsum("j,ijk,k->i", r, self.Q, r)
        return vals, self.b + np.einsum("ijk,k->ij", self.Q, r)


def test_any_law_with_the_protocol():
    law = LinearLaw()
    res = optimal_mixture(law, 1.0, rng=0)
    # closed form: F = 0.5 (b0 + b1).r + 0.25 r'(Q0 + Q1) r on the simplex; the KKT system with all free
    Q = 0.5 * (law.Q[0] + law.Q[1])
    c = 0.5 * (law.b[0] + law.b[1])
    K = np.block([[Q, np.ones((3, 1))], [np.ones((1, 3)), np.zeros((1, 1))]])
    sol = np.linalg.solve(K, np.r_[-c, 1.0])
    assert np.all(sol[:3] > 0)
    np.testing.assert_allclose(res.mixture, sol[:3], atol=1e-10)


def test_tokens_of_a_law_with_a_data_term():
    # the token term adds exp(zeta - beta log(D/D0)) to every loss: the same optimum, shifted losses
    P = {"E": [1.0, 1.0], "theta": [[0.0, 1.0], [1.0, 0.0]], "alpha": [[0.1, 0.1], [0.1, 0.3]]}
    with_d = MixtureLaw.from_params("camel", {**P, "zeta": [0.1, 0.2], "beta": [0.3, 0.3]}, reference_size=N0,
                                    reference_tokens=1e10)
    a = optimal_mixture(law_of({k: np.array(v) for k, v in P.items()}), 1e10)
    b = optimal_mixture(with_d, 1e10, tokens=2e10)
    np.testing.assert_allclose(b.mixture, a.mixture, atol=1e-12)
    np.testing.assert_allclose(b.losses - a.losses, np.exp(np.array([0.1, 0.2]) - 0.3 * np.log(2.0)), rtol=1e-12)
    with pytest.raises(ValueError, match="`tokens`"):
        optimal_mixture(with_d, 1e10)


def test_capacity_kkt_law_keeps_the_floor_and_no_dirichlet_sample_is_better():
    # Dai and Zheng's law (K = 3; N raw, H in millions of parameters), at 3e9 parameters, far above H = 20M
    P = {"b": np.array([0.3, 0.45, 0.6]), "c": np.array([4.0, 9.0, 20.0]), "A": np.array([0.8, 1.2, 0.6]),
         "a": np.array([0.3, 0.25, 0.35]), "E": np.array([1.6, 1.2, 1.9]), "H": 20.0}
    law = MixtureLaw.from_params("capacity_kkt", P, reference_size=1e8)
    N, D = 3e9, 6e10
    res = optimal_mixture(law, N, tokens=D, rng=0)
    r = res.mixture
    assert res.success and r.shape == (3,) and abs(r.sum() - 1) <= 1e-12
    assert np.all(r >= 1e-4)
    assert res.value == pytest.approx(law.predict(mixture_features(N, r[None, :], tokens=D))[0].mean(), rel=1e-12)
    # brute force: 2e4 Dirichlet mixtures, floored at 1e-4 and renormalised (the law's own floor)
    R = np.random.default_rng(9).dirichlet(np.ones(3), 20_000)
    R = np.maximum(R, 1e-4)
    R /= R.sum(axis=1, keepdims=True)
    objective = law.predict(mixture_features(N, R, tokens=D)).mean(axis=1)
    assert objective.min() >= res.value - 1e-9


def test_one_domain():
    law = MixtureLaw.from_params("camel", {"E": [1.0], "theta": [[0.2]], "alpha": [[0.3]]}, reference_size=N0)
    res = optimal_mixture(law, 1e9)
    assert res.mixture.tolist() == [1.0] and res.kkt_residual == 0.0


@pytest.mark.parametrize(("cons", "match"), [
    (dict(lower=[0.5, 0.4, 0.3]), "lower bounds sum"),
    (dict(upper=0.3), "upper bounds sum"),
    (dict(lower=[0.5, 0, 0], upper=[0.4, 1, 1]), "domain 0"),
    (LinearConstraint([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.0, 0.0], [0.3, 0.3]), "infeasible"),
])
def test_infeasible_constraints_are_named(cons, match):
    law = law_of(random_camel(3, 2, 0))
    with pytest.raises(ValueError, match=f"`constraints`.*{match}"):
        optimal_mixture(law, 1e9, cons)


def test_bad_arguments_are_named():
    law = law_of(random_camel(3, 2, 0))
    with pytest.raises(TypeError, match="`law`"):
        optimal_mixture("camel", 1e9)
    with pytest.raises(ValueError, match="`model_size`"):
        optimal_mixture(law, -1.0)
    with pytest.raises(ValueError, match="`weights`"):
        optimal_mixture(law, 1e9, weights=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="`weights`"):
        optimal_mixture(law, 1e9, weights=[-1.0, 2.0])
    with pytest.raises(ValueError, match="`tokens`"):
        optimal_mixture(law, 1e9, tokens=1e9)
    with pytest.raises(TypeError, match="`constraints`"):
        optimal_mixture(law, 1e9, "caps")
    with pytest.raises(ValueError, match="`constraints`"):
        optimal_mixture(law, 1e9, dict(upper=[0.5, 0.5]))
    with pytest.raises(ValueError, match="`constraints`"):
        optimal_mixture(law, 1e9, dict(cap=0.5))
    bench = LossToBenchmarkLaw.from_params("sigmoid", floor=0.2, ceiling=0.9, slope=2.0, midpoint=2.0)
    with pytest.raises(ValueError, match="`benchmarks`"):
        optimal_mixture(law, 1e9, benchmarks=bench)        # one loss weight for two validation sets
    with pytest.raises(ValueError, match="`benchmark_weights`"):
        optimal_mixture(law, 1e9, benchmark_weights=[1.0])
    with pytest.raises(TypeError, match="`benchmarks`"):
        optimal_mixture(law, 1e9, benchmarks=[3])
    with pytest.raises(ValueError, match="`n_starts`"):
        optimal_mixture(law, 1e9, n_starts=-1)


def test_duplicate_starts_are_dropped_and_the_start_count_is_capped():
    P = random_camel(3, 2, 9)
    law = law_of(P)
    bench = LossToBenchmarkLaw.from_params("sigmoid", floor=0.2, ceiling=0.9, slope=2.0, midpoint=2.0,
                                           loss_weights=[0.5, 0.5])
    # a feasible set that is one point: every start (random or not) projects onto it
    point = np.array([0.2, 0.3, 0.5])
    res = optimal_mixture(law, 1e9, dict(lower=point, upper=point), benchmarks=bench, n_starts=500, rng=0)
    assert res.n_starts == 1
    np.testing.assert_allclose(res.mixture, point, atol=1e-12)
    # on the open simplex the random starts are distinct: the deterministic ones plus n_starts at most
    res = optimal_mixture(law, 1e9, benchmarks=bench, n_starts=50, rng=0)
    samples = np.random.default_rng(0).dirichlet(np.ones(3), 100_000)
    assert 50 <= res.n_starts <= 50 + 3
    assert float(bench.predict(camel_np(P, 1e9, res.mixture))[0]) >= \
        float(bench.predict(camel_np(P, 1e9, samples)).max()) - 1e-12
    with pytest.raises(ValueError, match="`n_starts`"):
        optimal_mixture(law, 1e9, benchmarks=bench, n_starts=10_001)


def test_a_benchmark_that_overflows_is_named_benchmarks_not_x():
    law = law_of(random_camel(3, 2, 9))
    # k (x - x0) = 1e308 * ~2 overflows the softplus: -inf score
    bench = LossToBenchmarkLaw.from_params("log_sigmoid", floor=0.5, ceiling=1.0, slope=1e308, midpoint=0.1,
                                           loss_weights=[0.5, 0.5])
    with pytest.raises(ValueError, match="`benchmarks`") as info:
        optimal_mixture(law, 1e9, benchmarks=bench, rng=0)
    assert "`X`" not in str(info.value)
