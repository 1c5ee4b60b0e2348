"""MOD-DiT: predicted block-sparse attention from a linear model of the attention's block map.

MOD-DiT (arXiv 2601.11641, code pkumelon/MOD-DiT) measures, in a few full-attention steps of a video diffusion
transformer, which (block x block) tiles of each head's attention carry negligible probability; fits that block
map with a linear model of lines (diagonals, columns and the frame-block diagonal); extrapolates the fitted line
values to the next steps; keeps the most important lines as a block mask; and refreshes the mask online at one
full-attention step per interval, keeping the old measurement of every block it did not compute.

The layout of every feature vector (the columns of the design matrix M, the coefficients of a fit, the line
indices of a selection) is one order throughout:

- features ``0 .. 2n-2``: the diagonals ``Diag_d``, offsets ``d = kb - qb`` from ``-(n-1)`` to ``n-1``
  (feature ``d + n - 1``);
- features ``2n-1 .. 3n-2``: the columns ``Col_j`` (``kb = j``; feature ``2n - 1 + j``);
- feature ``3n-1``: the frame-block diagonal ``BD`` (``qb // blocks_per_frame == kb // blocks_per_frame``).

A *line* is one of the first ``3n - 1`` features (a diagonal or a column); line indices use the same numbers.
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import C_INT_MAX, check_int, check_option, check_real, check_size
from numtk.torch._common import check_same_device, check_tensor, torch

F = torch.nn.functional

__all__ = ["block_sparsity_map", "lines_design_gram", "lines_rhs", "fit_line_features", "lines_map",
           "extrapolate_and_select", "mask_from_lines", "block_sparse_attention", "masked_dense_attention",
           "OnlineMaskState"]

#: elements of the gathered keys of one chunk of block_sparse_attention (CPU: cache-sized chunks); on other
#: devices the chunks are larger (fewer launches)
_GATHER_ELEMENTS = {"cpu": 1 << 23}
_GATHER_ELEMENTS_OTHER = 1 << 27
#: elements of the (rows x keys) probabilities of one chunk of block_sparsity_map / masked_dense_attention
_SCORE_ELEMENTS = 1 << 23
#: the anchor's defaults
THRESHOLD = 1e-4
REG = 1e-5


# --------------------------------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------------------------------
def _qkv(q: Any, k: Any, v: Any | None) -> tuple:
    """(B, H, Lq, D), (B, H, Lk, D) and (B, H, Lk, Dv) tensors on one device, of one floating dtype."""
    check_tensor(q, "q", ndim=4)
    B, H, _, D = q.shape
    check_tensor(k, "k", ndim=4)
    if k.shape[0] != B or k.shape[1] != H or k.shape[3] != D:
        raise ValueError(f"`k` must have shape ({B}, {H}, *, {D}) to match `q` of shape {tuple(q.shape)} "
                         f"(batch, heads, length, head dim); got {tuple(k.shape)}")
    tensors = {"q": q, "k": k}
    if v is not None:
        check_tensor(v, "v", ndim=4)
        if v.shape[:3] != k.shape[:3]:
            raise ValueError(f"`v` must have shape ({B}, {H}, {k.shape[2]}, *) to match `k` of shape "
                             f"{tuple(k.shape)}; got {tuple(v.shape)}")
        tensors["v"] = v
    check_same_device(**tensors)
    for name, t in tensors.items():
        if t.dtype != q.dtype:
            raise TypeError(f"`{name}` must have the dtype of `q` ({q.dtype}); got {t.dtype}")
    if q.shape[2] == 0 or k.shape[2] == 0 or D == 0:
        raise ValueError(f"`q` and `k` must not be empty; got shapes {tuple(q.shape)} and {tuple(k.shape)}")
    return q, k, v


def _block(block: Any, Lq: int | None = None, Lk: int | None = None) -> int:
    """1 <= block <= max(Lq, Lk): a longer block covers both sequences whole and would only pad them (to its
    own length: gigabytes for a block of 2**26 tokens)."""
    block = check_int(block, "block", minimum=1, maximum=C_INT_MAX)
    if Lq is not None and block > max(Lq, Lk):
        raise ValueError(f"`block` must be <= max(Lq, Lk) = {max(Lq, Lk)}, the longer of the query and key "
                         f"lengths (a longer block only pads the sequences to its length); got {block}")
    return block


def _scale(scale: Any, D: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(D)
    return check_real(scale, "scale", low=0.0, low_open=True)


def _blocks_per_frame(value: Any, n: int, source: str) -> int:
    """1 <= blocks_per_frame <= n, the message naming where n comes from."""
    value = check_int(value, "blocks_per_frame", minimum=1)
    if value > n:
        raise ValueError(f"`blocks_per_frame` must be <= n = {n} (the blocks per side given by {source}); got "
                         f"{value}")
    return value


def _block_mask(block_mask: Any, B: int, H: int, nq: int, nk: int, device: Any) -> "torch.Tensor":
    """A bool block mask broadcast to (B, H, nq, nk)."""
    check_tensor(block_mask, "block_mask", dtype=torch.bool)
    if not 2 <= block_mask.ndim <= 4 or tuple(block_mask.shape[-2:]) != (nq, nk):
        raise ValueError(f"`block_mask` must have shape (nq, nk), (H, nq, nk) or (B, H, nq, nk) with nq = {nq} "
                         f"query blocks and nk = {nk} key blocks; got {tuple(block_mask.shape)}")
    lead = tuple(block_mask.shape[:-2])
    want = (B, H)[2 - len(lead):]
    if any(s not in (1, w) for s, w in zip(lead, want)):
        raise ValueError(f"`block_mask` must broadcast to (B, H, nq, nk) = ({B}, {H}, {nq}, {nk}); got "
                         f"{tuple(block_mask.shape)}")
    if block_mask.device != device:
        raise ValueError(f"`block_mask` must be on the device of `q` ({device}); got {block_mask.device}")
    return block_mask.expand(B, H, nq, nk)


def _top_k(value: Any, n: int, source: str) -> int:
    """1 <= top_k <= 3n - 1 (the lines of an n x n map), the message naming where n comes from."""
    value = check_int(value, "top_k", minimum=1)
    if value > 3 * n - 1:
        raise ValueError(f"`top_k` must be <= 3n - 1 = {3 * n - 1}, the lines (2n - 1 diagonals and n columns) of "
                         f"the n = {n} block maps given by {source}; got {value}")
    return value


def _square_maps(S: Any, name: str) -> "torch.Tensor":
    check_tensor(S, name)
    if S.ndim < 2 or S.shape[-1] != S.shape[-2] or S.shape[-1] == 0:
        raise ValueError(f"`{name}` must be a stack of square block maps, shape (..., n, n) with n >= 1; got "
                         f"{tuple(S.shape)}")
    return S


# --------------------------------------------------------------------------------------------------
# block maps
# --------------------------------------------------------------------------------------------------
def _block_sizes(L: int, block: int, n: int, device: Any, dtype: Any) -> "torch.Tensor":
    """Tokens in each of the n blocks of a length-L sequence (the last one may be partial)."""
    sizes = torch.full((n,), float(block), device=device, dtype=dtype)
    sizes[-1] = L - (n - 1) * block
    return sizes


@constraints(q="tensor", k="tensor", block="int>=1", threshold="prob", scale="real>0")
def block_sparsity_map(q: "torch.Tensor", k: "torch.Tensor", block: int, threshold: float = THRESHOLD, *,
                       scale: float | None = None) -> "torch.Tensor":
    r"""The block negligibility map of each head: the fraction of attention probabilities below ``threshold``.

    For query block ``qb`` and key block ``kb``, ``S[..., qb, kb]`` is the fraction of the probabilities
    :math:`P = \mathrm{softmax}(q k^\top \cdot \mathrm{scale})` (softmax over all keys) in the (block x block)
    tile that are below ``threshold``: 1 for a tile that carries (almost) nothing, 0 for a tile whose every
    entry matters. It is the quantity MOD-DiT measures at its full-attention steps (verified in the authors'
    code: ``probs.lt(threshold).float().mean`` over each tile). The probabilities are computed in chunks of
    query blocks, never all at once.

    Parameters
    ----------
    q : torch.Tensor, shape (B, H, Lq, D)
        Queries, in the layout of :func:`torch.nn.functional.scaled_dot_product_attention`.
    k : torch.Tensor, shape (B, H, Lk, D)
        Keys.
    block : int
        Tokens per block (128 in MOD-DiT), at most ``max(Lq, Lk)``. A length that is not a multiple of ``block``
        ends in a partial block; its fraction is over its own tokens.
    threshold : float, default 1e-4
        A probability is negligible below this (the anchor's default).
    scale : float, optional
        The softmax scale; default ``1 / sqrt(D)``, as in scaled_dot_product_attention.

    Returns
    -------
    torch.Tensor, shape (B, H, ceil(Lq / block), ceil(Lk / block))
        The fractions, in the dtype of ``q`` (float32 for half-precision input), on its device; no gradient.

    See Also
    --------
    fit_line_features : the linear model of such a map.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import block_sparsity_map
    >>> q = torch.zeros(1, 1, 8, 4)                 # uniform attention over 8 keys: every p = 1/8
    >>> block_sparsity_map(q, q, 4, threshold=0.2)  # all below 0.2
    tensor([[[[1., 1.],
              [1., 1.]]]])
    >>> block_sparsity_map(q, q, 4, threshold=0.1)  # none below 0.1
    tensor([[[[0., 0.],
              [0., 0.]]]])
    """
    q, k, _ = _qkv(q, k, None)
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    block = _block(block, Lq, Lk)
    threshold = check_real(threshold, "threshold", low=0.0, high=1.0)
    scale = _scale(scale, D)
    nq, nk = -(-Lq // block), -(-Lk // block)
    check_size(B * H * nq * nk, 8, "block")
    out_dtype = q.dtype if q.dtype in (torch.float32, torch.float64) else torch.float32
    counts = torch.empty((B, H, nq, nk), device=q.device, dtype=out_dtype)
    per_block = max(1, _SCORE_ELEMENTS // max(1, B * H * block * Lk))
    with torch.no_grad():
        kt = k.transpose(-1, -2)
        for b0 in range(0, nq, per_block):
            b1 = min(nq, b0 + per_block)
            rows = q[:, :, b0 * block:min(b1 * block, Lq)]
            below = torch.softmax(((rows * scale) @ kt).to(out_dtype), dim=-1).lt(threshold).view(torch.uint8)
            pad_k, pad_q = nk * block - Lk, (b1 - b0) * block - below.shape[2]
            if pad_k or pad_q:                     # partial blocks: padding counts as not below
                below = F.pad(below, (0, pad_k, 0, pad_q))
            per_row = below.view(B, H, (b1 - b0) * block, nk, block).sum(dim=-1, dtype=torch.int32)
            counts[:, :, b0:b1] = per_row.view(B, H, b1 - b0, block, nk).sum(dim=3)
        sizes_q = _block_sizes(Lq, block, nq, q.device, out_dtype)
        sizes_k = _block_sizes(Lk, block, nk, q.device, out_dtype)
        return counts / (sizes_q[:, None] * sizes_k[None, :])


# --------------------------------------------------------------------------------------------------
# the line design
# --------------------------------------------------------------------------------------------------
def _frame_sizes(n: int, bpf: int) -> list[int]:
    full, rest = divmod(n, bpf)
    return [bpf] * full + ([rest] if rest else [])


def _closed_gram(n: int, bpf: int, dtype: Any, device: Any) -> "torch.Tensor":
    """M^T M of the 3n features, from counting alone (no basis map is built)."""
    nd = 2 * n - 1
    G = torch.zeros((3 * n, 3 * n), dtype=torch.float64)
    d = torch.arange(-(n - 1), n)
    j = torch.arange(n)
    G[range(nd), range(nd)] = (n - d.abs()).double()                       # <Diag_d, Diag_d> = n - |d|
    G[range(nd, nd + n), range(nd, nd + n)] = float(n)                     # <Col_j, Col_j> = n
    cross = ((j[None, :] - d[:, None] >= 0) & (j[None, :] - d[:, None] <= n - 1)).double()
    G[:nd, nd:nd + n] = cross                                              # Diag_d meets Col_j once if 0 <= j-d < n
    G[nd:nd + n, :nd] = cross.T
    sizes = torch.tensor(_frame_sizes(n, bpf), dtype=torch.float64)
    diag_bd = (sizes[None, :] - d.abs().double()[:, None]).clamp(min=0).sum(dim=1)  # same-frame pairs on Diag_d
    frame_of = torch.div(j, bpf, rounding_mode="floor")
    col_bd = sizes[frame_of]                                               # Col_j meets its own frame's rows
    G[:nd, -1] = diag_bd
    G[-1, :nd] = diag_bd
    G[nd:nd + n, -1] = col_bd
    G[-1, nd:nd + n] = col_bd
    G[-1, -1] = float((sizes**2).sum())
    return G.to(dtype=dtype, device=device)


def _factor(A: "torch.Tensor") -> tuple:
    """('cholesky', L) -> ('lu', LU, pivots) -> ('pinv', A^+): the first that is numerically sound."""
    m = A.shape[-1]
    eps = torch.finfo(A.dtype).eps
    L, info = torch.linalg.cholesky_ex(A)
    if int(info) == 0:
        dl = torch.diagonal(L)
        if bool(torch.isfinite(L).all()) and float(dl.min()) ** 2 > 100 * m * eps * float(torch.diagonal(A).max()):
            return ("cholesky", L, None)
    LU, piv, info = torch.linalg.lu_factor_ex(A)
    if int(info) == 0:
        du = torch.diagonal(LU).abs()
        if bool(torch.isfinite(LU).all()) and float(du.min()) > 100 * m * eps * float(du.max()):
            return ("lu", LU, piv)
    # the eigenvalues at rounding level are the collinear directions (with a ridge term too small to matter):
    # dropped, which gives the minimum-norm solution
    return ("pinv", torch.linalg.pinv(A, hermitian=True, rtol=1000 * m * eps), None)


def _solve(kind: str, factor: "torch.Tensor", pivots: Any, rhs: "torch.Tensor") -> "torch.Tensor":
    """(M^T M + reg I)^-1 rhs for rhs of shape (F, R)."""
    if kind == "cholesky":
        return torch.cholesky_solve(rhs, factor)
    if kind == "lu":
        return torch.linalg.lu_solve(factor, pivots, rhs)
    return factor @ rhs


@constraints(n="count", blocks_per_frame="int>=1", reg="real>=0", dtype="option", device="option")
def lines_design_gram(n: int, blocks_per_frame: int, reg: float = REG, *, dtype: Any = None,
                      device: Any = None) -> Result:
    r"""The Gram matrix :math:`M^\top M` of MOD-DiT's line design, in closed form, and its ridge factor.

    The design's columns are the n x n basis maps flattened: the ``2n - 1`` diagonals ``Diag_d`` (ones where
    ``kb - qb = d``), the ``n`` columns ``Col_j`` (ones where ``kb = j``) and the frame-block diagonal ``BD``
    (ones where ``qb`` and ``kb`` lie in one frame of ``blocks_per_frame`` blocks; a trailing partial frame is
    a frame). Their inner products are counts, so :math:`M^\top M` needs no basis map:
    :math:`\langle Diag_d, Diag_{d'}\rangle = \delta_{dd'}(n - |d|)`,
    :math:`\langle Col_j, Col_{j'}\rangle = \delta_{jj'} n`,
    :math:`\langle Diag_d, Col_j\rangle = [0 \le j - d \le n - 1]`,
    :math:`\langle Diag_d, BD\rangle = \sum_f \max(0, s_f - |d|)`,
    :math:`\langle Col_j, BD\rangle = s_{f(j)}` and :math:`\langle BD, BD\rangle = \sum_f s_f^2` for frames of
    sizes :math:`s_f` (verified against the authors' ``compute_mtm_pytorch``, which counts full frames only;
    the two agree when ``blocks_per_frame`` divides ``n``).

    The basis is collinear (:math:`\sum_d Diag_d = \sum_j Col_j` = all ones), so :math:`M^\top M` is singular;
    the ridge system :math:`(M^\top M + \mathrm{reg}\, I) X = M^\top S` is factored once, as the anchor does:
    Cholesky, else LU, else the pseudo-inverse (the fallback taken when a factor is numerically unsound, e.g.
    ``reg = 0``, which then gives the minimum-norm least-squares solution).

    Parameters
    ----------
    n : int
        Blocks per side of the block map.
    blocks_per_frame : int
        Blocks per video frame, ``1 <= blocks_per_frame <= n``.
    reg : float, default 1e-5
        The ridge term (the anchor's value).
    dtype : torch.dtype, optional
        Of the result; default float64.
    device : torch.device or str, optional
        Of the result; default the CPU.

    Returns
    -------
    Result
        gram : torch.Tensor, shape (3n, 3n)
            :math:`M^\top M` (without the ridge term), in the feature order of the module (diagonals, columns,
            BD).
        method : str
            ``'cholesky'``, ``'lu'`` or ``'pinv'``: the factorisation of :math:`M^\top M + \mathrm{reg}\, I` used.
        factor : torch.Tensor, shape (3n, 3n)
            Its Cholesky factor, packed LU factor or pseudo-inverse.
        pivots : torch.Tensor or None
            The LU pivots (None for the other methods).
        n, blocks_per_frame, reg : int, int, float
            The arguments.

    Examples
    --------
    >>> from numtk.torch.moddit import lines_design_gram
    >>> res = lines_design_gram(3, 1)
    >>> res.gram.shape, res.method
    (torch.Size([9, 9]), 'cholesky')
    >>> res.gram.diagonal().tolist()       # n - |d| for d = -2..2, then n per column, then n frames of 1
    [1.0, 2.0, 3.0, 2.0, 1.0, 3.0, 3.0, 3.0, 3.0]
    """
    n = check_int(n, "n", minimum=1, maximum=C_INT_MAX)
    check_size(9 * n * n, 8 * 4, "n")
    bpf = _blocks_per_frame(blocks_per_frame, n, "`n`")
    reg = check_real(reg, "reg", low=0.0)
    if dtype is None:
        dtype = torch.float64
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"`dtype` must be a floating torch.dtype; got {dtype!r}")
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be a torch.device or a str; got {type(device).__name__}")
    try:
        device = torch.device("cpu" if device is None else device)
        torch.empty(0, device=device)
    except (RuntimeError, TypeError, ValueError, AssertionError) as exc:
        raise ValueError(f"`device` must name an available torch device; got {device!r} ({exc})") from None
    gram = _closed_gram(n, bpf, dtype, device)
    kind, factor, pivots = _cached_factor(n, bpf, reg, device)
    return Result(gram=gram, method=kind, factor=factor.to(dtype), pivots=pivots, n=n, blocks_per_frame=bpf,
                  reg=reg)


@functools.lru_cache(maxsize=32)
def _cached_factor(n: int, bpf: int, reg: float, device: Any) -> tuple:
    """The factor of M^T M + reg I in float64, computed once per geometry: every head and every later fit
    shares it (float32 is not enough once n reaches the hundreds)."""
    A = _closed_gram(n, bpf, torch.float64, device) + reg * torch.eye(3 * n, dtype=torch.float64, device=device)
    return _factor(A)


def _diag_index(n: int, device: Any) -> "torch.Tensor":
    """feature index d + n - 1 of each entry (qb, kb), d = kb - qb: shape (n, n)."""
    r = torch.arange(n, device=device)
    return r[None, :] - r[:, None] + (n - 1)


def _bd_mask(n: int, bpf: int, device: Any) -> "torch.Tensor":
    f = torch.div(torch.arange(n, device=device), bpf, rounding_mode="floor")
    return f[:, None] == f[None, :]


@constraints(S="tensor", blocks_per_frame="int>=1")
def lines_rhs(S: "torch.Tensor", blocks_per_frame: int) -> "torch.Tensor":
    r"""The right-hand sides :math:`M^\top S` of MOD-DiT's line fit: each basis map's sum over the block map.

    Parameters
    ----------
    S : torch.Tensor, shape (..., n, n)
        Block maps (one per head, or any stack of them).
    blocks_per_frame : int
        Blocks per video frame, ``1 <= blocks_per_frame <= n``.

    Returns
    -------
    torch.Tensor, shape (..., 3n)
        Per map: the sums of ``S`` over each diagonal (offsets ``-(n-1) .. n-1``), each column, and the
        frame-block diagonal; dtype and device of ``S``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import lines_rhs
    >>> S = torch.arange(4.0).reshape(2, 2)     # [[0, 1], [2, 3]]
    >>> lines_rhs(S, 1).tolist()                # diagonals -1, 0, 1; columns 0, 1; BD (= Diag_0 here)
    [2.0, 3.0, 1.0, 2.0, 4.0, 3.0]
    """
    S = _square_maps(S, "S")
    n = S.shape[-1]
    bpf = _blocks_per_frame(blocks_per_frame, n, "`S`")
    lead = S.shape[:-2]
    flat = S.reshape(*lead, n * n)
    diag = torch.zeros((*lead, 2 * n - 1), dtype=S.dtype, device=S.device)
    diag = diag.index_add(-1, _diag_index(n, S.device).reshape(-1), flat)
    cols = S.sum(dim=-2)
    bd = (S * _bd_mask(n, bpf, S.device)).sum(dim=(-2, -1))
    return torch.cat([diag, cols, bd[..., None]], dim=-1)


@constraints(coefficients="tensor", blocks_per_frame="int>=1")
def lines_map(coefficients: "torch.Tensor", blocks_per_frame: int) -> "torch.Tensor":
    r"""The block map :math:`M X` of line coefficients: ``sum_d X_d Diag_d + sum_j X_j Col_j + X_BD BD``.

    The inverse view of :func:`fit_line_features`: a fit's ``coefficients`` give its fitted map, extrapolated
    coefficients (:func:`extrapolate_and_select`) the predicted map.

    Parameters
    ----------
    coefficients : torch.Tensor, shape (..., 3n)
        Per map: ``2n - 1`` diagonal, ``n`` column and one frame-block coefficient.
    blocks_per_frame : int
        Blocks per video frame, ``1 <= blocks_per_frame <= n``.

    Returns
    -------
    torch.Tensor, shape (..., n, n)

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import lines_map
    >>> x = torch.tensor([0., 1., 0., 0., 0., 0.])   # n = 2: Diag_0 only
    >>> lines_map(x, 1)
    tensor([[1., 0.],
            [0., 1.]])
    """
    check_tensor(coefficients, "coefficients")
    if coefficients.ndim < 1 or coefficients.shape[-1] % 3 or coefficients.shape[-1] == 0:
        raise ValueError(f"`coefficients` must have shape (..., 3n) with n >= 1 (2n - 1 diagonals, n columns, "
                         f"one frame-block value); got {tuple(coefficients.shape)}")
    n = coefficients.shape[-1] // 3
    bpf = _blocks_per_frame(blocks_per_frame, n, "`coefficients`, of 3n values")
    x = coefficients
    nd = 2 * n - 1
    out = x[..., _diag_index(n, x.device)]                                 # diagonals
    out = out + x[..., None, nd:nd + n]                                    # columns (same on every row)
    return out + x[..., -1, None, None] * _bd_mask(n, bpf, x.device).to(x.dtype)


@constraints(S="tensor", blocks_per_frame="int>=1", reg="real>=0")
def fit_line_features(S: "torch.Tensor", blocks_per_frame: int, *, reg: float = REG) -> Result:
    r"""Fit block maps with MOD-DiT's lines: the ridge solution of :math:`(M^\top M + \mathrm{reg}\,I)X = M^\top S`.

    Every map of the stack (every head) is one right-hand side of one system; :math:`M^\top M` comes in closed
    form (:func:`lines_design_gram`) and is factored once per geometry (n, blocks_per_frame, reg, dtype,
    device) and cached.

    The basis is collinear (:math:`\sum_d Diag_d = \sum_j Col_j`), so coefficients are identified only up to
    that null direction; the ridge term picks the (nearly) minimum-norm one. Compare *fitted maps*
    (``fitted``, or :func:`lines_map` of the coefficients), not coefficients.

    Parameters
    ----------
    S : torch.Tensor, shape (..., n, n)
        Block maps (negligibility fractions of :func:`block_sparsity_map`, one per head).
    blocks_per_frame : int
        Blocks per video frame, ``1 <= blocks_per_frame <= n``.
    reg : float, default 1e-5
        The ridge term (the anchor's value).

    Returns
    -------
    Result
        coefficients : torch.Tensor, shape (..., 3n)
            The fitted features: diagonals, columns, frame-block diagonal.
        diagonals : torch.Tensor, shape (..., 2n - 1)
            Views of ``coefficients``: the diagonal values, offsets ``-(n-1) .. n-1``.
        columns : torch.Tensor, shape (..., n)
            The column values.
        block_diagonal : torch.Tensor, shape (...)
            The frame-block diagonal value.
        fitted : torch.Tensor, shape (..., n, n)
            The fitted maps :math:`M X`.
        residual : torch.Tensor, shape (...)
            :math:`\|M X - S\|_F` per map.
        method : str
            The factorisation used (see :func:`lines_design_gram`).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import fit_line_features, lines_map
    >>> x = torch.zeros(3 * 6, dtype=torch.float64)
    >>> x[5 + 2] = 0.5; x[11 + 4] = 0.25          # Diag_{+2} and Col_4 of a 6 x 6 map
    >>> S = lines_map(x, 3)
    >>> res = fit_line_features(S, 3)
    >>> bool(torch.allclose(res.fitted, S, atol=1e-5)), res.method
    (True, 'cholesky')
    """
    S = _square_maps(S, "S")
    n = S.shape[-1]
    bpf = _blocks_per_frame(blocks_per_frame, n, "`S`")
    reg = check_real(reg, "reg", low=0.0)
    kind, factor, pivots = _cached_factor(n, bpf, reg, S.device)
    rhs = lines_rhs(S.to(torch.float64), bpf)          # sums and solve in float64, whatever the maps' dtype
    lead = rhs.shape[:-1]
    X = _solve(kind, factor, pivots, rhs.reshape(-1, 3 * n).T).T.to(S.dtype).reshape(*lead, 3 * n)
    fitted = lines_map(X, bpf)
    nd = 2 * n - 1
    return Result(coefficients=X, diagonals=X[..., :nd], columns=X[..., nd:nd + n], block_diagonal=X[..., -1],
                  fitted=fitted, residual=torch.linalg.vector_norm(fitted - S, dim=(-2, -1)), method=kind)


# --------------------------------------------------------------------------------------------------
# prediction and masks
# --------------------------------------------------------------------------------------------------
def _coefficients(item: Any, i: int) -> "torch.Tensor":
    if isinstance(item, torch.Tensor):
        return check_tensor(item, f"history[{i}]")
    if hasattr(item, "keys") and "coefficients" in item.keys():
        return check_tensor(item["coefficients"], f"history[{i}].coefficients")
    raise TypeError(f"`history` must hold fit_line_features results or coefficient tensors; item {i} is a "
                    f"{type(item).__name__}")


@constraints(history="tensor", top_k="int>=1", predict_T="int>=1", column_weight="real>0")
def extrapolate_and_select(history: Any, top_k: int, predict_T: int = 10, *, column_weight: float = 0.5) -> Result:
    r"""Extrapolate the line values of the last two fits and select the ``top_k`` most important lines.

    With ``cur`` and ``prev`` the coefficients of the last two fits, the prediction is
    ``pred = cur + (cur - prev) / predict_T`` (verified in the authors' ``choose_topk_lines``). The fitted
    quantity is *negligibility*, so the ``top_k`` *smallest* predicted line values are the most important lines:
    those are selected. Columns are ranked at ``column_weight`` times their value: the anchor stores its column
    coefficients halved (its ``c = X / 2``). The halving roughly evens out the two families' baselines: the
    near-minimum-norm ridge split of a constant map puts about twice as much on each column as on each diagonal
    (constant c = ``c n / (3n - 1)`` per diagonal plus ``c (2n - 1) / (3n - 1)`` per column).

    Parameters
    ----------
    history : sequence or torch.Tensor
        At least two fits, oldest first: results of :func:`fit_line_features`, coefficient tensors of one shape
        (..., 3n), or one tensor of shape (T, ..., 3n) with T >= 2. Only the last two are read.
    top_k : int
        Lines to select per map, at most ``3n - 1`` (``3n - 1`` selects every line: a mask that keeps every
        block).
    predict_T : int, default 10
        The divisor of the extrapolation: the interval, in steps, between the fits.
    column_weight : float, default 0.5
        The factor of the column values in the ranking (0.5: the anchor's halving).

    Returns
    -------
    Result
        lines : torch.Tensor of int64, shape (..., top_k)
            The selected lines, most important first (line numbering of the module: diagonal offset d is line
            ``d + n - 1``, column j is line ``2n - 1 + j``).
        predicted : torch.Tensor, shape (..., 3n)
            The extrapolated coefficients of every feature (BD included); :func:`lines_map` of it is the
            predicted block map.
        block_diagonal : torch.Tensor, shape (...)
            The frame-block coefficient of the latest fit, which the anchor's head rule reads
            (:func:`mask_from_lines`).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import extrapolate_and_select
    >>> prev = torch.tensor([0.9, 0.8, 0.9, 0.6, 0.6, 0.0])   # n = 2: 3 diagonals, 2 columns, BD
    >>> cur = torch.tensor([0.9, 0.3, 0.9, 0.6, 0.8, 0.0])
    >>> sel = extrapolate_and_select([prev, cur], 2)
    >>> sel.lines.tolist()                 # Diag_0 (0.25 predicted), then Col_0 (0.6 * 0.5)
    [1, 3]
    >>> sel.predicted[1].item()
    0.25
    """
    if isinstance(history, torch.Tensor):
        check_tensor(history, "history")
        if history.ndim < 2 or history.shape[0] < 2:
            raise ValueError(f"`history` as one tensor must have shape (T, ..., 3n) with T >= 2 fits; got "
                             f"{tuple(history.shape)}")
        prev, cur = history[-2], history[-1]
    elif isinstance(history, (list, tuple)):
        if len(history) < 2:
            raise ValueError(f"`history` must hold at least two fits; got {len(history)}")
        prev, cur = _coefficients(history[-2], len(history) - 2), _coefficients(history[-1], len(history) - 1)
    else:
        raise TypeError(f"`history` must be a list of fits or a tensor of shape (T, ..., 3n); got "
                        f"{type(history).__name__}")
    if prev.shape != cur.shape or cur.ndim < 1 or cur.shape[-1] % 3 or cur.shape[-1] == 0:
        raise ValueError(f"`history` must hold coefficients of one shape (..., 3n), n >= 1; got "
                         f"{tuple(prev.shape)} and {tuple(cur.shape)}")
    if prev.device != cur.device or prev.dtype != cur.dtype:
        raise ValueError("`history` must hold coefficients of one dtype on one device")
    n = cur.shape[-1] // 3
    top_k = _top_k(top_k, n, "`history`")
    predict_T = check_int(predict_T, "predict_T", minimum=1, maximum=C_INT_MAX)
    column_weight = check_real(column_weight, "column_weight", low=0.0, low_open=True)
    nd = 2 * n - 1
    pred = cur + (cur - prev) / predict_T
    score = pred[..., :3 * n - 1].clone()
    score[..., nd:] = score[..., nd:] * column_weight
    lines = torch.topk(score, top_k, dim=-1, largest=False, sorted=True).indices
    return Result(lines=lines, predicted=pred, block_diagonal=cur[..., -1])


#: where the text tokens of a joint text-video sequence sit (CogVideoX: first; HunyuanVideo: last)
TEXT_POSITIONS = ("start", "end")


def _with_text(mask: "torch.Tensor", text_blocks: int, text_position: str) -> "torch.Tensor":
    """The video block mask inside the mask of the whole sequence: text rows and columns all True."""
    if not text_blocks:
        return mask
    n = mask.shape[-1]
    full = torch.ones((*mask.shape[:-2], n + text_blocks, n + text_blocks), dtype=torch.bool, device=mask.device)
    video = slice(text_blocks, None) if text_position == "start" else slice(0, n)
    full[..., video, video] = mask
    return full


@constraints(lines="any", n="count", blocks_per_frame="int>=1", block_diagonal="tensor",
             bd_threshold="real", text_blocks="int>=0", text_position="option")
def mask_from_lines(lines: "torch.Tensor", n: int, blocks_per_frame: int, *,
                    block_diagonal: "torch.Tensor | None" = None, bd_threshold: float = 1.0, text_blocks: int = 0,
                    text_position: str = "end") -> "torch.Tensor":
    r"""The block mask of selected lines: their union, plus the frame-block diagonal for some heads.

    A block (qb, kb) is kept when its diagonal (offset ``kb - qb``) or its column (``kb``) is among ``lines``;
    and, for each map whose frame-block coefficient ``block_diagonal`` is ``<= bd_threshold``, when qb and kb
    lie in one frame (the anchor's ``check_bd_values`` and ``generate_mask_from_lines``; it calls the head rule
    with threshold 1, the default here, under which a negligibility fit keeps the frame diagonal almost
    always). With ``text_blocks``, the mask covers a joint sequence: the n video blocks as above and
    ``text_blocks`` blocks of text tokens, first or last, whose rows and columns are kept whole (text tokens keep
    full attention, as in the anchor's ``generate_mask_from_lines``).

    Parameters
    ----------
    lines : torch.Tensor of int, shape (..., k)
        Line indices in ``[0, 3n - 1)`` (:func:`extrapolate_and_select`'s numbering). An integer tensor,
        checked here (the catalogue's ``"tensor"`` is for floating tensors, hence "any" in the declaration).
    n : int
        Blocks per side.
    blocks_per_frame : int
        Blocks per video frame, ``1 <= blocks_per_frame <= n``.
    block_diagonal : torch.Tensor, shape (...), optional
        The frame-block coefficient of each map (floating), or the decision itself (bool: True for the maps that
        keep the frame diagonal, ``bd_threshold`` unused; :class:`OnlineMaskState` decides once per run); None:
        no map keeps the frame diagonal.
    bd_threshold : float, default 1.0
        Maps with ``block_diagonal <= bd_threshold`` keep the frame-block diagonal.
    text_blocks : int, default 0
        Blocks of text tokens in the sequence besides the n video blocks.
    text_position : {'end', 'start'}, default 'end'
        Where the text blocks are: after the video (HunyuanVideo's layout) or before it (CogVideoX's).

    Returns
    -------
    torch.Tensor of bool, shape (..., n + text_blocks, n + text_blocks)
        True where attention is computed.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import mask_from_lines
    >>> mask_from_lines(torch.tensor([2, 5]), 3, 1).int()   # Diag_0 (line n - 1 = 2) and Col_0 (line 2n - 1 = 5)
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 0, 1]], dtype=torch.int32)
    >>> mask_from_lines(torch.tensor([2, 5]), 3, 1, text_blocks=1).int()   # a text block last: kept whole
    tensor([[1, 0, 0, 1],
            [1, 1, 0, 1],
            [1, 0, 1, 1],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    if not isinstance(lines, torch.Tensor):
        raise TypeError(f"`lines` must be a torch.Tensor of line indices; got {type(lines).__name__}")
    if lines.is_floating_point() or lines.is_complex() or lines.dtype == torch.bool:
        raise TypeError(f"`lines` must hold integers (line indices); got dtype {lines.dtype}")
    if lines.ndim < 1:
        raise ValueError(f"`lines` must have shape (..., k); got a 0-d tensor")
    n = check_int(n, "n", minimum=1, maximum=C_INT_MAX)
    bpf = _blocks_per_frame(blocks_per_frame, n, "`n`")
    lead = tuple(lines.shape[:-1])
    check_size(max(1, math.prod(lead)) * n * n, 4, "n")
    bd_threshold = check_real(bd_threshold, "bd_threshold")
    text_blocks = check_int(text_blocks, "text_blocks", minimum=0, maximum=C_INT_MAX)
    if text_blocks:
        check_size(max(1, math.prod(lead)) * (n + text_blocks) ** 2, 1, "text_blocks")
    text_position = check_option(text_position, "text_position", TEXT_POSITIONS)
    n_lines = 3 * n - 1
    if lines.numel() and (int(lines.min()) < 0 or int(lines.max()) >= n_lines):
        raise ValueError(f"`lines` must lie in [0, {n_lines}) for n = {n}; got values in "
                         f"[{int(lines.min())}, {int(lines.max())}]")
    device = lines.device
    chosen = torch.zeros((*lead, n_lines), dtype=torch.bool, device=device)
    chosen = chosen.scatter(-1, lines.long(), True)
    nd = 2 * n - 1
    mask = chosen[..., _diag_index(n, device)] | chosen[..., None, nd:]
    if block_diagonal is not None:
        check_tensor(block_diagonal, "block_diagonal", dtype=None)
        if not (block_diagonal.is_floating_point() or block_diagonal.dtype == torch.bool):
            raise TypeError(f"`block_diagonal` must hold floating-point coefficients or bools; got dtype "
                            f"{block_diagonal.dtype}")
        if tuple(block_diagonal.shape) != lead:
            raise ValueError(f"`block_diagonal` must have shape {lead} (one value per map of `lines`); got "
                             f"{tuple(block_diagonal.shape)}")
        if block_diagonal.device != device:
            raise ValueError(f"`block_diagonal` must be on the device of `lines` ({device}); got "
                             f"{block_diagonal.device}")
        keep = block_diagonal if block_diagonal.dtype == torch.bool else block_diagonal <= bd_threshold
        keep = keep[..., None, None]
        mask = mask | (keep & _bd_mask(n, bpf, device))
    return _with_text(mask, text_blocks, text_position)


# --------------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------------
@constraints(q="tensor", k="tensor", v="tensor", block_mask="tensor", block="int>=1", scale="real>0")
def masked_dense_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", block_mask: "torch.Tensor",
                           block: int, *, scale: float | None = None) -> "torch.Tensor":
    r"""Reference attention with a block mask: the dense product, masked. Computes every block.

    ``softmax(q k^T * scale + mask) v`` with the (block x block) mask expanded to tokens (``-inf`` outside
    it), in chunks of query blocks. A query block whose mask row keeps nothing gets output zero, as in
    :func:`block_sparse_attention`. It is the oracle of :func:`block_sparse_attention`, not a fast path.

    Parameters
    ----------
    q, k, v : torch.Tensor, shapes (B, H, Lq, D), (B, H, Lk, D), (B, H, Lk, Dv)
        As for :func:`torch.nn.functional.scaled_dot_product_attention`.
    block_mask : torch.Tensor of bool, shape (nq, nk), (H, nq, nk) or (B, H, nq, nk)
        True where attention is computed; ``nq = ceil(Lq / block)``, ``nk = ceil(Lk / block)``.
    block : int
        Tokens per block, at most ``max(Lq, Lk)``.
    scale : float, optional
        Default ``1 / sqrt(D)``.

    Returns
    -------
    torch.Tensor, shape (B, H, Lq, Dv)
        Differentiable in q, k and v.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import masked_dense_attention
    >>> q = torch.zeros(1, 1, 4, 2); v = torch.arange(8.0).reshape(1, 1, 4, 2)
    >>> m = torch.tensor([[True, False], [False, False]])
    >>> masked_dense_attention(q, q, v, m, 2)[0, 0]      # rows 0-1: mean of keys 0-1; rows 2-3: nothing kept
    tensor([[1., 2.],
            [1., 2.],
            [0., 0.],
            [0., 0.]])
    """
    q, k, v = _qkv(q, k, v)
    B, H, Lq, D = q.shape
    Lk = k.shape[2]
    block = _block(block, Lq, Lk)
    nq, nk = -(-Lq // block), -(-Lk // block)
    mask = _block_mask(block_mask, B, H, nq, nk, q.device)
    scale = _scale(scale, D)
    outs = []
    per_block = max(1, _SCORE_ELEMENTS // max(1, B * H * block * Lk))
    kt = k.transpose(-1, -2)
    for b0 in range(0, nq, per_block):
        b1 = min(nq, b0 + per_block)
        r0, r1 = b0 * block, min(b1 * block, Lq)
        tok = mask[:, :, b0:b1].repeat_interleave(block, dim=2)[:, :, :r1 - r0]
        tok = tok.repeat_interleave(block, dim=3)[..., :Lk]
        empty = ~tok.any(dim=-1, keepdim=True)
        tok = tok | empty                              # a finite softmax on empty rows, zeroed below
        s = (q[:, :, r0:r1] @ kt) * scale
        p = torch.softmax(s.masked_fill(~tok, float("-inf")), dim=-1)
        outs.append(torch.where(empty, torch.zeros((), dtype=v.dtype, device=v.device), p @ v))
    return torch.cat(outs, dim=2)


def _gathered_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", mask: "torch.Tensor",
                        block: int, scale: float) -> "torch.Tensor":
    """Attention over the kept blocks only: per query block, its kept key/value blocks gathered (rows sorted by
    their count so that a chunk pads little), one scaled_dot_product_attention per chunk of rows. Few, large
    calls: each parallel region costs a scheduling round when other processes share the cores."""
    B, H, Lq, D = q.shape
    Lk, Dv = k.shape[2], v.shape[3]
    nq, nk = mask.shape[-2:]
    BH = B * H
    if Lq % block:
        q = F.pad(q, (0, 0, 0, nq * block - Lq))
    if Lk % block:
        k = F.pad(k, (0, 0, 0, nk * block - Lk))
        v = F.pad(v, (0, 0, 0, nk * block - Lk))
    qb = q.reshape(BH * nq, block, D)
    kb = k.reshape(BH * nk, block, D)
    vb = v.reshape(BH * nk, block, Dv)
    rows_mask = mask.reshape(BH * nq, nk)
    counts = rows_mask.sum(dim=-1)
    # kept key blocks of each row first, in ascending order (a stable sort of 0 = kept, 1 = masked)
    kept = torch.argsort((~rows_mask).to(torch.uint8), dim=-1, stable=True)
    order = torch.argsort(counts, descending=True, stable=True)
    n_rows = int((counts > 0).sum())
    order = order[:n_rows]
    in_order = n_rows == BH * nq and bool((order[1:] > order[:-1]).all())
    qs = qb if in_order else qb.index_select(0, order)                     # the query blocks, chunk by chunk
    counts_sorted = counts[order].tolist()
    partial_key = Lk % block != 0
    if partial_key:
        key_ok = (torch.arange(nk * block, device=q.device) < Lk).view(nk, block)
    budget = _GATHER_ELEMENTS.get(q.device.type, _GATHER_ELEMENTS_OTHER)
    descending = [-c for c in counts_sorted]                               # ascending, for bisect
    pieces = []
    start = 0
    while start < n_rows:
        kmax = counts_sorted[start]
        c = max(1, min(n_rows - start, budget // (kmax * block * D)))
        # a chunk stops before a row that would be padded by more than an eighth of its own count (count >=
        # kmax - kmax // 9 >= 8 kmax / 9): the tiles computed are at most 9/8 of the tiles kept
        c = min(c, max(1, bisect.bisect_right(descending, -(kmax - kmax // 9)) - start))
        rows = order[start:start + c]
        local = kept[rows, :kmax]                                           # (c, kmax) key blocks of each row
        glob = local + torch.div(rows, nq, rounding_mode="floor")[:, None] * nk
        Kc = kb.index_select(0, glob.reshape(-1)).view(1, c, kmax * block, D)
        Vc = vb.index_select(0, glob.reshape(-1)).view(1, c, kmax * block, Dv)
        Qc = qs[start:start + c].unsqueeze(0)
        slot_ok = None
        if counts_sorted[start + c - 1] < kmax:                             # some rows of the chunk are padded
            slot_ok = (torch.arange(kmax, device=q.device)[None, :] < counts[rows][:, None])
            slot_ok = slot_ok[:, :, None].expand(c, kmax, block)
        if partial_key and bool((local == nk - 1).any()):
            tok_ok = key_ok[local]
            slot_ok = tok_ok if slot_ok is None else slot_ok & tok_ok
        attn_mask = None if slot_ok is None else slot_ok.reshape(1, c, 1, kmax * block)
        pieces.append(F.scaled_dot_product_attention(Qc, Kc, Vc, attn_mask=attn_mask, scale=scale)[0])
        start += c
    if n_rows == BH * nq:
        out = torch.cat(pieces, dim=0)
        if not in_order:                                                  # rows were reordered by their counts
            out = out.index_select(0, torch.argsort(order))
    else:
        out = q.new_zeros((BH * nq, block, Dv))
        if n_rows:
            out = out.index_copy(0, order, torch.cat(pieces, dim=0))
    return out.view(B, H, nq * block, Dv)[:, :, :Lq]


@constraints(q="tensor", k="tensor", v="tensor", block_mask="tensor", block="int>=1", scale="real>0")
def block_sparse_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", block_mask: "torch.Tensor",
                           block: int, *, scale: float | None = None) -> "torch.Tensor":
    r"""Attention that computes only the kept (block x block) tiles of a block mask.

    For every query block, the key and value blocks its mask row keeps are gathered (rows are sorted by how many
    they keep and processed in chunks, each padded to its own largest count, the padding masked out), and
    :func:`torch.nn.functional.scaled_dot_product_attention` runs on the gathered tensors: the work and memory
    grow with the kept blocks, not with ``Lq * Lk``. A chunk pads no row by more than an eighth of the blocks it
    keeps, so at most 9/8 of the kept (block x block) tiles are computed. The result equals :func:`masked_dense_attention` (the
    softmax over the kept keys only) up to floating-point rounding.

    - All-true mask: the call *is* ``scaled_dot_product_attention(q, k, v, scale=scale)`` (the same bits; the
      anchor also switches to its dense kernel when the mask is full).
    - A query block whose row keeps no key block gets output zero. (The anchor's CUDA kernel skips such a row
      and leaves the output tensor, allocated with ``torch.empty``, unwritten there; zero is the value of the
      empty sum.)
    - Lengths need not be multiples of ``block``: the last block is partial and its missing positions are
      never attended.

    Differentiable in q, k and v (everything is index_select, SDPA and index_copy); follows the device and dtype
    of the inputs.

    Parameters
    ----------
    q, k, v : torch.Tensor, shapes (B, H, Lq, D), (B, H, Lk, D), (B, H, Lk, Dv)
        As for :func:`torch.nn.functional.scaled_dot_product_attention` (one dtype, one device).
    block_mask : torch.Tensor of bool, shape (nq, nk), (H, nq, nk) or (B, H, nq, nk)
        True where attention is computed; ``nq = ceil(Lq / block)``, ``nk = ceil(Lk / block)``; broadcast over
        batch and heads.
    block : int
        Tokens per block (128 in MOD-DiT), at most ``max(Lq, Lk)`` (a longer block would only pad).
    scale : float, optional
        The softmax scale; default ``1 / sqrt(D)``.

    Returns
    -------
    torch.Tensor, shape (B, H, Lq, Dv)

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.moddit import block_sparse_attention, masked_dense_attention
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k, v = (torch.randn(1, 2, 64, 8, generator=g, dtype=torch.float64) for _ in range(3))
    >>> mask = torch.rand(2, 4, 4, generator=g) < 0.5
    >>> out = block_sparse_attention(q, k, v, mask, 16)
    >>> bool(torch.allclose(out, masked_dense_attention(q, k, v, mask, 16), rtol=1e-12, atol=1e-12))
    True
    >>> full = torch.ones(4, 4, dtype=torch.bool)
    >>> dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    >>> torch.equal(block_sparse_attention(q, k, v, full, 16), dense)
    True
    """
    q, k, v = _qkv(q, k, v)
    B, H, Lq, D = q.shape
    block = _block(block, Lq, k.shape[2])
    nq, nk = -(-Lq // block), -(-k.shape[2] // block)
    mask = _block_mask(block_mask, B, H, nq, nk, q.device)
    sc = _scale(scale, D)
    if bool(mask.all()):
        return F.scaled_dot_product_attention(q, k, v, scale=scale if scale is None else sc)
    return _gathered_attention(q, k, v, mask, block, sc)


# --------------------------------------------------------------------------------------------------
# the online state
# --------------------------------------------------------------------------------------------------
@constraints(top_k="int>=1", blocks_per_frame="int>=1", warmup="int>=2", predict_T="int>=1", block="int>=1",
             threshold="prob", reg="real>=0", bd_threshold="real", column_weight="real>0", text_tokens="int>=0",
             text_position="option")
class OnlineMaskState:
    r"""MOD-DiT's masking state for one attention layer across the denoising steps of a sampling run.

    The schedule (verified in the authors' ``SparseAttentionWithMap``): steps ``0 .. warmup - 1`` run full
    attention; the block maps of steps ``warmup - 2`` and ``warmup - 1`` are measured and fitted, and at step
    ``warmup - 1`` the first mask is predicted. Later steps reuse the mask, except one full-attention step at the
    end of every interval of ``predict_T`` steps: steps ``warmup + predict_T - 1``, ``warmup + 2 predict_T - 1``,
    ... (21, 31, ... for the defaults). At those steps the history is updated only where the current mask
    computed attention, ``history <- where(mask, new_map, history)`` (blocks the mask skipped keep their old
    measurement), the history is refitted, the last two fits are extrapolated and the next mask is selected.
    Which heads keep the frame-block diagonal is decided once, at step ``warmup - 1``, from the frame-block
    coefficient of that step's fit (``<= bd_threshold``), and kept for the rest of the run: the anchor decides
    the heads' mode in ``predict_mask_from_warmup`` at the end of the warm-up and reuses it at every refit.

    Text tokens keep full attention (``text_tokens``): in a joint sequence of text and video tokens, the block
    maps, fits and predicted lines cover the video blocks only (the probabilities still a softmax over every
    key, text included), and the text blocks' rows and columns of :attr:`mask` are all True, as in the anchor's
    CogVideoX (text first) and HunyuanVideo (text last) layouts. The boundary between text and video must fall
    on a block boundary (the anchor pads the sequence to make it so).

    (In the anchor the fit of step ``warmup - 2`` comes out as zeros, because its solver runs only for steps
    above ``warmup - 2``; the first prediction there is then ``cur * (1 + 1/T)``, the same ranking as ``cur``.
    Here both warm-up maps are fitted, as the method describes.)

    Parameters
    ----------
    top_k : int
        Lines kept per head (300 for HunyuanVideo, 350 for Wan, 100 for CogVideoX in the paper; scale it with n),
        at most ``3n - 1`` for block maps of n x n blocks (checked when the maps come).
    blocks_per_frame : int
        Blocks per video frame (the frame-block diagonal), at most n.
    warmup : int, default 12
        Full-attention warm-up steps (>= 2: the first prediction needs two fits).
    predict_T : int, default 10
        Steps per interval; also the extrapolation divisor.
    block : int, default 128
        Tokens per block, at most the sequence length.
    threshold : float, default 1e-4
        Negligibility threshold of the block maps.
    reg : float, default 1e-5
        Ridge term of the fits.
    bd_threshold : float, default 1.0
        Heads whose frame-block coefficient at the end of the warm-up is ``<= bd_threshold`` keep the frame-block
        diagonal for the whole run.
    column_weight : float, default 0.5
        Factor of the column values in the ranking (:func:`extrapolate_and_select`).
    text_tokens : int, default 0
        Text tokens in the sequence, besides the video tokens; they keep full attention. With
        ``text_position='start'``, a multiple of ``block``; with ``'end'``, the video tokens before them must
        fill whole blocks.
    text_position : {'end', 'start'}, default 'end'
        Where the text tokens are: after the video tokens (HunyuanVideo) or before them (CogVideoX).

    Attributes
    ----------
    mask : torch.Tensor of bool, shape (H, n + t, n + t), or None
        The block mask for the coming sparse steps, over the whole sequence: n video blocks and
        ``t = ceil(text_tokens / block)`` text blocks, whose rows and columns are all True (None until the end of
        the warm-up).
    video_mask : torch.Tensor of bool, shape (H, n, n), or None
        Its video part: the predicted lines (and frame blocks).
    history : torch.Tensor, shape (H, n, n), or None
        The video block map as last measured, block by block.
    block_diagonal_heads : torch.Tensor of bool, shape (H,), or None
        The heads that keep the frame-block diagonal (decided at step ``warmup - 1``).
    fits : list of Result
        The last two fits of :func:`fit_line_features`.

    Examples
    --------
    >>> from numtk.torch.moddit import OnlineMaskState
    >>> state = OnlineMaskState(top_k=4, blocks_per_frame=2)
    >>> state.dense_steps(45)
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 21, 31, 41]
    """

    def __init__(self, top_k: int, blocks_per_frame: int, *, warmup: int = 12, predict_T: int = 10,
                 block: int = 128, threshold: float = THRESHOLD, reg: float = REG, bd_threshold: float = 1.0,
                 column_weight: float = 0.5, text_tokens: int = 0, text_position: str = "end") -> None:
        self.top_k = check_int(top_k, "top_k", minimum=1, maximum=C_INT_MAX)
        self.blocks_per_frame = check_int(blocks_per_frame, "blocks_per_frame", minimum=1, maximum=C_INT_MAX)
        self.warmup = check_int(warmup, "warmup", minimum=2, maximum=C_INT_MAX)
        self.predict_T = check_int(predict_T, "predict_T", minimum=1, maximum=C_INT_MAX)
        self.block = _block(block)
        self.threshold = check_real(threshold, "threshold", low=0.0, high=1.0)
        self.reg = check_real(reg, "reg", low=0.0)
        self.bd_threshold = check_real(bd_threshold, "bd_threshold")
        self.column_weight = check_real(column_weight, "column_weight", low=0.0, low_open=True)
        self.text_tokens = check_int(text_tokens, "text_tokens", minimum=0, maximum=C_INT_MAX)
        self.text_position = check_option(text_position, "text_position", TEXT_POSITIONS)
        if self.text_position == "start" and self.text_tokens % self.block:
            raise ValueError(f"`text_tokens` must be a multiple of `block` = {self.block} when the text comes first "
                             f"(the video must start on a block boundary); got {self.text_tokens}")
        self.text_blocks = -(-self.text_tokens // self.block)
        self.reset()

    def __repr__(self) -> str:
        text = f", text_tokens={self.text_tokens}, text_position={self.text_position!r}" if self.text_tokens else ""
        return (f"OnlineMaskState(top_k={self.top_k}, blocks_per_frame={self.blocks_per_frame}, warmup={self.warmup}, "
                f"predict_T={self.predict_T}, block={self.block}{text})")

    def reset(self) -> None:
        """Forget the maps, fits and mask (a new sampling run)."""
        self.mask: "torch.Tensor | None" = None
        self.history: "torch.Tensor | None" = None
        self.block_diagonal_heads: "torch.Tensor | None" = None
        self.fits: list = []
        self._recorded: int | None = None                         # the last step whose map was recorded

    @property
    def sparsity(self) -> float | None:
        """The fraction of blocks the current mask skips, text blocks included (None before the first mask)."""
        return None if self.mask is None else 1.0 - float(self.mask.float().mean())

    @property
    def video_mask(self) -> "torch.Tensor | None":
        """The video part of :attr:`mask`, shape (H, n, n) (None before the first mask)."""
        if self.mask is None or not self.text_blocks:
            return self.mask
        video = self._video_blocks(self.mask.shape[-1] - self.text_blocks)
        return self.mask[:, video, video]

    def _video_blocks(self, n: int) -> slice:
        return slice(self.text_blocks, None) if self.text_position == "start" else slice(0, n)

    def _video_tokens(self, L: int) -> slice:
        """The video tokens of a sequence of L tokens (the text's geometry checked against L)."""
        T = self.text_tokens
        if T >= L:
            raise ValueError(f"`text_tokens` = {T} must be less than the sequence length L = {L} of `q` (the rest are "
                             f"the video tokens)")
        if T and self.text_position == "end" and (L - T) % self.block:
            raise ValueError(f"`text_tokens` = {T}: with the text last, the {L - T} video tokens before it (L = {L} "
                             f"of `q`) must fill whole blocks of `block` = {self.block}; pad the video part")
        return slice(T, L) if self.text_position == "start" else slice(0, L - T)

    @constraints(step="int>=0")
    def is_dense(self, step: int) -> bool:
        """Whether step ``step`` runs full attention.

        True for the warm-up steps (``step < warmup``) and for the last step of every interval
        (``(step - warmup) % predict_T == predict_T - 1``).
        """
        step = check_int(step, "step", minimum=0, maximum=C_INT_MAX)
        return step < self.warmup or (step - self.warmup) % self.predict_T == self.predict_T - 1

    @constraints(num_steps="count")
    def dense_steps(self, num_steps: int) -> list[int]:
        """The full-attention steps among the first ``num_steps`` steps, ``range(num_steps)``."""
        num_steps = check_int(num_steps, "num_steps", minimum=1, maximum=C_INT_MAX)
        first = list(range(min(self.warmup, num_steps)))
        later = range(self.warmup + self.predict_T - 1, num_steps, self.predict_T)
        return first + list(later)

    def _check_geometry(self, n: int, source: str) -> None:
        """blocks_per_frame and top_k against the n blocks per side of the maps (known only from the data)."""
        _blocks_per_frame(self.blocks_per_frame, n, source)
        _top_k(self.top_k, n, source)

    def _fit(self, S: "torch.Tensor") -> None:
        fit = fit_line_features(S, self.blocks_per_frame, reg=self.reg)
        self.fits = (self.fits + [fit])[-2:]

    def _predict(self) -> None:
        n = self.history.shape[-1]
        sel = extrapolate_and_select(self.fits, self.top_k, self.predict_T, column_weight=self.column_weight)
        if self.block_diagonal_heads is None:                      # the end of the warm-up: decided once
            self.block_diagonal_heads = sel.block_diagonal <= self.bd_threshold
        self.mask = mask_from_lines(sel.lines, n, self.blocks_per_frame, block_diagonal=self.block_diagonal_heads,
                                    text_blocks=self.text_blocks, text_position=self.text_position)

    @constraints(step="int>=0", block_map="tensor")
    def update(self, step: int, block_map: "torch.Tensor") -> "torch.Tensor | None":
        """Record the block map measured at full-attention step ``step``; returns the mask for the next steps.

        Steps before ``warmup - 2`` record nothing; ``warmup - 2`` and ``warmup - 1`` store and fit the map (the
        latter predicts the first mask, and needs the former just before it); later dense steps merge the map
        into the history where the current mask computed attention, refit and predict. Step 0 and step
        ``warmup - 2`` reset the state first (a new sampling run).

        Parameters
        ----------
        step : int
            A full-attention step of the schedule (:meth:`is_dense`).
        block_map : torch.Tensor, shape (H, n, n), (B, H, n, n) or (n, n)
            :func:`block_sparsity_map` at that step, of the video blocks (video queries against video keys, the
            softmax over every key); a batch is averaged.

        Returns
        -------
        torch.Tensor of bool, shape (H, n + t, n + t), or None
            :attr:`mask` (t text blocks, see the class).
        """
        step = check_int(step, "step", minimum=0, maximum=C_INT_MAX)
        check_tensor(block_map, "block_map")
        if block_map.ndim not in (2, 3, 4) or block_map.shape[-1] != block_map.shape[-2] or block_map.shape[-1] == 0:
            raise ValueError(f"`block_map` must have shape (H, n, n), (B, H, n, n) or (n, n); got "
                             f"{tuple(block_map.shape)}")
        S = block_map.mean(dim=0) if block_map.ndim == 4 else block_map
        S = S if S.ndim == 3 else S[None]
        self._check_geometry(S.shape[-1], "`block_map`")
        if not self.is_dense(step):
            raise ValueError(f"`step` {step} is not a full-attention step of the schedule (see is_dense)")
        if step in (0, self.warmup - 2):
            self.reset()
        if step < self.warmup - 2:
            return self.mask
        if step == self.warmup - 1 and self._recorded != step - 1:
            got = ("none was recorded in this run" if self._recorded is None else
                   f"the last one recorded was that of step {self._recorded}")
            raise ValueError(f"`step` {step} is the last warm-up step: its prediction needs the block map of warm-up "
                             f"step {step - 1}, recorded just before it, and {got} (call update, or attention, at "
                             f"every full-attention step from step {step - 1} on, in order)")
        if self.history is not None and self.history.shape != S.shape:
            raise ValueError(f"`block_map` must have the shape of the earlier maps, {tuple(self.history.shape)}; "
                             f"got {tuple(S.shape)}")
        S = S.detach()
        if step < self.warmup:
            self._recorded = step
            self.history = S.clone()
            self._fit(self.history)
            if step == self.warmup - 1:
                self.block_diagonal_heads = None                   # decided afresh by this prediction
                self._predict()
            return self.mask
        if self.mask is None or len(self.fits) < 1:
            raise ValueError(f"`step` {step}: no mask yet; record the warm-up maps of steps {self.warmup - 2} and "
                             f"{self.warmup - 1} first")
        self._recorded = step
        self.history = torch.where(self.video_mask.to(S.device), S, self.history)
        self._fit(self.history)
        self._predict()
        return self.mask

    @constraints(q="tensor", k="tensor", v="tensor", step="int>=0")
    def attention(self, q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", step: int) -> "torch.Tensor":
        """The layer's attention at denoising step ``step``: full or block-sparse as the schedule says.

        Full steps return ``scaled_dot_product_attention(q, k, v)`` and, from step ``warmup - 2`` on, measure
        the block map of the video blocks (:func:`block_sparsity_map` of the video queries against every key,
        restricted to the video keys, averaged over the batch) and :meth:`update` with it; the other steps return
        :func:`block_sparse_attention` with the current mask (text rows and columns whole). Call it once per
        step, steps in order; step 0 starts a new run.

        Parameters
        ----------
        q, k, v : torch.Tensor, shape (B, H, L, D)
            One length for queries and keys (self-attention), so that the block map is square; the text tokens
            (``text_tokens``) first or last, as ``text_position`` says.
        step : int
            The denoising step, from 0.

        Returns
        -------
        torch.Tensor, shape (B, H, L, D)
        """
        q, k, v = _qkv(q, k, v)
        step = check_int(step, "step", minimum=0, maximum=C_INT_MAX)
        if q.shape[2] != k.shape[2]:
            raise ValueError(f"`q` and `k` must have one length (self-attention); got {q.shape[2]} and {k.shape[2]}")
        L = q.shape[2]
        _block(self.block, L, L)
        video = self._video_tokens(L)
        n = -(-(video.stop - video.start) // self.block)
        self._check_geometry(n, f"`q` ({video.stop - video.start} video tokens in blocks of {self.block})")
        if self.is_dense(step):
            out = F.scaled_dot_product_attention(q, k, v)
            if step == 0:
                self.reset()
            if step >= self.warmup - 2:
                S = block_sparsity_map(q[:, :, video], k, self.block, self.threshold)
                self.update(step, S[..., self._video_blocks(n)].mean(dim=0))
            return out
        if self.mask is None:
            raise ValueError(f"`step` {step}: no mask yet; run the warm-up steps 0 .. {self.warmup - 1} first")
        if self.mask.shape[-1] != n + self.text_blocks:
            raise ValueError(f"`q` has {L} tokens, {n + self.text_blocks} blocks of {self.block}, but the mask of this "
                             f"run covers {self.mask.shape[-1]} blocks (one run keeps one length)")
        return block_sparse_attention(q, k, v, self.mask.to(q.device), self.block)
