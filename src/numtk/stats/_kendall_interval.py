"""Confidence intervals for Kendall's tau: Hoeffding, empirical Bernstein and asymptotic."""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result, n_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import NAN_POLICIES, check_option, check_real
from numtk._lib._warnings import TOO_SMALL_MESSAGE, SmallSampleWarning
from numtk.stats import _kendall_pointwise, _stats_ext
from numtk.stats._kendall import _counts, _kendall_threads, _prepare_pair

__all__ = ["kendall_tau_interval"]

_METHODS = ("hoeffding", "bernstein", "asymptotic")
_ALTERNATIVES = ("two-sided", "less", "greater")

# Observations (n) per thread of the lexicographic sort (kendall_lexsort: the asymptotic method's threaded
# part; the per-point counts after it are serial, so threads save at most about a third of the call): a second
# thread starts from n = 2 * LEXSORT_GRAIN. Measured on an idle machine, one thread against two forced,
# interleaved medians of five: 0.92-0.99x from 1e4 to 1e5, 0.83-0.90x at 3e5, 1.03x at 1e6, 1.07x at 3e6.
LEXSORT_GRAIN = 500_000


def _hoeffding_halfwidth(k: int, log_term: float) -> float:
    # P(|U - tau| >= t) <= 2 exp(-k t^2 / 2) for a U-statistic of order 2 with kernel in [-1, 1].
    return math.sqrt(2.0 * log_term / k)


def _bernstein_ends(tau_hat: float, k: int, log_term: float) -> tuple[float, float]:
    # Confidence set {tau : k u^2 <= L (2 (1 - tau^2) + (2/3) b(tau) u)}, u = |tau_hat - tau|, with
    # b = 1 - tau below tau_hat and 1 + tau above; each side is a convex quadratic in u.
    L = log_term
    A = k + 4.0 * L / 3.0
    C = -2.0 * L * (1.0 - tau_hat * tau_hat)
    B_lo = -L * (4.0 * tau_hat + (2.0 / 3.0) * (1.0 - tau_hat))
    B_up = L * (4.0 * tau_hat - (2.0 / 3.0) * (1.0 + tau_hat))
    u_lo = (-B_lo + math.sqrt(B_lo * B_lo - 4.0 * A * C)) / (2.0 * A)
    u_up = (-B_up + math.sqrt(B_up * B_up - 4.0 * A * C)) / (2.0 * A)
    return tau_hat - u_lo, tau_hat + u_up


def _asymptotic_center_and_se(x: np.ndarray, y: np.ndarray, threads: int) -> tuple[float, float]:
    """tau-b and the standard error from its influence function (delta method through the ties)."""
    n = x.shape[0]
    _, xr, yr = _stats_ext.kendall_lexsort(x, y, threads)
    n_y = int(yr.max()) + 1
    cd, xs, ys = _kendall_pointwise.pointwise_counts(xr, yr, n_y)
    N = n * (n - 1) / 2.0
    h1 = cd / (n - 1.0)                      # per-point projection of the kernel
    tau_a = float(cd.sum()) / (2.0 * N)      # = mean(h1) exactly in exact arithmetic
    g = xs / (n - 1.0)                       # per-point share of pairs tied in x
    r = ys / (n - 1.0)
    t_x = float(xs.sum()) / (2.0 * N)
    t_y = float(ys.sum()) / (2.0 * N)
    P, Q = 1.0 - t_x, 1.0 - t_y
    if P == 0.0 or Q == 0.0:
        return math.nan, math.nan
    infl = (2.0 * (h1 - tau_a) + (tau_a / P) * (g - t_x) + (tau_a / Q) * (r - t_y)) / math.sqrt(P * Q)
    var = float(np.dot(infl, infl)) / (n * (n - 1.0))
    return tau_a / math.sqrt(P * Q), math.sqrt(var)


@constraints(x="array1d", y="array1d", confidence="prob_open", method="option", alternative="option",
             nan_policy="option", workers="workers")
