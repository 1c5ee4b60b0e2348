"""Bad input to numtk.counterfactual: clear errors naming the parameter, no silent non-finite results."""

import math
import warnings

import numpy as np
import pytest

from numtk.counterfactual import (
    GroupCounterfactualMap,
    distance_preserving_counterfactuals,
    distortion_ratios,
    lipschitz_counterfactuals,
    make_groups,
    transport_cost,
    validity,
    wachter_counterfactuals,
)

W = np.array([1.0, -0.5, 0.25])
B = -1.0


@pytest.fixture
def X():
    return np.random.default_rng(0).normal(size=(12, 3))


# --- distortion_ratios -----------------------------------------------------------------------

def test_distortion_ratios_with_a_huge_counterfactual_entry_is_not_a_perfect_isometry(X):
    Xc = 1.5 * X
    Xc[0, 0] = 1e200
    res = distortion_ratios(X, Xc)
    assert math.isfinite(res.min_ratio) and math.isfinite(res.max_ratio)
    assert res.max_ratio > 1e199
    assert res.distortion == pytest.approx(1.0)
    np.testing.assert_allclose(res.min_ratio, 1.5, rtol=1e-12)  # the other pairs keep their ratio


def test_distortion_ratios_of_huge_data_scale_like_the_data(X):
    res = distortion_ratios(X * 1e300, X * 1.5e300)
    np.testing.assert_allclose([res.min_ratio, res.max_ratio], [1.5, 1.5], rtol=1e-12)


def test_distortion_ratios_that_overflow_are_refused(X):
    with pytest.raises(ValueError, match="`X_cf`"):
        distortion_ratios(X * 1e-300, X * 1e300)


def test_distortion_ratios_max_pairs_is_a_ceiling_not_an_allocation(X):
    # max_pairs only caps the sample: beyond the n(n-1)/2 pairs there are, every pair is used
    full = distortion_ratios(X, 2 * X)
    capped = distortion_ratios(X, 2 * X, max_pairs=10**15)
    assert capped.n_pairs == full.n_pairs == len(X) * (len(X) - 1) // 2
    with pytest.raises(ValueError, match="`max_pairs`"):
        distortion_ratios(X, X, max_pairs=0)


# --- wachter and the other per-point methods -------------------------------------------------

def test_wachter_on_huge_X_refuses_overflowing_results():
    with pytest.raises(ValueError, match="`X`"):
        wachter_counterfactuals(-np.full((4, 3), 1e300), [1.0, 1.0, 1.0], 0.0)
    with pytest.raises(ValueError, match="`X`"):  # scores overflow
        wachter_counterfactuals(np.full((4, 3), 1e308), [1.0, 1.0, 1.0], 0.0)


@pytest.mark.parametrize("kw", [dict(b=-1e308), dict(margin=1e308)])
def test_wachter_unreachable_threshold_is_refused(X, kw):
    b = kw.pop("b", B)
    with pytest.raises(ValueError, match="`margin`"):
        wachter_counterfactuals(X, W, b, **kw)


@pytest.mark.parametrize("w", [np.ones((2, 3)), np.ones((3, 1)), np.ones((1, 3, 1))])
def test_wachter_2d_w_is_refused(X, w):
    with pytest.raises(ValueError, match="`w`"):
        wachter_counterfactuals(X, w, B)


@pytest.mark.parametrize("w", [np.ones(2), np.ones(5)])
def test_w_of_the_wrong_length_names_w(X, w):
    with pytest.raises(ValueError, match="`w`"):
        wachter_counterfactuals(X, w, B)


def test_complex_w_and_b_are_refused(X):
    with pytest.raises(TypeError, match="`w`"):
        wachter_counterfactuals(X, W + 0j, B)
    with pytest.raises(TypeError, match="`b`"):
        wachter_counterfactuals(X, W, 1j)


def test_confidence_is_validated_even_with_a_margin(X):
    with pytest.raises(ValueError, match="`confidence`"):
        wachter_counterfactuals(X, W, B, confidence=1.0, margin=1.0)


@pytest.mark.parametrize("target", [2, "a", np.array([1, 0])])
def test_bad_target_is_refused(X, target):
    with pytest.raises(ValueError, match="`target`"):
        wachter_counterfactuals(X, W, B, target=target)


@pytest.mark.parametrize("immutable, exc", [
    ([3], ValueError), ([-4], ValueError),
    ([True, False], ValueError), ([[0]], ValueError), ([[1.0, 2.0], [3.0]], TypeError),
    (np.array([0.5]), TypeError), (np.array([2**63], dtype=np.uint64), ValueError),
])
def test_bad_immutable_is_refused(X, immutable, exc):
    with pytest.raises(exc, match="`immutable`"):
        wachter_counterfactuals(X, W, B, immutable=immutable)


