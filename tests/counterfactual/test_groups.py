"""numtk.counterfactual.make_groups: invariants of the KMeans groups of each class.

Oracles: partition of each label's rows (without a size cap), subset and size bounds (with one),
agreement with scikit-learn's KMeans run with the same seed, reproducibility for a fixed rng, the
padding's shape and jitter scale, and the optional-dependency error of method="kmedoids".
"""

import sys
import types

import numpy as np
import pytest

from numtk._lib import Result
from numtk.counterfactual import make_groups


@pytest.fixture(scope="module")
def blobs():
    from sklearn.datasets import make_blobs

    X, cluster = make_blobs(n_samples=600, centers=6, n_features=3, cluster_std=0.5,
                            random_state=3)
    y = np.where(cluster < 3, "low", "high")  # string labels, three blobs each
    return X, y


def test_result_fields(blobs):
    X, y = blobs
    res = make_groups(X, y, n_clusters=3, rng=0)
    assert isinstance(res, Result)
    assert list(res.keys()) == ["groups", "source_label", "centers", "synthetic"]
    n_groups = len(res.groups)
    assert n_groups == 6
    assert res.source_label.shape == (n_groups,) and res.centers.shape == (n_groups, 3)
    assert len(res.synthetic) == n_groups
    assert all(s.shape == (0, 3) for s in res.synthetic)
    assert all(g.dtype == np.intp and np.all(np.diff(g) > 0) for g in res.groups)
    # labels in sorted order ('high' < 'low'), three groups each
    assert res.source_label.tolist() == ["high"] * 3 + ["low"] * 3


def test_partition_of_each_label_without_cap(blobs):
    X, y = blobs
    res = make_groups(X, y, n_clusters=4, max_size=None, rng=1)
    for lab in np.unique(y):
        gs = [g for g, s in zip(res.groups, res.source_label) if s == lab]
        allrows = np.concatenate(gs)
        assert len(allrows) == len(np.unique(allrows))  # disjoint
        np.testing.assert_array_equal(np.sort(allrows), np.flatnonzero(y == lab))  # covering
        for g in gs:
            assert np.all(y[g] == lab)


def test_well_separated_blobs_are_recovered(blobs):
    from sklearn.datasets import make_blobs

    X, cluster = make_blobs(n_samples=600, centers=6, n_features=3, cluster_std=0.5,
                            random_state=3)
    y = np.where(cluster < 3, "low", "high")
    res = make_groups(X, y, n_clusters=3, max_size=None, rng=2)
    found = sorted(tuple(np.unique(cluster[g])) for g in res.groups)
    assert found == [(k,) for k in range(6)]
    for g, c in zip(res.groups, res.centers):
        np.testing.assert_allclose(c, X[g].mean(axis=0), atol=1e-8)  # KMeans centroids


def test_matches_sklearn_kmeans_with_the_drawn_seed(blobs):
    from sklearn.cluster import KMeans

    X, y = blobs
    res = make_groups(X, y, n_clusters=5, max_size=None, rng=11, labels=["low"])
    seed = int(np.random.default_rng(11).integers(0, 2**31 - 1))
    idx = np.flatnonzero(y == "low")
    km = KMeans(n_clusters=5, n_init=10, random_state=seed).fit(X[idx])
    expected = [idx[km.labels_ == c] for c in range(5)]
    assert len(res.groups) == 5
    for g, e, c, kc in zip(res.groups, expected, res.centers, km.cluster_centers_):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(c, kc)


def test_max_size_subsamples(blobs):
    X, y = blobs
    whole = make_groups(X, y, n_clusters=2, max_size=None, rng=5)
    capped = make_groups(X, y, n_clusters=2, max_size=40, rng=5)
    assert len(whole.groups) == len(capped.groups)
    for g_all, g in zip(whole.groups, capped.groups):
        assert len(g) == min(40, len(g_all))
        assert np.all(np.isin(g, g_all))  # a subset of its cluster (same clustering, same seed)
        assert len(np.unique(g)) == len(g)
    np.testing.assert_array_equal(whole.centers, capped.centers)  # centres of whole clusters


def test_reproducible_with_same_rng(blobs):
    X, y = blobs
    a = make_groups(X, y, n_clusters=4, max_size=30, rng=123, pad_to=200)
    b = make_groups(X, y, n_clusters=4, max_size=30, rng=np.random.default_rng(123), pad_to=200)
    assert len(a.groups) == len(b.groups)
    for key in ("groups", "synthetic"):
        for u, v in zip(a[key], b[key]):
            np.testing.assert_array_equal(u, v)
    np.testing.assert_array_equal(a.centers, b.centers)
    np.testing.assert_array_equal(a.source_label, b.source_label)
    c = make_groups(X, y, n_clusters=4, max_size=30, rng=124)
    assert any(not np.array_equal(u, v) for u, v in zip(a.groups, c.groups))


