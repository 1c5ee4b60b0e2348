"""numtk.datasets.lorenz96, kuramoto_sivashinsky and lyapunov_exponent.

Oracles: SciPy's solve_ivp (DOP853 for Lorenz-96; Radau with Trefethen's closed-form Fourier
differentiation matrices for Kuramoto-Sivashinsky), finite differences of the step maps for the
tangent dynamics, closed-form exponents at stable equilibria, and the literature's exponents of the
chaotic regimes (Lorenz-96 n = 40, F = 8: about 1.68; Kuramoto-Sivashinsky L = 22: about 0.043-0.048).
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from numtk.datasets import kuramoto_sivashinsky, lorenz96, lyapunov_exponent
from numtk.datasets._dynamics import _KSOperator, _l96_step, _l96_step_tangent


# --------------------------------------------------------------------------------------------------
# references
# --------------------------------------------------------------------------------------------------
def _l96_rhs(t, x, forcing):
    n = len(x)
    return np.array([(x[(i + 1) % n] - x[i - 2]) * x[i - 1] - x[i] + forcing for i in range(n)])


def _fourier_matrices(n, length):
    """Trefethen's periodic spectral differentiation matrices (Spectral Methods in MATLAB, ch. 3) on
    [0, length): D1 (the cot formula: the Nyquist mode's derivative is zero) and D2 (the second
    derivative of the band-limited interpolant, Nyquist mode included)."""
    h = 2.0 * np.pi / n
    d = np.subtract.outer(np.arange(n), np.arange(n))
    sign = np.where(d % 2 == 0, 1.0, -1.0)
    with np.errstate(divide="ignore"):
        d1 = np.where(d == 0, 0.0, 0.5 * sign / np.tan(d * h / 2.0))
        d2 = np.where(d == 0, -np.pi ** 2 / (3.0 * h ** 2) - 1.0 / 6.0, -0.5 * sign / np.sin(d * h / 2.0) ** 2)
    s = 2.0 * np.pi / length
    return s * d1, s ** 2 * d2


def _ks_reference(u0, length, t_end, times):
    n = len(u0)
    d1, d2 = _fourier_matrices(n, length)
    lin = -d2 - d2 @ d2

    def rhs(t, u):
        return -d1 @ (0.5 * u * u) + lin @ u

    def jac(t, u):
        return -d1 * u[None, :] + lin

    sol = solve_ivp(rhs, (0.0, t_end), u0, method="Radau", jac=jac, t_eval=times, rtol=1e-12, atol=1e-13)
    assert sol.success
    return sol.y.T


# --------------------------------------------------------------------------------------------------
# Lorenz-96
# --------------------------------------------------------------------------------------------------
def test_lorenz96_matches_solve_ivp_and_is_fourth_order():
    rng = np.random.default_rng(3)
    x0 = 8.0 + rng.standard_normal(12)
    t_end = 1.0
    ref = solve_ivp(_l96_rhs, (0.0, t_end), x0, method="DOP853", args=(8.0,), rtol=1e-13, atol=1e-13,
                    t_eval=np.linspace(0.0, t_end, 11)).y.T
    res = lorenz96(12, dt=0.0005, steps=10, save_every=200, burn_in=0, x0=x0)
    np.testing.assert_allclose(res.times, np.linspace(0.0, t_end, 11), rtol=1e-14)
    np.testing.assert_array_equal(res.trajectory[0], x0)
    np.testing.assert_allclose(res.trajectory, ref, rtol=0, atol=1e-7)
    errors = [np.abs(lorenz96(12, dt=dt, steps=1, save_every=round(t_end / dt), burn_in=0, x0=x0).trajectory[-1]
                     - ref[-1]).max() for dt in (0.02, 0.01)]
    assert 12.0 < errors[0] / errors[1] < 20.0  # 2^4 = 16


def test_lorenz96_tangent_is_the_derivative_of_the_step():
    rng = np.random.default_rng(0)
    x = 8.0 + rng.standard_normal((2, 10))
    v = rng.standard_normal((2, 3, 10))
    _, tangent = _l96_step_tangent(x, v, 8.0, 0.05)
    eps = 1e-6
    fd = np.stack([(_l96_step(x + eps * v[:, j], 8.0, 0.05) - _l96_step(x - eps * v[:, j], 8.0, 0.05)) / (2 * eps)
                   for j in range(3)], axis=1)
    np.testing.assert_allclose(tangent, fd, rtol=1e-7, atol=1e-8)


def test_lorenz96_shapes_batches_and_determinism():
    a = lorenz96(8, steps=20, burn_in=10, rng=5)
    b = lorenz96(8, steps=20, burn_in=10, rng=np.random.default_rng(5))
    assert a.trajectory.shape == (21, 8) and a.times.shape == (21,)
    np.testing.assert_array_equal(a.trajectory, b.trajectory)
    assert not np.array_equal(a.trajectory, lorenz96(8, steps=20, burn_in=10, rng=6).trajectory)
    ens = lorenz96(8, steps=20, burn_in=10, batch=5, rng=5)
    assert ens.trajectory.shape == (5, 21, 8)
    assert lorenz96(8, steps=3, batch=1, rng=0).trajectory.shape == (1, 4, 8)
    # a batch is the same as its members integrated one by one
    x0 = 8.0 + np.random.default_rng(1).standard_normal((4, 8))
    batch = lorenz96(8, steps=30, burn_in=5, x0=x0).trajectory
    assert batch.shape == (4, 31, 8)
    for i in range(4):
        np.testing.assert_allclose(batch[i], lorenz96(8, steps=30, burn_in=5, x0=x0[i]).trajectory, rtol=1e-13)
    # save_every thins the same integration
    fine = lorenz96(8, steps=30, burn_in=5, x0=x0[0]).trajectory
    coarse = lorenz96(8, steps=10, burn_in=5, save_every=3, x0=x0[0])
    np.testing.assert_array_equal(coarse.trajectory, fine[::3])
    np.testing.assert_allclose(coarse.times, 0.03 * np.arange(11))
    assert coarse.metadata == {"system": "lorenz96", "n": 8, "forcing": 8.0, "dt": 0.01, "save_every": 3,
                               "burn_in": 5}


def test_lorenz96_stays_bounded_on_the_attractor():
    traj = lorenz96(steps=2000, save_every=5, batch=4, rng=2).trajectory
    assert np.isfinite(traj).all()
    # at F = 8 the variables stay within about [-10, 15]; the mean is about 2.3 and the std about 3.6
    assert traj.min() > -15.0 and traj.max() < 20.0
    assert 1.5 < traj.mean() < 3.0 and 3.0 < traj.std() < 4.3


# --------------------------------------------------------------------------------------------------
# Kuramoto-Sivashinsky
# --------------------------------------------------------------------------------------------------
def _smooth_u0(n, length):
    y = 2 * np.pi * np.arange(n) / n
    return np.cos(y) * (1.0 + np.sin(y)) + 0.3 * np.sin(3 * y)


def test_kuramoto_sivashinsky_matches_radau_and_is_fourth_order():
    n, length, t_end = 32, 22.0, 10.0
    u0 = _smooth_u0(n, length)
    times = np.linspace(0.0, t_end, 11)
    ref = _ks_reference(u0, length, t_end, times)
    res = kuramoto_sivashinsky(n, length=length, dt=0.0125, steps=10, save_every=80, burn_in=0, u0=u0)
    np.testing.assert_allclose(res.times, times, rtol=1e-14)
    np.testing.assert_allclose(res.trajectory, ref, rtol=0, atol=1e-7)
    # fourth order (approached from below: about 13 and 14 for these steps, 16 in the limit)
    errors = [np.abs(kuramoto_sivashinsky(n, length=length, dt=dt, steps=1, save_every=round(t_end / dt),
                                          burn_in=0, u0=u0).trajectory[-1] - ref[-1]).max()
              for dt in (0.05, 0.025, 0.0125)]
    assert 11.0 < errors[0] / errors[1] < 20.0 and 11.0 < errors[1] / errors[2] < 20.0


def test_kuramoto_sivashinsky_phi_functions_match_the_direct_formulas():
    # away from 0 the contour means equal the closed forms of ETDRK4's coefficients
    op = _KSOperator(16, 22.0, 0.25)
    k = 2 * np.pi / 22.0 * np.arange(9)
    z = 0.25 * (k ** 2 - k ** 4)
    far = np.abs(z) > 0.5
    z, h = z[far], 0.25
    np.testing.assert_allclose(op.Q[far], h * (np.exp(z / 2) - 1) / z, rtol=1e-12)
    np.testing.assert_allclose(op.f1[far], h * (-4 - z + np.exp(z) * (4 - 3 * z + z ** 2)) / z ** 3, rtol=1e-12)
    np.testing.assert_allclose(op.f2[far], h * (2 + z + np.exp(z) * (z - 2)) / z ** 3, rtol=1e-12)
    np.testing.assert_allclose(op.f3[far], h * (-4 - 3 * z - z ** 2 + np.exp(z) * (4 - z)) / z ** 3, rtol=1e-12)
    # at k = 0 (z = 0): the limits h/2, h/6, h/6, h/6
    np.testing.assert_allclose([op.Q[0], op.f1[0], op.f2[0], op.f3[0]], [h / 2, h / 6, h / 6, h / 6], rtol=1e-13)


def test_kuramoto_sivashinsky_tangent_is_the_derivative_of_the_step():
    op = _KSOperator(32, 22.0, 0.25)
    rng = np.random.default_rng(1)
    u = _smooth_u0(32, 22.0)[None, :]
    w = rng.standard_normal((1, 2, 32))
    vw = np.fft.rfft(np.concatenate([u[:, None, :], w], axis=1), axis=-1)
    out = np.fft.irfft(op.step_tangent(vw), 32, axis=-1)
    eps = 1e-6
    for j in range(2):
        plus = np.fft.irfft(op.step(np.fft.rfft(u + eps * w[:, j], axis=-1)), 32, axis=-1)
        minus = np.fft.irfft(op.step(np.fft.rfft(u - eps * w[:, j], axis=-1)), 32, axis=-1)
        np.testing.assert_allclose(out[:, 1 + j], (plus - minus) / (2 * eps), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(out[:, 0], np.fft.irfft(op.step(np.fft.rfft(u, axis=-1)), 32, axis=-1), rtol=1e-14)


def test_kuramoto_sivashinsky_conserves_the_mean_and_stays_bounded():
    u0 = _smooth_u0(64, 22.0) + 0.3
    res = kuramoto_sivashinsky(u0=u0, steps=400, burn_in=0)
    np.testing.assert_allclose(res.trajectory.mean(axis=1), 0.3, rtol=0, atol=1e-12)
    traj = kuramoto_sivashinsky(steps=1000, batch=4, rng=4).trajectory
    assert np.isfinite(traj).all()
    np.testing.assert_allclose(traj.mean(axis=2), 0.0, atol=1e-12)
    # on the L = 22 attractor |u| stays below about 3.5, with an rms of about 1.2
    assert np.abs(traj).max() < 4.0 and 0.9 < traj.std() < 1.5


def test_kuramoto_sivashinsky_shapes_batches_and_determinism():
    a = kuramoto_sivashinsky(32, steps=10, burn_in=10, rng=3)
    assert a.trajectory.shape == (11, 32) and a.times.shape == (11,) and a.grid.shape == (32,)
    np.testing.assert_allclose(a.grid, 22.0 * np.arange(32) / 32)
    np.testing.assert_array_equal(a.trajectory, kuramoto_sivashinsky(32, steps=10, burn_in=10, rng=3).trajectory)
    assert not np.array_equal(a.trajectory, kuramoto_sivashinsky(32, steps=10, burn_in=10, rng=4).trajectory)
    u0 = 0.5 * np.random.default_rng(2).standard_normal((3, 32))
    batch = kuramoto_sivashinsky(32, steps=20, burn_in=4, u0=u0).trajectory
    assert batch.shape == (3, 21, 32)
    for i in range(3):
        np.testing.assert_allclose(batch[i], kuramoto_sivashinsky(32, steps=20, burn_in=4, u0=u0[i]).trajectory,
                                   rtol=1e-12, atol=1e-13)
    coarse = kuramoto_sivashinsky(32, steps=5, burn_in=4, save_every=4, u0=u0[0]).trajectory
    np.testing.assert_allclose(coarse, batch[0, ::4], rtol=1e-12, atol=1e-13)


# --------------------------------------------------------------------------------------------------
# Lyapunov exponents
# --------------------------------------------------------------------------------------------------
def test_lyapunov_lorenz96_chaotic_regime():
    res = lyapunov_exponent("lorenz96", steps=3000, batch=8, rng=0)
    assert abs(res.exponents[0] - 1.68) < 0.15
    assert res.samples.shape == (8, 1) and res.history.shape == (3000, 1) and res.time == pytest.approx(30.0)
    assert res.stderr[0] < 0.1
    np.testing.assert_allclose(res.history[-1], res.exponents)


def test_lyapunov_lorenz96_decaying_regime_is_rk4s_amplification():
    # F = 0: the energy decays as exp(-2t), the state goes to 0 where the Jacobian is -I
    dt = 0.02
    res = lyapunov_exponent("lorenz96", n=8, forcing=0.0, dt=dt, steps=1000, burn_in=1000, n_exponents=4,
                            qr_every=5, rng=1)
    exact = math.log(1 - dt + dt ** 2 / 2 - dt ** 3 / 6 + dt ** 4 / 24) / dt
    np.testing.assert_allclose(res.exponents, exact, rtol=0, atol=1e-8)


def test_lyapunov_lorenz96_stable_equilibrium_matches_the_jacobian():
    # F = 0.5: x = F is a stable equilibrium; the Jacobian there is circulant with eigenvalues
    # F (e^{i theta} - e^{-2 i theta}) - 1, theta = 2 pi j / n
    n, forcing, dt = 10, 0.5, 0.05
    theta = 2 * np.pi * np.arange(n) / n
    lam = forcing * (np.exp(1j * theta) - np.exp(-2j * theta)) - 1.0
    rk4 = 1 + dt * lam + (dt * lam) ** 2 / 2 + (dt * lam) ** 3 / 6 + (dt * lam) ** 4 / 24
    expected = np.sort(np.log(np.abs(rk4)) / dt)[::-1][:4]
    res = lyapunov_exponent("lorenz96", n=n, forcing=forcing, dt=dt, steps=3000, burn_in=500, n_exponents=4,
                            rng=2)
    np.testing.assert_allclose(res.exponents, expected, rtol=0, atol=1e-6)


def test_lyapunov_kuramoto_sivashinsky_chaotic_regime():
    res = lyapunov_exponent("kuramoto_sivashinsky", steps=4000, batch=6, rng=0)
    assert 0.02 < res.exponents[0] < 0.07
    assert res.metadata["length"] == 22.0 and "forcing" not in res.metadata


@pytest.mark.slow
def test_lyapunov_kuramoto_sivashinsky_spectrum_slow():
    # the leading exponent (about 0.048 here), then a near-zero one and the translation's 0
    res = lyapunov_exponent("kuramoto_sivashinsky", steps=20000, n_exponents=3, batch=8, rng=1)
    assert 0.038 < res.exponents[0] < 0.058
    assert abs(res.exponents[1]) < 0.01 and abs(res.exponents[2]) < 0.005
    assert res.stderr[0] < 0.003


def test_lyapunov_kuramoto_sivashinsky_decaying_domain_is_exact():
    # L = 5 < 2 pi: every nonzero mode decays linearly; ETDRK4 integrates the linear part exactly, so
    # the two leading exponents are k^2 - k^4 of the first mode (its cosine and sine)
    length = 5.0
    k = 2 * np.pi / length
    res = lyapunov_exponent("kuramoto_sivashinsky", n=16, length=length, steps=400, burn_in=400, n_exponents=3,
                            rng=0)
    np.testing.assert_allclose(res.exponents[:2], k ** 2 - k ** 4, rtol=1e-6)
    np.testing.assert_allclose(res.exponents[2], (2 * k) ** 2 - (2 * k) ** 4, rtol=1e-3)


def test_lyapunov_determinism_and_fields():
    a = lyapunov_exponent("lorenz96", n=8, steps=200, burn_in=50, n_exponents=2, qr_every=4, batch=3, rng=7)
    b = lyapunov_exponent("lorenz96", n=8, steps=200, burn_in=50, n_exponents=2, qr_every=4, batch=3, rng=7)
    assert a == b
    assert a.exponents.shape == (2,) and a.stderr.shape == (2,) and a.samples.shape == (3, 2)
    assert a.history.shape == (50, 2)
    np.testing.assert_allclose(a.exponents, a.samples.mean(axis=0))
    assert lyapunov_exponent("lorenz96", n=8, steps=20, burn_in=0, rng=0).stderr is None
    assert a.metadata["forcing"] == 8.0 and a.metadata["qr_every"] == 4


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("func", "kwargs", "name"), [
    (lorenz96, {"n": 3}, "`n`"),
    (lorenz96, {"dt": 0.0}, "`dt`"),
    (lorenz96, {"forcing": float("nan")}, "`forcing`"),
    (lorenz96, {"steps": 0}, "`steps`"),
    (lorenz96, {"burn_in": -1}, "`burn_in`"),
    (lorenz96, {"save_every": 0}, "`save_every`"),
    (lorenz96, {"batch": 0}, "`batch`"),
    (lorenz96, {"x0": np.ones(5)}, "`x0`"),
    (lorenz96, {"x0": np.full(40, np.nan)}, "`x0`"),
    (lorenz96, {"x0": np.ones((2, 40)), "batch": 3}, "`batch`"),
    (lorenz96, {"steps": 10**12}, "`steps`"),
    (lorenz96, {"dt": 5.0}, "`dt`"),                         # RK4 overflows
    (kuramoto_sivashinsky, {"n": 63}, "`n`"),
    (kuramoto_sivashinsky, {"length": -1.0}, "`length`"),
    (kuramoto_sivashinsky, {"dt": 1e308}, "`dt`"),
    (kuramoto_sivashinsky, {"length": 1e-308}, "`length`"),
    (kuramoto_sivashinsky, {"u0": np.ones((2, 3, 64))}, "`u0`"),
    (kuramoto_sivashinsky, {"rng": -1}, "`rng`"),
    (lyapunov_exponent, {"system": "lorenz63"}, "`system`"),
    (lyapunov_exponent, {"n_exponents": 41}, "`n_exponents`"),
    (lyapunov_exponent, {"system": "kuramoto_sivashinsky", "n_exponents": 64}, "`n_exponents`"),
    (lyapunov_exponent, {"system": "kuramoto_sivashinsky", "n": 33}, "`n`"),
    (lyapunov_exponent, {"qr_every": 0}, "`qr_every`"),
    (lyapunov_exponent, {"steps": 10**12}, "`steps`"),
    (lyapunov_exponent, {"dt": 5.0, "steps": 10, "burn_in": 0}, "`dt`"),
])
def test_validation_names_the_parameter(func, kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        func(**kwargs)
