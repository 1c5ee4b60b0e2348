"""The Chinchilla scaling law L(N, D) = E + A N^-alpha + B D^-beta, fitted by Huber on log residuals.

Hoffmann et al.'s approach 3 as the replication of Besiroglu et al. fits it: the law in log-sum-exp form,
the Huber loss of the log residuals, L-BFGS-B from many starts. numtk's default start is a variable
projection (for fixed exponents the law is linear in E, A, B), which finds the replication's optimum from
five starts instead of 4,500.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import minimize

from numtk._lib import NumtkWarning, Result, as_map, normalize_rng, single_blas_thread
from numtk._lib._constraints import constraints
from numtk._lib._validation import (as_array, check_bool, check_int, check_option, check_real,
                                    check_same_length)
from numtk.mixture._huber import residual_loss

__all__ = ["chinchilla_fit"]

#: the variable-projection scan: a 30 x 30 grid of (alpha, beta) in [0.05, 1.5]^2, refined from the 5 best
VARPRO_GRID = np.linspace(0.05, 1.5, 30)
VARPRO_STARTS = 5
#: L-BFGS-B options of the variable-projection refinements (tight: the Huber objective has kinks)
VARPRO_OPTIONS = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 15000, "maxfun": 15000}
#: the replication's grid of starts (a, b, e, alpha, beta)
#: the covariance is reported as not identified when the curvature matrix, scaled to a unit diagonal, has
#: an eigenvalue below this fraction of its largest (a Jacobian singular-value ratio below 1e-6)
IDENTIFIED_RTOL = 1e-12
#: resamples per task of the bootstrap (fixed, so that the draws do not depend on ``workers``)
_BOOT_CHUNK = 16
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


def _log_jacobian(p: np.ndarray, logN: np.ndarray, logD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log prediction LSE(a - alpha log N, b - beta log D, e) and its Jacobian (n, 5) in
    (a, b, e, alpha, beta): the softmax weights w of the three terms give (w1, w2, w3, -w1 log N, -w2 log D)."""
    a, b, e, alpha, beta = p
    t = np.stack(np.broadcast_arrays(a - alpha * logN, b - beta * logD, np.full_like(logN, e)))
    m = t.max(axis=0)
    w = np.exp(t - m)
    s = w.sum(axis=0)
    w /= s
    J = np.column_stack([w[0], w[1], w[2], -w[0] * logN, -w[1] * logD])
    return m + np.log(s), J


def _covariance(p: np.ndarray, logN: np.ndarray, logD: np.ndarray, logL: np.ndarray,
                delta: float | None) -> tuple[np.ndarray, str]:
    """Delta-method covariance (5, 5) of (a, b, e, alpha, beta) at the fit ``p``, or NaN and the reason.

    l2: sigma^2 (J^T J)^-1 with sigma^2 = RSS / (n - 5). Huber: the sandwich n/(n - 5) A^-1 B A^-1 with
    A = J^T diag(rho'') J (rho'' = 1 inside the threshold, 0 beyond) and B = J^T diag(psi^2) J.
    """
    n = logL.size
    nan = np.full((5, 5), math.nan)
    if n <= 5:
        return nan, f"{n} runs leave no residual degrees of freedom for the 5 parameters"
    with np.errstate(all="ignore"):
        pred, J = _log_jacobian(p, logN, logD)
    r = pred - logL
    if not (np.all(np.isfinite(J)) and np.all(np.isfinite(r))):
        return nan, "the fitted law is not finite at every run"
    if delta is None:
        curv = np.ones(n)
    else:
        curv = (np.abs(r) <= delta).astype(np.float64)
    A = J.T @ (curv[:, None] * J)
    d = np.sqrt(np.diag(A))
    if not np.all(d > 0):
        return nan, "a parameter moves no run inside the quadratic part of the loss"
    As = A / d[:, None] / d[None, :]
    ev, V = np.linalg.eigh(As)
    if ev[0] <= IDENTIFIED_RTOL * ev[-1]:
        why = ("the runs do not determine every parameter (e.g. too few distinct model sizes or token counts)"
               if delta is None or curv.sum() >= 5 else
               f"only {int(curv.sum())} runs lie inside the Huber threshold `delta`")
        return nan, why
    Ainv = (V / ev) @ V.T / d[:, None] / d[None, :]
    if delta is None:
        cov = float(r @ r) / (n - 5) * Ainv
    else:
        psi = np.clip(r, -delta, delta)
        B = J.T @ ((psi * psi)[:, None] * J)
        cov = n / (n - 5) * (Ainv @ B @ Ainv)
    return 0.5 * (cov + cov.T), ""


