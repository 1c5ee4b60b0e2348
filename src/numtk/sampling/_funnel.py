"""Neal's funnel as a target: exact samples and the exact noised density and score by quadrature."""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special, stats

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_real
from numtk.sampling._target import Target, check_dim
from numtk.sampling._target_numerics import (_BOX_MASS_TAIL, _KERNEL_HALF_WIDTH, _LOG_2PI, _chunks, _gauss_legendre,
                                             _ou_coefficients)

__all__ = ["funnel"]

_FUNNEL_NODES = 3000         # Gauss-Legendre nodes of the funnel quadrature over u
_FUNNEL_EXACT_TAU = 1e-12    # below this tau the funnel uses the exact target (see funnel's Notes)


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


@constraints(d="int>=2", sigma="real>0")
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
    >>> from numtk.sampling import funnel
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
