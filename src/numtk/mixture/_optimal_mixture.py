"""optimal_mixture: the data mixture a fitted mixture law prefers at a model size (spec §4, §3.3 P2/P3)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import LinearConstraint, linprog, lsq_linear, minimize

from numtk._lib import NumtkWarning, Result, normalize_rng, single_blas_thread
from numtk._lib._constraints import constraints as _declare
from numtk._lib._validation import as_array, check_finite, check_int, check_real

__all__ = ["optimal_mixture"]

#: forms whose losses are, at a fixed size, a constant plus exponentials of affine functions of r (convex)
_CONVEX_FORMS = ("camel", "separable", "additive", "data_mixing")
_MAX_STARTS = 10_000
_BOUND_TOL = 1e-9     # a weight within this of a bound is at the bound (and is snapped onto it)
_FTOL = 1e-14         # SLSQP's ftol (spec §4)
_MAXITER = 1000
_KKT_FLOOR = 1e-4     # the least weight of a capacity-KKT mixture


# ------------------------------------------------------------------------------------------------------
# arguments
# ------------------------------------------------------------------------------------------------------
def _weight_vector(value: Any, name: str, n: int, per: str) -> np.ndarray:
    """n non-negative weights, not all zero (a scalar counts as one weight)."""
    v = as_array(value, name, kinds="biuf").astype(np.float64)
    if v.ndim == 0:
        v = v[None]
    if v.shape != (n,):
        raise ValueError(f"`{name}` must have one weight per {per} ({n}); got shape {v.shape}")
    check_finite(v, name)
    if (v < 0).any() or not (v > 0).any():
        raise ValueError(f"`{name}` must be non-negative and not all zero")
    return v


def _check_law(law: Any) -> tuple[int, int]:
    ok = (callable(getattr(law, "mixture_gradient", None)) and hasattr(law, "n_domains_")
          and hasattr(law, "n_outputs_"))
    if not ok:
        raise TypeError("`law` must be a fitted MixtureLaw (an object with mixture_gradient, n_domains_ and "
                        f"n_outputs_); got {type(law).__name__}")
    M = check_int(law.n_domains_, "law.n_domains_", minimum=1)
    V = check_int(law.n_outputs_, "law.n_outputs_", minimum=1)
    return M, V


def _vector(value: Any, M: int, name: str, what: str) -> np.ndarray:
    arr = as_array(value, name, kinds="biuf").astype(np.float64)
    if arr.ndim == 0:
        arr = np.full(M, float(arr))
    if arr.shape != (M,):
        raise ValueError(f"`{name}` {what} must be a number or have one entry per domain ({M}); got shape "
                         f"{arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"`{name}` {what} must not contain NaN")
    return arr


def _parse_constraints(cons: Any, M: int):
    """Box bounds lo, hi (M,) within [0, 1] and general rows A (m, M), lb, ub (m,)."""
    lo, hi = np.zeros(M), np.ones(M)
    rows, lbs, ubs = [], [], []
    items = [] if cons is None else (list(cons) if isinstance(cons, (list, tuple)) else [cons])
    for item in items:
        if isinstance(item, dict):
            unknown = set(item) - {"lower", "upper"}
            if unknown:
                raise ValueError(f"`constraints` dicts take the keys 'lower' and 'upper'; got {sorted(map(str, unknown))}")
            if item.get("lower") is not None:
                lo = np.maximum(lo, _vector(item["lower"], M, "constraints", "'lower'"))
            if item.get("upper") is not None:
                hi = np.minimum(hi, _vector(item["upper"], M, "constraints", "'upper'"))
        elif isinstance(item, LinearConstraint):
            A = as_array(item.A, "constraints", kinds="biuf").astype(np.float64)
            A = np.atleast_2d(A)
            if A.ndim != 2 or A.shape[1] != M:
                raise ValueError(f"`constraints`: a LinearConstraint's A must have {M} columns (one per domain); "
                                 f"got shape {A.shape}")
            check_finite(A, "constraints")
            m = A.shape[0]
            try:
                lb = np.broadcast_to(np.asarray(item.lb, dtype=np.float64), (m,))
                ub = np.broadcast_to(np.asarray(item.ub, dtype=np.float64), (m,))
            except (ValueError, TypeError):
                raise ValueError(f"`constraints`: a LinearConstraint's lb and ub must broadcast to ({m},)") from None
            if np.isnan(lb).any() or np.isnan(ub).any() or (lb > ub).any():
                raise ValueError("`constraints`: a LinearConstraint needs lb <= ub without NaN")
            rows.append(A)
            lbs.append(lb)
            ubs.append(ub)
        else:
            raise TypeError("`constraints` must be None, a dict(lower=, upper=), a scipy.optimize.LinearConstraint "
                            f"or a list of them; got {type(item).__name__}")
    A = np.vstack(rows) if rows else np.zeros((0, M))
    lb = np.concatenate(lbs) if lbs else np.zeros(0)
    ub = np.concatenate(ubs) if ubs else np.zeros(0)
    return lo, hi, A, lb, ub


def _benchmark_setup(benchmarks: Any, benchmark_weights: Any, V: int):
    if benchmarks is None:
        if benchmark_weights is not None:
            raise ValueError("`benchmark_weights` needs `benchmarks`")
        return None
    laws = list(benchmarks) if isinstance(benchmarks, (list, tuple)) else [benchmarks]
    if not laws:
        raise ValueError("`benchmarks` must hold at least one LossToBenchmarkLaw")
    U = []
    for b in laws:
        if not (callable(getattr(b, "predict", None)) and callable(getattr(b, "derivative", None))
                and hasattr(b, "loss_weights_")):
            raise TypeError("`benchmarks` must be a fitted LossToBenchmarkLaw or a list of them; got "
                            f"{type(b).__name__}")
        u = np.asarray(b.loss_weights_, dtype=np.float64)
        if u.shape != (V,):
            raise ValueError(f"`benchmarks`: each law's loss_weights_ must map the mixture law's {V} validation "
                             f"losses (fit it on {V} loss columns); got {u.shape[0] if u.ndim == 1 else u.shape}")
        U.append(u)
    B = len(laws)
    if benchmark_weights is None:
        v = np.full(B, 1.0 / B)
    else:
        v = _weight_vector(benchmark_weights, "benchmark_weights", B, "benchmark")
    return laws, np.array(U), v


# ------------------------------------------------------------------------------------------------------
# the feasible set: projections, vertices, the feasibility LP
# ------------------------------------------------------------------------------------------------------
def _project_box_simplex(y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Euclidean projection of y onto {sum r = 1, lo <= r <= hi} (nonempty): r = clip(y - tau, lo, hi)."""
    a, b = float(np.min(y - hi)) - 1.0, float(np.max(y - lo)) + 1.0   # sum >= 1 at a, <= 1 at b
    for _ in range(200):
        tau = 0.5 * (a + b)
        if np.clip(y - tau, lo, hi).sum() > 1.0:
            a = tau
        else:
            b = tau
        if b - a <= 1e-16 * max(1.0, abs(tau)):
            break
    r = np.clip(y - 0.5 * (a + b), lo, hi)
    return _fix_sum(r, lo, hi)


