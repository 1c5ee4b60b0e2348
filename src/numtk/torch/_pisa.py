"""Private, IP-protected split adaptation of a transformer (PISA, ICML 2026), reconstructed from its abstract.

A client holding private text runs the bottom of a network (frozen) and a small local model; a server holding
a proprietary model runs the top blocks. What crosses the split is a clipped and noised representation:

- :func:`clip_and_noise`: each token's hidden state clipped to L2 norm ``C``, then Gaussian noise of standard
  deviation ``sigma * C`` per coordinate (the privacy-prioritised baseline);
- :func:`gaussian_sigma`, :func:`gaussian_delta`, :func:`gaussian_epsilon`: the analytic Gaussian mechanism
  (Balle and Wang 2018, Thm 8), exact in both directions;
- :func:`split_epsilon`: the sequence-level (epsilon, delta) of the split over tokens and releases;
- :class:`SplitModel` and :func:`split_bert`: the split model (noise at the split in training and inference);
- :func:`mrp_loss`: noise-robust pre-training of the server blocks (MRP);
- :class:`DualStreamFusion`: the gated fusion of the server's output with a local clean stream (DSC);
- :func:`rectify_gradients`: PCGrad-style rectification of the local model's gradients (UGR).

No paper text or code of PISA is public: every piece but the mechanism and its accounting is a reconstruction
from the abstract and prior work, with its open choices exposed as parameters.

Threat model: the server is honest-but-curious and sees only the noisy split representation; the accounting
covers that representation (record = one input sequence, replace-one adjacency). Labels, losses or gradients
exchanged with the server, an attention mask sent along, and a client bottom trained on the private data are
not protected by this mechanism.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real
from numtk.torch._accounting import DEFAULT_ORDERS, gaussian_rdp, rdp_to_epsilon
from numtk.torch._common import (check_callable, check_reduction, check_tensor, device_generator, reduce_loss,
                                 standard_gamma, torch)

__all__ = ["clip_and_noise", "gaussian_sigma", "gaussian_delta", "gaussian_epsilon", "split_epsilon",
           "SplitModel", "split_bert", "BertClient", "BertServer", "mrp_loss", "DualStreamFusion",
           "rectify_gradients"]

_PER = ("token", "sequence")
_STREAMS = ("noisy", "clipped", "clean")
_MECHANISMS = ("gaussian", "dx")
#: the largest sequence length / number of releases split_epsilon takes (far beyond any use)
_MAX_COUNT = 10**9
#: the range of mu = sensitivity / std searched by the calibration
_MU_LO, _MU_HI = 1e-12, 1e12


# --------------------------------------------------------------------------------------------------
# the mechanism at the split
# --------------------------------------------------------------------------------------------------
@constraints(h="tensor", clip_norm="real>0", noise_multiplier="real>=0", per="option", mechanism="option",
             rng="rng")
def clip_and_noise(h: "torch.Tensor", clip_norm: float, noise_multiplier: float, *, per: str = "token",
                   mechanism: str = "gaussian", rng: Any = None) -> "torch.Tensor":
    r"""Clip each token's representation to L2 norm ``clip_norm`` and add Gaussian noise (the split's mechanism).

    Per token (``per="token"``), with :math:`C` = ``clip_norm`` and :math:`\sigma` = ``noise_multiplier``:

    .. math:: \bar h_t = h_t \min(1, C / \lVert h_t \rVert_2), \qquad
              \tilde h_t = \bar h_t + \mathcal N(0, \sigma^2 C^2 I).

    With ``per="sequence"`` the whole sequence (the last two axes) is clipped to norm ``C`` instead. This is
    the Gaussian mechanism whose guarantee :func:`split_epsilon` computes; alone it is PISA's
    "privacy-prioritised baseline" (the mechanism is standard; its placement at the split is the
    reconstruction).

    Parameters
    ----------
    h : torch.Tensor
        Floating tensor ``(..., T, d)``: token representations in the last axis (``per="token"`` accepts any
        number of leading axes, even none; ``per="sequence"`` needs at least two axes).
    clip_norm : float
        :math:`C > 0`.
    noise_multiplier : float
        :math:`\sigma \ge 0`; the noise's standard deviation per coordinate is :math:`\sigma C` (0: clipping
        only).
    per : {"token", "sequence"}, default "token"
        What is clipped to norm :math:`C`: each token vector, or each whole sequence.
    mechanism : {"gaussian", "dx"}, default "gaussian"
        The noise. ``"dx"``: metric (:math:`d_\chi`) privacy instead, the multivariate Laplace-style noise
        of density :math:`\propto \exp(-\lVert z\rVert_2 / (\sigma C))` on each token vector (each sequence
        with ``per="sequence"``): a uniform direction times a radius drawn from
        :math:`\mathrm{Gamma}(m, \sigma C)`, :math:`m` the vector's dimension (per-coordinate standard deviation
        :math:`\sqrt{m + 1}\,\sigma C`). Its guarantee is weaker; see :func:`split_epsilon`.
    rng : None, int, numpy.random.Generator or torch.Generator
        Source of the noise (a torch.Generator must be on ``h``'s device).

    Returns
    -------
    torch.Tensor
        :math:`\tilde h`, of ``h``'s shape, dtype and device (differentiable in ``h``; the noise is constant).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.pisa import clip_and_noise
    >>> h = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> clip_and_noise(h, 1.0, 0.0)                      # no noise: only the first token is clipped
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    >>> clip_and_noise(h, 1.0, 0.5, rng=0).shape
    torch.Size([2, 2])
    """
    check_tensor(h, "h")
    clip_norm = check_real(clip_norm, "clip_norm", low=0.0, low_open=True)
    noise_multiplier = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    per = check_option(per, "per", _PER)
    mechanism = check_option(mechanism, "mechanism", _MECHANISMS)
    if h.ndim < (2 if per == "sequence" else 1):
        raise ValueError(f"`h` must have at least {2 if per == 'sequence' else 1} axes with per={per!r} "
                         f"(tokens, features); got shape {tuple(h.shape)}")
    gen = device_generator(rng, h.device, tensor="`h`")
    std = noise_multiplier * clip_norm
    if not math.isfinite(std) or std * 64.0 > torch.finfo(h.dtype).max:
        raise ValueError(f"`noise_multiplier` * `clip_norm` = {noise_multiplier!r} * {clip_norm!r} is too large for "
                         f"the noise to stay finite in {h.dtype}")
    dims = (-1,) if per == "token" else (-2, -1)
    norm = torch.linalg.vector_norm(h, dim=dims, keepdim=True)
    tiny = torch.finfo(h.dtype).tiny
    factor = (clip_norm / norm.clamp_min(tiny)).clamp(max=1.0)
    out = h * factor
    if std > 0.0 and h.numel():
        noise = torch.randn(h.shape, generator=gen, dtype=h.dtype, device=h.device)
        if mechanism == "dx":        # uniform direction, radius ~ Gamma(m, std): density ~ exp(-|z| / std)
            m = h.shape[-1] * (h.shape[-2] if per == "sequence" else 1)
            lead = h.shape[:-len(dims)]
            radius = standard_gamma(float(m), lead, gen, dtype=h.dtype, device=h.device)
            noise = noise / torch.linalg.vector_norm(noise, dim=dims, keepdim=True).clamp_min(tiny)
            noise = noise * radius.reshape(tuple(lead) + (1,) * len(dims))
        # in place on the fresh product (its backward needs h and factor, not out): one pass, no temporary
        out.add_(noise, alpha=std)
    return out


# --------------------------------------------------------------------------------------------------
# the analytic Gaussian mechanism (Balle and Wang 2018, Thm 8)
# --------------------------------------------------------------------------------------------------
def _log_delta(eps: float, mu: float) -> float:
    r"""log delta(eps) of the Gaussian mechanism with sensitivity/std ``mu``:
    :math:`\delta = \Phi(\mu/2 - \epsilon/\mu) - e^\epsilon \Phi(-\mu/2 - \epsilon/\mu)`, in logs (log_ndtr), the
    difference as ``Phi(a) * (-expm1(eps + log Phi(b) - log Phi(a)))`` so that tiny deltas keep their digits."""
    from scipy.special import log_ndtr

    if mu == 0.0:
        return -math.inf
    if math.isinf(mu):
        return 0.0
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    if math.isnan(a) or math.isnan(b):   # eps/mu overflowed against mu: both tails vanish
        return -math.inf
    la, lb = float(log_ndtr(a)), float(log_ndtr(b))
    if la == -math.inf:
        return -math.inf
    if lb == -math.inf:
        return la
    x = eps + lb - la
    if math.isnan(x):
        return -math.inf
    if x >= 0.0:                       # only by rounding: the difference is 0
        return -math.inf
    return la + math.log(-math.expm1(x))


def _mu_for(eps: float, delta: float) -> float:
    """The mu = sensitivity/std at which the Gaussian mechanism is exactly (eps, delta)-DP (delta increases with
    mu), by brentq on log mu."""
    from scipy.optimize import brentq

    target = math.log(delta)

    def f(log_mu: float) -> float:
        return _log_delta(eps, math.exp(log_mu)) - target

    x = 0.0
    fx = f(x)
    if fx == 0.0:
        return 1.0
    if fx < 0.0:                       # delta too small at mu = 1: more mu
        while f(x + 1.0) < 0.0:
            x += 1.0
            if math.exp(x) > _MU_HI:
                raise ValueError(f"`epsilon` = {eps!r} with `delta` = {delta!r} needs a standard deviation below "
                                 f"sensitivity/{_MU_HI:g}; out of range")
        lo, hi = x, x + 1.0
    else:
        while f(x - 1.0) > 0.0:
            x -= 1.0
            if math.exp(x) < _MU_LO:
                raise ValueError(f"`delta` = {delta!r} is too small for `epsilon` = {eps!r}: it needs a standard "
                                 f"deviation above sensitivity*{1 / _MU_LO:g}; out of range")
        lo, hi = x - 1.0, x
    log_mu = brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    return math.exp(log_mu)


@constraints(epsilon="real>=0", delta="prob_open", sensitivity="real>0")
def gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""The smallest noise standard deviation that makes the Gaussian mechanism (epsilon, delta)-DP (analytic).

    The Gaussian mechanism :math:`f(x) + \mathcal N(0, s^2 I)` with L2 sensitivity :math:`\Delta` is
    :math:`(\epsilon, \delta)`-DP if and only if (Balle and Wang 2018, Thm 8)

    .. math:: \Phi\Big(\frac{\Delta}{2s} - \frac{\epsilon s}{\Delta}\Big)
              - e^{\epsilon}\, \Phi\Big(-\frac{\Delta}{2s} - \frac{\epsilon s}{\Delta}\Big) \le \delta .

    The left side decreases in :math:`s`; the :math:`s` at equality is found by :func:`scipy.optimize.brentq`
    (on :math:`\log(\Delta/s)`, with ``log_ndtr`` so that large epsilon and tiny delta keep their digits). It
    is smaller than the classic :math:`\Delta\sqrt{2\ln(1.25/\delta)}/\epsilon` (Dwork and Roth) wherever that
    one is valid (:math:`\epsilon < 1`) and, for :math:`\delta = 10^{-5}`, up to :math:`\epsilon \approx 8.5`;
    beyond, the classic value falls below this exact one, so it is not a valid calibration there.

    Parameters
    ----------
    epsilon : float
        :math:`\epsilon \ge 0`.
    delta : float
        :math:`\delta` in (0, 1).
    sensitivity : float, default 1.0
        The L2 sensitivity :math:`\Delta > 0`.

    Returns
    -------
    float
        :math:`s`, the noise's standard deviation (per coordinate).

    Raises
    ------
    ValueError
        If an argument is out of range, or the answer lies beyond :math:`\Delta \cdot 10^{\pm 12}`.

    Examples
    --------
    >>> from numtk.torch.pisa import gaussian_sigma
    >>> for eps in (0.5, 1.0, 4.0, 8.0):
    ...     print(f"{eps:3}  {gaussian_sigma(eps, 1e-5):.4f}")
    0.5  7.0318
    1.0  3.7306
    4.0  1.0812
    8.0  0.6002
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    s = sensitivity / _mu_for(epsilon, delta)
    if not (math.isfinite(s) and s > 0.0):
        raise ValueError(f"`sensitivity` = {sensitivity!r}: the standard deviation {s!r} is not a positive float")
    return s


@constraints(epsilon="real>=0", sigma="real>0", sensitivity="real>0")
def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    r"""The exact delta at ``epsilon`` of the Gaussian mechanism with standard deviation ``sigma`` (analytic).

    :math:`\delta(\epsilon) = \Phi(\Delta/(2s) - \epsilon s/\Delta) - e^\epsilon\Phi(-\Delta/(2s) - \epsilon s/
    \Delta)` (Balle and Wang 2018, Thm 8), the smallest delta for which the mechanism is (epsilon, delta)-DP;
    computed in logs, accurate to a few ulps in relative terms even for deltas far below 1e-300's neighbours.

    Parameters
    ----------
    epsilon : float
        :math:`\epsilon \ge 0`.
    sigma : float
        The noise's standard deviation :math:`s > 0` (absolute, not a multiplier).
    sensitivity : float, default 1.0
        The L2 sensitivity :math:`\Delta > 0`.

    Returns
    -------
    float
        :math:`\delta` in [0, 1].

    Examples
    --------
    >>> from numtk.torch.pisa import gaussian_delta, gaussian_sigma
    >>> f"{gaussian_delta(1.0, gaussian_sigma(1.0, 1e-5)):.6g}"
    '1e-05'
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0)
    sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    with np.errstate(over="ignore"):
        mu = sensitivity / sigma
    return float(min(1.0, math.exp(_log_delta(epsilon, mu))))


