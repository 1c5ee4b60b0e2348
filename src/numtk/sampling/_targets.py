"""Target densities of the score-based sampler, with exact log Z, samples and noised densities (spec §3.2).

A :class:`Target` is an unnormalised density ``rho`` on R^d. Besides ``log rho`` and its gradient it
may know its mass ``Z = int rho`` (``log_Z``), draw exact samples, and give the exact log-density of
the Ornstein-Uhlenbeck-noised target

    rho_tau(x) = int rho(y) N(x; e^{-tau} y, (1 - e^{-2 tau}) I) dy,     int rho_tau = Z,

(noising ``dY = -Y dtau + sqrt(2) dB``) and its score; the sampler's value function is
``V(x, t; T) = log rho_{T - t}(x)``. Targets whose coefficient tensor in the normalised
probabilists' Hermite basis has a known low-rank tensor train (diagonal Gaussian mixtures, products
of univariate factors) expose it through ``_hermite_tt`` for the exact OU-Hermite path (spec §2.6).

Factories: :func:`gaussian`, :func:`gaussian_mixture` (presets ``'25gmm'``, ``'9gmm'``, ``'gmm40'``),
:func:`funnel`, :func:`many_well`, :func:`double_well`; :meth:`Target.from_callable` and
:func:`as_target` wrap user callables.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy import integrate, linalg, optimize, special, stats

from numtk._lib import normalize_rng
from numtk._lib._validation import as_array, check_finite, check_int, check_real, check_size, per_coordinate

__all__ = [
    "Target",
    "as_target",
    "gaussian",
    "gaussian_mixture",
    "funnel",
    "many_well",
    "double_well",
]

_LOG_2PI = math.log(2.0 * math.pi)
_BOX_MASS_TAIL = 1e-6        # bounds hold mass >= 1 - 1e-6 (union bound over the coordinates)
_KERNEL_HALF_WIDTH = 12.0    # OU kernel truncated at +-12 of its standard deviations (mass e^-72)
_SUPPORT_DROP = 750.0        # quadrature support of a 1-D factor: log f >= max log f - 750
_CORE_DROP = 50.0            # Hermite coefficients of a 1-D factor: log f >= max log f - 50
_FACTOR_NODES = 200          # Gauss-Legendre nodes of the 1-D noised-factor quadrature
_FUNNEL_NODES = 3000         # Gauss-Legendre nodes of the funnel quadrature over u
_FUNNEL_EXACT_TAU = 1e-12    # below this tau the funnel uses the exact target (see funnel's Notes)
_CHUNK = 1 << 21             # elements per temporary (n_points x n_nodes) array
_MAX_DIM = 1 << 20           # largest dimension a target may have (the factors and bounds are O(d))


class Unsupported(TypeError, NotImplementedError):
    """The target does not provide this operation (a TypeError, and a NotImplementedError for old code)."""


def check_dim(value: Any, name: str = "dim", minimum: int = 1) -> int:
    """A dimension: an int in [minimum, 2**20]."""
    return check_int(value, name, minimum=minimum, maximum=_MAX_DIM)


# ---------------------------------------------------------------------------------------------------------
# small numerical helpers

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


def _check_tau(tau: Any, name: str = "tau") -> float:
    if isinstance(tau, np.ndarray) and tau.ndim == 0:
        tau = tau.item()
    return check_real(tau, name, low=0.0)


def _box_z(d: int) -> float:
    """Per-coordinate two-sided standard-normal quantile that leaves ``1e-6 / d`` mass outside."""
    return float(stats.norm.isf(_BOX_MASS_TAIL / (2.0 * d)))


def _check_bounds(bounds: Any, dim: int) -> np.ndarray:
    """A finite ``(dim, 2)`` box with ``low < high`` in every row."""
    b = as_array(bounds, "bounds", ndim=2)
    if b.shape != (dim, 2):
        raise ValueError(f"`bounds` must have shape ({dim}, 2); got shape {b.shape}")
    b = b.astype(np.float64)
    check_finite(b, "bounds")
    if np.any(b[:, 0] >= b[:, 1]):
        raise ValueError("`bounds` rows must be [low, high] with low < high")
    return b


# ---------------------------------------------------------------------------------------------------------
# univariate factors of product targets

class _StdNormalFactor:
    """``f(y) = exp(-y^2 / 2)``: invariant under the OU noising (``rho_tau = rho``)."""

    log_Z = 0.5 * _LOG_2PI

    def logf(self, y):
        return -0.5 * y * y

    def dlogf(self, y):
        return -y

    def noised(self, y, tau, score):
        return -y if score else -0.5 * y * y

    def sample(self, n, rng):
        return rng.standard_normal(n)

    def bounds(self, tail):
        z = float(stats.norm.isf(tail / 2.0))
        return -z, z

    def hermite(self, degree, loc, scale):
        # f = sqrt(2 pi) N(0, 1); in y = (x - loc) / scale: sqrt(2 pi) / scale * N(-loc/scale, 1/scale^2)
        return math.sqrt(2.0 * math.pi) / scale * _hermite_gaussian_moments(-loc / scale, 1.0 / scale**2, degree)


class _PolyFactor:
    """``f(y) = exp(p(y))`` for a polynomial p of even degree with a negative leading coefficient.

    Mass, quantiles and the noised density are computed by quadrature; exact samples by rejection
    from the Gaussian mixture ``proposal = (weights, means, stds)`` with envelope
    ``max(3, 1.05 sup p/q)`` on the normalised density (3 for the built-in factors).
    """

    def __init__(self, coef: tuple, proposal: tuple):
        self.coef = np.asarray(coef, dtype=np.float64)  # ascending powers
        self.d1 = np.polynomial.polynomial.polyder(self.coef, 1)
        self.d2 = np.polynomial.polynomial.polyder(self.coef, 2)
        crit = np.roots(self.d1[::-1])
        crit = np.sort(crit[np.abs(crit.imag) < 1e-9].real)
        vals = self.logf(crit)
        self.pmax = float(vals.max())
        maxima = crit[self.d2_at(crit) < 0]
        c3 = np.roots(np.polynomial.polynomial.polyder(self.coef, 3)[::-1])
        c3 = c3[np.abs(c3.imag) < 1e-9].real
        self.d2max = float(self.d2_at(c3).max()) if len(c3) else float(self.d2[0])
        self.mode_lo, self.mode_hi = float(maxima.min()), float(maxima.max())
        self.lo, self.hi = self._level(_SUPPORT_DROP)
        self.core = self._level(_CORE_DROP)
        self.log_Z = self._log_mass()
        w, m, s = (np.asarray(v, dtype=np.float64) for v in proposal)
        self.proposal = (w / w.sum(), m, s)
        grid = np.linspace(self.lo, self.hi, 40001)
        ratio = np.exp(self.logf(grid) - self.log_Z - self._log_q(grid)).max()
        self.sup_ratio = float(ratio)
        self.envelope = 3.0 if ratio <= 2.99 else 1.05 * float(ratio)

    def logf(self, y):
        return np.polynomial.polynomial.polyval(y, self.coef)

    def dlogf(self, y):
        return np.polynomial.polynomial.polyval(y, self.d1)

    def d2_at(self, y):
        return np.polynomial.polynomial.polyval(y, self.d2)

    def _level(self, drop):
        c = self.coef.copy()
        c[0] -= self.pmax - drop
        r = np.roots(c[::-1])
        r = r[np.abs(r.imag) < 1e-7].real
        return float(r.min()), float(r.max())

    def _log_mass(self, upper=None):
        hi = self.hi if upper is None else upper
        points = [p for p in (self.mode_lo, self.mode_hi) if self.lo < p < hi]
        val, _ = integrate.quad(lambda y: math.exp(self.logf(y) - self.pmax), self.lo, hi,
                                points=points or None, epsabs=0.0, epsrel=2e-14, limit=500)
        return self.pmax + math.log(val) if val > 0.0 else -math.inf

    def _log_q(self, y):
        w, m, s = self.proposal
        comp = (np.log(w) - np.log(s) - 0.5 * _LOG_2PI
                - 0.5 * ((np.asarray(y)[..., None] - m) / s) ** 2)
        return special.logsumexp(comp, axis=-1)

    def cdf(self, y):
        return math.exp(self._log_mass(upper=float(y)) - self.log_Z) if y > self.lo else 0.0

    @functools.lru_cache(maxsize=8)  # noqa: B019 (factors are cached module-level objects)
    def bounds(self, tail):
        lo = optimize.brentq(lambda y: self.cdf(y) - tail / 2.0, self.lo, self.mode_lo, xtol=1e-12)
        hi = optimize.brentq(lambda y: 1.0 - self.cdf(y) - tail / 2.0, self.mode_hi, self.hi, xtol=1e-12)
        return float(lo), float(hi)

    def sample(self, n, rng):
        w, m, s = self.proposal
        out = np.empty(n)
        filled = 0
        while filled < n:
            k = int(1.2 * self.envelope * (n - filled)) + 16
            comp = rng.choice(len(w), size=k, p=w)
            y = m[comp] + s[comp] * rng.standard_normal(k)
            log_accept = self.logf(y) - self.log_Z - self._log_q(y) - math.log(self.envelope)
            keep = y[np.log(rng.random(k)) < log_accept][: n - filled]
            out[filled:filled + len(keep)] = keep
            filled += len(keep)
        return out

    def hermite(self, degree, loc, scale):
        q = max(4 * (degree + 1), 256)
        nodes, logw = _gauss_legendre(q)
        lo, hi = self.core
        half, mid = 0.5 * (hi - lo), 0.5 * (hi + lo)
        x = mid + half * nodes
        weights = np.exp(logw + self.logf(x)) * half / scale
        return _hermite_values((x - loc) / scale, degree).T @ weights

    def _bisect(self, left, right, c, w):
        """Root of ``h'(y) = p'(y) - (y - c) / w^2`` in [left, right] (h' > 0 at left, < 0 at right)."""
        for _ in range(200):
            mid = 0.5 * (left + right)
            pos = self.dlogf(mid) - (mid - c) / (w * w) > 0
            left = np.where(pos, mid, left)
            right = np.where(pos, right, mid)
            if np.all(right - left <= 1e-12 * np.maximum(1.0, np.abs(mid))):
                break
        return 0.5 * (left + right)

    def noised(self, x, tau, score):
        """``log rho_tau(x)`` (or its derivative) by Gauss-Legendre quadrature over the source point y.

        ``rho_tau(x) = int f(y) N(x; a y, s^2) dy`` with log-integrand ``h(y) = p(y) - (y - c)^2 / (2 w^2)``,
        ``c = x/a``, ``w = s/a``. Small tau (``w^2 <= 1 / (2 max p'')``): h is strongly concave; the
        window is ``y* +- 17 w`` around its maximiser y* (bisection on h'), so the kernel is resolved
        however narrow it is. Larger tau: the factor's support intersected with ``c +- 12 w``, joined
        with ``y* +- 12 sigma*`` when c lies beyond the outermost maxima of p (y* between that maximum
        and c, where p is concave for the built-in factors).
        """
        a, s, w = _ou_coefficients(tau)
        x = np.asarray(x, dtype=np.float64)
        c = x / a
        if w * w * self.d2max <= 0.5:
            ystar = self._bisect(np.minimum(c, self.mode_lo) - 1.0, np.maximum(c, self.mode_hi) + 1.0, c, w)
            lo = ystar - 17.0 * w
            hi = ystar + 17.0 * w
        else:
            hw = _KERNEL_HALF_WIDTH * w
            lo = np.maximum(self.lo, c - hw)
            hi = np.minimum(self.hi, c + hw)
            for side in (1, -1):
                out = c > self.mode_hi if side == 1 else c < self.mode_lo
                if not out.any():
                    continue
                co = c[out]
                edge = np.full_like(co, self.mode_hi if side == 1 else self.mode_lo)
                ystar = self._bisect(edge, co, co, w) if side == 1 else self._bisect(co, edge, co, w)
                curv = np.maximum(1.0 / (w * w) - self.d2_at(ystar), 1.0 / (w * w))
                sig = _KERNEL_HALF_WIDTH / np.sqrt(curv)
                lo_o, hi_o = lo[out], hi[out]
                empty = lo_o >= hi_o
                lo[out] = np.where(empty, ystar - sig, np.minimum(lo_o, ystar - sig))
                hi[out] = np.where(empty, ystar + sig, np.maximum(hi_o, ystar + sig))
        nodes, logw = _gauss_legendre(_FACTOR_NODES)
        result = np.empty_like(x)
        for sl in _chunks(len(x), len(nodes)):
            half = 0.5 * (hi[sl] - lo[sl])
            y = (0.5 * (hi[sl] + lo[sl]))[:, None] + half[:, None] * nodes
            t = (y - c[sl, None]) / w
            logt = self.logf(y) - 0.5 * t * t
            logt += logw
            m = logt.max(axis=1, keepdims=True)
            p = np.exp(logt - m)
            if score:
                result[sl] = (p * t).sum(axis=1) / p.sum(axis=1) / s
            else:
                result[sl] = np.log(p.sum(axis=1)) + m[:, 0] + np.log(half) - math.log(s) - 0.5 * _LOG_2PI
        return result


@functools.lru_cache(maxsize=1)
def _many_well_factor() -> _PolyFactor:
    return _PolyFactor((0.0, 0.5, 6.0, 0.0, -1.0), ((0.2, 0.8), (-1.7, 1.7), (0.5, 0.5)))


@functools.lru_cache(maxsize=16)
def _double_well_factor(delta: float) -> _PolyFactor:
    r = math.sqrt(delta)
    sd = 1.0 / r
    return _PolyFactor((-delta * delta, 0.0, 2.0 * delta, 0.0, -1.0), ((0.5, 0.5), (-r, r), (sd, sd)))


# ---------------------------------------------------------------------------------------------------------
# the Target class

class Target:
    r"""An unnormalised target density :math:`\rho` on :math:`\mathbb{R}^d` for the score-based sampler.

    Targets are made by the factories (:func:`gaussian`, :func:`gaussian_mixture`, :func:`funnel`,
    :func:`many_well`, :func:`double_well`) or from a user's callable with :meth:`from_callable`.
    Every method taking points accepts an array of shape ``(n, d)`` (one point per row) or a single
    point of shape ``(d,)``; for a single point the value is a scalar and the gradient has shape
    ``(d,)``.

    Attributes
    ----------
    name : str
        A short name (``'gaussian'``, ``'25gmm'``, ``'funnel'``, ``'many_well'``, ...).
    dim : int
        The dimension d.
    log_Z : float or None
        :math:`\log \int \rho`, when known exactly.
    has_grad : bool
        Whether :meth:`grad_log_density` is available.
    can_sample : bool
        Whether :meth:`sample` draws exact samples.
    has_exact_noised : bool
        Whether :meth:`log_noised_density` and :meth:`noised_score` are available.
    has_hermite : bool
        Whether the Hermite coefficient tensor is available in tensor-train form (``_hermite_tt``).
    bounds : ndarray of shape (d, 2) or None
        A box holding mass at least ``1 - 1e-6`` (``None`` for a callable given without bounds).
    product_groups : list of list of int or None
        Groups of coordinates on which :math:`\rho` factorises into independent factors, or ``None``.
    params : dict
        The parameters of the factory that made the target.

    Notes
    -----
    The noised target is the law of the OU process :math:`dY = -Y\,d\tau + \sqrt{2}\,dB` started from
    :math:`\rho`: :math:`\rho_\tau(x) = \int \rho(y)\, N(x; e^{-\tau} y, (1 - e^{-2\tau}) I)\, dy`,
    whose mass is Z for every :math:`\tau`. In sampler time :math:`t \in [0, T]`,
    :math:`\tau = T - t` and the value function is :math:`V(x, t) = \log \rho_{T - t}(x)`.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling._targets import gaussian
    >>> tgt = gaussian([0.0, 1.0], [1.0, 4.0])
    >>> tgt.dim, round(tgt.log_Z, 6)
    (2, 2.531024)
    >>> float(tgt.log_density([0.0, 1.0]))
    0.0
    >>> tgt.noised_score(np.array([[1.0, 1.0]]), 0.5)
    array([[-1.       , -0.1870423]])
    """

    has_grad = False
    can_sample = False
    has_exact_noised = False
    has_hermite = False

    def __init__(self, dim: int, *, name: str, log_Z: float | None = None, bounds: Any = None,
                 product_groups: list | None = None, params: dict | None = None):
        self.dim = check_dim(dim, "dim")
        if not isinstance(name, str):
            raise TypeError(f"`name` must be a str; got {type(name).__name__}")
        self.name = name
        self.log_Z = None if log_Z is None else check_real(log_Z, "log_Z")
        self._bounds = None if bounds is None else _check_bounds(bounds, self.dim)
        if product_groups is not None:
            if not isinstance(product_groups, (list, tuple)) or not all(
                    isinstance(g, (list, tuple)) for g in product_groups):
                raise TypeError("`product_groups` must be None or a list of lists of coordinate indices")
            product_groups = [[check_int(i, "product_groups", minimum=0, maximum=self.dim - 1) for i in g]
                              for g in product_groups]
        self.product_groups = product_groups
        if params is not None and not isinstance(params, dict):
            raise TypeError(f"`params` must be a dict or None; got {type(params).__name__}")
        self.params = {} if params is None else dict(params)

    # -- construction from callables ---------------------------------------------------------------------
    @classmethod
    def from_callable(cls, log_density: Callable, dim: int, *, grad_log_density: Callable | None = None,
                      log_Z: float | None = None, bounds: ArrayLike | None = None, jit: bool = False,
                      name: str | None = None) -> "Target":
        r"""Wrap a vectorised log-density (and optionally its gradient) as a :class:`Target`.

        Parameters
        ----------
        log_density : callable
            ``log_density(x)`` maps an array of shape ``(n, dim)`` to the unnormalised log-density,
            shape ``(n,)``. Checked on a probe of two points.
        dim : int
            The dimension d >= 1.
        grad_log_density : callable, optional
            ``(n, dim) -> (n, dim)``, the gradient of ``log_density``.
        log_Z : float, optional
            The log normalising constant, when known.
        bounds : array_like of shape (dim, 2), optional
            A box holding almost all the mass (rows ``[low, high]`` with ``low < high``).
        jit : bool, default False
            Compile the callables with ``numba.njit`` (needs numba; ImportError otherwise).
        name : str, optional
            Name of the target (default ``'callable'``).

        Returns
        -------
        Target
            ``can_sample`` and ``has_exact_noised`` are False.

        Raises
        ------
        TypeError
            A callable that is not callable, or non-numeric output.
        ValueError
            Output of the wrong shape on the probe points, bad ``dim``, ``bounds`` or ``log_Z``.
        ImportError
            ``jit=True`` without numba installed.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._targets import Target
        >>> tgt = Target.from_callable(lambda x: -0.5 * np.sum(x**2, axis=1), 3, log_Z=1.5 * np.log(2 * np.pi))
        >>> tgt.log_density(np.ones((2, 3)))
        array([-1.5, -1.5])
        >>> tgt.has_grad, tgt.can_sample
        (False, False)
        """
        return _CallableTarget(log_density, dim, grad_log_density=grad_log_density, log_Z=log_Z,
                               bounds=bounds, jit=jit, name=name)

    # -- validation ----------------------------------------------------------------------------------------
    def _check_x(self, x: Any) -> tuple[np.ndarray, bool]:
        arr = as_array(x, "x")
        if arr.ndim == 1:
            if arr.shape[0] != self.dim:
                raise ValueError(f"`x` must have shape (n, {self.dim}) or ({self.dim},); got shape {arr.shape}")
            single = True
            arr = arr[None, :]
        elif arr.ndim == 2:
            if arr.shape[1] != self.dim:
                raise ValueError(f"`x` must have shape (n, {self.dim}) (one point per row); "
                                 f"got shape {arr.shape}")
            single = False
        else:
            raise ValueError(f"`x` must be a 2-D array of shape (n, {self.dim}) or a single point of shape "
                             f"({self.dim},); got an array of shape {arr.shape}")
        check_finite(arr, "x")
        return np.ascontiguousarray(arr, dtype=np.float64), single

    @staticmethod
    def _out(values: np.ndarray, single: bool):
        return values[0] if single else values

    # -- public API -----------------------------------------------------------------------------------------
    @property
    def bounds(self) -> np.ndarray | None:
        """A ``(d, 2)`` box holding mass at least ``1 - 1e-6`` (a copy), or ``None`` if unknown."""
        return None if self._bounds is None else self._bounds.copy()

    def log_density(self, x: ArrayLike) -> np.ndarray:
        r"""Unnormalised :math:`\log \rho(x)`: shape ``(n,)`` for finite ``x`` of shape ``(n, d)``.

        ``-inf`` where the density is zero, or underflows to zero in double precision (a Gaussian beyond
        about ``1e154`` from its mean).
        """
        x, single = self._check_x(x)
        return self._out(self._logp(x), single)

    def grad_log_density(self, x: ArrayLike) -> np.ndarray:
        r""":math:`\nabla \log \rho(x)`, shape ``(n, d)``; :class:`Unsupported` (a TypeError and
        NotImplementedError) if ``has_grad`` is False."""
        if not self.has_grad:
            raise Unsupported(f"target {self.name!r} has no gradient of its log-density")
        x, single = self._check_x(x)
        return self._out(self._grad(x), single)

    def sample(self, n: int, rng: Any = None) -> np.ndarray:
        """``n`` exact samples, shape ``(n, d)``; :class:`Unsupported` (a TypeError and NotImplementedError)
        if ``can_sample`` is False. ``n`` is refused beyond the memory available.

        Parameters
        ----------
        n : int
            Number of samples (>= 0).
        rng : {None, int, numpy.random.Generator}, optional
            Source of randomness: ``None`` draws fresh OS entropy, an int seeds a new generator and a
            Generator is used as it is (and advanced).
        """
        if not self.can_sample:
            raise Unsupported(f"target {self.name!r} cannot draw exact samples")
        n = check_int(n, "n", minimum=0)
        check_size(n, 8 * self.dim * 4 + 64, "n")
        return self._sample(n, normalize_rng(rng))

    def log_noised_density(self, x: ArrayLike, tau: float) -> np.ndarray:
        r"""Exact :math:`\log \rho_\tau(x)` of the OU-noised target (mass Z), shape ``(n,)``.

        ``tau >= 0`` is the noising time; ``tau = 0`` gives :meth:`log_density`.
        """
        if not self.has_exact_noised:
            raise Unsupported(f"target {self.name!r} has no exact noised density")
        tau = _check_tau(tau)
        x, single = self._check_x(x)
        return self._out(self._noised(x, tau, False), single)

    def noised_score(self, x: ArrayLike, tau: float) -> np.ndarray:
        r"""Exact :math:`\nabla \log \rho_\tau(x)`, shape ``(n, d)``, for ``tau >= 0``."""
        if not self.has_exact_noised:
            raise Unsupported(f"target {self.name!r} has no exact noised density")
        tau = _check_tau(tau)
        x, single = self._check_x(x)
        return self._out(self._noised(x, tau, True), single)

    @staticmethod
    def _tau_of(t: Any, T: Any) -> float:
        T = _check_tau(T, "T")
        t = _check_tau(t, "t")
        tau = T - t
        if tau < 0.0:
            if tau < -1e-12 * max(1.0, T):
                raise ValueError(f"`t` must lie in [0, T] = [0, {T}]; got {t}")
            tau = 0.0
        return tau

    def V(self, x: ArrayLike, t: float, *, T: float) -> np.ndarray:
        r"""Exact value function :math:`V(x, t) = \log \rho_{T - t}(x)` (sampler time ``0 <= t <= T``)."""
        return self.log_noised_density(x, self._tau_of(t, T))

    def score(self, x: ArrayLike, t: float, *, T: float) -> np.ndarray:
        r"""Exact :math:`\nabla V(x, t) = \nabla \log \rho_{T - t}(x)`, shape ``(n, d)``."""
        return self.noised_score(x, self._tau_of(t, T))

    def _hermite_tt(self, degree: int, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> list[np.ndarray]:
        r"""TT cores of the Hermite coefficients :math:`a_\alpha = \int \rho(loc + scale\, y) h_\alpha(y)\, dy`.

        ``h_k = He_k / sqrt(k!)`` are the orthonormal probabilists' Hermite polynomials and there is
        no Jacobian factor, so ``a_0 = Z / prod(scale)``. Core k has shape
        ``(r_{k-1}, degree + 1, r_k)``, ``r_0 = r_d = 1``. Closed form for Gaussian components
        (CP rank K for a K-component diagonal mixture, rank 1 for products), Gauss-Legendre
        quadrature with ``max(4 (degree + 1), 256)`` nodes for other univariate factors.

        Parameters
        ----------
        degree : int
            Largest polynomial degree per coordinate (>= 0).
        loc, scale : float or array_like of shape (d,)
            Preconditioning ``x = loc + scale * y`` (``scale > 0``).
        """
        if not self.has_hermite:
            raise Unsupported(f"target {self.name!r} has no Hermite tensor train "
                                      "(only diagonal Gaussian mixtures and product targets do)")
        degree = check_int(degree, "degree", minimum=0)
        loc = per_coordinate(loc, self.dim, "loc")
        scale = per_coordinate(scale, self.dim, "scale")
        if np.any(scale <= 0):
            raise ValueError(f"`scale` must be > 0; got {scale}")
        cores = self._hermite_cores(degree, loc, scale)
        if not all(np.isfinite(c).all() for c in cores):
            raise ValueError("Hermite coefficients overflowed; precondition with `loc` and `scale` "
                             "so that the mass lies within about +-2.5")
        return cores

    def __repr__(self) -> str:
        lz = "None" if self.log_Z is None else f"{self.log_Z:.10g}"
        return f"<Target {self.name!r}: dim={self.dim}, log_Z={lz}>"

    # -- hooks of the subclasses ------------------------------------------------------------------------------
    def _abstract(self):
        return Unsupported(f"target {self.name!r} is a bare `Target` (the base class) and has no log-density; "
                           "make targets with the factories or `Target.from_callable`")

    def _logp(self, x):
        raise self._abstract()

    def _grad(self, x):  # pragma: no cover
        raise self._abstract()

    def _sample(self, n, rng):  # pragma: no cover
        raise self._abstract()

    def _noised(self, x, tau, score):  # pragma: no cover
        raise self._abstract()

    def _hermite_cores(self, degree, loc, scale):  # pragma: no cover
        raise self._abstract()


# ---------------------------------------------------------------------------------------------------------
# user callables

class _CallableTarget(Target):
    def __init__(self, log_density, dim, *, grad_log_density=None, log_Z=None, bounds=None, jit=False,
                 name=None):
        dim = check_dim(dim, "dim")
        if not callable(log_density):
            raise TypeError(f"`log_density` must be callable; got {type(log_density).__name__}")
        if grad_log_density is not None and not callable(grad_log_density):
            raise TypeError(f"`grad_log_density` must be callable or None; got {type(grad_log_density).__name__}")
        if log_Z is not None:
            log_Z = check_real(log_Z, "log_Z")
        if name is None:
            name = "callable"
        elif not isinstance(name, str):
            raise TypeError(f"`name` must be a str or None; got {type(name).__name__}")
        if not isinstance(jit, (bool, np.bool_)):
            raise TypeError(f"`jit` must be a bool; got {type(jit).__name__}")
        if bounds is not None:
            bounds = _check_bounds(bounds, dim)
        if jit:
            try:
                import numba
            except ImportError:
                raise ImportError("jit=True needs numba (pip install numba); pass jit=False to use the "
                                  "callables as they are") from None
            log_density = numba.njit(log_density)
            if grad_log_density is not None:
                grad_log_density = numba.njit(grad_log_density)
        super().__init__(dim, name=name, log_Z=log_Z, bounds=bounds, product_groups=None,
                         params={"jit": bool(jit)})
        self._f = log_density
        self._g = grad_log_density
        self.has_grad = grad_log_density is not None
        probe = np.zeros((2, dim)) if bounds is None else np.repeat(bounds.mean(axis=1)[None, :], 2, axis=0)
        self._call(self._f, probe, (2,), "log_density")
        if self._g is not None:
            self._call(self._g, probe, (2, dim), "grad_log_density")

    def _call(self, f, x, shape, name):
        out = np.asarray(f(x))
        if out.dtype.kind not in "biuf":
            raise TypeError(f"`{name}` must return real numbers; got dtype {out.dtype}")
        if out.shape != shape:
            raise ValueError(f"`{name}` must map an array of shape (n, {self.dim}) to shape "
                             f"{('(n,)' if len(shape) == 1 else f'(n, {self.dim})')}; on {x.shape[0]} points "
                             f"it returned shape {out.shape}")
        return out.astype(np.float64, copy=False)

    def _logp(self, x):
        return self._call(self._f, x, (len(x),), "log_density")

    def _grad(self, x):
        return self._call(self._g, x, x.shape, "grad_log_density")


def as_target(obj: Any, dim: int | None = None) -> Target:
    """Return ``obj`` if it is a :class:`Target`, else wrap a log-density callable with ``from_callable``.

    Parameters
    ----------
    obj : Target or callable
        A target, or a vectorised log-density ``(n, dim) -> (n,)``.
    dim : int, optional
        Required for a callable; for a Target it must equal ``obj.dim`` when given.

    Returns
    -------
    Target

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling._targets import as_target, many_well
    >>> as_target(lambda x: -np.sum(x**4, axis=1), dim=2)
    <Target 'callable': dim=2, log_Z=None>
    >>> as_target(many_well(4)).dim
    4
    """
    if isinstance(obj, Target):
        if dim is not None and check_dim(dim, "dim") != obj.dim:
            raise ValueError(f"`dim` ({dim}) does not match the target's dimension ({obj.dim})")
        return obj
    if callable(obj):
        if dim is None:
            raise ValueError("`dim` is required when the target is given as a callable")
        return Target.from_callable(obj, dim)
    raise TypeError(f"`obj` (the target) must be a numtk Target or a callable log-density; got {type(obj).__name__}")


# ---------------------------------------------------------------------------------------------------------
# Gaussian mixtures (and the Gaussian)

class _MixtureTarget(Target):
    """``rho = sum_k w_k N(x; m_k, S_k)`` with diagonal (K, d) or full (K, d, d) covariances."""

    has_grad = True
    can_sample = True
    has_exact_noised = True

    def __init__(self, means, covs, log_weights, *, name, log_Z, product_groups=None, factors=None,
                 params=None):
        K, d = means.shape
        self.means = means
        self.diag = covs.ndim == 2
        self.covs = covs
        self.log_weights = log_weights
        self._factors = factors  # per coordinate (weights, means, vars) of an exact product of 1-D mixtures
        if self.diag:
            sd = np.sqrt(covs)
        else:
            sd = np.sqrt(np.einsum("kii->ki", covs))
        z = _box_z(d)
        with np.errstate(over="ignore", invalid="ignore"):
            bounds = np.stack([(means - z * sd).min(axis=0), (means + z * sd).max(axis=0)], axis=1)
        if not (np.all(np.isfinite(bounds)) and np.all(bounds[:, 0] < bounds[:, 1]) and np.isfinite(log_Z)):
            which = "`mean` and `cov`" if name == "gaussian" else "`means` and `covs`"
            raise ValueError(f"{which} are so large (or so small) that the target's box or log Z is not "
                             "representable in double precision; rescale the problem")
        super().__init__(d, name=name, log_Z=log_Z, bounds=bounds, product_groups=product_groups,
                         params=params)
        self.has_hermite = self.diag
        self._chol0 = None if self.diag else np.linalg.cholesky(covs)

    def _components(self, tau):
        if tau == 0.0:
            return self.means, (self.covs if self.diag else self._chol0)
        a, s, _ = _ou_coefficients(tau)
        m = a * self.means
        if self.diag:
            return m, a * a * self.covs + s * s
        cov = a * a * self.covs + (s * s) * np.eye(self.dim)
        return m, np.linalg.cholesky(cov)

    def _eval(self, x, tau, score):
        means, cov = self._components(tau)
        K, d = means.shape
        n = len(x)
        out = np.empty((n, d)) if score else np.empty(n)
        if self.diag:
            logc = self.log_weights - 0.5 * np.sum(np.log(2.0 * np.pi * cov), axis=1)
            for sl in _chunks(n, K * d):
                diff = x[sl, None, :] - means[None]
                g = diff / cov[None]
                logt = logc - 0.5 * np.sum(diff * g, axis=2)
                if score:
                    r = special.softmax(logt, axis=1)
                    out[sl] = -np.einsum("nk,nkd->nd", r, g)
                else:
                    out[sl] = special.logsumexp(logt, axis=1)
            return out
        logdet = 2.0 * np.sum(np.log(np.einsum("kii->ki", cov)), axis=1)
        logc = self.log_weights - 0.5 * (d * _LOG_2PI + logdet)
        for sl in _chunks(n, K * d):
            xs = x[sl]
            logt = np.empty((len(xs), K))
            g = np.empty((len(xs), K, d)) if score else None
            for k in range(K):
                diff = (xs - means[k]).T
                sol = linalg.solve_triangular(cov[k], diff, lower=True)
                logt[:, k] = logc[k] - 0.5 * np.sum(sol * sol, axis=0)
                if score:
                    g[:, k, :] = linalg.solve_triangular(cov[k].T, sol, lower=False).T
            if score:
                out[sl] = -np.einsum("nk,nkd->nd", special.softmax(logt, axis=1), g)
            else:
                out[sl] = special.logsumexp(logt, axis=1)
        return out

    def _logp(self, x):
        return self._eval(x, 0.0, False)

    def _grad(self, x):
        return self._eval(x, 0.0, True)

    def _noised(self, x, tau, score):
        return self._eval(x, tau, score)

    def _sample(self, n, rng):
        K, d = self.means.shape
        p = np.exp(self.log_weights - special.logsumexp(self.log_weights))
        comp = rng.choice(K, size=n, p=p / p.sum())
        z = rng.standard_normal((n, d))
        if self.diag:
            return self.means[comp] + np.sqrt(self.covs[comp]) * z
        return self.means[comp] + np.einsum("nij,nj->ni", self._chol0[comp], z)

    def _hermite_cores(self, degree, loc, scale):
        if self._factors is not None:
            cores = []
            for i, (w, m, v) in enumerate(self._factors):
                mom = _hermite_gaussian_moments((m - loc[i]) / scale[i], v / scale[i] ** 2, degree)
                cores.append((w @ mom / scale[i]).reshape(1, degree + 1, 1))
            return cores
        K, d = self.means.shape
        mom = _hermite_gaussian_moments((self.means - loc) / scale, self.covs / scale**2, degree)  # (K, d, n)
        mom = mom / scale[None, :, None]
        w = np.exp(self.log_weights)
        if d == 1:
            return [(w @ mom[:, 0, :]).reshape(1, degree + 1, 1)]
        cores = [(w[:, None] * mom[:, 0, :]).T[None, :, :]]          # (1, n, K)
        for i in range(1, d - 1):
            core = np.zeros((K, degree + 1, K))
            core[np.arange(K), :, np.arange(K)] = mom[:, i, :]
            cores.append(core)
        cores.append(mom[:, d - 1, :][:, :, None])                    # (K, n, 1)
        return cores


def _check_cov(cov, d):
    """A scalar, (d,) diagonal or (d, d) SPD covariance as (d,) variances or a (d, d) matrix."""
    c = as_array(cov, "cov")
    check_finite(c, "cov")
    c = c.astype(np.float64)
    if c.ndim == 0:
        c = np.full(d, float(c))
    if c.ndim == 1:
        if c.shape != (d,):
            raise ValueError(f"`cov` must be a scalar, shape ({d},) or ({d}, {d}) (d = len(`mean`)); got shape "
                             f"{c.shape}")
        if np.any(c <= 0):
            raise ValueError("`cov` must be positive (a variance per coordinate)")
        return c
    if c.shape != (d, d):
        raise ValueError(f"`cov` must be a scalar, shape ({d},) or ({d}, {d}) (d = len(`mean`)); got shape {c.shape}")
    if not np.allclose(c, c.T, rtol=1e-10, atol=1e-12 * np.abs(c).max()):
        raise ValueError("`cov` must be symmetric")
    c = 0.5 * (c + c.T)
    try:
        np.linalg.cholesky(c)
    except np.linalg.LinAlgError:
        raise ValueError("`cov` must be positive definite") from None
    if np.count_nonzero(c - np.diag(np.diag(c))) == 0:
        return np.diag(c).copy()
    return c


def gaussian(mean: ArrayLike, cov: ArrayLike) -> Target:
    r"""Unnormalised Gaussian :math:`\rho(x) = \exp(-\tfrac12 (x - m)^T \Sigma^{-1} (x - m))`.

    Parameters
    ----------
    mean : array_like of shape (d,)
        The mean m.
    cov : float or array_like of shape (d,) or (d, d)
        Covariance: a variance shared by all coordinates, the diagonal, or a symmetric positive
        definite matrix.

    Returns
    -------
    Target
        ``log_Z = ½ log det(2πΣ)``; exact samples; noised density
        :math:`N(e^{-\tau} m, e^{-2\tau}\Sigma + (1 - e^{-2\tau}) I)` times Z. A diagonal covariance
        makes a product target (``product_groups = [[0], ..., [d-1]]``, ``has_hermite``).

    Raises
    ------
    ValueError
        ``mean`` not 1-D, ``cov`` of the wrong shape, not symmetric or not positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling._targets import gaussian
    >>> tgt = gaussian([1.0, -1.0], 2.0)
    >>> bool(np.isclose(tgt.log_Z, np.log(2 * np.pi * 2.0)))
    True
    >>> tgt.sample(3, rng=0).shape
    (3, 2)
    >>> float(tgt.log_noised_density([0.0, 0.0], 50.0) - tgt.log_Z)   # fully noised: N(0, I)
    -1.8378770664093453
    """
    m = as_array(mean, "mean", ndim=1)
    check_finite(m, "mean")
    m = m.astype(np.float64)
    d = m.shape[0]
    if d == 0:
        raise ValueError("`mean` must not be empty")
    c = _check_cov(cov, d)
    if c.ndim == 1:
        log_Z = 0.5 * float(np.sum(np.log(2.0 * np.pi) + np.log(c)))
        covs, groups = c[None, :], [[i] for i in range(d)]
    else:
        log_Z = 0.5 * float(np.linalg.slogdet(2.0 * np.pi * c)[1])
        covs, groups = c[None, :, :], None
    return _MixtureTarget(m[None, :], covs, np.array([log_Z]), name="gaussian", log_Z=log_Z,
                          product_groups=groups, params={"mean": m, "cov": c})


_PRESETS = ("25gmm", "9gmm", "gmm40")
def _grid_product(points, var, name):
    g = np.asarray(points, dtype=np.float64)
    k = len(g)
    means = np.array([[a, b] for a in g for b in g])
    covs = np.full((k * k, 2), var)
    logw = np.full(k * k, -math.log(k * k))
    fac = (np.full(k, 1.0 / k), g, np.full(k, var))
    return _MixtureTarget(means, covs, logw, name=name, log_Z=0.0, product_groups=[[0], [1]],
                          factors=[fac, fac], params={"means": means, "covs": covs, "weights": np.exp(logw)})


def gaussian_mixture(means: ArrayLike | None = None, covs: ArrayLike | None = None,
                     weights: ArrayLike | None = None, *, name: str | None = None, dim: int = 2) -> Target:
    r"""Gaussian mixture :math:`\rho(x) = \sum_k w_k N(x; m_k, \Sigma_k)`, with ``log_Z = log Σ w_k``.

    Parameters
    ----------
    means : array_like of shape (K, d), optional
        Component means (required unless ``name`` is given).
    covs : float or array_like, optional
        Component covariances: a scalar variance shared by all, shape ``(K,)`` (one isotropic
        variance per component), ``(K, d)`` (diagonals) or ``(K, d, d)`` (full SPD matrices); a
        leading axis of length 1 is broadcast to all components. Default: identity.
    weights : array_like of shape (K,), optional
        Positive weights (default ``1/K``); they are not renormalised, so ``Z = Σ w``.
    name : {'25gmm', '9gmm', 'gmm40'}, optional
        A preset (then ``means``, ``covs`` and ``weights`` must be None):

        * ``'25gmm'``: means ``{-10, -5, 0, 5, 10}^2``, covariance ``0.3 I``, weights 1/25 (an exact
          product of two 1-D five-mode mixtures);
        * ``'9gmm'``: means ``linspace(-5, 5, 3)^2``, covariance ``0.3 I``, weights 1/9 (also a product);
        * ``'gmm40'``: numtk's pinned GMM-40 (sde_sampler's ``"fab"``): 40 means drawn as
          ``(U[0,1) - 0.5) * 80`` by torch's CPU generator with seed 42 (shipped as
          ``numtk/datasets/data/gmm40_means.csv``), standard deviation ``softplus(1)`` per
          coordinate, equal weights.

        All presets are normalised (``log_Z = 0``).
    dim : int, default 2
        Dimension of a preset (only 2 is defined); ignored when ``means`` is given.

    Returns
    -------
    Target
        Closed-form noised density (components ``(e^{-τ} m_k, e^{-2τ} Σ_k + (1 - e^{-2τ}) I)``) and score
        (responsibility-weighted :math:`\Sigma_{k,\tau}^{-1}(m_{k,\tau} - x)`), exact samples, and the
        Hermite tensor train when every covariance is diagonal (CP rank K; rank 1 for the product
        presets).

    Raises
    ------
    ValueError
        Unknown preset, missing or inconsistent means/covariances/weights, non-positive weights or
        covariances that are not symmetric positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling._targets import gaussian_mixture
    >>> tgt = gaussian_mixture(name="25gmm")
    >>> tgt.dim, tgt.log_Z, tgt.product_groups
    (2, 0.0, [[0], [1]])
    >>> mix = gaussian_mixture([[-1.0], [2.0]], covs=[0.5, 0.2], weights=[1.0, 3.0])
    >>> bool(np.isclose(mix.log_Z, np.log(4.0)))
    True
    >>> mix.sample(4, rng=1).shape
    (4, 1)
    """
    if name is not None:
        if name not in _PRESETS:
            raise ValueError(f"`name` must be one of {', '.join(map(repr, _PRESETS))} or None; got {name!r}")
        if any(v is not None for v in (means, covs, weights)):
            raise ValueError("`means`, `covs` and `weights` must be None when a preset `name` is given")
        if check_dim(dim, "dim") != 2:
            raise ValueError(f"preset {name!r} is defined for dim=2 only; got dim={dim}")
        if name == "25gmm":
            return _grid_product([-10.0, -5.0, 0.0, 5.0, 10.0], 0.3, "25gmm")
        if name == "9gmm":
            return _grid_product(np.linspace(-5.0, 5.0, 3), 0.3, "9gmm")
        from numtk.datasets import load_gmm40

        table = load_gmm40()
        m = table.means
        covs_ = np.full((40, 2), table.std**2)
        logw = np.full(40, -math.log(40.0))
        return _MixtureTarget(m, covs_, logw, name="gmm40", log_Z=0.0, product_groups=None,
                              params={"means": m, "covs": covs_, "weights": np.exp(logw)})
    if means is None:
        raise ValueError("`means` is required unless a preset `name` is given")
    m = as_array(means, "means", ndim=2)
    check_finite(m, "means")
    m = m.astype(np.float64)
    K, d = m.shape
    if K == 0 or d == 0:
        raise ValueError(f"`means` must have shape (K, d) with K, d >= 1; got {m.shape}")
    if covs is None:
        c = np.ones((K, d))
    else:
        c = as_array(covs, "covs")
        check_finite(c, "covs")
        c = c.astype(np.float64)
        if c.ndim == 0:
            c = np.full((K, d), float(c))
        elif c.ndim == 1:
            if c.shape[0] not in (1, K):
                raise ValueError(f"1-D `covs` must hold one isotropic variance per component ({K}); "
                                 f"got shape {c.shape}")
            c = np.repeat(np.broadcast_to(c, (K,))[:, None], d, axis=1)
        elif c.ndim == 2:
            if c.shape not in ((1, d), (K, d)):
                raise ValueError(f"2-D `covs` must hold diagonals of shape ({K}, {d}); got shape {c.shape}")
            c = np.array(np.broadcast_to(c, (K, d)))
        elif c.ndim == 3:
            if c.shape not in ((1, d, d), (K, d, d)):
                raise ValueError(f"3-D `covs` must have shape ({K}, {d}, {d}); got shape {c.shape}")
            c = np.array(np.broadcast_to(c, (K, d, d)))
        else:
            raise ValueError(f"`covs` must be a scalar or a 1-, 2- or 3-D array; got shape {c.shape}")
        if c.ndim == 2 and np.any(c <= 0):
            raise ValueError("`covs` must be positive")
        if c.ndim == 3:
            if not np.allclose(c, np.swapaxes(c, 1, 2), rtol=1e-10, atol=1e-12 * np.abs(c).max()):
                raise ValueError("`covs` must be symmetric")
            c = 0.5 * (c + np.swapaxes(c, 1, 2))
            try:
                np.linalg.cholesky(c)
            except np.linalg.LinAlgError:
                raise ValueError("`covs` must be positive definite") from None
            off = c - np.einsum("kii->ki", c)[:, :, None] * np.eye(d)
            if np.count_nonzero(off) == 0:
                c = np.einsum("kii->ki", c).copy()
    if weights is None:
        w = np.full(K, 1.0 / K)
    else:
        w = as_array(weights, "weights", ndim=1)
        check_finite(w, "weights")
        w = w.astype(np.float64)
        if w.shape != (K,):
            raise ValueError(f"`weights` must have shape ({K},) (one per component, a row of `means`); got shape "
                             f"{w.shape}")
        if np.any(w <= 0):
            raise ValueError("`weights` must be positive")
    logw = np.log(w)
    groups = [[i] for i in range(d)] if (K == 1 and c.ndim == 2) else None
    return _MixtureTarget(m, c, logw, name="gaussian_mixture", log_Z=float(special.logsumexp(logw)),
                          product_groups=groups, params={"means": m, "covs": c, "weights": w})


# ---------------------------------------------------------------------------------------------------------
# product targets

class _ProductTarget(Target):
    """``rho(x) = prod_i f_i(x_i)`` for univariate factors ``f_i`` (shared factor objects)."""

    has_grad = True
    can_sample = True
    has_exact_noised = True
    has_hermite = True

    def __init__(self, factors, *, name, params):
        d = len(factors)
        self._factors = factors
        groups: dict[int, tuple] = {}
        for i, f in enumerate(factors):
            groups.setdefault(id(f), (f, []))[1].append(i)
        self._groups = [(f, np.array(idx)) for f, idx in groups.values()]
        tail = _BOX_MASS_TAIL / d
        bounds = np.array([f.bounds(tail) for f in factors])
        log_Z = float(math.fsum(f.log_Z for f in factors))
        super().__init__(d, name=name, log_Z=log_Z, bounds=bounds,
                         product_groups=[[i] for i in range(d)], params=params)

    def _logp(self, x):
        out = np.zeros(len(x))
        for f, idx in self._groups:
            out += f.logf(x[:, idx]).sum(axis=1)
        return out

    def _grad(self, x):
        out = np.empty_like(x)
        for f, idx in self._groups:
            out[:, idx] = f.dlogf(x[:, idx])
        return out

    def _noised(self, x, tau, score):
        if tau == 0.0:
            return self._grad(x) if score else self._logp(x)
        n = len(x)
        if score:
            out = np.empty_like(x)
            for f, idx in self._groups:
                out[:, idx] = f.noised(x[:, idx].ravel(), tau, True).reshape(n, len(idx))
            return out
        out = np.zeros(n)
        for f, idx in self._groups:
            out += f.noised(x[:, idx].ravel(), tau, False).reshape(n, len(idx)).sum(axis=1)
        return out

    def _sample(self, n, rng):
        out = np.empty((n, self.dim))
        for f, idx in self._groups:
            out[:, idx] = f.sample(n * len(idx), rng).reshape(n, len(idx))
        return out

    def _hermite_cores(self, degree, loc, scale):
        return [f.hermite(degree, loc[i], scale[i]).reshape(1, degree + 1, 1)
                for i, f in enumerate(self._factors)]


_MANY_WELL_Z = 11784.509265127823


def many_well(d: int = 32) -> Target:
    r"""Many-well target: d/2 independent pairs of a quartic double well and a Gaussian coordinate.

    .. math::
        \log \rho(x) = \sum_{i\ \mathrm{even}} (-x_i^4 + 6 x_i^2 + \tfrac12 x_i)
                       + \sum_{i\ \mathrm{odd}} (-\tfrac12 x_i^2)

    with 0-based indices (the gfn-diffusion / FAB pairing ``x.view(-1, d/2, 2)``).

    Parameters
    ----------
    d : int, default 32
        Even dimension >= 2.

    Returns
    -------
    Target
        ``log_Z = (d/2)(log 11784.509265127823 + ½ log 2π)`` (164.69567531318188 for d = 32); exact
        samples (rejection from ``0.2 N(-1.7, 0.5²) + 0.8 N(1.7, 0.5²)`` with envelope 3Z for the
        quartic coordinates); the noised density by per-coordinate Gauss-Legendre quadrature; rank-1
        Hermite tensor train.

    Raises
    ------
    ValueError
        ``d`` odd or < 2.

    Notes
    -----
    The noised quartic factor :math:`\int f(y) N(x; a y, s^2) dy` (:math:`a = e^{-\tau}`,
    :math:`s^2 = 1 - e^{-2\tau}`) is integrated with 200 Gauss-Legendre nodes on a window around the
    integrand's mass (see the factor quadrature), so the kernel is resolved at every :math:`\tau > 0`;
    relative accuracy about 1e-12 in the bulk. The bounds are the exact quantiles of each
    coordinate's marginal at tail mass ``1e-6 / d``.

    Examples
    --------
    >>> from numtk.sampling._targets import many_well
    >>> tgt = many_well(32)
    >>> round(tgt.log_Z, 10)
    164.6956753132
    >>> import numpy as np
    >>> round(float(many_well(2).log_noised_density([0.0, 0.0], 0.5)), 8)   # 7.8456193691 - 0
    7.84561937
    """
    d = check_dim(d, "d", minimum=2)
    if d % 2:
        raise ValueError(f"`d` must be even (pairs of coordinates); got {d}")
    q, g = _many_well_factor(), _StdNormalFactor()
    return _ProductTarget([q if i % 2 == 0 else g for i in range(d)], name="many_well", params={"d": d})


def double_well(d: int = 5, m: int = 5, delta: float = 4.0) -> Target:
    r"""Double-well target (sde_sampler's ``MultiWell``): m quartic wells and d - m Gaussian coordinates.

    .. math::
        \log \rho(x) = -\sum_{i < m} (x_i^2 - \delta)^2 - \tfrac12 \sum_{i \ge m} x_i^2

    Parameters
    ----------
    d : int, default 5
        Dimension >= 1.
    m : int, default 5
        Number of double-well coordinates, ``0 <= m <= d`` (the first m).
    delta : float, default 4.0
        Position parameter ``0 < δ <= 1e8`` (wells at ``±sqrt(δ)``).

    Returns
    -------
    Target
        ``log_Z = m log Z_δ + ((d - m)/2) log 2π`` with ``Z_δ = ∫ exp(-(x² - δ)²) dx`` by adaptive
        quadrature (cached); exact samples by rejection from ``½ N(±sqrt(δ), 1/δ)`` (envelope 3 on the
        normalised density, raised automatically for a δ where 3 would not bound it); noised density by
        per-coordinate quadrature; rank-1 Hermite tensor train.

    Raises
    ------
    ValueError
        ``m`` outside ``[0, d]`` or ``delta <= 0``.

    Examples
    --------
    >>> from numtk.sampling._targets import double_well
    >>> round(double_well(5, 5, 4.0).log_Z, 12)
    -0.541055512879
    >>> round(double_well(50, 5, 2.0).log_Z, 10)
    42.8172426775
    """
    d = check_dim(d, "d", minimum=1)
    m = check_int(m, "m", minimum=0)
    if m > d:
        raise ValueError(f"`m` must lie in [0, `d`] = [0, {d}]; got {m}")
    # wells at +-sqrt(delta) of width 1/sqrt(delta): the quadratures resolve delta up to 1e8
    delta = check_real(delta, "delta", low=0.0, high=1e8, low_open=True)
    w, g = _double_well_factor(delta), _StdNormalFactor()
    return _ProductTarget([w if i < m else g for i in range(d)], name="double_well",
                          params={"d": d, "m": m, "delta": delta})


# ---------------------------------------------------------------------------------------------------------
# funnel

class _FunnelTarget(Target):
    has_grad = True
    can_sample = True
    has_exact_noised = True

    def __init__(self, d, sigma):
        self.sigma = sigma
        tail = _BOX_MASS_TAIL / d
        z0 = float(stats.norm.isf(tail / 2.0))
        b = self._x_bound(tail)
        bounds = np.array([[-sigma * z0, sigma * z0]] + [[-b, b]] * (d - 1))
        super().__init__(d, name="funnel", log_Z=0.0, bounds=bounds, product_groups=None,
                         params={"d": d, "sigma": sigma})

    def _x_bound(self, tail):
        """b with P(|x_i| > b) = tail for the marginal of x_i, i >= 1 (a scale mixture of normals)."""
        nodes, logw = _gauss_legendre(2000)
        u = 12.0 * self.sigma * nodes
        logpu = logw + math.log(12.0 * self.sigma) + stats.norm.logpdf(u, scale=self.sigma)

        def log_tail(logb):
            return special.logsumexp(logpu + math.log(2.0) + special.log_ndtr(-np.exp(logb - 0.5 * u)))

        return float(math.exp(optimize.brentq(lambda lb: log_tail(lb) - math.log(tail), -5.0,
                                              6.0 * self.sigma + 10.0, xtol=1e-12)))

    def _logp(self, x):
        x0 = x[:, 0]
        r = np.sum(x[:, 1:] ** 2, axis=1)
        d1 = self.dim - 1
        return (-0.5 * (x0 / self.sigma) ** 2 - math.log(self.sigma) - 0.5 * _LOG_2PI
                - 0.5 * d1 * (_LOG_2PI + x0) - 0.5 * r * np.exp(-x0))

    def _grad(self, x):
        x0 = x[:, 0]
        e = np.exp(-x0)
        out = np.empty_like(x)
        out[:, 0] = -x0 / self.sigma**2 - 0.5 * (self.dim - 1) + 0.5 * np.sum(x[:, 1:] ** 2, axis=1) * e
        out[:, 1:] = -x[:, 1:] * e[:, None]
        return out

    def _sample(self, n, rng):
        x0 = self.sigma * rng.standard_normal(n)
        out = np.empty((n, self.dim))
        out[:, 0] = x0
        out[:, 1:] = np.exp(0.5 * x0)[:, None] * rng.standard_normal((n, self.dim - 1))
        return out

    def _mode(self, u, c, w, a, s, r):
        """Maximiser of the log-integrand over u and its curvature (floored at ``1/w^2 + 1/sigma^2``)."""
        d1 = self.dim - 1
        base = 1.0 / w**2 + 1.0 / self.sigma**2
        log_a2, log_s2 = 2.0 * math.log(a), 2.0 * math.log(s)
        for _ in range(60):
            logv = np.logaddexp(log_a2 + u, log_s2)
            q = np.exp(log_a2 + u - logv)
            b = 0.5 * r * np.exp(-logv)
            g1 = -u / self.sigma**2 - (u - c) / w**2 + q * (b - 0.5 * d1)
            g2 = -base + q * (1.0 - q) * (b - 0.5 * d1) - q * q * b
            step = np.where(g2 < 0, -g1 / np.minimum(g2, -base), g1 / base)
            step = np.clip(step, -2.0, 2.0)
            u = u + step
            if np.all(np.abs(step) <= 1e-10 * np.maximum(1.0, np.abs(u))):
                break
        logv = np.logaddexp(log_a2 + u, log_s2)
        q = np.exp(log_a2 + u - logv)
        b = 0.5 * r * np.exp(-logv)
        curv = base - q * (1.0 - q) * (b - 0.5 * d1) + q * q * b
        return u, np.maximum(curv, base)

    def _noised(self, x, tau, score):
        if tau < _FUNNEL_EXACT_TAU:
            return self._grad(x) if score else self._logp(x)
        a, s, w = _ou_coefficients(tau)
        sig, d1 = self.sigma, self.dim - 1
        x0 = x[:, 0]
        r = np.sum(x[:, 1:] ** 2, axis=1)
        c = x0 / a
        hw = _KERNEL_HALF_WIDTH * w
        ulim = _KERNEL_HALF_WIDTH * sig
        lo = np.maximum(-ulim, c - hw)
        hi = np.minimum(ulim, c + hw)
        # the other two factors pull the integrand's mass away from the kernel's centre c: add a
        # window around the maximiser u* of the log-integrand (damped Newton from c)
        ustar, curv = self._mode(np.clip(c, -ulim, ulim), c, w, a, s, r)
        half_star = _KERNEL_HALF_WIDTH / np.sqrt(curv)
        empty = lo >= hi
        lo = np.where(empty, ustar - half_star, np.minimum(lo, ustar - half_star))
        hi = np.where(empty, ustar + half_star, np.maximum(hi, ustar + half_star))
        nodes, logw = _gauss_legendre(_FUNNEL_NODES)
        log_a2, log_s2 = 2.0 * math.log(a), math.log(s * s)
        n = len(x)
        out = np.empty((n, self.dim)) if score else np.empty(n)
        for sl in _chunks(n, len(nodes)):
            half = 0.5 * (hi[sl] - lo[sl])
            u = (0.5 * (hi[sl] + lo[sl]))[:, None] + half[:, None] * nodes
            t = (u - c[sl, None]) / w
            logv = np.logaddexp(log_a2 + u, log_s2)
            inv_v = np.exp(-logv)
            logt = (logw + np.log(half)[:, None] - 0.5 * (u / sig) ** 2 - 0.5 * t * t
                    - 0.5 * d1 * logv - 0.5 * r[sl, None] * inv_v)
            if score:
                p = special.softmax(logt, axis=1)
                out[sl, 0] = (p * t).sum(axis=1) / s
                out[sl, 1:] = -x[sl, 1:] * (p * inv_v).sum(axis=1)[:, None]
            else:
                out[sl] = special.logsumexp(logt, axis=1)
        if not score:
            out += -math.log(sig) - _LOG_2PI - math.log(s) - 0.5 * d1 * _LOG_2PI
        return out


def funnel(d: int = 10, sigma: float = 3.0) -> Target:
    r"""Neal's funnel: :math:`x_0 \sim N(0, \sigma^2)`, :math:`x_i \mid x_0 \sim N(0, e^{x_0})`, i = 1..d-1.

    Parameters
    ----------
    d : int, default 10
        Dimension >= 2.
    sigma : float, default 3.0
        Standard deviation of :math:`x_0` (``0 < sigma <= 100``; beyond, the scale of the others overflows); ``sigma=1.0`` is gfn-diffusion's "easy" funnel.

    Returns
    -------
    Target
        Normalised (``log_Z = 0``); exact samples; the exact noised density and score by quadrature
        (see Notes). No product structure and no Hermite tensor train (the Hermite series diverges).

    Raises
    ------
    ValueError
        ``d < 2`` or ``sigma <= 0``.

    Notes
    -----
    With :math:`a = e^{-\tau}`, :math:`s^2 = 1 - e^{-2\tau}` and :math:`u` the value of :math:`x_0`
    before noising,

    .. math::
        \rho_\tau(x) = \int N(u; 0, \sigma^2)\, N(x_0; a u, s^2)
                       \prod_{i \ge 1} N(x_i; 0, a^2 e^u + s^2)\, du,

    integrated with 3000 Gauss-Legendre nodes on :math:`[-12\sigma, 12\sigma]` intersected with
    :math:`x_0/a \pm 12 s/a` (the kernel's window), in log space. Restricting to the kernel's window
    resolves small :math:`\tau` as well, so the quadrature is used for every :math:`\tau \ge 10^{-12}`
    and the exact target below. (The spec's switch to the exact score below :math:`\tau = 10^{-4}` is
    for a fixed grid on [-15, 15]; the windowed rule is exact there, where the target's own score
    would be off by :math:`O(\tau e^{-x_0})` in the neck.) For :math:`|x_0| > 12\sigma a` the result is
    only approximate (density below :math:`e^{-72}`).

    ``bounds``: :math:`x_0 \in \pm z\sigma` and :math:`x_i \in \pm b` with the exact marginal tail
    quantiles at mass ``1e-6 / d`` per coordinate; :math:`x_i` is a normal scale mixture with heavy
    tails, so b is large (about 2.6e3 for d = 10, σ = 3), a faithful 1 - 1e-6 box rather than a
    practical design box.

    Examples
    --------
    >>> from numtk.sampling._targets import funnel
    >>> tgt = funnel(10)
    >>> round(float(tgt.log_noised_density([0.0] * 10, 0.5)), 8)
    -9.33989697
    >>> tgt.sample(5, rng=0).shape
    (5, 10)
    """
    d = check_dim(d, "d", minimum=2)
    # x_0 ~ N(0, sigma^2) sets the scale e^{x_0 / 2} of the others: beyond sigma ~ 100 it overflows
    sigma = check_real(sigma, "sigma", low=0.0, high=100.0, low_open=True)
    return _FunnelTarget(d, sigma)
