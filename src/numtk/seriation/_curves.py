"""Synthetic curves for seriation: points along a known 1-D curve, embedded in any dimension."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import (as_array, available_memory, check_bool, check_finite, check_int, check_option,
                                   check_real, check_same_length)

__all__ = ["make_curve", "noise_floor"]

_KINDS = ("line", "arc", "helix", "spiral", "nested_arcs", "random_fourier")
_DEFAULTS = {
    "line": {"length": 1.0},
    "arc": {"radius": 1.0, "angle": math.pi},
    "helix": {"radius": 1.5, "turns": 2.0, "height": 16.4},
    "spiral": {"turns": 4.0, "gap": 0.6},
    "nested_arcs": {"arms": 4, "gap": 0.6, "radius": 1.0, "angle": math.pi},
    "random_fourier": {"modes": 5},
}


# Shape parameters: name -> (lower bound, open) of the finite real value ('modes' and 'arms' are ints >= 1).
_PARAM_BOUNDS = {"length": (0.0, True), "radius": (0.0, True), "angle": (0.0, True), "turns": (0.0, True),
                 "height": (None, False), "gap": (0.0, False)}
_INT_PARAMS = ("modes", "arms")
_MAX_MODES = 10_000


def _check_size(n: int, d: int, modes: int = 0) -> None:
    """Refuse sizes whose arrays (about 3 (n, d) float64 arrays, the curve and its velocity) exceed memory."""
    need = 8 * (n * (3 * d + 8) + 2 * modes * d)
    have = available_memory()
    if need > have:
        raise ValueError(f"`n_samples` = {n} and `n_features` = {d} need about {need / 2**30:.3g} GiB, more than "
                         f"the {have / 2**30:.3g} GiB of memory available; reduce `n_samples` or `n_features`")


def _check_params(params, kind: str) -> dict:
    p = dict(_DEFAULTS[kind])
    if params is None:
        return p
    if not isinstance(params, Mapping):
        raise TypeError(f"`params` must be a dict of shape parameters or None; got {type(params).__name__}")
    unknown = set(params) - set(p)
    if unknown:
        raise ValueError(f"`params` has unknown keys {sorted(unknown, key=str)} for kind={kind!r}; "
                         f"accepted: {sorted(p)}")
    for key, value in params.items():
        if key in _INT_PARAMS:
            p[key] = check_int(value, f"params['{key}']", minimum=1, maximum=_MAX_MODES)
        else:
            low, low_open = _PARAM_BOUNDS[key]
            p[key] = check_real(value, f"params['{key}']", low=low, low_open=low_open)
    return p


def _base_curve(kind: str, t: np.ndarray, p: dict, coeffs=None):
    """Curve points gamma(t) in the base dimension, and the velocity gamma'(t) (for lengths)."""
    if kind == "line":
        return (p["length"] * t)[:, None], np.full((t.size, 1), p["length"])
    if kind == "arc":
        R, T = p["radius"], p["angle"]
        if not 0 < T < 2 * math.pi:
            raise ValueError(f"`params['angle']` must lie in (0, 2 pi); got {T}")
        pts = R * np.c_[np.cos(T * t), np.sin(T * t)]
        vel = R * T * np.c_[-np.sin(T * t), np.cos(T * t)]
        return pts, vel
    if kind == "helix":
        r, M, H = p["radius"], p["turns"], p["height"]
        w = 2 * math.pi * M
        pts = np.c_[r * np.cos(w * t), r * np.sin(w * t), H * t]
        vel = np.c_[-r * w * np.sin(w * t), r * w * np.cos(w * t), np.full(t.size, H)]
        return pts, vel
    if kind == "spiral":
        M, g = p["turns"], p["gap"]
        theta = 2 * math.pi * M * t
        rad = 1 + g / (2 * math.pi) * theta
        pts = np.c_[rad * np.cos(theta), rad * np.sin(theta)]
        dth = 2 * math.pi * M
        drad = g / (2 * math.pi) * dth
        vel = np.c_[drad * np.cos(theta) - rad * dth * np.sin(theta), drad * np.sin(theta) + rad * dth * np.cos(theta)]
        return pts, vel
    if kind == "nested_arcs":
        return _nested_arcs(t, p)
    # random_fourier: half-period frequencies keep the curve open
    a, b = coeffs
    m = np.arange(1, a.shape[0] + 1)
    arg = math.pi * np.outer(t, m)
    pts = (np.cos(arg) / m) @ a + (np.sin(arg) / m) @ b
    vel = (-math.pi * np.sin(arg)) @ a + (math.pi * np.cos(arg)) @ b
    return pts, vel


