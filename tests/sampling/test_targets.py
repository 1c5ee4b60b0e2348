"""Targets of numtk.sampling: log Z, pinned noised values (spec §4.1, §4.2), mass conservation,
scores, exact samples, Hermite coefficient trains, validation and callables."""

import math

import numpy as np
import pytest
from reference import sampling_targets as ref
from scipy import stats

from numtk.sampling import Target, as_target, double_well, funnel, gaussian, gaussian_mixture, many_well
from numtk.sampling._product_targets import _double_well_factor, _many_well_factor

MW = lambda y: -y**4 + 6 * y**2 + 0.5 * y  # noqa: E731
DW4 = lambda y: -(y**2 - 4.0) ** 2  # noqa: E731


# ---------------------------------------------------------------------------------------------------------
# log Z

def test_log_Z_pins():
    assert many_well(32).log_Z == pytest.approx(164.69567531318188, abs=1e-11)
    assert math.exp(_many_well_factor().log_Z) == pytest.approx(11784.509265127823, rel=1e-13)
    assert double_well(5, 5, 4.0).log_Z == pytest.approx(-0.5410555128794535, abs=1e-12)
    assert double_well(50, 5, 2.0).log_Z == pytest.approx(42.81724267753066, abs=1e-11)
    assert ref.log_Z_1d(MW) == pytest.approx(_many_well_factor().log_Z, abs=1e-12)
    assert ref.log_Z_1d(DW4) == pytest.approx(_double_well_factor(4.0).log_Z, abs=1e-12)


@pytest.mark.parametrize("name", ["25gmm", "9gmm", "gmm40"])
def test_gmm_log_Z_by_grid(name):
    tgt = gaussian_mixture(name=name)
    (a, b), (c, d) = tgt.bounds
    xs, ys = np.linspace(a, b, 701), np.linspace(c, d, 701)
    X = np.stack(np.meshgrid(xs, ys, indexing="ij"), -1).reshape(-1, 2)
    vals = np.exp(tgt.log_density(X)).reshape(len(xs), len(ys))
    Z = np.trapezoid(np.trapezoid(vals, ys, axis=1), xs)
    assert Z == pytest.approx(math.exp(tgt.log_Z), rel=1e-6)


def test_gaussian_log_Z_importance_sampling():
    A = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 0.5]])
    tgt = gaussian([0.5, -1.0, 2.0], A)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200000, 3)) * 2.0
    logq = stats.norm.logpdf(X, scale=2.0).sum(1)
    w = np.exp(tgt.log_density(X) - logq)
    se = w.std() / math.sqrt(len(w))
    assert abs(w.mean() - math.exp(tgt.log_Z)) < 4 * se
    assert tgt.log_Z == pytest.approx(0.5 * np.linalg.slogdet(2 * np.pi * A)[1], abs=1e-13)


def test_gmm40_table_and_definition():
    tgt = gaussian_mixture(name="gmm40")
    m = tgt.params["means"]
    assert m.shape == (40, 2) and np.all(np.abs(m) <= 40)
    assert np.allclose(tgt.params["covs"], math.log1p(math.e) ** 2)
    assert tgt.log_Z == 0.0
    x = np.array([[0.0, 0.0], [10.0, -5.0], [30.0, 33.0]])
    expected = ref.gmm_log_density(x, m, np.full((40, 2), 1.3132616875182228**2), np.full(40, 1 / 40))
    np.testing.assert_allclose(tgt.log_density(x), expected, rtol=1e-12)


def test_gmm40_regenerated_with_torch():
    torch = pytest.importorskip("torch")
    g = torch.Generator()
    g.manual_seed(42)
    loc = ((torch.rand((40, 2), generator=g) - 0.5) * 2 * 40).double().numpy()
    np.testing.assert_array_equal(gaussian_mixture(name="gmm40").params["means"], loc)


# ---------------------------------------------------------------------------------------------------------
# pinned noised values (spec §4.2)

