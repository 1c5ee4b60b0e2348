"""numtk.stats.kendall_distance against brute force and exact integer arithmetic."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from reference.kendall import pair_counts

from numtk.stats import kendall_distance
from numtk.stats._kendall import _distance_from_counts


@pytest.mark.parametrize("a, b, expected", [
    ([0, 1, 2, 3], [3, 2, 1, 0], 6),
    ([1, 2, 3], [1, 3, 2], 1),
    ([12, 2, 1, 12, 2], [1, 4, 7, 1, 0], 6),
    ([0, 1, 2, 3], [1, 0, 3, 2], 2),
    ([], [], 0),
    ([5], [7], 0),
])
def test_known_values(a, b, expected):
    d = kendall_distance(a, b)
    assert d == expected and type(d) is int


@given(st.data())
def test_matches_brute_force(data):
    dtype = data.draw(st.sampled_from([np.int32, np.int64, np.float64]))
    n = data.draw(st.integers(0, 50))
    a = data.draw(hnp.arrays(dtype, n, elements=st.integers(-3, 3)))
    b = data.draw(hnp.arrays(dtype, n, elements=st.integers(-3, 3)))
    c, d, xt, yt, nt = pair_counts(a, b)
    assert kendall_distance(a, b) == d
    assert kendall_distance(a[::2], b[::2]) == pair_counts(a[::2], b[::2])[1]
    # Fagin's penalty p: pairs tied in exactly one ranking cost p
    p = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    expected = d + p * ((xt - nt) + (yt - nt))
    assert kendall_distance(a, b, penalty=p) == pytest.approx(expected, rel=1e-15)
    total = n * (n - 1) // 2
    if total:
        assert kendall_distance(a, b, normalize=True) == pytest.approx(d / total, rel=1e-15)


def test_untied_relation_to_tau_a():
    rng = np.random.default_rng(0)
    a, b = rng.permutation(1000), rng.permutation(1000)
    c, d, *_ = pair_counts(a, b)
    n_pairs = 1000 * 999 // 2
    tau_a = (c - d) / n_pairs
    assert kendall_distance(a, b) == round((1 - tau_a) * n_pairs / 2)


def test_counts_beyond_32_bits():
    # A reversed sequence of 100,000 items has n(n-1)/2 = 4,999,950,000 > 2**32 discordant pairs;
    # int8 input with two values has xtie beyond 2**32 too.
    n = 100_000
    assert kendall_distance(np.arange(n), np.arange(n)[::-1]) == n * (n - 1) // 2
    assert kendall_distance(np.arange(n), np.arange(n)[::-1], workers=2) == n * (n - 1) // 2
    half = np.repeat(np.array([0, 1], dtype=np.int8), n // 2)
    ones = np.ones(n, dtype=np.int8)
    # every pair tied in `ones`, (n/2)^2 pairs split by `half`: Fagin penalty 1 counts them
    assert kendall_distance(half, ones, penalty=1.0) == float((n // 2) ** 2)


def test_arithmetic_at_the_int64_boundary():
    # Synthetic counts for n close to 2**32 (the kernel's limit): n(n-1)/2 is near 2**63, where
    # int64 or float64 arithmetic would overflow or round; Python ints stay exact.
    n = 2**32 - 1
    total = n * (n - 1) // 2
    assert total > 2**62
    dis = total - 3
    assert _distance_from_counts(n, dis, 0, 0, 0, normalize=False, penalty=0.0) == dis
    assert _distance_from_counts(n, total, 0, 0, 0, normalize=True, penalty=0.0) == 1.0
    # one-sided ties near the boundary with a penalty: exact rational arithmetic, then one rounding
    xtie = total - dis
    got = _distance_from_counts(n, dis, xtie, 0, 0, normalize=True, penalty=1.0)
    assert got == 1.0
    got = _distance_from_counts(n, dis, xtie, 0, 0, normalize=False, penalty=0.5)
    assert got == float(dis) + 1.5
    # n = 1e8 (the scale): total pairs and a full reversal stay exact
    n = 10**8
    assert _distance_from_counts(n, n * (n - 1) // 2, 0, 0, 0, normalize=False, penalty=0.0) == 4999999950000000


def test_nan_policy_and_bad_input():
    a = np.array([1.0, np.nan, 3.0])
    b = np.array([3.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="nan values.*`a`"):
        kendall_distance(a, b)
    assert kendall_distance(a, b, nan_policy="omit") == 1
    assert math.isnan(kendall_distance(a, b, nan_policy="propagate"))
    with pytest.raises(ValueError, match=r"`penalty` must lie in \[0.0, 1.0\]; got 2.0"):
        kendall_distance([1, 2], [2, 1], penalty=2)
    with pytest.raises(TypeError, match="`normalize` must be a bool"):
        kendall_distance([1, 2], [2, 1], normalize="yes")
    with pytest.raises(ValueError, match="`a` and `b` must have the same length"):
        kendall_distance([1, 2], [2, 1, 3])
    with pytest.raises(TypeError, match="`b` must have a numeric"):
        kendall_distance([1, 2], ["x", "y"])


@pytest.mark.slow
def test_hundred_million_items():
    # n = 1e8: the count n(n-1)/2 ~ 5e15 needs 64-bit counters end to end (a reversed view, no copy).
    n = 10**8
    a = np.arange(n, dtype=np.int32)
    assert kendall_distance(a, a[::-1]) == n * (n - 1) // 2 == 4999999950000000
