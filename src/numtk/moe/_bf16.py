r"""bf16 bit packing of PuzzleMoE expert pairs, and the decode-fused mat-vec that runs them.

PuzzleMoE (Zhao, Wang and Zhang, ICML 2026) merges two experts into one shared magnitude with two masks and
the two experts' signs. Stored as bf16, a merged magnitude needs 5 exponent bits (2^-15 <= W_m < 2^17), so
its word has room for the four bits of masks and signs: a merged pair costs what one bf16 expert costs.
:func:`pack_bf16` builds those words, :func:`unpack_bf16` takes them apart, and :func:`packed_matvec`
multiplies either expert by a batch of vectors straight from the words, decoding in registers. The loops are
compiled (``native/include/numtk/moe/bf16_pack.hpp``); this module checks the arguments and words the errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result, n_threads
from numtk._lib._constraints import constraints
from numtk._lib._validation import as_array, check_bool, check_int, check_option
from numtk.moe import _moe_ext

__all__ = ["pack_bf16", "unpack_bf16", "packed_matvec"]

#: the ``underflow`` rules of :func:`pack_bf16`, in the order of the compiled kernel's codes
UNDERFLOW_MODES = ("saturate", "exponent", "zero")

#: bf16 exponents a packed word can hold: e - 112 in 5 bits
MIN_EXPONENT, MAX_EXPONENT = 112, 143


# --------------------------------------------------------------------------------------------------
# arguments
# --------------------------------------------------------------------------------------------------
def _c(arr: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``arr`` C-contiguous and aligned for its dtype (0-d arrays stay 0-d), copied only if needed: the kernels
    read typed pointers, and a view at an odd byte offset is contiguous but not aligned."""
    return np.require(arr, dtype=dtype, requirements="CA")


# Grains of the compiled bf16 kernels (n_threads' cap: a second thread only from 2 grains of work). Measured
# with workers=1 against 2 forced, interleaved, on 2 cores shared with other jobs (bench/compare.py --kernels
# none --threads): pack and round ran at 0.7-1.0x below about 2 Mi entries (a few ms of work) and 1.1-1.4x
# from 2-16 Mi; unpack is memory-bound (under 1 ms per Mi entries) and ran at 0.3-0.7x up to 4 Mi; the
# decoding mat-vec ran at 0.1-0.9x up to 4 Mi multiply-adds (a 1024 x 1024 expert times 4 vectors: a thread
# that starts late holds the call up by more than the product takes). The kernels' own floors (2**18 entries
# or multiply-adds per thread) stay below these.
BF16_ELEMENTWISE_GRAIN = 2**20  # entries (pack, round)
BF16_UNPACK_GRAIN = 2**23  # entries
BF16_MATVEC_GRAIN = 2**23  # d_out * d_in * batch multiply-adds


def _threads(workers: Any, work: int, grain: int) -> int:
    return 1 if type(workers) is int and workers == 1 else n_threads(workers, work=work, grain=grain)


def _magnitude(magnitude: Any) -> np.ndarray:
    """``magnitude`` as a C-contiguous float32, float64 or uint16 (bf16 bits) array."""
    arr = as_array(magnitude, "magnitude", kinds="biuf")
    if arr.dtype.kind == "f":
        if arr.dtype not in (np.float32, np.float64):  # extended precision
            arr = arr.astype(np.float64)
    elif arr.dtype != np.uint16:
        raise TypeError("`magnitude` must hold float magnitudes (float32 or float64, rounded to bf16 here) or "
                        f"uint16 bf16 bits; got dtype {arr.dtype}")
    return _c(arr)


