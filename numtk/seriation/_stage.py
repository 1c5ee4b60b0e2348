"""STAGE: tangent synchronisation and an inhomogeneous Laplacian solve to order points along a curve.

Local PCA is compiled (Lanczos per neighbourhood, threaded); neighbours come from scikit-learn, the sign
synchronisation runs on SciPy sparse matrices (spanning tree, then power iterations) and the integration
is a grounded sparse LU solve.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree

from numtk._lib import MapWrapper, Result, n_threads
from numtk._lib._validation import as_array, check_bool, check_int, check_option
from numtk.seriation._graph import WEIGHTS, as_points, components, connect, graph_from_neighbors, orient

__all__ = ["stage"]

_CHUNK_ROWS = 4096  # neighbourhoods per task when a map-like `workers` carries the local PCA


def _pca_task(X: np.ndarray, neighbors: np.ndarray, tol: float):
    """One chunk of local PCA (module level, so process pools and Dask can pickle it)."""
    from numtk.seriation import _seriation_ext

    return _seriation_ext.local_pca(X, neighbors, 1, 64, tol)[:2]


def _local_pca(X: np.ndarray, neighbors: np.ndarray, threads=1,
               tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Top principal direction of each neighbourhood (a row of indices into X) and lambda_2 / lambda_1.

    Compiled Lanczos per neighbourhood (see native/include/numtk/seriation/local_pca.hpp); ``tol`` is the
    relative residual of the top eigenpair (0: run each to the full Krylov space, exact). At the default
    1e-6 the tangents agree with the exact ones to ~1e-12 on curve data, and the ratio (from the Krylov
    space, a lower bound) to about 1%: it only steers the 'auto' neighbourhood size. ``threads`` is a
    thread count for the kernel or a map-like callable that runs chunks of neighbourhoods as tasks.
    """
    from numtk.seriation import _seriation_ext

    X = np.ascontiguousarray(X)
    neighbors = np.ascontiguousarray(neighbors)
    if callable(threads):
        chunks = [neighbors[lo:lo + _CHUNK_ROWS] for lo in range(0, neighbors.shape[0], _CHUNK_ROWS)]
        with MapWrapper(threads) as mapper:
            parts = list(mapper(functools.partial(_pca_task, X, tol=tol), chunks))
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    tangents, ratio, _ = _seriation_ext.local_pca(X, neighbors, threads, 64, tol)
    return tangents, ratio


