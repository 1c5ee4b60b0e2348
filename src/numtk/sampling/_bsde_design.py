"""The regression design of the HJB/BSDE solver: preconditioning, the basis box, the design points of a step
and the MCMC pilot of the first round (used by :mod:`numtk.sampling._bsde_steps` and :func:`solve_hjb`)."""

from __future__ import annotations

import math

import numpy as np

from numtk._lib._workers import map_rows

_LOG_2PI = math.log(2.0 * math.pi)
_BOX_CAP = 15.0


def log_gamma(y: np.ndarray) -> np.ndarray:
    """``log N(y; 0, I)`` row-wise."""
    return -0.5 * np.einsum("ij,ij->i", y, y) - 0.5 * y.shape[1] * _LOG_2PI


class _Preconditioned:
    """``log rho~(y) = log rho(loc + scale * y)`` (no Jacobian: log Z = log Z~ + sum log scale)."""

    def __init__(self, target, loc, scale, mapper=None):
        self.target = target
        self.loc = loc
        self.scale = scale
        self.mapper = mapper
        self.dim = target.dim

    def to_x(self, y):
        return self.loc + self.scale * y

    def log_density(self, y):
        # far design points may overflow a target's formula (the funnel's exp(-x_0)): -inf or NaN there
        # means no mass, and NaN is mapped to -inf
        with np.errstate(over="ignore", invalid="ignore"):
            vals = map_rows(self.target.log_density, self.to_x(y), self.mapper).reshape(len(y))
        return np.where(np.isnan(vals), -np.inf, vals)

    def grad_log_density(self, y):
        return np.asarray(self.target.grad_log_density(self.to_x(y)), dtype=np.float64) * self.scale


def _box(bounds_y: np.ndarray | None, pilot: np.ndarray | None, d: int, margin: float = 0.5) -> np.ndarray:
    """The basis box: the design hull, ``[min(q_lo, -4) - m, max(q_hi, 4) + m]`` per coordinate."""
    lo = np.full(d, -4.0)
    hi = np.full(d, 4.0)
    if pilot is not None and len(pilot):
        lo = np.minimum(lo, np.quantile(pilot, 0.001, axis=0))
        hi = np.maximum(hi, np.quantile(pilot, 0.999, axis=0))
    elif bounds_y is not None:
        # a first box from the target's bounds, capped: heavy-tailed coordinates (the funnel's x_i reach
        # +-3000 at mass 1 - 1e-6) would leave no resolution where the mass is; refinement rounds replace
        # it by the pilot's quantiles
        lo = np.minimum(lo, np.maximum(bounds_y[:, 0], -_BOX_CAP))
        hi = np.maximum(hi, np.minimum(bounds_y[:, 1], _BOX_CAP))
    return np.column_stack([lo - margin, hi + margin])


_UNIFORM_COORDS = 2


def _design(rng, M: int, tau: float, pilot: np.ndarray | None, box: np.ndarray, mix) -> np.ndarray:
    """Design points at noising time ``tau``: noised pilot samples, N(0, I) and a uniform layer."""
    d = box.shape[0]
    n_pilot = int(round(mix[0] * M))
    n_ref = int(round(mix[1] * M))
    n_uni = max(0, M - n_pilot - n_ref)
    a, s = math.exp(-tau), math.sqrt(-math.expm1(-2.0 * tau))
    if pilot is None:
        # no pilot yet: a broad Gaussian covering the box
        Y = rng.standard_normal((n_pilot, d)) * ((box[:, 1] - box[:, 0]) / 6.0) + box.mean(axis=1)
    else:
        Y = pilot[rng.integers(0, len(pilot), n_pilot)]
    noised = a * Y + s * rng.standard_normal((n_pilot, d))
    # the uniform layer: bulk points with _UNIFORM_COORDS coordinates redrawn uniformly on the box (all of
    # them when d <= _UNIFORM_COORDS). Fully uniform points in d = 32 lie where log rho is thousands below
    # the bulk; they dominated the least squares and the many-well solve collapsed.
    bulk = np.concatenate([noised, rng.standard_normal((max(1, n_ref), d))])
    U = bulk[rng.integers(0, len(bulk), n_uni)]
    k = min(d, _UNIFORM_COORDS)
    cols = np.argsort(rng.random((n_uni, d)), axis=1)[:, :k]
    rows = np.arange(n_uni)[:, None]
    U[rows, cols] = rng.uniform(box[cols, 0], box[cols, 1])
    X = np.concatenate([noised, bulk[len(noised):len(noised) + n_ref], U])
    return np.clip(X, box[:, 0], box[:, 1])