def test_repeated_immutable_indices_fix_the_feature_once(X):
    ref = wachter_counterfactuals(X, W, B, immutable=[2])
    for repeated in ([2, 2], [2, -1]):  # concatenated lists; -1 is the last of the 3 features
        res = wachter_counterfactuals(X, W, B, immutable=repeated)
        np.testing.assert_array_equal(res.x_cf, ref.x_cf)


def test_boolean_data_is_accepted_as_0_and_1(X):
    Xb = X > 0
    ref = wachter_counterfactuals(Xb.astype(float), W, B)
    np.testing.assert_array_equal(wachter_counterfactuals(Xb, W, B).x_cf, ref.x_cf)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_immutable_int_index_arrays_of_any_width(X, dtype):
    ref = wachter_counterfactuals(X, W, B, immutable=[1])
    res = wachter_counterfactuals(X, W, B, immutable=np.array([1], dtype=dtype))
    np.testing.assert_array_equal(res.x_cf, ref.x_cf)


@pytest.mark.parametrize("bounds", [(1j, None), ("a", None)])
def test_bad_bounds_are_refused(X, bounds):
    with pytest.raises(TypeError, match="`bounds"):
        wachter_counterfactuals(X, W, B, bounds=bounds)


def test_lipschitz_validates_unused_n_landmarks_rng_and_solver(X):
    with pytest.raises(ValueError, match="`n_landmarks`"):
        lipschitz_counterfactuals(X, W, B, n_landmarks=10**12)
    with pytest.raises(TypeError, match="`rng`"):
        lipschitz_counterfactuals(X, W, B, rng="x")
    with pytest.raises(ValueError, match="`solver`"):
        lipschitz_counterfactuals(X, W, B, solver="no-such-solver")
    with pytest.raises(TypeError, match="`solver_options`"):
        lipschitz_counterfactuals(X, W, B, solver_options=5)


def test_lipschitz_and_distance_preserving_refuse_huge_data():
    Xh = -np.full((4, 3), 1e160)
    with pytest.raises(ValueError, match="`X`"):
        lipschitz_counterfactuals(Xh, [1.0, 1.0, 1.0], 0.0)
    with pytest.raises(ValueError, match="`X`"):
        distance_preserving_counterfactuals(Xh, [1.0, 1.0, 1.0], 0.0)


@pytest.mark.parametrize("kw, name", [
    (dict(max_iter=10**12), "`max_iter`"), (dict(n_random_starts=10**12), "`n_random_starts`"),
    (dict(progress="yes"), "`progress`"), (dict(n_landmarks=0), "`n_landmarks`"),
    (dict(solver="no-such-solver"), "`solver`"), (dict(distortion=1e300), "`distortion`"),
    (dict(distortion=0.5), "`distortion`"),
])
def test_distance_preserving_bad_keywords_are_refused(X, kw, name):
    with pytest.raises((ValueError, TypeError), match=name):
        distance_preserving_counterfactuals(X[:6], W, B, **kw)


def test_per_point_methods_on_one_row(X):
    for f in (wachter_counterfactuals, lipschitz_counterfactuals, distance_preserving_counterfactuals):
        res = f(X[:1], W, B)
        assert np.all(np.isfinite(res.x_cf)) and bool(res.valid.all())


# --- GroupCounterfactualMap ------------------------------------------------------------------

@pytest.mark.parametrize("kw, name", [
    (dict(covariance_ddof=-1.0), "`covariance_ddof`"), (dict(covariance_ridge=float("nan")), "`covariance_ridge`"),
    (dict(max_iter=0), "`max_iter`"), (dict(max_iter=10**12), "`max_iter`"), (dict(max_iter=1.5), "`max_iter`"),
    (dict(solver_options="x"), "`solver_options`"), (dict(solver="no-such-solver"), "`solver`"),
    (dict(distortion=1e308), "`distortion`"), (dict(confidence=0.0), "`confidence`"),
    (dict(immutable=[[1.0, 2.0], [3.0]]), "`immutable`"),
])
def test_group_map_bad_parameters_are_refused_by_fit(X, kw, name):
    with pytest.raises((ValueError, TypeError), match=name):
        GroupCounterfactualMap("diagonal", **kw).fit(X, (W, B))


@pytest.mark.parametrize("sw", [np.array(["a"] * 12), [[1.0, 2.0], [3.0]], object(), np.full(12, 1e308)])
def test_group_map_bad_sample_weight_is_refused(X, sw):
    with pytest.raises((ValueError, TypeError), match="`sample_weight`"):
        GroupCounterfactualMap("diagonal").fit(X, (W, B), sample_weight=sw)