def _epsilon_for(mu: float, delta: float) -> float:
    """The exact epsilon at ``delta`` of the mu-GDP curve (the Gaussian mechanism of sensitivity/std mu)."""
    from scipy.optimize import brentq
    from scipy.special import ndtri

    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    target = math.log(delta)
    if _log_delta(0.0, mu) <= target:
        return 0.0
    # delta(eps) <= Phi(mu/2 - eps/mu) <= delta at eps = mu^2/2 + mu*z, z = -ndtri(delta): an upper bracket
    hi = mu * mu / 2.0 + mu * max(float(-ndtri(delta)), 0.0) + 1.0
    if not math.isfinite(hi):
        return math.inf

    def f(eps: float) -> float:
        return _log_delta(eps, mu) - target

    if f(hi) > 0.0:  # pragma: no cover - the bound above holds
        return hi
    return float(brentq(f, 0.0, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500))


@constraints(sigma="real>0", delta="prob_open", sensitivity="real>0")
def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""The exact epsilon at ``delta`` of the Gaussian mechanism with standard deviation ``sigma`` (analytic).

    The inverse of :func:`gaussian_delta` in epsilon: the smallest :math:`\epsilon \ge 0` with
    :math:`\delta(\epsilon) \le` ``delta`` (Balle and Wang 2018, Thm 8), by :func:`scipy.optimize.brentq`.

    Parameters
    ----------
    sigma : float
        The noise's standard deviation :math:`s > 0`.
    delta : float
        :math:`\delta` in (0, 1).
    sensitivity : float, default 1.0
        The L2 sensitivity :math:`\Delta > 0`.

    Returns
    -------
    float
        :math:`\epsilon` (0 when the mechanism is already (0, delta)-DP).

    Raises
    ------
    ValueError
        If an argument is out of range, or epsilon overflows (``sensitivity/sigma`` near 1e154 or above).

    Examples
    --------
    >>> from numtk.torch.pisa import gaussian_epsilon
    >>> round(gaussian_epsilon(3.7306, 1e-5), 4)
    1.0
    """
    sigma = check_real(sigma, "sigma", low=0.0, low_open=True)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    sensitivity = check_real(sensitivity, "sensitivity", low=0.0, low_open=True)
    with np.errstate(over="ignore"):
        mu = sensitivity / sigma
    eps = _epsilon_for(mu, delta)
    if not math.isfinite(eps):
        raise ValueError(f"`sigma` = {sigma!r} is too small for `sensitivity` = {sensitivity!r}: epsilon overflows")
    return eps


# --------------------------------------------------------------------------------------------------
# sequence-level accounting
# --------------------------------------------------------------------------------------------------
@constraints(clip_norm="real>0", noise_multiplier="real>0", seq_len="int>=1", releases="int>=1",
             delta="prob_open", per="option", mechanism="option", orders="array1d")
def split_epsilon(clip_norm: float, noise_multiplier: float, seq_len: int, releases: int, delta: float, *,
                  per: str = "token", mechanism: str = "gaussian", orders: Any = None) -> Result:
    r"""The (epsilon, delta)-DP guarantee of the split for one input sequence, over its tokens and releases.

    **What the epsilon covers.** Record: one input sequence of ``seq_len`` token positions (the padded length
    :math:`T`, treated as public: every position sent is clipped and counted). Adjacency: replace-one (one
    sequence replaced by any other of the same length). Mechanism: :func:`clip_and_noise` on the
    representation sent to the server (each token clipped to norm :math:`C`, Gaussian noise of std
    :math:`\sigma C` per coordinate), so the L2 sensitivity of a whole sequence's representation is
    :math:`\Delta = 2C\sqrt T` (``per="sequence"``: :math:`2C`). Composition: ``releases`` = :math:`E` noisy
    releases of the same sequence (e.g. epochs, each with fresh noise, adaptively chosen allowed). The client's
    bottom must be fixed (not trained on the private data) so that a sequence's representation depends on that
    sequence alone. Not covered: anything else that crosses the split (labels, gradients or losses the client
    returns to the server, an attention mask revealing lengths), the server's outputs are covered only as
    post-processing of what it received.

    Three values are computed:

    * ``epsilon_single``: one release, exact by the analytic Gaussian mechanism (:func:`gaussian_epsilon` with
      sensitivity :math:`\Delta`, std :math:`\sigma C`);
    * ``epsilon_exact``: :math:`E` releases, exact: a Gaussian mechanism of sensitivity/std
      :math:`\mu = \Delta/(\sigma C)` is :math:`\mu`-GDP exactly, and :math:`E` of them compose to
      :math:`\sqrt E\mu`-GDP (Dong, Roth and Su 2022), whose (epsilon, delta) curve is the analytic Gaussian's;
    * ``epsilon_rdp``: :math:`E` releases by Renyi DP, :math:`\epsilon_{RDP}(\alpha) = E\alpha\Delta^2 /
      (2\sigma^2C^2)` converted by the improved conversion (Balle et al. 2020) minimised over ``orders``
      (:mod:`numtk.torch._accounting`, shared with :mod:`numtk.torch.privcode`).

    ``epsilon`` is the smallest of the valid bounds, which is ``epsilon_exact`` (RDP is never tighter for
    Gaussian mechanisms; it is reported for comparison with accountants that use it); ``bound`` names it.
    :math:`C` cancels: only :math:`\sigma`, :math:`T` and :math:`E` matter.

    With ``mechanism="dx"`` (the metric-privacy noise of :func:`clip_and_noise`, an option of the
    reconstruction) each token is :math:`\epsilon\,d`-private for the Euclidean distance with
    :math:`\epsilon = 1/(\sigma C)`; over the clip ball (distance at most :math:`2C`) and :math:`T` tokens
    that is pure :math:`2T/\sigma`-DP for one sequence under replace-one (``per="sequence"``:
    :math:`2/\sigma`), and :math:`E` releases add up: ``epsilon = 2TE/sigma`` with delta = 0 (``bound``
    ``"pure"``). This is a **weaker** guarantee than the Gaussian's for the same utility: it grows as
    :math:`T` rather than :math:`\sqrt T`, the noise's per-coordinate scale is :math:`\sqrt{d+1}` times
    larger at the same sigma, and the metric guarantee that it rests on is often quoted per token, which
    hides the factor :math:`T`. ``delta`` and ``orders`` are not used; ``epsilon_rdp``, ``order`` and ``mu``
    are None.

    Parameters
    ----------
    clip_norm : float
        :math:`C > 0`.
    noise_multiplier : float
        :math:`\sigma > 0` (without noise there is no finite epsilon).
    seq_len : int
        :math:`T`, the number of token vectors of one sequence sent across the split (at most 1e9).
    releases : int
        :math:`E`, how many times each sequence is sent (each with fresh noise; at most 1e9).
    delta : float
        :math:`\delta` in (0, 1).
    per : {"token", "sequence"}, default "token"
        The clipping of :func:`clip_and_noise`: sensitivity :math:`2C\sqrt T` or :math:`2C`.
    mechanism : {"gaussian", "dx"}, default "gaussian"
        The noise of :func:`clip_and_noise` (see above for ``"dx"``).
    orders : array_like, optional
        Renyi orders (> 1) of the RDP bound; default the integers 2..256.

    Returns
    -------
    Result
        epsilon : float
            The returned guarantee: the smallest valid bound (``epsilon_exact``).
        bound : str
            Which bound ``epsilon`` is: ``"exact"`` (or ``"rdp"`` should rounding make it smaller); ``"pure"``
            for ``mechanism="dx"``.
        epsilon_exact : float
            E releases, exact Gaussian (GDP) composition.
        epsilon_rdp : float or None
            E releases, RDP composition and the improved conversion (None for ``"dx"``).
        order : float or None
            The Renyi order of ``epsilon_rdp`` (None for ``"dx"``).
        epsilon_single : float
            One release, exact (analytic Gaussian).
        sensitivity : float
            :math:`\Delta` of one release (L2; for ``"dx"`` the largest sum of the per-vector distances,
            :math:`2CT` or :math:`2C`).
        noise_std : float
            :math:`\sigma C` (for ``"dx"``: the scale of the radius's Gamma distribution).
        mu : float or None
            :math:`\sqrt E\,\Delta/(\sigma C)`, the GDP parameter of all releases (None for ``"dx"``).

    Examples
    --------
    >>> from numtk.torch.pisa import split_epsilon
    >>> res = split_epsilon(1.0, 8.0, 16, 1, 1e-5)     # T = 16 tokens, one release
    >>> round(res.epsilon, 3), res.bound
    (4.377, 'exact')
    >>> res.epsilon_rdp > res.epsilon
    True
    """
    clip_norm = check_real(clip_norm, "clip_norm", low=0.0, low_open=True)
    noise_multiplier = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    seq_len = check_int(seq_len, "seq_len", minimum=1, maximum=_MAX_COUNT)
    releases = check_int(releases, "releases", minimum=1, maximum=_MAX_COUNT)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    per = check_option(per, "per", _PER)
    mechanism = check_option(mechanism, "mechanism", _MECHANISMS)
    if orders is None:
        orders = DEFAULT_ORDERS
    else:
        if isinstance(orders, (str, bytes)) or not hasattr(orders, "__len__") and not hasattr(orders, "__array__"):
            raise TypeError(f"`orders` must be a 1-D array of Renyi orders > 1; got {type(orders).__name__}")
        try:
            raw = np.asarray(orders)
            if np.iscomplexobj(raw):
                raise TypeError
            orders = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise TypeError("`orders` must be a 1-D array of real Renyi orders > 1") from None
        if orders.ndim != 1 or orders.size == 0:
            raise ValueError(f"`orders` must be a non-empty 1-D array; got shape {orders.shape}")
        if not (np.isfinite(orders).all() and (orders > 1.0).all()):
            raise ValueError("`orders` must hold finite Renyi orders > 1")
    with np.errstate(over="ignore", under="ignore"):
        sensitivity = 2.0 * clip_norm * (math.sqrt(seq_len) if per == "token" else 1.0)
        std = noise_multiplier * clip_norm
    if not (math.isfinite(sensitivity) and math.isfinite(std) and std > 0.0):
        raise ValueError(f"`clip_norm` = {clip_norm!r} with `noise_multiplier` = {noise_multiplier!r} over- or "
                         f"underflows the sensitivity or the noise's scale")
    if mechanism == "dx":
        vectors = seq_len if per == "token" else 1
        eps1 = 2.0 * vectors / noise_multiplier
        eps = releases * eps1
        if not math.isfinite(eps):
            raise ValueError(f"`noise_multiplier` = {noise_multiplier!r} is too small: epsilon overflows")
        return Result(epsilon=eps, bound="pure", epsilon_exact=eps, epsilon_rdp=None, order=None,
                      epsilon_single=eps1, sensitivity=2.0 * clip_norm * vectors, noise_std=std, mu=None)
    # mu of one release, Delta / (sigma C): C cancels (computed without it, so that no product over/underflows)
    mu1 = 2.0 * (math.sqrt(seq_len) if per == "token" else 1.0) / noise_multiplier
    mu = math.sqrt(releases) * mu1
    eps_single = _epsilon_for(mu1, delta)
    eps_exact = _epsilon_for(mu, delta)
    if not (math.isfinite(mu) and math.isfinite(eps_exact)):
        raise ValueError(f"`noise_multiplier` = {noise_multiplier!r} is too small for {seq_len} tokens and "
                         f"{releases} releases: epsilon overflows")
    with np.errstate(over="ignore", invalid="ignore"):
        rdp = releases * gaussian_rdp(orders, mu1, 1.0)
    eps_rdp, order = rdp_to_epsilon(rdp, orders, delta)
    if not math.isfinite(eps_rdp):
        raise ValueError("`orders` give no finite RDP bound (too large an order, or too small a "
                         f"`noise_multiplier` = {noise_multiplier!r})")
    eps, bound = (eps_rdp, "rdp") if eps_rdp < eps_exact else (eps_exact, "exact")
    return Result(epsilon=eps, bound=bound, epsilon_exact=eps_exact, epsilon_rdp=eps_rdp, order=order,
                  epsilon_single=eps_single, sensitivity=sensitivity, noise_std=std, mu=mu)


# --------------------------------------------------------------------------------------------------
# the split model
# --------------------------------------------------------------------------------------------------
@constraints(client="callable", server="callable", head="callable", clip_norm="real>0",
             noise_multiplier="real>=0", per="option", send_mask="bool", head_inputs="bool")
class SplitModel(torch.nn.Module):
    r"""A network split between a client and a server, with the split's mechanism on what crosses (reconstructed).

    ``forward(*inputs, **kwargs)`` computes ``head(server(h~))`` with ``h = client(*inputs, **kwargs)`` and
    ``h~ = clip_and_noise(h, clip_norm, noise_multiplier)``; the noise is applied in training and in inference
    alike (``stream="noisy"``, the default). ``stream="clipped"`` (clipping, no noise) and ``stream="clean"``
    (neither) give the streams that never leave the client: MRP's targets on public data, a local clean stream
    for :class:`DualStreamFusion`, or the noise-free reference.

    Threat model: the server is honest-but-curious and sees only ``h~`` (and the attention mask when
    ``send_mask`` is set); :func:`split_epsilon` gives the guarantee for ``h~``. Labels, losses or gradients the
    client sends back (to fine-tune the server's blocks, say) are not protected by this mechanism. The split
    into client, server and head, and where the noise goes, are the reconstruction's choices.

    Parameters
    ----------
    client : callable
        The client's bottom (an ``nn.Module`` or function), ``client(*inputs, **kwargs) -> (..., T, d)``.
        For the accounting to hold it must not be trained on the private data (freeze it).
    server : callable
        The server's blocks, ``server(h) -> tensor`` (``server(h, attention_mask=mask)`` with ``send_mask``).
    head : callable or None
        The client's local head on the server's output: ``head(z)``, or ``head(z, *inputs, **kwargs)`` with
        ``head_inputs=True`` (e.g. to pool with the attention mask); None returns the server's output.
    clip_norm : float
        :math:`C > 0`.
    noise_multiplier : float
        :math:`\sigma \ge 0`.
    per : {"token", "sequence"}, default "token"
        Clipping per token or per sequence (see :func:`clip_and_noise`).
    send_mask : bool, default False
        Pass the keyword ``attention_mask`` of the inputs to the server too. It reveals each sequence's number
        of real tokens, which the guarantee does not cover; by default the server attends to all positions.
    head_inputs : bool, default False
        Call ``head(z, *inputs, **kwargs)`` instead of ``head(z)``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.pisa import SplitModel
    >>> client, server, head = torch.nn.Linear(3, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
    >>> model = SplitModel(client, server, head, clip_norm=1.0, noise_multiplier=0.5)
    >>> x = torch.randn(2, 5, 3)                 # 2 sequences of 5 tokens
    >>> model(x, rng=0).shape
    torch.Size([2, 5, 2])
    >>> bool((model.release(x, stream="clipped").norm(dim=-1) <= 1.0 + 1e-6).all())
    True
    """

    def __init__(self, client: Any, server: Any, head: Any, *, clip_norm: float, noise_multiplier: float,
                 per: str = "token", send_mask: bool = False, head_inputs: bool = False):
        super().__init__()
        self.client = check_callable(client, "client")
        self.server = check_callable(server, "server")
        self.head = check_callable(head, "head", optional=True)
        self.clip_norm = check_real(clip_norm, "clip_norm", low=0.0, low_open=True)
        self.noise_multiplier = check_real(noise_multiplier, "noise_multiplier", low=0.0)
        self.per = check_option(per, "per", _PER)
        self.send_mask = check_bool(send_mask, "send_mask")
        self.head_inputs = check_bool(head_inputs, "head_inputs")

    def extra_repr(self) -> str:
        return (f"clip_norm={self.clip_norm}, noise_multiplier={self.noise_multiplier}, per={self.per!r}, "
                f"send_mask={self.send_mask}")

    @constraints(stream="option", rng="rng")
    def release(self, *inputs: Any, stream: str = "noisy", rng: Any = None, **kwargs: Any) -> "torch.Tensor":
        """What crosses the split: ``clip_and_noise(client(*inputs, **kwargs))`` (``stream="noisy"``), the
        clipped representation (``"clipped"``) or the raw one (``"clean"``)."""
        stream = check_option(stream, "stream", _STREAMS)
        h = self.client(*inputs, **kwargs)
        if not isinstance(h, torch.Tensor):
            raise TypeError(f"`client` must return a tensor (..., T, d); got {type(h).__name__}")
        if stream == "clean":
            return h
        return clip_and_noise(h, self.clip_norm, self.noise_multiplier if stream == "noisy" else 0.0,
                              per=self.per, rng=rng)

    @constraints(h="tensor", attention_mask="any")
    def serve(self, h: "torch.Tensor", attention_mask: Any = None) -> Any:
        """The server's output on a released representation ``h`` (with the mask only if ``send_mask``)."""
        check_tensor(h, "h")
        if self.send_mask and attention_mask is not None:
            return self.server(h, attention_mask=attention_mask)
        return self.server(h)

    @constraints(stream="option", rng="rng")
    def forward(self, *inputs: Any, stream: str = "noisy", rng: Any = None, **kwargs: Any) -> Any:
        """``head(server(release(*inputs, **kwargs)))``; see the class docstring."""
        h = self.release(*inputs, stream=stream, rng=rng, **kwargs)
        z = self.serve(h, kwargs.get("attention_mask"))
        if self.head is None:
            return z
        return self.head(z, *inputs, **kwargs) if self.head_inputs else self.head(z)


def _additive_mask(attention_mask: Any, like: "torch.Tensor", name: str = "attention_mask") -> Any:
    """A (B, T) 0/1 mask as BERT's additive (B, 1, 1, T) mask in ``like``'s dtype (None stays None)."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor (B, T) of 0/1; got {type(attention_mask).__name__}")
    if attention_mask.ndim != 2 or tuple(attention_mask.shape) != tuple(like.shape[:2]):
        raise ValueError(f"`{name}` must have shape {tuple(like.shape[:2])} (batch, tokens); got "
                         f"{tuple(attention_mask.shape)}")
    if attention_mask.is_complex() or not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError(f"`{name}` must hold 0 (padding) and 1 (token) only")
    m = attention_mask.to(device=like.device, dtype=like.dtype)
    return ((1.0 - m) * torch.finfo(like.dtype).min)[:, None, None, :]


def _check_hidden(hidden: "torch.Tensor", layers: Any, name: str) -> None:
    """``hidden`` (B, T, d) fits the first block: width, dtype and device of its parameters."""
    if not len(layers):
        return
    p = next(layers[0].parameters(), None)
    query = getattr(getattr(getattr(layers[0], "attention", None), "self", None), "query", None)
    width = getattr(query, "in_features", None)
    if width is not None and hidden.shape[-1] != width:
        raise ValueError(f"`{name}` must have {width} features (the blocks' hidden size); got shape "
                         f"{tuple(hidden.shape)}")
    if p is not None and (hidden.dtype != p.dtype or hidden.device != p.device):
        raise TypeError(f"`{name}` must have the dtype and device of the blocks ({p.dtype}, {p.device}); got "
                        f"{hidden.dtype}, {hidden.device}")


def _check_layers(layers: Any, name: str = "layers") -> list:
    if isinstance(layers, torch.nn.Module) and not isinstance(layers, torch.nn.ModuleList):
        raise TypeError(f"`{name}` must be a sequence of transformer blocks (nn.Module); got one "
                        f"{type(layers).__name__}")
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"`{name}` must be a sequence of transformer blocks (nn.Module); got "
                        f"{type(layers).__name__}")
    layers = list(layers)
    if not all(isinstance(m, torch.nn.Module) for m in layers):
        raise TypeError(f"`{name}` must hold nn.Module blocks (BertLayer)")
    return layers


@constraints(embeddings="callable", layers="any")
class BertClient(torch.nn.Module):
    """The bottom of a BERT encoder: embeddings and the first ``layer`` blocks (see :func:`split_bert`).

    ``forward(input_ids, attention_mask=None, token_type_ids=None) -> (B, T, d)``, as the BertModel's hidden
    state after block ``layer``.
    """

    def __init__(self, embeddings: Any, layers: Sequence[Any]):
        super().__init__()
        if not isinstance(embeddings, torch.nn.Module):
            raise TypeError(f"`embeddings` must be a BertEmbeddings module; got {type(embeddings).__name__}")
        self.embeddings = embeddings
        self.layers = torch.nn.ModuleList(_check_layers(layers))

    @constraints(input_ids="any", attention_mask="any", token_type_ids="any")
    def forward(self, input_ids: "torch.Tensor", attention_mask: Any = None, token_type_ids: Any = None) -> Any:
        """Token ids (B, T) (an integer tensor: checked here, so declared ``any``), an optional 0/1 mask and
        segment ids of the same shape -> the hidden states (B, T, d) after the client's blocks."""
        check_tensor(input_ids, "input_ids", ndim=2, dtype="integer")
        words = getattr(getattr(self.embeddings, "word_embeddings", None), "num_embeddings", None)
        if words is not None and input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= words):
            raise ValueError(f"`input_ids` must lie in [0, {words}) (the vocabulary)")
        positions = getattr(getattr(self.embeddings, "position_embeddings", None), "num_embeddings", None)
        if positions is not None and input_ids.shape[1] > positions:
            raise ValueError(f"`input_ids` must have at most {positions} tokens (the position embeddings); got "
                             f"{input_ids.shape[1]}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        else:
            check_tensor(token_type_ids, "token_type_ids", shape=tuple(input_ids.shape), dtype="integer")
        h = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask = _additive_mask(attention_mask, h)
        for layer in self.layers:
            h = layer(h, attention_mask=mask)[0]
        return h


@constraints(layers="any")
class BertServer(torch.nn.Module):
    """The top of a BERT encoder: the blocks after the split (see :func:`split_bert`).

    ``forward(hidden, attention_mask=None) -> (B, T, d)``, the last hidden state.
    """

    def __init__(self, layers: Sequence[Any]):
        super().__init__()
        self.layers = torch.nn.ModuleList(_check_layers(layers))

    @constraints(hidden="tensor", attention_mask="any")
    def forward(self, hidden: "torch.Tensor", attention_mask: Any = None) -> "torch.Tensor":
        """Hidden states (B, T, d) and an optional 0/1 mask (B, T) -> the last hidden state (B, T, d)."""
        check_tensor(hidden, "hidden", ndim=3)
        _check_hidden(hidden, self.layers, "hidden")
        mask = _additive_mask(attention_mask, hidden)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=mask)[0]
        return hidden


@constraints(model="any", layer="int>=1", freeze_client="bool")
def split_bert(model: Any, layer: int, *, freeze_client: bool = True) -> tuple:
    """Split a transformers BERT encoder after block ``layer`` into a client and a server module.

    The client holds the embeddings and blocks ``0 .. layer-1``, the server blocks ``layer ..`` (the pooler is
    not used); both share the model's parameters (nothing is copied). With the noise off,
    ``server(client(ids, mask), mask)`` equals ``model(ids, attention_mask=mask).last_hidden_state``. Splitting
    after a fixed block with a frozen bottom is the reconstruction's reading of PISA's split.

    Parameters
    ----------
    model : transformers.BertModel
        A BERT encoder (or a model with one as its ``bert`` attribute, such as ``BertForSequenceClassification``);
        checked to have ``embeddings`` and ``encoder.layer``.
    layer : int
        Blocks on the client, ``1 <= layer < number of blocks``.
    freeze_client : bool, default True
        Set ``requires_grad=False`` on the client's parameters (the embeddings and its blocks, in ``model``
        itself): the accounting needs a bottom that is not trained on the private data.

    Returns
    -------
    client : BertClient
        ``client(input_ids, attention_mask=None, token_type_ids=None) -> (B, T, d)``.
    server : BertServer
        ``server(hidden, attention_mask=None) -> (B, T, d)``.

    Examples
    --------
    >>> import torch, transformers
    >>> from numtk.torch.pisa import split_bert
    >>> config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2,
    ...                                  intermediate_size=32)
    >>> model = transformers.BertModel(config).eval()
    >>> client, server = split_bert(model, 1)
    >>> ids = torch.tensor([[1, 5, 7, 2]])
    >>> torch.allclose(server(client(ids)), model(ids).last_hidden_state, atol=1e-5)
    True
    """
    bert = getattr(model, "bert", model)
    if not isinstance(bert, torch.nn.Module) or not hasattr(bert, "embeddings") or \
            not hasattr(getattr(bert, "encoder", None), "layer"):
        raise TypeError(f"`model` must be a transformers BertModel (with `embeddings` and `encoder.layer`); got "
                        f"{type(model).__name__}")
    blocks = list(bert.encoder.layer)
    layer = check_int(layer, "layer", minimum=1)
    if layer >= len(blocks):
        raise ValueError(f"`layer` must be below the number of blocks, {len(blocks)} (the server needs one); "
                         f"got {layer}")
    freeze_client = check_bool(freeze_client, "freeze_client")
    client, server = BertClient(bert.embeddings, blocks[:layer]), BertServer(blocks[layer:])
    if freeze_client:
        client.requires_grad_(False)
    return client, server


# --------------------------------------------------------------------------------------------------
# MRP, DSC, UGR
# --------------------------------------------------------------------------------------------------
@constraints(server="callable", h_clean="tensor", h_noisy="tensor", lam="real>=0", teacher="callable",
             task_loss="callable", reduction="option")
def mrp_loss(server: Callable, h_clean: "torch.Tensor", h_noisy: "torch.Tensor", lam: float, *,
             teacher: Callable | None = None, task_loss: Callable | None = None,
             reduction: str = "mean") -> "torch.Tensor":
    r"""The noise-robust pre-training loss of the server's blocks (MRP, reconstructed).

    .. math:: L = L_{task}(\mathrm{server}(\tilde h))
              + \lambda \lVert \mathrm{server}(\tilde h) - \mathrm{sg}(\mathrm{teacher}(h)) \rVert^2 ,

    the squared norm taken per token (the last axis) and reduced over tokens and sequences. The server is
    trained on public text with the split's mechanism (``h_noisy = clip_and_noise(h_clean, ...)``) so that its
    output on noisy input stays near its output on clean input. The target follows the spec, the server itself
    under stop-gradient (``teacher=None``); a frozen copy of the original server is the option that cannot
    collapse to a constant when there is no task term. The whole objective is a reconstruction.

    Parameters
    ----------
    server : callable
        The server's blocks, ``server(h) -> (..., d_out)`` (trainable).
    h_clean : torch.Tensor
        The clean (or clipped, noise-free) representations ``(..., T, d)``.
    h_noisy : torch.Tensor
        The released representations, same shape, dtype and device.
    lam : float
        :math:`\lambda \ge 0`.
    teacher : callable, optional
        Computes the target from ``h_clean`` without gradient; None: ``server`` itself.
    task_loss : callable, optional
        :math:`L_{task}`: called on ``server(h_noisy)``, returns a scalar added to the loss (None: no task term;
        the caller may add its own). Not with ``reduction="none"``.
    reduction : {"mean", "sum", "none"}, default "mean"
        Over the per-token squared distances (``"none"``: their tensor, times lam).

    Returns
    -------
    torch.Tensor
        The loss (a scalar, or per token with ``reduction="none"``).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.pisa import mrp_loss
    >>> server = torch.nn.Linear(4, 4)
    >>> h = torch.randn(2, 3, 4)
    >>> float(mrp_loss(server, h, h, 1.0).detach())   # no noise: nothing to match
    0.0
    """
    check_callable(server, "server")
    check_tensor(h_clean, "h_clean")
    check_tensor(h_noisy, "h_noisy")
    if h_noisy.shape != h_clean.shape:
        raise ValueError(f"`h_noisy` must have the shape of `h_clean`, {tuple(h_clean.shape)}; got "
                         f"{tuple(h_noisy.shape)}")
    if h_noisy.dtype != h_clean.dtype or h_noisy.device != h_clean.device:
        raise ValueError(f"`h_noisy` must have the dtype and device of `h_clean` ({h_clean.dtype}, "
                         f"{h_clean.device}); got {h_noisy.dtype}, {h_noisy.device}")
    lam = check_real(lam, "lam", low=0.0)
    check_callable(teacher, "teacher", optional=True)
    check_callable(task_loss, "task_loss", optional=True)
    reduction = check_reduction(reduction)
    if reduction == "none" and task_loss is not None:
        raise ValueError("`task_loss` needs a scalar loss: use reduction='mean' or 'sum'")
    out = server(h_noisy)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"`server` must return a tensor; got {type(out).__name__}")
    with torch.no_grad():
        target = (server if teacher is None else teacher)(h_clean)
    if not isinstance(target, torch.Tensor) or target.shape != out.shape:
        raise ValueError(f"`teacher` must return a tensor of the server's output shape {tuple(out.shape)}")
    dist = ((out - target.detach()) ** 2).sum(-1) if out.ndim else (out - target.detach()) ** 2
    loss = lam * reduce_loss(dist, reduction)
    if task_loss is not None:
        task = task_loss(out)
        if not isinstance(task, torch.Tensor) or task.numel() != 1:
            raise TypeError("`task_loss` must return a scalar tensor")
        loss = loss + task.reshape(())
    if not bool(torch.isfinite(loss.detach()).all()):
        raise ValueError(f"the loss is not finite: `lam` = {lam!r} is too large for {loss.dtype}, or the server's "
                         "output or the task loss overflows")
    return loss


def _seeded_init(rng: Any):
    """A context in which module initialisation draws from ``rng`` (None: torch's global state); the global
    state is restored afterwards."""
    import contextlib

    if rng is None:
        return contextlib.nullcontext()
    from numtk.torch._common import torch_generator

    seed = int(torch.randint(0, 2**62, (1,), generator=torch_generator(rng)))

    @contextlib.contextmanager
    def ctx():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield

    return ctx()


@constraints(dim="count", rng="rng")
class DualStreamFusion(torch.nn.Module):
    r"""Gated fusion of the server's (noisy-input) output with a local clean stream (DSC, reconstructed).

    .. math:: y = g \odot a + (1 - g) \odot b, \qquad g = \sigma(W [a; b] + c),

    with :math:`a` the server's output on the released representation and :math:`b` a stream computed on the
    client from clean features (never sent). The gate's form is the reconstruction's choice.

    Parameters
    ----------
    dim : int
        Width of :math:`a`, :math:`b` and :math:`y` (the last axis).
    rng : None, int, numpy.random.Generator or torch.Generator
        Initialises :math:`W, c` (PyTorch's default Linear initialisation; None: the global random state).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.pisa import DualStreamFusion
    >>> fuse = DualStreamFusion(4, rng=0)
    >>> a, b = torch.randn(2, 4), torch.randn(2, 4)
    >>> y = fuse(a, b)
    >>> g = torch.sigmoid(fuse.gate(torch.cat([a, b], dim=-1)))
    >>> torch.allclose(y, g * a + (1 - g) * b)
    True
    """

    def __init__(self, dim: int, *, rng: Any = None):
        super().__init__()
        self.dim = check_int(dim, "dim", minimum=1, maximum=2**20)
        with _seeded_init(rng):
            self.gate = torch.nn.Linear(2 * self.dim, self.dim)

    @constraints(a="tensor", b="tensor")
    def forward(self, a: "torch.Tensor", b: "torch.Tensor") -> "torch.Tensor":
        """(..., dim), (..., dim) -> (..., dim)."""
        check_tensor(a, "a")
        check_tensor(b, "b")
        if a.ndim == 0 or a.shape[-1] != self.dim:
            raise ValueError(f"`a` must have {self.dim} features in its last axis; got shape {tuple(a.shape)}")
        if b.shape != a.shape:
            raise ValueError(f"`b` must have the shape of `a`, {tuple(a.shape)}; got {tuple(b.shape)}")
        w = self.gate.weight
        for name, t in (("a", a), ("b", b)):
            if t.dtype != w.dtype:
                raise TypeError(f"`{name}` must have the dtype of the module's parameters, {w.dtype}; got {t.dtype}")
            if t.device != w.device:
                raise ValueError(f"`{name}` must be on the device of the module's parameters, {w.device}; got "
                                 f"{t.device}")
        g = torch.sigmoid(self.gate(torch.cat([a, b], dim=-1)))
        return g * a + (1.0 - g) * b


def _grad_parts(g: Any, name: str) -> tuple[list, bool]:
    """``g`` as a list of tensors (or None entries) and whether it was a single tensor."""
    if isinstance(g, torch.Tensor):
        check_tensor(g, name)
        return [g], True
    if not isinstance(g, (list, tuple)) or not g:
        raise TypeError(f"`{name}` must be a tensor or a non-empty list of tensors (None entries allowed); got "
                        f"{type(g).__name__}")
    for i, t in enumerate(g):
        if t is not None:
            check_tensor(t, f"{name}[{i}]")
    return list(g), False


@constraints(g_task=("tensor", "option"), g_comp=("tensor", "option"))
def rectify_gradients(g_task: Any, g_comp: Any) -> Any:
    r"""Rectify a task gradient against a compensation gradient (UGR as a PCGrad projection, reconstructed).

    With :math:`g_1` the task gradient and :math:`g_2` the compensation gradient of the local trainable
    parameters, flattened and concatenated over the parameters:

    .. math:: g_1 \leftarrow g_1 - \frac{g_1 \cdot g_2}{\lVert g_2 \rVert^2}\, g_2
              \quad\text{if } g_1 \cdot g_2 < 0 \text{ (else unchanged)},

    so that the result never opposes :math:`g_2` (:math:`g_1' \cdot g_2 = 0`). PCGrad (Yu et al. 2020) is the
    reconstruction's reading of "utility-aware gradient rectification".

    Parameters
    ----------
    g_task, g_comp : torch.Tensor or list of torch.Tensor
        The two gradients, each a tensor or a list of per-parameter tensors (None entries count as zeros), of
        matching shapes.

    Returns
    -------
    torch.Tensor or list
        The rectified task gradient, in ``g_task``'s structure (a None entry stays None where the correction
        does not touch it).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.pisa import rectify_gradients
    >>> rectify_gradients(torch.tensor([1.0, -1.0]), torch.tensor([0.0, 1.0]))
    tensor([1., 0.])
    """
    p1, single1 = _grad_parts(g_task, "g_task")
    p2, single2 = _grad_parts(g_comp, "g_comp")
    if len(p1) != len(p2) or single1 != single2:
        raise ValueError(f"`g_comp` must have the structure of `g_task` ({len(p1)} "
                         f"{'tensor' if single1 else 'entries'}); got {len(p2)}")
    ref = next((t for t in p1 + p2 if t is not None), None)
    for i, (a, b) in enumerate(zip(p1, p2)):
        if a is not None and b is not None:
            where = "`g_comp`" if single2 else f"`g_comp[{i}]`"
            task = "`g_task`" if single1 else f"`g_task[{i}]`"
            if a.shape != b.shape:
                raise ValueError(f"{where} must have the shape of {task}, {tuple(a.shape)}; got {tuple(b.shape)}")
            if a.device != b.device or a.dtype != b.dtype:
                raise ValueError(f"{where} must have the dtype and device of {task}, {a.dtype} on {a.device}; got "
                                 f"{b.dtype} on {b.device}")
    if ref is None:
        return g_task
    acc = torch.float64 if ref.dtype == torch.float64 else torch.float32
    dot = sum((a.to(acc) * b.to(acc)).sum() for a, b in zip(p1, p2) if a is not None and b is not None)
    nrm = sum((b.to(acc) ** 2).sum() for b in p2 if b is not None)
    dot = torch.as_tensor(dot, dtype=acc)
    nrm = torch.as_tensor(nrm, dtype=acc)
    if not bool(dot < 0) or not bool(nrm > 0):
        return g_task
    coef = dot / nrm
    out = []
    for a, b in zip(p1, p2):
        if b is None:
            out.append(a)
        elif a is None:
            out.append((-coef * b.to(acc)).to(b.dtype))
        else:
            out.append((a.to(acc) - coef * b.to(acc)).to(a.dtype))
    return out[0] if single1 else (type(g_task)(out) if isinstance(g_task, tuple) else out)
