"""LossToBenchmarkLaw against independent oracles (spec §9.5): planted recovery, the OLMo ladder's
parametrisation evaluated in NumPy, SciPy's curve_fit on OLMo's own form and bounds, finite differences,
closed-form limits and a Monte Carlo check of the delta-method standard error."""

import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import curve_fit
from sklearn.base import clone

from numtk._lib import NumtkWarning
from numtk.mixture import LossToBenchmarkLaw

X_GRID = np.linspace(1.5, 3.5, 15)


def np_sigmoid(x, f, c, k, x0):
    """The spec's sigmoid, written out in NumPy."""
    return f + (c - f) / (1.0 + np.exp(k * (x - x0)))


def olmo_sigmoid(x, a, x0, k, b):
    """OLMo ladder's step-2 sigmoid (fitting_functions.sigmoid)."""
    return a / (1 + np.exp(-k * (x - x0))) + b


def olmo_log_sigmoid(x, a, x0, k):
    """OLMo ladder's log-sigmoid (fitting_functions.log_sigmoid with c = 0)."""
    return (-a) * np.log(1 - 1 / (1 + np.exp(-k * (x - x0)))) + 1


PLANTED = [(0.25, 0.9, 6.0, 2.5), (0.0, 0.6, 2.0, 3.0), (0.1, 1.0, 12.0, 2.0)]


@pytest.mark.parametrize("params", PLANTED)
@pytest.mark.parametrize("fixed", [None, "floor", "ceiling"])
def test_planted_recovery_noise_free(params, fixed):
    f, c, k, x0 = params
    y = np_sigmoid(X_GRID, f, c, k, x0)
    kw = {} if fixed is None else {fixed: {"floor": f, "ceiling": c}[fixed]}
    law = LossToBenchmarkLaw(**kw).fit(X_GRID, y)
    assert law.floor_ == pytest.approx(f, abs=1e-8)
    assert law.ceiling_ == pytest.approx(c, abs=1e-8)
    assert law.slope_ == pytest.approx(k, rel=1e-8)
    assert law.midpoint_ == pytest.approx(x0, abs=1e-8)
    assert law.success_
    np.testing.assert_allclose(law.predict(X_GRID), y, atol=1e-10)


def test_planted_recovery_log_sigmoid():
    # OLMo's parametrisation: a = -0.12, x0 = 0.9, k = 3 (ceiling 1)
    a, x0, k = -0.12, 0.9, 3.0
    x = np.linspace(0.4, 1.8, 15)
    y = olmo_log_sigmoid(x, a, x0, k)
    for kw in ({}, {"ceiling": 1.0}):
        law = LossToBenchmarkLaw("log_sigmoid", **kw).fit(x, y)
        assert law.ceiling_ == pytest.approx(1.0, abs=1e-8)
        assert law.floor_ - law.ceiling_ == pytest.approx(a, abs=1e-8)
        assert law.slope_ == pytest.approx(k, rel=1e-8)
        assert law.midpoint_ == pytest.approx(x0, abs=1e-8)


def test_log_sigmoid_fixed_floor_may_lie_below_the_score_range():
    # OLMo's a = f - c = -1.5 with c = 1: f = -0.5 is outside [0, 1], yet every score is inside
    a, x0, k = -1.5, 1.8, 3.0
    x = np.linspace(0.4, 1.7, 15)
    y = olmo_log_sigmoid(x, a, x0, k)
    assert y.min() >= 0.0
    law = LossToBenchmarkLaw("log_sigmoid", floor=-0.5).fit(x, y)
    assert law.floor_ == -0.5
    assert law.ceiling_ == pytest.approx(1.0, abs=1e-8)
    assert law.slope_ == pytest.approx(k, rel=1e-7)
    assert law.midpoint_ == pytest.approx(x0, abs=1e-7)
    # the same curve from from_params, which accepts this floor too
    ref = LossToBenchmarkLaw.from_params("log_sigmoid", floor=-0.5, ceiling=1.0, slope=k, midpoint=x0)
    np.testing.assert_allclose(law.predict(x), ref.predict(x), atol=1e-9)
    with pytest.raises(ValueError, match="`floor`"):              # the sigmoid's floor stays bounded
        LossToBenchmarkLaw("sigmoid", floor=-0.5).fit(X_GRID, np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5))