def _nested_arcs(t: np.ndarray, p: dict):
    """Concentric arcs of radii R, R + g, ..., R + (A-1) g swept back and forth through the angle Theta and joined
    at alternate ends by half circles of diameter g, traversed at constant speed (t proportional to arc length)."""
    R, g, A, T = p["radius"], p["gap"], p["arms"], p["angle"]
    if g <= 0:
        raise ValueError(f"`params['gap']` must be > 0 for kind='nested_arcs' (the arcs would coincide); got {g}")
    rho = 0.5 * g  # radius of the half circles joining successive arcs
    if not 0 < T + 2 * math.asin(rho / (R + rho)) < 2 * math.pi:
        raise ValueError(f"`params['angle']` = {T} with the turns of radius gap/2 = {rho} at both ends closes the "
                         f"curve; the angle plus 2 asin(gap / (2 radius + gap)) must stay below 2 pi")
    radii = R + g * np.arange(A)
    seg = np.zeros(2 * A - 1)
    seg[0::2] = T * radii
    seg[1::2] = math.pi * rho
    start = np.r_[0.0, np.cumsum(seg)]
    length = float(start[-1])
    s = t * length
    j = np.minimum(np.searchsorted(start, s, side="right") - 1, 2 * A - 2)
    u = s - start[j]
    m = j // 2
    forward = m % 2 == 0  # even arcs run from angle 0 to Theta, odd ones back
    pts = np.empty((t.size, 2))
    tan = np.empty((t.size, 2))
    arc = j % 2 == 0
    r = radii[m[arc]]
    phi = np.where(forward[arc], u[arc] / r, T - u[arc] / r)
    sgn = np.where(forward[arc], 1.0, -1.0)
    pts[arc] = r[:, None] * np.c_[np.cos(phi), np.sin(phi)]
    tan[arc] = sgn[:, None] * np.c_[-np.sin(phi), np.cos(phi)]
    cap = ~arc
    end = np.where(forward[cap], T, 0.0)  # the turn sits at the end of arc m
    er = np.c_[np.cos(end), np.sin(end)]
    ephi = np.c_[-np.sin(end), np.cos(end)]
    delta = np.where(forward[cap], 1.0, -1.0)[:, None]
    psi = (u[cap] / rho)[:, None]
    centre = (radii[m[cap]] + rho)[:, None] * er
    pts[cap] = centre - rho * np.cos(psi) * er + delta * rho * np.sin(psi) * ephi
    tan[cap] = np.sin(psi) * er + delta * np.cos(psi) * ephi
    return pts, length * tan


@constraints(kind="option", n_samples="count", n_features="int>=1", noise="real>=0", sampling="option",
             params="option", return_info="bool", rng="rng")
