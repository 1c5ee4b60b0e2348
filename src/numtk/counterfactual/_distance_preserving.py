"""Per-point counterfactuals with bi-Lipschitz pair constraints (the paper's "bilipschitz" baseline).

A non-convex QCQP: the lower distance bounds make the feasible set non-convex. Without a global
solver numtk returns a certified feasible point (the best of feasible affine starts and their local
improvements by an augmented Lagrangian method) together with a lower bound (Wachter's cost, or the
Shor semidefinite relaxation) and the relative gap between them. Spec ``counterfactual.md`` section 4.
"""

from __future__ import annotations

import importlib.util
import warnings
from types import SimpleNamespace
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._progress import progress_bar
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import check_bool, check_int, check_option, check_real
from numtk._lib._workers import single_blas_thread
from numtk._lib._warnings import NumtkWarning
from numtk.counterfactual._baselines import (
    _pair_sqdist,
    _pair_violation,
    _polish_validity,
    _resolve_pairs,
    _score_margin,
    _setup,
    _wachter,
)
from numtk.counterfactual._common import (
    MAX_DISTORTION,
    InfeasibleRecourseError,
    check_magnitude,
    check_solver,
    check_solver_options,
)

__all__ = ["distance_preserving_counterfactuals"]

# The Shor relaxation is attempted only when its PSD cone has order at most this.
_SDP_MAX_ORDER = 400
# Outer ALM iterations stop once the largest relative violation is below this fraction of `tol`
# (leaving room for the final validity polish) and the projected gradient is below _PG_TOL.
_ALM_FEAS_FRACTION = 0.5
_PG_TOL = 1e-6
_RHO_MAX = 1e9
_RHO0 = 10.0
# The penalty grows tenfold when an outer iteration reduced the violation by less than this factor.
_RHO_DECREASE = 0.25
# Initial-penalty factor of the retry from a feasible start whose first local run ended infeasible.
_RHO_RETRY = 100.0
# An infeasible run stops when its violation fell by less than 10% over this many outer iterations.
_STUCK_WINDOW = 5
_INNER_MAXITER = 3000
# Relative change of the objective over three outer iterations below which a feasible run stops.
_STALL = 1e-9
# A converged candidate within this relative cost of the best one is preferred to it.
_SAME_COST = 1e-8
# n_random_starts=None: this many random isometry starts when the reduced problem is this small.
_AUTO_RANDOM_STARTS = 10
_AUTO_RANDOM_MAX_VARS = 20
# The `message` of each `status`.
_MESSAGES = {
    "trivial": "every point already reaches the threshold inside the bounds: the points stay",
    "optimal": "the cost meets the lower bound (gap <= 1e-9): globally optimal (start {start!r})",
    "local_optimum": "the local solver converged (start {start!r}); the gap to the lower bound remains",
    "feasible": "a feasible point (start {start!r}); the local solver did not converge",
    "infeasible": "no feasible point was found; the least violating candidate (start {start!r}) is returned",
}
# Largest `max_iter` (Ipopt gets ten times as many iterations, in a C int) and `n_random_starts`.
_MAX_ITER = 10**7
_MAX_RANDOM_STARTS = 10**5


# --------------------------------------------------------------------------------------------
# the reduced problem
# --------------------------------------------------------------------------------------------

