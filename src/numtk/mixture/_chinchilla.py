"""The Chinchilla scaling law L(N, D) = E + A N^-alpha + B D^-beta, fitted by Huber on log residuals.

Hoffmann et al.'s approach 3 as the replication of Besiroglu et al. fits it: the law in log-sum-exp form,
the Huber loss of the log residuals, L-BFGS-B from many starts. numtk's default start is a variable
projection (for fixed exponents the law is linear in E, A, B), which finds the replication's optimum from
five starts instead of 4,500.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize

from numtk._lib import Result, as_map, single_blas_thread
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_bool, check_option, check_real, check_same_length
from numtk.mixture._huber import residual_loss

__all__ = ["chinchilla_fit"]

#: the variable-projection scan: a 30 x 30 grid of (alpha, beta) in [0.05, 1.5]^2, refined from the 5 best
VARPRO_GRID = np.linspace(0.05, 1.5, 30)
VARPRO_STARTS = 5
#: L-BFGS-B options of the variable-projection refinements (tight: the Huber objective has kinks)
VARPRO_OPTIONS = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 15000, "maxfun": 15000}
#: the replication's grid of starts (a, b, e, alpha, beta)
_GRID_AXES = {"alpha": np.arange(0, 2.5, 0.5), "beta": np.arange(0, 2.5, 0.5), "e": np.arange(-1, 1.5, 0.5),
              "a": np.arange(0, 30, 5), "b": np.arange(0, 30, 5)}


def _replication_grid() -> np.ndarray:
    """The 4,500 starts of the replication, rows (a, b, e, alpha, beta), in its loop order."""
    ax = _GRID_AXES
    return np.array([(a, b, e, al, be) for al, be, e, a, b in
                     itertools.product(ax["alpha"], ax["beta"], ax["e"], ax["a"], ax["b"])], dtype=np.float64)


def _objective(p: np.ndarray, logN: np.ndarray, logD: np.ndarray, logL: np.ndarray,
               delta: float | None) -> tuple[float, np.ndarray]:
    """Sum of rho(LSE(a - alpha log N, b - beta log D, e) - log L) and its gradient in (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = p
    t1 = a - alpha * logN
    t2 = b - beta * logD
    m = np.maximum(np.maximum(t1, t2), e)
    e1 = np.exp(t1 - m)
    e2 = np.exp(t2 - m)
    e3 = np.exp(e - m)
    s = e1 + e2 + e3
    r = m + np.log(s) - logL
    value, psi = residual_loss(r, delta)
    q = psi / s
    g1 = q @ e1
    g2 = q @ e2
    grad = np.array([g1, g2, q @ e3, -(q * e1) @ logN, -(q * e2) @ logD])
    return float(value.sum()), grad


def _refine(task: tuple) -> list[tuple[np.ndarray, float, bool, int, str]]:
    """L-BFGS-B from each start of a chunk (module level, so that a process pool can carry it)."""
    starts, logN, logD, logL, delta, options = task
    out = []
    with single_blas_thread():
        for x0 in starts:
            out.append(_refine_one(x0, logN, logD, logL, delta, options))
    return out


def _refine_one(x0: np.ndarray, logN: np.ndarray, logD: np.ndarray, logL: np.ndarray, delta: float | None,
                options: dict) -> tuple[np.ndarray, float, bool, int, str]:
    """One L-BFGS-B refinement: (x, objective, success, iterations, message); a non-finite end counts as inf."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        res = minimize(_objective, x0, args=(logN, logD, logL, delta), jac=True, method="L-BFGS-B",
                       options=options)
    x = np.asarray(res.x, dtype=np.float64)
    fun = float(res.fun)
    if not (np.all(np.isfinite(x)) and np.isfinite(fun)):
        fun = math.inf
    return x, fun, bool(res.success), int(res.nit), str(res.message)


def _varpro_starts(logN: np.ndarray, logD: np.ndarray, logL: np.ndarray, alphas: np.ndarray,
                   betas: np.ndarray, n_keep: int) -> np.ndarray:
    """Starts (a, b, e, alpha, beta) from non-negative least squares of (E + A N^-alpha + B D^-beta)/L - 1 at
    each pair (alphas[k], betas[k]), keeping the ``n_keep`` best with E, A, B > 0.

    The three columns are scaled to a largest entry of 1 in log space (no overflow for any size), and the
    NNLS of each pair is solved by enumerating the 7 non-empty supports: the restricted normal equations of
    each support are solved in one batch over the pairs, supports with a negative coefficient are infeasible,
    and the feasible support with the smallest residual is the NNLS solution (the problem is strictly convex
    when the columns are independent).
    """
    n = logL.size
    m = alphas.size
    # log of the columns less their largest entry; the coefficients scale back by exp(-shift)
    lu = -logL
    su = lu.max()
    u = np.exp(lu - su)                                           # (n,)
    lp = -alphas[:, None] * logN[None, :] - logL[None, :]         # (m, n)
    sp = lp.max(axis=1)
    P = np.exp(lp - sp[:, None])
    lq = -betas[:, None] * logD[None, :] - logL[None, :]          # (m, n)
    sq = lq.max(axis=1)
    Q = np.exp(lq - sq[:, None])
    G = np.empty((m, 3, 3))
    G[:, 0, 0] = u @ u
    G[:, 0, 1] = G[:, 1, 0] = P @ u
    G[:, 0, 2] = G[:, 2, 0] = Q @ u
    G[:, 1, 1] = np.einsum("mn,mn->m", P, P)
    G[:, 2, 2] = np.einsum("mn,mn->m", Q, Q)
    G[:, 1, 2] = G[:, 2, 1] = np.einsum("mn,mn->m", P, Q)
    g = np.column_stack([np.full(m, u.sum()), P.sum(axis=1), Q.sum(axis=1)])
    best_f = np.full(m, float(n))           # the empty support: residual sum n
    best_c = np.zeros((m, 3))
    for k in (1, 2, 3):
        for S in itertools.combinations(range(3), k):
            idx = np.array(S)
            Gs = G[:, idx[:, None], idx[None, :]]
            gs = g[:, idx]
            diag = np.sqrt(np.einsum("mii->mi", Gs))
            ok = np.all(diag > 0, axis=1)
            dn = np.where(diag > 0, diag, 1.0)
            Gn = Gs / dn[:, :, None] / dn[:, None, :]
            with np.errstate(invalid="ignore", over="ignore"):
                ok &= np.abs(np.linalg.det(Gn)) > 1e-13
            Gn[~ok] = np.eye(k)
            cs = np.linalg.solve(Gn, (gs / dn)[..., None])[..., 0] / dn
            f = n - np.einsum("mi,mi->m", cs, gs)
            ok &= np.all(cs >= 0, axis=1) & np.isfinite(f)
            better = ok & (f < best_f)
            best_f[better] = f[better]
            c = np.zeros((m, 3))
            c[:, idx] = cs
            best_c[better] = c[better]
    shifts = np.column_stack([np.full(m, su), sp, sq])
    positive = np.all(best_c > 0, axis=1)
    order = np.concatenate([np.flatnonzero(positive)[np.argsort(best_f[positive], kind="stable")],
                            np.flatnonzero(~positive)[np.argsort(best_f[~positive], kind="stable")]])
    chosen = order[:n_keep]
    c = best_c[chosen]
    # a pair without a positive solution (used only when fewer than n_keep have one): a small positive
    # coefficient stands in for each zero, a thousandth of what its column alone would fit
    alone = g[chosen] / np.maximum(np.einsum("mii->mi", G[chosen]), 1e-300)
    c = np.where(c > 0, c, 1e-3 * np.maximum(alone, 1e-300))
    logc = np.log(c) - shifts[chosen]
    # columns (E, A, B) -> start (a, b, e, alpha, beta)
    return np.column_stack([logc[:, 1], logc[:, 2], logc[:, 0], alphas[chosen], betas[chosen]])


def _chunks(n: int, mapper: Any) -> list[slice]:
    """Split ``n`` starts into tasks: one per start up to a few per worker, so the map balances."""
    workers = mapper.n_workers if mapper.n_workers is not None else 8
    per = max(1, -(-n // (4 * workers))) if workers > 1 else n
    return [slice(i, min(i + per, n)) for i in range(0, n, per)]


def _check_positive(x: Any, name: str) -> np.ndarray:
    arr = as_array(x, name, ndim=1, kinds="iuf").astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must hold finite values")
    if np.any(arr <= 0):
        raise ValueError(f"`{name}` must hold values > 0")
    return arr


@constraints(model_sizes="array1d", tokens="array1d", losses="array1d", loss="option", delta="real>0",
             init="option", grid="array2d", success_only="bool", workers="workers")
def chinchilla_fit(model_sizes: ArrayLike, tokens: ArrayLike, losses: ArrayLike, *, loss: str = "huber",
                   delta: float = 1e-3, init: str = "varpro", grid: ArrayLike | None = None,
                   success_only: bool = False, workers: int | Callable = 1) -> Result:
    r"""Fit the Chinchilla law :math:`L(N, D) = E + A N^{-\alpha} + B D^{-\beta}` by Huber on log residuals.

    The law is written :math:`\log \hat L = \mathrm{LSE}(a - \alpha \log N,\; b - \beta \log D,\; e)` with
    :math:`A = e^a`, :math:`B = e^b`, :math:`E = e^e`, and fitted by minimising
    :math:`\sum_n \rho_\delta(\log \hat L_n - \log L_n)` with L-BFGS-B and its analytic gradient (Hoffmann
    et al.'s approach 3, as replicated by Besiroglu et al.). The lowest objective among the starts wins.

    Parameters
    ----------
    model_sizes : array_like, shape (n,)
        Model sizes N (parameters), > 0.
    tokens : array_like, shape (n,)
        Training tokens D, > 0 (from compute, D = C / (6 N)).
    losses : array_like, shape (n,)
        Final losses L, > 0.
    loss : {'huber', 'l2'}, default 'huber'
        :math:`\rho_\delta(r) = r^2/2` for :math:`|r| \le \delta`, :math:`\delta(|r| - \delta/2)` beyond
        (``'huber'``), or :math:`r^2/2` everywhere (``'l2'``).
    delta : float, default 1e-3
        Huber threshold on log residuals (1e-3: a 0.1% misfit; ignored for ``'l2'``).
    init : {'varpro', 'grid'}, default 'varpro'
        ``'varpro'``: variable projection. For each :math:`(\alpha, \beta)` of a 30 x 30 grid in
        :math:`[0.05, 1.5]^2` the law is linear in (E, A, B); non-negative least squares of
        :math:`\sum_n ((E + A N_n^{-\alpha} + B D_n^{-\beta}) / L_n - 1)^2` gives them (solved for the whole
        grid at once by enumerating the supports of the 3-column problem), and the 5 grid points with the
        smallest residual and E, A, B > 0 start L-BFGS-B with ``ftol=1e-15``, ``gtol=1e-10``.
        ``'grid'``: the replication's 4,500 starts, :math:`\alpha, \beta \in \{0, 0.5, 1, 1.5, 2\}`,
        :math:`e \in \{-1, -0.5, 0, 0.5, 1\}`, :math:`a, b \in \{0, 5, \dots, 25\}`, each refined with SciPy's
        default L-BFGS-B tolerances (as the replication did).
    grid : array_like or None, default None
        Your own start grid in place of ``init``'s: for ``'varpro'`` an array (k, 2) of
        :math:`(\alpha, \beta)` pairs to scan (the 5 best are refined); for ``'grid'`` an array (k, 5) of
        starts :math:`(a, b, e, \alpha, \beta)` = (log A, log B, log E, alpha, beta), each refined.
    success_only : bool, default False
        Select only among starts that L-BFGS-B flags as converged (the replication's rule); if none is, the
        best start overall is returned with ``success=False``. By default the lowest objective wins whatever
        its flag (with finite-difference gradients the flag is often an abnormal line search at the
        optimum; with the analytic gradient used here both rules usually agree).
    workers : int or map-like callable, default 1
        Maps the refinements over starts (``-1``: every core; or ``Pool.map``-like). Results do not depend
        on it.

    Returns
    -------
    res : Result
        A, B, E : float
            The fitted coefficients.
        alpha, beta : float
            The fitted exponents.
        log_A, log_B, log_E : float
            Their logarithms (the fitted parameters a, b, e).
        value : float
            The objective :math:`\sum_n \rho_\delta(\log \hat L_n - \log L_n)` at the selected start.
        success : bool
            L-BFGS-B's convergence flag of the selected start.
        n_starts : int
            Number of starts refined.
        n_iter : int
            L-BFGS-B iterations of the selected start.
        message : str
            L-BFGS-B's message of the selected start.
        n_opt_exponent, d_opt_exponent : float
            :math:`\beta/(\alpha+\beta)` and :math:`\alpha/(\alpha+\beta)`: the compute-optimal
            :math:`N_{opt} \propto C^{\beta/(\alpha+\beta)}`, :math:`D_{opt} \propto C^{\alpha/(\alpha+\beta)}`
            (NaN unless :math:`\alpha + \beta > 0`).
        G : float
            :math:`(\alpha A / (\beta B))^{1/(\alpha+\beta)}` (NaN unless :math:`\alpha, \beta > 0`).

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one length with at least 5 entries, finite and > 0, if ``model_sizes``
        or ``tokens`` holds fewer than 2 distinct values, or if ``grid`` has the wrong shape.

    Notes
    -----
    Compute-optimal frontier: for :math:`C = 6ND` the loss at fixed compute is smallest at

    .. math:: N_{opt} = G\,(C/6)^{\beta/(\alpha+\beta)}, \qquad D_{opt} = G^{-1} (C/6)^{\alpha/(\alpha+\beta)},
              \qquad G = \left(\frac{\alpha A}{\beta B}\right)^{1/(\alpha+\beta)}.

    With :math:`\delta = 10^{-3}` most residuals lie in Huber's linear branch, so the fit is close to least
    absolute deviations; the objective's gradient is continuous but its Hessian is not, which is why the
    analytic gradient and tight tolerances matter. On the replication's data (the 245 points digitised from
    the paper's Figure 4, the 5 largest losses dropped, D = FLOP/(6N)) both starts reach the objective
    1.0182740e-3 with A = 477.8, B = 2143, E = 1.8172, alpha = 0.34731, beta = 0.36717 (numtk's tests check
    it when the user supplies that file; it carries no licence and is not shipped). The replication's
    headline numbers come from a different estimator (maximum likelihood with a Huber density and a fitted
    scale), and Hoffmann et al. published E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28.

    The fitted parameters are not bounded: an exponent may come out <= 0 on data that do not determine it,
    and the frontier fields are then NaN.

    References
    ----------
    .. [1] J. Hoffmann et al., "Training Compute-Optimal Large Language Models", NeurIPS 2022,
           arXiv:2203.15556.
    .. [2] T. Besiroglu, E. Erdil, M. Barnett, J. You, "Chinchilla Scaling: A replication attempt",
           arXiv:2404.10102, 2024.

    Examples
    --------
    Noise-free losses of Hoffmann et al.'s published law on an 8 x 8 grid of sizes and token counts:

    >>> import numpy as np
    >>> from numtk.mixture import chinchilla_fit
    >>> N, D = (g.ravel() for g in np.meshgrid(np.logspace(7, 10, 8), np.logspace(9, 12, 8)))
    >>> L = 1.69 + 406.4 * N**-0.34 + 410.7 * D**-0.28
    >>> res = chinchilla_fit(N, D, L)
    >>> print(f"E={res.E:.4f} A={res.A:.2f} B={res.B:.2f} alpha={res.alpha:.4f} beta={res.beta:.4f}")
    E=1.6900 A=406.40 B=410.70 alpha=0.3400 beta=0.2800
    >>> round(res.n_opt_exponent, 4), round(res.d_opt_exponent, 4)
    (0.4516, 0.5484)
    """
    N = _check_positive(model_sizes, "model_sizes")
    D = _check_positive(tokens, "tokens")
    L = _check_positive(losses, "losses")
    n = check_same_length(model_sizes=N, tokens=D, losses=L)
    if n < 5:
        raise ValueError(f"`losses` must hold at least 5 runs (the law has 5 parameters); got {n}")
    for arr, name in ((N, "model_sizes"), (D, "tokens")):
        if np.unique(arr).size < 2:
            raise ValueError(f"`{name}` must hold at least 2 distinct values to determine its exponent")
    loss = check_option(loss, "loss", ("huber", "l2"))
    delta = check_real(delta, "delta", low=0.0, low_open=True)
    init = check_option(init, "init", ("varpro", "grid"))
    success_only = check_bool(success_only, "success_only")
    rho_delta = delta if loss == "huber" else None

    logN, logD, logL = np.log(N), np.log(D), np.log(L)
    if init == "varpro":
        if grid is None:
            pairs = np.array(list(itertools.product(VARPRO_GRID, VARPRO_GRID)))
        else:
            pairs = _check_grid(grid, 2)
        starts = _varpro_starts(logN, logD, logL, pairs[:, 0], pairs[:, 1], VARPRO_STARTS)
        options = dict(VARPRO_OPTIONS)
    else:
        starts = _replication_grid() if grid is None else _check_grid(grid, 5)
        options = {}

    with as_map(workers) as mapper:
        chunks = _chunks(len(starts), mapper)
        tasks = [(starts[s], logN, logD, logL, rho_delta, options) for s in chunks]
        runs = [r for part in mapper(_refine, tasks) for r in part]

    values = np.array([r[1] for r in runs])
    flags = np.array([r[2] for r in runs])
    pool = np.flatnonzero(flags) if success_only and flags.any() else np.arange(len(runs))
    best = int(pool[np.argmin(values[pool])])
    x, value, success, nit, message = runs[best]
    if not np.isfinite(value):
        raise ValueError("`losses` could not be fitted: every start ended at a non-finite objective")
    log_A, log_B, log_E, alpha, beta = (float(v) for v in x)
    with np.errstate(all="ignore"):
        s = alpha + beta
        n_exp = beta / s if s > 0 else math.nan
        d_exp = alpha / s if s > 0 else math.nan
        G = (math.exp((math.log(alpha) + log_A - math.log(beta) - log_B) / s)
             if alpha > 0 and beta > 0 else math.nan)
    if not math.isfinite(G):
        G = math.nan
    return Result(A=math.exp(log_A), B=math.exp(log_B), E=math.exp(log_E), alpha=alpha, beta=beta,
                  log_A=log_A, log_B=log_B, log_E=log_E, value=value, success=success, n_starts=len(runs),
                  n_iter=nit, message=message, n_opt_exponent=n_exp, d_opt_exponent=d_exp, G=G)


def _check_grid(grid: Any, width: int) -> np.ndarray:
    what = "(alpha, beta) pairs" if width == 2 else "starts (a, b, e, alpha, beta)"
    arr = as_array(grid, "grid", ndim=2, kinds="iuf").astype(np.float64)
    if arr.shape[1] != width or arr.shape[0] < 1:
        raise ValueError(f"`grid` must be an array (k, {width}) of {what} with k >= 1; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`grid` must hold finite values")
    return arr

