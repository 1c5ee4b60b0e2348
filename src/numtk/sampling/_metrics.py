"""Sample-quality metrics of the score-based sampler: log Z error, exact W2, Sinkhorn divergence, MMD².

The Sinkhorn and MMD kernels are compiled (``native/include/numtk/sampling/{sinkhorn,mmd}.hpp``); this
module validates the arguments, picks ε and the bandwidth, and assembles the statistics.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist, pdist

from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_bool, check_finite, check_int, check_option, check_real
from numtk._lib._warnings import NumtkWarning
from numtk._lib._workers import n_threads

__all__ = ["log_Z_error", "w2", "sinkhorn_distance", "mmd"]

#: Largest number of points per side that :func:`w2` solves exactly.
W2_MAX_POINTS = 5000
#: Medians (relative ε, bandwidth heuristic) use at most this many points per cloud; above it a fixed,
#: seeded random subset of this size is used, so the result is deterministic.
MEDIAN_MAX_POINTS = 2048
_MEDIAN_SEED = 20261130
#: The cross term stores its cost matrix (computed once by scipy's cdist) when there are at least this many
#: columns and at most this many entries (32 MB): recomputing d-dimensional costs every iteration then
#: costs more than reading them (about 2x at d = 32). Otherwise costs are computed on the fly.
_DENSE_MIN_DIM = 8
_DENSE_MAX_ENTRIES = 2**22
_COSTS = ("sqeuclidean", "euclidean")
_KERNELS = ("rbf", "imq")
# Grains of the threaded kernels (n_threads' cap: a second thread only from 2 grains of work), measured with
# workers=1 against 2 interleaved on 2 shared cores (bench/compare.py --kernels none --threads). Sinkhorn
# starts threads at every O(n m) pass: at 64 x 64 and 128 x 128 points two threads ran at 0.2-0.6x, at
# 256 x 256 (65536 pairs a pass, about 1.5 ms) at 0.9-1.3x. MMD's kernel sums: 0.03-0.4x at 64 points a side
# (d = 4), 0.5-0.9x at 256, 1.0-1.1x from 1024 (2 * 1024**2 * 4 pair-dimensions).
SINKHORN_GRAIN = 2**15  # pairs (rows x columns) per pass
MMD_GRAIN = 2**22  # pairs x dimensions over the three kernel sums


def _cloud(X: Any, name: str) -> np.ndarray:
    """A finite 2-D float array with at least one row and one column (float32 kept, others -> float64)."""
    arr = as_array(X, name, ndim=2)
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` must have at least one row (point); got shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(f"`{name}` must have at least one column (feature); got shape {arr.shape}")
    if arr.dtype != np.float32:
        arr = arr.astype(np.float64, copy=False)
    check_finite(arr, name)
    return arr


def _pair(X: Any, Y: Any) -> tuple[np.ndarray, np.ndarray]:
    X = _cloud(X, "X")
    Y = _cloud(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"`Y` must have the same number of columns as `X`; got {Y.shape[1]} and {X.shape[1]}")
    # squared distances between the points must be representable: |x - y|^2 <= d * span^2
    lo = np.minimum(X.min(axis=0), Y.min(axis=0)).astype(np.float64)
    hi = np.maximum(X.max(axis=0), Y.max(axis=0)).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        span = float(np.max(hi - lo))
        ok = np.isfinite(span) and span * span * X.shape[1] < 1e300
    if not ok:
        raise ValueError("`X` and `Y` spread so far that their squared distances overflow in double precision; "
                         "rescale the samples")
    return X, Y


def _weights(w: Any, n: int, name: str) -> np.ndarray:
    if w is None:
        return np.full(n, 1.0 / n)
    arr = as_array(w, name, ndim=1).astype(np.float64, copy=False)
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` must hold one weight per point ({n}); got {arr.shape[0]}")
    check_finite(arr, name)
    if (arr < 0).any():
        raise ValueError(f"`{name}` must be non-negative")
    total = arr.sum()
    if not total > 0:
        raise ValueError(f"`{name}` must have a positive sum")
    return arr / total


def _subset(Z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if Z.shape[0] <= MEDIAN_MAX_POINTS:
        return Z
    return Z[np.sort(rng.choice(Z.shape[0], MEDIAN_MAX_POINTS, replace=False))]


def _median_cost(X: np.ndarray, Y: np.ndarray, cost: str) -> float:
    rng = np.random.default_rng(_MEDIAN_SEED)
    C = cdist(_subset(X, rng).astype(np.float64), _subset(Y, rng).astype(np.float64), metric=cost)
    med = float(np.median(C))
    return med if med > 0 else float(C.mean())


@constraints(estimate="real", reference="real")
def log_Z_error(estimate: Any, reference: Any) -> float:
    """Absolute error of a log-normalising-constant estimate.

    Parameters
    ----------
    estimate : float or object with a ``value`` attribute
        The estimate of ``log Z`` (for instance a :class:`numtk._lib.Result` whose ``value`` is it).
        Non-finite estimates give a non-finite error.
    reference : float
        The reference ``log Z`` (finite).

    Returns
    -------
    float
        ``|estimate - reference|``.

    Examples
    --------
    >>> from numtk.sampling import log_Z_error
    >>> log_Z_error(1.25, 1.0)
    0.25
    """
    value = getattr(estimate, "value", estimate)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"`estimate` must be a real number or have a real `value`; got {type(value).__name__}")
    ref = check_real(reference, "reference")
    return float(abs(float(value) - ref))


@constraints(X="array2d", Y="array2d")
def w2(X: Any, Y: Any) -> float:
    """Exact 2-Wasserstein distance between two equal-size uniform empirical measures.

    Solves the assignment problem on the squared Euclidean cost with
    :func:`scipy.optimize.linear_sum_assignment` (O(n³) time, O(n²) memory).

    Parameters
    ----------
    X, Y : array_like, shape (n, d)
        The two samples, with the same number of points ``1 <= n <= 5000`` and columns; finite.

    Returns
    -------
    float
        ``W2 = (min_σ (1/n) Σ_i |x_i − y_σ(i)|²)^(1/2)``. Square it for the quantity that
        :func:`sinkhorn_distance` approaches as ε → 0.

    Raises
    ------
    ValueError
        Bad shapes, non-finite values, different numbers of points, or ``n > 5000`` (use
        :func:`sinkhorn_distance` for larger samples).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import w2
    >>> X = np.array([[0.0], [1.0]])
    >>> Y = np.array([[3.0], [1.5]])
    >>> round(w2(X, Y), 12)  # 0 -> 1.5 and 1 -> 3: sqrt((2.25 + 4) / 2)
    1.767766952966
    """
    X, Y = _pair(X, Y)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"`X` and `Y` must have the same number of points for the exact assignment; got "
                         f"{X.shape[0]} and {Y.shape[0]} (use sinkhorn_distance for unequal sizes)")
    if X.shape[0] > W2_MAX_POINTS:
        raise ValueError(f"w2 solves the exact assignment only for n <= {W2_MAX_POINTS} points; got "
                         f"{X.shape[0]}: use sinkhorn_distance for larger samples")
    C = cdist(X.astype(np.float64), Y.astype(np.float64), metric="sqeuclidean")
    rows, cols = linear_sum_assignment(C)
    return float(np.sqrt(C[rows, cols].mean()))


def _solve(X, Y, a, b, eps, cost, max_iter, tol, threads):
    """OT_eps between (X, a) and (Y, b); Y=None: the symmetric problem OT_eps((X, a), (X, a))."""
    from numtk.sampling import _sampling_ext as ext

    kind = ext.SQEUCLIDEAN if cost == "sqeuclidean" else ext.EUCLIDEAN
    threads = n_threads(threads, work=X.shape[0] * (X if Y is None else Y).shape[0], grain=SINKHORN_GRAIN)
    if Y is None:
        res = ext.sinkhorn_symmetric(X, a, eps, kind, max_iter, tol, threads)
    elif X.shape[1] >= _DENSE_MIN_DIM and X.shape[0] * Y.shape[0] <= _DENSE_MAX_ENTRIES:
        C = cdist(X.astype(np.float64), Y.astype(np.float64), metric=cost)
        res = ext.sinkhorn_matrix(C, a, b, eps, max_iter, tol, threads)
    else:
        res = ext.sinkhorn_points(X, Y, a, b, eps, kind, max_iter, tol, threads)
    if not res["converged"]:
        warnings.warn(f"Sinkhorn did not reach tol={tol:g} in max_iter={max_iter} iterations (marginal error "
                      f"{res['marginal_error']:.3g}); raise max_iter or epsilon", NumtkWarning, stacklevel=3)
    return res


@constraints(X="array2d", Y="array2d", epsilon="real>0", relative_epsilon="bool", cost="option",
             debiased="bool", a="array1d", b="array1d", max_iter="count", tol="real>=0", workers="workers")
def sinkhorn_distance(X: Any, Y: Any, *, epsilon: float = 0.05, relative_epsilon: bool = True,
                      cost: str = "sqeuclidean", debiased: bool = True, a: Any = None, b: Any = None,
                      max_iter: int = 1000, tol: float = 1e-9, workers: int = 1) -> float:
    r"""Entropic optimal transport between two samples: the Sinkhorn divergence or the Sinkhorn cost.

    With weights :math:`a, b` (uniform by default), cost :math:`C_{ij} = c(x_i, y_j)` and
    :math:`\varepsilon > 0`, the entropic problem is

    .. math:: \mathrm{OT}_\varepsilon(a, b) = \min_{P \in \Pi(a, b)} \langle P, C\rangle
              + \varepsilon\,\mathrm{KL}(P \,\|\, a \otimes b),

    solved by log-domain Sinkhorn iterations (O(nm) per iteration, costs computed on the fly from the
    points in low dimension; for d >= 8 and n·m <= 2^22 the cross term's cost matrix is stored, which is
    faster there; the median of the relative ε looks at up to 2048 x 2048 costs). The optimal plan is
    :math:`P_{ij} = a_i b_j e^{(f_i + g_j - C_{ij})/\varepsilon}` and, at convergence,
    :math:`\mathrm{OT}_\varepsilon = \langle a, f\rangle + \langle b, g\rangle`.

    * ``debiased=True`` (default) returns the Sinkhorn divergence of Feydy et al. (2019),
      :math:`S_\varepsilon = \mathrm{OT}_\varepsilon(X, Y) - \tfrac12\mathrm{OT}_\varepsilon(X, X)
      - \tfrac12\mathrm{OT}_\varepsilon(Y, Y)`, with :math:`\mathrm{OT}_\varepsilon` the **entropic
      objective** above (evaluated as the dual value :math:`\langle a, f\rangle + \langle b, g\rangle`).
      The self-terms use the averaged symmetric iteration of [2]_ (a few dozen iterations); the cross
      term the alternating updates. It is 0 for ``X = Y`` (identical weighted samples return exactly 0),
      non-negative for both
      costs offered (their Gibbs kernels are positive definite) and tends to the unregularised OT cost
      (``w2(X, Y)**2`` for ``cost='sqeuclidean'``) as ε → 0. Negative values, which only arise from the
      stopping tolerance, are returned as 0.
    * ``debiased=False`` returns the **transport cost** :math:`\langle P_\varepsilon, C\rangle` of the
      entropic plan (what POT's ``ot.sinkhorn2`` returns; biased: not 0 for ``X = Y``).

    Parameters
    ----------
    X : array_like, shape (n, d)
        First sample (finite; float32 or float64, computed in float64).
    Y : array_like, shape (m, d)
        Second sample, same number of columns.
    epsilon : float, default 0.05
        Regularisation, > 0. With ``relative_epsilon=True`` the ε used is ``epsilon`` times the median of
        the costs between ``X`` and ``Y`` (the same ε in all three problems of the divergence).
    relative_epsilon : bool, default True
        Scale ``epsilon`` by the median cost (samples above 2048 points use a fixed seeded subset of 2048
        for the median; if the median is 0 the mean cost is used, and the result is 0 if all costs are 0).
    cost : {'sqeuclidean', 'euclidean'}, default 'sqeuclidean'
        :math:`|x - y|^2` or :math:`|x - y|`.
    debiased : bool, default True
        Sinkhorn divergence (True) or the transport cost of the entropic plan (False), see above.
    a, b : array_like, optional
        Non-negative weights of the points of ``X`` and ``Y`` (normalised to sum 1; points of weight 0
        are dropped). Uniform by default.
    max_iter : int, default 1000
        Maximum number of Sinkhorn iterations (each one updates f, then g).
    tol : float, default 1e-9
        Stop when the L1 violation of the first marginal, :math:`\sum_i |a_i - \sum_j P_{ij}|`, is
        below ``tol`` (the second marginal is matched exactly by the last update); ``tol=0`` runs
        ``max_iter`` iterations.
    workers : int, default 1
        Native threads (``-1``: all cores). Results do not depend on it.

    Returns
    -------
    float
        The divergence (``debiased=True``) or the transport cost (``debiased=False``), in cost units.

    Warns
    -----
    NumtkWarning
        When an iteration stops at ``max_iter`` above ``tol``.

    Notes
    -----
    **sde_sampler's number.** ``cost='euclidean', epsilon=1e-3, relative_epsilon=False, max_iter=100,
    debiased=False`` reproduces the Sinkhorn metric of sde_sampler (Berner, Richter, Ullrich;
    ``sde_sampler/eval/sinkhorn.py``, MIT): the same log-domain updates from the same start (f then g,
    from g = 0), the unsquared Euclidean cost, 100 iterations, and ⟨P, C⟩ as the result. Their loop also
    stops early when both potentials move by less than 1e-5; at ε = 1e-3 that rarely happens within
    100 iterations (it did not on the standard-normal samples of our tests, where the two agree to
    1e-10), and where it does the numbers differ at that level. Such a
    run is usually far from converged, so a :class:`~numtk.NumtkWarning` is expected.

    References
    ----------
    .. [1] M. Cuturi, "Sinkhorn distances: lightspeed computation of optimal transport", NeurIPS 2013.
    .. [2] J. Feydy, T. Séjourné, F.-X. Vialard, S. Amari, A. Trouvé, G. Peyré, "Interpolating between
           optimal transport and MMD using Sinkhorn divergences", AISTATS 2019.
    .. [3] J. Berner, L. Richter, K. Ullrich, "An optimal control perspective on diffusion-based
           generative modeling", TMLR 2024 (sde_sampler).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import sinkhorn_distance, w2
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2))
    >>> Y = rng.normal(size=(100, 2)) + [2.0, 0.0]
    >>> sinkhorn_distance(X, X)
    0.0
    >>> round(sinkhorn_distance(X, Y), 2), round(w2(X, Y) ** 2, 2)  # close to W2² for small epsilon
    (3.97, 4.04)
    """
    X, Y = _pair(X, Y)
    eps = check_real(epsilon, "epsilon", low=0.0, low_open=True)
    relative_epsilon = check_bool(relative_epsilon, "relative_epsilon")
    cost = check_option(cost, "cost", _COSTS)
    debiased = check_bool(debiased, "debiased")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    tol = check_real(tol, "tol", low=0.0)
    threads = n_threads(workers)
    wa = _weights(a, X.shape[0], "a")
    wb = _weights(b, Y.shape[0], "b")
    if (wa == 0).any():
        X, wa = X[wa > 0], wa[wa > 0]
    if (wb == 0).any():
        Y, wb = Y[wb > 0], wb[wb > 0]
    if relative_epsilon:
        scale = _median_cost(X, Y, cost)
        if scale == 0.0:  # every cost is 0: X and Y are the same single point
            return 0.0
        eps *= scale
    if debiased and X.shape == Y.shape and np.array_equal(X, Y) and np.array_equal(wa, wb):
        return 0.0  # identical measures
    xy = _solve(X, Y, wa, wb, eps, cost, max_iter, tol, threads)
    if not debiased:
        return float(xy["transport"])
    xx = _solve(X, None, wa, None, eps, cost, max_iter, tol, threads)
    yy = _solve(Y, None, wb, None, eps, cost, max_iter, tol, threads)
    value = xy["objective"] - 0.5 * xx["objective"] - 0.5 * yy["objective"]
    return float(max(value, 0.0))


def _median_distance(X: np.ndarray, Y: np.ndarray) -> float:
    rng = np.random.default_rng(_MEDIAN_SEED)
    Z = _subset(np.concatenate([X, Y]).astype(np.float64), rng)
    D = pdist(Z)
    if D.size == 0:
        return 1.0
    med = float(np.median(D))
    if med > 0:
        return med
    mean = float(D.mean())
    return mean if mean > 0 else 1.0


@constraints(X="array2d", Y="array2d", kernel="option", bandwidth="real>0", unbiased="bool", workers="workers")
def mmd(X: Any, Y: Any, *, kernel: str = "rbf", bandwidth: Any = "median", unbiased: bool = True,
        workers: int = 1) -> float:
    r"""Squared maximum mean discrepancy between two samples.

    .. math:: \mathrm{MMD}^2_u = \frac{1}{n(n-1)}\sum_{i \ne j} k(x_i, x_j)
              + \frac{1}{m(m-1)}\sum_{i \ne j} k(y_i, y_j) - \frac{2}{nm}\sum_{i,j} k(x_i, y_j)

    (the unbiased U-statistic; it can be slightly negative). ``unbiased=False`` gives the V-statistic,
    with the diagonal terms and :math:`1/n^2, 1/m^2` (never negative). O(nm d) time, O((n + m) d) memory.

    Parameters
    ----------
    X : array_like, shape (n, d)
        First sample (finite).
    Y : array_like, shape (m, d)
        Second sample, same number of columns.
    kernel : {'rbf', 'imq'}, default 'rbf'
        ``'rbf'``: :math:`k(x, y) = \exp(-|x - y|^2 / (2h^2))`;
        ``'imq'`` (inverse multiquadric): :math:`k(x, y) = (1 + |x - y|^2 / h^2)^{-1/2}`.
    bandwidth : 'median' or float, default 'median'
        :math:`h > 0`. ``'median'``: the median of the Euclidean distances between all distinct pairs of
        the pooled sample ``X ∪ Y`` (above 2048 pooled points: of a fixed seeded subset of 2048; the mean
        distance if the median is 0, and 1 if all points coincide).
    unbiased : bool, default True
        U-statistic (needs n, m >= 2) or V-statistic.
    workers : int, default 1
        Native threads (``-1``: all cores). Results do not depend on it.

    Returns
    -------
    float
        The estimate of MMD².

    References
    ----------
    .. [1] A. Gretton, K. M. Borgwardt, M. J. Rasch, B. Schölkopf, A. Smola, "A kernel two-sample test",
           JMLR 13 (2012).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import mmd
    >>> X = np.array([[0.0], [1.0]])
    >>> Y = np.array([[0.0], [2.0]])
    >>> k = lambda r: np.exp(-r**2 / 2)  # bandwidth h = 1
    >>> bool(np.isclose(mmd(X, Y, bandwidth=1.0), k(1) + k(2) - (k(0) + k(2) + k(1) + k(1)) / 2))
    True
    """
    X, Y = _pair(X, Y)
    kernel = check_option(kernel, "kernel", _KERNELS)
    unbiased = check_bool(unbiased, "unbiased")
    threads = n_threads(workers)
    if isinstance(bandwidth, str):
        check_option(bandwidth, "bandwidth", ("median",))
        h = _median_distance(X, Y)
    else:
        h = check_real(bandwidth, "bandwidth", low=0.0, low_open=True)
    n, m = X.shape[0], Y.shape[0]
    if unbiased and (n < 2 or m < 2):
        raise ValueError(f"the unbiased MMD needs at least 2 points in `X` and in `Y`; got {n} and {m} "
                         "(pass unbiased=False for the V-statistic)")
    from numtk.sampling import _sampling_ext as ext

    kind = ext.RBF if kernel == "rbf" else ext.IMQ
    threads = n_threads(threads, work=(n * n + m * m + 2 * n * m) // 2 * X.shape[1], grain=MMD_GRAIN)
    sxx, syy, sxy = ext.kernel_sums(X, Y, kind, h, threads)
    if unbiased:
        return float(sxx / (n * (n - 1)) + syy / (m * (m - 1)) - 2.0 * sxy / (n * m))
    return float((sxx + n) / n**2 + (syy + m) / m**2 - 2.0 * sxy / (n * m))