def kendall_tau_interval(x: ArrayLike, y: ArrayLike, confidence: float = 0.95,
                         method: str = "bernstein", *, alternative: str = "two-sided", nan_policy: str = "propagate",
                         workers: int = 1) -> Result:
    r"""Confidence interval for the population Kendall tau.

    Two finite-sample intervals, valid at every sample size for i.i.d. pairs, and the asymptotic
    normal interval.

    Parameters
    ----------
    x, y : array_like, shape (n,)
        Paired i.i.d. observations (boolean, integer or float).
    confidence : float in (0, 1), optional
        Confidence level (default 0.95).
    method : {'hoeffding', 'bernstein', 'asymptotic'}, optional
        'hoeffding': Hoeffding's inequality for U-statistics. 'bernstein' (default): Bernstein's
        inequality with the variance bound :math:`1 - \tau^2`, much tighter near :math:`|\tau| = 1`.
        'asymptotic': normal interval around tau-b with the tie-corrected (influence-function)
        standard error.
    alternative : {'two-sided', 'greater', 'less'}, optional
        'greater' gives a lower confidence bound (``high = 1``), 'less' an upper one (``low = -1``).
    nan_policy : {'propagate', 'raise', 'omit'}, optional
        As in :func:`kendall_tau`.
    workers : int, optional
        Threads of the compiled passes (-1: all cores).

    Returns
    -------
    res : Result
        With fields (the same for every method)

        statistic : float
            The point estimate: tau-a for the finite-sample methods, tau-b for 'asymptotic'
            (NaN when fewer than two pairs remain, for constant input with 'asymptotic', or for
            NaN input with ``nan_policy='propagate'``).
        low, high : float
            The ends of the interval, clipped to [-1, 1] (NaN with ``statistic``).
        confidence : float
            The confidence level.
        method : str
            The method used.
        alternative : str
            The alternative: ``'greater'`` makes ``high = 1``, ``'less'`` makes ``low = -1``.
        n : int
            The number of pairs used (after ``nan_policy='omit'``).

    Notes
    -----
    Sample :math:`\hat\tau_a = (n_c - n_d) / \binom{n}{2}` is a U-statistic of order 2 with kernel
    :math:`h = \operatorname{sign}(x - x')\operatorname{sign}(y - y') \in [-1, 1]` and mean
    :math:`\tau_a`. Hoeffding [1]_ (Section 5) shows that exponential bounds for means of
    :math:`k` i.i.d. variables hold for such U-statistics with :math:`k = \lfloor n/2 \rfloor`. Let
    :math:`\alpha = 1 - \text{confidence}` and :math:`L = \log(2/\alpha)` two-sided,
    :math:`\log(1/\alpha)` one-sided.

    * Hoeffding: :math:`P(|\hat\tau_a - \tau_a| \ge t) \le 2 e^{-k t^2 / 2}`, so the interval is
      :math:`\hat\tau_a \pm \sqrt{2 L / k}`.
    * Bernstein: :math:`\operatorname{Var} h \le 1 - \tau_a^2` (equality without ties) and
      :math:`h - \tau_a \in [-(1 + \tau_a), 1 - \tau_a]`, so the set
      :math:`\{\tau : k u^2 \le L (2 (1 - \tau^2) + \tfrac{2}{3} b(\tau) u)\}`, with
      :math:`u = |\hat\tau_a - \tau|` and :math:`b = 1 - \tau` below :math:`\hat\tau_a`,
      :math:`1 + \tau` above, has coverage at least the nominal level. Each side is a quadratic
      :math:`A u^2 + B u + C \le 0` with :math:`A = k + 4L/3`, :math:`C = -2L(1 - \hat\tau_a^2)`,
      :math:`B = -L(4\hat\tau_a + \tfrac23 (1 - \hat\tau_a))` below and
      :math:`B = L(4\hat\tau_a - \tfrac23 (1 + \hat\tau_a))` above; the ends are its positive roots.
    * Asymptotic: with :math:`h_1(i) = (n_c(i) - n_d(i))/(n - 1)`, the per-point tie shares
      :math:`g_i, r_i` and their means :math:`t_x, t_y`, :math:`P = 1 - t_x`, :math:`Q = 1 - t_y`, the
      influence function of :math:`\tau_b = \tau_a / \sqrt{PQ}` is
      :math:`\psi_i = [2 (h_1(i) - \hat\tau_a) + \tfrac{\hat\tau_a}{P}(g_i - t_x) +
      \tfrac{\hat\tau_a}{Q}(r_i - t_y)] / \sqrt{PQ}` and the interval is
      :math:`\hat\tau_b \pm z_{1-\alpha/2} \sqrt{\sum_i \psi_i^2 / (n (n-1))}`. Without ties this is
      the classical U-statistic variance :math:`4 \widehat{\operatorname{Var}}(h_1) / n` [2]_.

    The finite-sample methods bound the population :math:`\tau_a` (equal to :math:`\tau_b` for a
    population without ties). At :math:`|\hat\tau| = 1` the asymptotic interval has zero width; use a
    finite-sample method there. All ends are clipped to [-1, 1]. Per-point counts are computed in
    O(n log n).

    References
    ----------
    .. [1] W. Hoeffding, "Probability inequalities for sums of bounded random variables",
       JASA 58, 13-30, 1963.
    .. [2] W. Hoeffding, "A class of statistics with asymptotically normal distribution",
       Ann. Math. Statist. 19, 293-325, 1948.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.stats import kendall_tau_interval
    >>> rng = np.random.default_rng(0)
    >>> x = rng.standard_normal(1000)
    >>> y = x + 0.1 * rng.standard_normal(1000)
    >>> res = kendall_tau_interval(x, y, method="bernstein")
    >>> bool(res.low < res.statistic < res.high)
    True
    >>> round(res.statistic, 3)
    0.933
    """
    confidence = check_real(confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)
    check_option(method, "method", _METHODS)
    check_option(alternative, "alternative", _ALTERNATIVES)
    check_option(nan_policy, "nan_policy", NAN_POLICIES)
    n_threads(workers)  # validated before the data
    x, y, nan_found = _prepare_pair(x, y, nan_policy)
    n = int(x.shape[0])

    def result(stat, low, high):
        return Result(statistic=float(stat), low=float(low), high=float(high), confidence=confidence,
                      method=method, alternative=alternative, n=n)

    if n <= 1:
        warnings.warn(TOO_SMALL_MESSAGE, SmallSampleWarning, stacklevel=2)
        return result(np.nan, np.nan, np.nan)
    if nan_found:
        return result(np.nan, np.nan, np.nan)
    alpha = 1.0 - confidence
    two_sided = alternative == "two-sided"

    if method == "asymptotic":
        from scipy.special import ndtri

        center, se = _asymptotic_center_and_se(x, y, n_threads(workers, work=n, grain=LEXSORT_GRAIN))
        if math.isnan(center):  # a constant input
            return result(np.nan, np.nan, np.nan)
        z = float(ndtri(1.0 - alpha / 2.0)) if two_sided else float(ndtri(1.0 - alpha))
        low, high = center - z * se, center + z * se
    else:
        c = _counts(x, y, _kendall_threads(workers, x, y))
        center = c.con_minus_dis / c.total
        k = n // 2
        log_term = math.log(2.0 / alpha) if two_sided else math.log(1.0 / alpha)
        if method == "hoeffding":
            w = _hoeffding_halfwidth(k, log_term)
            low, high = center - w, center + w
        else:
            low, high = _bernstein_ends(center, k, log_term)
    if alternative == "greater":
        high = 1.0
    elif alternative == "less":
        low = -1.0
    return result(center, max(-1.0, low), min(1.0, high))