def test_fixed_floor_is_honoured_exactly():
    rng = np.random.default_rng(3)
    y = np_sigmoid(X_GRID, 0.3, 0.85, 5.0, 2.6) + 0.01 * rng.standard_normal(X_GRID.size)
    law = LossToBenchmarkLaw(floor=0.25).fit(X_GRID, y)
    assert law.floor_ == 0.25
    assert "floor" not in law.param_names_ and law.coef_.shape == (3,)
    assert law.predict([1e6])[0] == 0.25
    law = LossToBenchmarkLaw(floor=0.25, ceiling=0.875).fit(X_GRID, y)
    assert (law.floor_, law.ceiling_) == (0.25, 0.875)
    assert law.param_names_ == ["log_slope", "midpoint"]


def test_monotone_decreasing_with_limits_floor_and_ceiling():
    law = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.8, slope=4.0, midpoint=2.0)
    x = np.linspace(-5, 10, 2001)
    p = law.predict(x)
    assert np.all(np.diff(p) <= 0) and np.all(law.derivative(x) <= 0)
    assert np.all((p >= 0.25) & (p <= 0.8))
    assert law.predict([-1e4])[0] == pytest.approx(0.8, abs=1e-15)
    assert law.predict([1e4])[0] == pytest.approx(0.25, abs=1e-15)
    assert law.predict([2.0])[0] == pytest.approx((0.25 + 0.8) / 2, abs=1e-15)
    lw = LossToBenchmarkLaw.from_params("log_sigmoid", floor=0.9, ceiling=1.0, slope=3.0, midpoint=0.9)
    q = lw.predict(x)
    assert np.all(np.diff(q) <= 0) and np.all(q <= 1.0)
    assert lw.predict([-50.0])[0] == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("form", ["sigmoid", "log_sigmoid"])
def test_inverse_of_predict_is_identity(form):
    if form == "sigmoid":
        law = LossToBenchmarkLaw.from_params(form, floor=0.25, ceiling=0.9, slope=6.0, midpoint=2.5)
    else:
        law = LossToBenchmarkLaw.from_params(form, floor=0.9, ceiling=1.0, slope=3.0, midpoint=0.9)
    x = np.linspace(1.6, 3.4, 40)
    np.testing.assert_allclose(law.inverse(law.predict(x)), x, rtol=0, atol=1e-9)


def test_inverse_outside_the_range_is_nan_with_a_warning():
    law = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=6.0, midpoint=2.5)
    with pytest.warns(NumtkWarning, match="outside"):
        out = law.inverse([0.2, 0.25, 0.5, 0.9, 0.95])
    assert np.isnan(out[[0, 1, 3, 4]]).all() and np.isfinite(out[2])
    # closed form at the midpoint score
    assert law.inverse([0.575])[0] == pytest.approx(2.5, abs=1e-14)
    lw = LossToBenchmarkLaw.from_params("log_sigmoid", floor=0.9, ceiling=1.0, slope=3.0, midpoint=0.9)
    with pytest.warns(NumtkWarning):
        out = lw.inverse([1.0, 0.2])
    assert np.isnan(out[0]) and np.isfinite(out[1])


def test_olmo_parametrisation_gives_identical_predictions():
    rng = np.random.default_rng(0)
    y = np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5) + 0.01 * rng.standard_normal(X_GRID.size)
    law = LossToBenchmarkLaw().fit(X_GRID, y)
    f, c, k, x0 = law.floor_, law.ceiling_, law.slope_, law.midpoint_
    x = np.linspace(0.5, 4.5, 101)
    np.testing.assert_allclose(law.predict(x), olmo_sigmoid(x, f - c, x0, k, c), rtol=0, atol=1e-14)
    lw = LossToBenchmarkLaw.from_params("log_sigmoid", floor=0.88, ceiling=1.0, slope=3.0, midpoint=0.9)
    # OLMo's log(1 - 1/(1 + e^-u)) cancels at low loss (relative error ~ eps e^-u): agreement to 1e-11
    np.testing.assert_allclose(lw.predict(x), olmo_log_sigmoid(x, 0.88 - 1.0, 0.9, 3.0), rtol=0, atol=1e-11)


