"""numtk.seriation.stage at scale: capped tangent neighbourhoods, bounded preconditioned CG, distinct rows."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.sparse.csgraph import connected_components, laplacian

import numtk.seriation._stage as stage_module
from numtk.seriation import _seriation_ext, make_curve, order_agreement, stage
from numtk.seriation._graph import NeighborIndex
from numtk.seriation._stage import _distinct_rows, _integrate, _local_pca, _Neighbourhoods


def _angles(a, b):
    """Angles in degrees between the lines spanned by the rows of a and b (unit rows)."""
    return np.degrees(np.arccos(np.clip(np.abs(np.sum(a * b, axis=1)), 0.0, 1.0)))


def _helix_tangents(t, info):
    """The true unit tangents of make_curve's helix, in the coordinates of X."""
    r, turns, height = info.params["radius"], info.params["turns"], info.params["height"]
    w = 2 * math.pi * turns
    v = np.c_[-r * w * np.sin(w * t), r * w * np.cos(w * t), np.full(t.size, height)] @ info.frame.T
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_capped_tangents_match_the_uncapped_ones():
    # Above fit = 90 points the local PCA runs at the points of a thinning only (fit nearest kept points each)
    # and every point takes its nearest kept point's tangent: compare with the exact kp-point neighbourhoods.
    X, t, info = make_curve("helix", 6000, 3, noise=0.05, return_info=True, rng=4)
    truth = _helix_tangents(t, info)
    nn = NeighborIndex(X)
    hoods = _Neighbourhoods(X, nn, nn.kneighbors(X, 16, return_distance=False), np.random.default_rng(0), None,
                            fit=90)
    for kp in (180, 360):
        assert hoods.thinned(kp)
        capped, capped_ratio = hoods.tangents(kp, 1)
        exact, exact_ratio = _local_pca(X, nn.kneighbors(X, kp, return_distance=False), 1)
        between = _angles(capped, exact)
        assert np.median(between) < 2.5 and np.quantile(between, 0.99) < 6.0
        # as close to the true tangents as the exact neighbourhoods are, within half a degree
        assert np.median(_angles(capped, truth)) <= np.median(_angles(exact, truth)) + 0.5
        assert abs(np.median(capped_ratio) - np.median(exact_ratio)) < 0.01


def test_thinned_tangents_keep_the_noise_floor():
    # n = 2e4: 'auto' picks a size above the fitted 90 points (thinned, interpolated tangents); |tau| stays at
    # the noise floor 1 - (4 r / sqrt(pi) - 2 r^2), r = noise / length.
    X, t, info = make_curve("helix", 20000, 3, noise=0.05, return_info=True, rng=5)
    res = stage(X, rng=0)
    assert res.tangent_neighbors > 90 and res.tangent_fit_points == 90
    r = 0.05 / info.length
    floor = 1.0 - (4.0 * r / math.sqrt(math.pi) - 2.0 * r * r)
    assert order_agreement(res.order, t) >= floor - 0.003


def _system(monkeypatch, kind, n, d, seed=3):
    """The (points, graph, oriented tangents) that stage hands to its Laplacian solve."""
    seen = {}
    solve = stage_module._integrate

    def grab(P, W, oriented, **kwargs):
        seen.update(P=P, W=W, oriented=oriented)
        return solve(P, W, oriented, **kwargs)

    monkeypatch.setattr(stage_module, "_integrate", grab)
    X, _ = make_curve(kind, n, d, noise=0.05, rng=seed)
    stage(X, rng=0)
    monkeypatch.undo()
    return seen["P"], seen["W"], seen["oriented"]


@pytest.mark.parametrize("kind, d", [("helix", 3), ("spiral", 2)])
def test_aggregation_pcg_equals_a_direct_sparse_solve(monkeypatch, kind, d):
    P, W, T = _system(monkeypatch, kind, 2000, d)
    cg = _integrate(P, W, T, solver="cg", preconditioner="aggregation", tol=1e-10)
    direct = _integrate(P, W, T, solver="direct", tol=1e-10)
    assert cg.success and cg.n_iter <= 100
    scale = np.abs(direct.embedding).max()
    assert_allclose(cg.embedding, direct.embedding, rtol=0, atol=1e-6 * scale)
    # and against SciPy's own sparse LU of the grounded system, independently of numtk's solve
    from scipy.sparse.linalg import spsolve

    L = laplacian(W).tocsc()
    f = np.zeros(W.shape[0])
    f[1:] = spsolve(L[1:, 1:], direct.rhs[1:])
    f -= f.mean()
    assert_allclose(cg.embedding, f, rtol=0, atol=1e-6 * scale)


