"""Manifold-learning baselines for seriation: a 1-D embedding (LTSA, t-SNE, UMAP), sorted.

Same call shape and Result as :func:`~numtk.seriation.stage` and the graph baselines:

- :func:`ltsa_seriation`: local tangent space alignment (Zhang and Zha 2004), through scikit-learn's
  ``LocallyLinearEmbedding(method='ltsa', n_components=1)``.
- :func:`tsne_seriation`: 1-D t-SNE (van der Maaten and Hinton 2008), through scikit-learn's ``TSNE``.
- :func:`umap_seriation`: 1-D UMAP (McInnes, Healy and Melville 2018); needs the optional package
  ``umap-learn``, imported only when called.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._workers import max_workers
from numtk._lib._validation import C_INT_MAX, as_array, check_finite, check_int, check_option, check_real
from numtk.seriation._baselines import _check_root, _n_samples, _trivial
from numtk.seriation._graph import check_neighbor_count, orient, scaled_points

__all__ = ["ltsa_seriation", "tsne_seriation", "umap_seriation"]

_LTSA_SOLVERS = ("auto", "dense", "arpack")
_DENSE_MAX_N = 5000  # LTSA 'auto': dense LAPACK up to this size; also the limit of the dense fallback
_SEED_MAX = C_INT_MAX  # the int seeds handed to scikit-learn / umap as random_state
_TSNE_INITS = ("pca", "random")
_MAX_ITER = C_INT_MAX  # bound of the iteration counts passed on in **kwargs


def _check_passed_on(kwargs: dict, counts: tuple[str, ...]) -> None:
    """Bound the iteration counts and ``n_jobs`` of the keywords passed on to the estimator from above
    (the C ints they become); their lower bounds and meanings (``n_jobs=-2``, ``n_iter_without_progress=-1``)
    are the estimator's."""
    for name in counts:
        if name in kwargs:
            check_int(kwargs[name], name, maximum=_MAX_ITER)
    if kwargs.get("n_jobs") is not None:
        n_jobs = check_int(kwargs["n_jobs"], "n_jobs", maximum=max_workers())
        if n_jobs == 0:
            raise ValueError("`n_jobs` must not be 0 (joblib's convention: -1 all cores, -2 all but one, ...)")


def _seed(rng: np.random.Generator) -> int:
    """An int random_state for third-party estimators, drawn from the numtk generator."""
    return int(rng.integers(0, _SEED_MAX))


def _finish(f: np.ndarray, root: int | None, **extra) -> Result:
    f = orient(np.ascontiguousarray(f, dtype=np.float64), root)
    return Result(order=np.argsort(f, kind="stable").astype(np.int64), embedding=f, **extra)


def _check_kwargs(kwargs: dict, reserved: tuple[str, ...], func: str) -> None:
    bad = sorted(set(kwargs) & set(reserved))
    if bad:
        raise TypeError(f"{func}() sets {', '.join(repr(b) for b in bad)} itself; use the named "
                        "keywords (`rng` for random_state) instead of passing them in **kwargs")


# --------------------------------------------------------------------------------------------------
# LTSA
# --------------------------------------------------------------------------------------------------

