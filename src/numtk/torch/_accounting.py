"""Renyi-DP bookkeeping shared by numtk.torch.privcode and numtk.torch.pisa (NumPy only, no torch).

The functions here take validated arguments; the public callers (``privcode.rdp_epsilon``,
``pisa.split_epsilon``) check them and name the parameter in their messages.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEFAULT_ORDERS", "gaussian_rdp", "rdp_to_epsilon"]

#: Integer Renyi orders 2 .. 256: the grid the accountants use unless given another.
DEFAULT_ORDERS = np.arange(2, 257, dtype=np.float64)


def gaussian_rdp(orders, sensitivity: float, sigma: float) -> np.ndarray:
    """RDP of one Gaussian mechanism: alpha * sensitivity^2 / (2 sigma^2) at each order (Mironov 2017, Prop. 7)."""
    orders = np.asarray(orders, dtype=np.float64)
    return orders * (float(sensitivity) ** 2) / (2.0 * float(sigma) ** 2)


def rdp_to_epsilon(rdp, orders, delta: float) -> tuple[float, float]:
    """(epsilon, order) of the tightest (epsilon, delta)-DP bound implied by RDP values at the given orders.

    Uses the improved conversion of Balle et al. (2020, Thm 21), the one Opacus applies:
    ``eps(a) = rdp(a) - (log delta + log a) / (a - 1) + log((a - 1) / a)``, minimised over the orders
    (orders must be > 1). Orders whose value is NaN or +inf are ignored; if none is finite the result is
    ``(inf, nan)``. A negative minimum is reported as 0.
    """
    orders = np.asarray(orders, dtype=np.float64)
    rdp = np.broadcast_to(np.asarray(rdp, dtype=np.float64), orders.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        eps = rdp - (np.log(delta) + np.log(orders)) / (orders - 1.0) + np.log((orders - 1.0) / orders)
    eps = np.where(np.isfinite(eps), eps, np.inf)
    if eps.size == 0 or not np.isfinite(eps).any():
        return float("inf"), float("nan")
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(orders[i])
