"""numtk.datasets.rml2016_like: the RML2016.10a-like I/Q generator.

Oracles: the cumulant table of Swami and Sadler (2000) for the six linear constellations (plain
NumPy moments); the raised-cosine pulse in closed form and the root-raised-cosine taps as a
numerical inverse Fourier transform of the square root of the raised-cosine spectrum; SNRs measured
against a noise-free call with the same seed (the draws do not depend on the SNR); constant envelopes
of the frequency-modulated classes; a one-sided spectrum of AM-SSB; bookkeeping counted directly.
"""

import subprocess
import sys

import numpy as np
import pytest
from scipy.integrate import quad

from numtk.datasets import rml2016_like
from numtk.datasets._radio import _rrc_taps

NAMES = ("BPSK", "QPSK", "8PSK", "PAM4", "QAM16", "QAM64", "GFSK", "CPFSK", "WBFM", "AM-DSB", "AM-SSB")


def _complex(X):
    return X[:, 0].astype(np.float64) + 1j * X[:, 1].astype(np.float64)


# --------------------------------------------------------------------------------------------------
# shapes, bookkeeping, norms, determinism
# --------------------------------------------------------------------------------------------------
def test_shapes_labels_and_snr_bookkeeping():
    res = rml2016_like(21, snr_db=[-10, 0, 10], rng=0)
    assert res.classes == NAMES
    assert res.X.shape == (11 * 3 * 21, 2, 128) and res.X.dtype == np.float32
    assert res.y.shape == res.snr.shape == (11 * 3 * 21,)
    assert res.y.dtype.kind == "i" and res.snr.dtype == np.float64
    # ordered by class, then SNR, then draw: n_per_class windows per pair
    for c in range(11):
        for s in (-10.0, 0.0, 10.0):
            assert np.sum((res.y == c) & (res.snr == s)) == 21
    assert np.all(np.diff(res.y) >= 0)
    assert list(res.snr[:63:21]) == [-10.0, 0.0, 10.0]
    assert np.isfinite(res.X).all()
    # distinct windows: no row of zeros left unwritten, no duplicate
    assert np.all(np.abs(res.X).sum(axis=(1, 2)) > 0)
    assert len(np.unique(res.X.reshape(len(res.X), -1), axis=0)) == len(res.X)


def test_default_snrs_are_the_original_grid():
    res = rml2016_like(1, classes="QPSK", rng=0)
    assert list(res.snr) == list(range(-20, 20, 2))
    assert res.classes == ("QPSK",) and set(res.y) == {0}


def test_class_subset_labels_index_the_returned_classes():
    res = rml2016_like(5, snr_db=4, classes=["QAM64", "BPSK"], sps=1, channel=False, rng=1)
    assert res.classes == ("QAM64", "BPSK")
    assert list(res.y) == [0] * 5 + [1] * 5
    # sps 1, no channel, 4 dB: the BPSK windows lie near the real axis, QAM64's do not
    z = _complex(res.X)
    bpsk, qam = z[res.y == 1], z[res.y == 0]
    assert np.mean(np.abs(bpsk.imag)) < 0.5 * np.mean(np.abs(bpsk.real))
    assert np.mean(np.abs(qam.imag)) > 0.7 * np.mean(np.abs(qam.real))


@pytest.mark.parametrize(("channel", "length", "sps", "n"), [(True, 128, 8, 17), (False, 128, 8, 3),
                                                             (True, 37, 1, 2), (False, 8, 3, 40)])
def test_every_window_has_unit_l1_norm(channel, length, sps, n):
    res = rml2016_like(n, snr_db=[-20, 18], length=length, sps=sps, channel=channel, rng=2)
    # the sum over the window's complex samples of sqrt(I^2 + Q^2)
    l1 = np.hypot(res.X[:, 0].astype(np.float64), res.X[:, 1]).sum(axis=1)
    np.testing.assert_allclose(l1, 1.0, atol=2e-6)
    assert res.X.shape == (11 * 2 * n, 2, length)


