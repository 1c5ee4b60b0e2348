"""Sinkhorn and MMD give the same value for every thread count, on both sides of their grains.

``workers=-1`` starts threads only above a kernel's grain (``n_threads(..., work=..., grain=...)``); the
threaded path is also forced below it (``uncapped``). The values are checked against references in
test_metrics.py.
"""

import warnings

import numpy as np
import pytest

from numtk._lib._workers import uncapped
from numtk.sampling import mmd, sinkhorn_distance
from numtk.sampling._metrics import MMD_GRAIN, SINKHORN_GRAIN


def _values(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Sinkhorn stopped at max_iter on purpose
        out = [call(1), call(-1)]
        with uncapped():
            out += [call(2), call(3)]
    return out


@pytest.mark.parametrize("n", [40, int(np.sqrt(2 * SINKHORN_GRAIN)) + 1])
def test_sinkhorn_does_not_depend_on_the_thread_count(n):
    rng = np.random.default_rng(n)
    X, Y = rng.standard_normal((2, n, 3))
    values = _values(lambda w: sinkhorn_distance(X, Y, max_iter=30, workers=w))
    assert len(set(values)) == 1, values


@pytest.mark.parametrize("n", [50, int(np.sqrt(2 * MMD_GRAIN / 8)) + 1])  # work 8 n^2 at d = 4
def test_mmd_does_not_depend_on_the_thread_count(n):
    rng = np.random.default_rng(n)
    X, Y = rng.standard_normal((2, n, 4))
    values = _values(lambda w: mmd(X, Y, workers=w))
    assert len(set(values)) == 1, values