def _reduce(P: SimpleNamespace, pairs: np.ndarray, D: np.ndarray, K: float) -> SimpleNamespace:
    """Merge identical points joined by a pair, drop immutable columns, and scale lengths to ~1.

    A pair with ``D = 0`` forces equal counterfactuals, so its points become one variable row with
    the summed weight (an exact reformulation). Immutable coordinates are constants: they enter the
    pair constraints through ``c_ij`` (squared distance of the immutable parts) and the validity row
    through ``s_I``. Lengths are divided by ``ell`` (root median pair distance).
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    X, mask, w = P.X, P.mask, P.w
    n = X.shape[0]
    zero = D == 0
    if zero.any():
        g = sp.coo_matrix((np.ones(int(zero.sum())), (pairs[zero, 0], pairs[zero, 1])), shape=(n, n))
        nc, labels = connected_components(g, directed=False)
    else:
        nc, labels = n, np.arange(n)
    reps = np.empty(nc, dtype=np.int64)
    reps[labels[::-1]] = np.arange(n)[::-1]  # first member of each class
    weight = np.bincount(labels, minlength=nc).astype(np.float64)
    cp_ = labels[pairs]
    keep = cp_[:, 0] != cp_[:, 1]
    cp_ = np.sort(cp_[keep], axis=1)
    Dk = D[keep]
    if cp_.shape[0]:
        cp_, first = np.unique(cp_, axis=0, return_index=True)
        Dk = Dk[first]
    ell = float(np.sqrt(np.median(Dk))) if Dk.size else 1.0
    if not ell > 0:
        ell = 1.0
    Xr = X[reps]
    XM = Xr[:, mask] / ell
    imm = ~mask
    cI = _pair_sqdist(Xr[:, imm], cp_) if imm.any() else np.zeros(cp_.shape[0])
    wM = w[mask]
    nw = float(np.linalg.norm(wM))
    sI = Xr[:, imm] @ w[imm] + P.b
    has_v = nw > 0
    wh = wM / nw if has_v else np.zeros_like(wM)
    sh = (sI - P.tau) / (nw * ell) if has_v else np.zeros(nc)
    Dh = Dk / ell**2
    ch = cI / ell**2
    K2 = K * K
    lower = np.flatnonzero(ch < Dh / K2)
    nP = cp_.shape[0]
    E = sp.csr_matrix((np.r_[np.ones(nP), -np.ones(nP)],
                       (np.r_[np.arange(nP), np.arange(nP)], np.r_[cp_[:, 0], cp_[:, 1]])),
                      shape=(nP, nc))
    return SimpleNamespace(labels=labels, reps=reps, p=weight, pairs=cp_, ell=ell, XM=XM, wh=wh, sh=sh,
                           has_v=has_v, Dh=Dh, sD=np.sqrt(Dh), ch=ch, lower=lower, E=E, ET=E.T.tocsr(), K2=K2,
                           lo=P.lo[mask] / ell, hi=P.hi[mask] / ell, nc=nc, dM=int(mask.sum()))


def _constraints(R: SimpleNamespace, Z: np.ndarray):
    """(validity, upper, lower) constraint values, each >= 0 when satisfied, and the pair differences.

    With ``r = |z_i - z_j|^2 / D`` (plus the immutable part), the pair constraints are
    ``(K^2 - r) sqrt(D)`` and ``(r - 1/K^2) sqrt(D)``: lengths, whose gradients ``2 Delta / sqrt(D)``
    have the same size for near and far pairs (the relative form ``K^2 - r`` would make near pairs
    stiffer by ``1/D`` and the inner problems badly conditioned). Relative violations are ``g/sqrt(D)``.
    """
    gv = Z @ R.wh + R.sh if R.has_v else np.zeros(0)
    Delta = R.E @ Z
    r = (np.einsum("ij,ij->i", Delta, Delta) + R.ch) / R.Dh
    return gv, (R.K2 - r) * R.sD, (r[R.lower] - 1.0 / R.K2) * R.sD[R.lower], Delta


def _relative_violation(R: SimpleNamespace, gs) -> float:
    gv, gu, gl = gs
    out = 0.0
    if gv.size:
        out = max(out, float(np.max(-gv)))
    if gu.size:
        out = max(out, float(np.max(-gu / R.sD)))
    if gl.size:
        out = max(out, float(np.max(-gl / R.sD[R.lower])))
    return out


def _objective(R: SimpleNamespace, Z: np.ndarray) -> float:
    diff = Z - R.XM
    return float(R.p @ np.einsum("ij,ij->i", diff, diff))


def _to_full(P: SimpleNamespace, R: SimpleNamespace, Z: np.ndarray) -> np.ndarray:
    """Counterfactuals of every point from the reduced variables (bounds enforced, validity polished)."""
    Xcf = P.X.copy()
    Xcf[:, P.mask] = np.clip(Z, R.lo, R.hi)[R.labels] * R.ell
    if P.bounded:
        Xcf[:, P.mask] = np.clip(Xcf[:, P.mask], P.lo[P.mask], P.hi[P.mask])
    _polish_validity(Xcf, P)
    return Xcf


def _from_full(P: SimpleNamespace, R: SimpleNamespace, Xcf: np.ndarray) -> np.ndarray:
    return Xcf[R.reps][:, P.mask] / R.ell


# --------------------------------------------------------------------------------------------
# local solvers
# --------------------------------------------------------------------------------------------

def _penalty(lam: np.ndarray, g: np.ndarray, rho: float):
    """``max(0, lam - rho g)`` and the PHR term ``sum (max(0, lam - rho g)^2 - lam^2) / (2 rho)``."""
    a = lam - rho * g
    act = a > 0
    val = np.where(act, -lam * g + 0.5 * rho * g * g, -lam * lam / (2.0 * rho))
    return np.where(act, a, 0.0), float(val.sum())


def _alm(R: SimpleNamespace, Z0: np.ndarray, tol: float, max_iter: int, rho_scale: float = 1.0):
    """Augmented Lagrangian (PHR) on the reduced problem with an L-BFGS-B inner solve.

    Constraints g(z) >= 0 with multipliers lam >= 0 and penalty rho enter as
    ``(max(0, lam - rho g)^2 - lam^2) / (2 rho)``; after each inner solve
    ``lam <- max(0, lam - rho g)``, and rho grows tenfold when the violation fell by less than 4x.
    Returns (Z, converged, outer iterations).
    """
    from scipy.optimize import minimize

    nc, dM = R.XM.shape
    lo = np.broadcast_to(R.lo, (nc, dM)).ravel()
    hi = np.broadcast_to(R.hi, (nc, dM)).ravel()
    bnds = list(zip(np.where(np.isfinite(lo), lo, None), np.where(np.isfinite(hi), hi, None)))
    z = np.clip(Z0.ravel(), lo, hi)
    nv, nu, nl = (nc if R.has_v else 0), R.pairs.shape[0], R.lower.size
    lam = [np.zeros(nv), np.zeros(nu), np.zeros(nl)]
    twoD = 2.0 / R.Dh * R.sD  # d r / d Delta = 2 Delta / D, times the sqrt(D) scale of g

    def phi(zf, lam, rho, zr):
        # f(z) - f(zr) in difference form and the penalty terms in the cancellation-free form
        # -lam g + rho g^2 / 2 (active) or -lam^2 / (2 rho) (inactive): the value then carries
        # absolute rounding far below the decreases the line search must resolve near a solution.
        Z = zf.reshape(nc, dM)
        diff = Z - R.XM
        val = float(R.p @ np.einsum("ij,ij->i", Z - zr, diff + (zr - R.XM)))
        grad = 2.0 * R.p[:, None] * diff
        gv, gu, gl, Delta = _constraints(R, Z)
        if nv:
            a, v = _penalty(lam[0], gv, rho)
            val += v
            grad -= a[:, None] * R.wh
        au, v = _penalty(lam[1], gu, rho)
        val += v
        coef = au.copy()  # d phi / d r, per unit sqrt(D) (twoD restores it)
        if nl:
            al, v = _penalty(lam[2], gl, rho)
            val += v
            coef[R.lower] -= al
        grad += R.ET @ ((coef * twoD)[:, None] * Delta)
        return val, grad.ravel()

    def violation(gs):
        return _relative_violation(R, gs)

    Z = z.reshape(nc, dM)
    gs = _constraints(R, Z)[:3]
    viol = max(violation(gs), 0.0)
    f0 = _objective(R, Z)
    sq = sum(float(np.sum(np.minimum(g, 0.0) ** 2)) for g in gs)
    rho = float(np.clip(_RHO0 * rho_scale * max(1.0, f0) / max(1.0, 0.5 * sq), 1e-3, 1e8))
    omega = 1e-2
    converged = False
    target = _ALM_FEAS_FRACTION * tol
    f_hist: list[float] = []
    v_hist: list[float] = []
    it = 0
    for it in range(1, max_iter + 1):
        res = minimize(phi, z, args=(lam, rho, z.reshape(nc, dM).copy()), jac=True, method="L-BFGS-B",
                       bounds=bnds, options=dict(maxiter=_INNER_MAXITER, maxfun=2 * _INNER_MAXITER,
                                                 gtol=omega, ftol=0.0, maxcor=20))
        z = res.x
        Z = z.reshape(nc, dM)
        gs = _constraints(R, Z)[:3]
        lam = [np.maximum(lam_k - rho * g, 0.0) for lam_k, g in zip(lam, gs)]
        new_viol = violation(gs)
        pg = float(np.max(np.abs(z - np.clip(z - res.jac, lo, hi)), initial=0.0))
        f_hist.append(_objective(R, Z))
        if new_viol <= target:
            if pg <= _PG_TOL:
                converged = True
                break
            # Stalled: feasible, and the objective no longer moves (degenerate or ill-conditioned
            # problems, e.g. K close to 1 with many more active pairs than variables).
            if len(f_hist) >= 3 and max(f_hist[-3:]) - min(f_hist[-3:]) <= _STALL * max(f_hist[-1], 1e-300):
                break
        else:
            v_hist.append(new_viol)
            # Stuck at an infeasible stationary point of the violation: more penalty only hurts.
            if len(v_hist) > _STUCK_WINDOW and new_viol > 0.9 * v_hist[-1 - _STUCK_WINDOW]:
                break
        if new_viol > _RHO_DECREASE * viol and new_viol > target:
            rho = min(rho * 10.0, _RHO_MAX)
        viol = new_viol
        omega = max(omega * 0.1, _PG_TOL)
    return Z, converged, it


def _ipopt(R: SimpleNamespace, Z0: np.ndarray, tol: float, max_iter: int, rho_scale: float = 1.0):
    """The same reduced problem through cyipopt's SciPy-style interface (dense constraint Jacobian)."""
    try:
        from cyipopt import minimize_ipopt
    except ImportError as e:
        raise ImportError("local_solver='ipopt' needs cyipopt (pip install cyipopt, or conda-forge)") from e
    nc, dM = R.XM.shape
    lo = np.broadcast_to(R.lo, (nc, dM)).ravel()
    hi = np.broadcast_to(R.hi, (nc, dM)).ravel()
    bnds = list(zip(np.where(np.isfinite(lo), lo, None), np.where(np.isfinite(hi), hi, None)))
    nP = R.pairs.shape[0]
    i0, i1 = R.pairs[:, 0], R.pairs[:, 1]

    def fun(zf):
        return _objective(R, zf.reshape(nc, dM))

    def jac(zf):
        return (2.0 * R.p[:, None] * (zf.reshape(nc, dM) - R.XM)).ravel()

    def cons(zf):
        gv, gu, gl, _ = _constraints(R, zf.reshape(nc, dM))
        return np.concatenate([gv, gu, gl])

    def cons_jac(zf):
        Z = zf.reshape(nc, dM)
        gv, gu, gl, Delta = _constraints(R, Z)
        J = np.zeros((gv.size + nP + gl.size, nc, dM))
        if gv.size:
            J[np.arange(nc), np.arange(nc)] = R.wh
        dr = 2.0 * Delta / R.sD[:, None]  # d (r_p sqrt(D_p)) / d z_i; / d z_j = -dr
        rows = gv.size + np.arange(nP)
        J[rows, i0] = -dr
        J[rows, i1] = dr
        low = gv.size + nP + np.arange(R.lower.size)
        J[low, i0[R.lower]] = dr[R.lower]
        J[low, i1[R.lower]] = -dr[R.lower]
        return J.reshape(J.shape[0], nc * dM)

    res = minimize_ipopt(fun, np.clip(Z0.ravel(), lo, hi), jac=jac, bounds=bnds,
                         constraints=[{"type": "ineq", "fun": cons, "jac": cons_jac}],
                         tol=_ALM_FEAS_FRACTION * tol,
                         options={"max_iter": int(max_iter) * 10, "print_level": 0,
                                  "constr_viol_tol": _ALM_FEAS_FRACTION * tol})
    converged = bool(getattr(res, "success", False))
    return np.asarray(res.x).reshape(nc, dM), converged, int(getattr(res, "nit", 0))


