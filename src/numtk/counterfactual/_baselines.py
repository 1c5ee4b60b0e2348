"""Per-point counterfactual baselines for linear classifiers: Wachter and the Lipschitz SOCP.

``wachter_counterfactuals`` projects every point onto the valid half-space (closed form), or, with
output bounds, solves one continuous quadratic knapsack per point in the compiled kernel.
``lipschitz_counterfactuals`` adds the pairwise upper distance bounds of the paper's "lipschitz"
baseline; for ``lipschitz >= 1`` without (score-relevant) immutable features its optimum is Wachter's
point set (spec ``counterfactual.md`` section 4), so the second-order cone program is only solved when
it can differ.

The helpers ``_setup``, ``_resolve_pairs`` and ``_pair_sqdist`` are shared with
``_distance_preserving.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import as_array, available_memory, check_bool, check_int, check_option, check_real
from numtk.counterfactual._common import (
    InfeasibleRecourseError,
    as_points,
    check_finite_result,
    check_magnitude,
    check_solver,
    check_solver_options,
    scores_and_deficits,
    linear_score,
    mutable_bounds,
    mutable_mask,
    row_norms,
    threshold,
)

__all__ = ["wachter_counterfactuals", "lipschitz_counterfactuals"]

# Pairs per chunk when pair distances are computed from coordinate differences.
_PAIR_CHUNK = 1 << 15


# --------------------------------------------------------------------------------------------
# shared input handling
# --------------------------------------------------------------------------------------------

def _setup(X: Any, w: Any, b: Any, *, confidence: Any, margin: Any, target: Any, immutable: Any,
           bounds: Any) -> SimpleNamespace:
    """Validate and normalise the common inputs of the per-point methods.

    Returns a namespace with ``X`` (n, d) float64, ``w``, ``b`` after the target flip, ``tau``,
    ``mask`` (mutable features), ``lo``/``hi`` (length d, +-inf where unbounded, also on immutable
    features, whose bounds are ignored), ``bounded``, ``s`` (scores) and ``m`` (deficits tau - s).
    """
    w, b, _ = linear_score((w, b), target, name="(w, b)")
    tau = threshold(confidence, margin)
    X = as_points(X, "X", n_features=w.shape[0], source="`w`")
    d = X.shape[1]
    mask = mutable_mask(immutable, d)
    ob = mutable_bounds(bounds, X, mask, stacklevel=4)
    lo, hi = ob if ob is not None else (np.full(d, -np.inf), np.full(d, np.inf))
    bounded = bool(np.isfinite(lo).any() or np.isfinite(hi).any())
    s, m = scores_and_deficits(X, w, b, tau, "the scores `w @ x + b` (or their distance to the threshold) "
                               "overflow float64 for these `X`, `w` and `b`; rescale them")
    return SimpleNamespace(X=X, w=w, b=b, tau=tau, mask=mask, lo=lo, hi=hi, bounded=bounded, s=s, m=m)


def _score_margin(X: np.ndarray, P: SimpleNamespace) -> np.ndarray:
    """A bound on the rounding error of ``w @ x + b - tau`` in any order of summation, per row.

    ``2 (d + 2) eps (|b| + |tau| + |w| |x|)``: the classical ``gamma_(d+2)`` bound with
    ``sum_k |w_k x_k| <= |w| |x|`` (Cauchy-Schwarz, one pass without temporaries) and a factor 2.
    """
    grow = 2.0 * (P.w.size + 2) * np.finfo(np.float64).eps
    norms = row_norms(X)
    return grow * (abs(P.b) + abs(P.tau) + float(np.linalg.norm(P.w)) * norms)


def _polish_validity(Xcf: np.ndarray, P: SimpleNamespace) -> np.ndarray:
    """Lift, in place, moved rows whose score is within rounding of ``tau`` (or below it).

    Solvers aim at ``tau + delta_i`` (``delta_i`` from :func:`_score_margin`), so that
    ``w @ x + b >= tau`` holds however the score is evaluated (BLAS kernels of different shapes round
    differently). A moved row whose score is below ``tau + delta_i / 2`` (a solver tolerance, or
    rounding) is moved by ``t v`` to ``tau + delta_i``, ``v`` the part of ``w`` on mutable
    coordinates that can still move toward a higher score within the bounds, then clipped to the
    bounds. Unmoved rows are the caller's own points and are left alone; rows that cannot be
    repaired keep their (slightly short) score. Returns the positions of the rows it changed.
    """
    w, mask, lo, hi = P.w, P.mask, P.lo, P.hi
    eps = np.finfo(np.float64).eps
    score = Xcf @ w + P.b
    delta = _score_margin(Xcf, P)
    idx = np.flatnonzero(score < P.tau + 0.5 * delta)
    changed: list[np.ndarray] = []
    if idx.size:
        idx = idx[np.any(Xcf[idx] != P.X[idx], axis=1) | (score[idx] < P.tau)]
    for k in range(12):
        if idx.size == 0:
            break
        sub = Xcf[idx]
        r = P.tau + delta[idx] - (sub @ w + P.b)
        bad = r > 0
        if not bad.any():
            break
        idx, sub, r = idx[bad], sub[bad], r[bad]
        room = mask & (((w > 0) & (sub < hi)) | ((w < 0) & (sub > lo)))
        v = np.where(room, w, 0.0)
        vv = np.einsum("ij,ij->i", v, v)
        ok = vv > 0
        if not ok.any():
            break
        idx, sub, r, v, vv = idx[ok], sub[ok], r[ok], v[ok], vv[ok]
        t = (r * (1.0 + 2.0**k * eps) + 2.0**k * delta[idx]) / vv
        sub = sub + t[:, None] * v
        sub[:, mask] = np.clip(sub[:, mask], lo[mask], hi[mask])
        Xcf[idx] = sub
        changed.append(idx)
    return np.unique(np.concatenate(changed)) if changed else np.zeros(0, dtype=np.intp)


def _resolve_pairs(pairs: Any, X: np.ndarray, n_landmarks: Any, rng: Any) -> np.ndarray:
    """The constrained pairs as an (n_P, 2) int64 array with ``i < j``, sorted and without repeats."""
    n = X.shape[0]
    if n_landmarks is not None:  # validated even when `pairs` does not use it
        n_landmarks = check_int(n_landmarks, "n_landmarks", minimum=1, maximum=n)
    gen = normalize_rng(rng)
    if isinstance(pairs, str):
        check_option(pairs, "pairs", ("all", "landmarks"))
        n_pairs = n * (n - 1) // 2 if pairs == "all" else n * (n_landmarks or int(np.ceil(np.sqrt(n))))
        need = 64 * n_pairs  # the index pairs, their distances and the solver's rows, in 8-byte words
        if need > available_memory():
            raise ValueError(f"`pairs`={pairs!r} gives {n_pairs} pairs for the {n} rows of `X`, whose "
                             f"constraints need about {need / 2**30:.1f} GiB, more than is available; "
                             "use pairs='landmarks' (or fewer `n_landmarks`) or an explicit pair array")
        if pairs == "all":
            i, j = np.triu_indices(n, 1)
            return np.column_stack([i, j]).astype(np.int64)
        m = int(np.ceil(np.sqrt(n))) if n_landmarks is None else n_landmarks
        land = _farthest_points(X, m, gen)
        i = np.repeat(np.arange(n, dtype=np.int64), land.size)
        j = np.tile(land, n)
    else:
        arr = as_array(pairs, "pairs", ndim=None, kinds="iu")
        if arr.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"`pairs` must be 'all', 'landmarks' or an integer array of shape (n_pairs, 2); "
                             f"got shape {arr.shape}")
        if arr.dtype == bool:
            raise TypeError("`pairs` must hold integer point indices; got a boolean array")
        if int(arr.min()) < 0 or int(arr.max()) >= n:
            raise ValueError(f"`pairs` holds a point index outside [0, {n})")
        i, j = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
        if np.any(i == j):
            raise ValueError("`pairs` must not pair a point with itself")
    keep = i != j
    i, j = i[keep], j[keep]
    out = np.column_stack([np.minimum(i, j), np.maximum(i, j)])
    return np.unique(out, axis=0) if out.size else out.reshape(0, 2)


def _farthest_points(X: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` landmarks by farthest-point sampling from a random first point (fewer if points repeat)."""
    n = X.shape[0]
    first = int(rng.integers(n))
    land = [first]
    dist = np.sum((X - X[first]) ** 2, axis=1)
    for _ in range(m - 1):
        nxt = int(np.argmax(dist))
        if dist[nxt] <= 0.0:
            break
        land.append(nxt)
        np.minimum(dist, np.sum((X - X[nxt]) ** 2, axis=1), out=dist)
    return np.asarray(land, dtype=np.int64)