def _fix_sum(r: np.ndarray, lo: np.ndarray, hi: np.ndarray, movable: np.ndarray | None = None) -> np.ndarray:
    """Put the rounding left in 1 - sum(r) onto the (movable) weight with the most room for it."""
    r = r.copy()
    d = 1.0 - r.sum()
    if d != 0.0:
        room = (hi - r) if d > 0 else (r - lo)
        if movable is not None:
            room = np.where(movable, room, 0.0)
        j = int(np.argmax(room))
        if room[j] >= abs(d):
            r[j] += d
    return r


def _greedy_vertex(c: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """argmin c.r over {sum r = 1, lo <= r <= hi}: lower bounds, then fill the cheapest domains."""
    r = lo.copy()
    left = 1.0 - r.sum()
    for j in np.argsort(c, kind="stable"):
        take = min(left, hi[j] - lo[j])
        r[j] += take
        left -= take
        if left <= 0:
            break
    return r


def _lp(c: np.ndarray, lo, hi, A, lb, ub):
    """HiGHS on min c.r over the feasible set; returns the OptimizeResult."""
    M = c.size
    A_ub, b_ub = [], []
    fin_u, fin_l = np.isfinite(ub), np.isfinite(lb)
    if fin_u.any():
        A_ub.append(A[fin_u])
        b_ub.append(ub[fin_u])
    if fin_l.any():
        A_ub.append(-A[fin_l])
        b_ub.append(-lb[fin_l])
    return linprog(c, A_ub=np.vstack(A_ub) if A_ub else None, b_ub=np.concatenate(b_ub) if b_ub else None,
                   A_eq=np.ones((1, M)), b_eq=[1.0], bounds=np.c_[lo, hi], method="highs")


def _check_feasible(lo, hi, A, lb, ub):
    bad = np.flatnonzero(lo > hi)
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"`constraints` are infeasible: domain {j} has lower bound {lo[j]:.6g} above its upper "
                         f"bound {hi[j]:.6g} (weights lie in [0, 1])")
    if lo.sum() > 1.0 + 1e-12:
        raise ValueError(f"`constraints` are infeasible: the lower bounds sum to {lo.sum():.6g} > 1")
    if hi.sum() < 1.0 - 1e-12:
        raise ValueError(f"`constraints` are infeasible: the upper bounds sum to {hi.sum():.6g} < 1")