# --------------------------------------------------------------------------------------------
# starts and the Shor bound
# --------------------------------------------------------------------------------------------

def _translation_start(P: SimpleNamespace, Y: np.ndarray | None = None) -> np.ndarray | None:
    """The optimal translation of the group (or of ``Y``, an isometric image of it), or None when the
    box forbids it. An isometry followed by a translation satisfies every pair constraint."""
    from numtk.counterfactual._counterfactual_ext import quadratic_knapsack

    X, mask = (P.X if Y is None else Y), P.mask
    wM = np.where(mask, P.w, 0.0)
    lo = np.where(mask, P.lo - X.min(axis=0), 0.0)
    hi = np.where(mask, P.hi - X.max(axis=0), 0.0)
    if np.any(lo > hi):
        return None
    deficit = P.tau - (X @ P.w + P.b)
    deficit = np.where(deficit > 0, deficit + _score_margin(X, P), deficit)  # as in _wachter
    c, _, status = quadratic_knapsack(wM, np.array([float(deficit.max())]), lo[None], hi[None])
    if status[0] == 2:
        return None
    Xcf = X + c[0]
    _polish_validity(Xcf, P)
    return Xcf


def _isometry_start(P: SimpleNamespace, rng: np.random.Generator) -> np.ndarray | None:
    """A random orthogonal map (Haar, reflections included) of the mutable coordinates about the
    group mean, then the optimal translation: a feasible start in a random orientation."""
    dM = int(P.mask.sum())
    G = rng.standard_normal((dM, dM))
    Q, Rq = np.linalg.qr(G)
    Q = Q * np.where(np.diag(Rq) < 0, -1.0, 1.0)
    Y = P.X.copy()
    XM = P.X[:, P.mask]
    mean = XM.mean(axis=0)
    Y[:, P.mask] = mean + (XM - mean) @ Q.T
    return _translation_start(P, Y)


