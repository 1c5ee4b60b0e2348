"""Coordinate-wise bijections that precondition a target for the sampler.

The sampler works best where the target's scales are similar everywhere. When a coordinate's scale varies
over orders of magnitude across the mass (the funnel's ``x_i | x_0 ~ N(0, e^{x_0})``, hierarchical scale
parameters, positive parameters spanning decades), a fixed basis cannot resolve the narrow part. A
bijection ``x = T(u)`` applied per coordinate moves the problem to ``u``, where the density

    rho_u(u) = rho(T(u)) |det T'(u)| = rho(T(u)) prod_k T_k'(u_k)

has the same mass ``Z`` (so ``log Z`` needs no correction) and its samples map back by ``T``. Importance
weights are the same in both coordinates, so estimates stay unbiased in Z whatever the transform.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_finite, check_int
from numtk.sampling._target import Target, as_target

__all__ = ["Transform", "SinhTransform", "ExpTransform", "transform_target"]


@constraints(dims="index")
class Transform:
    """An increasing bijection applied to some coordinates, ``x_k = f(u_k)`` for ``k`` in ``dims``.

    Subclasses define the scalar map through ``_f`` (``f(u)``), ``_f_inv`` (``f^{-1}(x)``), ``_log_df``
    (``log f'(u)``) and ``_dlog_df`` (``f''(u) / f'(u)``), each elementwise on an array of the selected
    coordinates; the other coordinates are left unchanged.

    Parameters
    ----------
    dims : int, slice, sequence of int or None
        The coordinates transformed (default: all); negative indices count from the end.
    """

    def __init__(self, dims: Any = None) -> None:
        self.dims = _check_dims(dims)

    def _select(self, d: int) -> np.ndarray:
        """The transformed columns of a d-dimensional array (validating ``dims`` and the parameters)."""
        self._check_params(d)
        if self.dims is None:
            return np.arange(d)
        if isinstance(self.dims, slice):
            return np.arange(d)[self.dims]
        idx = np.atleast_1d(np.asarray(self.dims))
        if idx.size and (idx.min() < -d or idx.max() >= d):
            raise ValueError(f"`dims` must index coordinates of a {d}-dimensional target; got {idx.tolist()}")
        idx = np.unique(np.where(idx < 0, idx + d, idx))
        return idx

    def _check(self, a: ArrayLike, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``a`` as a finite float64 (n, d) array, and the coordinates the transform acts on."""
        a = as_array(a, name, ndim=2).astype(np.float64, copy=False)
        check_finite(a, name)
        return a, self._select(a.shape[1])

    @constraints(u="array2d")
    def forward(self, u: ArrayLike) -> np.ndarray:
        """``x = T(u)`` row-wise, for finite ``u`` of shape ``(n, d)``.

        ValueError where ``T(u)`` overflows (``|u|`` beyond about 710 for ``sinh`` and ``exp``).
        """
        u, k = self._check(u, "u")
        x = self._forward(u, k)
        if not np.all(np.isfinite(x)):
            raise ValueError("`u` has entries where T(u) overflows (|u| beyond about 710 for sinh and exp)")
        return x

    def _forward(self, u, k=None):
        """``T(u)`` without checks (inf where it overflows)."""
        k = self._select(u.shape[1]) if k is None else k
        x = np.array(u, dtype=np.float64, copy=True)
        with np.errstate(over="ignore"):
            x[:, k] = self._f(x[:, k], k)
        return x

    @constraints(x="array2d")
    def inverse(self, x: ArrayLike) -> np.ndarray:
        """``u = T^{-1}(x)`` row-wise, for finite ``x`` of shape ``(n, d)``.

        ValueError where ``x`` is outside the range of ``T`` (``x <= 0`` for :class:`ExpTransform`).
        """
        x, k = self._check(x, "x")
        u = self._inverse(x, k)
        if not np.all(np.isfinite(u)):
            raise ValueError("`x` has entries outside the range of the transform (x <= 0 for ExpTransform)")
        return u

    def _inverse(self, x, k=None):
        """``T^{-1}(x)`` without checks (NaN or -inf outside the range of ``T``)."""
        k = self._select(x.shape[1]) if k is None else k
        u = np.array(x, dtype=np.float64, copy=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            u[:, k] = self._f_inv(u[:, k], k)
        return u

    @constraints(u="array2d")
    def log_abs_det_jacobian(self, u: ArrayLike) -> np.ndarray:
        """``log |det dT/du|`` per row, shape ``(n,)``, for finite ``u``.

        ValueError where it overflows (``|u|`` near the float maximum for ``sinh`` and ``exp``).
        """
        u, k = self._check(u, "u")
        with np.errstate(over="ignore"):
            out = np.sum(self._log_df(u[:, k], k), axis=1)
        if not np.all(np.isfinite(out)):
            raise ValueError("`u` has entries where log |det T'(u)| overflows")
        return out

    def _jacobian_terms(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(k, f'(u_k), f''(u_k) / f'(u_k))`` for the transformed columns ``k``."""
        k = self._select(u.shape[1])
        uk = u[:, k]
        return k, np.exp(self._log_df(uk, k)), self._dlog_df(uk, k)

    def _param(self, value: Any, k: np.ndarray) -> Any:
        """A scalar or per-coordinate (length d) parameter, restricted to the transformed columns."""
        arr = np.asarray(value, dtype=np.float64)
        return arr if arr.ndim == 0 else arr[k]

    # hooks ----------------------------------------------------------------------------------------------
    def _check_params(self, d):
        """Raise ValueError when a per-coordinate parameter does not have length d."""

    def _f(self, u, k):  # pragma: no cover - abstract
        raise NotImplementedError

    def _f_inv(self, x, k):  # pragma: no cover
        raise NotImplementedError

    def _log_df(self, u, k):  # pragma: no cover
        raise NotImplementedError

    def _dlog_df(self, u, k):  # pragma: no cover
        raise NotImplementedError


def _check_dims(dims: Any) -> Any:
    """``dims``: None, a slice, or integer indices (negative ones count from the end)."""
    if dims is None or isinstance(dims, slice):
        return dims
    if isinstance(dims, (bool, np.bool_)):
        raise TypeError("`dims` must be None, a slice or integer indices; got a bool")
    if isinstance(dims, (str, bytes)):
        raise TypeError(f"`dims` must be None, a slice or integer indices; got {type(dims).__name__}")
    try:
        idx = np.atleast_1d(np.asarray(dims))
    except (TypeError, ValueError):
        raise TypeError("`dims` must be None, a slice or integer indices") from None
    if idx.dtype.kind not in "iu" or idx.ndim != 1:
        raise TypeError(f"`dims` must be None, a slice or integer indices; got {dims!r}")
    for i in idx.tolist():
        check_int(i, "dims", minimum=-(1 << 20), maximum=(1 << 20) - 1)
    return dims


def _real_array(value: Any, name: str) -> np.ndarray:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be a real number or a 1-D array; got a bool")
    arr = as_array(value, name).astype(np.float64)
    if arr.ndim > 1:
        raise ValueError(f"`{name}` must be a scalar or a 1-D array; got shape {arr.shape}")
    check_finite(arr, name)
    return arr


def _positive(value: Any, name: str) -> np.ndarray | float:
    arr = _real_array(value, name)
    if np.any(arr <= 0):
        raise ValueError(f"`{name}` must be positive; got {value!r}")
    return float(arr) if arr.ndim == 0 else arr


@constraints(width=("real>0", "array1d"), loc=("real", "array1d"), dims="index")
class SinhTransform(Transform):
    """``x = loc + width * sinh(u)``: linear within ``|x - loc| < width``, logarithmic beyond.

    For coordinates whose scale varies over orders of magnitude: values near ``loc`` keep resolution
    ``width`` and a value ``x`` far out sits at ``u ~ log(2 |x - loc| / width)``, so a basis of fixed
    spacing in ``u`` resolves both. On Neal's funnel (d = 10), warping ``x_1, ..., x_9`` with width 0.3
    took the sampler's ``|dlog Z|`` from about 0.5 to 0.03-0.19 over four seeds (see the sampling tutorial).

    Parameters
    ----------
    width : float or array_like of shape (d,)
        Positive: the scale below which the map is linear (per coordinate of the target when an array;
        entries of untransformed coordinates are ignored).
    loc : float or array_like of shape (d,), default 0.0
        Centre of the linear part.
    dims : int, slice, sequence of int or None
        The coordinates transformed (default: all); negative indices count from the end.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import SinhTransform
    >>> T = SinhTransform(0.5, dims=[1])
    >>> u = np.array([[2.0, 0.0], [2.0, 3.0]])
    >>> T.forward(u)
    array([[2.        , 0.        ],
           [2.        , 5.00893746]])
    >>> np.allclose(T.inverse(T.forward(u)), u)
    True
    """

    def __init__(self, width: Any, *, loc: Any = 0.0, dims: Any = None) -> None:
        super().__init__(dims)
        self.width = _positive(width, "width")
        loc_arr = _real_array(loc, "loc")
        self.loc = float(loc_arr) if loc_arr.ndim == 0 else loc_arr

    def _check_params(self, d):
        for name in ("width", "loc"):
            value = getattr(self, name)
            if np.ndim(value) == 1 and len(value) != d:
                raise ValueError(f"`{name}` must be a scalar or have one entry per coordinate ({d}); "
                                 f"got {len(value)}")

    def _f(self, u, k):
        return self._param(self.loc, k) + self._param(self.width, k) * np.sinh(u)

    def _f_inv(self, x, k):
        return np.arcsinh((x - self._param(self.loc, k)) / self._param(self.width, k))

    def _log_df(self, u, k):
        # log(w cosh u) = log w + |u| + log1p(e^{-2|u|}) - log 2, without overflow
        a = np.abs(u)
        return np.log(self._param(self.width, k)) + a + np.log1p(np.exp(-2.0 * a)) - np.log(2.0)

    def _dlog_df(self, u, k):
        return np.tanh(u)

    def __repr__(self) -> str:
        return f"SinhTransform(width={self.width!r}, loc={self.loc!r}, dims={self.dims!r})"


@constraints(dims="index")
class ExpTransform(Transform):
    """``x = exp(u)``: positive coordinates sampled through their logarithm.

    For a target defined on ``x_k > 0`` (scale or rate parameters): ``rho_u`` is defined on all of R,
    and the sampler never proposes a point outside the support.

    Parameters
    ----------
    dims : int, slice, sequence of int or None
        The positive coordinates (default: all); negative indices count from the end.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import ExpTransform
    >>> T = ExpTransform(dims=[0])
    >>> T.forward(np.array([[0.0, -1.0]])), T.log_abs_det_jacobian(np.array([[0.5, -1.0]]))
    (array([[ 1., -1.]]), array([0.5]))
    """

    def _f(self, u, k):
        return np.exp(u)

    def _f_inv(self, x, k):
        return np.log(x)

    def _log_df(self, u, k):
        return u.copy()

    def _dlog_df(self, u, k):
        return np.ones_like(u)

    def __repr__(self) -> str:
        return f"ExpTransform(dims={self.dims!r})"


class _TransformedTarget(Target):
    """``rho_u(u) = rho(T(u)) |det T'(u)|`` (mass Z); exact samples are mapped by ``T^{-1}``."""

    has_exact_noised = False
    has_hermite = False

    def __init__(self, base: Target, transform: Transform) -> None:
        transform._select(base.dim)  # validate `dims` and the parameters against the dimension first
        bounds = None
        if base.bounds is not None:
            b = transform._inverse(base.bounds.T).T
            if np.all(np.isfinite(b)) and np.all(b[:, 0] < b[:, 1]):
                bounds = b
        super().__init__(base.dim, name=f"{base.name} in {transform!r}", log_Z=base.log_Z, bounds=bounds,
                         params={"base": base.name})
        self.base = base
        self.transform = transform
        self.has_grad = base.has_grad
        self.can_sample = base.can_sample

    def _image(self, u):
        """``T(u)`` and the rows where it is finite (``sinh`` and ``exp`` overflow beyond |u| ~ 710)."""
        x = self.transform._forward(u)
        ok = np.isfinite(x).all(axis=1)
        return x, ok

    def _logp(self, u):
        x, ok = self._image(u)
        out = np.full(len(u), -np.inf)  # no mass where T(u) overflows
        if ok.any():
            out[ok] = self.base.log_density(x[ok]) + self.transform.log_abs_det_jacobian(u[ok])
        return out

    def _grad(self, u):
        x, ok = self._image(u)
        g = np.zeros_like(u)  # rows where T(u) overflows: no information, zero
        if ok.any():
            gk = np.array(self.base.grad_log_density(x[ok]), dtype=np.float64)
            k, df, dlog = self.transform._jacobian_terms(u[ok])
            gk[:, k] = gk[:, k] * df + dlog
            g[ok] = gk
        return g

    def _sample(self, n, rng):
        return self.transform._inverse(self.base.sample(n, rng=rng))


@constraints(target="callable", transform="callable", dim="int>=1")
def transform_target(target: Any, transform: Transform, dim: int | None = None) -> Target:
    """The target in the coordinates ``u`` of a bijection ``x = T(u)``.

    Parameters
    ----------
    target : Target or callable
        The target in its own coordinates ``x`` (a callable needs ``dim``).
    transform : Transform
        For example :class:`SinhTransform` or :class:`ExpTransform`.
    dim : int, optional
        The dimension, for a callable target.

    Returns
    -------
    Target
        Log-density ``log rho(T(u)) + log |det T'(u)|`` with the same ``log_Z``; gradient by the chain rule
        when the target has one; exact samples (``T^{-1}`` of the target's) when it has them; ``bounds``
        mapped by ``T^{-1}`` when they stay finite. No exact noised density.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.sampling import gaussian, transform_target, ExpTransform
    >>> t = transform_target(gaussian([2.0], [0.1]), ExpTransform())
    >>> round(t.log_Z, 6) == round(gaussian([2.0], [0.1]).log_Z, 6)
    True
    >>> bool(np.allclose(t.log_density([[np.log(2.0)]]), np.log(2.0)))   # log rho(2) + log 2, rho(2) = 1
    True
    """
    if not isinstance(transform, Transform):
        raise TypeError(f"`transform` must be a numtk.sampling.Transform; got {type(transform).__name__}")
    return _TransformedTarget(as_target(target, dim), transform)