# ------------------------------------------------------------------------------------------------------
# the solver
# ------------------------------------------------------------------------------------------------------
class _Objective:
    """F(r) and its gradient through law.mixture_gradient; r is put back on the simplex before the law sees
    it (SLSQP's iterates can leave it by rounding) and F is continued linearly from there."""

    def __init__(self, law, size, tokens, w, bench):
        self.law, self.size, self.tokens, self.w, self.bench = law, size, tokens, w, bench
        self._x = None
        self.n_eval = 0

    def parts(self, r: np.ndarray):
        rr = np.maximum(r, 0.0)
        s = rr.sum()
        rr = rr / s if s > 0 else np.full(r.size, 1.0 / r.size)
        kw = {} if self.tokens is None else {"tokens": self.tokens}
        L, G = self.law.mixture_gradient(self.size, rr, **kw)
        L, G = np.asarray(L, dtype=np.float64).reshape(-1), np.asarray(G, dtype=np.float64)
        G = G.reshape(L.size, r.size)
        self.n_eval += 1
        if self.bench is None:
            F, g, scores = float(self.w @ L), self.w @ G, None
        else:
            laws, U, v = self.bench
            try:
                scores = np.array([b.predict(L[None, :])[0] for b in laws])
                slopes = np.array([b.derivative(L[None, :])[0] for b in laws])
            except ValueError as exc:
                # the benchmark law's own message names its input (`X`), which the caller never passed
                raise ValueError(f"`benchmarks`: a benchmark law cannot score the mixture law's losses {L.tolist()} "
                                 f"at mixture {rr.tolist()} (its curve overflows there: slope "
                                 "too large for these losses)") from exc
            if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(slopes))):
                raise ValueError(f"`benchmarks`: a benchmark law gives a non-finite score or slope at the mixture "
                                 f"law's losses {L.tolist()}")
            F = -float(v @ scores)
            g = -((v * slopes) @ U) @ G
        return F + float(g @ (r - rr)), g, L, scores

    def _eval(self, r):
        if self._x is None or not np.array_equal(r, self._x):
            self._x = r.copy()
            self._val = self.parts(r)
        return self._val

    def fun(self, r):
        return self._eval(r)[0]

    def jac(self, r):
        return self._eval(r)[1]


