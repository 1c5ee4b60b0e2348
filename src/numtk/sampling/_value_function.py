"""The value functions of a :func:`solve_hjb` result: ``V_n`` in the original coordinates and the value
estimator of log Z."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import per_coordinate
from numtk.ftt import FunctionalTT

__all__ = ["value_function"]

_LOG_2PI = math.log(2.0 * math.pi)


def _value_log_Z(W0: FunctionalTT, d: int, rng, n: int = 100_000) -> tuple[float, float]:
    """``log E_{xi ~ N(0, I)} exp W_0(xi)`` (in preconditioned coordinates) and its delta-method SE."""
    xi = rng.standard_normal((n, d))
    v = W0.predict(xi)
    m = float(np.max(v))
    e = np.exp(v - m)
    mean = float(np.mean(e))
    se = float(np.std(e) / math.sqrt(n) / mean) if mean > 0 else float("inf")
    return m + math.log(mean), se


@constraints(W="callable", loc="real", scale="real>0")
def value_function(W: FunctionalTT, loc: Any = 0.0, scale: Any = 1.0) -> FunctionalTT:
    r"""The value function in the original coordinates from a step of :func:`solve_hjb`.

    ``V(x) = W(y) + log gamma(y)`` with ``x = loc + scale * y`` and ``gamma = N(0, I)``: the log of the
    OU-noised target at that step, as a :class:`~numtk.ftt.FunctionalTT` in x. ``log gamma`` is an exact
    rank-2 train in W's bases (degree >= 2); it is added to W, the sum is rounded (tolerance 1e-12) and the
    affine map goes into the bases' boxes (or the Hermite ``loc``/``scale``). :func:`solve_hjb` returns
    these for every step as ``Result.V``.

    Parameters
    ----------
    W : FunctionalTT
        ``W_n`` of a :func:`solve_hjb` result, in preconditioned coordinates y.
    loc, scale : float or array_like of shape (d,)
        The preconditioning of that result (``Result.loc``, ``Result.scale``).

    Returns
    -------
    V : FunctionalTT
        ``V_n`` in x. With the preconditioning of :func:`solve_hjb` (no Jacobian), ``exp V_n`` integrates to
        the target's Z at every step, and ``V_N = log rho`` on the box. Outside the box the bounded bases
        extend linearly, so there V is not ``W + log gamma``.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import gaussian, solve_hjb, value_function
    >>> target = gaussian(mean=[1.0], cov=[[0.5]])
    >>> sol = solve_hjb(target, n_steps=20, degree=15, refine=0, rng=0, loc=1.0, scale=0.7)
    >>> V = value_function(sol.W[-1], sol.loc, sol.scale)   # the same as sol.V[-1]
    >>> x = np.array([[0.5], [1.0], [1.6]])
    >>> bool(np.allclose(V.predict(x), target.log_density(x), atol=1e-3))
    True
    """
    from numtk._lib._estimator import check_is_fitted

    if not isinstance(W, FunctionalTT):
        raise TypeError(f"`W` must be a FunctionalTT (a step of solve_hjb's result); got {type(W).__name__}")
    check_is_fitted(W, "cores_")
    bases = W.bases_
    d = len(bases)
    loc = per_coordinate(loc, d, "loc")
    scale = per_coordinate(scale, d, "scale")
    if np.any(scale <= 0):
        raise ValueError("`scale` must be positive")
    if any(b.n < 3 for b in bases):
        raise ValueError("the value function needs degree >= 2 in every coordinate (log gamma is quadratic)")
    # log gamma(y) = -|y|^2 / 2 - d log(2 pi) / 2: an exact rank-2 train in W's bases
    log_gamma = W.additive([lambda y: -0.5 * y * y] * d, constant=-0.5 * d * _LOG_2PI)
    V = (W + log_gamma).round(tol=1e-12)
    with np.errstate(over="ignore", invalid="ignore"):
        domain = np.array([[loc[k] + scale[k] * b.p0, loc[k] + scale[k] * b.p1] if b.bounded else [np.nan, np.nan]
                           for k, b in enumerate(bases)])
        h_check = np.array([[loc[k] + scale[k] * b.p0, scale[k] * b.p1] for k, b in enumerate(bases)
                            if not b.bounded]).reshape(-1, 2)
    box = domain[[b.bounded for b in bases]]
    if not (np.all(np.isfinite(box)) and np.all(box[:, 0] < box[:, 1]) and np.all(np.isfinite(h_check))
            and np.all(h_check[:, 1] > 0)):
        raise ValueError("`loc` and `scale` map the basis box of `W` beyond the floating-point range (or onto "
                         "a single point); use the preconditioning of the solve_hjb result")
    h_loc = [loc[k] + scale[k] * b.p0 if not b.bounded else 0.0 for k, b in enumerate(bases)]
    h_scale = [scale[k] * b.p1 if not b.bounded else 1.0 for k, b in enumerate(bases)]
    return FunctionalTT.from_cores(V.cores_, [b.kind for b in bases], [b.n - 1 for b in bases],
                                   domain=domain if any(b.bounded for b in bases) else None, loc=h_loc,
                                   scale=h_scale, extrapolate=W.extrapolate, workers=W.workers)
