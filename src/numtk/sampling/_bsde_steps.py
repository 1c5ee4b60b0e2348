"""The BSDE time stepping of :func:`solve_hjb`: one backward pass fitting ``W_N, ..., W_0`` (one
:class:`numtk.ftt.FunctionalTT` per step), the terminal condition, and each step's guards for the sampler
(trust box, gradient bound)."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from numtk._lib import progress_bar
from numtk._lib._warnings import NumtkWarning
from numtk.ftt import FunctionalTT
from numtk.sampling._bsde_design import _draw_design, log_gamma
from numtk.sampling._paths import trusted_gradient

_TERMINAL_H2 = 0.1  # the terminal fit's curvature penalty relative to the steps' (see solve_hjb)


def _bsde_pass(log_rho, d, times, pilot, box, opts, rng, progress, callback):
    """Fit W_N ... W_0 on one box and design law. Returns (W list, diagnostics list, stopped)."""
    N = len(times) - 1
    T = times[-1]
    M = opts["n_paths"]
    fit_kw = dict(sweeps=opts["sweeps"], tol=1e-10, regularization=opts["regularization"],
                  max_rank=opts["max_rank"], rank_tol=opts["rank_tol"], rank_adaptive=True)

    def model(**params):
        # Hermite bases need no box: orthonormal for N(0, 1) in the preconditioned coordinates
        return FunctionalTT(opts["basis"], degree=opts["degree"], ranks=opts["ranks"],
                            domain=None if opts["basis"] == "hermite" else box, extrapolate="linear",
                            workers=opts["threads"], rng=rng, **{**fit_kw, **params})

    diags: list[dict] = [None] * (N + 1)  # type: ignore[list-item]
    W: list[FunctionalTT] = [None] * (N + 1)  # type: ignore[list-item]

    # terminal condition W_N = log rho - log gamma on the tau = 0 design, fitted in the ansatz space
    t0 = time.perf_counter()
    X = _draw_design(rng, M, 0.0, pilot, box, opts)
    target_vals = log_rho(X) - log_gamma(X)
    finite = np.isfinite(target_vals)
    if not np.all(finite):
        # zero-density points carry no information for a log-density fit; drop them
        X, target_vals = X[finite], target_vals[finite]
    if len(X) < 10:
        raise ValueError("the target's log-density is -inf or NaN on almost every design point; "
                         "check `target` (or give `loc`/`scale`/`design_samples` near its mass)")
    # additive start: log-densities are often near-additive, and ALS from a constant start can stall
    # up to 12 sweeps: from the additive start the rank adaptation adds at most one rank per sweep (a
    # rotated Gaussian in d = 4: ranks (3, 3, 3), terminal residual 0.052; with a hundredth of the steps'
    # penalty the larger ranks overfit); an exactly additive target stops after 4 (no sweep validates
    # better)
    reg = opts["regularization"]
    reg_N = {**reg, "h2": reg.get("h2", 0.0) * _TERMINAL_H2} if isinstance(reg, dict) else reg
    WN = _terminal_cross(log_rho, d, box, opts, rng) if opts["terminal"] == "cross" else None
    if WN is None:
        WN = model(init="additive", sweeps=max(opts["terminal_sweeps"], opts["sweeps"]),
                   regularization=reg_N).fit(X, target_vals)
    rms_t = float(np.sqrt(np.mean(target_vals ** 2)))
    vals_N, g_N = WN.evaluate(X, gradient=True)  # one pass for the residual, the RMSE and the bound
    rmse_N = float(np.sqrt(np.mean((vals_N - target_vals) ** 2)))
    resid = rmse_N / max(float(np.std(target_vals)), 1e-6 * rms_t, 1e-300)
    if resid > 1e-2:
        warnings.warn(f"the terminal condition is fitted with relative residual {resid:.2e} (> 1e-2): raise "
                      f"`degree` or `max_rank`, or precondition with `loc`/`scale`", NumtkWarning, stacklevel=3)
    W[N] = WN
    diags[N] = {"step": N, "t": float(times[N]), "ranks": WN.ranks_, "newton_iter": 0,
                "rmse": rmse_N, "terminal_residual": resid, "trust": _trust_box(X),
                "grad_bound": _grad_bound(g_N), "time": time.perf_counter() - t0}

    bar = progress_bar(range(N), progress=progress, desc="HJB/BSDE steps")
    stopped = False
    theta = opts["theta"]
    try:
        for n in range(N - 1, -1, -1):
            t0 = time.perf_counter()
            dt = float(times[n + 1] - times[n])
            tau_n = float(T - times[n])
            a, sig = math.exp(-dt), math.sqrt(-math.expm1(-2.0 * dt))
            Wn1 = W[n + 1]
            X = _draw_design(rng, M, tau_n, pilot, box, opts)
            # forward drift -x + 2 q: q = 0 (OU) or the policy q = grad W_{n+1}(X_n) (guarded as in the
            # sampler); then W_n(x) = E[W_{n+1}(X_{n+1}) | x] + dt (|grad W|^2 - 2 q . grad W)
            q = None
            mu = a * X
            if opts["forward"] == "policy":
                q = trusted_gradient(Wn1, X, diags[n + 1])
                mu = mu + (2.0 * (1.0 - a)) * q
            X1 = mu + sig * rng.standard_normal(X.shape)
            w1, g1 = Wn1.evaluate(X1, gradient=True)
            ytil = w1.copy()
            if opts["control_variate"]:
                ytil -= np.einsum("ij,ij->i", Wn1.gradient(mu), X1 - mu)
            driver_next = np.einsum("ij,ij->i", g1, g1)
            if q is not None:
                driver_next -= 2.0 * np.einsum("ij,ij->i", q, g1)
            scale_y = float(np.std(ytil)) or 1.0
            n_it = 0
            if opts["scheme"] == "explicit":
                Wn = model(init=Wn1).fit(X, ytil + dt * driver_next)
                n_it = 1
                prev_vals, g = Wn.evaluate(X, gradient=True)
            else:
                base = ytil + (1.0 - theta) * dt * driver_next
                cur = Wn1
                prev_vals, g = cur.evaluate(X, gradient=True)
                for it in range(opts["newton_iter"]):
                    gg = np.einsum("ij,ij->i", g, g)
                    if opts["implicit_solver"] == "newton":
                        # |grad W|^2 ~ 2 g . grad W - |g|^2 around the current iterate's gradient g
                        direction = -2.0 * theta * dt * (g if q is None else g - q)
                        new = model(init=cur).fit(X, base - theta * dt * gg, directional=direction)
                    else:  # picard
                        drive = gg if q is None else gg - 2.0 * np.einsum("ij,ij->i", q, g)
                        new = model(init=cur).fit(X, base + theta * dt * drive)
                    n_it = it + 1
                    vals, g = new.evaluate(X, gradient=True)  # one pass: the next iteration's g too
                    change = float(np.sqrt(np.mean((vals - prev_vals) ** 2)))
                    cur, prev_vals = new, vals
                    if change < opts["newton_tol"] * scale_y:
                        break
                Wn = cur
            W[n] = Wn
            pred = prev_vals  # W_n on the design (with g, its gradient there)
            diags[n] = {"step": n, "t": float(times[n]), "ranks": Wn.ranks_, "newton_iter": n_it,
                        "rmse": float(np.sqrt(np.mean((pred - ytil - dt * driver_next) ** 2))),
                        "trust": _trust_box(X), "grad_bound": _grad_bound(g), "time": time.perf_counter() - t0}
            if not np.all(np.isfinite(pred)) or np.max(np.abs(pred - np.median(pred))) > 1e8:
                raise FloatingPointError(f"the BSDE regression diverged at step {n} (t = {times[n]:.4g}); "
                                         f"use the scheme 'implicit', a finer time grid or more regularization")
            bar.update(1)
            if callback is not None and callback(n, Wn, diags[n]):
                stopped = True
                break
    finally:
        bar.close()
    return W, diags, stopped


# the trust box of a step: per coordinate, the central 1 - 2 * _TRUST_TAIL of its design points. Beyond it
# the regression had (almost) no data and the fit is whatever the penalty left: on the many-well (d = 32)
# fitted slopes pointed outward at |y_i| ~ 3 where the target's score is -50 inward, and 9% of the
# generative paths ran away to |y| ~ 1e6 (log rho ~ -1e22 at their ends). The box alone kept 8% of
# them (to |y| ~ 3e3); the box and the gradient-norm cap 0.2% (|y| < 8)
_TRUST_TAIL = 1e-3


def _trust_box(X: np.ndarray) -> np.ndarray:
    """``(d, 2)`` per-coordinate quantile range of the design ``X`` (see ``_TRUST_TAIL``)."""
    return np.quantile(X, [_TRUST_TAIL, 1.0 - _TRUST_TAIL], axis=0).T.copy()


def _grad_bound(g: np.ndarray) -> float:
    """The largest gradient norm of a step's fit on its design (see :func:`trusted_gradient`)."""
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    norms = norms[np.isfinite(norms)]
    return float(np.max(norms)) if len(norms) else math.inf


def _terminal_cross(log_rho, d, box, opts, rng):
    """``W_N = log rho - log gamma`` interpolated by :func:`numtk.ftt.tt_cross` on the basis box (or None,
    with a warning, when the log-density is not finite on the interpolation grid)."""
    from numtk.ftt import tt_cross

    hermite = opts["basis"] == "hermite"
    try:
        with np.errstate(all="ignore"):
            f = tt_cross(lambda Y: log_rho(Y) - log_gamma(Y), d, basis=opts["basis"], degree=opts["degree"],
                         domain=None if hermite else box, max_rank=opts["max_rank"], tol=1e-10, rng=rng).tt
    except ValueError as exc:
        warnings.warn(f"terminal='cross' failed ({exc}); the terminal condition is fitted by ALS instead",
                      NumtkWarning, stacklevel=4)
        return None
    return f.set_params(workers=opts["threads"])