def _neighbourhood_sizes(n: int, k: int, tangent_neighbors) -> list[int]:
    """Candidate local-PCA sizes: 3k, 6k, 12k, ... capped at n/2 ('auto'), or the given size."""
    if tangent_neighbors != "auto":
        return [tangent_neighbors]
    cap = max(2, n // 2)
    sizes, kp = [], 3 * k
    while True:
        sizes.append(min(max(kp, 2), cap))
        if kp >= cap:
            return sorted(set(sizes))
        kp *= 2


_PROBE = 1000  # points on which the 'auto' rule chooses the neighbourhood size


def _tangents(X: np.ndarray, nn, ind: np.ndarray, sizes: list[int], threads: int):
    """Local PCA tangents for the first size whose median eigenvalue ratio is <= 0.5 (else the best).

    The size is chosen on an evenly spaced probe of at most ``_PROBE`` points (the median ratio of a
    thousand points is a stable estimate), then the tangents of all points are computed once.
    ``ind`` holds precomputed neighbours (self first); larger sizes are queried from ``nn`` as needed.
    """
    n = X.shape[0]
    probe = np.arange(0, n, max(1, n // _PROBE)) if len(sizes) > 1 else None
    chosen, best = sizes[-1], None
    for kp in sizes if probe is not None else ():
        nb = ind[probe, :kp] if ind.shape[1] >= kp else nn.kneighbors(X[probe], n_neighbors=kp,
                                                                      return_distance=False)
        med = float(np.median(_local_pca(X, nb, threads)[1]))
        if best is None or med < best[1]:
            best = (kp, med)
        if med <= 0.5:
            chosen = kp
            break
    else:
        if best is not None:
            chosen = best[0]
    if ind.shape[1] < chosen:
        ind = nn.kneighbors(X, n_neighbors=chosen, return_distance=False)  # includes the point itself
    t, r = _local_pca(X, ind[:, :chosen], threads)
    return t, r, chosen


def _synchronise(W: sp.csr_matrix, tangents: np.ndarray, max_iter: int) -> tuple[np.ndarray, float]:
    """Z2 signs z maximising sum w_ij c_ij z_i z_j: spanning-tree propagation, then power iterations."""
    n = W.shape[0]
    Wc = W.tocoo()
    c = np.einsum("ed,ed->e", tangents[Wc.row], tangents[Wc.col])
    H = sp.csr_matrix((Wc.data * c, (Wc.row, Wc.col)), shape=(n, n))
    # Maximum-weight spanning tree of w |c| (as a minimum tree of 3 - w |c|, all entries positive).
    cost = sp.csr_matrix((3.0 - Wc.data * np.abs(c), (Wc.row, Wc.col)), shape=(n, n))
    tree = minimum_spanning_tree(cost)
    tree = (tree + tree.T).tocsr()
    degree = np.diff(W.indptr)
    z = np.ones(n)
    n_comp, labels = components(W)
    for comp in range(n_comp):
        nodes = np.flatnonzero(labels == comp)
        start = nodes[np.argmax(degree[nodes])]
        order, pred = breadth_first_order(tree, start, directed=False, return_predecessors=True)
        # z_child = z_parent * sign(c_parent,child): the sign of a node is the product of the signs on
        # its path to the start, computed by pointer doubling (log of the tree depth vectorised steps).
        child = order[1:]
        acc = np.ones(n)
        acc[child] = np.where(np.asarray(H[pred[child], child]).ravel() >= 0, 1.0, -1.0)
        anc = np.arange(n)
        anc[child] = pred[child]
        for _ in range(64):
            if np.all(anc[order] == start):
                break
            acc, anc = acc * acc[anc], anc[anc]
        z[order] = acc[order]
    for _ in range(max_iter):
        h = H @ z
        new = np.where(h > 0, 1.0, np.where(h < 0, -1.0, z))
        if np.array_equal(new, z):
            break
        z = new
    disagree = (z[Wc.row] * z[Wc.col] * c) < 0
    frustration = float(Wc.data[disagree].sum() / Wc.data.sum()) if Wc.nnz else 0.0
    return z.astype(np.int8), frustration


def _integrate(X: np.ndarray, W: sp.csr_matrix, oriented: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Least-squares integration of the signed increments: L f = b, grounded per component, sparse LU."""
    from scipy.sparse.linalg import splu

    n = W.shape[0]
    U = sp.triu(W, k=1).tocoo()
    i, j, w = U.row, U.col, U.data
    d = np.einsum("ed,ed->e", 0.5 * (oriented[i] + oriented[j]), X[j] - X[i])  # d_ij, antisymmetric
    # b = B^T W_E d: edge (i, j) contributes -w d to node i and +w d to node j
    b = np.zeros(n)
    np.add.at(b, i, -w * d)
    np.add.at(b, j, w * d)
    L = (sp.diags(np.asarray(W.sum(axis=1)).ravel()) - W).tocsc()
    n_comp, labels = components(W)
    f = np.zeros(n)
    ground = np.zeros(n, dtype=bool)
    ground[[np.flatnonzero(labels == c)[0] for c in range(n_comp)]] = True
    keep = np.flatnonzero(~ground)
    if keep.size:
        f[keep] = splu(L[keep][:, keep].tocsc()).solve(b[keep])
    for c in range(n_comp):
        m = labels == c
        f[m] -= f[m].mean()
    r = np.sqrt(w) * (f[j] - f[i] - d)
    denom = np.linalg.norm(np.sqrt(w) * d)
    residual = float(np.linalg.norm(r) / denom) if denom > 0 else 0.0
    return f, residual, b


def stage(X: ArrayLike, *, n_neighbors: int = 15, weights: str = "gaussian", bandwidth: float | None = None,
          tangent_neighbors="auto", max_sync_iter: int = 100, allow_disconnected: bool = True,
          root: int | None = None, neighbors=None, workers: int = 1) -> Result:
    r"""Order points sampled near an unknown curve by their position along it (STAGE).

    STAGE estimates a tangent direction at every point by local PCA, fixes the signs of all tangents
    jointly (Z2 synchronisation over the k-NN graph), turns neighbour differences into signed
    increments along the oriented tangents, and integrates them into one scalar embedding by the
    inhomogeneous least-squares problem

    .. math::

        \min_f \sum_{(i,j) \in E} w_{ij} (f_j - f_i - d_{ij})^2, \qquad
        d_{ij} = \langle (T_i + T_j)/2,\ x_j - x_i \rangle,

    a graph-Laplacian system :math:`L f = b` with :math:`b_i = -\sum_j w_{ij} d_{ij}`. Sorting ``f`` gives
    the order (up to reversal).

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        The points (finite). Exact duplicate rows share one embedding value.
    n_neighbors : int, optional
        k of the symmetric k-NN graph (1 <= k <= number of distinct rows - 1).
    weights : {'gaussian', 'binary'}, optional
        Edge weights: :math:`\exp(-|x_i - x_j|^2 / h^2)` or 1.
    bandwidth : float, optional
        h for Gaussian weights; default: the median distance to the k-th neighbour.
    tangent_neighbors : int or 'auto', optional
        Neighbourhood size of the local PCA. 'auto' tries 3k, 6k, 12k, ... (at most n/2) and keeps the
        first whose median eigenvalue ratio :math:`\lambda_2/\lambda_1` is at most 0.5.
    max_sync_iter : int, optional
        Power iterations of the sign synchronisation after the spanning-tree initialisation.
    allow_disconnected : bool, optional
        True (default): a disconnected graph is joined by the closest pairs of points between its
        components along a spanning tree, and ``n_components`` reports how many there were. False:
        a disconnected graph raises ValueError.
    root : int, optional
        A row at the start of the curve: the sign of the embedding puts it nearer the low end. By
        default the entry of largest magnitude is made positive.
    neighbors : tuple of two arrays, optional
        Precomputed neighbours ``(distances, indices)``, each of shape (n_samples, q), each row sorted by
        distance with the point itself first, as ``NearestNeighbors(n_neighbors=q).fit(X).kneighbors(X)``
        returns them (an approximate search works too, for data too large for an exact one). Needs
        ``q > n_neighbors`` and distinct rows of X; local PCA neighbourhoods are capped at q.
    workers : int or map-like callable, optional
        An int: threads of the local PCA and jobs of the neighbour search (-1: all cores). A map-like
        callable (``Pool.map``, a wrapped ``dask.distributed`` client map, ...): runs the local PCA as
        tasks of 4096 neighbourhoods each; the result does not depend on it.

    Returns
    -------
    res : Result
        ``order`` (rows by position), ``embedding`` (mean zero, approximately arc length), ``tangents``
        (raw unit tangents), ``signs`` (+-1; oriented tangents are ``signs[:, None] * tangents``),
        ``graph`` (the weights used, over the distinct rows), ``inverse`` (row -> graph node),
        ``residual`` (relative, of the least-squares fit), ``n_components`` (before joining),
        ``labels``, ``frustration`` (weight share of edges the signs leave inconsistent),
        ``tangent_neighbors`` (the size used), ``isotropy`` (:math:`\lambda_2/\lambda_1` per row).

    Notes
    -----
    This is the reference implementation on NumPy/SciPy/scikit-learn (direct sparse LU solve); the
    paper's text and code were not available, so the steps follow the reconstruction in the project's
    specification.

    References
    ----------
    .. [1] STAGE: linear seriation from noisy point clouds, ICML 2026.
    .. [2] X. Jiang, L.-H. Lim, Y. Yao, Y. Ye, "Statistical ranking and combinatorial Hodge theory",
       Math. Program. 127, 203-244, 2011.
    .. [3] N. Boumal, "Nonconvex phase synchronization", SIAM J. Optim. 26, 2355-2377, 2016.

    Examples
    --------
    >>> from numtk.seriation import make_curve, order_agreement, stage
    >>> X, t = make_curve("helix", n_samples=1000, n_features=20, noise=0.01, rng=0)
    >>> res = stage(X, n_neighbors=10)
    >>> order_agreement(res.order, t) > 0.99
    True
    """
    X = as_points(X)
    check_option(weights, "weights", WEIGHTS)
    check_bool(allow_disconnected, "allow_disconnected")
    max_sync_iter = check_int(max_sync_iter, "max_sync_iter", minimum=0)
    # an int runs native threads (and scikit-learn's n_jobs); a map-like callable carries the local PCA
    threads = workers if callable(workers) else n_threads(workers)
    n_jobs = 1 if callable(workers) else threads
    n, dim = X.shape
    U, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    # keep the distinct rows in the order of their first appearance (deterministic, row-order based)
    perm = np.argsort(first, kind="stable")
    rank = np.empty_like(perm)
    rank[perm] = np.arange(perm.size)
    U, inverse = U[perm], rank[inverse]
    m = U.shape[0]
    if root is not None:
        root = check_int(root, "root", minimum=0, maximum=n - 1)
    if tangent_neighbors != "auto":
        tangent_neighbors = check_int(tangent_neighbors, "tangent_neighbors", minimum=2, maximum=max(2, m))
    k = check_int(n_neighbors, "n_neighbors", minimum=1)
    if m < 3 or dim == 1:
        return _small_or_line(X, U, inverse, root)
    if k > m - 1:
        raise ValueError(f"`n_neighbors` must be at most the number of distinct samples - 1 = {m - 1}; got {k}")
    sizes = _neighbourhood_sizes(m, k, tangent_neighbors)
    if neighbors is not None:
        if m != n:
            raise ValueError("`neighbors` needs distinct rows of `X`; X has duplicate rows")
        dist, ind = _check_neighbors(neighbors, n, k)
        nn = None
        sizes = sorted({min(size, ind.shape[1]) for size in sizes})
    else:
        # One neighbour query serves the graph (k) and the first two local-PCA sizes.
        from sklearn.neighbors import NearestNeighbors

        nn = NearestNeighbors(n_jobs=None if n_jobs == 1 else n_jobs).fit(U)
        query = min(m, max(k + 1, sizes[min(1, len(sizes) - 1)]))
        dist, ind = nn.kneighbors(U, n_neighbors=query)  # self first: the rows are distinct
    W, _ = graph_from_neighbors(dist[:, 1:k + 1], ind[:, 1:k + 1], weights=weights, bandwidth=bandwidth)
    W, n_comp, labels = connect(W, U, allow_disconnected)
    tangents, isotropy, kp = _tangents(U, nn, ind, sizes, threads)
    signs, frustration = _synchronise(W, tangents, max_sync_iter)
    f, residual, _ = _integrate(U, W, signs[:, None] * tangents)
    f = orient(f, None if root is None else inverse[root])
    embedding = f[inverse]
    return Result(order=np.argsort(embedding, kind="stable"), embedding=embedding, tangents=tangents[inverse],
                  signs=signs[inverse], graph=W, inverse=inverse, residual=residual, n_components=int(n_comp),
                  labels=labels[inverse], frustration=frustration, tangent_neighbors=int(kp),
                  isotropy=isotropy[inverse])


def _check_neighbors(neighbors, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate precomputed ``(distances, indices)`` neighbours (self first, sorted by distance)."""
    if not isinstance(neighbors, (tuple, list)) or len(neighbors) != 2:
        raise TypeError("`neighbors` must be a pair (distances, indices) as returned by kneighbors")
    dist = np.asarray(neighbors[0], dtype=np.float64)
    ind = as_array(neighbors[1], "neighbors[1]", ndim=2, kinds="iu")
    if dist.shape != ind.shape or dist.ndim != 2 or dist.shape[0] != n:
        raise ValueError(f"`neighbors` must hold two arrays of shape (n_samples, q) = ({n}, q); got "
                         f"{dist.shape} and {ind.shape}")
    if ind.shape[1] < k + 1:
        raise ValueError(f"`neighbors` must hold more than n_neighbors = {k} neighbours per point (the "
                         f"point itself first); got q = {ind.shape[1]}")
    if ind.min() < 0 or ind.max() >= n:
        raise ValueError(f"`neighbors` indices must lie in [0, {n})")
    if not np.array_equal(ind[:, 0], np.arange(n)):
        raise ValueError("`neighbors` must list each point itself first, as kneighbors(X) does")
    if not np.all(np.isfinite(dist)) or dist.min() < 0 or np.any(np.diff(dist, axis=1) < 0):
        raise ValueError("`neighbors` distances must be finite, non-negative and sorted in each row")
    return dist, ind.astype(np.int64, copy=False)


def _small_or_line(X, U, inverse, root) -> Result:
    """n_distinct <= 2 or d = 1: the embedding is exact without the graph machinery."""
    m, dim = U.shape
    if dim == 1:
        f = U[:, 0] - U[:, 0].mean()  # increments are exact differences: the solve returns x - mean(x)
        tangents = np.ones((m, 1))
    elif m == 1:
        f = np.zeros(1)
        tangents = np.zeros((1, dim))
    else:
        half = 0.5 * np.linalg.norm(U[1] - U[0])
        f = np.array([-half, half])
        t = (U[1] - U[0]) / (2 * half)
        tangents = np.vstack([t, t])
    if m != 2 or root is not None:  # two points keep their row order: [-h, +h]
        f = orient(f, None if root is None else inverse[root])
    embedding = f[inverse]
    n = X.shape[0]
    return Result(order=np.argsort(embedding, kind="stable"), embedding=embedding, tangents=tangents[inverse],
                  signs=np.ones(n, dtype=np.int8), graph=sp.csr_matrix((m, m)), inverse=inverse, residual=0.0,
                  n_components=1, labels=np.zeros(n, dtype=np.int64), frustration=0.0, tangent_neighbors=0,
                  isotropy=np.zeros(n))
