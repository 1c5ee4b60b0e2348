"""Compute allocation across proxy scales: a locally c-optimal experimental design with run costs.

Reconstructed (CAMEL's own allocation rule was not published): the budget is split over candidate (size,
mixture) runs so that the fitted law's prediction at the target is as precise as possible, to first order in
the law's parameters (Elfving 1952; Sagnol 2011 for several validation sets observed per run; away-step
Frank-Wolfe for the robust and safeguarded variants). See :func:`allocate_budget`.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import NumtkWarning, Result, single_blas_thread
from numtk._lib._constraints import constraints
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import (C_INT_MAX, as_array, check_bool, check_int, check_options, check_real,
                                    check_size)
from numtk.mixture._mixture_law import _as_mixtures

__all__ = ["allocate_budget"]

#: relative ridge of the Frank-Wolfe and rounding objectives: g^T (M + RIDGE tr(M) I)^-1 g
RIDGE = 1e-10
#: singular values of the (column-scaled) candidate Jacobian below this fraction of the largest are dropped
RANK_TOL = 1e-9
#: a target gradient with more than this fraction of its norm outside the candidates' span is not estimable
ESTIMABLE_TOL = 1e-6
#: design weights below this fraction of the largest are set to zero (LP and SOCP round-off)
SUPPORT_TOL = 1e-9
#: at most this many runs in all (the counts are int64 and the budget arithmetic is float64)
MAX_RUNS = 2**53
_OPTION_KEYS = ("max_iter", "tol", "max_rounding")


# ---------------------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------------------
def _check_law(law: Any, name: str) -> tuple[int, int, bool]:
    """(M, V, uses_tokens) of a law with the protocol ``allocate_budget`` reads; TypeError naming ``name``."""
    M = getattr(law, "n_domains_", None)
    V = getattr(law, "n_outputs_", None)
    if (not callable(getattr(law, "predict", None)) or not callable(getattr(law, "jacobian", None))
            or M is None or V is None):
        raise TypeError(f"`{name}` must be a fitted mixture law (with predict, jacobian, n_domains_ and "
                        f"n_outputs_: a MixtureLaw after fit or from MixtureLaw.from_params); "
                        f"got {type(law).__name__}")
    try:
        M, V = int(M), int(V)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must have integer n_domains_ and n_outputs_") from None
    if M < 1 or V < 1:
        raise ValueError(f"`{name}` must have n_domains_ >= 1 and n_outputs_ >= 1; got {M} and {V}")
    return M, V, bool(getattr(law, "uses_tokens_", False))


def _is_scalar(x: Any, name: str) -> bool:
    """Whether ``x`` is a scalar (not an array); a TypeError naming ``name`` for ragged nested sequences."""
    if isinstance(x, np.ndarray):
        return False
    try:
        return np.ndim(x) == 0
    except ValueError:
        raise TypeError(f"`{name}` must be array-like with a regular shape; got ragged nested sequences") from None


def _positive_vector(x: Any, name: str, S: int) -> np.ndarray:
    arr = as_array(x, name)
    if arr.ndim != 1 or arr.shape[0] != S:
        raise ValueError(f"`{name}` must hold one value per candidate size ({S}); got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"`{name}` must be finite and > 0")
    return arr


def _per_size(fn: Any, sizes: np.ndarray, name: str) -> np.ndarray:
    """A callable (vectorised or not) or an array of one value per candidate size, as finite positive floats."""
    S = sizes.size
    if isinstance(fn, (str, bytes)) or not callable(fn):
        if isinstance(fn, (bool, np.bool_)) or _is_scalar(fn, name):
            raise TypeError(f"`{name}` must be a callable of the model size or an array of one value per "
                            f"candidate size ({S}); got {type(fn).__name__}")
        return _positive_vector(fn, name, S)
    out = None
    try:
        with np.errstate(all="ignore"):
            vec = np.asarray(fn(sizes.copy()), dtype=np.float64)
        if vec.shape == (S,):
            out = vec
    except Exception:  # noqa: BLE001 - not vectorised: call it size by size below
        out = None
    if out is None:
        vals = []
        for s in sizes:
            v = fn(float(s))
            try:
                vals.append(float(np.asarray(v, dtype=np.float64).reshape(())))
            except (TypeError, ValueError):
                raise TypeError(f"`{name}` must return one real number per size; got {v!r}") from None
        out = np.array(vals)
    if not np.all(np.isfinite(out)) or np.any(out <= 0):
        raise ValueError(f"`{name}` must give finite values > 0 at every candidate size; got {out}")
    return out


def _check_samples(theta_samples: Any, M: int, V: int) -> list:
    if isinstance(theta_samples, (str, bytes)) or not hasattr(theta_samples, "__len__"):
        raise TypeError("`theta_samples` must be None or a list of fitted laws (e.g. law.bootstrap(50)); "
                        f"got {type(theta_samples).__name__}")
    samples = list(theta_samples)
    if not samples:
        raise ValueError("`theta_samples` must hold at least one law (or be None)")
    for s in samples:
        Ms, Vs, _ = _check_law(s, "theta_samples")
        if (Ms, Vs) != (M, V):
            raise ValueError(f"`theta_samples` laws must have the law's {M} domains and {V} outputs; "
                             f"got one with {Ms} and {Vs}")
    return samples


def _features(sizes: np.ndarray, mixtures: np.ndarray, tokens: np.ndarray | None) -> np.ndarray:
    """Rows [size, (tokens,) mixture...], the layout every mixture law reads."""
    from numtk.mixture._mixture_law import mixture_features

    return mixture_features(sizes, mixtures, tokens=tokens)


# ---------------------------------------------------------------------------------------------------------
# the linearised problem of one law: reduced, column-scaled Jacobian rows and the target gradient
# ---------------------------------------------------------------------------------------------------------
class _Problem:
    """One law's design problem in estimable coordinates.

    ``Z[k]`` (B, r): the rows of design point k, f / sigma (one row for the single response, one per validation
    set with ``multiresponse``), mapped to an orthonormal basis of the estimable subspace after dividing each
    row by sqrt(cost) (``costs``) and scaling each parameter to unit column norm (so ``Z / sqrt(costs)`` has
    orthonormal columns: the LP the solvers see is well scaled); ``h`` (r,): the target gradient in the same coordinates. Then for any run
    counts n, ``h^T (sum_k n_k Z_k^T Z_k)^-1 h`` is the variance of the target prediction ``g^T A^- g``
    (a reparametrisation leaves it unchanged).
    """

    def __init__(self, law, X, Xt, w, sigma_log, multi, bench, costs=None):
        K = X.shape[0]
        with np.errstate(all="ignore"):
            P = np.asarray(law.predict(X), dtype=np.float64)
            J = np.asarray(law.jacobian(X), dtype=np.float64)
            Pt = np.asarray(law.predict(Xt), dtype=np.float64).reshape(-1)
            Jt = np.asarray(law.jacobian(Xt), dtype=np.float64)
        V = w.size
        if P.size != K * V or J.ndim != 3 or J.shape[:2] != (K, V) or Jt.shape[:2] != (1, V) \
                or Jt.shape[2] != J.shape[2] or Pt.size != V:
            raise ValueError(f"`law` must predict (n,) or (n, {V}) values and an (n, {V}, p) jacobian; got "
                             f"predict {P.shape} and jacobian {J.shape} for {K} rows")
        P = P.reshape(K, V)
        if not (np.all(np.isfinite(P)) and np.all(P > 0) and np.all(np.isfinite(J))):
            raise ValueError("the law's losses at (`candidate_sizes`, `mixtures`) must be finite and > 0 with a "
                             "finite jacobian")
        if not (np.all(np.isfinite(Pt)) and np.all(Pt > 0) and np.all(np.isfinite(Jt))):
            raise ValueError("the law's losses at (`target_size`, `target_mixture`) must be finite and > 0 "
                             "with a finite jacobian")
        p = J.shape[2]
        sig = sigma_log[:, None] if sigma_log.ndim == 1 else sigma_log
        if multi:
            rows = J / (sig * P)[:, :, None]                          # (K, V, p)
        else:
            y = P @ w
            if not np.all(y > 0):
                raise ValueError("`weights` must give a positive weighted loss at every candidate run")
            rows = (np.einsum("kvp,v->kp", J, w) / (sig[:, 0] * y)[:, None])[:, None, :]
        self.target_loss = float(Pt @ w)
        loss_grad = Jt[0].T @ w
        if bench is None:
            self.target_value = self.target_loss
            g = loss_grad
        else:
            self.target_value, g = _benchmark_chain(bench, Pt, Jt[0])
        if not np.all(np.isfinite(g)) or not np.any(g != 0):
            raise ValueError("the target prediction does not depend on the law's parameters (zero or non-finite "
                             "gradient at `target_size`); no allocation can make it more precise")
        B = rows.shape[1]
        # whitened after the cost scaling the solvers see (one unit of budget at every candidate has information
        # I): whitening the unscaled rows and dividing by sqrt(cost) afterwards left Elfving's LP so badly
        # scaled that HiGHS returned a design 100 times the optimal variance on a 55-parameter law
        cs = np.ones(K) if costs is None else np.sqrt(np.asarray(costs, dtype=np.float64))
        R = (rows / cs[:, None, None]).reshape(K * B, p)
        col = np.sqrt(np.einsum("np,np->p", R, R))
        col[col == 0] = 1.0
        Rs = R / col
        gs = g / col
        U, s, Vt = np.linalg.svd(Rs, full_matrices=False)
        keep = s > RANK_TOL * s[0] if s.size and s[0] > 0 else np.zeros(s.size, bool)
        Vr = Vt[keep].T
        c = Vr.T @ gs
        if not keep.any() or np.linalg.norm(gs - Vr @ c) > ESTIMABLE_TOL * np.linalg.norm(gs):
            raise ValueError("the target prediction is not estimable from the candidate runs: no combination of "
                             "runs at `candidate_sizes` and `mixtures` identifies it (add sizes or mixtures)")
        # whitened: one run at every candidate has information I, which keeps sparse designs well conditioned
        self.Z = U[:, keep].reshape(K, B, Vr.shape[1]) * cs[:, None, None]
        self.h = c / s[keep]
        self.rank = Vr.shape[1]


def _benchmark_chain(bench, Pt, Jt):
    """Benchmark score at the target and its gradient w.r.t. the law's parameters (chain rule through the
    benchmark's ``loss_weights_``, as :func:`optimal_mixture` does)."""
    u = np.asarray(bench.loss_weights_, dtype=np.float64)
    with np.errstate(all="ignore"):
        score = float(np.asarray(bench.predict(Pt[None, :]), dtype=np.float64).reshape(-1)[0])
        d = float(np.asarray(bench.derivative(Pt[None, :]), dtype=np.float64).reshape(-1)[0])
    if not (np.isfinite(score) and np.isfinite(d)):
        raise ValueError("`benchmark` must give a finite score and derivative at the target's losses")
    if d == 0 or not np.any(u != 0):
        raise ValueError(f"`benchmark` is saturated at the target's losses (d score / d loss = {d!r}, score "
                         f"{score!r}): the score does not depend on the losses there, so no allocation can make "
                         "it more precise")
    return score, d * (Jt.T @ u)


