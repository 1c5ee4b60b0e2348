"""ScoreBasedSampler: estimators, integrators, the Hermite-driven control, workers, errors."""

import math
import warnings

import numpy as np
import pytest

from numtk.sampling import ScoreBasedSampler, as_target, gaussian, gaussian_mixture, mmd


@pytest.fixture(scope="module")
def fitted():
    target = gaussian(mean=[0.8, -0.3], cov=[0.6, 1.4])
    sampler = ScoreBasedSampler(target, solver="bsde", n_steps=25, degree=11, refine=0, rng=0,
                                design_samples=target.sample(3000, rng=1)).fit()
    return target, sampler


def test_shapes_and_fitted_attributes(fitted):
    target, sampler = fitted
    X, logw = sampler.sample(300, rng=0, return_log_weights=True)
    assert X.shape == (300, 2) and logw.shape == (300,)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(logw))
    assert sampler.n_features_in_ == 2 and len(sampler.times_) == 26
    assert 0 < sampler.ess(n=2000, rng=1) <= 1
    # same rng, same paths
    np.testing.assert_array_equal(sampler.sample(50, rng=7), sampler.sample(50, rng=7))


def test_standard_error_matches_the_bootstrap(fitted):
    """The delta-method SE sqrt((1/ESS - 1)/n) agrees with a bootstrap of log Z^ within 20%."""
    from scipy.special import logsumexp

    _, sampler = fitted
    est = sampler.log_Z(n=4000, rng=2)
    _, logw = sampler.sample(4000, rng=2, return_log_weights=True)
    assert est.value == pytest.approx(logsumexp(logw) - math.log(4000), abs=1e-12)
    rng = np.random.default_rng(0)
    boot = [logsumexp(logw[rng.integers(0, 4000, 4000)]) - math.log(4000) for _ in range(400)]
    assert est.stderr == pytest.approx(np.std(boot), rel=0.2)
    assert est.elbo == pytest.approx(np.mean(logw), abs=1e-12)


def test_euler_integrator_is_still_unbiased(fitted):
    target, _ = fitted
    sampler = ScoreBasedSampler(target, solver="bsde", integrator="euler", n_steps=25, degree=11, refine=0,
                                rng=0, design_samples=target.sample(3000, rng=1)).fit()
    est = sampler.log_Z(n=20000, rng=3)
    assert abs(est.value - target.log_Z) < 4 * est.stderr + 5e-3


def test_workers_callable_map(fitted):
    target, sampler = fitted
    est = sampler.log_Z(n=4000, rng=4, workers=map)
    assert est.n == 4000
    assert abs(est.value - target.log_Z) < 5 * est.stderr + 1e-2
    assert sampler.sample(3000, rng=5, workers=map).shape == (3000, 2)


def test_hermite_driven_sampler_on_a_mixture():
    """solver='hermite': the exact OU propagation of the Hermite coefficients drives the paths."""
    target = gaussian_mixture(means=[[-1.5], [1.5]], covs=[0.3, 0.3], weights=[0.3, 0.7])
    sampler = ScoreBasedSampler(target, solver="hermite", loc=0.0, scale=1.0, rng=0).fit()
    assert sampler.solution_.method == "hermite"
    assert sampler.solution_.log_Z_value == pytest.approx(target.log_Z, abs=1e-10)
    est = sampler.log_Z(n=20000, rng=1)
    assert abs(est.value - target.log_Z) < 4 * est.stderr + 5e-3
    assert est.ess > 0.9


def test_non_finite_controls_fall_back_to_the_reference_drift(fitted):
    target, sampler = fitted
    control = sampler._control
    real = control._grad

    def broken(y, k):
        g = real(y, k)
        g[::7] = np.inf
        return g

    control._grad = broken
    try:
        before = control.n_fallback
        X, logw = sampler.sample(700, rng=0, return_log_weights=True)
        assert np.all(np.isfinite(X)) and np.all(np.isfinite(logw))
        assert control.n_fallback - before == 100 * 25
    finally:
        control._grad = real


