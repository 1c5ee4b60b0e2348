"""The linear programs of numtk.games, all solved by HiGHS through :func:`scipy.optimize.linprog`.

numtk writes no LP solver. This module builds the LPs and reads both players' strategies out of one
solve (the second player from the duals), with the clean-up every caller needs: entries clipped to
``>= 0`` and renormalised (HiGHS can return ``-1e-17``), values as Python floats.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, sparse

__all__ = ["solve_matrix_game", "highs_method_for", "clean_simplex", "LPError", "payoff_scale"]

_HIGHS_METHODS = ("auto", "highs", "highs-ds", "highs-ipm")


class LPError(RuntimeError):
    """HiGHS did not return an optimal solution."""


def highs_method_for(n_entries: int, method: str = "auto") -> str:
    """Pick the HiGHS variant: dual simplex for small LPs, interior point (with crossover) above.

    ``'highs'`` (HiGHS's own choice) took 19 s where the interior-point method took 8.5 s on a
    1000 x 1000 matrix game, so ``'auto'`` never returns it.
    """
    if method not in _HIGHS_METHODS:
        raise ValueError(f"`highs_method` must be one of {_HIGHS_METHODS}, got {method!r}")
    if method != "auto":
        return method
    return "highs-ds" if n_entries <= 250_000 else "highs-ipm"


_SCALE_LOW, _SCALE_HIGH = 2.0**-20, 2.0**20


def payoff_scale(*blocks) -> float:
    """A power of two that brings the payoffs' largest magnitude into [2^-20, 2^20], or 1.0 when it is.

    The LPs and regret-matching iterations are invariant under scaling the payoffs (values scale with
    them), but HiGHS refuses coefficients of 1e15 and beyond and drops those below 1e-9, and RM+
    underflows on denormal payoffs: such payoffs are divided by this exact power of two first.
    """
    top = 0.0
    for B in blocks:
        data = B.data if sparse.issparse(B) else np.asarray(B)
        if data.size:
            top = max(top, float(np.max(np.abs(data))))
    if top == 0.0 or _SCALE_LOW <= top <= _SCALE_HIGH or not np.isfinite(top):
        return 1.0
    return float(2.0 ** round(np.log2(top)))


def clean_simplex(x: np.ndarray) -> np.ndarray:
    """Clip to ``>= 0`` and renormalise to sum 1 (along the last axis)."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, None)
    s = x.sum(axis=-1, keepdims=True)
    return x / np.where(s > 0, s, 1.0)


def solve_matrix_game(A: np.ndarray, *, highs_method: str = "auto") -> tuple[np.ndarray, np.ndarray, float]:
    """Maximin strategies and value of the zero-sum game with row payoffs ``A`` (m x n), by one LP.

    The column player's LP ``min_{y, v} v  s.t.  A y <= v 1, 1'y = 1, y >= 0`` is solved; the
    row player's maximin ``x`` is minus the marginals of the ``<=`` rows (they are ``>= 0`` and sum
    to 1 because ``v`` is free).

    Returns
    -------
    x, y : ndarray
        Row and column strategies, clipped and renormalised.
    value : float
        The game value for the row player.
    """
    A = np.asarray(A, dtype=np.float64)
    scale = payoff_scale(A)
    if scale != 1.0:
        A = A / scale
    m, n = A.shape
    # Variables (y_1..y_n, v); minimise v.
    c = np.zeros(n + 1)
    c[-1] = 1.0
    A_ub = np.hstack([A, -np.ones((m, 1))])
    A_eq = np.ones((1, n + 1))
    A_eq[0, -1] = 0.0
    bounds = [(0.0, None)] * n + [(None, None)]
    res = optimize.linprog(c, A_ub=A_ub, b_ub=np.zeros(m), A_eq=A_eq, b_eq=[1.0], bounds=bounds,
                           method=highs_method_for(m * n, highs_method))
    if res.status != 0:
        raise LPError(f"HiGHS failed on the matrix game LP: {res.message}")
    y = clean_simplex(res.x[:n])
    x = clean_simplex(-res.ineqlin.marginals)
    return x, y, float(res.x[-1]) * scale