def test_deterministic_under_rng():
    kw = dict(snr_db=[0, 8], length=64)
    a, b = rml2016_like(20, rng=123, **kw), rml2016_like(20, rng=123, **kw)
    np.testing.assert_array_equal(a.X, b.X)
    c = rml2016_like(20, rng=np.random.default_rng(123), **kw)
    np.testing.assert_array_equal(a.X, c.X)
    d = rml2016_like(20, rng=124, **kw)
    assert not np.array_equal(a.X, d.X)
    np.testing.assert_array_equal(a.y, d.y)


def test_import_does_not_pull_torch():
    code = "import sys, numtk.datasets; numtk.datasets.rml2016_like(1, snr_db=0, rng=0); " \
           "sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


# --------------------------------------------------------------------------------------------------
# constellations: cumulants of Swami and Sadler
# --------------------------------------------------------------------------------------------------
SWAMI_SADLER = {"BPSK": (-2.0, 2.0), "QPSK": (-1.0, 1.0), "8PSK": (-1.0, 0.0), "PAM4": (-1.36, 1.36),
                "QAM16": (-0.68, 0.68), "QAM64": (-0.619, 0.619)}


def _cumulants(z):
    z = z - z.mean()
    z = z / np.sqrt(np.mean(np.abs(z) ** 2))
    c20, c21 = np.mean(z * z), np.mean(np.abs(z) ** 2)
    c40 = np.mean(z ** 4) - 3.0 * c20 ** 2
    c42 = np.mean(np.abs(z) ** 4) - np.abs(c20) ** 2 - 2.0 * c21 ** 2
    return float(np.real(c42)), float(np.abs(c40))


def test_constellation_cumulants_match_swami_sadler():
    # sps 1 and no channel: the bare constellations; 30 dB; 160 windows of 128 = 20480 symbols
    res = rml2016_like(160, snr_db=[30], sps=1, channel=False, classes=list(SWAMI_SADLER), rng=5)
    for c, name in enumerate(res.classes):
        z = _complex(res.X[res.y == c])
        # undo each window's L1 scale: back to unit power per window
        z /= np.sqrt(np.mean(np.abs(z) ** 2, axis=1, keepdims=True))
        c42, c40 = _cumulants(z.ravel())
        want42, want40 = SWAMI_SADLER[name]
        assert abs(c42 - want42) < 0.05, (name, c42)
        assert abs(c40 - want40) < 0.05, (name, c40)


# --------------------------------------------------------------------------------------------------
# pulse shaping
# --------------------------------------------------------------------------------------------------
def _rrc_by_fourier(t, beta):
    """The inverse Fourier transform of sqrt(raised-cosine spectrum), symbol period 1."""
    lo, hi = (1.0 - beta) / 2.0, (1.0 + beta) / 2.0

    def root(f):
        return 1.0 if f <= lo else np.cos(np.pi / (2.0 * beta) * (f - lo))

    return np.array([2.0 * quad(lambda f: root(f) * np.cos(2.0 * np.pi * f * ti), 0.0, hi, limit=200,
                                points=[lo])[0] for ti in t])


