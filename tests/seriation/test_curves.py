"""make_curve and order_agreement."""

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from numtk.seriation import make_curve, order_agreement


@pytest.mark.parametrize("kind, length", [
    ("line", 1.0),
    ("arc", math.pi),
    ("helix", math.hypot(2 * math.pi * 2 * 1.5, 16.4)),  # constant speed: sqrt((2 pi M r)^2 + H^2)
])
def test_lengths_match_closed_forms(kind, length):
    _, _, info = make_curve(kind, 10, 4, return_info=True, rng=0)
    assert_allclose(info.length, length, rtol=1e-10)


@pytest.mark.parametrize("kind", ["spiral", "nested_arcs", "random_fourier"])
def test_lengths_match_a_fine_polyline(kind):
    X, t, info = make_curve(kind, 200_001, 4, sampling="grid", return_info=True, rng=3)
    polyline = np.linalg.norm(np.diff(X, axis=0), axis=1).sum()
    assert_allclose(info.length, polyline, rtol=1e-6)
    # per-point arc length agrees with the polyline's running length
    run = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(X, axis=0), axis=1))]
    assert_allclose(info.arclength, run, rtol=1e-6, atol=1e-9)


def test_geometry_and_reproducibility():
    X, t, info = make_curve("arc", 300, 7, return_info=True, rng=5)
    assert X.shape == (300, 7) and t.shape == (300,) and np.all((0 <= t) & (t <= 1))
    assert_allclose(info.frame.T @ info.frame, np.eye(2), atol=1e-12)  # orthonormal frame
    assert_allclose(np.linalg.norm(X, axis=1), 1.0, rtol=1e-12)  # points on the unit circle
    X2, t2 = make_curve("arc", 300, 7, rng=5)
    assert_array_equal(X, X2) and assert_array_equal(t, t2)
    Xn, _ = make_curve("arc", 300, 7, noise=0.1, rng=5)
    assert_allclose(np.std(Xn - X), 0.1, rtol=0.1)
    Xg, tg = make_curve("line", 5, 1, sampling="grid", rng=0)
    assert_array_equal(tg, np.linspace(0, 1, 5))


def test_make_curve_bad_arguments():
    with pytest.raises(ValueError, match="`kind` must be one of"):
        make_curve("circle")
    with pytest.raises(ValueError, match="`n_features` must be at least 3 for kind='helix'"):
        make_curve("helix", 10, 2)
    with pytest.raises(ValueError, match="`noise` must lie in"):
        make_curve("line", 10, 1, noise=-1)
    with pytest.raises(ValueError, match="unknown keys"):
        make_curve("arc", params={"radius": 2, "turns": 3})
    with pytest.raises(ValueError, match="angle"):
        make_curve("arc", params={"angle": 7.0})


def test_order_agreement():
    t = np.array([0.3, 0.1, 0.2, 0.9])
    assert order_agreement(np.argsort(t), t) >= 1 - 1e-12
    assert order_agreement(np.argsort(t)[::-1], t) >= 1 - 1e-12  # reversal
    assert_allclose(order_agreement([0, 1, 2, 3], [0, 1, 3, 2]), 2 / 3)
    with pytest.raises(ValueError, match="permutation"):
        order_agreement([0, 0, 1], [1, 2, 3])
    with pytest.raises(TypeError, match="`order` must have a numeric"):
        order_agreement([0.0, 1.0], [1, 2])
    with pytest.raises(ValueError, match="same length"):
        order_agreement([0, 1], [1, 2, 3])
