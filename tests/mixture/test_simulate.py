"""The planted worlds: planted_law's construction and simulate_runs' runs, against closed forms and brute force."""

import numpy as np
import pytest

from numtk.mixture import planted_law, simulate_runs


def _camel(params, N0, sizes, R):
    """The 'camel' law in plain NumPy: E_i + exp(r . theta_i - log(N/N0) r . alpha_i), (n, V)."""
    ell = np.log(np.asarray(sizes, float) / N0)[:, None]
    return params["E"][None, :] + np.exp(R @ params["theta"].T - ell * (R @ params["alpha"].T))


def _best(law, size, R):
    """The best of the sampled mixtures R for the average loss at one size (brute force)."""
    F = _camel(law.params_, law.reference_size_, np.full(len(R), size), R).mean(axis=1)
    k = int(np.argmin(F))
    return R[k], F


@pytest.fixture(scope="module")
def sample():
    return np.random.default_rng(12345).dirichlet(np.ones(5), 100_000)


def test_planted_law_is_the_documented_construction():
    law = planted_law(4, 6, reference_size=3e7, drift=0.7, rng=11)
    p = law.params_
    assert law.n_domains_ == 4 and law.n_outputs_ == 6 and law.reference_size_ == 3e7
    assert p["E"].shape == (6,) and p["theta"].shape == (6, 4) and p["alpha"].shape == (6, 4)
    # the draws in the documented order: E, a, z, s, z'
    g = np.random.default_rng(11)
    E, a, z, s, z2 = g.uniform(1.6, 2.2, 6), g.uniform(0.26, 0.34, 6), g.standard_normal((6, 4)), \
        g.uniform(0.8, 1.3, 6), g.standard_normal((6, 4))
    c = np.linspace(-1, 1, 4)
    own = np.array([[float(j == i % 4) for j in range(4)] for i in range(6)])
    assert np.allclose(p["E"], E, rtol=1e-14, atol=0)
    assert np.allclose(p["alpha"], a[:, None] * np.exp(0.7 * (0.25 * c + 0.05 * z)), rtol=1e-13, atol=0)
    assert np.allclose(p["theta"], (np.log(s) - 2 * 3 / 4)[:, None] + 2 * (1 - own) + 0.1 * z2, rtol=0, atol=1e-13)


def test_planted_law_is_deterministic_and_drift_changes_only_alpha():
    a, b = planted_law(rng=3), planted_law(rng=3)
    for k in ("E", "theta", "alpha"):
        assert np.array_equal(a.params_[k], b.params_[k])
    c = planted_law(rng=3, drift=2.0)
    assert np.array_equal(a.params_["E"], c.params_["E"]) and np.array_equal(a.params_["theta"], c.params_["theta"])
    assert not np.allclose(a.params_["alpha"], c.params_["alpha"])
    # the log-exponents' spread across domains is proportional to drift (the same draws underneath)
    la, lc = np.log(a.params_["alpha"]), np.log(c.params_["alpha"])
    assert np.allclose(lc - lc[:, :1], 2.0 * (la - la[:, :1]), rtol=1e-12, atol=1e-14)


def test_drift_zero_is_separable(sample):
    law = planted_law(rng=0, drift=0.0)
    alpha = law.params_["alpha"]
    assert np.allclose(alpha, alpha[:, :1], rtol=1e-15, atol=0)
    # separable: at fixed N the size factor multiplies each set's reducible loss by the same number for every
    # mixture, so log(L_i - E_i) changes with size by one constant per set
    p = law.params_
    R = sample[:50]
    d = np.log(_camel(p, law.reference_size_, np.full(50, 1e9), R) - p["E"]) \
        - np.log(_camel(p, law.reference_size_, np.full(50, 1e7), R) - p["E"])
    assert np.allclose(d, d[:1], rtol=0, atol=1e-12)


