"""One ALS sweep of FunctionalTT.fit against a pure-NumPy reference sweep, and the pieces of the fast assembly.

The reference keeps the cores in no particular gauge and solves each core's least-squares problem from the
explicit design matrix ``L (x) phi (x) R`` (``numpy.linalg.lstsq``). Without regularization every core update
is the orthogonal projection of y onto a space that does not depend on the gauge, so after the same sequence
of core updates (left to right over cores 0..d-2, right to left over d-1..1, then core 0) both give the same
function.
"""

import math

import numpy as np
import pytest

from numtk.ftt import FunctionalTT
from numtk.ftt import _als, _basis


def _legendre(x, n):
    # orthonormal under the uniform probability on [-1, 1]
    return np.polynomial.legendre.legvander(x, n - 1) * np.sqrt(2 * np.arange(n) + 1.0)


def _hermite(x, n):
    # probabilists' Hermite, orthonormal under N(0, 1)
    return np.polynomial.hermite_e.hermevander(x, n - 1) / np.sqrt([math.factorial(k) for k in range(n)])


def _reference_sweep(phis, y, cores):
    """One sweep of plain ALS from ``cores`` (list of (ra, n, rb)), rows = training rows."""
    d, M = len(cores), len(y)
    cores = [c.copy() for c in cores]

    def site(k, x):  # (M, ra, rb): core k at the rows
        return np.einsum("mi,aib->mab", phis[k], x)

    def left(k):
        out = np.ones((M, 1))
        for j in range(k):
            out = np.einsum("ma,mab->mb", out, site(j, cores[j]))
        return out

    def right(k):
        out = np.ones((M, 1))
        for j in range(d - 1, k, -1):
            out = np.einsum("mab,mb->ma", site(j, cores[j]), out)
        return out

    def solve(k):
        ra, n, rb = cores[k].shape
        A = (left(k)[:, :, None, None] * phis[k][:, None, :, None] * right(k)[:, None, None, :]).reshape(M, -1)
        cores[k] = np.linalg.lstsq(A, y, rcond=None)[0].reshape(ra, n, rb)

    for k in range(d - 1):
        solve(k)
    for k in range(d - 1, 0, -1):
        solve(k)
    solve(0)
    return cores


def _reference_predict(phis, cores):
    out = np.ones((len(phis[0]), 1))
    for p, c in zip(phis, cores):
        out = np.einsum("ma,mi,aib->mb", out, p, c)
    return out[:, 0]


