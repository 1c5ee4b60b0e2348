"""DyCo-CL: contrastive pre-training of an I/Q-signal encoder for few-shot modulation recognition.

"Geometry-Aware Contrastive Learning for Few-Shot Automatic Modulation Recognition" (DyCo-CL, arXiv
2605.26600) publishes no code; every piece below the abstract is **reconstructed** from the abstract and the
prior work it names (Miyato et al.'s virtual adversarial training, Swin's shifted windows, Swami and Sadler's
cumulant features). The open choices are parameters:

- :func:`virtual_adversarial_perturbation`: the direction that most changes the embedding, found by power
  iteration with the clean branch detached (divergence, power steps, absolute or relative radius);
- :func:`consistency_loss`: the semantic-consistency term between the clean and the perturbed embedding;
- :class:`WindowAttention1D` and :class:`SignalSwin1D`: 1-D shifted-window self-attention and a small Swin
  encoder of (B, 2, L) I/Q windows;
- :func:`cumulants` and :func:`expert_features`: higher-order cumulants and amplitude, phase, frequency and
  spectral-line statistics (physical priors), and :class:`HybridFusion`, their gated fusion with the encoder;
- :class:`DyCoCL`: the objective (NT-Xent between an augmented view and an adversarially perturbed augmented
  view, plus the consistency term);
- :func:`prototype_accuracy`: few-shot evaluation by cosine to class means.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real, check_size
from numtk.torch._common import check_callable as _check_callable
from numtk.torch._common import check_like
from numtk.torch._common import (check_reduction, check_same_device, check_tensor, reduce_loss, torch,
                                 torch_generator)
from numtk.torch._contrastive import info_nce

__all__ = ["virtual_adversarial_perturbation", "consistency_loss", "WindowAttention1D", "SignalSwin1D",
           "cumulants", "expert_features", "EXPERT_FEATURES", "HybridFusion", "DyCoCL", "prototype_accuracy"]

_DIVERGENCES = ("cosine", "kl", "squared")
#: the largest width (channels, features, heads) a module accepts, its largest window, and input length
_MAX_WIDTH = 2**20
_MAX_WINDOW = 2**16
_MAX_LENGTH = 2**24
#: the most power-iteration steps
_MAX_POWER = 10_000
_CONSISTENCY = ("cosine", "kl", "squared")

#: the columns of :func:`expert_features`, in order
EXPERT_FEATURES = (
    "|C20|/C21", "|C40|/C21^2", "|C41|/C21^2", "C42/C21^2", "|C60|/C21^3", "|C63|/C21^3",
    "amplitude std/mean", "amplitude kurtosis", "phase std", "phase kurtosis",
    "frequency std", "frequency kurtosis", "peak |FFT(y^2)|", "peak |FFT(y^4)|",
)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _seeded(rng: Any):
    """Initialise parameters inside the block from ``rng`` (None: torch's global state, unchanged use);
    torch's global random state is restored afterwards."""
    if rng is None:
        yield
        return
    gen = torch_generator(rng)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _check_windows(x: Any, name: str = "x") -> None:
    check_tensor(x, name, ndim=3)
    if x.shape[1] != 2:
        raise ValueError(f"`{name}` must have shape (B, 2, L) (I and Q rows); got {tuple(x.shape)}")


def _check_like_module(t: "torch.Tensor", name: str, module: "torch.nn.Module") -> None:
    """``t`` has the dtype and device of ``module``'s parameters (messages name it)."""
    p = next(module.parameters(), None)
    if p is None:
        return
    if t.dtype != p.dtype:
        raise TypeError(f"`{name}` must have the dtype of the module's parameters, {p.dtype}; got {t.dtype} "
                        "(convert one of them with .to())")
    if t.device != p.device:
        raise ValueError(f"`{name}` must be on the device of the module's parameters, {p.device}; got {t.device}")


def _per_sample_normalize(d: "torch.Tensor") -> "torch.Tensor":
    """Each item (row of the flattened batch) scaled to unit Euclidean norm; zero items stay zero."""
    flat = d.reshape(d.shape[0], -1)
    norm = flat.norm(dim=1).clamp_min(torch.finfo(d.dtype).tiny)
    return (flat / norm[:, None]).reshape(d.shape)


def _divergence(z_clean: "torch.Tensor", z: "torch.Tensor", kind: str, tau: float) -> "torch.Tensor":
    """Per-item divergence D(z_clean, z) of (B, ...) outputs, (B,); z_clean is taken as given (the callers
    detach it)."""
    a, b = z_clean.reshape(z_clean.shape[0], -1), z.reshape(z.shape[0], -1)
    if kind == "cosine":
        return 1.0 - torch.nn.functional.cosine_similarity(a, b, dim=1, eps=torch.finfo(a.dtype).tiny)
    if kind == "squared":
        return ((b - a) ** 2).sum(1)
    logp = torch.log_softmax(a / tau, dim=1)
    logq = torch.log_softmax(b / tau, dim=1)
    return (logp.exp() * (logp - logq)).sum(1)


# --------------------------------------------------------------------------------------------------
# virtual adversarial perturbation and consistency
# --------------------------------------------------------------------------------------------------
@constraints(model="callable", x="tensor", eps="real>=0", xi="real>0", n_power="int>=0", divergence="option",
             relative="bool", tau="real>0", rng="rng")
def virtual_adversarial_perturbation(model: Callable, x: "torch.Tensor", *, eps: float = 0.05,
                                     xi: float | None = None,
                                     n_power: int = 1, divergence: str = "cosine", relative: bool = True,
                                     tau: float = 1.0, rng: Any = None) -> "torch.Tensor":
    r"""The virtual adversarial perturbation of a batch: the direction that most changes ``model``'s output
    (reconstructed for DyCo-CL from Miyato et al.'s virtual adversarial training).

    With :math:`z_0 = \mathrm{sg}(g(x))` (computed once under ``no_grad``: the clean branch is detached),
    :math:`d \sim N(0, I)` normalised per item, ``n_power`` times

    .. math:: d \leftarrow \frac{\nabla_r D(z_0, g(x + r))|_{r = h d}}{\|\cdot\|} \quad \text{(per item)},

    with the finite-difference step :math:`h = \xi \|x\|` (``relative``) or :math:`h = \xi`, and
    :math:`r_{adv} = \varepsilon\, d\, \|x\|` (``relative``; the norm of each item) or
    :math:`\varepsilon\, d`. For small :math:`\xi` each step is a power-iteration step on the Hessian of
    :math:`D(z_0, g(x + \cdot))` at 0 (for the squared distance and a linear map :math:`g(x) = Wx`, on
    :math:`W^\top W`: ``d`` converges to the top right singular vector of W).

    Parameters
    ----------
    model : callable
        The network g (an encoder and projector): (B, ...) -> (B, ...) outputs; items must not interact (no
        batch statistics in training mode), as each item's direction is the gradient of the summed divergence.
    x : torch.Tensor, shape (B, ...)
        The inputs, floating point; B >= 1.
    eps : float, default 0.05
        The radius; 0 returns zeros without calling the model.
    xi : float, optional
        The finite-difference step of the power iteration, relative to each item's Euclidean norm with
        ``relative`` (like the radius), absolute otherwise. Default: :math:`\sqrt{\epsilon}` of the dtype
        relative to each item's norm (3.5e-4 in float32, 1.5e-8 in float64), whatever ``relative`` says (an
        item of norm 0 takes :math:`\sqrt{\epsilon}` absolute). Miyato et al.'s (and the spec's) 1e-6 is an
        absolute step for inputs of norm about 1: in float32 a step far below the inputs' scale loses the
        difference to rounding (``x + h d == x``), which gives a wrong direction or none; an item whose
        gradient comes out all zeros raises a ValueError.
    n_power : int, default 1
        Power-iteration steps; each costs one forward and one backward pass of ``model``. 0 gives a random
        direction of radius ``eps``.
    divergence : {'cosine', 'kl', 'squared'}, default 'cosine'
        D per item: 1 - cosine of the flattened outputs, KL(softmax(z_0 / tau) || softmax(z / tau)), or the
        squared Euclidean distance.
    relative : bool, default True
        Scale the radius by each item's Euclidean norm (the windows of :func:`numtk.datasets.rml2016_like`
        are L1-normalised, so their scale varies with the signal's shape).
    tau : float, default 1.0
        Temperature of the ``'kl'`` divergence (ignored otherwise).
    rng : None, int, numpy.random.Generator or torch.Generator
        Draws the initial direction.

    Returns
    -------
    torch.Tensor
        ``r_adv``, the shape, dtype and device of ``x``, detached (no graph). The model's parameters' ``.grad``
        are left as they were (the gradients are taken with :func:`torch.autograd.grad` with respect to the
        perturbation only).

    Notes
    -----
    Cost: ``n_power + 1`` extra passes (one clean forward, ``n_power`` forward and backward passes). The
    clean branch must be detached: differentiating through :math:`g(x)` as well would add the gradient of
    the target branch and the iteration would no longer be a power iteration on the Hessian.

    References
    ----------
    .. [1] T. Miyato, S. Maeda, M. Koyama, S. Ishii, "Virtual adversarial training: a regularization method
           for supervised and semi-supervised learning", IEEE TPAMI 41(8), 2019.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import virtual_adversarial_perturbation
    >>> W = torch.tensor([[3.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    >>> x = torch.tensor([[1.0, 1.0]], dtype=torch.float64)
    >>> r = virtual_adversarial_perturbation(lambda v: v @ W.T, x, eps=1.0, n_power=10, divergence="squared",
    ...                                      relative=False, rng=0)
    >>> r.abs().round(decimals=6)          # the top right singular vector of W, up to sign
    tensor([[1., 0.]], dtype=torch.float64)
    """
    model = _check_callable(model, "model")
    check_tensor(x, "x")
    if x.ndim < 1 or x.shape[0] < 1:
        raise ValueError(f"`x` must be a batch (B, ...) with B >= 1; got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"`x` must be a floating-point tensor; got {x.dtype}")
    eps = check_real(eps, "eps", low=0.0)
    xi = None if xi is None else check_real(xi, "xi", low=0.0, low_open=True)
    n_power = check_int(n_power, "n_power", minimum=0, maximum=_MAX_POWER)
    divergence = check_option(divergence, "divergence", _DIVERGENCES)
    relative = check_bool(relative, "relative")
    tau = check_real(tau, "tau", low=0.0, low_open=True)
    gen = torch_generator(rng, device=x.device)
    return _perturbation(model, x, eps, xi, n_power, divergence, relative, tau, gen)[0]


def _perturbation(model, x, eps, xi, n_power, divergence, relative, tau, gen) -> tuple:
    """(r_adv, the clean output z0 or None where it was not computed); arguments checked by the caller
    (``xi`` None: sqrt(eps) of the dtype relative to each item's norm)."""
    x = x.detach()
    z0 = None
    if eps == 0.0:
        return torch.zeros_like(x), z0
    bshape = (-1,) + (1,) * (x.ndim - 1)
    norms = x.reshape(x.shape[0], -1).norm(dim=1)
    d = _per_sample_normalize(torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype))
    if n_power:
        if xi is None:
            step = math.sqrt(torch.finfo(x.dtype).eps) * torch.where(norms > 0, norms, torch.ones_like(norms))
        elif xi > torch.finfo(x.dtype).max:
            raise ValueError(f"`xi` = {xi!r} overflows {x.dtype}")
        elif relative:
            step = xi * norms
        else:
            step = torch.full_like(norms, xi)
        if not bool(torch.isfinite(step).all()):
            raise ValueError(f"the finite-difference step `xi` = {xi!r} times the items' norms overflows {x.dtype}")
        step = step.reshape(bshape)
        # items whose perturbation is zero anyway (relative radius of a zero item) need no direction
        live = (norms > 0) if relative else torch.ones_like(norms, dtype=torch.bool)
        with torch.no_grad():
            z0 = model(x)
        if not isinstance(z0, torch.Tensor) or z0.ndim < 1 or z0.shape[0] != x.shape[0]:
            raise ValueError("`model` must return a tensor with the batch dimension of `x` first")
        z0 = z0.detach()
        for _ in range(n_power):
            r = (step * d).requires_grad_(True)
            with torch.enable_grad():
                dist = _divergence(z0, model(x + r), divergence, tau).sum()
            grad = torch.autograd.grad(dist, r, allow_unused=True)[0] if dist.requires_grad else None
            if grad is None:
                raise ValueError("`model`'s output does not depend on its input (no gradient flows from it to "
                                 "`x`): the perturbation needs a model differentiable in its input")
            grad = grad.detach()
            zero = live & (grad.reshape(grad.shape[0], -1) == 0).all(dim=1)
            if bool(zero.any()):
                i = int(zero.nonzero()[0, 0])
                why = (f", the KL's temperature `tau` = {tau!r} flattens the softmax" if divergence == "kl" else "")
                raise ValueError(f"the gradient of the divergence is zero for item {i} of `x`: `xi` = {xi!r} gives a "
                                 f"step that {x.dtype} rounds away for this item's scale (use xi=None, the default)"
                                 f"{why}, or `model`'s output does not depend on the item")
            d = _per_sample_normalize(grad)
    scale = eps * norms.reshape(bshape) if relative else eps
    r = (scale * d).detach()
    if not bool(torch.isfinite(r).all()):
        raise ValueError(f"the perturbation is not finite in {x.dtype}: `eps` = {eps!r} or `xi` = {xi!r} "
                         f"(with `divergence` = {divergence!r}, `tau` = {tau!r}) overflows for this `x` and `model`")
    return r, z0


@constraints(z_clean="tensor", z_adv="tensor", kind="option", reduction="option", tau="real>0")
def consistency_loss(z_clean: "torch.Tensor", z_adv: "torch.Tensor", kind: str = "cosine", *,
                     reduction: str = "mean", tau: float = 1.0) -> "torch.Tensor":
    r"""The semantic-consistency loss between the clean and the perturbed embedding (reconstructed).

    ``'cosine'``: :math:`1 - \cos(\mathrm{sg}(z_{clean}), z_{adv})` per item; ``'kl'``:
    :math:`KL(\mathrm{softmax}(\mathrm{sg}(z_{clean})/\tau) \,\|\, \mathrm{softmax}(z_{adv}/\tau))`;
    ``'squared'``: :math:`\|z_{adv} - \mathrm{sg}(z_{clean})\|^2`. The clean embedding is the target: no
    gradient flows into it.

    Parameters
    ----------
    z_clean, z_adv : torch.Tensor, shape (B, D)
        Embeddings of the clean and the perturbed views, same shape, dtype and device; B, D >= 1.
    kind : {'cosine', 'kl', 'squared'}, default 'cosine'
    reduction : {'mean', 'sum', 'none'}, default 'mean'
    tau : float, default 1.0
        Temperature of ``'kl'``.

    Returns
    -------
    torch.Tensor
        0-D, or (B,) for ``reduction='none'``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import consistency_loss
    >>> consistency_loss(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[0.0, 1.0], [0.0, 1.0]]),
    ...                  reduction="none")
    tensor([1., 0.])
    """
    check_tensor(z_clean, "z_clean", ndim=2)
    check_tensor(z_adv, "z_adv", ndim=2)
    if z_clean.shape[0] < 1 or z_clean.shape[1] < 1:
        raise ValueError(f"`z_clean` must hold at least one embedding of at least one dimension (B, D >= 1); "
                         f"got shape {tuple(z_clean.shape)}")
    check_like(z_adv, z_clean, "z_adv", "z_clean")
    kind = check_option(kind, "kind", _CONSISTENCY)
    check_reduction(reduction)
    tau = check_real(tau, "tau", low=0.0, low_open=True)
    per = _divergence(z_clean.detach(), z_adv, kind, tau)
    if kind == "kl" and per.numel() and not bool(torch.isfinite(per.detach()).all()):
        raise ValueError(f"the KL consistency overflows in {z_adv.dtype} with `tau` = {tau!r}")
    return reduce_loss(per, reduction)


# --------------------------------------------------------------------------------------------------
# 1-D shifted-window attention and the signal Swin
# --------------------------------------------------------------------------------------------------
@constraints(dim="count", num_heads="count", window="count", shift="int>=0", mask="bool", qkv_bias="bool",
             rng="rng")
class WindowAttention1D(torch.nn.Module):
    r"""Multi-head self-attention inside fixed windows of a token sequence, with an optional cyclic shift
    (the 1-D form of Swin's (shifted) window attention; reconstructed for DyCo-CL's backbone).

    For ``x`` of shape (B, N, dim), N a multiple of ``window``: roll the token axis by ``-shift``, split it into
    N / window windows, attend inside each window with a learned relative-position bias (a table of
    ``2 * window - 1`` entries per head, indexed by i - j), and roll back by ``+shift``. With ``shift > 0`` the
    last window holds tokens that wrapped around the end; with ``mask`` the pairs between its two parts are
    blocked, so that in the input's coordinates attention runs inside the segments
    ``[shift, shift + w), [shift + w, shift + 2w), ..., [N - w + shift, N)`` and ``[0, shift)``.

    Parameters
    ----------
    dim : int
        Channels; a multiple of ``num_heads``.
    num_heads : int
    window : int, default 8
        Tokens per window.
    shift : int, default 0
        The cyclic shift, in [0, window); Swin alternates 0 and window // 2.
    mask : bool, default True
        Block the pairs that wrapped around (``False``: plain cyclic windows).
    qkv_bias : bool, default True
    rng : None, int, numpy.random.Generator or torch.Generator
        Initialises the parameters (None: torch's global random state); torch's global state is unchanged.

    References
    ----------
    .. [1] Z. Liu, Y. Lin, Y. Cao, H. Hu, Y. Wei, Z. Zhang, S. Lin, B. Guo, "Swin Transformer: hierarchical
           vision transformer using shifted windows", ICCV 2021.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import WindowAttention1D
    >>> attn = WindowAttention1D(16, 2, window=4, shift=2, rng=0)
    >>> attn(torch.randn(3, 8, 16)).shape
    torch.Size([3, 8, 16])
    """

    def __init__(self, dim: int, num_heads: int, window: int = 8, shift: int = 0, *, mask: bool = True,
                 qkv_bias: bool = True, rng: Any = None):
        super().__init__()
        dim = check_int(dim, "dim", minimum=1, maximum=_MAX_WIDTH)
        num_heads = check_int(num_heads, "num_heads", minimum=1, maximum=_MAX_WIDTH)
        window = check_int(window, "window", minimum=1, maximum=_MAX_WINDOW)
        shift = check_int(shift, "shift", minimum=0)
        check_size(4 * dim * dim + 4 * dim, 4.0, "dim")
        if dim % num_heads:
            raise ValueError(f"`dim` must be a multiple of `num_heads` ({num_heads}); got {dim}")
        if shift >= window:
            raise ValueError(f"`shift` must be < `window` ({window}); got {shift}")
        self.dim, self.num_heads, self.window, self.shift = dim, num_heads, window, shift
        self.mask = check_bool(mask, "mask")
        qkv_bias = check_bool(qkv_bias, "qkv_bias")
        self.scale = (dim // num_heads) ** -0.5
        with _seeded(rng):
            self.qkv = torch.nn.Linear(dim, 3 * dim, bias=qkv_bias)
            self.proj = torch.nn.Linear(dim, dim)
            self.relative_bias = torch.nn.Parameter(torch.zeros(2 * window - 1, num_heads))
            torch.nn.init.trunc_normal_(self.relative_bias, std=0.02)
        idx = torch.arange(window)
        self.register_buffer("relative_index", idx[:, None] - idx[None, :] + window - 1, persistent=False)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_heads={self.num_heads}, window={self.window}, shift={self.shift}, "
                f"mask={self.mask}")

    def _attention_mask(self, n: int, *, device: Any = None, dtype: Any = None) -> "torch.Tensor":
        """The additive mask (n // window, window, window) of the rolled windows: 0 where a pair may attend,
        -inf where it wrapped around (all zeros without shift or ``mask``)."""
        w, s = self.window, self.shift
        dtype = dtype or torch.get_default_dtype()
        out = torch.zeros(n // w, w, w, device=device, dtype=dtype)
        if s and self.mask:
            label = torch.zeros(n, dtype=torch.long, device=device)
            label[n - w:n - s] = 1
            label[n - s:] = 2
            label = label.reshape(n // w, w)
            out.masked_fill_(label[:, :, None] != label[:, None, :], float("-inf"))
        return out

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """(B, N, dim) -> (B, N, dim); N a multiple of ``window``."""
        check_tensor(x, "x", ndim=3)
        _check_like_module(x, "x", self)
        B, N, C = x.shape
        if C != self.dim:
            raise ValueError(f"`x` must have {self.dim} channels (last axis); got {C}")
        w, h = self.window, self.num_heads
        if N % w or N == 0:
            raise ValueError(f"`x` must have a positive multiple of `window` ({w}) tokens; got {N}")
        if self.shift:
            x = torch.roll(x, -self.shift, dims=1)
        nw = N // w
        qkv = self.qkv(x).reshape(B, nw, w, 3, h, C // h).permute(3, 0, 1, 4, 2, 5)   # 3, B, nw, h, w, dh
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = (q * self.scale) @ k.transpose(-2, -1)                              # B, nw, h, w, w
        bias = self.relative_bias[self.relative_index].permute(2, 0, 1)               # h, w, w
        scores = scores + bias.to(scores.dtype)
        if self.shift and self.mask:
            scores = scores + self._attention_mask(N, device=x.device, dtype=scores.dtype)[None, :, None]
        out = torch.softmax(scores, dim=-1) @ v                                      # B, nw, h, w, dh
        out = self.proj(out.permute(0, 1, 3, 2, 4).reshape(B, N, C))
        if self.shift:
            out = torch.roll(out, self.shift, dims=1)
        return out


class _SwinBlock(torch.nn.Module):
    """Pre-norm block: x + attn(LN(x)), then x + MLP(LN(x)) (GELU, hidden = mlp_ratio * dim)."""

    def __init__(self, dim: int, heads: int, window: int, shift: int, mlp_ratio: float):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.attn = WindowAttention1D(dim, heads, window, shift)
        self.norm2 = torch.nn.LayerNorm(dim)
        hidden = max(1, int(round(mlp_ratio * dim)))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _PatchMerge(torch.nn.Module):
    """Halve the tokens: concatenate neighbours (2t, 2t + 1), LayerNorm, Linear(2 dim -> out)."""

    def __init__(self, dim: int, out: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(2 * dim)
        self.reduce = torch.nn.Linear(2 * dim, out, bias=False)

    def forward(self, x):
        B, N, C = x.shape
        return self.reduce(self.norm(x.reshape(B, N // 2, 2 * C)))


@constraints(in_ch="count", length="count", patch="count", dims="any", depths="any", heads="any", window="count",
             mlp_ratio="real>0", rng="rng")
class SignalSwin1D(torch.nn.Module):
    r"""A small 1-D Swin transformer for I/Q windows: (B, in_ch, length) -> (B, dims[-1]) (reconstructed
    backbone of DyCo-CL).

    Patch embedding (a strided Conv1d of kernel ``patch``: length / patch tokens), then per stage ``depths[s]``
    pre-norm blocks of :class:`WindowAttention1D` and an MLP whose shifts alternate 0 and window // 2, with
    patch merging (neighbour pairs concatenated, LayerNorm, Linear to the next width) between stages; a final
    LayerNorm and the mean over tokens give the embedding. Where a stage has no more tokens than ``window``,
    its window is its token count and it does not shift (as Swin). Attention costs O(N w dim) per layer.

    Parameters
    ----------
    in_ch : int, default 2
        Input channels (I and Q).
    length : int, default 128
        Samples per window; a multiple of ``patch``.
    patch : int, default 4
    dims, depths, heads : sequences of int, default (64, 128), (2, 2), (4, 8)
        Width, number of blocks and attention heads per stage (same length; ``dims[s]`` a multiple of
        ``heads[s]``).
    window : int, default 8
        Tokens per attention window; every stage's token count must be a multiple of its window, and of 2
        before a merge.
    mlp_ratio : float, default 2.0
    rng : None, int, numpy.random.Generator or torch.Generator
        Initialises the parameters (None: torch's global random state); torch's global state is unchanged.

    Attributes
    ----------
    embed_dim : int
        ``dims[-1]``, the width of the output.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import SignalSwin1D
    >>> net = SignalSwin1D(dims=(16, 32), depths=(2, 1), heads=(2, 4), rng=0)
    >>> net(torch.randn(5, 2, 128)).shape
    torch.Size([5, 32])
    """

    def __init__(self, in_ch: int = 2, length: int = 128, patch: int = 4, dims: Any = (64, 128),
                 depths: Any = (2, 2), heads: Any = (4, 8), window: int = 8, *, mlp_ratio: float = 2.0,
                 rng: Any = None):
        super().__init__()
        in_ch = check_int(in_ch, "in_ch", minimum=1, maximum=_MAX_WIDTH)
        length = check_int(length, "length", minimum=1, maximum=_MAX_LENGTH)
        patch = check_int(patch, "patch", minimum=1, maximum=_MAX_LENGTH)
        window = check_int(window, "window", minimum=1, maximum=_MAX_WINDOW)
        mlp_ratio = check_real(mlp_ratio, "mlp_ratio", low=0.0, low_open=True)
        seqs = {}
        for name, value in (("dims", dims), ("depths", depths), ("heads", heads)):
            try:
                seqs[name] = tuple(value)
            except TypeError:
                raise TypeError(f"`{name}` must be a sequence of ints; got {type(value).__name__}") from None
            if not seqs[name]:
                raise ValueError(f"`{name}` must not be empty")
            seqs[name] = tuple(check_int(v, name, minimum=1 if name != "depths" else 0,
                                         maximum=_MAX_WIDTH if name != "depths" else 1024) for v in seqs[name])
        dims, depths, heads = seqs["dims"], seqs["depths"], seqs["heads"]
        if not len(dims) == len(depths) == len(heads):
            raise ValueError(f"`dims`, `depths` and `heads` must have one entry per stage; got lengths "
                             f"{len(dims)}, {len(depths)}, {len(heads)}")
        if length % patch:
            raise ValueError(f"`length` must be a multiple of `patch` ({patch}); got {length}")
        n = length // patch
        if mlp_ratio * max(dims) > _MAX_WIDTH:
            raise ValueError(f"`mlp_ratio` = {mlp_ratio!r} makes an MLP wider than {_MAX_WIDTH} for `dims` {dims}")
        check_size(sum(d * (in_ch * patch + 2) + b * (4 + 2 * mlp_ratio) * d * d for d, b in zip(dims, depths)),
                   4.0, "dims")
        self.in_ch, self.length, self.patch = in_ch, length, patch
        self.embed_dim = dims[-1]
        with _seeded(rng):
            self.embed = torch.nn.Conv1d(in_ch, dims[0], kernel_size=patch, stride=patch)
            self.stages = torch.nn.ModuleList()
            self.merges = torch.nn.ModuleList()
            for s, (dim, depth, head) in enumerate(zip(dims, depths, heads)):
                if dim % head:
                    raise ValueError(f"`dims` must be multiples of `heads`; stage {s} has {dim} and {head}")
                w = min(window, n)
                if n % w:
                    raise ValueError(f"`window` ({window}) must divide the {n} tokens of stage {s} "
                                     f"(length / patch / 2**stage)")
                shift = w // 2 if n > window else 0
                self.stages.append(torch.nn.Sequential(
                    *[_SwinBlock(dim, head, w, shift if b % 2 else 0, mlp_ratio) for b in range(depth)]))
                if s + 1 < len(dims):
                    if n % 2:
                        raise ValueError(f"patch merging needs an even token count; stage {s} has {n} tokens")
                    self.merges.append(_PatchMerge(dim, dims[s + 1]))
                    n //= 2
            self.norm = torch.nn.LayerNorm(dims[-1])

    @constraints(x="tensor")
    def tokens(self, x: "torch.Tensor") -> "torch.Tensor":
        """The last stage's tokens, (B, N_last, dims[-1]), after the final LayerNorm."""
        check_tensor(x, "x", shape=(None, self.in_ch, self.length))
        _check_like_module(x, "x", self)
        t = self.embed(x).transpose(1, 2)
        for s, stage in enumerate(self.stages):
            t = stage(t)
            if s < len(self.merges):
                t = self.merges[s](t)
        return self.norm(t)

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """(B, in_ch, length) -> (B, dims[-1]): the mean of :meth:`tokens`."""
        return self.tokens(x).mean(1)


# --------------------------------------------------------------------------------------------------
# expert features
# --------------------------------------------------------------------------------------------------
def _complex(iq: "torch.Tensor", name: str = "iq") -> "torch.Tensor":
    check_tensor(iq, name, ndim=3)
    if iq.shape[1] != 2:
        raise ValueError(f"`{name}` must have shape (B, 2, L) (I and Q rows); got {tuple(iq.shape)}")
    if iq.shape[2] < 2:
        raise ValueError(f"`{name}` needs at least 2 samples per window; got {iq.shape[2]}")
    y = torch.complex(iq[:, 0], iq[:, 1])
    return y - y.mean(1, keepdim=True)


def _cumulants(y: "torch.Tensor", normalize: bool) -> dict:
    yc = y.conj()
    y2, a2 = y * y, (y * yc).real
    m20, m21 = y2.mean(1), a2.mean(1)
    m22 = m20.conj()
    m40, m41, m42, m43 = (y2 * y2).mean(1), (y2 * a2).mean(1), (a2 * a2).mean(1), (yc * yc * a2).mean(1)
    m60, m63 = (y2 * y2 * y2).mean(1), (a2 * a2 * a2).mean(1)
    c = {"C20": m20, "C21": m21.to(y.dtype),
         "C40": m40 - 3 * m20 * m20,
         "C41": m41 - 3 * m20 * m21,
         "C42": (m42 - (m20 * m22).real - 2 * m21 * m21).to(y.dtype),
         "C60": m60 - 15 * m40 * m20 + 30 * m20 ** 3,
         "C63": (m63 - 9 * m21 * m42 + 12 * m21 ** 3 - 3 * m20 * m43 - 3 * m22 * m41 + 18 * m20 * m21 * m22)}
    if normalize:
        # a window of zeros has every cumulant 0: keep them 0 rather than 0 / 0
        zero = m21 <= 0
        p = torch.where(zero, torch.ones_like(m21), m21)
        for key, order in (("C20", 1), ("C21", 1), ("C40", 2), ("C41", 2), ("C42", 2), ("C60", 3), ("C63", 3)):
            c[key] = torch.where(zero, torch.zeros_like(c[key]), c[key] / p ** order)
    return c


@constraints(iq="tensor", normalize="bool")
def cumulants(iq: "torch.Tensor", *, normalize: bool = True) -> dict:
    r"""Second-, fourth- and sixth-order cumulants of each complex window y = I + jQ (mean removed).

    With :math:`M_{pq} = E[y^{p-q} \bar y^{q}]` (sample means over the window):
    :math:`C_{20} = M_{20}`, :math:`C_{21} = M_{21}`, :math:`C_{40} = M_{40} - 3M_{20}^2`,
    :math:`C_{41} = M_{41} - 3M_{20}M_{21}`, :math:`C_{42} = M_{42} - |M_{20}|^2 - 2M_{21}^2`,
    :math:`C_{60} = M_{60} - 15M_{40}M_{20} + 30M_{20}^3` and
    :math:`C_{63} = M_{63} - 9M_{21}M_{42} + 12M_{21}^3 - 3M_{20}M_{43} - 3M_{22}M_{41} + 18M_{20}M_{21}M_{22}`
    (the moment-cumulant relations of a zero-mean complex variable).

    Parameters
    ----------
    iq : torch.Tensor, shape (B, 2, L)
        I and Q rows, L >= 2.
    normalize : bool, default True
        Divide the order-2k cumulants by :math:`C_{21}^k` (scale invariant; :math:`C_{21}` becomes 1).

    Returns
    -------
    dict of str to torch.Tensor
        ``'C20', 'C21', 'C40', 'C41', 'C42', 'C60', 'C63'``: complex tensors (B,) (C21 and C42 are real
        valued, stored as complex).

    References
    ----------
    .. [1] A. Swami, B. M. Sadler, "Hierarchical digital modulation classification using cumulants", IEEE
           Transactions on Communications 48(3), 416-429, 2000.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import cumulants
    >>> bpsk = torch.tensor([1.0, -1.0] * 64)
    >>> c = cumulants(torch.stack([bpsk, torch.zeros(128)])[None])
    >>> [round(float(c[k].real), 3) for k in ("C20", "C40", "C42", "C63")]     # Swami and Sadler's table
    [1.0, -2.0, -2.0, 16.0]
    """
    normalize = check_bool(normalize, "normalize")
    return _cumulants(_complex(iq), normalize)


def _std_kurt(v: "torch.Tensor") -> tuple:
    mu = v.mean(1, keepdim=True)
    var = ((v - mu) ** 2).mean(1)
    tiny = torch.finfo(v.dtype).tiny
    kurt = ((v - mu) ** 4).mean(1) / (var * var).clamp_min(tiny)
    return var.sqrt(), kurt


@constraints(iq="tensor")
def expert_features(iq: "torch.Tensor") -> "torch.Tensor":
    r"""Physical features of I/Q windows (the expert priors of DyCo-CL's hybrid fusion; the selection is
    reconstructed): (B, 2, L) -> (B, 14), scale invariant.

    y = I + jQ with its mean removed. Columns (names in :data:`EXPERT_FEATURES`):

    ======  ============================================================================================
    0       :math:`|C_{20}| / C_{21}`
    1       :math:`|C_{40}| / C_{21}^2`
    2       :math:`|C_{41}| / C_{21}^2`
    3       :math:`C_{42} / C_{21}^2` (real, signed)
    4       :math:`|C_{60}| / C_{21}^3`
    5       :math:`|C_{63}| / C_{21}^3`
    6, 7    instantaneous amplitude :math:`|y|`: standard deviation / mean, kurtosis
    8, 9    instantaneous phase :math:`\arg y`: standard deviation, kurtosis
    10, 11  instantaneous frequency :math:`\arg(y_{n+1} \bar y_n)` (radians per sample): std, kurtosis
    12      :math:`\max_k |\mathrm{FFT}(y^2)_k| / \sum_n |y_n|^2` (a spectral line of :math:`y^2`: BPSK-like)
    13      :math:`\max_k |\mathrm{FFT}(y^4)_k| / \sum_n |y_n|^4` (a line of :math:`y^4`: QPSK-like)
    ======  ============================================================================================

    The cumulants are those of :func:`cumulants` (moduli, so that the features do not depend on the carrier
    phase; column 3 is real). A window of zeros gives zeros, not NaN. Not differentiable where y = 0.

    Parameters
    ----------
    iq : torch.Tensor, shape (B, 2, L)
        L >= 2.

    Returns
    -------
    torch.Tensor, shape (B, 14)
        The dtype and device of ``iq``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import expert_features
    >>> qpsk = torch.tensor([[1.0, -1.0, -1.0, 1.0] * 32, [1.0, 1.0, -1.0, -1.0] * 32])
    >>> f = expert_features(qpsk[None])
    >>> f.shape
    torch.Size([1, 14])
    >>> [round(float(v), 3) for v in f[0, :6]]           # |C20|, |C40|, |C41|, C42, |C60|, |C63|
    [0.0, 1.0, 0.0, -1.0, 0.0, 4.0]
    """
    y = _complex(iq)
    c = _cumulants(y, True)
    tiny = torch.finfo(iq.dtype).tiny
    amp = y.abs()
    amp_std, amp_kurt = _std_kurt(amp)
    amp_cv = amp_std / amp.mean(1).clamp_min(tiny)
    ph_std, ph_kurt = _std_kurt(torch.angle(y))
    freq = torch.angle(y[:, 1:] * y[:, :-1].conj())
    fr_std, fr_kurt = _std_kurt(freq)
    p2 = (amp ** 2).sum(1).clamp_min(tiny)
    p4 = (amp ** 4).sum(1).clamp_min(tiny)
    line2 = torch.fft.fft(y * y, dim=1).abs().amax(1) / p2
    line4 = torch.fft.fft((y * y) ** 2, dim=1).abs().amax(1) / p4
    cols = [c["C20"].abs(), c["C40"].abs(), c["C41"].abs(), c["C42"].real, c["C60"].abs(), c["C63"].abs(),
            amp_cv, amp_kurt, ph_std, ph_kurt, fr_std, fr_kurt, line2, line4]
    return torch.stack([v.to(iq.dtype) for v in cols], dim=1)


@constraints(dim="count", feat_dim="count", feature_norm="bool", rng="rng")
class HybridFusion(torch.nn.Module):
    r"""Gated fusion of an encoder's embedding with expert features (reconstructed Hybrid Knowledge Fusion):

    .. math:: h = g \odot h_{enc} + (1 - g) \odot W_f \phi, \qquad g = \sigma(W_g [h_{enc}; \phi]).

    Parameters
    ----------
    dim : int
        Width of the embedding :math:`h_{enc}` (and of the output).
    feat_dim : int
        Number of features :math:`\phi` (14 for :func:`expert_features`).
    feature_norm : bool, default True
        Pass :math:`\phi` through a LayerNorm first (the cumulants span orders of magnitude; a choice of this
        reconstruction).
    rng : None, int, numpy.random.Generator or torch.Generator
        Initialises the parameters (None: torch's global random state); torch's global state is unchanged.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import HybridFusion
    >>> HybridFusion(8, 14, rng=0)(torch.randn(3, 8), torch.randn(3, 14)).shape
    torch.Size([3, 8])
    """

    def __init__(self, dim: int, feat_dim: int, *, feature_norm: bool = True, rng: Any = None):
        super().__init__()
        self.dim = check_int(dim, "dim", minimum=1, maximum=_MAX_WIDTH)
        self.feat_dim = check_int(feat_dim, "feat_dim", minimum=1, maximum=_MAX_WIDTH)
        check_size(self.dim * (2 * self.feat_dim + self.dim + 2), 4.0,
                   "dim" if self.dim >= self.feat_dim else "feat_dim")
        feature_norm = check_bool(feature_norm, "feature_norm")
        with _seeded(rng):
            self.norm = torch.nn.LayerNorm(self.feat_dim) if feature_norm else torch.nn.Identity()
            self.feature = torch.nn.Linear(self.feat_dim, self.dim)
            self.gate = torch.nn.Linear(self.dim + self.feat_dim, self.dim)

    @constraints(h="tensor", phi="tensor")
    def forward(self, h: "torch.Tensor", phi: "torch.Tensor") -> "torch.Tensor":
        """(B, dim), (B, feat_dim) -> (B, dim)."""
        check_tensor(h, "h", shape=(None, self.dim))
        check_tensor(phi, "phi", shape=(None, self.feat_dim))
        if phi.shape[0] != h.shape[0]:
            raise ValueError(f"`phi` must have one row per row of `h` ({h.shape[0]}); got {phi.shape[0]}")
        _check_like_module(h, "h", self)
        _check_like_module(phi, "phi", self)
        phi = self.norm(phi)
        g = torch.sigmoid(self.gate(torch.cat([h, phi], dim=1)))
        return g * h + (1.0 - g) * self.feature(phi)


# --------------------------------------------------------------------------------------------------
# the DyCo-CL objective
# --------------------------------------------------------------------------------------------------
@constraints(encoder="callable", projector="callable", tau="real>0", lam_cons="real>=0", eps="real>=0",
             xi="real>0", n_power="int>=0", divergence="option", relative="bool", consistency="option",
             tau_cons="real>0",
             phase="bool", max_shift="int>=0", cfo="real>=0", noise="real>=0")
class DyCoCL(torch.nn.Module):
    r"""The DyCo-CL pre-training objective (reconstructed from the abstract).

    For a batch x of (B, 2, L) windows, two augmentations :math:`v_1, v_2` (random phase rotation
    :math:`e^{j\varphi}`, circular time shift, small carrier-frequency offset :math:`e^{j 2\pi f_0 n}`, AWGN,
    each a parameter), the virtual adversarial perturbation :math:`r_{adv}` of :math:`v_2` for
    :math:`g = \text{projector} \circ \text{encoder}` (:func:`virtual_adversarial_perturbation`, clean branch
    detached) and

    .. math:: L = L_{NT\text{-}Xent}(g(v_1), g(v_2 + r_{adv})) + \lambda_{cons}\,
              L_{cons}(\mathrm{sg}(g(v_2)), g(v_2 + r_{adv})),

    NT-Xent being :func:`numtk.torch.contrastive.info_nce` with ``symmetric=True, same_view_negatives=True``
    (2B views, each with its partner as positive and the other 2B - 2 as negatives). With ``lam_cons = 0``
    and ``eps = 0`` it is SimCLR's loss (no extra passes).

    Parameters
    ----------
    encoder : callable
        (B, 2, L) -> (B, D); an nn.Module's parameters become this module's.
    projector : callable
        (B, D) -> (B, P), e.g. a small MLP (``torch.nn.Identity()`` for none).
    tau : float, default 0.1
        NT-Xent temperature.
    lam_cons : float, default 1.0
        Weight of the consistency term.
    eps : float, default 0.05
        Radius of the adversarial perturbation (relative to each window's norm with ``relative``).
    xi, n_power, divergence, relative
        Of :func:`virtual_adversarial_perturbation` (defaults None: the relative step
        :math:`\sqrt{\epsilon}` of the dtype, 1, ``'cosine'``, True).
    consistency : {'cosine', 'kl', 'squared'}, default 'cosine'
        The kind of :func:`consistency_loss`.
    tau_cons : float, default 1.0
        Temperature of the ``'kl'`` consistency and of the ``'kl'`` divergence of the perturbation.
    phase : bool, default True
        Rotate each view by a uniform random phase.
    max_shift : int or None, default None
        Circular shift by a uniform integer in [0, max_shift] (None: any of the L positions; 0: none).
    cfo : float, default 0.01
        Frequency offset uniform in [-cfo, cfo] cycles per sample.
    noise : float, default 0.05
        AWGN level (0: none): I and Q each get Gaussian noise of standard deviation
        :math:`\text{noise} \cdot \rho / \sqrt 2`, :math:`\rho^2` the mean of the window's 2L squared
        entries: the complex noise power is :math:`\text{noise}^2 / 2` times the window's complex power
        :math:`2\rho^2`, an SNR of :math:`3 - 20 \log_{10}(\text{noise})` dB (29 dB at 0.05).

    References
    ----------
    .. [1] "Geometry-Aware Contrastive Learning for Few-Shot Automatic Modulation Recognition" (DyCo-CL),
           arXiv 2605.26600.
    .. [2] T. Chen, S. Kornblith, M. Norouzi, G. Hinton, "A simple framework for contrastive learning of
           visual representations" (SimCLR), ICML 2020.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import DyCoCL, SignalSwin1D
    >>> enc = SignalSwin1D(dims=(16, 32), depths=(1, 1), heads=(2, 2), rng=0)
    >>> model = DyCoCL(enc, torch.nn.Linear(32, 16))
    >>> loss = model.loss(torch.randn(8, 2, 128), rng=0)
    >>> loss.backward()
    >>> bool(torch.isfinite(loss)), enc.embed.weight.grad is not None
    (True, True)
    """

    def __init__(self, encoder: Callable, projector: Callable, *, tau: float = 0.1, lam_cons: float = 1.0,
                 eps: float = 0.05, xi: float | None = None, n_power: int = 1, divergence: str = "cosine",
                 relative: bool = True, consistency: str = "cosine", tau_cons: float = 1.0, phase: bool = True,
                 max_shift: int | None = None, cfo: float = 0.01, noise: float = 0.05):
        super().__init__()
        self.encoder = _check_callable(encoder, "encoder")
        self.projector = _check_callable(projector, "projector")
        self.tau = check_real(tau, "tau", low=0.0, low_open=True)
        self.lam_cons = check_real(lam_cons, "lam_cons", low=0.0)
        self.eps = check_real(eps, "eps", low=0.0)
        self.xi = None if xi is None else check_real(xi, "xi", low=0.0, low_open=True)
        self.n_power = check_int(n_power, "n_power", minimum=0, maximum=_MAX_POWER)
        self.divergence = check_option(divergence, "divergence", _DIVERGENCES)
        self.relative = check_bool(relative, "relative")
        self.consistency = check_option(consistency, "consistency", _CONSISTENCY)
        self.tau_cons = check_real(tau_cons, "tau_cons", low=0.0, low_open=True)
        self.phase = check_bool(phase, "phase")
        self.max_shift = None if max_shift is None else check_int(max_shift, "max_shift", minimum=0,
                                                                   maximum=_MAX_LENGTH)
        self.cfo = check_real(cfo, "cfo", low=0.0, high=0.5)
        self.noise = check_real(noise, "noise", low=0.0)

    @constraints(x="tensor")
    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        """projector(encoder(x)) of (B, 2, L) windows: the embedding the loss compares."""
        _check_windows(x)
        return self.projector(self.encoder(x))

    @constraints(x="tensor", rng="rng")
    def augment(self, x: "torch.Tensor", *, rng: Any = None) -> "torch.Tensor":
        """One random view of each (B, 2, L) window: phase rotation, circular shift, CFO, AWGN (in this
        order, each as the constructor says). Pass one torch.Generator to successive calls to draw
        successive views."""
        _check_windows(x)
        gen = torch_generator(rng, device=x.device)
        B, _, L = x.shape
        kw = dict(generator=gen, device=x.device, dtype=x.dtype)
        n = torch.arange(L, device=x.device, dtype=x.dtype)
        angle = torch.zeros(B, L, device=x.device, dtype=x.dtype)
        if self.phase:
            angle = angle + 2 * math.pi * torch.rand(B, 1, **kw)
        if self.cfo:
            angle = angle + 2 * math.pi * self.cfo * (2 * torch.rand(B, 1, **kw) - 1) * n
        out = x
        if self.max_shift is None or self.max_shift > 0:
            top = L if self.max_shift is None else min(self.max_shift + 1, L)
            shift = torch.randint(0, top, (B,), generator=gen, device=x.device)
            idx = (n.long()[None, :] - shift[:, None]) % L
            out = torch.gather(out, 2, idx[:, None, :].expand(B, 2, L))
        if self.phase or self.cfo:
            c, s = torch.cos(angle), torch.sin(angle)
            i, q = out[:, 0], out[:, 1]
            out = torch.stack([c * i - s * q, s * i + c * q], dim=1)
        if self.noise:
            rms = out.pow(2).mean((1, 2), keepdim=True).sqrt()
            out = out + self.noise * rms / math.sqrt(2.0) * torch.randn(out.shape, **kw)
        return out

    @constraints(x="tensor", rng="rng", parts="bool")
    def loss(self, x: "torch.Tensor", *, rng: Any = None, parts: bool = False) -> Any:
        """The DyCo-CL loss of a batch x (B, 2, L), B >= 2, differentiable in the encoder's and projector's
        parameters. ``rng`` draws the two views (in this order) and then the perturbation's initial direction.
        With ``parts``, returns ``(loss, {'nce': ..., 'cons': ...})`` (detached floats in the dict)."""
        _check_windows(x)
        if x.shape[0] < 2:
            raise ValueError(f"`x` needs a batch of at least 2 windows (negatives are the others); got {x.shape[0]}")
        parts = check_bool(parts, "parts")
        gen = torch_generator(rng, device=x.device)
        v1 = self.augment(x, rng=gen)
        v2 = self.augment(x, rng=gen)
        z_clean = None
        if self.eps > 0:
            # the perturbation's clean forward (no graph) is also the consistency target
            r, z_clean = _perturbation(self, v2, self.eps, self.xi, self.n_power, self.divergence, self.relative,
                                       self.tau_cons, gen)
            v2_adv = v2 + r
        else:
            v2_adv = v2
        z1, z2 = self(v1), self(v2_adv)
        nce = info_nce(z1, z2, tau=self.tau, symmetric=True, same_view_negatives=True)
        cons = torch.zeros((), dtype=nce.dtype, device=nce.device)
        if self.lam_cons > 0:
            if z_clean is None:
                with torch.no_grad():
                    z_clean = self(v2) if self.eps > 0 else z2.detach()
            cons = consistency_loss(z_clean, z2, self.consistency, tau=self.tau_cons)
        total = nce + self.lam_cons * cons
        if not bool(torch.isfinite(total.detach())):
            raise ValueError(f"the loss is not finite for this `x` (tau = {self.tau!r}, noise = {self.noise!r}, "
                             f"eps = {self.eps!r}); check the windows' scale and the settings")
        if parts:
            return total, {"nce": float(nce.detach()), "cons": float(cons.detach())}
        return total


# --------------------------------------------------------------------------------------------------
# few-shot evaluation
# --------------------------------------------------------------------------------------------------
@constraints(train_z="tensor", train_y="tensor", test_z="tensor", test_y="tensor", normalize="bool")
def prototype_accuracy(train_z: "torch.Tensor", train_y: "torch.Tensor", test_z: "torch.Tensor",
                       test_y: "torch.Tensor", *, normalize: bool = True) -> float:
    """Few-shot accuracy of the nearest class prototype by cosine similarity.

    The prototype of each class of ``train_y`` is the mean of its (L2-normalised, with ``normalize``)
    support embeddings; each test embedding gets the class of the prototype of largest cosine similarity
    (ties: the smallest label). Test labels absent from ``train_y`` count as errors.

    Parameters
    ----------
    train_z : torch.Tensor, shape (n, D)
        Support embeddings (1 per class for 1-shot).
    train_y : torch.Tensor, shape (n,)
        Their integer labels.
    test_z : torch.Tensor, shape (m, D)
        Query embeddings, m >= 1.
    test_y : torch.Tensor, shape (m,)
    normalize : bool, default True
        Normalise the support embeddings before averaging.

    Returns
    -------
    float
        The fraction of test embeddings classified correctly.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dyco import prototype_accuracy
    >>> train_z, train_y = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    >>> prototype_accuracy(train_z, train_y, torch.tensor([[2.0, 0.1], [0.3, 1.0], [1.0, 0.2]]),
    ...                    torch.tensor([0, 1, 1]))
    0.6666666666666666
    """
    check_tensor(train_z, "train_z", ndim=2)
    check_tensor(train_y, "train_y", ndim=1, dtype="integer")
    check_tensor(test_z, "test_z", ndim=2)
    check_tensor(test_y, "test_y", ndim=1, dtype="integer")
    if train_z.shape[0] < 1:
        raise ValueError("`train_z` must hold at least one support embedding")
    if test_z.shape[0] < 1:
        raise ValueError("`test_z` must hold at least one query embedding")
    if train_y.shape[0] != train_z.shape[0]:
        raise ValueError(f"`train_y` must hold one label per row of `train_z` ({train_z.shape[0]}); got "
                         f"{train_y.shape[0]}")
    if test_y.shape[0] != test_z.shape[0]:
        raise ValueError(f"`test_y` must hold one label per row of `test_z` ({test_z.shape[0]}); got "
                         f"{test_y.shape[0]}")
    if test_z.shape[1] != train_z.shape[1]:
        raise ValueError(f"`test_z` must have the {train_z.shape[1]} columns of `train_z`; got {test_z.shape[1]}")
    check_same_device(train_z=train_z, train_y=train_y, test_z=test_z, test_y=test_y)
    normalize = check_bool(normalize, "normalize")
    classes, inverse = torch.unique(train_y, return_inverse=True)
    zs = train_z.to(test_z.dtype)
    if normalize:
        zs = torch.nn.functional.normalize(zs, dim=1)
    counts = torch.bincount(inverse, minlength=len(classes)).to(zs.dtype)
    proto = torch.zeros(len(classes), zs.shape[1], dtype=zs.dtype, device=zs.device).index_add_(0, inverse, zs)
    proto = proto / counts[:, None]
    sim = torch.nn.functional.normalize(test_z, dim=1) @ torch.nn.functional.normalize(proto, dim=1).T
    pred = classes[sim.argmax(1)]
    return float((pred == test_y.to(pred.device)).double().mean())
