"""Bad and extreme inputs of numtk.seriation: refused with a message naming the parameter, or handled
(extreme scales of X are removed exactly), never a crash, a pybind11 or third-party message, or a
non-finite result."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.seriation import (ltsa_seriation, make_curve, order_agreement, recanati_seriation, recovery_bound,
                             spectral_seriation, stage, tsne_seriation)
from numtk.seriation._graph import knn_graph

TSNE_FAST = {"max_iter": 250}


@pytest.fixture(scope="module")
def helix():
    return make_curve("helix", 150, 8, noise=0.01, rng=0)


def _all_finite(res):
    for key in res.keys():
        value = res[key]
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), key
        elif isinstance(value, float):
            assert np.isfinite(value), key


# --------------------------------------------------------------------------------------------------
# t-SNE on constant rows: scikit-learn segfaults; refused first
# --------------------------------------------------------------------------------------------------

def test_tsne_on_constant_rows_is_refused_before_scikit_learn():
    # run in a child: before the fix this killed the interpreter (SIGSEGV inside TSNE)
    code = textwrap.dedent("""
        import numpy as np
        from numtk.seriation import tsne_seriation
        for X in (np.zeros((40, 3)), np.full((40, 3), 7.5), np.full((10, 2), 1e-320)):
            try:
                tsne_seriation(X, perplexity=5, max_iter=250)
            except ValueError as e:
                assert "`X`" in str(e), e
            else:
                raise AssertionError("accepted")
        print("refused")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused" in out.stdout


def test_tsne_perplexity_beyond_the_rows_names_x_and_perplexity():
    with pytest.raises(ValueError, match="`perplexity`.*`X`"):
        tsne_seriation(np.arange(18.0).reshape(6, 3), perplexity=10)


def test_tsne_duplicated_rows_still_work(helix):
    X = np.repeat(helix[0][:3], 15, axis=0)
    res = tsne_seriation(X, perplexity=5, rng=0, **TSNE_FAST)
    assert np.all(np.isfinite(res.embedding))


def test_tsne_iteration_counts_and_n_jobs_are_validated_here(helix):
    X = helix[0][:40]
    for bad in (2**31, 10**12, 2**63):
        with pytest.raises(ValueError, match="`max_iter`"):
            tsne_seriation(X, perplexity=5, max_iter=bad)
    with pytest.raises(ValueError, match="`n_iter_without_progress`"):
        tsne_seriation(X, perplexity=5, n_iter_without_progress=2**31)
    with pytest.raises(ValueError, match="`n_jobs`"):
        tsne_seriation(X, perplexity=5, n_jobs=2**31)
    with pytest.raises(ValueError, match="`n_jobs` must not be 0"):
        tsne_seriation(X, perplexity=5, n_jobs=0)
    # scikit-learn's own conventions pass through: all cores but one, no progress limit
    res = tsne_seriation(X, perplexity=5, n_jobs=-2, n_iter_without_progress=-1, max_iter=250, rng=0)
    assert sorted(res.order.tolist()) == list(range(40))


def test_tsne_non_finite_init_is_refused(helix):
    init = np.full(40, np.nan)
    with pytest.raises(ValueError, match="`init`"):
        tsne_seriation(helix[0][:40], perplexity=5, init=init)


# --------------------------------------------------------------------------------------------------
# stage: iteration counts and workers bounded before the bindings
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["max_iter", "max_sync_iter"])
@pytest.mark.parametrize("value", [2**31, 10**12, 2**63])
def test_stage_huge_iteration_counts_are_refused_before_the_binding(helix, name, value):
    with pytest.raises(ValueError, match=f"`{name}`"):
        stage(helix[0], n_neighbors=8, **{name: value})


def test_stage_largest_iteration_counts_are_accepted(helix):
    res = stage(helix[0], n_neighbors=8, max_iter=2**31 - 1, max_sync_iter=2**31 - 1)
    assert order_agreement(res.order, helix[1]) > 0.99


