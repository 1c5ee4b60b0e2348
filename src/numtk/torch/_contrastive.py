"""Contrastive identifiability: von Mises-Fisher conditionals (Wood's sampler), InfoNCE and the support-corrected
InfoNCE, a frozen invertible MLP generator (re-derived from cl-ica's), and the identifiability metrics (linear R2,
orthogonal-fit R2, MCC).

The setting is the one of Zimmermann et al. (2021) and of "The Loss Is Not Enough" (arXiv 2606.04280): latents
``z`` uniform on the sphere, positives ``z~`` drawn from a conditional around ``z`` (a von Mises-Fisher
distribution, or one restricted to a cap or to a subset of axes), observations ``x = g(z)`` through a frozen
invertible network, an encoder trained with InfoNCE, and metrics that say how far the encoder is from the latents
up to a linear or an orthogonal map.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real, check_size
from numtk.torch._common import (check_like, check_reduction, check_tensor, device_generator, reduce_loss,
                                 standard_gamma, torch, torch_generator)

__all__ = ["sample_vmf", "sample_restricted_vmf", "info_nce", "support_corrected_info_nce", "support_mask",
           "invertible_mlp", "linear_r2", "orthogonal_r2", "mcc"]

_CORRECTIONS = ("restrict", "reweight")


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------
def _check_views(h1: Any, h2: Any) -> None:
    check_tensor(h1, "h1", ndim=2)
    check_tensor(h2, "h2", ndim=2)
    check_like(h2, h1, "h2", "h1")
    if h1.shape[0] < 1:
        raise ValueError("`h1` and `h2` need at least one row (one positive pair)")
    if h1.shape[1] < 1:
        raise ValueError("`h1` and `h2` need at least one column (embedding dimension)")
    check_size(h1.shape[0] ** 2, 4.0 * h1.element_size(), "h1")


def _check_tau(tau: Any, dtype: "torch.dtype") -> float:
    """tau > 0, and 1 / tau at most a quarter of the largest number of ``dtype`` (so that the logits of unit
    embeddings and their differences stay finite)."""
    tau = check_real(tau, "tau", low=0.0, low_open=True)
    smallest = 4.0 / torch.finfo(dtype).max
    if tau < smallest:
        raise ValueError(f"`tau` must be at least {smallest:.3g} for {dtype} embeddings (the logits are "
                         f"similarities / tau); got {tau!r}")
    return tau


def _check_overflow(terms: "torch.Tensor", dtype: "torch.dtype") -> None:
    """Without normalisation the logits h1 h2^T / tau of finite embeddings can overflow (then the loss would be
    NaN): refuse with a message that says what to do."""
    if terms.numel() and not bool(torch.isfinite(terms).all()):
        raise ValueError(f"the logits (similarities / `tau`) of `h1` and `h2` overflow {dtype} with "
                         "normalize=False: scale the embeddings down, raise `tau` or pass normalize=True")


def _normalize(h: "torch.Tensor") -> "torch.Tensor":
    """Rows scaled to unit norm (a zero row stays zero: its similarities are 0). Each row is first divided by its
    largest absolute entry (detached: h / |h| does not depend on a positive factor), so that the norm of rows of
    huge or tiny entries neither overflows nor underflows."""
    peak = h.detach().abs().amax(dim=1, keepdim=True).clamp_min(torch.finfo(h.dtype).tiny)
    h = h / peak
    return h / torch.linalg.vector_norm(h, dim=1, keepdim=True).clamp_min(torch.finfo(h.dtype).tiny)


def _anchor_terms(a: "torch.Tensor", b: "torch.Tensor", tau: float, same_view: bool,
                  log_weights: "torch.Tensor | None" = None) -> "torch.Tensor":
    """Per-anchor InfoNCE terms of anchors ``a`` (rows) with positives ``b`` (same rows) and negatives the other
    rows of ``b`` (and, with ``same_view``, the other rows of ``a``): ``logsumexp_j(s_ij) - s_ii``.

    ``log_weights`` (B, B) adds log w_ij to the logits of the cross-view negatives (0 on the diagonal: the
    positive keeps weight 1); ``-inf`` drops a negative.
    """
    logits = (a @ b.T) / tau
    positive = logits.diagonal()
    if log_weights is not None:
        logits = logits + log_weights
    if same_view:
        own = (a @ a.T) / tau
        own = own.masked_fill(torch.eye(a.shape[0], dtype=torch.bool, device=a.device), -math.inf)
        logits = torch.cat([logits, own], dim=1)
    return torch.logsumexp(logits, dim=1) - positive


# --------------------------------------------------------------------------------------------------
# InfoNCE
# --------------------------------------------------------------------------------------------------
@constraints(h1="tensor", h2="tensor", tau="real>0", normalize="bool", symmetric="bool",
             same_view_negatives="bool", reduction="option")
def info_nce(h1: "torch.Tensor", h2: "torch.Tensor", tau: float = 1.0, normalize: bool = True, *,
             symmetric: bool = False, same_view_negatives: bool = False,
             reduction: str = "mean") -> "torch.Tensor":
    r"""InfoNCE with in-batch negatives; with both options, SimCLR's NT-Xent.

    Row i of ``h1`` and row i of ``h2`` embed a positive pair; with similarities :math:`s_{ij} = h_{1,i}^\top
    h_{2,j}` (cosines when ``normalize``),

    .. math::

        \ell_i = -\log \frac{\exp(s_{ii}/\tau)}{\sum_{j=1}^{B} \exp(s_{ij}/\tau)},
        \qquad L = \frac{1}{B}\sum_i \ell_i,

    the cross-entropy of classifying the positive among the B rows of ``h2`` (Oord et al., 2018). It is
    re-derived from the loss of cl-ica's ``SimCLRLoss``, differing in its negatives and its similarity: cl-ica's
    normaliser holds the positive and B negatives taken from a separate batch of marginal samples, with its own
    weighting, and its similarity is a negative p-norm distance; here the negatives are the other in-batch
    positives and the similarity is the inner product (the cosine on the sphere).

    Parameters
    ----------
    h1, h2 : torch.Tensor, shape (B, k)
        Embeddings of the two views (same shape, dtype and device), B >= 1.
    tau : float, default 1.0
        The temperature, > 0. With unit-norm embeddings and latents drawn from vMF(z, kappa) conditionals the
        matched setting is ``tau = 1 / kappa``.
    normalize : bool, default True
        Scale the rows of both views to unit norm first (cosine similarities). Without it, embeddings whose
        logits overflow the dtype raise a ValueError (rather than return NaN).
    symmetric : bool, default False
        Average the two directions: :math:`\tfrac12(\ell_i(h_1 \to h_2) + \ell_i(h_2 \to h_1))`, the second
        with the rows of ``h2`` as anchors and the rows of ``h1`` as candidates.
    same_view_negatives : bool, default False
        Also count the other rows of the anchor's own view as negatives (self excluded): each anchor sees
        2B - 1 candidates, the positive and 2B - 2 negatives, as in the 2B-view NT-Xent of SimCLR (Chen et al.,
        2020). ``info_nce(h1, h2, tau, symmetric=True, same_view_negatives=True)`` is NT-Xent.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        ``'none'`` returns the B per-pair terms :math:`\ell_i` (with ``symmetric``, the average of the two
        anchors' terms of pair i); ``'mean'`` and ``'sum'`` reduce them.

    Returns
    -------
    torch.Tensor
        The loss (0-D) or the per-pair terms (B,); differentiable in both inputs.

    Notes
    -----
    Limits (the tests check them): for unit-norm, mutually orthogonal rows with ``h1 = h2`` (B <= k) every
    term is :math:`\log(1 + (B - 1)e^{-1/\tau}) \to 0` as tau -> 0; as tau -> infinity every term tends to
    :math:`\log B` (to :math:`\log(2B - 1)` with ``same_view_negatives``), and equals it exactly once
    :math:`s/\tau` rounds to zero; for independent views the mean is about :math:`\log B`.

    References
    ----------
    .. [1] A. van den Oord, Y. Li, O. Vinyals, "Representation learning with contrastive predictive coding",
           arXiv:1807.03748, 2018.
    .. [2] T. Chen, S. Kornblith, M. Norouzi, G. Hinton, "A simple framework for contrastive learning of
           visual representations" (SimCLR), ICML 2020.
    .. [3] R. S. Zimmermann, Y. Sharma, S. Schneider, M. Bethge, W. Brendel, "Contrastive learning inverts the
           data generating process", ICML 2021.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import info_nce
    >>> h = torch.eye(3, dtype=torch.float64)
    >>> info_nce(h, h, tau=0.1)                    # log(1 + 2 exp(-10)): the positives stand out
    tensor(9.0796e-05, dtype=torch.float64)
    >>> import math
    >>> float(info_nce(h, h, tau=1e20)) == math.log(3)      # log B
    True
    >>> nt_xent = info_nce(h, h.flip(0), tau=0.5, symmetric=True, same_view_negatives=True)
    >>> round(float(nt_xent), 4)
    1.766
    """
    _check_views(h1, h2)
    tau = _check_tau(tau, h1.dtype)
    normalize = check_bool(normalize, "normalize")
    symmetric = check_bool(symmetric, "symmetric")
    same_view = check_bool(same_view_negatives, "same_view_negatives")
    check_reduction(reduction)
    if normalize:
        h1, h2 = _normalize(h1), _normalize(h2)
    terms = _anchor_terms(h1, h2, tau, same_view)
    if symmetric:
        terms = 0.5 * (terms + _anchor_terms(h2, h1, tau, same_view))
    if not normalize:
        _check_overflow(terms, h1.dtype)
    return reduce_loss(terms, reduction)


def _check_mask(mask: Any, B: int, device: "torch.device") -> "torch.Tensor":
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"`support_mask` must be a torch.Tensor of bools; got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"`support_mask` must hold bools (True: the negative lies in the support); got dtype "
                        f"{mask.dtype}")
    if tuple(mask.shape) != (B, B):
        raise ValueError(f"`support_mask` must have shape ({B}, {B}) (anchors x candidates); got "
                         f"{tuple(mask.shape)}")
    if mask.device != device:
        raise ValueError(f"`support_mask` must be on the device of `h1`, {device}; got {mask.device}")
    return mask


@constraints(h1="tensor", h2="tensor", support_mask="any", tau="real>0", normalize="bool", correction="option",
             off_support_weight="prob", reduction="option")
def support_corrected_info_nce(h1: "torch.Tensor", h2: "torch.Tensor", support_mask: "torch.Tensor",
                               tau: float = 1.0, normalize: bool = True, *, correction: str = "restrict",
                               off_support_weight: float = 0.0, reduction: str = "mean") -> "torch.Tensor":
    r"""InfoNCE whose normaliser counts only the negatives inside the support of the positive conditional
    (**reconstructed**).

    With the conditional :math:`p(\tilde z \mid z)` supported on a set :math:`S(z)` (a cap, a subspace), the
    negatives outside :math:`S(z_i)` can never be positives of anchor i; plain InfoNCE still pushes them away.
    Under an axis (subspace) restriction that extra pressure lets a non-orthogonal map reach a lower InfoNCE
    than an orthogonal one (the tests check it by Monte Carlo). A cap alone is different: the truncated vMF
    still depends only on :math:`\langle z, \tilde z\rangle`, a rotation-invariant conditional, and in
    numtk's checks (d = 3, kappa from 1 to 50 with tau = 1 / kappa, caps of 0.1 to 1 rad, Monte Carlo batches
    of 1024 and 2048 pairs, linear maps scaling one axis by 0.5 to 2) no such map had a lower InfoNCE than the
    orthogonal one. The corrected loss

    .. math::

        \ell_i = -\log \frac{\exp(s_{ii}/\tau)}{\sum_{j} w_{ij} \exp(s_{ij}/\tau)},
        \qquad w_{ij} = \begin{cases} 1 & j = i \text{ or } \tilde z_j \in S(z_i)\\
                                      \omega & \text{otherwise}\end{cases}

    uses :math:`\omega = 0` (``correction='restrict'``: the normaliser runs over
    :math:`S(i) = \{j : \tilde z_j \in \operatorname{supp} p(\cdot \mid z_i)\} \cup \{i\}`) or a weight
    :math:`\omega \in [0, 1]` (``correction='reweight'``: every off-support negative gets the same constant
    weight; 1 is plain InfoNCE). The support must be known, which it is only in synthetic experiments
    (:func:`support_mask` builds it for the conditionals of :func:`sample_restricted_vmf`).

    The paper (arXiv 2606.04280) states that a support-corrected InfoNCE makes orthogonal recovery achievable
    but not uniquely selected; its exact form is not published with code, so both forms here are
    reconstructions: the restriction of the normaliser follows the statement, the reweighting is the alternative
    it leaves open.

    Parameters
    ----------
    h1, h2 : torch.Tensor, shape (B, k)
        Embeddings of the anchors and of their positives (same shape, dtype and device).
    support_mask : torch.Tensor of bool, shape (B, B)
        ``support_mask[i, j]`` is True when candidate j (row j of ``h2``) lies in the support of anchor i's
        conditional. The diagonal is treated as True whatever it holds (the positive is always counted).
    tau : float, default 1.0
        The temperature, > 0.
    normalize : bool, default True
        Scale the rows to unit norm first.
    correction : {'restrict', 'reweight'}, default 'restrict'
        Drop the off-support negatives, or weight them by ``off_support_weight``.
    off_support_weight : float in [0, 1], default 0.0
        The weight :math:`\omega` of off-support negatives under ``'reweight'`` (ignored by ``'restrict'``).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        As in :func:`info_nce`.

    Returns
    -------
    torch.Tensor
        The loss (0-D) or the per-anchor terms (B,).

    See Also
    --------
    info_nce : the same loss with every negative counted (an all-True mask gives it exactly).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import info_nce, support_corrected_info_nce
    >>> h1 = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    >>> h2 = torch.tensor([[0.8, 0.6], [0.6, 0.8], [-1.0, 0.0]], dtype=torch.float64)
    >>> full = torch.ones(3, 3, dtype=torch.bool)
    >>> bool(support_corrected_info_nce(h1, h2, full) == info_nce(h1, h2))
    True
    >>> only_self = torch.eye(3, dtype=torch.bool)
    >>> support_corrected_info_nce(h1, h2, only_self)          # no negatives left: log 1
    tensor(0., dtype=torch.float64)
    """
    _check_views(h1, h2)
    B = h1.shape[0]
    mask = _check_mask(support_mask, B, h1.device)
    tau = _check_tau(tau, h1.dtype)
    normalize = check_bool(normalize, "normalize")
    correction = check_option(correction, "correction", _CORRECTIONS)
    omega = check_real(off_support_weight, "off_support_weight", low=0.0, high=1.0)
    check_reduction(reduction)
    if normalize:
        h1, h2 = _normalize(h1), _normalize(h2)
    keep = mask | torch.eye(B, dtype=torch.bool, device=h1.device)
    off = -math.inf if correction == "restrict" or omega == 0.0 else math.log(omega)
    log_weights = torch.zeros((B, B), dtype=h1.dtype, device=h1.device).masked_fill(~keep, off)
    terms = _anchor_terms(h1, h2, tau, False, log_weights)
    if not normalize:
        _check_overflow(terms, h1.dtype)
    return reduce_loss(terms, reduction)


@constraints(z="tensor", z_tilde="tensor", max_angle="real>=0", axes="option", tol="real>=0")
def support_mask(z: "torch.Tensor", z_tilde: "torch.Tensor", max_angle: float = math.pi, *, axes: Any = None,
                 tol: float = 0.0) -> "torch.Tensor":
    r"""The support mask of restricted conditionals (those of :func:`sample_restricted_vmf`), for
    :func:`support_corrected_info_nce`: ``mask[i, j]`` says whether candidate :math:`\tilde z_j` lies in the
    support of anchor i's conditional.

    The cap restriction gives :math:`\langle z_i, \tilde z_j\rangle \ge \cos\theta_{max}`. The axes restriction
    (the positive moves only the coordinates in ``axes``) gives the sub-sphere on which the other coordinates equal
    those of :math:`z_i`; an in-batch candidate lies on it with probability zero, so the mask accepts the
    candidates whose fixed coordinates are within ``tol`` (Euclidean distance) of the anchor's: a tolerance that
    stands for the support (**reconstructed**; tol = 0 keeps exact matches only). Both conditions combine.

    Parameters
    ----------
    z, z_tilde : torch.Tensor, shape (B, d)
        Anchor latents and positive latents (same shape, dtype and device); rows are scaled to unit norm first
        (a zero row is an error).
    max_angle : float, default pi
        The cap's half-angle in radians, >= 0 (pi or more: no cap).
    axes : sequence of int, optional
        The axes the positives move along (the others are fixed); None: all axes move.
    tol : float, default 0.0
        The tolerance on the fixed coordinates, >= 0 (used with ``axes``).

    Returns
    -------
    torch.Tensor of bool, shape (B, B)
        The mask (its diagonal is set True: the positive is always in the support).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import support_mask
    >>> z = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.0, 0.8]])
    >>> support_mask(z, z, 0.5)
    tensor([[ True, False, False],
            [False,  True, False],
            [False, False,  True]])
    >>> support_mask(z, z, axes=[0, 1], tol=0.1)      # rows 0 and 1 share the fixed coordinate z_2 = 0
    tensor([[ True,  True, False],
            [ True,  True, False],
            [False, False,  True]])
    """
    check_tensor(z, "z", ndim=2)
    check_tensor(z_tilde, "z_tilde", ndim=2)
    check_like(z_tilde, z, "z_tilde", "z")
    max_angle = check_real(max_angle, "max_angle", low=0.0)
    axes = _check_axes(axes, z.shape[1])
    tol = check_real(tol, "tol", low=0.0)
    B = z.shape[0]
    check_size(B * B, 3.0 * z.element_size(), "z")
    z, z_tilde = _unit_rows(z.detach(), "z", z.dtype), _unit_rows(z_tilde.detach(), "z_tilde", z.dtype)
    mask = torch.ones((B, B), dtype=torch.bool, device=z.device)
    if max_angle < math.pi:
        mask &= (z @ z_tilde.T) >= math.cos(max_angle)
    if axes is not None:
        fixed = [i for i in range(z.shape[1]) if i not in axes]
        if fixed:
            idx = torch.tensor(fixed, device=z.device)
            mask &= torch.cdist(z[:, idx], z_tilde[:, idx]) <= tol
    return mask | torch.eye(B, dtype=torch.bool, device=z.device)


# --------------------------------------------------------------------------------------------------
# the von Mises-Fisher sampler (Wood, 1994), vectorised
# --------------------------------------------------------------------------------------------------
#: rounds of a rejection loop before giving up (each round draws for every row still open)
_MAX_ROUNDS = 10_000
#: the most candidates per open row, and in all, in one round of the truncated sampler
_MAX_PER_ROW = 4096
_MAX_CANDIDATES = 2**22


def _work_dtype(device: "torch.device") -> "torch.dtype":
    """float64 where the device has it (the sampler's W is close to 1 at large kappa)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _beta_symmetric(a: float, n: int, gen: "torch.Generator", dtype: "torch.dtype",
                    device: "torch.device") -> "torch.Tensor":
    """n draws of Beta(a, a) as G1 / (G1 + G2), the gamma variates from :func:`standard_gamma` with ``gen``."""
    g = standard_gamma(a, (2, n), gen, dtype=dtype, device=device)
    return g[0] / (g[0] + g[1])


