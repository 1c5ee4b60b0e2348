"""recovery_bound: Monte Carlo validity, non-vacuity at low noise, monotonicity, validation.

The bound is checked against STAGE itself on curves of known length and curvature (make_curve): the
mean |tau| over replications must be at least the bound in every setting (no Monte Carlo margin is
granted: the check is made against the mean, and the bound is far below the observed values), and the
bound must be well above 0 in the low-noise settings.
"""

import math

import numpy as np
import pytest

from numtk.seriation import make_curve, order_agreement, stage
from numtk.seriation._bound import recovery_bound

# Curvature of the make_curve defaults: line 0, arc of radius 1, helix of radius a = 1.5 and pitch
# c = 16.4 / (2 pi * 2 turns): kappa = a / (a^2 + c^2).
_C = 16.4 / (4 * math.pi)
KAPPA = {"line": 0.0, "arc": 1.0, "helix": 1.5 / (1.5 ** 2 + _C ** 2)}
K, KP = 15, 45
REPS = 3


def _length(kind):
    return make_curve(kind, 10, 3, 0.0, rng=0, return_info=True)[2].length


@pytest.mark.parametrize("kind", ["line", "arc", "helix"])
@pytest.mark.parametrize("n", [1000, 2000])
def test_bound_holds_and_is_informative(kind, n):
    ell = _length(kind)
    for rel_noise in (0.0003, 0.001, 0.01, 0.05):
        sigma = rel_noise * ell
        taus, graph_bounds = [], []
        for rep in range(REPS):
            X, t = make_curve(kind, n, 3, sigma, rng=1000 * rep + n)
            fit = stage(X, n_neighbors=K, tangent_neighbors=KP)
            taus.append(order_agreement(fit.order, t))
            graph_bounds.append(recovery_bound(fit, X, length=ell, noise=sigma, curvature=KAPPA[kind]).tau_lower)
        res = recovery_bound(n_samples=n, length=ell, noise=sigma, curvature=KAPPA[kind], n_features=3,
                             n_neighbors=K, tangent_neighbors=KP)
        observed = float(np.mean(taus))
        # (1) the bound holds: mean |tau| >= lower bound (explicit inputs, and from each fitted graph)
        assert observed >= res.tau_lower, (kind, n, rel_noise, observed, res.tau_lower)
        assert observed >= max(graph_bounds), (kind, n, rel_noise, observed, graph_bounds)
        assert res.tau_lower <= 1 - res.terms["noise"] + 1e-15
        # (2) not vacuous at the lowest noise
        if rel_noise == 0.0003:
            assert res.valid
            assert res.tau_lower > 0.25, (kind, n, res.tau_lower)
            assert min(graph_bounds) > 0.25, (kind, n, graph_bounds)


def test_noise_term_is_the_first_order_noise_floor():
    # uniform sampling: exact E[1 - tau] = 4 r / sqrt(pi) - 2 r^2 + ..., r = sigma / ell (spec B1.5)
    res = recovery_bound(n_samples=2000, length=2.0, noise=0.02, curvature=0.0, n_features=3,
                         n_neighbors=15, tangent_neighbors=45)
    assert res.terms["noise"] == pytest.approx(4 * 0.01 / math.sqrt(math.pi), rel=1e-12)
    assert res.bound == pytest.approx(sum(res.terms.values()))
    assert res.tau_lower_unclipped == pytest.approx(1 - res.bound)
    assert 0.0 <= res.tau_lower <= 1.0


BASE = dict(n_samples=2000, length=25.0, noise=0.01, curvature=0.4, n_features=3, n_neighbors=30,
            tangent_neighbors=90)


def _bound(**kw):
    return recovery_bound(**{**BASE, **kw}).bound


def test_monotone_in_noise_and_curvature():
    noises = [0.0, 0.001, 0.003, 0.01, 0.03]
    b = [_bound(noise=s) for s in noises]
    assert all(x < y for x, y in zip(b, b[1:])), b
    curv = [0.0, 0.1, 0.2, 0.4, 0.8]
    b = [_bound(curvature=c) for c in curv]
    assert all(x < y for x, y in zip(b, b[1:])), b
    d = [_bound(n_features=m) for m in (2, 3, 10, 50)]
    assert all(x < y for x, y in zip(d, d[1:])), d