@pytest.mark.parametrize("x, pins", [(0.0, (3.9716435632, 7.8456193691, 8.2982637683)),
                                     (1.0, (8.3402796626, 8.5096488947, 8.3210756952)),
                                     (-1.7, (7.2726549379, 6.4701577455, 6.3736712421))])
def test_many_well_factor_pins(x, pins):
    tgt = many_well(2)
    for tau, pin in zip((0.1, 0.5, 1.0), pins):
        # the odd coordinate is a standard Gaussian factor, invariant: log rho_tau(0) = 0
        assert tgt.log_noised_density([x, 0.0], tau) == pytest.approx(pin, abs=1e-9)


def test_double_well_factor_pins():
    tgt = double_well(1, 1, 4.0)
    np.testing.assert_allclose(tgt.log_noised_density([[0.0], [2.0]], 0.5), [-1.9210190799, -1.9989131801],
                               atol=1e-9)


def test_funnel_pins():
    tgt = funnel(10, 3.0)
    x = np.zeros((2, 10))
    x[1] = 0.5
    x[1, 0] = 1.0
    pins = {0.1: (-9.0339516062, -13.7563577829), 0.5: (-9.3398969731, -12.1533685981),
            1.0: (-9.6130427357, -11.7015120139)}
    for tau, p in pins.items():
        np.testing.assert_allclose(tgt.log_noised_density(x, tau), p, atol=1e-9)


@pytest.mark.parametrize("tau", [1e-6, 1e-3, 0.02, 0.3, 2.0])
def test_factor_noised_vs_dense_quadrature(tau):
    f = _many_well_factor()
    xs = np.array([-3.0, -1.7, 0.0, 0.8, 2.5, 4.0, 6.0])
    expected = [ref.log_noised_1d(MW, x, tau) for x in xs]
    np.testing.assert_allclose(f.noised(xs, tau, False), expected, atol=1e-9)


@pytest.mark.parametrize("tau", [1e-5, 0.01, 0.5])
def test_funnel_noised_vs_dense_quadrature(tau):
    tgt = funnel(10)
    pts = np.array([np.r_[-5.0, [1.0] * 9], np.r_[-3.0, [0.1] * 9], np.r_[4.0, [10.0] * 9]])
    expected = [ref.log_noised_funnel(p, tau) for p in pts]
    np.testing.assert_allclose(tgt.log_noised_density(pts, tau), expected, atol=1e-8)


# ---------------------------------------------------------------------------------------------------------
# mass conservation and scores

@pytest.mark.parametrize("tau", [0.0, 1e-3, 0.1, 0.5, 2.0])
def test_noised_factor_integrates_to_Z(tau):
    for logf, f in ((MW, _many_well_factor()), (DW4, _double_well_factor(4.0))):
        xs = np.linspace(-9, 9, 36001)
        vals = np.exp(f.noised(xs, tau, False)) if tau > 0 else np.exp(logf(xs))
        assert np.trapezoid(vals, xs) == pytest.approx(math.exp(f.log_Z), rel=1e-9)


@pytest.mark.parametrize("tau", [0.05, 0.7])
def test_noised_gmm_integrates_to_Z(tau):
    tgt = gaussian_mixture([[-1.0, 0.5], [2.0, 0.0]], covs=[[0.3, 0.5], [1.0, 0.2]], weights=[0.5, 2.0])
    xs = np.linspace(-9, 9, 601)
    X = np.stack(np.meshgrid(xs, xs, indexing="ij"), -1).reshape(-1, 2)
    vals = np.exp(tgt.log_noised_density(X, tau)).reshape(601, 601)
    assert np.trapezoid(np.trapezoid(vals, xs, axis=1), xs) == pytest.approx(2.5, rel=1e-8)