# ---------------------------------------------------------------------------------------------------------
# solvers
# ---------------------------------------------------------------------------------------------------------
def _clean(pi: np.ndarray, tol: float = SUPPORT_TOL) -> np.ndarray:
    pi = np.where(pi > tol * pi.max(), pi, 0.0)
    return pi / pi.sum()


def _elfving_lp(Zc: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, float]:
    """Elfving's LP for the single response: the c-optimal budget fractions and the variance per unit budget.

    max t s.t. t h = Zc^T (l+ - l-), sum(l+ + l-) = 1, l >= 0; the variance is 1/t^2. The LP's support is then
    polished: the minimum-l1 representation h = sum_k a_k Zc_k on it (unique when the support is saturated)
    gives pi = |a| / ||a||_1 and the variance ||a||_1^2 to machine precision.
    """
    from scipy.optimize import linprog

    K, r = Zc.shape
    h_norm = float(np.linalg.norm(h))
    h = h / h_norm                       # the design does not depend on the scale of g; the variance goes as |g|^2
    scale = np.maximum(np.abs(Zc).max(axis=0), np.abs(h))
    scale[scale == 0] = 1.0
    A = np.empty((r + 1, 2 * K + 1))
    A[:r, :K] = (Zc / scale).T
    A[:r, K:2 * K] = -A[:r, :K]
    A[:r, -1] = -h / scale
    A[r, :2 * K] = 1.0
    A[r, -1] = 0.0
    b = np.zeros(r + 1)
    b[r] = 1.0
    c = np.zeros(2 * K + 1)
    c[-1] = -1.0
    res = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status != 0 or res.x is None or -res.fun <= 0:
        raise RuntimeError(f"the Elfving LP failed: {res.message}")
    t = -res.fun
    lam = res.x[:K] + res.x[K:2 * K]
    pi = _clean(lam)
    variance = 1.0 / t ** 2
    supp = np.flatnonzero(pi)
    a, *_ = np.linalg.lstsq(Zc[supp].T, h, rcond=None)
    l1 = np.abs(a).sum()
    if np.linalg.norm(Zc[supp].T @ a - h) <= 1e-12 * np.linalg.norm(h) and l1 ** 2 <= variance * (1 + 1e-6):
        pi = np.zeros(K)
        pi[supp] = np.abs(a) / l1
        pi = _clean(pi)
        variance = l1 ** 2
    return pi, variance * h_norm ** 2


def _elfving_socp(Zc: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, float]:
    """Sagnol's SOCP for several responses per run (cvxpy + Clarabel).

    max t s.t. t h = sum_k Zc_k^T v_k, sum_k ||v_k||_2 <= 1; pi_k = ||v_k||_2 and the variance is 1/t^2.
    """
    from numtk._lib._optional import import_optional

    cp = import_optional("cvxpy", purpose="allocate_budget(multiresponse=True)")
    K, B, r = Zc.shape
    h_norm = float(np.linalg.norm(h))
    h = h / h_norm
    flat = Zc.reshape(K * B, r)
    scale = np.maximum(np.abs(flat).max(axis=0), np.abs(h))
    scale[scale == 0] = 1.0
    v = cp.Variable(K * B)
    t = cp.Variable()
    cons = [(flat / scale).T @ v == t * (h / scale),
            cp.sum(cp.norm(cp.reshape(v, (K, B), order="C"), 2, axis=1)) <= 1]
    prob = cp.Problem(cp.Maximize(t), cons)
    try:
        prob.solve(solver="CLARABEL")
    except Exception as exc:  # noqa: BLE001 - a solver failure: try the next solver
        warnings.warn(f"allocate_budget: Clarabel failed on the multi-response SOCP ({type(exc).__name__}: "
                      f"{exc}); solving it with SCS instead (first-order, less accurate)", NumtkWarning,
                      stacklevel=3)
        prob.solve(solver="SCS", eps=1e-9)
    if v.value is None or t.value is None or not t.value > 0:
        raise RuntimeError(f"the multi-response SOCP failed: {prob.status}")
    if prob.status != cp.OPTIMAL:
        warnings.warn(f"allocate_budget: the multi-response SOCP solved to status {prob.status!r}, not optimal; "
                      "the design is polished by Frank-Wolfe but may be off the optimum", NumtkWarning,
                      stacklevel=3)
    # an interior-point solution: off the support the weights are small but not zero (the Frank-Wolfe polish
    # that follows restores any point dropped here)
    pi = _clean(np.linalg.norm(np.asarray(v.value).reshape(K, B), axis=1), 1e-5)
    return pi, h_norm ** 2 / float(t.value) ** 2