def test_the_planted_optimum_moves_with_size(sample):
    law = planted_law(rng=0)
    sizes = [1.2e7, 1.2e8, 1.2e9, 1.2e10]
    best = np.array([_best(law, n, sample)[0] for n in sizes])
    # the share of the large-exponent domains grows with size (c_j weighted by the best mixture)
    c = np.linspace(-1, 1, 5)
    tilt = best @ c
    assert np.all(np.diff(tilt) > 0.1), tilt
    assert best[0, 0] > 0.3 and best[-1, 0] < 0.05       # the small-exponent domain leaves
    assert best[0, -1] < 0.05 and best[-1, -1] > 0.5     # the large-exponent domain takes over
    assert np.abs(best[0] - best[2]).sum() > 1.0
    # the mixture that is best at the smallest fitting size is clearly worse at the target (regret)
    r_small = best[0]
    _, F_target = _best(law, 1.2e9, sample)
    F_small = _camel(law.params_, law.reference_size_, [1.2e9], r_small[None]).mean()
    assert F_small - F_target.min() > 0.05
    # and the documented optima (M = V = 5, rng=0; to the resolution of 1e5 sampled mixtures)
    assert np.allclose(best[0], [0.417, 0.307, 0.149, 0.127, 0.0], atol=0.05)
    assert np.allclose(best[2], [0.0, 0.076, 0.028, 0.309, 0.587], atol=0.05)


def test_larger_drift_moves_the_optimum_further(sample):
    moves = []
    for drift in (0.0, 0.5, 1.0):
        law = planted_law(rng=0, drift=drift)
        moves.append(np.abs(_best(law, 1.2e7, sample)[0] - _best(law, 1.2e9, sample)[0]).sum())
    assert moves[0] < moves[1] < moves[2], moves


def test_noise_free_runs_are_the_law():
    law = planted_law(rng=1)
    R = np.random.default_rng(2).dirichlet(np.ones(5), 7)
    sizes = np.array([1.2e7, 3e7, 1.5e8])
    X, y = simulate_runs(law, sizes, R, noise=0.0, rng=0)
    assert X.shape == (21, 6) and y.shape == (21, 5)
    assert np.array_equal(X[:, 0], np.repeat(sizes, 7))                 # size-major
    assert np.allclose(X[:, 1:], np.tile(R, (3, 1)), rtol=0, atol=1e-15)
    assert np.allclose(y, law.predict(X), rtol=1e-15, atol=0)
    assert np.allclose(y, _camel(law.params_, law.reference_size_, X[:, 0], X[:, 1:]), rtol=1e-12, atol=0)


def test_integer_mixtures_are_dirichlet_draws_from_rng():
    law = planted_law(3, 2, rng=1)
    X, y = simulate_runs(law, [1e7, 1e8], 4, noise=0.0, rng=9)
    R = np.random.default_rng(9).dirichlet(np.ones(3), 4)               # drawn first, from rng
    assert np.allclose(X[:4, 1:], R, rtol=0, atol=1e-15) and np.allclose(X[4:, 1:], R, rtol=0, atol=1e-15)
    X2, y2 = simulate_runs(law, [1e7, 1e8], 4, noise=1e-3, rng=9)
    assert np.array_equal(X, X2)
    X3, y3 = simulate_runs(law, [1e7, 1e8], 4, noise=1e-3, rng=9)
    assert np.array_equal(y2, y3)                                       # deterministic for an int rng


def test_noise_is_log_normal_with_the_given_log_std():
    law = planted_law(rng=4)
    sigma = 2e-3
    X, y = simulate_runs(law, np.geomspace(1e7, 1e9, 8), 500, noise=sigma, rng=5)
    z = np.log(y / law.predict(X)).ravel()                              # 20,000 independent log errors
    n = z.size
    assert abs(z.mean()) < 5 * sigma / np.sqrt(n)
    assert abs(z.std(ddof=1) - sigma) < 5 * sigma / np.sqrt(2 * (n - 1))
    # independent across validation sets and runs
    Z = z.reshape(-1, 5)
    corr = np.corrcoef(Z.T)
    assert np.max(np.abs(corr - np.eye(5))) < 5 / np.sqrt(len(Z))
    # and normal: the fourth standardised moment is 3
    k = np.mean((z - z.mean()) ** 4) / z.var() ** 2
    assert abs(k - 3) < 5 * np.sqrt(24 / n)


def test_a_scalar_size_and_renormalised_mixtures():
    law = planted_law(3, 2, rng=1)
    X, y = simulate_runs(law, 5e7, [[0.2, 0.3, 0.5 + 5e-7], [1.0, 0.0, 0.0]], noise=0.0)
    assert X.shape == (2, 4) and np.allclose(X[:, 1:].sum(axis=1), 1.0, rtol=0, atol=1e-15)


