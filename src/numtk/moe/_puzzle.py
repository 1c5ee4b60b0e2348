"""PuzzleMoE: element-wise merging of expert pairs with dual masks, its baselines and the layer-level helper.

:func:`puzzle_merge` merges one pair of experts (or a stacked batch of pairs) into one shared magnitude, two
masks and two sign maps (Zhao, Wang and Zhang, ICML 2026); :func:`merge_experts` pairs the experts of a layer
and packs every pair into bf16 words with :func:`~numtk.moe.pack_bf16`. The baselines are plain averaging,
TIES-merging and DARE (:func:`average_merge`, :func:`ties_merge`, :func:`dare_merge`), and
:func:`reconstruction_error` measures what a merge loses.

The merge is NumPy: a single streaming pass over the pair, blocked so that its temporaries stay in cache. All
arithmetic of the merge is float32, as the paper's, and the shared magnitude is rounded to bf16 by
round-to-nearest-even, so that the magnitudes returned are exactly those the packed words store.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from numtk._lib import Result, n_threads, normalize_rng
from numtk._lib._constraints import constraints
from numtk._lib._swiglu import EXPERT_KEYS, expert_matrices
from numtk._lib._validation import as_array, check_option, check_real, check_size

__all__ = ["puzzle_merge", "merge_experts", "average_merge", "ties_merge", "dare_merge",
           "reconstruction_error", "decode_bf16"]

#: elements of one block of the merge (its eight temporaries take about 2 MiB)
_BLOCK = 1 << 16
#: inputs are refused from this magnitude on: below it, a + b and the bf16 rounding of (a + b) / 2 stay finite
_MAX_ABS = 2.0**127
_GATED_KEYS = EXPERT_KEYS
_PAIRINGS = ("auto", "greedy", "sequential")
_UNDERFLOW = ("saturate", "exponent", "zero")


# --------------------------------------------------------------------------------------------------
# bf16 helpers (the merge rounds to bf16 inline, block by block; numtk.moe._bf16 has the compiled rounding)
# --------------------------------------------------------------------------------------------------
def decode_bf16(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) as float32 values: ``bits << 16`` read as float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# --------------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------------
def _weights(W: Any, name: str, *, min_ndim: int = 2, bounded: bool = True) -> np.ndarray:
    """An expert matrix (stack): float values or uint16 bf16 bits, finite, nonempty, and with ``bounded`` (the
    merge) |w| < 2**127."""
    arr = as_array(W, name, kinds="buif")
    if arr.dtype.kind in "bi" or (arr.dtype.kind == "u" and arr.dtype != np.uint16):
        raise TypeError(f"`{name}` must hold float values (float32 or float64) or bf16 bit patterns (uint16); "
                        f"got dtype {arr.dtype}")
    if arr.ndim < min_ndim:
        raise ValueError(f"`{name}` must have at least {min_ndim} dimensions (..., d_out, d_in); got an array "
                         f"of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {arr.shape}")
    if arr.dtype == np.uint16:
        top = int(np.max(arr & np.uint16(0x7FFF)))
        if top >= 0x7F80:
            raise ValueError(f"`{name}` holds bf16 NaN or infinity bit patterns")
        if bounded and top >= 0x7F00:
            raise ValueError(f"`{name}` holds bf16 values of magnitude 2**127 or more; PuzzleMoE needs |w| < 2**127")
        return arr
    if arr.dtype.itemsize > 8:  # long double: float64 carries every value a merge can use
        with np.errstate(over="ignore"):
            arr = arr.astype(np.float64)
    with np.errstate(invalid="ignore"):
        hi, lo = float(np.max(arr)), float(np.min(arr))
    if not (np.isfinite(hi) and np.isfinite(lo)):
        raise ValueError(f"`{name}` must be finite")
    if bounded and max(hi, -lo) >= _MAX_ABS:
        raise ValueError(f"`{name}` must hold magnitudes below 2**127 (about 1.7e38); got {max(hi, -lo):.3g}")
    return arr


def _as_f32(block: np.ndarray) -> np.ndarray:
    if block.dtype == np.uint16:
        return decode_bf16(block)
    return block.astype(np.float32, copy=False)


def _norm_pair(activation_norms: Any, lead: tuple[int, ...], d_in: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(n_i, n_j), float32, each broadcastable to lead + (1, d_in); None when not given."""
    if activation_norms is None:
        return None
    if not (isinstance(activation_norms, (tuple, list))
            or (isinstance(activation_norms, np.ndarray) and activation_norms.ndim >= 1)):
        raise TypeError("`activation_norms` must be None or a pair (n_i, n_j) of arrays; got "
                        f"{type(activation_norms).__name__}")
    count = len(activation_norms)
    if count != 2:
        raise ValueError(f"`activation_norms` must be a pair (n_i, n_j); got {count} entries")
    target = lead + (1, d_in)
    out = []
    for k, n in zip("ij", activation_norms):
        arr = as_array(n, "activation_norms", kinds="iuf")
        if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
            arr = arr.astype(np.float64)
        if arr.ndim == len(lead) + 1 and arr.ndim >= 2 and arr.shape[:-1] == lead:
            arr = arr[..., None, :]  # (..., d_in) with the batch dimensions: one row per pair
        try:
            ok = np.broadcast_shapes(arr.shape, target) == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"`activation_norms` entry n_{k} must be broadcastable to {target} (one norm per input "
                             f"channel, i.e. per column); got shape {arr.shape}")
        if arr.size and not (np.isfinite(arr).all() and arr.min() >= 0):
            raise ValueError(f"`activation_norms` entry n_{k} must be finite and >= 0")
        if arr.size and arr.max() > np.finfo(np.float32).max:
            raise ValueError(f"`activation_norms` entry n_{k} must fit float32 (below 3.4e38)")
        out.append(np.broadcast_to(arr.astype(np.float32), target).reshape(-1, d_in))
    return out[0], out[1]


def _tau32(tau: float) -> np.float32:
    """The largest float32 <= tau: ``delta32 <= _tau32(tau)`` is ``delta32 <= tau`` exactly."""
    t = np.float32(tau)
    if float(t) > tau:
        t = np.nextafter(t, np.float32(-1.0))
    return t


