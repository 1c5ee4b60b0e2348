"""GroupCounterfactualMap: one explicit affine map that moves a whole group to the target class."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._estimator import Estimator, check_is_fitted
from numtk._lib._validation import as_array, check_int, check_option, check_real
from numtk._lib._warnings import NumtkWarning
from numtk.counterfactual import _counterfactual_ext as _ext
from numtk.counterfactual._common import (
    MAX_DISTORTION,
    MAX_COUNT,
    InfeasibleRecourseError,
    as_points,
    check_finite_result,
    check_magnitude,
    scores_and_deficits,
    check_solver,
    check_solver_options,
    linear_score,
    mutable_bounds,
    mutable_mask,
    threshold,
)

__all__ = ["GroupCounterfactualMap"]

FAMILIES = ("translation", "diagonal", "psd", "gaussian_ot", "scale", "gaussian_commuting")
_NATIVE_FAMILIES = ("translation", "diagonal", "scale", "gaussian_commuting")
_CLASSES = {"translation": "QP", "diagonal": "QP", "scale": "QP", "gaussian_commuting": "QP",
            "psd": "SDP", "gaussian_ot": "SDP"}
_DEGENERATE = 1e-12  # a feature whose group variance is below this fraction of the largest is constant
_POLISH_NATIVE = 1e-9
_POLISH_CONIC = 1e-5


class _Group:
    """The fitting group in the reduced coordinates shared by every family (spec: centred form)."""

    def __init__(self, X, weights, w, b, tau, mutable, bounds):
        self.X, self.p, self.w, self.b, self.tau = X, weights, w, b, tau
        self.n, self.d = X.shape
        self.n_w = float(weights.sum())
        self._xbar = self._cdiag = None
        self.scores, self.absmax = _ext.scores(X, w, b, True)
        self.m = tau - self.scores                     # margin deficits; valid iff m <= 0
        self.mutable = mutable
        self.Mi = np.flatnonzero(mutable)
        self.wM = np.where(mutable, w, 0.0)            # w on the mutable features, 0 elsewhere
        self.nw2 = float(self.wM @ self.wM)
        self.bounds = bounds
        self.scale_m = max(1.0, float(np.max(np.abs(self.m))) if self.n else 1.0)

    def centred(self, cols=None):
        Xc = self.X if cols is None else self.X[:, cols]
        return Xc - (self.xbar if cols is None else self.xbar[cols])

    @property
    def xbar(self) -> np.ndarray:
        """The weighted mean of the group (computed on first use, with :meth:`cdiag`)."""
        if self._xbar is None:
            self._xbar, self._cdiag = _ext.weighted_moments(self.X, self.p)
        return self._xbar

    def cdiag(self) -> np.ndarray:
        """The diagonal of the scatter matrix C = sum_i p_i (x_i - xbar)(x_i - xbar)^T."""
        if self._cdiag is None:
            self._xbar, self._cdiag = _ext.weighted_moments(self.X, self.p)
        return self._cdiag


@constraints(family="option", distortion="real>0", confidence="prob_open", target="option", margin="real",
             immutable="array1d", bounds="option", solver="option", solver_options="callable",
             covariance_ddof="real>=0", covariance_ridge="real>=0", tol="real>=0", max_iter="int>=1")
class GroupCounterfactualMap(Estimator):
    r"""One explicit affine counterfactual map for a group, for a binary linear classifier.

    Fits T(x) = A x + c minimising the group's transport cost
    :math:`\sum_i p_i \lVert T(x_i) - x_i \rVert^2` subject to every transported member reaching the
    target class with probability at least ``confidence`` (``w @ T(x_i) + b >= log(a / (1 - a))``) and
    to the bi-Lipschitz bound ``distortion`` K: every singular value of A lies in [1/K, K], so that
    ``1/K <= |T(x) - T(y)| / |x - y| <= K`` for any two points, fitted or new. Because T is a function,
    :meth:`transform` applies the same recourse to new group members without re-optimisation.

    Parameters
    ----------
    family : {'translation', 'diagonal', 'psd', 'gaussian_ot', 'scale', 'gaussian_commuting'}
        The map family (see Notes). 'translation' (A = I) has a closed form, 'diagonal' (A diagonal)
        and 'scale' (A = t I) are QPs solved by numtk's compiled dual active-set solver, 'psd'
        (A symmetric) and 'gaussian_ot' (the Gaussian optimal transport map) are SDPs solved with
        cvxpy and Clarabel; 'gaussian_commuting' is the diagonal QP in the eigenbasis of the group's
        covariance (W2 cost).
    distortion : float, default 2.0
        The bound 1 <= K <= 1e8 on the singular values of A (validated, but ignored, by 'translation'). K = 1 forces A = I.
    confidence : float, default 0.8
        Target probability a in (0, 1); the score threshold is tau = log(a / (1 - a)).
    target : label, optional
        The class to reach; defaults to ``classes_[1]`` of a scikit-learn model, or 1 for a pair (w, b).
    margin : float, optional
        Use this score threshold instead of ``confidence`` (e.g. for LinearSVC-type scores).
    immutable : array-like of int, str or bool, optional
        Features the map may not change (indices, names when fitted on a DataFrame, or a mask).
    bounds : (lo, hi), optional
        Per-feature box (scalars or arrays; ``None``/inf for no bound) on the counterfactuals of the
        fitting group; being affine, the map then keeps the whole convex hull of the group inside it.
    solver : str, optional
        None uses 'native' for the QP families and 'CLARABEL' for the SDPs. A cvxpy solver name
        ('CLARABEL', 'OSQP', 'SCS', ...) routes the (reduced) QP families through cvxpy too.
    solver_options : dict, optional
        Passed to ``cvxpy.Problem.solve``.
    covariance_ddof, covariance_ridge : int, float
        The Gaussian families' covariance ``C / (n - ddof) + ridge * I`` (paper defaults 1, 1e-6);
        a group with total weight ``n <= ddof`` (a single member) uses ``C / n`` (zero).
    tol : float, default 1e-12
        Feasibility tolerance of the native solver, relative to the largest margin deficit.
    max_iter : int, optional
        Iteration limit of the native solver (default ``10 * (n + p) + 100``).

    Attributes
    ----------
    A_ : ndarray, shape (n_features, n_features)
        The linear part of T.
    c_ : ndarray, shape (n_features,)
        The offset of T.
    a_ : ndarray, shape (n_features,)
        The diagonal of ``A_`` (diagonal, scale and translation families).
    cost_ : float
        :math:`\sum_i p_i \lVert T(x_i) - x_i\rVert^2` (the squared W2 distance for the Gaussian families).
    problem_class_ : {'QP', 'SDP'}
    status_ : {'optimal', 'optimal_inaccurate', 'trivial'}
        'trivial': every member was already valid (and inside ``bounds``), so T is the identity.
    threshold_ : float
        The score threshold tau.
    w_, b_ : ndarray, float
        The classifier's score after the sign flip for the target class.
    active_set_ : ndarray of int
        Positions of the group members whose validity constraint binds: the members that set the recourse.
    dual_ : ndarray
        Their Lagrange multipliers.
    distortion_bounds_ : tuple of float
        (smallest, largest) singular value of ``A_``: the exact range of every distance ratio.
    n_iter_ : int
    solve_time_ : float
        Seconds spent in the solver.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on data with string column names (a pandas DataFrame).
    mean_, covariance_, target_mean_, target_covariance_ : ndarray
        The source and transported Gaussians ('gaussian_ot' and 'gaussian_commuting').

    See Also
    --------
    numtk.counterfactual.wachter_counterfactuals : the per-point optimum (a lower bound on ``cost_``).
    numtk.counterfactual.distortion_ratios : the empirical distance ratios of any counterfactual set.

    Notes
    -----
    Writing :math:`T(x) = x + U (x - \bar x) + \delta`, with :math:`\bar x` the group's (weighted) mean
    and :math:`C = \sum_i p_i (x_i - \bar x)(x_i - \bar x)^T`, the cost is
    :math:`\operatorname{tr}(U C U^T) + n_w \lVert\delta\rVert^2` and the validity rows read
    :math:`(x_i - \bar x)^T U^T w + w^T \delta \ge \tau - s(x_i)`. Without bounds only
    :math:`\beta = w^T \delta` matters, so :math:`\delta = \beta w / \lVert w\rVert^2`. The diagonal
    family is then the QP

    .. math:: \min_{u, \beta} \sum_k C_{kk} u_k^2 + n_w \beta^2 / \lVert w\rVert^2 \quad
              \text{s.t.}\ \sum_k w_k (x_{ik} - \bar x_k) u_k + \beta \ge m_i,\ 1/K - 1 \le u_k \le K - 1,

    a strictly convex QP with a diagonal Hessian, one dense row per member and simple bounds, solved
    exactly by the dual active-set method of Goldfarb and Idnani (1983) without forming the n x p row
    matrix. The 'psd' family replaces diag(u) by a symmetric U with (1/K - 1) I <= U <= (K - 1) I (an
    SDP: its eigenvalues are its singular values, which makes both bounds convex); 'gaussian_ot' is the
    same program with C replaced by the covariance and n_w by 1, whose optimum is the W2-optimal map
    between N(xbar, Sigma) and N(xbar + delta, A Sigma A). Immutable features are removed from the
    problem (their rows and columns of A are the identity). When C is singular (fewer members than
    features, constant features) the cost does not determine A on the null space; numtk selects the
    identity there (a_k = 1, or the minimum-norm U), so new members are moved predictably.

    After solving, a validity polish raises c along w by the solver's residual violation (at most
    ``tol`` for the native solver), so training validity holds exactly in float64.

    References
    ----------
    .. [1] E. Valero-Leal, B. Bischl, P. Larrañaga, C. Bielza, G. Casalicchio, "Optimal Transport Group
           Counterfactual Explanations", ICML 2026, arXiv:2601.20692.
    .. [2] D. Goldfarb, A. Idnani, "A numerically stable dual method for solving strictly convex
           quadratic programs", Mathematical Programming 27, 1-33, 1983.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from numtk.counterfactual import GroupCounterfactualMap
    >>> X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    >>> clf = LogisticRegression().fit(X, y)
    >>> group = X[clf.predict(X) == 0][:40]           # rejected applicants
    >>> cf = GroupCounterfactualMap("diagonal", distortion=1.5).fit(group, clf)
    >>> bool(np.all(clf.predict_proba(cf.transform(group))[:, 1] >= 0.8 - 1e-12))
    True
    >>> lo, hi = cf.distortion_bounds_
    >>> bool(1 / 1.5 - 1e-12 <= lo <= hi <= 1.5 + 1e-12)
    True
    >>> translation = GroupCounterfactualMap("translation").fit(group, clf)
    >>> bool(cf.cost_ <= translation.cost_)
    True
    """

    def __init__(self, family: str = "diagonal", distortion: float = 2.0, confidence: float = 0.8, *,
                 target: Any = None, margin: float | None = None, immutable: Any = None, bounds: Any = None,
                 solver: str | None = None, solver_options: dict | None = None, covariance_ddof: int = 1,
                 covariance_ridge: float = 1e-6, tol: float = 1e-12, max_iter: int | None = None) -> None:
        self.family = family
        self.distortion = distortion
        self.confidence = confidence
        self.target = target
        self.margin = margin
        self.immutable = immutable
        self.bounds = bounds
        self.solver = solver
        self.solver_options = solver_options
        self.covariance_ddof = covariance_ddof
        self.covariance_ridge = covariance_ridge
        self.tol = tol
        self.max_iter = max_iter

    _estimator_kind = "transformer"

    # ------------------------------------------------------------------ fitting
    @constraints(X="array2d", classifier="option", sample_weight="array1d")
    def fit(self, X: Any, classifier: Any, *, sample_weight: Any = None) -> "GroupCounterfactualMap":
        """Fit the map to the group ``X`` (n_members, n_features) for ``classifier``.

        Parameters
        ----------
        X : array-like of shape (n_members, n_features)
            The group (e.g. rejected applicants). A DataFrame's string column names are remembered.
        classifier : fitted binary linear model or (w, b)
            A scikit-learn model with ``coef_``/``intercept_``/``classes_`` or a pair.
        sample_weight : array-like of shape (n_members,), optional
            Non-negative weights p_i of the members in the cost (every member must be valid).

        Returns
        -------
        self
        """
        K = check_real(self.distortion, "distortion", low=1.0, high=MAX_DISTORTION)
        g, family, solver, tol, names, target = self._prepare(X, classifier, sample_weight)
        return self._fit_group(g, family, solver, tol, names, target, K, None)

    @constraints(X="array2d", classifier="option", distortions="array1d", sample_weight="array1d")
    def fit_path(self, X: Any, classifier: Any, distortions: Any, *, sample_weight: Any = None) -> list:
        """Fit one map per distortion bound K in ``distortions``, sharing the work between them.

        The group's statistics are computed once and, for the SDP families ('psd', 'gaussian_ot'),
        the cvxpy problem is compiled once with K as a parameter (DPP) and re-solved for each K,
        which is several times faster than fresh fits over the paper's K grid.

        Returns
        -------
        list of GroupCounterfactualMap
            Fitted copies of this estimator, one per K, in the order given (``distortion`` set to K).

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.counterfactual import GroupCounterfactualMap
        >>> rng = np.random.default_rng(0)
        >>> X, w = rng.normal(size=(30, 3)), np.array([1.0, -2.0, 0.5])
        >>> maps = GroupCounterfactualMap("diagonal").fit_path(X, (w, -4.0), [1.0, 1.5, 3.0])
        >>> costs = [m.cost_ for m in maps]
        >>> bool(costs[0] >= costs[1] >= costs[2])
        True
        """
        Ks = [check_real(K, "distortions", low=1.0, high=MAX_DISTORTION) for K in np.atleast_1d(np.asarray(distortions, dtype=object))]
        g, family, solver, tol, names, target = self._prepare(X, classifier, sample_weight)
        cache: dict = {}
        out = []
        for K in Ks:
            est = type(self)(**{**self.get_params(), "distortion": K})
            out.append(est._fit_group(g, family, solver, tol, names, target, K, cache))
        return out

    def _prepare(self, X: Any, classifier: Any, sample_weight: Any):
        family = check_option(self.family, "family", FAMILIES)
        tol = check_real(self.tol, "tol", low=0.0)
        # validated even when the family does not use them
        check_real(self.covariance_ridge, "covariance_ridge", low=0.0)
        check_real(self.covariance_ddof, "covariance_ddof", low=0.0)
        if self.max_iter is not None:
            check_int(self.max_iter, "max_iter", minimum=1, maximum=MAX_COUNT)
        check_solver_options(self.solver_options)
        solver = check_solver(self.solver, allow_none=True)
        w, b, target = linear_score(classifier, self.target)
        names = _feature_names(X)
        X = as_points(X, "X", n_features=w.size, source="`classifier`")
        n, d = X.shape
        tau = threshold(self.confidence, self.margin)
        mutable = mutable_mask(self.immutable, d, names)
        bounds = mutable_bounds(self.bounds, X, mutable, stacklevel=4)
        weights = _weights(sample_weight, n)
        s, m = scores_and_deficits(X, w, b, tau, "the scores of `X` under `classifier` (w @ x + b, or their "
                                   "distance to the threshold) overflow float64; rescale them")
        if family in _NATIVE_FAMILIES:
            solver = "native" if solver is None or solver.lower() == "native" else solver.upper()
        else:
            if solver is not None and solver.lower() == "native":
                raise ValueError(f"`solver='native'` solves the QP families only; family {family!r} is an "
                                 "SDP (use 'CLARABEL', 'SCS' or 'MOSEK')")
            solver = "CLARABEL" if solver is None else solver.upper()

        return _Group(X, weights, w, b, tau, mutable, bounds), family, solver, tol, names, target

    def _fit_group(self, g: "_Group", family: str, solver: str, tol: float, names, target, K: float,
                   cache: dict | None) -> "GroupCounterfactualMap":
        X, d, bounds = g.X, g.d, g.bounds
        self.threshold_, self.w_, self.b_, self.target_ = g.tau, g.w, g.b, target
        self.n_features_in_ = d
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.problem_class_ = _CLASSES[family]
        for attr in ("mean_", "covariance_", "target_mean_", "target_covariance_"):
            if hasattr(self, attr):
                delattr(self, attr)

        inside = bounds is None or (np.all(X >= bounds[0]) and np.all(X <= bounds[1]))
        t0 = time.perf_counter()
        if np.all(g.m <= 0) and inside:
            A, c = np.eye(d), np.zeros(d)
            info = dict(status="trivial", n_iter=0, active=np.zeros(0, np.intp), dual=np.zeros(0))
        else:
            check_magnitude(X, g.m, names="`X` and `classifier`")
            if g.nw2 == 0.0 and np.any(g.m > 0):
                raise InfeasibleRecourseError(
                    "the classifier's weights are zero on every mutable feature, so no change of the "
                    "mutable features can raise the score", rows=np.flatnonzero(g.m > 0))
            # Badly scaled groups (spread or recourse far from 1) are solved in units 2**k (exact):
            # the solvers' tolerances and the QP/SDP conditioning assume lengths near 1.
            if cache is not None and "scaled" in cache:
                gs, k = cache["scaled"]
            else:
                gs, k = _rescaled(g)
                if cache is not None:
                    cache["scaled"] = (gs, k)
            if family == "translation":
                A, c, info = _fit_translation(gs)
            elif family in ("diagonal", "scale", "gaussian_commuting"):
                A, c, info = _fit_diagonal(gs, family, K, solver, self, tol)
            else:
                A, c, info = _fit_sdp(gs, family, K, solver, self, cache)
            if k:
                c = np.ldexp(c, k)
                info["dual"] = np.ldexp(np.asarray(info["dual"], dtype=np.float64), k)
            c, shifted = _polish(g, A, c, _POLISH_NATIVE if solver == "native" else _POLISH_CONIC)
            if shifted and info["status"] == "optimal":
                info["status"] = "optimal_inaccurate"
        self.solve_time_ = time.perf_counter() - t0
        check_finite_result("`X` and `classifier` (and `margin`/`confidence`)", **{"map's coefficients": A,
                                                                                 "map's offset": c})
        self.A_, self.c_ = A, c
        if family in ("translation", "diagonal", "scale"):
            self.a_ = np.diag(A).copy()
        elif hasattr(self, "a_"):
            del self.a_
        self.cost_ = _transport_cost(g, A, c, getattr(self, "a_", None))
        if family in ("gaussian_ot", "gaussian_commuting"):
            self._set_gaussians(g, A, c)
        try:
            check_finite_result("`X` and `classifier` (and `margin`/`confidence`)", cost=self.cost_)
        except ValueError:
            del self.A_  # not fitted
            raise
        if family in ("translation",):
            self.distortion_bounds_ = (1.0, 1.0)
        elif family in ("diagonal", "scale"):
            self.distortion_bounds_ = (float(np.min(self.a_)), float(np.max(self.a_)))
        else:
            ev = np.linalg.eigvalsh((A + A.T) / 2)
            self.distortion_bounds_ = (float(ev[0]), float(ev[-1]))
        self.status_ = info["status"]
        self.n_iter_ = int(info["n_iter"])
        self.active_set_ = np.asarray(info["active"], dtype=np.intp)
        self.dual_ = np.asarray(info["dual"], dtype=np.float64)
        return self

    def _set_gaussians(self, g: _Group, A: np.ndarray, c: np.ndarray) -> None:
        Sigma = _gaussian_covariance(g, self.covariance_ddof, self.covariance_ridge)
        self.mean_ = g.xbar.copy()
        self.covariance_ = Sigma
        self.target_mean_ = A @ g.xbar + c
        self.target_covariance_ = A @ Sigma @ A.T
        U = A - np.eye(g.d)
        delta = self.target_mean_ - self.mean_
        self.cost_ = float(delta @ delta + np.trace(U @ Sigma @ U.T))

    # ---------------------------------------------------------------- applying
    @constraints(X="array2d")
    def transform(self, X: Any) -> np.ndarray:
        """Apply the fitted map: ``X @ A_.T + c_`` (no re-optimisation)."""
        check_is_fitted(self, "A_")
        X = as_points(X, "X", min_rows=0, n_features=self.n_features_in_, source="the fitted map")
        with np.errstate(over="ignore", invalid="ignore"):
            out = _apply(X, self.A_, self.c_, getattr(self, "a_", None))
        if not np.all(np.isfinite(out)):
            raise ValueError("the counterfactuals of `X` overflow float64 (its entries are too large for "
                             "the fitted map); rescale `X`")
        return out

    @constraints(X="array2d", classifier="option", sample_weight="array1d")
    def fit_transform(self, X: Any, classifier: Any, *, sample_weight: Any = None) -> np.ndarray:
        """Fit to ``X`` and return its counterfactuals."""
        return self.fit(X, classifier, sample_weight=sample_weight).transform(X)

    @constraints(X="array2d")
    def predict_valid(self, X: Any) -> np.ndarray:
        """Whether each transported row reaches the target: ``w_ @ T(x) + b_ >= threshold_``."""
        return self.transform(X) @ self.w_ + self.b_ >= self.threshold_

    @constraints(X="array2d")
    def score(self, X: Any) -> float:
        """The fraction of rows of ``X`` whose counterfactual is valid (``nan`` when ``X`` has no rows)."""
        valid = self.predict_valid(X)
        return float(np.mean(valid)) if valid.size else float("nan")


# ---------------------------------------------------------------------------- helpers
def _feature_names(X: Any):
    cols = getattr(X, "columns", None)
    if cols is None:
        return None
    names = list(cols)
    return names if names and all(isinstance(c, str) for c in names) else None


def _weights(sample_weight: Any, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    p = np.asarray(as_array(sample_weight, "sample_weight", ndim=None, kinds="biuf"), dtype=np.float64)
    if p.shape != (n,):
        raise ValueError(f"`sample_weight` must have shape ({n},); got {p.shape}")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError("`sample_weight` must be finite and non-negative")
    with np.errstate(over="ignore"):
        total = float(p.sum())
    if total <= 0:
        raise ValueError("`sample_weight` must have a positive sum; got all-zero weights")
    if not np.isfinite(total) or total > 2.0**500:
        raise ValueError("`sample_weight` must have a sum below 2**500 (~3e150; costs would overflow "
                         "float64); rescale it")
    return p


def _rescaled(g: _Group) -> tuple[_Group, int]:
    """``(g, 0)``, or the group in units of ``2**k`` (``X``, ``b``, ``tau`` and the bounds divided by
    it, exactly) when its spread or its largest recourse length lies outside ``[2**-10, 2**10]``."""
    if g.n == 0:
        return g, 0
    spread = float(np.max(g.X.max(0) - g.X.min(0), initial=0.0))
    reach = float(np.max(g.m, initial=0.0)) / np.sqrt(g.nw2) if g.nw2 > 0 else 0.0
    scale = max(spread, reach)
    if scale == 0.0 or 2.0**-10 <= scale <= 2.0**10:
        return g, 0
    k = int(np.frexp(scale)[1])
    bounds = None if g.bounds is None else (np.ldexp(g.bounds[0], -k), np.ldexp(g.bounds[1], -k))
    gs = _Group(np.ldexp(g.X, -k), g.p, g.w, float(np.ldexp(g.b, -k)), float(np.ldexp(g.tau, -k)),
                g.mutable, bounds)
    gs.ridge_scale = float(np.ldexp(1.0, -2 * k))
    return gs, k


def _gaussian_covariance(g: _Group, ddof: Any, ridge: Any) -> np.ndarray:
    ridge = check_real(ridge, "covariance_ridge", low=0.0) * getattr(g, "ridge_scale", 1.0)
    ddof = check_real(ddof, "covariance_ddof", low=0.0)
    # A group too small for the ddof correction (one member, ddof = 1) has no spread to estimate:
    # its scatter is zero, so the covariance is the ridge alone (and the map is Wachter's translation).
    denom = g.n_w - ddof if g.n_w - ddof > 0 else g.n_w
    Xt = g.X - g.xbar
    return (Xt * g.p[:, None]).T @ Xt / denom + ridge * np.eye(g.d)


def _infeasible_rows(g: _Group) -> np.ndarray:
    """Members whose best reachable score within ``bounds`` (moving each alone) stays below tau."""
    lo, hi = g.bounds if g.bounds is not None else (np.full(g.d, -np.inf), np.full(g.d, np.inf))
    wM = g.wM
    with np.errstate(invalid="ignore"):
        gain = np.where(wM > 0, wM * (hi - g.X), np.where(wM < 0, wM * (lo - g.X), 0.0))
    return np.flatnonzero(g.scores + gain.sum(1) < g.tau)


def _raise_infeasible(g: _Group, family: str):
    rows = _infeasible_rows(g)
    if rows.size:
        raise InfeasibleRecourseError(
            f"members {rows[:10].tolist()}{' ...' if rows.size > 10 else ''} cannot reach the target class "
            "within `bounds` and `immutable`, whatever the map", rows=rows)
    raise InfeasibleRecourseError(
        f"no {family} map moves the whole group to the target class within `bounds`: each member can "
        "reach it alone, but not with one common map of this family (try a richer family or looser bounds)")


def _fit_translation(g: _Group):
    d = g.d
    Mstar = float(g.m.max())
    if g.bounds is None:
        c = max(0.0, Mstar) * g.wM / g.nw2
        mu = max(0.0, Mstar) / g.nw2
    else:
        lo, hi = g.bounds
        ell = np.where(g.mutable, lo - g.X.min(0), 0.0)
        up = np.where(g.mutable, hi - g.X.max(0), 0.0)
        if np.any(ell > up):
            k = np.flatnonzero(ell > up)
            raise InfeasibleRecourseError(
                f"the group is wider than `bounds` along features {k[:10].tolist()}: no translation keeps "
                "every member inside")
        C, MU, status = _ext.quadratic_knapsack(g.wM, np.array([Mstar]), ell[None, :], up[None, :])
        if status[0] == 2:
            _raise_infeasible(g, "translation")
        c, mu = C[0], float(MU[0])
    active = np.flatnonzero(g.m >= Mstar - 1e-12 * g.scale_m) if mu > 0 else np.zeros(0, np.intp)
    dual = np.full(active.size, 2.0 * g.n_w * mu / max(active.size, 1))
    return np.eye(d), c, dict(status="optimal", n_iter=1, active=active, dual=dual)


def _fit_diagonal(g: _Group, family: str, K: float, solver: str, est: GroupCounterfactualMap, tol: float):
    """diagonal, scale and gaussian_commuting: the diagonal-Hessian QP (spec: reduced form)."""
    d, n = g.d, g.n
    klo, khi = 1.0 / K - 1.0, K - 1.0
    Mi = g.Mi
    bounded = g.bounds is not None
    Q = None
    if family == "diagonal":
        cd = g.cdiag()
        cmax = cd[Mi].max() if Mi.size else 0.0
        F = Mi[cd[Mi] > _DEGENERATE * cmax] if cmax > 0 else Mi[:0]
        Xf = g.X if (F.size == d and np.array_equal(F, np.arange(d))) else g.X[:, F]
        scale, centre, hF = g.w[F], g.xbar[F], cd[F]
    elif family == "scale":
        cd = g.cdiag()
        trace = float(cd[Mi].sum())
        F = Mi[:0] if trace <= 0 else np.array([-1])  # one variable u (A = (1 + u) I on the mutable block)
        Xf = (g.centred() @ g.wM)[:, None] if F.size else np.zeros((n, 0))
        scale, centre, hF = np.ones(F.size), np.zeros(F.size), np.full(F.size, trace)
    else:  # gaussian_commuting
        if bounded:
            raise ValueError("`bounds` are not supported by family='gaussian_commuting': its coordinates "
                             "mix features, so the extreme members per feature are not known in advance; "
                             "use 'diagonal' or 'psd'")
        Sigma = _gaussian_covariance(g, est.covariance_ddof, est.covariance_ridge)[np.ix_(Mi, Mi)]
        lam, Q = np.linalg.eigh(Sigma)
        lam = np.maximum(lam, 0.0)
        keep = lam > _DEGENERATE * max(lam.max(initial=0.0), 0.0) if lam.size else lam.astype(bool)
        F = np.flatnonzero(keep)
        Xf = g.centred(Mi) @ Q[:, F]
        scale, centre, hF = Q[:, F].T @ g.w[Mi], np.zeros(F.size), lam[F]
    nF = F.size
    mass = 1.0 if family == "gaussian_commuting" else g.n_w
    if not bounded:
        tail = np.ones(1)
        h = np.concatenate([hF, [mass / g.nw2]])
        E, e = np.zeros((0, nF + 1)), np.zeros(0)
    else:
        tail = g.w[Mi]
        h = np.concatenate([hF, np.full(Mi.size, mass)])
        lo, hi = g.bounds
        xmin, xmax = g.X.min(0), g.X.max(0)
        rows, rhs = [], []
        pos = {int(k): j for j, k in enumerate(F)} if family == "diagonal" else {}
        for jj, k in enumerate(Mi):
            for sign, bound, xe in ((1.0, lo[k], xmin[k]), (-1.0, hi[k], xmax[k])):
                if not np.isfinite(bound):
                    continue
                row = np.zeros(nF + Mi.size)
                if family == "diagonal" and int(k) in pos:
                    row[pos[int(k)]] = sign * (xe - g.xbar[k])
                elif family == "scale" and nF:
                    # T_k(x) = x_k + u (x_k - xbar_k) + delta_k is increasing in x_k: extremes bind
                    row[0] = sign * (xe - g.xbar[k])
                row[nF + jj] = sign
                rows.append(row)
                rhs.append(sign * (bound - xe))
        E = np.array(rows).reshape(-1, nF + Mi.size)
        e = np.array(rhs, dtype=np.float64)
    p = h.size
    zlo = np.concatenate([np.full(nF, klo), np.full(p - nF, -np.inf)])
    zhi = np.concatenate([np.full(nF, khi), np.full(p - nF, np.inf)])
    if solver == "native":
        max_iter = est.max_iter if est.max_iter is not None else 10 * (n + p) + 100
        feas = tol * g.scale_m
        z, act, mult, n_iter, status, _ = _ext.diag_qp(Xf, scale, centre, tail, g.m, E, e, h, zlo, zhi, feas, int(max_iter))
        if status == 1:
            _raise_infeasible(g, family)
        sol_status = "optimal" if status == 0 else "optimal_inaccurate"
        if status == 2:
            warnings.warn(f"the active-set solver stopped at max_iter={max_iter}", NumtkWarning, stacklevel=3)
        valid_rows = act < n
        active, dual = act[valid_rows], mult[valid_rows]
    else:
        z, active, dual, n_iter, sol_status = _reduced_qp_cvxpy(
            Xf, scale, centre, tail, g.m, E, e, h, zlo, zhi, solver, est.solver_options, g)
    uF, tailz = z[:nF], z[nF:]
    U = np.zeros((d, d))
    if family == "diagonal":
        U[F, F] = uF
    elif family == "scale":
        if nF:
            U[Mi, Mi] = uF[0]
    else:
        U[np.ix_(Mi, Mi)] = (Q[:, F] * uF) @ Q[:, F].T
    if bounded:
        delta = np.zeros(d)
        delta[Mi] = tailz
    else:
        delta = tailz[0] * g.wM / g.nw2
    A = np.eye(d) + U
    c = delta - U @ g.xbar
    return A, c, dict(status=sol_status, n_iter=n_iter, active=active, dual=dual)


def _cvxpy():
    from numtk._lib._optional import import_optional

    return import_optional("cvxpy", purpose="this family/solver (the 'translation', 'diagonal' and 'scale' "
                                            "families need nothing beyond numtk's required dependencies)")


def _cvx_solve(prob, solver, options):
    cp = _cvxpy()
    try:
        prob.solve(solver=solver, **(options or {}))
    except cp.error.SolverError as exc:
        raise RuntimeError(f"cvxpy solver {solver} failed: {exc}") from exc
    st = prob.status
    if st in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        return "infeasible"
    if st not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise RuntimeError(f"cvxpy solver {solver} returned status {st!r}")
    return "optimal" if st == cp.OPTIMAL else "optimal_inaccurate"


def _reduced_qp_cvxpy(Xf, scale, centre, tail, m, E, e, h, zlo, zhi, solver, options, g):
    cp = _cvxpy()
    G = np.hstack([(Xf - centre) * scale, np.broadcast_to(tail, (Xf.shape[0], tail.size))])
    z = cp.Variable(h.size)
    cons = [G @ z >= m]
    if E.shape[0]:
        cons.append(E @ z >= e)
    fin_lo, fin_hi = np.isfinite(zlo), np.isfinite(zhi)
    if fin_lo.any():
        cons.append(z[fin_lo] >= zlo[fin_lo])
    if fin_hi.any():
        cons.append(z[fin_hi] <= zhi[fin_hi])
    prob = cp.Problem(cp.Minimize(cp.sum(cp.multiply(h, cp.square(z)))), cons)
    status = _cvx_solve(prob, solver, options)
    if status == "infeasible":
        _raise_infeasible(g, "diagonal")
    dual = np.asarray(cons[0].dual_value, dtype=np.float64).reshape(-1)
    active = np.flatnonzero(dual > 1e-7 * max(dual.max(initial=0.0), 1e-300))
    iters = prob.solver_stats.num_iters if prob.solver_stats is not None else 0
    return np.asarray(z.value, dtype=np.float64), active, dual[active], iters or 0, status


def _fit_sdp(g: _Group, family: str, K: float, solver: str, est: GroupCounterfactualMap,
             cache: dict | None = None):
    """psd and gaussian_ot: the SDP over symmetric U on the mutable block (spec: reduced form).

    The box (1/K - 1) I <= U <= (K - 1) I enters through two cvxpy Parameters, so that a ``cache``
    shared over several K (``fit_path``) compiles the problem once (DPP) and only re-solves it.
    """
    if cache is not None and "sdp" in cache:
        built = cache["sdp"]
    else:
        built = _build_sdp(g, family, est)
        if cache is not None:
            cache["sdp"] = built
    prob, U, tail_var, cons, klo, khi = built
    klo.value, khi.value = 1.0 / K - 1.0, K - 1.0
    status = _cvx_solve(prob, solver, est.solver_options)
    if status == "infeasible":
        _raise_infeasible(g, family)
    d, Mi = g.d, g.Mi
    Up, V = U
    Uv = V @ np.asarray(Up.value, dtype=np.float64) @ V.T
    Uv = (Uv + Uv.T) / 2
    # Clip the eigenvalues into the box: interior-point solutions sit a hair outside the LMI bounds.
    ev, V = np.linalg.eigh(Uv)
    Uv = (V * np.clip(ev, 1.0 / K - 1.0, K - 1.0)) @ V.T
    Ufull = np.zeros((d, d))
    Ufull[np.ix_(Mi, Mi)] = Uv
    delta = np.zeros(d)
    if g.bounds is None:
        delta = float(tail_var.value) * g.wM / g.nw2
    else:
        delta[Mi] = np.asarray(tail_var.value, dtype=np.float64)
    dual = np.asarray(cons[0].dual_value, dtype=np.float64).reshape(-1)
    active = np.flatnonzero(dual > 1e-7 * max(dual.max(initial=0.0), 1e-300))
    iters = prob.solver_stats.num_iters if prob.solver_stats is not None else 0
    A = np.eye(d) + Ufull
    c = delta - Ufull @ g.xbar
    return A, c, dict(status=status, n_iter=iters or 0, active=active, dual=dual[active])


def _build_sdp(g: _Group, family: str, est: GroupCounterfactualMap):
    """The SDP in the eigenbasis V of C (or of the covariance): U = V U' V^T.

    Rotating by V keeps the LMIs (same eigenvalues) and turns |R U|_F^2 into the separable
    sum_ij lam_i U'_ij^2, which gives the interior-point solver a much sparser KKT system than the
    dense R U product.
    """
    cp = _cvxpy()
    Mi = g.Mi
    Xm = g.centred(Mi)
    wM = g.w[Mi]
    B = None
    if g.bounds is None and g.n + 1 < Mi.size:
        # Without bounds, compressing U to S = span{x_i - xbar, w} keeps validity (it sees U only
        # through (x_i - xbar)^T U w), keeps the eigenvalue box (0 lies in it), and cannot raise
        # the cost: an exact reduction from d_M to at most n + 1 dimensions.
        _, sv, Vt = np.linalg.svd(np.vstack([Xm, wM]), full_matrices=False)
        B = Vt[: int(np.sum(sv > 1e-12 * sv[0]))].T if sv.size and sv[0] > 0 else np.zeros((Mi.size, 0))
        Xm, wM = Xm @ B, B.T @ wM
    k = Xm.shape[1]
    if family == "psd":
        C = (Xm * g.p[:, None]).T @ Xm
        mass = g.n_w
    else:
        C = _gaussian_covariance(g, est.covariance_ddof, est.covariance_ridge)[np.ix_(Mi, Mi)]
        if B is not None:
            C = B.T @ C @ B
        mass = 1.0
    lam, V = np.linalg.eigh(C)
    lam = np.maximum(lam, 0.0)
    trC = float(lam.sum())
    eps_tb = 1e-8 * (trC / max(k, 1) if trC > 0 else 1.0)   # minimum-norm tie-break on the null space of C
    weights = np.sqrt(lam + eps_tb)[:, None] * np.ones((1, k))
    Up = cp.Variable((k, k), symmetric=True)
    Y = Xm @ V                                       # the group in the eigenbasis
    omega = V.T @ wM
    I = np.eye(k)
    cons = []
    if g.bounds is None:
        beta = cp.Variable()
        cons.append(Y @ (Up @ omega) + beta >= g.m)
        delta_cost = mass * cp.square(beta) / g.nw2
    else:
        dl = cp.Variable(k)
        cons.append(Y @ (Up @ omega) + wM @ dl >= g.m)
        delta_cost = mass * cp.sum_squares(dl)
        lo, hi = g.bounds
        T = g.X[:, Mi] + (Y @ Up) @ V.T + np.ones((g.n, 1)) @ cp.reshape(dl, (1, k), order="C")
        lo_f, hi_f = np.isfinite(lo[Mi]), np.isfinite(hi[Mi])
        if g.n * (lo_f.sum() + hi_f.sum()) > 10**6:
            warnings.warn("`bounds` add more than a million constraint rows to the SDP", NumtkWarning,
                          stacklevel=3)
        if lo_f.any():
            cons.append(T[:, np.flatnonzero(lo_f)] >= np.broadcast_to(lo[Mi][lo_f], (g.n, lo_f.sum())))
        if hi_f.any():
            cons.append(T[:, np.flatnonzero(hi_f)] <= np.broadcast_to(hi[Mi][hi_f], (g.n, hi_f.sum())))
    klo, khi = cp.Parameter(), cp.Parameter()
    cons += [Up - klo * I >> 0, khi * I - Up >> 0]
    obj = cp.sum_squares(cp.multiply(weights, Up)) + delta_cost
    prob = cp.Problem(cp.Minimize(obj), cons)
    if B is not None:
        V = B @ V                                    # back to the mutable coordinates
    return prob, (Up, V), (beta if g.bounds is None else dl), cons, klo, khi


def _transport_cost(g: _Group, A: np.ndarray, c: np.ndarray, a: np.ndarray | None) -> float:
    """sum_i p_i |T(x_i) - x_i|^2 = tr(U C U^T) + n_w |T(xbar) - xbar|^2 (the cross term vanishes)."""
    if a is not None:
        u = a - 1.0
        if not np.any(u):  # a translation: n_w |c|^2
            return float(g.n_w * (c @ c))
        shift = u * g.xbar + c
        return float(g.cdiag() @ (u * u) + g.n_w * (shift @ shift))
    U = A - np.eye(g.d)
    D = g.X @ U.T + c
    return float(g.p @ np.einsum("ij,ij->i", D, D))


def _apply(X: np.ndarray, A: np.ndarray, c: np.ndarray, a: np.ndarray | None) -> np.ndarray:
    return X * a + c if a is not None else X @ A.T + c


def _polish(g: _Group, A: np.ndarray, c: np.ndarray, rel_tol: float):
    """Shift c along w so that every fitted member is valid in float64 (spec: validity polish).

    The members are lifted a few ulps above the threshold, so that evaluating their scores in another
    order (``transform`` then the score, other batch sizes where BLAS rounds differently) keeps them valid.
    """
    s = _ext.scores(g.X, A.T @ g.w, float(g.w @ c + g.b))
    # Rounding of a score evaluated in another order is bounded by ~ d eps sum_k |w_k T_k(x)| + |b|:
    # bound max |T_k(x_i)| by max |x| * (max row sum of |A|) + max |c|.
    tmax = g.absmax * float(np.abs(A).sum(1).max()) + float(np.abs(c).max())
    guard = 4 * (g.d + 1) * np.finfo(float).eps * (float(np.abs(g.w).sum()) * tmax + abs(g.b) + abs(g.tau) + 1.0)
    short = g.tau + guard - float(s.min())
    if short <= 0:
        return c, False
    # w @ (short * wM / |wM|^2) = short: every score rises by `short`, up to rounding far below `guard`
    return c + short * g.wM / g.nw2, short > rel_tol * g.scale_m + guard