def test_improves_with_n_at_fixed_arc_length_scales():
    # neighbourhoods of fixed arc length: k and k_p proportional to n
    b = [_bound(n_samples=n, n_neighbors=15 * n // 1000, tangent_neighbors=45 * n // 1000)
         for n in (1000, 2000, 4000, 8000)]
    assert all(x > y for x, y in zip(b, b[1:])), b


def test_connectivity_and_density():
    lam = 1e-4
    b = [recovery_bound(**BASE, fiedler_value=f, total_weight=1e4).bound for f in (lam, 2 * lam, 4 * lam)]
    assert b[0] > b[1] > b[2]
    b_uni = _bound()
    assert _bound(density_max=2 / 25.0) > b_uni
    assert _bound(density_min=0.5 / 25.0) > b_uni


def test_invalid_when_sync_fails_and_confidence_form():
    res = recovery_bound(**{**BASE, "noise": 0.5})
    assert not res.valid and res.terms["sync"] == 2.0 and res.tau_lower == 0.0
    r_exp = recovery_bound(**BASE)
    r_hp = recovery_bound(**BASE, confidence=0.9)
    assert r_hp.bound > r_exp.bound and "deviation" in r_hp.terms
    assert recovery_bound(**BASE, confidence=0.99).bound > r_hp.bound


def test_explicit_errors_override_heuristics():
    res = recovery_bound(**BASE, tangent_error=0.0, edge_error=0.0)
    assert res.terms["solve"] == 0.0 and res.valid
    assert res.bound == pytest.approx(res.terms["noise"])


@pytest.mark.parametrize("kw, exc, name", [
    (dict(length=0.0), ValueError, "length"),
    (dict(length=-1.0), ValueError, "length"),
    (dict(noise=-0.1), ValueError, "noise"),
    (dict(noise=float("nan")), ValueError, "noise"),
    (dict(curvature=-1.0), ValueError, "curvature"),
    (dict(n_samples=2), ValueError, "n_samples"),
    (dict(n_samples=10.5), TypeError, "n_samples"),
    (dict(n_features=0), ValueError, "n_features"),
    (dict(n_neighbors=0), ValueError, "n_neighbors"),
    (dict(tangent_neighbors=1), ValueError, "tangent_neighbors"),
    (dict(density_max=0.5 / 25.0), ValueError, "density_max"),
    (dict(density_min=2 / 25.0), ValueError, "density_min"),
    (dict(confidence=1.0), ValueError, "confidence"),
    (dict(tangent_error=2.0), ValueError, "tangent_error"),
    (dict(edge_error=-1.0), ValueError, "edge_error"),
    (dict(fiedler_value=1e-3), ValueError, "total_weight"),
    (dict(fiedler_value=0.0, total_weight=1.0), ValueError, "fiedler_value"),
    (dict(bandwidth=0.0), ValueError, "bandwidth"),
    (dict(length="1"), TypeError, "length"),
])
def test_validation_names_the_parameter(kw, exc, name):
    with pytest.raises(exc, match=f"`{name}`"):
        recovery_bound(**{**BASE, **kw})


def test_missing_inputs():
    with pytest.raises(ValueError, match="n_samples"):
        recovery_bound(length=1.0, noise=0.0, curvature=0.0, n_features=3, n_neighbors=10, tangent_neighbors=30)
    with pytest.raises(ValueError, match="tangent_neighbors"):
        recovery_bound(n_samples=100, length=1.0, noise=0.0, curvature=0.0, n_features=3, n_neighbors=10)
    with pytest.raises(ValueError, match="n_neighbors"):
        recovery_bound(n_samples=100, length=1.0, noise=0.0, curvature=0.0, n_features=3, tangent_neighbors=30)
    with pytest.raises(TypeError, match="result"):
        recovery_bound(object(), length=1.0, noise=0.0, curvature=0.0)
    with pytest.raises(ValueError, match="X"):
        recovery_bound(None, np.zeros((5, 2)), n_samples=100, length=1.0, noise=0.0, curvature=0.0)


def test_bound_counts_the_points_a_thinned_tangent_is_fitted_to():
    """A tangent fitted to fewer points (thinned neighbourhoods) has a larger noise term: never a tighter bound."""
    from numtk.seriation import make_curve, recovery_bound, stage

    X, t = make_curve("helix", 600, 10, noise=0.01, rng=0)
    fit = stage(X, n_neighbors=10, tangent_neighbors=60, rng=0)
    fit.tangent_fit_points = fit.tangent_neighbors
    full = recovery_bound(fit, X, length=1.0, noise=0.01, curvature=1.0)
    fit.tangent_fit_points = 20
    thin = recovery_bound(fit, X, length=1.0, noise=0.01, curvature=1.0)
    assert thin.bound > full.bound and thin.tau_lower <= full.tau_lower
