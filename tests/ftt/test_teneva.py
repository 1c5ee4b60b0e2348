"""Cross-check of FunctionalTT.fit against teneva's TT-ALS on a grid problem.

On an n-point grid per coordinate, Legendre polynomials of degree n - 1 interpolate the nodal values, so a
FunctionalTT of rank r *is* a rank-r tensor train on the grid: both libraries fit the same model class.
"""

import numpy as np
import pytest

from numtk.ftt import FunctionalTT

teneva = pytest.importorskip("teneva")

D, N, R = 5, 8, 3
NODES = np.cos(np.pi * (np.arange(N) + 0.5) / N)


def _f(X):
    # a ridge function (TT rank 2) plus a product (rank 1): rank <= 3 at every bond
    return np.sin(X @ np.linspace(1.0, 0.4, X.shape[1])) + 0.3 * np.prod(1 + 0.2 * X, axis=1)


def _problem(noise, seed):
    rng = np.random.default_rng(seed)
    I, It = rng.integers(0, N, (3000, D)), rng.integers(0, N, (500, D))
    y = _f(NODES[I]) + noise * rng.standard_normal(len(I))
    return I, y, It, _f(NODES[It])


def _fits(I, y, It):
    Y = teneva.als(I, y, teneva.rand([N] * D, R, seed=0), nswp=20, lamb=1e-10)
    model = FunctionalTT("legendre", degree=N - 1, ranks=R, domain=[[-1, 1]] * D, rng=0, sweeps=20,
                         regularization=1e-12, rank_tol=1e-10, max_rank=R)
    model.fit(NODES[I], y)
    return teneva.get_many(Y, It), model.predict(NODES[It]), model


def test_exact_low_rank_grid_tensor_agrees_with_teneva():
    I, y, It, yt = _problem(0.0, 0)
    p_teneva, p_numtk, model = _fits(I, y, It)
    norm = np.linalg.norm(yt)
    assert np.linalg.norm(p_teneva - yt) / norm < 1e-7
    assert np.linalg.norm(p_numtk - yt) / norm < 1e-7
    assert np.linalg.norm(p_numtk - p_teneva) / norm < 1e-7
    assert max(model.ranks_) <= R


def test_noisy_grid_fit_is_as_accurate_as_teneva():
    I, y, It, yt = _problem(0.02, 1)
    p_teneva, p_numtk, _ = _fits(I, y, It)
    err_teneva = np.sqrt(np.mean((p_teneva - yt) ** 2))
    err_numtk = np.sqrt(np.mean((p_numtk - yt) ** 2))
    assert err_teneva < 0.02  # below the noise: both denoise
    assert err_numtk < 1.15 * err_teneva


def test_cross_agrees_with_teneva_cross_on_the_node_grid():
    # numtk's tt_cross samples Legendre bases at Chebyshev-Lobatto points; teneva's cross gets the same grid
    from numtk.ftt import interpolation_nodes, tt_cross

    n = 12
    nodes = interpolation_nodes("legendre", n - 1, (-1.0, 1.0))
    res = tt_cross(_f, D, degree=n - 1, domain=[[-1.0, 1.0]] * D, rng=0, tol=1e-12)
    ours = res.tt
    Y = teneva.cross(lambda I: _f(nodes[I]), teneva.rand([n] * D, 1, seed=0), m=50_000, e=1e-12, nswp=10,
                     dr_max=2)
    It = np.random.default_rng(7).integers(0, n, (500, D))
    exact = _f(nodes[It])
    norm = np.linalg.norm(exact)
    assert np.linalg.norm(ours.predict(nodes[It]) - exact) / norm < 1e-10
    assert np.linalg.norm(teneva.get_many(Y, It) - exact) / norm < 1e-8
    assert max(ours.ranks_) <= R  # the function has rank <= 3 at every bond
    assert res.n_evals < 20_000
