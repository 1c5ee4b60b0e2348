"""Univariate bases of :class:`numtk.ftt.FunctionalTT`: descriptions, evaluation, Gram factors, moments.

Each coordinate k has a :class:`Basis1D` (kind, number of functions ``n``, and either the box
``(lo, hi)`` for ``'legendre'``/``'bspline'`` or ``(loc, scale)`` for ``'hermite'``). The values and
derivatives come from the compiled kernel ``numtk/ftt/_ftt_ext`` (``native/include/numtk/ftt/basis.hpp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = {"legendre": 0, "hermite": 1, "bspline": 2}
EXTRAPOLATE = {"linear": 0, "clip": 1, "raise": 0}


@dataclass(frozen=True)
class Basis1D:
    """One coordinate's basis: ``kind``, ``n`` functions and its two parameters.

    For bounded bases ``p0, p1`` are the box ``lo, hi``; for Hermite they are ``loc, scale``.
    """

    kind: str
    n: int
    p0: float
    p1: float

    @property
    def bounded(self) -> bool:
        return self.kind != "hermite"

    def same_as(self, other: "Basis1D") -> bool:
        return (self.kind == other.kind and self.n == other.n and np.isclose(self.p0, other.p0, rtol=1e-14, atol=0)
                and np.isclose(self.p1, other.p1, rtol=1e-14, atol=0))

    def knots(self) -> np.ndarray:
        """The uniform open cubic knot vector (``n + 4`` knots) of a B-spline basis."""
        inner = np.linspace(self.p0, self.p1, self.n - 2)
        return np.concatenate([[self.p0] * 3, inner, [self.p1] * 3])


def evaluate(basis: Basis1D, x: np.ndarray, order: int = 0, extrapolate: str = "linear") -> np.ndarray:
    """Basis values and derivatives up to ``order`` at ``x``: array ``(order + 1, len(x), n)``."""
    from numtk.ftt import _ftt_ext

    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    return _ftt_ext.basis(x, KINDS[basis.kind], basis.n, float(basis.p0), float(basis.p1),
                          EXTRAPOLATE[extrapolate], order)


def constant_coefficients(basis: Basis1D) -> np.ndarray:
    """Coefficients of the constant function 1 (e_0 for the polynomial bases; all ones for B-splines)."""
    if basis.kind == "bspline":
        return np.ones(basis.n)
    c = np.zeros(basis.n)
    c[0] = 1.0
    return c


def natural_quadrature(basis: Basis1D, extra: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights exact for products of two basis functions under the basis' natural measure.

    Legendre: uniform probability on the box; Hermite: N(loc, scale^2); B-splines: Lebesgue on the box
    (Gauss-Legendre on every knot interval).
    """
    if basis.kind == "legendre":
        t, wq = np.polynomial.legendre.leggauss(basis.n + extra)
        lo, hi = basis.p0, basis.p1
        return lo + (t + 1.0) * (hi - lo) / 2.0, wq / 2.0
    if basis.kind == "hermite":
        t, wq = np.polynomial.hermite_e.hermegauss(basis.n + extra)
        return basis.p0 + basis.p1 * t, wq / np.sqrt(2.0 * np.pi)
    t, wq = np.polynomial.legendre.leggauss(4)
    edges = np.linspace(basis.p0, basis.p1, basis.n - 2)
    a, b = edges[:-1, None], edges[1:, None]
    nodes = (a + b) / 2.0 + (b - a) / 2.0 * t
    weights = (b - a) / 2.0 * wq
    return nodes.ravel(), np.broadcast_to(weights, nodes.shape).ravel()


def gram_factor(basis: Basis1D) -> np.ndarray | None:
    """Upper Cholesky factor U of the Gram matrix (``Gram = U^T U``) under the natural measure.

    ``None`` for the orthonormal bases (Legendre, Hermite): their Gram matrix is the identity.
    Coefficients ``c`` become orthonormal coordinates ``U c``. For B-splines the measure is the uniform
    *probability* on the box (as for Legendre), not Lebesgue: a train orthonormal under Lebesgue measure on
    boxes of width L has interface values of order ``L**(-(d - 1) / 2)`` (1e-17 for d = 32, L = 12), and
    the ridge and curvature penalties, which are absolute, then swamp the normal equations and ALS returns
    the zero function.
    """
    if basis.kind != "bspline":
        return None
    x, wq = natural_quadrature(basis)
    wq = wq / (basis.p1 - basis.p0)
    phi = evaluate(basis, x)[0]
    gram = phi.T @ (wq[:, None] * phi)
    return np.linalg.cholesky(gram).T


