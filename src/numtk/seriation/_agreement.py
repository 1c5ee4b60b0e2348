"""Agreement between a recovered order and the true positions."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_same_length
from numtk.stats import kendall_tau

__all__ = ["order_agreement"]


@constraints(order="array1d", t="array1d")
def order_agreement(order: ArrayLike, t: ArrayLike) -> float:
    r"""Kendall agreement between a recovered order and the true positions, up to reversal.

    Parameters
    ----------
    order : array_like of int, shape (n,)
        A permutation of ``0 .. n-1``: ``order[k]`` is the row placed k-th (as ``stage(...).order``).
    t : array_like, shape (n,)
        The true position of each row (finite, not all equal; n >= 2).

    Returns
    -------
    agreement : float
        :math:`|\tau_b|` between the rank each row receives from ``order`` and ``t``, in [0, 1]; 1 for a
        perfect order or its reverse. (A perfect order may give 0.9999999999999999, as SciPy's tau-b does.)

    See Also
    --------
    numtk.stats.kendall_tau

    Examples
    --------
    >>> from numtk.seriation import order_agreement
    >>> order_agreement([2, 0, 1], [0.5, 0.9, 0.1])
    1.0
    >>> order_agreement([0, 1, 2, 3], [0, 1, 3, 2])
    0.6666666666666669
    """
    order = as_array(order, "order", ndim=1, kinds="iu")
    t = as_array(t, "t", ndim=1)
    check_finite(t, "t")
    n = check_same_length(order=order, t=t)
    if n < 2:
        raise ValueError(f"`order` and `t` must hold at least 2 rows (an agreement compares pairs); got {n}")
    if n and (order.min() < 0 or order.max() >= n or np.unique(order).size != n):
        raise ValueError(f"`order` must be a permutation of 0..{n - 1}")
    if not np.any(t != t[0]):
        raise ValueError("`t` must not be constant: with every position tied the agreement is undefined")
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    return abs(float(kendall_tau(position, t, nan_policy="raise").statistic))
