"""Kendall's tau (variants b and c, with SciPy's p-values) and the Kendall distance."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import SignificanceResult, n_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import (
    NAN_POLICIES,
    as_1d_numeric,
    check_bool,
    check_option,
    check_real,
    check_same_length,
    nan_mask,
)
from numtk._lib._warnings import TOO_SMALL_MESSAGE, SmallSampleWarning
from numtk.stats import _stats_ext

__all__ = ["kendall_tau", "kendall_distance"]

_VARIANTS = ("b", "c")
_ALTERNATIVES = ("two-sided", "less", "greater")
_METHODS = ("auto", "exact", "asymptotic")
_MAX_N = 2**32 - 1

# Observations (n) per thread of the Kendall pass (kendall_counts): n_threads starts a second thread from
# n = 2 * grain, the grain chosen from a strided sample of each variable (_kendall_threads). The pass has 7 to 10
# fork-joins of 25-50 us each. Measured on an idle 2-core machine, workers=1 against 2 forced, interleaved
# medians (bench/compare.py --kernels none --threads, and ints of a given range at n = 5e4-3e5):
# - no value repeated in either sample (continuous data, permutations): 0.97x at 5e4, 1.3x at 7e4, 1.4-1.6x
#   at 1e5;
# - some repeated: ints 0..999 0.71x and 0..9999 0.87x at 1e5 (one continuous variable and one of n / 8 groups
#   1.2x), 1.05-1.2x at 1.5e5-2e5, 1.5-1.65x at 3e5;
# - under _TIE_DISTINCT distinct values in a sample (heavily tied: the pass is cheap and its threaded sorts no
#   faster): five distinct values 0.55-0.67x at 1e5-3e5 and 1.06-1.12x at 1e6, 100 distinct 0.62-1.2x at 3e5
#   and 1.5x at 1e6.
KENDALL_DISTINCT_GRAIN = 50_000
KENDALL_GRAIN = 100_000
KENDALL_TIED_GRAIN = 500_000
_TIE_SAMPLE = 1024  # values of each variable in the strided sample
_TIE_DISTINCT = 256  # ... with fewer distinct values than this the data count as heavily tied


def _kendall_grain(x: np.ndarray, y: np.ndarray) -> int:
    """The Kendall pass's grain for x and y, from strided samples of both: KENDALL_DISTINCT_GRAIN where neither
    repeats a value, KENDALL_TIED_GRAIN where one has under _TIE_DISTINCT distinct values, else KENDALL_GRAIN."""
    step = max(1, int(x.shape[0]) // _TIE_SAMPLE)
    distinct = min(np.unique(x[::step]).size, np.unique(y[::step]).size)  # x and y have the same length
    if distinct < _TIE_DISTINCT:
        return KENDALL_TIED_GRAIN
    return KENDALL_GRAIN if distinct < x[::step].size else KENDALL_DISTINCT_GRAIN


def _kendall_threads(workers, x: np.ndarray, y: np.ndarray) -> int:
    """Threads of the Kendall pass (see _kendall_grain); below twice the smallest grain, one without sampling."""
    n = int(x.shape[0])
    threads = n_threads(workers, work=n, grain=KENDALL_DISTINCT_GRAIN)
    if threads > 1:
        threads = n_threads(workers, work=n, grain=_kendall_grain(x, y))
    return threads


class _Counts:
    """Integer statistics of one Kendall pass (all Python ints)."""

    __slots__ = ("n", "dis", "xtie", "ytie", "ntie", "x_distinct", "y_distinct", "x_groups", "y_groups")

    def __init__(self, n: int, raw: tuple) -> None:
        self.n = n
        (dis, xtie, ytie, ntie, xd, yd, self.x_groups, self.y_groups) = raw
        self.dis, self.xtie, self.ytie, self.ntie = int(dis), int(xtie), int(ytie), int(ntie)
        self.x_distinct, self.y_distinct = int(xd), int(yd)

    @property
    def total(self) -> int:
        return self.n * (self.n - 1) // 2

    @property
    def con_minus_dis(self) -> int:
        # total = con + dis + xtie + ytie - ntie
        return self.total - self.xtie - self.ytie + self.ntie - 2 * self.dis


def _prepare_pair(x: Any, y: Any, nan_policy: str, names=("x", "y")):
    """Validate a paired sample and apply ``nan_policy``.

    Returns ``(x, y, nan_found)``; with 'omit' the NaN pairs are dropped, with 'propagate'
    ``nan_found`` tells the caller to return NaN.
    """
    x = as_1d_numeric(x, names[0])
    y = as_1d_numeric(y, names[1])
    n = check_same_length(**{names[0]: x, names[1]: y})
    if n > _MAX_N:
        raise ValueError(f"`{names[0]}` and `{names[1]}` may hold at most 2**32 - 1 elements; got {n}")
    mask = nan_mask(x, y)
    nan_found = False
    if mask is not None:
        if nan_policy == "raise":
            which = [nm for nm, a in zip(names, (x, y)) if a.dtype.kind == "f" and np.isnan(a).any()]
            raise ValueError(f"The input contains nan values (in {' and '.join(f'`{w}`' for w in which)}); "
                             "use nan_policy='omit' to drop those pairs")
        if nan_policy == "omit":
            x, y = x[~mask], y[~mask]
        else:
            nan_found = True
    # Extended-precision floats are ranked exactly through their dense ranks (the kernel reads
    # 32- and 64-bit floats; a cast to float64 could merge distinct values).
    x, y = (np.unique(a, return_inverse=True)[1] if a.dtype.kind == "f" and a.dtype.itemsize > 8 else a
            for a in (x, y))
    return x, y, nan_found


def _counts(x: np.ndarray, y: np.ndarray, threads: int) -> _Counts:
    return _Counts(x.shape[0], _stats_ext.kendall_counts(x, y, threads))


def _tie_moments(groups: np.ndarray) -> tuple[int, int]:
    # Float products summed by NumPy over the groups in ascending value order, then made Python ints:
    # the same operations as SciPy, so the p-values agree to the last bit.
    cnt = groups.astype(np.int64, copy=False)
    return int((cnt * (cnt - 1.0) * (cnt - 2)).sum()), int((cnt * (cnt - 1.0) * (2 * cnt + 5)).sum())


def _kendall_p_exact(n: int, c: int, alternative: str) -> np.float64:
    """Exact null p-value of Kendall's statistic for n untied pairs with c concordant pairs.

    Counts permutations by inversions (Mahonian numbers; generating function
    prod_{j=1..n} (1 + q + ... + q^(j-1))), using the symmetry of the null distribution to work in the
    left tail. Kendall (1970), "Rank Correlation Methods", 4th ed.
    """
    total = n * (n - 1) // 2
    right_tail = c >= total - c
    c = min(c, total - c)
    mass = None
    if n <= 2:
        prob, mass = 1.0, (1.0 if n == 1 else 0.5)
    elif c == 0:
        prob = 2.0 / math.factorial(n) if n < 171 else 0.0
        mass = prob / 2
    elif c == 1:
        prob = 2.0 / math.factorial(n - 1) if n < 172 else 0.0
        mass = (n - 1) / math.factorial(n)
    elif 4 * c == n * (n - 1) and alternative == "two-sided":
        prob = 1.0
    else:
        # freq[k] = number (or, for large n, scaled number) of permutations of j items with k
        # inversions, truncated at k = c; adding item j is a window sum of width j.
        freq = np.zeros(c + 1)
        freq[0:2] = 1.0
        big = n >= 171
        for j in range(3, n + 1):
            freq = np.cumsum(freq)
            if big:
                freq = freq / j
            if j <= c:
                freq[j:] -= freq[: c + 1 - j].copy()
        if big:
            prob, mass = np.sum(freq), freq[-1] / 2
        else:
            prob, mass = 2.0 * np.sum(freq) / math.factorial(n), freq[-1] / math.factorial(n)
    if alternative != "two-sided":
        if right_tail == (alternative == "greater"):
            prob /= 2
        else:
            prob = 1 - prob / 2 + mass
    return np.clip(prob, 0, 1)


def _nan_result() -> SignificanceResult:
    nan = np.float64(np.nan)
    return SignificanceResult(statistic=nan, pvalue=nan, correlation=nan)


@constraints(x="array1d", y="array1d", variant="option", alternative="option", method="option",
             nan_policy="option", workers="workers")
def kendall_tau(x: ArrayLike, y: ArrayLike, *, variant: str = "b", alternative: str = "two-sided",
                method: str = "auto", nan_policy: str = "propagate", workers: int = 1) -> SignificanceResult:
    r"""Kendall's rank correlation tau, with a test of independence.

    A drop-in for :func:`scipy.stats.kendalltau` on 1-D input: the same variants, p-values, tie
    handling and NaN policies, the same numbers to the last bit, computed by a compiled O(n log n)
    pass (radix sorts and an inversion count) that runs with the GIL released and, with ``workers``,
    on several threads.

    Parameters
    ----------
    x, y : array_like, shape (n,)
        Paired observations: boolean, integer or float. Integers are ranked exactly (int64 beyond
        2**53 too); ``-0.0`` ties with ``0.0``; ``inf`` is an ordinary value.
    variant : {'b', 'c'}, optional
        Tau-b (default), which adjusts for ties, or Stuart's tau-c.
    alternative : {'two-sided', 'less', 'greater'}, optional
        Alternative hypothesis: the correlation is nonzero, negative or positive.
    method : {'auto', 'exact', 'asymptotic'}, optional
        How the p-value is computed. 'exact' enumerates the null distribution (no ties allowed);
        'asymptotic' uses the tie-corrected normal approximation; 'auto' (default) takes the exact
        route when there are no ties and either n <= 33 or the data are at most one swap from a
        perfect (anti-)ordering.
    nan_policy : {'propagate', 'raise', 'omit'}, optional
        'propagate' returns NaN when either input holds NaN, 'raise' raises ValueError, 'omit' drops
        the pairs with a NaN in either input.
    workers : int, optional
        Threads of the compiled pass: 1 (default), k, or -1 for every available core. The result does
        not depend on it. An upper bound: a second thread starts where it pays, from n = 100 000 where a
        strided sample of each variable repeats no value, from 200 000 where one does, and from 1 000 000
        where a sample has under 256 distinct values.

    Returns
    -------
    res : SignificanceResult
        With fields (it unpacks as ``tau, p = res``, as SciPy's)

        statistic : numpy.float64
            Kendall's tau (NaN when fewer than two pairs remain, for constant input, or for NaN
            input with ``nan_policy='propagate'``).
        pvalue : numpy.float64
            The p-value of the test of no association against ``alternative`` (NaN with
            ``statistic``).
        correlation : numpy.float64
            The same number as ``statistic`` (SciPy's alias).

    Raises
    ------
    TypeError
        If ``x`` or ``y`` is not numeric.
    ValueError
        If they are not 1-D or differ in length, if an option is unknown, if ``method='exact'``
        meets ties, or if they hold NaN and ``nan_policy='raise'``.

    Warns
    -----
    SmallSampleWarning
        When fewer than two pairs remain (the result is NaN). Constant input gives NaN silently.

    See Also
    --------
    kendall_distance : the number of discordant pairs.
    kendall_tau_interval : confidence intervals for tau.
    scipy.stats.kendalltau : the reference implementation.

    Notes
    -----
    With :math:`n_c` concordant and :math:`n_d` discordant pairs among the
    :math:`N = n(n-1)/2`, :math:`t_x` (:math:`t_y`) pairs tied in x (y), and :math:`m` the smaller
    number of distinct values,

    .. math::

        \tau_b = \frac{n_c - n_d}{\sqrt{(N - t_x)(N - t_y)}}, \qquad
        \tau_c = \frac{2 (n_c - n_d)}{n^2 (m - 1) / m}.

    The asymptotic test uses the tie-corrected variance of :math:`S = n_c - n_d` [3]_,

    .. math::

        \operatorname{Var} S = \frac{v_0 - v_t - v_u}{18}
            + \frac{\sum t(t-1)(t-2) \sum u(u-1)(u-2)}{9 n (n-1)(n-2)}
            + \frac{\sum t(t-1) \sum u(u-1)}{2 n (n-1)},

    with :math:`v_0 = n(n-1)(2n+5)` and :math:`v_t = \sum t(t-1)(2t+5)` over the tie groups of x
    (sizes t) and y (sizes u). The exact test counts permutations by inversions [4]_. The counts come
    from one lexicographic radix sort and a strict-inversion count, as in Knight's algorithm [5]_.
    The floating-point expressions are evaluated in the same order as SciPy's, so both libraries
    return identical doubles.

    Unlike SciPy, ``x`` and ``y`` must be 1-D (SciPy flattens), and strings are refused.

    References
    ----------
    .. [1] M. G. Kendall, "A new measure of rank correlation", Biometrika 30, 81-93, 1938.
    .. [2] M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33, 239-251, 1945.
    .. [3] G. E. Noether, "Elements of Nonparametric Statistics", Wiley, 1967.
    .. [4] M. G. Kendall, "Rank Correlation Methods", 4th ed., Griffin, 1970.
    .. [5] W. R. Knight, "A computer method for calculating Kendall's tau with ungrouped data",
       JASA 61, 436-439, 1966.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.stats import kendall_tau
    >>> res = kendall_tau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0])
    >>> float(res.statistic), float(res.pvalue)
    (-0.4714045207910316, 0.28274545993277467)
    >>> tau, p = kendall_tau(np.arange(10), np.arange(10)[::-1], alternative="less")
    >>> float(p)  # exact: 1 / 10!
    2.755731922398589e-07
    """
    check_option(variant, "variant", _VARIANTS)
    check_option(alternative, "alternative", _ALTERNATIVES)
    check_option(method, "method", _METHODS)
    check_option(nan_policy, "nan_policy", NAN_POLICIES)
    n_threads(workers)  # validated before the data
    x, y, nan_found = _prepare_pair(x, y, nan_policy)
    size = int(x.shape[0])
    if size <= 1:
        warnings.warn(TOO_SMALL_MESSAGE, SmallSampleWarning, stacklevel=2)
        return _nan_result()
    if nan_found:
        return _nan_result()
    c = _counts(x, y, _kendall_threads(workers, x, y))
    return _tau_from_counts(c, variant, alternative, method)


def _tau_from_counts(c: _Counts, variant: str, alternative: str, method: str) -> SignificanceResult:
    size, tot, xtie, ytie, dis = c.n, c.total, c.xtie, c.ytie, c.dis
    if xtie == tot or ytie == tot:  # a constant input: undefined, silently NaN (as SciPy)
        return _nan_result()
    con_minus_dis = c.con_minus_dis
    if variant == "b":
        tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    else:
        m = min(c.x_distinct, c.y_distinct)
        tau = 2 * con_minus_dis / (size**2 * (m - 1) / m)
    tau = np.minimum(1.0, max(-1.0, tau))

    if method == "exact" and (xtie != 0 or ytie != 0):
        raise ValueError("Ties found, exact method cannot be used.")
    if method == "auto":
        exact = xtie == 0 and ytie == 0 and (size <= 33 or min(dis, tot - dis) <= 1)
        method = "exact" if exact else "asymptotic"
    if method == "exact":
        pvalue = _kendall_p_exact(size, tot - dis, alternative)
    else:
        from scipy.special import ndtr

        x0, x1 = _tie_moments(c.x_groups)
        y0, y1 = _tie_moments(c.y_groups)
        m = size * (size - 1.0)
        var = ((m * (2 * size + 5) - x1 - y1) / 18
               + (2 * xtie * ytie) / m + x0 * y0 / (9 * m * (size - 2)))
        z = con_minus_dis / np.sqrt(var)
        if alternative == "less":
            pvalue = ndtr(z)
        elif alternative == "greater":
            pvalue = ndtr(-z)
        else:
            pvalue = 2 * ndtr(-np.abs(z))
    tau = np.float64(tau)
    return SignificanceResult(statistic=tau, pvalue=np.float64(pvalue), correlation=tau)


def _distance_from_counts(n: int, dis: int, xtie: int, ytie: int, ntie: int, *,
                          normalize: bool, penalty: float) -> int | float:
    """Kendall distance from exact integer counts (Python ints: no overflow at any n)."""
    if penalty == 0 and not normalize:
        return int(dis)
    total = n * (n - 1) // 2
    # Fagin et al.: a pair tied in exactly one ranking costs `penalty`. Exact rational arithmetic,
    # one rounding at the end.
    from fractions import Fraction

    value = dis + Fraction(penalty) * ((xtie - ntie) + (ytie - ntie))
    if normalize:
        value = value / total if total else Fraction(0)
    return float(value)


@constraints(a="array1d", b="array1d", normalize="bool", penalty="prob", nan_policy="option", workers="workers")
def kendall_distance(a: ArrayLike, b: ArrayLike, *, normalize: bool = False, penalty: float = 0.0,
                     nan_policy: str = "raise", workers: int = 1) -> int | float:
    r"""Kendall tau distance: the number of item pairs that two rankings order oppositely.

    Parameters
    ----------
    a, b : array_like, shape (n,)
        Scores (or ranks) of the same n items; higher means ranked later. Any boolean, integer or
        float dtype; ties allowed.
    normalize : bool, optional
        Divide by the number of pairs :math:`n(n-1)/2`, giving a value in [0, 1].
    penalty : float in [0, 1], optional
        Fagin's penalty :math:`p` for a pair tied in one ranking but not the other (partial
        rankings); 0 (default) counts only strict disagreements.
    nan_policy : {'raise', 'omit', 'propagate'}, optional
        'raise' (default) refuses NaN, 'omit' drops the items with NaN in either ranking,
        'propagate' returns NaN.
    workers : int, optional
        Threads of the compiled pass (-1: all cores).

    Returns
    -------
    distance : int or float
        The exact count as a Python int when ``normalize=False`` and ``penalty=0`` (it cannot
        overflow); otherwise a float.

    Notes
    -----
    :math:`K = \#\{i < j : (a_i - a_j)(b_i - b_j) < 0\}`; with a penalty,
    :math:`K_p = K + p\,(t_a + t_b - 2 t_{ab})`, where :math:`t_a` (:math:`t_b`) counts pairs tied in a
    (b) and :math:`t_{ab}` pairs tied in both [2]_. For two permutations K is the bubble-sort distance,
    and for untied data :math:`K = (1 - \tau_a) N / 2`. Computed in O(n log n) [1]_.

    References
    ----------
    .. [1] M. G. Kendall, "A new measure of rank correlation", Biometrika 30, 81-93, 1938.
    .. [2] R. Fagin, R. Kumar, M. Mahdian, D. Sivakumar, E. Vee, "Comparing partial rankings",
       SIAM J. Discrete Math. 20(3), 628-648, 2006.

    Examples
    --------
    >>> from numtk.stats import kendall_distance
    >>> kendall_distance([0, 1, 2, 3], [3, 2, 1, 0])
    6
    >>> kendall_distance([1, 2, 3], [1, 3, 2], normalize=True)
    0.3333333333333333
    """
    normalize = check_bool(normalize, "normalize")
    penalty = check_real(penalty, "penalty", low=0.0, high=1.0)
    check_option(nan_policy, "nan_policy", NAN_POLICIES)
    n_threads(workers)  # validated before the data
    a, b, nan_found = _prepare_pair(a, b, nan_policy, names=("a", "b"))
    if nan_found:
        return float("nan")
    c = _counts(a, b, _kendall_threads(workers, a, b))
    return _distance_from_counts(c.n, c.dis, c.xtie, c.ytie, c.ntie, normalize=bool(normalize),
                                 penalty=penalty)