def test_least_squares_optimum_matches_scipy_curve_fit_on_olmos_form():
    # OLMo's own fit (curve_fit with its bounds and start) on noisy data reaches the same minimum
    rng = np.random.default_rng(1)
    x = np.linspace(1.5, 3.5, 25)
    y = np_sigmoid(x, 0.25, 0.9, 6.0, 2.5) + 0.01 * rng.standard_normal(x.size)
    law = LossToBenchmarkLaw().fit(x, y)
    (a, x0, k, b), _ = curve_fit(olmo_sigmoid, x, y, p0=[y.min() - 1.0, 0.9, 3.0, y.max()],
                                 bounds=([-1.0, 0.0, 0.0, 0.0], [0.0, np.inf, np.inf, 1.0]), maxfev=500000,
                                 ftol=1e-15, xtol=1e-15, gtol=1e-15)
    sse_olmo = np.sum((olmo_sigmoid(x, a, x0, k, b) - y) ** 2)
    sse = np.sum((law.predict(x) - y) ** 2)
    assert sse <= sse_olmo * (1 + 1e-9)
    assert law.ceiling_ == pytest.approx(b, abs=1e-6)
    assert law.floor_ == pytest.approx(a + b, abs=1e-6)
    assert law.slope_ == pytest.approx(k, rel=1e-5)
    assert law.midpoint_ == pytest.approx(x0, abs=1e-6)


@pytest.mark.parametrize("form", ["sigmoid", "log_sigmoid"])
def test_jacobian_and_derivative_against_finite_differences(form):
    if form == "sigmoid":
        f, c, k, x0 = 0.25, 0.9, 6.0, 2.5
        x = X_GRID
    else:
        f, c, k, x0 = 0.9, 1.0, 3.0, 0.9
        x = X_GRID / 2
    theta = np.array([f, c, np.log(k), x0])

    def curve(t, xs):
        return (np_sigmoid(xs, t[0], t[1], np.exp(t[2]), t[3]) if form == "sigmoid"
                else t[1] + (t[0] - t[1]) * np.logaddexp(0, np.exp(t[2]) * (xs - t[3])))

    law = LossToBenchmarkLaw.from_params(form, floor=f, ceiling=c, slope=k, midpoint=x0)
    J = law.jacobian(x)
    h = 1e-6
    for j in range(4):
        e = np.zeros(4)
        e[j] = h
        np.testing.assert_allclose(J[:, j], (curve(theta + e, x) - curve(theta - e, x)) / (2 * h), atol=1e-8)
    np.testing.assert_allclose(law.derivative(x), (curve(theta, x + h) - curve(theta, x - h)) / (2 * h), atol=1e-7)
    # a fitted law with a fixed floor differentiates w.r.t. its free parameters only
    fit = LossToBenchmarkLaw(form, floor=f).fit(x, curve(theta, x))
    assert fit.jacobian(x).shape == (x.size, 3)
    np.testing.assert_allclose(fit.jacobian(x), J[:, 1:], atol=1e-7)


def test_loss_weights_combine_the_columns():
    rng = np.random.default_rng(2)
    X = rng.uniform(1.5, 3.5, size=(30, 3))
    u = np.array([0.2, 0.5, 0.3])
    y = np_sigmoid(X @ u, 0.25, 0.9, 6.0, 2.5)
    law = LossToBenchmarkLaw(loss_weights=u).fit(X, y)
    assert law.n_features_in_ == 3
    assert law.midpoint_ == pytest.approx(2.5, abs=1e-8) and law.slope_ == pytest.approx(6.0, rel=1e-8)
    e = np.exp(6.0 * (X @ u - 2.5))
    np.testing.assert_allclose(law.derivative(X), -(0.9 - 0.25) * 6.0 * e / (1 + e) ** 2, atol=1e-8)
    # default: equal weights over the columns
    law2 = LossToBenchmarkLaw().fit(X, np_sigmoid(X.mean(axis=1), 0.25, 0.9, 6.0, 2.5))
    np.testing.assert_allclose(law2.loss_weights_, [1 / 3] * 3)
    assert law2.midpoint_ == pytest.approx(2.5, abs=1e-8)
    with pytest.raises(ValueError, match="`X`"):
        law.predict(X[:, :2])


def softmax0(logits):
    """Loss weights from the log ratios log(u_j / u_0), j >= 1, written out in NumPy."""
    e = np.exp(np.r_[0.0, logits])
    return e / e.sum()


U_TRUE = np.array([0.6, 0.3, 0.1])


