"""Baseline seriation methods (spectral, Recanati), same call shape and Result as ``stage``.

- :func:`spectral_seriation`: sort the Fiedler vector of a similarity graph (Atkins, Boman and
  Hendrickson 1998).
- :func:`recanati_seriation`: spectral ordering after a multidimensional Laplacian embedding and a
  similarity rebuilt from local line fits (Recanati, Kerdreux and d'Aspremont 2018).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from numpy.typing import ArrayLike

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import (C_INT_MAX, as_array, as_points, check_bool, check_finite, check_int, check_option,
                                    check_real)
from numtk.seriation._graph import WEIGHTS, connect, knn_graph, orient, scaled_bandwidth, scaled_points

__all__ = ["spectral_seriation", "recanati_seriation"]

_AFFINITIES = ("nearest_neighbors", "precomputed")
_LAPLACIANS = ("normalized", "unnormalized")
_EIGEN_SOLVERS = ("auto", "dense", "shift-invert", "lobpcg")
_NORM_ADJACENCY = ("coifman", "none")
_SCALE_EMBEDDING = ("heuristic", "CTD", "none")
_DENSE_MAX_N = 2000  # 'auto' eigen solver: dense LAPACK up to this size, shift-invert above
_SHIFT = 1e-6  # shift-invert pole, relative to the Laplacian's scale: just left of the spectrum
_CHUNK = 1 << 22  # elements of one (chunk, k, k) block in the local line fits
_MAX_COUNT = C_INT_MAX  # bound of the counts that are clipped to the number of samples (n_components, k_local)


# --------------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------------

def _check_root(root: Any, n: int) -> int | None:
    if root is None:
        return None
    return check_int(root, "root", minimum=0, maximum=n - 1)


def _n_samples(X: Any) -> int:
    """Number of rows of X, for validating ``root`` before any graph work."""
    shape = getattr(X, "shape", None)
    if shape is None:
        try:
            shape = np.shape(X)
        except (ValueError, TypeError):  # ragged nested lists: as_array says so, naming `X`
            shape = as_array(X, "X").shape
    return int(shape[0]) if len(shape) else 0


def _as_similarity(X: Any) -> sp.csr_matrix:
    """A precomputed similarity: square, finite, nonnegative, symmetric; dense or sparse.

    Returned as CSR float64 without diagonal (self loops do not change L = D - W, and are dropped
    from the degrees as in :func:`scipy.sparse.csgraph.laplacian`).
    """
    if sp.issparse(X):
        if X.ndim != 2 or X.shape[0] != X.shape[1]:
            raise ValueError(f"`X` must be a square similarity matrix when affinity='precomputed'; "
                             f"got shape {X.shape}")
        if X.dtype.kind not in "biuf":
            raise TypeError(f"`X` must have a numeric (boolean, integer, float) dtype; got dtype {X.dtype}")
        W = sp.csr_matrix(X, dtype=np.float64, copy=True)
        values = W.data
    else:
        A = as_array(X, "X", ndim=2)
        if A.shape[0] != A.shape[1]:
            raise ValueError(f"`X` must be a square similarity matrix when affinity='precomputed'; "
                             f"got shape {A.shape}")
        A = np.asarray(A, dtype=np.float64)
        values = A
        W = None
    if X.shape[0] == 0:
        raise ValueError("`X` must hold at least one sample; got shape (0, 0)")
    check_finite(values, "X")
    if values.size and values.min() < 0:
        raise ValueError("`X` must be a nonnegative similarity when affinity='precomputed'; "
                         f"got a minimum of {values.min()}")
    if values.size:
        scale = float(np.abs(values).max())
        if W is None:
            asym = float(np.abs(A - A.T).max()) if A.size else 0.0
        else:
            diff = (W - W.T).tocsr()
            asym = float(np.abs(diff.data).max()) if diff.nnz else 0.0
        if asym > 1e-10 * max(scale, np.finfo(float).tiny):
            raise ValueError("`X` must be symmetric when affinity='precomputed'; "
                             f"max |X - X.T| is {asym:.3g}")
    if W is None:
        W = sp.csr_matrix(A)
    W.setdiag(0.0)
    W.eliminate_zeros()
    W = (W + W.T).tocsr() * 0.5  # exact symmetry for the eigensolvers
    W.sort_indices()
    return W


def _check_graph_args(affinity, n_neighbors, weights, bandwidth, allow_disconnected):
    check_option(affinity, "affinity", _AFFINITIES)
    k = check_int(n_neighbors, "n_neighbors", minimum=1)
    check_option(weights, "weights", WEIGHTS)
    h = None if bandwidth is None else check_real(bandwidth, "bandwidth", low=0.0, low_open=True)
    check_bool(allow_disconnected, "allow_disconnected")
    return k, h


# --------------------------------------------------------------------------------------------------
# Shared steps: graph, connectivity, Laplacian, eigenvectors, orientation
# --------------------------------------------------------------------------------------------------

def _build_graph(X, affinity, n_neighbors, weights, bandwidth):
    """(points or None, similarity CSR, weights, bandwidth) for either affinity."""
    if affinity == "precomputed":
        return None, _as_similarity(X), weights, float("nan")
    P, scale = scaled_points(X)  # exact power-of-two scaling of extreme X: the order is invariant
    W, h = knn_graph(P, n_neighbors, weights=weights, bandwidth=scaled_bandwidth(bandwidth, scale))
    return P, W, weights, h * scale


def _check_input(X, affinity):
    """Validate X as points or, with affinity='precomputed', as a similarity matrix."""
    return _as_similarity(X) if affinity == "precomputed" else as_points(X)


def _connect(W, points, allow_disconnected, *, what="similarity graph"):
    """Join or refuse a disconnected graph; returns (graph, n_components before bridging)."""
    W, n_comp, _ = connect(W, points, allow_disconnected, what=what)
    return W, n_comp


def _coifman(W: sp.csr_matrix) -> sp.csr_matrix:
    """Coifman-Lafon (alpha = 1) normalisation W <- D^-1 W D^-1."""
    dinv = 1.0 / np.asarray(W.sum(axis=1)).ravel()
    Dinv = sp.diags(dinv)
    return (Dinv @ W @ Dinv).tocsr()


def _laplacian(W: sp.csr_matrix, kind: str):
    """(L, row scaling turning L's eigenvectors into the embedding, scale of L's spectrum).

    'unnormalized': L = D - W. 'normalized': L_sym = I - D^-1/2 W D^-1/2, whose eigenvectors divided
    by sqrt(deg) are the random-walk (L_rw) eigenvectors, as scikit-learn's ``spectral_embedding``.
    """
    n = W.shape[0]
    deg = np.asarray(W.sum(axis=1)).ravel()
    if kind == "unnormalized":
        L = (sp.diags(deg) - W).tocsr()
        return L, np.ones(n), float(deg.max())
    dinv = 1.0 / np.sqrt(deg)
    D = sp.diags(dinv)
    L = (sp.identity(n, format="csr") - D @ W @ D).tocsr()
    return L, dinv, 1.0


def _smallest_eigenpairs(L: sp.csr_matrix, k: int, solver: str, rng: np.random.Generator, scale: float):
    """The k smallest eigenpairs of the PSD Laplacian L (ascending), never by plain Lanczos."""
    n = L.shape[0]
    if solver == "auto":
        solver = "dense" if n <= _DENSE_MAX_N else "shift-invert"
    if solver == "dense" or k >= n - 1:
        vals, vecs = scipy.linalg.eigh(L.toarray(), subset_by_index=[0, k - 1])
        return vals, vecs
    if solver == "shift-invert":
        from scipy.sparse.linalg import eigsh

        v0 = rng.uniform(-1.0, 1.0, n)
        # One sparse LU of L - sigma I (positive definite: sigma < 0 <= spectrum); the k eigenvalues
        # nearest sigma are the k smallest of L.
        vals, vecs = eigsh(L.tocsc(), k=k, sigma=-_SHIFT * scale, which="LM", v0=v0)
    else:  # lobpcg, with an algebraic-multigrid preconditioner when pyamg is installed
        from scipy.sparse.linalg import lobpcg

        shifted = (L + _SHIFT * scale * sp.identity(n, format="csr")).tocsr()
        try:
            import pyamg
        except ImportError:
            M = sp.diags(1.0 / shifted.diagonal()).tocsr()
        else:
            M = pyamg.smoothed_aggregation_solver(shifted).aspreconditioner()
        X0 = rng.standard_normal((n, k))
        vals, vecs = lobpcg(L, X0, M=M, largest=False, tol=1e-8 * scale, maxiter=max(200, n))
    idx = np.argsort(vals)
    return vals[idx], vecs[:, idx]


def _fiedler(W, laplacian, eigen_solver, rng):
    """(embedding, the two smallest eigenvalues) of a connected similarity graph with n >= 2."""
    L, rowscale, scale = _laplacian(W, laplacian)
    vals, vecs = _smallest_eigenpairs(L, 2, eigen_solver, rng, scale)
    f = vecs[:, 1] * rowscale
    return f, vals


def _trivial(n: int, root: int | None, **extra) -> Result:
    """Results of the degenerate sizes n = 1 ([0]) and n = 2 ([0, 1] unless root = 1)."""
    f = np.zeros(1) if n == 1 else np.array([-1.0, 1.0]) / np.sqrt(2.0)
    if n == 2 and root == 1:
        f = -f
    return Result(order=np.argsort(f, kind="stable").astype(np.int64), embedding=f, **extra)


# --------------------------------------------------------------------------------------------------
# spectral_seriation
# --------------------------------------------------------------------------------------------------

@constraints(X="array2d", affinity="option", n_neighbors="int>=1", weights="option", bandwidth="real>0",
             laplacian="option", eigen_solver="option", allow_disconnected="bool", root="int>=0", rng="rng")
def spectral_seriation(X: ArrayLike, *, affinity: str = "nearest_neighbors", n_neighbors: int = 15,
                       weights: str = "binary", bandwidth: float | None = None,
                       laplacian: str = "normalized", eigen_solver: str = "auto",
                       allow_disconnected: bool = True, root: int | None = None, rng=None) -> Result:
    r"""Order samples by the Fiedler vector of a similarity graph (spectral seriation).

    Builds a similarity graph (the symmetric k-nearest-neighbour graph of the rows of `X`, or `X`
    itself when ``affinity='precomputed'``), takes the eigenvector of the second smallest eigenvalue
    of its graph Laplacian and sorts it. For a Robinson similarity (entries decreasing away from the
    diagonal under the true order) with a simple Fiedler value, the sorted Fiedler vector recovers
    the order exactly up to reversal [1]_.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features), or (n_samples, n_samples)
        Points sampled along a curve, or with ``affinity='precomputed'`` a symmetric, nonnegative
        similarity matrix (dense or a SciPy sparse matrix; its diagonal is ignored). Points whose largest
        magnitude is beyond 2**400 or below 2**-400 (where squared distances overflow or underflow)
        are first scaled by a power of two, exactly: the order is invariant to scaling `X`. Exact
        duplicate rows that are neighbours are joined with weight 1.
    affinity : {'nearest_neighbors', 'precomputed'}, optional
        How the similarity graph is obtained.
    n_neighbors : int, optional
        Neighbours per point of the k-NN graph (symmetrised by union, no self loops); at most
        ``n_samples - 1``. Ignored with ``affinity='precomputed'``.
    weights : {'binary', 'gaussian'}, optional
        Edge weights of the k-NN graph: 1, or ``exp(-|x_i - x_j|^2 / h^2)``.
    bandwidth : float, optional
        ``h`` of the Gaussian weights; by default the median distance of the points to their
        ``n_neighbors``-th neighbour.
    laplacian : {'normalized', 'unnormalized'}, optional
        ``'normalized'``: eigenvector ``u`` of ``I - D^{-1/2} W D^{-1/2}``, embedding
        ``u / sqrt(deg)`` (the random-walk eigenvector, as in scikit-learn's ``spectral_embedding``);
        ``'unnormalized'``: eigenvector of ``D - W``.
    eigen_solver : {'auto', 'dense', 'shift-invert', 'lobpcg'}, optional
        ``'dense'``: LAPACK on the full matrix; ``'shift-invert'``: ARPACK on ``(L - sigma I)^{-1}``
        with ``sigma`` just below zero (one sparse LU); ``'lobpcg'``: LOBPCG preconditioned by
        algebraic multigrid when pyamg is installed (Jacobi otherwise, which converges slowly on
        long path-like graphs and may warn). ``'auto'`` is ``'dense'`` for ``n_samples <= 2000`` and
        ``'shift-invert'`` above. Plain Lanczos on the smallest eigenvalues is never used.
    allow_disconnected : bool, optional
        A disconnected graph has no single Fiedler vector. True (default) joins the components by the
        closest pairs of points along a minimum spanning tree over components (needs points, so not
        available with ``affinity='precomputed'``); False raises ValueError.
    root : int, optional
        Row index to put at the start of the order (its embedding value made the minimum). By
        default the entry of largest absolute value is made positive.
    rng : {None, int, numpy.random.Generator}, optional
        Start vectors of the iterative eigensolvers; the dense solver uses none.

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The stable argsort of ``embedding``.
        embedding : ndarray of float64, shape (n_samples,)
            The oriented Fiedler vector (for ``n_samples <= 2`` the trivial embedding ``[0]`` or
            ``[-1, 1] / sqrt(2)``).
        eigenvalues : ndarray of float64, shape (2,)
            The two smallest Laplacian eigenvalues (the first is 0 up to rounding); ``[0]`` for one
            sample.
        graph : scipy.sparse.csr_matrix, shape (n_samples, n_samples)
            The similarity used (bridging edges included).
        n_components : int
            Connected components of the graph before bridging.

    See Also
    --------
    recanati_seriation : spectral ordering with a multidimensional embedding.
    sklearn.manifold.SpectralEmbedding : the same embedding with ``n_components=1``.

    References
    ----------
    .. [1] J. E. Atkins, E. G. Boman and B. Hendrickson, "A spectral algorithm for seriation and the
       consecutive ones problem", SIAM Journal on Computing 28(1), 297-310, 1998.

    Examples
    --------
    A Robinson similarity with its rows shuffled: the order undoes the shuffle, up to reversal.

    >>> import numpy as np
    >>> from numtk.seriation import spectral_seriation
    >>> rng = np.random.default_rng(0)
    >>> i = np.arange(60)
    >>> W = np.exp(-np.abs(i[:, None] - i[None, :]) / 5.0)
    >>> perm = rng.permutation(60)
    >>> res = spectral_seriation(W[np.ix_(perm, perm)], affinity="precomputed")
    >>> truth = np.argsort(perm)
    >>> bool(np.array_equal(res.order, truth) or np.array_equal(res.order, truth[::-1]))
    True
    >>> bool(abs(res.eigenvalues[0]) < 1e-10)
    True
    """
    k, h = _check_graph_args(affinity, n_neighbors, weights, bandwidth, allow_disconnected)
    check_option(laplacian, "laplacian", _LAPLACIANS)
    check_option(eigen_solver, "eigen_solver", _EIGEN_SOLVERS)
    rng = normalize_rng(rng)
    n = _n_samples(X)
    root = _check_root(root, max(n, 1))
    if n == 1:
        _check_input(X, affinity)
        return _trivial(1, root, eigenvalues=np.zeros(1), graph=sp.csr_matrix((1, 1)), n_components=1)

    points, W, weights, h = _build_graph(X, affinity, k, weights, h)
    W, n_comp = _connect(W, points, allow_disconnected)
    if n == 2:
        L, _, _ = _laplacian(W, laplacian)
        vals = scipy.linalg.eigvalsh(L.toarray())
        return _trivial(2, root, eigenvalues=vals, graph=W, n_components=n_comp)
    f, vals = _fiedler(W, laplacian, eigen_solver, rng)
    f = orient(f, root)
    return Result(order=np.argsort(f, kind="stable").astype(np.int64), embedding=f, eigenvalues=vals,
                  graph=W, n_components=n_comp)


# --------------------------------------------------------------------------------------------------
# recanati_seriation
# --------------------------------------------------------------------------------------------------

def _local_line_similarity(Y: np.ndarray, k: int) -> sp.csr_matrix:
    """Similarity from local 1-D fits in the embedding Y (n, m).

    Each point's neighbourhood (itself and its k - 1 nearest points in Y) is fitted by a line (top
    right singular vector of the centred coordinates); the points are projected onto it, and every
    pair (b, c) of the neighbourhood receives ``1 - |p_b - p_c| / max |p - p'|``. S sums these over
    all neighbourhoods holding both points (diagonal dropped).
    """
    from sklearn.neighbors import NearestNeighbors

    n = Y.shape[0]
    if k > 1:
        _, ind = NearestNeighbors(n_neighbors=k - 1).fit(Y).kneighbors()  # excludes the point itself
        nbrs = np.concatenate([np.arange(n)[:, None], ind], axis=1)
    else:
        nbrs = np.arange(n)[:, None]
    rows, cols, vals = [], [], []
    step = max(1, _CHUNK // (k * max(k, Y.shape[1])))
    for start in range(0, n, step):  # chunks of points (memory), each fully vectorised
        idx = nbrs[start:start + step]  # (c, k)
        P = Y[idx]  # (c, k, m)
        P = P - P.mean(axis=1, keepdims=True)
        _, _, Vt = np.linalg.svd(P, full_matrices=False)  # batched SVD
        proj = np.einsum("ckm,cm->ck", P, Vt[:, 0, :])
        diss = np.abs(proj[:, :, None] - proj[:, None, :])  # (c, k, k)
        top = diss.max(axis=(1, 2), keepdims=True)
        sim = 1.0 - np.divide(diss, top, out=np.zeros_like(diss), where=top > 0)
        rows.append(np.broadcast_to(idx[:, :, None], diss.shape).ravel())
        cols.append(np.broadcast_to(idx[:, None, :], diss.shape).ravel())
        vals.append(sim.ravel())
    rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    off = rows != cols
    S = sp.coo_matrix((vals[off], (rows[off], cols[off])), shape=(n, n)).tocsr()  # sums duplicates
    S.eliminate_zeros()
    S = ((S + S.T) * 0.5).tocsr()  # symmetric already; removes rounding asymmetry of the sums
    S.sort_indices()
    return S


@constraints(X="array2d", affinity="option", n_neighbors="int>=1", n_components="int>=1", k_local="int>=2",
             norm_adjacency="option", laplacian="option", scale_embedding="option", allow_disconnected="bool",
             root="int>=0", rng="rng")
def recanati_seriation(X: ArrayLike, *, affinity: str = "nearest_neighbors", n_neighbors: int = 15,
                       n_components: int = 8, k_local: int = 15, norm_adjacency: str = "coifman",
                       laplacian: str = "unnormalized", scale_embedding: str = "heuristic",
                       allow_disconnected: bool = True, root: int | None = None, rng=None) -> Result:
    r"""Spectral ordering with a multidimensional Laplacian embedding (Recanati et al.).

    The Fiedler vector alone is fragile on long, noisy or locally irregular similarities. This
    method [1]_ first embeds the similarity graph in ``n_components`` dimensions with the Laplacian
    eigenvectors, where the latent order appears as a filamentary curve; it then fits a line to every
    point's neighbourhood in that embedding, turns the projections on these lines into a new,
    cleaner similarity, and orders the samples by the Fiedler vector of the new similarity.

    Steps: (1) similarity W (binary k-NN graph of `X`, or `X` itself), Coifman-Lafon normalised
    ``W <- D^-1 W D^-1`` [2]_; (2) the ``n_components`` eigenvectors of the Laplacian after the trivial
    one, column ``j`` scaled by ``1/sqrt(j)`` (``'heuristic'``) or ``1/sqrt(lambda_j)``
    (``'CTD'``, commute-time distance); (3) for each point, its ``k_local`` nearest points in the
    embedding (itself included), their projections ``p`` on the local principal line and local
    dissimilarities ``|p_b - p_c|`` divided by their maximum; (4) ``S_bc`` = sum over neighbourhoods
    containing b and c of ``1 - dissimilarity``; (5) the Fiedler vector of S (with the same
    normalisation and Laplacian), sorted.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features), or (n_samples, n_samples)
        Points, or with ``affinity='precomputed'`` a symmetric nonnegative similarity (dense or
        sparse; diagonal ignored). Points whose largest
        magnitude is beyond 2**400 or below 2**-400 (where squared distances overflow or underflow)
        are first scaled by a power of two, exactly: the order is invariant to scaling `X`. Exact
        duplicate rows that are neighbours are joined with weight 1.
    affinity : {'nearest_neighbors', 'precomputed'}, optional
        How the first similarity is obtained; the k-NN graph has binary weights.
    n_neighbors : int, optional
        Neighbours per point of the k-NN graph, at most ``n_samples - 1``.
    n_components : int, optional
        Dimension of the Laplacian embedding (nontrivial eigenvectors); at most ``n_samples - 1``
        are used (values above 2**31 - 1 are refused).
    k_local : int, optional
        Size of the neighbourhoods (point included) of the local line fits; at most ``n_samples``
        are used (values above 2**31 - 1 are refused).
    norm_adjacency : {'coifman', 'none'}, optional
        Normalisation of both similarities before their Laplacian (None is the same as 'none').
    laplacian : {'unnormalized', 'normalized'}, optional
        Laplacian of both eigen-steps, as in :func:`spectral_seriation`.
    scale_embedding : {'heuristic', 'CTD', 'none'}, optional
        Column scaling of the embedding (None is the same as 'none').
    allow_disconnected : bool, optional
        Policy for a disconnected first similarity, as in :func:`spectral_seriation`. Should the
        rebuilt similarity S be disconnected, True bridges its components by the closest pairs of
        points in the embedding and False raises.
    root : int, optional
        Row index to put at the start of the order; by default the entry of largest absolute value
        of the embedding is made positive.
    rng : {None, int, numpy.random.Generator}, optional
        Start vectors of the iterative eigensolver (used above 2000 samples).

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The stable argsort of ``embedding``.
        embedding : ndarray of float64, shape (n_samples,)
            The oriented Fiedler vector of S (the trivial embedding for ``n_samples <= 2``).
        spectral_embedding : ndarray of float64, shape (n_samples, m)
            The scaled Laplacian embedding, ``m = min(n_components, n_samples - 1)`` columns.
        similarity : scipy.sparse.csr_matrix, shape (n_samples, n_samples)
            The rebuilt similarity S.
        graph : scipy.sparse.csr_matrix, shape (n_samples, n_samples)
            The first similarity used (bridging edges included, before normalisation).
        n_components : int
            Connected components of the first similarity before bridging.

    See Also
    --------
    spectral_seriation : the plain Fiedler-vector ordering.

    References
    ----------
    .. [1] A. Recanati, T. Kerdreux and A. d'Aspremont, "Reconstructing latent orderings by spectral
       clustering", arXiv:1807.07122, 2018.
    .. [2] R. R. Coifman and S. Lafon, "Diffusion maps", Applied and Computational Harmonic Analysis
       21(1), 5-30, 2006.

    Examples
    --------
    Points along a helix, shuffled: the order follows the curve parameter up to reversal.

    >>> import numpy as np
    >>> from numtk.seriation import recanati_seriation
    >>> from numtk.stats import kendall_tau
    >>> rng = np.random.default_rng(1)
    >>> t = np.sort(rng.uniform(size=300))
    >>> X = np.c_[np.cos(4 * np.pi * t), np.sin(4 * np.pi * t), 3 * t]
    >>> res = recanati_seriation(X, n_neighbors=10)
    >>> tau = kendall_tau(np.argsort(res.order), np.arange(300)).statistic
    >>> bool(abs(tau) > 0.99)
    True
    >>> res.spectral_embedding.shape
    (300, 8)
    """
    k, _ = _check_graph_args(affinity, n_neighbors, "binary", None, allow_disconnected)
    m = check_int(n_components, "n_components", minimum=1, maximum=_MAX_COUNT)
    kl = check_int(k_local, "k_local", minimum=2, maximum=_MAX_COUNT)
    if norm_adjacency is None:
        norm_adjacency = "none"
    if scale_embedding is None:
        scale_embedding = "none"
    check_option(norm_adjacency, "norm_adjacency", _NORM_ADJACENCY)
    check_option(laplacian, "laplacian", _LAPLACIANS)
    check_option(scale_embedding, "scale_embedding", _SCALE_EMBEDDING)
    rng = normalize_rng(rng)
    n = _n_samples(X)
    root = _check_root(root, max(n, 1))
    if n == 1:
        _check_input(X, affinity)
        empty = sp.csr_matrix((1, 1))
        return _trivial(1, root, spectral_embedding=np.zeros((1, 0)), similarity=empty, graph=empty,
                        n_components=1)

    points, W, _, h = _build_graph(X, affinity, k, "binary", None)
    W, n_comp = _connect(W, points, allow_disconnected)
    if n == 2:
        return _trivial(2, root, spectral_embedding=np.zeros((2, 1)), similarity=W.copy(), graph=W,
                        n_components=n_comp)

    # (1)-(2) Laplacian embedding of the normalised similarity, trivial eigenvector dropped.
    m = min(m, n - 1)
    A = _coifman(W) if norm_adjacency == "coifman" else W
    L, rowscale, scale = _laplacian(A, laplacian)
    vals, vecs = _smallest_eigenpairs(L, m + 1, "auto", rng, scale)
    Y = vecs[:, 1:] * rowscale[:, None]
    if scale_embedding == "heuristic":
        Y = Y / np.sqrt(np.arange(1, m + 1))
    elif scale_embedding == "CTD":
        Y = Y / np.sqrt(np.maximum(vals[1:], np.finfo(float).tiny))
    # Deterministic column signs (largest |entry| positive), so the output does not depend on LAPACK.
    Y = Y * np.where(Y[np.argmax(np.abs(Y), axis=0), np.arange(m)] < 0, -1.0, 1.0)

    # (3)-(4) New similarity from local line fits in the embedding.
    S = _local_line_similarity(Y, min(kl, n))
    S, _ = _connect(S, Y, allow_disconnected,
                    what="rebuilt similarity (from the local line fits)")

    # (5) Fiedler vector of the new similarity.
    B = _coifman(S) if norm_adjacency == "coifman" else S
    f, _ = _fiedler(B, laplacian, "auto", rng)
    f = orient(f, root)
    return Result(order=np.argsort(f, kind="stable").astype(np.int64), embedding=f,
                  spectral_embedding=Y, similarity=S, graph=W, n_components=n_comp)