def test_min_size_drops_small_clusters():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.1, size=(50, 2)), rng.normal(10, 0.1, size=(3, 2))])
    y = np.zeros(53, dtype=int)
    res = make_groups(X, y, n_clusters=2, rng=0)
    assert sorted(len(g) for g in res.groups) == [3, 50]
    res = make_groups(X, y, n_clusters=2, rng=0, min_size=4)
    assert [len(g) for g in res.groups] == [50]
    assert res.centers.shape == (1, 2)


def test_padding_is_separate_and_small(blobs):
    X, y = blobs
    res = make_groups(X, y, n_clusters=3, max_size=12, rng=4, pad_to=20)
    for g, syn in zip(res.groups, res.synthetic):
        assert len(g) == 12
        assert syn.shape == (8, 3)
        # each synthetic row is a member plus N(0, 0.01^2) noise
        dist = np.min(np.linalg.norm(syn[:, None, :] - X[g][None, :, :], axis=2), axis=1)
        assert np.all(dist < 0.01 * 6)
        assert np.all(dist > 0)
    # large groups are not padded
    res = make_groups(X, y, n_clusters=3, max_size=None, rng=4, pad_to=20)
    assert all(s.shape == (0, 3) for s in res.synthetic)


def test_fewer_distinct_rows_than_clusters():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0], [5.0, 5.0], [5.0, 5.0]])
    y = np.array([0, 0, 0, 1, 1])
    res = make_groups(X, y, n_clusters=10, rng=0)
    sizes = {(lab, len(g)) for lab, g in zip(res.source_label.tolist(), res.groups)}
    assert sizes == {(0, 2), (0, 1), (1, 2)}


def test_labels_selects_and_orders(blobs):
    X, y = blobs
    res = make_groups(X, y, n_clusters=2, rng=0, labels=["low", "high"])
    assert res.source_label.tolist() == ["low", "low", "high", "high"]
    res = make_groups(X, y, n_clusters=2, rng=0, labels=["high"])
    assert res.source_label.tolist() == ["high", "high"]


def test_kmedoids_without_package_raises_import_error(monkeypatch, blobs):
    X, y = blobs
    monkeypatch.setitem(sys.modules, "sklearn_extra", None)
    monkeypatch.setitem(sys.modules, "sklearn_extra.cluster", None)
    with pytest.raises(ImportError, match="scikit-learn-extra"):
        make_groups(X, y, method="kmedoids")


def test_kmedoids_dispatch_with_a_stand_in(monkeypatch, blobs):
    # scikit-learn-extra is optional (often no wheel): check the call with a stand-in estimator
    calls = []

    class KMedoids:
        def __init__(self, n_clusters, random_state):
            calls.append((n_clusters, random_state))
            self.n_clusters = n_clusters

        def fit(self, X):
            self.labels_ = np.arange(len(X)) % self.n_clusters
            self.cluster_centers_ = np.array([X[self.labels_ == c][0] for c in range(self.n_clusters)])
            return self

    pkg = types.ModuleType("sklearn_extra")
    sub = types.ModuleType("sklearn_extra.cluster")
    sub.KMedoids = KMedoids
    pkg.cluster = sub
    monkeypatch.setitem(sys.modules, "sklearn_extra", pkg)
    monkeypatch.setitem(sys.modules, "sklearn_extra.cluster", sub)
    X, y = blobs
    res = make_groups(X, y, n_clusters=3, max_size=None, rng=0, method="kmedoids")
    assert [c[0] for c in calls] == [3, 3]
    assert len(res.groups) == 6
    for g, c in zip(res.groups, res.centers):
        np.testing.assert_array_equal(c, X[g[0]])  # the stand-in's "medoid" is the first member


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n_clusters=0), ValueError, "n_clusters"),
    (dict(n_clusters=2.5), TypeError, "n_clusters"),
    (dict(max_size=0), ValueError, "max_size"),
    (dict(min_size=0), ValueError, "min_size"),
    (dict(pad_to=0), ValueError, "pad_to"),
    (dict(method="dbscan"), ValueError, "method"),
    (dict(labels=[7]), ValueError, "labels"),
    (dict(labels=[0, 0]), ValueError, "labels"),
    (dict(labels=[]), ValueError, "labels"),
    (dict(rng="x"), TypeError, "rng"),
])
def test_bad_arguments(kwargs, exc, match):
    X = np.arange(20.0).reshape(10, 2)
    y = np.repeat([0, 1], 5)
    with pytest.raises(exc, match=match):
        make_groups(X, y, **kwargs)


def test_bad_arrays():
    X = np.arange(20.0).reshape(10, 2)
    with pytest.raises(ValueError, match="same length"):
        make_groups(X, np.zeros(9))
    with pytest.raises(ValueError, match="`y` must be 1-D"):
        make_groups(X, np.zeros((10, 1)))
    with pytest.raises(ValueError, match="NaN"):
        make_groups(X, np.r_[np.zeros(9), np.nan])
    with pytest.raises(ValueError, match="`X` must not contain NaN"):
        make_groups(np.r_[X[:9], [[np.nan, 0.0]]], np.zeros(10))
    with pytest.raises(ValueError, match="`X`"):
        make_groups(np.empty((0, 2)), np.empty(0))
