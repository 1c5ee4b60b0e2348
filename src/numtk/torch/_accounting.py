"""Renyi-DP bookkeeping shared by numtk.torch.privcode and numtk.torch.pisa (NumPy only, no torch).

The functions here take validated arguments; the public callers (``privcode.rdp_epsilon``,
``pisa.split_epsilon``) check them and name the parameter in their messages.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

__all__ = ["DEFAULT_ORDERS", "OPACUS_ORDERS", "gaussian_rdp", "rdp_to_epsilon", "sampled_gaussian_rdp"]

#: Integer Renyi orders 2 .. 256: the grid the accountants use unless given another.
DEFAULT_ORDERS = np.arange(2, 257, dtype=np.float64)

#: The default grid of Opacus's RDPAccountant (1.1, 1.2, ..., 10.9, then the integers 12 .. 63).
OPACUS_ORDERS = np.array([1.0 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=np.float64)
DEFAULT_ORDERS.setflags(write=False)
OPACUS_ORDERS.setflags(write=False)


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


# --------------------------------------------------------------------------------------------------
# the sampled Gaussian mechanism (Mironov, Talwar and Zhang, 2019)
# --------------------------------------------------------------------------------------------------
#: a term of the fractional-order series below exp(-_TAIL) ends it (the rest alternates and is smaller still)
_TAIL = 32.0
_MAX_TERMS = 1 << 17


def sampled_gaussian_rdp(q: float, sigma: float, orders) -> np.ndarray:
    """Renyi-DP of one step of the Poisson-subsampled Gaussian mechanism at each order (per step; compose by
    multiplying by the number of steps).

    A step adds N(0, sigma^2 I) to a sum of contributions of L2 norm at most 1, each record being in the batch
    independently with probability ``q``; adjacency is add/remove-one. With ``A_a = E_{z ~ N(0, sigma^2)}
    [((1 - q) + q exp((2z - 1) / (2 sigma^2)))^a]`` the RDP at order ``a`` is ``log(A_a) / (a - 1)`` (Mironov,
    Talwar and Zhang 2019). Integer orders use the binomial expansion (Section 3.2)
    ``A_a = sum_k C(a, k) (1 - q)^(a - k) q^k exp((k^2 - k) / (2 sigma^2))``, fractional ones the two series of
    Section 3.3 split at ``z0 = sigma^2 log(1/q - 1) + 1/2``, each term carrying a Gaussian tail factor; both in
    log space. ``q = 0`` gives 0, ``q = 1`` the plain Gaussian ``a / (2 sigma^2)``, ``sigma = 0`` infinity.
    Arguments are taken as validated (0 <= q <= 1, sigma >= 0, orders > 1). Results are cached per
    ``(q, sigma, orders)``; the returned array is read-only.
    """
    orders = np.asarray(orders, dtype=np.float64).reshape(-1)
    return _sgm_rdp_cached(float(q), float(sigma), tuple(orders.tolist()))


@functools.lru_cache(maxsize=256)
def _sgm_rdp_cached(q: float, sigma: float, orders: tuple) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    out = np.empty_like(a)
    if q == 0.0:
        out[:] = 0.0
    elif sigma == 0.0:
        out[:] = np.inf
    elif q == 1.0:
        out[:] = a / (2.0 * sigma ** 2)
    else:
        is_int = (a == np.floor(a)) & np.isfinite(a)
        out[~np.isfinite(a)] = np.inf
        if is_int.any():
            out[is_int] = _log_a_int(q, sigma, a[is_int]) / (a[is_int] - 1.0)
        frac = ~is_int & np.isfinite(a)
        if frac.any():
            out[frac] = _log_a_frac(q, sigma, a[frac]) / (a[frac] - 1.0)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=16)
def _log_binomial_table(orders: tuple) -> tuple:
    """log C(a, k) for k = 0 .. max(a) (masked to -inf beyond a), and k, for integer orders a."""
    a = np.asarray(orders, dtype=np.float64)[:, None]
    k = np.arange(int(max(orders)) + 1, dtype=np.float64)[None, :]
    with np.errstate(invalid="ignore"):
        lb = gammaln(a + 1.0) - gammaln(k + 1.0) - gammaln(np.maximum(a - k, 0.0) + 1.0)
    lb = np.where(k <= a, lb, -np.inf)
    lb.setflags(write=False)
    return lb, k


def _log_a_int(q: float, sigma: float, a: np.ndarray) -> np.ndarray:
    """log A_a for integer orders: the binomial sum, one log-sum-exp per order (a matrix of orders x k when the
    orders are moderate, one order at a time beyond)."""
    lq, l1q, two_s2 = math.log(q), math.log1p(-q), 2.0 * sigma ** 2
    if a.max() <= 4096:
        lb, k = _log_binomial_table(tuple(a.tolist()))
        terms = lb + k * lq + (a[:, None] - k) * l1q + (k * k - k) / two_s2
        return logsumexp(terms, axis=1)
    res = np.empty_like(a)
    for i, ai in enumerate(a):
        k = np.arange(int(ai) + 1, dtype=np.float64)
        lb = gammaln(ai + 1.0) - gammaln(k + 1.0) - gammaln(ai - k + 1.0)
        res[i] = logsumexp(lb + k * lq + (ai - k) * l1q + (k * k - k) / two_s2)
    return res


def _log_erfc(x: np.ndarray) -> np.ndarray:
    """log erfc(x), accurate for large x (through log Phi)."""
    return math.log(2.0) + log_ndtr(-x * math.sqrt(2.0))


def _log_a_frac(q: float, sigma: float, a: np.ndarray) -> np.ndarray:
    """log A_a for fractional orders: the two series of Mironov, Talwar and Zhang (2019, Section 3.3).

    Term i of the series pairs j = a - i with i: t0 = |C(a, i)| q^i (1 - q)^j exp((i^2 - i) / (2 sigma^2))
    Phi-tail((i - z0) / sigma) and t1 = |C(a, i)| q^j (1 - q)^i exp((j^2 - j) / (2 sigma^2)) Phi-tail((z0 - j) /
    sigma), both with the sign of C(a, i). Beyond i = a + 1 the signs alternate and the magnitudes fall, so the
    sum is cut at the first term past a + 1 below exp(-_TAIL): what is left is smaller than that term.
    """
    out = np.empty_like(a)
    todo = np.arange(a.size)
    n = 64
    while todo.size:
        vals, done = _frac_series(q, sigma, a[todo], n, final=n >= _MAX_TERMS)
        out[todo[done]] = vals[done]
        todo = todo[~done]
        n *= 4
    return np.where(np.isfinite(out), out, np.inf)


def _frac_series(q: float, sigma: float, a: np.ndarray, n: int, *, final: bool) -> tuple:
    """The first ``n`` terms of the two series for each order of ``a``: (log A, converged) per order (with
    ``final``, every order counts as converged)."""
    lq, l1q, s2 = math.log(q), math.log1p(-q), sigma ** 2
    z0 = s2 * math.log(1.0 / q - 1.0) + 0.5
    rt = math.sqrt(2.0) * sigma
    i = np.arange(n, dtype=np.float64)[None, :]
    aa = a[:, None]
    # |C(a, i)| and its sign, by the ratio C(a, i + 1) / C(a, i) = (a - i) / (i + 1)
    step = aa - i[:, :-1]
    log_abs = np.concatenate([np.zeros_like(aa), np.cumsum(np.log(np.abs(step)) - np.log(i[:, 1:]), axis=1)],
                             axis=1)
    sign = np.concatenate([np.ones_like(aa), np.cumprod(np.sign(step), axis=1)], axis=1)
    j = aa - i
    s0 = log_abs + i * lq + j * l1q + (i * i - i) / (2.0 * s2) + math.log(0.5) + _log_erfc((i - z0) / rt)
    s1 = log_abs + j * lq + i * l1q + (j * j - j) / (2.0 * s2) + math.log(0.5) + _log_erfc((z0 - j) / rt)
    small = (np.maximum(s0, s1) < -_TAIL) & (i > aa + 1.0)
    done = small.any(axis=1)
    cut = np.where(done, np.argmax(small, axis=1), n)
    keep = i < cut[:, None]
    pos, neg = keep & (sign > 0), keep & (sign < 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = logsumexp(np.concatenate([np.where(pos, s0, -np.inf), np.where(pos, s1, -np.inf)], axis=1), axis=1)
        ln = logsumexp(np.concatenate([np.where(neg, s0, -np.inf), np.where(neg, s1, -np.inf)], axis=1), axis=1)
        out = lp + np.log1p(-np.exp(ln - lp))
    out = np.where(np.isfinite(out), out, np.inf)
    return out, (done | final)