def _w_sphere2(kappa: "torch.Tensor", gen: "torch.Generator") -> "tuple[torch.Tensor, torch.Tensor]":
    """d = 3: W by inversion of its distribution function, no rejection: with r uniform on [0, 1),
    1 - W = -log(1 + r expm1(-2 kappa)) / kappa (the limit 2 r at kappa = 0). With x = r expm1(-2 kappa) in
    (-1, 0], the logarithm is log1p(x) while |x| < 1/2 (small kappa, or small r: no cancellation however small
    kappa is) and the log of a sum of two positive terms, (1 - r) + r exp(-2 kappa), above (then kappa > 1/3,
    exp(-2 kappa) is exact to rounding and 1 - r is exact), so that neither tail cancels."""
    r = torch.rand(kappa.shape, generator=gen, dtype=kappa.dtype, device=kappa.device)
    safe = kappa.clamp_min(torch.finfo(kappa.dtype).tiny)
    x = r * torch.expm1(-2.0 * safe)
    log_arg = torch.where(x > -0.5, torch.log1p(x), torch.log((1.0 - r) + r * torch.exp(-2.0 * safe)))
    one_minus_w = torch.where(kappa > 0, -log_arg / safe, 2.0 * r).clamp(0.0, 2.0)
    return 1.0 - one_minus_w, torch.sqrt(one_minus_w * (2.0 - one_minus_w))