def _draw_design(rng, M: int, tau: float, pilot, box: np.ndarray, opts) -> np.ndarray:
    """The step's design: the user's ``design(tau, M, rng)`` (mapped to the preconditioned coordinates and
    clipped to the box) or :func:`_design`."""
    user = opts.get("design")
    if user is None:
        return _design(rng, M, tau, pilot, box, opts["design_mix"])
    X = _user_design(user, tau, M, rng, opts["loc"].shape[0])
    return np.clip((X - opts["loc"]) / opts["scale"], box[:, 0], box[:, 1])


def _user_design(design, tau: float, M: int, rng, d: int) -> np.ndarray:
    X = np.asarray(design(float(tau), int(M), rng), dtype=np.float64)
    if X.shape != (M, d):
        raise ValueError(f"`design(tau, n, rng)` must return an array of shape (n, d) = ({M}, {d}); "
                         f"got {X.shape} at tau = {tau:.4g}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"`design(tau, n, rng)` returned non-finite points at tau = {tau:.4g}")
    return X


def _mcmc_pilot(pre: "_Preconditioned", d: int, box: np.ndarray, n: int, steps: int, rng,
                has_grad: bool) -> np.ndarray:
    """Approximate target samples for the first round's design: ``n`` short MCMC chains.

    MALA when the target has a gradient, random-walk Metropolis otherwise, started from a broad Gaussian
    over the box, with per-chain step sizes adapted towards acceptance 0.57 (MALA) / 0.3 (RWM). The chains
    are not mixed between modes, and need not be: the design wants coverage of the mass, not its weights
    (the refinement rounds reweight). A broad Gaussian alone puts, in d = 32, most design points where the
    target has no mass and its log-density is thousands below the bulk, and the regression then fits them.
    """
    Y = rng.standard_normal((n, d)) * ((box[:, 1] - box[:, 0]) / 6.0) + box.mean(axis=1)
    Y = np.clip(Y, box[:, 0], box[:, 1])
    goal = 0.57 if has_grad else 0.3
    log_h = np.full(n, math.log(0.5 / math.sqrt(d)) if has_grad else math.log(1.0 / math.sqrt(d)))

    def evaluate(y):
        with np.errstate(all="ignore"):
            lp = pre.log_density(y)
            g = np.nan_to_num(pre.grad_log_density(y), nan=0.0, posinf=0.0, neginf=0.0) if has_grad else None
        return np.where(np.isfinite(lp), lp, -np.inf), g

    lp, g = evaluate(Y)
    for it in range(steps):
        h = np.exp(log_h)[:, None]
        xi = rng.standard_normal((n, d))
        with np.errstate(all="ignore"):
            if has_grad:
                # tamed drift: a quartic tail's gradient would throw the proposal out of the box
                drift = h * g / (1.0 + h * np.linalg.norm(g, axis=1, keepdims=True) / math.sqrt(d))
                prop = Y + drift + np.sqrt(2.0 * h) * xi
            else:
                prop = Y + np.sqrt(h) * xi
            lp_p, g_p = evaluate(prop)
            log_a = lp_p - lp
            if has_grad:
                back = h * g_p / (1.0 + h * np.linalg.norm(g_p, axis=1, keepdims=True) / math.sqrt(d))
                log_a += (np.sum((prop - Y - drift) ** 2, axis=1) - np.sum((Y - prop - back) ** 2, axis=1)) / (
                    4.0 * h[:, 0])
            acc = np.log(rng.uniform(size=n)) < np.where(np.isfinite(log_a), log_a, -np.inf)
        Y[acc], lp[acc] = prop[acc], lp_p[acc]
        if has_grad:
            g[acc] = g_p[acc]
        log_h += (acc - goal) / math.sqrt(it + 10.0)
    return Y[np.isfinite(lp)]