@constraints(X="array2d", n_neighbors="int>=2", eigen_solver="option", root="int>=0", rng="rng")
def ltsa_seriation(X: ArrayLike, *, n_neighbors: int = 15, eigen_solver: str = "auto",
                   root: int | None = None, rng=None) -> Result:
    r"""Order samples by a 1-D local tangent space alignment (LTSA) embedding.

    LTSA [1]_ fits a tangent line to every point's neighbourhood and finds the global 1-D coordinate
    whose restriction to each neighbourhood is best explained by an affine function of the local
    tangent coordinate: the eigenvector of the second smallest eigenvalue of the alignment matrix
    ``M = sum_i S_i (I - G_i G_i^T) S_i^T`` (the smallest, 0, belongs to the constant vector). For
    points along a smooth curve the coordinate follows the arclength, and its argsort is the order.
    This wraps ``sklearn.manifold.LocallyLinearEmbedding(method='ltsa', n_components=1)``.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        Points sampled along a curve (dense, finite). Points whose largest magnitude is beyond
        2**400 or below 2**-400 are first scaled by a power of two, exactly (the order is invariant
        to scaling X).
    n_neighbors : int, optional
        Size of each local neighbourhood (scikit-learn's LTSA excludes the point itself); between 2
        and ``n_samples - 1``.
    eigen_solver : {'auto', 'dense', 'arpack'}, optional
        ``'dense'``: LAPACK on the dense ``n x n`` alignment matrix; ``'arpack'``: ARPACK in
        shift-invert mode at ``sigma = 0`` on the sparse alignment matrix. ``'auto'`` is ``'dense'``
        for ``n_samples <= 5000`` and ``'arpack'`` above. Shift-invert at 0 factorises a singular
        matrix and can fail ("Factor is exactly singular"); the dense solver is then used instead
        when ``n_samples <= 5000``, and the error is raised otherwise.
    root : int, optional
        Row index to put at the start of the order (its embedding value made the minimum). By
        default the entry of largest absolute value is made positive.
    rng : {None, int, numpy.random.Generator}, optional
        Start vector of ARPACK (an int seed drawn from it is passed as ``random_state``); the dense
        solver uses none.

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The stable argsort of ``embedding``.
        embedding : ndarray of float64, shape (n_samples,)
            The oriented LTSA coordinate (unit norm).
        reconstruction_error : float
            scikit-learn's ``reconstruction_error_`` (the eigenvalue of the coordinate); 0.0 for
            ``n_samples <= 2``.
        eigen_solver : str
            The solver that produced the result (``'dense'`` after a fallback; ``'none'`` for
            ``n_samples <= 2``).
        random_state : int
            The seed passed to scikit-learn.

    Notes
    -----
    The alignment loop runs once per point in Python, so LTSA is slow beyond about 1e4 samples, and
    the dense solver needs ``O(n^2)`` memory. For ``n_samples <= 2`` the order is trivial (``[0]``,
    or ``[0, 1]`` unless ``root=1``) and no embedding is computed.

    See Also
    --------
    sklearn.manifold.LocallyLinearEmbedding : the estimator wrapped here.
    spectral_seriation : Fiedler-vector ordering of a k-NN graph.

    References
    ----------
    .. [1] Z. Zhang and H. Zha, "Principal manifolds and nonlinear dimensionality reduction via
       tangent space alignment", SIAM Journal on Scientific Computing 26(1), 313-338, 2004.

    Examples
    --------
    Points along a helix, in random row order: the order follows the curve up to reversal.

    >>> from numtk.seriation import make_curve, order_agreement
    >>> from numtk.seriation import ltsa_seriation
    >>> X, t = make_curve("helix", 400, 3, rng=0)
    >>> res = ltsa_seriation(X, n_neighbors=10)
    >>> bool(order_agreement(res.order, t) > 0.99)
    True
    >>> res.embedding.shape, res.eigen_solver
    ((400,), 'dense')
    """
    k = check_int(n_neighbors, "n_neighbors", minimum=2)
    check_option(eigen_solver, "eigen_solver", _LTSA_SOLVERS)
    rng = normalize_rng(rng)
    n = _n_samples(X)
    root = _check_root(root, max(n, 1))
    P = scaled_points(X)[0]  # the embeddings used here are invariant to scaling X
    seed = _seed(rng)
    if n <= 2:
        return _trivial(n, root, reconstruction_error=0.0, eigen_solver="none", random_state=seed)
    check_neighbor_count(k, n)

    from sklearn.manifold import LocallyLinearEmbedding

    solver = eigen_solver
    if solver == "auto":
        solver = "dense" if n <= _DENSE_MAX_N else "arpack"

    def fit(s):
        lle = LocallyLinearEmbedding(n_neighbors=k, n_components=1, method="ltsa", eigen_solver=s,
                                     random_state=seed)
        return lle.fit(P)

    try:
        lle = fit(solver)
    except ValueError:  # scikit-learn re-raises ARPACK's RuntimeError (singular factor) as ValueError
        if solver != "arpack" or n > _DENSE_MAX_N:
            raise
        solver = "dense"
        lle = fit(solver)
    return _finish(lle.embedding_[:, 0], root, reconstruction_error=float(lle.reconstruction_error_),
                   eigen_solver=solver, random_state=seed)


# --------------------------------------------------------------------------------------------------
# t-SNE
# --------------------------------------------------------------------------------------------------

