"""Multi-scale wavelet transformers (MSWT): the discrete wavelet transform in torch and the modules built on it.

The transforms reproduce PyWavelets' ``pywt.dwt``/``idwt``/``dwt2``/``idwt2``: the same filters (derived in
:mod:`numtk.torch._mswt_filters`), the same signal extensions, the same output lengths and the same alignment
of the periodic transform, computed with ``conv1d``/``conv2d`` (and their transposes) on the input's device and
dtype, so they are batched over any leading dimensions and differentiable.

The modules follow the MSWT architecture (arXiv 2602.01486, code csiro-funml/MSWT, read and re-derived): a
U-Net over scales whose halvings are a lossless DWT that keeps the detail sub-bands as channels, and whose
attention runs on DWT-domain tokens.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import C_INT_MAX, check_bool, check_int, check_option
from numtk.torch._common import check_tensor, torch
from numtk.torch._mswt_filters import SCALING_FILTERS, filter_bank

F = torch.nn.functional
nn = torch.nn

__all__ = ["MODES", "WAVELETS", "dwt1d", "idwt1d", "dwt2d", "idwt2d", "stack_subbands", "unstack_subbands",
           "wavelet_filters", "WaveletDownsample", "WaveletUpsample", "WaveletAttention", "WaveletBlock",
           "MSWT1D", "MSWT2D", "relative_l2", "energy_spectrum", "rollout"]

#: the signal extensions, as PyWavelets names them (``pywt.Modes.modes``)
MODES = ("zero", "constant", "symmetric", "periodic", "smooth", "periodization", "reflect", "antisymmetric",
         "antireflect")
#: the wavelets known by name: Haar, Daubechies 1-38, symlets 2-20, coiflets 1-17
WAVELETS = ("haar", *(f"db{n}" for n in range(1, 39)), *(f"sym{n}" for n in range(2, 21)),
            *(f"coif{n}" for n in range(1, 18)))
_WAVELET_HINT = ("'haar', 'db1'..'db38', 'sym2'..'sym20', 'coif1'..'coif17', a pywt.Wavelet (any object with a "
                 "filter_bank) or a sequence (dec_lo, dec_hi, rec_lo, rec_hi)")


# ==================================================================================================
# filters
# ==================================================================================================
class _Bank:
    """A filter bank: ``filters`` (dec_lo, dec_hi, rec_lo, rec_hi) as float64 arrays, ``length`` and a hashable
    ``key`` (the name, or the coefficients) for the caches."""

    __slots__ = ("key", "filters", "length")

    def __init__(self, key: Any, filters: tuple) -> None:
        self.key, self.filters, self.length = key, filters, filters[0].size


_BANKS: dict[str, _Bank] = {}


def _bank(wavelet: Any, name: str = "wavelet") -> _Bank:
    """The filter bank of a wavelet argument (a name, a pywt.Wavelet-like object or four sequences)."""
    if isinstance(wavelet, str):
        if wavelet not in SCALING_FILTERS:
            raise ValueError(f"`{name}` must be {_WAVELET_HINT}; got {wavelet!r}")
        if wavelet not in _BANKS:
            _BANKS[wavelet] = _Bank(wavelet, tuple(np.array(f, dtype=np.float64)
                                                   for f in filter_bank(SCALING_FILTERS[wavelet])))
        return _BANKS[wavelet]
    bank = getattr(wavelet, "filter_bank", wavelet)
    if isinstance(bank, (str, bytes)) or not isinstance(bank, Sequence) or len(bank) != 4:
        raise TypeError(f"`{name}` must be {_WAVELET_HINT}; got {type(wavelet).__name__}")
    out = []
    for f in bank:
        try:
            arr = np.asarray(f, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"`{name}`: each filter must be a 1-D sequence of real numbers") from None
        if arr.ndim != 1 or arr.size < 2 or arr.size % 2 or not np.all(np.isfinite(arr)):
            raise ValueError(f"`{name}`: each filter must be a 1-D sequence of an even number (>= 2) of finite "
                             f"real numbers; got shape {arr.shape}")
        out.append(arr)
    if len({f.size for f in out}) != 1:
        raise ValueError(f"`{name}`: the four filters must have one length; got {[f.size for f in out]}")
    return _Bank(tuple(tuple(f.tolist()) for f in out), tuple(out))


@constraints(wavelet="option")
def wavelet_filters(wavelet: Any = "haar") -> tuple[tuple[float, ...], ...]:
    """The filter bank ``(dec_lo, dec_hi, rec_lo, rec_hi)`` of a wavelet, as PyWavelets orders it.

    Parameters
    ----------
    wavelet : str
        One of :data:`WAVELETS` (``'haar'``, ``'db1'`` to ``'db38'``, ``'sym2'`` to ``'sym20'``,
        ``'coif1'`` to ``'coif17'``).

    Returns
    -------
    tuple of four tuples of float
        ``dec_lo``, ``dec_hi``, ``rec_lo``, ``rec_hi``: the decomposition filters as ``pywt.dwt`` convolves
        with them and the reconstruction filters of ``pywt.idwt``. ``dec_lo`` is ``rec_lo`` reversed,
        ``rec_hi[k] = (-1)**k dec_lo[k]`` and ``dec_hi`` is ``rec_hi`` reversed.

    Notes
    -----
    The coefficients are derived, not copied: Daubechies' filters are the minimum-phase spectral factors of
    her polynomial, symlets other spectral factors of it (the published least-asymmetric choice of roots),
    coiflets solutions of the coiflet equations, each computed at 50 digits and rounded to float64. They
    equal PyWavelets' filters to the last bit for Haar and ``dbN``, to 6e-14 for ``coifN``; PyWavelets'
    symlets were computed in double precision and differ from the exact ones by up to 1.5e-11 (``sym20``).

    Examples
    --------
    >>> from numtk.torch.mswt import wavelet_filters
    >>> dec_lo, dec_hi, rec_lo, rec_hi = wavelet_filters("db2")
    >>> [round(v, 6) for v in rec_lo]
    [0.482963, 0.836516, 0.224144, -0.12941]
    """
    if not isinstance(wavelet, str):
        raise ValueError(f"`wavelet` must be one of {', '.join(repr(w) for w in WAVELETS[:3])}, ... "
                         f"(numtk.torch.mswt.WAVELETS); got {wavelet!r}")
    return tuple(tuple(float(v) for v in f) for f in _bank(wavelet).filters)


# ==================================================================================================
# signal extension (index and weight tables, cached per mode and length)
# ==================================================================================================
_EXT_CACHE: dict[tuple, tuple] = {}


def _ext_weights(mode: str, N: int, p: int, memo: dict) -> dict[int, float]:
    """The extended signal at position ``p`` as a combination {input index: weight} (PyWavelets' extensions)."""
    if 0 <= p < N:
        return {p: 1.0}
    if mode == "zero":
        return {}
    if mode == "constant" or (mode == "smooth" and N == 1):
        return {min(max(p, 0), N - 1): 1.0}
    if mode in ("symmetric", "antisymmetric"):  # half-sample (anti)symmetric, period 2N
        r = p % (2 * N)
        if r < N:
            return {r: 1.0}
        return {2 * N - 1 - r: -1.0 if mode == "antisymmetric" else 1.0}
    if mode == "reflect":  # whole-sample symmetric, period 2N - 2
        r = p % (2 * N - 2)
        return {r if r < N else 2 * N - 2 - r: 1.0}
    if mode in ("periodic", "periodization"):
        return {p % N: 1.0}
    if mode == "smooth":  # first-order extrapolation from the two edge samples
        if p < 0:
            return {0: 1.0 - p, 1: float(p)}
        k = p - (N - 1)
        return {N - 1: 1.0 + k, N - 2: -float(k)}
    # antireflect: point reflection about the edge sample, repeated block by block
    if p in memo:
        return memo[p]
    if p < 0:
        c = -(N - 1) * ((-p - 1) // (N - 1))
    else:
        c = (N - 1) * (1 + (p - N) // (N - 1))
    out: dict[int, float] = {}
    for i, w in _ext_weights(mode, N, c, memo).items():
        out[i] = out.get(i, 0.0) + 2.0 * w
    for i, w in _ext_weights(mode, N, 2 * c - p, memo).items():
        out[i] = out.get(i, 0.0) - w
    memo[p] = {i: w for i, w in out.items() if w != 0.0}
    return memo[p]


def _ext_table(mode: str, N: int, positions: range) -> tuple[np.ndarray, np.ndarray | None]:
    """(index (P, T), weight (P, T) or None when every row is one sample with weight 1) for ``positions``."""
    key = (mode, N, positions.start, positions.stop)
    hit = _EXT_CACHE.get(key)
    if hit is not None:
        return hit
    memo: dict = {}
    if mode == "antireflect":  # fill the memo outward, so that the recursion stays shallow
        for p in range(-1, positions.start - 1, -1):
            _ext_weights(mode, N, p, memo)
        for p in range(N, positions.stop):
            _ext_weights(mode, N, p, memo)
    rows = [_ext_weights(mode, N, p, memo) for p in positions]
    T = max(1, max((len(r) for r in rows), default=1))
    idx = np.zeros((len(rows), T), dtype=np.int64)
    wts = np.zeros((len(rows), T), dtype=np.float64)
    for i, r in enumerate(rows):
        for t, (k, w) in enumerate(sorted(r.items())):
            idx[i, t], wts[i, t] = k, w
    plain = T == 1 and all(len(r) == 1 for r in rows) and bool(np.all(wts == 1.0))
    out = (idx, None if plain else wts)
    if len(_EXT_CACHE) > 1024:
        _EXT_CACHE.clear()
    _EXT_CACHE[key] = out
    return out


def _gather(x: "torch.Tensor", dim: int, mode: str, N: int, positions: range) -> "torch.Tensor":
    """The extended signal at ``positions`` (outside [0, N)) along ``dim`` (-1 or -2)."""
    P = len(positions)
    if P == 0:
        shape = list(x.shape)
        shape[dim] = 0
        return x.new_zeros(shape)
    idx, wts = _ext_table(mode, N, positions)
    index = torch.as_tensor(idx.reshape(-1), device=x.device)
    picked = x.index_select(dim, index)
    if wts is None:
        return picked
    T = idx.shape[1]
    w = torch.as_tensor(wts, dtype=x.dtype, device=x.device)
    if dim == -1:
        return (picked.unflatten(-1, (P, T)) * w).sum(-1)
    return (picked.unflatten(-2, (P, T)) * w.unsqueeze(-1)).sum(-2)


def _extend(x: "torch.Tensor", dim: int, mode: str, left: int, right: int) -> "torch.Tensor":
    """``x`` extended by ``left`` and ``right`` samples along ``dim`` as ``mode`` says."""
    N = x.shape[dim]
    if left == 0 and right == 0:
        return x
    if mode == "zero":
        pad = (left, right) if dim == -1 else (0, 0, left, right)
        return F.pad(x, pad)
    parts = []
    if left:
        parts.append(_gather(x, dim, mode, N, range(-left, 0)))
    parts.append(x)
    if right:
        parts.append(_gather(x, dim, mode, N, range(N, N + right)))
    return torch.cat(parts, dim=dim)


# ==================================================================================================
# one level along one axis (``dim`` = -1 or -2), in polyphase form
# ==================================================================================================
# The two cores are adjoint linear maps, each the other's backward, so gradients of any order are exact:
#   down: out_b[o] = sum_k w_b[k] xe[2 o + k]              (o < n; xe has 2 n + F - 2 samples)
#   up:   z[t]    = sum_b sum_o c_b[o] w_b[t - 2 o]       (t < 2 n + F - 2)
# Both run as F multiply-adds of strided slices: no im2col, and fast along contiguous rows.
def _down(xe: "torch.Tensor", w: tuple, dim: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    Fl = len(w[0])
    n = (xe.shape[dim] - Fl + 2) // 2
    pairs = xe.unflatten(dim, (xe.shape[dim] // 2, 2))  # (..., L/2, 2) or (..., L/2, 2, W)
    out = []
    for b in range(2):
        acc = None
        for k in range(Fl):
            part = pairs[..., k // 2:k // 2 + n, k % 2] if dim == -1 else pairs[..., k // 2:k // 2 + n, k % 2, :]
            if acc is None:
                acc = part * w[b][k]
            elif w[b][k] != 0.0:
                acc.add_(part, alpha=w[b][k])
        out.append(acc)
    return out[0], out[1]


def _up(a: "torch.Tensor", d: "torch.Tensor", w: tuple, dim: int) -> "torch.Tensor":
    Fl = len(w[0])
    n = a.shape[dim]
    shape = list(a.shape)
    half = n + Fl // 2 - 1
    shape[dim] = 2 * half
    z = a.new_zeros(shape)
    pairs = z.unflatten(dim, (half, 2))
    for k in range(Fl):
        part = pairs[..., k // 2:k // 2 + n, k % 2] if dim == -1 else pairs[..., k // 2:k // 2 + n, k % 2, :]
        if w[0][k] != 0.0:
            part.add_(a, alpha=w[0][k])
        if w[1][k] != 0.0:
            part.add_(d, alpha=w[1][k])
    return z


class _Down(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, xe: "torch.Tensor", w: tuple, dim: int) -> tuple["torch.Tensor", "torch.Tensor"]:
        ctx.w, ctx.dim = w, dim
        return _down(xe, w, dim)

    @staticmethod
    def backward(ctx: Any, ga: Any, gd: Any) -> tuple:
        ga = ga if ga is not None else torch.zeros_like(gd)
        gd = gd if gd is not None else torch.zeros_like(ga)
        return _Up.apply(ga, gd, ctx.w, ctx.dim), None, None


class _Up(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: "torch.Tensor", d: "torch.Tensor", w: tuple, dim: int) -> "torch.Tensor":
        ctx.w, ctx.dim = w, dim
        return _up(a, d, w, dim)

    @staticmethod
    def backward(ctx: Any, gz: "torch.Tensor") -> tuple:
        ga, gd = _Down.apply(gz, ctx.w, ctx.dim)
        return ga, gd, None, None


def _analysis_poly(x: "torch.Tensor", bank: tuple, mode: str, dim: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Approximation and detail of ``x`` along ``dim``, as ``pywt.dwt`` along that axis (polyphase form).

    Non-periodic modes: ``out[o] = sum_j h[j] x_ext[2 o + 1 - j]`` for ``o < (N + F - 1) // 2``.
    Periodization: odd lengths gain a copy of the last sample; ``out[o] = sum_j h[j] x[(2 o + F/2 - j) mod N]``.
    """
    Fl = len(bank[0])
    N = x.shape[dim]
    if mode == "periodization":
        if N % 2:
            x = _extend(x, dim, "constant", 0, 1)
            N += 1
        half = Fl // 2 - 1
        xe = _extend(x, dim, "periodic", half, half)
    else:
        n_out = (N + Fl - 1) // 2
        xe = _extend(x, dim, mode, Fl - 2, 2 * n_out - N)
    w = (tuple(bank[0][::-1]), tuple(bank[1][::-1]))  # correlation with the reversed filters
    return _Down.apply(xe, w, dim)


def _synthesis_poly(a: "torch.Tensor", d: "torch.Tensor", bank: tuple, mode: str, dim: int) -> "torch.Tensor":
    """The signal of approximation ``a`` and detail ``d`` along ``dim``, as ``pywt.idwt`` along that axis
    (polyphase form).

    Non-periodic modes: ``y[t] = z[t + F - 2]`` for ``t < 2 n - F + 2``, ``z`` the upsampled coefficients
    convolved with ``rec_lo``, ``rec_hi``. Periodization: ``y[m] = sum_o c[o mod n] g[m + F/2 - 1 - 2 o]``, ``m < 2 n``.
    """
    Fl = len(bank[2])
    n = a.shape[dim]
    w = (tuple(bank[2]), tuple(bank[3]))
    if mode == "periodization":
        P = Fl // 4
        z = _Up.apply(_extend(a, dim, "periodic", P, P), _extend(d, dim, "periodic", P, P), w, dim)
        return z.narrow(dim, Fl // 2 - 1 + 2 * P, 2 * n)
    return _Up.apply(a, d, w, dim).narrow(dim, Fl - 2, 2 * n - Fl + 2)


# --------------------------------------------------------------------------------------------------
# short axes: one matrix product. The level along an axis of N samples is a linear map; for N up to DENSE_TAPS
# (40) times the filter length (and DENSE_MAX) a dense (2n x N) matrix, built once per wavelet, mode and length by
# running the polyphase form on the identity, multiplies faster than the F strided passes (BLAS against
# memory-bound elementwise passes), and its autograd is a matrix product too.
# --------------------------------------------------------------------------------------------------
DENSE_TAPS = 40
DENSE_MAX = 1024
_MATRICES: dict[tuple, "torch.Tensor"] = {}


def _dense(N: int, Fl: int) -> bool:
    return N <= min(DENSE_TAPS * Fl, DENSE_MAX)


def _matrix(key: Any, bank: tuple, mode: str, N: int, kind: str, like: "torch.Tensor") -> "torch.Tensor":
    """The analysis matrix (2n x N: approximation rows, then detail rows) or the synthesis matrix (M x 2n) of
    one level along an axis of ``N`` samples (coefficients, for the synthesis), on ``like``'s dtype and device."""
    k = (key, mode, N, kind, like.dtype, like.device)
    M = _MATRICES.get(k)
    if M is None:
        base = _MATRICES.get((key, mode, N, kind, torch.float64, torch.device("cpu")))
        if base is None:
            eye = torch.eye(N, dtype=torch.float64)
            with torch.no_grad():
                if kind == "analysis":
                    a, d = _analysis_poly(eye, bank, mode, -1)  # rows: unit inputs
                    base = torch.cat([a, d], dim=-1).T.contiguous()
                else:
                    zero = torch.zeros_like(eye)
                    base = torch.cat([_synthesis_poly(eye, zero, bank, mode, -1),
                                      _synthesis_poly(zero, eye, bank, mode, -1)], dim=0).T.contiguous()
        M = base.to(dtype=like.dtype, device=like.device)
        if len(_MATRICES) > 512:
            _MATRICES.clear()
        _MATRICES[k] = M
        _MATRICES[(key, mode, N, kind, torch.float64, torch.device("cpu"))] = base
    return M


def _analysis(x: "torch.Tensor", bank: "_Bank", mode: str, dim: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Approximation and detail of ``x`` along ``dim`` (-1 or -2), as ``pywt.dwt`` along that axis."""
    N = x.shape[dim]
    if not _dense(N, bank.length):
        return _analysis_poly(x, bank.filters, mode, dim)
    M = _matrix(bank.key, bank.filters, mode, N, "analysis", x)
    n = M.shape[0] // 2
    if dim == -1:
        y = torch.matmul(x, M.T)
        return y[..., :n], y[..., n:]
    y = torch.matmul(M, x)
    return y[..., :n, :], y[..., n:, :]


def _synthesis(a: "torch.Tensor", d: "torch.Tensor", bank: "_Bank", mode: str, dim: int) -> "torch.Tensor":
    """The signal of approximation ``a`` and detail ``d`` along ``dim`` (-1 or -2), as ``pywt.idwt`` there."""
    n = a.shape[dim]
    if not _dense(2 * n, bank.length):
        return _synthesis_poly(a, d, bank.filters, mode, dim)
    R = _matrix(bank.key, bank.filters, mode, n, "synthesis", a)
    Ra, Rd = R[:, :n], R[:, n:]
    if dim == -1:  # two products summed in place (no copy of the coefficients into one tensor)
        return torch.matmul(a, Ra.T).add_(torch.matmul(d, Rd.T))
    return torch.matmul(Ra, a).add_(torch.matmul(Rd, d))


# ==================================================================================================
# the public transforms
# ==================================================================================================
def _mode(mode: Any, name: str = "mode") -> str:
    return check_option(mode, name, MODES)


def _modes2(mode: Any) -> tuple[str, str]:
    """``mode`` of the 2-D transforms: one mode, or one per axis (axis -2, axis -1)."""
    if isinstance(mode, (tuple, list)):
        if len(mode) != 2:
            raise ValueError(f"`mode` must be a mode or a pair of modes (axis -2, axis -1); got {len(mode)} items")
        return _mode(mode[0]), _mode(mode[1])
    m = _mode(mode)
    return m, m


def _check_length(N: int, mode: str, name: str, axis: str = "the last axis") -> None:
    if N < 1:
        raise ValueError(f"`{name}` must have at least one sample along {axis}; got 0")
    if mode in ("reflect", "antireflect") and N < 2:
        raise ValueError(f"`{name}` must have at least 2 samples along {axis} in mode {mode!r} (as in "
                         f"PyWavelets); got {N}")


@constraints(x="tensor", wavelet="option", mode="option")
def dwt1d(x: "torch.Tensor", wavelet: Any = "haar", mode: str = "periodization"
          ) -> tuple["torch.Tensor", "torch.Tensor"]:
    """One level of the discrete wavelet transform along the last axis, as ``pywt.dwt``.

    Parameters
    ----------
    x : torch.Tensor, shape (..., N)
        Real signals (floating dtype, finite) along the last axis; any leading dimensions (for example
        (batch, channels, N)); any device.
    wavelet : str or filter bank, default 'haar'
        One of :data:`WAVELETS` (``'haar'``, ``'db1'`` to ``'db38'``, ``'sym2'`` to ``'sym20'``,
        ``'coif1'`` to ``'coif17'``), or a filter bank: a ``pywt.Wavelet`` (any object with ``filter_bank``)
        or a sequence ``(dec_lo, dec_hi, rec_lo, rec_hi)`` of equal even lengths.
    mode : str, default 'periodization'
        The signal extension, as PyWavelets names it (:data:`MODES`): ``'periodization'`` (circular, output
        length ``ceil(N / 2)``: the lossless halving; an odd length first gains a copy of its last sample, as
        in PyWavelets), or ``'zero'``, ``'constant'``, ``'symmetric'``, ``'periodic'``, ``'smooth'``,
        ``'reflect'``, ``'antisymmetric'``, ``'antireflect'`` (output length ``(N + F - 1) // 2`` for filters
        of length F; ``'reflect'`` and ``'antireflect'`` need N >= 2).

    Returns
    -------
    cA, cD : torch.Tensor, shape (..., n)
        Approximation and detail coefficients on ``x``'s device and dtype, differentiable in ``x``.

    See Also
    --------
    idwt1d : the inverse. dwt2d : the 2-D transform.

    Notes
    -----
    Equal to ``pywt.dwt(x, wavelet, mode)`` for every mode and wavelet (tested to 1e-12 in float64 with
    PyWavelets' own filters, and with the named filters within the filters' difference, see
    :func:`wavelet_filters`). For orthogonal wavelets in ``'periodization'`` the transform is orthonormal:
    ``|cA|^2 + |cD|^2 = |x|^2`` for even N.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt1d, idwt1d
    >>> x = torch.arange(8.0, dtype=torch.float64)
    >>> cA, cD = dwt1d(x, "haar")
    >>> (cA * 2 ** 0.5).round(decimals=12)
    tensor([ 1.,  5.,  9., 13.], dtype=torch.float64)
    >>> torch.allclose(idwt1d(cA, cD, "haar"), x)
    True
    """
    x = check_tensor(x, "x")
    if x.ndim < 1:
        raise ValueError("`x` must have at least one dimension (the signal axis); got a 0-D tensor")
    bank = _bank(wavelet)
    mode = _mode(mode)
    N = x.shape[-1]
    _check_length(N, mode, "x")
    return _analysis(x, bank, mode, -1)


def _pair(cA: Any, cD: Any, names: tuple[str, ...]) -> tuple["torch.Tensor", ...]:
    """Check coefficient tensors (None: zeros shaped like the others): one shape, one dtype, one device."""
    given = [(n, check_tensor(c, n)) for n, c in zip(names, (cA, cD) if len(names) == 2 else cA) if c is not None]
    if not given:
        raise ValueError(f"at least one of {', '.join('`' + n + '`' for n in names)} must be a tensor (not None)")
    ref_name, ref = given[0]
    for n, c in given[1:]:
        if c.shape != ref.shape:
            raise ValueError(f"`{n}` must have the shape of `{ref_name}` {tuple(ref.shape)}; got {tuple(c.shape)}")
        if c.dtype != ref.dtype:
            raise TypeError(f"`{n}` must have the dtype of `{ref_name}` ({ref.dtype}); got {c.dtype}")
        if c.device != ref.device:
            raise ValueError(f"`{n}` must be on the device of `{ref_name}` ({ref.device}); got {c.device}")
    present = dict(given)
    return tuple(present.get(n, torch.zeros_like(ref)) for n in names)


@constraints(cA="tensor", cD="tensor", wavelet="option", mode="option")
def idwt1d(cA: "torch.Tensor | None", cD: "torch.Tensor | None", wavelet: Any = "haar",
           mode: str = "periodization") -> "torch.Tensor":
    """One level of the inverse discrete wavelet transform along the last axis, as ``pywt.idwt``.

    Parameters
    ----------
    cA, cD : torch.Tensor or None, shape (..., n)
        Approximation and detail coefficients of one shape, dtype and device (None: zeros, as in PyWavelets;
        not both).
    wavelet : str or filter bank, default 'haar'
        As in :func:`dwt1d`.
    mode : str, default 'periodization'
        As in :func:`dwt1d`.

    Returns
    -------
    torch.Tensor, shape (..., M)
        The signal: ``M = 2 n`` in ``'periodization'``, ``M = 2 n - F + 2`` in the other modes (one more
        than an odd original length, as ``pywt.idwt`` returns it: crop with ``[..., :N]``).

    Raises
    ------
    ValueError
        If a mode other than ``'periodization'`` gets fewer than F / 2 coefficients (PyWavelets refuses them
        too).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt1d, idwt1d
    >>> x = torch.randn(2, 3, 64, dtype=torch.float64)
    >>> cA, cD = dwt1d(x, "db4", mode="symmetric")
    >>> cA.shape
    torch.Size([2, 3, 35])
    >>> float((idwt1d(cA, cD, "db4", mode="symmetric") - x).abs().max()) < 1e-12
    True
    """
    cA, cD = _pair(cA, cD, ("cA", "cD"))
    if cA.ndim < 1:
        raise ValueError("`cA` must have at least one dimension (the coefficient axis); got a 0-D tensor")
    bank = _bank(wavelet)
    mode = _mode(mode)
    n = cA.shape[-1]
    Fl = bank.length
    _check_coeff_length(n, Fl, mode, "cA")
    return _synthesis(cA, cD, bank, mode, -1)


def _check_coeff_length(n: int, Fl: int, mode: str, name: str, axis: str = "the last axis") -> None:
    if n < 1:
        raise ValueError(f"`{name}` must have at least one coefficient along {axis}; got 0")
    if mode != "periodization" and n < Fl // 2:
        raise ValueError(f"`{name}` must have at least {Fl // 2} coefficients along {axis} (half the filter "
                         f"length) in mode {mode!r}; got {n}")


@constraints(x="tensor", wavelet="option", mode="option")
def dwt2d(x: "torch.Tensor", wavelet: Any = "haar", mode: Any = "periodization"
          ) -> tuple["torch.Tensor", tuple["torch.Tensor", "torch.Tensor", "torch.Tensor"]]:
    """One level of the 2-D discrete wavelet transform over the last two axes, as ``pywt.dwt2``.

    Parameters
    ----------
    x : torch.Tensor, shape (..., H, W)
        Real images (floating dtype, finite); any leading dimensions (for example (batch, channels, H, W)).
    wavelet : str or filter bank, default 'haar'
        As in :func:`dwt1d`: one of :data:`WAVELETS` or a filter bank.
    mode : str or pair of str, default 'periodization'
        One mode of :data:`MODES` for both axes, or one per axis (axis -2, axis -1), as in PyWavelets.

    Returns
    -------
    (cA, (cH, cV, cD)) : torch.Tensors, shape (..., h, w)
        PyWavelets' order: ``cA`` low-pass along both axes, ``cH`` detail along axis -2 (low-pass along
        axis -1), ``cV`` detail along axis -1, ``cD`` detail along both. ``h, w`` as :func:`dwt1d` gives
        for H and W. :func:`stack_subbands` stacks them as channels.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt2d, idwt2d
    >>> x = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    >>> cA, (cH, cV, cD) = dwt2d(x, "db2")
    >>> cA.shape
    torch.Size([4, 3, 16, 16])
    >>> float((idwt2d((cA, (cH, cV, cD)), "db2") - x).abs().max()) < 1e-12
    True
    """
    x = check_tensor(x, "x")
    if x.ndim < 2:
        raise ValueError(f"`x` must have at least two dimensions (H, W); got {x.ndim}-D")
    bank = _bank(wavelet)
    mode_h, mode_w = _modes2(mode)
    H, W = x.shape[-2:]
    _check_length(H, mode_h, "x", "axis -2")
    _check_length(W, mode_w, "x", "axis -1")
    lo, hi = _analysis(x, bank, mode_w, -1)  # along W
    cA, cH = _analysis(lo, bank, mode_h, -2)  # along H: low-pass along W
    cV, cD = _analysis(hi, bank, mode_h, -2)
    return cA, (cH, cV, cD)


@constraints(coeffs="any", wavelet="option", mode="option")
def idwt2d(coeffs: Any, wavelet: Any = "haar", mode: Any = "periodization") -> "torch.Tensor":
    """One level of the inverse 2-D discrete wavelet transform, as ``pywt.idwt2``.

    Parameters
    ----------
    coeffs : (cA, (cH, cV, cD))
        Sub-bands as :func:`dwt2d` returns them, each a tensor of shape (..., h, w) or None (zeros, as in
        PyWavelets; not all four).
    wavelet : str or filter bank, default 'haar'
        As in :func:`dwt1d`.
    mode : str or pair of str, default 'periodization'
        As in :func:`dwt2d`.

    Returns
    -------
    torch.Tensor, shape (..., H, W)
        ``H = 2 h`` in ``'periodization'``, ``2 h - F + 2`` in the other modes (likewise W).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt2d, idwt2d
    >>> x = torch.randn(2, 16, 16, dtype=torch.float64)
    >>> coeffs = dwt2d(x, "sym4", mode="reflect")
    >>> float((idwt2d(coeffs, "sym4", mode="reflect") - x).abs().max()) < 1e-12
    True
    """
    if not (isinstance(coeffs, (tuple, list)) and len(coeffs) == 2 and isinstance(coeffs[1], (tuple, list))
            and len(coeffs[1]) == 3):
        raise TypeError("`coeffs` must be (cA, (cH, cV, cD)) as dwt2d returns it")
    cA, cH, cV, cD = _pair((coeffs[0], *coeffs[1]), None, ("cA", "cH", "cV", "cD"))
    if cA.ndim < 2:
        raise ValueError(f"`coeffs` must hold tensors of at least two dimensions (h, w); got {cA.ndim}-D")
    bank = _bank(wavelet)
    mode_h, mode_w = _modes2(mode)
    h, w = cA.shape[-2:]
    Fl = bank.length
    _check_coeff_length(h, Fl, mode_h, "coeffs", "axis -2")
    _check_coeff_length(w, Fl, mode_w, "coeffs", "axis -1")
    lo = _synthesis(cA, cH, bank, mode_h, -2)  # along H: low-pass along W
    hi = _synthesis(cV, cD, bank, mode_h, -2)
    return _synthesis(lo, hi, bank, mode_w, -1)


@constraints(coeffs="any", dim="index")
def stack_subbands(coeffs: Any, dim: int | None = None) -> "torch.Tensor":
    """Concatenate the sub-bands of one transform level as channels.

    Parameters
    ----------
    coeffs : (cA, cD) or (cA, (cH, cV, cD))
        The output of :func:`dwt1d` or :func:`dwt2d`: tensors of one shape.
    dim : int, optional
        The channel axis to concatenate along; default -2 for 1-D coefficients (the C of (N, C, n)) and -3
        for 2-D ones (the C of (N, C, h, w)).

    Returns
    -------
    torch.Tensor
        The bands one after the other along ``dim`` (band-major: all channels of ``cA``, then of ``cD`` or
        of ``cH``, ``cV``, ``cD``): (N, 2C, n) or (N, 4C, h, w) for the default ``dim``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt2d, stack_subbands, unstack_subbands
    >>> x = torch.randn(2, 3, 8, 8)
    >>> s = stack_subbands(dwt2d(x))
    >>> s.shape
    torch.Size([2, 12, 4, 4])
    >>> cA, (cH, cV, cD) = unstack_subbands(s, ndim=2)
    >>> torch.equal(cA, dwt2d(x)[0])
    True
    """
    bands = _bands(coeffs)
    default = -2 if len(bands) == 2 else -3
    d = default if dim is None else check_int(dim, "dim")
    ndim = bands[0].ndim
    if not -ndim <= d < ndim:
        raise ValueError(f"`dim` must be in [-{ndim}, {ndim - 1}] for {ndim}-D sub-bands; got {d}")
    return torch.cat(bands, dim=d)


def _bands(coeffs: Any) -> list["torch.Tensor"]:
    if isinstance(coeffs, (tuple, list)) and len(coeffs) == 2:
        if isinstance(coeffs[1], (tuple, list)) and len(coeffs[1]) == 3:
            bands = [coeffs[0], *coeffs[1]]
            names = ("cA", "cH", "cV", "cD")
        else:
            bands = list(coeffs)
            names = ("cA", "cD")
        if all(isinstance(b, torch.Tensor) for b in bands):
            _pair(bands, None, names) if len(bands) == 4 else _pair(bands[0], bands[1], names)
            return bands
    raise TypeError("`coeffs` must be (cA, cD) as dwt1d returns it or (cA, (cH, cV, cD)) as dwt2d returns it, "
                    "all tensors")


@constraints(x="tensor", ndim="option", dim="index")
def unstack_subbands(x: "torch.Tensor", ndim: int = 2, dim: int | None = None) -> tuple:
    """Split channels stacked by :func:`stack_subbands` back into sub-bands.

    Parameters
    ----------
    x : torch.Tensor
        Band-major channels along ``dim`` (a multiple of 2 for ``ndim=1``, of 4 for ``ndim=2``).
    ndim : {1, 2}, default 2
        The dimension of the transform: 2 bands (1-D) or 4 (2-D).
    dim : int, optional
        The channel axis; default -2 for ``ndim=1`` and -3 for ``ndim=2``.

    Returns
    -------
    (cA, cD) or (cA, (cH, cV, cD))
        Views of ``x``, in the format :func:`idwt1d` and :func:`idwt2d` take.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import dwt1d, idwt1d, stack_subbands, unstack_subbands
    >>> x = torch.randn(2, 3, 16, dtype=torch.float64)
    >>> channels = stack_subbands(dwt1d(x, "db2"))
    >>> channels.shape
    torch.Size([2, 6, 8])
    >>> bool(torch.allclose(idwt1d(*unstack_subbands(channels, ndim=1), "db2"), x))
    True
    """
    x = check_tensor(x, "x")
    if isinstance(ndim, bool) or ndim not in (1, 2):
        raise ValueError(f"`ndim` must be 1 or 2; got {ndim!r}")
    d = (-2 if ndim == 1 else -3) if dim is None else check_int(dim, "dim")
    if not -x.ndim <= d < x.ndim:
        raise ValueError(f"`dim` must be in [-{x.ndim}, {x.ndim - 1}] for the {x.ndim}-D `x`; got {d}")
    k = 2 if ndim == 1 else 4
    if x.shape[d] % k:
        raise ValueError(f"`x` must have a multiple of {k} channels along dim {d}; got {x.shape[d]}")
    parts = x.chunk(k, dim=d)
    return (parts[0], parts[1]) if k == 2 else (parts[0], tuple(parts[1:]))


# ==================================================================================================
# modules (channel-first feature maps: (N, C, L) in 1-D, (N, C, H, W) in 2-D)
# ==================================================================================================
def _check_ndim(ndim: Any) -> int:
    if isinstance(ndim, (bool, np.bool_)) or ndim not in (1, 2):
        raise ValueError(f"`ndim` must be 1 or 2; got {ndim!r}")
    return int(ndim)


def _check_wavelet_name(wavelet: Any) -> str:
    """A module's wavelet: a name of :data:`WAVELETS` (modules are built from names, so they pickle)."""
    if not isinstance(wavelet, str) or wavelet not in SCALING_FILTERS:
        raise ValueError(f"`wavelet` must be one of 'haar', 'db1'..'db38', 'sym2'..'sym20', 'coif1'..'coif17'; "
                         f"got {wavelet!r}")
    return wavelet


def _channels_last(x: "torch.Tensor", f: Callable) -> "torch.Tensor":
    """``f`` (a Linear, LayerNorm, ...) applied over the channel axis 1 of a channel-first tensor."""
    return f(x.movedim(1, -1)).movedim(-1, 1)


def _check_features(x: Any, name: str, channels: int, ndim: int, *, even: bool = True) -> "torch.Tensor":
    x = check_tensor(x, name)
    if x.ndim != ndim + 2 or x.shape[1] != channels:
        want = "(N, C, L)" if ndim == 1 else "(N, C, H, W)"
        raise ValueError(f"`{name}` must have shape {want} with C = {channels}; got {tuple(x.shape)}")
    if even and any(s % 2 for s in x.shape[2:]):
        raise ValueError(f"`{name}` must have even spatial sizes (the DWT halves them); got {tuple(x.shape[2:])}")
    return x


class _DWT(nn.Module):
    """Periodized DWT of channel-first maps with the sub-bands stacked as channels (band-major)."""

    def __init__(self, wavelet: str, ndim: int) -> None:
        super().__init__()
        self.wavelet, self.ndim = wavelet, ndim

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        bank = _bank(self.wavelet)
        lo, hi = _analysis(x, bank, "periodization", -1)
        if self.ndim == 1:
            return torch.cat([lo, hi], dim=1)
        cA, cH = _analysis(lo, bank, "periodization", -2)
        cV, cD = _analysis(hi, bank, "periodization", -2)
        return torch.cat([cA, cH, cV, cD], dim=1)

    def inverse(self, x: "torch.Tensor") -> "torch.Tensor":
        bank = _bank(self.wavelet)
        if self.ndim == 1:
            a, d = x.chunk(2, dim=1)
            return _synthesis(a, d, bank, "periodization", -1)
        a, h, v, d = x.chunk(4, dim=1)
        lo = _synthesis(a, h, bank, "periodization", -2)
        hi = _synthesis(v, d, bank, "periodization", -2)
        return _synthesis(lo, hi, bank, "periodization", -1)


def _circular_conv(ndim: int, c_in: int, c_out: int) -> "nn.Module":
    conv = nn.Conv1d if ndim == 1 else nn.Conv2d
    return conv(c_in, c_out, 3, padding=1, padding_mode="circular")


@constraints(dim="count", wavelet="option", out_dim="count", ndim="option")
class WaveletDownsample(nn.Module):
    """Wavelet-preserving downsampling: an invertible halving that keeps the detail sub-bands as channels.

    ``Linear(C -> C / 2**ndim)`` and ``LayerNorm`` over channels, the periodized DWT (the ``2**ndim``
    sub-bands of ``C / 2**ndim`` channels stacked: ``C`` channels at half the resolution), then a circular
    3 (1-D) or 3 x 3 (2-D) convolution to ``out_dim`` channels. Unlike a strided convolution or pooling,
    the DWT stage loses nothing: it is orthogonal for orthogonal wavelets.

    Parameters
    ----------
    dim : int
        Input channels C, a multiple of ``2**ndim``.
    wavelet : str, default 'haar'
        One of :data:`WAVELETS`.
    out_dim : int, optional
        Output channels (default ``dim``).
    ndim : {1, 2}, default 2
        1 for signals (N, C, L), 2 for images (N, C, H, W).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import WaveletDownsample
    >>> down = WaveletDownsample(16, out_dim=32)
    >>> down(torch.randn(2, 16, 8, 8)).shape
    torch.Size([2, 32, 4, 4])
    """

    def __init__(self, dim: int, wavelet: str = "haar", *, out_dim: int | None = None, ndim: int = 2) -> None:
        super().__init__()
        self.ndim = _check_ndim(ndim)
        r = 2 ** self.ndim
        self.dim = check_int(dim, "dim", minimum=r, maximum=C_INT_MAX)
        if self.dim % r:
            raise ValueError(f"`dim` must be a multiple of {r} (the sub-bands of a {self.ndim}-D DWT); got {dim}")
        self.out_dim = self.dim if out_dim is None else check_int(out_dim, "out_dim", minimum=1, maximum=C_INT_MAX)
        self.wavelet = _check_wavelet_name(wavelet)
        self.proj = nn.Linear(self.dim, self.dim // r)
        self.norm = nn.LayerNorm(self.dim // r)
        self.dwt = _DWT(self.wavelet, self.ndim)
        self.conv = _circular_conv(self.ndim, self.dim, self.out_dim)

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """``(N, dim, *S) -> (N, out_dim, *S / 2)``; the spatial sizes S must be even."""
        return self._run(_check_features(x, "x", self.dim, self.ndim))

    def _run(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.conv(self.dwt(_channels_last(x, lambda t: self.norm(self.proj(t)))))

    def extra_repr(self) -> str:
        return f"{self.dim} -> {self.out_dim}, wavelet={self.wavelet!r}, ndim={self.ndim}"


@constraints(dim="count", wavelet="option", out_dim="count", skip_dim="int>=0", ndim="option")
class WaveletUpsample(nn.Module):
    """Wavelet upsampling: ``Linear(C -> 2**ndim C)`` and ``LayerNorm``, the inverse periodized DWT (the
    channels read as ``2**ndim`` sub-bands of C channels: C channels at twice the resolution), the skip
    connection concatenated, then a circular convolution to ``out_dim`` channels.

    Parameters
    ----------
    dim : int
        Input channels C.
    wavelet : str, default 'haar'
        One of :data:`WAVELETS`.
    out_dim : int, optional
        Output channels (default ``dim``).
    skip_dim : int, optional
        Channels of the skip connection (default ``dim``; 0: no skip).
    ndim : {1, 2}, default 2
        1 for signals (N, C, L), 2 for images (N, C, H, W).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import WaveletUpsample
    >>> up = WaveletUpsample(32, out_dim=16, skip_dim=16)
    >>> up(torch.randn(2, 32, 4, 4), torch.randn(2, 16, 8, 8)).shape
    torch.Size([2, 16, 8, 8])
    """

    def __init__(self, dim: int, wavelet: str = "haar", *, out_dim: int | None = None, skip_dim: int | None = None,
                 ndim: int = 2) -> None:
        super().__init__()
        self.ndim = _check_ndim(ndim)
        r = 2 ** self.ndim
        self.dim = check_int(dim, "dim", minimum=1, maximum=C_INT_MAX)
        self.out_dim = self.dim if out_dim is None else check_int(out_dim, "out_dim", minimum=1, maximum=C_INT_MAX)
        self.skip_dim = self.dim if skip_dim is None else check_int(skip_dim, "skip_dim", minimum=0, maximum=C_INT_MAX)
        self.wavelet = _check_wavelet_name(wavelet)
        self.proj = nn.Linear(self.dim, r * self.dim)
        self.norm = nn.LayerNorm(r * self.dim)
        self.dwt = _DWT(self.wavelet, self.ndim)
        self.conv = _circular_conv(self.ndim, self.dim + self.skip_dim, self.out_dim)

    @constraints(x="tensor", skip="tensor")
    def forward(self, x: "torch.Tensor", skip: "torch.Tensor | None" = None) -> "torch.Tensor":
        """``(N, dim, *S)`` and the skip ``(N, skip_dim, *2S) -> (N, out_dim, *2S)``."""
        x = _check_features(x, "x", self.dim, self.ndim, even=False)
        if self.skip_dim:
            if skip is None:
                raise ValueError(f"`skip` must be a tensor of {self.skip_dim} channels (skip_dim); got None")
            skip = _check_features(skip, "skip", self.skip_dim, self.ndim, even=False)
            want = (x.shape[0], self.skip_dim, *(2 * s for s in x.shape[2:]))
            if tuple(skip.shape) != want:
                raise ValueError(f"`skip` must have shape {want}; got {tuple(skip.shape)}")
        elif skip is not None:
            raise ValueError("`skip` must be None: the module was built with skip_dim=0")
        return self._run(x, skip)

    def _run(self, x: "torch.Tensor", skip: "torch.Tensor | None") -> "torch.Tensor":
        y = self.dwt.inverse(_channels_last(x, lambda t: self.norm(self.proj(t))))
        return self.conv(y if skip is None else torch.cat([y, skip], dim=1))

    def extra_repr(self) -> str:
        return f"{self.dim} (+ skip {self.skip_dim}) -> {self.out_dim}, wavelet={self.wavelet!r}, ndim={self.ndim}"


@constraints(dim="count", heads="count", window="count", wavelet="option", ndim="option")
class WaveletAttention(nn.Module):
    """Multi-head self-attention over DWT-domain tokens (MSWT's wavelet attention).

    ``Linear(C -> C / 2**ndim)`` and ``LayerNorm``, the periodized DWT (``C`` channels at half the
    resolution: every token carries all sub-bands of its position), a circular convolution, multi-head
    attention over the tokens (all of them, or ``window``-sized local windows, circularly padded), the
    inverse DWT and ``Linear(C / 2**ndim -> C)``. Use it inside :class:`WaveletBlock` (pre-LN residual
    and FFN).

    Reconstructed where it differs from the authors' code: their local attention groups a strided
    (dilated) grid of tokens spanning the field, here a window is a contiguous block of neighbouring
    tokens; they apply a LayerNorm to the tokens before a bias-free ``qkv`` and output projection, here
    there is no token LayerNorm and both projections have biases; their attention has 8 heads of width
    64, here ``heads`` divides ``dim``.

    Parameters
    ----------
    dim : int
        Channels C: a multiple of ``2**ndim`` and of ``heads``.
    heads : int
        Attention heads.
    window : int, optional
        Local attention in contiguous windows of ``window`` tokens (1-D) or ``window x window`` tokens
        (2-D) of the half-resolution grid, circularly padded; None (default): global attention. A window
        at least as large as the token grid on every axis is global attention; one that would need more
        circular padding than an axis has raises a ValueError naming ``window`` at the call.
    wavelet : str, default 'haar'
        One of :data:`WAVELETS`.
    ndim : {1, 2}, default 2
        1 for signals (N, C, L), 2 for images (N, C, H, W).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import WaveletAttention
    >>> attn = WaveletAttention(32, heads=4, window=4)
    >>> attn(torch.randn(2, 32, 16, 16)).shape
    torch.Size([2, 32, 16, 16])
    """

    def __init__(self, dim: int, heads: int, window: int | None = None, wavelet: str = "haar", *,
                 ndim: int = 2) -> None:
        super().__init__()
        self.ndim = _check_ndim(ndim)
        r = 2 ** self.ndim
        self.dim = check_int(dim, "dim", minimum=r, maximum=C_INT_MAX)
        if self.dim % r:
            raise ValueError(f"`dim` must be a multiple of {r} (the sub-bands of a {self.ndim}-D DWT); got {dim}")
        self.heads = check_int(heads, "heads", minimum=1, maximum=C_INT_MAX)
        if self.dim % self.heads:
            raise ValueError(f"`heads` must divide `dim` = {self.dim}; got {heads}")
        self.window = None if window is None else check_int(window, "window", minimum=1, maximum=C_INT_MAX)
        self.wavelet = _check_wavelet_name(wavelet)
        self.proj_in = nn.Linear(self.dim, self.dim // r)
        self.norm = nn.LayerNorm(self.dim // r)
        self.dwt = _DWT(self.wavelet, self.ndim)
        self.conv = _circular_conv(self.ndim, self.dim, self.dim)
        self.qkv = nn.Linear(self.dim, 3 * self.dim)
        self.out = nn.Linear(self.dim, self.dim)
        self.proj_out = nn.Linear(self.dim // r, self.dim)

    def _attend(self, t: "torch.Tensor") -> "torch.Tensor":
        """Self-attention over (B, T, C) tokens."""
        B, T, C = t.shape
        q, k, v = self.qkv(t).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.out(y.transpose(1, 2).reshape(B, T, C))

    def _tokens(self, z: "torch.Tensor") -> "torch.Tensor":
        """Attention over the tokens of ``(N, C, *S)``, globally or in windows."""
        N, C, *S = z.shape
        w = self.window
        if w is None or all(w >= s for s in S):  # a window covering the grid is global attention
            return self._attend(z.flatten(2).transpose(1, 2)).transpose(1, 2).reshape(N, C, *S)
        pads = [(-s) % w for s in S]
        for s, pad in zip(S, pads):
            if pad > s:
                raise ValueError(f"`window` = {w} needs {pad} tokens of circular padding on a token axis of "
                                 f"size {s} (grid {tuple(S)}); use a window at most twice each axis of the "
                                 "grid, or at least the whole grid (global attention)")
        if any(pads):
            flat = [p for pad in reversed(pads) for p in (0, pad)]
            z = F.pad(z, flat, mode="circular")
        P = z.shape[2:]
        if self.ndim == 1:
            t = z.view(N, C, P[0] // w, w).permute(0, 2, 3, 1).reshape(-1, w, C)
            y = self._attend(t).view(N, P[0] // w, w, C).permute(0, 3, 1, 2).reshape(N, C, P[0])
            return y[..., :S[0]]
        nh, nw = P[0] // w, P[1] // w
        t = z.view(N, C, nh, w, nw, w).permute(0, 2, 4, 3, 5, 1).reshape(-1, w * w, C)
        y = self._attend(t).view(N, nh, nw, w, w, C).permute(0, 5, 1, 3, 2, 4).reshape(N, C, P[0], P[1])
        return y[..., :S[0], :S[1]]

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """``(N, dim, *S) -> (N, dim, *S)``; the spatial sizes S must be even."""
        return self._run(_check_features(x, "x", self.dim, self.ndim))

    def _run(self, x: "torch.Tensor") -> "torch.Tensor":
        z = self.conv(self.dwt(_channels_last(x, lambda t: self.norm(self.proj_in(t)))))
        z = self.dwt.inverse(self._tokens(z))
        return _channels_last(z, self.proj_out)

    def extra_repr(self) -> str:
        return (f"{self.dim}, heads={self.heads}, window={self.window}, wavelet={self.wavelet!r}, "
                f"ndim={self.ndim}")


@constraints(dim="count", heads="count", window="count", wavelet="option", ndim="option", mlp_ratio="count")
class WaveletBlock(nn.Module):
    """The multi-scale transformer block: ``x + WaveletAttention(LN(x))``, then ``x + FFN(LN(x))``.

    Pre-LN residual block over channel-first maps; the FFN is ``Linear(C -> mlp_ratio C)``, GELU,
    ``Linear(mlp_ratio C -> C)`` per position.

    Parameters
    ----------
    dim, heads, window, wavelet, ndim
        As in :class:`WaveletAttention`.
    mlp_ratio : int, default 4
        Hidden width of the FFN over ``dim``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import WaveletBlock
    >>> block = WaveletBlock(16, heads=2, ndim=1)
    >>> block(torch.randn(3, 16, 32)).shape
    torch.Size([3, 16, 32])
    """

    def __init__(self, dim: int, heads: int, window: int | None = None, wavelet: str = "haar", *, ndim: int = 2,
                 mlp_ratio: int = 4) -> None:
        super().__init__()
        self.attn = WaveletAttention(dim, heads, window, wavelet, ndim=ndim)
        self.dim, self.ndim = self.attn.dim, self.attn.ndim
        hidden = self.dim * check_int(mlp_ratio, "mlp_ratio", minimum=1, maximum=C_INT_MAX)
        self.norm1 = nn.LayerNorm(self.dim)
        self.norm2 = nn.LayerNorm(self.dim)
        self.ffn = nn.Sequential(nn.Linear(self.dim, hidden), nn.GELU(), nn.Linear(hidden, self.dim))

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """``(N, dim, *S) -> (N, dim, *S)``; the spatial sizes S must be even."""
        return self._run(_check_features(x, "x", self.dim, self.ndim))

    def _run(self, x: "torch.Tensor") -> "torch.Tensor":
        x = x + self.attn._run(_channels_last(x, self.norm1))
        return x + _channels_last(x, lambda t: self.ffn(self.norm2(t)))


_GRIDS = ("linear", "periodic", "none")


class _MSWT(nn.Module):
    """The U-Net over scales shared by :class:`MSWT1D` and :class:`MSWT2D`."""

    def __init__(self, in_ch: int, out_ch: int, dims: Sequence[int], wavelet: str, heads: int, window: int | None,
                 local_levels: Sequence[int], grid: str, mlp_ratio: int, ndim: int) -> None:
        super().__init__()
        self.ndim = ndim
        self.in_ch = check_int(in_ch, "in_ch", minimum=1, maximum=C_INT_MAX)
        self.out_ch = check_int(out_ch, "out_ch", minimum=1, maximum=C_INT_MAX)
        self.wavelet = _check_wavelet_name(wavelet)
        self.grid = check_option(grid, "grid", _GRIDS)
        if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence) or len(dims) < 1:
            raise TypeError(f"`dims` must be a non-empty sequence of channel widths; got {dims!r}")
        dims = [check_int(d, "dims", minimum=1, maximum=C_INT_MAX) for d in dims]
        heads = check_int(heads, "heads", minimum=1, maximum=C_INT_MAX)
        r = 2 ** ndim
        for d in dims:
            if d % r or d % heads:
                raise ValueError(f"`dims`: every width must be a multiple of {r} (the sub-bands) and of `heads` = "
                                 f"{heads}; got {dims}")
        window = None if window is None else check_int(window, "window", minimum=1, maximum=C_INT_MAX)
        if isinstance(local_levels, (str, bytes)) or not isinstance(local_levels, Sequence):
            raise TypeError(f"`local_levels` must be a sequence of level indices; got {local_levels!r}")
        local = {check_int(i, "local_levels", minimum=0, maximum=C_INT_MAX) for i in local_levels}
        self.dims = tuple(dims)
        n = len(dims)
        g = {"linear": ndim, "periodic": 2 * ndim, "none": 0}[self.grid]
        self.input_proj = nn.Linear(self.in_ch + g, dims[0])
        self.enc_blocks = nn.ModuleList()
        self.downs = nn.ModuleList()
        for i, d in enumerate(dims):
            win = window if i in local else None
            self.enc_blocks.append(WaveletBlock(d, heads, win, wavelet, ndim=ndim, mlp_ratio=mlp_ratio))
            self.downs.append(WaveletDownsample(d, wavelet, out_dim=dims[i + 1] if i < n - 1 else d, ndim=ndim))
        self.ups = nn.ModuleList()
        self.dec_blocks = nn.ModuleList()
        for i in range(n):
            d = dims[n - 1 - i]
            new = dims[n - 2 - i] if n - 2 - i >= 0 else d
            win = window if n - 1 - i in local else None  # the block runs at level n - 1 - i
            self.ups.append(WaveletUpsample(d, wavelet, out_dim=new, skip_dim=d, ndim=ndim))
            self.dec_blocks.append(WaveletBlock(new, heads, win, wavelet, ndim=ndim, mlp_ratio=mlp_ratio))
        self.output_proj = nn.Sequential(nn.Linear(dims[0], max(1, dims[0] // 2)), nn.GELU(),
                                         nn.Linear(max(1, dims[0] // 2), self.out_ch))

    def _grid(self, x: "torch.Tensor") -> list["torch.Tensor"]:
        if self.grid == "none":
            return []
        N, _, *S = x.shape
        axes = [torch.linspace(0, 1, s, dtype=x.dtype, device=x.device) if self.grid == "linear"
                else torch.arange(s, dtype=x.dtype, device=x.device) * (2 * math.pi / s) for s in S]
        mesh = torch.meshgrid(*axes, indexing="ij")
        feats = list(mesh) if self.grid == "linear" else [f(m) for m in mesh for f in (torch.sin, torch.cos)]
        return [f.expand(N, 1, *S) for f in feats]

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        x = check_tensor(x, "x")
        n = len(self.dims)
        if x.ndim != self.ndim + 2 or x.shape[1] != self.in_ch:
            want = "(N, in_ch, L)" if self.ndim == 1 else "(N, in_ch, H, W)"
            raise ValueError(f"`x` must have shape {want} with in_ch = {self.in_ch}; got {tuple(x.shape)}")
        if any(s % 2 ** n for s in x.shape[2:]):
            raise ValueError(f"`x` must have spatial sizes divisible by 2**{n} = {2 ** n} (one halving per level); "
                             f"got {tuple(x.shape[2:])}")
        x = torch.cat([x, *self._grid(x)], dim=1)
        x = _channels_last(x, self.input_proj)
        skips = []
        for block, down in zip(self.enc_blocks, self.downs):
            skips.append(x)
            x = down._run(block._run(x))
        for up, block in zip(self.ups, self.dec_blocks):
            x = block._run(up._run(x, skips.pop()))
        return _channels_last(x, self.output_proj)


@constraints(in_ch="count", out_ch="count", dim="count", wavelet="option", dims="any", heads="count",
             window="count", local_levels="any", grid="option", mlp_ratio="count")
class MSWT1D(_MSWT):
    """The multi-scale wavelet transformer for signals (N, in_ch, L) -> (N, out_ch, L) (reconstructed).

    The 2-D network of :class:`MSWT2D` with 1-D transforms: a ``WaveletBlock`` and a ``WaveletDownsample``
    per level, then per level a ``WaveletUpsample`` (with the skip from the encoder) and a
    ``WaveletBlock``; input ``Linear(in_ch + grid -> dims[0])``, output ``Linear -> GELU -> Linear``.
    The MSWT code is 2-D only: the 1-D widths (doubling per level, as the halving has 2 sub-bands) are
    this module's choice.

    Parameters
    ----------
    in_ch, out_ch : int
        Input and output channels.
    dim : int, default 32
        Base width: ``dims = [dim // 2, dim, 2 dim, 2 dim]`` unless ``dims`` is given.
    wavelet : str, default 'haar'
        One of :data:`WAVELETS`.
    dims : sequence of int, optional
        Widths per level (each a multiple of 2 and of ``heads``); L must be divisible by ``2**len(dims)``.
    heads : int, default 4
        Attention heads.
    window : int, optional
        Local attention window (tokens of the half-resolution grid) at the levels ``local_levels``.
    local_levels : sequence of int, default ()
        Levels (0 = finest) whose attention is local when ``window`` is given.
    grid : {'linear', 'periodic', 'none'}, default 'linear'
        Coordinates appended to the input: ``x`` in [0, 1], ``(sin, cos)(2 pi x)``, or nothing.
    mlp_ratio : int, default 4
        FFN width over the block width.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import MSWT1D
    >>> model = MSWT1D(1, 1, dim=16, heads=2)
    >>> model(torch.randn(4, 1, 64)).shape
    torch.Size([4, 1, 64])
    """

    def __init__(self, in_ch: int, out_ch: int, dim: int = 32, wavelet: str = "haar", *,
                 dims: Sequence[int] | None = None, heads: int = 4, window: int | None = None,
                 local_levels: Sequence[int] = (), grid: str = "linear", mlp_ratio: int = 4) -> None:
        dim = check_int(dim, "dim", minimum=2, maximum=C_INT_MAX)
        if dims is None:
            dims = [dim // 2, dim, 2 * dim, 2 * dim]
        super().__init__(in_ch, out_ch, dims, wavelet, heads, window, local_levels, grid,
                         check_int(mlp_ratio, "mlp_ratio", minimum=1, maximum=C_INT_MAX), 1)

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """(N, in_ch, L) -> (N, out_ch, L); L divisible by ``2**len(dims)``."""
        return super().forward(x)


@constraints(in_ch="count", out_ch="count", dim="count", wavelet="option", dims="any", heads="count",
             window="count", local_levels="any", grid="option", mlp_ratio="count")
class MSWT2D(_MSWT):
    """The multi-scale wavelet transformer (MSWT) for fields (N, in_ch, H, W) -> (N, out_ch, H, W).

    A U-Net over scales: per level a :class:`WaveletBlock` (wavelet attention in a pre-LN residual block
    with FFN) and a :class:`WaveletDownsample` (lossless DWT halving), then per level a
    :class:`WaveletUpsample` (inverse DWT, skip connection from the encoder) and a block; input
    ``Linear(in_ch + grid -> dims[0])``, output ``Linear -> GELU -> Linear``. The defaults follow the
    MSWT code's configuration for 2-D Navier-Stokes: ``dims = [dim / 2, 2 dim, 4 dim, 4 dim]`` with
    ``dim = 72``, Haar, local attention at levels 0, 1, 2 (when ``window`` is given).

    The layout follows the authors' code; reconstructed where it differs from it: the local attention
    uses contiguous windows (theirs groups a strided, dilated grid of tokens spanning the field), the
    tokens get no LayerNorm before ``qkv`` and the ``qkv``/output projections have biases (theirs: token
    LayerNorm, bias-free projections), and the FFN branch is pre-LN only (theirs is pre- and post-LN).

    Parameters
    ----------
    in_ch, out_ch : int
        Input and output channels.
    dim : int, default 72
        Base width: ``dims = [dim // 2, 2 dim, 4 dim, 4 dim]`` unless ``dims`` is given.
    wavelet : str, default 'haar'
        One of :data:`WAVELETS`.
    dims : sequence of int, optional
        Widths per level (each a multiple of 4 and of ``heads``); H and W must be divisible by
        ``2**len(dims)``.
    heads : int, default 4
        Attention heads.
    window : int, optional
        Local attention window (``window x window`` tokens of the half-resolution grid) at the levels
        ``local_levels``; None: global attention everywhere.
    local_levels : sequence of int, default (0, 1, 2)
        Levels (0 = finest) whose attention is local when ``window`` is given.
    grid : {'linear', 'periodic', 'none'}, default 'linear'
        Coordinates appended to the input: (y, x) in [0, 1]^2, their ``(sin, cos)(2 pi .)``, or nothing.
    mlp_ratio : int, default 4
        FFN width over the block width.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import MSWT2D
    >>> model = MSWT2D(1, 1, dim=8, heads=2, window=4)
    >>> model(torch.randn(2, 1, 32, 32)).shape
    torch.Size([2, 1, 32, 32])
    """

    def __init__(self, in_ch: int, out_ch: int, dim: int = 72, wavelet: str = "haar", *,
                 dims: Sequence[int] | None = None, heads: int = 4, window: int | None = None,
                 local_levels: Sequence[int] = (0, 1, 2), grid: str = "linear", mlp_ratio: int = 4) -> None:
        dim = check_int(dim, "dim", minimum=2, maximum=C_INT_MAX)
        if dims is None:
            dims = [dim // 2, 2 * dim, 4 * dim, 4 * dim]
        super().__init__(in_ch, out_ch, dims, wavelet, heads, window, local_levels, grid,
                         check_int(mlp_ratio, "mlp_ratio", minimum=1, maximum=C_INT_MAX), 2)

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """(N, in_ch, H, W) -> (N, out_ch, H, W); H and W divisible by ``2**len(dims)``."""
        return super().forward(x)


# ==================================================================================================
# metrics and rollout
# ==================================================================================================
@constraints(pred="tensor", true="tensor", reduction="option")
def relative_l2(pred: "torch.Tensor", true: "torch.Tensor", reduction: str = "mean") -> "torch.Tensor":
    """Relative L2 error per sample, ``||pred - true|| / ||true||`` over all but the first axis.

    Parameters
    ----------
    pred, true : torch.Tensor, shape (N, ...)
        Predictions and targets of one shape, dtype and device; each of the N samples is a field (any
        number of channels and spatial axes).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        As in :mod:`torch.nn.functional`: the mean or sum over samples, or the (N,) errors.

    Returns
    -------
    torch.Tensor
        The reduced error (differentiable in ``pred``).

    Raises
    ------
    ValueError
        If the shapes, dtypes or devices differ, or a target sample is all zero.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import relative_l2
    >>> true = torch.ones(2, 4)
    >>> relative_l2(true * 1.5, true, reduction="none")
    tensor([0.5000, 0.5000])
    """
    from numtk.torch._common import reduce_loss

    pred = check_tensor(pred, "pred")
    true = check_tensor(true, "true")
    if pred.shape != true.shape or pred.ndim < 1:
        raise ValueError(f"`pred` must have the shape of `true` {tuple(true.shape)} (N, ...); got {tuple(pred.shape)}")
    if pred.device != true.device:
        raise ValueError(f"`pred` must be on the device of `true` ({true.device}); got {pred.device}")
    if pred.dtype != true.dtype:
        raise TypeError(f"`pred` must have the dtype of `true` ({true.dtype}); got {pred.dtype}")
    from numtk.torch._common import check_reduction

    check_reduction(reduction)
    den = true.flatten(1).norm(dim=1)
    if den.numel() and not bool((den > 0).all()):
        raise ValueError("`true` has a sample that is all zero: its relative error is undefined")
    return reduce_loss((pred - true).flatten(1).norm(dim=1) / den, reduction)


@constraints(u="tensor", ndim="option")
def energy_spectrum(u: "torch.Tensor", ndim: int = 1) -> "torch.Tensor":
    """Energy per integer wavenumber of periodic fields: one-sided in 1-D, radial shells in 2-D.

    With ``û`` the discrete Fourier transform divided by the number of points, ``E[k]`` is the sum of
    ``|û|^2`` over the wavenumbers of magnitude ``k`` (1-D: ``±k``; 2-D: ``round(sqrt(kx^2 + ky^2)) = k``
    with integer ``kx, ky``), so that ``E.sum(-1)`` is the mean square of ``u`` (Parseval).

    Parameters
    ----------
    u : torch.Tensor, shape (..., L) or (..., H, W)
        Real fields on uniform periodic grids; any leading dimensions.
    ndim : {1, 2}, default 1
        Fields along the last axis (1) or the last two (2).

    Returns
    -------
    torch.Tensor, shape (..., K + 1)
        ``E[..., k]`` for ``k = 0..K``: ``K = L // 2`` in 1-D; in 2-D the largest shell,
        ``round(sqrt((H // 2)^2 + (W // 2)^2))``.

    Examples
    --------
    >>> import math, torch
    >>> from numtk.torch.mswt import energy_spectrum
    >>> x = torch.arange(16, dtype=torch.float64) * (2 * math.pi / 16)
    >>> E = energy_spectrum(torch.cos(3 * x))
    >>> [round(float(e), 6) for e in E[:5]]
    [0.0, 0.0, 0.0, 0.5, 0.0]
    """
    u = check_tensor(u, "u")
    nd = _check_ndim(ndim)
    if u.ndim < nd or any(s < 1 for s in u.shape[u.ndim - nd:]):
        raise ValueError(f"`u` must have at least {nd} non-empty axes for ndim={nd}; got shape {tuple(u.shape)}")
    lead = u.shape[:u.ndim - nd]
    K = u.shape[-1] // 2 if nd == 1 else int(round(math.hypot(u.shape[-2] // 2, u.shape[-1] // 2)))
    if u.numel() == 0:  # no field (an empty batch): FFT libraries refuse empty transforms
        return u.new_zeros((*lead, K + 1))
    if nd == 1:
        L = u.shape[-1]
        p = torch.fft.fft(u, dim=-1, norm="forward").abs().square()
        k = torch.fft.fftfreq(L, d=1.0 / L, device=u.device).abs().round().long()
    else:
        H, W = u.shape[-2:]
        p = torch.fft.fft2(u, dim=(-2, -1), norm="forward").abs().square().flatten(-2)
        ky = torch.fft.fftfreq(H, d=1.0 / H, device=u.device, dtype=torch.float64)
        kx = torch.fft.fftfreq(W, d=1.0 / W, device=u.device, dtype=torch.float64)
        k = torch.sqrt(ky[:, None] ** 2 + kx[None, :] ** 2).round().long().flatten()
    return p.new_zeros((*lead, K + 1)).index_add(-1, k, p)


@constraints(model="callable", u0="tensor", steps="count", grad="bool")
def rollout(model: Callable, u0: "torch.Tensor", steps: int, *, grad: bool = False) -> "torch.Tensor":
    """Autoregressive rollout: ``u[t + 1] = model(u[t])`` from ``u[0] = u0``.

    Parameters
    ----------
    model : callable
        A module or function mapping a state to the next state of the same shape.
    u0 : torch.Tensor
        The initial states (for example (N, C, L) or (N, C, H, W)).
    steps : int
        Number of steps (>= 1).
    grad : bool, default False
        Keep the autograd graph (to train through the rollout); by default the steps run under
        :func:`torch.no_grad`.

    Returns
    -------
    torch.Tensor, shape ``(steps, *u0.shape)``
        The predicted states ``u[1] .. u[steps]``, time first.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.mswt import rollout
    >>> rollout(lambda u: 0.5 * u, torch.ones(2, 3), 3)[:, 0, 0]
    tensor([0.5000, 0.2500, 0.1250])
    """
    if not callable(model):
        raise TypeError(f"`model` must be callable (an nn.Module or a function); got {type(model).__name__}")
    u = check_tensor(u0, "u0")
    steps = check_int(steps, "steps", minimum=1, maximum=C_INT_MAX)
    grad = check_bool(grad, "grad")
    out = []
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        for t in range(steps):
            u = model(u)
            if not isinstance(u, torch.Tensor) or u.shape != u0.shape:
                got = tuple(u.shape) if isinstance(u, torch.Tensor) else type(u).__name__
                raise ValueError(f"`model` must return a tensor of the shape of `u0` {tuple(u0.shape)}; "
                                 f"got {got} at step {t + 1}")
            out.append(u)
    return torch.stack(out)
