"""Chaotic dynamical systems as data generators: Lorenz-96 and Kuramoto-Sivashinsky, with a QR
(Benettin) estimator of their Lyapunov exponents.

Both generators are NumPy only and vectorised over a batch of initial conditions, so that an
ensemble of trajectories costs little more than one.

* Lorenz-96: ``dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F`` with periodic indices, integrated
  by the classical fourth-order Runge-Kutta method.
* Kuramoto-Sivashinsky: ``u_t + u u_x + u_xx + u_xxxx = 0`` on ``[0, L)`` with periodic boundary,
  pseudo-spectral on ``n`` equispaced points (real FFT; the first derivative of the Nyquist mode is
  zero, as in Trefethen's differentiation matrices), integrated by ETDRK4 (Cox and Matthews 2002) with
  the phi functions evaluated by the contour integral of Kassam and Trefethen (2005), which avoids
  the cancellation of the direct formulas for small ``dt * (k^2 - k^4)``.

The Lyapunov estimator integrates the state together with ``p`` tangent vectors and
re-orthonormalises them by a QR factorisation (Benettin et al. 1980; Shimada and Nagashima 1979):
the exponents are the time averages of ``log |R_ii|``. The tangent dynamics is the exact linearisation
of the discrete step (RK4 applied to the variational equation with the Jacobian for Lorenz-96,
ETDRK4 applied to the linearised equation for Kuramoto-Sivashinsky), so the estimate is that of the
map the generators iterate.
"""

from __future__ import annotations

import math

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import (C_INT_MAX, as_array, available_memory, check_finite, check_int, check_option,
                                    check_real)

__all__ = ["lorenz96", "kuramoto_sivashinsky", "lyapunov_exponent"]

_SYSTEMS = ("lorenz96", "kuramoto_sivashinsky")
_CONTOUR_POINTS = 32     # points on the upper half of the unit circle (Kassam & Trefethen use 16)
_CHECK_EVERY = 256       # steps between the checks for an overflowing integration


# --------------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------------
def _check_memory(nbytes: float, names: str) -> None:
    avail = available_memory()
    if nbytes > avail:
        raise ValueError(f"{names} ask for about {nbytes / 2**30:.3g} GiB, more than the "
                         f"{avail / 2**30:.3g} GiB this process may allocate")


