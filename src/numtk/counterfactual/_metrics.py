"""Evaluation metrics of (group) counterfactuals: validity, transport cost, pairwise distortion.

The metrics of the paper's protocol (spec ``counterfactual.md`` sections 5 and 9): the fraction of
counterfactuals that reach the target class with the required confidence, the mean displacement
(reported as "Wasserstein" in the paper) and the empirical bi-Lipschitz ratios of the map on pairs
of group members.

``distortion_ratios`` on all pairs is a blocked computation: squared distances come from BLAS Gram
products of the centred data in 1024 x 1024 blocks, and every pair whose Gram estimate could have
lost accuracy to cancellation is recomputed exactly from coordinate differences (see its Notes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import as_array, check_int, check_option, check_real, check_size
from numtk.counterfactual._common import as_points, coefficients, row_norms
from numtk.counterfactual._common import threshold as _threshold

__all__ = ["validity", "transport_cost", "distortion_ratios"]

# Rows per block of the all-pairs Gram computation (blocks of _BLOCK x _BLOCK pairs).
_BLOCK = 1024
# A pair's Gram estimate D = |a|^2 + |b|^2 - 2 a.b (of centred rows a, b) carries an absolute error
# of order d * u * (|a|^2 + |b|^2), u the unit round-off. Pairs with D < _RECOMPUTE * (|a|^2 + |b|^2)
# are recomputed exactly from differences, so the kept estimates have relative error below
# (d + 2) * u / _RECOMPUTE (5.7e-13 at d = 50; about 1e-15 in practice).
_RECOMPUTE = 1e-2
# Default eps: this fraction of the median pairwise distance.
_EPS_REL = 1e-9
# The median is exact up to this many pairs, else estimated from _MEDIAN_SAMPLE pairs drawn with a
# fixed seed (so the result does not depend on ``rng``).
_MEDIAN_EXACT_MAX = 1 << 16
_MEDIAN_SAMPLE = 1 << 15
_MEDIAN_SEED = 0x5EED
# Pairs per chunk of the exact (difference-based) computation.
_CHUNK = 8192


# --------------------------------------------------------------------------------------------
# validity and transport cost
# --------------------------------------------------------------------------------------------

def _sign(target: Any) -> float:
    if isinstance(target, (bool, np.bool_)):
        return 1.0 if target else -1.0
    if isinstance(target, (int, np.integer)) and int(target) in (0, 1):
        return 1.0 if int(target) == 1 else -1.0
    raise ValueError(f"`target` must be 0 or 1 (the class whose side of w @ x + b is wanted); "
                     f"got {target!r}")


@constraints(X_cf="array2d", w="array1d", b="real", threshold="prob_open", target="option", margin="real",
             tol="real>=0")
def validity(X_cf: Any, w: Any, b: Any, threshold: float = 0.8, *, target: int = 1,
             margin: float | None = None, tol: float = 0.0) -> float:
    """Fraction of counterfactuals classified as the target class with the required confidence.

    A row ``x`` is valid when its score ``s(x) = w @ x + b`` (``-(w @ x + b)`` for ``target=0``)
    reaches ``tau - tol``, where ``tau = log(threshold / (1 - threshold))`` is the logit of the
    probability ``threshold`` (the ``confidence`` of :class:`GroupCounterfactualMap`), unless
    ``margin`` gives ``tau`` directly. The score is evaluated in float64, not through
    ``predict_proba``.

    Parameters
    ----------
    X_cf : array_like, shape (n, d)
        Counterfactual points, one per row (finite).
    w : array_like, shape (d,) or (1, d)
        Coefficients of the linear score (a scikit-learn binary ``coef_`` is accepted as it is).
    b : float
        Intercept.
    threshold : float, default 0.8
        Required probability of the target class, in (0, 1); ignored when ``margin`` is given.
    target : {1, 0}, default 1
        1: valid means ``w @ x + b >= tau``; 0: valid means ``-(w @ x + b) >= tau``.
    margin : float, optional
        The score threshold ``tau`` itself (for margin classifiers such as LinearSVC).
    tol : float, default 0.0
        Non-negative slack: rows with score ``>= tau - tol`` count as valid.

    Returns
    -------
    validity : float
        The fraction of valid rows, in [0, 1]; ``nan`` when ``X_cf`` has no rows.

    See Also
    --------
    transport_cost, distortion_ratios

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import validity
    >>> X_cf = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    >>> w, b = np.array([1.0, 0.0]), 0.0
    >>> validity(X_cf, w, b)                 # tau = log(0.8 / 0.2) = 1.386...
    0.3333333333333333
    >>> validity(X_cf, w, b, margin=1.0)     # tau = 1
    0.6666666666666666
    >>> validity(X_cf, w, b, 0.5, target=0)  # -(w @ x + b) >= 0
    0.3333333333333333
    """
    tau = _threshold(threshold, margin, name="threshold")
    tol = check_real(tol, "tol", low=0.0)
    sign = _sign(target)
    X_cf = as_points(X_cf, "X_cf", min_rows=0)
    w, b = coefficients(w, b, X_cf.shape[1], data="X_cf")
    if X_cf.shape[0] == 0:
        return float("nan")
    with np.errstate(over="ignore", invalid="ignore"):
        score = sign * (X_cf @ w + b)
        level = tau - tol
        valid = score >= level
    if not (np.all(np.isfinite(score)) and np.isfinite(level)):
        valid = _valid_scaled(X_cf, sign * w, sign * b, tau, tol)
    return float(np.count_nonzero(valid) / X_cf.shape[0])


def _valid_scaled(X: np.ndarray, w: np.ndarray, b: float, tau: float, tol: float) -> np.ndarray:
    """``w @ x + b >= tau - tol`` per row when the score overflows: everything divided by a power of two
    (exact) that brings the terms below the float64 maximum."""
    with np.errstate(over="ignore"):
        terms = np.abs(X).max(axis=1, initial=0.0) * float(np.abs(w).sum()) + abs(b) + abs(tau) + tol
    _, e = np.frexp(np.where(np.isfinite(terms) & (terms > 0), terms, 1.0))
    e = np.where(np.isfinite(terms), e, 1100)  # the product itself overflowed
    e = np.maximum(e, 0)
    out = np.empty(X.shape[0], dtype=bool)
    for ek in np.unique(e):
        rows = e == ek
        # scale in two steps: 2**-1100 underflows as one factor, but not as two
        half = int(ek) // 2
        f1, f2 = np.ldexp(1.0, -half), np.ldexp(1.0, -(int(ek) - half))
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            Xs = (X[rows] * f1) * f2
            out[rows] = Xs @ w + (b * f1) * f2 >= (tau * f1) * f2 - (tol * f1) * f2
    return out


def _same_shape(X: Any, X_cf: Any) -> tuple[np.ndarray, np.ndarray]:
    X = as_points(X, "X", min_rows=0)
    X_cf = as_points(X_cf, "X_cf", min_rows=0)
    if X.shape != X_cf.shape:
        raise ValueError(f"`X` and `X_cf` must have the same shape (row i of `X_cf` is the "
                         f"counterfactual of row i of `X`); got {X.shape} and {X_cf.shape}")
    return X, X_cf


@constraints(X="array2d", X_cf="array2d", squared="bool", reduce="option")
def transport_cost(X: Any, X_cf: Any, *, squared: bool = False, reduce: str = "mean") -> float:
    """Displacement between points and their counterfactuals, ``||x'_i - x_i||_2``, reduced.

    The default (``squared=False, reduce="mean"``) is the mean Euclidean displacement that the paper
    reports as its "Wasserstein" cost; ``squared=True, reduce="sum"`` is the optimised objective
    ``sum_i ||T(x_i) - x_i||^2``, the ``cost_`` of an unweighted :class:`GroupCounterfactualMap`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Original points (finite).
    X_cf : array_like, shape (n, d)
        Their counterfactuals, row by row (finite).
    squared : bool, default False
        Use squared Euclidean displacements.
    reduce : {"mean", "sum"}, default "mean"
        How the ``n`` per-row displacements are combined.

    Returns
    -------
    cost : float
        The mean or sum of the (squared) displacements; for no rows ``nan`` (mean) or ``0.0``
        (sum).

    See Also
    --------
    validity, distortion_ratios

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import transport_cost
    >>> X = np.zeros((2, 2))
    >>> X_cf = np.array([[3.0, 4.0], [0.0, 1.0]])
    >>> transport_cost(X, X_cf)                             # (5 + 1) / 2
    3.0
    >>> transport_cost(X, X_cf, squared=True, reduce="sum")  # 25 + 1
    26.0
    """
    if not isinstance(squared, (bool, np.bool_)):
        raise TypeError(f"`squared` must be a bool; got {type(squared).__name__}")
    check_option(reduce, "reduce", ("mean", "sum"))
    X, X_cf = _same_shape(X, X_cf)
    if X.shape[0] == 0:
        return float("nan") if reduce == "mean" else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        diff = X_cf - X
        if not np.all(np.isfinite(diff)):
            raise ValueError("`X_cf` - `X` overflows float64 (entries near the float64 maximum of opposite "
                             "signs); rescale both")
        norms = row_norms(diff)  # no overflow of the squares
        per_row = norms * norms if squared else norms
        top = float(np.max(per_row))
        if top > 0 and np.isfinite(top):  # reduce relative to the largest term: no overflow of the sum
            scaled = per_row / top
            total = (float(np.mean(scaled)) if reduce == "mean" else float(np.sum(scaled))) * top
        else:
            total = top if not np.isfinite(top) else 0.0
    if not np.isfinite(total):
        raise ValueError(f"the {'squared ' if squared else ''}transport cost of `X_cf` and `X` overflows "
                         "float64; rescale both")
    return total


# --------------------------------------------------------------------------------------------
# distortion ratios
# --------------------------------------------------------------------------------------------

def _pair_sqdist(A: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Exact squared distances ``||A[i_k] - A[j_k]||^2`` from coordinate differences (chunked)."""
    out = np.empty(len(i), dtype=np.float64)
    for s in range(0, len(i), _CHUNK):
        e = min(s + _CHUNK, len(i))
        diff = A[i[s:e]] - A[j[s:e]]
        out[s:e] = np.einsum("ij,ij->i", diff, diff)
    return out