@pytest.mark.slow
def test_aggregation_pcg_iterations_stay_bounded_as_n_grows(monkeypatch):
    # The spiral: 160 -> 1306 iterations from n = 5e4 to 1e5 with every edge in the aggregates (a weak
    # edge to the next arm tied two strands into one aggregate); aggregates along strong edges keep ~60. Every
    # make_curve kind (d = 10, noise 0.05, whole stage calls, measured): 32-57 iterations at n = 2e3, 34-48 at
    # 2e4, 37-39 at 2e5.
    for kind, d in (("helix", 3), ("spiral", 2), ("line", 10), ("arc", 10), ("nested_arcs", 10),
                    ("random_fourier", 10)):
        counts = []
        for n in (2000, 20000):
            P, W, T = _system(monkeypatch, kind, n, d)
            cg = _integrate(P, W, T, solver="cg", preconditioner="aggregation", tol=1e-8)
            assert cg.success
            counts.append(cg.n_iter)
        assert max(counts) <= 100, (kind, counts)
        assert counts[1] <= 1.5 * counts[0], (kind, counts)


@settings(max_examples=40)
@given(st.integers(2, 60), st.integers(0, 2**32 - 1), st.floats(0.05, 1.0), st.sampled_from([np.int32, np.int64]))
def test_strong_aggregates_are_connected_and_cover_every_node(n, seed, theta, dtype):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    a, b = rng.integers(0, n, 3 * n), rng.integers(0, n, 3 * n)
    keep = a != b
    rows = np.r_[perm[:-1], a[keep]]
    cols = np.r_[perm[1:], b[keep]]
    w = np.exp(-3 * rng.random(rows.size) * rng.integers(0, 4, rows.size))  # weights spanning decades
    W = sp.csr_matrix((w, (rows, cols)), shape=(n, n))
    W = (W + W.T).tocsr()
    W.sort_indices()
    labels, count = _seriation_ext.aggregate(W.indptr.astype(dtype), W.indices.astype(dtype), W.data, theta)
    assert labels.dtype == dtype and np.unique(labels).size == count and labels.max() == count - 1
    for g in range(count):
        nodes = np.flatnonzero(labels == g)
        assert connected_components(W[nodes][:, nodes], directed=False)[0] == 1
    with pytest.raises(ValueError, match="theta"):
        _seriation_ext.aggregate(W.indptr.astype(dtype), W.indices.astype(dtype), W.data, 1.5)


def test_distinct_rows_match_numpy_unique():
    rng = np.random.default_rng(6)
    X = rng.integers(0, 3, size=(400, 3)).astype(float)  # many duplicates
    X[5] = [-0.0, 1.0, 2.0]
    X[6] = [0.0, 1.0, 2.0]  # -0.0 and +0.0 rows are the same point
    U, inverse = _distinct_rows(X)
    ref, first, ref_inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # numtk keeps the order of first appearance
    assert_array_equal(U, ref[order])
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    assert_array_equal(inverse, rank[ref_inverse.ravel()])
    assert inverse[5] == inverse[6]
    Y = rng.standard_normal((300, 4))  # no duplicates: X itself comes back
    V, inv = _distinct_rows(Y)
    assert V is Y
    assert_array_equal(inv, np.arange(300))


@settings(max_examples=60)
@given(st.integers(1, 80), st.integers(0, 2**32 - 1), st.floats(0.0, 3.0), st.sampled_from([np.int32, np.int64]))
def test_components_stored_both_ways_equal_the_undirected_search(n, seed, density, dtype):
    # STAGE's graphs store each edge both ways; their strongly connected components, renumbered, are the ones
    # SciPy's undirected search finds, numbered alike (in the order of each component's lowest node)
    from numtk.seriation._graph import components

    rng = np.random.default_rng(seed)
    m = int(density * n)
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    W = sp.csr_matrix((rng.random(m) + 0.1, (a, b)), shape=(n, n))
    W = (W + W.T).tocsr()
    W.indptr, W.indices = W.indptr.astype(dtype), W.indices.astype(dtype)
    count, labels = components(W, both_ways=True)
    ref_count, ref = connected_components(W, directed=False)
    assert count == ref_count
    assert_array_equal(labels, ref)
    count, labels = components(W)  # the default: the undirected search itself
    assert count == ref_count
    assert_array_equal(labels, ref)
