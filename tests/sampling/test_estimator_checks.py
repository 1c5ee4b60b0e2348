"""ScoreBasedSampler under scikit-learn's estimator checks, and the data-free versions of those that need data.

The sampler is an estimator whose ``fit`` takes no data: the target density given to the constructor is the
problem. scikit-learn's checks that fit on random ``X`` therefore do not apply (``fit`` refuses data); they are
listed below with the reason, and the properties they guard that still mean something (fit returns self, leaves
the parameters alone, adds only fitted attributes ending in ``_``, is reproducible, survives pickling and
cloning) are checked after a data-free ``fit()``.
"""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from numtk._lib._estimator import NotFittedError
from numtk.sampling import ScoreBasedSampler, gaussian

_TINY = dict(solver="bsde", n_steps=5, degree=4, refine=0, n_paths=200, rng=0,
             options={"pilot_steps": 5, "refine_paths": 50})


def _sampler(**kw):
    return ScoreBasedSampler(gaussian([0.5], [0.8]), **{**_TINY, **kw})


def _fit(est):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit()


_NO_DATA = "fit takes no data (the target density given to the constructor is the problem); X must be None"
#: scikit-learn's checks that fit on data (random X, sparse X, X with NaN, one sample, ...) or compare the
#: outputs of predict/transform on it: none applies to an estimator without data.
EXPECTED_FAILED = {name: _NO_DATA for name in [
    "check_fit_score_takes_y", "check_estimators_overwrite_params", "check_dont_overwrite_parameters",
    "check_estimators_fit_returns_self", "check_readonly_memmap_input", "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit", "check_estimators_dtypes", "check_complex_data", "check_dtype_object",
    "check_estimators_empty_data_messages", "check_pipeline_consistency", "check_estimators_nan_inf",
    "check_estimator_sparse_tag", "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_fit2d_1sample", "check_fit2d_1feature", "check_dict_unchanged",
    "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
]}


@parametrize_with_checks([_sampler()], expected_failed_checks=lambda est: EXPECTED_FAILED)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


# ---------------------------------------------------------------------------------------------------------
# the data-free counterparts

def test_fit_returns_self_and_leaves_the_parameters_unchanged():
    options = {"pilot_steps": 5, "refine_paths": 50}
    est = _sampler(options=options)
    before = est.get_params()
    assert _fit(est) is est
    after = est.get_params()
    assert after.keys() == before.keys()
    assert all(after[k] is before[k] for k in before)  # the very objects given, not copies
    assert options == {"pilot_steps": 5, "refine_paths": 50}  # and the caller's dict is not modified


def test_fit_adds_only_fitted_attributes_ending_in_an_underscore():
    est = _sampler()
    before = set(vars(est))
    assert before == set(est.get_params())  # __init__ stores the parameters and nothing else
    _fit(est)
    public = {a for a in set(vars(est)) - before if not a.startswith("_")}
    assert public == {"solution_", "times_", "n_features_in_"}
    assert est.n_features_in_ == 1 and len(est.times_) == _TINY["n_steps"] + 1


def test_fit_is_reproducible_with_an_int_rng():
    a, b = _fit(_sampler(rng=3)), _fit(_sampler(rng=3))
    np.testing.assert_array_equal(a.sample(50, rng=1), b.sample(50, rng=1))
    np.testing.assert_array_equal(a.solution_.W[0].cores_[0], b.solution_.W[0].cores_[0])
    # and refitting the same estimator gives the same fit again
    first = a.solution_.W[0].predict(np.array([[0.3]]))
    _fit(a)
    np.testing.assert_array_equal(a.solution_.W[0].predict(np.array([[0.3]])), first)


def test_pickle_and_clone_after_fit():
    est = _fit(_sampler())
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.sample(40, rng=2), est.sample(40, rng=2))
    assert again.log_Z(200, rng=4).value == est.log_Z(200, rng=4).value
    fresh = clone(est)
    assert fresh.get_params().keys() == est.get_params().keys()
    assert not hasattr(fresh, "solution_")
    with pytest.raises(NotFittedError):
        fresh.sample(5)


def test_set_params_then_fit_uses_the_new_values():
    est = _sampler()
    assert est.set_params(n_steps=3, degree=5) is est
    _fit(est)
    assert len(est.times_) == 4 and est.solution_.W[-1].degree == 5


def test_fit_refuses_data():
    with pytest.raises(ValueError, match="`X`"):
        _sampler().fit(np.zeros((4, 1)))
    with pytest.raises(ValueError, match="`y`"):
        _sampler().fit(None, np.zeros(4))