@constraints(X="array2d", perplexity="real>0", init=("option", "array1d"), root="int>=0", rng="rng")
def tsne_seriation(X: ArrayLike, *, perplexity: float = 30.0, init: str | ArrayLike = "pca",
                   root: int | None = None, rng=None, **kwargs: Any) -> Result:
    r"""Order samples by a 1-D t-SNE embedding.

    t-SNE [1]_ matches Gaussian neighbour probabilities in the input (bandwidths set by
    `perplexity`) with Student-t probabilities in the embedding by minimising their Kullback-Leibler
    divergence. With one output dimension, the argsort of the embedding is an order. This wraps
    ``sklearn.manifold.TSNE(n_components=1, learning_rate='auto', method='barnes_hut')``.

    t-SNE preserves neighbourhoods, not global arrangement: in 1-D it typically cuts a curve into
    locally ordered fragments placed in arbitrary order and direction, so a low Kendall agreement
    with the true order is expected behaviour on long or curved data, not a failure.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        Points sampled along a curve (dense, finite). Points whose largest magnitude is beyond
        2**400 or below 2**-400 are first scaled by a power of two, exactly (the order is invariant
        to scaling X).
    perplexity : float, optional
        Effective number of neighbours of the input probabilities; ``0 < perplexity < n_samples``.
    init : {'pca', 'random'} or array_like of shape (n_samples,) or (n_samples, 1), optional
        Initial embedding: the first principal component (scaled by scikit-learn to standard
        deviation 1e-4), random, or given.
    root : int, optional
        Row index to put at the start of the order (its embedding value made the minimum). By
        default the entry of largest absolute value is made positive.
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness; an int seed drawn from it is passed to scikit-learn as
        ``random_state``. A fixed seed gives a deterministic result.
    **kwargs
        Further keywords of :class:`sklearn.manifold.TSNE` (``max_iter``, ``early_exaggeration``,
        ``learning_rate``, ``angle``, ``metric``, ``method``, ``n_jobs``, ...); ``n_components``,
        ``perplexity``, ``init`` and ``random_state`` are set here and refused. ``max_iter``,
        ``n_iter_without_progress`` and ``n_jobs`` must be ints of at most 2**31 - 1 (``n_jobs`` at most
        the ``workers`` bound, not 0), checked here; their lower bounds and the rest are scikit-learn's.

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The stable argsort of ``embedding``.
        embedding : ndarray of float64, shape (n_samples,)
            The oriented 1-D t-SNE embedding.
        kl_divergence : float
            The final KL divergence (0.0 for ``n_samples <= 2``).
        n_iter : int
            The gradient iterations run (scikit-learn's ``n_iter_``; 0 for ``n_samples <= 2``).
        random_state : int
            The seed passed to scikit-learn.

    Notes
    -----
    For ``n_samples <= 2`` the order is trivial (``[0]``, or ``[0, 1]`` unless ``root=1``) and no
    embedding is computed. Barnes-Hut t-SNE costs ``O(n log n)`` per iteration with ``max_iter``
    (scikit-learn's default 1000) iterations.

    See Also
    --------
    sklearn.manifold.TSNE : the estimator wrapped here.
    umap_seriation : 1-D UMAP, another neighbour-embedding method.

    References
    ----------
    .. [1] L. van der Maaten and G. Hinton, "Visualizing data using t-SNE", Journal of Machine
       Learning Research 9, 2579-2605, 2008.

    Examples
    --------
    Points along a noiseless segment, in random row order:

    >>> from numtk.seriation import make_curve, order_agreement
    >>> from numtk.seriation import tsne_seriation
    >>> X, t = make_curve("line", 200, 3, rng=0)
    >>> res = tsne_seriation(X, perplexity=20, rng=0)
    >>> bool(order_agreement(res.order, t) > 0.9)
    True
    >>> res.embedding.shape
    (200,)
    """
    _check_kwargs(kwargs, ("n_components", "perplexity", "init", "random_state"), "tsne_seriation")
    kwargs = dict(kwargs)
    _check_passed_on(kwargs, ("max_iter", "n_iter_without_progress"))
    perp = check_real(perplexity, "perplexity", low=0.0, low_open=True)
    n = _n_samples(X)
    if isinstance(init, str):
        check_option(init, "init", _TSNE_INITS)
        init_arg = init
    else:
        init_arg = as_array(init, "init")
        if init_arg.ndim == 1:
            init_arg = init_arg[:, None]
        if init_arg.ndim != 2 or init_arg.shape != (n, 1):
            raise ValueError(f"`init` must be 'pca', 'random' or an array of shape ({n},) or ({n}, 1); "
                             f"got shape {np.shape(init)}")
        init_arg = np.asarray(init_arg, dtype=np.float64)
        check_finite(init_arg, "init")
    rng = normalize_rng(rng)
    root = _check_root(root, max(n, 1))
    P = scaled_points(X)[0]  # the embeddings used here are invariant to scaling X
    seed = _seed(rng)
    if n <= 2:
        return _trivial(n, root, kl_divergence=0.0, n_iter=0, random_state=seed)
    if perp >= n:
        raise ValueError(f"`perplexity` must be less than n_samples = {n} (the rows of `X`); got {perp}")
    if not np.any(P != P[0]):
        # every distance 0: no neighbour probabilities, and scikit-learn's t-SNE crashes the interpreter
        raise ValueError(f"`X` must have at least 2 distinct rows for t-SNE; all {n} rows are equal")

    from sklearn.manifold import TSNE

    params = {"learning_rate": "auto"}
    params.update(kwargs)
    tsne = TSNE(n_components=1, perplexity=perp, init=init_arg, random_state=seed, **params)
    Y = tsne.fit_transform(P)
    return _finish(Y[:, 0], root, kl_divergence=float(tsne.kl_divergence_), n_iter=int(tsne.n_iter_),
                   random_state=seed)