def _polish(obj: _Objective, r: np.ndarray, lo, hi, feasible, iters: int = 4) -> np.ndarray:
    """Newton steps on the weights strictly inside their bounds, the others held (SLSQP stops on a change of
    F below ftol, which leaves the gradient condition at ~1e-8; two Newton steps take it to rounding).

    The reduced Hessian comes from central differences of the analytic gradient along e_j - e_k (k the
    largest free weight), which stay on the simplex. A step that leaves the box or a linear row, or raises F,
    ends the polish."""
    M = r.size
    for _ in range(iters):
        S = np.flatnonzero((r > lo + _BOUND_TOL) & (r < hi - _BOUND_TOL))
        if S.size < 2:
            break
        F0, g = obj.parts(r)[:2]
        k = S[np.argmax(r[S])]
        others = S[S != k]
        rg = g[others] - g[k]
        if np.max(np.abs(rg)) <= 1e-14 * max(1.0, float(np.max(np.abs(g)))):
            break
        room = float(np.min(np.minimum(r[S] - lo[S], hi[S] - r[S])))
        h = min(1e-5, 0.25 * room)
        if h < 1e-12:
            break
        H = np.empty((others.size, others.size))
        for i, j in enumerate(others):
            d = np.zeros(M)
            d[j], d[k] = 1.0, -1.0
            gp, gm = obj.parts(r + h * d)[1], obj.parts(r - h * d)[1]
            H[:, i] = ((gp[others] - gp[k]) - (gm[others] - gm[k])) / (2.0 * h)
        try:
            y = -np.linalg.solve(0.5 * (H + H.T), rg)
        except np.linalg.LinAlgError:
            break
        cand = r.copy()
        cand[others] += y
        cand[k] -= y.sum()
        if not (np.all(np.isfinite(cand)) and np.all(cand >= lo) and np.all(cand <= hi) and feasible(cand)):
            break
        if obj.parts(cand)[0] > F0 + 1e-15 * max(1.0, abs(F0)):
            break
        r = cand
    return r


def _kkt(g, r, lo, hi, A, lb, ub, tol=_BOUND_TOL):
    """Stationarity residual (max norm) with multipliers of the right signs, and the active sets."""
    fixed = hi - lo <= tol
    at_lo = (r <= lo + tol) & ~fixed
    at_hi = (r >= hi - tol) & ~fixed & ~at_lo
    free = ~(fixed | at_lo | at_hi)
    scale = np.maximum(1.0, np.abs(A).sum(axis=1)) if A.size else np.zeros(0)
    Ar = A @ r if A.size else np.zeros(0)
    row_lo = np.isfinite(lb) & (Ar <= lb + tol * scale)
    row_hi = np.isfinite(ub) & (Ar >= ub - tol * scale)
    rows = np.flatnonzero(row_lo | row_hi)
    if rows.size == 0:
        if free.any():
            nu = float(np.median(g[free]))
        else:  # every weight at a bound: the nu of least residual
            top = np.max(g[at_hi]) if at_hi.any() else -np.inf      # nu >= g at upper bounds
            bot = np.min(g[at_lo]) if at_lo.any() else np.inf       # nu <= g at lower bounds
            nu = 0.5 * (top + bot) if np.isfinite(top) and np.isfinite(bot) else (
                top if np.isfinite(top) else (bot if np.isfinite(bot) else 0.0))
        parts = [np.abs(g[free] - nu), np.maximum(0.0, nu - g[at_lo]), np.maximum(0.0, g[at_hi] - nu), [0.0]]
        res = float(max(np.max(p) if len(p) else 0.0 for p in parts))
    else:
        # g = nu 1 + sum_k mu_k a_k + sum_j eta_j e_j: mu >= 0 at a lower row, <= 0 at an upper one (both
        # signs for an equality row); eta >= 0 at a lower bound, <= 0 at an upper one
        cols = [np.ones_like(g)] + [A[k] for k in rows] + [np.eye(g.size)[j] for j in np.flatnonzero(at_lo | at_hi | fixed)]
        lb_m = [-np.inf] + [(0.0 if not row_hi[k] else -np.inf) for k in rows] + \
               [(0.0 if at_lo[j] else -np.inf) for j in np.flatnonzero(at_lo | at_hi | fixed)]
        ub_m = [np.inf] + [(0.0 if not row_lo[k] else np.inf) for k in rows] + \
               [(0.0 if at_hi[j] else np.inf) for j in np.flatnonzero(at_lo | at_hi | fixed)]
        C = np.array(cols).T
        sol = lsq_linear(C, g, bounds=(lb_m, ub_m), method="bvls", tol=1e-14)
        res = float(np.max(np.abs(C @ sol.x - g)))
    active = np.zeros(g.size, dtype=np.int8)
    active[at_lo] = -1
    active[at_hi | fixed] = 1
    return res, active, rows