def test_fitted_loss_weights_planted_recovery():
    rng = np.random.default_rng(7)
    X = rng.uniform(1.5, 3.5, size=(40, 3))
    y = np_sigmoid(X @ U_TRUE, 0.25, 0.9, 6.0, 2.5)
    law = LossToBenchmarkLaw(loss_weights="fit").fit(X, y)
    np.testing.assert_allclose(law.loss_weights_, U_TRUE, rtol=0, atol=1e-6)
    assert law.loss_weights_.sum() == pytest.approx(1.0, abs=1e-14)
    assert law.floor_ == pytest.approx(0.25, abs=1e-6) and law.ceiling_ == pytest.approx(0.9, abs=1e-6)
    assert law.slope_ == pytest.approx(6.0, rel=1e-6) and law.midpoint_ == pytest.approx(2.5, abs=1e-6)
    # predictions at the training rows and at fresh ones against the planted curve
    Xq = rng.uniform(1.0, 4.0, size=(25, 3))
    np.testing.assert_allclose(law.predict(X), y, rtol=0, atol=1e-8)
    np.testing.assert_allclose(law.predict(Xq), np_sigmoid(Xq @ U_TRUE, 0.25, 0.9, 6.0, 2.5), rtol=0, atol=1e-8)
    # coef_ layout: the curve's free parameters, then log(u_j / u_0)
    assert law.param_names_ == ["floor", "ceiling", "log_slope", "midpoint", "log_weight_ratio_1",
                                "log_weight_ratio_2"]
    np.testing.assert_allclose(law.coef_[4:], np.log(U_TRUE[1:] / U_TRUE[0]), atol=1e-5)
    # the same with a fixed floor: one curve parameter fewer
    fixed = LossToBenchmarkLaw(floor=0.25, loss_weights="fit").fit(X, y)
    assert fixed.coef_.shape == (5,) and fixed.param_names_[0] == "ceiling"
    np.testing.assert_allclose(fixed.loss_weights_, U_TRUE, rtol=0, atol=1e-6)
    # fixed weights report them as loss_weights_
    given = LossToBenchmarkLaw(loss_weights=U_TRUE).fit(X, y)
    np.testing.assert_array_equal(given.loss_weights_, U_TRUE)
    assert given.coef_.shape == (4,)


def test_fitted_loss_weights_jacobian_derivative_and_delta_interval():
    rng = np.random.default_rng(8)
    X = rng.uniform(1.5, 3.5, size=(40, 3))
    y = np_sigmoid(X @ U_TRUE, 0.25, 0.9, 6.0, 2.5) + 0.01 * rng.standard_normal(40)
    law = LossToBenchmarkLaw(loss_weights="fit").fit(X, y)
    assert law.success_
    np.testing.assert_allclose(law.loss_weights_, softmax0(law.coef_[4:]), rtol=1e-12)

    def model(t, Xs):
        """Scores from coef_ = (f, c, log k, x0, log u1/u0, log u2/u0), in NumPy."""
        return np_sigmoid(Xs @ softmax0(t[4:]), t[0], t[1], np.exp(t[2]), t[3])

    t = law.coef_.copy()
    Xq = rng.uniform(1.5, 3.5, size=(12, 3))
    np.testing.assert_allclose(law.predict(Xq), model(t, Xq), rtol=0, atol=1e-14)
    h = 1e-6

    def fd(Xs, tt):
        return np.stack([(model(tt + e, Xs) - model(tt - e, Xs)) / (2 * h) for e in np.eye(tt.size) * h], axis=1)

    J = law.jacobian(Xq)
    assert J.shape == (12, 6)
    np.testing.assert_allclose(J, fd(Xq, t), rtol=0, atol=1e-8)
    # derivative: d score / d combined loss, unchanged in meaning
    xq = Xq @ law.loss_weights_
    f, c, k, x0 = t[0], t[1], np.exp(t[2]), t[3]
    np.testing.assert_allclose(law.derivative(Xq),
                               (np_sigmoid(xq + h, f, c, k, x0) - np_sigmoid(xq - h, f, c, k, x0)) / (2 * h),
                               rtol=0, atol=1e-7)
    # delta interval: sigma^2 (J'J)^-1 over all six parameters, Jacobians by finite differences
    s2 = np.sum((model(t, X) - y) ** 2) / (X.shape[0] - 6)
    Jx = fd(X, t)
    cov = s2 * np.linalg.inv(Jx.T @ Jx)
    std = np.sqrt(np.einsum("ij,jk,ik->i", fd(Xq, t), cov, fd(Xq, t)))
    res = law.predict_interval(Xq)
    np.testing.assert_allclose(res.std, std, rtol=1e-4)
    assert law.residual_std_ == pytest.approx(np.sqrt(s2), rel=1e-10)
    # the bootstrap refits the weights too (each refit's weights sum to 1 and differ from the fit's)
    boot = law.bootstrap(3, rng=0)
    assert all(b.loss_weights_.sum() == pytest.approx(1.0, abs=1e-14) for b in boot)
    assert all(np.abs(b.loss_weights_ - law.loss_weights_).max() > 0 for b in boot)
    bi = law.predict_interval(Xq, method="bootstrap", n_resamples=30, rng=0)
    assert np.all(bi.lower <= bi.upper) and np.all(np.isfinite(bi.std))