def make_curve(kind: str = "helix", n_samples: int = 1000, n_features: int = 3, noise: float = 0.0, *,
               sampling: str = "uniform", params: dict | None = None, return_info: bool = False, rng=None):
    r"""Sample points near a smooth open curve with known positions along it.

    The base curve (in its own dimension b) is placed in ``n_features`` dimensions by a random
    orthonormal frame, then isotropic Gaussian noise is added, so the latent order is known exactly:
    ``t``.

    Parameters
    ----------
    kind : {'line', 'arc', 'helix', 'spiral', 'nested_arcs', 'random_fourier'}, optional
        'line': a unit segment (b = 1); 'arc': half a unit circle (b = 2); 'helix': radius 1.5, 2 turns,
        height 16.4, constant speed, length about 24.985 (b = 3); 'spiral': Archimedean, radius
        :math:`1 + g \theta / (2 \pi)`, 4 turns, so successive arms lie exactly the arm gap g = 0.6 apart
        along every ray (b = 2); 'nested_arcs': 4 concentric arcs of angle :math:`\pi` and radii 1, 1 + g,
        1 + 2g, ... (g = 0.6), run back and forth and joined at alternate ends by half circles of diameter
        g, at constant speed (b = 2): every arm lies g from the next, and the turns are tight;
        'random_fourier': :math:`\sum_{m=1}^{5} (a_m \cos \pi m t + b_m \sin \pi m t)/m` with
        Gaussian coefficients in ``n_features`` dimensions (open, since the frequencies are half-periods).
        The arm gap g of 'spiral' and 'nested_arcs' against ``noise`` sets how hard the curve is to order:
        at g = 5 ``noise`` the noise tubes of successive arms touch (see :func:`noise_floor`).
    n_samples : int, optional
        Number of points. ``n_samples`` and ``n_features`` are refused (ValueError) when the arrays
        would not fit in the memory available.
    n_features : int, optional
        Ambient dimension d (at least the base dimension b).
    noise : float, optional
        Standard deviation of the Gaussian noise per coordinate (>= 0; a value so large that the points
        overflow float64 is refused).
    sampling : {'uniform', 'grid'}, optional
        ``t`` i.i.d. uniform on [0, 1], or an evenly spaced grid.
    params : dict, optional
        Overrides of the shape parameters: 'line': ``length``; 'arc': ``radius``, ``angle``; 'helix':
        ``radius``, ``turns``, ``height``; 'spiral': ``turns``, ``gap``; 'nested_arcs': ``arms``,
        ``gap``, ``radius`` (of the innermost arc), ``angle``; 'random_fourier': ``modes``. Values are
        finite reals (``length``, ``radius``, ``angle``, ``turns`` > 0, ``gap`` >= 0, and > 0 for
        'nested_arcs'), ``modes`` and ``arms`` ints in [1, 10000]. An angle that closes the curve (with
        the turns of 'nested_arcs', ``angle + 2 asin(gap / (2 radius + gap))`` at least 2 pi) and values
        that make the points overflow float64 are refused.
    return_info : bool, optional
        Also return a Result describing the curve (``info`` below).
    rng : {None, int, numpy.random.Generator}, optional
        Source of randomness (positions, frame, coefficients, noise).

    Returns
    -------
    X : ndarray, shape (n_samples, n_features)
        The points.
    t : ndarray, shape (n_samples,)
        Their positions along the curve, in [0, 1].
    info : Result
        Only with ``return_info=True``; with fields

        length : float
            The curve length.
        arclength : ndarray of float64, shape (n_samples,)
            The arc length from the start of the curve to each point (before the noise).
        frame : ndarray of float64, shape (n_features, b) or None
            The orthonormal frame placing the base curve in ``n_features`` dimensions; None for
            'random_fourier'.
        params : dict
            The shape parameters used (the kind's defaults updated by ``params``).
        kind : str
            The kind of curve.
        coefficients : tuple of two ndarrays of shape (modes, n_features), or None
            The Fourier coefficients :math:`(a_m)` and :math:`(b_m)` of 'random_fourier'; None for
            the other kinds. With ``kind``, ``params`` and ``frame`` they determine the noiseless
            curve (:func:`noise_floor` uses them).

    Examples
    --------
    >>> from numtk.seriation import make_curve
    >>> X, t = make_curve("helix", n_samples=500, n_features=50, noise=0.05, rng=0)
    >>> X.shape, t.shape
    ((500, 50), (500,))
    >>> X, t, info = make_curve("helix", 100, return_info=True, rng=0)
    >>> round(info.length, 4)
    24.9853

    Close arms: a spiral whose successive arms are 0.3 apart, with noise 0.03 per coordinate (arm gap
    10 times the noise):

    >>> X, t = make_curve("spiral", 1000, 20, noise=0.03, params={"gap": 0.3}, rng=0)
    """
    check_option(kind, "kind", _KINDS)
    check_option(sampling, "sampling", ("uniform", "grid"))
    n = check_int(n_samples, "n_samples", minimum=1)
    d = check_int(n_features, "n_features", minimum=1)
    sigma = check_real(noise, "noise", low=0.0)
    return_info = check_bool(return_info, "return_info")
    p = _check_params(params, kind)
    _check_size(n, d, p.get("modes", 0))
    rng = normalize_rng(rng)
    t = np.sort(rng.random(n)) if sampling == "uniform" else np.linspace(0.0, 1.0, n)
    if sampling == "uniform":
        t = t[rng.permutation(n)]  # rows in random order, as real data arrive
    coeffs = None
    if kind == "random_fourier":
        M = check_int(p["modes"], "params['modes']", minimum=1)
        coeffs = (rng.standard_normal((M, d)), rng.standard_normal((M, d)))
    pts, vel = _base_curve(kind, t, p, coeffs)
    b = pts.shape[1]
    if kind == "random_fourier":
        frame = None
        X = pts
    else:
        if b > d:
            raise ValueError(f"`n_features` must be at least {b} for kind={kind!r}; got {d}")
        frame, _ = np.linalg.qr(rng.standard_normal((d, b)))
        X = pts @ frame.T
    if not np.all(np.isfinite(X)):
        raise ValueError(f"`params` {p} make the curve overflow float64")
    if sigma > 0:
        with np.errstate(over="ignore", invalid="ignore"):
            X = X + sigma * rng.standard_normal(X.shape)
        if not np.all(np.isfinite(X)):
            raise ValueError(f"`noise` = {sigma} is too large: the noisy points overflow float64")
    if not return_info:
        return X, t
    # Arc length: Gauss-Legendre quadrature (16 nodes) of the speed on 64 panels, and from each point's
    # panel start to the point itself.
    nodes, wts = np.polynomial.legendre.leggauss(16)
    edges = np.linspace(0.0, 1.0, 65)

    def integral(lo, hi):  # vectorised over intervals [lo, hi]
        u = 0.5 * (hi - lo)[:, None] * nodes + 0.5 * (hi + lo)[:, None]
        speed = np.linalg.norm(_base_curve(kind, u.ravel(), p, coeffs)[1], axis=1).reshape(u.shape)
        return 0.5 * (hi - lo) * (speed @ wts)

    cum = np.r_[0.0, np.cumsum(integral(edges[:-1], edges[1:]))]
    panel = np.minimum((t * 64).astype(int), 63)
    arclength = cum[panel] + integral(edges[panel], t)
    if not (np.isfinite(cum[-1]) and np.all(np.isfinite(arclength))):
        raise ValueError(f"`params` {p} make the curve length overflow float64")
    info = Result(length=float(cum[-1]), arclength=arclength, frame=frame, params=p, kind=kind,
                  coefficients=coeffs)
    return X, t, info


