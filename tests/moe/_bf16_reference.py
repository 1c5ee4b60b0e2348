"""NumPy transcription of the bf16 packing of PuzzleMoE pairs (spec: docs of numtk.moe.pack_bf16), written from the
formulas, independent of the compiled kernels: the oracle of tests/moe/test_bf16.py and the NumPy reference of
the benchmarks (bench/benchmarks/_moe.py).

Everything works on uint32 copies of the 16-bit words, formula by formula, as one would write it in NumPy.
"""

from __future__ import annotations

import numpy as np

UNDERFLOW_MODES = ("saturate", "exponent", "zero")


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest, ties to even: (u + 0x7FFF + ((u >> 16) & 1)) >> 16 for finite u;
    NaN -> 0x7FC0 with its sign."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = np.where(nan, ((u >> 16) & 0x8000).astype(np.uint32) | 0x7FC0, r)
    return r.astype(np.uint16)


def round_bf16_nearest(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bits by comparison: of the two bf16 values around |x| (its truncation to bf16 and the
    next one up), the nearer, ties to the even one. A different route from the bit formula: the distances are
    exact float64 differences (Sterbenz's lemma for normal bf16 values; multiples of x's quantum below
    2^-126). NaN is not handled."""
    x = np.asarray(x, dtype=np.float64)
    sign = np.signbit(x).astype(np.int64) << 15
    a = np.abs(x)
    bits = a.view(np.uint64)
    normal = a >= 2.0 ** -126
    big = a >= 2.0 ** 128  # beyond every finite bf16 and its rounding boundary
    E = ((bits >> 52) & 0x7FF).astype(np.int64)
    # normal range: truncation clears the low 45 fraction bits; bf16 bits (E - 896, 7 bits); ulp 2^(E-1023-7)
    lo_n = (bits & ~np.uint64((1 << 45) - 1)).view(np.float64)
    bits_n = ((E - 896) << 7) | ((bits >> 45) & 0x7F).astype(np.int64)
    ulp_n = np.ldexp(1.0, np.clip(E - 1023 - 7, -1100, 1000).astype(np.int64))
    # below 2^-126: multiples of 2^-133
    sub = np.where(normal, 0.0, a)
    k = np.floor(np.ldexp(sub, 133))
    lo = np.where(normal, lo_n, np.ldexp(k, -133))
    lo_bits = np.where(normal, bits_n, k.astype(np.int64))
    ulp = np.where(normal, ulp_n, 2.0 ** -133)
    with np.errstate(over="ignore", invalid="ignore"):
        d_lo, d_hi = a - lo, (lo + ulp) - a
    up = (d_hi < d_lo) | ((d_hi == d_lo) & ((lo_bits & 1) == 1))
    out = np.where(big, 0x7F80, lo_bits + up)
    return (out | sign).astype(np.uint16)


def decode(words: np.ndarray, pos: int) -> np.ndarray:
    """bf16 bits of expert ``pos`` (0 = i, 1 = j): the spec's decode, literally.

    mask = (w >> (13 - pos)) & 1; sign = (w >> (15 - pos)) & 1;
    bits = (sign << 15) | ((w & 0x0F80) + (112 << 7)) | (w & 0x007F); result = mask ? bits : 0.
    """
    w = np.asarray(words).astype(np.uint32)
    mask = (w >> (13 - pos)) & 1
    sign = (w >> (15 - pos)) & 1
    bits = (sign << 15) | ((w & 0x0F80) + (112 << 7)) | (w & 0x007F)
    return np.where(mask == 1, bits, 0).astype(np.uint16)


def to_float(bits: np.ndarray) -> np.ndarray:
    """bf16 bits -> float32 values (exact)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def unpack(words: np.ndarray) -> tuple[np.ndarray, ...]:
    """(magnitude bits, mask_i, mask_j, sign_i, sign_j) of packed words."""
    w = np.asarray(words).astype(np.uint32)
    magnitude = (((w & 0x0F80) + 0x3800) | (w & 0x7F)).astype(np.uint16)
    return (magnitude, ((w >> 13) & 1).astype(bool), ((w >> 12) & 1).astype(bool), ((w >> 15) & 1).astype(bool),
            ((w >> 14) & 1).astype(bool))


def pack(magnitude_bits: np.ndarray, mask_i, mask_j, sign_i, sign_j, underflow: str = "saturate"):
    """Packed words of bf16 magnitudes (bits), with the spec's validation and clamping rules.

    Returns (words, n_clamped, invalid) where ``invalid`` marks the entries pack_bf16 refuses (sign bit set,
    exponent 255 or above 143); their words are meaningless.
    """
    m = np.asarray(magnitude_bits).astype(np.uint32)
    e = (m >> 7) & 0xFF
    mant = m & 0x7F
    invalid = ((m >> 15) == 1) | (e > 143)
    under = e < 112
    field = np.where(under, 0, ((e - 112) & 0x1F) << 7 | mant)
    if underflow == "exponent":
        field = np.where(under, mant, field)
    mi = np.asarray(mask_i).astype(bool)
    mj = np.asarray(mask_j).astype(bool)
    if underflow == "zero":  # below 2^-16 (exponent below 111): both masks cleared
        keep = e >= 111
        mi, mj = mi & keep, mj & keep
    words = ((np.asarray(sign_i).astype(np.uint32) << 15) | (np.asarray(sign_j).astype(np.uint32) << 14)
             | (mi.astype(np.uint32) << 13) | (mj.astype(np.uint32) << 12) | field)
    return words.astype(np.uint16), int(np.count_nonzero(under)), invalid


def matvec64(words: np.ndarray, x: np.ndarray, pos: int) -> tuple[np.ndarray, np.ndarray]:
    """(x @ W^T in float64, sum_c |w_rc x_c| in float64) for expert ``pos`` of the words; x (d_in,) or (b, d_in)."""
    W = to_float(decode(words, pos)).astype(np.float64)
    x64 = np.asarray(x, dtype=np.float64)
    return x64 @ W.T, np.abs(x64) @ np.abs(W).T
