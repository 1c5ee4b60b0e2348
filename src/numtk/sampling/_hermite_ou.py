r"""Exact linear path of the HJB sampler: Cole-Hopf, the OU (Mehler) semigroup and a Hermite TT (spec §2.6).

Write the noised target as :math:`\tilde\rho_\tau = \gamma f_\tau` in preconditioned coordinates
``y`` (``x = loc + scale * y``, :math:`\tilde\rho(y) = \rho(loc + scale \odot y)`, no Jacobian).
Then :math:`\partial_\tau f_\tau = L f_\tau` with the OU generator :math:`L = \Delta - y\cdot\nabla`,
whose eigenfunctions are the orthonormal probabilists' Hermite products :math:`h_\alpha` with
eigenvalues :math:`-|\alpha|`. If :math:`a_\alpha = \int \tilde\rho\, h_\alpha\, dy` has TT cores
``A_k[r_{k-1}, i, r_k]``, the propagated coefficients :math:`a_\alpha e^{-|\alpha|\tau}` have cores
``A_k[:, i, :] * exp(-i tau)``: propagation is exact and keeps the ranks.

Sampler quantities (sampler time ``t``, ``tau = T - t``), all in y-coordinates:

* ``W(y, t) = log f_{T-t}(y)`` and ``grad W = grad f / f``;
* the score of the noised (preconditioned) target, ``grad V = grad W - y``;
* ``log Z = log a_0 + sum(log scale)``.

In x-coordinates ``x = loc + scale * y`` the log-density of the noised variable
``X_tau = loc + scale * Y_tau`` is ``W(y) + log gamma(y) - sum(log scale)`` and its gradient is
``(grad W(y) - y) / scale`` (elementwise).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_int, check_option, check_real, per_coordinate
from numtk.ftt import FunctionalTT

__all__ = ["HermiteOUSolution", "hermite_solution"]

_BULK_RADIUS = 4.0
_MAX_HERMITE_DEGREE = 2000  # Hermite degree per coordinate (quadrature with 4 (degree + 1) nodes)


def _check_tau(tau: Any) -> float:
    return check_real(tau, "tau", low=0.0)


@constraints(cores="array2d", loc="real", scale="real>0", times="array1d", T="real>=0", hermite_tol="prob_open",
             eps="prob")
class HermiteOUSolution:
    r"""Exact Cole-Hopf/OU propagation of :math:`f_\tau = \tilde\rho_\tau/\gamma` in preconditioned coordinates.

    The coefficient tensor :math:`a_\alpha = \int \rho(loc + scale \odot y)\, h_\alpha(y)\, dy` (no
    Jacobian, so :math:`a_0 = Z / \prod_k scale_k`) is stored in TT format; the OU semigroup acts
    on it exactly, :math:`f_\tau = \sum_\alpha a_\alpha e^{-|\alpha|\tau} h_\alpha`, by scaling slice i
    of every core by :math:`e^{-i\tau}` (ranks unchanged).

    Parameters
    ----------
    cores : sequence of array_like
        TT cores of the coefficient tensor; core k has shape ``(r_{k-1}, n_k, r_k)`` with
        ``r_0 = r_d = 1`` and ``n_k = degree_k + 1 >= 1``.
    loc, scale : float or array_like of shape (d,)
        The preconditioning ``x = loc + scale * y`` used to build ``cores`` (``scale > 0``).
    times : array_like of shape (N + 1,), optional
        Sampler time grid, strictly increasing from 0. Its noising times ``tau = T - times`` are the
        grid of :meth:`tau_min`.
    T : float, optional
        Final sampler time (default ``times[-1]``). Without ``times`` the grid of :meth:`tau_min` is
        ``0`` and 241 geometric points in ``[1e-4, 20]``, restricted to ``[0, T]`` when ``T`` is given.
    hermite_tol : float, default 1e-10
        Relative tail-energy threshold of :meth:`tau_min`.
    eps : float, default 1e-12
        Positivity threshold of :meth:`log_f_and_grad`.

    Attributes
    ----------
    dim : int
        d.
    degrees : tuple of int
        ``n_k - 1`` per coordinate.
    ranks : tuple of int
        ``(1, r_1, ..., r_{d-1}, 1)``.
    loc, scale : ndarray of shape (d,)
        The preconditioning.
    log_Z : float
        ``log a_0 + sum(log scale)``, the log normalising constant of ``rho``.
    log_a0 : float
        ``log a_0``, the log mass of the preconditioned target ``rho(loc + scale * y)``.
    times, T : ndarray or None, float or None
        As given.
    n_fallback : int
        Positivity fallbacks counted over all calls of :meth:`log_f_and_grad` (and the methods
        built on it).

    Notes
    -----
    The series converges in :math:`L^2(\gamma)` at time :math:`\tau` iff
    :math:`\int \tilde\rho_\tau^2/\gamma < \infty`: for all :math:`\tau` when Gaussian-tailed
    coordinates have variance below 2 in y-units, never for the funnel or heavier-than-Gaussian
    tails. At degree n the truncation error decays like :math:`e^{-n\tau}` for narrow components,
    so below :meth:`tau_min` the truncated series should not be trusted. The truncated
    :math:`f_\tau` can be negative in the far tails: see :meth:`log_f_and_grad`.

    References
    ----------
    .. [1] "Leveraging Low-Rank Structures for High-Dimensional Score-Based Sampling", ICML 2026.
    .. [2] I. V. Oseledets, "Tensor-train decomposition", SIAM J. Sci. Comput. 33 (2011).

    Examples
    --------
    The unnormalised Gaussian :math:`\rho = e^{-(x - 1)^2 / (2 \cdot 0.5)}` has
    :math:`a_k = \sqrt{\pi}\, E[h_k(Y)]`, :math:`Y \sim N(1, 0.5)`, from
    :math:`E[He_n] = \sum_j \frac{n!}{j!(n-2j)!} m^{n-2j} ((s^2 - 1)/2)^j`:

    >>> import math
    >>> import numpy as np
    >>> from numtk.sampling._hermite_ou import HermiteOUSolution
    >>> n, m, s2 = 60, 1.0, 0.5
    >>> e = np.zeros(n + 1); e[0] = 1.0; e[1] = m
    >>> for k in range(1, n):   # E[h_{k+1}] = (m E[h_k] + (s2 - 1) sqrt(k) E[h_{k-1}]) / sqrt(k + 1)
    ...     e[k + 1] = (m * e[k] + (s2 - 1) * math.sqrt(k) * e[k - 1]) / math.sqrt(k + 1)
    >>> sol = HermiteOUSolution([math.sqrt(math.pi) * e.reshape(1, -1, 1)], loc=0.0, scale=1.0)
    >>> round(sol.log_Z, 12) == round(0.5 * math.log(math.pi), 12)
    True
    >>> logf, grad, n_fb = sol.log_f_and_grad([[0.5]], tau=0.2)
    >>> a, v = math.exp(-0.2), math.exp(-0.4) * s2 + 1 - math.exp(-0.4)   # closed form of rho_tau
    >>> exact = 0.5 * math.log(s2 / v) - (0.5 - a * m) ** 2 / (2 * v) + 0.5 ** 2 / 2 + 0.5 * math.log(2 * math.pi)
    >>> bool(abs(logf[0] - exact) < 1e-12), n_fb
    (True, 0)
    """

    def __init__(self, cores: Sequence[Any], *, loc: Any, scale: Any, times: Any = None, T: Any = None,
                 hermite_tol: float = 1e-10, eps: float = 1e-12) -> None:
        if isinstance(cores, np.ndarray) or not isinstance(cores, (list, tuple)):
            raise TypeError("`cores` must be a list or tuple of 3-D arrays")
        if len(cores) == 0:
            raise ValueError("`cores` must not be empty")
        cs = []
        for k, c in enumerate(cores):
            arr = as_array(c, f"cores[{k}]", ndim=3).astype(np.float64)
            check_finite(arr, f"cores[{k}]")
            if min(arr.shape) < 1:
                raise ValueError(f"`cores[{k}]` must have positive dimensions; got shape {arr.shape}")
            cs.append(arr)
        d = len(cs)
        if cs[0].shape[0] != 1 or cs[-1].shape[2] != 1:
            raise ValueError("`cores` must start with left rank 1 and end with right rank 1; got shapes "
                             f"{cs[0].shape} and {cs[-1].shape}")
        for k in range(1, d):
            if cs[k].shape[0] != cs[k - 1].shape[2]:
                raise ValueError(f"`cores[{k}]` has left rank {cs[k].shape[0]}, but `cores[{k - 1}]` has right "
                                 f"rank {cs[k - 1].shape[2]}")
        self.dim = d
        self.loc = per_coordinate(loc, d, "loc")
        self.scale = per_coordinate(scale, d, "scale")
        if np.any(self.scale <= 0):
            raise ValueError(f"`scale` must be > 0; got {self.scale}")
        self.hermite_tol = check_real(hermite_tol, "hermite_tol", low=0.0, high=1.0, low_open=True, high_open=True)
        self.eps = check_real(eps, "eps", low=0.0, high=1.0, high_open=True)
        if times is not None:
            times = as_array(times, "times", ndim=1).astype(np.float64)
            check_finite(times, "times")
            if times.size < 1 or times[0] != 0.0 or np.any(np.diff(times) <= 0):
                raise ValueError("`times` must be strictly increasing and start at 0")
            if T is None:
                T = float(times[-1])
        if T is not None:
            T = check_real(T, "T", low=0.0)
            if times is not None and times[-1] > T * (1 + 1e-12):
                raise ValueError(f"`times` ends at {times[-1]}, after `T` = {T}")
        self.times = times
        self.T = T
        self.degrees = tuple(c.shape[1] - 1 for c in cs)
        self.ranks = (1,) + tuple(c.shape[2] for c in cs)
        # normalised cores (Frobenius norm 1) and the log of the removed factor, so that huge or tiny
        # a_0 (many coordinates) neither overflows nor underflows
        norms = [float(np.linalg.norm(c)) for c in cs]
        if min(norms) == 0.0:
            raise ValueError("`cores` describe the zero function, not a density")
        self._cores = [c / nrm for c, nrm in zip(cs, norms)]
        self._log_norm = float(sum(math.log(nrm) for nrm in norms))
        v = np.ones(1)
        log_a0 = self._log_norm
        for c in self._cores:
            v = v @ c[:, 0, :]
            nv = float(np.max(np.abs(v))) if v.size else 0.0
            if nv == 0.0:
                break
            v = v / nv
            log_a0 += math.log(nv)
        a0 = float(v[0]) if v.size else 0.0
        if not a0 > 0.0:
            raise ValueError("`cores` give a non-positive mass a_0 (the product of the degree-0 slices); they "
                             "are not the Hermite coefficients of a density")
        self.log_a0 = log_a0 + math.log(a0)
        self.log_Z = self.log_a0 + float(np.sum(np.log(self.scale)))
        self.n_fallback = 0
        self._cache: tuple | None = None
        self._energies: np.ndarray | None = None

    def __repr__(self) -> str:
        deg = self.degrees[0] if len(set(self.degrees)) == 1 else self.degrees
        return f"<HermiteOUSolution: dim={self.dim}, degree={deg}, ranks={self.ranks}, log_Z={self.log_Z:.10g}>"

    # ------------------------------------------------------------------------------------------------
    # propagation and evaluation

    def _propagated(self, tau: float) -> list[np.ndarray]:
        return [c * np.exp(-tau * np.arange(c.shape[1]))[None, :, None] for c in self._cores]

    def _normalised_ftt(self, tau: float) -> FunctionalTT:
        if self._cache is not None and self._cache[0] == tau:
            return self._cache[1]
        ftt = FunctionalTT.from_cores(self._propagated(tau), basis="hermite", degree=list(self.degrees),
                                      loc=0.0, scale=1.0)
        self._cache = (tau, ftt)
        return ftt

    @constraints(tau="real>=0", coordinates="option")
    def phi(self, tau: float, *, coordinates: str = "y") -> FunctionalTT:
        r"""The propagated :math:`f_\tau = \tilde\rho_\tau / \gamma` as a Hermite FunctionalTT.

        Parameters
        ----------
        tau : float
            Noising time ``>= 0`` (sampler time ``t`` corresponds to ``tau = T - t``).
        coordinates : {'y', 'x'}, default 'y'
            ``'y'``: a function of the preconditioned coordinates (Hermite ``loc = 0``, ``scale = 1``).
            ``'x'``: the same function written in x (Hermite ``loc``/``scale`` of the solution), i.e.
            ``f_tau((x - loc) / scale)``; the cores are identical.

        Returns
        -------
        f : FunctionalTT
            Cores ``A_k[:, i, :] * exp(-i tau)``; ranks unchanged. Under its own Gaussian measure it
            integrates to ``a_0`` for every ``tau``.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> core = np.zeros((1, 3, 1)); core[0, 0, 0] = 2.0; core[0, 2, 0] = 0.5
        >>> sol = HermiteOUSolution([core], loc=0.0, scale=1.0)
        >>> f = sol.phi(0.5)
        >>> f.cores_[0].ravel().round(6)          # 0.5 * exp(-2 * 0.5)
        array([2.     , 0.     , 0.18394])
        >>> round(f.integrate(), 12)
        2.0
        """
        tau = _check_tau(tau)
        coordinates = check_option(coordinates, "coordinates", ("y", "x"))
        share = self._log_norm / self.dim
        cores = [c * math.exp(share) for c in self._propagated(tau)]
        if coordinates == "y":
            return FunctionalTT.from_cores(cores, basis="hermite", degree=list(self.degrees), loc=0.0, scale=1.0)
        return FunctionalTT.from_cores(cores, basis="hermite", degree=list(self.degrees), loc=self.loc,
                                       scale=self.scale)

    def _check_y(self, y: Any) -> np.ndarray:
        y = as_array(y, "y", ndim=2).astype(np.float64, copy=False)
        check_finite(y, "y")
        if y.shape[1] != self.dim:
            raise ValueError(f"`y` must have shape (M, {self.dim}); got shape {y.shape}")
        return y

    @constraints(y="array2d", tau="real>=0")
    def log_f_and_grad(self, y: Any, tau: float) -> tuple[np.ndarray, np.ndarray, int]:
        r"""``W = log f_tau(y)`` and ``grad W = grad f / f`` with the positivity fallback.

        Parameters
        ----------
        y : array_like of shape (M, d)
            Points in preconditioned coordinates (``y = (x - loc) / scale``).
        tau : float
            Noising time ``>= 0``.

        Returns
        -------
        logf : ndarray of shape (M,)
            ``log f_tau(y)``. At fallback points: ``log(max(eps * f_ref, tiny))``, a finite floor.
        grad_logf : ndarray of shape (M, d)
            ``grad f / f`` (y-coordinates); 0 at fallback points (the reference score ``-y``).
        n_fallback : int
            Number of fallback points in this call (also added to :attr:`n_fallback`).

        Notes
        -----
        Fallback (spec V4) where the truncated series is not a usable density: ``f`` is not finite
        (Hermite values overflow far out, beyond about ``|y| = 1e3`` at degree 120),
        ``f <= 0``, or ``f <= eps * f_ref``. ``f_ref`` is the largest finite ``f`` over the evaluated
        points with ``max_k |y_k| <= 4`` (over all evaluated points when none is that central), so
        the huge values of the polynomial growth far out do not mark the bulk as fallback.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> core = np.zeros((1, 3, 1)); core[0, 0, 0] = 1.0; core[0, 2, 0] = -0.5   # 1 - (y^2 - 1)/(2 sqrt 2)
        >>> sol = HermiteOUSolution([core], loc=0.0, scale=1.0)
        >>> logf, grad, n_fb = sol.log_f_and_grad([[0.0], [3.0]], tau=0.0)
        >>> grad.ravel() + 0.0, n_fb                     # f(3) < 0: fallback to grad W = 0
        (array([0., 0.]), 1)
        """
        y = self._check_y(y)
        tau = _check_tau(tau)
        M = y.shape[0]
        logf = np.empty(M)
        grad = np.zeros((M, self.dim))
        if M == 0:
            return logf, grad, 0
        with np.errstate(all="ignore"):
            f, g = self._normalised_ftt(tau).evaluate(y, gradient=True, overflow="keep")
            finite = np.isfinite(f) & np.isfinite(g).all(axis=1)
            central = finite & (np.abs(y).max(axis=1) <= _BULK_RADIUS)
            pool = f[central] if central.any() else f[finite]
            f_ref = float(np.max(np.abs(pool))) if pool.size else 0.0
            floor = max(self.eps * f_ref, np.finfo(np.float64).tiny)
            good = finite & (f > 0) & (f > self.eps * f_ref)
            logf[good] = np.log(f[good]) + self._log_norm
            grad[good] = g[good] / f[good, None]
        logf[~good] = math.log(floor) + self._log_norm
        n_bad = int(M - np.count_nonzero(good))
        self.n_fallback += n_bad
        return logf, grad, n_bad

    @constraints(y="array2d", tau="real>=0")
    def W(self, y: Any, tau: float) -> np.ndarray:
        r"""``W = log f_tau(y) = log(rho_tau / gamma)(y)`` in y-coordinates (with the fallback floor).

        Parameters
        ----------
        y : array_like of shape (M, d)
            Points in preconditioned coordinates.
        tau : float
            Noising time ``>= 0``.

        Returns
        -------
        W : ndarray of shape (M,)

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> sol = HermiteOUSolution([np.full((1, 1, 1), 3.0)], loc=0.0, scale=1.0)   # rho = 3 gamma
        >>> np.allclose(sol.W([[0.0], [1.0]], 0.7), np.log(3.0))
        True
        """
        return self.log_f_and_grad(y, tau)[0]

    @constraints(y="array2d", tau="real>=0")
    def grad_W(self, y: Any, tau: float) -> np.ndarray:
        r"""``grad W = grad f_tau / f_tau`` in y-coordinates (0 at fallback points).

        Parameters
        ----------
        y : array_like of shape (M, d)
            Points in preconditioned coordinates.
        tau : float
            Noising time ``>= 0``.

        Returns
        -------
        grad_W : ndarray of shape (M, d)

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> core = np.zeros((1, 2, 1)); core[0, 0, 0] = 1.0; core[0, 1, 0] = 0.5    # f_0 = 1 + y / 2
        >>> HermiteOUSolution([core], loc=0.0, scale=1.0).grad_W([[0.0]], tau=np.log(2.0))   # f = 1 + y / 4
        array([[0.25]])
        """
        return self.log_f_and_grad(y, tau)[1]

    @constraints(y="array2d", tau="real>=0")
    def score(self, y: Any, tau: float) -> np.ndarray:
        r"""Score of the noised preconditioned target, ``grad log rho_tau(y) = grad W - y`` (y-coordinates).

        Divide by ``scale`` (elementwise) for the score of ``X_tau = loc + scale * Y_tau`` in x.

        Parameters
        ----------
        y : array_like of shape (M, d)
            Points in preconditioned coordinates.
        tau : float
            Noising time ``>= 0``.

        Returns
        -------
        score : ndarray of shape (M, d)

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> HermiteOUSolution([np.ones((1, 4, 1))], loc=0.0, scale=1.0).score([[0.0]], tau=50.0).round(12)
        array([[0.]])
        """
        y = self._check_y(y)
        return self.log_f_and_grad(y, tau)[1] - y

    # ------------------------------------------------------------------------------------------------
    # truncation diagnostics

    def _grid(self) -> np.ndarray:
        if self.times is not None:
            return np.unique(self.T - self.times)
        grid = np.concatenate([[0.0], np.geomspace(1e-4, 20.0, 241)])
        if self.T is not None:
            grid = np.unique(np.append(grid[grid <= self.T], self.T))
        return grid

    def degree_energies(self) -> np.ndarray:
        r"""Coefficient energy by total degree, :math:`E_j = \sum_{|\alpha| = j} a_\alpha^2 / a_0^2`.

        Returns
        -------
        E : ndarray of shape (sum(degrees) + 1,)
            ``E[j] = sum over |alpha| = j of a_alpha^2 / a_0^2`` (exact TT contraction with a running
            degree counter, ``O(d J n r^3)`` for ``J = sum(degrees) + 1``). Then
            ``sum_alpha a_alpha^2 exp(-2 |alpha| tau) = a_0^2 * sum_j E[j] exp(-2 j tau)``.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> c = np.array([1.0, 0.5]).reshape(1, 2, 1)
        >>> HermiteOUSolution([c, c], loc=0.0, scale=1.0).degree_energies()   # (1 + z/4)^2
        array([1.    , 0.5   , 0.0625])
        """
        if self._energies is not None:
            return self._energies.copy()
        v = np.ones((1, 1, 1))          # v[j] = sum_{|alpha_{<k}| = j} A(alpha)^T A(alpha), shape (J, r, r)
        for c in self._cores:
            n = c.shape[1]
            J = v.shape[0]
            out = np.zeros((J + n - 1, c.shape[2], c.shape[2]))
            for i in range(n):
                a = c[:, i, :]
                out[i:i + J] += a.T @ v @ a
            s = float(np.max(np.abs(out)))
            if s == 0.0:
                raise ValueError("`cores` describe the zero function")
            v = out / s
        E = v[:, 0, 0]
        self._energies = E / E[0]     # E[0] = a_0^2 (up to the scaling) > 0, checked in __init__
        return self._energies.copy()

    @constraints(tau="real>=0", degree_frac="prob", criterion="option")
    def tail_energy(self, tau: Any, degree_frac: float = 0.9, *, criterion: str = "total") -> np.ndarray:
        r"""Relative tail energy of :math:`f_\tau` beyond ``degree_frac`` of the degree.

        ``criterion='total'`` (spec §2.6):
        :math:`\sum_{|\alpha| > K} a_\alpha^2 e^{-2|\alpha|\tau} / \sum_\alpha a_\alpha^2 e^{-2|\alpha|\tau}`
        with ``K = floor(degree_frac * max_k degree_k)``. ``criterion='coordinate'``: the same ratio over
        the multi-indices with some :math:`\alpha_k > K_k = \lfloor degree\_frac \cdot degree_k \rfloor`,
        the boundary layer of the tensor-product truncation (identical in 1-D). Both are exact TT
        contractions (no enumeration).

        Parameters
        ----------
        tau : float or array_like
            Noising times ``>= 0``.
        degree_frac : float, default 0.9
            In ``(0, 1]``.
        criterion : {'total', 'coordinate'}, default 'total'

        Returns
        -------
        ratio : ndarray
            Same shape as ``tau``.

        Examples
        --------
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> c = np.array([1.0, 0.0, 1.0]).reshape(1, 3, 1)     # a = (1, 0, 1): tail = e^{-4 tau} / (1 + e^{-4 tau})
        >>> sol = HermiteOUSolution([c], loc=0.0, scale=1.0)
        >>> bool(np.isclose(sol.tail_energy(0.5), np.exp(-2) / (1 + np.exp(-2))))
        True
        """
        if isinstance(tau, (bool, np.bool_)):
            raise TypeError("`tau` must be a real number or an array of real numbers; got a bool")
        taus = as_array(tau, "tau").astype(np.float64)
        if not np.all(np.isfinite(taus)) or np.any(taus < 0):
            raise ValueError(f"`tau` must be finite and >= 0; got {tau}")
        degree_frac = check_real(degree_frac, "degree_frac", low=0.0, high=1.0, low_open=True)
        criterion = check_option(criterion, "criterion", ("total", "coordinate"))
        flat = taus.ravel()
        if criterion == "total":
            E = self.degree_energies()
            K = int(math.floor(degree_frac * max(self.degrees)))
            j = np.arange(E.size)
            # log-sum-exp over j for stability: log(E_j) - 2 j tau
            with np.errstate(divide="ignore", over="ignore"):
                logE = np.log(E)
                expo = logE[None, :] - (flat[:, None] * j[None, :]) * 2.0  # (tau * 0) first: no inf * 0
            top = np.max(expo, axis=1, keepdims=True)
            w = np.exp(expo - top)
            ratio = w[:, j > K].sum(axis=1) / w.sum(axis=1)
        else:
            ratio = self._coordinate_tail(flat, degree_frac)
        return ratio.reshape(taus.shape)

    def _coordinate_tail(self, taus: np.ndarray, degree_frac: float) -> np.ndarray:
        G = taus.size
        v0 = np.ones((G, 1, 1))   # no coordinate beyond its K_k yet
        v1 = np.zeros((G, 1, 1))  # some coordinate beyond
        for c in self._cores:
            n = c.shape[1]
            K = int(math.floor(degree_frac * (n - 1)))
            i = np.arange(n)
            with np.errstate(over="ignore"):
                w = np.exp(-(taus[:, None] * i[None, :]) * 2.0)              # (G, n)
            # P[g, i] = A_i^T v[g] A_i, summed with weights over the index ranges
            p0 = np.einsum("aic,gab,bid->gicd", c, v0, c, optimize=True)
            p1 = np.einsum("aic,gab,bid->gicd", c, v1, c, optimize=True)
            low, high = i <= K, i > K
            n0 = np.einsum("gi,gicd->gcd", w[:, low], p0[:, low])
            n1 = np.einsum("gi,gicd->gcd", w, p1) + np.einsum("gi,gicd->gcd", w[:, high], p0[:, high])
            s = np.maximum(np.abs(n0).max(axis=(1, 2)), np.abs(n1).max(axis=(1, 2)))
            s[s == 0] = 1.0
            v0, v1 = n0 / s[:, None, None], n1 / s[:, None, None]
        a, b = v0[:, 0, 0], v1[:, 0, 0]
        tot = a + b
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, b / tot, 1.0)

    @constraints(degree_frac="prob", criterion="option", grid="array1d")
    def tau_min(self, degree_frac: float = 0.9, *, criterion: str = "total", grid: Any = None) -> float:
        r"""Smallest grid noising time from which on the truncated series is trusted.

        The smallest ``tau`` of the grid such that the relative tail energy (:meth:`tail_energy`) is
        below ``hermite_tol`` there and at every larger grid time (the ratio decreases with
        ``tau``).

        Parameters
        ----------
        degree_frac : float, default 0.9
            The tail starts above ``degree_frac`` times the degree.
        criterion : {'total', 'coordinate'}, default 'total'
            Total degree ``|alpha|`` (spec §2.6) or the per-coordinate boundary layer (see
            :meth:`tail_energy`; identical in 1-D).
        grid : array_like, optional
            Noising times to scan; default ``T - times`` when ``times`` was given, otherwise 0 and
            241 geometric points in ``[1e-4, 20]`` (cut at ``T`` when ``T`` was given).

        Returns
        -------
        tau_min : float
            ``inf`` when no grid time qualifies.

        Examples
        --------
        >>> import math
        >>> import numpy as np
        >>> from numtk.sampling._hermite_ou import HermiteOUSolution
        >>> n = 40
        >>> a = np.array([0.8 ** k for k in range(n + 1)]).reshape(1, -1, 1)
        >>> sol = HermiteOUSolution([a], loc=0.0, scale=1.0, hermite_tol=1e-10)
        >>> t = sol.tau_min(grid=np.linspace(0, 2, 201))
        >>> t, bool(sol.tail_energy(t) < 1e-10 <= sol.tail_energy(t - 0.01))
        (0.09, True)
        """
        g = self._grid() if grid is None else np.unique(as_array(grid, "grid", ndim=1).astype(np.float64))
        if g.size == 0 or not np.all(np.isfinite(g)) or np.any(g < 0):
            raise ValueError("`grid` must be a non-empty array of finite times >= 0")
        ratio = self.tail_energy(g, degree_frac, criterion=criterion)
        ok = ratio < self.hermite_tol
        bad = np.flatnonzero(~ok)
        if bad.size == 0:
            return float(g[0])
        if bad[-1] == g.size - 1:
            return math.inf
        return float(g[bad[-1] + 1])


@constraints(target="callable", degree="int>=0", loc="real", scale="real>0", hermite_tol="prob_open",
             times="array1d", T="real>=0", eps="prob")
def hermite_solution(target: Any, *, degree: int = 120, loc: Any = None, scale: Any = None,
                     hermite_tol: float = 1e-10, times: Any = None, T: Any = None,
                     eps: float = 1e-12) -> HermiteOUSolution:
    r"""The exact OU/Hermite solution of a target with a Hermite tensor train.

    Parameters
    ----------
    target : Target
        A target with ``has_hermite`` (product targets, diagonal Gaussians and Gaussian mixtures).
    degree : int, default 120
        Hermite degree per coordinate.
    loc, scale : float or array_like of shape (d,), optional
        Preconditioning ``x = loc + scale * y``. Default (spec V3, "modes within about +-2.5"):
        ``loc`` is the centre of ``target.bounds`` and ``scale = (hi - lo) / 5``, so that the box
        holding mass ``>= 1 - 1e-6`` maps onto ``[-2.5, 2.5]`` in every coordinate (a standard
        normal coordinate gets ``scale`` of about 2, the 25-GMM about 5).
    hermite_tol : float, default 1e-10
        Tail-energy threshold of :meth:`HermiteOUSolution.tau_min`.
    times, T, eps
        Passed to :class:`HermiteOUSolution`.

    Returns
    -------
    solution : HermiteOUSolution

    Raises
    ------
    ValueError
        If ``target`` has no Hermite tensor train (``has_hermite`` is false), or no bounds when
        ``loc``/``scale`` are not given.

    References
    ----------
    .. [1] "Leveraging Low-Rank Structures for High-Dimensional Score-Based Sampling", ICML 2026.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import gaussian
    >>> from numtk.sampling._hermite_ou import hermite_solution
    >>> tgt = gaussian([1.0], [[0.5]])
    >>> sol = hermite_solution(tgt, degree=60)
    >>> bool(abs(sol.log_Z - tgt.log_Z) < 1e-12)
    True
    """
    if not getattr(target, "has_hermite", False):
        raise ValueError(f"`target` {getattr(target, 'name', type(target).__name__)!r} has no Hermite tensor "
                         "train (`has_hermite` is False): the Hermite path needs a product target or a diagonal "
                         "Gaussian (mixture)")
    degree = check_int(degree, "degree", minimum=0, maximum=_MAX_HERMITE_DEGREE)
    d = int(target.dim)
    if loc is None or scale is None:
        bounds = getattr(target, "bounds", None)
        if bounds is None:
            raise ValueError("`target` has no `bounds`; pass `loc` and `scale`")
        bounds = np.asarray(bounds, dtype=np.float64).reshape(d, 2)
        if not np.isfinite(bounds).all() or np.any(bounds[:, 1] <= bounds[:, 0]):
            raise ValueError("`target.bounds` must be finite with low < high")
        if loc is None:
            loc = bounds.mean(axis=1)
        if scale is None:
            scale = (bounds[:, 1] - bounds[:, 0]) / 5.0
    loc_arr = per_coordinate(loc, d, "loc")
    scale_arr = per_coordinate(scale, d, "scale")
    if np.any(scale_arr <= 0):
        raise ValueError(f"`scale` must be > 0; got {scale_arr}")
    cores = target._hermite_tt(degree, loc_arr, scale_arr)
    norms = [float(np.linalg.norm(c)) for c in cores]
    if min(norms) == 0.0 or not all(np.isfinite(norms)):
        raise ValueError("the target's Hermite coefficients under this `loc` and `scale` vanish or overflow "
                         "in double precision; precondition so that the mass lies within about +-2.5")
    return HermiteOUSolution(cores, loc=loc_arr, scale=scale_arr, times=times, T=T, hermite_tol=hermite_tol,
                             eps=eps)