# --------------------------------------------------------------------------------------------------
# UMAP (optional dependency)
# --------------------------------------------------------------------------------------------------

@constraints(X="array2d", n_neighbors="int>=2", min_dist="real>=0", root="int>=0", rng="rng")
def umap_seriation(X: ArrayLike, *, n_neighbors: int = 15, min_dist: float = 0.1, root: int | None = None,
                   rng=None, **kwargs: Any) -> Result:
    r"""Order samples by a 1-D UMAP embedding (needs the optional package ``umap-learn``).

    UMAP [1]_ builds a fuzzy k-nearest-neighbour graph of the input and lays it out by stochastic
    gradient descent on a cross-entropy between input and embedding memberships, starting from a
    spectral embedding. With one output dimension, the argsort of the embedding is an order. This
    wraps ``umap.UMAP(n_components=1, init='spectral')``; like t-SNE it preserves neighbourhoods
    more than the global arrangement, so curves may come back as fragments.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        Points sampled along a curve (dense, finite). Points whose largest magnitude is beyond
        2**400 or below 2**-400 are first scaled by a power of two, exactly (the order is invariant
        to scaling X).
    n_neighbors : int, optional
        Neighbours per point of UMAP's fuzzy graph; between 2 and ``n_samples - 1``.
    min_dist : float, optional
        Minimum distance between embedded points (``>= 0``).
    root : int, optional
        Row index to put at the start of the order (its embedding value made the minimum). By
        default the entry of largest absolute value is made positive.
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness; an int seed drawn from it is passed to UMAP as ``random_state``, which
        makes the result deterministic (and UMAP single-threaded).
    **kwargs
        Further keywords of ``umap.UMAP`` (``n_epochs``, ``spread``, ``metric``, ``init``, ...);
        ``n_components``, ``n_neighbors``, ``min_dist`` and ``random_state`` are set here and
        refused. ``n_epochs`` must be an int of at most 2**31 - 1 and ``n_jobs`` at most the
        ``workers`` bound, not 0 (checked here); the rest are umap's.

    Returns
    -------
    res : Result
        With fields

        order : ndarray of int64, shape (n_samples,)
            The stable argsort of ``embedding``.
        embedding : ndarray of float64, shape (n_samples,)
            The oriented 1-D UMAP embedding.
        random_state : int
            The seed passed to UMAP.

    Raises
    ------
    ImportError
        If ``umap-learn`` is not installed (``pip install umap-learn``).

    Notes
    -----
    The first call in a process spends 10-30 s compiling UMAP's numba kernels. For
    ``n_samples <= 2`` the order is trivial (``[0]``, or ``[0, 1]`` unless ``root=1``) and UMAP is
    not called.

    See Also
    --------
    tsne_seriation : 1-D t-SNE.

    References
    ----------
    .. [1] L. McInnes, J. Healy and J. Melville, "UMAP: Uniform manifold approximation and
       projection for dimension reduction", arXiv:1802.03426, 2018.

    Examples
    --------
    >>> from numtk.seriation import make_curve, order_agreement
    >>> from numtk.seriation import umap_seriation
    >>> X, t = make_curve("line", 300, 3, rng=0)
    >>> res = umap_seriation(X, rng=0)  # doctest: +SKIP
    >>> res.embedding.shape  # doctest: +SKIP
    (300,)
    """
    _check_kwargs(kwargs, ("n_components", "n_neighbors", "min_dist", "random_state"), "umap_seriation")
    kwargs = dict(kwargs)
    _check_passed_on(kwargs, ("n_epochs",))
    k = check_int(n_neighbors, "n_neighbors", minimum=2)
    md = check_real(min_dist, "min_dist", low=0.0)
    rng = normalize_rng(rng)
    n = _n_samples(X)
    root = _check_root(root, max(n, 1))
    P = scaled_points(X)[0]  # the embeddings used here are invariant to scaling X
    seed = _seed(rng)
    if n <= 2:
        return _trivial(n, root, random_state=seed)
    check_neighbor_count(k, n)
    from numtk._lib._optional import has_module

    if not has_module("umap"):
        raise ImportError("umap_seriation needs the optional package umap-learn: pip install umap-learn")
    import umap

    params = {"init": "spectral"}
    params.update(kwargs)
    model = umap.UMAP(n_components=1, n_neighbors=k, min_dist=md, random_state=seed, **params)
    Y = np.asarray(model.fit_transform(P), dtype=np.float64)
    return _finish(Y[:, 0], root, random_state=seed)