def test_gaussian_noised_closed_form():
    tgt = gaussian([1.0, -2.0], [[2.0, 0.4], [0.4, 0.5]])
    tau = 0.4
    a = math.exp(-tau)
    S = a * a * np.array([[2.0, 0.4], [0.4, 0.5]]) + (1 - a * a) * np.eye(2)
    x = np.array([[0.3, 0.1], [2.0, -1.0]])
    expected = tgt.log_Z + stats.multivariate_normal(a * np.array([1.0, -2.0]), S).logpdf(x)
    np.testing.assert_allclose(tgt.log_noised_density(x, tau), expected, rtol=1e-12)
    np.testing.assert_allclose(tgt.V(x, 1.0, T=1.4), expected, rtol=1e-12)


def _fd(f, x, h=1e-5):
    g = np.empty_like(x)
    for j in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[j] = h
        g[:, j] = (f(x + e) - f(x - e)) / (2 * h)
    return g


TARGETS = [lambda: gaussian([0.5, -1.0], [[1.0, 0.3], [0.3, 0.6]]), lambda: gaussian_mixture(name="9gmm"),
           lambda: gaussian_mixture(name="gmm40"), lambda: funnel(4), lambda: many_well(4),
           lambda: double_well(3, 2, 2.0)]


@pytest.mark.parametrize("make", TARGETS)
@pytest.mark.parametrize("tau", [0.0, 0.01, 0.3])
def test_scores_match_finite_differences(make, tau):
    tgt = make()
    rng = np.random.default_rng(1)
    X = tgt.sample(6, rng=rng) * 0.8
    g = tgt.noised_score(X, tau)
    fd = _fd(lambda z: tgt.log_noised_density(z, tau), X)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)
    if tau == 0.0:
        np.testing.assert_allclose(tgt.grad_log_density(X), _fd(tgt.log_density, X), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tgt.log_noised_density(X, 0.0), tgt.log_density(X))
    np.testing.assert_allclose(tgt.score(X, 1.0 - tau, T=1.0), g)


# ---------------------------------------------------------------------------------------------------------
# exact samples

def test_rejection_envelopes():
    for f in (_many_well_factor(), _double_well_factor(4.0), _double_well_factor(2.0)):
        assert f.envelope == 3.0
    assert _many_well_factor().sup_ratio == pytest.approx(2.59, abs=0.01)
    assert _double_well_factor(4.0).sup_ratio == pytest.approx(2.79, abs=0.01)
    assert _double_well_factor(2.0).sup_ratio == pytest.approx(2.64, abs=0.01)


@pytest.mark.parametrize("make, logf, coords", [(lambda: many_well(4), MW, (0, 2)),
                                                (lambda: double_well(3, 2, 4.0), DW4, (0, 1))])
def test_product_samples_ks(make, logf, coords):
    tgt = make()
    X = tgt.sample(4000, rng=3)
    cdf = ref.cdf_1d(logf)
    for j in coords:
        assert stats.kstest(X[:, j], cdf).pvalue > 1e-3
    gauss = [j for j in range(tgt.dim) if j not in coords]
    for j in gauss:
        assert stats.kstest(X[:, j], "norm").pvalue > 1e-3


def test_mixture_and_gaussian_sample_moments():
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    X = gaussian([1.0, -1.0], cov).sample(100000, rng=0)
    np.testing.assert_allclose(X.mean(0), [1.0, -1.0], atol=0.02)
    np.testing.assert_allclose(np.cov(X.T), cov, atol=0.03)
    tgt = gaussian_mixture([[-2.0], [3.0]], covs=[0.5, 1.5], weights=[1.0, 3.0])
    Y = tgt.sample(100000, rng=1)[:, 0]
    assert Y.mean() == pytest.approx(0.25 * -2 + 0.75 * 3, abs=0.03)
    assert np.mean(Y**2) == pytest.approx(0.25 * (4 + 0.5) + 0.75 * (9 + 1.5), abs=0.1)


def test_funnel_samples():
    X = funnel(5, 3.0).sample(20000, rng=2)
    assert stats.kstest(X[:, 0] / 3.0, "norm").pvalue > 1e-3
    assert stats.kstest(X[:, 1] * np.exp(-0.5 * X[:, 0]), "norm").pvalue > 1e-3


