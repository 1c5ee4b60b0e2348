"""Target densities of the score-based sampler, with exact log Z, samples and noised densities (spec §3.2).

A :class:`Target` is an unnormalised density ``rho`` on R^d. Besides ``log rho`` and its gradient it
may know its mass ``Z = int rho`` (``log_Z``), draw exact samples, and give the exact log-density of
the Ornstein-Uhlenbeck-noised target

    rho_tau(x) = int rho(y) N(x; e^{-tau} y, (1 - e^{-2 tau}) I) dy,     int rho_tau = Z,

(noising ``dY = -Y dtau + sqrt(2) dB``) and its score; the sampler's value function is
``V(x, t; T) = log rho_{T - t}(x)``. Targets whose coefficient tensor in the normalised
probabilists' Hermite basis has a known low-rank tensor train (diagonal Gaussian mixtures, products
of univariate factors) expose it through ``_hermite_tt`` for the exact OU-Hermite path (spec §2.6).

This module holds the base class, :meth:`Target.from_callable` and :func:`as_target` (user callables);
the families live next to it: :mod:`numtk.sampling._gaussian_mixture` (:func:`gaussian`,
:func:`gaussian_mixture`), :mod:`numtk.sampling._product_targets` (:func:`many_well`,
:func:`double_well`) and :mod:`numtk.sampling._funnel` (:func:`funnel`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_int, check_real, check_size, per_coordinate

__all__ = ["Target", "Unsupported", "as_target", "check_dim"]

_MAX_DIM = 1 << 20           # largest dimension a target may have (the factors and bounds are O(d))


class Unsupported(TypeError, NotImplementedError):
    """The target does not provide this operation (a TypeError, and a NotImplementedError for old code)."""


def check_dim(value: Any, name: str = "dim", minimum: int = 1) -> int:
    """A dimension: an int in [minimum, 2**20]."""
    return check_int(value, name, minimum=minimum, maximum=_MAX_DIM)


def _check_tau(tau: Any, name: str = "tau") -> float:
    if isinstance(tau, np.ndarray) and tau.ndim == 0:
        tau = tau.item()
    return check_real(tau, name, low=0.0)


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
# the Target class

@constraints(dim="int>=1", name="any", log_Z="real", bounds="array2d", product_groups="any", params="any")
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
    >>> from numtk.sampling import gaussian
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
    @constraints(log_density="callable", dim="int>=1", grad_log_density="callable", log_Z="real",
                 bounds="array2d", jit="bool", name="any")
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
        >>> from numtk.sampling import Target
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

    @constraints(x="array2d")
    def log_density(self, x: ArrayLike) -> np.ndarray:
        r"""Unnormalised :math:`\log \rho(x)`: shape ``(n,)`` for finite ``x`` of shape ``(n, d)``.

        ``-inf`` where the density is zero, or underflows to zero in double precision (a Gaussian beyond
        about ``1e154`` from its mean).
        """
        x, single = self._check_x(x)
        return self._out(self._logp(x), single)

    @constraints(x="array2d")
    def grad_log_density(self, x: ArrayLike) -> np.ndarray:
        r""":math:`\nabla \log \rho(x)`, shape ``(n, d)``; :class:`Unsupported` (a TypeError and
        NotImplementedError) if ``has_grad`` is False. A mixture of several components gives NaN where
        every component's density underflows to zero (its responsibilities are undefined there)."""
        if not self.has_grad:
            raise Unsupported(f"target {self.name!r} has no gradient of its log-density")
        x, single = self._check_x(x)
        return self._out(self._grad(x), single)

    @constraints(n="int>=0", rng="rng")
    def sample(self, n: int, *, rng: Any = None) -> np.ndarray:
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

    @constraints(x="array2d", tau="real>=0")
    def log_noised_density(self, x: ArrayLike, tau: float) -> np.ndarray:
        r"""Exact :math:`\log \rho_\tau(x)` of the OU-noised target (mass Z), shape ``(n,)``.

        ``tau >= 0`` is the noising time; ``tau = 0`` gives :meth:`log_density`.
        """
        if not self.has_exact_noised:
            raise Unsupported(f"target {self.name!r} has no exact noised density")
        tau = _check_tau(tau)
        x, single = self._check_x(x)
        return self._out(self._noised(x, tau, False), single)

    @constraints(x="array2d", tau="real>=0")
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

    @constraints(x="array2d", t="real>=0", T="real>=0")
    def V(self, x: ArrayLike, t: float, *, T: float) -> np.ndarray:
        r"""Exact value function :math:`V(x, t) = \log \rho_{T - t}(x)` (sampler time ``0 <= t <= T``)."""
        return self.log_noised_density(x, self._tau_of(t, T))

    @constraints(x="array2d", t="real>=0", T="real>=0")
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


@constraints(obj="callable", dim="int>=1")
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
    >>> from numtk.sampling import as_target, many_well
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