@pytest.mark.parametrize("workers", [0, -2, 4096, 2**31])
def test_stage_workers_out_of_range_are_refused_by_numtk(helix, workers):
    with pytest.raises(ValueError, match="`workers`"):
        stage(helix[0], n_neighbors=8, workers=workers)


@pytest.mark.parametrize("workers", [1.5, "x", True])
def test_stage_workers_of_a_wrong_type_are_refused_by_numtk(helix, workers):
    with pytest.raises(TypeError, match="`workers`"):
        stage(helix[0], n_neighbors=8, workers=workers)


@pytest.mark.parametrize("workers", [0, 4096, 2**31, 1.5])
def test_knn_graph_validates_workers_before_scikit_learn(helix, workers):
    with pytest.raises((ValueError, TypeError), match="`workers`"):
        knn_graph(helix[0], 5, workers=workers)


def test_knn_graph_accepts_valid_workers(helix):
    W1, _ = knn_graph(helix[0], 5)
    W2, _ = knn_graph(helix[0], 5, workers=2)
    assert (W1 != W2).nnz == 0


# --------------------------------------------------------------------------------------------------
# Extreme scales of X: removed exactly (the order is scale invariant), no non-finite field
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor", [2.0**600, 2.0**-600, 2.0**-1060])
def test_stage_is_invariant_to_an_extreme_scale_of_x(helix, factor):
    X, t = helix
    ref = stage(X, n_neighbors=8)
    res = stage(X * factor, n_neighbors=8)
    _all_finite(res)
    assert order_agreement(res.order, t) > 0.99
    if factor > 2.0**-1000:  # exact scaling (no subnormal rounding): the same order and tangents
        assert_array_equal(res.order, ref.order)
        assert_allclose(res.embedding / factor, ref.embedding, rtol=1e-9, atol=1e-12)
        assert_allclose(res.tangents, ref.tangents, atol=1e-12)


def test_stage_near_float_max_refuses_an_overflowing_embedding(helix):
    X = helix[0] / np.abs(helix[0]).max() * 1.7e308  # the arc length exceeds float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way (the scale itself is finite)
        with pytest.raises(ValueError, match="`X`"):
            stage(X, n_neighbors=8)
    res = stage(helix[0] / np.abs(helix[0]).max() * 1e306, n_neighbors=8)  # representable: finite
    _all_finite(res)


@pytest.mark.parametrize("func", [spectral_seriation, recanati_seriation])
@pytest.mark.parametrize("top", [1e308, 1e-310])
def test_graph_baselines_handle_x_near_the_float_limits(helix, func, top):
    X, t = helix
    ref = func(X, n_neighbors=10)
    res = func(X / np.abs(X).max() * top, n_neighbors=10)  # was: "cannot reshape array of size ..."
    _all_finite(res)
    assert order_agreement(res.order, t) == pytest.approx(order_agreement(ref.order, t), abs=0.05)


def test_gaussian_bandwidth_is_in_the_units_of_x(helix):
    X = helix[0]
    factor = 2.0**600
    a = spectral_seriation(X, n_neighbors=10, weights="gaussian", bandwidth=0.5)
    b = spectral_seriation(X * factor, n_neighbors=10, weights="gaussian", bandwidth=0.5 * factor)
    assert_array_equal(a.order, b.order)


@pytest.mark.parametrize("func", [ltsa_seriation, lambda X: tsne_seriation(X, perplexity=20, rng=0, **TSNE_FAST)])
def test_manifold_baselines_handle_x_near_float_max(helix, func):
    res = func(helix[0] / np.abs(helix[0]).max() * 1e308)
    _all_finite(res)


@pytest.mark.parametrize("func", [spectral_seriation, recanati_seriation])
def test_graph_baselines_on_many_duplicate_rows_finish(helix, func):
    # duplicates were not linked: 150 isolated nodes and an O(C^2) bridging (minutes)
    X = np.repeat(helix[0][:5], 30, axis=0)
    res = func(X, n_neighbors=15)
    _all_finite(res)
    assert res.order.shape == (150,)