def _initial_states(x0, n: int, batch, name: str) -> tuple[np.ndarray | None, int, bool]:
    """(states of shape (batch, n) or None when drawn at random, batch, whether the output is batched)."""
    if batch is not None:
        batch = check_int(batch, "batch", minimum=1, maximum=C_INT_MAX)
    if x0 is None:
        return None, (1 if batch is None else batch), batch is not None
    arr = as_array(x0, name)
    if arr.ndim not in (1, 2) or arr.shape[-1] != n:
        raise ValueError(f"`{name}` must have shape ({n},) or (batch, {n}) for `n` = {n}; got shape {arr.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.array(arr, dtype=np.float64, ndmin=2)  # a copy, C-contiguous
    check_finite(arr, name)
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` must hold at least one initial state; got shape {arr.shape}")
    if batch is not None and (np.ndim(x0) == 1 or arr.shape[0] != batch):
        raise ValueError(f"`batch` = {batch} does not match `{name}` of shape {np.shape(x0)}: "
                         f"give `{name}` of shape ({batch}, {n}) or leave `batch` as None")
    return arr, arr.shape[0], batch is not None or np.ndim(x0) == 2


def _diverged(*names: str) -> ValueError:
    listed = ", ".join(f"`{n}`" for n in names)
    return ValueError(f"the integration overflowed (non-finite values): the step is too large or the "
                      f"state too extreme for this system; check {listed}")


# --------------------------------------------------------------------------------------------------
# Lorenz-96
# --------------------------------------------------------------------------------------------------
def _pad(x: np.ndarray) -> np.ndarray:
    # periodic padding along the last axis: x_{-2}, x_{-1}, x_0, ..., x_{n-1}, x_n
    return np.concatenate([x[..., -2:], x, x[..., :1]], axis=-1)


def _l96_tendency(x: np.ndarray, forcing: float) -> np.ndarray:
    # (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F along the last axis, periodic
    xp = _pad(x)
    n = x.shape[-1]
    return (xp[..., 3:] - xp[..., :n]) * xp[..., 1:n + 1] - x + forcing


def _l96_tangent(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The Jacobian of the tendency at ``x`` (batch, n) applied to tangent vectors ``v`` (batch, p, n)."""
    xp, vp = _pad(x)[:, None, :], _pad(v)
    n = x.shape[-1]
    return ((vp[..., 3:] - vp[..., :n]) * xp[..., 1:n + 1]
            + (xp[..., 3:] - xp[..., :n]) * vp[..., 1:n + 1] - v)


def _l96_step(x: np.ndarray, forcing: float, dt: float) -> np.ndarray:
    k1 = _l96_tendency(x, forcing)
    k2 = _l96_tendency(x + 0.5 * dt * k1, forcing)
    k3 = _l96_tendency(x + 0.5 * dt * k2, forcing)
    k4 = _l96_tendency(x + dt * k3, forcing)
    return x + (dt / 6.0) * (k1 + 2.0 * (k2 + k3) + k4)


def _l96_step_tangent(x: np.ndarray, v: np.ndarray, forcing: float, dt: float):
    """One RK4 step of the state and its tangent vectors (the exact derivative of the RK4 map)."""
    k1 = _l96_tendency(x, forcing)
    l1 = _l96_tangent(x, v)
    x2, v2 = x + 0.5 * dt * k1, v + 0.5 * dt * l1
    k2, l2 = _l96_tendency(x2, forcing), _l96_tangent(x2, v2)
    x3, v3 = x + 0.5 * dt * k2, v + 0.5 * dt * l2
    k3, l3 = _l96_tendency(x3, forcing), _l96_tangent(x3, v3)
    x4, v4 = x + dt * k3, v + dt * l3
    k4, l4 = _l96_tendency(x4, forcing), _l96_tangent(x4, v4)
    return (x + (dt / 6.0) * (k1 + 2.0 * (k2 + k3) + k4),
            v + (dt / 6.0) * (l1 + 2.0 * (l2 + l3) + l4))


def _l96_random_states(gen: np.random.Generator, batch: int, n: int, forcing: float) -> np.ndarray:
    return forcing + gen.standard_normal((batch, n))


@constraints(n="count", forcing="real", dt="real>0", steps="count", burn_in="int>=0", save_every="count",
             batch="count", x0=("array1d", "array2d"), rng="rng")
def lorenz96(n=40, *, forcing=8.0, dt=0.01, steps=1000, burn_in=1000, save_every=1, batch=None, x0=None,
             rng=None) -> Result:
    r"""Trajectories of the Lorenz-96 system, integrated by the classical Runge-Kutta method (RK4).

    .. math:: \frac{dx_i}{dt} = (x_{i+1} - x_{i-2})\, x_{i-1} - x_i + F, \qquad i = 0, \dots, n-1,

    with periodic indices (Lorenz 1996). With ``n = 40`` and ``F = 8`` the system is chaotic, with a
    largest Lyapunov exponent of about 1.68 (see :func:`lyapunov_exponent`).

    Parameters
    ----------
    n : int, default 40
        The number of variables, at least 4.
    forcing : float, default 8.0
        The constant forcing ``F``.
    dt : float, default 0.01
        The RK4 step. Steps up to about 0.05 are stable at ``F = 8``.
    steps : int, default 1000
        The number of saved steps after the burn-in: the trajectory holds ``steps + 1`` states.
    burn_in : int, default 1000
        The number of RK4 steps integrated and discarded before the first saved state (10 time units
        at the default ``dt``), so that random initial states reach the attractor.
    save_every : int, default 1
        The number of RK4 steps between saved states: the saved states are ``save_every * dt`` apart.
    batch : int or None, default None
        The number of independent trajectories, integrated together (vectorised). None: one
        trajectory and a 2-D result; an int: a 3-D result, also for ``batch = 1``.
    x0 : array_like of shape (n,) or (batch, n), optional
        The initial states (before the burn-in). Default: ``forcing`` plus independent standard
        normal values, drawn from ``rng``. A 2-D ``x0`` gives a 3-D result; ``batch``, if given,
        must then equal ``len(x0)``.
    rng : None, int or numpy.random.Generator, optional
        The source of the random initial states (unused when ``x0`` is given).

    Returns
    -------
    res : Result
        With fields

        trajectory : ndarray of float64, shape (steps + 1, n) or (batch, steps + 1, n)
            The saved states, the first after the burn-in.
        times : ndarray of float64, shape (steps + 1,)
            The times of the saved states, ``times[0] = 0`` at the end of the burn-in.
        metadata : dict
            ``system``, ``n``, ``forcing``, ``dt``, ``save_every``, ``burn_in``.

    Raises
    ------
    ValueError
        If an argument is out of range, the result would not fit in memory, or the integration
        overflows (a step too large for RK4).

    See Also
    --------
    kuramoto_sivashinsky, lyapunov_exponent

    References
    ----------
    .. [1] E. N. Lorenz, "Predictability: a problem partly solved", Proc. ECMWF Seminar on
       Predictability, 1996.

    Examples
    --------
    >>> from numtk.datasets import lorenz96
    >>> res = lorenz96(steps=500, rng=0)
    >>> res.trajectory.shape, float(res.times[-1])
    ((501, 40), 5.0)
    >>> ens = lorenz96(n=8, steps=100, save_every=5, batch=16, rng=1)
    >>> ens.trajectory.shape, round(float(ens.times[1]), 2)
    ((16, 101, 8), 0.05)
    """
    n = check_int(n, "n", minimum=4, maximum=C_INT_MAX)
    forcing = check_real(forcing, "forcing")
    dt = check_real(dt, "dt", low=0.0, low_open=True)
    steps = check_int(steps, "steps", minimum=1, maximum=C_INT_MAX)
    burn_in = check_int(burn_in, "burn_in", minimum=0, maximum=C_INT_MAX)
    save_every = check_int(save_every, "save_every", minimum=1, maximum=C_INT_MAX)
    states, batch_size, batched = _initial_states(x0, n, batch, "x0")
    gen = normalize_rng(rng)
    # the trajectory plus the RK4 temporaries (about ten states)
    _check_memory(8.0 * batch_size * n * (steps + 1 + 10), "`n`, `steps` and `batch`")
    x = _l96_random_states(gen, batch_size, n, forcing) if states is None else states

    out = np.empty((batch_size, steps + 1, n))
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(burn_in):
            x = _l96_step(x, forcing, dt)
            if i % _CHECK_EVERY == 0 and not np.isfinite(x).all():
                raise _diverged("dt", "forcing", "x0")
        out[:, 0] = x
        for s in range(1, steps + 1):
            for _ in range(save_every):
                x = _l96_step(x, forcing, dt)
            out[:, s] = x
            if s % _CHECK_EVERY == 0 and not np.isfinite(x).all():
                raise _diverged("dt", "forcing", "x0")
    if not np.isfinite(out).all():
        raise _diverged("dt", "forcing", "x0")
    return Result(trajectory=out if batched else out[0], times=dt * save_every * np.arange(steps + 1.0),
                  metadata={"system": "lorenz96", "n": n, "forcing": forcing, "dt": dt,
                            "save_every": save_every, "burn_in": burn_in})


# --------------------------------------------------------------------------------------------------
# Kuramoto-Sivashinsky
# --------------------------------------------------------------------------------------------------
class _KSOperator:
    """ETDRK4 in Fourier space (real FFT) for u_t + u u_x + u_xx + u_xxxx = 0 on [0, L), n points."""

    def __init__(self, n: int, length: float, dt: float) -> None:
        self.n = n
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            k = (2.0 * np.pi / length) * np.arange(n // 2 + 1)
            lin = k ** 2 - k ** 4
            # d/dx of u^2 / 2 in Fourier space; the Nyquist mode's first derivative is zero
            g = -0.5j * k
            g[-1] = 0.0
            h = dt
            hl = h * lin
            self.E = np.exp(hl)
            self.E2 = np.exp(hl / 2.0)
            # Kassam & Trefethen: the phi functions as means over a circle of radius 1 around h*lin
            # (points in the upper half plane; the real part gives the mean over the whole circle)
            r = np.exp(1j * np.pi * (np.arange(1, _CONTOUR_POINTS + 1) - 0.5) / _CONTOUR_POINTS)
            lr = hl[:, None] + r[None, :]
            elr = np.exp(lr)
            self.Q = h * np.real(np.mean((np.exp(lr / 2.0) - 1.0) / lr, axis=1))
            self.f1 = h * np.real(np.mean((-4.0 - lr + elr * (4.0 - 3.0 * lr + lr ** 2)) / lr ** 3, axis=1))
            self.f2 = h * np.real(np.mean((2.0 + lr + elr * (lr - 2.0)) / lr ** 3, axis=1))
            self.f3 = h * np.real(np.mean((-4.0 - 3.0 * lr - lr ** 2 + elr * (4.0 - lr)) / lr ** 3, axis=1))
        self.g = g
        self.finite = all(np.isfinite(a).all() for a in (k, self.E, self.E2, self.Q, self.f1, self.f2, self.f3))

    def nonlinear(self, v: np.ndarray) -> np.ndarray:
        u = np.fft.irfft(v, self.n, axis=-1)
        return self.g * np.fft.rfft(u * u, axis=-1)

    def step(self, v: np.ndarray) -> np.ndarray:
        E2, Q = self.E2, self.Q
        nv = self.nonlinear(v)
        a = E2 * v + Q * nv
        na = self.nonlinear(a)
        b = E2 * v + Q * na
        nb = self.nonlinear(b)
        c = E2 * a + Q * (2.0 * nb - nv)
        nc = self.nonlinear(c)
        return self.E * v + self.f1 * nv + 2.0 * self.f2 * (na + nb) + self.f3 * nc

    def nonlinear_tangent(self, vw: np.ndarray) -> np.ndarray:
        """The nonlinear term of the state ``vw[:, 0]`` and its derivative along ``vw[:, 1:]``."""
        uw = np.fft.irfft(vw, self.n, axis=-1)
        u = uw[:, :1]
        prod = u * uw
        prod[:, 1:] *= 2.0  # d(u^2) = 2 u w
        return self.g * np.fft.rfft(prod, axis=-1)

    def step_tangent(self, vw: np.ndarray) -> np.ndarray:
        """One ETDRK4 step of the state (``vw[:, 0]``) and its tangent vectors (``vw[:, 1:]``): the
        exact derivative of the ETDRK4 map, since the scheme is applied to the linearised equation
        with the same stage states."""
        E2, Q = self.E2, self.Q
        nv = self.nonlinear_tangent(vw)
        a = E2 * vw + Q * nv
        na = self.nonlinear_tangent(a)
        b = E2 * vw + Q * na
        nb = self.nonlinear_tangent(b)
        c = E2 * a + Q * (2.0 * nb - nv)
        nc = self.nonlinear_tangent(c)
        return self.E * vw + self.f1 * nv + 2.0 * self.f2 * (na + nb) + self.f3 * nc


def _ks_operator(n: int, length: float, dt: float) -> _KSOperator:
    op = _KSOperator(n, length, dt)
    if not op.finite:
        raise ValueError(f"`dt` * (k^2 - k^4) overflows for `length` = {length} and `n` = {n} "
                         f"(largest wavenumber k = {np.pi * n / length:.3g}): use a smaller `dt`, a larger "
                         "`length` or fewer points `n`")
    return op


def _ks_random_states(gen: np.random.Generator, batch: int, n: int) -> np.ndarray:
    u = 0.1 * gen.standard_normal((batch, n))
    return u - u.mean(axis=1, keepdims=True)


@constraints(n="count", length="real>0", dt="real>0", steps="count", burn_in="int>=0", save_every="count",
             batch="count", u0=("array1d", "array2d"), rng="rng")
def kuramoto_sivashinsky(n=64, *, length=22.0, dt=0.25, steps=1000, burn_in=1000, save_every=1, batch=None,
                         u0=None, rng=None) -> Result:
    r"""Trajectories of the Kuramoto-Sivashinsky equation on a periodic domain, integrated by ETDRK4.

    .. math:: u_t + u\, u_x + u_{xx} + u_{xxxx} = 0, \qquad x \in [0, L), \quad u(x + L) = u(x),

    pseudo-spectral on the ``n`` points ``x_j = j L / n`` (real FFT, no dealiasing; the first
    derivative of the Nyquist mode is zero) and integrated in Fourier space by the exponential time
    differencing Runge-Kutta scheme ETDRK4 of Cox and Matthews, with its coefficients evaluated by the
    contour integrals of Kassam and Trefethen (32 points on the upper half of the unit circle). The
    linear part is integrated exactly, so the stiff ``u_xxxx`` term sets no step limit. The spatial
    mean of ``u`` is conserved (to rounding). With ``L = 22`` (the domain studied by Cvitanović,
    Davidchack and Siminos 2010) the dynamics is chaotic; reported largest Lyapunov exponents are about
    0.043 to 0.048, and :func:`lyapunov_exponent` gives about 0.048 at the default ``n`` and ``dt``.

    Parameters
    ----------
    n : int, default 64
        The number of grid points, even and at least 4.
    length : float, default 22.0
        The period ``L`` of the domain.
    dt : float, default 0.25
        The ETDRK4 step.
    steps : int, default 1000
        The number of saved steps after the burn-in: the trajectory holds ``steps + 1`` states.
    burn_in : int, default 1000
        The number of steps integrated and discarded before the first saved state (250 time units at
        the default ``dt``), so that random initial states reach the attractor.
    save_every : int, default 1
        The number of steps between saved states: the saved states are ``save_every * dt`` apart.
    batch : int or None, default None
        The number of independent trajectories, integrated together (vectorised). None: one
        trajectory and a 2-D result; an int: a 3-D result, also for ``batch = 1``.
    u0 : array_like of shape (n,) or (batch, n), optional
        The initial states on the grid (before the burn-in). Default: independent normal values of
        standard deviation 0.1 at the grid points, less their mean (so that the mean of ``u`` is 0),
        drawn from ``rng``. A 2-D ``u0`` gives a 3-D result; ``batch``, if given, must then equal
        ``len(u0)``.
    rng : None, int or numpy.random.Generator, optional
        The source of the random initial states (unused when ``u0`` is given).

    Returns
    -------
    res : Result
        With fields

        trajectory : ndarray of float64, shape (steps + 1, n) or (batch, steps + 1, n)
            ``u`` at the grid points at the saved times, the first after the burn-in.
        times : ndarray of float64, shape (steps + 1,)
            The times of the saved states, ``times[0] = 0`` at the end of the burn-in.
        grid : ndarray of float64, shape (n,)
            The grid points ``x_j = j L / n``.
        metadata : dict
            ``system``, ``n``, ``length``, ``dt``, ``save_every``, ``burn_in``.

    Raises
    ------
    ValueError
        If an argument is out of range, ``n`` is odd, the result would not fit in memory, or the
        integration overflows.

    See Also
    --------
    lorenz96, lyapunov_exponent

    References
    ----------
    .. [1] S. M. Cox, P. C. Matthews, "Exponential time differencing for stiff systems", J. Comput.
       Phys. 176, 430-455 (2002).
    .. [2] A.-K. Kassam, L. N. Trefethen, "Fourth-order time-stepping for stiff PDEs", SIAM J. Sci.
       Comput. 26, 1214-1233 (2005).
    .. [3] P. Cvitanović, R. L. Davidchack, E. Siminos, "On the state space geometry of the
       Kuramoto-Sivashinsky flow in a periodic domain", SIAM J. Appl. Dyn. Syst. 9, 1-33 (2010).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import kuramoto_sivashinsky
    >>> res = kuramoto_sivashinsky(steps=400, rng=0)
    >>> res.trajectory.shape, float(res.times[-1]), float(res.grid[1])
    ((401, 64), 100.0, 0.34375)
    >>> bool(np.abs(res.trajectory.mean(axis=1)).max() < 1e-12)   # the mean of u is conserved
    True
    >>> kuramoto_sivashinsky(n=32, steps=50, batch=8, rng=1).trajectory.shape
    (8, 51, 32)
    """
    n = check_int(n, "n", minimum=4, maximum=C_INT_MAX)
    if n % 2:
        raise ValueError(f"`n` must be even (the real FFT's Nyquist mode); got {n}")
    length = check_real(length, "length", low=0.0, low_open=True)
    dt = check_real(dt, "dt", low=0.0, low_open=True)
    steps = check_int(steps, "steps", minimum=1, maximum=C_INT_MAX)
    burn_in = check_int(burn_in, "burn_in", minimum=0, maximum=C_INT_MAX)
    save_every = check_int(save_every, "save_every", minimum=1, maximum=C_INT_MAX)
    states, batch_size, batched = _initial_states(u0, n, batch, "u0")
    gen = normalize_rng(rng)
    _check_memory(8.0 * batch_size * n * (steps + 1 + 20), "`n`, `steps` and `batch`")
    op = _ks_operator(n, length, dt)
    u = _ks_random_states(gen, batch_size, n) if states is None else states

    out = np.empty((batch_size, steps + 1, n))
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.fft.rfft(u, axis=-1)
        for i in range(burn_in):
            v = op.step(v)
            if i % _CHECK_EVERY == 0 and not np.isfinite(v).all():
                raise _diverged("dt", "length", "u0")
        out[:, 0] = np.fft.irfft(v, n, axis=-1)
        for s in range(1, steps + 1):
            for _ in range(save_every):
                v = op.step(v)
            out[:, s] = np.fft.irfft(v, n, axis=-1)
            if s % _CHECK_EVERY == 0 and not np.isfinite(v).all():
                raise _diverged("dt", "length", "u0")
    if not np.isfinite(out).all():
        raise _diverged("dt", "length", "u0")
    return Result(trajectory=out if batched else out[0], times=dt * save_every * np.arange(steps + 1.0),
                  grid=length * (np.arange(n) / n),
                  metadata={"system": "kuramoto_sivashinsky", "n": n, "length": length, "dt": dt,
                            "save_every": save_every, "burn_in": burn_in})


# --------------------------------------------------------------------------------------------------
# Lyapunov exponents
# --------------------------------------------------------------------------------------------------
_DEFAULTS = {"lorenz96": {"n": 40, "dt": 0.01, "steps": 20_000, "burn_in": 2_000},
             "kuramoto_sivashinsky": {"n": 64, "dt": 0.25, "steps": 20_000, "burn_in": 2_000}}


def _orthonormalise(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """QR of the tangent vectors ``w`` (batch, p, n) (rows are vectors): (orthonormal rows, log|R_ii|)."""
    if w.shape[1] == 1:
        norm = np.sqrt(np.einsum("bpi,bpi->bp", w, w))
        return w / norm[:, :, None], np.log(norm)
    q, r = np.linalg.qr(np.swapaxes(w, 1, 2))
    return np.swapaxes(q, 1, 2), np.log(np.abs(np.diagonal(r, axis1=1, axis2=2)))


@constraints(system="option", n="count", forcing="real", length="real>0", dt="real>0", steps="count",
             burn_in="int>=0", n_exponents="count", qr_every="count", batch="count", rng="rng")
def lyapunov_exponent(system="lorenz96", *, n=None, forcing=8.0, length=22.0, dt=None, steps=None, burn_in=None,
                      n_exponents=1, qr_every=1, batch=1, rng=None) -> Result:
    r"""The leading Lyapunov exponents of Lorenz-96 or Kuramoto-Sivashinsky, by QR (Benettin) iteration.

    The state is integrated as by :func:`lorenz96` or :func:`kuramoto_sivashinsky` together with
    ``n_exponents`` tangent vectors, evolved by the exact linearisation of the same discrete step (for
    Lorenz-96, RK4 applied to the variational equation with the Jacobian; for Kuramoto-Sivashinsky,
    ETDRK4 applied to the linearised equation ``w_t + (u w)_x + w_xx + w_xxxx = 0``). Every
    ``qr_every`` steps the tangent vectors are re-orthonormalised by a QR factorisation and
    ``log |R_ii|`` is accumulated; the exponents are these sums divided by the integration time. The
    tangent vectors are evolved during the burn-in too (without accumulating), so that they are
    aligned with the leading Lyapunov vectors when the averaging starts. ``batch`` independent
    trajectories (random initial states from ``rng``) are run together, vectorised; their mean is
    the estimate and their spread gives a standard error.

    For Kuramoto-Sivashinsky the tangent vectors are kept to zero-mean perturbations: the spatial mean
    is conserved (a neutral direction, exponent 0), which is left out, as is usual for this system.

    Parameters
    ----------
    system : {'lorenz96', 'kuramoto_sivashinsky'}, default 'lorenz96'
        The system.
    n : int, optional
        The number of variables (Lorenz-96, default 40) or grid points (Kuramoto-Sivashinsky, even,
        default 64).
    forcing : float, default 8.0
        Lorenz-96's forcing ``F`` (unused for Kuramoto-Sivashinsky).
    length : float, default 22.0
        Kuramoto-Sivashinsky's period ``L`` (unused for Lorenz-96).
    dt : float, optional
        The step: default 0.01 (Lorenz-96) or 0.25 (Kuramoto-Sivashinsky).
    steps : int, optional
        The number of steps averaged over, per trajectory: default 20000 (200 time units for
        Lorenz-96, 5000 for Kuramoto-Sivashinsky).
    burn_in : int, optional
        The number of steps integrated before the averaging starts: default 2000.
    n_exponents : int, default 1
        How many of the leading exponents to estimate: at most ``n`` (Lorenz-96) or ``n - 1``
        (Kuramoto-Sivashinsky, zero-mean perturbations).
    qr_every : int, default 1
        The number of steps between re-orthonormalisations. Larger values save time while the
        growth over ``qr_every * dt`` stays far from overflowing.
    batch : int, default 1
        The number of independent trajectories.
    rng : None, int or numpy.random.Generator, optional
        The source of the initial states and tangent vectors.

    Returns
    -------
    res : Result
        With fields

        exponents : ndarray of float64, shape (n_exponents,)
            The estimates (mean over the batch), largest first (in the order of the QR columns).
        stderr : ndarray of float64, shape (n_exponents,), or None
            The standard error of ``exponents`` from the spread over the batch (None when ``batch = 1``).
        samples : ndarray of float64, shape (batch, n_exponents)
            The estimate of each trajectory.
        history : ndarray of float64, shape (n_qr, n_exponents)
            The running estimate (mean over the batch) after each of the ``n_qr = ceil(steps /
            qr_every)`` re-orthonormalisations.
        time : float
            The averaging time per trajectory, ``steps * dt``.
        metadata : dict
            ``system``, ``n``, ``dt``, ``steps``, ``burn_in``, ``qr_every``, ``batch`` and
            ``forcing`` or ``length``.

    Raises
    ------
    ValueError
        If an argument is out of range, ``n_exponents`` exceeds the dimension, the arrays would not fit
        in memory, or the integration overflows.

    See Also
    --------
    lorenz96, kuramoto_sivashinsky

    References
    ----------
    .. [1] G. Benettin, L. Galgani, A. Giorgilli, J.-M. Strelcyn, "Lyapunov characteristic exponents
       for smooth dynamical systems and for Hamiltonian systems; a method for computing all of them",
       Meccanica 15, 9-30 (1980).
    .. [2] I. Shimada, T. Nagashima, "A numerical approach to ergodic problem of dissipative
       dynamical systems", Prog. Theor. Phys. 61, 1605-1616 (1979).

    Examples
    --------
    At ``F = 0`` every Lorenz-96 trajectory decays to 0, where the Jacobian is ``-I``: every exponent
    is -1 (RK4's amplification per step, ``log(1 - dt + dt^2/2 - dt^3/6 + dt^4/24) / dt``).

    >>> from numtk.datasets import lyapunov_exponent
    >>> res = lyapunov_exponent("lorenz96", n=8, forcing=0.0, steps=2000, n_exponents=3, rng=0)
    >>> res.exponents.round(6)
    array([-1., -1., -1.])

    The chaotic Lorenz-96 of ``n = 40``, ``F = 8`` (literature: about 1.68):

    >>> res = lyapunov_exponent("lorenz96", steps=5000, batch=8, rng=0)
    >>> bool(1.5 < res.exponents[0] < 1.85)
    True
    """
    system = check_option(system, "system", _SYSTEMS)
    defaults = _DEFAULTS[system]
    n = check_int(defaults["n"] if n is None else n, "n", minimum=4, maximum=C_INT_MAX)
    forcing = check_real(forcing, "forcing")
    length = check_real(length, "length", low=0.0, low_open=True)
    dt = check_real(defaults["dt"] if dt is None else dt, "dt", low=0.0, low_open=True)
    steps = check_int(defaults["steps"] if steps is None else steps, "steps", minimum=1, maximum=C_INT_MAX)
    burn_in = check_int(defaults["burn_in"] if burn_in is None else burn_in, "burn_in", minimum=0,
                        maximum=C_INT_MAX)
    p = check_int(n_exponents, "n_exponents", minimum=1, maximum=C_INT_MAX)
    qr_every = check_int(qr_every, "qr_every", minimum=1, maximum=C_INT_MAX)
    batch = check_int(batch, "batch", minimum=1, maximum=C_INT_MAX)
    gen = normalize_rng(rng)
    ks = system == "kuramoto_sivashinsky"
    if ks and n % 2:
        raise ValueError(f"`n` must be even for the Kuramoto-Sivashinsky system (the real FFT's Nyquist "
                         f"mode); got {n}")
    dim = n - 1 if ks else n
    if p > dim:
        raise ValueError(f"`n_exponents` must be at most {dim}, the dimension of the tangent space "
                         f"({'zero-mean perturbations of ' if ks else ''}`n` = {n}); got {p}")
    n_qr = math.ceil(steps / qr_every)
    # tangent vectors and temporaries (about 30 copies for ETDRK4's stages), plus the history
    _check_memory(8.0 * batch * (p + 1) * n * 30 + 8.0 * n_qr * p, "`n`, `n_exponents`, `batch` and `steps`")

    # initial tangent vectors: random, orthonormal (zero-mean for KS)
    w = gen.standard_normal((batch, p, n))
    if ks:
        op = _ks_operator(n, length, dt)
        u = _ks_random_states(gen, batch, n)
        w -= w.mean(axis=2, keepdims=True)
        w, _ = _orthonormalise(w)
        vw = np.fft.rfft(np.concatenate([u[:, None, :], w], axis=1), axis=-1)

        def advance(state):
            return op.step_tangent(state)

        def tangent(state):
            return np.fft.irfft(state[:, 1:], n, axis=-1)

        def with_tangent(state, q):
            fq = np.fft.rfft(q, axis=-1)
            fq[..., 0] = 0.0  # zero mean exactly: rounding would let the neutral mean mode creep in
            return np.concatenate([state[:, :1], fq], axis=1)
    else:
        x = _l96_random_states(gen, batch, n, forcing)
        w, _ = _orthonormalise(w)
        vw = (x, w)

        def advance(state):
            return _l96_step_tangent(state[0], state[1], forcing, dt)

        def tangent(state):
            return state[1]

        def with_tangent(state, q):
            return (state[0], q)

    def finite(state):
        return all(np.isfinite(a).all() for a in (state if isinstance(state, tuple) else (state,)))

    sums = np.zeros((batch, p))
    history = np.empty((n_qr, p))
    names = ("dt", "qr_every", "forcing" if not ks else "length")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for i in range(1, burn_in + 1):
            vw = advance(vw)
            if i % qr_every == 0 or i == burn_in:
                q, _ = _orthonormalise(tangent(vw))
                vw = with_tangent(vw, q)
                if not finite(vw):
                    raise _diverged(*names)
        j = 0
        for i in range(1, steps + 1):
            vw = advance(vw)
            if i % qr_every == 0 or i == steps:
                q, logs = _orthonormalise(tangent(vw))
                vw = with_tangent(vw, q)
                if not (finite(vw) and np.isfinite(logs).all()):
                    raise _diverged(*names)
                sums += logs
                history[j] = sums.mean(axis=0) / (i * dt)
                j += 1
    samples = sums / (steps * dt)
    stderr = (samples.std(axis=0, ddof=1) / math.sqrt(batch)) if batch > 1 else None
    meta = {"system": system, "n": n, "dt": dt, "steps": steps, "burn_in": burn_in, "qr_every": qr_every,
            "batch": batch}
    meta.update({"length": length} if ks else {"forcing": forcing})
    return Result(exponents=samples.mean(axis=0), stderr=stderr, samples=samples, history=history,
                  time=steps * dt, metadata=meta)