def _pair_sqdist(X: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Exact squared distances of the pairs, from coordinate differences, in chunks."""
    out = np.empty(pairs.shape[0])
    for s in range(0, pairs.shape[0], _PAIR_CHUNK):
        p = pairs[s:s + _PAIR_CHUNK]
        diff = X[p[:, 0]] - X[p[:, 1]]
        out[s:s + _PAIR_CHUNK] = np.einsum("ij,ij->i", diff, diff)
    return out


# --------------------------------------------------------------------------------------------
# Wachter
# --------------------------------------------------------------------------------------------

def _wachter(P: SimpleNamespace) -> Result:
    """Wachter's point set for the normalised inputs; a ValueError when it overflows float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _wachter_impl(P)


def _wachter_impl(P: SimpleNamespace) -> Result:
    X, w, mask, m = P.X, P.w, P.mask, P.m
    n, d = X.shape
    wM = np.where(mask, w, 0.0)
    nw2 = float(wM @ wM)
    # Invalid rows aim at tau + delta_i, a bound on the score's rounding error: then they are valid
    # in float64 however their score is summed.
    target = np.where(m > 0, m + _score_margin(X, P), m)
    if not P.bounded:
        if nw2 == 0.0:
            rows = np.flatnonzero(m > 0)
            if rows.size:
                raise InfeasibleRecourseError(
                    f"{rows.size} point(s) are below the threshold and the classifier has no weight on "
                    "a mutable feature", rows=rows)
            mu = np.zeros(n)
            Xcf = X.copy()
            costs = np.zeros(n)
        else:
            mu = np.maximum(target, 0.0) / nw2
            Xcf = X + mu[:, None] * wM
            costs = mu * mu * nw2
        method = "closed_form"
    else:
        lo_c = P.lo - X
        hi_c = P.hi - X
        if not mask.all():
            lo_c[:, ~mask] = 0.0
            hi_c[:, ~mask] = 0.0
        from numtk.counterfactual._counterfactual_ext import quadratic_knapsack

        c, mu, status = quadratic_knapsack(wM, target, lo_c, hi_c)
        rows = np.flatnonzero(status == 2)
        if rows.size:
            raise InfeasibleRecourseError(
                f"{rows.size} point(s) cannot reach the threshold within `bounds` and `immutable` "
                f"(first rows: {rows[:10].tolist()})", rows=rows)
        costs = np.einsum("ij,ij->i", c, c)
        Xcf = c
        Xcf += X
        method = "knapsack"
    check_finite_result("`X`, `w`, `b` (and `margin`/`confidence`)", counterfactuals=Xcf)
    changed = _polish_validity(Xcf, P)
    if changed.size:
        diff = Xcf[changed] - X[changed]
        costs[changed] = np.einsum("ij,ij->i", diff, diff)
    total = float(np.sum(costs))
    check_finite_result("`X`, `w`, `b` (and `margin`/`confidence`)", counterfactuals=Xcf,
                        **{"squared displacements": costs, "total cost": total})
    score = Xcf @ w + P.b
    return Result(x_cf=Xcf, cost=total, costs=costs, valid=score >= P.tau,
                  status="trivial" if not costs.any() else "optimal", problem_class="QP",
                  method=method, dual=2.0 * mu, threshold=P.tau)


@constraints(X="array2d", w="array1d", b="real", confidence="prob_open", margin="real", target="option",
             immutable="array1d", bounds="option")
def wachter_counterfactuals(X: Any, w: Any, b: Any, *, confidence: float = 0.8,
                            margin: float | None = None, target: int = 1, immutable: Any = None,
                            bounds: Any = None) -> Result:
    r"""Per-point minimum-cost counterfactuals of a linear classifier (Wachter et al., squared L2).

    Each point is moved independently to the nearest point (Euclidean) whose score reaches the
    threshold: ``x'_i = argmin ||x' - x_i||^2`` s.t. ``w @ x' + b >= tau``, immutable features fixed,
    ``lo <= x' <= hi`` on the mutable features.

    Parameters
    ----------
    X : array_like, shape (n, d)
        The points to explain (finite, at least one row).
    w : array_like, shape (d,) or (1, d)
        Coefficients of the linear score ``s(x) = w @ x + b`` (a binary scikit-learn ``coef_`` is
        accepted as it is; its score is that of ``classes_[1]``).
    b : float
        Intercept.
    confidence : float, default 0.8
        Required probability ``alpha`` of the target class, in (0, 1); the threshold is
        ``tau = log(alpha / (1 - alpha))``. Ignored when ``margin`` is given.
    margin : float, optional
        The score threshold ``tau`` itself (for margin classifiers such as LinearSVC).
    target : {1, 0}, default 1
        The wanted class: 1 means ``w @ x + b >= tau``, 0 means ``-(w @ x + b) >= tau``.
    immutable : array_like of int or bool, optional
        Indices (or a boolean mask) of the features that must not change.
    bounds : (lo, hi), optional
        Bounds on the counterfactual's mutable features: scalars or arrays of length ``d``, ``None``
        or +-inf for no bound. Bounds on immutable features are ignored (with a warning when the data
        violate them).

    Returns
    -------
    res : Result
        The same fields with or without ``bounds``:

        x_cf : ndarray, shape (n, d)
            The counterfactuals, row by row.
        cost : float
            The total ``sum_i ||x'_i - x_i||^2``.
        costs : ndarray, shape (n,)
            The per-point squared distances.
        valid : ndarray of bool, shape (n,)
            ``w @ x' + b >= tau`` in float64 (all true).
        status : str
            'optimal', or 'trivial' when no point had to move.
        problem_class : str
            'QP'.
        method : str
            'closed_form' (no bounds: the projection) or 'knapsack' (one quadratic knapsack per point).
        dual : ndarray, shape (n,)
            The multipliers ``lambda_i`` of the validity rows.
        threshold : float
            The score threshold ``tau``.

    Raises
    ------
    InfeasibleRecourseError
        When some points cannot reach ``tau`` within ``bounds`` and ``immutable``; its ``rows``
        attribute lists them.

    See Also
    --------
    lipschitz_counterfactuals, distance_preserving_counterfactuals, GroupCounterfactualMap

    Notes
    -----
    With deficits :math:`m_i = \tau - s(x_i)` and :math:`w_M` the coefficients of the mutable
    features (zero elsewhere), the solution without bounds is the Euclidean projection onto the
    half-space,

    .. math:: x'_i = x_i + \frac{\max(0, m_i)}{\|w_M\|^2}\, w_M, \qquad
              \lambda_i = \frac{2 \max(0, m_i)}{\|w_M\|^2}.

    With bounds each point solves the continuous quadratic knapsack
    :math:`\min \|c\|^2` s.t. :math:`w_M^\top c \ge m_i`, :math:`\ell \le c \le u` with
    :math:`\ell = lo - x_i`, :math:`u = hi - x_i` (zero on immutable features). Its KKT conditions give
    :math:`c(\mu) = \mathrm{clip}(\mu w_M, \ell, u)` for a multiplier :math:`\mu \ge 0` at which the
    non-decreasing, piecewise-linear :math:`g(\mu) = w_M^\top c(\mu)` reaches :math:`m_i`; the
    compiled kernel sorts the breakpoints of :math:`g` and sweeps them, :math:`O(d \log d)` per point,
    and :math:`\lambda_i = 2\mu`. Invalid points aim at :math:`\tau + \delta_i` instead of
    :math:`\tau`, with :math:`\delta_i = 2(d + 2)\,\epsilon\,(|b| + |\tau| + \|w\|\|x_i\|)` a bound
    on the rounding error of the score (a few units in the last place), so ``w @ x' + b >= tau``
    holds in float64 whatever the order of summation.

    The total cost is a lower bound for every group map and every per-point method with more
    constraints (any of their solutions is feasible here). The projection is non-expansive, but it
    can collapse distinct points onto the hyperplane :math:`s = \tau`.

    This is the hard-constraint squared-L2 form used by Valero-Leal et al. (2026), not the original
    penalised MAD-L1 form of Wachter et al. (2017).

    References
    ----------
    .. [1] S. Wachter, B. Mittelstadt, C. Russell, "Counterfactual explanations without opening the
       black box: automated decisions and the GDPR", Harvard Journal of Law & Technology 31(2), 2017.
    .. [2] E. Valero-Leal, B. Bischl, P. Larrañaga, C. Bielza, G. Casalicchio, "Optimal Transport
       Group Counterfactual Explanations", ICML 2026, arXiv:2601.20692.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.counterfactual import wachter_counterfactuals
    >>> X = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 1.0]])
    >>> res = wachter_counterfactuals(X, [1.0, 1.0], 0.0, margin=2.0)
    >>> res.x_cf
    array([[1. , 1. ],
           [1.5, 0.5],
           [3. , 1. ]])
    >>> res.costs
    array([2. , 0.5, 0. ])

    With the second feature bounded above by 0.25, the first one makes up the difference (and the
    valid third point, outside the box, is moved into it):

    >>> res = wachter_counterfactuals(X, [1.0, 1.0], 0.0, margin=2.0, bounds=(None, [np.inf, 0.25]))
    >>> res.x_cf
    array([[1.75, 0.25],
           [1.75, 0.25],
           [3.  , 0.25]])
    """
    P = _setup(X, w, b, confidence=confidence, margin=margin, target=target, immutable=immutable,
               bounds=bounds)
    return _wachter(P)


# --------------------------------------------------------------------------------------------
# Lipschitz (SOCP)
# --------------------------------------------------------------------------------------------

def _pair_violation(Xcf: np.ndarray, pairs: np.ndarray, D: np.ndarray, upper: float,
                    lower: float = 0.0) -> float:
    """max over pairs of the relative violation of ``lower^2 D <= |x'_i - x'_j|^2 <= upper^2 D``.

    Relative to ``D`` (squared ratios); pairs with ``D = 0`` are measured against the median ``D``.
    """
    if pairs.shape[0] == 0:
        return 0.0
    Q = _pair_sqdist(Xcf, pairs)
    pos = D > 0
    scale = np.where(pos, D, np.median(D[pos]) if pos.any() else 1.0)
    r = Q / scale
    lim_hi = np.where(pos, upper * upper, 0.0)
    lim_lo = np.where(pos, lower * lower, 0.0)
    return float(max(np.max(r - lim_hi), np.max(lim_lo - r), 0.0))


@constraints(X="array2d", w="array1d", b="real", lipschitz="real>0", confidence="prob_open", margin="real",
             target="option", immutable="array1d", bounds="option", pairs="option", shortcut="bool",
             solver="option", solver_options="callable", n_landmarks="int>=1", rng="rng")
def lipschitz_counterfactuals(X: Any, w: Any, b: Any, *, lipschitz: float = 2.0,
                              confidence: float = 0.8, margin: float | None = None, target: int = 1,
                              immutable: Any = None, bounds: Any = None, pairs: Any = "all",
                              shortcut: bool = True, solver: str = "clarabel",
                              solver_options: dict | None = None, n_landmarks: int | None = None,
                              rng: Any = None) -> Result:
    r"""Per-point counterfactuals with pairwise Lipschitz bounds (the paper's "lipschitz" baseline).

    Solves :math:`\min \sum_i \|x'_i - x_i\|^2` subject to validity ``w @ x'_i + b >= tau``, the
    immutable features fixed, the bounds, and :math:`\|x'_i - x'_j\| \le L \|x_i - x_j\|` for the
    pairs in ``pairs``: a second-order cone program (SOCP).

    Parameters
    ----------
    X, w, b, confidence, margin, target, immutable, bounds
        As in :func:`wachter_counterfactuals`.
    lipschitz : float, default 2.0
        The bound ``L > 0`` on the distance ratios.
    pairs : {'all', 'landmarks'} or array_like of int, shape (n_pairs, 2), default 'all'
        The constrained pairs: all ``n (n - 1) / 2`` of them; those between every point and
        ``n_landmarks`` landmarks chosen by farthest-point sampling; or an explicit int32/int64 array
        of point positions.
    shortcut : bool, default True
        Return Wachter's solution without solving the SOCP when it is provably optimal (see Notes).
    solver : str, default 'clarabel'
        cvxpy solver of the SOCP (imported only when the SOCP is solved).
    solver_options : dict, optional
        Keyword arguments passed to ``cvxpy.Problem.solve`` (e.g. Clarabel's ``tol_gap_abs``).
    n_landmarks : int, optional
        Number of landmarks for ``pairs='landmarks'``; default ``ceil(sqrt(n))``.
    rng : {None, int, numpy.random.Generator}, optional
        Chooses the first landmark of ``pairs='landmarks'``.

    Returns
    -------
    res : Result
        The same fields whether the SOCP is solved or not:

        x_cf : ndarray, shape (n, d)
            The counterfactuals, row by row.
        cost : float
            The total squared distance ``sum_i ||x'_i - x_i||^2``.
        costs : ndarray, shape (n,)
            The per-point squared distances.
        valid : ndarray of bool, shape (n,)
            ``w @ x' + b >= tau`` in float64.
        status : str
            'optimal' or 'optimal_inaccurate' (the SOCP solver's status), or 'trivial' (no point
            had to move).
        success : bool
            True: a solution was found (an infeasible or failed solve raises instead).
        message : str
            How the solution was obtained, in words.
        n_iter : int
            Iterations of the SOCP solver; 0 when no SOCP was solved.
        problem_class : str
            'SOCP'.
        shortcut_used : bool
            True when Wachter's solution was returned without a solve.
        max_violation : float
            Largest relative violation of a pair constraint, in squared-ratio units.
        n_pairs : int
            Number of constrained pairs.
        threshold : float
            The score threshold ``tau``.

    Raises
    ------
    InfeasibleRecourseError
        When a point cannot reach ``tau`` within ``bounds``/``immutable`` (``rows`` names them) or
        the pair constraints cannot hold together with them.

    See Also
    --------
    wachter_counterfactuals, distance_preserving_counterfactuals

    Notes
    -----
    **Shortcut** (derived in spec ``counterfactual.md`` section 4). Without immutable features all
    points share one convex feasible set :math:`S = \{x: w^\top x + b \ge \tau\} \cap [lo, hi]`, and
    Wachter's solution is the Euclidean projection :math:`\Pi_S`, which is non-expansive:
    :math:`\|\Pi_S x_i - \Pi_S x_j\| \le \|x_i - x_j\|`. So for :math:`L \ge 1` it satisfies every
    pair constraint and, being optimal for the relaxation without them, is optimal. The same holds
    with immutable features on which :math:`w` is zero (the per-point sets differ only in the
    immutable block, which the projection leaves alone). Otherwise the SOCP is solved unless
    Wachter's solution happens to satisfy every pair constraint (checked exactly).

    In the SOCP the immutable coordinates are constants, so with :math:`c_{ij}` the squared distance
    of the immutable parts the cone of pair :math:`(i, j)` reads
    :math:`\|z_i - z_j\| \le \sqrt{L^2 \|x_i - x_j\|^2 - c_{ij}}` on the mutable parts :math:`z`.

    References
    ----------
    .. [1] E. Valero-Leal, B. Bischl, P. Larrañaga, C. Bielza, G. Casalicchio, "Optimal Transport
       Group Counterfactual Explanations", ICML 2026, arXiv:2601.20692.
    .. [2] S. Wachter, B. Mittelstadt, C. Russell, "Counterfactual explanations without opening the
       black box", Harvard Journal of Law & Technology 31(2), 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from numtk.counterfactual import lipschitz_counterfactuals, wachter_counterfactuals
    >>> X, _ = make_classification(n_samples=30, n_features=4, random_state=0)
    >>> w, b = np.array([1.0, -0.5, 0.25, 0.0]), -0.5
    >>> res = lipschitz_counterfactuals(X, w, b, lipschitz=1.5)
    >>> res.shortcut_used, res.problem_class
    (True, 'SOCP')
    >>> bool(np.allclose(res.x_cf, wachter_counterfactuals(X, w, b).x_cf))
    True
    """
    P = _setup(X, w, b, confidence=confidence, margin=margin, target=target, immutable=immutable,
               bounds=bounds)
    L = check_real(lipschitz, "lipschitz", low=0.0, low_open=True)
    shortcut = check_bool(shortcut, "shortcut")
    check_solver(solver, default="clarabel")
    check_solver_options(solver_options)
    check_magnitude(P.X, P.m)
    pair_arr = _resolve_pairs(pairs, P.X, n_landmarks, rng)
    wres = _wachter(P)  # raises InfeasibleRecourseError for unreachable rows
    X, mask = P.X, P.mask
    D = _pair_sqdist(X, pair_arr)

    def shortcut_result(viol: float, used: bool = True) -> Result:
        message = ("Wachter's point set satisfies every pair constraint: optimal without solving the SOCP"
                   if used else "every feature is immutable: the points stay where they are")
        return Result(x_cf=wres.x_cf, cost=wres.cost, costs=wres.costs, valid=wres.valid,
                      status=wres.status, success=True, message=message, n_iter=0, problem_class="SOCP",
                      shortcut_used=used, max_violation=viol, n_pairs=int(pair_arr.shape[0]), threshold=P.tau)

    if shortcut:
        if L >= 1.0 and not np.any(P.w[~mask]):
            return shortcut_result(_pair_violation(wres.x_cf, pair_arr, D, L))
        viol = _pair_violation(wres.x_cf, pair_arr, D, L)
        if viol <= 0.0:
            return shortcut_result(viol)
    dM = int(mask.sum())
    if dM == 0:  # nothing can move: the identity (every point already valid) is the only candidate
        viol = _pair_violation(wres.x_cf, pair_arr, D, L)
        if viol > 0.0:
            raise InfeasibleRecourseError("every feature is immutable and the pair constraints fail "
                                          "for lipschitz < 1")
        return shortcut_result(viol, used=bool(shortcut))

    import scipy.sparse as sp

    from numtk._lib._optional import import_optional

    cp = import_optional("cvxpy", purpose="lipschitz_counterfactuals' SOCP")
    n = X.shape[0]
    XM = X[:, mask]
    wM = P.w[mask]
    sI = X[:, ~mask] @ P.w[~mask] + P.b
    cI = _pair_sqdist(X[:, ~mask], pair_arr) if dM < X.shape[1] else np.zeros(pair_arr.shape[0])
    r2 = L * L * D - cI
    if np.any(r2 < -1e-12 * np.maximum(D, 1e-300)):
        bad = np.flatnonzero(r2 < -1e-12 * np.maximum(D, 1e-300))
        raise InfeasibleRecourseError(
            f"{bad.size} pair(s) differ in their immutable features by more than lipschitz times their "
            f"distance", rows=np.unique(pair_arr[bad]))
    radius = np.sqrt(np.maximum(r2, 0.0))
    Z = cp.Variable((n, dM))
    cons = [Z @ wM + sI >= P.tau]
    if pair_arr.shape[0]:
        nP = pair_arr.shape[0]
        E = sp.csr_matrix((np.r_[np.ones(nP), -np.ones(nP)],
                           (np.r_[np.arange(nP), np.arange(nP)], np.r_[pair_arr[:, 0], pair_arr[:, 1]])),
                          shape=(nP, n))
        cons.append(cp.SOC(radius, E @ Z, axis=1))
    loM, hiM = P.lo[mask], P.hi[mask]
    for k in np.flatnonzero(np.isfinite(loM)):
        cons.append(Z[:, k] >= loM[k])
    for k in np.flatnonzero(np.isfinite(hiM)):
        cons.append(Z[:, k] <= hiM[k])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(Z - XM)), cons)
    prob.solve(solver=solver.upper(), **(solver_options or {}))
    if prob.status in ("infeasible", "infeasible_inaccurate"):
        raise InfeasibleRecourseError("the pair constraints cannot hold together with validity, "
                                      "`bounds` and `immutable`")
    if prob.status not in ("optimal", "optimal_inaccurate") or Z.value is None:
        raise RuntimeError(f"the SOCP solver {solver!r} ended with status {prob.status!r}")
    Xcf = X.copy()
    Xcf[:, mask] = Z.value
    Xcf[:, mask] = np.clip(Xcf[:, mask], loM, hiM)
    _polish_validity(Xcf, P)
    diff = Xcf - X
    costs = np.einsum("ij,ij->i", diff, diff)
    stats = prob.solver_stats
    n_iter = int(stats.num_iters or 0) if stats is not None and stats.num_iters is not None else 0
    return Result(x_cf=Xcf, cost=float(costs.sum()), costs=costs, valid=Xcf @ P.w + P.b >= P.tau,
                  status=str(prob.status), success=True,
                  message=f"the SOCP solver {solver!r} ended with status {prob.status!r}", n_iter=n_iter,
                  problem_class="SOCP", shortcut_used=False,
                  max_violation=_pair_violation(Xcf, pair_arr, D, L), n_pairs=int(pair_arr.shape[0]),
                  threshold=P.tau)
