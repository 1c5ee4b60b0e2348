r"""The capacity-KKT mixture law of Dai & Zheng: an inner allocation of model capacity across domains.

For K training domains that are also the K validation domains, the loss on domain i of a model of size N
trained on D tokens with mixture h is

    L_i(h, N, D) = c_i x_i*(h)^{-b_i} + A_i (D h_i)^{-a_i} + E_i,

    x*(h) = argmin_x  sum_i h_i c_i x_i^{-b_i}   s.t.  sum_i x_i = N + (K - 1) H,  x_i >= H,

with N in millions of parameters and D in billions of tokens (the paper's units; the functions here take
N and D raw and convert), 5K + 1 parameters (b, c, A, a, E per domain and the shared floor H, in millions).
The model spreads its capacity over the domains so as to minimise the mixture-weighted capacity loss;
every domain gets at least H.

Inner solution (KKT; derived from the conditions, not taken from the paper): with multiplier lambda > 0,
x_i(lambda) = max(H, (b_i c_i h_i / lambda)^{1/(1+b_i)}), and lambda solves sum_i x_i(lambda) = N + (K-1)H.
The sum is convex and decreasing in mu = log lambda, so Newton's method started left of the root (where the
largest term alone reaches the total) rises monotonically to it; it takes a handful of steps per row and
is vectorised over rows. Derivatives of x* with respect to (b, c, H, h) follow from the implicit function
theorem on the active system: on the free set F (x_i > H), with w_i = x_i / (1 + b_i) and W = sum_F w_i,
dx_i = w_i (du_i - dmu), and sum_F dx_i = dN + (K - 1 - |A|) dH fixes dmu.

Private: ``MixtureLaw(form='capacity_kkt')`` calls these functions.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize, nnls

from numtk._lib import Result, progress_bar, single_blas_thread, spawn_rngs
from numtk.mixture._huber import residual_loss

__all__ = ["COEF_ORDER", "H_MIN", "N_UNIT", "D_UNIT", "kkt_inner", "kkt_predict", "kkt_jacobian",
           "kkt_mixture_gradient", "kkt_fit", "coef_names"]

#: the parameters in the order of the flat coefficient vector: b, c, A, a, E (K each), then H
COEF_ORDER = ("b", "c", "A", "a", "E", "H")
#: mixture weights are floored here and renormalised (the noise term diverges at h_i = 0)
H_MIN = 1e-4
#: sizes are read in millions of parameters, tokens in billions
N_UNIT = 1e6
D_UNIT = 1e9

#: L-BFGS-B bounds of the log parameters: exponents in [1e-4, 5], scales within e^{+-60}
_LOG_EXPONENT = (math.log(1e-4), math.log(5.0))
_LOG_SCALE = (-60.0, 60.0)
_LBFGSB = {"ftol": 1e-15, "gtol": 1e-10, "maxiter": 5000, "maxfun": 10000}
_NEWTON_STEPS = 100


def coef_names(K: int) -> list[str]:
    """Names of the flat coefficients: ``b[0] .. b[K-1], c[0], ..., E[K-1], H``."""
    return [f"{p}[{i}]" for p in COEF_ORDER[:-1] for i in range(K)] + ["H"]


# ---------------------------------------------------------------------------------------------------
# the inner allocation
# ---------------------------------------------------------------------------------------------------
def _inner(h: np.ndarray, N: np.ndarray, b: np.ndarray, c: np.ndarray, H: float):
    """x* and the quantities its derivatives need: (x, free mask, w, W, n_active, mu = log lambda).

    ``N`` in the units of ``H`` (millions). Rows with N <= H cannot meet the total with every x_i >= H;
    there x* = H for every domain (all constraints active; W = 0). The total is convex and decreasing in mu,
    so Newton's method from any point left of the root rises monotonically to it, and from a point right of it
    one step lands left. Iterates are kept right of mu_lo, where the largest term alone reaches the total (left
    of the root). (No warm start from a previous solution: that made the fit's objective depend on its
    history in the last bits.)
    """
    R, K = h.shape
    with np.errstate(divide="ignore"):
        ell = np.log(b * c) + np.log(h)                      # (R, K), -inf where h_i = 0
    S = N + (K - 1) * H                                        # (R,)
    feasible = N > H
    inv = 1.0 / (1.0 + b)
    logS = np.log(np.where(feasible, S, 1.0))
    # left of the root: the largest single term equals the total S
    mu = np.max(ell - (1.0 + b) * logS[:, None], axis=1)
    mu = np.where(feasible & np.isfinite(mu), mu, 0.0)
    active_rows = feasible & np.isfinite(np.max(ell, axis=1))
    idx = np.flatnonzero(active_rows)
    if idx.size:
        e = ell[idx]
        s_sub = S[idx]
        lo = mu[idx]
        # first guess: the root when every domain is free and shares the mean exponent; right of the true root
        # it costs one step (the tangent of a convex decreasing function crosses zero left of the root)
        bm = 1.0 + float(np.mean(b))
        with np.errstate(invalid="ignore"):
            top = np.max(e, axis=1)
            guess = bm * (top / bm + np.log(np.exp((e - top[:, None]) / bm).sum(axis=1)) - np.log(s_sub))
        m = np.maximum(lo, np.where(np.isfinite(guess), guess, lo))
        for _ in range(_NEWTON_STEPS):
            with np.errstate(under="ignore", over="ignore"):
                y = np.exp((e - m[:, None]) * inv)
            free = y > H
            f = np.where(free, y, H).sum(axis=1) - s_sub
            fp = (np.where(free, y, 0.0) * inv).sum(axis=1)
            # fp = 0 only where every x_i sits at H, right of the root: back to the cold start
            step = np.where(fp > 0, f / np.where(fp > 0, fp, 1.0), lo - m)
            m = np.maximum(m + step, lo)
            if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(m))) or np.all(np.abs(f) <= 1e-15 * s_sub):
                break
        mu[idx] = m
    with np.errstate(under="ignore", over="ignore"):
        y = np.exp((ell - mu[:, None]) * inv)
    free = (y > H) & active_rows[:, None]
    x = np.where(free, y, H)
    w = np.where(free, x * inv, 0.0)
    W = w.sum(axis=1)
    n_active = K - free.sum(axis=1)
    return x, free, w, W, n_active, mu


def kkt_inner(h: np.ndarray, N: np.ndarray, b: np.ndarray, c: np.ndarray, H: float) -> np.ndarray:
    r"""The capacity allocation x*(h): argmin sum_i h_i c_i x_i^{-b_i} s.t. sum x = N + (K-1)H, x >= H.

    Parameters
    ----------
    h : ndarray, shape (R, K)
        Mixture weights (>= 0; a zero weight gets x_i = H).
    N : ndarray, shape (R,)
        Model sizes in the units of ``H`` (millions of parameters in the law).
    b, c : ndarray, shape (K,)
        Exponents and coefficients of the capacity term (> 0).
    H : float
        The per-domain floor (> 0). Rows with N <= H have no feasible allocation; they get x* = H.

    Returns
    -------
    x : ndarray, shape (R, K)
        The allocation; x_i = max(H, (b_i c_i h_i / lambda)^{1/(1+b_i)}) with lambda set by the total.
    """
    h = np.atleast_2d(np.asarray(h, dtype=np.float64))
    N = np.broadcast_to(np.asarray(N, dtype=np.float64), (h.shape[0],))
    return _inner(h, N, np.asarray(b, dtype=np.float64), np.asarray(c, dtype=np.float64), float(H))[0]


# ---------------------------------------------------------------------------------------------------
# the law
# ---------------------------------------------------------------------------------------------------
def _floor(h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mixtures floored at H_MIN and renormalised: (h~, the floored weights f, their row sums s)."""
    f = np.maximum(h, H_MIN)
    s = f.sum(axis=1)
    return f / s[:, None], f, s