def _map_start(P: SimpleNamespace, family: str, K: float, solver: str, solver_options: Any):
    """The fitted ``GroupCounterfactualMap`` of ``family`` applied to the group, or None."""
    try:
        from numtk.counterfactual._group_map import GroupCounterfactualMap
    except ImportError:
        return None
    kw: dict[str, Any] = dict(family=family, distortion=K, margin=P.tau)
    if not P.mask.all():
        kw["immutable"] = np.flatnonzero(~P.mask)
    if P.bounded:
        kw["bounds"] = (P.lo, P.hi)
    if family == "psd":
        kw.update(solver=solver, solver_options=solver_options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumtkWarning)
        try:
            gm = GroupCounterfactualMap(**kw).fit(P.X, (P.w, P.b))
        except InfeasibleRecourseError:
            return None
        except Exception as e:  # a failed optional start (e.g. an SDP solver error) is skipped
            if family != "psd" or type(e).__name__ != "SolverError":
                raise
            warnings.warn(f"the psd start was skipped: {e}", NumtkWarning, stacklevel=3)
            return None
    return np.asarray(gm.transform(P.X), dtype=np.float64)


def _shor(R: SimpleNamespace, solver: str, solver_options: Any):
    """Shor relaxation of the reduced QCQP: (lower bound in scaled units, rounded Z) or None."""
    from numtk._lib._optional import import_optional

    cp = import_optional("cvxpy", purpose="distance_preserving_counterfactuals' lower bound (the Shor SDP)")
    import scipy.sparse as sp

    nc, dM = R.XM.shape
    Z = cp.Variable((nc, dM))
    G = cp.Variable((nc, nc), symmetric=True)
    cons = [cp.bmat([[np.eye(dM), Z.T], [Z, G]]) >> 0]
    i0, i1 = R.pairs[:, 0], R.pairs[:, 1]
    nP = i0.size
    rows = np.repeat(np.arange(nP), 3)
    cols = np.column_stack([i0 + i0 * nc, i1 + i1 * nc, i0 + i1 * nc]).ravel()
    vals = np.tile([1.0, 1.0, -2.0], nP)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(nP, nc * nc))
    q = A @ cp.vec(G, order="F")
    cons.append(q + R.ch <= R.K2 * R.Dh)
    if R.lower.size:
        cons.append(q[R.lower] + R.ch[R.lower] >= R.Dh[R.lower] / R.K2)
    if R.has_v:
        cons.append(Z @ R.wh + R.sh >= 0)
    for k in np.flatnonzero(np.isfinite(R.lo)):
        cons.append(Z[:, k] >= R.lo[k])
    for k in np.flatnonzero(np.isfinite(R.hi)):
        cons.append(Z[:, k] <= R.hi[k])
    const = float(R.p @ np.einsum("ij,ij->i", R.XM, R.XM))
    obj = R.p @ cp.diag(G) - 2 * cp.sum(cp.multiply(R.p[:, None] * R.XM, Z)) + const
    prob = cp.Problem(cp.Minimize(obj), cons)
    try:
        prob.solve(solver=solver.upper(), **(solver_options or {}))
    except cp.error.SolverError as e:
        warnings.warn(f"the Shor relaxation failed ({e}); lower bound from Wachter's cost only",
                      NumtkWarning, stacklevel=3)
        return None
    if prob.status not in ("optimal", "optimal_inaccurate") or Z.value is None:
        warnings.warn(f"the Shor relaxation ended with status {prob.status!r}; lower bound from "
                      "Wachter's cost only", NumtkWarning, stacklevel=3)
        return None
    value = float(prob.value)
    slack = 1e-7 * (1.0 + abs(value)) if prob.status == "optimal" else 1e-4 * (1.0 + abs(value))
    return value - slack, np.asarray(Z.value)