# --------------------------------------------------------------------------------------------------
# Too few (distinct) rows: the message says that X is the problem
# --------------------------------------------------------------------------------------------------

def test_stage_too_few_distinct_rows_names_x():
    X = np.repeat(np.arange(18.0).reshape(6, 3), 3, axis=0)
    with pytest.raises(ValueError, match="`n_neighbors`.*`X` has too few distinct rows"):
        stage(X, n_neighbors=8)


@pytest.mark.parametrize("func", [spectral_seriation, recanati_seriation, ltsa_seriation])
def test_baselines_too_few_rows_name_x(func):
    with pytest.raises(ValueError, match="`n_neighbors`.*`X`"):
        func(np.arange(18.0).reshape(6, 3), n_neighbors=8)


@pytest.mark.parametrize("func", [spectral_seriation, recanati_seriation, ltsa_seriation, tsne_seriation])
def test_ragged_x_is_refused_naming_x(func):
    with pytest.raises(TypeError, match="`X`"):
        func([[1.0, 2.0], [3.0]])


# --------------------------------------------------------------------------------------------------
# recanati counts
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["n_components", "k_local"])
def test_recanati_absurd_counts_are_refused(helix, name):
    with pytest.raises(ValueError, match=f"`{name}`"):
        recanati_seriation(helix[0], **{name: 10**12})


# --------------------------------------------------------------------------------------------------
# make_curve
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{"n_samples": 10**12}, {"n_samples": 2**63}, {"n_features": 10**12},
                                {"n_features": 2**63}])
def test_huge_make_curve_is_refused_before_allocating(kw):
    name = next(iter(kw))
    with pytest.raises(ValueError, match=f"`{name}`"):
        make_curve("helix", **{"n_samples": 10, "n_features": 3, **kw})


def test_make_curve_overflowing_noise_is_refused():
    with pytest.raises(ValueError, match="`noise`"):
        make_curve("helix", 50, 3, noise=1e308, rng=0)


@pytest.mark.parametrize("params, exc", [(3, TypeError), ("length", TypeError), ({"length": np.nan}, ValueError),
                                         ({"length": -1.0}, ValueError), ({"modes": 10**12}, ValueError)])
def test_make_curve_params_are_validated(params, exc):
    kind = "random_fourier" if "modes" in getattr(params, "keys", lambda: ())() else "line"
    with pytest.raises(exc, match="`params"):
        make_curve(kind, 20, 3, params=params)


def test_make_curve_overflowing_params_are_refused():
    with pytest.raises(ValueError, match="`params`"):
        make_curve("arc", 20, 3, params={"radius": 1e308, "angle": 3.0}, return_info=True, rng=0)


@pytest.mark.parametrize("value", ["yes", 2, None])
def test_make_curve_return_info_must_be_a_bool(value):
    with pytest.raises(TypeError, match="`return_info`"):
        make_curve("line", 20, 3, return_info=value)


# --------------------------------------------------------------------------------------------------
# order_agreement
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [np.zeros(5), np.full(5, 1e308), np.full(5, np.inf), np.full(5, np.nan)])
def test_order_agreement_refuses_constant_or_non_finite_positions(t):
    with pytest.raises(ValueError, match="`t`"):
        order_agreement(np.arange(5), t)


def test_order_agreement_needs_two_rows():
    with pytest.raises(ValueError, match="`order`"):
        order_agreement([0], [0.5])


# --------------------------------------------------------------------------------------------------
# recovery_bound: no ZeroDivisionError / OverflowError / infinite bound
# --------------------------------------------------------------------------------------------------

_BOUND = dict(n_samples=1000, length=1.0, noise=0.001, curvature=0.0, n_features=3, n_neighbors=15,
              tangent_neighbors=45)