def _unpack(params: dict) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(params[k], dtype=np.float64) for k in COEF_ORDER[:-1]) + (float(params["H"]),)


def _prepare(params: dict, N: Any, D: Any, h: Any):
    h = np.atleast_2d(np.asarray(h, dtype=np.float64))
    R = h.shape[0]
    Nm = np.broadcast_to(np.asarray(N, dtype=np.float64), (R,)) / N_UNIT
    Db = np.broadcast_to(np.asarray(D, dtype=np.float64), (R,)) / D_UNIT
    ht, _, _ = _floor(h)
    return _unpack(params), Nm, Db, ht


def _terms(b, c, A, a, E, H, Nm, Db, ht):
    """Forward pass: the prediction and every intermediate the derivatives use."""
    x, free, w, W, n_active, mu = _inner(ht, Nm, b, c, H)
    logx = np.log(x)
    xb = np.exp(-b * logx)                      # x^-b
    cap = c * xb                                # c x^-b
    logz = np.log(Db[:, None] * ht)
    z = np.exp(-a * logz)                       # (D h)^-a
    noise = A * z
    pred = cap + noise + E
    return dict(x=x, free=free, w=w, W=W, n_active=n_active, mu=mu, logx=logx, xb=xb, cap=cap, logz=logz, z=z,
                noise=noise, pred=pred)


