"""Tests of the spectral and Recanati seriation baselines against independent oracles.

Oracles: the exact recovery of a shuffled Robinson matrix (Atkins, Boman, Hendrickson 1998), the
Laplacian null space (eigenvalue 0), scikit-learn's SpectralEmbedding, a dense LAPACK eigensolve, and
the known parameter of a noiseless helix.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from scipy.stats import ortho_group

from numtk.seriation._baselines import recanati_seriation, spectral_seriation
from numtk.stats import kendall_tau

METHODS = [spectral_seriation, recanati_seriation]


def robinson(n, scale=5.0):
    i = np.arange(n)
    return np.exp(-np.abs(i[:, None] - i[None, :]) / scale)


def shuffled_robinson(n, seed):
    perm = np.random.default_rng(seed).permutation(n)
    W = robinson(n)[np.ix_(perm, perm)]  # row r of W is item perm[r] of the true order
    return W, np.argsort(perm)  # reading the rows in the order argsort(perm) restores the true order


def helix(n, seed):
    """Noiseless helix with sorted uniform parameter t, rotated by a random orthogonal matrix."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(size=n))
    Q = ortho_group.rvs(3, random_state=seed)
    return np.c_[np.cos(4 * np.pi * t), np.sin(4 * np.pi * t), 3 * t] @ Q, t


def same_up_to_reversal(order, truth):
    return np.array_equal(order, truth) or np.array_equal(order, truth[::-1])


def abs_tau(a, b):
    return abs(kendall_tau(a, b).statistic)


def order_tau(order_a, order_b):
    """|Kendall tau| between two orders (arrays of item indices), compared through the items' ranks."""
    return abs_tau(np.argsort(order_a), np.argsort(order_b))


@pytest.fixture(scope="module")
def helix500():
    return helix(500, 7)