def test_sample_weight_is_repetition():
    rng = np.random.default_rng(4)
    x = rng.uniform(1.5, 3.5, 20)
    y = np_sigmoid(x, 0.25, 0.9, 6.0, 2.5) + 0.02 * rng.standard_normal(20)
    w = rng.integers(0, 4, 20)
    a = LossToBenchmarkLaw(floor=0.25).fit(x, y, sample_weight=w)
    b = LossToBenchmarkLaw(floor=0.25).fit(np.repeat(x, w), np.repeat(y, w))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-9)
    assert a.residual_std_ == pytest.approx(b.residual_std_, rel=1e-7)


def _delta_std_numpy(x, y, theta, xq):
    """sigma^2 (J'J)^-1 with a central-difference Jacobian, all four parameters free."""
    def curve(t, xs):
        return np_sigmoid(xs, t[0], t[1], np.exp(t[2]), t[3])
    h = 1e-6
    E = np.eye(4) * h
    J = np.stack([(curve(theta + e, x) - curve(theta - e, x)) / (2 * h) for e in E], axis=1)
    g = np.stack([(curve(theta + e, xq) - curve(theta - e, xq)) / (2 * h) for e in E], axis=1)
    s2 = np.sum((curve(theta, x) - y) ** 2) / (x.size - 4)
    cov = s2 * np.linalg.inv(J.T @ J)
    return np.sqrt(np.einsum("ij,jk,ik->i", g, cov, g))


def test_delta_interval_against_numpy_and_monte_carlo():
    rng = np.random.default_rng(5)
    x = np.linspace(1.5, 3.5, 30)
    truth = (0.25, 0.9, 6.0, 2.5)
    xq = np.array([2.0, 2.5, 3.2])
    y = np_sigmoid(x, *truth) + 0.01 * rng.standard_normal(x.size)
    law = LossToBenchmarkLaw().fit(x, y)
    res = law.predict_interval(xq, level=0.9)
    theta = np.array([law.floor_, law.ceiling_, np.log(law.slope_), law.midpoint_])
    np.testing.assert_allclose(res.std, _delta_std_numpy(x, y, theta, xq), rtol=1e-5)
    np.testing.assert_allclose(res.upper - res.prediction, 1.6448536269514722 * res.std, rtol=1e-12)
    np.testing.assert_allclose(res.prediction - res.lower, 1.6448536269514722 * res.std, rtol=1e-12)
    assert res.method == "delta" and res.level == 0.9
    # Monte Carlo: the spread of refits on fresh noise matches the delta standard error
    preds = []
    for _ in range(100):
        yy = np_sigmoid(x, *truth) + 0.01 * rng.standard_normal(x.size)
        preds.append(LossToBenchmarkLaw().fit(x, yy).predict(xq))
    np.testing.assert_allclose(np.std(preds, axis=0, ddof=1), res.std, rtol=0.25)


def test_bootstrap_interval():
    rng = np.random.default_rng(6)
    x = np.linspace(1.5, 3.5, 30)
    y = np_sigmoid(x, 0.25, 0.9, 6.0, 2.5) + 0.01 * rng.standard_normal(x.size)
    law = LossToBenchmarkLaw(floor=0.25).fit(x, y)
    xq = np.array([2.0, 2.5, 3.0])
    boot = law.predict_interval(xq, method="bootstrap", n_resamples=100, rng=0)
    delta = law.predict_interval(xq)
    assert np.all(boot.lower <= boot.prediction) and np.all(boot.prediction <= boot.upper)
    np.testing.assert_allclose(boot.std, delta.std, rtol=0.4)
    again = law.predict_interval(xq, method="bootstrap", n_resamples=100, rng=0)
    np.testing.assert_array_equal(again.lower, boot.lower)
    laws = law.bootstrap(5, rng=1)
    assert len(laws) == 5 and all(b.floor_ == 0.25 for b in laws)


def test_from_params_laws_have_no_intervals():
    law = LossToBenchmarkLaw.from_params("sigmoid", floor=0.25, ceiling=0.9, slope=6.0, midpoint=2.5)
    assert law.param_names_ == ["floor", "ceiling", "log_slope", "midpoint"]
    with pytest.raises(ValueError, match="from_params"):
        law.predict_interval([2.0])
    with pytest.raises(ValueError, match="from_params"):
        law.bootstrap(3)