def kkt_predict(params: dict, N: Any, D: Any, h: Any) -> np.ndarray:
    r"""Losses L_i = c_i x_i*^{-b_i} + A_i (D h_i)^{-a_i} + E_i, shape (R, K).

    ``N`` (parameters) and ``D`` (tokens) are raw, shape (R,) or scalars; they are read in millions and
    billions. ``h`` (R, K) is floored at 1e-4 and renormalised. ``params``: 'b', 'c', 'A', 'a', 'E' (K,)
    and 'H' (float, millions).
    """
    (b, c, A, a, E, H), Nm, Db, ht = _prepare(params, N, D, h)
    return _terms(b, c, A, a, E, H, Nm, Db, ht)["pred"]


def _dx(t: dict, u: np.ndarray) -> np.ndarray:
    """dx_i/dp_j for a parameter acting on domain j through u_j = d(log(b_j c_j h_j) - log x_j (1+b_j))/dp_j
    at fixed x: w_i u_j (delta_ij - w_j / W), shape (R, K, K); zero where x_i or x_j sits at H."""
    w, W = t["w"], t["W"]
    Wd = np.where(W > 0, W, 1.0)
    wu = w * u                                  # (R, K): w_j u_j
    out = -(w[:, :, None] * wu[:, None, :]) / Wd[:, None, None]
    idx = np.arange(w.shape[1])
    out[:, idx, idx] += wu
    return out


def _dx_dH(t: dict, K: int) -> np.ndarray:
    """dx_i/dH: w_i (K - 1 - |A|) / W on the free set, 1 on the active set."""
    W = t["W"]
    Wd = np.where(W > 0, W, 1.0)
    return np.where(t["free"], t["w"] * ((K - 1 - t["n_active"]) / Wd)[:, None], 1.0)