def test_bounds_hold_mass():
    for tgt in (many_well(32), double_well(5, 5, 4.0), gaussian_mixture(name="25gmm"), funnel(10)):
        X = tgt.sample(20000, rng=4)
        b = tgt.bounds
        assert b.shape == (tgt.dim, 2)
        assert np.all((X >= b[:, 0]) & (X <= b[:, 1]))


# ---------------------------------------------------------------------------------------------------------
# Hermite coefficient trains

def test_hermite_gaussian_moments_vs_gauss_hermite():
    from numtk.sampling._target_numerics import _hermite_gaussian_moments
    for mu, var in ((0.3, 0.5), (-1.2, 1.7), (2.0, 1.0)):
        mom = _hermite_gaussian_moments(mu, var, 12)
        np.testing.assert_allclose(mom, [ref.hermite_moment_gh(mu, var, k) for k in range(13)],
                                   rtol=1e-10, atol=1e-12)


def _contract(cores):
    out = cores[0]
    for c in cores[1:]:
        out = np.tensordot(out, c, axes=(-1, 0))
    return out.squeeze(axis=(0, -1))


@pytest.mark.parametrize("make, loc, scale", [(lambda: many_well(4), 0.3, 1.5), (lambda: double_well(3, 2, 4.0), 0.0, 2.0),
                                              (lambda: gaussian_mixture(name="25gmm"), 0.0, 5.0),
                                              (lambda: gaussian_mixture(name="gmm40"), 0.0, 16.0),
                                              (lambda: gaussian([0.5, 1.0, -1.0], [1.0, 2.0, 0.5]), 0.2, 1.3)])
def test_hermite_a0_is_Z(make, loc, scale):
    tgt = make()
    cores = tgt._hermite_tt(6, loc, scale)
    assert len(cores) == tgt.dim and cores[0].shape[0] == 1 and cores[-1].shape[-1] == 1
    a = _contract(cores)
    assert a[(0,) * tgt.dim] == pytest.approx(math.exp(tgt.log_Z) / scale**tgt.dim, rel=1e-12)


def test_hermite_rank():
    assert all(c.shape[0] == c.shape[2] == 1 for c in gaussian_mixture(name="25gmm")._hermite_tt(4))
    cores = gaussian_mixture(name="gmm40")._hermite_tt(4, 0.0, 16.0)
    assert [c.shape for c in cores] == [(1, 5, 40), (40, 5, 1)]
    mix = gaussian_mixture([[0.0, 0.0, 1.0], [1.0, -1.0, 0.0]], covs=[0.5, 1.0])
    assert [c.shape for c in mix._hermite_tt(3)] == [(1, 4, 2), (2, 4, 2), (2, 4, 1)]


def test_hermite_reconstruction_1d():
    tgt = gaussian([0.4], [1.5])  # variance < 2: the series converges in L2(gamma)
    a = tgt._hermite_tt(80)[0][0, :, 0]
    y = np.linspace(-2, 2, 9)
    c = a / np.sqrt([float(math.factorial(k)) for k in range(81)])
    series = np.polynomial.hermite_e.hermeval(y, c)
    target = np.exp(tgt.log_density(y[:, None]) - stats.norm.logpdf(y))
    np.testing.assert_allclose(series, target, rtol=1e-8)


def test_hermite_product_factor_vs_quadrature():
    tgt = many_well(2)
    a = tgt._hermite_tt(10, [0.1, 0.0], [1.2, 1.0])
    x = np.linspace(-5, 5, 200001)
    y = (x - 0.1) / 1.2
    for k in (0, 3, 7):
        c = np.zeros(k + 1)
        c[k] = 1 / math.sqrt(math.factorial(k))
        expected = np.trapezoid(np.exp(MW(x)) * np.polynomial.hermite_e.hermeval(y, c), x) / 1.2
        assert a[0][0, k, 0] == pytest.approx(expected, rel=1e-8, abs=1e-8 * abs(a[0][0, 0, 0]))


