"""FunctionalTT under scikit-learn's estimator checks, and the estimator contract.

The checks run on ``FunctionalTT(rng=0)``: the defaults, with an int ``rng`` so that every fit of the
same data is the same fit (scikit-learn's checks seed estimators through ``random_state``, which numtk
calls ``rng``). ``EXPECTED_FAILED`` lists, with the reason, the checks that do not apply; the tutorial
(docs/tutorial/ftt.rst, "scikit-learn compatibility") says the same.
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_regressors_train, parametrize_with_checks

from numtk.ftt import FunctionalTT

EXPECTED_FAILED = {
    "check_sample_weight_equivalence_on_dense_data": (
        "a weight is not a repetition here: 10% of the rows are drawn and held out to validate each sweep (a row "
        "repeated k times can land on both sides of the split, a row of weight k on one), and the box of the "
        "bounded bases is inferred from every row of X, zero-weight rows included; both change the fit"),
    "check_complex_data": ("numtk refuses complex X with a TypeError naming `X` (its validation convention, in "
                           "every area); scikit-learn expects a ValueError"),
    "check_dtype_object": ("numtk refuses object arrays with a TypeError naming `X` instead of converting them "
                           "(its validation convention, in every area)"),
}


@parametrize_with_checks([FunctionalTT(rng=0)], expected_failed_checks=lambda est: EXPECTED_FAILED)
def test_sklearn_checks(estimator, check):
    check(estimator)


def test_check_regressors_train_for_several_seeds():
    # the case: degree 2 on the check's data returned the constant model (R^2 = 0 < 0.5) for these seeds
    for seed in range(5):
        check_regressors_train("FunctionalTT", FunctionalTT(degree=2, rng=seed))


def _data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.01 * rng.standard_normal(n)


def test_parameters_are_stored_unchanged_and_fit_returns_self():
    domain, reg = [[-1.0, 1.0]] * 3, {"ridge": 1e-8, "h2": 1e-4}
    rng = np.random.default_rng(3)
    est = FunctionalTT(degree=[4, 5, 6], domain=domain, regularization=reg, rng=rng)
    params = est.get_params()
    assert params["domain"] is domain and params["regularization"] is reg and params["rng"] is rng
    X, y = _data()
    before = est.get_params()
    assert est.fit(X, y) is est
    assert est.get_params() == before and est.get_params()["domain"] is domain
    public = [k for k in vars(est) if not k.startswith("_")]
    assert sorted(k for k in public if not k.endswith("_")) == sorted(before)  # fit adds only k_ attributes
    assert {"cores_", "ranks_", "domain_", "bases_", "n_features_in_", "n_iter_", "history_", "status_",
            "message_"} <= {k for k in public if k.endswith("_")}


def test_an_int_rng_makes_every_fit_the_same_and_clone_refits_identically():
    X, y = _data()
    est = FunctionalTT(degree=5, rng=7)
    first = est.fit(X, y).predict(X)
    np.testing.assert_array_equal(est.fit(X, y).predict(X), first)
    np.testing.assert_array_equal(clone(est).fit(X, y).predict(X), first)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "cores_")


def test_score_is_r2():
    from sklearn.metrics import r2_score

    X, y = _data()
    f = FunctionalTT(degree=4, rng=0).fit(X, y)
    Xt, yt = _data(100, seed=1)
    w = np.random.default_rng(2).uniform(0.5, 2.0, 100)
    assert f.score(Xt, yt) == pytest.approx(r2_score(yt, f.predict(Xt)), rel=1e-12)
    assert f.score(Xt, yt, sample_weight=w) == pytest.approx(r2_score(yt, f.predict(Xt), sample_weight=w),
                                                             rel=1e-12)
    with pytest.raises(ValueError, match="`y`"):
        f.score(Xt, yt[:-1])


def test_grid_search_and_pipeline():
    X, y = _data()
    search = GridSearchCV(FunctionalTT(rng=0), {"degree": [2, 4]}, cv=3).fit(X, y)
    assert search.best_params_ == {"degree": 4}  # sin(2 x) is not quadratic
    assert search.best_estimator_.degree == 4 and search.best_estimator_.n_features_in_ == 3
    assert search.score(X, y) > 0.99
    pipe = make_pipeline(StandardScaler(), FunctionalTT(degree=4, rng=0)).fit(X, y)
    assert pipe.score(X, y) > 0.99


def test_warm_start_init_survives_clone():
    X, y = _data()
    start = FunctionalTT(degree=4, rng=0).fit(X, y)
    est = FunctionalTT(degree=4, rng=1, sweeps=1, init=start)
    twin = clone(est)
    # a fitted train given as init is data (as KMeans' init array): it is kept fitted, not cloned unfitted
    assert twin.init is start and hasattr(twin.init, "cores_")
    np.testing.assert_array_equal(twin.fit(X, y).predict(X), est.fit(X, y).predict(X))
    np.testing.assert_array_equal(est.domain_, start.domain_)
    with pytest.raises(ValueError, match="`init`.*not fitted"):
        FunctionalTT(init=FunctionalTT()).fit(X, y)
    with pytest.raises(ValueError, match="`init` has 3 features"):
        FunctionalTT(init=start).fit(X[:, :2], y)


def test_fitted_state_errors_are_scikit_learns():
    X, y = _data(50)
    est = FunctionalTT()
    for method in (est.predict, est.gradient, est.laplacian, est.evaluate):
        with pytest.raises(NotFittedError, match="not fitted"):
            method(X)
    with pytest.raises(NotFittedError):
        est.score(X, y)
    with pytest.raises(NotFittedError):
        est.round(tol=1e-3)
    with pytest.raises(NotFittedError):
        est.integrate()
    from numtk._lib._estimator import NotFittedError as NumtkNotFittedError

    with pytest.raises(NumtkNotFittedError):
        est.predict(X)


def test_input_messages_follow_scikit_learn_where_its_checks_read_them():
    X, y = _data(50)
    f = FunctionalTT(degree=3, rng=0).fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features, but FunctionalTT is expecting 3 features as input"):
        f.predict(X[:, :2])
    with pytest.raises(ValueError, match="`X` must be 2-D.*Reshape your data"):
        f.predict(X[0])
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(50, 0\)\) while a minimum of 1 is required"):
        FunctionalTT().fit(X[:, :0], y)
    with pytest.raises(ValueError, match="requires y to be passed"):
        FunctionalTT().fit(X, None)
    # a column vector y: scikit-learn's warning, the same fit as the 1-D y
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = FunctionalTT(degree=3, rng=0).fit(X, y[:, None])
    assert any(issubclass(w.category, DataConversionWarning) for w in caught)
    np.testing.assert_array_equal(g.predict(X), f.predict(X))
    with pytest.raises(ValueError, match="`y` must be 1-D"):
        FunctionalTT().fit(X, np.column_stack([y, y]))


def test_pickle_after_fit():
    X, y = _data(100)
    f = FunctionalTT(degree=3, rng=0).fit(X, y)
    again = pickle.loads(pickle.dumps(f))
    np.testing.assert_array_equal(again.predict(X), f.predict(X))
    assert again.status_ == f.status_ and again.n_iter_ == f.n_iter_