def kkt_jacobian(params: dict, N: Any, D: Any, h: Any) -> np.ndarray:
    r"""d L_i / d coef, shape (R, K, 5K + 1), coefficients in the order [b, c, A, a, E, H].

    Analytic: the direct terms plus -b_i c_i x_i^{-b_i-1} dx_i/dp, with dx*/d(b, c, H) from the implicit
    function theorem on the active KKT system (see the module docstring). At a change of the active set the
    law is continuous but not differentiable; there the one-sided derivative of the current active set is
    returned.
    """
    (b, c, A, a, E, H), Nm, Db, ht = _prepare(params, N, D, h)
    t = _terms(b, c, A, a, E, H, Nm, Db, ht)
    R, K = ht.shape
    q = -b * t["cap"] / t["x"]                  # dL_i/dx_i
    J = np.zeros((R, K, 5 * K + 1))
    idx = np.arange(K)
    dxb = _dx(t, 1.0 / b - t["logx"])
    dxc = _dx(t, np.broadcast_to(1.0 / c, (R, K)))
    J[:, :, 0:K] = q[:, :, None] * dxb
    J[:, idx, idx] += -t["cap"] * t["logx"]
    J[:, :, K:2 * K] = q[:, :, None] * dxc
    J[:, idx, K + idx] += t["xb"]
    J[:, idx, 2 * K + idx] = t["z"]
    J[:, idx, 3 * K + idx] = -t["noise"] * t["logz"]
    J[:, idx, 4 * K + idx] = 1.0
    J[:, :, 5 * K] = q * _dx_dH(t, K)
    return J


def kkt_mixture_gradient(params: dict, N: float, D: float, h_row: Any) -> tuple[np.ndarray, np.ndarray]:
    r"""The K losses at one size, token count and mixture, and d L_i / d h_j, shape (K,), (K, K).

    Through the floor and the renormalisation h~ = max(h, 1e-4) / sum max(h, 1e-4): a weight below the
    floor has no effect (derivative 0; at the floor itself the derivative from above is returned).
    """
    (b, c, A, a, E, H), Nm, Db, ht = _prepare(params, np.atleast_1d(np.asarray(N, dtype=np.float64))[:1],
                                              np.atleast_1d(np.asarray(D, dtype=np.float64))[:1],
                                              np.asarray(h_row, dtype=np.float64).reshape(1, -1))
    h = np.asarray(h_row, dtype=np.float64).reshape(-1)
    t = _terms(b, c, A, a, E, H, Nm, Db, ht)
    K = h.size
    q = -b * t["cap"][0] / t["x"][0]
    hh = ht[0]
    # d L_i / d h~_k: capacity through x* (u_k = 1/h~_k) and the noise term on the diagonal
    dLdht = q[:, None] * _dx(t, (1.0 / ht))[0]
    dLdht[np.arange(K), np.arange(K)] += -a * t["noise"][0] / hh
    # d h~_k / d h_j = m_j (delta_kj - h~_k) / s, with m_j = [h_j >= floor]
    s = np.maximum(h, H_MIN).sum()
    m = (h >= H_MIN).astype(np.float64)
    T = (np.eye(K) - hh[:, None]) * (m / s)[None, :]
    return t["pred"][0], dLdht @ T