# ---------------------------------------------------------------------------------------------------
# Spectral seriation
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("laplacian", ["normalized", "unnormalized"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spectral_exact_on_robinson(laplacian, seed):
    W, truth = shuffled_robinson(80, seed)
    res = spectral_seriation(W, affinity="precomputed", laplacian=laplacian)
    assert same_up_to_reversal(res.order, truth)
    # The constant (or sqrt-degree) vector spans the null space: eigenvalue 0 up to rounding.
    assert_allclose(res.eigenvalues[0], 0.0, atol=1e-12)
    assert res.eigenvalues[1] > 1e-6
    assert res.n_components == 1
    assert res.order.dtype == np.int64


def test_spectral_robinson_sparse_input_matches_dense():
    W, truth = shuffled_robinson(60, 3)
    W[W < 1e-3] = 0.0  # still a Robinson matrix (banded)
    dense = spectral_seriation(W, affinity="precomputed")
    sparse = spectral_seriation(sp.csr_matrix(W), affinity="precomputed")
    assert same_up_to_reversal(dense.order, truth)
    assert_array_equal(sparse.order, dense.order)
    assert_allclose(sparse.embedding, dense.embedding, rtol=1e-10, atol=1e-12)


def test_spectral_matches_sklearn_spectral_embedding():
    from sklearn.manifold import SpectralEmbedding

    W, _ = shuffled_robinson(200, 11)
    ref = SpectralEmbedding(n_components=1, affinity="precomputed", random_state=0).fit_transform(W)[:, 0]
    res = spectral_seriation(W, affinity="precomputed")
    assert order_tau(res.order, np.argsort(ref, kind="stable")) >= 0.999
    # Same embedding up to sign and scale (sklearn divides by sqrt(deg) too).
    c = np.dot(res.embedding, ref) / np.dot(res.embedding, res.embedding)
    assert_allclose(c * res.embedding, ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())


def test_spectral_eigenvalues_match_dense_laplacian():
    from scipy.sparse.csgraph import laplacian

    W, _ = shuffled_robinson(50, 4)
    np.fill_diagonal(W, 0.0)
    res = spectral_seriation(W, affinity="precomputed", laplacian="normalized")
    ref = np.linalg.eigvalsh(laplacian(W, normed=True))[:2]
    assert_allclose(res.eigenvalues, ref, atol=1e-12)
    res = spectral_seriation(W, affinity="precomputed", laplacian="unnormalized")
    ref = np.linalg.eigvalsh(laplacian(W))[:2]
    assert_allclose(res.eigenvalues, ref, atol=1e-12)


@pytest.mark.parametrize("laplacian", ["normalized", "unnormalized"])
def test_spectral_solvers_agree(helix500, laplacian):
    X, t = helix500
    dense = spectral_seriation(X, n_neighbors=10, laplacian=laplacian, eigen_solver="dense")
    for solver in ["shift-invert", "lobpcg"]:
        other = spectral_seriation(X, n_neighbors=10, laplacian=laplacian, eigen_solver=solver, rng=0)
        assert_allclose(other.eigenvalues[1], dense.eigenvalues[1], rtol=1e-6)
        # Both oriented by the same rule; eigenvectors agree to solver accuracy.
        tol = 1e-5 * np.abs(dense.embedding).max()
        assert_allclose(other.embedding, dense.embedding, atol=tol)
        # The orders agree up to near-ties: points with identical neighbourhoods (twins of the binary
        # graph) have equal Fiedler entries in exact arithmetic, so only their relative order may differ.
        assert np.all(np.diff(dense.embedding[other.order]) >= -2 * tol)


def test_spectral_auto_is_dense_below_2000(helix500):
    X, _ = helix500
    auto = spectral_seriation(X, n_neighbors=10)
    dense = spectral_seriation(X, n_neighbors=10, eigen_solver="dense")
    assert_array_equal(auto.order, dense.order)
    assert_allclose(auto.embedding, dense.embedding, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------
# Both methods
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_helix_order(method, helix500):
    X, t = helix500
    res = method(X, n_neighbors=10)
    assert order_tau(res.order, np.argsort(t)) >= 0.99
    assert abs_tau(res.embedding, t) >= 0.99
    assert_array_equal(res.order, np.argsort(res.embedding, kind="stable"))
    # Deterministic sign rule: the entry of largest |embedding| is positive.
    assert res.embedding[np.argmax(np.abs(res.embedding))] > 0


@pytest.mark.parametrize("method", METHODS)
def test_root_is_put_first(method, helix500):
    X, t = helix500
    for root in (0, len(t) - 1):  # the two ends of the curve
        res = method(X, n_neighbors=10, root=root)
        # The ends are locally unresolved (twin points of the binary graph share Fiedler values up to
        # rounding), so the root is among the first few of the order rather than exactly first.
        assert np.flatnonzero(res.order == root)[0] < 10
        tau = kendall_tau(res.embedding, t).statistic
        assert (tau if root == 0 else -tau) >= 0.99


def test_spectral_row_permutation_and_scaling_invariance():
    X, t = helix(300, 5)
    base = spectral_seriation(X, n_neighbors=10)
    perm = np.random.default_rng(9).permutation(len(t))
    moved = spectral_seriation(2.0 * X[perm] + 3.0, n_neighbors=10)  # same binary k-NN graph, relabelled
    tol = 1e-10 * np.abs(base.embedding).max()
    assert_allclose(moved.embedding, base.embedding[perm], atol=tol)
    # Orders equal up to the exact ties of twin points (see test_spectral_solvers_agree).
    assert np.all(np.diff(base.embedding[perm[moved.order]]) >= -2 * tol)


def test_recanati_row_permutation_and_scaling_invariance():
    X, t = helix(300, 5)
    base = recanati_seriation(X, n_neighbors=10)
    perm = np.random.default_rng(9).permutation(len(t))
    moved = recanati_seriation(2.0 * X[perm] + 3.0, n_neighbors=10)
    # The Laplacian embedding is equivariant to rounding (deterministic column signs) ...
    assert_allclose(moved.spectral_embedding, base.spectral_embedding[perm], atol=1e-10)
    # ... but twin points coincide in it, and the local neighbourhoods break those distance ties by
    # row position, so S (and the final embedding) change slightly with the row order.
    assert abs_tau(moved.embedding, base.embedding[perm]) >= 0.99
    assert order_tau(perm[moved.order], base.order) >= 0.99


@pytest.mark.parametrize("method", METHODS)
def test_disconnected_segments(method):
    s = np.linspace(0.0, 1.0, 100)
    X = np.r_[np.c_[s, 0 * s], np.c_[s + 10.0, 0 * s]]  # two collinear pieces of one line, far apart
    res = method(X, n_neighbors=5)
    assert res.n_components == 2
    assert order_tau(res.order, np.argsort(X[:, 0])) >= 0.99  # the bridged graph is one path
    with pytest.raises(ValueError, match="`allow_disconnected`") as info:
        method(X, n_neighbors=5, allow_disconnected=False)
    assert "2 connected components" in str(info.value)


@pytest.mark.parametrize("method", METHODS)
def test_disconnected_precomputed(method):
    W = sp.block_diag([robinson(20), robinson(20)]).toarray()
    with pytest.raises(ValueError, match="2 connected components.*disconnected"):
        method(W, affinity="precomputed", allow_disconnected=False)
    with pytest.raises(ValueError, match="no coordinates to bridge"):
        method(W, affinity="precomputed")


@pytest.mark.parametrize("method", METHODS)
def test_small_sizes(method):
    assert_array_equal(method(np.zeros((1, 3))).order, [0])
    assert_array_equal(method(np.array([[0.0, 1.0], [2.0, 5.0]]), n_neighbors=1).order, [0, 1])
    assert_array_equal(method(np.array([[0.0, 1.0], [2.0, 5.0]]), n_neighbors=1, root=1).order, [1, 0])
    assert_array_equal(method(np.array([[0.0, 0.5], [0.5, 0.0]]), affinity="precomputed").order, [0, 1])
    with pytest.raises(ValueError, match="n_neighbors"):
        method(np.random.default_rng(0).normal(size=(10, 2)), n_neighbors=10)
    # Three points on a line: the middle one sits in the middle of the order.
    res = method(np.array([[0.0], [2.0], [1.0]]), n_neighbors=1)
    assert res.order[1] == 2


# ---------------------------------------------------------------------------------------------------
# Recanati specifics
# ---------------------------------------------------------------------------------------------------

def test_recanati_exact_on_robinson():
    W, truth = shuffled_robinson(80, 0)
    res = recanati_seriation(W, affinity="precomputed", k_local=10)
    assert same_up_to_reversal(res.order, truth)


def test_recanati_similarity_oracle():
    """S against a per-point loop written from the definition (the vectorised path must agree)."""
    from numtk.seriation._baselines import _local_line_similarity

    rng = np.random.default_rng(3)
    Y = rng.normal(size=(40, 3))
    k = 6
    S = _local_line_similarity(Y, k).toarray()
    ref = np.zeros((40, 40))
    d = np.linalg.norm(Y[:, None] - Y[None], axis=2)
    for a in range(40):
        nb = np.r_[a, [j for j in np.argsort(d[a], kind="stable") if j != a][: k - 1]]
        P = Y[nb] - Y[nb].mean(axis=0)
        w, V = np.linalg.eigh(P.T @ P)
        p = P @ V[:, -1]
        D = np.abs(p[:, None] - p[None])
        ref[np.ix_(nb, nb)] += 1 - D / D.max()
    np.fill_diagonal(ref, 0.0)
    assert_allclose(S, ref, atol=1e-12)


def test_recanati_embedding_scaling():
    X, _ = helix(200, 2)
    base = recanati_seriation(X, n_neighbors=10, scale_embedding="none")
    heur = recanati_seriation(X, n_neighbors=10, scale_embedding="heuristic")
    assert base.spectral_embedding.shape == (200, 8)
    assert_allclose(heur.spectral_embedding, base.spectral_embedding / np.sqrt(np.arange(1, 9)), atol=1e-12)
    # Columns of the unscaled embedding: Laplacian eigenvectors, orthonormal.
    assert_allclose(base.spectral_embedding.T @ base.spectral_embedding, np.eye(8), atol=1e-10)
    assert recanati_seriation(X, n_neighbors=10, n_components=500).spectral_embedding.shape == (200, 199)


# ---------------------------------------------------------------------------------------------------
# Bad arguments
# ---------------------------------------------------------------------------------------------------

X_OK = np.random.default_rng(0).normal(size=(30, 2))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("kwargs, exc, match", [
    ({"affinity": "rbf"}, ValueError, "affinity"),
    ({"n_neighbors": 0}, ValueError, "n_neighbors"),
    ({"n_neighbors": 2.5}, TypeError, "n_neighbors"),
    ({"allow_disconnected": "yes"}, TypeError, "allow_disconnected"),
    ({"laplacian": "sym"}, ValueError, "laplacian"),
    ({"root": 30}, ValueError, "root"),
    ({"root": "a"}, TypeError, "root"),
    ({"rng": "seed"}, TypeError, "rng"),
])
def test_bad_arguments_common(method, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        method(X_OK, **kwargs)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"weights": "cosine"}, ValueError, "weights"),
    ({"bandwidth": -1.0}, ValueError, "bandwidth"),
    ({"eigen_solver": "arpack"}, ValueError, "eigen_solver"),
])
def test_bad_arguments_spectral(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        spectral_seriation(X_OK, **kwargs)


@pytest.mark.parametrize("kwargs, exc, match", [
    ({"n_components": 0}, ValueError, "n_components"),
    ({"k_local": 1}, ValueError, "k_local"),
    ({"k_local": 3.0}, TypeError, "k_local"),
    ({"norm_adjacency": "sym"}, ValueError, "norm_adjacency"),
    ({"scale_embedding": "ctd"}, ValueError, "scale_embedding"),
])
def test_bad_arguments_recanati(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        recanati_seriation(X_OK, **kwargs)


@pytest.mark.parametrize("method", METHODS)
def test_bad_input(method):
    with pytest.raises(ValueError, match="`X` must be finite|`X` must not contain NaN"):
        method(np.r_[X_OK, [[np.nan, 0.0]]])
    with pytest.raises(TypeError, match="`X`.*sparse"):
        method(sp.csr_matrix(X_OK))
    with pytest.raises(ValueError, match="`X` must be a square"):
        method(X_OK, affinity="precomputed")
    W = robinson(10)
    W[0, 1] = 2.0
    with pytest.raises(ValueError, match="`X` must be symmetric"):
        method(W, affinity="precomputed")
    with pytest.raises(ValueError, match="`X` must be a nonnegative"):
        method(-robinson(10), affinity="precomputed")
