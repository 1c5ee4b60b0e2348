"""The Kendall kernels give the same result for every thread count, on both sides of their grains.

``workers=-1`` starts threads only above a kernel's grain (``n_threads(..., work=n, grain=...)``); the
threaded path is also forced below it (``uncapped``) and with more threads than cores, so both paths are
compared with the serial one at every size. The oracle of the values is SciPy (bitwise, as elsewhere).
"""

import warnings

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_equal

from numtk._lib import n_threads
from numtk._lib._workers import uncapped
from numtk.stats import kendall_distance, kendall_tau, kendall_tau_interval
from numtk.stats._kendall import KENDALL_DISTINCT_GRAIN, KENDALL_GRAIN, KENDALL_TIED_GRAIN
from numtk.stats._kendall_interval import LEXSORT_GRAIN

# below the C++ kernel's own floor (65536), below twice the smallest grain, above it (2 threads on data without
# repeated values) and above twice the grain of data with some
SIZES = [5_000, 70_000, 2 * KENDALL_DISTINCT_GRAIN + 1, 2 * KENDALL_GRAIN + 1]
KINDS = ["continuous", "ties", "heavy_ties", "many_groups", "x_ties_only"]


def _pair(kind, n, rng):
    if kind == "continuous":
        x = rng.standard_normal(n)
        return x, x + rng.standard_normal(n)
    if kind == "ties":
        return rng.integers(0, 100, n), rng.integers(0, 100, n)
    if kind == "heavy_ties":
        return rng.integers(0, 5, n), rng.integers(0, 5, n).astype(np.float32)
    if kind == "many_groups":  # y ties with more than 4096 distinct values: the merge count
        return rng.standard_normal(n), rng.integers(0, n // 8 + 2, n)
    return rng.integers(0, 50, n).astype(np.int32), rng.standard_normal(n)


def test_grains_are_positive_and_threads_start_only_above_them():
    assert KENDALL_DISTINCT_GRAIN < KENDALL_GRAIN < KENDALL_TIED_GRAIN
    for grain in (KENDALL_DISTINCT_GRAIN, KENDALL_GRAIN, KENDALL_TIED_GRAIN, LEXSORT_GRAIN):
        assert grain > 0
        assert n_threads(-1, work=grain - 1, grain=grain) == 1
        assert n_threads(8, work=2 * grain, grain=grain) == 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", SIZES)
def test_kendall_tau_and_distance_do_not_depend_on_the_thread_count(kind, n):
    rng = np.random.default_rng(n + len(kind))
    x, y = _pair(kind, n, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = scipy.stats.kendalltau(x, y)
    ref_c = kendall_tau(x, y, variant="c")
    ref_d = kendall_distance(x, y, penalty=0.5)
    dis = kendall_distance(x, y)
    runs = [kendall_tau(x, y, workers=-1)]
    with uncapped():  # the threaded path below the grain too, with an odd number of blocks
        runs += [kendall_tau(x, y, workers=w) for w in (2, 3)]
        assert kendall_tau(x, y, variant="c", workers=3).statistic == ref_c.statistic
        assert kendall_distance(x, y, penalty=0.5, workers=2) == ref_d
        assert kendall_distance(x, y, workers=3) == dis
    assert kendall_distance(x, y, workers=-1) == dis
    for res in runs:
        assert_equal((float(res.statistic), float(res.pvalue)), (float(ref.statistic), float(ref.pvalue)))


@pytest.mark.parametrize("method", ["asymptotic", "bernstein", "hoeffding"])
@pytest.mark.parametrize("n", [5_000, LEXSORT_GRAIN - 1, 2 * LEXSORT_GRAIN + 1])
def test_kendall_tau_interval_does_not_depend_on_the_thread_count(method, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n)
    y = np.round(x + rng.standard_normal(n), 1)
    ref = kendall_tau_interval(x, y, method=method)
    runs = [kendall_tau_interval(x, y, method=method, workers=-1)]
    with uncapped():
        runs += [kendall_tau_interval(x, y, method=method, workers=w) for w in (2, 3)]
    for res in runs:
        assert (res.statistic, res.low, res.high) == (ref.statistic, ref.low, ref.high)


def test_the_grain_follows_the_ties_of_a_sample():
    from numtk._lib._workers import available_cores
    from numtk.stats._kendall import _TIE_DISTINCT, _kendall_grain, _kendall_threads

    rng = np.random.default_rng(7)
    two = min(2, available_cores())
    # from 2 * KENDALL_DISTINCT_GRAIN, data without repeated values take two threads: continuous, a permutation,
    # int32 and int64 alike; one repeated value in a sample is enough for the next grain
    n = 2 * KENDALL_DISTINCT_GRAIN
    x = rng.standard_normal(n)
    perm = rng.permutation(n)
    for a, b in [(x, x[::-1].copy()), (perm, x), (perm.astype(np.int32), perm[::-1].astype(np.int64))]:
        assert _kendall_grain(a, b) == KENDALL_DISTINCT_GRAIN
        assert _kendall_threads(-1, a, b) == two
    some = rng.integers(0, 1000, n)  # 1000 distinct values: repeats in a 1024-value sample
    assert _kendall_grain(x, some) == KENDALL_GRAIN
    assert _kendall_threads(-1, x, some) == 1
    assert _kendall_threads(-1, x[:n - 1], x[:n - 1]) == 1  # below twice the smallest grain: no sample taken
    repeated = x.copy()
    step = n // 1024
    repeated[step] = repeated[0]  # the samples' first two values equal
    assert _kendall_grain(repeated, x) == KENDALL_GRAIN
    # heavily tied: under _TIE_DISTINCT distinct values in either sample
    n = 3 * KENDALL_GRAIN
    x = rng.standard_normal(n)
    few = rng.integers(0, _TIE_DISTINCT - 1, n)
    many = rng.integers(0, 1000, n)
    assert _kendall_grain(x, few) == _kendall_grain(few.astype(float), x) == KENDALL_TIED_GRAIN
    assert _kendall_threads(-1, x, x[::-1].copy()) == two
    assert _kendall_threads(-1, x, many) == two
    assert _kendall_threads(-1, x, few) == 1  # either variable tied is enough
    assert _kendall_threads(-1, few.astype(float), x) == 1
    assert _kendall_threads(2, x, few) == 1  # an explicit count is capped the same way
    big = rng.integers(0, 5, 2 * KENDALL_TIED_GRAIN + 1)
    assert _kendall_threads(-1, big, big) == two
    assert _kendall_threads(1, x, x) == 1
    # tiny inputs: the sample is the data
    assert _kendall_grain(np.array([1.0]), np.array([2.0])) == KENDALL_TIED_GRAIN
