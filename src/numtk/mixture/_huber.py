"""The robust residual loss shared by the mixture laws and the Chinchilla fit."""

from __future__ import annotations

import numpy as np

__all__ = ["residual_loss"]


def residual_loss(r: np.ndarray, delta: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-residual loss and its derivative: Huber with threshold ``delta``, or ``r**2 / 2`` when None.

    Huber_delta(r) = r**2 / 2 for |r| <= delta and delta * (|r| - delta / 2) beyond; the derivative is
    ``clip(r, -delta, delta)``, continuous, so L-BFGS-B can use it (the second derivative is not).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.mixture._huber import residual_loss
    >>> value, slope = residual_loss(np.array([-0.5, 0.0005, 2.0]), 1e-3)
    >>> [f"{v:.4g}" for v in value], slope.tolist()
    (['0.0004995', '1.25e-07', '0.001999'], [-0.001, 0.0005, 0.001])
    """
    r = np.asarray(r, dtype=float)
    if delta is None:
        return 0.5 * r * r, r
    a = np.abs(r)
    inside = a <= delta
    value = np.where(inside, 0.5 * r * r, delta * (a - 0.5 * delta))
    return value, np.clip(r, -delta, delta)
