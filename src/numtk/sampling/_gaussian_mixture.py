"""Gaussian mixtures (and the Gaussian) as targets: closed-form noised densities, scores, exact samples
and Hermite tensor trains (diagonal covariances)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy import linalg, special

from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite
from numtk.sampling._target import Target, check_dim
from numtk.sampling._target_numerics import _LOG_2PI, _box_z, _chunks, _hermite_gaussian_moments, _ou_coefficients

__all__ = ["gaussian", "gaussian_mixture"]


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
                    r = _responsibilities(logt)
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
                out[sl] = -np.einsum("nk,nkd->nd", _responsibilities(logt), g)
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


def _responsibilities(logt: np.ndarray) -> np.ndarray:
    """Softmax over the components (axis 1). One component has responsibility 1 everywhere, also where its
    term underflows to -inf (a point ~1e154 from the mean), so a Gaussian's score stays finite there."""
    if logt.shape[1] == 1:
        return np.ones_like(logt)
    return special.softmax(logt, axis=1)


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


@constraints(mean="array1d", cov=("real>0", "array1d", "array2d"))
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
    >>> from numtk.sampling import gaussian
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


@constraints(means="array2d", covs=("real>0", "array1d"), weights="array1d", name="option", dim="int>=1")
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
        Dimension of a preset (only 2 is defined); checked, but not used, when ``means`` is given.

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
    >>> from numtk.sampling import gaussian_mixture
    >>> tgt = gaussian_mixture(name="25gmm")
    >>> tgt.dim, tgt.log_Z, tgt.product_groups
    (2, 0.0, [[0], [1]])
    >>> mix = gaussian_mixture([[-1.0], [2.0]], covs=[0.5, 0.2], weights=[1.0, 3.0])
    >>> bool(np.isclose(mix.log_Z, np.log(4.0)))
    True
    >>> mix.sample(4, rng=1).shape
    (4, 1)
    """
    dim = check_dim(dim, "dim")  # checked whether or not a preset uses it
    if name is not None:
        if name not in _PRESETS:
            raise ValueError(f"`name` must be one of {', '.join(map(repr, _PRESETS))} or None; got {name!r}")
        if any(v is not None for v in (means, covs, weights)):
            raise ValueError("`means`, `covs` and `weights` must be None when a preset `name` is given")
        if dim != 2:
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
