"""Contrastive identifiability: von Mises-Fisher conditionals (Wood's sampler), InfoNCE and the support-corrected
InfoNCE, the frozen invertible MLP generator of cl-ica, and the identifiability metrics (linear R2, orthogonal-fit
R2, MCC).

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
from numtk.torch._common import check_reduction, check_tensor, reduce_loss, torch, torch_generator

__all__ = ["info_nce", "support_corrected_info_nce", "cap_support_mask"]

_CORRECTIONS = ("restrict", "reweight")


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------
def _check_pair(a: "torch.Tensor", b: "torch.Tensor", name_a: str, name_b: str) -> None:
    """``b`` matches ``a`` in shape, dtype and device (messages name ``b``)."""
    if b.shape != a.shape:
        raise ValueError(f"`{name_b}` must have the shape of `{name_a}`, {tuple(a.shape)}; got {tuple(b.shape)}")
    if b.dtype != a.dtype:
        raise TypeError(f"`{name_b}` must have the dtype of `{name_a}`, {a.dtype}; got {b.dtype}")
    if b.device != a.device:
        raise ValueError(f"`{name_b}` must be on the device of `{name_a}`, {a.device}; got {b.device}")


def _check_views(h1: Any, h2: Any) -> None:
    check_tensor(h1, "h1", ndim=2)
    check_tensor(h2, "h2", ndim=2)
    _check_pair(h1, h2, "h1", "h2")
    if h1.shape[0] < 1:
        raise ValueError("`h1` and `h2` need at least one row (one positive pair)")
    if h1.shape[1] < 1:
        raise ValueError("`h1` and `h2` need at least one column (embedding dimension)")
    check_size(h1.shape[0] ** 2, 4.0 * h1.element_size(), "h1")


def _check_tau(tau: Any) -> float:
    return check_real(tau, "tau", low=0.0, low_open=True)


def _normalize(h: "torch.Tensor") -> "torch.Tensor":
    """Rows scaled to unit norm (a zero row stays zero: its similarities are 0)."""
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

    the cross-entropy of classifying the positive among the B rows of ``h2`` (Oord et al., 2018; the loss of
    cl-ica's ``SimCLRLoss`` with its ``p = 2`` similarity replaced by the inner product on the sphere).

    Parameters
    ----------
    h1, h2 : torch.Tensor, shape (B, k)
        Embeddings of the two views (same shape, dtype and device), B >= 1.
    tau : float, default 1.0
        The temperature, > 0. With unit-norm embeddings and latents drawn from vMF(z, kappa) conditionals the
        matched setting is ``tau = 1 / kappa``.
    normalize : bool, default True
        Scale the rows of both views to unit norm first (cosine similarities).
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
    tau = _check_tau(tau)
    normalize = check_bool(normalize, "normalize")
    symmetric = check_bool(symmetric, "symmetric")
    same_view = check_bool(same_view_negatives, "same_view_negatives")
    check_reduction(reduction)
    if normalize:
        h1, h2 = _normalize(h1), _normalize(h2)
    terms = _anchor_terms(h1, h2, tau, same_view)
    if symmetric:
        terms = 0.5 * (terms + _anchor_terms(h2, h1, tau, same_view))
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
    negatives outside :math:`S(z_i)` can never be positives of anchor i; plain InfoNCE still pushes them away,
    and that extra pressure is what lets non-orthogonal maps reach a lower loss. The corrected loss

    .. math::

        \ell_i = -\log \frac{\exp(s_{ii}/\tau)}{\sum_{j} w_{ij} \exp(s_{ij}/\tau)},
        \qquad w_{ij} = \begin{cases} 1 & j = i \text{ or } \tilde z_j \in S(z_i)\\
                                      \omega & \text{otherwise}\end{cases}

    uses :math:`\omega = 0` (``correction='restrict'``: the normaliser runs over
    :math:`S(i) = \{j : \tilde z_j \in \operatorname{supp} p(\cdot \mid z_i)\} \cup \{i\}`) or a weight
    :math:`\omega \in [0, 1]` (``correction='reweight'``: off-support negatives importance-down-weighted; 1 is
    plain InfoNCE). The support must be known, which it is only in synthetic experiments
    (:func:`cap_support_mask` builds it for a cap).

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
    tau = _check_tau(tau)
    normalize = check_bool(normalize, "normalize")
    correction = check_option(correction, "correction", _CORRECTIONS)
    omega = check_real(off_support_weight, "off_support_weight", low=0.0, high=1.0)
    check_reduction(reduction)
    if normalize:
        h1, h2 = _normalize(h1), _normalize(h2)
    keep = mask | torch.eye(B, dtype=torch.bool, device=h1.device)
    off = -math.inf if correction == "restrict" or omega == 0.0 else math.log(omega)
    log_weights = torch.zeros((B, B), dtype=h1.dtype, device=h1.device).masked_fill(~keep, off)
    return reduce_loss(_anchor_terms(h1, h2, tau, False, log_weights), reduction)


@constraints(z="tensor", z_tilde="tensor", max_angle="real>=0")
def cap_support_mask(z: "torch.Tensor", z_tilde: "torch.Tensor", max_angle: float) -> "torch.Tensor":
    r"""The support mask of cap-restricted conditionals: ``mask[i, j] = <z_i, z~_j> >= cos(max_angle)``.

    Parameters
    ----------
    z, z_tilde : torch.Tensor, shape (B, d)
        Anchor latents and positive latents (unit rows; same shape, dtype and device).
    max_angle : float
        The cap's half-angle in radians, >= 0 (pi or more: the whole sphere).

    Returns
    -------
    torch.Tensor of bool, shape (B, B)
        The mask for :func:`support_corrected_info_nce` (its diagonal is set True).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.contrastive import cap_support_mask
    >>> z = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> cap_support_mask(z, z, 0.5)
    tensor([[ True, False],
            [False,  True]])
    """
    check_tensor(z, "z", ndim=2)
    check_tensor(z_tilde, "z_tilde", ndim=2)
    _check_pair(z, z_tilde, "z", "z_tilde")
    max_angle = check_real(max_angle, "max_angle", low=0.0)
    check_size(z.shape[0] ** 2, 2.0 * z.element_size(), "z")
    threshold = -math.inf if max_angle >= math.pi else math.cos(max_angle)
    mask = (z @ z_tilde.T) >= threshold
    return mask | torch.eye(z.shape[0], dtype=torch.bool, device=z.device)
