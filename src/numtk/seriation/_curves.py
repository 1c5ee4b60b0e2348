"""Synthetic curves for seriation: points along a known 1-D curve, embedded in any dimension."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from numtk._lib import Result, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import available_memory, check_bool, check_int, check_option, check_real

__all__ = ["make_curve"]

_KINDS = ("line", "arc", "helix", "spiral", "random_fourier")
_DEFAULTS = {
    "line": {"length": 1.0},
    "arc": {"radius": 1.0, "angle": math.pi},
    "helix": {"radius": 1.5, "turns": 2.0, "height": 16.4},
    "spiral": {"turns": 4.0, "gap": 0.6},
    "random_fourier": {"modes": 5},
}


# Shape parameters: name -> (lower bound, open) of the finite real value ('modes' is an int >= 1).
_PARAM_BOUNDS = {"length": (0.0, True), "radius": (0.0, True), "angle": (0.0, True), "turns": (0.0, True),
                 "height": (None, False), "gap": (0.0, False)}
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
        if key == "modes":
            p[key] = check_int(value, "params['modes']", minimum=1, maximum=_MAX_MODES)
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
    # random_fourier: half-period frequencies keep the curve open
    a, b = coeffs
    m = np.arange(1, a.shape[0] + 1)
    arg = math.pi * np.outer(t, m)
    pts = (np.cos(arg) / m) @ a + (np.sin(arg) / m) @ b
    vel = (-math.pi * np.sin(arg)) @ a + (math.pi * np.cos(arg)) @ b
    return pts, vel


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
    kind : {'line', 'arc', 'helix', 'spiral', 'random_fourier'}, optional
        'line': a unit segment (b = 1); 'arc': half a unit circle (b = 2); 'helix': radius 1.5, 2 turns,
        height 16.4, constant speed, length about 24.985 (b = 3); 'spiral': Archimedean, 4 turns, arm gap
        0.6 (b = 2); 'random_fourier': :math:`\sum_{m=1}^{5} (a_m \cos \pi m t + b_m \sin \pi m t)/m` with
        Gaussian coefficients in ``n_features`` dimensions (open, since the frequencies are half-periods).
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
        ``radius``, ``turns``, ``height``; 'spiral': ``turns``, ``gap``; 'random_fourier': ``modes``.
        Values are finite reals (``length``, ``radius``, ``angle``, ``turns`` > 0, ``gap`` >= 0),
        ``modes`` an int in [1, 10000]. Values that make the points overflow float64 are refused.
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

    Examples
    --------
    >>> from numtk.seriation import make_curve
    >>> X, t = make_curve("helix", n_samples=500, n_features=50, noise=0.05, rng=0)
    >>> X.shape, t.shape
    ((500, 50), (500,))
    >>> X, t, info = make_curve("helix", 100, return_info=True, rng=0)
    >>> round(info.length, 4)
    24.9853
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
    info = Result(length=float(cum[-1]), arclength=arclength, frame=frame, params=p)
    return X, t, info