def _wood_w(kappa: "torch.Tensor", d: int, gen: "torch.Generator") -> "tuple[torch.Tensor, torch.Tensor]":
    """Wood's rejection sampler of the cosine W = <mu, x> of vMF(mu, kappa) on S^(d-1), one per entry of
    ``kappa`` (float64, >= 0), in its stable form; returns (W, sqrt(1 - W^2)).

    b = (d - 1) / (2 kappa + sqrt(4 kappa^2 + (d - 1)^2)) (the textbook (-2 kappa + sqrt(...)) / (d - 1)
    without its cancellation), x0 = (1 - b) / (1 + b), Z ~ Beta((d-1)/2, (d-1)/2),
    W = (1 - (1 + b) Z) / (1 - (1 - b) Z), accepted when
    kappa W + (d - 1) log(1 - x0 W) - kappa x0 - (d - 1) log(1 - x0^2) >= log U.
    Every quantity near 0 is formed without subtracting numbers near 1: 1 - W = 2 b Z / (1 - (1 - b) Z),
    1 + W = 2 (1 - Z) / (1 - (1 - b) Z), 1 - x0 = 2 b / (1 + b), 1 - x0^2 = 4 b / (1 + b)^2.
    """
    if d == 3:
        return _w_sphere2(kappa, gen)
    dtype, device = kappa.dtype, kappa.device
    m1 = float(d - 1)
    # b = (d - 1) / (2 kappa + sqrt(4 kappa^2 + (d - 1)^2)), written with hypot so that no square overflows
    b = (0.5 * m1) / (kappa + torch.hypot(kappa, torch.full_like(kappa, 0.5 * m1)))
    one_minus_x0 = 2.0 * b / (1.0 + b)
    x0 = 1.0 - one_minus_x0
    log_1mx02 = torch.log(4.0 * b) - 2.0 * torch.log1p(b)
    n = kappa.numel()
    w_out = torch.empty(n, dtype=dtype, device=device)
    s_out = torch.empty(n, dtype=dtype, device=device)
    todo = torch.arange(n, device=device)
    per_row = 1
    for _ in range(_MAX_ROUNDS):
        m = todo.numel()
        if m == 0:
            break
        # per_row proposals for every open row, the first accepted one kept: few rounds of Python overhead
        rows = todo.repeat_interleave(per_row)
        q = rows.numel()
        z = _beta_symmetric(m1 / 2.0, q, gen, dtype, device)
        bb, k, omx0, x0t = b[rows], kappa[rows], one_minus_x0[rows], x0[rows]
        den = 1.0 - (1.0 - bb) * z
        one_minus_w = 2.0 * bb * z / den
        one_plus_w = 2.0 * (1.0 - z) / den
        log_accept = (k * (omx0 - one_minus_w) + m1 * (torch.log(omx0 + x0t * one_minus_w) - log_1mx02[rows]))
        u = torch.rand(q, generator=gen, dtype=dtype, device=device)
        ok = (torch.log(u) <= log_accept).view(m, per_row)
        hit = ok.any(dim=1)
        first = ok.to(torch.int8).argmax(dim=1) + per_row * torch.arange(m, device=device)
        pick = first[hit]
        idx = todo[hit]
        w_out[idx] = 1.0 - one_minus_w[pick]
        s_out[idx] = torch.sqrt((one_minus_w[pick] * one_plus_w[pick]).clamp_min(0.0))
        rate = float(ok.sum()) / ok.numel()
        todo = todo[~hit]
        per_row = int(min(64, max(1, math.ceil(1.5 / max(rate, 1e-3)))))
    else:  # pragma: no cover - Wood's envelope accepts more than half of the proposals
        raise RuntimeError("the von Mises-Fisher sampler did not finish")
    return w_out, s_out