def _refit_resamples(task: tuple) -> np.ndarray:
    """One warm-started L-BFGS-B per resample (rows of ``idx``); a non-finite refit gives a row of NaN."""
    x0, idx, logN, logD, logL, delta, options = task
    out = np.full((len(idx), 5), math.nan)
    with single_blas_thread():
        for k, rows in enumerate(idx):
            x, fun, _, _, _ = _refine_one(x0, logN[rows], logD[rows], logL[rows], delta, options)
            if np.isfinite(fun):
                out[k] = x
    return out


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
             init="option", grid="array2d", success_only="bool", n_resamples="int>=0", rng="rng",
             workers="workers")
def chinchilla_fit(model_sizes: ArrayLike, tokens: ArrayLike, losses: ArrayLike, *, loss: str = "huber",
                   delta: float = 1e-3, init: str = "varpro", grid: ArrayLike | None = None,
                   success_only: bool = False, n_resamples: int = 0, rng: Any = None,
                   workers: int | Callable = 1) -> Result:
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
    n_resamples : int, default 0
        Case-bootstrap refits (0: none). Each resamples the n runs with replacement and refits with one
        L-BFGS-B (``ftol=1e-15``, ``gtol=1e-10``) warm-started at the fitted point.
    rng : None, int or numpy.random.Generator, default None
        Draws the bootstrap resamples (unused when ``n_resamples=0``).
    workers : int or map-like callable, default 1
        Maps the refinements over starts and the bootstrap refits (``-1``: every core; or
        ``Pool.map``-like). Results do not depend on it.

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
        covariance : ndarray, shape (5, 5)
            Delta-method covariance of (log_A, log_B, log_E, alpha, beta) (see Notes); NaN, with a
            warning, when the runs do not identify every parameter.
        std_errors : ndarray, shape (5,)
            Square roots of its diagonal, in the same order.
        bootstrap : ndarray, shape (n_resamples, 5), or None
            The refitted (log_A, log_B, log_E, alpha, beta) of each resample (a row of NaN where a refit
            ended at a non-finite objective, with a warning); None when ``n_resamples=0``.
        bootstrap_std_errors : ndarray, shape (5,), or None
            Standard deviations (ddof 1) of the finite rows of ``bootstrap``; None when ``n_resamples=0``.

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

    **Uncertainty.** With :math:`J` the Jacobian (n, 5) of :math:`\log \hat L_n` with respect to
    :math:`\theta = (a, b, e, \alpha, \beta)` at the fit (rows :math:`(w_1, w_2, w_3, -w_1 \log N,
    -w_2 \log D)`, :math:`w` the shares :math:`A N^{-\alpha}/\hat L`, :math:`B D^{-\beta}/\hat L`,
    :math:`E/\hat L`) and :math:`r` the log residuals, ``covariance`` is

    - ``loss='l2'``: :math:`\hat\sigma^2 (J^\top J)^{-1}` with :math:`\hat\sigma^2 = \sum_n r_n^2/(n-5)`
      (homoscedastic log residuals);
    - ``loss='huber'``: the M-estimator sandwich :math:`\frac{n}{n-5} H^{-1} S H^{-1}` with
      :math:`H = J^\top \mathrm{diag}(\rho''(r)) J`, :math:`S = J^\top \mathrm{diag}(\rho'(r)^2) J`
      (:math:`\rho'' = 1` inside the threshold, 0 beyond; the factor :math:`n/(n-5)` is a small-sample
      choice of numtk). Only the runs inside :math:`\delta` carry curvature, so with the default
      :math:`\delta = 10^{-3}` on noisy data the sandwich rests on few runs and is itself noisy: prefer
      the bootstrap there.

    The inverse is taken after scaling :math:`H` to a unit diagonal; when its smallest eigenvalue is below
    1e-12 of its largest (e.g. only two distinct model sizes: E, A and alpha then enter through two
    numbers), or when n = 5, the covariance is NaN and a warning says why.

    A delta-method interval for :math:`\log L` at a new :math:`(N, D)`: with :math:`g` the gradient
    :math:`(w_1, w_2, w_3, -w_1 \log N, -w_2 \log D)` there, :math:`\operatorname{Var} \log \hat L \approx
    g^\top\, \mathtt{covariance}\, g`, so :math:`\log \hat L \pm z_{1-\gamma/2} \sqrt{g^\top C g}` (an
    interval for the law, not for a new run's noise; add :math:`\hat\sigma^2` for that). The Example does
    it. For the bootstrap, evaluate the law at each row of ``bootstrap`` and take quantiles.

    On the replication's 240 runs (above) the Huber sandwich gives standard errors (0.42, 0.31, 0.016,
    0.026, 0.015) for (log A, log B, log E, alpha, beta) and 400 case resamples give (0.25, 0.42, 0.015,
    0.015, 0.021), a standard deviation of B of about 1,600; the replication reports a bootstrap standard
    error of B of about 1,293 for its Huber-likelihood estimator.

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

    With 1% log-normal noise, least squares, and a 95% delta-method interval of the loss at a larger
    model and more tokens than any run:

    >>> rng = np.random.default_rng(0)
    >>> Ln = L * np.exp(0.01 * rng.standard_normal(L.size))
    >>> res = chinchilla_fit(N, D, Ln, loss="l2")
    >>> Nq, Dq = 7e10, 1.4e12
    >>> t = np.array([res.log_A - res.alpha * np.log(Nq), res.log_B - res.beta * np.log(Dq), res.log_E])
    >>> w = np.exp(t - t.max()) / np.exp(t - t.max()).sum()
    >>> g = np.array([w[0], w[1], w[2], -w[0] * np.log(Nq), -w[1] * np.log(Dq)])
    >>> log_pred = t.max() + np.log(np.exp(t - t.max()).sum())
    >>> half = 1.959964 * np.sqrt(g @ res.covariance @ g)
    >>> lo, hi = np.exp(log_pred - half), np.exp(log_pred + half)
    >>> print(f"L = {np.exp(log_pred):.3f} in [{lo:.3f}, {hi:.3f}]")
    L = 1.952 in [1.932, 1.973]
    >>> round(1.69 + 406.4 * Nq**-0.34 + 410.7 * Dq**-0.28, 3)  # the noise-free law there
    1.937
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
    n_resamples = check_int(n_resamples, "n_resamples", minimum=0, maximum=1_000_000)
    gen = normalize_rng(rng)
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

        boot = boot_se = None
        if n_resamples > 0:
            # the draws are made here, in order and in fixed blocks, so they do not depend on `workers`
            btasks = [(x, gen.integers(0, n, size=(min(_BOOT_CHUNK, n_resamples - i), n)), logN, logD, logL,
                       rho_delta, dict(VARPRO_OPTIONS)) for i in range(0, n_resamples, _BOOT_CHUNK)]
            boot = np.concatenate(list(mapper(_refit_resamples, btasks)), axis=0)
            ok = np.all(np.isfinite(boot), axis=1)
            if ok.sum() >= 2:
                boot_se = boot[ok].std(axis=0, ddof=1)
            else:
                boot_se = np.full(5, math.nan)
            if not ok.all():
                warnings.warn(f"{int((~ok).sum())} of {n_resamples} bootstrap refits ended at a non-finite "
                              "objective; their rows of `bootstrap` are NaN and `bootstrap_std_errors` omits "
                              "them", NumtkWarning, stacklevel=2)

    cov, why = _covariance(x, logN, logD, logL, rho_delta)
    if why:
        warnings.warn(f"the covariance of the fit is not identified: {why}; `covariance` and "
                      "`std_errors` are NaN", NumtkWarning, stacklevel=2)
    std_errors = np.sqrt(np.clip(np.diag(cov), 0.0, None)) if not why else np.full(5, math.nan)
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
                  n_iter=nit, message=message, n_opt_exponent=n_exp, d_opt_exponent=d_exp, G=G,
                  covariance=cov, std_errors=std_errors, bootstrap=boot, bootstrap_std_errors=boot_se)


def _check_grid(grid: Any, width: int) -> np.ndarray:
    what = "(alpha, beta) pairs" if width == 2 else "starts (a, b, e, alpha, beta)"
    arr = as_array(grid, "grid", ndim=2, kinds="iuf").astype(np.float64)
    if arr.shape[1] != width or arr.shape[0] < 1:
        raise ValueError(f"`grid` must be an array (k, {width}) of {what} with k >= 1; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`grid` must hold finite values")
    return arr