def test_group_map_unreachable_margin_is_refused_not_called_infeasible(X):
    with pytest.raises(ValueError, match="`margin`") as info:
        GroupCounterfactualMap("diagonal", margin=1e308).fit(X, (W, B))
    assert "infeasible" not in str(info.value).lower()


@pytest.mark.parametrize("family", ["translation", "diagonal", "scale", "gaussian_commuting", "psd",
                                    "gaussian_ot"])
@pytest.mark.parametrize("scale", [1e-6, 1e20])
def test_group_map_badly_scaled_groups_are_solved_in_rescaled_units(X, family, scale):
    tau = math.log(4.0)  # the problem in units of `scale` is the unit one, exactly
    m = GroupCounterfactualMap(family, margin=tau * scale, covariance_ridge=1e-6 * scale**2).fit(
        X * scale, (W, B * scale))
    assert m.predict_valid(X * scale).all()
    ref = GroupCounterfactualMap(family, margin=tau).fit(X, (W, B))
    np.testing.assert_allclose(m.A_, ref.A_, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.c_ / scale, ref.c_, rtol=1e-4, atol=1e-4)


def test_group_map_transform_refuses_overflowing_counterfactuals(X):
    m = GroupCounterfactualMap("diagonal", distortion=2.0).fit(X, (W, B))
    with pytest.raises(ValueError, match="`X`"):
        m.transform(np.full((2, 3), 1.7e308) * np.sign(m.a_ - 1 + 1e-300))


# --- validity, transport_cost, make_groups ----------------------------------------------------

def test_validity_with_overflowing_scores_compares_exactly():
    X = np.array([[1e308, 1e308, -1e308], [1e308, 1e308, 1e308], [-1e308, -1e308, -1e308]])
    assert validity(X, [1.0, 1.0, 1.0], 0.0, margin=0.0) == pytest.approx(2 / 3)


def test_validity_threshold_is_validated_with_a_margin(X):
    with pytest.raises(ValueError, match="`threshold`"):
        validity(X, W, B, threshold=1.5, margin=0.0)


def test_transport_cost_without_overflow_of_the_squares():
    assert transport_cost(np.zeros((2, 3)), np.full((2, 3), 1e200)) == pytest.approx(math.sqrt(3) * 1e200)
    with pytest.raises(ValueError, match="`X_cf`"):
        transport_cost(np.zeros((2, 3)), np.full((2, 3), 1e200), squared=True)
    with pytest.raises(ValueError, match="`X_cf`"):
        transport_cost(np.full((2, 3), -1e308), np.full((2, 3), 1e308))


def test_make_groups_huge_pad_to_is_refused_before_allocating(X):
    y = np.array([0, 1] * 6)
    with pytest.raises(ValueError, match="`pad_to`"):
        make_groups(X, y, n_clusters=2, pad_to=10**12, rng=0)
    with pytest.raises(ValueError, match="`n_clusters`"):
        make_groups(X, y, n_clusters=10**12, rng=0)


@pytest.mark.parametrize("labels", [[[1.0, 2.0], [3.0]], object(), np.ones(2, complex)])
def test_make_groups_bad_labels_are_refused(X, labels):
    with pytest.raises((ValueError, TypeError), match="`labels`"):
        make_groups(X, np.array([0, 1] * 6), n_clusters=2, labels=labels, rng=0)


def test_no_arithmetic_exception_escapes():
    """ZeroDivisionError, LinAlgError, OverflowError or NotImplementedError never reach the caller."""
    bad = (ZeroDivisionError, np.linalg.LinAlgError, OverflowError, NotImplementedError)
    Xs = [np.zeros((3, 3)), np.ones((1, 3)), np.full((3, 3), 1e154), np.full((3, 3), -1e300),
          np.full((3, 3), 1e-308)]
    calls = []
    for Xv in Xs:
        calls += [lambda Xv=Xv: wachter_counterfactuals(Xv, W, B),
                  lambda Xv=Xv: distortion_ratios(Xv, Xv * 2.0),
                  lambda Xv=Xv: transport_cost(Xv, Xv * 2.0),
                  lambda Xv=Xv: validity(Xv, W, B),
                  lambda Xv=Xv: GroupCounterfactualMap("diagonal", max_iter=float("inf")).fit(Xv, (W, B)),
                  lambda Xv=Xv: GroupCounterfactualMap("gaussian_commuting").fit(Xv, (W, B))]
    for call in calls:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                call()
            except bad as e:  # pragma: no cover - the failure
                pytest.fail(f"{type(e).__name__}: {e}")
            except (ValueError, TypeError):
                pass
