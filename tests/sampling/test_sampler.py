"""ScoreBasedSampler: estimators, integrators, the Hermite-driven control, workers, errors."""

import math

import numpy as np
import pytest

from numtk.sampling import ScoreBasedSampler, gaussian, gaussian_mixture


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
    from numtk.sampling._sampler import _tame, simulate_paths

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
