"""GroupCounterfactualMap under scikit-learn's estimator checks, and the estimator contract.

``GroupCounterfactualMap.fit(X, classifier)`` takes the classifier to explain where scikit-learn's
checks pass targets ``y``. So the checks run twice:

- on ``GroupCounterfactualMap`` itself: the checks that never call ``fit`` (construction,
  ``get_params``/``set_params``, ``clone``, ``repr``, tags, errors before fitting) must pass; every
  check that calls ``fit(X, y)`` is expected to fail on the classifier argument (``EXPECTED``);
- on ``SuppliedClassifierMap``, a subclass whose ``fit(X, y)`` and ``fit_transform(X, y)`` ignore
  ``y`` and supply a fixed linear score of X's width instead (nothing else is changed): the
  checks that call ``fit`` then exercise the real fitting and transforming code (pickling after
  fit, ``n_features_in_``, fitted-state errors, idempotence, dtypes, NaN/inf, sample weights,
  read-only and Fortran-ordered input, ...). ``NOT_APPLICABLE`` lists, with the reason, the checks
  that still do not apply to an estimator of this kind.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from numtk._lib._estimator import NotFittedError
from numtk.counterfactual import GroupCounterfactualMap

# Checks that do not call fit: they run on GroupCounterfactualMap itself and must pass.
WITHOUT_FIT = {
    "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types",
    "check_estimator_repr", "check_no_attributes_set_in_init", "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order", "check_transformers_unfitted",
    "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params",
}

_TAKES_CLASSIFIER = ("calls fit(X, y) with class targets y; fit's second argument is the classifier to "
                     "explain (runs on SuppliedClassifierMap)")
_NO_Y_IN_SCORE = ("calls score(X, y); score(X) is the fraction of rows whose counterfactual is valid and "
                  "has no targets")

# Checks that do not apply even with the classifier supplied, and why.
NOT_APPLICABLE = {
    "check_fit_score_takes_y": _NO_Y_IN_SCORE + "; fit's second argument is the classifier, not y",
    "check_pipeline_consistency": _NO_Y_IN_SCORE,
    "check_n_features_in_after_fitting": (
        _NO_Y_IN_SCORE + "; transform, predict_valid and score refuse a wrong number of features with a "
        "ValueError naming `X` in numtk's wording (test_methods_check_the_number_of_features)"),
    "check_complex_data": ("numtk refuses complex X with a TypeError naming `X` (its validation convention, "
                           "as for every area); scikit-learn expects a ValueError"),
    "check_dtype_object": ("numtk refuses object arrays with a TypeError naming `X` instead of converting "
                           "them (its validation convention)"),
    "check_estimators_empty_data_messages": (
        "X with no column is refused with a ValueError in numtk's wording ('`X` must have at least one "
        "column'), not scikit-learn's; X with no row passes"),
    "check_fit2d_predict1d": ("1-D X is refused with a ValueError in numtk's wording ('`X` must be 2-D'), "
                              "not scikit-learn's 'Reshape your data'"),
}


def _width(X):
    shape = getattr(X, "shape", None)
    if shape is None:
        try:
            shape = np.asarray(X, dtype=object).shape
        except (TypeError, ValueError):
            shape = ()
    return int(shape[1]) if len(shape) == 2 and shape[1] > 0 else 1


class SuppliedClassifierMap(GroupCounterfactualMap):
    """GroupCounterfactualMap whose fit(X, y) ignores y and explains a fixed score of X's width."""

    @staticmethod
    def _classifier(X):
        d = _width(X)
        return np.linspace(1.0, 2.0, d), -1.0

    def fit(self, X, y=None, sample_weight=None):
        return super().fit(X, self._classifier(X), sample_weight=sample_weight)

    def fit_transform(self, X, y=None, sample_weight=None):
        return super().fit_transform(X, self._classifier(X), sample_weight=sample_weight)


def _expected_on_the_map(estimator):
    from sklearn.utils.estimator_checks import estimator_checks_generator

    names = {getattr(check, "func", check).__name__ for _, check in estimator_checks_generator(estimator)}
    assert WITHOUT_FIT <= names
    out = {name: _TAKES_CLASSIFIER for name in names - WITHOUT_FIT}
    out.update({k: v for k, v in NOT_APPLICABLE.items() if k in names})
    return out


@parametrize_with_checks([GroupCounterfactualMap()], expected_failed_checks=_expected_on_the_map)
def test_sklearn_checks_on_the_map(estimator, check):
    check(estimator)


@parametrize_with_checks([SuppliedClassifierMap()], expected_failed_checks=lambda est: NOT_APPLICABLE)
def test_sklearn_checks_with_the_classifier_supplied(estimator, check):
    check(estimator)


# --------------------------------------------------------------------------- the contract, directly

def _group(n=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    return X, (w, -1.0 - float(np.max(X @ w)))


def test_parameters_are_stored_unchanged_and_fit_returns_self():
    bounds, imm = ([-5.0] * 4, 5.0), [1]
    est = GroupCounterfactualMap("psd", 1.5, 0.9, immutable=imm, bounds=bounds, solver_options={"max_iter": 5})
    params = est.get_params()
    assert params["immutable"] is imm and params["bounds"] is bounds
    X, clf = _group()
    est = GroupCounterfactualMap("diagonal", 1.5)
    before = est.get_params()
    assert est.fit(X, clf) is est
    assert est.get_params() == before
    public = [k for k in vars(est) if not k.startswith("_")]
    assert sorted(k for k in public if not k.endswith("_")) == sorted(before)  # fit adds only k_ attributes


def test_set_params_then_fit_and_clone():
    X, clf = _group()
    est = GroupCounterfactualMap("diagonal").set_params(distortion=1.01)
    est.fit(X, clf)
    lo, hi = est.distortion_bounds_
    assert 1 / 1.01 - 1e-12 <= lo <= hi <= 1.01 + 1e-12
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "A_")
    with pytest.raises(ValueError, match="invalid parameter"):
        est.set_params(K=2.0)


def test_fitted_state_errors():
    X, _ = _group()
    est = GroupCounterfactualMap()
    for method in (est.transform, est.predict_valid, est.score):
        with pytest.raises(NotFittedError, match="not fitted"):
            method(X)


def test_methods_check_the_number_of_features():
    X, clf = _group()
    est = GroupCounterfactualMap().fit(X, clf)
    assert est.n_features_in_ == 4
    for method in (est.transform, est.predict_valid, est.score):
        with pytest.raises(ValueError, match="`X` has 3 features; the fitted map has 4"):
            method(X[:, :3])


def test_pickle_after_fit_and_fit_path_copies():
    X, clf = _group()
    est = GroupCounterfactualMap("diagonal", 2.0).fit(X, clf)
    again = pickle.loads(pickle.dumps(est))
    assert_array_equal(again.transform(X), est.transform(X))
    maps = est.fit_path(X, clf, [1.5, 3.0])
    assert [m.distortion for m in maps] == [1.5, 3.0] and est.distortion == 2.0
    assert all(type(m) is GroupCounterfactualMap and m is not est for m in maps)
    assert_array_equal(maps[0].A_, GroupCounterfactualMap("diagonal", 1.5).fit(X, clf).A_)


def test_sample_weight_is_keyword_only():
    X, clf = _group()
    with pytest.raises(TypeError):
        GroupCounterfactualMap().fit(X, clf, np.ones(30))
    w2 = GroupCounterfactualMap().fit(X, clf, sample_weight=np.full(30, 2.0))
    assert w2.cost_ == pytest.approx(2 * GroupCounterfactualMap().fit(X, clf).cost_, rel=1e-9)