def _flags(values: Any, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """A mask or sign array of ``shape``: bool, or integers 0 / 1, as C-contiguous uint8 bytes."""
    arr = as_array(values, name, kinds="biu")
    if arr.shape != shape:
        raise ValueError(f"`{name}` must have the shape of `magnitude` {shape}; got {arr.shape}")
    if arr.dtype == np.bool_:
        return _c(arr).view(np.uint8)
    if arr.size and (arr.min() < 0 or arr.max() > 1):
        raise ValueError(f"`{name}` must hold booleans or the integers 0 and 1")
    return _c(arr, np.uint8)


def _words(packed: Any) -> np.ndarray:
    """``packed`` as C-contiguous uint16 words (integer input in [0, 65535] converted)."""
    arr = as_array(packed, "packed", kinds="iu")
    if arr.dtype != np.uint16:
        if arr.size and (arr.min() < 0 or arr.max() > 0xFFFF):
            raise ValueError("`packed` must hold 16-bit words (integers in [0, 65535])")
        arr = arr.astype(np.uint16)
    return _c(arr)


def _expert(expert: Any, *, allow_none: bool) -> int | None:
    if expert is None and allow_none:
        return None
    if expert is None:
        raise TypeError("`expert` must be 0 (expert i) or 1 (expert j); got None")
    expert = check_int(expert, "expert")
    if expert not in (0, 1):
        raise ValueError(f"`expert` must be 0 (expert i) or 1 (expert j); got {expert}")
    return expert


def _matrix(W: Any, name: str) -> np.ndarray:
    """The (d_out, d_in) word matrix of a mat-vec: a C-contiguous uint16 ndarray, never copied."""
    if not isinstance(W, np.ndarray):
        raise TypeError(f"`{name}` must be a numpy.ndarray of uint16 words; got {type(W).__name__}")
    if W.dtype != np.uint16:
        raise TypeError(f"`{name}` must have dtype uint16 (native byte order); got {W.dtype}")
    if W.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D (d_out, d_in); got an array of shape {W.shape}")
    if not W.flags.c_contiguous:
        raise ValueError(f"`{name}` must be C-contiguous: the kernel reads its rows in place and does not copy a "
                         f"large matrix; call numpy.ascontiguousarray({name}) once and reuse the result")
    if not W.flags.aligned:
        raise ValueError(f"`{name}` must be aligned for uint16 (it is a view at an odd byte offset): the kernel "
                         f"reads its rows in place and does not copy a large matrix; call "
                         f"numpy.require({name}, requirements='CA') once and reuse the result")
    return W


def _vectors(x: Any, d_in: int) -> np.ndarray:
    """``x`` as C-contiguous float32 (d_in,) or (b, d_in), finite."""
    arr = as_array(x, "x", kinds="biuf")
    if arr.ndim not in (1, 2) or arr.shape[-1] != d_in:
        raise ValueError(f"`x` must have shape (d_in,) or (batch, d_in) with d_in = {d_in} (the columns of the "
                         f"matrix); got shape {arr.shape}")
    with np.errstate(over="ignore"):
        arr = np.require(arr, dtype=np.float32, requirements="CA")
    if arr.size and not np.isfinite(arr).all():
        raise ValueError("`x` must be finite (as float32)")
    return arr


def _out(out: Any, shape: tuple[int, ...], W: np.ndarray, x: np.ndarray) -> np.ndarray:
    if out is None:
        return np.empty(shape, dtype=np.float32)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"`out` must be a numpy.ndarray or None; got {type(out).__name__}")
    if out.dtype != np.float32:
        raise TypeError(f"`out` must have dtype float32; got {out.dtype}")
    if out.shape != shape:
        raise ValueError(f"`out` must have shape {shape}; got {out.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable or not out.flags.aligned:
        raise ValueError("`out` must be C-contiguous and writeable, and aligned for float32 (the product is "
                         "written into it in place); pass a fresh numpy.empty array or None")
    if np.may_share_memory(out, W) or np.may_share_memory(out, x):
        raise ValueError("`out` must not share memory with the matrix or `x`")
    return out


def _matvec(W: np.ndarray, x: Any, kind: int, out: Any, workers: Any, isa: int = 1) -> np.ndarray:
    """out = x @ W^T through the compiled kernel (kind 0: plain bf16 words, 1 / 2: expert 0 / 1)."""
    _threads(workers, 0, 1)  # validated before the data
    d_out, d_in = W.shape
    xs = _vectors(x, d_in)
    b = 1 if xs.ndim == 1 else xs.shape[0]
    threads = _threads(workers, d_out * d_in * b, BF16_MATVEC_GRAIN)
    res = _out(out, (d_out,) if xs.ndim == 1 else (b, d_out), W, xs)
    _moe_ext.bf16_matvec(W, xs.reshape(b, d_in), res.reshape(b, d_out), kind, threads, isa)
    return res


def _describe(value: Any) -> str:
    """What is wrong with one magnitude that cannot be packed."""
    if isinstance(value, np.uint16):
        bits = int(value)
        sign, e = bits >> 15, (bits >> 7) & 0xFF
        what = ("negative" if sign else "") + (" NaN or infinite" if e == 255 else
                                               f" exponent {e} above {MAX_EXPONENT}" if e > MAX_EXPONENT else "")
        return f"bf16 bits 0x{bits:04X} ({what.strip() or 'sign bit set'})"
    v = float(value)
    if np.isnan(v):
        return "nan"
    if np.signbit(v):
        return f"{v!r} (negative)"
    if np.isinf(v):
        return "inf"
    return f"{v!r} (2**17 or more after rounding to bf16)"


# --------------------------------------------------------------------------------------------------
# the public functions
# --------------------------------------------------------------------------------------------------
@constraints(magnitude="array2d", mask_i="array2d", mask_j="array2d", sign_i="array2d", sign_j="array2d",
             underflow="option", return_clamped="bool", workers="workers")
def pack_bf16(magnitude: ArrayLike, mask_i: ArrayLike, mask_j: ArrayLike, sign_i: ArrayLike, sign_j: ArrayLike, *,
              underflow: str = "saturate", return_clamped: bool = False,
              workers: int = 1) -> np.ndarray | tuple[np.ndarray, int]:
    r"""Pack a merged expert pair into bf16 words: shared magnitude, both masks and both signs in 16 bits.

    The magnitude is stored as bf16 with its exponent e in 5 bits (e - 112); the freed bits 15..12 hold
    the signs and masks of the two experts (Zhao et al. [1]_, numtk's layout in Notes). A pair then takes the
    memory of one bf16 expert, and :func:`packed_matvec` runs either expert from the words.

    Parameters
    ----------
    magnitude : array_like of float32, float64 or uint16, any shape
        The shared magnitudes :math:`W_m \ge 0`: floats are rounded to bf16 (to nearest, ties to even; a
        float64 is rounded once, directly), uint16 is taken as bf16 bits as they are. Every entry must be
        non-negative (no sign bit: -0.0 is refused too), finite and below :math:`2^{17}` after rounding.
    mask_i, mask_j : array_like of bool or int, same shape
        Where expert i (j) keeps the position (``puzzle_merge``'s ``mask_i``, ``mask_j``). Integers must be 0
        or 1.
    sign_i, sign_j : array_like of bool or int, same shape
        The experts' sign bits (True / 1 for negative weights, ``numpy.signbit``).
    underflow : {'saturate', 'exponent', 'zero'}, default 'saturate'
        How magnitudes below :math:`2^{-15}` (exponent below 112, zeros included) are stored (Notes).
    return_clamped : bool, default False
        Also return the number of magnitudes below :math:`2^{-15}`.
    workers : int, default 1
        Compiled threads (-1: every core). The words do not depend on it.

    Returns
    -------
    packed : ndarray of uint16
        The words, C-contiguous, of the shape of ``magnitude``.
    n_clamped : int
        Only with ``return_clamped``: the magnitudes below :math:`2^{-15}`, stored by the ``underflow`` rule.

    Raises
    ------
    ValueError
        If a magnitude is negative, NaN, infinite or :math:`\ge 2^{17}` after rounding (the message gives the
        count and the first one), if the shapes differ, if an integer mask or sign is not 0 or 1, or if
        ``underflow`` is unknown.
    TypeError
        If an array has a dtype it cannot hold (magnitudes: float or uint16; masks and signs: bool or
        integer).

    See Also
    --------
    unpack_bf16 : the inverse.
    packed_matvec : the product of either expert with vectors, from the words.

    Notes
    -----
    A bf16 word has the sign in bit 15, the exponent e (bias 127) in bits 14..7 and 7 mantissa bits. A
    packed word keeps the mantissa, stores e - 112 in bits 11..7 (e in [112, 143]: magnitudes in
    :math:`[2^{-15}, 2^{17})`, at most :math:`(2 - 2^{-7})\,2^{16} = 130560`) and uses the rest for the pair:

    ====  ====  ====  ====  =======  ========
     15    14    13    12   11..7    6..0
    ====  ====  ====  ====  =======  ========
    S_i   S_j   M_i   M_j   e - 112  mantissa
    ====  ====  ====  ====  =======  ========

    Expert pos (0 for i, 1 for j) decodes as ``bits = sign << 15 | ((w & 0x0F80) + (112 << 7)) | (w & 0x7F)``
    with ``sign = (w >> (15 - pos)) & 1``, and 0 where ``(w >> (13 - pos)) & 1`` is clear.

    Rounding a float32 u to bf16 is ``(u + 0x7FFF + ((u >> 16) & 1)) >> 16``, as ``ml_dtypes.bfloat16`` and
    torch's ``.to(torch.bfloat16)`` cast. A float64 is rounded once, directly, as ``ml_dtypes`` 0.7 does;
    torch and earlier ``ml_dtypes`` cast a float64 through float32, which differs in the last bit on rare
    double-rounding ties (:math:`1 + 2^{-8} + 2^{-30}` gives 0x3F81 here, 0x3F80 through float32).

    Exponents below 112 cannot be stored; the paper clamps the exponent to 112 and leaves the mantissa
    unspecified, so ``underflow`` says what happens (a is the rounded magnitude):

    * ``'saturate'``: store exactly :math:`2^{-15}`; error :math:`\le 2^{-15}`.
    * ``'exponent'``: exponent field 0 and the mantissa kept (the literal exponent clamp): a value in
      :math:`[2^{-15}, 2^{-14})`; error :math:`< 2^{-14}`.
    * ``'zero'``: where :math:`a < 2^{-16}` both masks are cleared, so both experts decode to exactly 0
      (exact for pruned zeros; the masks change); the others saturate. Error :math:`\le 2^{-16}`.

    Merged weights of trained experts rarely fall below :math:`2^{-15}` (about 3 in a million merged
    magnitudes for Gaussian experts of standard deviation 0.02); the clamped count says how many did.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models
       via Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import pack_bf16, unpack_bf16
    >>> magnitude = np.array([[0.5, 0.25], [1.5, 0.0]], dtype=np.float32)
    >>> mask_i = np.array([[1, 1], [0, 1]], dtype=bool)
    >>> mask_j = np.array([[1, 0], [1, 1]], dtype=bool)
    >>> sign_i = np.array([[0, 1], [0, 0]], dtype=bool)
    >>> sign_j = np.array([[1, 0], [0, 1]], dtype=bool)
    >>> packed, n_clamped = pack_bf16(magnitude, mask_i, mask_j, sign_i, sign_j, return_clamped=True)
    >>> [hex(w) for w in packed.ravel()], n_clamped
    (['0x7700', '0xa680', '0x17c0', '0x7000'], 1)

    Expert i is ``sign_i * mask_i * magnitude``; the zero was stored as :math:`2^{-15}`:

    >>> unpack_bf16(packed, 0, as_float=True)
    array([[ 5.0000000e-01, -2.5000000e-01],
           [ 0.0000000e+00,  3.0517578e-05]], dtype=float32)
    """
    mode = UNDERFLOW_MODES.index(check_option(underflow, "underflow", UNDERFLOW_MODES))
    return_clamped = check_bool(return_clamped, "return_clamped")
    _threads(workers, 0, 1)  # validated before the data
    mag = _magnitude(magnitude)
    threads = _threads(workers, mag.size, BF16_ELEMENTWISE_GRAIN)
    flags = [_flags(v, name, mag.shape) for v, name in ((mask_i, "mask_i"), (mask_j, "mask_j"),
                                                         (sign_i, "sign_i"), (sign_j, "sign_j"))]
    packed, clamped, invalid, first = _moe_ext.bf16_pack(mag, *flags, mode, threads)
    if invalid:
        where = np.unravel_index(first, mag.shape) if mag.ndim else ()
        index = tuple(int(i) for i in where)
        raise ValueError(f"`magnitude` holds {invalid} entr{'y' if invalid == 1 else 'ies'} that cannot be packed "
                         "(a magnitude must be >= 0, finite and below 2**17 after rounding to bf16); the first at "
                         f"index {index}: {_describe(mag.reshape(-1)[first])}")
    return (packed, int(clamped)) if return_clamped else packed


@constraints(packed="array2d", expert="option", as_float="bool", workers="workers")
def unpack_bf16(packed: ArrayLike, expert: int | None = None, *, as_float: bool = False,
                workers: int = 1) -> Result | np.ndarray:
    r"""Take packed bf16 words apart: the shared magnitude, masks and signs, or one expert's weights.

    The inverse of :func:`pack_bf16`: the components come back exactly as they were packed (magnitudes whose
    exponent was in [112, 143]), and an expert's weights are decoded as :func:`packed_matvec` decodes them.

    Parameters
    ----------
    packed : array_like of uint16, any shape
        Words of :func:`pack_bf16` (other integer arrays with values in [0, 65535] are converted).
    expert : {None, 0, 1}, default None
        None: return the components; 0 or 1: return expert i's or j's weights,
        :math:`(-1)^{S} \cdot M \cdot W_m`.
    as_float : bool, default False
        Return float32 values instead of bf16 bits (the magnitude, or the expert's weights).
    workers : int, default 1
        Compiled threads (-1: every core). The output does not depend on it.

    Returns
    -------
    Result or ndarray
        With ``expert=None``, a Result:

        magnitude : ndarray of uint16 (float32 with ``as_float``)
            The shared magnitude as bf16 bits, exponent in [112, 143].
        mask_i, mask_j : ndarray of bool
            The experts' masks.
        sign_i, sign_j : ndarray of bool
            The experts' sign bits.

        With ``expert`` 0 or 1, the expert's weights, of the shape of ``packed``: uint16 bf16 bits (zero
        where the mask is clear), or float32 with ``as_float``.

    Raises
    ------
    ValueError
        If a word is outside [0, 65535] or ``expert`` is not 0 or 1.
    TypeError
        If ``packed`` is not an integer array.

    See Also
    --------
    pack_bf16 : the inverse (``pack_bf16(*unpack_bf16(p)...)`` returns every word unchanged).

    Notes
    -----
    Magnitude bits ``((w & 0x0F80) + 0x3800) | (w & 0x7F)``; ``sign_i``, ``sign_j``, ``mask_i``, ``mask_j``
    are bits 15, 14, 13, 12 of the word. Every 16-bit word is a valid packed word, and packing its parts
    gives it back: the map between words and (magnitude with exponent in [112, 143], four bits) is a
    bijection [1]_.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models
       via Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.

    Examples
    --------
    >>> from numtk.moe import unpack_bf16
    >>> parts = unpack_bf16([0x7700, 0xA680])
    >>> [hex(m) for m in parts.magnitude], parts.mask_i, parts.mask_j, parts.sign_i, parts.sign_j
    (['0x3f00', '0x3e80'], array([ True,  True]), array([ True, False]), array([False,  True]), array([ True, False]))
    >>> unpack_bf16([0x7700, 0xA680], 1, as_float=True)
    array([-0.5,  0. ], dtype=float32)
    """
    expert = _expert(expert, allow_none=True)
    as_float = check_bool(as_float, "as_float")
    _threads(workers, 0, 1)  # validated before the data
    words = _words(packed)
    threads = _threads(workers, words.size, BF16_UNPACK_GRAIN)
    if expert is None:
        magnitude, mask_i, mask_j, sign_i, sign_j = _moe_ext.bf16_unpack(words, threads)
        if as_float:
            magnitude = _moe_ext.bf16_unpack_expert(words, -1, 1, threads)
        return Result(magnitude=magnitude, mask_i=mask_i, mask_j=mask_j, sign_i=sign_i, sign_j=sign_j)
    return _moe_ext.bf16_unpack_expert(words, expert, 1 if as_float else 0, threads)


@constraints(packed="array2d", x=("array1d", "array2d"), expert="option", out=("array1d", "array2d"),
             workers="workers")
def packed_matvec(packed: np.ndarray, x: ArrayLike, expert: int, *, out: np.ndarray | None = None,
                  workers: int = 1) -> np.ndarray:
    r"""Multiply one expert of a packed pair by vectors, decoding the bf16 words on the fly.

    ``y = W_pos x`` for one vector, ``Y = X W_pos^T`` for a batch, with :math:`W_{pos}` expert ``expert`` of
    the words (:func:`unpack_bf16` with ``as_float=True``), never materialised: each word is decoded in
    registers and multiplied at once, so the product reads 2 bytes per weight, as a plain bf16 product does.

    Parameters
    ----------
    packed : ndarray of uint16, shape (d_out, d_in)
        Words of :func:`pack_bf16`, C-contiguous (a view that is not is refused rather than copied: call
        ``numpy.ascontiguousarray`` once).
    x : array_like, shape (d_in,) or (b, d_in)
        One vector or a batch of b vectors (small batches: each row of words is decoded once for every 4
        vectors). Converted to float32; must be finite there.
    expert : {0, 1}
        0 for expert i, 1 for expert j.
    out : ndarray of float32, shape (d_out,) or (b, d_out), optional
        Where to write the product (C-contiguous, not overlapping ``packed`` or ``x``).
    workers : int, default 1
        Compiled threads over the rows (-1: every core). The result is bit-identical for every value.

    Returns
    -------
    ndarray of float32, shape (d_out,) or (b, d_out)
        The product (``out`` when given).

    Raises
    ------
    ValueError
        If ``packed`` is not 2-D or not C-contiguous, the shapes do not match, ``x`` is not finite, or
        ``expert`` is not 0 or 1.
    TypeError
        If ``packed`` is not a uint16 ndarray, ``x`` not numeric, or ``out`` not a float32 ndarray.

    See Also
    --------
    pack_bf16 : builds the words.
    unpack_bf16 : the weights themselves.

    Notes
    -----
    Accumulation is in float32, in an order fixed by d_in alone: 16 partial sums, lane l taking columns
    :math:`c \equiv l \pmod{16}` in increasing order, added pairwise at the end, then the last
    :math:`d_{in} \bmod 16` columns. A row's result therefore does not depend on the thread that computes
    it or on the other vectors of the batch: a batch gives exactly the rows of the single-vector products.
    Each output is within :math:`d_{in} 2^{-23} \sum_c |w_{rc} x_c|` of the exact product of the decoded
    weights. The loop runs an AVX2 + FMA build where the CPU has it (products then enter the sum unrounded).

    The decode of a word is a handful of integer operations on 16-bit lanes, so the product stays bound by
    memory bandwidth like a plain bf16 one (the paper's GPU kernel makes the same point [1]_): at the Mixtral
    expert shapes (14336 x 4096 and 4096 x 14336), with one vector or eight, on one core or two, it took
    0.9 to 1.15 times as long as the same loop over plain bf16 words (``bench/compare.py --moe``).

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models
       via Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import pack_bf16, packed_matvec
    >>> W_i = np.array([[0.5, -0.25, 1.0], [2.0, 0.0, -1.0]], dtype=np.float32)
    >>> W_j = np.array([[-0.5, 0.75, 1.0], [0.5, 0.5, 1.0]], dtype=np.float32)
    >>> magnitude = np.maximum(abs(W_i), abs(W_j))
    >>> packed = pack_bf16(magnitude, abs(W_i) == magnitude, abs(W_j) == magnitude,
    ...                    np.signbit(W_i), np.signbit(W_j))
    >>> x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    >>> packed_matvec(packed, x, 0), packed_matvec(packed, x, 1)
    (array([ 3.5, -1. ], dtype=float32), array([4., 4.], dtype=float32))
    >>> packed_matvec(packed, np.stack([x, -x]), 1)
    array([[ 4.,  4.],
           [-4., -4.]], dtype=float32)
    """
    W = _matrix(packed, "packed")
    expert = _expert(expert, allow_none=False)
    return _matvec(W, x, 1 + expert, out, workers)


def _bf16_matvec(bits: np.ndarray, x: ArrayLike, *, out: np.ndarray | None = None, workers: int = 1,
                 isa: int = 1) -> np.ndarray:
    """Plain bf16 mat-vec (benchmark only): :func:`packed_matvec`'s loop and checks over bf16 words ``bits``
    (d_out, d_in), without the decode. ``isa=0`` runs the baseline build instead of the AVX2 + FMA one."""
    return _matvec(_matrix(bits, "bits"), x, 0, out, workers, isa)


def _round_bf16(x: ArrayLike, *, workers: int = 1) -> np.ndarray:
    """float32 or float64 -> uint16 bf16 bits, rounded once to nearest even (NaN -> 0x7FC0 with its sign);
    other real dtypes are converted to float64 first (exactly, for integers below 2**53)."""
    arr = as_array(x, "x", kinds="biuf")
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    return _moe_ext.bf16_round(_c(arr), _threads(workers, arr.size, BF16_ELEMENTWISE_GRAIN))
