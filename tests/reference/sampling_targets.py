"""Independent oracles for numtk.sampling targets: dense quadrature and closed forms (NumPy/SciPy only)."""

import math

import numpy as np
from scipy import integrate, special


def log_Z_1d(logf, lo=-10.0, hi=10.0):
    """log of int exp(logf) by adaptive quadrature (logf vectorised or scalar)."""
    grid = np.linspace(lo, hi, 20001)
    m = float(np.max(logf(grid)))
    v, _ = integrate.quad(lambda y: math.exp(logf(y) - m), lo, hi, limit=500, epsabs=0, epsrel=1e-13)
    return m + math.log(v)


def log_noised_1d(logf, x, tau, lo=-8.0, hi=8.0, n=800001):
    """log rho_tau(x) = log int f(y) N(x; e^-tau y, 1 - e^-2tau) dy by a dense Riemann sum (spectral for
    smooth, decayed integrands); the grid is extended to cover the kernel."""
    a = math.exp(-tau)
    s2 = -math.expm1(-2 * tau)
    c, w = x / a, math.sqrt(s2) / a
    ys = np.linspace(min(lo, c - 20 * w), max(hi, c + 20 * w), n)
    h = ys[1] - ys[0]
    lt = logf(ys) - (x - a * ys) ** 2 / (2 * s2)
    m = lt.max()
    return m + math.log(np.sum(np.exp(lt - m)) * h) - 0.5 * math.log(2 * math.pi * s2)


def log_noised_funnel(x, tau, sigma=3.0):
    """Funnel log rho_tau(x) by a dense Riemann sum over u in [-40, 40]."""
    a = math.exp(-tau)
    s2 = -math.expm1(-2 * tau)
    d1 = len(x) - 1
    R = float(np.sum(np.asarray(x[1:]) ** 2))
    us = np.linspace(-40, 40, 2000001)
    h = us[1] - us[0]
    v = a * a * np.exp(us) + s2
    L = -us * us / (2 * sigma**2) - (x[0] - a * us) ** 2 / (2 * s2) - 0.5 * d1 * np.log(v) - R / (2 * v)
    m = L.max()
    return (m + math.log(np.sum(np.exp(L - m)) * h) - math.log(sigma) - math.log(2 * math.pi)
            - 0.5 * math.log(s2) - 0.5 * d1 * math.log(2 * math.pi))


def gmm_log_density(x, means, variances, weights):
    """Diagonal GMM sum_k w_k N(x; m_k, diag v_k), brute force."""
    x = np.atleast_2d(x)
    terms = []
    for m, v, w in zip(means, variances, weights):
        terms.append(math.log(w) - 0.5 * np.sum(np.log(2 * np.pi * v)) - 0.5 * np.sum((x - m) ** 2 / v, axis=1))
    return special.logsumexp(np.array(terms), axis=0)


def hermite_moment_gh(mu, var, k, n_nodes=200):
    """E_{N(mu, var)}[He_k / sqrt(k!)] by Gauss-Hermite (probabilists') quadrature."""
    z, w = np.polynomial.hermite_e.hermegauss(n_nodes)
    c = np.zeros(k + 1)
    c[k] = 1.0 / math.sqrt(math.factorial(k))
    return float(np.sum(w * np.polynomial.hermite_e.hermeval(mu + math.sqrt(var) * z, c)) / math.sqrt(2 * math.pi))


def cdf_1d(logf, lo=-10.0, hi=10.0, n=200001):
    """Tabulated normalised CDF of exp(logf) on a grid (trapezoid)."""
    ys = np.linspace(lo, hi, n)
    lf = logf(ys)
    p = np.exp(lf - lf.max())
    c = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]))])
    c /= c[-1]
    return lambda y: np.interp(y, ys, c)
