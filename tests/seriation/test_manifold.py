"""Tests of the manifold-learning seriation baselines (LTSA, t-SNE, UMAP).

Oracles: the known parameter of noiseless curves (order_agreement), and scikit-learn's own
LocallyLinearEmbedding / TSNE run independently with the same settings and random_state.
"""

import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

from numtk.seriation import make_curve, order_agreement
from numtk.seriation._manifold import ltsa_seriation, tsne_seriation, umap_seriation

# Short t-SNE runs keep the suite fast; Barnes-Hut's OpenMP threads are limited to one because on
# small, loaded machines the threaded gradient is an order of magnitude slower than the serial one.
TSNE_FAST = {"max_iter": 300}


@pytest.fixture
def one_openmp_thread():
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@pytest.fixture(scope="module")
def helix500():
    return make_curve("helix", 500, 3, rng=0)


@pytest.fixture(scope="module")
def ltsa_helix(helix500):
    return ltsa_seriation(helix500[0])


@pytest.fixture(scope="module")
def line150():
    return make_curve("line", 150, 3, rng=1)


def check_result(res, n):
    assert res.order.dtype == np.int64 and res.order.shape == (n,)
    assert_array_equal(np.sort(res.order), np.arange(n))
    assert res.embedding.dtype == np.float64 and res.embedding.shape == (n,)
    assert_array_equal(res.order, np.argsort(res.embedding, kind="stable"))


def assert_equal_up_to_sign(a, b, **tol):
    s = 1.0 if np.dot(a, b) >= 0 else -1.0
    assert_allclose(a, s * b, **tol)


# ---------------------------------------------------------------------------------------------------
# LTSA
# ---------------------------------------------------------------------------------------------------

def test_ltsa_helix_order(helix500, ltsa_helix):
    _, t = helix500
    res = ltsa_helix
    check_result(res, 500)
    assert order_agreement(res.order, t) >= 0.99
    assert res.eigen_solver == "dense"
    assert res.reconstruction_error >= -1e-12


def test_ltsa_matches_sklearn(helix500, ltsa_helix):
    from sklearn.manifold import LocallyLinearEmbedding

    X, _ = helix500
    res = ltsa_helix
    ref = LocallyLinearEmbedding(n_neighbors=15, n_components=1, method="ltsa",
                                 eigen_solver="dense").fit(X)
    assert_equal_up_to_sign(res.embedding, ref.embedding_[:, 0], rtol=1e-7, atol=1e-10)
    assert_allclose(res.reconstruction_error, ref.reconstruction_error_, rtol=1e-6, atol=1e-12)


def test_ltsa_arpack_agrees_with_dense(helix500, ltsa_helix):
    X, t = helix500
    dense = ltsa_helix
    res = ltsa_seriation(X, eigen_solver="arpack", rng=3)
    assert res.eigen_solver in ("arpack", "dense")  # 'dense' after a fallback
    assert order_agreement(res.order, t) >= 0.99
    assert_allclose(res.embedding, dense.embedding, atol=1e-5)  # same orientation rule


def test_ltsa_arpack_failure_falls_back_to_dense(monkeypatch):
    import sklearn.manifold

    X, t = make_curve("helix", 200, 3, rng=1)
    real = sklearn.manifold.LocallyLinearEmbedding
    calls = []

    class Failing(real):
        def fit(self, X, y=None):
            calls.append(self.eigen_solver)
            if self.eigen_solver == "arpack":
                raise ValueError("Error in determining null-space with ARPACK: Factor is exactly singular")
            return super().fit(X, y)

    monkeypatch.setattr(sklearn.manifold, "LocallyLinearEmbedding", Failing)
    res = ltsa_seriation(X, eigen_solver="arpack")
    assert calls == ["arpack", "dense"]
    assert res.eigen_solver == "dense"
    assert order_agreement(res.order, t) >= 0.99


def test_ltsa_orientation(helix500, ltsa_helix):
    X, _ = helix500
    f = ltsa_helix.embedding
    assert f[np.argmax(np.abs(f))] > 0
    # the row at the maximum end, as root, must come first: the embedding is flipped
    root = int(np.argmax(f))
    res = ltsa_seriation(X, root=root)
    assert res.order[0] == root
    assert_allclose(res.embedding, -f)


def test_ltsa_tiny():
    assert_array_equal(ltsa_seriation([[1.0, 2.0]]).order, [0])
    assert_array_equal(ltsa_seriation([[0.0], [1.0]]).order, [0, 1])
    assert_array_equal(ltsa_seriation([[0.0], [1.0]], root=1).order, [1, 0])
    check_result(ltsa_seriation(np.arange(10.0)[:, None] ** 1.5, n_neighbors=3), 10)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n_neighbors": 1}, ValueError, "n_neighbors"),
    ({"n_neighbors": 50}, ValueError, "n_neighbors"),
    ({"n_neighbors": 2.5}, TypeError, "n_neighbors"),
    ({"eigen_solver": "lobpcg"}, ValueError, "eigen_solver"),
    ({"root": 50}, ValueError, "root"),
    ({"rng": np.random.RandomState(0)}, TypeError, "rng"),
])
def test_ltsa_validation(kwargs, exc, match):
    X = make_curve("line", 50, 2, rng=0)[0]
    with pytest.raises(exc, match=match):
        ltsa_seriation(X, **kwargs)