def test_no_hermite():
    for tgt in (funnel(3), gaussian([0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]])):
        assert not tgt.has_hermite
        with pytest.raises(NotImplementedError):
            tgt._hermite_tt(3)


# ---------------------------------------------------------------------------------------------------------
# validation, shapes and callables

def test_validation_errors():
    with pytest.raises(ValueError, match="cov"):
        gaussian([0.0, 0.0], [[1.0, 2.0], [2.0, 1.0]])
    with pytest.raises(ValueError, match="cov"):
        gaussian([0.0, 0.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="cov"):
        gaussian([0.0, 0.0], np.ones(3))
    with pytest.raises(ValueError, match="`d` must be even"):
        many_well(5)
    tgt = many_well(4)
    with pytest.raises(ValueError, match="`x`"):
        tgt.log_density(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="`x`"):
        tgt.log_density(np.zeros((2, 2, 4)))
    with pytest.raises(ValueError, match="`tau`"):
        tgt.log_noised_density(np.zeros(4), -0.1)
    with pytest.raises(ValueError, match="`t`"):
        tgt.V(np.zeros(4), 2.0, T=1.0)
    with pytest.raises(ValueError, match="`name`"):
        gaussian_mixture(name="nope")
    with pytest.raises(ValueError, match="`weights`"):
        gaussian_mixture([[0.0], [1.0]], weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="`m`"):
        double_well(3, 4, 1.0)
    with pytest.raises(ValueError, match="`delta`"):
        double_well(3, 2, 0.0)
    with pytest.raises(ValueError, match="`sigma`"):
        funnel(3, -1.0)


def test_single_point_shapes():
    tgt = funnel(3)
    assert np.ndim(tgt.log_density([0.0, 0.0, 0.0])) == 0
    assert tgt.noised_score([0.0, 0.1, 0.2], 0.3).shape == (3,)
    assert tgt.log_density(np.zeros((4, 3))).shape == (4,)


def test_from_callable_round_trip():
    def logp(x):
        return -0.5 * np.sum(x**2, axis=1)

    def grad(x):
        return -x

    tgt = Target.from_callable(logp, 2, grad_log_density=grad, log_Z=math.log(2 * math.pi),
                               bounds=[[-6, 6], [-6, 6]], name="std")
    X = np.random.default_rng(0).normal(size=(5, 2))
    np.testing.assert_allclose(tgt.log_density(X), gaussian([0.0, 0.0], 1.0).log_density(X), atol=1e-14)
    np.testing.assert_allclose(tgt.grad_log_density(X), -X)
    assert tgt.has_grad and not tgt.can_sample and not tgt.has_exact_noised
    with pytest.raises(NotImplementedError):
        tgt.sample(3)
    with pytest.raises(NotImplementedError):
        tgt.log_noised_density(X, 0.1)
    assert as_target(tgt) is tgt
    assert as_target(logp, dim=2).dim == 2
    with pytest.raises(ValueError, match="dim"):
        as_target(logp)
    with pytest.raises(TypeError):
        as_target(3.0)
    with pytest.raises(ValueError, match="log_density"):
        Target.from_callable(lambda x: x, 2)
    with pytest.raises(ValueError, match="grad_log_density"):
        Target.from_callable(logp, 2, grad_log_density=lambda x: x[:, 0])
    bare = Target.from_callable(logp, 2)
    assert not bare.has_grad and bare.bounds is None
    with pytest.raises(NotImplementedError):
        bare.grad_log_density(X)


def test_jit_requires_numba():
    try:
        import numba  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="numba"):
            Target.from_callable(lambda x: -np.sum(x**2, axis=1), 2, jit=True)
    else:
        tgt = Target.from_callable(lambda x: -np.sum(x**2, axis=1), 2, jit=True)
        assert tgt.log_density(np.ones((3, 2))).shape == (3,)