# --------------------------------------------------------------------------------------------
# public function
# --------------------------------------------------------------------------------------------

@constraints(X="array2d", w="array1d", b="real", distortion="real>0", confidence="prob_open", margin="real",
             target="option", immutable="array1d", bounds="option", pairs="option", n_landmarks="int>=1",
             method="option", local_solver="option", max_iter="int>=1", tol="real>0", solver="option",
             solver_options="callable", n_random_starts="int>=0", rng="rng", progress="bool")
def distance_preserving_counterfactuals(
        X: Any, w: Any, b: Any, *, distortion: float = 2.0, confidence: float = 0.8,
        margin: float | None = None, target: int = 1, immutable: Any = None, bounds: Any = None,
        pairs: Any = "all", n_landmarks: int | None = None, method: str = "local",
        local_solver: str = "alm", max_iter: int = 200, tol: float = 1e-8, solver: str = "clarabel",
        solver_options: dict | None = None, n_random_starts: int | None = None, rng: Any = None,
        progress: bool = False) -> Result:
    r"""Per-point counterfactuals that keep pairwise distances within a factor ``K`` (bi-Lipschitz).

    Solves, for the pairs :math:`(i, j) \in \mathcal P`,

    .. math:: \min_{x'} \sum_i \|x'_i - x_i\|^2 \quad \text{s.t.} \quad w^\top x'_i + b \ge \tau,
              \quad \frac{D_{ij}}{K^2} \le \|x'_i - x'_j\|^2 \le K^2 D_{ij},

    with :math:`D_{ij} = \|x_i - x_j\|^2`, immutable features fixed and the bounds on the mutable
    ones. The lower distance bounds make this a non-convex QCQP; the function returns a feasible
    point (an upper bound), a lower bound and their relative gap.

    Parameters
    ----------
    X, w, b, confidence, margin, target, immutable, bounds
        As in :func:`wachter_counterfactuals`.
    distortion : float, default 2.0
        The bound ``1 <= K <= 1e8`` on the distance ratios (``K = 1`` keeps every constrained distance).
    pairs : {'all', 'landmarks'} or array_like of int, shape (n_pairs, 2), default 'all'
        The constrained pairs: all of them; every point with each of ``n_landmarks`` landmarks
        chosen by farthest-point sampling from a random first point (landmark--landmark and
        point--landmark pairs, :math:`O(n^{1.5})` of them); or an explicit int32/int64 array.
    n_landmarks : int, optional
        Number of landmarks for ``pairs='landmarks'``; default ``ceil(sqrt(n))``.
    method : {'local', 'sdp+local'}, default 'local'
        'local': lower bound = Wachter's cost; starts = the translation, diagonal(K) and (with cvxpy)
        psd(K) group maps and Wachter's point set. 'sdp+local' also solves the Shor relaxation (when
        its PSD cone has order ``n + d <= 400``, else a warning), raising the lower bound and adding
        its rounding as a start.
    local_solver : {'alm', 'ipopt'}, default 'alm'
        The local solver: the augmented Lagrangian method with L-BFGS-B inner solves, or Ipopt
        through cyipopt (when installed).
    max_iter : int, default 200
        Maximum outer iterations of the local solver per start.
    tol : float, default 1e-8
        Feasibility tolerance: a candidate counts as feasible when every pair constraint holds to
        ``tol`` in squared-ratio units (``|x'_i - x'_j|^2 / D_ij`` within ``[1/K^2 - tol, K^2 + tol]``).
    solver : str, default 'clarabel'
        cvxpy solver for the psd start and the Shor relaxation.
    solver_options : dict, optional
        Keyword arguments for that solver.
    n_random_starts : int, optional
        Extra starts: random orthogonal maps (rotations and reflections, Haar-distributed) of the
        mutable coordinates about the group mean, each followed by its optimal translation
        (isometries, so feasible). They help escape local optima of small problems, where a better
        configuration may have the other orientation. Default: 10 when the reduced problem has at
        most 20 variables (points times mutable features), else 0.
    rng : {None, int, numpy.random.Generator}, optional
        Chooses the first landmark of ``pairs='landmarks'`` and the random starts.
    progress : bool, default False
        Show a tqdm bar over the starts.

    Returns
    -------
    res : Result
        The same fields for every ``method`` and ``local_solver``:

        x_cf : ndarray, shape (n, d)
            The counterfactuals, row by row.
        cost : float
            The upper bound :math:`\sum_i \|x'_i - x_i\|^2`.
        costs : ndarray, shape (n,)
            The per-point squared distances.
        lower_bound : float
            A certified lower bound on the optimal cost.
        gap : float
            ``(cost - lower_bound) / cost`` (0 when the cost is 0).
        max_violation : float
            Largest pair violation, in squared-ratio units.
        start : str
            Which start led to the returned point: 'translation', 'diagonal', 'psd', 'sdp',
            'wachter', 'isometry<k>' or 'identity'.
        start_costs : dict
            The cost of each feasible start before the local solve.
        valid : ndarray of bool, shape (n,)
            ``w @ x' + b >= tau`` in float64.
        status : str
            'optimal' (the gap is closed), 'local_optimum' (the local solver converged),
            'feasible' (it did not), 'trivial' (no point had to move) or 'infeasible' (no feasible
            point was found; a warning is issued too).
        success : bool
            False only for status 'infeasible'.
        message : str
            The status in words.
        problem_class : str
            'QCQP'.
        n_pairs : int
            Number of constrained pairs.
        n_iter : int
            Outer iterations of the local solver, summed over the starts (0 when none ran).
        threshold : float
            The score threshold ``tau``.

    Raises
    ------
    InfeasibleRecourseError
        When some points cannot reach ``tau`` within ``bounds`` and ``immutable`` (``rows``).

    See Also
    --------
    wachter_counterfactuals, lipschitz_counterfactuals, GroupCounterfactualMap

    Notes
    -----
    *Feasible starts* (derived in spec ``counterfactual.md`` section 4): an affine map
    :math:`T(x) = Ax + c` whose singular values all lie in :math:`[1/K, K]` satisfies
    :math:`\|x - y\|/K \le \|T(x) - T(y)\| \le K \|x - y\|` for every pair, so the translation,
    diagonal(K) and psd(K) group maps are feasible; the cheapest one is the first upper bound.

    *Local solve*: immutable coordinates are constants (their squared pair distances
    :math:`c_{ij}` move to the right-hand sides), points that a pair forces to coincide
    (:math:`D_{ij} = 0`) are merged, and the constraints, written as :math:`g \ge 0` in the form
    :math:`g^{up}_{ij} = (K^2 - r_{ij})\sqrt{D_{ij}}`, :math:`g^{lo}_{ij} = (r_{ij} - K^{-2})\sqrt{D_{ij}}`
    with :math:`r_{ij} = \|x'_i - x'_j\|^2 / D_{ij}` (lengths: their gradients have the same size for
    near and far pairs, which keeps the inner problems well conditioned), enter the augmented
    Lagrangian

    .. math:: L_\rho(x', \lambda) = f(x') + \frac{1}{2\rho} \sum_k
              \left(\max(0, \lambda_k - \rho g_k)^2 - \lambda_k^2\right),

    minimised by L-BFGS-B (bounds handled natively), followed by
    :math:`\lambda \leftarrow \max(0, \lambda - \rho g)`. It stops when the largest violation is
    below ``tol / 2`` and the projected gradient below 1e-6 (scaled units), or, feasible, when the
    objective stalls (changes by less than 1e-9 relative over three iterations). The best feasible
    candidate over the starts and their local solutions is returned, so ``cost`` never exceeds the
    cheapest feasible start.

    *Lower bounds*: Wachter's cost (drop the pair constraints). The Shor relaxation replaces
    :math:`x' x'^\top` by :math:`G \succeq x' x'^\top`, i.e.
    :math:`\begin{bmatrix} I_d & Y^\top \\ Y & G \end{bmatrix} \succeq 0`, with objective
    :math:`\operatorname{tr} G - 2 \langle X, Y\rangle + \|X\|_F^2` and the pair constraints on
    :math:`G_{ii} + G_{jj} - 2 G_{ij}`; its value minus the solver tolerance is a valid bound, often
    loose (the lifting can meet the lower distance bounds in extra dimensions).

    References
    ----------
    .. [1] E. Valero-Leal, B. Bischl, P. Larrañaga, C. Bielza, G. Casalicchio, "Optimal Transport
       Group Counterfactual Explanations", ICML 2026, arXiv:2601.20692.
    .. [2] S. Wachter, B. Mittelstadt, C. Russell, "Counterfactual explanations without opening the
       black box", Harvard Journal of Law & Technology 31(2), 2017.
    .. [3] E. G. Birgin, J. M. Martínez, *Practical Augmented Lagrangian Methods for Constrained
       Optimization*, SIAM, 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_classification
    >>> from numtk.counterfactual import distance_preserving_counterfactuals
    >>> X, _ = make_classification(n_samples=12, n_features=3, n_redundant=0, random_state=1)
    >>> w, b = np.array([1.0, 0.5, -0.5]), -1.0
    >>> res = distance_preserving_counterfactuals(X, w, b, distortion=1.5)
    >>> res.problem_class, res.status in ("optimal", "local_optimum", "feasible")
    ('QCQP', True)
    >>> bool(res.lower_bound <= res.cost <= min(res.start_costs.values()))
    True
    >>> bool(res.max_violation <= 1e-8), bool(res.valid.all())
    (True, True)
    """
    P = _setup(X, w, b, confidence=confidence, margin=margin, target=target, immutable=immutable,
               bounds=bounds)
    K = check_real(distortion, "distortion", low=1.0, high=MAX_DISTORTION)
    method = check_option(method, "method", ("local", "sdp+local"))
    local_solver = check_option(local_solver, "local_solver", ("alm", "ipopt"))
    max_iter = check_int(max_iter, "max_iter", minimum=1, maximum=_MAX_ITER)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    check_solver(solver, default="clarabel")
    check_solver_options(solver_options)
    if n_random_starts is not None:
        n_random_starts = check_int(n_random_starts, "n_random_starts", minimum=0,
                                    maximum=_MAX_RANDOM_STARTS)
    progress = check_bool(progress, "progress")
    check_magnitude(P.X, P.m)
    rng = normalize_rng(rng)
    pair_arr = _resolve_pairs(pairs, P.X, n_landmarks, rng)
    D = _pair_sqdist(P.X, pair_arr)
    wres = _wachter(P)
    lower_bound = wres.cost
    X = P.X

    def finish(Xcf, start, status, lb, start_costs, viol=None, n_iter=0):
        diff = Xcf - X
        costs = np.einsum("ij,ij->i", diff, diff)
        cost = float(costs.sum())
        lb = min(lb, cost)
        gap = (cost - lb) / cost if cost > 0 else 0.0
        if status == "local_optimum" and gap <= 1e-9:
            status = "optimal"
        if viol is None:
            viol = _pair_violation(Xcf, pair_arr, D, K, 1.0 / K)
        return Result(x_cf=Xcf, cost=cost, costs=costs, lower_bound=float(lb), gap=float(gap),
                      max_violation=float(viol), start=start, start_costs=start_costs,
                      valid=Xcf @ P.w + P.b >= P.tau, status=status, success=status != "infeasible",
                      message=_MESSAGES[status].format(start=start), problem_class="QCQP",
                      n_pairs=int(pair_arr.shape[0]), n_iter=int(n_iter), threshold=P.tau)

    if wres.cost == 0.0:  # every point valid and inside the box: the identity
        return finish(X.copy(), "identity", "trivial", 0.0, {"identity": 0.0}, viol=0.0)
    viol_w = _pair_violation(wres.x_cf, pair_arr, D, K, 1.0 / K)
    if viol_w <= tol:  # the relaxation's optimum is feasible: globally optimal
        return finish(wres.x_cf, "wachter", "optimal", wres.cost, {"wachter": wres.cost}, viol=viol_w)

    R = _reduce(P, pair_arr, D, K)
    starts: list[tuple[str, Any]] = [
        ("translation", lambda: _translation_start(P)),
        ("diagonal", lambda: _map_start(P, "diagonal", K, solver, solver_options)),
    ]
    if importlib.util.find_spec("cvxpy") is not None:
        starts.append(("psd", lambda: _map_start(P, "psd", K, solver, solver_options)))
    sdp_Z = None
    if method == "sdp+local":
        if importlib.util.find_spec("cvxpy") is None:
            raise ImportError("method='sdp+local' needs cvxpy (pip install cvxpy)")
        if R.nc + R.dM > _SDP_MAX_ORDER:
            warnings.warn(f"the Shor relaxation is skipped: its PSD cone would have order "
                          f"{R.nc + R.dM} > {_SDP_MAX_ORDER}", NumtkWarning, stacklevel=2)
        else:
            out = _shor(R, solver, solver_options)
            if out is not None:
                lb_sdp, sdp_Z = out
                lower_bound = max(lower_bound, lb_sdp * R.ell**2)
                starts.append(("sdp", lambda: _to_full(P, R, sdp_Z)))
    starts.append(("wachter", lambda: wres.x_cf))
    if n_random_starts is None:
        n_random_starts = _AUTO_RANDOM_STARTS if R.nc * R.dM <= _AUTO_RANDOM_MAX_VARS else 0
    for k in range(n_random_starts):
        starts.append((f"isometry{k}", lambda: _isometry_start(P, rng)))
    local = _alm if local_solver == "alm" else _ipopt

    best = None  # (cost, Xcf, start name, converged, viol)
    conv_best = None  # best feasible candidate at which the local solver converged
    fallback = None  # least violating candidate when nothing is feasible
    start_costs: dict[str, float] = {}
    seen: list[np.ndarray] = []
    total_iter = 0
    with progress_bar(total=len(starts), progress=progress, desc="distance_preserving") as bar:
        for name, make in starts:
            Xs = make()
            if Xs is None or any(np.array_equal(Xs, prev) for prev in seen):
                bar.update(1)  # unavailable, or the same point as an earlier start (e.g. d_M = 1)
                continue
            seen.append(Xs)
            cands = []
            v0 = _pair_violation(Xs, pair_arr, D, K, 1.0 / K)
            c0 = float(np.sum((Xs - X) ** 2))
            if v0 <= tol:
                start_costs[name] = c0
                cands.append((c0, Xs, False, v0))
            for rho_scale in (1.0, _RHO_RETRY):
                with single_blas_thread():
                    Z, conv, it = local(R, _from_full(P, R, Xs), tol, max_iter, rho_scale)
                total_iter += it
                Xl = _to_full(P, R, Z)
                vl = _pair_violation(Xl, pair_arr, D, K, 1.0 / K)
                cands.append((float(np.sum((Xl - X) ** 2)), Xl, conv, vl))
                # A feasible start left feasibility and got stuck (the penalty was too weak to keep
                # it near the feasible set): retry once with a stronger initial penalty.
                if vl <= tol or v0 > tol or local_solver != "alm":
                    break
            for cost, Xc, conv_c, v in cands:
                if v <= tol and (best is None or cost < best[0]):
                    best = (cost, Xc, name, conv_c, v)
                if v <= tol and conv_c and (conv_best is None or cost < conv_best[0]):
                    conv_best = (cost, Xc, name, conv_c, v)
                if fallback is None or v < fallback[3]:
                    fallback = (cost, Xc, name, v)
            bar.update(1)
            if best is not None:
                bar.set_postfix(best=best[0])
    if best is None:
        warnings.warn("no feasible point was found (the starts are infeasible under `bounds` and "
                      "the local solver did not reach feasibility); returning the least violating "
                      "candidate", NumtkWarning, stacklevel=2)
        cost, Xc, name, v = fallback
        return finish(Xc, name, "infeasible", lower_bound, start_costs, viol=v, n_iter=total_iter)
    cost, Xc, name, conv, v = best
    if not conv and conv_best is not None and conv_best[0] <= cost * (1.0 + _SAME_COST):
        cost, Xc, name, conv, v = conv_best  # the same value, at a point where the solver converged
    return finish(Xc, name, "local_optimum" if conv else "feasible", lower_bound, start_costs, viol=v,
                  n_iter=total_iter)
