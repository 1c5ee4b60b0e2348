"""Numerical helpers shared by the target families (numtk.sampling's targets).

The OU kernel's coefficients, Gauss-Legendre rules, normalised Hermite moments and values, chunking of
``(n_points x n_nodes)`` temporaries and the per-coordinate Gaussian quantile of the targets' boxes.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

_LOG_2PI = math.log(2.0 * math.pi)
_BOX_MASS_TAIL = 1e-6        # bounds hold mass >= 1 - 1e-6 (union bound over the coordinates)
_KERNEL_HALF_WIDTH = 12.0    # OU kernel truncated at +-12 of its standard deviations (mass e^-72)
_CHUNK = 1 << 21             # elements per temporary (n_points x n_nodes) array


@functools.lru_cache(maxsize=16)
def _gauss_legendre(q: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = special.roots_legendre(q)
    nodes.setflags(write=False)
    logw = np.log(weights)
    logw.setflags(write=False)
    return nodes, logw


def _hermite_gaussian_moments(mu: ArrayLike, var: ArrayLike, degree: int) -> np.ndarray:
    r"""``E_{N(mu, var)}[h_k]`` for k = 0..degree, with ``h_k = He_k / sqrt(k!)`` (broadcast over mu, var).

    The generating function ``E[exp(Yt - t^2/2)] = exp(mu t + (var - 1) t^2 / 2)`` gives
    ``M_{k+1} = mu M_k + k (var - 1) M_{k-1}`` for ``M_k = E[He_k]``; in normalised form
    ``m_{k+1} = (mu m_k + (var - 1) sqrt(k) m_{k-1}) / sqrt(k + 1)`` (no factorials).
    """
    mu, var = np.broadcast_arrays(np.asarray(mu, dtype=np.float64), np.asarray(var, dtype=np.float64))
    c = var - 1.0
    out = np.empty(mu.shape + (degree + 1,))
    out[..., 0] = 1.0
    if degree >= 1:
        out[..., 1] = mu
    for k in range(1, degree):
        out[..., k + 1] = (mu * out[..., k] + c * math.sqrt(k) * out[..., k - 1]) / math.sqrt(k + 1)
    return out


def _hermite_values(y: np.ndarray, degree: int) -> np.ndarray:
    """``h_k(y)`` for k = 0..degree, shape ``y.shape + (degree + 1,)`` (normalised recurrence)."""
    out = np.empty(y.shape + (degree + 1,))
    out[..., 0] = 1.0
    if degree >= 1:
        out[..., 1] = y
    for k in range(1, degree):
        out[..., k + 1] = (y * out[..., k] - math.sqrt(k) * out[..., k - 1]) / math.sqrt(k + 1)
    return out


def _ou_coefficients(tau: float) -> tuple[float, float, float]:
    """``a = e^{-tau}``, ``s = sqrt(1 - e^{-2 tau})`` and the kernel width in source units ``w = s / a``."""
    a = math.exp(-tau)
    s = math.sqrt(-math.expm1(-2.0 * tau))
    return a, s, math.sqrt(math.expm1(2.0 * tau))


def _chunks(n: int, per_row: int):
    step = max(1, _CHUNK // max(1, per_row))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


def _box_z(d: int) -> float:
    """Per-coordinate two-sided standard-normal quantile that leaves ``1e-6 / d`` mass outside."""
    return float(stats.norm.isf(_BOX_MASS_TAIL / (2.0 * d)))
