"""Product targets of univariate factors: the many-well and double-well benchmarks.

Each factor is a standard normal (invariant under the OU noising) or ``exp(p(y))`` for a polynomial p of
even degree; mass, quantiles, exact samples (rejection) and the noised density (quadrature) are computed
per factor.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import integrate, optimize, special, stats

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int, check_real
from numtk.sampling._target import Target, check_dim
from numtk.sampling._target_numerics import (_BOX_MASS_TAIL, _KERNEL_HALF_WIDTH, _LOG_2PI, _chunks, _gauss_legendre,
                                             _hermite_gaussian_moments, _hermite_values, _ou_coefficients)

__all__ = ["many_well", "double_well"]

_SUPPORT_DROP = 750.0        # quadrature support of a 1-D factor: log f >= max log f - 750
_CORE_DROP = 50.0            # Hermite coefficients of a 1-D factor: log f >= max log f - 50
_FACTOR_NODES = 200          # Gauss-Legendre nodes of the 1-D noised-factor quadrature


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


@constraints(d="int>=2")
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
    >>> from numtk.sampling import many_well
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


@constraints(d="int>=1", m="int>=0", delta="real>0")
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
    >>> from numtk.sampling import double_well
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