def test_errors(fitted):
    target, sampler = fitted
    with pytest.raises(Exception, match="fit"):
        ScoreBasedSampler(target).sample(10)
    with pytest.raises(ValueError, match="solver"):
        ScoreBasedSampler(target, solver="mcmc").fit()
    with pytest.raises(ValueError, match="integrator"):
        ScoreBasedSampler(target, integrator="rk4").fit()
    with pytest.raises(ValueError, match="n"):
        sampler.sample(0)
    with pytest.raises(ValueError, match="target"):
        ScoreBasedSampler(gaussian(mean=[0.0], cov=[[1.0]]).log_density).fit()


def test_steep_controls_are_tamed_and_weights_stay_exact():
    """A frozen steep control (slope 1e3) would make explicit steps explode; the tamed step keeps every path
    finite (the weights follow the kernel actually sampled; unbiasedness for any control is tested above)."""
    from numtk.sampling import time_grid
    from numtk.sampling._paths import _tame, simulate_paths

    g = np.array([[1e6, 0.0], [np.nan, 1.0], [0.1, 0.1]])
    y = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]])
    t = _tame(g, y, 0.1)
    np.testing.assert_allclose(0.1 * np.linalg.norm(t[0]), 6.0)   # capped at 1 + |y|
    np.testing.assert_array_equal(t[1], [0.0, 0.0])               # non-finite row -> reference drift
    np.testing.assert_array_equal(t[2], g[2])                     # untouched in the bulk

    target = gaussian(mean=[0.5], cov=[[0.5]])
    rng = np.random.default_rng(0)
    Y, logw = simulate_paths(lambda y, n: -1e3 * y, time_grid(3.0, 20), target.log_density, 2000, rng, dim=1)
    assert np.all(np.isfinite(Y)) and np.all(np.isfinite(logw))
    assert np.max(np.abs(Y)) < 50


# ---------------------------------------------------------------------------------------------------------
# non-product targets, seen only as callables: the sampler must not rely on a target being a product

def _median_score_error(sampler, exact, taus_steps, n=2000, seed=5):
    """Median relative error of the fitted control against the exact noised score on noised exact samples."""
    sol = sampler.solution_
    rng = np.random.default_rng(seed)
    X0 = exact.sample(n, rng=rng)
    out = []
    for k in taus_steps:
        tau = sol.times[-1] - sol.times[k]
        a, s = math.exp(-tau), math.sqrt(-math.expm1(-2.0 * tau))
        Y = a * X0 + s * rng.standard_normal(X0.shape)
        g_exact = exact.noised_score(Y, tau) + Y  # grad W = grad log rho_tau + y
        g_fit = sol.W[k].gradient(Y)
        out.append(float(np.median(np.linalg.norm(g_fit - g_exact, axis=1) / (1 + np.linalg.norm(g_exact, axis=1)))))
    return np.array(out)


def test_rotated_anisotropic_gaussian_without_exact_samples():
    rng = np.random.default_rng(7)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    cov = q @ np.diag([0.5, 0.8, 1.2, 1.6]) @ q.T
    mean = np.array([0.5, -0.5, 1.0, 0.0])
    exact = gaussian(mean=mean, cov=cov)
    user = as_target(exact.log_density, dim=4)   # no exact samples, no product structure
    sampler = ScoreBasedSampler(user, n_steps=40, degree=15, refine=1, rng=0).fit()
    # the terminal W = log rho + |y|^2 / 2 of a rotated Gaussian has ranks above 2
    assert max(sampler.solution_.W[-1].ranks_) >= 3
    errs = _median_score_error(sampler, exact, (0, 10, 20, 30, 39))
    assert np.all(errs < 0.05), errs
    est = sampler.log_Z(n=20000, rng=1)
    assert abs(est.value - exact.log_Z) < 4 * est.stderr + 5e-3
    assert est.ess > 0.9
    X, logw = sampler.sample(20000, rng=2, return_log_weights=True)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    m = w @ X
    C = (X - m).T @ ((X - m) * w[:, None])
    assert np.all(np.abs(m - mean) < 4 * np.sqrt(np.diag(cov) / (20000 * est.ess)))
    np.testing.assert_allclose(C, cov, atol=0.06)


