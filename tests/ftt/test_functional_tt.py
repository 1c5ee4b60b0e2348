"""FunctionalTT: derivatives, integration, rounding, arithmetic, construction, parameters, validation."""

import math

import numpy as np
import pytest
from reference import ftt as ref

from numtk.ftt import FunctionalTT


def _tt(rng, kinds, ns, ranks, domain=None, **kw):
    cores = [rng.normal(size=(ranks[k], ns[k], ranks[k + 1])) / np.sqrt(ns[k]) for k in range(len(ns))]
    return FunctionalTT.from_cores(cores, kinds, [n - 1 for n in ns], domain=domain, **kw), cores


# ---------------------------------------------------------------------------------------------------------
# derivatives

def test_gradient_laplacian_closed_form():
    # f = x0^2 x1 + 3 x2 (Legendre degree 2 on [-2, 2]^3 represents it exactly; built by fitting)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (400, 3))
    y = X[:, 0] ** 2 * X[:, 1] + 3 * X[:, 2]
    f = FunctionalTT(degree=2, ranks=2, domain=[[-2, 2]] * 3, rng=0, regularization=0.0, sweeps=20).fit(X, y)
    Xt = rng.uniform(-2, 2, (50, 3))
    g = f.gradient(Xt)
    np.testing.assert_allclose(g[:, 0], 2 * Xt[:, 0] * Xt[:, 1], atol=1e-8)
    np.testing.assert_allclose(g[:, 1], Xt[:, 0] ** 2, atol=1e-8)
    np.testing.assert_allclose(g[:, 2], 3.0, atol=1e-8)
    np.testing.assert_allclose(f.laplacian(Xt), 2 * Xt[:, 1], atol=1e-7)


@pytest.mark.parametrize("kinds", [["legendre"] * 3, ["hermite"] * 3, ["bspline", "legendre", "hermite"]])
def test_derivatives_against_central_differences(kinds):
    rng = np.random.default_rng(1)
    dom = [[-1.0, 1.0]] * 3 if kinds != ["hermite"] * 3 else None
    f, _ = _tt(rng, kinds, [7, 6, 5], [1, 3, 2, 1], domain=dom)
    X = rng.uniform(-0.9, 0.9, (20, 3))
    h = 1e-5
    v, g, lap = f.evaluate(X, gradient=True, laplacian=True)
    scale = 1 + np.abs(v).max()
    fd_lap = np.zeros(len(X))
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        fp, fm = f.predict(X + e), f.predict(X - e)
        np.testing.assert_allclose(g[:, k], (fp - fm) / (2 * h), atol=1e-6 * scale)
        hk = 1e-4
        e[k] = hk
        fd_lap += (f.predict(X + e) - 2 * v + f.predict(X - e)) / hk**2
    np.testing.assert_allclose(lap, fd_lap, atol=1e-4 * scale)


def test_linear_extrapolation_outside_box():
    rng = np.random.default_rng(2)
    f, _ = _tt(rng, "legendre", [5, 5], [1, 2, 1], domain=[[-1, 1], [-1, 1]])
    edge = np.array([[1.0, 0.3]])
    out = np.array([[1.7, 0.3]])
    g = f.gradient(edge)[0, 0]
    np.testing.assert_allclose(f.predict(out), f.predict(edge) + 0.7 * g, rtol=1e-12)
    np.testing.assert_allclose(f.gradient(out)[0, 0], g, rtol=1e-12)
    raising = FunctionalTT.from_cores(f.cores_, "legendre", 4, domain=[[-1, 1], [-1, 1]], extrapolate="raise")
    with pytest.raises(ValueError, match="outside the domain"):
        raising.predict(out)
    np.testing.assert_allclose(raising.predict(edge), f.predict(edge))


# ---------------------------------------------------------------------------------------------------------
# integration

def test_integrate_hermite_own_gaussian_is_degree_zero_product():
    rng = np.random.default_rng(3)
    f, cores = _tt(rng, "hermite", [5, 4, 6], [1, 2, 3, 1], loc=[0.5, -1, 0], scale=[1.0, 2.0, 0.5])
    expect = (cores[0][:, 0, :] @ cores[1][:, 0, :] @ cores[2][:, 0, :])[0, 0]
    assert math.isclose(f.integrate(), expect, rel_tol=1e-12, abs_tol=1e-14)
    # and against Gauss-Hermite tensor quadrature of the reference evaluation
    t, w = np.polynomial.hermite_e.hermegauss(8)
    w = w / np.sqrt(2 * np.pi)
    grid = np.stack(np.meshgrid(t, t, t, indexing="ij"), -1).reshape(-1, 3)
    W = np.prod(np.stack(np.meshgrid(w, w, w, indexing="ij"), -1).reshape(-1, 3), axis=1)
    X = np.array([0.5, -1, 0]) + np.array([1.0, 2.0, 0.5]) * grid
    fr = ref.evaluate(X, cores, [("hermite", 0.5, 1.0), ("hermite", -1.0, 2.0), ("hermite", 0.0, 0.5)])[0]
    assert math.isclose(f.integrate(), float(W @ fr), rel_tol=1e-11, abs_tol=1e-13)


