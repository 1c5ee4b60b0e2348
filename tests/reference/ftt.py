"""Independent references for numtk.ftt: the univariate bases written from NumPy's polynomial modules and
SciPy's BSpline, and a dense einsum contraction of a functional tensor train. Nothing here imports numtk."""

import math

import numpy as np


def legendre(x, n, lo, hi, extrapolate="linear"):
    """Orthonormal Legendre (uniform probability on [lo, hi]): values, first and second derivatives."""
    x = np.asarray(x, dtype=float)
    xc = np.clip(x, lo, hi)
    z = 2.0 * (xc - lo) / (hi - lo) - 1.0
    s = 2.0 / (hi - lo)
    out = np.zeros((3, len(x), n))
    for k in range(n):
        c = np.zeros(k + 1)
        c[k] = math.sqrt(2 * k + 1)
        out[0, :, k] = np.polynomial.legendre.legval(z, c)
        out[1, :, k] = np.polynomial.legendre.legval(z, np.polynomial.legendre.legder(c, 1)) * s
        out[2, :, k] = np.polynomial.legendre.legval(z, np.polynomial.legendre.legder(c, 2)) * s * s
    return _extend(out, x, xc, extrapolate)


def hermite(x, n, loc, scale):
    """Orthonormal probabilists' Hermite He_k / sqrt(k!) of (x - loc) / scale and its derivatives."""
    u = (np.asarray(x, dtype=float) - loc) / scale
    out = np.zeros((3, len(u), n))
    for k in range(n):
        c = np.zeros(k + 1)
        c[k] = 1.0 / math.sqrt(math.factorial(k))
        out[0, :, k] = np.polynomial.hermite_e.hermeval(u, c)
        out[1, :, k] = np.polynomial.hermite_e.hermeval(u, np.polynomial.hermite_e.hermeder(c, 1)) / scale
        out[2, :, k] = np.polynomial.hermite_e.hermeval(u, np.polynomial.hermite_e.hermeder(c, 2)) / scale**2
    return out


def bspline_knots(n, lo, hi):
    return np.concatenate([[lo] * 3, np.linspace(lo, hi, n - 2), [hi] * 3])


def bspline(x, n, lo, hi, extrapolate="linear"):
    """Cubic B-splines on the uniform open knot vector (scipy.interpolate.BSpline) and derivatives."""
    from scipy.interpolate import BSpline

    x = np.asarray(x, dtype=float)
    xc = np.clip(x, lo, hi)
    t = bspline_knots(n, lo, hi)
    out = np.zeros((3, len(x), n))
    for i in range(n):
        c = np.zeros(n)
        c[i] = 1.0
        spl = BSpline(t, c, 3, extrapolate=True)
        for order in range(3):
            out[order, :, i] = spl(xc, nu=order)
    return _extend(out, x, xc, extrapolate)


def _extend(out, x, xc, extrapolate):
    outside = x != xc
    if not outside.any():
        return out
    if extrapolate == "linear":
        out[0, outside] += out[1, outside] * (x - xc)[outside, None]
    else:
        out[1, outside] = 0.0
    out[2, outside] = 0.0
    return out


def basis(kind, x, n, p0, p1, extrapolate="linear"):
    if kind == "legendre":
        return legendre(x, n, p0, p1, extrapolate)
    if kind == "hermite":
        return hermite(x, n, p0, p1)
    return bspline(x, n, p0, p1, extrapolate)


def evaluate(X, cores, bases, extrapolate="linear"):
    """Dense reference: f, gradient and Laplacian by prefix/suffix einsums. ``bases``: (kind, p0, p1)."""
    X = np.asarray(X, dtype=float)
    M, d = X.shape
    phis = [basis(kind, X[:, k], cores[k].shape[1], p0, p1, extrapolate) for k, (kind, p0, p1) in enumerate(bases)]
    G = [[np.einsum("mi,aic->mac", phis[k][o], cores[k]) for o in range(3)] for k in range(d)]
    left = [np.ones((M, 1))]
    for k in range(d):
        left.append(np.einsum("ma,mac->mc", left[-1], G[k][0]))
    right = [np.ones((M, 1))]
    for k in range(d - 1, -1, -1):
        right.insert(0, np.einsum("mac,mc->ma", G[k][0], right[0]))
    f = left[d][:, 0]
    grad = np.stack([np.einsum("ma,mac,mc->m", left[k], G[k][1], right[k + 1]) for k in range(d)], axis=1) \
        if d else np.zeros((M, 0))
    lap = sum(np.einsum("ma,mac,mc->m", left[k], G[k][2], right[k + 1]) for k in range(d))
    return f, grad, lap


def full_tensor_integral(cores, moments):
    """sum over all index tuples of prod_k C_k[., i_k, .] m_k[i_k], by brute force for tiny trains."""
    import itertools

    ns = [c.shape[1] for c in cores]
    total = 0.0
    for idx in itertools.product(*[range(n) for n in ns]):
        v = np.ones((1, 1))
        w = 1.0
        for k, i in enumerate(idx):
            v = v @ cores[k][:, i, :]
            w *= moments[k][i]
        total += v[0, 0] * w
    return total