@pytest.mark.parametrize(("sps", "beta"), [(8, 0.35), (4, 0.25), (3, 0.35), (5, 0.25)])
def test_rrc_taps_are_the_inverse_transform_of_the_root_spectrum(sps, beta):
    # (4, 0.25) samples t = 1/(4 beta); odd sps: an odd span * sps, the taps still centred and symmetric
    h = _rrc_taps(sps, beta)
    t = (np.arange(len(h)) - len(h) // 2) / sps
    ref = _rrc_by_fourier(t, beta)
    assert len(h) == 2 * (11 * sps // 2) + 1
    np.testing.assert_allclose(h, h[::-1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.sum(h * h), sps, rtol=1e-12)
    np.testing.assert_allclose(h / np.linalg.norm(h), ref / np.linalg.norm(ref), atol=1e-7)


def test_rrc_matched_filter_cascade_is_nyquist():
    sps, beta = 8, 0.35
    h = _rrc_taps(sps, beta)
    g = np.convolve(h, h)
    c = len(g) // 2
    lag = (np.arange(len(g)) - c) / sps
    # the raised cosine in closed form: zero at every nonzero integer symbol lag
    with np.errstate(divide="ignore", invalid="ignore"):
        rc = np.sinc(lag) * np.cos(np.pi * beta * lag) / (1.0 - (2.0 * beta * lag) ** 2)
    sing = np.isclose(np.abs(lag), 1.0 / (2.0 * beta))
    rc[sing] = np.pi / 4.0 * np.sinc(1.0 / (2.0 * beta))
    np.testing.assert_allclose(g / g[c], rc, atol=1e-2)  # truncation to 11 symbols
    isi = g[c % sps::sps] / g[c]
    isi = np.delete(isi, c // sps)
    assert np.max(np.abs(isi)) < 5e-3


def test_matched_filter_recovers_the_qpsk_symbols():
    sps = 8
    res = rml2016_like(6, snr_db=[100], classes="QPSK", length=512, sps=sps, channel=False, rng=7)
    h = _rrc_by_fourier((np.arange(11 * sps + 1) - 11 * sps // 2) / sps, 0.35)
    pts = np.exp(1j * (np.pi / 4 + np.pi / 2 * np.arange(4)))
    for z in _complex(res.X):
        mf = np.convolve(z, h)[len(h) - 1:len(z)]  # valid part
        best = np.inf
        for p in range(sps):
            s = mf[p::sps]
            s = s / np.sqrt(np.mean(np.abs(s) ** 2))
            evm = np.sqrt(np.mean(np.min(np.abs(s[:, None] - pts[None, :]) ** 2, axis=1)))
            best = min(best, evm)
        assert best < 0.05


# --------------------------------------------------------------------------------------------------
# FSK, FM and AM
# --------------------------------------------------------------------------------------------------
def test_frequency_modulations_have_a_constant_envelope_without_channel():
    res = rml2016_like(20, snr_db=[200], classes=["GFSK", "CPFSK", "WBFM"], channel=False, sps=8, rng=3)
    a = np.abs(_complex(res.X))
    assert np.max(a.std(axis=1) / a.mean(axis=1)) < 1e-6
    # the channel's multipath breaks it
    res = rml2016_like(20, snr_db=[200], classes=["WBFM"], channel=True, rng=3)
    a = np.abs(_complex(res.X))
    assert np.mean(a.std(axis=1) / a.mean(axis=1)) > 1e-2


def test_cpfsk_advances_the_phase_by_h_pi_per_symbol():
    sps = 8
    res = rml2016_like(4, snr_db=[200], classes="CPFSK", channel=False, sps=sps, rng=4)
    dphi = np.angle(_complex(res.X)[:, 1:] * np.conj(_complex(res.X)[:, :-1]))
    np.testing.assert_allclose(np.abs(dphi), np.pi * 0.5 / sps, atol=1e-5)


def test_am_ssb_has_a_one_sided_spectrum_and_am_dsb_a_symmetric_one():
    n = 4096
    res = rml2016_like(3, snr_db=[200], classes=["AM-SSB", "AM-DSB"], channel=False, length=n, rng=0)
    f = np.fft.fftfreq(n)
    for c, name in enumerate(res.classes):
        z = _complex(res.X[res.y == c])
        p = np.abs(np.fft.fft(z * np.hanning(n), axis=1)) ** 2
        neg, pos = p[:, f < 0].sum(), p[:, f > 0].sum()
        if name == "AM-SSB":
            assert neg < 1e-4 * pos
        else:
            np.testing.assert_allclose(neg, pos, rtol=1e-6)


def test_long_windows_are_continuous_across_the_channel_pieces():
    # the channel works on pieces of 128 samples: no step at their seams on a smooth (AM) signal
    res = rml2016_like(8, snr_db=[200], classes="AM-DSB", length=1000, rng=5)
    step = np.abs(np.diff(_complex(res.X), axis=1))
    seams = np.arange(127, 999, 128)
    assert step[:, seams].max() < 1.5 * np.delete(step, seams, axis=1).max()
    np.testing.assert_allclose(np.abs(_complex(res.X)).sum(axis=1), 1.0, atol=2e-6)


# --------------------------------------------------------------------------------------------------
# SNR conventions
# --------------------------------------------------------------------------------------------------
def _measured_snr_db(noisy, clean):
    """Mean per-window SNR (dB of the mean linear ratio): fit the clean window's scale to the noisy
    one, the residual is the noise (one real dimension of 2 * length removed). At low SNR a window's
    estimate scatters by some 20 %: the tests average a few hundred windows."""
    a, b = _complex(noisy.X), _complex(clean.X)
    scale = np.sum((a * b.conj()).real, axis=1) / np.sum(np.abs(b) ** 2, axis=1)
    sig = np.sum(np.abs(scale[:, None] * b) ** 2, axis=1)
    noise = np.sum(np.abs(a - scale[:, None] * b) ** 2, axis=1)
    return 10.0 * np.log10(np.mean(sig / noise))


@pytest.mark.parametrize("channel", [False, True])
@pytest.mark.parametrize("name", ["QPSK", "QAM16", "CPFSK", "AM-DSB"])
def test_true_snr_is_the_requested_one(name, channel):
    for snr in (-6.0, 4.0, 14.0):
        kw = dict(classes=name, channel=channel, sps=8, rng=11)
        noisy = rml2016_like(192, snr_db=[snr], **kw)
        clean = rml2016_like(192, snr_db=[200], **kw)
        assert abs(_measured_snr_db(noisy, clean) - snr) < 0.5, (name, channel, snr)


def test_rml_convention_is_a_voltage_so_the_true_snr_doubles():
    # noise power 10**(-snr/5) against unit-power symbols: true SNR = 2 * nominal (dB)
    for snr in (-4.0, 3.0, 9.0):
        kw = dict(classes="QPSK", channel=False, sps=1, rng=12)
        noisy = rml2016_like(256, snr_db=[snr], snr_convention="rml", **kw)
        clean = rml2016_like(256, snr_db=[200], **kw)
        assert abs(_measured_snr_db(noisy, clean) - 2.0 * snr) < 0.4, snr


def test_the_channel_has_unit_mean_power_gain():
    # 'rml' fixes the noise against a unit-power transmitter, so the measured SNR of a burst is its
    # power gain (times 10**(2 snr / 10)); one window per burst, 800 bursts
    snr = 10.0
    kw = dict(classes="CPFSK", channel=True, rng=13)
    noisy = rml2016_like(1, snr_db=[snr] * 800, snr_convention="rml", **kw)
    clean = rml2016_like(1, snr_db=[200] * 800, **kw)
    gain = 10.0 ** (_measured_snr_db(noisy, clean) / 10.0) / 10.0 ** (2.0 * snr / 10.0)
    assert abs(gain - 1.0) < 0.1


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    (dict(n_per_class=0), ValueError, "n_per_class"),
    (dict(n_per_class=1.5), TypeError, "n_per_class"),
    (dict(n_per_class=2**40), ValueError, "n_per_class"),
    (dict(n_per_class=2**30), ValueError, "n_per_class"),       # memory
    (dict(snr_db=[]), ValueError, "snr_db"),
    (dict(snr_db=[0, np.nan]), ValueError, "snr_db"),
    (dict(snr_db=np.inf), ValueError, "snr_db"),
    (dict(snr_db=1e6), ValueError, "snr_db"),
    (dict(snr_db=[[0, 1]]), ValueError, "snr_db"),
    (dict(snr_db="10"), TypeError, "snr_db"),
    (dict(snr_db=True), TypeError, "snr_db"),
    (dict(snr_db=[1 + 1j]), TypeError, "snr_db"),
    (dict(classes=["QPSK", "FM"]), ValueError, "classes"),
    (dict(classes=[]), ValueError, "classes"),
    (dict(classes=["QPSK", "QPSK"]), ValueError, "classes"),
    (dict(classes=3), TypeError, "classes"),
    (dict(classes=[3]), TypeError, "classes"),
    (dict(length=7), ValueError, "length"),
    (dict(length=2**31 - 1), ValueError, "length"),
    (dict(sps=0), ValueError, "sps"),
    (dict(sps=2000), ValueError, "sps"),
    (dict(channel="yes"), TypeError, "channel"),
    (dict(snr_convention="nominal"), ValueError, "snr_convention"),
    (dict(rng="x"), TypeError, "rng"),
])
def test_validation_names_the_parameter(kwargs, exc, name):
    kwargs = {"n_per_class": 2, **kwargs}
    with pytest.raises(exc, match=f"`{name}`"):
        rml2016_like(**kwargs)
