"""numtk.seriation.stage: exact cases, invariances, consistency of the solve, noise floor."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

import reference.seriation as reference
from hypothesis import given, settings
from hypothesis import strategies as st

from numtk.seriation import _seriation_ext, make_curve, order_agreement, stage
from numtk.seriation._stage import _integrate, _local_pca


def test_noiseless_segment_is_integrated_exactly():
    # x = gamma(t) on a straight segment: increments are exact differences, so f = +-(s - mean s).
    rng = np.random.default_rng(0)
    t = rng.random(500)
    direction = rng.standard_normal(5)
    direction /= np.linalg.norm(direction)
    X = np.outer(t, direction) * 3.0 + rng.standard_normal(5)
    res = stage(X, n_neighbors=10)
    s = 3.0 * (t - t.mean())
    sign = np.sign(res.embedding @ s)
    assert np.max(np.abs(res.embedding - sign * s)) <= 1e-10 * 3.0
    assert order_agreement(res.order, t) >= 1 - 1e-12
    assert res.residual <= 1e-12
    assert res.frustration == 0.0


@pytest.mark.parametrize("kind, n, d", [("arc", 800, 2), ("helix", 2000, 3), ("random_fourier", 1500, 30)])
def test_noiseless_curves_are_ordered_exactly(kind, n, d):
    X, t = make_curve(kind, n, d, rng=1)
    res = stage(X, n_neighbors=10)
    assert order_agreement(res.order, t) >= 1 - 1e-12
    assert res.frustration == 0.0


def test_noisy_helix_reaches_the_noise_floor():
    # Issue target: n = 2000, d = 50, noise 0.05 -> |tau| >= 0.99 (spec noise floor 0.9955).
    X, t = make_curve("helix", 2000, 50, noise=0.05, rng=2)
    res = stage(X)
    assert order_agreement(res.order, t) >= 0.99


def test_laplacian_system_is_consistent():
    X, t = make_curve("helix", 600, 10, noise=0.02, rng=3)
    res = stage(X, n_neighbors=12)
    W = res.graph
    oriented = res.signs[:, None] * res.tangents
    f, residual, b = _integrate(X, W, oriented)
    assert abs(b.sum()) <= 1e-12 * np.abs(b).sum()  # 1^T b = 0
    L = sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W
    assert np.linalg.norm(L @ f - b) <= 1e-8 * np.linalg.norm(b)
    assert abs(f.mean()) <= 1e-12 * np.abs(f).max()
    sign = 1.0 if f @ res.embedding > 0 else -1.0  # stage orients f afterwards
    assert_allclose(sign * f, res.embedding, rtol=0, atol=1e-12 * np.abs(f).max())
    # the residual is the relative misfit of the least-squares problem, and f is its minimiser:
    U = sp.triu(W, k=1).tocoo()
    d = np.einsum("ed,ed->e", 0.5 * (oriented[U.row] + oriented[U.col]), X[U.col] - X[U.row])

    def objective(g):
        return np.sum(U.data * (g[U.col] - g[U.row] - d) ** 2)

    rng = np.random.default_rng(0)
    assert objective(f) <= objective(f + 1e-3 * rng.standard_normal(f.size))
    assert_allclose(objective(f + 5.0), objective(f), rtol=1e-12)  # constants are free
    assert_allclose(residual, math.sqrt(objective(f) / np.sum(U.data * d**2)), rtol=1e-10)


def test_invariances():
    X, t = make_curve("helix", 700, 6, noise=0.02, rng=4)
    ref = stage(X, n_neighbors=10)
    # row permutation permutes the embedding
    perm = np.random.default_rng(5).permutation(700)
    res = stage(X[perm], n_neighbors=10)
    assert_allclose(np.abs(res.embedding), np.abs(ref.embedding[perm]), rtol=1e-7, atol=1e-9)
    # translation: identical output; scaling by 2: embedding doubles exactly (powers of two are exact)
    moved = stage(X + 3.0, n_neighbors=10)
    assert_array_equal(moved.order, ref.order)
    doubled = stage(2.0 * X, n_neighbors=10)
    assert_allclose(doubled.embedding, 2.0 * ref.embedding, rtol=1e-12, atol=1e-12)
    assert_array_equal(doubled.order, ref.order)
    # rotation: the same order up to reversal
    Q, _ = np.linalg.qr(np.random.default_rng(6).standard_normal((6, 6)))
    rotated = stage(X @ Q.T, n_neighbors=10)
    assert order_agreement(rotated.order, ref.embedding) >= 1 - 1e-9


def test_local_pca_against_svd():
    rng = np.random.default_rng(7)
    for d, kp in [(3, 10), (20, 8)]:  # covariance operator (kp > d) and Gram operator (kp <= d)
        X = rng.standard_normal((50, d)) * np.linspace(3, 1, d)
        nbrs = np.array([rng.choice(50, kp, replace=False) for _ in range(50)])
        t, r = _local_pca(X, nbrs, tol=0.0)
        for i in range(50):
            Y = X[nbrs[i]] - X[nbrs[i]].mean(axis=0)
            _, sv, Vt = np.linalg.svd(Y)
            assert_allclose(abs(t[i] @ Vt[0]), 1.0, rtol=1e-10)
            assert_allclose(r[i], sv[1] ** 2 / sv[0] ** 2, rtol=1e-8)
        first = np.argmax(t != 0, axis=1)
        assert np.all(t[np.arange(50), first] > 0)


@settings(max_examples=60)
@given(st.data())
def test_local_pca_kernel_against_numpy_reference(data):
    # Exact mode (tol=0: the whole Krylov space) against batched numpy.linalg.eigh, over shapes, both
    # index dtypes, neighbourhoods with repeated rows and with a point's own row, and threads.
    n = data.draw(st.integers(1, 40))
    d = data.draw(st.integers(1, 12))
    k = data.draw(st.integers(1, 15))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * rng.uniform(0.1, 3, d)
    nb = rng.integers(0, n, (n, k)).astype(data.draw(st.sampled_from([np.int32, np.int64])))
    threads = data.draw(st.sampled_from([1, 2]))
    t, r, _ = _seriation_ext.local_pca(X, nb, threads, 64, 0.0)
    ref_t, ref_r = reference.local_pca(X, nb)
    Y = X[nb] - X[nb].mean(axis=1, keepdims=True)
    sv = np.linalg.svd(Y, compute_uv=False)  # (n, min(k, d))
    top = sv[:, 0] ** 2
    second = sv[:, 1] ** 2 if sv.shape[1] > 1 else np.zeros(n)
    gap_ok = (top > 1e-20) & (top - second > 1e-6 * top)  # the top direction is well defined
    assert_allclose(np.abs(np.sum(t * ref_t, axis=1))[gap_ok], 1.0, rtol=1e-8)
    assert_allclose(r[top > 1e-20], ref_r[top > 1e-20], rtol=1e-7, atol=1e-10)
    assert_allclose(np.linalg.norm(t, axis=1)[top > 1e-20], 1.0, rtol=1e-12)


def test_local_pca_kernel_refuses_bad_indices():
    X = np.zeros((3, 2))
    with pytest.raises(IndexError, match="outside"):
        _seriation_ext.local_pca(X, np.array([[0, 3], [1, 2], [0, 1]]), 1, 64, 0.0)
    with pytest.raises(IndexError, match="outside"):
        _seriation_ext.local_pca(X, np.array([[0, -1], [1, 2], [0, 1]]), 1, 64, 0.0)
    with pytest.raises(ValueError, match="2-D"):
        _seriation_ext.local_pca(X, np.zeros(2, dtype=np.int64), 1, 64, 0.0)
    # neighbourhoods of a subset of the points: one output row per row of indices
    t, r, _ = _seriation_ext.local_pca(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]), np.array([[0, 1, 2]]), 1,
                                       64, 0.0)
    assert_allclose(t, [[2**-0.5, 2**-0.5]]) and assert_allclose(r, [0.0], atol=1e-15)


def test_one_feature_is_the_centred_coordinate():
    x = np.random.default_rng(8).random(50)
    res = stage(x[:, None])
    assert_allclose(res.embedding, x - x.mean(), atol=1e-15)
    # the general path on the same points placed in the plane gives the same embedding
    res2 = stage(np.c_[x, np.zeros(50)], n_neighbors=5)
    assert_allclose(np.abs(res2.embedding), np.abs(x - x.mean()), atol=1e-10)


def test_small_inputs_and_duplicates():
    assert_array_equal(stage([[1.0, 2.0]]).order, [0])
    res = stage([[0.0, 0.0], [3.0, 4.0]])
    assert_allclose(res.embedding, [-2.5, 2.5])
    X, _ = make_curve("arc", 200, 2, rng=9)
    Xd = np.vstack([X, X[:10]])
    res = stage(Xd, n_neighbors=8)
    assert_array_equal(res.embedding[200:], res.embedding[:10])


def test_root_sets_the_direction():
    X, t = make_curve("helix", 400, 3, rng=10)
    start = int(np.argmin(t))
    res = stage(X, n_neighbors=10, root=start)
    assert res.embedding[start] == res.embedding.min()


def test_disconnected_segments():
    t = np.linspace(0, 1, 200)
    X = np.c_[np.r_[t, t + 5.0], np.zeros(400)]  # two collinear pieces of one line, far apart
    X = X + 1e-3 * np.c_[np.zeros(400), np.random.default_rng(11).standard_normal(400)]
    res = stage(X, n_neighbors=5)
    assert res.n_components == 2
    assert order_agreement(res.order, X[:, 0]) >= 1 - 1e-12
    with pytest.raises(ValueError, match="2 connected components.*`n_neighbors`.*disconnected"):
        stage(X, n_neighbors=5, allow_disconnected=False)


def test_bad_input():
    X, _ = make_curve("arc", 30, 2, rng=0)
    with pytest.raises(ValueError, match="`n_neighbors` must be at most"):
        stage(X, n_neighbors=30)
    with pytest.raises(ValueError, match="`n_neighbors` must be >= 1"):
        stage(X, n_neighbors=0)
    with pytest.raises(ValueError, match="`X` must be 2-D"):
        stage(X[:, 0].tolist())
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="`X` must be finite|`X` must not contain NaN"):
        stage(bad)
    with pytest.raises(TypeError, match="sparse"):
        stage(sp.csr_matrix(X))
    with pytest.raises(ValueError, match="`weights` must be one of"):
        stage(X, weights="cosine")
    with pytest.raises(TypeError, match="`allow_disconnected` must be a bool"):
        stage(X, allow_disconnected="ignore")
    with pytest.raises(ValueError, match="`root` must be <= 29"):
        stage(X, root=30)


def test_tree_sign_propagation_against_a_node_by_node_reference():
    # Random unit tangents make every sign along the tree matter; no power iterations (max_iter=0).
    from numtk.seriation._graph import knn_graph
    from numtk.seriation._stage import _synchronise

    rng = np.random.default_rng(12)
    X, _ = make_curve("helix", 1500, 6, noise=0.05, rng=13)
    W, _ = knn_graph(X, 8)
    T = rng.standard_normal((1500, 6))
    T /= np.linalg.norm(T, axis=1, keepdims=True)
    z, _ = _synchronise(W, T, 0)
    assert_array_equal(z, reference.tree_signs(W, T))


def test_map_like_workers_give_the_serial_result():
    # The local PCA runs as chunks of neighbourhoods on a process pool and on a dask LocalCluster.
    import multiprocessing

    import numtk.seriation._stage as stage_module

    X, t = make_curve("helix", 1200, 8, noise=0.02, rng=14)
    ref = stage(X, n_neighbors=10)
    old = stage_module._CHUNK_ROWS
    stage_module._CHUNK_ROWS = 500  # several tasks even at this size
    try:
        with multiprocessing.get_context("forkserver").Pool(2) as pool:
            res = stage(X, n_neighbors=10, workers=pool.map)
        assert_array_equal(res.order, ref.order)
        assert_allclose(res.embedding, ref.embedding, rtol=0, atol=1e-12)
        distributed = pytest.importorskip("distributed")  # a test extra: installed in CI
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                      dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            res = stage(X, n_neighbors=10, workers=lambda f, items: client.gather(client.map(f, list(items))))
        assert_array_equal(res.order, ref.order)
    finally:
        stage_module._CHUNK_ROWS = old


def test_precomputed_neighbors():
    from sklearn.neighbors import NearestNeighbors

    X, t = make_curve("helix", 900, 12, noise=0.02, rng=15)
    ref = stage(X, n_neighbors=10)
    dist, ind = NearestNeighbors(n_neighbors=200).fit(X).kneighbors(X)
    res = stage(X, n_neighbors=10, neighbors=(dist, ind))
    assert res.tangent_neighbors == ref.tangent_neighbors
    assert_array_equal(res.order, ref.order)
    assert_allclose(res.embedding, ref.embedding, rtol=0, atol=1e-12 * np.abs(ref.embedding).max())
    # fewer precomputed neighbours cap the local PCA size
    capped = stage(X, n_neighbors=10, neighbors=(dist[:, :20], ind[:, :20]))
    assert capped.tangent_neighbors == 20 and order_agreement(capped.order, t) >= 0.99
    with pytest.raises(ValueError, match="more than n_neighbors = 10"):
        stage(X, n_neighbors=10, neighbors=(dist[:, :10], ind[:, :10]))
    with pytest.raises(ValueError, match="itself first"):
        stage(X, n_neighbors=10, neighbors=(dist[:, 1:], ind[:, 1:]))
    with pytest.raises(ValueError, match=r"shape \(n_samples, q\)"):
        stage(X, n_neighbors=10, neighbors=(dist[:5], ind[:5]))
    with pytest.raises(TypeError, match="pair"):
        stage(X, n_neighbors=10, neighbors=ind)
    with pytest.raises(ValueError, match="distinct rows"):
        Xd = np.vstack([X, X[:1]])
        d2, i2 = NearestNeighbors(n_neighbors=30).fit(Xd).kneighbors(Xd)
        stage(Xd, n_neighbors=10, neighbors=(d2, i2))
