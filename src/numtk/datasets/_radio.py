"""An RML2016.10a-like generator of labelled I/Q windows (NumPy only).

The recipe re-derives the published GNU Radio generator of the RadioML 2016.10a data set (O'Shea,
Corgan and Clancy 2016; the repository ``radioML/dataset``): eleven modulations, a dynamic channel
(carrier and sampling-rate offsets as clipped random walks, a Rician three-path fading channel with a
slow Doppler spread, additive white Gaussian noise), windows cut from longer bursts at a random
offset and random strides, each window divided by the sum of its samples' magnitudes. Nothing of the
original is copied; the parameters are those the recipe states. Reconstructed where the recipe
rests on GNU Radio blocks or recorded audio: the analog classes use a synthetic band-limited "audio"
(a sum of random tones), the fading is a sum-of-sinusoids model, the fractional delays are windowed
sinc filters.

Everything is vectorised over a chunk of bursts (2-D arrays, one row per burst): there is no Python
loop per window. The transmitters run over whole bursts; the channel (local: interpolation, 8-tap
filters, slowly varying gains) and the white noise are evaluated on the windows only, the last steps
in single precision since the windows end as float32.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from numtk._lib._constraints import constraints
from numtk._lib._result import Result
from numtk._lib._rng import normalize_rng
from numtk._lib._validation import (C_INT_MAX, as_array, available_memory, check_bool, check_int,
                                    check_option)

__all__ = ["rml2016_like"]

#: The eleven class names of RML2016.10a, in the order of the labels ``y``.
RML_CLASSES = ("BPSK", "QPSK", "8PSK", "PAM4", "QAM16", "QAM64", "GFSK", "CPFSK", "WBFM", "AM-DSB",
               "AM-SSB")
_LINEAR = ("BPSK", "QPSK", "8PSK", "PAM4", "QAM16", "QAM64")

# The recipe's constants (sample rate of the channel model, pulse shaping, FSK, channel)
_FS = 200e3            # the nominal sample rate (Hz) the channel's frequencies refer to
_RRC_BETA = 0.35       # root-raised-cosine roll-off of the linear modulations
_RRC_SPAN = 11         # symbols spanned by the RRC filter
_GFSK_BT = 0.35        # Gaussian filter bandwidth-time product
_GFSK_SPAN = 4         # symbols spanned by the Gaussian filter
_GFSK_SENSITIVITY = 0.1  # rad per sample per unit of the filtered NRZ signal
_CPFSK_H = 0.5         # CPFSK modulation index
_AUDIO_TONES = 5       # tones of the synthetic audio
_AUDIO_BAND = (200.0, 8e3)   # Hz: the tones' frequencies are log-uniform in this band
_AM_INDEX = (0.5, 1.0)       # AM-DSB modulation index, uniform
_WBFM_DEVIATION = 75e3       # Hz: peak frequency deviation of WBFM
_CFO_STEP, _CFO_MAX = 0.01, 500.0   # Hz: random-walk step std and clip of the carrier offset
_SRO_STEP, _SRO_MAX = 0.01, 50.0    # Hz: the same for the sampling-rate offset
_DOPPLER = 1.0                      # Hz: maximum Doppler frequency
_SINUSOIDS = 8                      # sinusoids of the sum-of-sinusoids fading model
_RICE_K = 4.0                       # Rician K factor of the first (line-of-sight) path
_DELAYS = (0.0, 0.9, 1.7)           # samples
_MAGS = (1.0, 0.8, 0.3)
_DELAY_TAPS = 8                     # taps of the fractional-delay (windowed sinc) filters
_START = (50, 500)                  # the first window's start in a burst (inclusive)
_WINDOWS_PER_BURST = 16
_GRID = 64                          # samples between the grid points of the offsets' random walks
_PIECE = 128                        # longest stretch over which the channel's gains are interpolated
_CHUNK_SAMPLES = 1 << 19            # burst samples per vectorised chunk
_SNR_LIMIT = 200.0                  # |snr_db| bound (dB)


# --------------------------------------------------------------------------------------------------
# pulses and constellations
# --------------------------------------------------------------------------------------------------
def _rrc_taps(sps: int, beta: float = _RRC_BETA, span: int = _RRC_SPAN) -> np.ndarray:
    """Root-raised-cosine taps, ``2 * (span * sps // 2) + 1`` of them (``span * sps + 1`` for an even
    product), symmetric about the centre tap, scaled to ``sum(h**2) = sps`` (so that unit-power symbols give
    a unit-power signal)."""
    half = span * sps // 2
    t = np.arange(-half, half + 1) / sps  # in symbols
    h = np.empty_like(t)
    at0 = np.abs(t) < 1e-12
    edge = np.abs(np.abs(t) - 1.0 / (4.0 * beta)) < 1e-9
    rest = ~(at0 | edge)
    tr = t[rest]
    h[rest] = ((np.sin(np.pi * tr * (1.0 - beta)) + 4.0 * beta * tr * np.cos(np.pi * tr * (1.0 + beta)))
               / (np.pi * tr * (1.0 - (4.0 * beta * tr) ** 2)))
    h[at0] = 1.0 - beta + 4.0 * beta / np.pi
    h[edge] = beta / math.sqrt(2.0) * ((1.0 + 2.0 / np.pi) * math.sin(np.pi / (4.0 * beta))
                                      + (1.0 - 2.0 / np.pi) * math.cos(np.pi / (4.0 * beta)))
    return h * math.sqrt(sps / np.sum(h * h))


def _gaussian_pulse(sps: int, bt: float = _GFSK_BT, span: int = _GFSK_SPAN) -> np.ndarray:
    """The Gaussian filter (unit sum) convolved with a one-symbol rectangle: the frequency pulse of
    GFSK for one NRZ symbol (its values sum to ``sps``)."""
    sigma = math.sqrt(math.log(2.0)) / (2.0 * np.pi * bt) * sps  # in samples
    half = span * sps // 2
    t = np.arange(-half, half + 1)
    g = np.exp(-0.5 * (t / sigma) ** 2)
    g /= g.sum()
    return np.convolve(g, np.ones(sps))


def _constellation(name: str) -> np.ndarray:
    """The points of a linear modulation at unit average power."""
    if name == "BPSK":
        pts = np.array([-1.0, 1.0], dtype=complex)
    elif name == "QPSK":
        pts = np.exp(1j * (np.pi / 4.0 + np.pi / 2.0 * np.arange(4)))
    elif name == "8PSK":
        pts = np.exp(1j * np.pi / 4.0 * np.arange(8))
    elif name == "PAM4":
        pts = np.arange(-3.0, 4.0, 2.0).astype(complex)
    else:
        side = 4 if name == "QAM16" else 8
        levels = np.arange(-(side - 1.0), side, 2.0)
        pts = (levels[:, None] + 1j * levels[None, :]).ravel()
    return pts / np.sqrt(np.mean(np.abs(pts) ** 2))


def _shape(symbols: np.ndarray, pulse: np.ndarray, sps: int) -> np.ndarray:
    """Polyphase pulse shaping: the full convolution of the symbols upsampled by ``sps`` (zeros
    inserted) with ``pulse``, along the last axis, as (batch, n_symbols * sps) (the tail past the
    last symbol's slot is dropped). One real matrix product: the windows of ``k`` consecutive symbols
    times the ``k`` polyphase rows of the pulse."""
    k = -(-len(pulse) // sps)
    poly = np.zeros(k * sps)
    poly[:len(pulse)] = pulse
    rev = poly.reshape(k, sps)[::-1]
    b, n = symbols.shape
    pad = np.zeros((b, n + k - 1), dtype=symbols.dtype)
    pad[:, k - 1:] = symbols
    if np.iscomplexobj(symbols):
        view = pad.view(np.float64).reshape(b, n + k - 1, 2)
        win = np.ascontiguousarray(sliding_window_view(view, k, axis=1))   # (b, n, 2, k)
        out = np.ascontiguousarray(np.swapaxes(win @ rev, 2, 3))           # (b, n, sps, 2)
        return out.view(complex).reshape(b, n * sps)
    win = np.ascontiguousarray(sliding_window_view(pad, k, axis=1))       # (b, n, k)
    return (win @ rev).reshape(b, n * sps)


# --------------------------------------------------------------------------------------------------
# transmitters: (batch, n) complex baseband at unit power
# --------------------------------------------------------------------------------------------------
def _linear(name: str, gen, b: int, n: int, sps: int) -> np.ndarray:
    pts = _constellation(name)
    if sps == 1:
        return pts[gen.integers(0, len(pts), (b, n))]
    h = _rrc_taps(sps)
    nsym = -(-(n + len(h)) // sps)
    out = _shape(pts[gen.integers(0, len(pts), (b, nsym))], h, sps)
    start = len(h) - 1  # past the filter's transient
    return out[:, start:start + n]


def _fsk(name: str, gen, b: int, n: int, sps: int) -> np.ndarray:
    if name == "GFSK":
        pulse, gain = _gaussian_pulse(sps), _GFSK_SENSITIVITY
    else:  # CPFSK: rectangular frequency pulse, h * pi of phase per symbol
        pulse, gain = np.ones(sps), np.pi * _CPFSK_H / sps
    nsym = -(-(n + len(pulse)) // sps)
    bits = 2.0 * gen.integers(0, 2, (b, nsym)) - 1.0
    freq = _shape(bits, pulse, sps)[:, len(pulse) - 1:len(pulse) - 1 + n]
    phase = gain * np.cumsum(freq, axis=1) + gen.uniform(0.0, 2.0 * np.pi, (b, 1))
    return np.exp(1j * phase)


def _audio(gen, b: int, n: int) -> np.ndarray:
    """The analytic signal of a band-limited "audio": a sum of tones with log-uniform frequencies,
    random amplitudes and phases, scaled so that the real part stays within [-1, 1]. The real part
    is the audio ``a``, the imaginary part its Hilbert transform (exact for tones)."""
    lo, hi = np.log(_AUDIO_BAND[0] / _FS), np.log(_AUDIO_BAND[1] / _FS)
    f = np.exp(gen.uniform(lo, hi, (b, _AUDIO_TONES, 1)))
    amp = gen.uniform(0.1, 1.0, (b, _AUDIO_TONES, 1))
    ph = gen.uniform(0.0, 2.0 * np.pi, (b, _AUDIO_TONES, 1))
    amp /= amp.sum(axis=1, keepdims=True)
    # exp(j 2 pi f (s G + r)) = exp(j 2 pi f s G) exp(j 2 pi f r): 2 n / G exponentials per tone
    n_seg = -(-n // _GRID)
    coarse = np.arange(n_seg) * float(_GRID)
    fine = np.arange(_GRID, dtype=float)
    out = np.zeros((b, n_seg, _GRID), dtype=complex)
    for i in range(_AUDIO_TONES):
        fi = 2.0 * np.pi * f[:, i]
        outer = (amp[:, i] * np.exp(1j * (fi * coarse + ph[:, i])))[:, :, None]
        out += outer * np.exp(1j * fi * fine)[:, None, :]
    return out.reshape(b, -1)[:, :n]


def _analog(name: str, gen, b: int, n: int) -> np.ndarray:
    z = _audio(gen, b, n)
    if name == "AM-SSB":  # upper sideband, suppressed carrier: a + j H(a)
        s = z
    elif name == "AM-DSB":  # (1 + m a), full carrier
        m = gen.uniform(*_AM_INDEX, (b, 1))
        s = (1.0 + m * z.real).astype(complex)
    else:  # WBFM: the phase integrates the audio with a large deviation
        phase = (2.0 * np.pi * _WBFM_DEVIATION / _FS) * np.cumsum(z.real, axis=1)
        return np.exp(1j * (phase + gen.uniform(0.0, 2.0 * np.pi, (b, 1))))
    return s / np.sqrt(np.mean(np.abs(s) ** 2, axis=1, keepdims=True))


def _transmit(name: str, gen, b: int, n: int, sps: int) -> np.ndarray:
    if name in _LINEAR:
        return _linear(name, gen, b, n, sps)
    if name in ("GFSK", "CPFSK"):
        return _fsk(name, gen, b, n, sps)
    return _analog(name, gen, b, n)


# --------------------------------------------------------------------------------------------------
# the channel
# --------------------------------------------------------------------------------------------------
def _on_grid(values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``values`` (batch, n_grid), given every ``_GRID`` samples, at the times ``t`` (batch, ...)
    (samples, >= 0), by linear interpolation."""
    b = values.shape[0]
    tf = t.reshape(b, -1)
    i = np.minimum(tf // _GRID, values.shape[1] - 2).astype(np.intp)
    w = tf / _GRID - i
    lo = np.take_along_axis(values, i, axis=1)
    return (lo + (np.take_along_axis(values, i + 1, axis=1) - lo) * w).reshape(t.shape)


def _random_walk(gen, b: int, n_grid: int, step: float, clip: float) -> np.ndarray:
    """A random walk from 0 with Gaussian steps of std ``step`` per sample, clipped to [-clip, clip],
    on the grid (its steps there have std ``step * sqrt(_GRID)``)."""
    steps = gen.normal(0.0, step * math.sqrt(_GRID), (b, n_grid))
    steps[:, 0] = 0.0
    return np.clip(np.cumsum(steps, axis=1), -clip, clip)


def _integrate(rate: np.ndarray) -> np.ndarray:
    """The running sum over samples of a rate given on the grid (trapezoids between grid points)."""
    out = np.zeros_like(rate)
    out[:, 1:] = np.cumsum(0.5 * (rate[:, 1:] + rate[:, :-1]) * _GRID, axis=1)
    return out


def _delay_filters() -> np.ndarray:
    """(paths, taps) windowed-sinc fractional delays, all shifted by the same ``taps // 2 - 1``
    samples (a delay of 0 is then a pure shift)."""
    k = np.arange(_DELAY_TAPS) - (_DELAY_TAPS // 2 - 1)
    half = _DELAY_TAPS / 2.0
    out = []
    for d in _DELAYS:
        if d == round(d):
            f = (k == d).astype(float)
        else:  # a sinc centred on the delay, under a Hamming window of the same centre
            f = np.sinc(k - d) * (0.54 + 0.46 * np.cos(np.pi * (k - d) / half))
            f /= f.sum()
        out.append(f)
    return np.array(out)


def _fading_gains(gen, b: int, t: np.ndarray) -> np.ndarray:
    """(batch, paths, T) complex path gains at the times ``t`` (batch, T) (samples): sum-of-sinusoids
    Rayleigh processes with maximum Doppler ``_DOPPLER`` Hz, a line-of-sight component of Rician
    factor K on the first path, each of unit mean power, times the path magnitudes normalised to
    unit total power."""
    p, m = len(_DELAYS), _SINUSOIDS
    wd = 2.0 * np.pi * _DOPPLER / _FS
    alpha = gen.uniform(0.0, 2.0 * np.pi, (b, p, m, 1))
    phi = gen.uniform(0.0, 2.0 * np.pi, (b, p, m, 1))
    g = np.exp(1j * (wd * np.cos(alpha) * t[:, None, None, :] + phi)).sum(axis=2) / math.sqrt(m)
    los_angle = gen.uniform(0.0, 2.0 * np.pi, (b, 1))
    los_phase = gen.uniform(0.0, 2.0 * np.pi, (b, 1))
    los = np.exp(1j * (wd * np.cos(los_angle) * t + los_phase))
    g[:, 0] = math.sqrt(_RICE_K / (_RICE_K + 1.0)) * los + math.sqrt(1.0 / (_RICE_K + 1.0)) * g[:, 0]
    mags = np.asarray(_MAGS) / math.sqrt(sum(v * v for v in _MAGS))
    return g * mags[None, :, None]


def _channel_margin(n: int) -> int:
    """Samples a burst needs past its last window's end: the delay filters, the largest possible
    sampling-rate drift over ``n`` samples and the overshoot of a window's last piece."""
    return _DELAY_TAPS + 4 + math.ceil(_SRO_MAX / _FS * n) + _PIECE


def _channel(x: np.ndarray, gen, starts: np.ndarray, length: int) -> np.ndarray:
    """The noise-free received windows (batch, m, length) of the bursts ``x`` (batch, n), the windows
    starting at ``starts`` (batch, m): sampling-rate offset, carrier offset and phase, multipath fading.

    The channel is evaluated only where the windows need it (each window and the 7 samples the delay
    filters reach past it), in pieces of at most ``_PIECE`` samples. The offsets' random walks are
    drawn on a grid of ``_GRID`` samples and interpolated linearly in between; the path gains and the
    carrier's rotation are evaluated at each piece's two ends and interpolated linearly across it
    (with the recipe's parameters they turn by about 1e-2 rad over a piece), and the rotation is
    applied after the 8-tap delay filters (it turns by far less than 1e-3 rad over 8 samples)."""
    window = length
    piece = min(length, _PIECE)
    n_pieces = -(-length // piece)
    if n_pieces > 1:  # long windows: consecutive pieces, the last one running past the window's end
        starts = (starts[:, :, None] + piece * np.arange(n_pieces)).reshape(len(starts), -1)
        length = piece
    out = _channel_pieces(x, gen, starts, length)
    return out.reshape(len(x), -1, n_pieces * piece)[:, :, :window]


def _channel_pieces(x: np.ndarray, gen, starts: np.ndarray, length: int) -> np.ndarray:
    b, n_in = x.shape
    m = starts.shape[1]
    k_taps = _DELAY_TAPS
    n_grid = -(-n_in // _GRID) + 2
    # sampling-rate offset: the receiver's clock runs at fs (1 + sro(t) / fs); linear interpolation
    drift = _integrate(_random_walk(gen, b, n_grid, _SRO_STEP, _SRO_MAX) / _FS)
    # the drift at both ends of each window's stretch, linear in between (it moves by about 1e-5
    # samples over a window)
    span = length + k_taps - 1
    ends = _on_grid(drift, np.stack([starts, starts + span], axis=2).astype(np.float64))
    u = starts[:, :, None] + np.arange(span)
    tau = u + 1.0 + ends[..., :1] + (ends[..., 1:] - ends[..., :1]) * (np.arange(span) / span)
    np.clip(tau, 0.0, n_in - 1.000001, out=tau)
    i0 = tau.astype(np.intp).reshape(b, -1)
    frac = tau.reshape(b, -1) - i0
    y = np.take_along_axis(x, i0, axis=1)
    y += frac * (np.take_along_axis(x, i0 + 1, axis=1) - y)
    # carrier: a random initial phase and a random-walk frequency offset; the paths' fading gains
    cfo = _random_walk(gen, b, n_grid, _CFO_STEP, _CFO_MAX) / _FS
    phase = 2.0 * np.pi * _integrate(cfo) + gen.uniform(0.0, 2.0 * np.pi, (b, 1))
    ends = np.stack([starts, starts + length], axis=2).reshape(b, -1).astype(np.float64)
    gains = _fading_gains(gen, b, ends) * np.exp(1j * _on_grid(phase, ends))[:, None, :]
    gains = gains.reshape(b, len(_DELAYS), m, 2)
    g0, dg = gains[..., :1], gains[..., 1:] - gains[..., :1]
    # multipath: per window, the delay filters weighted by the path gains at the window's start (g0)
    # and their change across it (dg) make two complex FIRs; one batched product applies both
    taps = _delay_filters()[:, ::-1]                                     # (paths, K), reversed
    coef = np.stack([np.einsum("pk,bpm->bmk", taps, g0[..., 0]),
                     np.einsum("pk,bpm->bmk", taps, dg[..., 0])], axis=-1)  # (b, m, K, 2)
    # (in single precision: the windows end as float32; this product is the channel's largest cost)
    y = y.reshape(b, m, span).astype(np.complex64)
    win = np.ascontiguousarray(sliding_window_view(y, k_taps, axis=2))
    both = win @ coef.astype(np.complex64)                               # (b, m, length, 2)
    return both[..., 0] + both[..., 1] * (np.arange(length, dtype=np.float32) / np.float32(length))


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def _check_snr(snr_db) -> np.ndarray:
    if isinstance(snr_db, range):
        snr_db = list(snr_db)
    arr = as_array(snr_db, "snr_db", kinds="iuf")
    if arr.ndim > 1:
        raise ValueError(f"`snr_db` must be a number or a 1-D sequence of numbers; got shape {arr.shape}")
    arr = np.atleast_1d(arr).astype(np.float64)
    if arr.size == 0:
        raise ValueError("`snr_db` must hold at least one SNR; got an empty sequence")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`snr_db` must be finite")
    if np.any(np.abs(arr) > _SNR_LIMIT):
        raise ValueError(f"`snr_db` must lie in [-{_SNR_LIMIT:g}, {_SNR_LIMIT:g}] dB; got "
                         f"{arr[np.argmax(np.abs(arr))]:g}")
    return arr


def _check_classes(classes) -> tuple[str, ...]:
    if classes is None:
        return RML_CLASSES
    if isinstance(classes, str):
        classes = (classes,)
    try:
        items = list(classes)
    except TypeError:
        raise TypeError(f"`classes` must be None, a class name or a sequence of class names; got "
                        f"{type(classes).__name__}") from None
    if not items:
        raise ValueError("`classes` must name at least one class; got an empty sequence")
    known = ", ".join(RML_CLASSES)
    for c in items:
        if not isinstance(c, str):
            raise TypeError(f"`classes` must hold class names (str); got {type(c).__name__}")
        if c not in RML_CLASSES:
            raise ValueError(f"`classes` must be names among {known}; got {c!r}")
    if len(set(items)) != len(items):
        dup = next(c for c in items if items.count(c) > 1)
        raise ValueError(f"`classes` must not repeat a name; {dup!r} appears more than once")
    return tuple(items)


def _burst_samples(length: int, m: int) -> int:
    """Samples of a burst holding ``m`` windows in the worst case, rounded up to the channel's grid."""
    need = _START[1] + (m - 1) * 2 * length + length
    return -(-need // _GRID) * _GRID


# --------------------------------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------------------------------
@constraints(n_per_class="count", snr_db=("real", "array1d"), classes="option", length="count", sps="count",
             channel="bool", snr_convention="option", rng="rng")
def rml2016_like(n_per_class: int, *, snr_db: float | Sequence[float] = range(-20, 20, 2),
                 classes: str | Sequence[str] | None = None, length: int = 128, sps: int = 8, channel: bool = True,
                 snr_convention: str = "true", rng: Any = None) -> Result:
    r"""Labelled I/Q windows of eleven modulations, generated like the RadioML 2016.10a data set.

    A re-derivation of the published GNU Radio recipe (``radioML/dataset``, O'Shea et al. 2016),
    NumPy only, vectorised over bursts. For every class and every SNR, ``n_per_class`` windows of
    ``length`` complex samples, cut from longer bursts (the first window starts at a random offset
    in [50, 500] samples, the next ones at random strides of ``length`` to ``2 * length`` samples;
    up to 16 windows per burst, so windows of one burst share its channel realisation).

    Transmitters (unit power before the channel):

    * BPSK, QPSK (points at odd multiples of pi/4), 8PSK, PAM4, QAM16, QAM64: random symbols at
      ``sps`` samples per symbol, shaped by a root-raised-cosine filter (roll-off 0.35, 11 symbols).
      ``sps = 1``: no pulse shaping, the bare constellation at unit average power.
    * GFSK: NRZ bits through a Gaussian filter (BT = 0.35), frequency modulated with a sensitivity
      of 0.1 rad per sample; CPFSK: rectangular frequency pulses with modulation index h = 0.5.
    * Analog classes from a synthetic band-limited audio ``a`` (five tones, log-uniform between
      200 Hz and 8 kHz at the nominal 200 kHz rate, ``|a| <= 1``; reconstructed: the original used
      recorded audio): AM-DSB ``(1 + m a)`` with a full carrier, m uniform in [0.5, 1];
      AM-SSB ``a + j H(a)`` (``H`` the Hilbert transform, exact for tones: a one-sided spectrum);
      WBFM with the phase ``2 pi 75 kHz / 200 kHz * cumsum(a)``.

    Channel (``channel=True``; the parameters of the recipe's dynamic channel model, frequencies
    relative to a 200 kHz sample rate): sampling-rate offset and carrier-frequency offset as random
    walks from 0 (steps of std 0.01 Hz per sample, clipped at 50 Hz and 500 Hz), the first by linear
    interpolation; a uniform random carrier phase; three paths with delays 0, 0.9 and 1.7 samples
    (windowed-sinc fractional delays, 8 taps) and magnitudes 1, 0.8, 0.3 (normalised to unit total
    power), each a sum-of-sinusoids fading process with a 1 Hz maximum Doppler, the first Rician with
    K = 4; then additive white circular Gaussian noise. The fading and oscillator models are
    reconstructed (GNU Radio's blocks are not reproduced sample for sample).

    Parameters
    ----------
    n_per_class : int
        Windows per (class, SNR) pair.
    snr_db : float or sequence of float, default range(-20, 20, 2)
        The SNRs in dB (finite, within [-200, 200]); the original's -20, -18, ..., 18 by default.
    classes : None, str or sequence of str, optional
        The classes to generate, among ``'BPSK', 'QPSK', '8PSK', 'PAM4', 'QAM16', 'QAM64', 'GFSK',
        'CPFSK', 'WBFM', 'AM-DSB', 'AM-SSB'`` (no repeats); None: all eleven in that order. The labels
        ``y`` index the returned ``classes`` in the order given.
    length : int, default 128
        Complex samples per window, at least 8.
    sps : int, default 8
        Samples per symbol of the digital classes (1 to 1024). The analog classes do not depend on it.
    channel : bool, default True
        Whether to apply the channel (offsets, phase, fading). Noise is added either way.
    snr_convention : {'true', 'rml'}, default 'true'
        How ``snr_db`` sets the noise. ``'true'``: the noise power is the received signal power
        divided by ``10**(snr_db / 10)``, the signal power being the mean ``|s|**2`` of the noise-free
        signal after the channel over the windows cut from the burst (not over the whole burst), so the
        SNR is what it says. ``'rml'``: the original's convention, a noise
        *voltage* ``10**(-snr_db / 10)`` (noise power ``10**(-snr_db / 5)``) against a unit-power
        transmitter: the true SNR is then about ``2 * snr_db`` dB (twice the nominal value).
    rng : None, int or numpy.random.Generator, optional
        The source of randomness; the result is a deterministic function of it.

    Returns
    -------
    res : Result
        With fields

        X : ndarray of float32, shape (n, 2, length)
            The windows, ``X[:, 0]`` the in-phase (real) and ``X[:, 1]`` the quadrature (imaginary)
            part; ``n = len(classes) * len(snr_db) * n_per_class``. Each window is divided by the sum
            of the magnitudes of its complex samples, ``sum_t sqrt(I_t**2 + Q_t**2)`` over its
            ``length`` samples (an L1 norm, as the original, not the energy), after the noise is
            added: ``np.hypot(X[:, 0], X[:, 1]).sum(axis=1)`` is 1 up to float32 rounding.
        y : ndarray of int64, shape (n,)
            The class of each window, an index into ``classes``.
        snr : ndarray of float64, shape (n,)
            The SNR (dB, as given in ``snr_db``) of each window.
        classes : tuple of str
            The class names, in the order of the labels.
        metadata : dict
            ``length``, ``sps``, ``channel``, ``snr_convention``, ``n_per_class``.

        The windows are ordered by class, then SNR (in the order of ``snr_db``), then draw.

    Raises
    ------
    ValueError
        If an argument is out of range, a class name is unknown, or the result would not fit in
        memory.
    TypeError
        If an argument has the wrong type.

    References
    ----------
    .. [1] T. J. O'Shea, J. Corgan and T. C. Clancy, "Convolutional radio modulation recognition
       networks", EANN 2016; the generator of the RadioML 2016.10a data set.
    .. [2] A. Swami and B. M. Sadler, "Hierarchical digital modulation classification using
       cumulants", IEEE Trans. Commun. 48(3), 2000 (the constellations' cumulants).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.datasets import rml2016_like
    >>> res = rml2016_like(10, snr_db=[0, 10], rng=0)
    >>> res.X.shape, res.X.dtype, len(res.classes)
    ((220, 2, 128), dtype('float32'), 11)
    >>> res.classes[res.y[25]], float(res.snr[25])
    ('QPSK', 0.0)
    >>> bool(np.allclose(np.hypot(res.X[:, 0], res.X[:, 1]).sum(axis=1), 1.0, atol=1e-5))
    True
    """
    n_per_class = check_int(n_per_class, "n_per_class", minimum=1, maximum=C_INT_MAX)
    snrs = _check_snr(snr_db)
    names = _check_classes(classes)
    length = check_int(length, "length", minimum=8, maximum=C_INT_MAX)
    sps = check_int(sps, "sps", minimum=1, maximum=1024)
    channel = check_bool(channel, "channel")
    snr_convention = check_option(snr_convention, "snr_convention", ("true", "rml"))
    gen = normalize_rng(rng)

    m = min(_WINDOWS_PER_BURST, n_per_class)
    n_burst = _burst_samples(length, m)
    n_burst += _channel_margin(n_burst) if channel else 0
    total = len(names) * len(snrs) * n_per_class
    # the output, plus one chunk of about 16 complex temporaries of a burst (at least one burst)
    chunk = max(1, _CHUNK_SAMPLES // n_burst)
    need = total * (8.0 * length + 16.0) + 16.0 * 16.0 * (n_burst + 16 * sps + 64) * chunk
    avail = available_memory()
    if need > avail or total > C_INT_MAX:
        raise ValueError(f"`n_per_class` = {n_per_class} with {len(names)} `classes`, {len(snrs)} `snr_db` "
                         f"values and `length` = {length} needs about {need / 2**30:.3g} GiB, more than the "
                         f"{avail / 2**30:.3g} GiB this process may allocate")

    X = np.empty((total, 2, length), dtype=np.float32)
    y = np.repeat(np.arange(len(names), dtype=np.int64), len(snrs) * n_per_class)
    snr_out = np.tile(np.repeat(snrs, n_per_class), len(names))
    per_snr = -(-n_per_class // m)               # bursts per (class, SNR)
    n_bursts = len(snrs) * per_snr               # bursts per class
    j = np.arange(m)
    for ci, name in enumerate(names):
        for b0 in range(0, n_bursts, chunk):
            b1 = min(n_bursts, b0 + chunk)
            b = b1 - b0
            # windows: a random start in [50, 500], then random strides in [length, 2 length]
            starts = np.empty((b, m), dtype=np.intp)
            starts[:, 0] = gen.integers(_START[0], _START[1] + 1, b)
            if m > 1:
                starts[:, 1:] = starts[:, :1] + np.cumsum(gen.integers(length, 2 * length + 1, (b, m - 1)), axis=1)
            n_need = int(starts[:, -1].max()) + length
            if channel:
                n_need += _channel_margin(n_need)
            s = _transmit(name, gen, b, n_need, sps)
            if channel:
                win = _channel(s, gen, starts, length)
            else:
                win = np.take_along_axis(s, (starts[:, :, None] + np.arange(length)).reshape(b, -1),
                                         axis=1).reshape(b, m, length).astype(np.complex64)
            # noise at the window's SNR, on the windows (white: the same law as on the whole burst)
            snr_b = snrs[np.arange(b0, b1) // per_snr][:, None, None]
            if snr_convention == "true":  # against the received power over the burst's windows
                power = np.mean(win.real ** 2 + win.imag ** 2, axis=(1, 2), keepdims=True, dtype=np.float64)
                noise_var = power * 10.0 ** (-snr_b / 10.0)
            else:  # the original's noise voltage 10**(-snr/10) against a unit-power transmitter
                noise_var = 10.0 ** (-snr_b / 5.0)
            noise = gen.standard_normal((b, m, length, 2), dtype=np.float32)
            noise *= np.sqrt(noise_var / 2.0).astype(np.float32)[..., None]
            win += noise.view(np.complex64)[..., 0]
            l1 = np.abs(win).sum(axis=2, keepdims=True)
            win /= np.where(l1 > 0, l1, 1.0)
            # burst b0 + i, window j -> SNR group g, draw q within the group; the kept windows, in
            # this order, fill consecutive rows
            glob = np.arange(b0, b1)
            q = (glob % per_snr)[:, None] * m + j[None, :]
            keep = q < n_per_class
            wk = win[keep]
            r0 = (ci * len(snrs) + b0 // per_snr) * n_per_class + int(q[0, 0])
            X[r0:r0 + len(wk), 0] = wk.real
            X[r0:r0 + len(wk), 1] = wk.imag
    return Result(X=X, y=y, snr=snr_out, classes=names,
                  metadata={"length": length, "sps": sps, "channel": channel, "snr_convention": snr_convention,
                            "n_per_class": n_per_class})