def _unrank_pairs(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Map linear indices ``k`` of the row-major strict upper triangle of an n x n matrix to (i, j)."""
    k = np.asarray(k, dtype=np.int64)

    def offset(i):  # first linear index of row i
        return i * (2 * n - i - 1) // 2

    m = 2.0 * n - 1.0
    i = np.floor((m - np.sqrt(np.maximum(m * m - 8.0 * k, 0.0))) / 2.0).astype(np.int64)
    i = np.clip(i, 0, n - 2)
    for _ in range(3):  # repair float rounding (at most one step off)
        i = np.where(offset(i) > k, i - 1, i)
        i = np.where(offset(i + 1) <= k, i + 1, i)
    j = k - offset(i) + i + 1
    return i, j


def _as_pairs(pairs: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    P = as_array(pairs, "pairs", ndim=2, kinds="iu")
    if P.shape[1] != 2:
        raise ValueError(f"`pairs` must have shape (n_pairs, 2); got {P.shape}")
    if P.size and (P.min() < 0 or P.max() >= n):
        raise ValueError(f"`pairs` holds a row index outside [0, {n}) (the rows of `X`)")
    return P[:, 0].astype(np.intp, copy=False), P[:, 1].astype(np.intp, copy=False)


def _median_all_pairs(X: np.ndarray) -> float:
    """Median pairwise distance of the rows of X: exact for small n, else from a fixed sample."""
    n = X.shape[0]
    n_all = n * (n - 1) // 2
    if n_all <= _MEDIAN_EXACT_MAX:
        i, j = np.triu_indices(n, k=1)
    else:
        k = np.sort(np.random.default_rng(_MEDIAN_SEED).choice(n_all, _MEDIAN_SAMPLE, replace=False))
        i, j = _unrank_pairs(k, n)
    return float(np.sqrt(np.median(_pair_sqdist(X, i, j))))


def _ratios_of_pairs(X, Y, i, j, eps2):
    """(min r^2, max r^2, n_kept, n_excluded) over the given pairs, exactly."""
    dx = _pair_sqdist(X, i, j)
    dy = _pair_sqdist(Y, i, j)
    keep = dx > eps2
    n_keep = int(np.count_nonzero(keep))
    if n_keep == 0:
        return np.inf, -np.inf, 0, len(i)
    r2 = dy[keep] / dx[keep]
    return float(r2.min()), float(r2.max()), n_keep, len(i) - n_keep


def _ratios_all_pairs(X, Y, eps2):
    """(min r^2, max r^2, n_kept, n_excluded) over all pairs i < j: blocked Gram + exact repair."""
    n = X.shape[0]
    Xc = X - X.mean(axis=0)
    Yc = Y - Y.mean(axis=0)
    nx = np.einsum("ij,ij->i", Xc, Xc)
    ny = np.einsum("ij,ij->i", Yc, Yc)
    lo, hi, n_keep, n_excl = np.inf, -np.inf, 0, 0
    upper = None
    for a in range(0, n, _BLOCK):
        a2 = min(a + _BLOCK, n)
        for c in range(a, n, _BLOCK):
            c2 = min(c + _BLOCK, n)
            # squared distances of the block from the Gram products (in place)
            dx = Xc[a:a2] @ Xc[c:c2].T
            sx = nx[a:a2, None] + nx[None, c:c2]
            dx *= -2.0
            dx += sx
            dy = Yc[a:a2] @ Yc[c:c2].T
            sy = ny[a:a2, None] + ny[None, c:c2]
            dy *= -2.0
            dy += sy
            sx *= _RECOMPUTE
            sy *= _RECOMPUTE
            redo = dx < sx
            redo |= dy < sy
            if a == c:  # diagonal block: only pairs i < j
                if upper is None or upper.shape != dx.shape:
                    upper = np.triu(np.ones(dx.shape, dtype=bool), k=1)
                consider = upper
            else:
                consider = None
            good = ~redo
            if consider is not None:
                good &= consider
                redo &= consider
            kept = good & (dx > eps2)
            n_good = int(np.count_nonzero(good))
            nk = int(np.count_nonzero(kept))
            n_keep += nk
            n_excl += n_good - nk
            if nk:
                with np.errstate(divide="ignore", invalid="ignore"):
                    r2 = np.divide(dy, dx, out=dy)
                lo = min(lo, float(np.min(r2, where=kept, initial=np.inf)))
                hi = max(hi, float(np.max(r2, where=kept, initial=-np.inf)))
            if redo.any():
                ii, jj = np.nonzero(redo)
                l2, h2, k2, e2 = _ratios_of_pairs(X, Y, ii + a, jj + c, eps2)
                lo, hi = min(lo, l2), max(hi, h2)
                n_keep += k2
                n_excl += e2
    return lo, hi, n_keep, n_excl


# Above this magnitude of an entry, squared distances could overflow (d * (2 * 2**480)**2 < 2**1000
# for d < 2**36): distortion_ratios then uses overflow-free norms of the differences.
_SAFE_MAX = 2.0**480


def _absmax(A: np.ndarray) -> float:
    return float(np.max(np.abs(A))) if A.size else 0.0


def _pair_dist_safe(A: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """``||A[i_k] - A[j_k]||`` without overflow: halved differences (exact) and a scaled norm."""
    out = np.empty(len(i), dtype=np.float64)
    with np.errstate(over="ignore"):
        for s in range(0, len(i), _CHUNK):
            e = min(s + _CHUNK, len(i))
            diff = A[i[s:e]] * 0.5 - A[j[s:e]] * 0.5
            out[s:e] = row_norms(diff) * 2.0
    return out


def _distortion_safe(X, Y, pairs, eps):
    """distortion_ratios from the distances themselves (no squares), for data near the float64 limit."""
    n = X.shape[0]
    n_all = n * (n - 1) // 2

    def chunks():
        if pairs is not None:
            yield pairs
            return
        for s in range(0, n_all, _CHUNK):
            yield _unrank_pairs(np.arange(s, min(s + _CHUNK, n_all)), n)

    if eps is None:
        if pairs is not None:
            i, j = pairs
        elif n_all <= _MEDIAN_EXACT_MAX:
            i, j = np.triu_indices(n, k=1)
        else:
            k = np.sort(np.random.default_rng(_MEDIAN_SEED).choice(n_all, _MEDIAN_SAMPLE, replace=False))
            i, j = _unrank_pairs(k, n)
        eps = _EPS_REL * float(np.median(_pair_dist_safe(X, i, j)))
    lo, hi, n_keep, n_excl = np.inf, -np.inf, 0, 0
    for i, j in chunks():
        dx = _pair_dist_safe(X, i, j)
        dy = _pair_dist_safe(Y, i, j)
        keep = dx > eps
        nk = int(np.count_nonzero(keep))
        n_keep += nk
        n_excl += len(i) - nk
        if nk:
            with np.errstate(over="ignore", under="ignore"):
                r = dy[keep] / dx[keep]
            lo, hi = min(lo, float(r.min())), max(hi, float(r.max()))
    if n_keep == 0:
        nan = float("nan")
        return Result(min_ratio=nan, max_ratio=nan, distortion=nan, n_pairs=0, n_excluded=int(n_excl))
    return _ratio_result(lo, hi, n_keep, n_excl)


@constraints(X="array2d", X_cf="array2d", pairs="option", max_pairs="cap", rng="rng", eps="real>=0")
def distortion_ratios(X: Any, X_cf: Any, *, pairs: Any = None, max_pairs: int | None = None,
                      rng: Any = None, eps: float | None = None) -> Result:
    """Empirical bi-Lipschitz ratios ``||x'_i - x'_j|| / ||x_i - x_j||`` of a counterfactual map.

    For pairs ``(i, j)`` of rows with ``||x_i - x_j|| > eps``, the ratio of the distance between
    the counterfactuals to the distance between the originals. An affine map ``T(x) = A x + c``
    has every ratio in ``[sigma_min(A), sigma_max(A)]``; the distortion
    ``1 - min(min_ratio, 1 / max_ratio)`` is 0 for an isometry (a translation) and tends to 1 as
    the map collapses or stretches pairs (the official code's ``distortion_metric``).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Original points (finite).
    X_cf : array_like, shape (n, d)
        Their counterfactuals, row by row (finite).
    pairs : array_like of int, shape (n_pairs, 2), optional
        Explicit pairs of row positions (int32 or int64, any order, values in ``[0, n)``). Default:
        all ``n (n - 1) / 2`` pairs ``i < j``.
    max_pairs : int, optional
        If the pairs (all, or the given ones) outnumber ``max_pairs``, use ``max_pairs`` of them
        drawn uniformly without replacement with ``rng``.
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness for ``max_pairs`` (unused otherwise). ``None`` draws fresh OS
        entropy, an int seeds a new Generator, a Generator is used as it is.
    eps : float, optional
        Pairs of originals at distance ``<= eps`` are excluded (duplicates have no ratio).
        Default: ``1e-9`` times the median distance of the pairs (see Notes).

    Returns
    -------
    res : Result
        With fields

        min_ratio, max_ratio : float
            The smallest and largest ratio over the pairs kept; ``nan`` when no pair is kept
            (fewer than two rows, no pairs given, or every pair excluded).
        distortion : float
            ``1 - min(min_ratio, 1 / max_ratio)``, in [0, 1]; 0 for an isometry; ``nan`` when no
            pair is kept.
        n_pairs : int
            Number of pairs the ratios are taken over.
        n_excluded : int
            Number of pairs left out because ``||x_i - x_j|| <= eps``.

    See Also
    --------
    transport_cost, validity

    Notes
    -----
    Default ``eps``: 1e-9 times the median of ``||x_i - x_j||`` over the pairs evaluated. With
    all pairs it is exact up to 65536 pairs (n <= 362) and otherwise estimated from 32768 pairs
    drawn with a fixed seed, so the result never depends on ``rng`` unless ``max_pairs`` samples.
    With ``eps = 0`` only exact duplicates are excluded.

    All pairs cost O(n^2 d): squared distances come from BLAS Gram products
    ``|a|^2 + |b|^2 - 2 a.b`` of the column-centred data in blocks of 1024 x 1024 pairs (O(1)
    extra memory in n). This formula cancels for pairs much closer than the points' norms, so every
    pair whose Gram estimate (for ``X`` or for ``X_cf``) is below 1e-2 times the sum of the two
    centred squared norms -- in particular every pair closer than 1e-4 times the median distance,
    which the spec asks for, and every near-duplicate -- is recomputed exactly from coordinate
    differences; the kept Gram estimates have relative error below ``(d + 2) * 2**-53 / 1e-2``
    (5.7e-13 at d = 50). Explicit and sampled pairs are always computed from differences, in
    O(n_pairs d).

    When an entry of ``X`` or ``X_cf`` exceeds ``2**480`` (~3e144), where squared distances could
    overflow float64, every distance is instead the overflow-free norm of the (halved) coordinate
    differences, and ratios are taken of distances, not of their squares. A ratio that itself
    overflows float64 raises a ValueError; a NaN ratio is never reported.

    For a map fitted by :class:`GroupCounterfactualMap` the exact bounds over all of R^d are its
    ``distortion_bounds_`` ``(sigma_min(A), sigma_max(A))``; these ratios are the empirical
    values on the given points.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import distortion_ratios
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> A = np.diag([2.0, 1.0, 0.5])             # singular values 2 and 0.5
    >>> res = distortion_ratios(X, X @ A.T + 1.0)
    >>> bool(0.5 <= res.min_ratio <= res.max_ratio <= 2.0), res.n_pairs, res.n_excluded
    (True, 19900, 0)
    >>> bool(np.isclose(res.distortion, 1 - min(res.min_ratio, 1 / res.max_ratio)))
    True

    A translation is an isometry; a subsample of pairs gives bounds inside the full ones:

    >>> distortion_ratios(X, X + 3.0).distortion < 1e-12
    True
    >>> sub = distortion_ratios(X, X @ A.T, max_pairs=500, rng=1)
    >>> sub.n_pairs, bool(res.min_ratio <= sub.min_ratio and sub.max_ratio <= res.max_ratio)
    (500, True)
    """
    X, Y = _same_shape(X, X_cf)
    if max_pairs is not None:
        max_pairs = check_int(max_pairs, "max_pairs", minimum=1)
    if eps is not None:
        eps = check_real(eps, "eps", low=0.0)
    gen = None if rng is None else normalize_rng(rng)  # validated even when not needed
    n = X.shape[0]
    # Entries above 2**480 could overflow squared distances: then every pair's distance is taken
    # from its coordinate differences with an overflow-free norm (see Notes).
    safe = max(_absmax(X), _absmax(Y)) > _SAFE_MAX

    if pairs is not None:
        i, j = _as_pairs(pairs, n)
        if max_pairs is not None and len(i) > max_pairs:
            pick = np.sort((gen or normalize_rng(None)).choice(len(i), max_pairs, replace=False))
            i, j = i[pick], j[pick]
        explicit = True
    else:
        n_all = n * (n - 1) // 2
        explicit = max_pairs is not None and n_all > max_pairs
        if explicit:
            check_size(max_pairs, 40, "max_pairs")  # the sampled pairs' indices and distances
            k = np.sort((gen or normalize_rng(None)).choice(n_all, max_pairs, replace=False))
            i, j = _unrank_pairs(k, n)

    if (explicit and len(i) == 0) or (not explicit and n < 2):
        nan = float("nan")
        return Result(min_ratio=nan, max_ratio=nan, distortion=nan, n_pairs=0, n_excluded=0)

    if safe:
        return _distortion_safe(X, Y, (i, j) if explicit else None, eps)

    if eps is None:
        med = float(np.sqrt(np.median(_pair_sqdist(X, i, j)))) if explicit else _median_all_pairs(X)
        eps = _EPS_REL * med
    eps2 = eps * eps

    if explicit:
        lo, hi, n_keep, n_excl = _ratios_of_pairs(X, Y, i, j, eps2)
    else:
        lo, hi, n_keep, n_excl = _ratios_all_pairs(X, Y, eps2)

    if n_keep == 0:
        nan = float("nan")
        return Result(min_ratio=nan, max_ratio=nan, distortion=nan, n_pairs=0, n_excluded=int(n_excl))
    min_ratio = float(np.sqrt(lo))
    max_ratio = float(np.sqrt(hi))
    return _ratio_result(min_ratio, max_ratio, n_keep, n_excl)


def _ratio_result(min_ratio, max_ratio, n_keep, n_excl):
    if not (np.isfinite(min_ratio) and np.isfinite(max_ratio)):
        raise ValueError("the distance ratios of `X_cf` to `X` overflow float64 (or are not defined); "
                         "rescale `X` or `X_cf`")
    inv_max = 1.0 / max_ratio if max_ratio > 0 else np.inf
    distortion = float(1.0 - min(min_ratio, inv_max))
    return Result(min_ratio=min_ratio, max_ratio=max_ratio, distortion=max(distortion, 0.0),
                  n_pairs=int(n_keep), n_excluded=int(n_excl))