def _information(Zc: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """sum_k pi_k Zc_k^T Zc_k for a stack of problems: Zc (P, K, B, r), pi (K,) -> (P, r, r)."""
    W = (Zc * np.sqrt(pi)[None, :, None, None]).reshape(Zc.shape[0], -1, Zc.shape[-1])
    return np.swapaxes(W, 1, 2) @ W


def _stack(problems: list[_Problem], costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cost-scaled rows (P, K, B, r_max) and gradients (P, r_max), zero-padded to a common rank, the gradients
    divided by the largest norm."""
    r = max(p.rank for p in problems)
    K, B = problems[0].Z.shape[:2]
    Zc = np.zeros((len(problems), K, B, r))
    H = np.zeros((len(problems), r))
    for i, p in enumerate(problems):
        Zc[i, :, :, :p.rank] = p.Z / np.sqrt(costs)[:, None, None]
        H[i, :p.rank] = p.h
    # one common scale (the designs do not depend on it; the mean over samples keeps its weights)
    return Zc, H / np.linalg.norm(H, axis=1).max()


def _line_search(Ais: np.ndarray, H: np.ndarray, Dir: np.ndarray, gmax: float) -> tuple[float, float]:
    """Exact minimisation of mean_s h_s^T (A_s + gamma Dir_s)^-1 h_s over gamma in [0, gmax].

    With A^-1/2 Dir A^-1/2 = Q diag(mu) Q^T and c = Q^T A^-1/2 h the objective is sum_i c_i^2 / (1 + gamma mu_i),
    convex on the interval (A + gamma Dir stays positive definite there); its derivative is monotone and its
    root is found by Brent's method. Returns (gamma, objective at gamma).
    """
    from scipy.optimize import brentq

    nP = H.shape[0]
    C = Ais @ Dir @ Ais
    C = 0.5 * (C + np.swapaxes(C, 1, 2))
    mu, Qc = np.linalg.eigh(C)
    cc = (np.einsum("psr,ps->pr", Qc, np.einsum("prs,ps->pr", Ais, H)) ** 2 / nP).ravel()
    mu = mu.ravel()

    def phi(gam):
        return float(np.sum(cc / (1.0 + gam * mu)))

    def dphi(gam):
        return -float(np.sum(cc * mu / (1.0 + gam * mu) ** 2))

    if not gmax > 0 or dphi(0.0) >= 0:
        return 0.0, phi(0.0)
    if dphi(gmax) <= 0:
        return gmax, phi(gmax)
    gamma = brentq(dphi, 0.0, gmax, xtol=1e-15 * gmax, rtol=4 * np.finfo(float).eps, maxiter=200)
    return gamma, phi(gamma)


def _optimise(Zc: np.ndarray, H: np.ndarray, pi0: np.ndarray, *, fixed: np.ndarray | None = None,
              rho: float = 0.0, tol: float = 1e-9, max_iter: int = 10_000, newton: bool = True):
    """Away-step Frank-Wolfe, with Newton steps on the support, for

        min_pi  Phi(pi) = mean_s h_s^T (rho M_s(fixed) + (1 - rho) M_s(pi) + delta_s I)^-1 h_s  on the simplex,

    ``Zc`` (P, K, B, r) the cost-scaled rows of P problems, ``H`` (P, r) their gradients, ``delta_s`` = RIDGE
    times the trace of the matrix at ``pi0``. Each iteration computes the away-step Frank-Wolfe step (towards
    the best vertex, or away from the worst support point) and, with ``newton``, the projected Newton step on
    the support plus the Frank-Wolfe vertex; both go through the exact line minimisation of
    :func:`_line_search` and the lower objective is kept. Stops when the Frank-Wolfe duality gap
    ``(1 - rho) (max_k s_k - pi.s)`` (an upper bound on Phi(pi) - min Phi) is below ``tol * Phi(pi)``.
    Returns (pi, Phi(pi), iterations, converged).
    """
    nP, K, B, r = Zc.shape
    w = 1.0 - rho
    F = rho * _information(Zc, fixed) if fixed is not None and rho > 0 else np.zeros((nP, r, r))
    pi = np.asarray(pi0, dtype=np.float64).copy()
    M = _information(Zc, pi)
    tr = np.trace(F + w * M, axis1=1, axis2=2)
    ridge = RIDGE * np.where(tr > 0, tr, 1.0)
    Dg = ridge[:, None, None] * np.eye(r)[None]
    Zf = Zc.reshape(nP, K * B, r)
    converged, n_iter, obj = False, 0, math.inf
    for n_iter in range(1, max_iter + 1):
        if n_iter % 32 == 0:
            M = _information(Zc, pi)                 # no drift from the updates below
        A = F + w * M + Dg
        lam, Q = np.linalg.eigh(0.5 * (A + np.swapaxes(A, 1, 2)))
        lam = np.maximum(lam, 1e-3 * ridge[:, None])
        Ais = (Q * lam[:, None, :] ** -0.5) @ np.swapaxes(Q, 1, 2)
        u = (Q @ ((np.swapaxes(Q, 1, 2) @ H[..., None])[..., 0] / lam)[..., None])[..., 0]
        obj = float(np.mean(np.sum(H * u, axis=1)))
        Zu = (Zf @ u[..., None]).reshape(nP, K, B)
        score = np.mean(np.einsum("pkb,pkb->pk", Zu, Zu), axis=0)      # -dPhi/dpi / (1 - rho)
        avg = float(score @ pi)
        k_fw = int(np.argmax(score))
        supp = np.flatnonzero(pi > 0)
        k_aw = int(supp[np.argmin(score[supp])])
        gap_fw = w * (score[k_fw] - avg)
        if gap_fw <= tol * obj:
            converged = True
            break
        steps = []
        # away-step Frank-Wolfe
        if gap_fw >= w * (avg - score[k_aw]) or pi[k_aw] >= 1.0:
            ZZ = np.einsum("pbr,pbs->prs", Zc[:, k_fw], Zc[:, k_fw])
            d = -pi
            d[k_fw] += 1.0
            dM = ZZ - M
            gmax = 1.0
        else:
            ZZ = np.einsum("pbr,pbs->prs", Zc[:, k_aw], Zc[:, k_aw])
            d = pi.copy()
            d[k_aw] -= 1.0
            dM = M - ZZ
            gmax = pi[k_aw] / (1.0 - pi[k_aw])
        steps.append((d, dM, *_line_search(Ais, H, w * dM, gmax)))
        # Newton on the support and the Frank-Wolfe vertex
        if newton:
            W = np.union1d(supp, [k_fw])
            if W.size >= 2:
                ZW = Zc[:, W]
                Y = np.sum(Zu[:, W, :, None] * (ZW.reshape(nP, -1, r) @ Ais).reshape(ZW.shape), axis=2)
                Hs = 2.0 * w * w * np.sum(Y @ np.swapaxes(Y, 1, 2), axis=0) / nP
                grad = -w * score[W]
                n = W.size
                # an orthonormal basis of {d : sum d = 0}: the reflector that maps ones/sqrt(n) to e_1
                v = np.ones(n) / math.sqrt(n)
                v[0] += 1.0
                Hh = np.eye(n) - np.outer(v, v) / v[0]
                N = Hh[:, 1:]
                HN = N.T @ Hs @ N
                mu_reg = 1e-12 * max(float(np.trace(HN)), 1e-300)
                try:
                    dN = -np.linalg.solve(HN + mu_reg * np.eye(n - 1), N.T @ grad)
                except np.linalg.LinAlgError:
                    dN = None
                if dN is not None and np.all(np.isfinite(dN)):
                    dW = N @ dN
                    if grad @ dW < 0:
                        neg = dW < 0
                        gmax_n = float(np.min(pi[W][neg] / -dW[neg])) if neg.any() else 0.0
                        if gmax_n > 0:
                            d = np.zeros(K)
                            d[W] = dW
                            ZWf = ZW.reshape(nP, -1, r)
                            dM = np.swapaxes(ZWf * np.repeat(dW, B)[None, :, None], 1, 2) @ ZWf
                            steps.append((d, dM, *_line_search(Ais, H, w * dM, gmax_n)))
        d, dM, gamma, new_obj = min(steps, key=lambda st: st[3])
        if gamma <= 0 or not new_obj < obj:
            converged = gap_fw <= 1e3 * tol * obj     # no step decreases Phi: round-off level
            break
        pi = pi + gamma * d
        pi[pi < 1e-14 * pi.max()] = 0.0
        pi /= pi.sum()
        M = M + gamma * dM
    return pi, obj, n_iter, converged


def _variance(Z: np.ndarray, h: np.ndarray, n: np.ndarray) -> float:
    """h^T (sum_k n_k Z_k^T Z_k)^- h without ridge; inf when the runs do not identify h."""
    use = n > 0
    if not use.any():
        return math.inf
    Y = (Z[use] * np.sqrt(n[use])[:, None, None]).reshape(-1, Z.shape[-1])
    _, s, Vt = np.linalg.svd(Y, full_matrices=False)
    keep = s > 1e-10 * s[0]
    c = Vt[keep] @ h
    if np.linalg.norm(h - Vt[keep].T @ c) > ESTIMABLE_TOL * np.linalg.norm(h):
        return math.inf
    return float(np.sum((c / s[keep]) ** 2))


def _cost(n: np.ndarray, costs: np.ndarray) -> float:
    """The cost of run counts, summed exactly (math.fsum of the per-candidate products): the one definition the
    rounding's budget test and the returned cost share."""
    return math.fsum((n * costs).tolist())


def _round(Zs: np.ndarray, H: np.ndarray, pi: np.ndarray, costs: np.ndarray, budget: float,
           max_steps: int, *, floor: bool = True, floor_pi: np.ndarray | None = None,
           base: np.ndarray | None = None) -> tuple[np.ndarray, int, bool]:
    """Floor the continuous runs (none with ``floor=False``), floor the leftover budget again while that adds
    runs, then add the run with the largest (mean) variance reduction per unit cost that still fits the
    budget, until none fits (or none reduces the variance, or ``max_steps`` greedy runs).

    ``floor_pi`` (default ``pi``) is the part of the design that is floored cell by cell and ``base`` runs
    already placed (the reserve, rounded per size by the caller). ``Zs`` (P, K, B, r) are the rows of one run
    (not cost-scaled). The information of the runs carries a ridge RIDGE * budget * tr(M(pi)) so that a design
    that does not yet identify the target has a large, finite variance and the greedy first repairs it. The
    inverse and the per-candidate quantities are updated by Woodbury's identity (rank B per run) and
    recomputed every 64 steps. The cost test is exact: ``_cost(n) <= budget``. Returns (n, greedy steps,
    capped: whether the greedy stopped at ``max_steps`` while a run still fitted and lowered the variance).
    """
    nP, K, B, r = Zs.shape
    fp = pi if floor_pi is None else floor_pi
    n = np.zeros(K, np.int64) if base is None else np.asarray(base, dtype=np.int64).copy()
    if floor:
        n += np.floor(fp * budget / costs).astype(np.int64)
        # batches: the leftover budget floored again over the design (fewer greedy steps for large budgets)
        for _ in range(64):
            left = budget - _cost(n, costs)
            add = np.floor(pi * left / costs).astype(np.int64)
            if not add.any():
                break
            n += add
    while n.any() and _cost(n, costs) > budget:       # round-off: drop runs from the fullest cell
        n[int(np.argmax(n * costs))] -= 1
    spent = _cost(n, costs)
    Zf = Zs.reshape(nP, K * B, r)
    Mcont = _information(Zs / np.sqrt(costs)[None, :, None, None], pi) * budget
    ridge = RIDGE * np.trace(Mcont, axis1=1, axis2=2)
    ridge = np.where(ridge > 0, ridge, 1e-300)
    eyeB = np.eye(B)
    steps = 0

    def refresh():
        W = Zs * np.sqrt(n)[None, :, None, None]
        Wf = W.reshape(nP, -1, r)
        A = np.einsum("pnr,pns->prs", Wf, Wf) + ridge[:, None, None] * np.eye(r)[None]
        Ainv = np.linalg.inv(A)
        Ainv = 0.5 * (Ainv + np.swapaxes(Ainv, 1, 2))
        ZA = np.einsum("pnr,prs->pns", Zf, Ainv)
        Zu = np.einsum("pns,ps->pn", ZA, H).reshape(nP, K, B)
        G = np.einsum("pkbs,pkcs->pkbc", ZA.reshape(nP, K, B, r), Zs)
        return Ainv, Zu, G

    Ainv, Zu, G = refresh()
    var0 = float(np.mean(np.einsum("pr,prs,ps->p", H, Ainv, H)))
    capped = True
    blocked = np.zeros(K, bool)
    while True:
        left = budget - spent
        fits = (costs <= left) & ~blocked
        if not fits.any():
            capped = False
            break
        if B == 1:
            red = Zu[:, :, 0] ** 2 / (1.0 + G[:, :, 0, 0])
        else:
            sol = np.linalg.solve(eyeB + G, Zu[..., None])[..., 0]
            red = np.einsum("pkb,pkb->pk", Zu, sol)
        red = red.mean(axis=0)
        gain = np.where(fits, red / costs, -np.inf)
        k = int(np.argmax(gain))
        if not red[k] > 1e-14 * var0:
            capped = False
            break
        if steps >= max_steps:
            break
        n[k] += 1
        new_spent = _cost(n, costs) if left - costs[k] < 1e-9 * budget else spent + float(costs[k])
        if new_spent > budget:                    # the running test passed by round-off: it does not fit
            n[k] -= 1
            blocked[k] = True
            continue
        spent = new_spent
        steps += 1
        if steps % 64 == 0:
            Ainv, Zu, G = refresh()
            continue
        Zk = Zs[:, k]                                        # (P, B, r)
        AZk = np.einsum("prs,pbs->prb", Ainv, Zk)            # A^-1 Z_k^T
        S_inv = np.linalg.inv(eyeB + G[:, k])                # (P, B, B)
        P_all = np.einsum("pnr,prb->pnb", Zf, AZk).reshape(nP, K, B, B)  # Z_j A^-1 Z_k^T
        Zuk = Zu[:, k]                                       # (P, B)
        coef = np.einsum("pbc,pc->pb", S_inv, Zuk)
        Zu = Zu - np.einsum("pkbc,pc->pkb", P_all, coef)
        G = G - np.einsum("pkbc,pcd,pked->pkbe", P_all, S_inv, P_all)
        Ainv = Ainv - np.einsum("prb,pbc,psc->prs", AZk, S_inv, AZk)
    while n.any() and _cost(n, costs) > budget:       # the running sum drifted: exact cost within the budget
        n[int(np.argmax(n * costs))] -= 1
    return n, steps, capped


def _bytes_per_candidate(law: Any, r_star: np.ndarray, target_size: float, t_tok: float | None, M: int, V: int,
                         multi: bool, n_samples: int) -> float:
    """Peak bytes per candidate run (size, mixture), temporaries included, for the memory check.

    The law's p parameters dominate: its jacobian (V, p) per run and the law's temporaries, the reduced rows
    and their SVD (B rows of rank <= p, B = V with ``multiresponse`` else 1), Elfving's dense LP (r + 1) x
    (2K + 1) and, with ``multiresponse``, cvxpy's canonicalisation of the SOCP. Measured with tracemalloc on
    planted laws (5 sizes, reserve 0.2): single response 7,140 bytes (M = V = 5, p = 55) and 68,900
    (M = 17, V = 13, p = 455); multi-response 62,900 and 818,800. The bound below is 1.3 to 2 times those.
    p is read from the law's jacobian at the target (one row).
    """
    p = 1
    try:
        Xt = _features(np.array([target_size]), r_star[None, :], None if t_tok is None else np.array([t_tok]))
        with np.errstate(all="ignore"):
            Jt = np.asarray(law.jacobian(Xt))
        if Jt.ndim == 3:
            p = max(1, int(Jt.shape[2]))
    except Exception:  # noqa: BLE001 - a law that fails here fails with a clear message in the design below
        p = 1
    B = V if multi else 1
    per = 2.0 * V * p + 4.0 * p + 64.0 * V + 4.0 * M + 16.0
    if multi and V > 1:
        per += 32.0 * V * p + 8.0 * V * V
    per += 3.0 * n_samples * (B * p + V * p)          # each sample's jacobian and its reduced rows
    return 8.0 * per


def _reserve_runs(chosen: np.ndarray, share: float, costs: np.ndarray, m: int) -> np.ndarray:
    """(S, m) runs of the reserve: at each chosen size floor(share / cost) runs, dealt round-robin over the m
    mixtures (the first mixtures get one more when they do not divide evenly)."""
    out = np.zeros((costs.size, m), np.int64)
    for i in chosen:
        cnt = int(math.floor(share / costs[i]))
        out[i] = cnt // m + (np.arange(m) < cnt % m)
    return out


def _reserve_sizes(sizes: np.ndarray, count: int) -> np.ndarray:
    """``count`` distinct candidate sizes nearest to a log-uniform grid from the smallest to the largest.

    Ties (a grid point halfway between two sizes) go to the smaller size, so the choice does not depend on
    the order of the candidates."""
    logs = np.log(sizes)
    grid = np.linspace(logs.min(), logs.max(), count)
    chosen: list[int] = []
    for g in grid:
        dist = np.abs(logs - g)
        # distances equal up to round-off (log of a geometric grid) count as ties
        dist = np.round(dist / max(float(np.ptp(logs)), 1e-300), 12)
        order = np.lexsort((sizes, dist))
        chosen.append(int(next(i for i in order if i not in chosen)))
    return np.array(sorted(chosen))


# ---------------------------------------------------------------------------------------------------------
# the public function
# ---------------------------------------------------------------------------------------------------------
@constraints(budget="real>0", candidate_sizes="array1d", cost_fn=("callable", "array1d"), law="option",
             target_size="real>0", target_mixture="array1d", mixtures="array2d", n_mixtures="count",
             weights="array1d", benchmark="option", noise=("real>0", "array1d"), multiresponse="bool",
             theta_samples="option", reserve="prob", min_sizes="int>=1", tokens=("callable", "array1d"),
             target_tokens="real>0", options="mapping", **{"options.max_iter": "int>=1", "options.tol": "real>0",
                                                           "options.max_rounding": "int>=0"}, rng="rng")
def allocate_budget(budget: float, candidate_sizes: ArrayLike, cost_fn: Callable | ArrayLike, law: Any, *,
                    target_size: float, target_mixture: ArrayLike | None = None, mixtures: ArrayLike | None = None,
                    n_mixtures: int = 16, weights: ArrayLike | None = None, benchmark: Any = None,
                    noise: float | ArrayLike | None = None, multiresponse: bool = False,
                    theta_samples: Any = None, reserve: float = 0.2, min_sizes: int = 3,
                    tokens: Callable | ArrayLike | None = None, target_tokens: float | None = None,
                    options: dict | None = None, rng: Any = None) -> Result:
    r"""Proxy runs per size and mixture that make a fitted law's prediction at the target most precise.

    A locally c-optimal experimental design with run costs (reconstructed, see Notes): the budget is split
    over candidate runs (a model size and a training mixture each) so that the variance of the law's
    prediction at the target size and mixture, refitted on those runs, is as small as possible to first order
    in the law's parameters. The continuous design comes from Elfving's linear program (one response per
    run; HiGHS through :func:`scipy.optimize.linprog`) or Sagnol's second-order cone program (several
    validation losses per run; cvxpy with Clarabel), optionally averaged over parameter samples and
    safeguarded by a reserve spread over several sizes (away-step Frank-Wolfe); it is then rounded to whole
    runs within the budget.

    Parameters
    ----------
    budget : float
        The compute budget C (> 0), in the unit of `cost_fn`.
    candidate_sizes : array_like, shape (S,)
        The proxy model sizes that may be run (finite, > 0, distinct), in the unit of the law's size column.
    cost_fn : callable or array_like, shape (S,)
        The cost of one run at a size: a callable ``cost_fn(size) -> float`` (called once with the array of
        candidate sizes if it returns one value per size, else once per size with a float), e.g.
        ``lambda N: 6 * N * tokens(N)``; or the costs themselves, one per candidate size. Finite, > 0.
    law : MixtureLaw
        The pilot law, fitted (or from :meth:`MixtureLaw.from_params`). Only ``predict(X)``, ``jacobian(X)``,
        ``n_domains_``, ``n_outputs_``, ``residual_std_`` (when `noise` is None) and ``uses_tokens_`` are read,
        so any object with that protocol works.
    target_size : float
        N*, the size whose prediction should be precise (> 0).
    target_mixture : array_like, shape (M,), optional
        r*, the mixture of the target (non-negative, summing to 1 within 1e-6; renormalised). Default: the
        law's optimal mixture at `target_size`, ``optimal_mixture(law, target_size, weights=weights).mixture``
        (with `tokens` at the target), or with `benchmark`
        ``optimal_mixture(law, target_size, benchmarks=benchmark).mixture`` (`weights` then only aggregate the
        observed losses).
    mixtures : array_like, shape (m, M), optional
        The candidate mixtures, run at every candidate size (rows as `target_mixture`). Default: r* and
        ``n_mixtures - 1`` draws from Dirichlet(1, ..., 1) with `rng`.
    n_mixtures : int, default 16
        m when `mixtures` is None (>= 1).
    weights : array_like, shape (V,), optional
        w >= 0: a run observes the weighted loss ``sum_i w_i L_i`` (single response) and the target is the
        weighted loss at (N*, r*). Used as given (not renormalised). Default 1/V each.
    benchmark : LossToBenchmarkLaw, optional
        Make the target a benchmark score instead of a loss: ``benchmark.predict`` of the law's V losses at
        the target, fitted on V loss columns (its ``loss_weights_`` combine them, as in
        :func:`optimal_mixture`). Only ``predict``, ``derivative`` (d score / d combined loss) and
        ``loss_weights_`` are read; the benchmark law is held fixed (the proxy runs inform the mixture law
        only). The runs still observe the weighted loss of `weights`.
    noise : float or array_like, shape (S,), optional
        The standard deviation of a run's log loss (relative noise), one for all sizes or one per candidate
        size (> 0): a run's loss has standard deviation ``noise * predicted loss``. Default: the pilot fit's
        ``law.residual_std_``. A common scale (one value, or every per-size value multiplied by the same
        factor) scales `std` and leaves the design unchanged; per-size values that differ in ratio weight the
        sizes differently and change the design.
    multiresponse : bool, default False
        False: each run contributes one observation, its weighted loss (Elfving LP). True: each run observes
        its V validation losses, independently with the noise above (Sagnol's SOCP; needs cvxpy).
    theta_samples : list of MixtureLaw, optional
        Parameter samples for a robust design (e.g. ``law.bootstrap(50)``): the design minimises the mean over
        the samples of the target variance (each sample linearised at its own parameters); `law` still
        supplies the default mixtures and the reported `std`.
    reserve : float, default 0.2
        rho in [0, 1): the fraction of the budget first spread uniformly over `min_sizes` sizes and every
        candidate mixture (the safeguard of the Notes). 0 gives the plain c-optimal design.
    min_sizes : int, default 3
        The number of distinct sizes the reserve covers (>= 1, at most S when `reserve` > 0): the candidates
        nearest to a log-uniform grid from the smallest to the largest candidate size.
    tokens : callable or array_like, shape (S,), optional
        For a law that reads training tokens (``law.uses_tokens_``, e.g. ``'capacity_kkt'``): the tokens of a
        run at each candidate size, as a callable of the size or one value per size. Required for such a law,
        refused otherwise.
    target_tokens : float, optional
        The target's tokens for such a law. Default ``tokens(target_size)`` when `tokens` is callable
        (required when it is an array).
    options : dict, optional
        Solver settings: ``max_iter`` (Frank-Wolfe iterations, default 10000), ``tol`` (Frank-Wolfe stops when
        its duality gap is below ``tol`` times the objective, default 1e-9), ``max_rounding`` (runs the
        greedy rounding may add after flooring, default 100000; reaching it with runs that still fit and
        help sets ``success=False``, says so in ``message`` and warns).
    rng : {None, int, numpy.random.Generator}, optional
        Source of the default candidate mixtures (and of the optimal mixture's starts when `target_mixture`
        is None).

    Returns
    -------
    Result
        runs : ndarray of int64, shape (S, m)
            Runs at each candidate size (rows, in the order of `candidate_sizes`) and candidate mixture.
        runs_per_size : ndarray of int64, shape (S,)
            ``runs.sum(axis=1)``.
        mixtures : ndarray, shape (m, M)
            The candidate mixtures (the first is r* when they are the default).
        cost : float
            The cost of `runs` (<= `budget`).
        budget_fraction : ndarray, shape (S,)
            The continuous design's share of the budget at each size (``design.sum(axis=1)``).
        design : ndarray, shape (S, m)
            The continuous design pi: budget fractions per (size, mixture), the reserve included, summing to 1;
            ``pi * budget / run_cost`` runs before rounding.
        std : float
            The predicted standard deviation of the target prediction (loss, or score with `benchmark`) for
            `runs` under the pilot `law` and its noise: ``sqrt(g^T (sum_k n_k f_k f_k^T / sigma_k^2)^- g)``
            (inf, with a warning, when the runs do not identify it).
        std_design : float
            The same for the continuous design at the full budget: ``sqrt(Phi(pi) / budget)``.
        std_samples : ndarray, shape (n_samples,), or None
            With `theta_samples`, `std` under each sample; None otherwise.
        support : ndarray of int64, shape (n_support, 2)
            (size index, mixture index) of the design points with ``design > 0``.
        run_cost : ndarray, shape (S,)
            The cost of one run at each candidate size.
        target_mixture : ndarray, shape (M,)
            r*.
        target_value : float
            The pilot law's prediction at the target (the weighted loss, or the benchmark score).
        n_iter : int
            Frank-Wolfe iterations (0 when the LP or SOCP design is returned as is).
        success : bool
            Whether the solvers converged (the Frank-Wolfe gap reached ``tol``) and the rounding finished within
            ``max_rounding`` runs.
        message : str
            What was solved, in words.

    Raises
    ------
    ValueError
        Non-positive or non-finite budget, sizes, costs, noise or tokens; mixtures of the wrong width, negative
        or not summing to 1; `reserve` outside [0, 1); more `min_sizes` than candidate sizes; a budget that
        buys no run or more than 2**53; a target that the candidate runs cannot identify; a law whose losses
        are not finite and positive at the candidates.
    TypeError
        A `law` (or a sample) without the protocol, non-numeric arguments, an `rng` of the wrong type.
    ImportError
        ``multiresponse=True`` without cvxpy.

    Warns
    -----
    NumtkWarning
        When the rounded runs do not identify the target (the budget is too small for the design's support),
        or Frank-Wolfe stops at ``max_iter``.

    See Also
    --------
    MixtureLaw.predict_interval : the delta-method interval that `std` anticipates.
    optimal_mixture : the default target mixture.

    Notes
    -----
    **Reconstructed.** CAMEL studies how to split a compute budget over proxy scales but its rule was not
    available; this is the textbook answer, a locally c-optimal design with costs, and every open choice is a
    parameter (the candidates, the response, the noise model, the reserve).

    Design points are k = (s, j): size N_s with mixture q_j, cost c_s per run. A run's response
    (single response) is y_k = sum_i w_i L_i(N_s, q_j), with gradient f_k = d y_k / d theta at the pilot
    estimate and standard deviation sigma_k = sigma_log * y_hat_k (log-normal noise; ``multiresponse`` uses
    each loss with its own sigma). With budget fractions pi_k and n_k = pi_k C / c_k runs, the target
    phi = y(N*, r*) (or the benchmark score, by the chain rule) with gradient g has, to first order,

    .. math::

        \operatorname{Var}(\hat\phi) \approx \frac{1}{C}\, g^\top M(\pi)^{-} g, \qquad
        M(\pi) = \sum_k \pi_k \tilde f_k \tilde f_k^\top, \quad \tilde f_k = \frac{f_k}{\sigma_k \sqrt{c_k}} .

    Elfving's theorem: the minimum over pi of :math:`g^\top M(\pi)^- g` is :math:`1/t^2` where t solves
    the LP :math:`\max t` s.t. :math:`t g = \sum_k (\lambda^+_k - \lambda^-_k) \tilde f_k`,
    :math:`\sum_k (\lambda^+_k + \lambda^-_k) = 1`, :math:`\lambda \ge 0`, and
    :math:`\pi_k = \lambda^+_k + \lambda^-_k` (the support has at most p points). Every problem is solved in
    whitened estimable coordinates, which change no variance: parameters scaled to unit column norm, then
    mapped onto the right singular vectors of the candidates' Jacobian (singular values above ``1e-9`` of the
    largest) and divided by the singular values, so that one run of every candidate has information I. A
    single response of several losses identifies only combinations of the parameters (the weighted sum of
    the E_i), and a target outside the candidates' span is refused. The LP is polished on its support
    by the minimum-l1 representation :math:`g = \sum_k a_k \tilde f_k` (then :math:`\pi \propto |a|` and
    the variance is :math:`\|a\|_1^2`). For a saturated two-point design this gives the closed form
    :math:`n_k \propto |a'_k| / \sqrt{c_k}` with :math:`a' = J^{-\top} g` on the unscaled rows.
    With ``multiresponse`` the rows become blocks :math:`\tilde J_k` and the LP Sagnol's SOCP
    :math:`\max t` s.t. :math:`t g = \sum_k \tilde J_k^\top v_k`, :math:`\sum_k \|v_k\|_2 \le 1`,
    :math:`\pi_k = \|v_k\|_2`.

    Safeguard: a c-optimal design is saturated and usually sits on the extreme sizes, so the law could not
    be checked or even identified from it. A fraction rho = `reserve` of the budget is spread over
    `min_sizes` sizes (equal budget per size, and within a size equally over the candidate mixtures). Its
    information :math:`\rho M(\pi_{res})` is held fixed and the rest minimises
    :math:`g^\top(\rho M(\pi_{res}) + (1-\rho) M(\pi))^{-1} g` by away-step Frank-Wolfe (Lacoste-Julien and
    Jaggi 2015) started from the Elfving design, with exact line minimisation (along a step the objective
    is :math:`\sum_i c_i^2 / (1 + \gamma \lambda_i)` after one generalised eigendecomposition) and a ridge
    :math:`10^{-10} \operatorname{tr} M`. Each iteration also tries a projected Newton step on the current
    support plus the Frank-Wolfe vertex (same line minimisation) and keeps whichever lowers the objective
    more: plain Frank-Wolfe converges too slowly to the sparse optimum, and away steps alone still took
    thousands of iterations on a 55-parameter law, against 15 to 20 with the Newton steps. The iterations
    stop when the Frank-Wolfe duality gap, an upper bound on the distance to the optimum, falls below
    ``tol`` times the objective. `theta_samples` replace the objective by its mean over the samples (same
    solver, from the pilot's Elfving design). With ``multiresponse`` the SOCP's design is polished by the
    same solver (an interior-point solution leaves small weights off the support).

    Rounding: the reserve per size, :math:`\lfloor \rho C / (\text{min\_sizes}\, c_s) \rfloor` runs at each
    reserve size dealt round-robin over the mixtures (flooring each of its cells would drop it: its share of
    one cell is often under one run); the rest :math:`n_k = \lfloor (1-\rho) \pi^{opt}_k C / c_k \rfloor`; the
    leftover budget floored again over :math:`\pi` while that adds runs; then repeatedly the one run with the
    largest variance reduction per unit cost that still fits (the cost test is exact:
    ``math.fsum(runs * cost) <= budget``, so `cost` never exceeds `budget`), at most ``max_rounding`` runs
    (reaching that cap with budget left sets ``success=False`` and warns). A reserve size whose share buys
    no run warns. Since every support point keeps at least
    :math:`\pi_k C / c_k - 1` runs and adding runs never raises the variance, the rounded design satisfies
    :math:`V^* \le V(n) \le V(\pi) / (1 - \varepsilon)` with
    :math:`\varepsilon = \max_{k: \pi_k > 0} c_k / (\pi_k C) < 1`, where V(pi) = Phi(pi)/C is the continuous
    design's variance and :math:`V^*` the best integer design's (with ``reserve = 0``, V(pi) is also a lower
    bound on :math:`V^*`, so the rounding loses at most a factor :math:`1/(1-\varepsilon)`).

    The design is local: it depends on the pilot estimate (spec pitfall: use `theta_samples` when the pilot
    fit is poor); a common scale of `noise` only scales `std`.

    References
    ----------
    .. [1] G. Elfving, "Optimum allocation in linear regression theory", Ann. Math. Statist. 23 (1952).
    .. [2] G. Sagnol, "Computing optimal designs of multiresponse experiments reduces to second-order cone
       programming", J. Statist. Plann. Inference 141 (2011).
    .. [3] S. Lacoste-Julien and M. Jaggi, "On the global linear convergence of Frank-Wolfe optimization
       variants", NeurIPS 2015.
    .. [4] J. Li, X. Gu and J. Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization",
       ICML 2026 (arXiv 2603.08022).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture import MixtureLaw, allocate_budget
    >>> law = MixtureLaw.from_params("camel", {"E": [1.8], "theta": [[0.3, 0.0]], "alpha": [[0.3, 0.4]]},
    ...                              reference_size=1e8)
    >>> sizes = np.geomspace(1e7, 2e8, 6)
    >>> res = allocate_budget(400.0, sizes, lambda N: N / 1e7, law, target_size=1e9,
    ...                       target_mixture=[0.5, 0.5], mixtures=[[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]],
    ...                       noise=0.01, reserve=0.2, rng=0)
    >>> res.runs.shape, bool(res.cost <= 400.0)
    ((6, 3), True)
    >>> int(np.count_nonzero(res.runs_per_size)) >= 3          # the reserve covers three sizes
    True
    """
    # ---- validation ---------------------------------------------------------------------------------
    budget = check_real(budget, "budget", low=0.0, low_open=True)
    sizes = as_array(candidate_sizes, "candidate_sizes", ndim=1).astype(np.float64)
    if sizes.size == 0:
        raise ValueError("`candidate_sizes` must hold at least one size")
    if not np.all(np.isfinite(sizes)) or np.any(sizes <= 0):
        raise ValueError("`candidate_sizes` must be finite and > 0")
    if np.unique(sizes).size != sizes.size:
        raise ValueError("`candidate_sizes` must be distinct")
    S = sizes.size
    M, V, uses_tokens = _check_law(law, "law")
    costs = _per_size(cost_fn, sizes, "cost_fn")
    target_size = check_real(target_size, "target_size", low=0.0, low_open=True)
    n_mixtures = check_int(n_mixtures, "n_mixtures", minimum=1, maximum=C_INT_MAX)
    multiresponse = check_bool(multiresponse, "multiresponse")
    reserve = check_real(reserve, "reserve", low=0.0, high=1.0, high_open=True)
    min_sizes = check_int(min_sizes, "min_sizes", minimum=1, maximum=C_INT_MAX)
    if reserve > 0 and min_sizes > S:
        raise ValueError(f"`min_sizes` ({min_sizes}) exceeds the number of `candidate_sizes` ({S}): the "
                         "reserve cannot cover that many sizes (lower `min_sizes` or set `reserve=0`)")
    opts = check_options(options, "options")
    unknown = sorted(set(opts) - set(_OPTION_KEYS))
    if unknown:
        raise ValueError(f"`options` has unknown keys {unknown}; known: {list(_OPTION_KEYS)}")
    max_iter = check_int(opts.get("max_iter", 10_000), "options['max_iter']", minimum=1, maximum=C_INT_MAX)
    tol = check_real(opts.get("tol", 1e-9), "options['tol']", low=0.0, low_open=True)
    max_rounding = check_int(opts.get("max_rounding", 100_000), "options['max_rounding']", minimum=0,
                             maximum=C_INT_MAX)
    gen = normalize_rng(rng)

    if weights is None:
        w = np.full(V, 1.0 / V)
    else:
        w = as_array(weights, "weights", ndim=1).astype(np.float64)
        if w.shape != (V,):
            raise ValueError(f"`weights` must hold one weight per output of the law ({V}); got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
            raise ValueError("`weights` must be finite, >= 0 and not all zero")

    if benchmark is not None:
        if not (callable(getattr(benchmark, "predict", None)) and callable(getattr(benchmark, "derivative", None))
                and hasattr(benchmark, "loss_weights_")):
            raise TypeError("`benchmark` must be None or a fitted LossToBenchmarkLaw (predict, derivative, "
                            f"loss_weights_); got {type(benchmark).__name__}")
        u_shape = np.shape(benchmark.loss_weights_)
        if u_shape != (V,):
            raise ValueError(f"`benchmark` must read the law's {V} validation losses (its loss_weights_ has shape "
                             f"{u_shape}; fit it on {V} loss columns)")
    samples = None if theta_samples is None else _check_samples(theta_samples, M, V)

    if noise is None:
        sig = getattr(law, "residual_std_", None)
        try:
            sig = float(sig)
        except (TypeError, ValueError):
            sig = math.nan
        if not (math.isfinite(sig) and sig > 0):
            raise ValueError("`noise` is required: the law has no positive finite residual_std_ "
                             f"(got {getattr(law, 'residual_std_', None)!r}); pass the log-loss noise level")
        sigma_log = np.full(S, sig)
    elif isinstance(noise, (bool, np.bool_)) or _is_scalar(noise, "noise"):
        sigma_log = np.full(S, check_real(noise, "noise", low=0.0, low_open=True))
    else:
        sigma_log = _positive_vector(noise, "noise", S)

    tok = None
    t_tok = None
    if uses_tokens:
        if tokens is None:
            raise ValueError("`tokens` is required: the law reads the training tokens of each run")
        tok = _per_size(tokens, sizes, "tokens")
        if target_tokens is not None:
            t_tok = check_real(target_tokens, "target_tokens", low=0.0, low_open=True)
        elif callable(tokens):
            t_tok = float(_per_size(tokens, np.array([target_size]), "tokens")[0])
        else:
            raise ValueError("`target_tokens` is required when `tokens` is an array")
    else:
        if tokens is not None:
            raise ValueError("`tokens` was given, but the law does not read tokens; leave it None")
        if target_tokens is not None:
            raise ValueError("`target_tokens` was given, but the law does not read tokens; leave it None")

    if target_mixture is not None:
        r_star = _as_mixtures(target_mixture, "target_mixture", M, ndim=1)[0]
    if mixtures is not None:
        Q = _as_mixtures(mixtures, "mixtures", M, ndim=2)
    if target_mixture is None:
        from numtk.mixture._optimal_mixture import optimal_mixture

        kw = {"rng": gen}
        if t_tok is not None:
            kw["tokens"] = t_tok
        if benchmark is not None:
            kw["benchmarks"] = benchmark      # the benchmark's loss_weights_ aggregate the losses, not `weights`
        else:
            kw["weights"] = w
        r_star = np.asarray(optimal_mixture(law, target_size, **kw).mixture, dtype=np.float64)
    per_candidate = _bytes_per_candidate(law, r_star, target_size, t_tok, M, V, multiresponse,
                                         0 if samples is None else len(samples))
    if mixtures is None:
        check_size(S * n_mixtures, per_candidate, "n_mixtures")
        Q = np.vstack([r_star[None, :], gen.dirichlet(np.ones(M), size=n_mixtures - 1)]) if n_mixtures > 1 \
            else r_star[None, :].copy()
    m = Q.shape[0]
    K = S * m
    if mixtures is not None:
        check_size(K, per_candidate, "mixtures")

    with single_blas_thread():  # many small LAPACK calls: BLAS threads only cost here
        # ---- the linearised problems ------------------------------------------------------------------
        X = _features(np.repeat(sizes, m), np.tile(Q, (S, 1)), None if tok is None else np.repeat(tok, m))
        Xt = _features(np.array([target_size]), r_star[None, :], None if t_tok is None else np.array([t_tok]))
        sig_scale = float(sigma_log.max())    # factored out (a noise of 1e-308 or 1e308 must not overflow)
        sig_k = np.repeat(sigma_log / sig_scale, m)
        cost_k = np.repeat(costs, m)
        if budget < costs.min():
            raise ValueError(f"`budget` ({budget!r}) buys no run: the cheapest run (`cost_fn`) costs {costs.min()!r}")
        if budget / costs.min() >= MAX_RUNS:
            raise ValueError(f"`budget` buys up to {budget / costs.min():.3g} runs, more than 2**53 (`cost_fn` "
                             "gives costs in a unit too small for it)")
        pilot = _Problem(law, X, Xt, w, sig_k, multiresponse, benchmark, cost_k)
        Zc1 = pilot.Z / np.sqrt(cost_k)[:, None, None]

        # ---- the continuous design -----------------------------------------------------------------------
        if multiresponse and pilot.Z.shape[1] > 1:
            pi_e, _ = _elfving_socp(Zc1, pilot.h)
            what = "Sagnol's SOCP (multi-response)"
        else:
            pi_e, var_lp = _elfving_lp(Zc1[:, 0, :], pilot.h)
            what = "Elfving's LP"
            # HiGHS's tolerances are absolute: a badly scaled LP can stop off its optimum. Its own variance
            # against the design's, recomputed by SVD, tells; Frank-Wolfe then polishes the design.
            lp_off = not _variance(Zc1, pilot.h, pi_e) <= var_lp * (1 + 1e-6)
        problems = [pilot] if samples is None else [_Problem(s, X, Xt, w, sig_k, multiresponse, benchmark, cost_k)
                                                    for s in samples]
        n_iter, converged = 0, True
        pi_res = None
        if reserve > 0:
            chosen = _reserve_sizes(sizes, min_sizes)
            pi_res = np.zeros((S, m))
            pi_res[chosen] = 1.0 / (chosen.size * m)
            pi_res = pi_res.reshape(K)
        if multiresponse and pilot.Z.shape[1] > 1:
            lp_off = False
        if reserve > 0 or samples is not None or (multiresponse and pilot.Z.shape[1] > 1) or lp_off:
            Zc, H = _stack(problems, cost_k)
            pi_opt, _, n_iter, converged = _optimise(Zc, H, pi_e, fixed=pi_res, rho=reserve, tol=tol,
                                                    max_iter=max_iter)
            if samples is not None:
                what += " start, away-step Frank-Wolfe on the mean variance over the theta samples"
            else:
                what += " start, away-step Frank-Wolfe"
            if not converged:
                warnings.warn(f"allocate_budget: Frank-Wolfe stopped after {n_iter} iterations (`options` "
                              "max_iter) before its gap reached tol", NumtkWarning, stacklevel=2)
        else:
            pi_opt = pi_e
        pi = pi_opt if pi_res is None else reserve * pi_res + (1 - reserve) * pi_opt
        if reserve > 0:
            what += f" with {reserve:g} of the budget reserved over {min_sizes} sizes"

        # ---- rounding ------------------------------------------------------------------------------------
        Zs, H = _stack(problems, np.ones(K))
        base = floor_pi = None
        if pi_res is not None:
            # the reserve is rounded per size (its share over one size's mixtures is often under one run per
            # cell, and flooring cell by cell would drop it), the runs of a size dealt round-robin over mixtures
            base = _reserve_runs(chosen, reserve * budget / chosen.size, costs, m).reshape(K)
            floor_pi = (1 - reserve) * pi_opt
        n, _, capped = _round(Zs, H, pi, cost_k, budget, max_rounding, floor_pi=floor_pi, base=base)
        var_run = _variance(pilot.Z, pilot.h, n)
        if not math.isfinite(var_run):
            # a budget too small for the floored support: the greedy alone, from no run, may still find runs
            # that identify the target (tiny budgets)
            n0, _, capped0 = _round(Zs, H, pi, cost_k, budget, max_rounding, floor=False)
            var0 = _variance(pilot.Z, pilot.h, n0)
            if math.isfinite(var0):
                n, var_run, capped = n0, var0, capped0
        if capped:
            converged = False
            what += (f"; the rounding stopped at `options['max_rounding']` = {max_rounding} greedy runs with "
                     "budget left that would still lower the variance")
            warnings.warn(f"allocate_budget: the rounding stopped after `options['max_rounding']` = {max_rounding}"
                          " greedy runs while runs that lower the variance still fit the budget (raise it)",
                          NumtkWarning, stacklevel=2)
        if pi_res is not None:
            empty = [float(sizes[i]) for i in chosen if n.reshape(S, m)[i].sum() == 0]
            if empty:
                warnings.warn(f"allocate_budget: reserve sizes {empty} got no run (a run there costs more than the "
                              "reserve's share of the budget per size; raise `reserve` or `budget`, or lower "
                              "`min_sizes`)", NumtkWarning, stacklevel=2)
        std_design = math.sqrt(_variance(pilot.Z, pilot.h, pi * budget / cost_k)) * sig_scale
        std = math.sqrt(var_run) * sig_scale
        std_samples = None
        if samples is not None:
            std_samples = np.sqrt([_variance(p.Z, p.h, n) for p in problems]) * sig_scale
        if not math.isfinite(var_run):
            warnings.warn("allocate_budget: the rounded runs do not identify the target prediction (the budget is "
                          "too small for the design's support); std is inf", NumtkWarning, stacklevel=2)
        elif not (math.isfinite(std) and math.isfinite(std_design)):
            raise ValueError("`noise` is so large that the predicted standard deviation overflows")
        design = pi.reshape(S, m)
        runs = n.reshape(S, m)
        support = np.argwhere(design > 0).astype(np.int64)
        return Result(runs=runs, runs_per_size=runs.sum(axis=1), mixtures=Q, cost=_cost(n, cost_k),
                      budget_fraction=design.sum(axis=1), design=design, std=std,
                      std_design=std_design, std_samples=std_samples, support=support, run_cost=costs,
                      target_mixture=r_star, target_value=pilot.target_value, n_iter=int(n_iter),
                      success=bool(converged), message=what)