class _TokenLaw:
    """A tiny law that reads tokens (column 1): L = 2 + N^-0.1 + D^-0.1 + r_0."""

    n_domains_ = 2
    n_outputs_ = 1
    uses_tokens_ = True

    def predict(self, X):
        X = np.asarray(X)
        return 2 + X[:, 0] ** -0.1 + X[:, 1] ** -0.1 + X[:, 2]


def test_tokens_per_size_for_a_law_that_reads_them():
    law = _TokenLaw()
    X, y = simulate_runs(law, [1e7, 1e8], [[0.5, 0.5], [0.1, 0.9], [1.0, 0.0]], tokens=[2e9, 2e10], noise=0.0)
    assert X.shape == (6, 4)
    assert np.array_equal(X[:, 1], np.repeat([2e9, 2e10], 3))
    assert np.allclose(y, 2 + X[:, 0] ** -0.1 + X[:, 1] ** -0.1 + X[:, 2], rtol=1e-15, atol=0)
    X, _ = simulate_runs(law, [1e7, 1e8], 2, tokens=5e9, rng=0)
    assert np.all(X[:, 1] == 5e9)
    with pytest.raises(ValueError, match="`tokens` is required"):
        simulate_runs(law, [1e7], 2)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(model_sizes=[1e7, -1.0]), ValueError, "`model_sizes`"),
    (dict(model_sizes=[]), ValueError, "`model_sizes`"),
    (dict(model_sizes=[[1e7]]), ValueError, "`model_sizes`"),
    (dict(mixtures=np.full((2, 4), 0.25)), ValueError, "`mixtures` must have one column"),
    (dict(mixtures=[[0.5, 0.4, 0.0, 0.0, 0.0]]), ValueError, "`mixtures` rows must sum to 1"),
    (dict(mixtures=[[1.5, -0.5, 0.0, 0.0, 0.0]]), ValueError, "`mixtures` must be finite and >= 0"),
    (dict(mixtures=0), ValueError, "`mixtures`"),
    (dict(mixtures=True), TypeError, "`mixtures`"),
    (dict(noise=-1e-3), ValueError, "`noise`"),
    (dict(tokens=1e9), ValueError, "`tokens` was given"),
    (dict(law="camel"), TypeError, "`law` must be a fitted mixture law"),
])
def test_simulate_runs_refuses_bad_input(kwargs, error, match):
    args = dict(law=planted_law(rng=0), model_sizes=[1e7, 1e8], mixtures=3)
    args.update(kwargs)
    law = args.pop("law")
    with pytest.raises(error, match=match):
        simulate_runs(law, args.pop("model_sizes"), args.pop("mixtures"), **args)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(n_domains=1), ValueError, "`n_domains`"),
    (dict(n_outputs=0), ValueError, "`n_outputs`"),
    (dict(n_domains=2.5), TypeError, "`n_domains`"),
    (dict(reference_size=0.0), ValueError, "`reference_size`"),
    (dict(drift=-0.1), ValueError, "`drift`"),
    (dict(drift=1e308), ValueError, "`drift`"),
    (dict(rng="x"), TypeError, "`rng`"),
])
def test_planted_law_refuses_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        planted_law(**kwargs)


@pytest.mark.parametrize("M,V", [(3, 40), (40, 2)])
def test_memory_estimate_counts_the_outputs(monkeypatch, M, V):
    import tracemalloc

    import numtk.mixture._simulate as sim

    law = planted_law(M, V, rng=0)
    seen = {}
    real = sim.check_size

    def spy(count, per_item, name):
        seen["need"] = count * per_item
        return real(count, per_item, name)

    monkeypatch.setattr(sim, "check_size", spy)
    tracemalloc.start()
    try:
        simulate_runs(law, np.geomspace(1e7, 2e8, 5), 400, noise=0.01, rng=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen["need"] >= peak              # y is (runs, V): 3 domains and 40 outputs was under-counted 12 times


def test_too_many_runs_are_refused_naming_mixtures(monkeypatch):
    import numtk._lib._validation as val

    monkeypatch.setattr(val, "available_memory", lambda: 2**20)
    with pytest.raises(ValueError, match="`mixtures`"):
        simulate_runs(planted_law(3, 40, rng=0), np.geomspace(1e7, 2e8, 5), 400, noise=0.01, rng=0)
