"""Generative paths of the sampler and their guards, shared by the solver's refinement rounds
(numtk.sampling._hjb_bsde) and the sampler (numtk.sampling._sampler).

- :func:`simulate_paths`: the OU-exponential (or Euler-Maruyama) paths from N(0, I) and their exact
  importance log-weights, whatever the control;
- :func:`trusted_gradient`: a step's fitted gradient held on its trust box and capped at its bound;
- :func:`systematic_resample`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from numtk._lib import normalize_rng

__all__ = ["simulate_paths", "systematic_resample", "trusted_gradient"]

_LOG_2PI = math.log(2.0 * math.pi)


def systematic_resample(weights: np.ndarray, n: int, rng: Any = None) -> np.ndarray:
    """Indices of ``n`` draws by systematic resampling of normalised ``weights``."""
    rng = normalize_rng(rng)
    c = np.cumsum(weights)
    c[-1] = 1.0
    u = (rng.random() + np.arange(n)) / n
    return np.minimum(np.searchsorted(c, u, side="right"), len(weights) - 1)


def simulate_paths(grad_W: Callable, times: np.ndarray, log_rho: Callable, n: int, rng: Any = None, *,
                   dim: int, integrator: str = "ou-exponential", chunk: int = 20000):
    """Simulate ``n`` generative paths; return the endpoints (n, d) and the path log-weights (n,).

    ``grad_W(y, k)`` is the control at grid time ``t_k`` (preconditioned coordinates) and ``log_rho`` the
    unnormalised target log-density in the same coordinates. Works in chunks of ``chunk`` paths.
    """
    rng = normalize_rng(rng)
    d = dim
    ends, logws = [], []
    N = len(times) - 1
    for c0 in range(0, n, chunk):
        k = min(chunk, n - c0)
        y = rng.standard_normal((k, d))
        logw = 0.5 * np.einsum("ij,ij->i", y, y) + 0.5 * d * _LOG_2PI  # -log gamma(y_0)
        for step in range(N):
            dt = float(times[step + 1] - times[step])
            a = math.exp(-dt)
            g = _tame(np.asarray(grad_W(y, step), dtype=np.float64), y, 2.0 * (-math.expm1(-dt)))
            if integrator == "ou-exponential":
                var = -math.expm1(-2.0 * dt)
                mean = a * y + 2.0 * (-math.expm1(-dt)) * g
                y_new = mean + math.sqrt(var) * rng.standard_normal(y.shape)
                # both kernels have variance `var`: their normalisers cancel
                r_q = y_new - mean
                r_p = y - a * y_new
                logw += (np.einsum("ij,ij->i", r_q, r_q) - np.einsum("ij,ij->i", r_p, r_p)) / (2.0 * var)
            else:  # Euler-Maruyama against the exact reference kernel
                var_p = -math.expm1(-2.0 * dt)
                var_q = 2.0 * dt
                mean = y + dt * (-y + 2.0 * g)
                y_new = mean + math.sqrt(var_q) * rng.standard_normal(y.shape)
                r_q = y_new - mean
                r_p = y - a * y_new
                logw += (np.einsum("ij,ij->i", r_q, r_q) / (2.0 * var_q) + 0.5 * d * math.log(var_q)
                         - np.einsum("ij,ij->i", r_p, r_p) / (2.0 * var_p) - 0.5 * d * math.log(var_p))
            y = y_new
        lr = np.asarray(log_rho(y), dtype=np.float64).reshape(k)
        logw = logw + np.where(np.isnan(lr), -np.inf, lr)
        ends.append(y)
        logws.append(logw)
    return np.concatenate(ends), np.concatenate(logws)


def _tame(g: np.ndarray, y: np.ndarray, h: float) -> np.ndarray:
    """The control with non-finite rows set to 0 and each step's drift displacement ``h g`` capped at
    ``1 + |y|``: a frozen steep gradient (a quartic well's tails, a fit's linear extension) would
    otherwise overshoot and blow the path up, as explicit steps of a stiff drift do. Any control gives a
    valid proposal kernel and the weights use the kernel actually sampled, so ``E[w] = Z`` still holds."""
    bad = ~np.all(np.isfinite(g), axis=1)
    if np.any(bad):
        g = np.where(bad[:, None], 0.0, g)
    step = h * np.sqrt(np.einsum("ij,ij->i", g, g))
    cap = 1.0 + np.sqrt(np.einsum("ij,ij->i", y, y))
    over = step > cap
    if np.any(over):
        g = g * np.where(over, cap / np.where(over, step, 1.0), 1.0)[:, None]
    return g



def trusted_gradient(W, y: np.ndarray, diag: dict | None = None) -> np.ndarray:
    """``grad W`` at ``y``, guarded by a step's diagnostics entry ``diag`` (None: unguarded).

    ``y`` is projected onto the trust box ``diag['trust']`` (``(d, 2)``): outside it the gradient is held
    at its value on the box's face (``W`` continued linearly beyond the data). Its norm is then capped at
    ``diag['grad_bound']``, the largest the fit has on its design: where several coordinates are in
    their tails at once, a fit's slopes are unconstrained even inside the box.
    """
    # the sampler's paths may wander far out: non-finite rows are left to the caller (_tame zeroes them)
    if diag is None:
        return W.evaluate(y, gradient=True, overflow="keep")[1]
    trust = diag.get("trust")
    if trust is not None:
        y = np.clip(y, trust[:, 0], trust[:, 1])
    g = W.evaluate(y, gradient=True, overflow="keep")[1]
    bound = diag.get("grad_bound")
    if bound is not None and np.isfinite(bound):
        norms = np.sqrt(np.einsum("ij,ij->i", g, g))
        over = norms > bound
        if np.any(over):
            g[over] *= (bound / norms[over])[:, None]
    return g