def test_mixture_with_unequal_weights_and_widths_without_exact_samples():
    # three modes: axis-aligned anisotropic, rotated and narrow, isotropic and narrow (std 0.22)
    def rot(a):
        return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])

    covs = [np.diag([0.6, 0.15]), rot(0.7) @ np.diag([1.0, 0.1]) @ rot(0.7).T, np.diag([0.05, 0.05])]
    exact = gaussian_mixture(means=[[-2.0, 0.5], [1.5, 1.0], [0.5, -2.0]], covs=covs, weights=[0.5, 0.35, 0.15])
    user = as_target(exact.log_density, dim=2)
    # measured (rng 0 / 1 / 2): ESS 0.80 / 0.80 / 0.75, |dlogZ| <= 0.006 (SE 0.004), MMD^2 7e-4 - 9e-4,
    # score errors <= 0.056; with degree 31 rng 1 reached only ESS 0.06 (the narrow modes under-resolved)
    sampler = ScoreBasedSampler(user, n_steps=60, degree=63, refine=1, rng=0).fit()
    errs = _median_score_error(sampler, exact, (0, 20, 40, 55, 60))
    assert np.all(errs < 0.1), errs
    est = sampler.log_Z(n=20000, rng=1)
    assert abs(est.value - exact.log_Z) < 4 * est.stderr + 0.01
    assert est.ess > 0.5
    X = sampler.sample(3000, rng=2)
    Y = exact.sample(3000, rng=3)
    assert mmd(X, Y) < 5e-3
    # each mode gets its weight: nearest-mean assignment of the unweighted samples
    means = np.array([[-2.0, 0.5], [1.5, 1.0], [0.5, -2.0]])
    lab = np.argmin(((X[:, None, :] - means) ** 2).sum(-1), axis=1)
    lab_exact = np.argmin(((Y[:, None, :] - means) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(np.bincount(lab, minlength=3) / 3000, np.bincount(lab_exact, minlength=3) / 3000,
                               atol=0.04)


# ---------------------------------------------------------------------------------------------------------
# the literature's benchmark targets against exact samples (|dlog Z| and MMD^2; slow, run in CI)

def _fit_and_compare(target, seed=0, **kw):
    """(estimate, MMD^2 of 2000 unweighted samples against 2000 exact ones)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sampler = ScoreBasedSampler(target, rng=seed, **kw).fit()
        est = sampler.log_Z(10000, rng=seed + 1)
    return est, mmd(sampler.sample(2000, rng=seed + 2), target.sample(2000, rng=seed + 3))


@pytest.mark.slow
def test_25gmm_and_a_double_well_against_exact_samples():
    # measured (seed 0): 25-GMM +0.034 +- 0.029, ESS 0.11, MMD^2 0.018 (the unweighted samples; exact against
    # exact 1e-4), 28 s; double well d = 10 (m = 3, delta = 2) +0.013 +- 0.013, ESS 0.36, MMD^2 0.0012, 28 s.
    # DDS / PIS report 1.76 / 1.80 on the 25-GMM. The 25-GMM needs no refinement round: without it, seeds 0-4
    # gave |dlog Z| at most 0.19 of the bound and MMD^2 0.015-0.019 (as with the round). The double well does
    # need it: without, seed 1 had MMD^2 0.020 and seed 3 missed log Z by 446
    from numtk.sampling import double_well

    gmm = gaussian_mixture(name="25gmm")
    est, m2 = _fit_and_compare(gmm, n_steps=100, degree=63, refine=0)
    assert abs(est.value - gmm.log_Z) < 5 * est.stderr + 0.05
    assert m2 < 0.04
    dw = double_well(10, 3, 2.0)
    est, m2 = _fit_and_compare(dw, n_steps=60, refine=1)
    assert abs(est.value - dw.log_Z) < 5 * est.stderr + 0.02
    assert m2 < 0.005


@pytest.mark.slow
def test_gmm40_against_exact_samples():
    # 40 unit-variance modes over [-40, 40]^2, the --sampling-hard settings with 50 steps: measured +0.018 +-
    # 0.031, ESS 0.094, ELBO gap 1.8, MMD^2 0.0048 (exact against exact 3e-4), 173 s
    gmm = gaussian_mixture(name="gmm40")
    est, m2 = _fit_and_compare(gmm, n_steps=50, refine=1, degree=127, scale=12.0,
                               options=dict(max_rank=16, terminal_sweeps=30))
    assert abs(est.value - gmm.log_Z) < min(5 * est.stderr + 0.1, 0.3)
    assert m2 < 0.015