# ---------------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------------
class _Problem:
    """Data and the free/fixed split of one fit (picklable, so a process pool can carry the starts)."""

    def __init__(self, Nm, Db, ht, L, weight, loss_delta, space, fixed, K):
        self.Nm, self.Db, self.ht, self.L = Nm, Db, ht, L
        self.logL = np.log(L)
        self.weight = weight
        self.delta = loss_delta
        self.space = space
        self.fixed = fixed                      # name -> raw value (K,) or float
        self.K = K
        self.free = [p for p in COEF_ORDER if p not in fixed]
        sizes = {p: (1 if p == "H" else K) for p in COEF_ORDER}
        self.slices, start = {}, 0
        for p in self.free:
            self.slices[p] = slice(start, start + sizes[p])
            start += sizes[p]
        self.n_free = start
        # bounds from the runs that count (a run of weight 0 must not change the fit)
        used = weight > 0
        if not used.any():
            used = np.ones_like(used)
        minL = L[used].min(axis=0)
        minN = Nm[used].min()
        self.minL, self.minN = minL, minN
        # typical allocation (a K-th of the size) and typical D h, the references of c and A
        self.log_x0 = float(np.mean(np.log(Nm[used]))) - math.log(K)
        self.log_z0 = float(np.mean(np.log(Db[used, None] * ht[used])))
        bounds = {"b": [_LOG_EXPONENT] * K, "a": [_LOG_EXPONENT] * K, "c": [_LOG_SCALE] * K,
                  "A": [_LOG_SCALE] * K,
                  "E": [(math.log(1e-8 * m), math.log((1 - 1e-9) * m)) for m in minL],
                  "H": [(math.log(1e-9 * minN), math.log((1 - 1e-9) * minN))]}
        self.bounds = [bd for p in self.free for bd in bounds[p]]

    def raw(self, theta: np.ndarray) -> dict:
        """The law's parameters from the free variables: logs of b, a, E, H; c and A relative to a typical
        allocation x0 and a typical D h, log c = theta_c + b log x0 and log A = theta_A + a log z0, which takes
        out most of the correlation between a coefficient and its exponent (12% fewer L-BFGS-B iterations on
        planted data)."""
        out = {}
        for p in ("b", "a", "E", "H"):
            if p in self.fixed:
                out[p] = self.fixed[p]
            else:
                v = np.exp(theta[self.slices[p]])
                out[p] = float(v[0]) if p == "H" else v
        for p, expo, ref in (("c", "b", self.log_x0), ("A", "a", self.log_z0)):
            out[p] = self.fixed[p] if p in self.fixed else np.exp(theta[self.slices[p]] + out[expo] * ref)
        return {p: out[p] for p in COEF_ORDER}

    def objective(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """(1/K) sum_n s_n sum_i rho(r_ni) and its gradient in the free variables (adjoint form)."""
        P = self.raw(theta)
        b, c, A, a, E, H = (P[k] for k in COEF_ORDER)
        K = self.K
        t = _terms(b, c, A, a, E, H, self.Nm, self.Db, self.ht)
        pred = t["pred"]
        if self.space == "log":
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.log(pred) - self.logL
            dr = 1.0 / pred
        else:
            r = pred - self.L
            dr = 1.0
        if not np.all(np.isfinite(r)):
            return math.inf, np.zeros(self.n_free)
        v, psi = residual_loss(r, self.delta)
        sw = self.weight[:, None] / K
        value = float((sw * v).sum())
        g = sw * psi * dr                        # dF/dL_ni
        grad = np.empty(self.n_free)
        # capacity terms through x*: g_i q_i dx_i/dp_j summed over i = u_j w_j (gq_j - sum_i gq_i w_i / W)
        gq = g * (-b * t["cap"] / t["x"])
        w, W = t["w"], t["W"]
        Wd = np.where(W > 0, W, 1.0)
        mean = (gq * w).sum(axis=1) / Wd
        adj = w * (gq - mean[:, None])           # multiply by u_j
        sl = self.slices
        # partial derivatives in the raw parameters, then the chain rule to the free variables
        if "c" in sl:
            dc = ((g * t["xb"]).sum(axis=0) + adj.sum(axis=0) / c) * c       # d/d theta_c
            grad[sl["c"]] = dc
        if "b" in sl:
            db = (g * (-t["cap"] * t["logx"])).sum(axis=0) + (adj * (1.0 / b - t["logx"])).sum(axis=0)
            grad[sl["b"]] = (db + (dc * self.log_x0 if "c" in sl else 0.0)) * b
        if "A" in sl:
            dA = (g * t["z"]).sum(axis=0) * A
            grad[sl["A"]] = dA
        if "a" in sl:
            da = (g * (-t["noise"] * t["logz"])).sum(axis=0)
            grad[sl["a"]] = (da + (dA * self.log_z0 if "A" in sl else 0.0)) * a
        if "E" in sl:
            grad[sl["E"]] = g.sum(axis=0) * E
        if "H" in sl:
            grad[sl["H"]] = float((gq * _dx_dH(t, K)).sum()) * H
        return value, grad

    def start(self, rng: np.random.Generator | None) -> np.ndarray:
        """A start in the free log parameters: exponents and H drawn (central values when ``rng`` is None),
        then (c, A, E) by non-negative least squares per domain at the implied allocation (twice, since x*
        moves with c)."""
        K = self.K
        minN = self.minN
        if rng is None:
            b = np.full(K, 0.3)
            a = np.full(K, 0.3)
            H = 0.1 * minN
        else:
            b = rng.uniform(0.05, 1.0, K)
            a = rng.uniform(0.05, 1.0, K)
            H = minN * math.exp(rng.uniform(math.log(1e-3), math.log(0.5)))
        P = {"b": b, "a": a, "H": H, "c": np.ones(K), "A": np.ones(K), "E": 0.5 * self.L.min(axis=0)}
        P.update({k: v for k, v in self.fixed.items()})
        minL = self.minL
        for _ in range(2):
            t = _terms(P["b"], P["c"], P["A"], P["a"], P["E"], P["H"], self.Nm, self.Db, self.ht)
            cols = {"c": t["xb"], "A": t["z"], "E": np.ones_like(t["z"])}
            for i in range(K):
                target = self.L[:, i].copy()
                names = []
                for p in ("c", "A", "E"):
                    if p in self.fixed:
                        target -= (np.asarray(self.fixed[p]) * np.ones(K))[i] * cols[p][:, i]
                    else:
                        names.append(p)
                if not names:
                    continue
                # relative residuals (log-space-like), sample-weighted
                rw = np.sqrt(self.weight) / self.L[:, i]
                X = np.column_stack([cols[p][:, i] for p in names]) * rw[:, None]
                scale = np.maximum(np.abs(X).max(axis=0), 1e-300)
                coef, _ = nnls(X / scale, target * rw)
                coef = coef / scale
                alone = (X * (target * rw)[:, None]).sum(axis=0) / np.maximum((X * X).sum(axis=0), 1e-300)
                for p, v, v1 in zip(names, coef, alone):
                    v = v if v > 0 else 1e-3 * max(v1, 1e-12)
                    if p == "E":
                        v = min(v, 0.999 * minL[i])
                    P[p] = np.array(P[p], dtype=np.float64)
                    P[p][i] = v
        theta = np.empty(self.n_free)
        for p, sl in self.slices.items():
            theta[sl] = np.log(np.atleast_1d(P[p]))
        if "c" in self.slices:
            theta[self.slices["c"]] -= np.asarray(P["b"]) * self.log_x0
        if "A" in self.slices:
            theta[self.slices["A"]] -= np.asarray(P["a"]) * self.log_z0
        lo = np.array([bd[0] for bd in self.bounds])
        hi = np.array([bd[1] for bd in self.bounds])
        return np.clip(theta, lo, hi)


def _fit_one(task: tuple) -> Result:
    """One start of :func:`kkt_fit` (module level, so that a process pool can carry it)."""
    problem, rng = task
    with single_blas_thread(), np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        theta0 = problem.start(rng)
        res = minimize(problem.objective, theta0, jac=True, method="L-BFGS-B", bounds=problem.bounds,
                       options=_LBFGSB)
    value = float(res.fun) if np.isfinite(res.fun) else math.inf
    return Result(objective=value, params=problem.raw(np.asarray(res.x)), success=bool(res.success),
                  n_iter=int(res.nit))


def _check_fixed(fixed: dict | None, K: int) -> dict:
    out: dict = {}
    if fixed is None:
        return out
    if not isinstance(fixed, dict):
        raise TypeError(f"`fixed` must be a dict of parameters held constant; got {type(fixed).__name__}")
    for k, v in fixed.items():
        if k not in COEF_ORDER:
            raise ValueError(f"`fixed` keys must be among {list(COEF_ORDER)}; got {k!r}")
        arr = np.asarray(v, dtype=np.float64)
        if k == "H":
            if arr.ndim != 0 or not np.isfinite(arr) or arr <= 0:
                raise ValueError(f"`fixed['H']` must be a finite number > 0; got {v!r}")
            out[k] = float(arr)
            continue
        arr = np.broadcast_to(arr, (K,)).copy() if arr.ndim == 0 else arr
        if arr.shape != (K,):
            raise ValueError(f"`fixed[{k!r}]` must be a scalar or an array of {K} values; got shape {arr.shape}")
        strict = k in ("b", "c")
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0 if strict else arr < 0):
            raise ValueError(f"`fixed[{k!r}]` must hold finite values {'> 0' if strict else '>= 0'}")
        out[k] = arr
    return out