_COARSE = 4097  # grid of the first nearest-point search of noise_floor
_REFINE = 65  # points per window of each refinement
_CANDIDATES = 3  # coarse nodes refined per point
_ROWS = 256  # points per block (bounds the (rows, grid) distance matrices)


def _nearest_parameters(B: np.ndarray, kind: str, p: dict, coeffs) -> tuple[np.ndarray, np.ndarray]:
    """For each row of B (base coordinates), the parameter of the nearest point of the curve and the distance."""
    grid = np.linspace(0.0, 1.0, _COARSE)
    G = _base_curve(kind, grid, p, coeffs)[0]
    g2 = np.einsum("ij,ij->i", G, G)
    n = B.shape[0]
    best_t, best_d = np.empty(n), np.empty(n)
    offsets = np.linspace(-1.0, 1.0, _REFINE)
    for lo in range(0, n, _ROWS):
        Y = B[lo:lo + _ROWS]
        r = Y.shape[0]
        d2 = g2[None, :] - 2.0 * (Y @ G.T)
        c = min(_CANDIDATES, _COARSE)
        cand = np.argpartition(d2, c - 1, axis=1)[:, :c]  # the c nearest nodes (possibly on different arms)
        tc = grid[cand].reshape(-1)
        Yc = np.repeat(Y, c, axis=0)
        width = 1.0 / (_COARSE - 1)
        for _ in range(3):  # windows of +-1 coarse cell, then +-1/32 of that, twice
            u = np.clip(tc[:, None] + width * offsets[None, :], 0.0, 1.0)
            pts = _base_curve(kind, u.ravel(), p, coeffs)[0].reshape(u.shape + (-1,))
            dist = np.sum((pts - Yc[:, None, :]) ** 2, axis=2)
            k = np.argmin(dist, axis=1)
            tc = u[np.arange(u.shape[0]), k]
            dc = dist[np.arange(u.shape[0]), k]
            width *= 2.0 / (_REFINE - 1)
        dc = dc.reshape(r, c)
        k = np.argmin(dc, axis=1)
        best_t[lo:lo + r] = tc.reshape(r, c)[np.arange(r), k]
        best_d[lo:lo + r] = np.sqrt(dc[np.arange(r), k])
    return best_t, best_d


