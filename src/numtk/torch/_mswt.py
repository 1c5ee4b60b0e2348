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
import numbers
from typing import Any, Callable, Sequence

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option
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
_BANKS: dict[str, tuple] = {}


def _bank(wavelet: Any, name: str = "wavelet") -> tuple[Any, tuple[np.ndarray, ...]]:
    """(cache key, (dec_lo, dec_hi, rec_lo, rec_hi) as float64 arrays) of a wavelet argument."""
    if isinstance(wavelet, str):
        if wavelet not in SCALING_FILTERS:
            raise ValueError(f"`{name}` must be {_WAVELET_HINT}; got {wavelet!r}")
        if wavelet not in _BANKS:
            _BANKS[wavelet] = tuple(np.array(f, dtype=np.float64) for f in filter_bank(SCALING_FILTERS[wavelet]))
        return wavelet, _BANKS[wavelet]
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
    key = tuple(tuple(f.tolist()) for f in out)
    return key, tuple(out)


@constraints(wavelet="option")
def wavelet_filters(wavelet: Any = "haar") -> tuple[tuple[float, ...], ...]:
    """The filter bank ``(dec_lo, dec_hi, rec_lo, rec_hi)`` of a wavelet, as PyWavelets orders it.

    Parameters
    ----------
    wavelet : str
        One of :data:`WAVELETS` (``'haar'``, ``'db1'``..``'db38'``, ``'sym2'``..``'sym20'``,
        ``'coif1'``..``'coif17'``).

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
    return tuple(tuple(float(v) for v in f) for f in _bank(wavelet)[1])


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


def _analysis(x: "torch.Tensor", bank: tuple, mode: str, dim: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    """Approximation and detail of ``x`` along ``dim``, as ``pywt.dwt`` along that axis.

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


def _synthesis(a: "torch.Tensor", d: "torch.Tensor", bank: tuple, mode: str, dim: int) -> "torch.Tensor":
    """The signal of approximation ``a`` and detail ``d`` along ``dim``, as ``pywt.idwt`` along that axis.

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
        One of :data:`WAVELETS` (``'haar'``, ``'db1'``..``'db38'``, ``'sym2'``..``'sym20'``,
        ``'coif1'``..``'coif17'``), or a filter bank: a ``pywt.Wavelet`` (any object with ``filter_bank``)
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
    >>> cA * 2 ** 0.5
    tensor([ 1.,  5.,  9., 13.], dtype=torch.float64)
    >>> torch.allclose(idwt1d(cA, cD, "haar"), x)
    True
    """
    x = check_tensor(x, "x")
    if x.ndim < 1:
        raise ValueError("`x` must have at least one dimension (the signal axis); got a 0-D tensor")
    key, bank = _bank(wavelet)
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
    key, bank = _bank(wavelet)
    mode = _mode(mode)
    n = cA.shape[-1]
    Fl = bank[0].size
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
    key, bank = _bank(wavelet)
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
    key, bank = _bank(wavelet)
    mode_h, mode_w = _modes2(mode)
    h, w = cA.shape[-2:]
    Fl = bank[0].size
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