def test_estimator_contract_clone_params_pickle():
    u = np.array([0.5, 0.5])
    est = LossToBenchmarkLaw("sigmoid", floor=0.25, loss_weights=u)
    assert est.get_params()["loss_weights"] is u
    assert clone(est).get_params()["floor"] == 0.25
    X = np.c_[X_GRID, X_GRID + 0.1]
    y = np_sigmoid(X @ u, 0.25, 0.9, 6.0, 2.5)
    assert est.fit(X, y) is est
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict(X), est.predict(X))
    est.set_params(floor=None)
    assert est.floor is None
    with pytest.raises(Exception, match="not fitted"):
        LossToBenchmarkLaw().predict(X_GRID)


def test_percentages_with_a_score_range_and_unbounded_scores():
    y = 100 * np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5)
    with pytest.raises(ValueError, match="`y`"):
        LossToBenchmarkLaw().fit(X_GRID, y)
    law = LossToBenchmarkLaw(score_range=(0, 100), floor=25.0).fit(X_GRID, y)
    assert law.ceiling_ == pytest.approx(90.0, abs=1e-7)
    free = LossToBenchmarkLaw(score_range=None).fit(X_GRID, y - 50)
    assert free.floor_ == pytest.approx(-25.0, abs=1e-6) and free.ceiling_ == pytest.approx(40.0, abs=1e-6)


def test_few_points_warn():
    with pytest.warns(NumtkWarning, match="not identified"):
        LossToBenchmarkLaw().fit([2.0, 2.5, 3.0], [0.8, 0.6, 0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LossToBenchmarkLaw(floor=0.25, ceiling=0.9).fit([2.0, 2.5, 3.0], [0.8, 0.6, 0.3])


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"form": "probit"}, "form"), ({"floor": 1.5}, "floor"), ({"ceiling": -0.1}, "ceiling"),
    ({"floor": 0.6, "ceiling": 0.5}, "floor"), ({"loss_weights": [-1.0]}, "loss_weights"),
    ({"loss_weights": [0.5, 0.5]}, "loss_weights"), ({"score_range": (1.0, 0.0)}, "score_range"),
    ({"loss_weights": "fit"}, "loss_weights"), ({"loss_weights": "learn"}, "loss_weights"),
    ({"floor": "x"}, "floor")])
def test_bad_parameters_are_named(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=f"`{name}`"):
        LossToBenchmarkLaw(**kwargs).fit(X_GRID, np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5))


def test_bad_data_is_named():
    y = np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5)
    with pytest.raises(ValueError, match="`y`"):
        LossToBenchmarkLaw().fit(X_GRID, y[:-1])
    with pytest.raises(ValueError, match="`X`"):
        LossToBenchmarkLaw().fit(np.full(15, np.nan), y)
    with pytest.raises(ValueError, match="`sample_weight`"):
        LossToBenchmarkLaw().fit(X_GRID, y, sample_weight=np.zeros(15))
    with pytest.raises(ValueError, match="`slope`"):
        LossToBenchmarkLaw.from_params("sigmoid", floor=0.2, ceiling=0.9, slope=0.0, midpoint=1.0)
    with pytest.raises(ValueError, match="`floor`"):
        LossToBenchmarkLaw.from_params("sigmoid", floor=0.95, ceiling=0.9, slope=1.0, midpoint=1.0)


def test_fit_weights_needs_two_columns_and_a_planted_law_needs_weights():
    y = np_sigmoid(X_GRID, 0.25, 0.9, 6.0, 2.5)
    with pytest.raises(ValueError, match="`loss_weights`.*two loss columns"):
        LossToBenchmarkLaw(loss_weights="fit").fit(X_GRID, y)
    with pytest.raises(ValueError, match="`loss_weights`.*two loss columns"):
        LossToBenchmarkLaw(loss_weights="fit").fit(X_GRID[:, None], y)
    with pytest.raises(ValueError, match="`loss_weights` must be one of 'fit'"):
        LossToBenchmarkLaw(loss_weights="FIT").fit(np.c_[X_GRID, X_GRID], y)
    with pytest.raises(ValueError, match="`loss_weights`"):
        LossToBenchmarkLaw.from_params("sigmoid", floor=0.2, ceiling=0.9, slope=1.0, midpoint=1.0,
                                       loss_weights="fit")