@constraints(X="array2d", t="array1d", info="option")
def noise_floor(X, t, info) -> Result:
    r"""The order agreement achievable on noisy samples of a known curve: the oracle projection.

    Each sample is mapped to the parameter :math:`\hat t_i = \arg\min_s \lVert x_i - \gamma(s) \rVert` of
    the nearest point of the noiseless curve (the curve ``info`` describes, exactly as
    :func:`make_curve` placed it), and the floor is :math:`|\tau_b|` between :math:`\hat t` and the
    true parameters ``t``. It is the agreement of an oracle that knows the curve but not where on it
    each sample was drawn; a method that sees only ``X`` should not expect more (the closeness of
    ``order_agreement(result.order, t)`` to it measures what the method loses). Its causes: noise along
    the tangent (for a straight segment and uniform sampling, :math:`1 - |\tau| \approx 4 r/\sqrt{\pi}`
    with :math:`r` = ``noise`` / length) and, on close arms, samples pushed past the middle of the gap
    between two arms, which the projection assigns to the other arm; the latter dominates once the arm
    gap falls below about 6 times ``noise``.

    Parameters
    ----------
    X : array_like, shape (n_samples, n_features)
        The samples (finite), in the coordinates :func:`make_curve` returned them.
    t : array_like, shape (n_samples,)
        Their true parameters.
    info : Result
        The ``info`` of ``make_curve(..., return_info=True)`` that made ``X``.

    Returns
    -------
    Result
        agreement : float
            :math:`|\tau_b|` between the nearest-point parameters and ``t``, in [0, 1].
        positions : ndarray of float64, shape (n_samples,)
            The nearest-point parameters :math:`\hat t_i` in [0, 1] (ends of the curve included:
            samples beyond an end project on it).
        distance : ndarray of float64, shape (n_samples,)
            The distance from each sample to the curve, within the plane or space of the base curve
            (the noise outside it is orthogonal to the curve and changes no nearest point).

    Notes
    -----
    The base curve is searched on a grid of 4097 parameters; the 3 nearest nodes of each sample (on
    different arms where arms are close) are refined by three rounds of 65-point local grids, to a
    parameter resolution below :math:`10^{-8}`. Cost: O(n (4097 + 600) b) for a base curve of dimension
    b (2 or 3; ``n_features`` for 'random_fourier').

    Examples
    --------
    >>> from numtk.seriation import make_curve, noise_floor
    >>> X, t, info = make_curve("spiral", 2000, 20, noise=0.03, params={"gap": 0.3}, return_info=True, rng=0)
    >>> floor = noise_floor(X, t, info)
    >>> round(floor.agreement, 3)
    0.998
    """
    X = as_array(X, "X", ndim=2)
    t = as_array(t, "t", ndim=1)
    check_finite(X, "X")
    check_finite(t, "t")
    n = check_same_length(X=X, t=t)
    if n < 2:
        raise ValueError(f"`X` and `t` must hold at least 2 rows (an agreement compares pairs); got {n}")
    fields = ("kind", "params", "frame", "coefficients")
    if not isinstance(info, Result) or any(not hasattr(info, f) for f in fields):
        raise TypeError("`info` must be the Result of make_curve(..., return_info=True)")
    kind = check_option(info.kind, "info.kind", _KINDS)
    X = np.asarray(X, dtype=np.float64)
    coeffs = info.coefficients if kind == "random_fourier" else None
    width = coeffs[0].shape[1] if kind == "random_fourier" else info.frame.shape[0]
    if X.shape[1] != width:
        raise ValueError(f"`X` has {X.shape[1]} features but the curve of `info` lies in {width}")
    B = X if kind == "random_fourier" else X @ info.frame
    from numtk.stats import kendall_tau

    positions, distance = _nearest_parameters(np.ascontiguousarray(B), kind, info.params, coeffs)
    agreement = abs(float(kendall_tau(positions, t).statistic))
    return Result(agreement=agreement, positions=positions, distance=distance)