@pytest.mark.parametrize("X, match", [
    (np.zeros(5), "X"),
    (np.zeros((0, 3)), "X"),
    (np.array([[0.0, np.nan], [1.0, 2.0], [3.0, 1.0]]), "X"),
])
def test_bad_points(X, match):
    for func in (ltsa_seriation, tsne_seriation, umap_seriation):
        with pytest.raises((ValueError, TypeError), match=match):
            func(X)


# ---------------------------------------------------------------------------------------------------
# t-SNE
# ---------------------------------------------------------------------------------------------------

def test_tsne_deterministic_and_matches_sklearn(line150, one_openmp_thread):
    from sklearn.manifold import TSNE

    X, t = line150
    a = tsne_seriation(X, perplexity=20, rng=5, **TSNE_FAST)
    b = tsne_seriation(X, perplexity=20, rng=np.random.default_rng(5), **TSNE_FAST)
    check_result(a, 150)
    assert a.random_state == b.random_state
    assert_array_equal(a.embedding, b.embedding)
    assert_array_equal(a.order, b.order)
    ref = TSNE(n_components=1, perplexity=20, init="pca", learning_rate="auto", random_state=a.random_state,
               **TSNE_FAST).fit(X)
    assert_equal_up_to_sign(a.embedding, ref.embedding_[:, 0], rtol=1e-10, atol=1e-12)
    assert_allclose(a.kl_divergence, ref.kl_divergence_)
    assert a.n_iter == ref.n_iter_
    assert order_agreement(a.order, t) >= 0.9


def test_tsne_orientation_and_root(line150, one_openmp_thread):
    X, _ = line150
    f = tsne_seriation(X, perplexity=20, rng=0, **TSNE_FAST).embedding
    assert f[np.argmax(np.abs(f))] > 0
    res = tsne_seriation(X, perplexity=20, rng=0, root=3, **TSNE_FAST)
    assert res.embedding[3] - res.embedding.min() <= res.embedding.max() - res.embedding[3]
    assert_allclose(np.abs(res.embedding), np.abs(f))


def test_tsne_given_init(line150, one_openmp_thread):
    X, t = line150
    init = (t - 0.5) * 1e-4
    res = tsne_seriation(X, perplexity=20, init=init, rng=0, **TSNE_FAST)
    check_result(res, 150)
    assert order_agreement(res.order, t) >= 0.9


def test_tsne_tiny():
    assert_array_equal(tsne_seriation([[1.0, 2.0]]).order, [0])
    assert_array_equal(tsne_seriation([[0.0], [1.0]], root=1).order, [1, 0])


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"perplexity": 50}, ValueError, "perplexity"),
    ({"perplexity": 80.0}, ValueError, "perplexity"),
    ({"perplexity": 0.0}, ValueError, "perplexity"),
    ({"perplexity": "30"}, TypeError, "perplexity"),
    ({"init": "spectral"}, ValueError, "init"),
    ({"init": np.zeros((50, 2))}, ValueError, "init"),
    ({"init": np.zeros(49)}, ValueError, "init"),
    ({"root": -1}, ValueError, "root"),
    ({"random_state": 0}, TypeError, "random_state"),
    ({"n_components": 2}, TypeError, "n_components"),
])
def test_tsne_validation(kwargs, exc, match):
    X = make_curve("line", 50, 2, rng=0)[0]
    with pytest.raises(exc, match=match):
        tsne_seriation(X, **kwargs)


# ---------------------------------------------------------------------------------------------------
# UMAP
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n_neighbors": 1}, ValueError, "n_neighbors"),
    ({"n_neighbors": 50}, ValueError, "n_neighbors"),
    ({"min_dist": -0.1}, ValueError, "min_dist"),
    ({"root": 50}, ValueError, "root"),
    ({"random_state": 0}, TypeError, "random_state"),
])
def test_umap_validation(kwargs, exc, match):
    X = make_curve("line", 50, 2, rng=0)[0]
    with pytest.raises(exc, match=match):
        umap_seriation(X, **kwargs)


def test_umap_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "umap", None)  # makes `import umap` raise ImportError
    X = make_curve("line", 50, 2, rng=0)[0]
    with pytest.raises(ImportError, match="pip install umap-learn"):
        umap_seriation(X)


def test_umap_line():
    pytest.importorskip("umap.umap_")  # the package itself, not a directory an uninstall left behind
    import umap

    X, t = make_curve("line", 200, 3, rng=2)
    a = umap_seriation(X, rng=4)
    b = umap_seriation(X, rng=4)
    check_result(a, 200)
    assert_array_equal(a.embedding, b.embedding)
    ref = umap.UMAP(n_components=1, n_neighbors=15, min_dist=0.1, init="spectral",
                    random_state=a.random_state).fit_transform(X)
    assert_equal_up_to_sign(a.embedding, np.asarray(ref[:, 0], dtype=np.float64), rtol=1e-5, atol=1e-6)
    assert order_agreement(a.order, t) >= 0.9
