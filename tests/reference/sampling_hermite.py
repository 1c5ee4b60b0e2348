"""Independent references for the Hermite/OU path of numtk.sampling (spec §2.6): Hermite coefficient cores
of 1-D factors by closed form (Gaussian moments) or composite Gauss-Legendre quadrature, exact noised
densities by closed form (Gaussian mixtures) or quadrature (other 1-D factors). Nothing here imports numtk.

Conventions: ``h_k = He_k / sqrt(k!)``; preconditioning ``x = loc + scale * y``; coefficients
``a_k = int rho(loc + scale * y) h_k(y) dy`` (no Jacobian, ``a_0 = Z / scale``); OU noising
``rho_tau(x) = int rho(u) N(x; e^{-tau} u, 1 - e^{-2 tau}) du``.
"""

import math

import numpy as np

LOG_2PI = math.log(2.0 * math.pi)

# published 1-D masses (spec §4.1)
MANY_WELL_LOG_Z = 9.374541173869195          # int exp(-x^4 + 6 x^2 + 0.5 x) dx
DOUBLE_WELL4_Z = 0.8974381249323021          # int exp(-(x^2 - 4)^2) dx


def many_well_logrho(x):
    x = np.asarray(x, dtype=float)
    return -x ** 4 + 6.0 * x ** 2 + 0.5 * x


def double_well_logrho(x, delta=4.0):
    x = np.asarray(x, dtype=float)
    return -(x * x - delta) ** 2


def hermite_values(y, n):
    """``(len(y), n + 1)`` matrix of orthonormal probabilists' Hermite values (three-term recurrence)."""
    y = np.asarray(y, dtype=float)
    H = np.zeros((y.size, n + 1))
    H[:, 0] = 1.0
    if n >= 1:
        H[:, 1] = y
    for k in range(1, n):
        H[:, k + 1] = (y * H[:, k] - math.sqrt(k) * H[:, k - 1]) / math.sqrt(k + 1)
    return H


def gaussian_hermite_moments(n, mean, var):
    """``E[h_k(Y)]``, ``Y ~ N(mean, var)``, k = 0..n, from E[He_n] = sum_j n!/(j!(n-2j)!) m^{n-2j} ((s^2-1)/2)^j.

    Evaluated by the equivalent recurrence ``e_{k+1} = (m e_k + (s^2 - 1) sqrt(k) e_{k-1}) / sqrt(k + 1)``
    (generating function ``exp(t m + t^2 (s^2 - 1) / 2)``); :func:`gaussian_hermite_moments_sum` is the
    direct sum, for small n.
    """
    e = np.zeros(n + 1)
    e[0] = 1.0
    if n >= 1:
        e[1] = mean
    for k in range(1, n):
        e[k + 1] = (mean * e[k] + (var - 1.0) * math.sqrt(k) * e[k - 1]) / math.sqrt(k + 1)
    return e


def gaussian_hermite_moments_sum(n, mean, var):
    out = np.zeros(n + 1)
    b = (var - 1.0) / 2.0
    for k in range(n + 1):
        s = 0.0
        for j in range(k // 2 + 1):
            s += math.factorial(k) / (math.factorial(j) * math.factorial(k - 2 * j)) * mean ** (k - 2 * j) * b ** j
        out[k] = s / math.sqrt(math.factorial(k))
    return out


def gmm_coefficients(n, weights, means, variances, loc=0.0, scale=1.0):
    """Coefficients of ``rho(x) = sum_c w_c N(x; m_c, v_c)`` (normalised components) in y-coordinates."""
    a = np.zeros(n + 1)
    for w, m, v in zip(weights, means, variances):
        a += w / scale * gaussian_hermite_moments(n, (m - loc) / scale, v / scale ** 2)
    return a


def gmm_noised_density(x, tau, weights, means, variances):
    """Exact ``rho_tau(x)`` of a 1-D mixture ``sum w_c N(m_c, v_c)``."""
    x = np.asarray(x, dtype=float)
    a = math.exp(-tau)
    out = np.zeros_like(x)
    for w, m, v in zip(weights, means, variances):
        vt = a * a * v + 1.0 - a * a
        out += w * np.exp(-(x - a * m) ** 2 / (2 * vt)) / math.sqrt(2 * math.pi * vt)
    return out


def gauss_legendre_panels(lo, hi, panels=200, nodes=32):
    t, wq = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(lo, hi, panels + 1)
    a, b = edges[:-1, None], edges[1:, None]
    x = ((a + b) / 2 + (b - a) / 2 * t).ravel()
    w = np.broadcast_to((b - a) / 2 * wq, (panels, nodes)).ravel()
    return x, w


def quadrature_coefficients(logrho, n, loc=0.0, scale=1.0, lo=-8.0, hi=8.0, panels=400, nodes=32):
    """``a_k = int rho(x) h_k((x - loc)/scale) dx / scale`` by composite Gauss-Legendre in x on [lo, hi]."""
    x, w = gauss_legendre_panels(lo, hi, panels, nodes)
    rho = np.exp(logrho(x))
    H = hermite_values((x - loc) / scale, n)
    return H.T @ (w * rho) / scale


def log_mass(logrho, lo=-8.0, hi=8.0, panels=400, nodes=32):
    x, w = gauss_legendre_panels(lo, hi, panels, nodes)
    lr = logrho(x)
    top = lr.max()
    return top + math.log(np.sum(w * np.exp(lr - top)))


def noised_density_quadrature(logrho, x, tau, lo=-8.0, hi=8.0, panels=800, nodes=32):
    """``rho_tau(x)`` by composite Gauss-Legendre over u (kernel std ``sqrt(1 - e^{-2 tau})``, tau >= 0.05)."""
    x = np.asarray(x, dtype=float)
    u, w = gauss_legendre_panels(lo, hi, panels, nodes)
    rho = np.exp(logrho(u))
    a = math.exp(-tau)
    v = 1.0 - a * a
    out = np.empty_like(x)
    for i in range(0, x.size, 256):
        xs = x[i:i + 256, None]
        K = np.exp(-(xs - a * u[None, :]) ** 2 / (2 * v)) / math.sqrt(2 * math.pi * v)
        out[i:i + 256] = K @ (w * rho)
    return out


def log_gamma(y):
    y = np.asarray(y, dtype=float)
    return -0.5 * np.sum(y * y, axis=-1) - 0.5 * y.shape[-1] * LOG_2PI


def gaussian_W(y, tau, mean, var, log_Z):
    """Closed form W = log(rho_tau / gamma)(y) and grad W for a diagonal Gaussian with mass exp(log_Z)."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    mean, var = np.asarray(mean, float), np.asarray(var, float)
    a = math.exp(-tau)
    vt = a * a * var + 1.0 - a * a
    logp = -0.5 * np.sum((y - a * mean) ** 2 / vt + np.log(2 * math.pi * vt), axis=1)
    W = log_Z + logp - log_gamma(y)
    grad = -(y - a * mean) / vt + y
    return W, grad


def as_core(a):
    return np.asarray(a, dtype=float).reshape(1, -1, 1)