def _rotate_from_e1(x: "torch.Tensor", mu: "torch.Tensor") -> "torch.Tensor":
    """Row-wise orthogonal maps Q_i with Q_i e1 = mu_i applied to x_i (a Householder reflection towards -sign(mu_0)
    mu, then negated, so that the reflection vector never cancels)."""
    s = torch.where(mu[:, :1] >= 0, 1.0, -1.0).to(mu.dtype)
    u = s * mu
    u[:, 0] += 1.0
    coef = 2.0 * (u * x).sum(dim=1, keepdim=True) / (u * u).sum(dim=1, keepdim=True)
    return -s * (x - coef * u)


def _vmf_rows(mu: "torch.Tensor", kappa: "torch.Tensor", gen: "torch.Generator",
              threshold: "torch.Tensor | None" = None) -> "torch.Tensor":
    """One vMF(mu_i, kappa_i) draw per row of ``mu`` (unit rows, work dtype), conditioned on
    <mu_i, x> >= threshold_i when ``threshold`` is given (rejection on W only: the direction in the tangent
    space is drawn once, after W)."""
    n, d = mu.shape
    dtype, device = mu.dtype, mu.device
    if threshold is None:
        w, s = _wood_w(kappa, d, gen)
    else:
        w = torch.empty(n, dtype=dtype, device=device)
        s = torch.empty(n, dtype=dtype, device=device)
        todo = torch.arange(n, device=device)
        per_row = 4
        for _ in range(_MAX_ROUNDS):
            m = todo.numel()
            if m == 0:
                break
            kk = kappa[todo].repeat_interleave(per_row)
            wc, sc = _wood_w(kk, d, gen)
            wc, sc = wc.view(m, per_row), sc.view(m, per_row)
            ok = wc >= threshold[todo, None]
            hit = ok.any(dim=1)
            first = ok.to(torch.int8).argmax(dim=1)
            rows = torch.arange(m, device=device)
            w[todo[hit]] = wc[rows, first][hit]
            s[todo[hit]] = sc[rows, first][hit]
            rate = float(ok.sum()) / ok.numel()
            todo = todo[~hit]
            if rate == 0.0 and todo.numel() and (per_row == _MAX_PER_ROW or ok.numel() >= 2**20):
                raise ValueError(f"`max_angle` is too small for `kappa`: no proposal of {ok.numel()} fell in the "
                                 "cap (widen the cap or raise kappa)")
            # draw more candidates per row when the cap accepts few (up to _MAX_PER_ROW per row)
            per_row = int(min(_MAX_PER_ROW, max(1, math.ceil(2.0 / max(rate, 1e-4)))))
            # and at most about 4 million candidates per round (memory), however many rows are open
            per_row = max(1, min(per_row, _MAX_CANDIDATES // max(1, todo.numel())))
        else:
            raise ValueError("`max_angle` is too small for `kappa`: the truncated sampler accepted too few "
                             "proposals (widen the cap or raise kappa)")
    return _rotate_from_e1(_in_frame(w, s, d, gen), mu)


def _in_frame(w: "torch.Tensor", s: "torch.Tensor", d: int, gen: "torch.Generator") -> "torch.Tensor":
    """Draws around e1: [W, sqrt(1 - W^2) v] with v uniform on the sphere of the other d - 1 axes."""
    v = torch.randn(w.shape[0], d - 1, generator=gen, dtype=w.dtype, device=w.device)
    v = v / torch.linalg.vector_norm(v, dim=1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    return torch.cat([w[:, None], s[:, None] * v], dim=1)


#: concentrations beyond this are sampled at this value: the draws equal mu to double precision either way
_KAPPA_MAX = 1e300


def _check_kappa(kappa: Any) -> float:
    return min(check_real(kappa, "kappa", low=0.0), _KAPPA_MAX)


def _unit_rows(t: "torch.Tensor", name: str, work: "torch.dtype") -> "torch.Tensor":
    """Rows scaled to unit norm in ``work``; each row is first divided by its largest absolute entry, so that
    rows of tiny (1e-300) or huge (1e300) entries have a norm that neither underflows nor overflows."""
    t = t.to(work)
    if t.numel() == 0:
        return t
    peak = t.abs().amax(dim=-1, keepdim=True)
    if not bool((peak > 0).all()):
        raise ValueError(f"`{name}` must have non-zero rows (they are directions on the sphere)")
    t = t / peak
    return t / torch.linalg.vector_norm(t, dim=-1, keepdim=True)


@constraints(mu="tensor", kappa="real>=0", n="count", rng="rng")
def sample_vmf(mu: "torch.Tensor", kappa: float, n: int, *, rng: Any = None) -> "torch.Tensor":
    r"""Draws from the von Mises-Fisher distribution on the sphere :math:`S^{d-1}`, by Wood's rejection sampler.

    The density is :math:`C_d(\kappa) \exp(\kappa \mu^\top x)` with respect to the uniform measure. Wood's
    (1994) sampler draws the cosine :math:`W = \mu^\top x` by rejection from a Beta-based envelope, then a
    uniform direction orthogonal to :math:`\mu`. It is written in its numerically stable form (the envelope's
    parameter :math:`b = (d - 1) / (2\kappa + \sqrt{4\kappa^2 + (d-1)^2})`, the acceptance test in log space,
    :math:`1 - W` formed without cancellation) and runs in float64 internally, so d = 128 with
    :math:`\kappa = 10^4` (and far beyond) neither overflows nor loses the small angles; ``kappa = 0`` is the
    uniform distribution.

    Parameters
    ----------
    mu : torch.Tensor, shape (d,) or (m, d)
        The mean direction(s), d >= 2; rows are scaled to unit norm (a zero row is an error).
    kappa : float
        The concentration, >= 0.
    n : int
        The number of draws (per mean direction), >= 1.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        The random source (a torch.Generator must be on ``mu``'s device).

    Returns
    -------
    torch.Tensor, shape (n, d) or (n, m, d)
        Unit vectors in ``mu``'s dtype and on its device.

    Notes
    -----
    The mean resultant length is :math:`E[\mu^\top x] = I_{d/2}(\kappa) / I_{d/2-1}(\kappa)` (0.80009 at d = 3,
    kappa = 5; 0.79552 at d = 10, kappa = 20); the tests compare with it and with
    :class:`scipy.stats.vonmises_fisher`. The Beta variates of the envelope are ratios of gamma variates from
    torch's gamma sampler driven by ``rng``'s generator (Marsaglia and Tsang's method written in torch where that
    sampler is unavailable), so that every draw comes from ``rng``. On :math:`S^2` (d = 3) W is drawn without
    rejection, by inverting its distribution function :math:`1 - W = -\log(1 - r + r e^{-2\kappa})/\kappa`.

    References
    ----------
    .. [1] A. T. A. Wood, "Simulation of the von Mises Fisher distribution", Communications in Statistics -
           Simulation and Computation 23(1), 157-164, 1994.
    .. [2] G. Marsaglia, W. W. Tsang, "A simple method for generating gamma variables", ACM TOMS 26(3), 2000.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import sample_vmf
    >>> mu = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    >>> x = sample_vmf(mu, 5.0, 20000, rng=0)
    >>> x.shape
    torch.Size([20000, 3])
    >>> round(float((x @ mu).mean()), 2)             # I_{3/2}(5) / I_{1/2}(5) = 0.80009
    0.8
    """
    check_tensor(mu, "mu")
    if mu.ndim not in (1, 2):
        raise ValueError(f"`mu` must be a 1-D or 2-D tensor; got {mu.ndim}-D with shape {tuple(mu.shape)}")
    d = mu.shape[-1]
    if d < 2:
        raise ValueError(f"`mu` must have d >= 2 entries (a direction in R^d, d >= 2); got d = {d}")
    kappa = _check_kappa(kappa)
    n = check_int(n, "n", minimum=1)
    rows = n * (mu.shape[0] if mu.ndim == 2 else 1)
    check_size(rows, 8.0 * (3 * d + 16), "n")
    gen = device_generator(rng, mu.device, tensor="`mu`")
    work = _work_dtype(mu.device)
    unit = _unit_rows(mu.detach(), "mu", work)
    kap = torch.full((rows,), kappa, dtype=work, device=mu.device)
    if mu.ndim == 1:
        # one mean direction: draw around e1, then the one reflection Q (Q e1 = mu) row by row, O(n d)
        w, s = _wood_w(kap, d, gen)
        out = _rotate_from_e1(_in_frame(w, s, d, gen), unit.expand(rows, d))
    else:
        out = _vmf_rows(unit.expand(n, *unit.shape).reshape(rows, d), kap, gen)
    return out.reshape((n,) + tuple(mu.shape)).to(mu.dtype)


def _check_axes(axes: Any, d: int) -> "list[int] | None":
    if axes is None:
        return None
    if isinstance(axes, (str, bytes)) or not hasattr(axes, "__iter__"):
        raise TypeError(f"`axes` must be None or a sequence of ints; got {type(axes).__name__}")
    out = [check_int(a, "axes", minimum=-d, maximum=d - 1) % d for a in axes]
    if len(set(out)) != len(out) or len(out) < 2:
        raise ValueError(f"`axes` must name at least 2 distinct axes of the d = {d} latent dimensions; got "
                         f"{list(axes)!r}")
    return sorted(out)


@constraints(z="tensor", kappa="real>=0", max_angle="real>0", rng="rng", axes="option")
def sample_restricted_vmf(z: "torch.Tensor", kappa: float, max_angle: float, *, rng: Any = None,
                          axes: Any = None) -> "torch.Tensor":
    r"""One positive per anchor from a vMF conditional with restricted support: truncated to the cap
    :math:`\langle \tilde z, z\rangle \ge \cos\theta_{max}`, and optionally moving only some axes.

    Without ``axes`` the draw is vMF(z_i, kappa) conditioned on the cap, by rejection on the cosine W only (the
    direction orthogonal to z_i is drawn once, after W is accepted; rows whose cap accepts few proposals get
    many candidates per round). ``max_angle >= pi`` is the plain vMF conditional (full support).

    With ``axes = A`` the positive keeps the coordinates of z outside A and moves those in A on the sub-sphere
    of radius :math:`r = \|z_A\|`: this is the vMF density :math:`\exp(\kappa\langle z, \tilde z\rangle)`
    restricted to :math:`\{\tilde z \in S^{d-1} : \tilde z_{A^c} = z_{A^c}\}`, that is
    :math:`\tilde z_A = r v` with :math:`v \sim \mathrm{vMF}(z_A / r, \kappa r^2)` on :math:`S^{|A|-1}`
    (a perturbation restricted to a subset of axes), again truncated to the cap.

    Parameters
    ----------
    z : torch.Tensor, shape (B, d)
        The anchors (rows scaled to unit norm), d >= 2.
    kappa : float
        The concentration, >= 0.
    max_angle : float
        The cap's half-angle in radians, > 0; pi or more: no truncation.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        The random source.
    axes : sequence of int, optional
        The axes the positive may move along (at least 2, distinct); None: all.

    Returns
    -------
    torch.Tensor, shape (B, d)
        Unit rows, in ``z``'s dtype and on its device, with :math:`\langle \tilde z_i, z_i\rangle \ge
        \cos\theta_{max}`.

    Raises
    ------
    ValueError
        When the cap is so small for ``kappa`` that rejection cannot fill it.

    Examples
    --------
    >>> import math, torch
    >>> from numtk.torch.contrastive import sample_restricted_vmf
    >>> z = torch.nn.functional.normalize(torch.randn(1000, 3, dtype=torch.float64), dim=1)
    >>> zt = sample_restricted_vmf(z, 10.0, 0.3, rng=0)
    >>> bool(((z * zt).sum(1) >= math.cos(0.3)).all())
    True
    >>> zt = sample_restricted_vmf(z, 10.0, math.pi, rng=0, axes=[0, 1])
    >>> bool(torch.allclose(zt[:, 2], z[:, 2], rtol=0, atol=1e-15))       # the third coordinate never moves
    True
    """
    check_tensor(z, "z", ndim=2)
    B, d = z.shape
    if d < 2:
        raise ValueError(f"`z` must have d >= 2 columns; got d = {d}")
    kappa = _check_kappa(kappa)
    max_angle = check_real(max_angle, "max_angle", low=0.0, low_open=True)
    axes = _check_axes(axes, d)
    check_size(B, 8.0 * (3 * d + 16), "z")
    gen = device_generator(rng, z.device, tensor="`z`")
    work = _work_dtype(z.device)
    if B == 0:
        return z.clone()
    unit = _unit_rows(z.detach(), "z", work)
    if axes is None:
        sub, r2 = unit, torch.ones(B, dtype=work, device=z.device)
    else:
        idx = torch.tensor(axes, device=z.device)
        zA = unit[:, idx]
        r2 = (zA * zA).sum(dim=1)
        # a row with z_A = 0 cannot move: any direction, scaled by r = 0
        sub = torch.where(r2[:, None] > 0, zA / r2.clamp_min(1e-300).sqrt()[:, None],
                          torch.nn.functional.one_hot(torch.zeros(B, dtype=torch.long, device=z.device),
                                                      len(axes)).to(work))
    kap = kappa * r2
    threshold = None
    if max_angle < math.pi:
        # <z~, z> = 1 - r^2 (1 - <u, v>) >= cos(theta)  <=>  <u, v> >= 1 - (1 - cos(theta)) / r^2
        one_minus_cos = 2.0 * math.sin(max_angle / 2.0) ** 2
        threshold = 1.0 - one_minus_cos / r2.clamp_min(1e-300)
        threshold = threshold.clamp_min(-1.0)
    v = _vmf_rows(sub, kap, gen, threshold)
    if axes is None:
        out = v
    else:
        out = unit.clone()
        out[:, idx] = v * r2.sqrt()[:, None]
    return out.to(z.dtype)


# --------------------------------------------------------------------------------------------------
# the generator: a frozen random invertible leaky-ReLU MLP
# --------------------------------------------------------------------------------------------------
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _check_dtype(dtype: Any) -> "torch.dtype":
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point or dtype.is_complex:
        raise TypeError(f"`dtype` must be a floating torch.dtype ({', '.join('torch.' + n for n in _FLOAT_DTYPES)});"
                        f" got {dtype!r}")
    return dtype


@constraints(dim="count", layers="count", rng="rng", negative_slope="real>0", candidates="count", dtype="option")
def invertible_mlp(dim: int, layers: int = 3, *, rng: Any = None, negative_slope: float = 0.2,
                   candidates: int = 16, dtype: Any = None) -> "torch.nn.Sequential":
    r"""A frozen random invertible MLP ``g: R^dim -> R^dim``, a generator like those of cl-ica's experiments.

    ``layers`` square linear maps without bias, with a leaky ReLU (slope ``negative_slope``) between
    consecutive ones and none after the last: every piece is a bijection, so g is invertible. The weight rule is
    re-derived from cl-ica's, differing in the selection and the scaling: cl-ica scales each matrix's columns to
    unit norm and redraws until the condition number is below the 25 % quantile of 10000 random draws; here each
    weight is the best-conditioned of ``candidates`` matrices with entries uniform in [-1, 1], scaled to unit
    absolute determinant so that the layers neither blow up nor shrink volumes. The parameters do not require
    gradients, the module is in eval mode, and building it leaves torch's global random state untouched.

    Parameters
    ----------
    dim : int
        The dimension, >= 1.
    layers : int, default 3
        The number of linear maps, >= 1.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        The random source of the weights.
    negative_slope : float, default 0.2
        The slope of the leaky ReLU for negative inputs, > 0 (cl-ica uses 0.2).
    candidates : int, default 16
        Random draws per layer among which the best-conditioned is kept.
    dtype : torch.dtype, optional
        The parameters' dtype (default float32).

    Returns
    -------
    torch.nn.Sequential
        ``Linear, LeakyReLU, Linear, ..., Linear``, frozen.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import invertible_mlp
    >>> g = invertible_mlp(3, layers=3, rng=0, dtype=torch.float64)
    >>> [type(m).__name__ for m in g]
    ['Linear', 'LeakyReLU', 'Linear', 'LeakyReLU', 'Linear']
    >>> all(not p.requires_grad for p in g.parameters())
    True
    >>> W = g[0].weight
    >>> round(abs(float(torch.linalg.det(W))), 12)
    1.0
    """
    dim = check_int(dim, "dim", minimum=1)
    layers = check_int(layers, "layers", minimum=1)
    slope = check_real(negative_slope, "negative_slope", low=0.0, low_open=True)
    candidates = check_int(candidates, "candidates", minimum=1, maximum=4096)
    dtype = torch.float32 if dtype is None else _check_dtype(dtype)
    check_size(candidates, 8.0 * dim * dim * 3, "dim")
    check_size(layers, 8.0 * dim * dim + 64, "layers")
    gen = torch_generator(rng)
    mods: list = []
    for i in range(layers):
        draws = torch.rand(candidates, dim, dim, generator=gen, dtype=torch.float64) * 2.0 - 1.0
        sv = torch.linalg.svdvals(draws)
        cond = sv[:, 0] / sv[:, -1].clamp_min(1e-300)
        best = int(torch.argmin(cond))
        W = draws[best]
        W = W / torch.exp(torch.log(sv[best]).mean())            # |det W| = 1
        # skip_init: no default initialisation, which would draw from torch's global generator
        lin = torch.nn.utils.skip_init(torch.nn.Linear, dim, dim, bias=False, dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(W.to(dtype))
        mods.append(lin)
        if i < layers - 1:
            mods.append(torch.nn.LeakyReLU(slope))
    net = torch.nn.Sequential(*mods)
    net.requires_grad_(False)
    return net.eval()


# --------------------------------------------------------------------------------------------------
# identifiability metrics
# --------------------------------------------------------------------------------------------------
def _as_matrix(t: Any, name: str) -> np.ndarray:
    check_tensor(t, name, ndim=2)
    return t.detach().to("cpu", torch.float64).numpy()


def _pair_matrices(h: Any, z: Any, *, same_width: bool = False, min_rows: int = 2) -> "tuple[np.ndarray, np.ndarray]":
    H = _as_matrix(h, "h")
    Z = _as_matrix(z, "z")
    if Z.shape[0] != H.shape[0]:
        raise ValueError(f"`z` must have as many rows as `h`, {H.shape[0]}; got {Z.shape[0]}")
    if H.shape[0] < min_rows:
        raise ValueError(f"`h` and `z` need at least {min_rows} rows (samples); got {H.shape[0]}")
    if H.shape[1] < 1 or Z.shape[1] < 1:
        raise ValueError("`h` and `z` need at least one column")
    if same_width and Z.shape[1] != H.shape[1]:
        raise ValueError(f"`z` must have as many columns as `h`, {H.shape[1]} (an orthogonal map is square); "
                         f"got {Z.shape[1]}")
    return H, Z


def _r2(Z: np.ndarray, Zhat: np.ndarray) -> float:
    """scikit-learn's r2_score, uniform average over the columns (a constant column: 1 if fitted exactly, else
    0, as its ``force_finite``)."""
    sse = ((Z - Zhat) ** 2).sum(axis=0)
    sst = ((Z - Z.mean(axis=0)) ** 2).sum(axis=0)
    scores = np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), np.where(sse == 0, 1.0, 0.0))
    return float(scores.mean())


@constraints(h="tensor", z="tensor")
def linear_r2(h: "torch.Tensor", z: "torch.Tensor") -> float:
    r"""The R2 of the best affine prediction of the latents from the representation: how far ``h`` is from
    ``z`` up to an invertible linear map.

    Least squares of ``z`` on ``[h, 1]`` in float64, then the coefficient of determination of every column of
    ``z``, averaged (``sklearn.linear_model.LinearRegression().fit(h, z)`` and ``r2_score``, the metric of
    cl-ica).

    Parameters
    ----------
    h : torch.Tensor, shape (n, k)
        The representation.
    z : torch.Tensor, shape (n, d)
        The latents, n >= 2.

    Returns
    -------
    float
        The mean R2, <= 1 (1: z is an affine function of h).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import linear_r2
    >>> z = torch.randn(200, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> A = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.5, 0.0], [1.0, 0.0, 3.0]], dtype=torch.float64)
    >>> round(linear_r2(z @ A.T + 1.0, z), 12)
    1.0
    """
    H, Z = _pair_matrices(h, z)
    X = np.hstack([H, np.ones((H.shape[0], 1))])
    coef, *_ = np.linalg.lstsq(X, Z, rcond=None)
    return _r2(Z, X @ coef)


@constraints(h="tensor", z="tensor")
def orthogonal_r2(h: "torch.Tensor", z: "torch.Tensor") -> float:
    r"""The R2 of the best similarity fit of the latents from the representation: how far ``h`` is from ``z``
    up to an orthogonal map (and a scale and a shift).

    Both are centred and scaled to unit Frobenius norm; :func:`scipy.linalg.orthogonal_procrustes` gives the
    orthogonal R minimising :math:`\|H R - Z\|_F` and the optimal scale (the sum of the singular values of
    :math:`H^\top Z`); the prediction :math:`(s H R)\|Z_c\|_F + \bar z` is scored by R2 as in
    :func:`linear_r2`. A representation ``c Q z + b`` (Q orthogonal, c != 0) scores 1: the scale is normalised
    away, so an isotropic rescaling is not mistaken for a non-orthogonal map; an anisotropic linear map scores
    less than 1 although its :func:`linear_r2` is 1.

    Parameters
    ----------
    h, z : torch.Tensor, shape (n, d)
        The representation and the latents, same width (an orthogonal map is square), n >= 2.

    Returns
    -------
    float
        The mean R2, <= 1.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import orthogonal_r2
    >>> z = torch.randn(500, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> Q, _ = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    >>> round(orthogonal_r2(5.0 * z @ Q.T - 2.0, z), 12)
    1.0
    >>> orthogonal_r2(z * torch.tensor([4.0, 1.0, 0.25], dtype=torch.float64), z) < 0.8
    True
    """
    from scipy.linalg import orthogonal_procrustes

    H, Z = _pair_matrices(h, z, same_width=True)
    Hc, Zc = H - H.mean(axis=0), Z - Z.mean(axis=0)
    nh, nz = np.linalg.norm(Hc), np.linalg.norm(Zc)
    if nz == 0 or nh == 0:  # a constant z or h: the best fit is z's mean
        return _r2(Z, np.broadcast_to(Z.mean(axis=0), Z.shape))
    Hn, Zn = Hc / nh, Zc / nz
    R, scale = orthogonal_procrustes(Hn, Zn)
    return _r2(Z, scale * (Hn @ R) * nz + Z.mean(axis=0))


@constraints(h="tensor", z="tensor")
def mcc(h: "torch.Tensor", z: "torch.Tensor") -> float:
    r"""The mean correlation coefficient: Pearson correlations between the components of ``h`` and ``z``,
    matched one to one by :func:`scipy.optimize.linear_sum_assignment` (largest total absolute correlation),
    averaged over the matched pairs (the disentanglement metric of cl-ica and of the ICA literature).

    Parameters
    ----------
    h : torch.Tensor, shape (n, k)
        The representation.
    z : torch.Tensor, shape (n, d)
        The latents, n >= 2; min(k, d) pairs are matched.

    Returns
    -------
    float
        The mean absolute correlation of the matched pairs, in [0, 1] (a constant column correlates 0).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import mcc
    >>> z = torch.randn(300, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    >>> round(mcc(-2.0 * z[:, [2, 0, 1]] + 1.0, z), 12)       # a permutation and a scaling: 1
    1.0
    """
    from scipy.optimize import linear_sum_assignment

    H, Z = _pair_matrices(h, z)
    Hc, Zc = H - H.mean(axis=0), Z - Z.mean(axis=0)
    sh, sz = np.linalg.norm(Hc, axis=0), np.linalg.norm(Zc, axis=0)
    C = (Hc.T @ Zc) / np.outer(np.where(sh > 0, sh, 1.0), np.where(sz > 0, sz, 1.0))
    C = np.abs(np.clip(C, -1.0, 1.0))
    rows, cols = linear_sum_assignment(C, maximize=True)
    return float(C[rows, cols].mean())