@pytest.mark.parametrize("basis, n", [("legendre", 6), ("legendre", 12), ("hermite", 7)])
def test_one_sweep_equals_numpy_reference(basis, n):
    d, r, M = 4, 3, 900
    rng = np.random.default_rng(3)
    if basis == "legendre":
        X = rng.uniform(-1, 1, (M, d))
        vander, kw = _legendre, dict(domain=[[-1.0, 1.0]] * d)
    else:
        X = rng.standard_normal((M, d))
        vander, kw = _hermite, {}

    def f(X):
        return np.sin(X[:, 0] + X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] * X[:, 0] ** 2

    y = f(X)
    ranks = [1, r, r, r, 1]
    cores0 = [rng.standard_normal((ranks[k], n, ranks[k + 1])) / np.sqrt(n * ranks[k]) for k in range(d)]
    cores0[0][0, 0, 0] += 1.0
    start = FunctionalTT.from_cores(cores0, basis, n - 1, **kw)
    # the held-out rows are the first M // 10 of the generator's permutation (fit draws nothing before it
    # when the start is given)
    split = np.random.default_rng(11).permutation(M)[M // 10:]
    # the cores after the sweep, from the callback (fit returns the best-validating model, maybe the start)
    seen = []
    FunctionalTT(basis, degree=n - 1, ranks=r, sweeps=1, tol=0.0, rank_adaptive=False, regularization=0.0,
                 init=start, rng=np.random.default_rng(11), callback=lambda res: seen.append(res.cores), **kw).fit(X, y)
    model = FunctionalTT.from_cores(seen[0], basis, n - 1, **kw)
    phis = [vander(X[split, k], n) for k in range(d)]
    ref = _reference_sweep(phis, y[split], cores0)
    # compared at the training rows, where the least-squares fit is unique (between the rows, a basis this
    # rich for this few rows leaves directions that the data do not fix)
    pred_ref = _reference_predict(phis, ref)
    pred = model.predict(X[split])
    # numtk solves normal equations, the reference the least-squares problem itself: the difference grows
    # with the square of the design's condition, larger for Hermite functions on Gaussian rows (measured
    # 1.3e-10 for n = 7 here, 2e-14 for Legendre)
    tol = 1e-10 if basis == "legendre" else 1e-9
    assert np.max(np.abs(pred - pred_ref)) <= tol * np.max(np.abs(pred_ref))
    # and the sweep did something: the start is far from the reference result
    assert np.max(np.abs(start.predict(X[split]) - pred_ref)) > 1e-2


@pytest.mark.parametrize("basis, n, ra, rb", [("legendre", 12, 4, 4), ("legendre", 5, 1, 3), ("legendre", 9, 3, 1),
                                              ("hermite", 8, 2, 5), ("legendre", 20, 5, 2)])
def test_product_assembly_equals_explicit_design(basis, n, ra, rb):
    rng = np.random.default_rng(n + ra)
    M = 1500
    b = _basis.Basis1D(basis, n, -1.0 if basis == "legendre" else 0.3, 1.0 if basis == "legendre" else 1.7)
    x = rng.uniform(-1, 1, M) if basis == "legendre" else 0.3 + 1.7 * rng.standard_normal(M)
    Phi = _basis.evaluate(b, x)[0]
    L, R = rng.standard_normal((M, ra)), rng.standard_normal((M, rb))
    w, y = rng.uniform(0.2, 1.0, M), rng.standard_normal(M)
    n_train = 1300
    P = ra * n * rb
    pen = 1e-3 * np.eye(P)
    products = _als.product_basis(b)
    assert products is not None
    G, rhs = _als.normal_equations(L, Phi, R, w, y, n_train, pen, products=products)
    A = (L[:n_train, :, None, None] * Phi[:n_train, None, :, None] * R[:n_train, None, None, :]).reshape(n_train, P)
    ws = w[:n_train]
    G_ref = A.T @ (ws[:, None] * A) / ws.sum() + pen
    b_ref = A.T @ (ws * y[:n_train]) / ws.sum()
    assert np.max(np.abs(G - G_ref)) <= 1e-12 * np.max(np.abs(G_ref))
    assert np.max(np.abs(rhs - b_ref)) <= 1e-12 * np.max(np.abs(b_ref))


def test_product_basis_only_where_the_identity_holds():
    assert _als.product_basis(_basis.Basis1D("bspline", 12, -1.0, 1.0)) is None
    assert _als.product_basis(_basis.Basis1D("legendre", 2, -1.0, 1.0)) is None
    assert _als.product_basis(_basis.Basis1D("hermite", 12, 0.0, 1.0)) is not None
    assert _als.product_basis(_basis.Basis1D("hermite", 20, 0.0, 1.0)) is None  # ill-conditioned products
    bases = [_basis.Basis1D("legendre", 6, -1.0, 1.0)] * 2
    X = np.array([[0.5, 0.2], [-0.9, 1.3]])  # the second coordinate leaves the box
    inside, outside = _als.product_bases(bases, X, "linear")
    assert inside is not None and outside is None
    assert all(p is not None for p in _als.product_bases(bases, X, "clip"))


@pytest.mark.parametrize("threads", [1, 2])
def test_dense_interfaces_equal_einsum(threads):
    rng = np.random.default_rng(0)
    M, ra, n, rb = 9000, 3, 7, 4
    L, R, Phi = rng.standard_normal((M, ra)), rng.standard_normal((M, rb)), rng.standard_normal((M, n))
    C = rng.standard_normal((ra, n, rb))
    left = _als.interface_left(L, Phi, C, threads)
    right = _als.interface_right(R, Phi, C, threads)
    np.testing.assert_allclose(left, np.einsum("ma,mi,aic->mc", L, Phi, C), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(right, np.einsum("aic,mi,mc->ma", C, Phi, R), rtol=1e-12, atol=1e-12)