@pytest.mark.parametrize("kind", ["legendre", "bspline"])
def test_integrate_bounded_against_tensor_quadrature(kind):
    rng = np.random.default_rng(4)
    dom = [[-1.0, 2.0], [0.0, 0.5]]
    f, cores = _tt(rng, kind, [6, 7], [1, 3, 1], domain=dom)
    # composite Gauss-Legendre fine enough to be exact for piecewise cubics on the knot grids
    def rule(lo, hi, panels=60, q=6):
        t, w = np.polynomial.legendre.leggauss(q)
        e = np.linspace(lo, hi, panels + 1)
        a, b = e[:-1, None], e[1:, None]
        return ((a + b) / 2 + (b - a) / 2 * t).ravel(), np.broadcast_to((b - a) / 2 * w, (panels, q)).ravel()
    (x0, w0), (x1, w1) = rule(*dom[0]), rule(*dom[1])
    X = np.stack(np.meshgrid(x0, x1, indexing="ij"), -1).reshape(-1, 2)
    W = np.outer(w0, w1).ravel()
    fr = ref.evaluate(X, cores, [(kind, *dom[0]), (kind, *dom[1])])[0]
    lebesgue = float(W @ fr)
    assert math.isclose(f.integrate(), lebesgue, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(f.integrate("uniform"), lebesgue / 1.5, rel_tol=1e-9, abs_tol=1e-12)
    # callables: w0(x) = exp(x) (smooth: quadrature error only), w1(x) = 1 + x (exact)
    wx = np.exp(X[:, 0]) * (1 + X[:, 1])
    got = f.integrate([np.exp, lambda x: 1 + x])
    assert math.isclose(got, float(W @ (fr * wx)), rel_tol=1e-9, abs_tol=1e-12)
    # polynomial weights are integrated exactly
    wp = X[:, 0] ** 2 * (1 + X[:, 1])
    got = f.integrate([np.square, lambda x: 1 + x])
    assert math.isclose(got, float(W @ (fr * wp)), rel_tol=1e-11, abs_tol=1e-13)


@pytest.mark.parametrize("extrapolate", ["linear", "clip"])
def test_integrate_gaussian_weight_bounded_one_dimensional(extrapolate):
    from scipy.integrate import quad

    rng = np.random.default_rng(5)
    cores = [rng.normal(size=(1, 6, 1))]
    f = FunctionalTT.from_cores(cores, "legendre", 5, domain=[[-0.5, 1.0]], extrapolate=extrapolate)

    def integrand(x):
        return ref.evaluate(np.array([[x]]), cores, [("legendre", -0.5, 1.0)], extrapolate)[0][0] * \
            np.exp(-x * x / 2) / np.sqrt(2 * np.pi)

    total = sum(quad(integrand, a, b, epsabs=1e-13, epsrel=1e-13, limit=200)[0]
                for a, b in [(-np.inf, -0.5), (-0.5, 1.0), (1.0, np.inf)])
    assert math.isclose(f.integrate("gaussian"), total, rel_tol=1e-9, abs_tol=1e-11)


def test_integrate_separable_product_and_brute_force():
    # (1 + x0)(x1^2) on [0, 1] x [-1, 2] by fitting: integral = 1.5 * 3 = 4.5
    rng = np.random.default_rng(6)
    X = np.column_stack([rng.uniform(0, 1, 300), rng.uniform(-1, 2, 300)])
    y = (1 + X[:, 0]) * X[:, 1] ** 2
    f = FunctionalTT(degree=3, ranks=1, domain=[[0, 1], [-1, 2]], rng=0, regularization=0.0, sweeps=30).fit(X, y)
    assert math.isclose(f.integrate(), 4.5, rel_tol=1e-8)
    # brute force over index tuples with the same moments
    g, cores = _tt(rng, "hermite", [3, 2, 3], [1, 2, 2, 1])
    m = [np.array([1.0, 0, 0]), np.array([1.0, 0]), np.array([1.0, 0, 0])]
    assert math.isclose(g.integrate(), ref.full_tensor_integral(cores, m), rel_tol=1e-12, abs_tol=1e-14)


def test_integrate_monte_carlo():
    rng = np.random.default_rng(7)
    f, _ = _tt(rng, "legendre", [4, 4, 4], [1, 2, 2, 1], domain=[[0, 1]] * 3)
    X = rng.uniform(0, 1, (200_000, 3))
    v = f.predict(X)
    se = v.std() / np.sqrt(len(v))
    assert abs(f.integrate("uniform") - v.mean()) < 4 * se


def test_integrate_validation():
    f, _ = _tt(np.random.default_rng(0), "hermite", [3, 3], [1, 1, 1])
    with pytest.raises(ValueError, match="uniform"):
        f.integrate("uniform")
    with pytest.raises(ValueError, match="weight"):
        f.integrate("lebesgue")
    with pytest.raises(ValueError, match="2 callables"):
        f.integrate([np.exp])


# ---------------------------------------------------------------------------------------------------------
# rounding and arithmetic

@pytest.mark.parametrize("kind", ["legendre", "hermite", "bspline"])
def test_round_sum_recovers_ranks(kind):
    rng = np.random.default_rng(8)
    dom = None if kind == "hermite" else [[-1, 1]] * 4
    f, _ = _tt(rng, kind, [5, 6, 5, 4], [1, 2, 3, 2, 1], domain=dom)
    s = f + f
    assert s.ranks_ == (1, 4, 6, 4, 1)
    r = s.round(tol=1e-12)
    assert r.ranks_ == f.ranks_
    X = rng.uniform(-1, 1, (100, 4))
    np.testing.assert_allclose(r.predict(X), 2 * f.predict(X), rtol=1e-11, atol=1e-11 * np.abs(f.predict(X)).max())
    assert s.ranks_ == (1, 4, 6, 4, 1)  # round returns a new object


def test_round_tolerance_and_max_rank():
    rng = np.random.default_rng(9)
    f, _ = _tt(rng, "legendre", [6, 6, 6], [1, 4, 4, 1], domain=[[0, 1]] * 3)
    X = rng.uniform(0, 1, (100_000, 3))
    v = f.predict(X)
    norm = np.sqrt(np.mean(v**2))  # L2 norm under the uniform probability (Legendre's measure)
    for tol in (0.3, 0.1):
        r = f.round(tol=tol)
        err = np.sqrt(np.mean((r.predict(X) - v) ** 2))
        assert err <= 1.05 * tol * norm
        assert max(r.ranks_) <= 4
    capped = f.round(max_rank=2)
    assert max(capped.ranks_) == 2
    with pytest.raises(ValueError, match="needs `tol`"):
        f.round()
    with pytest.raises(ValueError, match="tol"):
        f.round(tol=-1.0)


def test_arithmetic():
    rng = np.random.default_rng(10)
    dom = [[-1, 1]] * 3
    f, _ = _tt(rng, "legendre", [4, 5, 3], [1, 2, 2, 1], domain=dom)
    g, _ = _tt(rng, "legendre", [4, 5, 3], [1, 3, 1, 1], domain=dom)
    X = rng.uniform(-1.2, 1.2, (30, 3))
    fv, gv = f.predict(X), g.predict(X)
    np.testing.assert_allclose((f + g).predict(X), fv + gv, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((f - g).predict(X), fv - gv, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((2.5 * f).predict(X), 2.5 * fv, rtol=1e-13)
    np.testing.assert_allclose((f * -3).predict(X), -3 * fv, rtol=1e-13)
    np.testing.assert_allclose((-f).predict(X), -fv, rtol=1e-13)
    np.testing.assert_allclose((f + g).gradient(X), f.gradient(X) + g.gradient(X), rtol=1e-11, atol=1e-11)
    assert (f + g).ranks_ == (1, 5, 3, 1)
    one = FunctionalTT.from_cores([np.ones((1, 3, 1))], "hermite")
    np.testing.assert_allclose((one + one).predict([[0.2]]), 2 * one.predict([[0.2]]))
    with pytest.raises(TypeError):
        f + 1.0
    with pytest.raises(TypeError):
        f * f
    other, _ = _tt(rng, "legendre", [4, 5, 3], [1, 2, 2, 1], domain=[[-1, 2]] * 3)
    with pytest.raises(ValueError, match="same bases"):
        f + other


# ---------------------------------------------------------------------------------------------------------
# construction and parameters

def test_from_cores_round_trip():
    rng = np.random.default_rng(11)
    X = rng.uniform(-1, 1, (300, 3))
    y = np.sin(X[:, 0]) * X[:, 1] + X[:, 2]
    f = FunctionalTT(["legendre", "bspline", "legendre"], [5, 6, 3], ranks=2, rng=0, sweeps=3).fit(X, y)
    g = FunctionalTT.from_cores(f.cores_, ["legendre", "bspline", "legendre"], [5, 6, 3], domain=f.domain_)
    np.testing.assert_array_equal(g.predict(X), f.predict(X))
    assert g.ranks_ == f.ranks_ and g.n_features_in_ == 3 and g.n_iter_ == 0 and g.history_ == []
    assert all(c.dtype == np.float64 for c in g.cores_)
    with pytest.raises(ValueError, match="does not match"):
        FunctionalTT.from_cores(f.cores_, "legendre", 4, domain=f.domain_)
    with pytest.raises(ValueError, match="left rank"):
        FunctionalTT.from_cores([np.ones((1, 3, 2)), np.ones((3, 3, 1))], "hermite")
    with pytest.raises(ValueError, match="rank 1"):
        FunctionalTT.from_cores([np.ones((2, 3, 1))], "hermite")
    with pytest.raises(ValueError, match="domain"):
        FunctionalTT.from_cores([np.ones((1, 3, 1))], "legendre")
    with pytest.raises(TypeError, match="cores"):
        FunctionalTT.from_cores(np.ones((1, 3, 1)), "hermite")
    with pytest.raises(ValueError, match="NaN"):
        FunctionalTT.from_cores([np.full((1, 3, 1), np.nan)], "hermite")
    with pytest.raises(ValueError, match="finite"):
        FunctionalTT.from_cores([np.full((1, 3, 1), np.inf)], "hermite")


def test_params_and_clone():
    f = FunctionalTT("hermite", degree=5, ranks=3, loc=1.0, scale=2.0)
    params = f.get_params()
    assert params == dict(basis="hermite", degree=5, ranks=3, domain=None, loc=1.0, scale=2.0, extrapolate="linear",
                          init="additive", sweeps=10, tol=1e-6, regularization=1e-8, rank_adaptive=True, max_rank=10,
                          rank_tol=1e-8, callback=None, progress=False, rng=None, workers=1)
    f.set_params(degree=7)
    assert f.degree == 7
    with pytest.raises(ValueError, match="invalid parameter"):
        f.set_params(nope=1)
    assert "degree=7" in repr(f)
    sklearn_base = pytest.importorskip("sklearn.base")
    c = sklearn_base.clone(f)
    assert c.get_params() == f.get_params() and not hasattr(c, "cores_")


def test_not_fitted():
    from numtk._lib._estimator import NotFittedError

    with pytest.raises(NotFittedError):
        FunctionalTT().predict(np.zeros((1, 2)))
    with pytest.raises(NotFittedError):
        FunctionalTT().integrate()


def test_validation_errors():
    rng = np.random.default_rng(12)
    X, y = rng.uniform(size=(30, 2)), rng.uniform(size=30)
    cases = [
        (FunctionalTT(basis="chebyshev"), {}, ValueError, "basis"),
        (FunctionalTT(basis=["legendre"]), {}, ValueError, "basis"),
        (FunctionalTT(degree=-1), {}, ValueError, "degree"),
        (FunctionalTT(degree=1.5), {}, TypeError, "degree"),
        (FunctionalTT("bspline", degree=2), {}, ValueError, "degree"),
        (FunctionalTT(ranks=0), {}, ValueError, "ranks"),
        (FunctionalTT(ranks=[2, 2]), {}, ValueError, "ranks"),
        (FunctionalTT(domain=[[0, 1]]), {}, ValueError, "domain"),
        (FunctionalTT(domain=[[1, 0], [0, 1]]), {}, ValueError, "lo < hi"),
        (FunctionalTT("hermite", domain=[[0, 1], [0, 1]]), {}, ValueError, "domain"),
        (FunctionalTT("hermite", scale=0.0), {}, ValueError, "scale"),
        (FunctionalTT(extrapolate="nearest"), {}, ValueError, "extrapolate"),
        (FunctionalTT(), dict(sample_weight=-np.ones(30)), ValueError, "sample_weight"),
        (FunctionalTT(), dict(sample_weight=np.zeros(30)), ValueError, "sample_weight"),
        (FunctionalTT(sweeps=0), {}, ValueError, "sweeps"),
        (FunctionalTT(tol=-1.0), {}, ValueError, "tol"),
        (FunctionalTT(regularization=-1.0), {}, ValueError, "regularization"),
        (FunctionalTT(regularization={"lasso": 1.0}), {}, ValueError, "regularization"),
        (FunctionalTT(max_rank=0), {}, ValueError, "max_rank"),
        (FunctionalTT(rank_adaptive="yes"), {}, TypeError, "rank_adaptive"),
        (FunctionalTT(callback=3), {}, TypeError, "callback"),
        (FunctionalTT(init=3), {}, TypeError, "init"),
        (FunctionalTT(init="model"), {}, ValueError, "init"),
        (FunctionalTT(init=FunctionalTT()), {}, ValueError, "init"),
        (FunctionalTT(rng="seed"), {}, TypeError, "rng"),
    ]
    for est, kw, err, match in cases:
        with pytest.raises(err, match=match):
            est.fit(X, y, **kw)
    with pytest.raises(ValueError, match="2-D"):
        FunctionalTT().fit(X[:, 0], y)
    with pytest.raises(ValueError, match="finite|NaN"):
        FunctionalTT().fit(np.where(X > 0.5, np.nan, X), y)
    with pytest.raises(ValueError, match="`y`"):
        FunctionalTT().fit(X, y[:-1])
    with pytest.raises(ValueError, match="finite"):
        FunctionalTT().fit(X, np.full(30, np.inf))
    with pytest.raises(TypeError, match="numeric"):
        FunctionalTT().fit(X.astype(str), y)
    f = FunctionalTT(degree=2, rng=0, sweeps=1).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        f.predict(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="2-D"):
        f.predict(np.zeros(2))
    with pytest.raises(TypeError, match="gradient"):
        f.evaluate(X, gradient="yes")
    with pytest.raises(ValueError, match="incompatible basis"):
        FunctionalTT(degree=3, init=f).fit(X, y)


@pytest.mark.parametrize("basis", ["legendre", "hermite", "bspline"])
def test_additive_is_exact_for_functions_in_the_span(basis):
    # quadratics lie in every basis of degree >= 2 (cubic B-splines reproduce them too)
    d = 3
    kw = dict(basis=basis, degree=6)
    if basis != "hermite":
        kw["domain"] = [(-2.0, 1.0)] * d
    f = FunctionalTT.from_cores([np.zeros((1, 7, 1))] * d, **kw)
    g = f.additive([lambda x: x ** 2, lambda x: 3 * x - 1, lambda x: -0.5 * x * x + x], constant=2.5)
    X = np.random.default_rng(3).uniform(-2.0, 1.0, (200, d))
    expected = 2.5 + X[:, 0] ** 2 + 3 * X[:, 1] - 1 - 0.5 * X[:, 2] ** 2 + X[:, 2]
    np.testing.assert_allclose(g.predict(X), expected, rtol=1e-10, atol=1e-10)
    assert g.ranks_ == (1, 2, 2, 1) and g.bases_ == f.bases_
    if basis != "hermite":
        kw["domain"] = [(-2.0, 1.0)]
    one = FunctionalTT.from_cores([np.zeros((1, 7, 1))], **kw).additive([lambda x: x ** 2], constant=1.0)
    assert one.ranks_ == (1, 1)
    np.testing.assert_allclose(one.predict(X[:, :1]), 1.0 + X[:, 0] ** 2, rtol=1e-10, atol=1e-10)


def test_additive_and_bases_validation():
    f = FunctionalTT.from_cores([np.zeros((1, 4, 1))] * 2, degree=3, domain=[(-1, 1)] * 2)
    assert [b.kind for b in f.bases_] == ["legendre", "legendre"] and f.bases_[0].n == 4
    assert (f.bases_[0].p0, f.bases_[0].p1, f.bases_[0].bounded) == (-1.0, 1.0, True)
    with pytest.raises(TypeError, match="`functions`"):
        f.additive([np.sin])
    with pytest.raises(TypeError, match="`functions`"):
        f.additive(np.sin)
    with pytest.raises(ValueError, match=r"`functions\[1\]` must return one finite value"):
        f.additive([np.sin, lambda x: np.full_like(x, np.nan)])
    with pytest.raises(ValueError, match="`constant`"):
        f.additive([np.sin, np.cos], constant=np.inf)
    with pytest.raises(ValueError, match="not fitted|fit"):
        FunctionalTT().additive([np.sin])