def kkt_fit(N: Any, D: Any, h: Any, L: Any, *, loss: str = "huber", delta: float | None = 1e-3,
            space: str = "log", n_starts: int = 32, fixed: dict | None = None, sample_weight: Any = None,
            rngs: list | None = None, map_fn: Callable = map, progress: bool = False):
    r"""Fit the capacity-KKT law by multi-start L-BFGS-B on log parameters with the analytic gradient.

    Objective: (1/K) sum_n s_n sum_i rho(r_ni), r = log L^_ni - log L_ni (``space='log'``) or
    L^_ni - L_ni (``'linear'``), rho Huber with threshold ``delta`` (``loss='huber'``) or r^2/2 (``'l2'``).
    Every parameter is the exponential of a free variable (positivity), bounded: exponents in
    [1e-4, 5], E_i below the smallest observed loss of domain i, H below the smallest size (so that every
    run has a feasible allocation). Start 0 is central (b = a = 0.3, H = a tenth of the smallest size), the
    others draw exponents and H from ``rngs[k]``; each then sets (c, A, E) by non-negative least squares
    per domain. The lowest objective wins. The law is continuous but has kinks where a domain's allocation
    reaches H (the active set changes); L-BFGS-B can stop at one short of the optimum, which is what the
    starts guard against.

    Inputs are validated by the caller: ``N`` (R,) parameters, ``D`` (R,) tokens, ``h`` (R, K) mixtures,
    ``L`` (R, K) losses > 0.

    Returns
    -------
    (params, objective, starts, success, n_iter)
        The best start's parameters (dict 'b', 'c', 'A', 'a', 'E' (K,), 'H' float), its objective, every
        start as Result(objective, params, success, n_iter), its convergence flag and its iterations.
    """
    h = np.atleast_2d(np.asarray(h, dtype=np.float64))
    L = np.asarray(L, dtype=np.float64).reshape(h.shape)
    R, K = h.shape
    Nm = np.broadcast_to(np.asarray(N, dtype=np.float64), (R,)) / N_UNIT
    Db = np.broadcast_to(np.asarray(D, dtype=np.float64), (R,)) / D_UNIT
    ht, _, _ = _floor(h)
    weight = np.ones(R) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64).reshape(R)
    if loss not in ("huber", "l2"):
        raise ValueError(f"`loss` must be 'huber' or 'l2'; got {loss!r}")
    if space not in ("log", "linear"):
        raise ValueError(f"`space` must be 'log' or 'linear'; got {space!r}")
    fixed_raw = _check_fixed(fixed, K)
    problem = _Problem(Nm, Db, ht, L, weight, delta if loss == "huber" else None, space, fixed_raw, K)
    if rngs is None:
        rngs = spawn_rngs(None, n_starts)
    if len(rngs) < n_starts:
        raise ValueError(f"`rngs` must hold one generator per start ({n_starts}); got {len(rngs)}")
    tasks = [(problem, None if k == 0 else rngs[k]) for k in range(n_starts)]
    starts = [r for r in progress_bar(map_fn(_fit_one, tasks), progress=progress, total=n_starts,
                                      desc="capacity_kkt starts")]
    objectives = np.array([s.objective for s in starts])
    best = int(np.argmin(objectives))
    sel = starts[best]
    return sel.params, sel.objective, starts, sel.success, sel.n_iter
