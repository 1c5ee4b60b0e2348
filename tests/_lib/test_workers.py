"""n_threads' cap by a kernel's work and grain, and the context that lifts it for benchmarks."""

import pytest

from numtk._lib import n_threads
from numtk._lib._workers import available_cores, uncapped


def brute_cap(workers, work, grain):
    """The thread count by counting: the most threads t <= workers with t * grain <= work, at least 1."""
    best = 1
    for t in range(1, workers + 1):
        if t * grain <= work:
            best = t
    return best


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
@pytest.mark.parametrize("grain", [1, 7, 1000, 2.5e5])
@pytest.mark.parametrize("work", [0, 1, 6, 7, 13, 14, 999, 1000, 1999, 2000, 7999, 8000, 10**9])
def test_the_cap_is_work_over_grain(workers, grain, work):
    assert n_threads(workers, work=work, grain=grain) == brute_cap(workers, work, grain)


def test_minus_one_is_capped_by_the_cores_and_by_the_work():
    cores = available_cores()
    assert n_threads(-1, work=10**12, grain=1) == cores
    assert n_threads(-1, work=5, grain=10) == 1
    assert n_threads(-1, work=2 * 10, grain=10) == min(2, cores)


def test_without_work_or_grain_there_is_no_cap():
    assert n_threads(4) == 4
    assert n_threads(4, work=1) == 4
    assert n_threads(4, grain=10) == 4


def test_a_grain_must_be_positive():
    with pytest.raises(ValueError, match="grain must be positive"):
        n_threads(2, work=10, grain=0)


def test_bad_workers_are_refused_whatever_the_work():
    with pytest.raises(ValueError, match="`workers` must be a positive int or -1"):
        n_threads(0, work=0, grain=10)
    with pytest.raises(TypeError, match="must be an int here"):
        n_threads(map, work=10**9, grain=1)


def test_uncapped_lifts_the_cap_and_nests():
    assert n_threads(3, work=1, grain=10) == 1
    with uncapped():
        assert n_threads(3, work=1, grain=10) == 3
        with uncapped():
            assert n_threads(3, work=1, grain=10) == 3
        assert n_threads(3, work=1, grain=10) == 3
    assert n_threads(3, work=1, grain=10) == 1