@_declare(law="option", model_size="real>0", constraints=("mapping", "option"), weights="array1d",
          tokens="real>0", benchmarks="option", benchmark_weights="array1d", n_starts="int>=0", rng="rng")
def optimal_mixture(law: Any, model_size: float, constraints: Any = None, *, weights: ArrayLike | None = None,
                    tokens: float | None = None, benchmarks: Any = None, benchmark_weights: ArrayLike | None = None,
                    n_starts: int = 8, rng: Any = None) -> Result:
    r"""The data mixture that minimises a fitted law's predicted loss (or maximises benchmark scores) at a size.

    Minimises over the simplex :math:`r \in \Delta^{M-1}` (and optional bounds and linear constraints)

    .. math::

        F(r) = \sum_i w_i L_i(N^*, r) \qquad\text{or}\qquad
        F(r) = -\sum_b v_b\, a_b\Big(\sum_i u_{bi} L_i(N^*, r)\Big),

    the weighted validation losses of the law at the target size :math:`N^*`, or (with `benchmarks`) the
    weighted benchmark scores predicted from them by loss-to-benchmark laws :math:`a_b` with loss weights
    :math:`u_b` (their ``loss_weights_``). Analytic gradients (the law's ``mixture_gradient`` and the chain
    rule through each benchmark law's ``derivative``), SLSQP from several feasible starts, and a certificate:
    the KKT residual of the solution.

    Parameters
    ----------
    law : MixtureLaw
        A fitted law (or any object with ``mixture_gradient(model_size, mixture, tokens=...)`` returning the
        values (V,) and their gradient (V, M) in the weights, ``n_domains_`` and ``n_outputs_``).
    model_size : float
        The target size :math:`N^*` > 0.
    constraints : dict, scipy.optimize.LinearConstraint or list of them, optional
        Beyond the simplex: ``dict(lower=, upper=)`` (a number or one bound per domain; an availability cap
        is an upper bound, e.g. ``epochs_max * available_tokens_j / D_target``), and general linear
        constraints ``lb <= A r <= ub`` as :class:`~scipy.optimize.LinearConstraint` objects on the M weights.
    weights : array_like of shape (V,), optional
        The loss aggregation w (non-negative, not all zero; not normalised); default 1/V. Not used with
        `benchmarks`.
    tokens : float, optional
        Training tokens D > 0 for laws that use them (``law.uses_tokens_``).
    benchmarks : LossToBenchmarkLaw or list of them, optional
        Maximise predicted benchmark scores instead: each law's ``loss_weights_`` combine the V validation
        losses (fit it on the V loss columns).
    benchmark_weights : array_like of shape (B,), optional
        v, the weights of the benchmarks (non-negative, not all zero); default 1/B.
    n_starts : int, default 8
        Random Dirichlet(1) starts (projected onto the feasible set) added for objectives that may be
        non-convex: with `benchmarks`, and for laws other than camel, separable, additive and data_mixing
        (``'capacity_kkt'``, objects without a ``form``). Convex problems use only the deterministic starts.
        At most 10,000.
        For ``'capacity_kkt'`` every weight is kept at least 1e-4 (its noise term diverges at 0; Dai and
        Zheng's optimiser uses the same floor).
    rng : {None, int, numpy.random.Generator}, optional
        Draws the random starts.

    Returns
    -------
    Result
        mixture : ndarray of shape (M,)
            The optimal weights r*, on the simplex; weights within 1e-9 of a bound are set onto it.
        value : float
            F(r*): the aggregated loss, or minus the weighted benchmark score.
        losses : ndarray of shape (V,)
            The law's losses at r*.
        scores : ndarray of shape (B,) or None
            The benchmark scores predicted at r* (None without `benchmarks`).
        kkt_residual : float
            Max-norm residual of the first-order (KKT) conditions at r* (see Notes); 0 at an exact optimum.
        active : ndarray of int8, shape (M,)
            -1 for a weight at its lower bound (0 unless `constraints` raise it), +1 at its upper bound (or
            held by equal bounds), 0 free.
        active_rows : ndarray of int
            Indices of the general linear constraints (rows of the stacked ``A``) at one of their bounds.
        n_starts : int
            Starts run.
        success : bool
            Whether SLSQP reported success for the kept start and the KKT residual is below
            ``1e-6 * max(1, |value|)``.
        message : str
            SLSQP's message for the kept start, or why there was nothing to optimise.

    Raises
    ------
    ValueError
        Infeasible `constraints` (the message names the bounds that conflict, or the LP's verdict), shapes that
        do not match the law, benchmark laws that do not map the law's V losses, invalid values.
    TypeError
        `law`, `benchmarks` or `constraints` of the wrong kind.

    Warns
    -----
    NumtkWarning
        With one validation set (V = 1) and no caps on an exp-affine law: the optimum is a vertex (a single
        domain, spec pitfall 2). When the KKT residual exceeds ``1e-6 * max(1, |value|)``.

    See Also
    --------
    MixtureLaw : the fitted law.
    LossToBenchmarkLaw : scores from losses.

    Notes
    -----
    **Convexity** (spec P2). At a fixed size every :math:`L_i` of the camel, separable, additive and
    data-mixing laws is a constant plus exponentials of affine functions of r, so :math:`\sum_i w_i L_i` with
    :math:`w \ge 0` is convex and a local optimum is global. With one validation set the objective is
    :math:`\exp(\text{affine})` and its minimum over the simplex is a vertex unless caps bind: interior optima
    need V >= 2, as in Data Mixing Laws. The benchmark objective (a sigmoid of a convex function) and the
    capacity-KKT law are not convex; random starts are added there and the solution is a local optimum.

    **Mixture drift** (spec P3). At an interior optimum of camel, :math:`\sum_i w_i e^{\phi_i(r)}
    (\theta_{ij} - \ell\alpha_{ij})` is equal for all j with :math:`r_j > 0`
    (:math:`\ell = \log(N^*/N_0)`, :math:`\phi_i` the exponent): as :math:`N^*` grows, domains with large
    size exponents :math:`\alpha_{ij}` gain weight, so the optimum moves with the target size.

    **Algorithm.** (1) Feasibility: bounds are checked in closed form (lower bounds summing to at most 1,
    upper bounds to at least 1); with general constraints a HiGHS LP minimising :math:`c^\top r`,
    :math:`c_j = F(e_j)` (the objective at the pure domains), decides feasibility and gives the first start.
    (2) Starts: that LP point, the uniform mixture projected onto the feasible set, and the best vertex (the
    greedy fill of the domains in order of :math:`F(e_j)` under the bounds; the pure domain of least F without
    caps); plus `n_starts` Dirichlet(1) points for non-convex objectives. (3) SLSQP with the analytic gradient,
    :math:`\sum_j r_j = 1`, the bounds and the linear rows, ``ftol = 1e-14``; the feasible result of least F
    is kept. (4) KKT residual: with :math:`\nu` the median of :math:`\partial_j F` over the free weights, the
    largest of :math:`|\partial_j F - \nu|` (free), :math:`\max(0, \nu - \partial_j F)` (at a lower bound)
    and :math:`\max(0, \partial_j F - \nu)` (at an upper bound); with active general rows, the residual of
    the sign-constrained least-squares fit of the gradient by the constraint normals.

    References
    ----------
    .. [1] J. Li, X. Gu, J. Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization",
       ICML 2026, arXiv:2603.08022.
    .. [2] J. Ye et al., "Data Mixing Laws: Optimizing Data Mixtures by Predicting Language Modeling
       Performance", ICLR 2025, arXiv:2403.16952.

    Examples
    --------
    Two validation sets, each helped by a different domain: the best mixture is interior, and at a larger
    target it moves towards domain 1, whose help to the second set grows with size (alpha = 0.3).

    >>> import numpy as np
    >>> from numtk.mixture import MixtureLaw, optimal_mixture
    >>> law = MixtureLaw.from_params("camel", {"E": [1.0, 1.0], "theta": [[0.0, 1.0], [1.0, 0.0]],
    ...                                        "alpha": [[0.1, 0.1], [0.1, 0.3]]}, reference_size=1e8)
    >>> small, large = optimal_mixture(law, 1e8), optimal_mixture(law, 1e10)
    >>> small.mixture.round(4), large.mixture.round(4)
    (array([0.5, 0.5]), array([0.4342, 0.5658]))
    >>> bool(large.kkt_residual < 1e-12)
    True
    >>> capped = optimal_mixture(law, 1e10, dict(upper=[1.0, 0.5]))
    >>> capped.mixture.round(4), capped.active.tolist()
    (array([0.5, 0.5]), [0, 1])
    """
    M, V = _check_law(law)
    N = check_real(model_size, "model_size", low=0.0, low_open=True)
    n_starts = check_int(n_starts, "n_starts", minimum=0, maximum=_MAX_STARTS)
    gen = normalize_rng(rng)
    uses_tokens = bool(getattr(law, "uses_tokens_", False))
    if tokens is not None:
        tokens = check_real(tokens, "tokens", low=0.0, low_open=True)
        if not uses_tokens:
            raise ValueError("`tokens` is given, but the law does not use tokens")
    elif uses_tokens:
        raise ValueError("`tokens` is required: the law uses tokens")
    bench = _benchmark_setup(benchmarks, benchmark_weights, V)
    if weights is not None:
        if bench is not None:
            raise ValueError("`weights` aggregate losses; with `benchmarks` each law's loss_weights_ does")
        w = _weight_vector(weights, "weights", V, "validation set")
    else:
        w = np.full(V, 1.0 / V)
    if constraints is not None and not isinstance(constraints, (dict, list, tuple, LinearConstraint)):
        raise TypeError("`constraints` must be None, a dict(lower=, upper=), a scipy.optimize.LinearConstraint "
                        f"or a list of them; got {type(constraints).__name__}")
    lo, hi, A, lb, ub = _parse_constraints(constraints, M)
    form = getattr(law, "form", None)
    if form == "capacity_kkt":  # its noise term diverges at a zero weight (Dai and Zheng optimise h >= 1e-4)
        lo = np.maximum(lo, _KKT_FLOOR)
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    _check_feasible(lo, hi, A, lb, ub)

    convex = bench is None and form in _CONVEX_FORMS
    if V == 1 and M > 1 and form in _CONVEX_FORMS and np.all(hi >= 1.0) and A.shape[0] == 0:
        warnings.warn("optimal_mixture: the law has one validation set, so the optimum of its exp-affine loss "
                      "is a vertex (a single-domain mixture) unless caps bind; aggregate several validation "
                      "sets or pass upper bounds in `constraints`", NumtkWarning, stacklevel=2)

    obj = _Objective(law, N, tokens, w, bench)
    eye = np.eye(M)
    vertex_values = np.array([obj.parts(eye[j])[0] for j in range(M)])

    starts = []
    if A.shape[0]:
        lp = _lp(vertex_values, lo, hi, A, lb, ub)
        if lp.status == 2:
            raise ValueError(f"`constraints` are infeasible: no mixture on the simplex satisfies the bounds and the "
                             f"{A.shape[0]} linear constraint row(s) (HiGHS: {lp.message})")
        if lp.status != 0 or lp.x is None:  # pragma: no cover - unbounded is impossible on the simplex
            raise ValueError(f"`constraints`: the feasibility LP failed (HiGHS: {lp.message})")
        starts.append(np.clip(lp.x, lo, hi))
    starts.append(_project_box_simplex(np.full(M, 1.0 / M), lo, hi))
    starts.append(_greedy_vertex(vertex_values, lo, hi))
    if not convex and n_starts:
        for y in gen.dirichlet(np.ones(M), size=n_starts):
            starts.append(_project_box_simplex(y, lo, hi))
    # drop duplicate starts (equal to 12 decimals), keeping the first of each in the order above
    S0 = np.asarray(starts)
    _, first = np.unique(np.round(S0, 12), axis=0, return_index=True)
    unique = list(S0[np.sort(first)])

    cons = [{"type": "eq", "fun": lambda r: np.array([r.sum() - 1.0]), "jac": lambda r: np.ones((1, M))}]
    fin_l, fin_u = np.isfinite(lb), np.isfinite(ub)
    eq_rows = fin_l & fin_u & (lb == ub)
    if eq_rows.any():
        Ae, be = A[eq_rows], lb[eq_rows]
        cons.append({"type": "eq", "fun": lambda r: Ae @ r - be, "jac": lambda r: Ae})
    if (fin_l & ~eq_rows).any():
        Al, bl = A[fin_l & ~eq_rows], lb[fin_l & ~eq_rows]
        cons.append({"type": "ineq", "fun": lambda r: Al @ r - bl, "jac": lambda r: Al})
    if (fin_u & ~eq_rows).any():
        Au, bu = A[fin_u & ~eq_rows], ub[fin_u & ~eq_rows]
        cons.append({"type": "ineq", "fun": lambda r: bu - Au @ r, "jac": lambda r: -Au})
    bounds = list(zip(lo, hi))

    def feasible(r):
        tol = 1e-7
        ok = abs(r.sum() - 1.0) <= tol and np.all(r >= lo - tol) and np.all(r <= hi + tol)
        if A.shape[0]:
            Ar = A @ r
            scale = tol * np.maximum(1.0, np.abs(A).sum(axis=1))
            ok = ok and np.all(Ar >= lb - scale) and np.all(Ar <= ub + scale)
        return bool(ok)

    best = None
    if M == 1:
        best = (np.ones(1), True, "one domain: the mixture is (1,)")
    else:
        # SLSQP makes hundreds of tiny LAPACK calls, which BLAS threads only slow down on busy cores
        with np.errstate(over="ignore", invalid="ignore"), single_blas_thread():
            for r0 in unique:
                res = minimize(obj.fun, r0, jac=obj.jac, method="SLSQP", bounds=bounds, constraints=cons,
                               options={"ftol": _FTOL, "maxiter": _MAXITER})
                r = np.clip(res.x, lo, hi)
                if not np.all(np.isfinite(r)) or not feasible(r):
                    r = r0
                F = obj.fun(r)
                if np.isfinite(F) and (best is None or F < best[3]):
                    best = (r, bool(res.success), str(res.message), F)
        if best is None:
            raise ValueError(f"`law`: its losses are not finite at any start (model_size={N:.6g})")
        best = best[:3]
    r, ok, message = best
    if M > 1:
        r = _polish(obj, r, lo, hi, feasible)
    # weights within the tolerance of a bound go onto it; the rounding left goes to the free weights
    snap_lo, snap_hi = np.abs(r - lo) <= _BOUND_TOL, np.abs(r - hi) <= _BOUND_TOL
    r = _fix_sum(np.where(snap_lo, lo, np.where(snap_hi, hi, r)), lo, hi, ~(snap_lo | snap_hi))
    F, g, L, scores = obj.parts(r)
    res_kkt, active, rows = _kkt(g, r, lo, hi, A, lb, ub)
    tol_kkt = 1e-6 * max(1.0, abs(F))
    if res_kkt > tol_kkt:
        warnings.warn(f"optimal_mixture: the KKT residual {res_kkt:.3g} exceeds {tol_kkt:.3g}; the mixture may "
                      "not be optimal", NumtkWarning, stacklevel=2)
    return Result(mixture=r, value=float(F), losses=L, scores=scores, kkt_residual=float(res_kkt), active=active,
                  active_rows=rows, n_starts=len(unique) if M > 1 else 0, success=bool(ok and res_kkt <= tol_kkt),
                  message=message)