def h2_penalty(basis: Basis1D) -> np.ndarray:
    """``P[i, j] = integral of phi_i'' phi_j''`` under the natural measure (the ``'h2'`` regulariser)."""
    x, wq = natural_quadrature(basis)
    d2 = evaluate(basis, x, order=2)[2]
    return d2.T @ (wq[:, None] * d2)


def _gaussian_tail_moments(edge: float, upper: bool) -> tuple[float, float]:
    """(int w, int (x - edge) w) over the tail beyond ``edge`` of the standard normal density w."""
    from scipy.special import ndtr

    pdf = np.exp(-0.5 * edge * edge) / np.sqrt(2.0 * np.pi)
    if upper:
        mass = float(ndtr(-edge))
        return mass, float(pdf - edge * mass)
    mass = float(ndtr(edge))
    return mass, float(-pdf - edge * mass)


def moments(basis: Basis1D, weight, extrapolate: str = "linear") -> np.ndarray:
    """``m[i] = integral of phi_i(x) w(x) dx`` for one coordinate.

    ``weight`` is ``None`` (the natural measure: Lebesgue on the box, N(loc, scale^2) for Hermite),
    ``'uniform'`` (probability on the box), ``'gaussian'`` (standard normal, over the real line, with
    the bounded bases extended as they extrapolate) or a callable density.
    """
    n = basis.n
    if weight is None or (isinstance(weight, str) and weight == "uniform"):
        if basis.kind == "hermite":
            if weight is not None:
                raise ValueError("`weight='uniform'` needs a bounded basis; a 'hermite' coordinate has no box")
            m = np.zeros(n)
            m[0] = 1.0
            return m
        width = basis.p1 - basis.p0
        if basis.kind == "legendre":
            m = np.zeros(n)
            m[0] = width
        else:
            t = basis.knots()
            m = (t[4:n + 4] - t[:n]) / 4.0
        return m if weight is None else m / width
    if isinstance(weight, str) and weight == "gaussian":
        if basis.kind == "hermite":
            t, wq = np.polynomial.hermite_e.hermegauss(n + 2)
            return evaluate(basis, t)[0].T @ wq / np.sqrt(2.0 * np.pi)
        # inside the box: composite Gauss-Legendre (panels of the knot grid for B-splines)
        panels = max(basis.n - 3, 1) if basis.kind == "bspline" else 16
        edges = np.linspace(basis.p0, basis.p1, panels + 1)
        t, wq = np.polynomial.legendre.leggauss(24)
        a, b = edges[:-1, None], edges[1:, None]
        x = ((a + b) / 2.0 + (b - a) / 2.0 * t).ravel()
        wx = np.broadcast_to((b - a) / 2.0 * wq, (panels, 24)).ravel() * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
        m = evaluate(basis, x)[0].T @ wx
        if extrapolate != "raise":
            vals = evaluate(basis, np.array([basis.p0, basis.p1]), order=1)
            for j, (edge, upper) in enumerate(((basis.p0, False), (basis.p1, True))):
                mass, first = _gaussian_tail_moments(edge, upper)
                m = m + vals[0, j] * mass
                if extrapolate == "linear":
                    m = m + vals[1, j] * first
        return m
    if callable(weight):
        q = 2 * n + 2
        if basis.kind == "hermite":
            t, wq = np.polynomial.hermite_e.hermegauss(q)
            x = basis.p0 + basis.p1 * t
            wx = wq * np.exp(0.5 * t * t) * basis.p1
        elif basis.kind == "legendre":
            t, wq = np.polynomial.legendre.leggauss(q)
            lo, hi = basis.p0, basis.p1
            x = lo + (t + 1.0) * (hi - lo) / 2.0
            wx = wq * (hi - lo) / 2.0
        else:  # piecewise cubics: Gauss-Legendre on every knot interval
            t, wq = np.polynomial.legendre.leggauss(max(8, q // 2))
            edges = np.linspace(basis.p0, basis.p1, basis.n - 2)
            a, b = edges[:-1, None], edges[1:, None]
            x = ((a + b) / 2.0 + (b - a) / 2.0 * t).ravel()
            wx = np.broadcast_to((b - a) / 2.0 * wq, (len(edges) - 1, len(t))).ravel()
        vals = np.asarray(weight(x), dtype=float)
        if vals.shape != x.shape:
            raise ValueError(f"a callable `weight` must map an array of shape {x.shape} to the same shape; "
                             f"got {vals.shape}")
        return evaluate(basis, x)[0].T @ (wx * vals)
    raise ValueError("`weight` must be None, 'uniform', 'gaussian' or a length-d sequence of callables")