@pytest.mark.parametrize("name, value", [("length", 1e-308), ("length", 1e308), ("noise", 1e308),
                                         ("curvature", 1e308), ("bandwidth", 1e308), ("density_max", 1e308),
                                         ("density_min", 1e-308), ("edge_error", 1e308)])
def test_recovery_bound_overflow_is_refused_naming_the_parameter(name, value):
    with pytest.raises(ValueError, match=f"`{name}`"):
        recovery_bound(**{**_BOUND, name: value})


@pytest.mark.parametrize("name, value", [("n_neighbors", 1000), ("tangent_neighbors", 1001)])
def test_recovery_bound_neighbour_counts_beyond_n_samples_are_refused(name, value):
    with pytest.raises(ValueError, match=f"`{name}`"):
        recovery_bound(**{**_BOUND, name: value})


def test_recovery_bound_is_invariant_to_the_unit_of_length():
    a = recovery_bound(**{**_BOUND, "curvature": 2.0})
    c = 1e3
    b = recovery_bound(**{**_BOUND, "length": c, "noise": 0.001 * c, "curvature": 2.0 / c})
    assert b.bound == pytest.approx(a.bound, rel=1e-9)


# --------------------------------------------------------------------------------------------------
# Bridging many components: Boruvka rounds instead of O(C^2) pair queries (a 1-NN graph hung)
# --------------------------------------------------------------------------------------------------

def test_boruvka_closest_pair_tree_matches_the_pairwise_one():
    from numtk.seriation._graph import _closest_pair_tree, _closest_pair_tree_boruvka

    rng = np.random.default_rng(3)
    X = np.r_[rng.normal(size=(300, 2)), rng.normal(size=(300, 2)) + 8, rng.uniform(-5, 15, size=(60, 2))]
    labels = np.r_[np.zeros(300, int), np.ones(300, int), 2 + np.arange(60)]  # two large, 60 single points
    C = 62
    import numtk.seriation._graph as graph

    old = graph._PAIRWISE_MAX_COMPONENTS
    try:
        graph._PAIRWISE_MAX_COMPONENTS = 10**9
        pairwise = _closest_pair_tree(X, labels, C)
    finally:
        graph._PAIRWISE_MAX_COMPONENTS = old
    boruvka = _closest_pair_tree_boruvka(X, labels, C)
    assert boruvka.shape == (C - 1, 2)

    def total(e):
        return np.linalg.norm(X[e[:, 0]] - X[e[:, 1]], axis=1).sum()

    assert total(boruvka) == pytest.approx(total(pairwise), rel=1e-12)


def test_spectral_seriation_with_one_neighbour_finishes():
    X, t = make_curve("helix", 3000, 3, noise=0.01, rng=0)
    res = spectral_seriation(X, n_neighbors=1)  # ~850 components to bridge
    assert res.n_components > 64
    assert order_agreement(res.order, t) > 0.9


# --------------------------------------------------------------------------------------------------
# one point-cloud check for every method
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", [stage, spectral_seriation, recanati_seriation, ltsa_seriation, tsne_seriation])
@pytest.mark.parametrize("bad, err, match", [
    (np.zeros((0, 3)), ValueError, r"`X` must hold at least 1 sample\(s\)"),
    (np.zeros((5, 0)), ValueError, r"`X` must have at least one feature"),
    (np.ones(5), ValueError, "`X` must be 2-D"),
    (np.full((5, 2), np.inf), ValueError, "`X` must be finite"),
    (np.array([[1.0, np.nan]] * 5), ValueError, "`X` must not contain NaN"),
    (np.array([[1e308], [1e309]], dtype=np.longdouble) * 10, ValueError, "`X` must be finite"),
    (np.ones((5, 2), dtype=complex), TypeError, "`X` must have a numeric"),
])
def test_every_method_checks_the_point_cloud_alike(method, bad, err, match):
    with pytest.raises(err, match=match):
        method(bad)