# --------------------------------------------------------------------------------------------------
# the merge
# --------------------------------------------------------------------------------------------------
def _merge_rows(Wi: np.ndarray, Wj: np.ndarray, norms, tau: np.float32, d_out: int, out: dict) -> None:
    """The merge of the rows of (R, d_in) arrays into the (R, d_in) arrays of ``out``, block by block.

    Selections are done on the float32 bit patterns (``x ^ ((x ^ y) & -mask)``) rather than with ``np.where``,
    whose data-dependent branches make it about 30 times slower on random masks.
    """
    R, d_in = Wi.shape
    rows = max(1, _BLOCK // d_in)
    mag, sim_o, mi_o, mj_o = out["magnitude"], out["similarity_mask"], out["mask_i"], out["mask_j"]
    si_o, sj_o, ri_o, rj_o = out["sign_i"], out["sign_j"], out["rec_i"], out["rec_j"]
    abs_bits, sign_bit, low_half = np.uint32(0x7FFFFFFF), np.uint32(0x80000000), np.uint32(0xFFFF0000)
    shape = (min(rows, R), d_in)
    a, b, s, d = (np.empty(shape, np.float32) for _ in range(4))
    sel, t = (np.empty(shape, np.uint32) for _ in range(2))
    sal, tmp = (np.empty(shape, bool) for _ in range(2))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for r0 in range(0, R, rows):
            r1 = min(R, r0 + rows)
            n = r1 - r0
            a_, b_, s_, d_, sel_, t_, sal_, tmp_ = (x[:n] for x in (a, b, s, d, sel, t, sal, tmp))
            wi = _as_f32(Wi[r0:r1])
            wj = _as_f32(Wj[r0:r1])
            wib, wjb = wi.view(np.uint32), wj.view(np.uint32)
            ab, bb = a_.view(np.uint32), b_.view(np.uint32)
            np.bitwise_and(wib, abs_bits, out=ab)                     # a = |W_i|, b = |W_j|
            np.bitwise_and(wjb, abs_bits, out=bb)
            np.add(a_, b_, out=s_)
            np.subtract(a_, b_, out=d_)
            db = d_.view(np.uint32)
            db &= abs_bits
            np.divide(d_, s_, out=d_)                                  # Δ; NaN (0/0) where a = b = 0 ...
            np.greater(d_, tau, out=tmp_)
            sim = np.logical_not(tmp_, out=sim_o[r0:r1])               # ... which counts as similar
            if norms is None:
                np.greater_equal(a_, b_, out=sal_)
            else:
                if norms[0].shape[0] == 1:
                    ni, nj = norms[0], norms[1]
                else:  # one norm row per pair: the pair of each row
                    idx = np.arange(r0, r1) // d_out
                    ni, nj = norms[0][idx], norms[1][idx]
                # in float64: a float32 product can overflow or underflow to a tie
                np.greater_equal(a_ * ni.astype(np.float64), b_ * nj.astype(np.float64), out=sal_)
            # sel = sal ? a : b, then m = sim ? (a + b) / 2 : sel, on the bits
            np.copyto(t_, sal_, casting="unsafe")
            np.negative(t_, out=t_)
            np.bitwise_xor(ab, bb, out=sel_)
            sel_ &= t_
            sel_ ^= bb
            np.multiply(s_, np.float32(0.5), out=s_)
            m = mag[r0:r1].view(np.uint32)
            np.bitwise_xor(s_.view(np.uint32), sel_, out=m)
            np.copyto(t_, sim, casting="unsafe")
            np.negative(t_, out=t_)
            m &= t_
            m ^= sel_
            np.right_shift(m, 16, out=t_)                              # bf16: round to nearest, ties to even
            t_ &= np.uint32(1)
            m += np.uint32(0x7FFF)
            m += t_
            m &= low_half
            np.signbit(wi, out=si_o[r0:r1])
            np.signbit(wj, out=sj_o[r0:r1])
            mi = np.logical_or(sal_, sim, out=mi_o[r0:r1])
            np.logical_not(sal_, out=sal_)
            mj = np.logical_or(sal_, sim, out=mj_o[r0:r1])
            for rec, wb, keep in ((ri_o[r0:r1].view(np.uint32), wib, mi), (rj_o[r0:r1].view(np.uint32), wjb, mj)):
                np.bitwise_and(wb, sign_bit, out=rec)                  # own sign | magnitude, +0 where masked
                rec |= m
                np.copyto(t_, keep, casting="unsafe")
                np.negative(t_, out=t_)
                rec &= t_


@constraints(W_i="array2d", W_j="array2d", activation_norms="array2d", similarity_threshold="prob")
def puzzle_merge(W_i: ArrayLike, W_j: ArrayLike, activation_norms: Any = None,
                 similarity_threshold: float = 0.4) -> Result:
    r"""Merge two experts element by element into one shared magnitude, two masks and two sign maps (PuzzleMoE).

    Parameters
    ----------
    W_i, W_j : array_like, shape (..., d_out, d_in)
        The weights of the two experts, float (computed in float32) or uint16 bf16 bit patterns (decoded). The
        two may differ in dtype but not in shape; leading dimensions are a batch of pairs merged independently.
        Finite, with magnitudes below 2**127.
    activation_norms : pair of array_like, optional
        ``(n_i, n_j)``: the L2 norm, over the calibration tokens routed to each expert, of every *input*
        channel (the columns of a (d_out, d_in) matrix, Wanda's score), each broadcastable to
        (..., 1, d_in); an array of shape (..., d_in) with the batch dimensions gives one row per pair.
        Finite and >= 0. None (default): n_i = n_j = 1, the saliency is the magnitude.
    similarity_threshold : float, optional
        τ in [0, 1] (default 0.4, the paper's): positions whose relative magnitude difference is at most τ
        share the average magnitude.

    Returns
    -------
    Result
        magnitude : ndarray of float32, shape (..., d_out, d_in)
            The shared magnitude W_m, rounded to bf16 values (round-to-nearest-even).
        mask_i, mask_j : ndarray of bool
            The positions each expert keeps (M_i, M_j).
        sign_i, sign_j : ndarray of bool
            The sign bits of W_i and W_j (True for negative values, -0.0 included).
        similarity_mask : ndarray of bool
            M_sim: the positions where the two magnitudes are similar (Δ <= τ).
        reconstruction : tuple of two ndarrays of float32
            Ŵ_i and Ŵ_j, what the merged pair stands for (0.0 where an expert's mask is off).
        density : ndarray of float64, shape (..., 2)
            The fraction of positions kept by each expert of each pair (mask means).
        similarity : float or ndarray of float64, shape (...)
            The fraction of shared positions (the mean of ``similarity_mask``) of each pair.
        similarity_threshold : float
            τ as used.

    Raises
    ------
    ValueError
        Shapes that differ or have fewer than two dimensions, empty experts, non-finite weights or magnitudes of
        2**127 or more, norms that do not broadcast, are negative or not finite, τ outside [0, 1].
    TypeError
        Integer (other than uint16), boolean or non-numeric weights; ``activation_norms`` not a pair.

    See Also
    --------
    merge_experts : pair the experts of a layer, merge and pack them.
    pack_bf16 : store magnitude, masks and signs in one bf16 word per position.

    Notes
    -----
    With :math:`a = |W_i|`, :math:`b = |W_j|` element-wise:

    1. Similarity: :math:`\Delta = |a - b| / (a + b)` (:math:`\Delta = 0` where :math:`a + b = 0`),
       :math:`M_{sim} = [\Delta \le \tau]`.
    2. Saliency: :math:`A_i = a \odot n_i`, :math:`A_j = b \odot n_j` (norms broadcast over the rows),
       :math:`M_i^{sal} = [A_i \ge A_j]`, :math:`M_j^{sal} = 1 - M_i^{sal}`: ties go to expert i, so the merge is
       not symmetric in i and j on inputs with equal saliencies.
    3. Shared magnitude: :math:`W_m = M_{sim} (a + b)/2 + (1 - M_{sim})(M_i^{sal} a + M_j^{sal} b)`, rounded to
       bf16.
    4. Masks :math:`M_i = M_i^{sal} \lor M_{sim}`, :math:`M_j = M_j^{sal} \lor M_{sim}`; signs
       :math:`S = \mathrm{signbit}(W)`.
    5. Reconstruction :math:`\hat W_i = (-1)^{S_i} M_i W_m`, likewise :math:`\hat W_j`.

    Hence :math:`M_i \lor M_j` holds everywhere, :math:`M_i \land M_j = M_{sim}`, and where :math:`M_{sim} = 0`
    the expert that keeps a position gets its own weight back, rounded to bf16. τ = 0 shares only equal
    magnitudes (pure saliency selection); τ = 1 shares every position (the average magnitude with each
    expert's own signs). Δ, the saliencies and W_m are computed in float32; Δ is compared with τ exactly.

    For two experts of i.i.d. Gaussian weights without norms, :math:`P(M_{sim}) = 1 - \tfrac{4}{\pi}
    \arctan\tfrac{1 - \tau}{1 + \tau}` (0.4845 at τ = 0.4), each mask keeps :math:`(1 + P(M_{sim}))/2` of the
    positions, and the relative reconstruction error is about 0.223 at τ = 0.4 against
    :math:`\sqrt{1/2 - 1/\pi} = 0.426` at τ → 0 and τ = 1 and :math:`\sqrt{1/2} = 0.707` for plain averaging.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models via
       Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.
    .. [2] M. Sun, Z. Liu, A. Bair, J. Z. Kolter, "A Simple and Effective Pruning Approach for Large Language
       Models" (Wanda), ICLR 2024, arXiv:2306.11695.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import puzzle_merge
    >>> W_i = np.array([[0.5, -0.25], [1.0, 0.0]], dtype=np.float32)
    >>> W_j = np.array([[0.4375, 0.75], [-0.125, 0.0]], dtype=np.float32)
    >>> res = puzzle_merge(W_i, W_j)
    >>> res.similarity_mask          # |0.5 - 0.4375| / 0.9375 <= 0.4; two zeros count as similar
    array([[ True, False],
           [False,  True]])
    >>> res.magnitude                # the average where similar, else the larger magnitude
    array([[0.46875, 0.75   ],
           [1.     , 0.     ]], dtype=float32)
    >>> res.mask_i                   # expert i keeps the shared positions and the one it wins
    array([[ True, False],
           [ True,  True]])
    >>> res.reconstruction[1]        # expert j rebuilt: its own signs, 0 where it lost
    array([[0.46875, 0.75   ],
           [0.     , 0.     ]], dtype=float32)
    >>> res.density, res.similarity
    (array([0.75, 0.75]), 0.5)
    """
    Wi = _weights(W_i, "W_i")
    Wj = _weights(W_j, "W_j")
    if Wi.shape != Wj.shape:
        raise ValueError(f"`W_i` and `W_j` must have the same shape; got {Wi.shape} and {Wj.shape}")
    tau = check_real(similarity_threshold, "similarity_threshold", low=0.0, high=1.0)
    *lead, d_out, d_in = Wi.shape
    lead = tuple(lead)
    norms = _norm_pair(activation_norms, lead, d_in)
    check_size(Wi.size, 24, "W_i")  # magnitude and reconstructions (12 bytes), masks and signs, temporaries
    R = Wi.size // d_in
    out = {k: np.empty((R, d_in), dtype=np.float32) for k in ("magnitude", "rec_i", "rec_j")}
    out.update({k: np.empty((R, d_in), dtype=bool)
                for k in ("similarity_mask", "mask_i", "mask_j", "sign_i", "sign_j")})
    _merge_rows(Wi.reshape(R, d_in), Wj.reshape(R, d_in), norms, _tau32(tau), d_out, out)
    shape = Wi.shape
    per_pair = (int(np.prod(lead, dtype=np.int64)), d_out * d_in)
    counts = [np.count_nonzero(out[k].reshape(per_pair), axis=1) for k in ("mask_i", "mask_j", "similarity_mask")]
    density = (np.stack(counts[:2], axis=-1) / per_pair[1]).reshape(lead + (2,))
    similarity = (counts[2] / per_pair[1]).reshape(lead)
    return Result(magnitude=out["magnitude"].reshape(shape),
                  mask_i=out["mask_i"].reshape(shape), mask_j=out["mask_j"].reshape(shape),
                  sign_i=out["sign_i"].reshape(shape), sign_j=out["sign_j"].reshape(shape),
                  similarity_mask=out["similarity_mask"].reshape(shape),
                  reconstruction=(out["rec_i"].reshape(shape), out["rec_j"].reshape(shape)),
                  density=density, similarity=float(similarity) if not lead else similarity,
                  similarity_threshold=tau)


# --------------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------------
def _stack(weights_list: Any, name: str = "weights_list") -> np.ndarray:
    """K experts of one shape as a float64 array (K, ...): a sequence of arrays or an array with K first."""
    if isinstance(weights_list, (str, bytes, Mapping)):
        raise TypeError(f"`{name}` must be a sequence of arrays or an array (K, ...); got "
                        f"{type(weights_list).__name__}")
    if isinstance(weights_list, (list, tuple)):
        if not weights_list:
            raise ValueError(f"`{name}` must hold at least one expert")
        mats = [_weights(w, f"{name}[{k}]", min_ndim=1, bounded=False) for k, w in enumerate(weights_list)]
        shapes = {m.shape for m in mats}
        if len(shapes) > 1:
            raise ValueError(f"`{name}` must hold arrays of one shape; got shapes {sorted(shapes)}")
    else:
        mats = [_weights(weights_list, name, min_ndim=2, bounded=False)]
        if mats[0].dtype == np.uint16:
            return decode_bf16(mats[0]).astype(np.float64)
        return mats[0].astype(np.float64)
    return np.stack([decode_bf16(m) if m.dtype == np.uint16 else m for m in mats]).astype(np.float64, copy=False)


def _merge_weights(weights: Any, K: int, *, nonneg: bool = False) -> np.ndarray | None:
    if weights is None:
        return None
    w = as_array(weights, "weights", kinds="iuf")
    if w.ndim != 1 or w.shape[0] != K:
        raise ValueError(f"`weights` must have one entry per expert of `weights_list`, shape ({K},); got shape "
                         f"{w.shape}")
    with np.errstate(over="ignore"):
        w = w.astype(np.float64)
    if not np.isfinite(w).all():
        raise ValueError("`weights` must be finite")
    if nonneg:
        if w.min() < 0 or w.max() <= 0:
            raise ValueError("`weights` must be >= 0 with a positive sum")
        w = w / w.max()  # the sum cannot overflow
    return w


def _base(base: Any, W: np.ndarray) -> np.ndarray:
    if isinstance(base, str):
        check_option(base, "base", ("mean", "zero"))
        return W.mean(axis=0) if base == "mean" else np.zeros(W.shape[1:])
    if base is None or isinstance(base, (numbers.Number, np.generic)) or (isinstance(base, np.ndarray)
                                                                         and base.ndim == 0):
        raise TypeError(f"`base` must be 'mean', 'zero' or an array of the experts' shape {W.shape[1:]}; got "
                        f"{type(base).__name__}")
    arr = _weights(base, "base", min_ndim=1, bounded=False)
    if arr.shape != W.shape[1:]:
        raise ValueError(f"`base` must have the experts' shape {W.shape[1:]}; got {arr.shape}")
    return (decode_bf16(arr) if arr.dtype == np.uint16 else arr).astype(np.float64)


def _density(density: Any, *, open_low: bool) -> float:
    return check_real(density, "density", low=0.0, high=1.0, low_open=open_low)


def _trim(tau: np.ndarray, density: float) -> np.ndarray:
    """Each tau_k keeps its floor(density * n) largest magnitudes (ties: the first in C order), zero elsewhere."""
    if density >= 1.0:
        return tau
    K = tau.shape[0]
    flat = tau.reshape(K, -1)
    n = flat.shape[1]
    k = int(density * n)
    out = np.zeros_like(flat)
    if k == 0:
        return out.reshape(tau.shape)
    for row, dst in zip(flat, out):
        mag = np.abs(row)
        t = np.partition(mag, n - k)[n - k]                      # the k-th largest magnitude
        keep = mag > t
        need = k - int(np.count_nonzero(keep))
        if need > 0:
            keep[np.flatnonzero(mag == t)[:need]] = True
        dst[keep] = row[keep]
    return out.reshape(tau.shape)


def _elect(tau: np.ndarray, majority_sign: str) -> np.ndarray:
    """Where each tau_k agrees with the elected sign (+1 when the sum is >= 0); zeros never agree."""
    sgn = np.sign(tau)
    total = tau.sum(axis=0) if majority_sign == "total" else sgn.sum(axis=0)
    elected = np.where(total >= 0, 1.0, -1.0)
    return sgn == elected


def _disjoint(tau: np.ndarray, agree: np.ndarray, w: np.ndarray) -> np.ndarray:
    wk = w.reshape((-1,) + (1,) * (tau.ndim - 1))
    mixed = (tau * wk * agree).sum(axis=0)
    return mixed / np.maximum(agree.sum(axis=0), 1)


def _finite_result(out: np.ndarray) -> np.ndarray:
    if not np.isfinite(out).all():
        raise ValueError("the merged expert overflows float64: scale down `weights_list`, `base` or `weights`")
    return out


@constraints(weights_list="array2d", weights="array1d")
def average_merge(weights_list: Any, weights: ArrayLike | None = None) -> np.ndarray:
    r"""The weighted average of K experts: :math:`\sum_k w_k W_k / \sum_k w_k`.

    Parameters
    ----------
    weights_list : sequence of array_like or array_like, shape (K, ...)
        The experts, all of one shape (at least 1-D each), float or uint16 bf16 bit patterns (decoded).
    weights : array_like, shape (K,), optional
        Relative weights (e.g. routing frequencies), >= 0 with a positive sum; default uniform.

    Returns
    -------
    ndarray of float64
        The merged expert, of the experts' shape.

    Raises
    ------
    ValueError
        Experts of different shapes, none, not finite; weights of the wrong length, negative or summing to 0.
    TypeError
        Non-numeric input.

    Notes
    -----
    The baseline PuzzleMoE is measured against: two i.i.d. Gaussian experts averaged have relative error
    :math:`\|\bar W - W_i\|_F / \|W_i\|_F = \sqrt{1/2}`, against about 0.22 for :func:`puzzle_merge`.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE", ICML 2026, arXiv:2511.04805.
    .. [2] M. Wortsman et al., "Model soups: averaging weights of multiple fine-tuned models improves accuracy
       without increasing inference time", ICML 2022, arXiv:2203.05482.

    Examples
    --------
    >>> from numtk.moe import average_merge
    >>> average_merge([[1.0, 2.0], [3.0, 6.0]])
    array([2., 4.])
    >>> average_merge([[1.0, 2.0], [3.0, 6.0]], weights=[3, 1])
    array([1.5, 3. ])
    """
    W = _stack(weights_list)
    w = _merge_weights(weights, W.shape[0], nonneg=True)
    with np.errstate(over="ignore", invalid="ignore"):
        out = W.mean(axis=0) if w is None else np.tensordot(w / w.sum(), W, axes=1)
    return _finite_result(out)


@constraints(weights_list="array2d", density="prob", base=("option", "array2d"), majority_sign="option",
             weights="array1d")
def ties_merge(weights_list: Any, *, density: float = 0.5, base: Any = "mean", majority_sign: str = "total",
               weights: ArrayLike | None = None) -> np.ndarray:
    r"""TIES-merging of K experts: trim each task vector, elect a sign per position, average the agreeing ones.

    Parameters
    ----------
    weights_list : sequence of array_like or array_like, shape (K, ...)
        The experts, all of one shape (at least 1-D each), float or uint16 bf16 bit patterns (decoded).
    density : float, optional
        The fraction in [0, 1] of each task vector kept by magnitude (default 0.5); 1 trims nothing.
    base : {'mean', 'zero'} or array_like, optional
        The base the task vectors are taken from: the experts' mean (default; experts share no pretrained
        base), zero (the experts themselves), or an array of the experts' shape.
    majority_sign : {'total', 'frequency'}, optional
        The elected sign of a position is that of the sum of the trimmed task vectors ('total') or of their
        signs ('frequency'); a tie elects +.
    weights : array_like, shape (K,), optional
        Scales of the task vectors in the disjoint mean (default 1 each), as PEFT's ``weights``.

    Returns
    -------
    ndarray of float64
        The merged expert, of the experts' shape.

    Raises
    ------
    ValueError
        Experts of different shapes or not finite, ``density`` outside [0, 1], a ``base`` of the wrong shape,
        ``weights`` of the wrong length.
    TypeError
        Non-numeric input, a scalar ``base``.

    See Also
    --------
    dare_merge : random drop and rescale before a linear or TIES combination.

    Notes
    -----
    With task vectors :math:`\tau_k = W_k - \text{base}`:

    1. Trim: :math:`\tilde\tau_k` keeps the :math:`\lfloor \text{density} \cdot n \rfloor` entries of largest
       magnitude of :math:`\tau_k` (n its size; ties to the first positions in C order) and zeroes the rest.
    2. Elect: :math:`\gamma = \mathrm{sign}(\sum_k \tilde\tau_k)` ('total') or
       :math:`\mathrm{sign}(\sum_k \mathrm{sign}\,\tilde\tau_k)` ('frequency'), + where the sum is 0.
    3. Disjoint mean: :math:`\tau = \sum_k w_k \tilde\tau_k [\mathrm{sign}\,\tilde\tau_k = \gamma] /
       \max(1, \#\{k : \mathrm{sign}\,\tilde\tau_k = \gamma\})`; the result is base + τ.

    These are the semantics of PEFT's ``ties`` (``peft.utils.merge_utils``): the sign is elected on the
    unweighted trimmed vectors and the weights scale the terms of the disjoint mean. For two experts with
    ``base='mean'`` the task vectors are exact opposites up to rounding, so the elected sign is decided by
    floating-point residue (+ where the sum is exactly 0): on the kept positions the result is the larger of
    the two weights on about 57 % of them and the smaller on about 9 % for Gaussian experts, a positive bias of
    a third of a standard deviation. With two experts ``base='zero'`` is the more meaningful choice; state the
    base when comparing.

    References
    ----------
    .. [1] P. Yadav, D. Tam, L. Choshen, C. Raffel, M. Bansal, "TIES-Merging: Resolving Interference When
       Merging Models", NeurIPS 2023, arXiv:2306.01708.
    .. [2] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE", ICML 2026, arXiv:2511.04805 (the baselines).

    Examples
    --------
    >>> from numtk.moe import ties_merge
    >>> ties_merge([[1.0, -2.0, 0.5], [3.0, 1.0, -0.5]], density=1.0, base="zero")
    array([ 2. , -2. ,  0.5])
    """
    W = _stack(weights_list)
    d = _density(density, open_low=False)
    check_option(majority_sign, "majority_sign", ("total", "frequency"))
    w = _merge_weights(weights, W.shape[0])
    b = _base(base, W)
    with np.errstate(over="ignore", invalid="ignore"):
        tau = _trim(W - b, d)
        agree = _elect(tau, majority_sign)
        out = b + _disjoint(tau, agree, np.ones(W.shape[0]) if w is None else w)
    return _finite_result(out)


@constraints(weights_list="array2d", density="prob", base=("option", "array2d"), combine="option",
             majority_sign="option", rng="rng", weights="array1d")
def dare_merge(weights_list: Any, *, density: float = 0.5, base: Any = "mean", combine: str = "linear",
               majority_sign: str = "total", rng: Any = None, weights: ArrayLike | None = None) -> np.ndarray:
    r"""DARE merging of K experts: drop task-vector entries at random, rescale the rest, then combine.

    Parameters
    ----------
    weights_list : sequence of array_like or array_like, shape (K, ...)
        The experts, all of one shape (at least 1-D each), float or uint16 bf16 bit patterns (decoded).
    density : float, optional
        The probability in (0, 1] of keeping an entry (default 0.5); kept entries are divided by it. 1 keeps
        everything and draws nothing.
    base : {'mean', 'zero'} or array_like, optional
        As in :func:`ties_merge` (default the experts' mean).
    combine : {'linear', 'ties'}, optional
        'linear' (PEFT's ``dare_linear``): :math:`\sum_k w_k \tilde\tau_k`, default :math:`w_k = 1/K` (the
        mean); 'ties' (``dare_ties``): TIES's sign election and disjoint mean on the rescaled vectors, default
        :math:`w_k = 1`.
    majority_sign : {'total', 'frequency'}, optional
        The sign election of ``combine='ties'`` (ignored by 'linear').
    rng : None, int or numpy.random.Generator, optional
        The source of the drop masks (keyword-only).
    weights : array_like, shape (K,), optional
        Scales of the task vectors (PEFT's ``weights``); defaults as under ``combine``.

    Returns
    -------
    ndarray of float64
        The merged expert, of the experts' shape.

    Raises
    ------
    ValueError
        Experts of different shapes or not finite, ``density`` outside (0, 1], a ``base`` of the wrong shape,
        ``weights`` of the wrong length, an unknown ``combine`` or ``majority_sign``.
    TypeError
        Non-numeric input, a scalar ``base``, an ``rng`` that is not a seed or Generator.

    See Also
    --------
    ties_merge

    Notes
    -----
    With :math:`\tau_k = W_k - \text{base}`, the kept entries of expert k are the positions where
    ``rng.random(shape) < density`` (drawn for k = 0, 1, ... in turn: a fixed seed gives a fixed set of
    masks), and :math:`\tilde\tau_k = \tau_k m_k / \text{density}`, so that :math:`E[\tilde\tau_k] = \tau_k`.
    The result is base plus the combination. For two experts and ``base='mean'`` the linear combination with
    the default weights picks, position by position, W_i where only i's entry survives, W_j where only j's
    does, and the average elsewhere.

    References
    ----------
    .. [1] L. Yu, B. Yu, H. Yu, F. Huang, Y. Li, "Language Models are Super Mario: Absorbing Abilities from
       Homologous Models as a Free Lunch" (DARE), ICML 2024, arXiv:2311.03099.
    .. [2] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE", ICML 2026, arXiv:2511.04805 (the baselines).

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import dare_merge
    >>> W = [np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])]
    >>> dare_merge(W, density=1.0)                        # nothing dropped: the mean
    array([2., 2., 2.])
    >>> merged = dare_merge(W, density=0.5, rng=0)
    >>> bool(np.all((merged == 1) | (merged == 2) | (merged == 3)))
    True
    """
    W = _stack(weights_list)
    d = _density(density, open_low=True)
    check_option(combine, "combine", ("linear", "ties"))
    check_option(majority_sign, "majority_sign", ("total", "frequency"))
    w = _merge_weights(weights, W.shape[0])
    gen = normalize_rng(rng)
    b = _base(base, W)
    K = W.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        tau = W - b
        if d < 1.0:
            for k in range(K):
                tau[k] = (tau[k] * (gen.random(W.shape[1:]) < d)) / d
        if combine == "linear":
            out = b + np.tensordot(np.full(K, 1.0 / K) if w is None else w, tau, axes=1)
        else:
            out = b + _disjoint(tau, _elect(tau, majority_sign), np.ones(K) if w is None else w)
    return _finite_result(out)


@constraints(W_hat="array2d", W="array2d", X="array2d")
def reconstruction_error(W_hat: ArrayLike, W: ArrayLike, X: ArrayLike | None = None) -> float:
    r"""The relative error of an approximation of a weight matrix, in the weights or in the outputs.

    Parameters
    ----------
    W_hat, W : array_like, same shape (..., d_out, d_in)
        The approximation and the original, float or uint16 bf16 bit patterns (decoded); at least 1-D.
    X : array_like, shape (T, d_in), optional
        Input tokens (rows). When given, the error is that of the layer outputs :math:`X W^T`.

    Returns
    -------
    float
        :math:`\|\hat W - W\|_F / \|W\|_F`, or :math:`\|X \hat W^T - X W^T\|_F / \|X W^T\|_F` with ``X`` (the
        norms taken over every leading dimension at once), computed in float64.

    Raises
    ------
    ValueError
        Different shapes, non-finite values, ``X`` not 2-D or with a column count other than d_in, and a zero
        denominator (the relative error is undefined).
    TypeError
        Non-numeric input.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE", ICML 2026, arXiv:2511.04805.

    Examples
    --------
    >>> import numpy as np
    >>> from numtk.moe import reconstruction_error
    >>> W = np.array([[3.0, 0.0], [0.0, 4.0]])
    >>> reconstruction_error(np.array([[3.0, 0.0], [0.0, 3.0]]), W)
    0.2
    >>> reconstruction_error(np.zeros((2, 2)), W, X=np.eye(2))
    1.0
    """
    A = _weights(W_hat, "W_hat", min_ndim=1, bounded=False)
    B = _weights(W, "W", min_ndim=1, bounded=False)
    if A.shape != B.shape:
        raise ValueError(f"`W_hat` and `W` must have the same shape; got {A.shape} and {B.shape}")
    A = (decode_bf16(A) if A.dtype == np.uint16 else A).astype(np.float64)
    B = (decode_bf16(B) if B.dtype == np.uint16 else B).astype(np.float64)
    if X is not None:
        Xa = as_array(X, "X", ndim=2, kinds="iuf")
        with np.errstate(over="ignore"):
            Xa = Xa.astype(np.float64)
        if not np.isfinite(Xa).all():
            raise ValueError("`X` must be finite")
        if B.ndim < 2 or Xa.shape[1] != B.shape[-1]:
            raise ValueError(f"`X` must have shape (T, d_in) with d_in = {B.shape[-1] if B.ndim >= 2 else '?'} "
                             f"(the columns of `W`, at least 2-D); got X of shape {Xa.shape} and W of shape "
                             f"{B.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            diff = np.matmul(Xa, np.swapaxes(A - B, -1, -2))
            ref = np.matmul(Xa, np.swapaxes(B, -1, -2))
        num, den = float(np.linalg.norm(diff.ravel())), float(np.linalg.norm(ref.ravel()))
        if den == 0.0 or not np.isfinite(den):
            raise ValueError("the relative output error is undefined: ||X W^T||_F is 0 or overflows (check `X` "
                             "and `W`)")
        if not np.isfinite(num):
            raise ValueError("||X (W_hat - W)^T||_F overflows float64 (check `W_hat`)")
        return num / den
    with np.errstate(over="ignore", invalid="ignore"):
        num, den = float(np.linalg.norm((A - B).ravel())), float(np.linalg.norm(B.ravel()))
    if den == 0.0 or not np.isfinite(den):
        raise ValueError("the relative error is undefined: `W` has zero norm (or its norm overflows)")
    if not np.isfinite(num):
        raise ValueError("||W_hat - W||_F overflows float64 (check `W_hat`)")
    return num / den


# --------------------------------------------------------------------------------------------------
# a layer: pairing, merging and packing
# --------------------------------------------------------------------------------------------------
def _layer(experts: Any) -> tuple[dict[str, np.ndarray], bool]:
    """The layer's matrices as {name: (N, rows, cols)} and whether the experts are gated FFNs."""
    def gated(mats: Sequence, where: str) -> dict[str, np.ndarray]:
        out = {k: _weights(m, f"{where}['{k}']", min_ndim=3) for k, m in zip(_GATED_KEYS, mats)}
        g, u, d = (out[k] for k in _GATED_KEYS)
        if g.ndim != 3 or u.shape != g.shape or d.ndim != 3 or d.shape[0] != g.shape[0] or d.shape[2] != g.shape[1]:
            raise ValueError(f"`experts` must hold w_gate and w_up of shape (N, H, D) and w_down of shape "
                             f"(N, D_out, H); got {g.shape}, {u.shape} and {d.shape}")
        return out

    if isinstance(experts, Mapping):
        return gated(expert_matrices(experts), "experts"), True
    if isinstance(experts, (list, tuple)):
        if not experts:
            raise ValueError("`experts` must hold at least two experts")
        first = experts[0]
        if isinstance(first, Mapping) or (isinstance(first, (list, tuple)) and len(first) == 3
                                          and all(np.ndim(m) == 2 for m in first)):
            # one (gate, up, down) per expert
            per = []
            for e, ex in enumerate(experts):
                if isinstance(ex, Mapping):
                    if sorted(ex) != sorted(_GATED_KEYS):
                        raise ValueError(f"`experts[{e}]` needs exactly the keys {list(_GATED_KEYS)}; got {list(ex)}")
                    ex = [ex[k] for k in _GATED_KEYS]
                elif not (isinstance(ex, (list, tuple)) and len(ex) == 3):
                    raise ValueError(f"`experts[{e}]` must be a (w_gate, w_up, w_down) triple like `experts[0]`")
                per.append([_weights(m, f"experts[{e}]['{k}']") for k, m in zip(_GATED_KEYS, ex)])
            for k in range(3):
                shapes = {p[k].shape for p in per}
                if len(shapes) > 1:
                    raise ValueError(f"`experts` must have one shape per matrix; {_GATED_KEYS[k]} has shapes "
                                     f"{sorted(shapes)}")
            return gated([np.stack([p[k] for p in per]) for k in range(3)], "experts"), True
        if len(experts) == 3 and all(np.ndim(m) == 3 for m in experts):
            return gated(list(experts), "experts"), True
        mats = [_weights(m, f"experts[{e}]") for e, m in enumerate(experts)]
        shapes = {m.shape for m in mats}
        if len(shapes) > 1 or mats[0].ndim != 2:
            raise ValueError(f"`experts` must hold matrices of one shape (d_out, d_in); got shapes {sorted(shapes)}")
        return {"weight": np.stack(mats)}, False
    if isinstance(experts, np.ndarray):
        return {"weight": _weights(experts, "experts", min_ndim=3)}, False
    raise TypeError("`experts` must be an array (N, d_out, d_in), a sequence of N matrices, a dict of stacked "
                    f"w_gate, w_up, w_down or a sequence of per-expert triples; got {type(experts).__name__}")


def _layer_norms(activation_norms: Any, mats: dict[str, np.ndarray], gated: bool) -> dict[str, np.ndarray] | None:
    """{matrix name: (N, d_in) norms} from the hidden (and intermediate) activation norms."""
    if activation_norms is None:
        return None
    N = next(iter(mats.values())).shape[0]
    if gated:
        if isinstance(activation_norms, Mapping):
            keys = sorted(activation_norms)
            if keys != ["hidden", "intermediate"]:
                raise ValueError("`activation_norms` as a dict needs exactly the keys 'hidden' and 'intermediate'; "
                                 f"got {keys}")
            hid, mid = activation_norms["hidden"], activation_norms["intermediate"]
        elif isinstance(activation_norms, (list, tuple)) and len(activation_norms) == 2:
            hid, mid = activation_norms
        else:
            raise TypeError("`activation_norms` of gated experts must be a pair (hidden, intermediate) or a dict "
                            "with those keys")
        wants = {"w_gate": ("hidden", hid, mats["w_gate"].shape[2]), "w_up": ("hidden", hid, mats["w_gate"].shape[2]),
                 "w_down": ("intermediate", mid, mats["w_down"].shape[2])}
    else:
        if isinstance(activation_norms, (str, bytes, Mapping)):
            raise TypeError(f"`activation_norms` must be an array (N, d_in); got {type(activation_norms).__name__}")
        wants = {"weight": ("", activation_norms, mats["weight"].shape[2])}
    out = {}
    for name, (what, arr, cols) in wants.items():
        label = f"activation_norms['{what}']" if what else "activation_norms"
        a = as_array(arr, "activation_norms", kinds="iuf")
        if a.shape != (N, cols):
            raise ValueError(f"`{label}` must have shape (N, d_in) = ({N}, {cols}) (one norm per expert and input "
                             f"channel); got {a.shape}")
        with np.errstate(over="ignore"):
            a = a.astype(np.float64)
        if not (np.isfinite(a).all() and a.min() >= 0 and a.max() <= np.finfo(np.float32).max):
            raise ValueError(f"`{label}` must be finite, >= 0 and fit float32")
        out[name] = a
    return out


def _pair_distance(mats: dict[str, np.ndarray], e: int, f: int) -> float:
    """The relative distance of the magnitudes of experts e and f: ||(|W_e| - |W_f|)|| / (||W_e|| + ||W_f||)."""
    num = den_e = den_f = 0.0
    for M in mats.values():
        a = np.abs(_as_f32(M[e])).astype(np.float64)
        b = np.abs(_as_f32(M[f])).astype(np.float64)
        num += float(np.sum((a - b) ** 2))
        den_e += float(np.sum(a * a))
        den_f += float(np.sum(b * b))
    den = np.sqrt(den_e) + np.sqrt(den_f)
    return float(np.sqrt(num) / den) if den > 0 else 0.0


def _distance_matrix(mats: dict[str, np.ndarray]) -> np.ndarray:
    """All pairwise relative magnitude distances, from the Gram matrix of the magnitudes (float64 blocks)."""
    N = next(iter(mats.values())).shape[0]
    G = np.zeros((N, N))
    for M in mats.values():
        flat = M.reshape(N, -1)
        step = max(1, (1 << 22) // N)
        for c0 in range(0, flat.shape[1], step):
            A = np.abs(_as_f32(flat[:, c0:c0 + step])).astype(np.float64)
            G += A @ A.T
    sq = np.diag(G).copy()
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * G, 0.0)
    nrm = np.sqrt(sq)
    den = nrm[:, None] + nrm[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        dist = np.where(den > 0, np.sqrt(d2) / np.where(den > 0, den, 1.0), 0.0)
    np.fill_diagonal(dist, 0.0)
    return dist


def _greedy_matching(dist: np.ndarray) -> np.ndarray:
    N = dist.shape[0]
    e, f = np.triu_indices(N, 1)
    order = np.lexsort((f, e, dist[e, f]))
    free = np.ones(N, dtype=bool)
    pairs = []
    for k in order:
        if free[e[k]] and free[f[k]]:
            free[e[k]] = free[f[k]] = False
            pairs.append((e[k], f[k]))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def _exact_matching(dist: np.ndarray) -> np.ndarray:
    """The perfect matching of least total distance, by a MILP (HiGHS) over the edges of the complete graph."""
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    N = dist.shape[0]
    if N == 2:
        return np.array([[0, 1]], dtype=np.int64)
    e, f = np.triu_indices(N, 1)
    E = e.size
    A = sparse.csr_matrix((np.ones(2 * E), (np.concatenate([e, f]), np.tile(np.arange(E), 2))), shape=(N, E))
    res = milp(dist[e, f], constraints=LinearConstraint(A, 1, 1), integrality=np.ones(E), bounds=Bounds(0, 1))
    if res.x is None or res.status != 0:  # pragma: no cover - a perfect matching always exists for even N
        raise RuntimeError(f"the exact pairing failed ({res.message}); use pairs='greedy'")
    chosen = np.flatnonzero(res.x > 0.5)
    return np.column_stack([e[chosen], f[chosen]]).astype(np.int64)


def _pairs(pairs: Any, mats: dict[str, np.ndarray], N: int) -> tuple[np.ndarray, str]:
    if isinstance(pairs, str):
        check_option(pairs, "pairs", _PAIRINGS)
        if pairs == "sequential":
            return np.arange(N, dtype=np.int64).reshape(-1, 2), pairs
        dist = _distance_matrix(mats)
        return (_exact_matching(dist) if pairs == "auto" else _greedy_matching(dist)), pairs
    if pairs is None:
        raise TypeError("`pairs` must be 'auto', 'greedy', 'sequential' or an integer array (N/2, 2); got None")
    arr = as_array(pairs, "pairs", ndim=2, kinds="iu")
    if arr.shape != (N // 2, 2):
        raise ValueError(f"`pairs` must have shape (N/2, 2) = ({N // 2}, 2); got {arr.shape}")
    flat = arr.ravel()
    if flat.min() < 0 or flat.max() >= N or np.unique(flat).size != N:
        raise ValueError(f"`pairs` must name every expert 0..{N - 1} exactly once")
    return np.ascontiguousarray(arr, dtype=np.int64), "given"


@constraints(experts="option", pairs=("option", "array2d"), activation_norms=("option", "array2d"),
             similarity_threshold="prob", underflow="option", workers="workers")
def merge_experts(experts: Any, pairs: Any = "auto", *, activation_norms: Any = None,
                  similarity_threshold: float = 0.4, underflow: str = "saturate", workers: Any = 1) -> Result:
    r"""Pair the experts of one MoE layer, merge every pair with PuzzleMoE and pack it into bf16 words.

    Parameters
    ----------
    experts : array_like or dict or sequence
        The N experts (N even) of one layer, float or uint16 bf16 bit patterns:

        * one matrix per expert: an array (N, d_out, d_in) or a sequence of N matrices;
        * gated FFN experts (SwiGLU): a dict with keys ``'w_gate'``, ``'w_up'`` (N, H, D) and ``'w_down'``
          (N, D_out, H) (the layout of :func:`moe_forward`), a tuple of those three stacked arrays, or a
          sequence of N per-expert dicts or (w_gate, w_up, w_down) triples. Gated experts are merged matrix by
          matrix.
    pairs : {'auto', 'greedy', 'sequential'} or array_like of int, shape (N/2, 2), optional
        'auto' (default): the pairing of least total distance (a minimum-cost perfect matching, a MILP solved
        by HiGHS, optimal up to its relative MIP gap of 1e-4); 'greedy': repeatedly the closest two experts left; 'sequential': (0, 1), (2, 3), ...;
        or the pairs themselves (each expert exactly once). Distances are between weight magnitudes, see Notes.
    activation_norms : array_like or pair or dict, optional
        Wanda norms per expert and input channel (finite, >= 0): an array (N, d_in) for one matrix per expert;
        for gated experts a pair ``(hidden, intermediate)`` or a dict with those keys, of shapes (N, D) (for
        w_gate and w_up) and (N, H) (the input of w_down). None (default): magnitude saliency.
    similarity_threshold : float, optional
        τ of :func:`puzzle_merge` (default 0.4).
    underflow : {'saturate', 'exponent', 'zero'}, optional
        How :func:`pack_bf16` stores magnitudes below 2**-15 (default 'saturate').
    workers : int, optional
        Threads of the packing and unpacking kernels (default 1, -1 for every core); results do not depend on
        it.

    Returns
    -------
    Result
        packed : ndarray of uint16 or dict of them
            The packed layer, one word per position of each pair: (N/2, d_out, d_in), or a dict
            ``{'w_gate', 'w_up', 'w_down'}`` of (N/2, ...) arrays for gated experts.
        pairs : ndarray of int64, shape (N/2, 2)
            ``packed[p]`` holds expert ``pairs[p, 0]`` as expert 0 and ``pairs[p, 1]`` as expert 1 of
            :func:`unpack_bf16` and :func:`packed_matvec`.
        slot : ndarray of int64, shape (N, 2)
            Where each expert lives: ``slot[e] = (p, position)``.
        pairing : str
            'auto', 'greedy', 'sequential' or 'given'.
        distance : ndarray of float64, shape (N/2,)
            The relative magnitude distance of each pair.
        similarity : ndarray of float64, shape (N/2,)
            The fraction of shared positions (similarity mask) of each pair, over all its matrices.
        density : ndarray of float64, shape (N/2, 2)
            The fraction of positions each expert of a pair keeps.
        error : ndarray of float64, shape (N/2, 2)
            :math:`\|\hat W - W\|_F / \|W\|_F` of each expert over all its matrices, where :math:`\hat W` is what
            the packed words decode to (bf16 rounding and underflow clamping included); inf for an all-zero
            expert rebuilt as nonzero, 0 when both are zero.
        n_clamped : ndarray of int64, shape (N/2,)
            Magnitudes below 2**-15 clamped by the packing, per pair.
        packed_bytes : int
            The bytes of the packed layer.
        bf16_bytes : int
            The bytes of the N experts stored in bf16 (2 bytes per weight).
        memory_ratio : float
            ``packed_bytes / bf16_bytes``: exactly 0.5.
        similarity_threshold : float
            τ as used.

    Raises
    ------
    ValueError
        An odd number of experts, matrices of inconsistent shapes, non-finite weights, norms of the wrong shape
        or negative, invalid pairs, τ outside [0, 1], an unknown ``pairs``, ``underflow`` string.
    TypeError
        An ``experts`` of another type, non-numeric or integer (other than uint16) weights or norms.

    See Also
    --------
    puzzle_merge : the merge of one pair.
    pack_bf16, unpack_bf16, packed_matvec : the bit packing and the decode-fused product.

    Notes
    -----
    **Pairing.** The distance of experts e and f is the relative Frobenius distance of their magnitudes,
    :math:`d(e, f) = \| |W_e| - |W_f| \|_F / (\|W_e\|_F + \|W_f\|_F) \in [0, 1]`, over all the matrices of
    an expert: the merge shares a magnitude where the two are close, so pairs of close magnitudes share more
    positions. 'auto' minimises :math:`\sum_p d(p)` over all perfect matchings up to HiGHS's MIP gap (a MILP over the
    N(N-1)/2 edges; the matrix of distances comes from one Gram product of the magnitudes, in float64);
    'greedy' takes the closest remaining pair, ties to the lower indices. The paper reports that a random
    pairing is within 0.3 % of an optimised one on its models, so the pairing matters little on real experts;
    it matters when some experts are near-copies.

    **Packing.** Each pair is merged by :func:`puzzle_merge` (gate and up with the hidden-state norms, down with
    the intermediate norms) and packed by :func:`pack_bf16`: one 16-bit word per position holds the shared
    magnitude (5-bit exponent), both masks and both signs, so N/2 packed tensors replace N bf16 tensors of the
    same shape: half the memory, exactly, and nothing else.

    References
    ----------
    .. [1] Y. Zhao, Z. Wang, M. Zhang, "PuzzleMoE: Efficient Compression of Large Mixture-of-Experts Models via
       Sparse Expert Merging and Bit-packed Inference", ICML 2026, arXiv:2511.04805.
    .. [2] J. Edmonds, "Paths, trees, and flowers", Canad. J. Math. 17, 1965 (minimum-cost perfect matching).

    Examples
    --------
    Four experts, of which 0 and 2 and also 1 and 3 are close:

    >>> import numpy as np
    >>> from numtk.moe import merge_experts
    >>> rng = np.random.default_rng(0)
    >>> A, B = rng.normal(0, 0.02, (2, 16, 8))
    >>> experts = np.stack([A, B, A * 1.05, B * 0.97]).astype(np.float32)
    >>> res = merge_experts(experts)
    >>> res.pairs
    array([[0, 2],
           [1, 3]])
    >>> res.packed.shape, res.packed.dtype, res.memory_ratio
    ((2, 16, 8), dtype('uint16'), 0.5)
    >>> bool(res.error.max() < 0.05)
    True
    """
    from numtk.moe._bf16 import pack_bf16, unpack_bf16

    threads = n_threads(workers)
    mats, gated = _layer(experts)
    N = next(iter(mats.values())).shape[0]
    if N < 2 or N % 2:
        raise ValueError(f"`experts` must hold an even number (>= 2) of experts to pair; got {N}")
    tau = check_real(similarity_threshold, "similarity_threshold", low=0.0, high=1.0)
    check_option(underflow, "underflow", _UNDERFLOW)
    norms = _layer_norms(activation_norms, mats, gated)
    pair_arr, pairing = _pairs(pairs, mats, N)
    P = N // 2
    packed = {name: np.empty((P,) + M.shape[1:], dtype=np.uint16) for name, M in mats.items()}
    shared = np.zeros(P)
    kept = np.zeros((P, 2))
    err2 = np.zeros((P, 2))
    ref2 = np.zeros((P, 2))
    n_clamped = np.zeros(P, dtype=np.int64)
    size = sum(M[0].size for M in mats.values())
    for p, (e, f) in enumerate(pair_arr):
        for name, M in mats.items():
            pair_norms = None if norms is None else (norms[name][e], norms[name][f])
            res = puzzle_merge(M[e], M[f], pair_norms, tau)
            words, clamped = pack_bf16(res.magnitude, res.mask_i, res.mask_j, res.sign_i, res.sign_j,
                                       underflow=underflow, return_clamped=True, workers=threads)
            packed[name][p] = words
            n_clamped[p] += int(clamped)
            shared[p] += np.count_nonzero(res.similarity_mask)
            for pos, x in enumerate((e, f)):
                kept[p, pos] += np.count_nonzero(res.mask_i if pos == 0 else res.mask_j)
                W = _as_f32(M[x]).astype(np.float64)
                W_hat = np.asarray(unpack_bf16(words, pos, as_float=True, workers=threads), dtype=np.float64)
                err2[p, pos] += float(np.sum((W_hat - W) ** 2))
                ref2[p, pos] += float(np.sum(W * W))
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.where(ref2 > 0, np.sqrt(err2 / np.where(ref2 > 0, ref2, 1.0)), np.where(err2 > 0, np.inf, 0.0))
    slot = np.empty((N, 2), dtype=np.int64)
    slot[pair_arr[:, 0]] = np.column_stack([np.arange(P), np.zeros(P, dtype=np.int64)])
    slot[pair_arr[:, 1]] = np.column_stack([np.arange(P), np.ones(P, dtype=np.int64)])
    packed_bytes = int(sum(a.nbytes for a in packed.values()))
    bf16_bytes = int(2 * N * size)
    return Result(packed=packed if gated else packed["weight"], pairs=pair_arr, slot=slot, pairing=pairing,
                  distance=np.array([_pair_distance(mats, int(e), int(f)) for e, f in pair_arr]),
                  similarity=shared / size, density=kept / size, error=error, n_clamped=n_clamped,
                  packed_bytes=packed_bytes, bf16_bytes=bf16_bytes, memory_ratio=packed_bytes / bf16_bytes,
                  similarity_threshold=tau)
